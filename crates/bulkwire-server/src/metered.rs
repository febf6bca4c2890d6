//! Store latency and errors on `/metrics`, per backend and operation
//! (`bulkwire_store_seconds`, `bulkwire_store_errors_total`): the numbers an
//! operator of a scaled-out deployment reads first when uploads slow down
//! or fail — is it PostgreSQL, S3, or the server?
//!
//! The stores are wrapped once at start-up ([`meter`]), so every handler
//! is measured without knowing it. Each call is one `Instant` pair and two
//! relaxed atomic adds; an S3 part or a PostgreSQL round trip costs orders
//! of magnitude more.

use crate::store::{
    BlobStore, BlobStream, BlobWriter, BoxFut, CredentialStore, Delivery, EventOf, EventStore,
    FailedDelivery, Lease, LeaseStore, ListQuery, MediaRecord, MediaStore, MetaCore, MetaError,
    MetaStore, NewEvent, NewMedia, NewToken, OutboxStats, Pending, Quota, Settle, Spool,
    SpoolWriter, StoredEvent, StoredUser, Token, UploadRow, UploadStore, Usage, UserInfo, UserSet,
};
use bytes::Bytes;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Histogram bounds, seconds: from a cached SQLite read to a slow S3 part.
const BUCKETS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
];

/// Metadata operations, as labelled.
const META_OPS: [&str; 11] = [
    "insert", "get", "list", "delete", "auth", "lease", "janitor", "ready", "admin", "upload",
    "events",
];

/// Indices into [`META_OPS`]: a call's histogram is found without a
/// string comparison.
#[derive(Clone, Copy)]
enum MetaOp {
    Insert,
    Get,
    List,
    Delete,
    Auth,
    Lease,
    Janitor,
    Ready,
    Admin,
    /// Resumable uploads' rows.
    Upload,
    /// The event outbox: the feed, deliveries.
    Events,
}

/// Blob operations, as labelled.
const BLOB_OPS: [&str; 11] = [
    "begin", "write", "commit", "open", "delete", "abort", "ready", "spool", "sync", "note",
    "variant",
];

/// Indices into [`BLOB_OPS`].
#[derive(Clone, Copy)]
enum BlobOp {
    Begin,
    Write,
    Commit,
    Open,
    Delete,
    Abort,
    Ready,
    /// Resumable spools: create, open, finish, abort.
    Spool,
    /// A resumable upload's durable point.
    Sync,
    /// A resumable spool's note read back.
    Note,
    /// An image variant stored, looked up or opened.
    Variant,
}

#[derive(Debug, Default)]
struct Histo {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
    errors: AtomicU64,
}

impl Histo {
    fn observe(&self, d: Duration, ok: bool) {
        let s = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_us.fetch_add(d.as_micros() as u64, Relaxed);
        if !ok {
            self.errors.fetch_add(1, Relaxed);
        }
    }
}

/// Per-operation histograms of both stores.
#[derive(Debug, Default)]
pub struct StoreStats {
    meta_backend: OnceLock<&'static str>,
    blob_backend: OnceLock<&'static str>,
    meta: [Histo; META_OPS.len()],
    blobs: [Histo; BLOB_OPS.len()],
}

