//! The metadata store's traits, one per concern, and [`MetaStore`], which
//! is all of them (DESIGN.md "The metadata store by concern").
//!
//! | trait | rows | methods |
//! |---|---|---|
//! | [`MediaStore`] | `media` | insert, get, list, delete, all_ids |
//! | [`CredentialStore`] | `tokens`, `users`, `secrets` | token_*, user_*, secret* |
//! | [`LeaseStore`] | `pending`, `nodes` | lease*, release, heartbeat, claim_expired |
//! | [`UploadStore`] | `uploads` | upload_* |
//! | [`EventStore`] | `events`, `deliveries`, `event_scans` | events, deliveries_*, events_prune, outbox_stats (events are written by the others' transactions) |
//! | [`MetaCore`] | the store as a whole | ready, describe, backend, single_process |
//!
//! Each backend implements each trait in a module of the same name
//! (`sqlite/media.rs`, `postgres/media.rs`, …); [`MetaStore`] comes with
//! them. A new concern is a new trait here, a supertrait of [`MetaStore`],
//! a module in each backend and one in the conformance suite.
//!
//! No method has a default, as for [`BlobStore`](crate::BlobStore): a
//! wrapper (the server's metrics, a test's double) must pass each one on,
//! or it silently answers for a store it does not wrap.

mod credentials;
mod events;
mod leases;
mod media;
mod uploads;

pub use credentials::{token_id, CredentialStore, NewToken, StoredUser, Token, UserInfo, UserSet};
pub use events::{
    Delivery, Event, EventOf, EventStore, FailedDelivery, NewEvent, OutboxStats, Settle,
    StoredEvent,
};
pub use leases::{LeaseStore, Pending};
pub use media::{MediaRecord, MediaStore, NewMedia, OverQuota, Quota, Usage};
pub use uploads::{UploadRow, UploadStore};

use crate::BoxFut;

/// Where metadata rows, credentials, upload leases and resumable uploads
/// live: every concern's trait at once. Implemented for every type that
/// implements them all; callers hold an `Arc<dyn MetaStore>` and call any
/// concern's methods on it.
pub trait MetaStore:
    MediaStore + CredentialStore + LeaseStore + UploadStore + EventStore + MetaCore
{
}

impl<T> MetaStore for T where
    T: MediaStore + CredentialStore + LeaseStore + UploadStore + EventStore + MetaCore + ?Sized
{
}

/// What concerns the store as a whole, not one kind of row.
pub trait MetaCore: Send + Sync + 'static {
    /// Answers when the store can serve requests (`GET /readyz`): one
    /// trivial query.
    fn ready(&self) -> BoxFut<'_, Result<(), MetaError>>;

    /// What `bulkwire serve --check` reports: engine, version, schema.
    fn describe(&self) -> BoxFut<'_, Result<String, MetaError>>;

    /// The backend's name in metrics (`sqlite`, `postgres`, …).
    fn backend(&self) -> &'static str;

    /// True when only this process can use the store (SQLite's file: the
    /// embedded store is one node). Two things follow:
    /// - at start-up every lease is a dead process's: the start-up cleanup
    ///   may treat them all as expired, and sweep temporary objects and
    ///   blobs no row names ([`recover`](crate::recover));
    /// - no other process reads or writes its rows: every writer of a
    ///   resumable upload is one of this process's, which it serialises
    ///   itself, so a writer that already holds an upload's row may go on
    ///   without claiming it again, and a durable point may be a note on
    ///   this node's spool rather than a row save.
    fn single_process(&self) -> bool;
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
    /// An insert that would have taken its owner past a quota (413).
    pub over_quota: Option<OverQuota>,
}

impl MetaError {
    pub fn new(message: impl Into<String>) -> MetaError {
        MetaError {
            message: message.into(),
            full: false,
            unavailable: false,
            over_quota: None,
        }
    }

    pub fn over_quota(o: OverQuota) -> MetaError {
        MetaError {
            over_quota: Some(o),
            ..MetaError::new(format!(
                "over {} = {}: the owner holds {} and this adds {}",
                o.limit, o.value, o.usage, o.adding
            ))
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
