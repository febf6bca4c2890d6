//! Storage behind two traits, so that handlers never name a backend
//! (DESIGN.md "Storage: embedded by default, real engines to scale out").
//!
//! - [`BlobStore`]: bytes. An upload is `begin` → `write`… → `commit`
//!   (durable, then moved to its final name) or dropped (temp object
//!   removed). The embedded default is [`FsBlobStore`]: files under
//!   `data/tmp/` and `data/blobs/`, named by id, never by a client's name.
//! - [`MetaStore`]: everything else, as one trait per concern (DESIGN.md
//!   "The metadata store by concern"): [`MediaStore`] (one row per stored
//!   object, inserted in one transaction after every blob of the request
//!   is committed: a row only ever names a complete blob),
//!   [`CredentialStore`], [`LeaseStore`], [`UploadStore`], and
//!   [`MetaCore`] for the store as a whole. The embedded default is
//!   [`SqliteMeta`].
//!
//! After a crash the only leftovers possible are temp objects and blobs
//! without a row; [`recover`] removes both at start-up.
//!
//! The shared stores are `PgMeta` (feature `postgres`) and
//! `ObjectBlobStore` (feature `s3`): S3 (`S3BlobStore`), Azure Blob
//! Storage and Google Cloud Storage, one implementation over
//! `object_store`'s traits (`s3.rs`, with each service's client in
//! `azure.rs` and `gcs.rs`). The crate knows nothing of HTTP: the server maps its
//! errors (a full disk, [`MetaError::full`]) to answers.
//!
//! # Layout of the metadata store
//!
//! - `meta/`: the traits, a file per concern with its row types
//!   (`media.rs`, `credentials.rs`, `leases.rs`, `uploads.rs`), and
//!   `MetaStore` with `MetaCore` in `mod.rs`.
//! - `sqlite/` and `postgres/`: a backend each, with the same files: the
//!   connection and `MetaCore` in `mod.rs`, a module per concern that
//!   implements its trait with its statements, and `schema.rs`, which runs
//!   the migrations.
//! - `schema.rs`: the migrations themselves, one list of steps, each with
//!   SQLite's and PostgreSQL's statements side by side.
//! - `list.rs`: the listing's statement, built once for both backends.
//! - `conformance/`: every concern's checks, run on every backend.
//!
//! A new column or method of a concern touches, in this crate, the
//! concern's file in `meta/`, in `sqlite/`, in `postgres/` and in
//! `conformance/`, and `schema.rs` for a new step; outside it, each
//! wrapper (the server's `metered.rs`, the tests' `FailingMeta`), which
//! must forward it: no method has a default, so one that does not fails
//! to compile. A new concern is a new trait in `meta/`, made a supertrait
//! of [`MetaStore`], and a module of its own in each of those directories.

#[cfg(feature = "s3")]
pub mod aws_creds;
#[cfg(feature = "s3")]
mod azure;
#[cfg(any(test, feature = "conformance"))]
#[doc(hidden)]
pub mod conformance;
mod direct;
mod fs;
mod fs_spool;
#[cfg(feature = "s3")]
mod gcs;
pub mod lease;
pub mod list;
mod meta;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "s3")]
mod s3;
#[cfg(feature = "s3")]
mod s3_spool;
mod schema;
pub mod spool;
mod sqlite;

#[cfg(feature = "s3")]
#[cfg(feature = "s3")]
pub use azure::AzureConfig;
pub use direct::{AlignedBatch, AlignedPool, Batches, ALIGN, STAGING_BYTES};
pub use fs::FsBlobStore;
pub use fs_spool::NOTE_MAX;
#[cfg(feature = "s3")]
pub use gcs::GcsConfig;
pub use lease::{Lease, Leases};
pub use list::{ListQuery, Order, TypeFilter};
pub use meta::{
    token_id, CredentialStore, Delivery, Event, EventOf, EventStore, FailedDelivery, LeaseStore,
    MediaRecord, MediaStore, MetaCore, MetaError, MetaStore, NewEvent, NewMedia, NewToken,
    OutboxStats, OverQuota, Pending, Quota, Settle, StoredEvent, StoredUser, Token, UploadRow,
    UploadStore, Usage, UserInfo, UserSet,
};
#[cfg(feature = "postgres")]
pub use postgres::{PgMeta, PG_SCHEMA_VERSION};
pub use s3::{ObjectBlobStore, S3BlobStore, S3Config};
pub use spool::{Spool, SpoolWriter};
pub use sqlite::SqliteMeta;

use bytes::Bytes;
use futures_core::Stream;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed future, so the traits stay object-safe.
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the object store is to answer a presigned download with
/// ([`BlobStore::presign_get`]).
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub content_type: &'a str,
    pub disposition: &'a str,
    pub cache_control: &'a str,
}

/// The bytes of a stored blob, read in chunks.
pub type BlobStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;

