//! Media rows: what a finished upload leaves visible.

use super::MetaError;
use crate::{BoxFut, ListQuery};
use std::collections::HashSet;

/// What the ingest pipeline knows of a stored file when it records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMedia {
    pub id: String,
    /// Who made it: a user's name, a token's owner, a JWT's `sub`.
    pub owner: String,
    pub field: Option<String>,
    pub filename: Option<String>,
    pub content_type: String,
    pub size: u64,
    pub sha256: String,
    /// An image's size in pixels as shown (EXIF orientation applied), from
    /// its header; `None` for anything else.
    pub width: Option<u32>,
    pub height: Option<u32>,
}

/// A metadata row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRecord {
    /// Insertion order (commit order on every backend); the position a
    /// listing's page ends at.
    pub seq: i64,
    pub id: String,
    pub owner: String,
    pub field: Option<String>,
    pub filename: Option<String>,
    pub content_type: String,
    pub size: u64,
    pub sha256: String,
    /// Seconds since the Unix epoch.
    pub created: i64,
    /// As [`NewMedia::width`] and [`NewMedia::height`].
    pub width: Option<u32>,
    pub height: Option<u32>,
}

/// What one owner may hold; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    pub bytes: Option<u64>,
    pub items: Option<u64>,
}

/// What one owner's items hold now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub bytes: u64,
    pub items: u64,
}

/// Why an insert was refused for its owner's quota: which limit
/// (`quota_bytes`, `quota_items`), its value, the owner's usage before the
/// insert and what the insert would have added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverQuota {
    pub limit: &'static str,
    pub value: u64,
    pub usage: u64,
    pub adding: u64,
}

impl Quota {
    /// The limit `after` (usage with the insert) breaks, if any.
    pub fn exceeded(&self, after: Usage, adding: Usage) -> Option<OverQuota> {
        let over = |limit, q: Option<u64>, now: u64, add: u64| {
            q.filter(|q| now > *q).map(|value| OverQuota {
                limit,
                value,
                usage: now - add,
                adding: add,
            })
        };
        over("quota_bytes", self.bytes, after.bytes, adding.bytes)
            .or_else(|| over("quota_items", self.items, after.items, adding.items))
    }
}

/// Media rows, one per stored object, inserted in one transaction after
/// every blob of the request is committed: a row only ever names a
/// complete blob.
pub trait MediaStore: Send + Sync + 'static {
    /// Inserts all rows in one transaction: all become visible or none.
    /// The same transaction ends each row's lease, which must still be
    /// `node`'s: an upload whose lease a janitor took over (its node was
    /// presumed dead) fails here rather than naming a removed blob. The rows
    /// have one owner, whose usage the transaction counts them in; past
    /// `quota` it fails with [`MetaError::over_quota`] and nothing changes.
    /// Usage is a row per owner the transaction updates (and, on
    /// PostgreSQL, locks until it commits), so that inserts racing for one
    /// owner on any number of nodes can never leave it over its quota.
    ///
    /// With `event`, each row's event (`media.created`) is written in the
    /// same transaction ([`EventStore`](super::EventStore)).
    fn insert<'a>(
        &'a self,
        rows: Vec<NewMedia>,
        node: &'a str,
        quota: Quota,
        event: Option<super::EventOf>,
    ) -> BoxFut<'a, Result<Vec<MediaRecord>, MetaError>>;

    /// The row, if it exists and (with `owner`) belongs to that owner:
    /// another owner's row reads as a missing one.
    fn get<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>>;

    /// Up to `q.limit` rows past `q.after` in `q.order` that pass `q`'s
    /// filters (see [`list`](crate::list)): a keyset page, which rows
    /// inserted or deleted meanwhile do not shift.
    fn list(&self, q: ListQuery) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>>;

    /// Removes the row (with `owner`, only that owner's) and, in the same
    /// transaction, takes it off its owner's usage, removes the finished
    /// resumable upload it came from (whose `HEAD` would otherwise still
    /// report it complete), and leases the id to `node`, so that a crash
    /// before the blob is gone leaves a lease for the janitor rather than
    /// an orphan; the caller removes the blob and then
    /// [`release`](super::LeaseStore::release)s. The removed row; `None` if
    /// there was none. With `event`, the row's event (`media.deleted`) is
    /// written in the same transaction.
    fn delete<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
        node: &'a str,
        event: Option<super::EventOf>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>>;

    /// What `owner`'s items hold now (one indexed row).
    fn usage<'a>(&'a self, owner: &'a str) -> BoxFut<'a, Result<Usage, MetaError>>;

    /// Embedded start-up only: every id (of media and of resumable
    /// uploads), for [`recover`](crate::recover). Bounded by the store's
    /// size, which is fine once at start, never per request.
    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>>;
}
