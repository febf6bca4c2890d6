//! The upload pipeline every format handler shares: admission, reading the
//! body with a deadline, streaming file bytes into storage, and the atomic
//! commit (DESIGN.md "Bounded memory", "Storage").
//!
//! A handler (form-data, raw, XML-RPC, SOAP/MTOM) only turns its
//! wire format into calls on [`Ingest`]: `begin_file` → [`FileSink::push`]
//! the file's bytes → `finish_file`, plus `add_field` for text values, then
//! `commit`. It reads its body through [`BodyReader`] and calls
//! `FileSink::flush` before reading the next chunk, which hands a full batch
//! to storage after the previous batch is written, so memory per upload is
//! a few batches (one gathering, one being written, one being hashed:
//! `Limits::batches_reserve`) plus the codec's own bounded buffers,
//! whatever the payload size, while reading, hashing and writing overlap.
//!
//! Atomicity: each file is leased (`bulkwire_store::lease`) before its first
//! byte, goes to a temp object (a file, an S3 multipart upload) and is
//! committed (durable, final name) at its end; the metadata rows of the
//! whole request are inserted, and the leases ended, in one transaction at
//! the very end. Until then each lease's `Drop` removes what its file left,
//! so a rejected, failed or abandoned request (the client went away and
//! hyper dropped the handler) leaves nothing; a crashed node's leases are
//! the janitor's.

use crate::admission::Progress;
use crate::error::{ApiError, Kind};
use crate::state::AppState;
use crate::store::{
    new_id, AlignedBatch, AlignedPool, Batches, BlobWriter, Lease, MediaRecord, NewMedia,
};
use bytes::Bytes;
use http::HeaderMap;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use sha2::{Digest, Sha256};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// 413 before the first byte when an upload of `bytes` (and `items` more
/// items) would take the principal past its quota, as it stands now: the
/// exact check is the commit's, in the transaction that inserts the rows.
pub async fn check_quota(
    state: &AppState,
    who: &crate::principal::Principal,
    bytes: Option<u64>,
    items: u64,
) -> Result<(), ApiError> {
    let q = who.quota;
    if q.bytes.is_none() && q.items.is_none() {
        return Ok(());
    }
    let now = state.meta.usage(&who.name).await?;
    let add = crate::store::Usage {
        bytes: bytes.unwrap_or(0),
        items,
    };
    let after = crate::store::Usage {
        bytes: now.bytes.saturating_add(add.bytes),
        items: now.items.saturating_add(add.items),
    };
    match q.exceeded(after, add) {
        Some(o) => Err(ApiError::over_quota(&o)),
        None => Ok(()),
    }
}

/// The declared `Content-Length`, if any.
pub fn declared_length(h: &HeaderMap) -> Option<u64> {
    h.get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// 413 at once when the declared `Content-Length` is over `limit`.
pub fn check_declared_length(
    h: &HeaderMap,
    name: &'static str,
    limit: u64,
) -> Result<(), ApiError> {
    let declared = h
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(n) if n > limit => Err(ApiError::limit(name, limit)),
        _ => Ok(()),
    }
}

/// A request body read frame by frame, with an idle deadline per frame, a
/// deadline for the whole body that grows with the bytes received
/// ([`crate::Limits::min_body_rate`]) and the body-size limit.
///
/// A handler that answers before the body's end does not read the rest:
/// its answer says `Connection: close` and the connection lingers
/// (`crate::linger`), reading and discarding what the client still sends,
/// holding no upload slot or memory reservation.
pub struct BodyReader {
    state: Arc<AppState>,
    body: Incoming,
    start: Instant,
    received: u64,
    done: bool,
    /// Shared with admission, which may ask this upload to yield.
    progress: Arc<Progress>,
    /// The request's access-log entry, which counts the bytes read.
    entry: Option<Arc<crate::access::Entry>>,
}

impl BodyReader {
    pub fn new(state: &Arc<AppState>, parts: &http::request::Parts, body: Incoming) -> BodyReader {
        let entry = parts.extensions.get::<Arc<crate::access::Entry>>().cloned();
        let done = http_body::Body::is_end_stream(&body);
        BodyReader {
            state: state.clone(),
            body,
            start: Instant::now(),
            received: 0,
            done,
            progress: Progress::new(),
            entry,
        }
    }

