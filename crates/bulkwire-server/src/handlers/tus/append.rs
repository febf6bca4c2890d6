//! Appending a request body to a resumable upload: `PATCH` (tus core,
//! IETF draft §4.4) and the body of a creation request (tus
//! `creation-with-upload`, IETF §4.2).
//!
//! The body is gathered into aligned batches (`AlignedBatch`), each handed
//! at once to two loops on the blocking pool: one hashes it (the whole
//! file's running SHA-256, and the request's own checksum when
//! `Upload-Checksum` came), one writes it. Every
//! [`crate::Limits::upload_sync_bytes`] of offset, and at the end, the
//! spool is made durable and its state saved in one fenced row update:
//! only then does an offset count, so `Upload-Offset` never names a byte a
//! crash could lose. Where the spool keeps notes (a file on the single-node
//! embedded store) the state goes as a note made durable with the bytes
//! instead, and the row is saved behind the answer, on a task the writer's
//! next save waits for; whoever loads the row takes a note ahead of it
//! (`load_state` in `mod.rs`). The saved hash state is where the hash
//! stands: on a store whose spool can be read back (files) the answer does
//! not wait for the hash to catch up with the bytes; it catches up behind
//! the answer,
//! before the next request for the upload starts, and a writer that does
//! not have it at hand (after a restart) reads the lag back from the spool
//! ([`hasher_at_offset`]). On S3 and at the upload's last byte the saved
//! hash is at the offset. A body that breaks off keeps what arrived up to
//! there (saved on the way out). With a checksum, nothing of the body
//! counts before it is verified at its end: a mismatch (460) keeps none of
//! its bytes.

use super::hash::{hasher_at_offset, settle, Check, HashPipe, Hashes};
use super::lock::{Parked, WriterGuard};
use super::proto::Alg;
use super::state::UploadState;
use crate::error::{ApiError, Kind};
use crate::state::AppState;
use crate::store::{
    AlignedBatch, Batches, MediaRecord, NewMedia, Spool, SpoolWriter, UploadRow, ALIGN,
};
use crate::upload::{storage_error, BodyReader, HASH_INLINE};
use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tokio::task::JoinHandle;

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

/// The very first batch of a body is smaller still (it ends at the first
/// multiple of this size; the next ends at [`TAIL_BATCH`]'s): the disk,
/// the bottleneck of a local-disk append, is idle from the previous
/// answer until it comes, and one small write more costs less than that
/// wait. With the disk-first order and the deeper hash queue it made 4.4%
/// over the code before (five rounds in A B B A order); each change alone
/// was within this machine's noise.
const FIRST_BATCH: usize = 64 * 1024;

// Batches end on multiples of their size: whole blocks for `O_DIRECT`.
const _: () = assert!(TAIL_BATCH.is_multiple_of(ALIGN) && FIRST_BATCH.is_multiple_of(ALIGN));

