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

mod direct;
mod fs;
mod sqlite;

pub use direct::STAGING_BYTES;
pub use fs::FsBlobStore;
pub use sqlite::SqliteMeta;

use bytes::Bytes;
use futures_core::Stream;
use std::future::Future;
use std::io;
use std::pin::Pin;

/// A boxed future, so the traits stay object-safe.
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The bytes of a stored blob, read in chunks.
pub type BlobStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;

/// Where blobs live.
pub trait BlobStore: Send + Sync + 'static {
    /// Starts a temporary object that becomes blob `id` on commit.
    fn begin<'a>(&'a self, id: &'a str) -> BoxFut<'a, io::Result<Box<dyn BlobWriter>>>;

    /// Reads `len` bytes of blob `id` from `offset`. The caller knows the
    /// size from the metadata row: no `stat` on the request path.
    fn open<'a>(&'a self, id: &'a str, offset: u64, len: u64)
        -> BoxFut<'a, io::Result<BlobStream>>;

    /// Removes a committed blob; a missing one is not an error.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, io::Result<()>>;

    /// Removes a committed blob without waiting, from code that cannot
    /// await (a guard's `Drop`); best effort.
    fn discard(&self, id: &str);

    /// Start-up only: removes every temporary object, and every committed
    /// blob for which `keep` says no. Returns (temps, orphans) removed.
    /// Answers when the store can serve requests (`GET /readyz`). The
    /// embedded file store is the local disk, whose faults show on the
    /// writes themselves: ready by default.
    fn ready(&self) -> BoxFut<'_, io::Result<()>> {
        Box::pin(async { Ok(()) })
    }

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
    /// more input has backpressure and holds at most two batches. Empty
    /// `chunks` only wait for the write in flight.
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, io::Result<()>>;

    /// Waits for the last write, makes the bytes durable and moves the
    /// object to its final name.
    fn commit(self: Box<Self>) -> BoxFut<'static, io::Result<()>>;
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
    /// Insertion order; the list cursor.
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

/// A metadata error: the backend's message, and whether the store is out
/// of room (a full disk or quota: 507 rather than 500).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaError {
    pub message: String,
    pub full: bool,
}

impl MetaError {
    pub fn new(message: impl Into<String>) -> MetaError {
        MetaError {
            message: message.into(),
            full: false,
        }
    }

    pub fn full(message: impl Into<String>) -> MetaError {
        MetaError {
            message: message.into(),
            full: true,
        }
    }
}

impl std::fmt::Display for MetaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "metadata: {}", self.message)
    }
}

impl std::error::Error for MetaError {}

/// Where metadata rows live.
pub trait MetaStore: Send + Sync + 'static {
    /// Inserts all rows in one transaction: all become visible or none.
    fn insert(&self, rows: Vec<NewMedia>) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>>;

    fn get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>>;

    /// Up to `limit` rows with `seq > after`, in `seq` order.
    fn list(&self, after: i64, limit: usize) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>>;

    /// Removes the row; `false` if there was none.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Start-up only: every id, for [`recover`]. Bounded by the store's
    /// size, which is fine once at start, never per request.
    fn all_ids(&self) -> BoxFut<'_, Result<std::collections::HashSet<String>, MetaError>>;

    /// Answers when the store can serve requests (`GET /readyz`): one
    /// trivial query.
    fn ready(&self) -> BoxFut<'_, Result<(), MetaError>>;
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