impl StoreStats {
    /// Appends the exposition lines.
    pub fn render(&self, o: &mut String) {
        let _ = writeln!(
            o,
            "# HELP bulkwire_store_seconds Store operation latency by store, backend and operation.\n\
             # TYPE bulkwire_store_seconds histogram"
        );
        let meta = self.meta_backend.get().copied().unwrap_or("none");
        let blobs = self.blob_backend.get().copied().unwrap_or("none");
        let all = || {
            let m = META_OPS
                .iter()
                .zip(&self.meta)
                .map(move |(op, h)| ("meta", meta, *op, h));
            let b = BLOB_OPS
                .iter()
                .zip(&self.blobs)
                .map(move |(op, h)| ("blobs", blobs, *op, h));
            m.chain(b)
        };
        for (store, backend, op, h) in all() {
            let l = format!("store=\"{store}\",backend=\"{backend}\",op=\"{op}\"");
            let mut acc = 0;
            for (b, v) in BUCKETS.iter().zip(&h.buckets) {
                acc += v.load(Relaxed);
                let _ = writeln!(o, "bulkwire_store_seconds_bucket{{{l},le=\"{b}\"}} {acc}");
            }
            let n = h.count.load(Relaxed);
            let sum = h.sum_us.load(Relaxed) as f64 / 1e6;
            let _ = writeln!(o, "bulkwire_store_seconds_bucket{{{l},le=\"+Inf\"}} {n}");
            let _ = writeln!(o, "bulkwire_store_seconds_sum{{{l}}} {sum}");
            let _ = writeln!(o, "bulkwire_store_seconds_count{{{l}}} {n}");
        }
        let _ = writeln!(
            o,
            "# HELP bulkwire_store_errors_total Store operations that failed, by store, backend and operation.\n\
             # TYPE bulkwire_store_errors_total counter"
        );
        for (store, backend, op, h) in all() {
            let e = h.errors.load(Relaxed);
            let _ = writeln!(
                o,
                "bulkwire_store_errors_total{{store=\"{store}\",backend=\"{backend}\",op=\"{op}\"}} {e}"
            );
        }
    }

    fn meta_op(&self, op: MetaOp) -> &Histo {
        &self.meta[op as usize]
    }

    fn blob_op(&self, op: BlobOp) -> &Histo {
        &self.blobs[op as usize]
    }
}

/// Wraps both stores so that every call is measured in `stats`.
pub fn meter(
    blobs: Arc<dyn BlobStore>,
    meta: Arc<dyn MetaStore>,
    stats: &Arc<StoreStats>,
) -> (Arc<dyn BlobStore>, Arc<dyn MetaStore>) {
    let _ = stats.blob_backend.set(blobs.backend());
    let _ = stats.meta_backend.set(meta.backend());
    let b = MeteredBlobs {
        inner: blobs,
        stats: stats.clone(),
    };
    let m = MeteredMeta {
        inner: meta,
        stats: stats.clone(),
    };
    (Arc::new(b), Arc::new(m))
}

/// Times `f` into `h`; an `Err` counts as an error.
fn timed<'a, T, E>(
    h: &'a Histo,
    f: impl Future<Output = Result<T, E>> + Send + 'a,
) -> BoxFut<'a, Result<T, E>> {
    Box::pin(async move {
        let t = Instant::now();
        let r = f.await;
        h.observe(t.elapsed(), r.is_ok());
        r
    })
}

struct MeteredMeta {
    inner: Arc<dyn MetaStore>,
    stats: Arc<StoreStats>,
}

impl MeteredMeta {
    fn h(&self, op: MetaOp) -> &Histo {
        self.stats.meta_op(op)
    }
}

impl MetaCore for MeteredMeta {
    fn ready(&self) -> BoxFut<'_, Result<(), MetaError>> {
        timed(self.h(MetaOp::Ready), self.inner.ready())
    }
    fn describe(&self) -> BoxFut<'_, Result<String, MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.describe())
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn single_process(&self) -> bool {
        self.inner.single_process()
    }
}

impl MediaStore for MeteredMeta {
    fn insert<'a>(
        &'a self,
        rows: Vec<NewMedia>,
        node: &'a str,
        quota: Quota,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Vec<MediaRecord>, MetaError>> {
        timed(
            self.h(MetaOp::Insert),
            self.inner.insert(rows, node, quota, event),
        )
    }
    fn get<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        timed(self.h(MetaOp::Get), self.inner.get(id, owner))
    }
    fn usage<'a>(&'a self, owner: &'a str) -> BoxFut<'a, Result<Usage, MetaError>> {
        timed(self.h(MetaOp::Get), self.inner.usage(owner))
    }
    fn list(&self, q: ListQuery) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>> {
        timed(self.h(MetaOp::List), self.inner.list(q))
    }
    fn delete<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
        node: &'a str,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        timed(
            self.h(MetaOp::Delete),
            self.inner.delete(id, owner, node, event),
        )
    }
    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.all_ids())
    }
}

