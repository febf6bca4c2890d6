//! Appending a request body to a resumable upload: `PATCH` (tus core,
//! IETF draft §4.4) and the body of a creation request (tus
//! `creation-with-upload`, IETF §4.2).
//!
//! The body streams into the upload's spool in batches, hashed on the way
//! (the whole file's running SHA-256, and the request's own checksum when
//! `Upload-Checksum` came), with the same overlap as a plain upload
//! (`crate::upload::FileSink`): one batch hashed on the blocking pool while
//! the previous one is written and the next one read. Every
//! [`crate::Limits::upload_sync_bytes`] of offset, and at the end, the
//! spool is made durable and its state saved with the hash state in one
//! fenced row update: only then does an offset count, so `Upload-Offset`
//! never names a byte a crash could lose. A body that breaks off keeps
//! what arrived up to there (saved on the way out). With a checksum,
//! nothing of the body counts before it is verified at its end: a
//! mismatch (460) keeps none of its bytes.

use super::lock::{Parked, WriterGuard};
use super::proto::Alg;
use super::state::UploadState;
use crate::error::{ApiError, Kind};
use crate::state::AppState;
use crate::store::{AlignedBatch, Batches, MediaRecord, NewMedia, SpoolWriter, UploadRow, ALIGN};
use crate::upload::{storage_error, BodyReader};
use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// Batches smaller than this are hashed inline (as `FileSink` does).
const HASH_INLINE: usize = 64 * 1024;

/// The digests a body feeds.
struct Hashes {
    file: Sha256,
    check: Option<Check>,
}

enum Check {
    Sha1(sha1::Sha1),
    Sha256(Sha256),
}

impl Hashes {
    fn update(&mut self, bytes: &[u8]) {
        self.file.update(bytes);
        match &mut self.check {
            Some(Check::Sha1(h)) => h.update(bytes),
            Some(Check::Sha256(h)) => h.update(bytes),
            None => {}
        }
    }
}

/// Hashing on the blocking pool, batch after batch, while the next ones
/// are gathered and written: one task per append, fed through a channel
/// of [`HASH_QUEUE`] batches, so that it goes from one batch to the next
/// without waiting for the request's task to hand it over (a hand-off per
/// batch cost a wake-up of each side, the difference between keeping up
/// with the disk and not). The task keeps its thread while the append
/// runs, also while a slow client sends: the runtime's blocking pool has
/// two threads per upload slot for that (`Limits::blocking_threads`).
struct HashPipe {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    done: JoinHandle<Hashes>,
}

/// Batches waiting for the hash beyond the one it is working on.
const HASH_QUEUE: usize = 1;

impl HashPipe {
    fn start(mut h: Hashes) -> HashPipe {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(HASH_QUEUE);
        let done = tokio::task::spawn_blocking(move || {
            while let Some(b) = rx.blocking_recv() {
                h.update(&b);
            }
            h
        });
        HashPipe { tx, done }
    }

    async fn send(&mut self, b: Bytes) -> Result<(), ApiError> {
        self.tx
            .send(b)
            .await
            .map_err(|_| ApiError::storage("the hashing task ended early"))
    }

    /// Waits for the queued batches and hands back the digests.
    async fn finish(self) -> Result<Hashes, ApiError> {
        drop(self.tx);
        self.done
            .await
            .map_err(|e| ApiError::storage(format!("hashing task failed: {e}")))
    }
}

/// The digests of a [`HashPipe`] once it has fed in everything handed
/// over, or the ones at hand.
async fn settle(
    pipe: &mut Option<HashPipe>,
    idle: &mut Option<Hashes>,
) -> Result<Hashes, ApiError> {
    match pipe.take() {
        Some(p) => p.finish().await,
        None => idle
            .take()
            .ok_or_else(|| ApiError::storage("hasher used after a failure")),
    }
}

/// What the request asked for beyond its bytes.
pub struct Want {
    /// `Upload-Checksum`: algorithm and digest of this request's body.
    pub checksum: Option<(Alg, Vec<u8>)>,
    /// IETF `Upload-Complete: ?1`: the upload's length is where this body
    /// ends.
    pub complete_at_end: bool,
    /// The body's declared length (`Content-Length`), if any.
    pub body_len: Option<u64>,
}

