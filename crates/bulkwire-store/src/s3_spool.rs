//! Resumable uploads on S3 (see [`crate::spool`] for the layout): one
//! multipart upload at the blob's key, whole parts at fixed offsets, and
//! the bytes after the last whole part in a tail object
//! `PREFIX/tus/ID/RANDOM`, rewritten under a new key at each durable point.
//! Azure's blocks and GCS's part objects (`PREFIX/tus/ID/parts/`, composed
//! at the end: [`crate::gcs`]) are the parts there.
//!
//! Memory: the part being filled (at most `part_size`, read back from the
//! tail when a writer opens) and one part in flight, as for a plain upload
//! ([`crate::BlobStore::upload_memory`]).

use crate::s3::{invalid, Filling, Shared};
use crate::spool::{Spool, SpoolWriter};
use crate::{BoxFut, Lease};
use bytes::Bytes;
use futures_util::StreamExt;
use object_store::multipart::PartId;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::io;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// Where the tail objects of upload `id` live.
fn tails(s3: &Shared, id: &str) -> io::Result<Path> {
    s3.key(id)?;
    Ok(s3.prefix.clone().join("tus").join(id))
}

/// Creates the multipart upload and notes it in the lease before anything
/// else can happen to it.
pub(crate) async fn create(s3: Arc<Shared>, id: &str, lease: Arc<Lease>) -> io::Result<Spool> {
    let key = s3.key(id)?;
    let parts = tails(&s3, id)?.join("parts");
    let upload = s3.create_spool_upload(&key, &parts).await?;
    if let Err(e) = lease.note(&upload).await {
        if let Err(a) = s3.abort_multipart(&key, &upload).await {
            tracing::warn!("{a} (the lease's cleanup will retry)");
        }
        return Err(s3.error("lease_note", &key, io::ErrorKind::Other, e));
    }
    Ok(Spool {
        len: 0,
        handle: Some(upload),
        part_size: s3.part_size as u64,
        parts: Vec::new(),
        tail: None,
    })
}

/// Opens a writer at the saved state: reads the tail back into the part
/// being filled.
pub(crate) async fn open(s3: Arc<Shared>, id: &str, spool: Spool) -> io::Result<S3Spool> {
    let key = s3.key(id)?;
    let (Some(upload), true) = (spool.handle.clone(), spool.part_size > 0) else {
        return Err(invalid(format!(
            "S3 spool of {id}: no multipart upload saved"
        )));
    };
    if !spool.is_consistent() {
        let e = format!("S3 spool of {id}: inconsistent saved state {spool:?}");
        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
    }
    let mut filling = Filling::default();
    if let Some(t) = &spool.tail {
        let tk = tails(&s3, id)?.join(t.as_str());
        let got = s3.timed("get", &tk, s3.store.get(&tk)).await?;
        let mut bytes = s3.timed("get", &tk, got.bytes()).await?;
        if bytes.len() as u64 != spool.tail_len() {
            let e = format!(
                "{} bytes, the saved state says {}",
                bytes.len(),
                spool.tail_len()
            );
            return Err(s3.error("get", &tk, io::ErrorKind::InvalidData, e));
        }
        filling.fill(&mut bytes, spool.part_size as usize);
    }
    Ok(S3Spool {
        s3,
        id: id.to_string(),
        key,
        upload,
        part_size: spool.part_size as usize,
        parts: spool.parts.clone(),
        len: spool.len,
        filling,
        inflight: None,
        tail: spool.tail,
        new_tail: None,
        broken: None,
    })
}

/// Finishes a saved, complete spool without a writer of this node's: a
/// node that died between sending the last byte and saving the upload as
/// complete leaves one. Already finished (the multipart upload is gone and
/// the object has the saved length) is success.
pub(crate) async fn finish_saved(s3: Arc<Shared>, id: &str, spool: Spool) -> io::Result<()> {
    let len = spool.len;
    let r = match open(s3.clone(), id, spool).await {
        Ok(w) => Box::new(w).finish().await,
        Err(e) => Err(e),
    };
    match r {
        Err(_) if is_object(&s3, id, len).await => Ok(()),
        r => r,
    }
}

