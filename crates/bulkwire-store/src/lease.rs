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

/// One upload's lease, shared (`Arc`) by the upload and its blob writer.
/// Dropped without [`Lease::end`] (the upload failed or was abandoned), it
/// aborts what the upload left and releases itself on
/// a spawned task; should that fail too, the lease stays, and expires with
/// the node.
pub struct Lease {
    /// `None` for a detached lease.
    stores: Option<(Arc<dyn MetaStore>, Arc<dyn BlobStore>)>,
    id: String,
    node: Arc<str>,
    handle: Mutex<Option<String>>,
    ended: AtomicBool,
}

impl Lease {
    /// Registers `node`'s upload of `id`: from now on a crash leaves
    /// nothing that no one will clean up.
    pub async fn take(
        meta: Arc<dyn MetaStore>,
        blobs: Arc<dyn BlobStore>,
        id: &str,
        node: Arc<str>,
    ) -> Result<Arc<Lease>, MetaError> {
        meta.lease(id, &node).await?;
        Ok(Arc::new(Lease {
            stores: Some((meta, blobs)),
            id: id.to_string(),
            node,
            handle: Mutex::new(None),
            ended: AtomicBool::new(false),
        }))
    }

    /// A lease that records nothing and cleans nothing up: for a
    /// backend's own tests, and for tools that write blobs outside uploads.
    pub fn detached(id: &str) -> Arc<Lease> {
        Arc::new(Lease {
            stores: None,
            id: id.to_string(),
            node: Arc::from("detached"),
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

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Records the backend's handle for the temporary object before any of
    /// its bytes are sent, so that a janitor can abort it.
    pub fn note(&self, handle: &str) -> BoxFut<'_, io::Result<()>> {
        *self.handle.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle.to_string());
        let handle = handle.to_string();
        Box::pin(async move {
            let Some((meta, _)) = &self.stores else {
                return Ok(());
            };
            meta.lease_note(&self.id, &self.node, &handle)
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
        let Some((meta, blobs)) = self
            .stores
            .take()
            .filter(|_| !self.ended.load(Ordering::Relaxed))
        else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (id, node) = (std::mem::take(&mut self.id), self.node.clone());
        let handle = self.handle.lock().unwrap_or_else(|p| p.into_inner()).take();
        rt.spawn(async move {
            if let Err(e) = clean(&*meta, &*blobs, &id, handle.as_deref(), &node).await {
                tracing::warn!(
                    id,
                    "cleaning up a failed upload: {e} (the lease expires with this node)"
                );
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

/// Heartbeats `node` (and its janitor id) and sweeps expired leases, until
/// the task is dropped. Errors are logged and retried: a metadata store that
/// is away for a while must not stop the node.
pub async fn janitor(
    meta: Arc<dyn MetaStore>,
    blobs: Arc<dyn BlobStore>,
    node: Arc<str>,
    times: JanitorTimes,
) {
    let me = janitor_id(&node);
    let mut beat = tokio::time::interval(times.heartbeat());
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sweep = tokio::time::Instant::now();
    loop {
        beat.tick().await;
        for id in [&*node, me.as_str()] {
            if let Err(e) = meta.heartbeat(id).await {
                tracing::warn!("heartbeat: {e}");
            }
        }
        if last_sweep.elapsed() < times.interval {
            continue;
        }
        last_sweep = tokio::time::Instant::now();
        match sweep_expired(&*meta, &*blobs, &node, times.expiry).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("janitor: removed the leftovers of {n} expired upload(s)"),
            Err(e) => tracing::warn!("janitor: {e}"),
        }
    }
}