/// Batch size for a body's first and last `write_batch` bytes. Nothing
/// reaches the disk or the hash before the first batch is full, and the
/// answer waits for the last one to be hashed and written, so the batches
/// at both ends are smaller; smaller still costs more in small writes than
/// it saves (measured on 8 MiB `PATCH`es: 1 MiB ends 1,250 MB/s, 512 KiB
/// 1,300, 256 KiB 1,200).
const TAIL_BATCH: usize = 512 * 1024;

/// One request's append, from the claimed row to the answer's offset.
pub struct Append {
    state: Arc<AppState>,
    pub row: UploadRow,
    pub st: UploadState,
    writer: Box<dyn SpoolWriter>,
    hashes: Option<Hashes>,
    hashing: Option<HashPipe>,
    expected: Option<Vec<u8>>,
    /// The batch being gathered: the bytes after `written`.
    batch: Option<AlignedBatch>,
    batches: Batches,
    /// Offset of the next byte handed to the writer.
    written: u64,
    next_sync: u64,
    /// Offset at which the body ends, if its length was declared.
    body_end: Option<u64>,
    /// Offset at which the body starts.
    body_start: u64,
    /// The request body failed (cut, too slow): what arrived is kept.
    body_broke: bool,
    guard: WriterGuard,
}

impl Append {
    /// Opens the spool of a claimed row for this request.
    pub async fn open(
        state: &Arc<AppState>,
        row: UploadRow,
        st: UploadState,
        want: &Want,
        guard: WriterGuard,
        parked: Option<Box<dyn SpoolWriter>>,
    ) -> Result<Append, ApiError> {
        let id = row.id.clone();
        let writer = match parked {
            Some(w) => w,
            None => state
                .blobs
                .spool_open(&id, st.spool.clone())
                .await
                .map_err(storage_error)?,
        };
        let check = want.checksum.as_ref().map(|(a, _)| match a {
            Alg::Sha1 => Check::Sha1(sha1::Sha1::new()),
            Alg::Sha256 => Check::Sha256(Sha256::new()),
        });
        let sync = state.config.limits.upload_sync_bytes.max(1);
        let at = st.offset();
        Ok(Append {
            state: state.clone(),
            hashes: Some(Hashes {
                file: st.hasher()?,
                check,
            }),
            expected: want.checksum.as_ref().map(|(_, d)| d.clone()),
            row,
            st,
            writer,
            hashing: None,
            batch: None,
            batches: Batches::new(state.batches.clone()),
            written: at,
            next_sync: (at / sync + 1) * sync,
            body_end: want.body_len.map(|n| at.saturating_add(n)),
            body_start: at,
            body_broke: false,
            guard,
        })
    }

    /// Reads the body to its end into the spool. On an error (a broken
    /// body, a stop) what arrived is saved first, unless a checksum must
    /// vouch for it; the error is returned either way.
    pub async fn body(&mut self, reader: &mut BodyReader) -> Result<(), ApiError> {
        let r = self.read_all(reader).await;
        if let Err(e) = r {
            // Only a body that broke off keeps what arrived: after a
            // storage error the spool's state is in doubt, and a limit or
            // a takeover ends the request without counting more.
            if self.body_broke && self.expected.is_none() && self.has_unsaved() {
                if let Err(s) = self.checkpoint().await {
                    tracing::warn!(id = self.row.id, "saving a broken append: {s}");
                }
            }
            return Err(e);
        }
        self.verify().await?;
        // The body may have ended exactly on a durable point.
        if !self.has_unsaved() {
            return Ok(());
        }
        self.checkpoint().await
    }

    fn has_unsaved(&self) -> bool {
        self.written + self.queued() as u64 != self.st.offset()
    }

    fn queued(&self) -> usize {
        self.batch.as_ref().map_or(0, AlignedBatch::len)
    }

    async fn read_all(&mut self, reader: &mut BodyReader) -> Result<(), ApiError> {
        let stop = self.guard.stop.clone();
        loop {
            let next = tokio::select! {
                biased;
                () = stop.notified() => return Err(taken_over()),
                c = reader.next() => c.inspect_err(|_| self.body_broke = true)?,
            };
            let Some(chunk) = next else { return Ok(()) };
            self.take(chunk).await?;
        }
    }

