//! Upload leases: what makes crash cleanup right when many nodes share one
//! metadata store and one blob store (DESIGN.md "Storage").
//!
//! A start-up sweep that deletes every temporary object is right for one
//! process on its own disk; on shared storage it would destroy the uploads
//! other nodes have in flight. Instead every upload is registered before
//! its first byte is stored: a `pending` row naming the object id, the node
//! and (once the backend has one) the handle of its temporary object, e.g.
//! an S3 multipart upload id. The row ends in the same transaction that
//! inserts the media row, so at any moment every stored byte without a row
//! is covered by a lease. Deleting media works the same way in reverse: the
//! row goes and a lease appears in one transaction, then the blob goes.
//!
//! Each node heartbeats its node id. Any node's [`janitor`] takes over, with
//! one atomic statement (`FOR UPDATE SKIP LOCKED` on PostgreSQL), the leases
//! of nodes whose heartbeat is older than the expiry, aborts what they left
//! and ends the leases. A node that is merely slow and finds its lease taken
//! over fails the upload at its commit (the insert checks the lease is still
//! its own), so a janitor never removes bytes that a row then names.

use crate::{BlobStore, BoxFut, MetaError, MetaStore};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Leases a janitor takes over per statement.
const CLAIM_BATCH: usize = 100;

/// Failed cleanups a node keeps for its janitor to retry, at most this
/// many (beyond, they wait for the node's lease to expire after it stops).
const FAILED_CAP: usize = 10_000;

/// One node's leases: takes them, and keeps the cleanups that failed (a
/// store away at that moment) for the janitor's next round. A janitor only
/// takes over the leases of silent nodes, so without this a live node's
/// failed cleanup would wait until the node stops.
#[derive(Clone)]
pub struct Leases {
    meta: Arc<dyn MetaStore>,
    blobs: Arc<dyn BlobStore>,
    node: Arc<str>,
    failed: Arc<Mutex<Vec<FailedCleanup>>>,
}

/// An upload id and its temporary object's handle, whose cleanup failed.
type FailedCleanup = (String, Option<String>);

impl Leases {
    pub fn new(meta: Arc<dyn MetaStore>, blobs: Arc<dyn BlobStore>, node: Arc<str>) -> Leases {
        Leases {
            meta,
            blobs,
            node,
            failed: Arc::default(),
        }
    }

    /// Registers this node's upload of `id`: from now on a crash leaves
    /// nothing that no one will clean up.
    pub async fn take(&self, id: &str) -> Result<Arc<Lease>, MetaError> {
        self.meta.lease(id, &self.node).await?;
        Ok(Arc::new(Lease {
            owner: Some(self.clone()),
            id: id.to_string(),
            handle: Mutex::new(None),
            ended: AtomicBool::new(false),
        }))
    }

    fn keep_failed(&self, id: String, handle: Option<String>) {
        let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        if f.len() < FAILED_CAP {
            f.push((id, handle));
        } else {
            tracing::warn!(id, "{FAILED_CAP} failed cleanups kept already: this one waits for the node's lease to expire");
        }
    }

    /// Leaves the cleanup of this node's lease on `id` (a deletion whose
    /// blob could not be removed) to the janitor's next round.
    pub fn retry_later(&self, id: &str) {
        self.keep_failed(id.to_string(), None);
    }

    /// Retries the cleanups that failed; returns how many were handed on.
    pub async fn retry_failed(&self) -> usize {
        let todo = std::mem::take(&mut *self.failed.lock().unwrap_or_else(|p| p.into_inner()));
        let mut done = 0;
        for (id, handle) in todo {
            match self.clean_own(&id, handle.as_deref()).await {
                Ok(()) => done += 1,
                Err(_) => self.keep_failed(id, handle),
            }
        }
        done
    }

    /// Cleans up after one of this node's own uploads. The lease moves to
    /// this node's janitor first, in one statement: if it is no longer the
    /// node's, the insert that commits the upload's row ended it (the row
    /// may have committed even though its caller saw an error or went
    /// away), and the bytes are the row's: nothing is touched. Once moved,
    /// no insert can commit, and what is left is the janitor's: aborted
    /// here, and retried by the janitor's sweep (it takes its own leases
    /// each round) should that fail. An error means the lease could not be
    /// moved (the metadata store is away): the caller keeps it for later.
    async fn clean_own(&self, id: &str, handle: Option<&str>) -> Result<(), MetaError> {
        let me = janitor_id(&self.node);
        if !self.meta.lease_move(id, &self.node, &me).await? {
            return Ok(());
        }
        if let Err(e) = clean(&*self.meta, &*self.blobs, id, handle, &me).await {
            tracing::warn!(id, "cleaning up a failed upload: {e} (the janitor retries)");
        }
        Ok(())
    }
}

