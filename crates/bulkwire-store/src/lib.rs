//! Storage behind two traits, so that handlers never name a backend
//! (DESIGN.md "Storage: embedded by default, real engines to scale out").
//!
//! - [`BlobStore`]: bytes. An upload is `begin` → `write`… → `commit`
//!   (durable, then moved to its final name) or dropped (temp object
//!   removed). The embedded default is [`FsBlobStore`]: files under
//!   `data/tmp/` and `data/blobs/`, named by id, never by a client's name.
//! - [`MetaStore`]: one row per stored object, inserted in one transaction
//!   after every blob of the request is committed: a row only ever names a
//!   complete blob. The embedded default is [`SqliteMeta`].
//!
//! After a crash the only leftovers possible are temp objects and blobs
//! without a row; [`recover`] removes both at start-up.
//!
//! PostgreSQL and S3-compatible stores are meant to follow as further
//! implementations of these traits. The crate knows nothing of HTTP: the
//! server maps its errors (a full disk, [`MetaError::full`]) to answers.

#[cfg(any(test, feature = "conformance"))]
#[doc(hidden)]
pub mod conformance;
mod direct;
mod fs;
mod fs_spool;
pub mod lease;
pub mod list;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "s3")]
mod s3;
#[cfg(feature = "s3")]
mod s3_spool;
pub mod spool;
mod sqlite;

pub use direct::{AlignedBatch, AlignedPool, Batches, ALIGN, STAGING_BYTES};
pub use fs::FsBlobStore;
pub use fs_spool::NOTE_MAX;
pub use lease::{Lease, Leases};
pub use list::{ListQuery, Order, TypeFilter};
#[cfg(feature = "postgres")]
pub use postgres::{PgMeta, PG_SCHEMA_VERSION};
#[cfg(feature = "s3")]
pub use s3::{S3BlobStore, S3Config};
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

    /// Removes a committed blob; a missing one is not an error.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, io::Result<()>>;

    /// Removes whatever an unfinished upload of `id` may have left: its
    /// temporary object, its incomplete multipart upload (`handle`, as
    /// noted by [`Lease::note`]) and the blob itself. Missing pieces are
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

/// What the ingest pipeline knows of a stored file when it records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMedia {
    pub id: String,
    pub field: Option<String>,
    pub filename: Option<String>,
    pub content_type: String,
    pub size: u64,
    pub sha256: String,
}

/// A metadata row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRecord {
    /// Insertion order (commit order on every backend); the position a
    /// listing's page ends at.
    pub seq: i64,
    pub id: String,
    pub field: Option<String>,
    pub filename: Option<String>,
    pub content_type: String,
    pub size: u64,
    pub sha256: String,
    /// Seconds since the Unix epoch.
    pub created: i64,
}

/// A metadata error: the backend's message, whether the store is out of
/// room (a full disk or quota: 507 rather than 500), and whether it could
/// not be reached at all (503 with `Retry-After`: the request may succeed
/// once the store is back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaError {
    pub message: String,
    pub full: bool,
    pub unavailable: bool,
}

impl MetaError {
    pub fn new(message: impl Into<String>) -> MetaError {
        MetaError {
            message: message.into(),
            full: false,
            unavailable: false,
        }
    }

    pub fn full(message: impl Into<String>) -> MetaError {
        MetaError {
            full: true,
            ..MetaError::new(message)
        }
    }

    pub fn unavailable(message: impl Into<String>) -> MetaError {
        MetaError {
            unavailable: true,
            ..MetaError::new(message)
        }
    }
}

impl std::fmt::Display for MetaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "metadata: {}", self.message)
    }
}

impl std::error::Error for MetaError {}