/// True if blob `id` exists with `len` bytes.
async fn is_object(s3: &Shared, id: &str, len: u64) -> bool {
    let Ok(key) = s3.key(id) else { return false };
    matches!(s3.store.head(&key).await, Ok(m) if m.size == len)
}

/// Removes the multipart upload, every tail object and the blob.
pub(crate) async fn abort(s3: Arc<Shared>, id: &str, spool: Spool) -> io::Result<()> {
    let key = s3.key(id)?;
    if let Some(upload) = &spool.handle {
        s3.abort_multipart(&key, upload).await?;
    }
    remove_tails(&s3, id, None).await?;
    s3.delete(&key).await
}

/// Deletes the tail objects of `id` but `keep`, listing them: a crash
/// between writing a tail and saving the state naming it leaves one that
/// no state names.
async fn remove_tails(s3: &Shared, id: &str, keep: Option<&str>) -> io::Result<()> {
    let dir = tails(s3, id)?;
    let mut list = s3.store.list(Some(&dir));
    let mut keys = Vec::new();
    while let Some(m) = list.next().await {
        let m = m.map_err(s3.fail("list", &dir))?;
        if keep.is_none_or(|k| m.location.filename() != Some(k)) {
            keys.push(m.location);
        }
    }
    for k in keys {
        s3.delete(&k).await?;
    }
    Ok(())
}

pub(crate) struct S3Spool {
    s3: Arc<Shared>,
    id: String,
    key: Path,
    upload: String,
    part_size: usize,
    /// ETags of the whole parts sent and settled.
    parts: Vec<String>,
    /// Bytes handed to writes so far (saved or not).
    len: u64,
    filling: Filling,
    inflight: Option<JoinHandle<io::Result<PartId>>>,
    /// The tail the saved state names.
    tail: Option<String>,
    /// The tail written by the last sync, until `saved` says its fate.
    new_tail: Option<String>,
    /// Why the writer is unusable: an operation failed or was cancelled
    /// half-way (a part may be missing from `parts` while `len` counts
    /// it). A state it would return then could name bytes S3 does not
    /// have, so every later call fails.
    broken: Option<String>,
}

impl S3Spool {
    async fn settle(&mut self) -> io::Result<()> {
        let Some(h) = self.inflight.as_mut() else {
            return Ok(());
        };
        let joined = h.await;
        self.inflight = None;
        let part = joined.map_err(|e| io::Error::other(format!("S3 put_part task: {e}")))??;
        self.parts.push(part.content_id);
        Ok(())
    }

    /// Sends the full part once the previous one is sent. Its number
    /// follows from its offset: the parts before it are all whole.
    async fn send_part(&mut self) -> io::Result<()> {
        self.settle().await?;
        let idx = self.parts.len();
        let cloud = self.s3.cloud;
        if idx >= cloud.max_parts {
            let e = format!("more than {}'s {} parts", cloud.name, cloud.max_parts);
            return Err(self
                .s3
                .error("put_part", &self.key, io::ErrorKind::Other, e));
        }
        let (s3, key, upload) = (self.s3.clone(), self.key.clone(), self.upload.clone());
        let payload = self.filling.take();
        let send = async move { s3.put_part(&key, &upload, idx, payload).await };
        self.inflight = Some(tokio::spawn(send));
        Ok(())
    }

    async fn write_chunks(&mut self, chunks: Vec<Bytes>) -> io::Result<()> {
        if self.inflight.as_ref().is_some_and(|h| h.is_finished()) {
            self.settle().await?;
        }
        for mut chunk in chunks {
            self.len += chunk.len() as u64;
            while !chunk.is_empty() {
                if self.filling.fill(&mut chunk, self.part_size) {
                    self.send_part().await?;
                }
            }
        }
        Ok(())
    }

    /// Writes the bytes after the last whole part under a new tail key.
    async fn put_tail(&mut self) -> io::Result<Option<String>> {
        if self.filling.len == 0 {
            return Ok(None);
        }
        let name = crate::new_id();
        let tk = tails(&self.s3, &self.id)?.join(name.as_str());
        let payload: PutPayload = self.filling.chunks.iter().cloned().collect();
        self.s3.put(&tk, payload).await?;
        Ok(Some(name))
    }