    /// What admission sees of this body (see [`crate::admission::admit`]).
    pub fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    /// The next chunk of data, `None` at the end. A stall longer than the
    /// idle timeout or a body slower than the minimum rate is 408 (also when
    /// a slow upload is preempted to make room), a broken connection
    /// [`Kind::Aborted`], more than `body_bytes` 413.
    pub async fn next(&mut self) -> Result<Option<Bytes>, ApiError> {
        let l = &self.state.config.limits;
        let (idle, limit) = (l.idle_timeout(), l.body_bytes);
        loop {
            if self.done {
                return Ok(None);
            }
            let deadline = l.body_deadline(self.start, self.received);
            let now = Instant::now();
            let wait = deadline.map_or(idle, |d| idle.min(d.saturating_duration_since(now)));
            let next = tokio::select! {
                biased;
                () = self.progress.yield_now.notified() => return Err(preempted(l)),
                r = tokio::time::timeout(wait, self.body.frame()) => r,
            };
            let frame = match next {
                Err(_) if wait < idle => return Err(too_slow(l)),
                Err(_) => return Err(timeout(idle)),
                Ok(None) => {
                    self.done = true;
                    return Ok(None);
                }
                Ok(Some(Err(e))) => {
                    return Err(ApiError::new(
                        Kind::Aborted,
                        format!("reading the body: {e}"),
                    ))
                }
                Ok(Some(Ok(f))) => f,
            };
            // Trailers carry nothing an upload needs.
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            self.received += data.len() as u64;
            self.progress.add(data.len() as u64);
            self.state
                .metrics
                .bytes_received
                .fetch_add(data.len() as u64, Relaxed);
            if let Some(e) = &self.entry {
                e.received(data.len() as u64);
            }
            if self.received > limit {
                return Err(ApiError::limit("body_bytes", limit));
            }
            return Ok(Some(data));
        }
    }

    /// True once the body was read to its end (or had none): the
    /// connection can carry the next request.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

fn timeout(idle: Duration) -> ApiError {
    let mut e = ApiError::new(
        Kind::Timeout,
        format!("no body data for {} ms", idle.as_millis()),
    );
    e.limit = Some(("idle_timeout_ms", idle.as_millis() as u64));
    e
}

fn preempted(l: &crate::Limits) -> ApiError {
    let mut e = ApiError::new(
        Kind::Timeout,
        format!(
            "body slower than min_body_rate = {} bytes/s while the server was full: \
             its upload slot went to another upload",
            l.min_body_rate
        ),
    );
    e.limit = Some(("min_body_rate", l.min_body_rate));
    e
}

fn too_slow(l: &crate::Limits) -> ApiError {
    let mut e = ApiError::new(
        Kind::Timeout,
        format!(
            "body slower than min_body_rate = {} bytes/s (after min_body_rate_grace_ms = {})",
            l.min_body_rate, l.min_body_rate_grace_ms
        ),
    );
    e.limit = Some(("min_body_rate", l.min_body_rate));
    e
}

/// Maps a storage I/O error: a full disk is 507, anything else 500.
pub fn storage_error(e: std::io::Error) -> ApiError {
    // ENOSPC / EDQUOT (Linux numbers); `ErrorKind::StorageFull` is newer
    // than this crate's minimum Rust.
    if matches!(e.raw_os_error(), Some(28) | Some(122)) || e.to_string().contains("No space left") {
        return ApiError::new(Kind::StorageFull, format!("storage full: {e}"));
    }
    // A blob store that cannot be reached (S3 down, a network partition):
    // the upload may succeed once it is back.
    use std::io::ErrorKind as K;
    if matches!(
        e.kind(),
        K::TimedOut
            | K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected
    ) {
        return ApiError::new(
            Kind::Unavailable,
            format!("blob store unavailable: {e}; retry later"),
        );
    }
    ApiError::storage(e)
}

/// Batches smaller than this are hashed on the request's own thread: a
/// hand-off to the blocking pool costs more than hashing them.
pub(crate) const HASH_INLINE: usize = 64 * 1024;

/// What a [`HashLoop`] feeds the bytes to.
pub(crate) trait Feed: Send + 'static {
    fn feed(&mut self, bytes: &[u8]);
    /// After each batch (a resumable append reports where it stands).
    fn batch_done(&mut self) {}
}