    /// Gathers a chunk into batches that end on multiples of their size
    /// in the file, so that each is written from aligned memory at an
    /// aligned offset (`AlignedBatch`), and saves at each multiple of
    /// `upload_sync_bytes` exactly: with the S3 part size a multiple of it,
    /// durable points fall on part edges and no tail object is written
    /// mid-request.
    async fn take(&mut self, mut chunk: Bytes) -> Result<(), ApiError> {
        while !chunk.is_empty() {
            let end = self.batch_end();
            let at = self.written + self.queued() as u64;
            let n = chunk.len().min((end - at) as usize);
            self.push(&chunk.split_to(n), end)?;
            if at + n as u64 == end {
                self.write_queue().await?;
                if end == self.next_sync && self.expected.is_none() {
                    self.checkpoint().await?;
                }
            }
        }
        Ok(())
    }

    /// Where the batch that starts at `written` ends: the next multiple of
    /// `write_batch` (in whole blocks), or of [`TAIL_BATCH`] near the
    /// body's start or end, and no later than the next durable point.
    fn batch_end(&self) -> u64 {
        let full = self.state.batches.size() as u64;
        let near_end = self.body_end.is_some_and(|e| self.written + full >= e);
        let near_start = self.written < self.body_start + (TAIL_BATCH as u64);
        let size = match near_end || near_start {
            true => (TAIL_BATCH as u64).min(full),
            false => full,
        };
        let size = (size / ALIGN as u64).max(1) * ALIGN as u64;
        let end = (self.written / size + 1) * size;
        match self.expected {
            None => end.min(self.next_sync),
            Some(_) => end,
        }
    }

    /// Copies `bytes` into the batch that ends at `end`, within the
    /// upload's limits.
    fn push(&mut self, bytes: &[u8], end: u64) -> Result<(), ApiError> {
        let to = self.written + (self.queued() + bytes.len()) as u64;
        let l = &self.state.config.limits;
        if let Some(len) = self.st.length.filter(|len| to > *len) {
            let mut e = ApiError::new(
                Kind::Limit,
                format!("the body goes past Upload-Length ({len} bytes)"),
            );
            e.limit = Some(("Upload-Length", len));
            return Err(e);
        }
        if to > l.file_bytes {
            return Err(ApiError::limit("file_bytes", l.file_bytes));
        }
        let batch = match &mut self.batch {
            Some(b) => b,
            None => self.batch.insert(self.batches.batch()),
        };
        debug_assert!(end - self.written <= batch.room() as u64 + batch.len() as u64);
        batch.extend(bytes);
        Ok(())
    }

    /// Hands the batch to the writer and its hashing to the pool: both
    /// read the same bytes at once.
    async fn write_queue(&mut self) -> Result<(), ApiError> {
        let Some(batch) = self.batch.take().filter(|b| !b.is_empty()) else {
            return Ok(());
        };
        let n = batch.len();
        let bytes = self.batches.freeze(batch);
        match &mut self.hashing {
            Some(pipe) => pipe.send(bytes.clone()).await?,
            None if n < HASH_INLINE => match self.hashes.as_mut() {
                Some(h) => h.update(&bytes),
                None => return Err(ApiError::storage("hasher used after a failure")),
            },
            None => {
                let h = self.settle_hash().await?;
                let mut pipe = HashPipe::start(h);
                pipe.send(bytes.clone()).await?;
                self.hashing = Some(pipe);
            }
        }
        self.written += n as u64;
        self.writer.write(vec![bytes]).await.map_err(storage_error)
    }

    /// The digests with every batch handed over so far fed in.
    async fn settle_hash(&mut self) -> Result<Hashes, ApiError> {
        settle(&mut self.hashing, &mut self.hashes).await
    }

    /// Compares the request's checksum (460 on a mismatch: nothing of the
    /// body is saved, and the next writer cuts it off the spool).
    async fn verify(&mut self) -> Result<(), ApiError> {
        self.write_queue().await?;
        let mut h = self.settle_hash().await?;
        let got = match h.check.take() {
            Some(Check::Sha1(c)) => c.finalize().to_vec(),
            Some(Check::Sha256(c)) => c.finalize().to_vec(),
            None => Vec::new(),
        };
        self.hashes = Some(h);
        match &self.expected {
            Some(want) if *want != got => Err(ApiError::new(
                Kind::Checksum,
                "Upload-Checksum does not match the body: none of it was kept",
            )),
            _ => Ok(()),
        }
    }