impl CredentialStore for MeteredMeta {
    fn token_add(&self, digest: [u8; 32], t: NewToken) -> BoxFut<'_, Result<Token, MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.token_add(digest, t))
    }
    fn token_find(&self, digest: [u8; 32]) -> BoxFut<'_, Result<Option<Token>, MetaError>> {
        timed(self.h(MetaOp::Auth), self.inner.token_find(digest))
    }
    fn token_used<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        timed(self.h(MetaOp::Auth), self.inner.token_used(id))
    }
    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.tokens())
    }
    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.token_revoke(id))
    }
    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
        role: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        timed(
            self.h(MetaOp::Admin),
            self.inner.user_set(name, hash, mode, role),
        )
    }
    fn user_get<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<StoredUser>, MetaError>> {
        timed(self.h(MetaOp::Auth), self.inner.user_get(name))
    }
    fn user_role<'a>(
        &'a self,
        name: &'a str,
        role: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.user_role(name, role))
    }
    fn user_quota<'a>(
        &'a self,
        name: &'a str,
        quota: Quota,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.user_quota(name, quota))
    }
    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.user_remove(name))
    }
    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.users())
    }
    fn secret<'a>(
        &'a self,
        name: &'a str,
        fresh: Vec<u8>,
    ) -> BoxFut<'a, Result<Vec<u8>, MetaError>> {
        timed(self.h(MetaOp::Auth), self.inner.secret(name, fresh))
    }
    fn secret_set<'a>(
        &'a self,
        name: &'a str,
        value: Vec<u8>,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        timed(self.h(MetaOp::Admin), self.inner.secret_set(name, value))
    }
}

impl LeaseStore for MeteredMeta {
    fn lease<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        timed(self.h(MetaOp::Lease), self.inner.lease(id, node))
    }
    fn lease_note<'a>(
        &'a self,
        id: &'a str,
        node: &'a str,
        handle: &'a str,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        timed(
            self.h(MetaOp::Lease),
            self.inner.lease_note(id, node, handle),
        )
    }
    fn lease_move<'a>(
        &'a self,
        id: &'a str,
        from: &'a str,
        to: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        timed(self.h(MetaOp::Lease), self.inner.lease_move(id, from, to))
    }
    fn release<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        timed(self.h(MetaOp::Lease), self.inner.release(id, node))
    }
    fn heartbeat<'a>(&'a self, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        timed(self.h(MetaOp::Janitor), self.inner.heartbeat(node))
    }
    fn claim_expired<'a>(
        &'a self,
        node: &'a str,
        expiry: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Pending>, MetaError>> {
        timed(
            self.h(MetaOp::Janitor),
            self.inner.claim_expired(node, expiry, limit),
        )
    }
}

impl UploadStore for MeteredMeta {
    fn upload_create<'a>(
        &'a self,
        row: UploadRow,
        max: usize,
        lease: Option<&'a str>,
        event: Option<NewEvent>,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        timed(
            self.h(MetaOp::Upload),
            self.inner.upload_create(row, max, lease, event),
        )
    }
    fn upload_get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        timed(self.h(MetaOp::Upload), self.inner.upload_get(id))
    }
    fn upload_claim<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        timed(self.h(MetaOp::Upload), self.inner.upload_claim(id))
    }
    fn upload_claim_expired<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        timed(self.h(MetaOp::Janitor), self.inner.upload_claim_expired(id))
    }
    fn upload_save<'a>(
        &'a self,
        row: &'a UploadRow,
        media: Option<NewMedia>,
        quota: Quota,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Option<Option<MediaRecord>>, MetaError>> {
        timed(
            self.h(MetaOp::Upload),
            self.inner.upload_save(row, media, quota, event),
        )
    }
    fn upload_remove<'a>(
        &'a self,
        id: &'a str,
        gen: i64,
        event: Option<NewEvent>,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        timed(
            self.h(MetaOp::Upload),
            self.inner.upload_remove(id, gen, event),
        )
    }
    fn upload_expired(&self, limit: usize) -> BoxFut<'_, Result<Vec<UploadRow>, MetaError>> {
        timed(self.h(MetaOp::Janitor), self.inner.upload_expired(limit))
    }
}