impl Feed for Sha256 {
    fn feed(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// Hashing on the blocking pool, batch after batch: one task per file (or
/// resumable append) rather than a job per batch, fed through a channel of
/// `queue` batches, so that it goes on to the next batch without a
/// hand-off through the pool's queue (a job per batch cost a wake-up of
/// each side per MiB: 1 GiB of form-data went at 1,057 MB/s that way,
/// 1,175 this way, with less peak RSS). The thread it keeps while it runs,
/// also while a slow client sends, is one of the two per upload slot
/// ([`crate::Limits::blocking_threads`]).
pub(crate) struct HashLoop<F> {
    tx: tokio::sync::mpsc::Sender<Vec<Bytes>>,
    done: JoinHandle<F>,
}

impl<F: Feed> HashLoop<F> {
    pub fn start(mut f: F, queue: usize) -> HashLoop<F> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Bytes>>(queue);
        let done = tokio::task::spawn_blocking(move || {
            while let Some(batch) = rx.blocking_recv() {
                batch.iter().for_each(|c| f.feed(c));
                f.batch_done();
            }
            f
        });
        HashLoop { tx, done }
    }

    /// Queues a batch (its chunks are shared with the write: no copy).
    pub async fn send(&mut self, batch: Vec<Bytes>) -> Result<(), ApiError> {
        self.tx
            .send(batch)
            .await
            .map_err(|_| ApiError::storage("the hashing task ended early"))
    }

    /// Waits for the batches queued and hands back what they fed.
    pub async fn finish(self) -> Result<F, ApiError> {
        drop(self.tx);
        self.done
            .await
            .map_err(|e| ApiError::storage(format!("hashing task failed: {e}")))
    }
}

/// Batches waiting for a file's [`HashLoop`] beyond the one it hashes.
/// The one waiting is the one being written (the disk goes first), so a
/// file holds three batches besides those it gathers: one hashed, one
/// written, one gathering (more with aligned batches, see
/// `Limits::batches_reserve`). It runs from a file's first large batch
/// until its digest is wanted, or until its sink must hold nothing
/// ([`FileSink::write_all_and_wait`]).
const HASH_QUEUE: usize = 1;

fn hasher_gone() -> ApiError {
    ApiError::storage("hasher used after a failure")
}

/// One file streaming into storage.
///
/// Three stages overlap: the request's task reads and parses the next
/// chunks while the file's [`HashLoop`] hashes the last batch and a
/// blocking job writes it. SHA-256 (one core at ~1.8 GB/s here) was the
/// critical path of a large upload when it ran between reads.
pub struct FileSink {
    writer: Box<dyn BlobWriter>,
    /// The hasher, unless the hash loop holds it.
    hasher: Option<Sha256>,
    hashing: Option<HashLoop<Sha256>>,
    size: u64,
    limit: u64,
    /// The limit's name in errors (`file_bytes`, or a JWT's
    /// `bulkwire.max_bytes` when that is lower).
    limit_name: &'static str,
    /// Chunks gathered for the next write, and their bytes.
    queue: Vec<Bytes>,
    queued: usize,
    batch: usize,
    /// Where the writer takes aligned memory straight: the chunks are
    /// copied into aligned batches, and `queue` holds those once full.
    gather: Option<Gather>,
    media: NewMedia,
    /// The file's first bytes, up to [`SNIFF_BYTES`], while its declared
    /// type says nothing (see [`media_type`]).
    head: Option<Vec<u8>>,
}

/// A file's bytes copied into aligned batches of whole blocks, for a
/// writer that writes them from that memory ([`BlobWriter::takes_aligned`]:
/// a file open with `O_DIRECT`). The writer would otherwise copy each
/// batch into staging of its own, on its write job, while the device
/// waits; here the copy runs on the request's thread beside the previous
/// batch's write, as the resumable append's does (`handlers::tus::append`),
/// and the body's chunks are let go at once.
struct Gather {
    pool: Arc<AlignedPool>,
    batches: Batches,
    open: Option<AlignedBatch>,
}

impl Gather {
    fn new(pool: &Arc<AlignedPool>) -> Gather {
        Gather {
            pool: pool.clone(),
            batches: Batches::new(pool.clone()),
            open: None,
        }
    }

    /// Copies `bytes` in; each batch that fills is frozen onto `out`.
    /// Returns the bytes frozen.
    fn take(&mut self, mut bytes: &[u8], out: &mut Vec<Bytes>) -> usize {
        let (size, mut frozen) = (self.pool.size(), 0);
        while !bytes.is_empty() {
            let b = match &mut self.open {
                Some(b) => b,
                None => self.open.insert(self.batches.batch()),
            };
            let n = (size - b.len()).min(bytes.len());
            b.extend(&bytes[..n]);
            bytes = &bytes[n..];
            if b.len() == size {
                frozen += self.close(out);
            }
        }
        frozen
    }

    /// Freezes the batch being filled onto `out`; returns its bytes.
    fn close(&mut self, out: &mut Vec<Bytes>) -> usize {
        match self.open.take().filter(|b| !b.is_empty()) {
            Some(b) => {
                let n = b.len();
                out.push(self.batches.freeze(b));
                n
            }
            None => 0,
        }
    }