    fn state(&self) -> Spool {
        Spool {
            len: self.len,
            handle: Some(self.upload.clone()),
            part_size: self.part_size as u64,
            parts: self.parts.clone(),
            tail: self.new_tail.clone(),
        }
    }

    async fn complete(&mut self) -> io::Result<()> {
        self.settle().await?;
        if self.len == 0 {
            // S3 completes no upload without a part: an empty blob is a
            // plain PUT.
            self.s3.abort_multipart(&self.key, &self.upload).await?;
            return self.s3.put(&self.key, PutPayload::default()).await;
        }
        if self.filling.len > 0 {
            let last = self.filling.take();
            let idx = self.parts.len();
            let p = self.s3.put_part(&self.key, &self.upload, idx, last).await?;
            self.parts.push(p.content_id);
        }
        let parts = self
            .parts
            .iter()
            .map(|e| PartId {
                content_id: e.clone(),
            })
            .collect();
        self.s3.complete(&self.key, &self.upload, parts).await?;
        if let Err(e) = remove_tails(&self.s3, &self.id, None).await {
            tracing::warn!("{e} (the upload's expiry removes it)");
        }
        Ok(())
    }
}

impl S3Spool {
    /// Runs `op` unless the writer is broken, and breaks it if `op` fails
    /// or is cancelled.
    async fn guarded<T>(
        &mut self,
        op: impl AsyncFnOnce(&mut S3Spool) -> io::Result<T>,
    ) -> io::Result<T> {
        if let Some(e) = &self.broken {
            let e = format!("unusable after an earlier failure: {e}");
            return Err(self.s3.error("spool", &self.key, io::ErrorKind::Other, e));
        }
        self.broken = Some("an operation was cancelled".into());
        let r = op(self).await;
        self.broken = r.as_ref().err().map(|e| e.to_string());
        r
    }

    async fn sync_now(&mut self) -> io::Result<Spool> {
        self.settle().await?;
        // A tail the last sync wrote but nobody saved.
        if let Some(t) = self
            .new_tail
            .take()
            .filter(|t| Some(t) != self.tail.as_ref())
        {
            self.drop_tail(t).await;
        }
        self.new_tail = self.put_tail().await?;
        Ok(self.state())
    }
}

impl SpoolWriter for S3Spool {
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, io::Result<()>> {
        Box::pin(self.guarded(async move |w: &mut S3Spool| w.write_chunks(chunks).await))
    }

    fn sync(&mut self) -> BoxFut<'_, io::Result<Spool>> {
        Box::pin(self.guarded(async |w: &mut S3Spool| w.sync_now().await))
    }

    fn saved(&mut self, ok: bool) -> BoxFut<'_, ()> {
        Box::pin(async move {
            let new = self.new_tail.clone();
            let stale = match ok {
                true => std::mem::replace(&mut self.tail, new),
                false => self.new_tail.take(),
            };
            if let Some(t) = stale.filter(|t| Some(t) != self.tail.as_ref()) {
                self.drop_tail(t).await;
            }
        })
    }

    fn finish(mut self: Box<Self>) -> BoxFut<'static, io::Result<()>> {
        Box::pin(async move {
            self.guarded(async |w: &mut S3Spool| w.complete().await)
                .await
        })
    }

    fn holds_chunks(&self) -> bool {
        true
    }

    /// An idle writer would hold its part being filled.
    fn parkable(&self) -> bool {
        false
    }

    fn sync_noted(&mut self, _note: Vec<u8>) -> BoxFut<'_, io::Result<Spool>> {
        Box::pin(async { Err(crate::spool::no_notes()) })
    }

    fn notes(&self) -> bool {
        // A part or tail object per sync: the row is the only record.
        false
    }
}

impl S3Spool {
    /// Best effort: a tail left behind goes with the upload's end.
    async fn drop_tail(&self, name: String) {
        let Ok(dir) = tails(&self.s3, &self.id) else {
            return;
        };
        if let Err(e) = self.s3.delete(&dir.join(name.as_str())).await {
            tracing::warn!("{e} (removed with the upload)");
        }
    }
}

impl Drop for S3Spool {
    /// A part still in flight is cut: its bytes were not saved, and the
    /// next writer sends that part again.
    fn drop(&mut self) {
        if let Some(h) = self.inflight.take() {
            h.abort();
        }
    }
}