/// Where blobs live. No method has a default: a wrapper (the server's
/// metrics, a test's double) must pass each one on, or it silently serves
/// another store's behaviour (a spool it cannot read back, no notes).
pub trait BlobStore: Send + Sync + 'static {
    /// Starts a temporary object that becomes blob `id` on commit. The
    /// upload is already leased (a `pending` row, see [`lease`]); a backend
    /// whose temporary object has a handle of its own (an S3 multipart
    /// upload id) records it with [`Lease::note`] before sending bytes, so
    /// that any node's janitor can abort it.
    /// The writer may keep the lease (it is shared: the upload ends it).
    fn begin<'a>(
        &'a self,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, io::Result<Box<dyn BlobWriter>>>;

    /// Reads `len` bytes of blob `id` from `offset`. The caller knows the
    /// size from the metadata row: no `stat` on the request path.
    fn open<'a>(&'a self, id: &'a str, offset: u64, len: u64)
        -> BoxFut<'a, io::Result<BlobStream>>;

    /// What kind of store this is (`file`, `s3`, `azure`, `gcs`): the
    /// `store` label of metrics that are about it.
    fn kind(&self) -> &'static str;

    /// The local file of blob `id`, or of its variant `variant`, opened
    /// for reading, for a download the server sends with `sendfile(2)`;
    /// `None` where blobs are not local files (the object stores), read with
    /// [`BlobStore::open`]. A missing blob is `NotFound`. No copy, no
    /// blocking-pool hop: the open is a local system call.
    fn open_file<'a>(
        &'a self,
        id: &'a str,
        variant: Option<&'a str>,
    ) -> BoxFut<'a, io::Result<Option<std::fs::File>>>;

    /// A URL that reads blob `id` (or its variant `variant`) for `ttl`
    /// without credentials, whose answer carries `answer`'s headers (S3's
    /// `response-content-type`, `response-content-disposition` and
    /// `response-cache-control`, signed with the rest), for a
    /// download answered with a redirect; `None` where the store has no
    /// such URLs (files) or cannot sign all three headers into one (Azure
    /// and GCS, see the storage chapter): never a URL whose answer would
    /// lose the disposition. Nothing is asked of the store: the URL is
    /// signed here, and a missing blob is the URL's 404.
    fn presign_get<'a>(
        &'a self,
        id: &'a str,
        variant: Option<&'a str>,
        ttl: std::time::Duration,
        answer: Answer<'a>,
    ) -> BoxFut<'a, io::Result<Option<String>>>;

    /// Removes a committed blob and its variants; a missing one is not an
    /// error.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, io::Result<()>>;

    /// Stores variant `name` of blob `id` (a thumbnail, a sized copy:
    /// see [`is_variant_name`]) beside it, atomically and first one wins:
    /// `true` when these bytes became the variant, `false` when it was
    /// there already (another request or node made it meanwhile; its bytes
    /// stay). A variant lives and goes with its blob: [`BlobStore::delete`]
    /// and [`BlobStore::abort`] of `id` remove every variant of `id`, so
    /// that a deletion's lease covers them after a crash too.
    fn variant_put<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        bytes: Bytes,
    ) -> BoxFut<'a, io::Result<bool>>;

    /// The size of variant `name` of blob `id`, `None` when it was not made.
    fn variant_size<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
    ) -> BoxFut<'a, io::Result<Option<u64>>>;

    /// Reads `len` bytes of variant `name` of blob `id` from `offset`.
    fn variant_open<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, io::Result<BlobStream>>;

    /// Removes whatever an unfinished upload of `id` may have left: its
    /// temporary object, its incomplete multipart upload (`handle`, as
    /// noted by [`Lease::note`]) and the blob itself with its variants. Missing pieces are
    /// not an error: the janitor calls this for leases whose node died at
    /// any point.
    fn abort<'a>(&'a self, id: &'a str, handle: Option<&'a str>) -> BoxFut<'a, io::Result<()>>;

    /// Starts the bytes of resumable upload `id` ([`spool`]): the S3
    /// multipart upload is created and noted in `lease` (as by
    /// [`BlobStore::begin`]) before the state naming it is returned; the
    /// caller saves that state with the upload's row, then ends the lease.
    fn spool_create<'a>(&'a self, id: &'a str, lease: Arc<Lease>) -> BoxFut<'a, io::Result<Spool>>;

    /// Opens resumable upload `id` to append at `spool.len`, as last saved.
    fn spool_open<'a>(
        &'a self,
        id: &'a str,
        spool: Spool,
    ) -> BoxFut<'a, io::Result<Box<dyn SpoolWriter>>>;

    /// Makes a saved, complete spool blob `id` (what
    /// [`SpoolWriter::finish`] does, for a node that has no writer open).
    /// Finishing a spool that was finished already succeeds.
    fn spool_finish<'a>(&'a self, id: &'a str, spool: Spool) -> BoxFut<'a, io::Result<()>>;

    /// Removes everything of resumable upload `id`: its spool and the blob
    /// it may have become. Missing pieces are not an error.
    fn spool_abort<'a>(&'a self, id: &'a str, spool: Spool) -> BoxFut<'a, io::Result<()>>;

    /// Reads `len` bytes of resumable upload `id`'s spool from `offset`,
    /// where the backend can: the spool file on the file store; `None` on
    /// S3, where the parts of an unfinished multipart upload cannot be read.
    fn spool_read<'a>(
        &'a self,
        id: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, io::Result<Option<BlobStream>>>;

    /// True where [`BlobStore::spool_read`] reads.
    fn spool_readable(&self) -> bool;

    /// The note of resumable upload `id`'s last [`SpoolWriter::sync_noted`]
    /// whose flush has ended, if its spool has one (`None` too once the
    /// spool is finished or gone, and on a store that keeps no notes).
    fn spool_note<'a>(&'a self, id: &'a str) -> BoxFut<'a, io::Result<Option<Vec<u8>>>>;

    /// The backend's name in metrics (`files`, `s3`, …).
    fn backend(&self) -> &'static str;

    /// Memory one upload's writer may hold beyond the caller's batch (S3:
    /// the parts being filled and sent), counted in the server's
    /// `upload_reserve` so that `memory_budget` bounds the sum.
    fn upload_memory(&self) -> u64;

    /// Answers when the store can serve requests (`GET /readyz`).
    fn ready(&self) -> BoxFut<'_, io::Result<()>>;

    /// What `bulkwire serve --check` reports: where the blobs go and that
    /// the store answers (it writes, reads and removes a probe object).
    fn describe(&self) -> BoxFut<'_, io::Result<String>>;

    /// Embedded start-up only (one node owns the store): removes every
    /// temporary object, and every committed blob for which `keep` says
    /// no. Returns (temps, orphans) removed. Shared stores return (0, 0):
    /// their leftovers belong to the lease janitor.
    fn sweep<'a>(
        &'a self,
        keep: &'a (dyn Fn(&str) -> bool + Send + Sync),
    ) -> BoxFut<'a, io::Result<(usize, usize)>>;
}