impl EventStore for MeteredMeta {
    fn event_write<'a>(&'a self, event: &'a NewEvent) -> BoxFut<'a, Result<(), MetaError>> {
        timed(self.h(MetaOp::Events), self.inner.event_write(event))
    }
    fn events<'a>(
        &'a self,
        after: i64,
        owner: Option<&'a str>,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<StoredEvent>, MetaError>> {
        timed(
            self.h(MetaOp::Events),
            self.inner.events(after, owner, limit),
        )
    }
    fn deliveries_begin<'a>(&'a self, endpoint: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        timed(
            self.h(MetaOp::Events),
            self.inner.deliveries_begin(endpoint),
        )
    }
    fn deliveries_plan<'a>(
        &'a self,
        endpoint: &'a str,
        kinds: &'a [String],
        limit: usize,
    ) -> BoxFut<'a, Result<usize, MetaError>> {
        timed(
            self.h(MetaOp::Events),
            self.inner.deliveries_plan(endpoint, kinds, limit),
        )
    }
    fn deliveries_claim<'a>(
        &'a self,
        endpoint: &'a str,
        node: &'a str,
        lease: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Delivery>, MetaError>> {
        timed(
            self.h(MetaOp::Events),
            self.inner.deliveries_claim(endpoint, node, lease, limit),
        )
    }
    fn delivery_settle<'a>(
        &'a self,
        endpoint: &'a str,
        seq: i64,
        node: &'a str,
        how: Settle,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        timed(
            self.h(MetaOp::Events),
            self.inner.delivery_settle(endpoint, seq, node, how),
        )
    }
    fn deliveries_failed(
        &self,
        limit: usize,
    ) -> BoxFut<'_, Result<Vec<FailedDelivery>, MetaError>> {
        timed(self.h(MetaOp::Events), self.inner.deliveries_failed(limit))
    }
    fn deliveries_retry<'a>(
        &'a self,
        event_id: Option<&'a str>,
    ) -> BoxFut<'a, Result<u64, MetaError>> {
        timed(
            self.h(MetaOp::Events),
            self.inner.deliveries_retry(event_id),
        )
    }
    fn events_prune(&self, age: Duration) -> BoxFut<'_, Result<u64, MetaError>> {
        timed(self.h(MetaOp::Events), self.inner.events_prune(age))
    }
    fn outbox_stats(&self) -> BoxFut<'_, Result<OutboxStats, MetaError>> {
        timed(self.h(MetaOp::Events), self.inner.outbox_stats())
    }
    fn events_head(&self) -> BoxFut<'_, Result<i64, MetaError>> {
        timed(self.h(MetaOp::Events), self.inner.events_head())
    }
}

struct MeteredBlobs {
    inner: Arc<dyn BlobStore>,
    stats: Arc<StoreStats>,
}

