//! Resumable uploads on files (see [`crate::spool`]): `data/uploads/{id}`,
//! appended to and made durable at each durable point (`fdatasync`, or
//! `fsync` with a note); finished by the same rename into `blobs/` as a
//! commit.
//!
//! Written with `O_DIRECT` where the file system allows it, as plain
//! uploads are (`direct.rs`, for the same reasons: no page-cache copy, and
//! a durable point's `fdatasync` has little left to flush). A writer that
//! resumes inside a block reads that block's bytes back first; a durable
//! point writes the partial last block padded and cuts the file to size.
//!
//! A durable point may carry a note ([`SpoolWriter::sync_noted`]): the
//! extended attribute [`NOTE`] (the spool's length, then the caller's
//! bytes), set before the `fsync`, so that the journal commit that makes
//! the file's new size durable carries the note too, and the flush before
//! that commit the bytes (written with `O_DIRECT`, they have reached the
//! device before the attribute is set; without it there are no notes). A
//! note whose `fsync` has not ended is not read back: while a writer holds
//! the spool, the last note that counted is answered from memory; a failed
//! `fsync` puts the previous attribute back; an opener never cuts the file
//! below the note. The finished blob drops it.

use crate::direct::Target;
use crate::spool::{Spool, SpoolWriter};
use crate::BoxFut;
use bytes::Bytes;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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
    /// Extended attributes work here: syncs may carry notes.
    pub notes: bool,
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
    pub(crate) Arc<std::sync::Mutex<HashMap<String, Arc<Entry>>>>,
    /// Entries kept for good: their note is in doubt ([`Noted::Doubtful`]).
    Arc<std::sync::Mutex<Vec<Arc<Entry>>>>,
);

/// A spool's turn, and the note its writers last made durable.
#[derive(Default, Debug)]
pub(crate) struct Entry {
    turn: Arc<tokio::sync::Mutex<()>>,
    /// What [`current_note`] answers while the entry lives: once a writer
    /// has opened the spool, its attribute may hold a note whose `fsync`
    /// has not ended (or failed).
    note: std::sync::Mutex<Noted>,
}

/// The spool's last durable note, as its entry knows it.
#[derive(Default, Debug, Clone)]
enum Noted {
    /// Not read yet: no writer has opened the spool since the entry was
    /// made, so nothing has set the attribute since its last `fsync`
    /// ended; it is read (under the entry's lock) when asked for.
    #[default]
    Unread,
    /// The last note an `fsync` ended for (as stored: length, then the
    /// caller's bytes), if any.
    Known(Option<Vec<u8>>),
    /// A failed `fsync` whose note could not be put back: the attribute
    /// may name bytes that were lost. The entry is kept (`Locks::doubt`).
    Doubtful,
}

impl Entry {
    fn note(&self) -> std::sync::MutexGuard<'_, Noted> {
        self.note.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last durable note (as stored), reading the attribute of the
    /// spool at `path` if nobody has yet.
    fn durable_note(&self, path: &std::path::Path) -> io::Result<Option<Vec<u8>>> {
        let mut g = self.note();
        if let Noted::Unread = *g {
            *g = Noted::Known(stored_note(path)?);
        }
        match &*g {
            Noted::Known(n) => Ok(n.clone()),
            _ => Err(io::Error::other(format!(
                "{}: its note is in doubt after a failed fsync",
                path.display()
            ))),
        }
    }
}

/// Held by a spool writer and by each of its writes in flight.
struct SpoolLock {
    locks: Locks,
    id: String,
    entry: Arc<Entry>,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Locks {
    fn entry(&self, id: &str) -> Arc<Entry> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(id.to_string()).or_default().clone()
    }

    /// Drops the map's entry for `id` if only `held` (the caller's) and
    /// the map hold it.
    fn release(&self, id: &str, held: &Arc<Entry>) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if Arc::strong_count(held) == 2 {
            map.remove(id);
        }
    }

    async fn lock(&self, id: &str) -> Arc<SpoolLock> {
        let entry = self.entry(id);
        let guard = entry.turn.clone().lock_owned().await;
        Arc::new(SpoolLock {
            locks: self.clone(),
            id: id.to_string(),
            entry,
            guard: Some(guard),
        })
    }
}