    /// Gives the batches back to the pool (nobody reads them any more).
    fn release(&mut self) {
        self.open = None;
        self.batches = Batches::new(self.pool.clone());
    }
}

impl FileSink {
    /// Queues a chunk (no copy, or copied into an aligned batch: see
    /// [`Gather`]); written and hashed by [`FileSink::flush`].
    pub fn push(&mut self, chunk: Bytes) -> Result<(), ApiError> {
        if let Some(h) = &mut self.head {
            let n = (SNIFF_BYTES - h.len()).min(chunk.len());
            h.extend_from_slice(&chunk[..n]);
        }
        self.size += chunk.len() as u64;
        if self.size > self.limit {
            return Err(match self.limit_name {
                "file_bytes" => ApiError::limit("file_bytes", self.limit),
                _ => crate::principal::UploadRules {
                    max_bytes: Some(self.limit),
                    ..Default::default()
                }
                .check_size(self.size)
                .err()
                .unwrap_or_else(|| ApiError::limit("file_bytes", self.limit)),
            });
        }
        match &mut self.gather {
            Some(g) => self.queued += g.take(&chunk, &mut self.queue),
            None => {
                self.queued += chunk.len();
                self.queue.push(chunk);
            }
        }
        Ok(())
    }

    /// Hands the queued chunks to storage once they make a batch
    /// ([`crate::Limits::write_batch`]); call before reading more input.
    /// Waits only for the previous batch's write, so the next chunks are
    /// read and hashed while this one is written.
    pub async fn flush(&mut self) -> Result<(), ApiError> {
        if self.queued < self.batch {
            return Ok(());
        }
        self.hand_over().await
    }

    /// Hands everything pushed to storage (the last write may still be in
    /// flight; `finish_file` waits for it).
    pub async fn write_all(&mut self) -> Result<(), ApiError> {
        if let Some(g) = &mut self.gather {
            self.queued += g.close(&mut self.queue);
        }
        self.hand_over().await
    }

    /// Hands the queue to the writer, then to the hash: both read the
    /// same bytes at once. The disk first: it is the slower of the two.
    async fn hand_over(&mut self) -> Result<(), ApiError> {
        if self.queue.is_empty() {
            return Ok(());
        }
        let q = std::mem::take(&mut self.queue);
        let small = std::mem::take(&mut self.queued) < HASH_INLINE;
        self.writer.write(q.clone()).await.map_err(storage_error)?;
        match (&mut self.hashing, small) {
            (Some(pipe), _) => pipe.send(q).await,
            (None, true) => {
                let h = self.hasher.as_mut().ok_or_else(hasher_gone)?;
                q.iter().for_each(|c| h.update(c));
                Ok(())
            }
            (None, false) => {
                let h = self.hasher.take().ok_or_else(hasher_gone)?;
                self.hashing
                    .insert(HashLoop::start(h, HASH_QUEUE))
                    .send(q)
                    .await
            }
        }
    }

    /// Writes and hashes everything queued and waits for both: the sink
    /// then holds no batch (a finished SOAP attachment waiting for the
    /// envelope must not keep a write in flight, or the attachments of one
    /// request would each hold one beyond `upload_reserve`).
    pub async fn write_all_and_wait(&mut self) -> Result<(), ApiError> {
        self.write_all().await?;
        self.writer.write(Vec::new()).await.map_err(storage_error)?;
        let hasher = self.settle_hash().await?;
        self.hasher = Some(hasher);
        if let Some(g) = &mut self.gather {
            g.release();
        }
        Ok(())
    }

    /// Waits for the hashing loop, if any, and takes the hasher.
    async fn settle_hash(&mut self) -> Result<Sha256, ApiError> {
        match self.hashing.take() {
            Some(l) => l.finish().await,
            None => self.hasher.take().ok_or_else(hasher_gone),
        }
    }

