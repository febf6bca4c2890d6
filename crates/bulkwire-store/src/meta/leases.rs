//! Upload leases and node heartbeats (see [`lease`](crate::lease)): the
//! rows that let any node's janitor clean up after a node that died.

use super::MetaError;
use crate::BoxFut;
use std::time::Duration;

/// A lease a janitor took over: the upload's id and backend handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: String,
    pub handle: Option<String>,
}

/// `pending` rows (who is uploading what) and `nodes` (who is alive).
pub trait LeaseStore: Send + Sync + 'static {
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

    /// Takes over, for `node`, up to `limit` leases of nodes whose last
    /// heartbeat is older than `expiry` (or of any other node when
    /// `expiry` is zero), atomically: two janitors never take the same
    /// lease. A janitor that dies after this leaves leases of its own,
    /// which expire in turn.
    fn claim_expired<'a>(
        &'a self,
        node: &'a str,
        expiry: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Pending>, MetaError>>;
}
