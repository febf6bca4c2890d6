//! The running hashes of a resumable append: the whole file's SHA-256,
//! carried from request to request in the upload's state (tus checksum
//! extension aside, the media item's `sha256` must be exact after any
//! number of resumes on any node), and a request's own `Upload-Checksum`
//! digest (tus 1.0 checksum extension: `sha1`, `sha256`).
//!
//! The hash runs on the blocking pool beside the disk ([`HashPipe`]); an
//! answer may go before it has caught up, and the state then names where
//! it stands. [`hasher_at_offset`] brings a saved state up to the offset
//! by reading the lag back from the spool.

use super::state::UploadState;
use crate::error::ApiError;
use crate::state::AppState;
use crate::upload::{storage_error, Feed, HashLoop};
use bytes::Bytes;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The digests a body feeds.
pub(super) struct Hashes {
    pub file: Sha256,
    pub check: Option<Check>,
}

pub(super) enum Check {
    Sha1(sha1::Sha1),
    Sha256(Sha256),
}

impl Hashes {
    pub fn update(&mut self, bytes: &[u8]) {
        self.file.update(bytes);
        match &mut self.check {
            Some(Check::Sha1(h)) => h.update(bytes),
            Some(Check::Sha256(h)) => h.update(bytes),
            None => {}
        }
    }
}

/// Hashing on the blocking pool beside the disk: the upload pipeline's
/// [`HashLoop`], fed one aligned batch at a time, reporting after each
/// where the file digest stands.
pub(super) struct HashPipe {
    hashing: HashLoop<Tracked>,
    /// After each batch: the offset the file digest has reached, and the
    /// digest there (what a request that answers before the hash has
    /// caught up saves, see [`super::append::Append::checkpoint`]).
    progress: Arc<std::sync::Mutex<(u64, Sha256)>>,
}

/// The digests, with the offset they have reached, reported after each
/// batch.
struct Tracked {
    h: Hashes,
    at: u64,
    report: Arc<std::sync::Mutex<(u64, Sha256)>>,
}

impl Feed for Tracked {
    fn feed(&mut self, bytes: &[u8]) {
        self.h.update(bytes);
        self.at += bytes.len() as u64;
    }

    fn batch_done(&mut self) {
        *self.report.lock().unwrap_or_else(|p| p.into_inner()) = (self.at, self.h.file.clone());
    }
}

/// Batches waiting for the hash beyond the one it is working on: the hash
/// may fall this far behind the disk, three batches with the one it
/// hashes, before the body waits for it. With one, the body's task waited
/// 170-210 ms per GiB on the hash while the disk, the bottleneck, went
/// short of batches; with two, 10-20 ms. The batches it holds are the
/// newest (the write's two are among them), so an append still holds at
/// most four (`Limits::upload_reserve`).
pub(super) const HASH_QUEUE: usize = 2;

impl HashPipe {
    /// Hashing from offset `at` on.
    pub fn start(h: Hashes, at: u64) -> HashPipe {
        let progress = Arc::new(std::sync::Mutex::new((at, h.file.clone())));
        let report = progress.clone();
        let hashing = HashLoop::start(Tracked { h, at, report }, HASH_QUEUE);
        HashPipe { hashing, progress }
    }

    /// Where the file digest stands now, and the digest there.
    pub fn progress(&self) -> (u64, Sha256) {
        self.progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub async fn send(&mut self, b: Bytes) -> Result<(), ApiError> {
        self.hashing.send(vec![b]).await
    }

    /// Waits for the queued batches and hands back the digests.
    pub async fn finish(self) -> Result<Hashes, ApiError> {
        Ok(self.hashing.finish().await?.h)
    }
}

/// The digests of a [`HashPipe`] once it has fed in everything handed
/// over, or the ones at hand.
pub(super) async fn settle(
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

/// The running hash at the upload's offset: the saved state, brought up
/// to the offset by reading back from the spool the bytes it lags behind
/// (a writer that answered before its hash caught up, then stopped: see
/// [`super::append::Append::checkpoint`]).
pub async fn hasher_at_offset(
    state: &AppState,
    id: &str,
    st: &UploadState,
) -> Result<Sha256, ApiError> {
    let mut h = st.hasher()?;
    let (from, to) = (st.hashed_to(), st.offset());
    if from == to {
        return Ok(h);
    }
    let read = match state.blobs.spool_read(id, from, to - from).await {
        // Finished already (a crash between making the spool the blob and
        // saving that): the same bytes under the blob's name.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            state.blobs.open(id, from, to - from).await.map(Some)
        }
        r => r,
    };
    let mut s = read.map_err(storage_error)?.ok_or_else(|| {
        ApiError::storage("the saved hash lags behind the offset and this store cannot read back")
    })?;
    let mut n = 0u64;
    while let Some(c) = std::future::poll_fn(|cx| s.as_mut().poll_next(cx)).await {
        let c = c.map_err(storage_error)?;
        n += c.len() as u64;
        h = tokio::task::spawn_blocking(move || {
            h.update(&c);
            h
        })
        .await
        .map_err(|e| ApiError::storage(format!("hashing task failed: {e}")))?;
    }
    match n == to - from {
        true => Ok(h),
        false => Err(ApiError::storage(format!(
            "upload {id}: the spool ends {n} bytes after {from}, its state says {to}"
        ))),
    }
}