/// What an append goes on with from a parked writer (`lock::Parked`): its
/// open spool, the hash at the offset, and the row save it left running.
pub type Resumed = (Box<dyn SpoolWriter>, Sha256, Option<JoinHandle<bool>>);

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
    /// The row save running behind the last noted durable point (see
    /// [`Append::checkpoint`]), maybe a previous request's: this writer's
    /// saves wait for it, so that they land in order. True if it saved.
    prior_save: Option<JoinHandle<bool>>,
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
        parked: Option<Resumed>,
    ) -> Result<Append, ApiError> {
        let id = row.id.clone();
        let mut st = st;
        let (writer, file, prior_save) = match parked {
            Some(p) => p,
            None => {
                let w = state.blobs.spool_open(&id, st.spool.clone()).await;
                let w = w.map_err(storage_error)?;
                // Read again now that this writer holds the spool: a note
                // that a cut-off request's last sync left after the row
                // was loaded (the open did not cut below it).
                if state.meta.single_process() {
                    let note = state.blobs.spool_note(&id).await.map_err(storage_error)?;
                    // The request's offset was checked against the older
                    // state: it must come again with this one (409).
                    if let Some(n) = note {
                        if st.take_note(&id, &n)? {
                            return Err(super::mismatch(st.offset()));
                        }
                    }
                }
                (w, hasher_at_offset(state, &id, &st).await?, None)
            }
        };
        let check = want.checksum.as_ref().map(|(a, _)| match a {
            Alg::Sha1 => Check::Sha1(sha1::Sha1::new()),
            Alg::Sha256 => Check::Sha256(Sha256::new()),
        });
        let sync = state.config.limits.upload_sync_bytes.max(1);
        let at = st.offset();
        Ok(Append {
            state: state.clone(),
            hashes: Some(Hashes { file, check }),
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
            prior_save,
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
    /// body's start or end ([`FIRST_BATCH`] at its very start on a writer
    /// that lets go of its chunks at once: files), and no later than the
    /// next durable point.
    fn batch_end(&self) -> u64 {
        let full = self.state.batches.size() as u64;
        let near_end = self.body_end.is_some_and(|e| self.written + full >= e);
        let near_start = self.written < self.body_start + (TAIL_BATCH as u64);
        // Not on a writer that holds its chunks (an S3 part being filled):
        // no disk waits there, and the small batch keeps a whole batch's
        // memory until its part is sent (peak RSS 19.2-20.3 MiB with it
        // in four runs, 15.5-19.3 without it in six).
        let first = self.written / FIRST_BATCH as u64 == self.body_start / FIRST_BATCH as u64
            && !self.writer.holds_chunks();
        let size = match (first, near_end || near_start) {
            (true, _) => (FIRST_BATCH as u64).min(full),
            (false, true) => (TAIL_BATCH as u64).min(full),
            (false, false) => full,
        };
        // Every size is whole blocks: `full` as `AppState::batches` makes
        // it, the others checked where they are defined.
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
        self.st.granted.rules().check_size(to)?;
        let batch = match &mut self.batch {
            Some(b) => b,
            None => self.batch.insert(self.batches.batch()),
        };
        debug_assert!(end - self.written <= batch.room() as u64 + batch.len() as u64);
        batch.extend(bytes);
        Ok(())
    }

    /// Hands the batch to the writer, then its hashing to the pool: both
    /// read the same bytes at once. The disk first: it is the slower of
    /// the two, and the hash may lag (see [`super::hash::HASH_QUEUE`]).
    async fn write_queue(&mut self) -> Result<(), ApiError> {
        let Some(batch) = self.batch.take().filter(|b| !b.is_empty()) else {
            return Ok(());
        };
        let (at, n) = (self.written, batch.len());
        let bytes = self.batches.freeze(batch);
        let written = self.writer.write(vec![bytes.clone()]).await;
        written.map_err(storage_error)?;
        self.written += n as u64;
        let hashed = self.hash(bytes, at).await;
        if hashed.is_err() {
            // Written but not hashed: no checkpoint or park may follow
            // (they find no hasher and fail).
            self.hashing = None;
            self.hashes = None;
        }
        hashed
    }

    /// Feeds the bytes at offset `at` to the digests: inline when small
    /// and nothing is queued, else through the [`HashPipe`].
    async fn hash(&mut self, bytes: Bytes, at: u64) -> Result<(), ApiError> {
        match &mut self.hashing {
            Some(pipe) => pipe.send(bytes).await,
            None if bytes.len() < HASH_INLINE => match self.hashes.as_mut() {
                Some(h) => {
                    h.update(&bytes);
                    Ok(())
                }
                None => Err(ApiError::storage("hasher used after a failure")),
            },
            None => {
                let h = self.settle_hash().await?;
                let mut pipe = HashPipe::start(h, at);
                pipe.send(bytes).await?;
                self.hashing = Some(pipe);
                Ok(())
            }
        }
    }

    /// The digests with every batch handed over so far fed in.
    async fn settle_hash(&mut self) -> Result<Hashes, ApiError> {
        settle(&mut self.hashing, &mut self.hashes).await
    }

    /// Compares the request's checksum (460 on a mismatch: nothing of the
    /// body is saved, and the next writer cuts it off the spool).
    async fn verify(&mut self) -> Result<(), ApiError> {
        self.write_queue().await?;
        // Without a checksum the hash may go on behind the answer.
        if self.expected.is_none() {
            return Ok(());
        }
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
    /// hash state, fenced by this writer's generation: in the row before
    /// the answer, or as a note on the spool with the row saved behind
    /// the answer ([`Append::checkpoint_noted`]).
    pub async fn checkpoint(&mut self) -> Result<(), ApiError> {
        self.write_queue().await?;
        let lags = self.hashing.is_some() && self.may_lag();
        if lags && self.takes_notes() && self.prior_saved().await {
            return self.checkpoint_noted().await;
        }
        let mut st = self.st.clone();
        match self.hashing.as_ref().filter(|_| self.may_lag()) {
            // The answer need not wait for the hash: the state names where
            // it stands, and a next writer hashes the rest from the spool.
            Some(pipe) => {
                let spool = self.writer.sync().await;
                st.spool = self.holding_written(spool)?;
                let (at, file) = pipe.progress();
                st.set_hasher_at(&file, at);
            }
            // The file is made durable while the hash catches up.
            None => {
                let (h, spool) = tokio::join!(
                    settle(&mut self.hashing, &mut self.hashes),
                    self.writer.sync()
                );
                let h = h?;
                st.spool = self.holding_written(spool)?;
                st.set_hasher(&h.file);
                self.hashes = Some(h);
            }
        }
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
        self.next_sync = self.sync_point_after(self.written);
        Ok(())
    }

    /// A durable point where neither the hash nor the row need be caught
    /// up for the answer: the state goes as a note on the spool, made
    /// durable with its bytes by the same flush, and the row is saved
    /// behind the answer ([`Append::save_behind`]). A row save before the
    /// answer cost 0.3-0.4 ms of each 8 MiB `PATCH` (an SQLite commit and
    /// its fsync, two hand-offs).
    async fn checkpoint_noted(&mut self) -> Result<(), ApiError> {
        let Some((at, file)) = self.hashing.as_ref().map(HashPipe::progress) else {
            return Err(ApiError::storage("a noted durable point without its hash"));
        };
        let mut st = self.st.clone();
        st.spool.len = self.written;
        st.set_hasher_at(&file, at);
        let spool = self.writer.sync_noted(st.note()).await;
        st.spool = self.holding_written(spool)?;
        self.save_behind(st);
        self.next_sync = self.sync_point_after(self.written);
        Ok(())
    }

    /// The state a sync returned, if it holds every byte this writer
    /// handed over and nothing more: anything else (a spool opened at
    /// another length than the state said) must not be saved.
    fn holding_written(&self, synced: std::io::Result<Spool>) -> Result<Spool, ApiError> {
        let spool = synced.map_err(storage_error)?;
        match spool.len == self.written {
            true => Ok(spool),
            false => Err(ApiError::storage(format!(
                "upload {}: the spool holds {} bytes, its writer handed over {}",
                self.row.id, spool.len, self.written
            ))),
        }
    }

    /// Waits for the row save behind the last answer, if one runs (at
    /// most one per writer): true unless it failed or a newer writer
    /// fenced it out. The next durable point then saves before its
    /// answer, so that the failure, or the 409, reaches a client.
    async fn prior_saved(&mut self) -> bool {
        match self.prior_save.take() {
            Some(h) => h.await.unwrap_or(false),
            None => true,
        }
    }

    /// Saves `st` on a task of its own, which this writer's next save
    /// waits for; the row is taken as saved meanwhile. A save that fails
    /// loses nothing (the spool's note has the state).
    fn save_behind(&mut self, st: UploadState) {
        let row = self.row_for(&st);
        let (meta, saved) = (self.state.meta.clone(), row.clone());
        self.prior_save = Some(tokio::spawn(async move {
            match meta.upload_save(&saved, None, Default::default()).await {
                Ok(Some(_)) => true,
                Ok(None) => {
                    tracing::debug!(id = saved.id, "a newer writer took over");
                    false
                }
                Err(e) => {
                    tracing::warn!(id = saved.id, "saving after the answer: {e}");
                    false
                }
            }
        }));
        self.row = row;
        self.st = st;
    }

    /// This writer's row with `st` in it, its expiry pushed on.
    fn row_for(&self, st: &UploadState) -> UploadRow {
        let mut row = self.row.clone();
        row.state = st.to_json();
        row.open = !st.complete;
        row.expires = super::expires(&self.state);
        row
    }

    /// The first durable point after offset `at`.
    fn sync_point_after(&self, at: u64) -> u64 {
        let sync = self.state.config.limits.upload_sync_bytes.max(1);
        (at / sync + 1) * sync
    }

    /// True when a durable point may go as a note on the spool instead of
    /// a row save before the answer: a spool that keeps notes, on a node
    /// whose metadata no other node reads (the note is on its disk).
    fn takes_notes(&self) -> bool {
        self.state.meta.single_process() && self.writer.notes()
    }

    /// Saves `st` (and a media row) if this writer still holds the upload.
    async fn save(
        &mut self,
        st: UploadState,
        media: Option<NewMedia>,
    ) -> Result<Option<MediaRecord>, ApiError> {
        // Its outcome is its own: a failure there left the note.
        self.prior_saved().await;
        let row = self.row_for(&st);
        let quota = self.st.granted.quota();
        match self.state.meta.upload_save(&row, media, quota).await? {
            Some(rec) => {
                self.row = row;
                Ok(rec)
            }
            None => Err(taken_over()),
        }
    }

    /// True when a checkpoint may save a hash that lags behind the offset
    /// (and answer before the hash has caught up): no checksum to verify
    /// (that needs the hash of the whole body), a spool that the next
    /// writer can read back, and not the upload's last byte (its
    /// completion needs the whole hash).
    fn may_lag(&self) -> bool {
        self.expected.is_none()
            && self.state.blobs.spool_readable()
            && self.st.length != Some(self.written)
    }

    /// True while the hash is behind the bytes saved.
    pub fn hash_pending(&self) -> bool {
        self.hashing.is_some()
    }

    /// After the answer: lets the hash catch up, then parks the writer
    /// (or, where it cannot be parked, saves the caught-up hash, so that
    /// the next writer need not read anything back). Holds the upload's
    /// slot and `hold` (its memory reservation) meanwhile: the next request
    /// for the upload waits for it.
    pub async fn settle_and_park<T: Send>(mut self, hold: T) {
        // A settled hash has fed in every batch handed over: it stands at
        // `written`.
        match self.settle_hash().await {
            Ok(h) => self.hashes = Some(h),
            Err(e) => return tracing::warn!(id = self.row.id, "hashing after the answer: {e}"),
        }
        if self.has_unsaved() {
            return;
        }
        if self.can_park() {
            self.park();
        } else if let Some(h) = &self.hashes {
            let mut st = self.st.clone();
            st.set_hasher(&h.file);
            if let Err(e) = self.save(st, None).await {
                tracing::warn!(id = self.row.id, "saving the caught-up hash: {e}");
            }
        }
        // Released last: the batches are counted in it until they go.
        drop(hold);
    }

    fn can_park(&self) -> bool {
        self.state.meta.single_process() && self.writer.parkable()
    }

    /// Leaves the writer open for the upload's next append on this node,
    /// where that is cheap and safe (`lock.rs`); else it closes.
    pub fn park(self) {
        let idle = self.hashing.is_none() && self.batch.is_none() && !self.has_unsaved();
        let Some(h) = self.hashes.as_ref().filter(|_| idle && self.can_park()) else {
            return;
        };
        let p = Parked {
            hasher: h.file.clone(),
            row: self.row,
            st: self.st,
            writer: self.writer,
            saving: self.prior_save,
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
        // Saves land in order (see `prior_save`).
        self.prior_saved().await;
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
    let content_type = match st.media {
        true => media_type(state, &row.id, st).await,
        false => String::new(),
    };
    if st.media {
        // A type told by the bytes, checked once they are there: refused,
        // the upload stays as it was (complete bytes, no item) until it
        // expires or is cancelled.
        st.granted.rules().check_type(&content_type)?;
    }
    let media = st.media.then(|| NewMedia {
        id: row.id.clone(),
        owner: row.owner.clone(),
        field: None,
        filename: st.filename.clone(),
        content_type,
        size: st.offset(),
        sha256,
    });
    row.state = st.to_json();
    row.open = false;
    row.expires = super::expires(state);
    let quota = st.granted.quota();
    match state.meta.upload_save(&row, media, quota).await {
        Ok(Some(rec)) => {
            if rec.is_some() {
                let m = &state.metrics;
                m.files_stored
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(rec)
        }
        Ok(None) => Err(taken_over()),
        Err(e) if e.over_quota.is_some() => {
            remove_refused(state, &row, st.spool.clone()).await;
            Err(e.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// A finished upload its owner's quota has no room for leaves nothing, as
/// a refused upload of any other kind (the 413 tells the client to start
/// again once there is room): its blob goes, then its row. Kept, its bytes
/// would hold storage that no usage counts until the upload expired. If
/// the blob cannot be removed now, the row stays for the janitor to
/// remove both when it expires.
async fn remove_refused(state: &Arc<AppState>, row: &UploadRow, spool: Spool) {
    if let Err(e) = state.blobs.spool_abort(&row.id, spool).await {
        return tracing::warn!(
            id = row.id,
            "removing an upload over quota: {e} (it expires)"
        );
    }
    if let Err(e) = state.meta.upload_remove(&row.id, row.gen).await {
        tracing::warn!(
            id = row.id,
            "removing an upload over quota: {e} (it expires)"
        );
    }
}

/// The finished upload's type: its `filetype`, or when that says nothing,
/// what its first bytes (read back from the finished blob: they may have
/// come through another node) and then its name say
/// (`crate::upload::media_type`). A blob that cannot be read back leaves
/// the name alone to tell.
async fn media_type(state: &Arc<AppState>, id: &str, st: &UploadState) -> String {
    let declared = crate::upload::clean_content_type(st.filetype.as_deref());
    if !crate::upload::unspecific(&declared) {
        return declared;
    }
    let n = st.offset().min(crate::upload::SNIFF_BYTES as u64);
    let mut head = Vec::new();
    if n > 0 {
        match state.blobs.open(id, 0, n).await {
            Ok(mut s) => {
                while let Some(Ok(b)) = std::future::poll_fn(|cx| s.as_mut().poll_next(cx)).await {
                    head.extend_from_slice(&b);
                }
            }
            Err(e) => tracing::debug!(id, error = %e, "reading a finished upload's start"),
        }
    }
    crate::upload::media_type(&declared, &head, st.filename.as_deref())
}

pub(super) fn taken_over() -> ApiError {
    ApiError::new(
        Kind::Conflict,
        "a newer request for this upload took over; resume from its offset",
    )
}
