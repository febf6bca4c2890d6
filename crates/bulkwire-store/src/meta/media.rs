//! Media rows: what a finished upload leaves visible.

use super::MetaError;
use crate::{BoxFut, ListQuery};
use std::collections::HashSet;

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

/// Media rows, one per stored object, inserted in one transaction after
/// every blob of the request is committed: a row only ever names a
/// complete blob.
pub trait MediaStore: Send + Sync + 'static {
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
    /// filters (see [`list`](crate::list)): a keyset page, which rows
    /// inserted or deleted meanwhile do not shift.
    fn list(&self, q: ListQuery) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>>;

    /// Removes the row and, in the same transaction, leases the id to
    /// `node`, so that a crash before the blob is gone leaves a lease for
    /// the janitor rather than an orphan; the caller removes the blob and
    /// then [`release`](super::LeaseStore::release)s. `false` if there was
    /// no row.
    fn delete<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Embedded start-up only: every id (of media and of resumable
    /// uploads), for [`recover`](crate::recover). Bounded by the store's
    /// size, which is fine once at start, never per request.
    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>>;
}