/// Where metadata rows, credentials and upload leases live.
pub trait MetaStore: Send + Sync + 'static {
    /// Inserts all rows in one transaction: all become visible or none.
    /// The same transaction ends each row's lease, which must still be
    /// `node`'s: an upload whose lease a janitor took over (its node was
    /// presumed dead) fails here rather than naming a removed blob.
    fn insert<'a>(
        &'a self,
        rows: Vec<NewMedia>,
        node: &'a str,
    ) -> BoxFut<'a, Result<Vec<MediaRecord>, MetaError>>;

    fn get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>>;

    /// Up to `q.limit` rows past `q.after` in `q.order` that pass `q`'s
    /// filters (see [`list`]): a keyset page, which rows inserted or
    /// deleted meanwhile do not shift.
    fn list(&self, q: ListQuery) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>>;

    /// Removes the row and, in the same transaction, leases the id to
    /// `node`, so that a crash before the blob is gone leaves a lease for
    /// the janitor rather than an orphan; the caller removes the blob and
    /// then [`MetaStore::release`]s. `false` if there was no row.
    fn delete<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Embedded start-up only: every id, for [`recover`]. Bounded by the
    /// store's size, which is fine once at start, never per request.
    fn all_ids(&self) -> BoxFut<'_, Result<std::collections::HashSet<String>, MetaError>>;

    /// Answers when the store can serve requests (`GET /readyz`): one
    /// trivial query.
    fn ready(&self) -> BoxFut<'_, Result<(), MetaError>>;

    /// What `bulkwire serve --check` reports: engine, version, schema.
    fn describe(&self) -> BoxFut<'_, Result<String, MetaError>>;

    /// The backend's name in metrics (`sqlite`, `postgres`, …).
    fn backend(&self) -> &'static str {
        "other"
    }

    /// True when only one process can use the store (an embedded file):
    /// start-up may then treat every lease as expired.
    fn exclusive(&self) -> bool {
        false
    }

    // Credentials (see `bulkwire-server`'s `auth`): tokens are kept as
    // SHA-256 digests, users as password hashes in PHC string format.

    /// Stores a token digest; its id is the digest's first 16 hex digits.
    fn token_add(&self, digest: [u8; 32], label: String) -> BoxFut<'_, Result<Token, MetaError>>;

    /// True if a token with this digest is stored (one indexed lookup).
    fn token_known(&self, digest: [u8; 32]) -> BoxFut<'_, Result<bool, MetaError>>;

    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>>;

    /// Removes the token with this id; `false` if there was none.
    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Creates or updates a user (see [`UserSet`]); `false` when the mode's
    /// condition failed (exists already / does not exist).
    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
    ) -> BoxFut<'a, Result<bool, MetaError>>;

    /// A user's stored password hash.
    fn user_hash<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<String>, MetaError>>;

    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>>;

    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>>;

    /// The secret `name` (e.g. the key that signs media links): the stored
    /// value, or `fresh`, stored first, when there is none. Every node that
    /// shares the store reads the same value.
    fn secret<'a>(
        &'a self,
        name: &'a str,
        fresh: Vec<u8>,
    ) -> BoxFut<'a, Result<Vec<u8>, MetaError>>;
    /// Replaces the secret `name` (a key rotation).
    fn secret_set<'a>(&'a self, name: &'a str, value: Vec<u8>)
        -> BoxFut<'a, Result<(), MetaError>>;

    // Leases (see [`lease`]).

    /// Records that `node` is uploading `id` (a `pending` row).
    fn lease<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>>;

    /// Adds the backend's handle (an S3 upload id) to `node`'s lease; an
    /// error when the lease is not (or no longer) `node`'s.
    fn lease_note<'a>(
        &'a self,
        id: &'a str,
        node: &'a str,
        handle: &'a str,
    ) -> BoxFut<'a, Result<(), MetaError>>;

    /// Moves `from`'s lease on `id` to `to`; `false` if it is not
    /// `from`'s (an insert ended it, or a janitor took it). Taking the
    /// lease before touching the bytes is what keeps a cleanup from
    /// removing a blob whose row has just committed.
    fn lease_move<'a>(
        &'a self,
        id: &'a str,
        from: &'a str,
        to: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Ends `node`'s lease on `id` (its leftovers are gone).
    fn release<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>>;

    /// Says `node` is alive (upserts its heartbeat, store clock).
    fn heartbeat<'a>(&'a self, node: &'a str) -> BoxFut<'a, Result<(), MetaError>>;

    // Resumable uploads (see [`spool`]).

    /// Inserts a new upload row unless its owner has `max_open` open ones
    /// already (`false`), counted and inserted in one transaction, which
    /// also ends `lease`'s lease on the id (the row names the spool from
    /// then on; an error if the lease is no longer that node's).
    fn upload_create<'a>(
        &'a self,
        row: UploadRow,
        max_open: usize,
        lease: Option<&'a str>,
    ) -> BoxFut<'a, Result<bool, MetaError>>;

    fn upload_get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>>;

    /// True when only this process uses the store (SQLite): every writer
    /// of an upload is then one of this process's, which it serialises
    /// itself, so a writer that already holds an upload's row may go on
    /// without claiming it again.
    fn single_process(&self) -> bool {
        false
    }

    /// Makes the caller the upload's writer: bumps `gen` and returns the
    /// row as it is now. Any earlier writer's next save fails.
    fn upload_claim<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>>;

    /// The janitor's claim: as [`MetaStore::upload_claim`], but only while
    /// the row is still expired (store clock), so that an upload saved (and
    /// its expiry moved) since the janitor listed it is left alone.
    fn upload_claim_expired<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>>;

    /// Saves the state, the expiry and whether the upload is still open,
    /// if `gen` is still current (`false` otherwise: taken over or gone).
    /// With `media`, inserts that row in the same transaction: the upload
    /// becomes an ordinary media item exactly when its state says so.
    fn upload_save<'a>(
        &'a self,
        row: &'a UploadRow,
        media: Option<NewMedia>,
    ) -> BoxFut<'a, Result<Option<Option<MediaRecord>>, MetaError>>;

    /// Removes the row if `gen` is still current.
    fn upload_remove<'a>(&'a self, id: &'a str, gen: i64) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Up to `limit` rows whose expiry has passed (store clock), oldest first.
    fn upload_expired(&self, limit: usize) -> BoxFut<'_, Result<Vec<UploadRow>, MetaError>>;

    /// Takes over, for `node`, up to `limit` leases of nodes whose last
    /// heartbeat is older than `expiry` (or of any other node when
    /// `expiry` is zero), atomically: two janitors never take the same
    /// lease. A janitor that dies after this leaves leases of its own,
    /// which expire in turn.
    fn claim_expired<'a>(
        &'a self,
        node: &'a str,
        expiry: std::time::Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Pending>, MetaError>>;
}

