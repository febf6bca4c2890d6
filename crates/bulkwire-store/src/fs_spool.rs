//! Resumable uploads on files (see [`crate::spool`]): `data/uploads/{id}`,
//! appended to and `fdatasync`ed at each durable point; finished by the
//! same rename into `blobs/` as a commit.
//!
//! Written with `O_DIRECT` where the file system allows it, as plain
//! uploads are (`direct.rs`, for the same reasons: no page-cache copy, and
//! a durable point's `fdatasync` has little left to flush). A writer that
//! resumes inside a block reads that block's bytes back first; a durable
//! point writes the partial last block padded and cuts the file to size.

use crate::direct::Target;
use crate::spool::{Spool, SpoolWriter};
use crate::BoxFut;
use bytes::Bytes;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::fs::{blocking, remove_if_exists};

/// Paths and the open `blobs/` directory, from the store.
pub(crate) struct FsSpoolPaths {
    pub file: PathBuf,
    pub fin: PathBuf,
    pub dir: Arc<File>,
    /// `uploads/`, fsynced after a spool is created.
    pub spools_dir: Arc<File>,
    /// `O_DIRECT` where the file system allows it.
    pub direct: bool,
    pub locks: Locks,
    pub id: String,
}

/// One writer's bytes at a time per spool file. The server lets one
/// request write an upload at a time, but a request that is cut or taken
/// over may leave a write running on the blocking pool: a new writer waits
/// here until every write of the previous one has ended, so that nothing
/// lands in the file after the new writer cut it back. One entry per spool
/// with a writer open or waiting.
#[derive(Clone, Default, Debug)]
pub(crate) struct Locks(
    pub(crate) Arc<std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
);

/// Held by a spool writer and by each of its writes in flight.
struct SpoolLock {
    locks: Locks,
    id: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Locks {
    async fn lock(&self, id: &str) -> Arc<SpoolLock> {
        let m = {
            let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(id.to_string()).or_default().clone()
        };
        let guard = m.lock_owned().await;
        Arc::new(SpoolLock {
            locks: self.clone(),
            id: id.to_string(),
            guard: Some(guard),
        })
    }
}

impl Drop for SpoolLock {
    fn drop(&mut self) {
        let mutex = self
            .guard
            .take()
            .map(|g| tokio::sync::OwnedMutexGuard::mutex(&g).clone());
        let mut map = self.locks.0.lock().unwrap_or_else(|p| p.into_inner());
        // The guard is gone now; the map's reference and `mutex` remain
        // unless someone waits.
        if mutex.is_some_and(|m| Arc::strong_count(&m) == 2) {
            map.remove(&self.id);
        }
    }
}

/// Creates the empty spool file (an existing one is an error: ids are new).
pub(crate) async fn create(p: FsSpoolPaths) -> io::Result<Spool> {
    blocking(move || {
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p.file)?;
        f.sync_all()?;
        // The name too: the row that will name the spool is durable.
        p.spools_dir.sync_all()?;
        Ok(Spool::default())
    })
    .await
}

/// Opens the spool file cut back to the saved length.
pub(crate) async fn open(p: FsSpoolPaths, spool: Spool) -> io::Result<Box<dyn SpoolWriter>> {
    let lock = p.locks.lock(&p.id).await;
    let (path, direct) = (p.file.clone(), p.direct);
    let len = spool.len;
    let target = blocking(move || {
        let at = fs::metadata(&path)?.len();
        if at < len {
            let m = format!("{}: {at} bytes, its saved state says {len}", path.display());
            return Err(io::Error::new(io::ErrorKind::InvalidData, m));
        }
        // Bytes past the saved length were never acknowledged: cut off.
        Target::append_at(&path, len, direct)
    })
    .await?;
    Ok(Box::new(FsSpool {
        file: Some(target),
        pipe: None,
        len,
        paths: p,
        lock,
    }))
}

/// Moves the finished spool to `blobs/`; a spool already moved (a finish
/// whose save was lost) is fine.
pub(crate) async fn finish(p: FsSpoolPaths, len: u64) -> io::Result<()> {
    blocking(move || {
        match fs::metadata(&p.file) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let at = fs::metadata(&p.fin)?.len();
                return match at == len {
                    true => Ok(()),
                    false => Err(io::Error::other(format!(
                        "{}: {at} bytes, expected {len}",
                        p.fin.display()
                    ))),
                };
            }
            r => r?,
        };
        let f = OpenOptions::new().write(true).open(&p.file)?;
        f.set_len(len)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&p.file, &p.fin)?;
        p.dir.sync_all()
    })
    .await
}

/// Removes the spool file and the blob it may have become.
pub(crate) async fn abort(p: FsSpoolPaths) -> io::Result<()> {
    blocking(move || {
        remove_if_exists(&p.file)?;
        remove_if_exists(&p.fin)
    })
    .await
}