impl BlobStore for MeteredBlobs {
    fn begin<'a>(
        &'a self,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, std::io::Result<Box<dyn BlobWriter>>> {
        Box::pin(async move {
            let w = timed(
                self.stats.blob_op(BlobOp::Begin),
                self.inner.begin(id, lease),
            )
            .await?;
            let w = MeteredWriter {
                inner: w,
                stats: self.stats.clone(),
            };
            Ok(Box::new(w) as Box<dyn BlobWriter>)
        })
    }
    fn open<'a>(
        &'a self,
        id: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, std::io::Result<BlobStream>> {
        timed(
            self.stats.blob_op(BlobOp::Open),
            self.inner.open(id, offset, len),
        )
    }
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn open_file<'a>(
        &'a self,
        id: &'a str,
        variant: Option<&'a str>,
    ) -> BoxFut<'a, std::io::Result<Option<std::fs::File>>> {
        timed(
            self.stats.blob_op(BlobOp::Open),
            self.inner.open_file(id, variant),
        )
    }
    fn presign_get<'a>(
        &'a self,
        id: &'a str,
        variant: Option<&'a str>,
        ttl: std::time::Duration,
        answer: crate::store::Answer<'a>,
    ) -> BoxFut<'a, std::io::Result<Option<String>>> {
        self.inner.presign_get(id, variant, ttl, answer)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, std::io::Result<()>> {
        timed(self.stats.blob_op(BlobOp::Delete), self.inner.delete(id))
    }
    fn variant_put<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        bytes: Bytes,
    ) -> BoxFut<'a, std::io::Result<bool>> {
        let op = self.stats.blob_op(BlobOp::Variant);
        timed(op, self.inner.variant_put(id, name, bytes))
    }
    fn variant_size<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
    ) -> BoxFut<'a, std::io::Result<Option<u64>>> {
        let op = self.stats.blob_op(BlobOp::Variant);
        timed(op, self.inner.variant_size(id, name))
    }
    fn variant_open<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, std::io::Result<BlobStream>> {
        let op = self.stats.blob_op(BlobOp::Variant);
        timed(op, self.inner.variant_open(id, name, offset, len))
    }
    fn abort<'a>(
        &'a self,
        id: &'a str,
        handle: Option<&'a str>,
    ) -> BoxFut<'a, std::io::Result<()>> {
        timed(
            self.stats.blob_op(BlobOp::Abort),
            self.inner.abort(id, handle),
        )
    }
    fn spool_create<'a>(
        &'a self,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, std::io::Result<Spool>> {
        timed(
            self.stats.blob_op(BlobOp::Spool),
            self.inner.spool_create(id, lease),
        )
    }
    fn spool_open<'a>(
        &'a self,
        id: &'a str,
        spool: Spool,
    ) -> BoxFut<'a, std::io::Result<Box<dyn SpoolWriter>>> {
        Box::pin(async move {
            let h = self.stats.blob_op(BlobOp::Spool);
            let w = timed(h, self.inner.spool_open(id, spool)).await?;
            let stats = self.stats.clone();
            Ok(Box::new(MeteredSpool { inner: w, stats }) as Box<dyn SpoolWriter>)
        })
    }
    fn spool_finish<'a>(&'a self, id: &'a str, spool: Spool) -> BoxFut<'a, std::io::Result<()>> {
        timed(
            self.stats.blob_op(BlobOp::Spool),
            self.inner.spool_finish(id, spool),
        )
    }
    fn spool_read<'a>(
        &'a self,
        id: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, std::io::Result<Option<crate::store::BlobStream>>> {
        timed(
            self.stats.blob_op(BlobOp::Open),
            self.inner.spool_read(id, offset, len),
        )
    }
    fn spool_readable(&self) -> bool {
        self.inner.spool_readable()
    }
    fn spool_note<'a>(&'a self, id: &'a str) -> BoxFut<'a, std::io::Result<Option<Vec<u8>>>> {
        timed(self.stats.blob_op(BlobOp::Note), self.inner.spool_note(id))
    }
    fn spool_abort<'a>(&'a self, id: &'a str, spool: Spool) -> BoxFut<'a, std::io::Result<()>> {
        timed(
            self.stats.blob_op(BlobOp::Spool),
            self.inner.spool_abort(id, spool),
        )
    }
    fn upload_memory(&self) -> u64 {
        self.inner.upload_memory()
    }
    fn ready(&self) -> BoxFut<'_, std::io::Result<()>> {
        timed(self.stats.blob_op(BlobOp::Ready), self.inner.ready())
    }
    fn describe(&self) -> BoxFut<'_, std::io::Result<String>> {
        self.inner.describe()
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn sweep<'a>(
        &'a self,
        keep: &'a (dyn Fn(&str) -> bool + Send + Sync),
    ) -> BoxFut<'a, std::io::Result<(usize, usize)>> {
        self.inner.sweep(keep)
    }
}

struct MeteredWriter {
    inner: Box<dyn BlobWriter>,
    stats: Arc<StoreStats>,
}