impl SpoolLock {
    /// After a failed `fsync` with a note: the bytes may be lost, so the
    /// attribute goes back to the last note that counted (opened writers
    /// always know it), so that nobody takes this one once its writer is
    /// gone; if that fails too, the spool's note stays in doubt.
    fn doubt_note(&self, f: &Target) {
        let mut g = self.entry.note();
        let Noted::Known(last) = g.clone() else {
            return;
        };
        if let Err(r) = f.restore_note(NOTE, last.as_deref()) {
            tracing::error!("spool {}: putting its note back: {r}", self.id);
            *g = Noted::Doubtful;
            let mut kept = self.locks.1.lock().unwrap_or_else(|p| p.into_inner());
            kept.push(self.entry.clone());
        }
    }
}

impl Drop for SpoolLock {
    fn drop(&mut self) {
        drop(self.guard.take());
        // The map's reference and this one remain unless someone waits.
        self.locks.release(&self.id, &self.entry);
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

/// Opens the spool file cut back to the saved length, or to its note's
/// where that is ahead (a state saved behind its answer, not yet): the
/// caller takes the note ([`current_note`]) for its state.
pub(crate) async fn open(p: FsSpoolPaths, spool: Spool) -> io::Result<Box<dyn SpoolWriter>> {
    let lock = p.locks.lock(&p.id).await;
    let (path, direct, turn) = (p.file.clone(), p.direct, lock.clone());
    let (target, len) = blocking(move || {
        // Held until the file is cut: a dropped open must not let the
        // next writer in meanwhile.
        let turn = turn;
        let noted = turn.entry.durable_note(&path)?;
        let at = fs::metadata(&path)?.len();
        let len = noted.as_deref().map_or(0, note_len).max(spool.len);
        if at < len {
            let m = format!("{}: {at} bytes, its saved state says {len}", path.display());
            return Err(io::Error::new(io::ErrorKind::InvalidData, m));
        }
        // Bytes past the saved length were never acknowledged: cut off.
        Ok((Target::append_at(&path, len, direct)?, len))
    })
    .await?;
    Ok(Box::new(FsSpool {
        direct_target: target.is_direct(),
        file: Some(target),
        pipe: None,
        len,
        paths: p,
        lock,
    }))
}

/// The caller's bytes of spool `id`'s last durable note, if any: as its
/// entry knows it once a writer has opened the spool (the attribute may
/// then be a note whose `fsync` has not ended), else read from the
/// attribute under the entry's lock, so that no writer opens meanwhile.
pub(crate) fn current_note(
    locks: &Locks,
    path: &std::path::Path,
    id: &str,
) -> io::Result<Option<Vec<u8>>> {
    let entry = locks.entry(id);
    let stored = entry.durable_note(path);
    locks.release(id, &entry);
    Ok(stored?.map(|mut n| n.split_off(NOTE_LEN.min(n.len()))))
}

/// The note stored on the spool at `path`, unless it names more bytes
/// than the file has (then it never counted); none without the file.
fn stored_note(path: &std::path::Path) -> io::Result<Option<Vec<u8>>> {
    let at = match fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(read_note(path)?.filter(|n| note_len(n) <= at))
}

/// Bytes of the length that starts a stored note.
const NOTE_LEN: usize = 8;

/// The spool length a stored note was made at (0 if it is malformed).
fn note_len(stored: &[u8]) -> u64 {
    stored
        .get(..NOTE_LEN)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// The extended attribute that holds a spool's note.
pub(crate) const NOTE: &str = "user.bulkwire.note";

/// True when files under `dir` take extended attributes (ext4, xfs,
/// btrfs, tmpfs since Linux 6.6): tried on a scratch file. Notes assume a
/// file system that commits an attribute with the inode's other changes
/// in its journal (ext4, xfs, btrfs do).
pub(crate) fn notes_work(dir: &std::path::Path) -> bool {
    let probe = dir.join(format!(".xattr-probe-{}", std::process::id()));
    let ok = File::create(&probe).is_ok_and(|f| {
        rustix::fs::fsetxattr(&f, NOTE, b"1", rustix::fs::XattrFlags::empty()).is_ok()
    });
    let _ = fs::remove_file(&probe);
    ok
}

/// The note on the spool file at `path`; `None` without one or without
/// the file.
pub(crate) fn read_note(path: &std::path::Path) -> io::Result<Option<Vec<u8>>> {
    let mut buf = vec![0u8; NOTE_LEN + NOTE_MAX];
    match rustix::fs::getxattr(path, NOTE, &mut buf[..]) {
        Ok(n) => {
            buf.truncate(n);
            Ok(Some(buf))
        }
        // No attribute, no file, or no attributes here.
        Err(rustix::io::Errno::NODATA | rustix::io::Errno::NOENT | rustix::io::Errno::NOTSUP) => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The longest spool note ([`SpoolWriter::sync_noted`]): about what one
/// extended attribute may hold on ext4 (a block, less its header).
pub const NOTE_MAX: usize = 4000;

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
        // The blob has no use for the spool's last note.
        match rustix::fs::fremovexattr(&f, NOTE) {
            Ok(()) | Err(rustix::io::Errno::NODATA | rustix::io::Errno::NOTSUP) => {}
            Err(e) => return Err(e.into()),
        }
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
    /// The file is written with `O_DIRECT`: each write has reached the
    /// device when it returns, so the flush before the journal commit
    /// that carries a note covers the bytes (through the page cache, a
    /// commit could carry the note before the bytes are written back).
    direct_target: bool,
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
    then: Arc<Mutex<Then>>,
}

/// What a writer's file gets once its writes have ended.
enum Then {
    Nothing,
    Sync,
    /// A sync carrying a note ([`NOTE`], stored with its length first).
    SyncNoted(Vec<u8>),
}

impl Then {
    fn run(self, f: &mut Target, turn: &SpoolLock) -> io::Result<()> {
        match self {
            Then::Nothing => Ok(()),
            Then::Sync => f.sync(),
            Then::SyncNoted(note) => match f.sync_noted(NOTE, &note) {
                Ok(()) => {
                    *turn.entry.note() = Noted::Known(Some(note));
                    Ok(())
                }
                Err(e) => {
                    turn.doubt_note(f);
                    Err(e)
                }
            },
        }
    }
}

/// Batches waiting for the disk beyond the one being written.
const WRITE_QUEUE: usize = 1;

impl WritePipe {
    /// A loop that outlives a dropped writer keeps the turn until its last
    /// write has ended.
    fn start(mut f: Target, turn: Arc<SpoolLock>) -> WritePipe {
        let (tx, mut rx) = mpsc::channel::<Vec<Bytes>>(WRITE_QUEUE);
        let then = Arc::new(Mutex::new(Then::Nothing));
        let at_end = then.clone();
        let done = tokio::task::spawn_blocking(move || {
            while let Some(chunks) = rx.blocking_recv() {
                f.write(&chunks)?;
            }
            let then = std::mem::replace(&mut *then_of(&at_end), Then::Nothing);
            then.run(&mut f, &turn)?;
            drop(turn);
            Ok(f)
        });
        WritePipe { tx, done, then }
    }
}

fn then_of(m: &Mutex<Then>) -> std::sync::MutexGuard<'_, Then> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FsSpool {
    /// Waits for the writes handed over and takes the file back.
    async fn settle(&mut self) -> io::Result<Target> {
        self.settle_then(Then::Nothing).await
    }

    /// As [`FsSpool::settle`], then `then` on the file (on the write
    /// loop's thread when there is one).
    async fn settle_then(&mut self, then: Then) -> io::Result<Target> {
        match self.pipe.take() {
            Some(p) => {
                *then_of(&p.then) = then;
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
                let turn = self.lock.clone();
                match then {
                    Then::Nothing => Ok(f),
                    then => blocking(move || then.run(&mut f, &turn).map(|()| f)).await,
                }
            }
        }
    }

    /// Syncs (`then`), keeps the file, and returns the state.
    async fn sync_with(&mut self, then: Then) -> io::Result<Spool> {
        let f = self.settle_then(then).await?;
        self.file = Some(f);
        Ok(Spool {
            len: self.len,
            ..Spool::default()
        })
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
        Box::pin(self.sync_with(Then::Sync))
    }

    fn sync_noted(&mut self, note: Vec<u8>) -> BoxFut<'_, io::Result<Spool>> {
        Box::pin(async move {
            if !self.notes() {
                return Err(crate::spool::no_notes());
            }
            if note.len() > NOTE_MAX {
                let m = format!("a spool note is at most {NOTE_MAX} bytes");
                return Err(io::Error::new(io::ErrorKind::InvalidInput, m));
            }
            // The length first: an opener never cuts below it.
            let mut stored = self.len.to_le_bytes().to_vec();
            stored.extend_from_slice(&note);
            self.sync_with(Then::SyncNoted(stored)).await
        })
    }

    fn notes(&self) -> bool {
        self.paths.notes && self.direct_target
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
                notes: self.paths.notes,
                locks: self.paths.locks.clone(),
                id: self.paths.id.clone(),
            };
            finish(p, self.len).await
        })
    }
}