    /// Bytes pushed so far.
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// One request's upload: its files and text fields, committed together,
/// owned by the request's principal and counted in its quota.
pub struct Ingest {
    state: Arc<AppState>,
    who: crate::principal::Principal,
    /// Files whose blobs are committed but whose rows are not yet.
    files: Vec<NewMedia>,
    fields: Vec<(String, String)>,
    field_bytes: u64,
    /// One per file begun: dropped unended (the upload failed), each
    /// removes what its file left (`Lease`'s `Drop`).
    leases: Vec<Arc<Lease>>,
    /// Where the upload comes from, for its `media.created` events.
    origin: crate::events::Origin,
    /// What those events carry besides the row (a resumable upload's
    /// `metadata`; a form's `fields` are added at the commit).
    extra: serde_json::Map<String, serde_json::Value>,
    /// Still to do before the first file's first byte: the `pre_create`
    /// hook, then admission (see [`Ingest::admit_at_first_file`]).
    opening: Option<Opening>,
    /// The upload slot and memory, once taken here.
    admission: Option<crate::admission::Admission>,
    /// The declared size the hooks are told.
    declared: Option<u64>,
    /// What the hooks changed in what is stored.
    amend: crate::hooks::Amend,
}

/// Admission put off until the first file's headers are known.
struct Opening {
    progress: Arc<Progress>,
    extra: u64,
}

impl Ingest {
    pub fn new(
        state: &Arc<AppState>,
        who: &crate::principal::Principal,
        origin: crate::events::Origin,
    ) -> Ingest {
        Ingest {
            state: state.clone(),
            who: who.clone(),
            files: Vec::new(),
            fields: Vec::new(),
            field_bytes: 0,
            leases: Vec::new(),
            origin,
            extra: Default::default(),
            opening: None,
            admission: None,
            declared: None,
            amend: Default::default(),
        }
    }

    /// Puts admission (a slot and the shared reserve plus `extra` bytes
    /// of memory, `crate::admission`) off until the first file begins,
    /// after the `pre_create` hook: a request waiting for the application
    /// holds neither. `declared` is the size the hooks are told.
    pub fn admit_at_first_file(
        &mut self,
        progress: &Arc<Progress>,
        extra: u64,
        declared: Option<u64>,
    ) {
        self.declared = declared;
        self.opening = Some(Opening {
            progress: progress.clone(),
            extra,
        });
    }

    /// True once the upload holds its slot (taken here).
    pub fn admitted(&self) -> bool {
        self.admission.is_some()
    }

    /// Asks the `pre_create` hook now, with what is known (formats whose
    /// file is named only after its bytes: SOAP), before the caller
    /// admits the upload.
    pub async fn pre_create(
        &mut self,
        declared: Option<u64>,
        filename: Option<&str>,
        content_type: Option<&str>,
    ) -> Result<(), ApiError> {
        self.declared = declared;
        let ask = self.ask(filename, content_type);
        let st = &self.state;
        let stage = crate::hooks::Stage::PreCreate;
        let amend = st
            .hooks
            .ask(&st.events.stats, stage, &self.who, &ask)
            .await?;
        self.take_amend(amend);
        Ok(())
    }

    fn ask(&self, filename: Option<&str>, content_type: Option<&str>) -> crate::hooks::Ask {
        let fields = (self.origin.format == "multipart").then(|| {
            self.fields
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect()
        });
        crate::hooks::Ask {
            format: self.origin.format,
            declared_size: self.declared,
            filename: filename.map(str::to_string),
            content_type: content_type.map(str::to_string),
            fields,
            metadata: self.extra.get("metadata").cloned(),
            client: self.origin.client,
            request_id: self.origin.request_id.clone(),
            finished: None,
        }
    }

    fn take_amend(&mut self, a: crate::hooks::Amend) {
        if let Some(m) = a.metadata.clone() {
            self.extra
                .insert("metadata".into(), serde_json::Value::Object(m));
        }
        if a.filename.is_some() {
            self.amend.filename = a.filename;
        }
        if a.content_type.is_some() {
            self.amend.content_type = a.content_type;
        }
    }

    /// What the hooks said, over the client's words.
    fn amended(&self, media: &mut NewMedia) {
        if let Some(f) = &self.amend.filename {
            media.filename = Some(f.clone());
        }
        if let Some(t) = &self.amend.content_type {
            media.content_type = clean_content_type(Some(t));
        }
    }

    /// The `pre_create` hook and admission, if put off until now.
    async fn open(
        &mut self,
        filename: Option<&str>,
        content_type: Option<&str>,
    ) -> Result<(), ApiError> {
        let Some(o) = self.opening.take() else {
            return Ok(());
        };
        self.pre_create(self.declared, filename, content_type)
            .await?;
        let a = crate::admission::admit(&self.state, &o.progress, o.extra).await?;
        self.admission = Some(a);
        Ok(())
    }

    /// Adds `key` to what the upload's `media.created` events carry.
    pub fn describe_event(&mut self, key: &str, value: serde_json::Value) {
        self.extra.insert(key.to_string(), value);
    }