/// One upload's lease, shared (`Arc`) by the upload and its blob writer.
/// Dropped without [`Lease::end`] (the upload failed or was abandoned), it
/// aborts what the upload left and releases itself on a spawned task;
/// should that fail, its node's janitor retries ([`Leases`]), and should the
/// node stop first, the lease expires with it.
pub struct Lease {
    /// `None` for a detached lease.
    owner: Option<Leases>,
    id: String,
    handle: Mutex<Option<String>>,
    ended: AtomicBool,
}

impl Lease {
    /// A lease that records nothing and cleans nothing up: for a
    /// backend's own tests, and for tools that write blobs outside uploads.
    pub fn detached(id: &str) -> Arc<Lease> {
        Arc::new(Lease {
            owner: None,
            id: id.to_string(),
            handle: Mutex::new(None),
            ended: AtomicBool::new(false),
        })
    }

    /// The handle [`Lease::note`] recorded.
    pub fn handle(&self) -> Option<String> {
        self.handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Records the backend's handle for the temporary object before any of
    /// its bytes are sent, so that a janitor can abort it.
    pub fn note(&self, handle: &str) -> BoxFut<'_, io::Result<()>> {
        *self.handle.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle.to_string());
        let handle = handle.to_string();
        Box::pin(async move {
            let Some(o) = &self.owner else {
                return Ok(());
            };
            o.meta
                .lease_note(&self.id, &o.node, &handle)
                .await
                .map_err(io::Error::other)
        })
    }

    /// The media row was inserted, which ended the lease in the same
    /// transaction: nothing is left to clean up.
    pub fn end(&self) {
        self.ended.store(true, Ordering::Relaxed);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(owner) = self
            .owner
            .take()
            .filter(|_| !self.ended.load(Ordering::Relaxed))
        else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let id = std::mem::take(&mut self.id);
        let handle = self.handle.lock().unwrap_or_else(|p| p.into_inner()).take();
        rt.spawn(async move {
            if let Err(e) = owner.clean_own(&id, handle.as_deref()).await {
                tracing::warn!(id, "cleaning up a failed upload: {e} (retried next round)");
                owner.keep_failed(id, handle);
            }
        });
    }
}

/// Aborts what an upload left, then ends its lease.
async fn clean(
    meta: &dyn MetaStore,
    blobs: &dyn BlobStore,
    id: &str,
    handle: Option<&str>,
    node: &str,
) -> io::Result<()> {
    blobs.abort(id, handle).await?;
    meta.release(id, node).await.map_err(io::Error::other)
}

/// The janitor's timing.
#[derive(Debug, Clone, Copy)]
pub struct JanitorTimes {
    /// A node whose heartbeat is older than this is presumed dead.
    pub expiry: Duration,
    /// How often the janitor looks for expired leases.
    pub interval: Duration,
}

impl JanitorTimes {
    /// Heartbeats come six times per expiry: a node survives five missed
    /// beats (a metadata store briefly away) before it is presumed dead.
    pub fn heartbeat(&self) -> Duration {
        (self.expiry / 6).max(Duration::from_millis(10))
    }
}

/// The id under which `node`'s janitor holds the leases it took over:
/// heartbeated with the node, so that they expire in turn if it dies, and
/// distinct from it, so that the node's own uploads are never among them.
pub fn janitor_id(node: &str) -> String {
    format!("{node}.janitor")
}

/// Takes over expired leases (and retries this janitor's own), aborts their
/// leftovers and ends them. Returns how many were cleaned. `expiry` zero
/// takes every other node's leases: for a store only this process can use.
pub async fn sweep_expired(
    meta: &dyn MetaStore,
    blobs: &dyn BlobStore,
    node: &str,
    expiry: Duration,
) -> Result<usize, MetaError> {
    let me = janitor_id(node);
    let mut cleaned = 0;
    loop {
        let batch = meta.claim_expired(&me, expiry, CLAIM_BATCH).await?;
        let mut failed = 0;
        for p in &batch {
            match clean(meta, blobs, &p.id, p.handle.as_deref(), &me).await {
                Ok(()) => cleaned += 1,
                Err(e) => {
                    failed += 1;
                    tracing::warn!(id = p.id, "janitor: {e} (retried next round)");
                }
            }
        }
        // A short batch was the last; a failing one would come back whole.
        if batch.len() < CLAIM_BATCH || failed > 0 {
            return Ok(cleaned);
        }
    }
}