impl BlobWriter for MeteredWriter {
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, std::io::Result<()>> {
        timed(self.stats.blob_op(BlobOp::Write), self.inner.write(chunks))
    }
    fn takes_aligned(&self) -> bool {
        self.inner.takes_aligned()
    }
    fn commit(self: Box<Self>) -> BoxFut<'static, std::io::Result<()>> {
        let stats = self.stats;
        let f = self.inner.commit();
        Box::pin(async move {
            let t = Instant::now();
            let r = f.await;
            stats
                .blob_op(BlobOp::Commit)
                .observe(t.elapsed(), r.is_ok());
            r
        })
    }
}

struct MeteredSpool {
    inner: Box<dyn SpoolWriter>,
    stats: Arc<StoreStats>,
}

impl SpoolWriter for MeteredSpool {
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, std::io::Result<()>> {
        timed(self.stats.blob_op(BlobOp::Write), self.inner.write(chunks))
    }
    fn sync(&mut self) -> BoxFut<'_, std::io::Result<Spool>> {
        timed(self.stats.blob_op(BlobOp::Sync), self.inner.sync())
    }
    fn sync_noted(&mut self, note: Vec<u8>) -> BoxFut<'_, std::io::Result<Spool>> {
        timed(
            self.stats.blob_op(BlobOp::Sync),
            self.inner.sync_noted(note),
        )
    }
    fn notes(&self) -> bool {
        self.inner.notes()
    }
    fn saved(&mut self, ok: bool) -> BoxFut<'_, ()> {
        self.inner.saved(ok)
    }
    fn parkable(&self) -> bool {
        self.inner.parkable()
    }
    fn holds_chunks(&self) -> bool {
        self.inner.holds_chunks()
    }
    fn finish(self: Box<Self>) -> BoxFut<'static, std::io::Result<()>> {
        let stats = self.stats;
        let f = self.inner.finish();
        Box::pin(async move {
            let t = Instant::now();
            let r = f.await;
            stats
                .blob_op(BlobOp::Commit)
                .observe(t.elapsed(), r.is_ok());
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{FsBlobStore, SqliteMeta};

    #[tokio::test]
    async fn calls_are_timed_and_errors_counted_per_backend_and_op() {
        let d = tempfile::tempdir().unwrap();
        let stats = Arc::new(StoreStats::default());
        let (b, m) = meter(
            Arc::new(FsBlobStore::open(d.path()).unwrap()),
            Arc::new(SqliteMeta::open(&d.path().join("m.sqlite")).unwrap()),
            &stats,
        );
        m.get("x", None).await.unwrap();
        m.get("y", None).await.unwrap();
        // Not leased: the insert fails.
        assert!(m
            .insert(vec![], "n", Default::default(), None)
            .await
            .is_ok());
        let row = NewMedia {
            id: "z".into(),
            owner: "admin".into(),
            field: None,
            filename: None,
            content_type: "t/t".into(),
            size: 0,
            sha256: String::new(),
            width: None,
            height: None,
        };
        assert!(m
            .insert(vec![row], "n", Default::default(), None)
            .await
            .is_err());
        let mut w = b.begin("a", Lease::detached("a")).await.unwrap();
        w.write(vec![Bytes::from_static(b"abc")]).await.unwrap();
        w.commit().await.unwrap();
        let mut o = String::new();
        stats.render(&mut o);
        let line = |p: &str| {
            o.lines()
                .find(|l| l.starts_with(p))
                .unwrap_or("")
                .to_string()
        };
        let get = "bulkwire_store_seconds_count{store=\"meta\",backend=\"sqlite\",op=\"get\"}";
        assert_eq!(line(get), format!("{get} 2"));
        let err = "bulkwire_store_errors_total{store=\"meta\",backend=\"sqlite\",op=\"insert\"}";
        assert_eq!(line(err), format!("{err} 1"));
        let commit =
            "bulkwire_store_seconds_count{store=\"blobs\",backend=\"files\",op=\"commit\"}";
        assert_eq!(line(commit), format!("{commit} 1"));
    }
}
