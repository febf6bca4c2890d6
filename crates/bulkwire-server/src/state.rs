//! What every request shares, built once at start-up.

use crate::auth::Auth;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::store::{BlobStore, MetaStore};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Shared server state.
pub struct AppState {
    pub config: Config,
    pub auth: Auth,
    pub blobs: Arc<dyn BlobStore>,
    pub meta: Arc<dyn MetaStore>,
    pub metrics: Metrics,
    /// This process's node id: leases and heartbeats name it.
    pub node: Arc<str>,
    /// This node's upload leases (`bulkwire_store::lease`).
    pub leases: crate::store::Leases,
    /// One permit per upload slot.
    pub(crate) uploads: Arc<Semaphore>,
    /// The memory budget in KiB permits (a `Semaphore` counts in `u32`
    /// per acquisition, so bytes would cap a reservation at 4 GiB).
    pub(crate) memory: Arc<Semaphore>,
    /// KiB one upload reserves.
    pub(crate) reserve_permits: u32,
    /// Uploads admitted now, for preemption (`crate::admission`).
    pub(crate) admitted: crate::admission::Admitted,
    /// The connection budget (`max_connections`, shedding).
    pub conns: Arc<crate::conns::Conns>,
    /// The resumable uploads this node is writing (one writer each).
    pub(crate) writers: Arc<crate::handlers::tus::Writers>,
    /// The XML-RPC method table (names → handlers, help, signatures).
    pub(crate) xmlrpc: crate::handlers::xmlrpc::Methods,
    /// The media link key (`crate::links`).
    pub links: crate::links::Links,
    /// Image variants being made (`crate::variants`).
    pub variants: crate::variants::Variants,
    /// Aligned batches of `write_batch` bytes (in whole blocks) for
    /// resumable appends, recycled.
    pub(crate) batches: Arc<crate::store::AlignedPool>,
    /// Set at the first shutdown signal: `/readyz` answers 503 and new
    /// requests are refused while those in flight finish.
    pub draining: std::sync::atomic::AtomicBool,
    /// Event wake-ups and counters (`crate::events`).
    pub events: crate::events::Events,
    /// The application's `pre_create` and `pre_finish` hooks.
    pub hooks: crate::hooks::Hooks,
    /// Uploads between their bytes' commit and their row's, which the
    /// `pre_finish` hook may read (`crate::hooks`): id → (size, type).
    pub(crate) finishing: Arc<crate::hooks::Finishing>,
}

impl AppState {
    pub fn new(
        config: Config,
        auth: Auth,
        blobs: Arc<dyn BlobStore>,
        meta: Arc<dyn MetaStore>,
        node: Arc<str>,
        link_key: Vec<u8>,
        hooks: crate::hooks::Hooks,
    ) -> AppState {
        let links = crate::links::Links::new(
            link_key,
            config.link_ttl.map(std::time::Duration::from_secs),
        );
        let l = &config.limits;
        let budget = (l.memory_budget / 1024).min(Semaphore::MAX_PERMITS as u64) as usize;
        let reserve = l
            .upload_reserve_for(blobs.upload_memory())
            .div_ceil(1024)
            .min(u32::MAX as u64) as u32;
        let max_conns = l.max_connections.unwrap_or_else(|| {
            crate::conns::derive_max_connections(crate::conns::descriptor_limit(), l)
        });
        let metrics = Metrics::default();
        metrics.downloads.set_store(blobs.kind());
        let (blobs, meta) = crate::metered::meter(blobs, meta, &metrics.store);
        metrics
            .max_connections
            .store(max_conns as u64, std::sync::atomic::Ordering::Relaxed);
        AppState {
            links,
            variants: crate::variants::Variants::new(&config.limits),
            uploads: Arc::new(Semaphore::new(l.max_uploads)),
            memory: Arc::new(Semaphore::new(budget)),
            reserve_permits: reserve,
            xmlrpc: crate::handlers::xmlrpc::Methods::new(),
            writers: Arc::new(crate::handlers::tus::Writers::new(
                config.limits.max_uploads,
                config.limits.idle_timeout(),
            )),
            batches: crate::store::AlignedPool::new(batch_size(&config.limits)),
            draining: false.into(),
            events: Default::default(),
            hooks,
            finishing: Default::default(),
            admitted: Default::default(),
            conns: Arc::new(crate::conns::Conns::new(
                max_conns,
                metrics.connections.clone(),
            )),
            metrics,
            leases: crate::store::Leases::new(meta.clone(), blobs.clone(), node.clone()),
            node,
            config,
            auth,
            blobs,
            meta,
        }
    }
}

/// A node id unique per process start: 64 random bits in hex, after the
/// process id (for a person reading the `pending` table).
pub(crate) fn node_id() -> String {
    format!("{}-{}", std::process::id(), &crate::store::new_id()[..16])
}

/// `write_batch` in whole blocks of [`crate::store::ALIGN`].
pub(crate) fn batch_size(l: &crate::Limits) -> usize {
    let a = crate::store::ALIGN;
    (l.write_batch / a).max(1) * a
}