    /// Starts a file. `filename` and `content_type` are the client's words:
    /// kept as metadata only (the blob is named by a random id), the type
    /// replaced by `application/octet-stream` unless it is a clean header
    /// value.
    pub async fn begin_file(
        &mut self,
        field: Option<String>,
        filename: Option<String>,
        content_type: Option<&str>,
    ) -> Result<FileSink, ApiError> {
        self.open(filename.as_deref(), content_type).await?;
        // The hook's words over the client's.
        let filename = self.amend.filename.clone().or(filename);
        let content_type: Option<String> =
            (self.amend.content_type.clone()).or_else(|| content_type.map(str::to_string));
        let content_type = content_type.as_deref();
        let l = &self.state.config.limits;
        if filename
            .as_ref()
            .is_some_and(|f| f.len() > l.filename_bytes)
        {
            return Err(ApiError::limit("filename_bytes", l.filename_bytes as u64));
        }
        let content_type = clean_content_type(content_type);
        if !unspecific(&content_type) {
            self.who.rules.check_type(&content_type)?;
        }
        let id = new_id();
        let st = &self.state;
        let lease = st.leases.take(&id).await?;
        let writer = st
            .blobs
            .begin(&id, lease.clone())
            .await
            .map_err(storage_error)?;
        self.leases.push(lease);
        // An aligned batch is `write_batch` in whole blocks.
        let gather = writer.takes_aligned().then(|| Gather::new(&st.batches));
        let (limit, limit_name) = match self.who.rules.max_bytes {
            Some(m) if m < l.file_bytes => (m, "bulkwire.max_bytes"),
            _ => (l.file_bytes, "file_bytes"),
        };
        Ok(FileSink {
            head: unspecific(&content_type).then(Vec::new),
            batch: match gather {
                Some(_) => st.batches.size(),
                None => l.write_batch,
            },
            writer,
            hasher: Some(Sha256::new()),
            hashing: None,
            size: 0,
            limit,
            limit_name,
            queue: Vec::new(),
            queued: 0,
            gather,
            media: NewMedia {
                id,
                owner: self.who.name.clone(),
                field,
                filename,
                content_type,
                size: 0,
                sha256: String::new(),
                width: None,
                height: None,
            },
        })
    }

    /// Writes the rest of the file and commits its blob (durable, final
    /// name); its row waits for [`Ingest::commit`].
    pub async fn finish_file(&mut self, mut sink: FileSink) -> Result<(), ApiError> {
        sink.write_all().await?;
        let digest = sink.settle_hash().await?.finalize();
        let mut media = sink.media;
        // A name or type the message gave after the hook (SOAP, XML-RPC)
        // yields to the hook's.
        self.amended(&mut media);
        let head = sink.head.as_deref().unwrap_or_default();
        media.content_type = media_type(&media.content_type, head, media.filename.as_deref());
        // A type told by the bytes is checked once they are there; the
        // blob goes with its lease when this fails.
        self.who.rules.check_type(&media.content_type)?;
        media.size = sink.size;
        media.sha256 = hex::encode(digest);
        // An interrupted commit's blob is its lease's to remove.
        self.files.push(media);
        sink.writer.commit().await.map_err(storage_error)?;
        // An image's size, from its header read back (nothing decoded).
        if let Some(m) = self.files.last_mut() {
            let blobs = &*self.state.blobs;
            let size = crate::variants::stored_size(blobs, &m.id, &m.content_type, m.size).await;
            (m.width, m.height) = size.unzip();
        }
        Ok(())
    }

    /// Names a file whose bytes began before its name and type were known
    /// (SOAP/MTOM: an attachment may come before the envelope naming it).
    /// `None` keeps what `begin_file` was given.
    pub fn describe_file(
        &self,
        sink: &mut FileSink,
        filename: Option<String>,
        content_type: Option<&str>,
    ) -> Result<(), ApiError> {
        let l = &self.state.config.limits;
        if let Some(f) = filename {
            if f.len() > l.filename_bytes {
                return Err(ApiError::limit("filename_bytes", l.filename_bytes as u64));
            }
            sink.media.filename = Some(f);
        }
        if content_type.is_some() {
            sink.media.content_type = clean_content_type(content_type);
            // Bytes already pushed were not kept: the name alone can say.
            if !unspecific(&sink.media.content_type) {
                sink.head = None;
            }
        }
        Ok(())
    }

    /// Files finished so far.
    pub fn files(&self) -> usize {
        self.files.len()
    }

    /// The text fields recorded so far.
    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    /// Room left for text field bytes ([`crate::Limits::fields_total_bytes`]).
    pub fn check_field_bytes(&mut self, n: usize) -> Result<(), ApiError> {
        let l = self.state.config.limits.fields_total_bytes;
        self.field_bytes += n as u64;
        if self.field_bytes > l {
            return Err(ApiError::limit("fields_total_bytes", l));
        }
        Ok(())
    }