struct FsSpool {
    /// The file, unless the write loop holds it.
    file: Option<Target>,
    pipe: Option<WritePipe>,
    /// Bytes handed to writes so far.
    len: u64,
    paths: FsSpoolPaths,
    /// This writer's turn on the file, shared with its write loop.
    lock: Arc<SpoolLock>,
}

/// Writes on the blocking pool, one batch after another as they come
/// through a channel of [`WRITE_QUEUE`] batches: the next write starts as
/// soon as the last one ends, without a round trip through the request's
/// task (which kept the disk idle for two wake-ups per batch). The loop
/// keeps its blocking-pool thread until the writer syncs or ends.
struct WritePipe {
    tx: mpsc::Sender<Vec<Bytes>>,
    done: JoinHandle<io::Result<Target>>,
    /// Set before the channel closes: the loop then makes the file durable
    /// right after its last write, without another trip to the pool.
    sync: Arc<AtomicBool>,
}

/// Batches waiting for the disk beyond the one being written.
const WRITE_QUEUE: usize = 1;

impl WritePipe {
    /// A loop that outlives a dropped writer keeps the turn until its last
    /// write has ended.
    fn start(mut f: Target, turn: Arc<SpoolLock>) -> WritePipe {
        let (tx, mut rx) = mpsc::channel::<Vec<Bytes>>(WRITE_QUEUE);
        let sync = Arc::new(AtomicBool::new(false));
        let then_sync = sync.clone();
        let done = tokio::task::spawn_blocking(move || {
            while let Some(chunks) = rx.blocking_recv() {
                f.write(&chunks)?;
            }
            if then_sync.load(Ordering::Acquire) {
                f.sync()?;
            }
            drop(turn);
            Ok(f)
        });
        WritePipe { tx, done, sync }
    }
}

impl FsSpool {
    /// Waits for the writes handed over and takes the file back.
    async fn settle(&mut self) -> io::Result<Target> {
        self.settle_then(false).await
    }

    /// As [`FsSpool::settle`], making the file durable (`Target::sync`)
    /// when `sync`.
    async fn settle_then(&mut self, sync: bool) -> io::Result<Target> {
        match self.pipe.take() {
            Some(p) => {
                p.sync.store(sync, Ordering::Release);
                drop(p.tx);
                p.done
                    .await
                    .map_err(|e| io::Error::other(format!("blocking task failed: {e}")))?
            }
            None => {
                let mut f = self
                    .file
                    .take()
                    .ok_or_else(|| io::Error::other("spool used after a failed write"))?;
                match sync {
                    true => blocking(move || f.sync().map(|()| f)).await,
                    false => Ok(f),
                }
            }
        }
    }
}

impl SpoolWriter for FsSpool {
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, io::Result<()>> {
        Box::pin(async move {
            if self.pipe.is_none() {
                let f = self.settle().await?;
                self.pipe = Some(WritePipe::start(f, self.lock.clone()));
            }
            self.len += chunks.iter().map(|c| c.len() as u64).sum::<u64>();
            let sent = match &self.pipe {
                Some(p) => p.tx.send(chunks).await.is_ok(),
                None => false,
            };
            match sent {
                true => Ok(()),
                // The loop stopped at a failed write: its error.
                false => Err(self
                    .settle()
                    .await
                    .err()
                    .unwrap_or_else(|| io::Error::other("the write loop ended early"))),
            }
        })
    }

    fn sync(&mut self) -> BoxFut<'_, io::Result<Spool>> {
        Box::pin(async move {
            let f = self.settle_then(true).await?;
            self.file = Some(f);
            Ok(Spool {
                len: self.len,
                ..Spool::default()
            })
        })
    }

    fn parkable(&self) -> bool {
        true
    }

    fn holds_chunks(&self) -> bool {
        // Each write ends before the next is taken; the file keeps nothing.
        false
    }

    fn saved(&mut self, _ok: bool) -> BoxFut<'_, ()> {
        // One file, cut back to the saved length by the next writer.
        Box::pin(async {})
    }

    fn finish(mut self: Box<Self>) -> BoxFut<'static, io::Result<()>> {
        Box::pin(async move {
            let t = self.settle().await?;
            drop(blocking(move || t.finish()).await?);
            let p = FsSpoolPaths {
                file: self.paths.file.clone(),
                fin: self.paths.fin.clone(),
                dir: self.paths.dir.clone(),
                spools_dir: self.paths.spools_dir.clone(),
                direct: self.paths.direct,
                locks: self.paths.locks.clone(),
                id: self.paths.id.clone(),
            };
            finish(p, self.len).await
        })
    }
}