/// A resumable upload's row. The metadata store keeps `state` (the
/// server's JSON: offset, length, spool, hash state, …) opaque; it only
/// indexes the owner and the expiry, and fences writers by `gen`. The
/// janitor reads two keys of it ([`lease::sweep_resumable`]): `spool`
/// (a [`Spool`]) and `media` (true once the blob belongs to a media row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadRow {
    pub id: String,
    /// Who created it (a credential's id): open uploads are counted per owner.
    pub owner: String,
    /// Seconds since the Unix epoch after which the janitor removes it.
    pub expires: i64,
    /// Bumped by each [`MetaStore::upload_claim`]: a save with an older
    /// `gen` fails, so a writer that was taken over stops.
    pub gen: i64,
    /// False once complete: only open uploads count against the owner.
    pub open: bool,
    pub state: String,
}

/// A stored token as listed (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub id: String,
    pub label: String,
    pub created: i64,
}

/// A stored user as listed (never the hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub created: i64,
}

/// How [`MetaStore::user_set`] treats an existing user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserSet {
    /// Only a new user (`user add`).
    Create,
    /// Only an existing user (`user passwd`).
    Update,
    /// Either (`--user` on the command line, which wins).
    Upsert,
}

/// A lease a janitor took over: the upload's id and backend handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: String,
    pub handle: Option<String>,
}

/// The id of a token with this digest.
pub fn token_id(digest: &[u8; 32]) -> String {
    hex::encode(&digest[..8])
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

#[cfg(test)]
mod tests {
    use super::*;

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