/// What the janitor reads of a resumable upload's state (the server's
/// JSON, see [`crate::UploadRow`]): its spool, and whether its blob
/// belongs to a media row (a finished upload: only the row goes).
#[derive(serde::Deserialize)]
struct ResumableLeftovers {
    spool: crate::Spool,
    #[serde(default)]
    media: bool,
}

/// Removes expired resumable uploads: each is claimed first (a writer
/// still at it is fenced out), then its bytes go, then its row. Returns
/// how many were removed.
pub async fn sweep_resumable(
    meta: &dyn MetaStore,
    blobs: &dyn BlobStore,
    node: &str,
) -> Result<usize, MetaError> {
    let mut removed = 0;
    loop {
        let batch = meta.upload_expired(CLAIM_BATCH).await?;
        let mut failed = 0;
        for row in &batch {
            match expire(meta, blobs, &row.id, node).await {
                Ok(()) => removed += 1,
                Err(e) => {
                    failed += 1;
                    tracing::warn!(id = row.id, "janitor: {e} (retried next round)");
                }
            }
        }
        if batch.len() < CLAIM_BATCH || failed > 0 {
            return Ok(removed);
        }
    }
}

/// Removes expired upload `id`. An unfinished one leaves the event
/// `upload.expired`, written with the row's removal; a finished one's row
/// is only the record of an item that lives on.
async fn expire(
    meta: &dyn MetaStore,
    blobs: &dyn BlobStore,
    id: &str,
    node: &str,
) -> io::Result<()> {
    let claim = meta.upload_claim_expired(id).await;
    let Some(row) = claim.map_err(io::Error::other)? else {
        return Ok(());
    };
    let left: ResumableLeftovers = serde_json::from_str(&row.state)
        .map_err(|e| io::Error::other(format!("upload {id}: unreadable state: {e}")))?;
    let offset = left.spool.len;
    let event = (!left.media).then(|| {
        let data = serde_json::json!({"id": id, "offset": offset});
        let e = crate::Event::new("upload.expired", node, &row.owner, None, data);
        crate::NewEvent::new(id, e)
    });
    if !left.media {
        blobs.spool_abort(id, left.spool).await?;
    }
    meta.upload_remove(id, row.gen, event)
        .await
        .map_err(io::Error::other)?;
    Ok(())
}

/// Heartbeats the node (and its janitor id), retries its failed cleanups
/// and sweeps expired leases, until the task is dropped. Errors are logged
/// and retried: a metadata store that is away for a while must not stop the
/// node.
pub async fn janitor(leases: Leases, times: JanitorTimes) {
    // Two loops in one task: a sweep that waits on a slow store must not
    // delay the heartbeat past the expiry, or other nodes' janitors would
    // take over this live node's uploads.
    tokio::join!(beat(&leases, times), sweep(&leases, times));
}

async fn beat(leases: &Leases, times: JanitorTimes) {
    let mut tick = tokio::time::interval(times.heartbeat());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = heartbeat(&*leases.meta, &leases.node).await {
            tracing::warn!("heartbeat: {e}");
        }
    }
}

async fn sweep(leases: &Leases, times: JanitorTimes) {
    let (meta, blobs, node) = (&*leases.meta, &*leases.blobs, &*leases.node);
    let mut tick = tokio::time::interval(times.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let retried = leases.retry_failed().await;
        match sweep_expired(meta, blobs, node, times.expiry).await {
            Ok(n) if n + retried > 0 => tracing::info!(
                "janitor: removed the leftovers of {n} expired upload(s), handed on {retried} failed cleanup(s)"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("janitor: {e} (retried next round)"),
        }
        match sweep_resumable(meta, blobs, node).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("janitor: removed {n} expired resumable upload(s)"),
            Err(e) => tracing::warn!("janitor: {e} (retried next round)"),
        }
    }
}

/// Says `node` and its janitor id are alive. Also called once before a
/// node serves, so that no janitor elsewhere ever sees a new node's first
/// leases without a heartbeat.
pub async fn heartbeat(meta: &dyn MetaStore, node: &str) -> Result<(), MetaError> {
    meta.heartbeat(node).await?;
    meta.heartbeat(&janitor_id(node)).await
}
