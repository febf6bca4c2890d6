//! Resumable uploads' rows (see [`spool`](crate::spool)): what lets any
//! node continue any upload.

use super::{EventOf, MediaRecord, MetaError, NewEvent, NewMedia, Quota};
use crate::BoxFut;

/// A resumable upload's row. The metadata store keeps `state` (the
/// server's JSON: offset, length, spool, hash state, …) opaque; it only
/// indexes the owner and the expiry, and fences writers by `gen`. The
/// janitor reads two keys of it ([`lease::sweep_resumable`](crate::lease::sweep_resumable)):
/// `spool` (a [`Spool`](crate::Spool)) and `media` (true once the blob
/// belongs to a media row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadRow {
    pub id: String,
    /// Who created it (a user's name, a token's owner, a JWT's `sub`): open
    /// uploads are counted per owner, and only the owner (or a principal
    /// that reaches every owner) may see or continue it.
    pub owner: String,
    /// Seconds since the Unix epoch after which the janitor removes it.
    pub expires: i64,
    /// Bumped by each [`UploadStore::upload_claim`]: a save with an older
    /// `gen` fails, so a writer that was taken over stops.
    pub gen: i64,
    /// False once complete: only open uploads count against the owner.
    pub open: bool,
    pub state: String,
}

/// `uploads` rows, fenced by generation.
pub trait UploadStore: Send + Sync + 'static {
    /// Inserts a new upload row unless its owner has `max_open` open ones
    /// already (`false`), counted and inserted in one transaction, which
    /// also ends `lease`'s lease on the id (the row names the spool from
    /// then on; an error if the lease is no longer that node's).
    /// With `event` (`upload.created`), writes it in the same transaction.
    fn upload_create<'a>(
        &'a self,
        row: UploadRow,
        max_open: usize,
        lease: Option<&'a str>,
        event: Option<NewEvent>,
    ) -> BoxFut<'a, Result<bool, MetaError>>;

    fn upload_get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>>;

    /// Makes the caller the upload's writer: bumps `gen` and returns the
    /// row as it is now. Any earlier writer's next save fails.
    fn upload_claim<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>>;

    /// The janitor's claim: as [`UploadStore::upload_claim`], but only
    /// while the row is still expired (store clock), so that an upload
    /// saved (and its expiry moved) since the janitor listed it is left
    /// alone.
    fn upload_claim_expired<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>>;

    /// Saves the state, the expiry and whether the upload is still open,
    /// if `gen` is still current (`false` otherwise: taken over or gone).
    /// With `media`, inserts that row in the same transaction, counted in
    /// its owner's usage within `quota` as [`MediaStore::insert`](super::MediaStore::insert)
    /// does: the upload becomes an ordinary media item exactly when its
    /// state says so. `None` when `gen` is no longer current.
    /// With `media` and `event`, the media row's event (`media.created`) is
    /// written in the same transaction.
    fn upload_save<'a>(
        &'a self,
        row: &'a UploadRow,
        media: Option<NewMedia>,
        quota: Quota,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Option<Option<MediaRecord>>, MetaError>>;

    /// Removes the row if `gen` is still current.
    /// With `event` (`upload.terminated`, `upload.expired`), writes it in
    /// the same transaction, when the row goes.
    fn upload_remove<'a>(
        &'a self,
        id: &'a str,
        gen: i64,
        event: Option<NewEvent>,
    ) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Up to `limit` rows whose expiry has passed (store clock), oldest first.
    fn upload_expired(&self, limit: usize) -> BoxFut<'_, Result<Vec<UploadRow>, MetaError>>;
}