/// One blob being written. Dropping it uncommitted removes the temp object.
pub trait BlobWriter: Send {
    /// Appends chunks in order. At most one call's chunks are in flight:
    /// this returns once the previous call's are written (their error, if
    /// any, is this call's), so a caller that waits here before reading
    /// more input has backpressure, and the writer holds one batch at a
    /// time. Empty
    /// `chunks` only wait for the write in flight.
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, io::Result<()>>;

    /// Waits for the last write, makes the bytes durable and moves the
    /// object to its final name.
    fn commit(self: Box<Self>) -> BoxFut<'static, io::Result<()>>;

    /// True when a chunk of whole blocks in aligned memory ([`AlignedBatch`]),
    /// handed over at an aligned offset, goes to the device straight from
    /// that memory (a file open with `O_DIRECT`): a caller that gathers
    /// into such batches spares the writer its staging copy. No default,
    /// as for [`BlobStore`].
    fn takes_aligned(&self) -> bool;
}

/// Removes crash leftovers: temp objects, and blobs that no row names.
pub async fn recover(blobs: &dyn BlobStore, meta: &dyn MetaStore) -> io::Result<(usize, usize)> {
    let ids = meta.all_ids().await.map_err(io::Error::other)?;
    let keep = move |id: &str| ids.contains(id);
    blobs.sweep(&keep).await
}

/// A new random object id: 128 bits as 32 lower-case hex digits. Random, not
/// sequential, so ids reveal nothing; hex, so they are safe as file names.
pub fn new_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// True for a string [`new_id`] could have made; checked before an id from
/// a URL reaches a store.
pub fn is_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// True for a variant's name as a store takes it: 1 to 64 bytes of
/// lower-case letters, digits, `-` and `.`, not starting with `.` (it is
/// a file name on the file store, part of a key on S3).
pub fn is_variant_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.'))
}

/// Checks a variant's blob id and name before they reach a path or key.
pub(crate) fn check_variant(id: &str, name: &str) -> io::Result<()> {
    if is_id(id) && is_variant_name(name) {
        return Ok(());
    }
    let e = format!("{id:?}/{name:?} is not a variant of a blob id");
    Err(io::Error::new(io::ErrorKind::InvalidInput, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names() {
        for ok in ["w300-h300-cover.webp", "a", &"x".repeat(64)] {
            assert!(is_variant_name(ok), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "../x",
            "a/b",
            "A.webp",
            &"x".repeat(65),
            "a b",
        ] {
            assert!(!is_variant_name(bad), "{bad}");
        }
    }

    #[test]
    fn ids_are_hex_and_distinct() {
        let a = new_id();
        assert!(is_id(&a), "{a}");
        assert_ne!(a, new_id());
        assert!(!is_id("../etc/passwd"));
        assert!(!is_id(&a.to_uppercase()));
        assert!(!is_id(&a[1..]));
    }
}