    /// Records a text field (the last value wins for a repeated name).
    pub fn add_field(&mut self, name: String, value: Vec<u8>) -> Result<(), ApiError> {
        let l = self.state.config.limits.fields;
        if self.fields.len() >= l {
            return Err(ApiError::limit("fields", l as u64));
        }
        let value = String::from_utf8(value)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        self.fields.push((name, value));
        Ok(())
    }

    /// Inserts every file's row in one transaction: the upload becomes
    /// visible whole, or not at all.
    pub async fn commit(mut self) -> Result<(Vec<MediaRecord>, Vec<(String, String)>), ApiError> {
        let mut files = std::mem::take(&mut self.files);
        for f in &mut files {
            self.pre_finish(f).await?;
        }
        let n = files.len();
        let ids: std::collections::HashSet<String> = files.iter().map(|f| f.id.clone()).collect();
        let quota = self.who.quota;
        let mut extra = std::mem::take(&mut self.extra);
        if self.origin.format == "multipart" {
            extra.extend(crate::events::fields_json(&self.fields));
        }
        let event = crate::events::media_created(&self.state, &self.origin, extra);
        let records = self
            .state
            .meta
            .insert(files, &self.state.node, quota, Some(event))
            .await?;
        self.state.events.written("media.created", records.len());
        // The insert ended these leases in its transaction. Files begun and
        // then dropped (an empty file input, an unreferenced attachment)
        // were not inserted: their leases drop unended and clean up.
        for l in self.leases.iter().filter(|l| ids.contains(l.id())) {
            l.end();
        }
        self.state.metrics.files_stored.fetch_add(n as u64, Relaxed);
        Ok((records, std::mem::take(&mut self.fields)))
    }
}

impl Ingest {
    /// The `pre_finish` hook for one file, its blob committed and its row
    /// not: a refusal fails the upload (its lease, dropped unended, removes
    /// the blob); an amendment changes the row to be.
    async fn pre_finish(&mut self, f: &mut NewMedia) -> Result<(), ApiError> {
        let st = self.state.clone();
        let stage = crate::hooks::Stage::PreFinish;
        if !st.hooks.has(stage) {
            return Ok(());
        }
        let _readable = st.finishing.open(&f.id, f.size, &f.content_type);
        let mut ask = self.ask(f.filename.as_deref(), Some(&f.content_type));
        ask.finished = Some(crate::hooks::Finished {
            id: f.id.clone(),
            size: f.size,
            sha256: f.sha256.clone(),
            url: format!(
                "{}{}",
                self.origin.base,
                st.links
                    .finishing_path(&f.id, crate::hooks::FINISHING_LINK_TTL)
            ),
        });
        let amend = st
            .hooks
            .ask(&st.events.stats, stage, &self.who, &ask)
            .await?;
        self.take_amend(amend);
        self.amended(f);
        Ok(())
    }
}

/// The stored content type: the client's if it is a plausible media type in
/// visible ASCII (it is sent back as a header), else
/// `application/octet-stream`.
pub fn clean_content_type(ct: Option<&str>) -> String {
    match ct.map(str::trim) {
        Some(c)
            if !c.is_empty()
                && c.len() <= 255
                && c.contains('/')
                && c.bytes().all(|b| (0x20..0x7f).contains(&b)) =>
        {
            c.to_string()
        }
        _ => "application/octet-stream".to_string(),
    }
}

/// Bytes of a file's start kept to tell its type: `infer`'s signatures
/// lie within the first few KiB (most within 300 bytes; ZIP-based office
/// files name their parts a little further on).
pub const SNIFF_BYTES: usize = 8192;

const OCTET_STREAM: &str = "application/octet-stream";

/// True for a declared type that says nothing of the content: none (which
/// [`clean_content_type`] made `application/octet-stream`) or
/// `application/octet-stream` itself, what `curl -T`, tus clients without
/// `filetype` and many libraries send.
pub fn unspecific(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case(OCTET_STREAM)
}

/// The type to store: the declared one unless it is [`unspecific`], then
/// what a binary format's magic bytes say (`infer`), then the name's
/// extension (`mime_guess`), then `infer`'s few text matchers (XML, HTML,
/// scripts: an SVG, an Atom feed and an XHTML page all start with `<?xml`,
/// and their extension is the more specific), else
/// `application/octet-stream`: the rule `bulkwire load` follows for what it
/// sends. Whatever is found, downloads keep their rules (`nosniff`,
/// `attachment` for active types such as HTML and SVG: `handlers::media`).
pub fn media_type(declared: &str, head: &[u8], filename: Option<&str>) -> String {
    if !unspecific(declared) {
        return declared.to_string();
    }
    let magic = infer::get(head);
    if let Some(t) = magic.filter(|t| t.matcher_type() != infer::MatcherType::Text) {
        return t.mime_type().to_string();
    }
    filename
        .and_then(|f| mime_guess::from_path(f).first_raw())
        .or(magic.map(|t| t.mime_type()))
        .unwrap_or(OCTET_STREAM)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rough edge 5 of the first hour: `curl -T photo.jpg` stored a JPEG as
    /// `application/octet-stream`.
    #[test]
    fn an_unspecific_type_is_taken_from_magic_bytes_then_the_name() {
        let jpeg = [0xff, 0xd8, 0xff, 0xe0, 0, 0x10, b'J', b'F', b'I', b'F'];
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        let o = OCTET_STREAM;
        assert_eq!(media_type(o, &jpeg, Some("x.bin")), "image/jpeg");
        assert_eq!(
            media_type("Application/Octet-Stream; x=y", png, None),
            "image/png"
        );
        // The bytes win over the name, the name over nothing.
        assert_eq!(media_type(o, png, Some("a.jpg")), "image/png");
        assert_eq!(
            media_type(o, b"plain words", Some("notes.txt")),
            "text/plain"
        );
        assert_eq!(media_type(o, b"<svg/>", Some("logo.svg")), "image/svg+xml");
        let xml = b"<?xml version=\"1.0\"?><svg/>";
        assert_eq!(
            media_type(o, xml, Some("logo.svg")),
            "image/svg+xml",
            "the name over <?xml"
        );
        assert_eq!(
            media_type(o, xml, None),
            "text/xml",
            "<?xml when the name says nothing"
        );
        assert_eq!(media_type(o, b"??", Some("noext")), o);
        assert_eq!(media_type(o, b"", None), o);
        // A declared type stays, whatever the bytes say.
        assert_eq!(media_type("text/plain", &jpeg, Some("a.jpg")), "text/plain");
    }

    /// Chunks of any size come out as batches of exactly the pool's size,
    /// each starting in aligned memory, then the rest; the bytes in order.
    #[test]
    fn gather_cuts_whole_aligned_batches_of_any_chunks() {
        let size = 4 * crate::store::ALIGN;
        let pool = AlignedPool::new(size);
        let data: Vec<u8> = (0..5 * size + 123).map(|i| (i % 251) as u8).collect();
        for chunk in [1, 7, 4096, size - 1, size, size + 1, 3 * size] {
            let mut g = Gather::new(&pool);
            let mut out = Vec::new();
            let mut frozen = 0;
            for c in data.chunks(chunk) {
                frozen += g.take(c, &mut out);
            }
            assert_eq!(frozen, 5 * size, "chunks of {chunk}");
            assert_eq!(g.close(&mut out), 123);
            assert_eq!(g.close(&mut out), 0, "nothing left open");
            let lens: Vec<usize> = out.iter().map(Bytes::len).collect();
            assert_eq!(lens, [size, size, size, size, size, 123]);
            assert!(out
                .iter()
                .all(|b| b.as_ptr().align_offset(crate::store::ALIGN) == 0));
            assert_eq!(out.concat(), data);
            g.release();
            assert!(g.open.is_none());
        }
    }

    #[test]
    fn content_type_is_cleaned() {
        assert_eq!(clean_content_type(Some(" image/png ")), "image/png");
        assert_eq!(
            clean_content_type(Some("text/plain; charset=utf-8")),
            "text/plain; charset=utf-8"
        );
        assert_eq!(
            clean_content_type(Some("bad\r\nx/y")),
            "application/octet-stream"
        );
        assert_eq!(
            clean_content_type(Some("noslash")),
            "application/octet-stream"
        );
        assert_eq!(clean_content_type(None), "application/octet-stream");
    }

    #[test]
    fn declared_length_over_limit_is_413() {
        let mut h = HeaderMap::new();
        h.insert(http::header::CONTENT_LENGTH, "11".parse().unwrap());
        assert!(check_declared_length(&h, "body_bytes", 11).is_ok());
        let e = check_declared_length(&h, "body_bytes", 10).unwrap_err();
        assert_eq!(
            (e.status().as_u16(), e.limit),
            (413, Some(("body_bytes", 10)))
        );
    }

    #[test]
    fn enospc_is_storage_full() {
        let e = storage_error(std::io::Error::from_raw_os_error(28));
        assert_eq!(e.status().as_u16(), 507);
        let e = storage_error(std::io::Error::other("x"));
        assert_eq!(e.status().as_u16(), 500);
    }
}