    /// Makes everything written durable and saves the offset with the
    /// hash state, fenced by this writer's generation.
    pub async fn checkpoint(&mut self) -> Result<(), ApiError> {
        self.write_queue().await?;
        // The file is made durable while the hash catches up.
        let (h, spool) = tokio::join!(
            settle(&mut self.hashing, &mut self.hashes),
            self.writer.sync()
        );
        let h = h?;
        self.st.set_hasher(&h.file);
        self.hashes = Some(h);
        let spool = spool.map_err(storage_error)?;
        let mut st = self.st.clone();
        st.spool = spool;
        let saved = self.save(st.clone(), None).await;
        match &saved {
            Ok(_) => self.writer.saved(true).await,
            // Fenced out: the new state will never count.
            Err(e) if e.kind == Kind::Conflict => self.writer.saved(false).await,
            // Unknown (a commit whose answer was lost may have counted):
            // nothing is removed; the upload's end removes what is left.
            Err(_) => {}
        }
        saved?;
        self.st = st;
        let sync = self.state.config.limits.upload_sync_bytes.max(1);
        self.next_sync = (self.written / sync + 1) * sync;
        Ok(())
    }

    /// Saves `st` (and a media row) if this writer still holds the upload.
    async fn save(
        &mut self,
        st: UploadState,
        media: Option<NewMedia>,
    ) -> Result<Option<MediaRecord>, ApiError> {
        let mut row = self.row.clone();
        row.state = st.to_json();
        row.open = !st.complete;
        row.expires = super::expires(&self.state);
        match self.state.meta.upload_save(&row, media).await? {
            Some(rec) => {
                self.row = row;
                Ok(rec)
            }
            None => Err(taken_over()),
        }
    }

    /// Leaves the writer open for the upload's next append on this node,
    /// where that is cheap and safe (`lock.rs`); else it closes.
    pub fn park(self) {
        let idle = self.hashing.is_none() && self.batch.is_none() && !self.has_unsaved();
        if !(idle && self.state.meta.single_process() && self.writer.parkable()) {
            return;
        }
        let p = Parked {
            row: self.row,
            st: self.st,
            writer: self.writer,
        };
        self.guard.park(p);
    }

    /// True once every byte of a known length is saved.
    pub fn is_full(&self) -> bool {
        self.st.length == Some(self.st.offset())
    }

    /// Fixes the length at the current offset (IETF `Upload-Complete: ?1`,
    /// or tus `Upload-Length` reached).
    pub fn set_length(&mut self, len: u64) {
        self.st.length = Some(len);
    }

    /// Makes the blob final and the upload a media item (a partial upload
    /// of a concatenation stays a blob without a row).
    pub async fn complete(mut self) -> Result<Option<MediaRecord>, ApiError> {
        let h = self.settle_hash().await?;
        self.writer.finish().await.map_err(storage_error)?;
        let sha256 = hex::encode(h.file.finalize());
        complete_saved(&self.state, self.row.clone(), &mut self.st, sha256).await
    }
}

/// Marks a finished spool complete, with its media row unless it is a
/// partial upload. Shared by [`Append::complete`] and the recovery of a
/// node that died between finishing the blob and saving that.
pub async fn complete_saved(
    state: &Arc<AppState>,
    mut row: UploadRow,
    st: &mut UploadState,
    sha256: String,
) -> Result<Option<MediaRecord>, ApiError> {
    st.complete = true;
    st.media = !st.is_partial();
    let media = st.media.then(|| NewMedia {
        id: row.id.clone(),
        field: None,
        filename: st.filename.clone(),
        content_type: crate::upload::clean_content_type(st.filetype.as_deref()),
        size: st.offset(),
        sha256,
    });
    row.state = st.to_json();
    row.open = false;
    row.expires = super::expires(state);
    match state.meta.upload_save(&row, media).await? {
        Some(rec) => {
            if rec.is_some() {
                let m = &state.metrics;
                m.files_stored
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(rec)
        }
        None => Err(taken_over()),
    }
}

pub(super) fn taken_over() -> ApiError {
    ApiError::new(
        Kind::Conflict,
        "a newer request for this upload took over; resume from its offset",
    )
}
