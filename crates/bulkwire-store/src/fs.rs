//! Blobs as files: `data/tmp/{id}` while written, `data/blobs/{id}` once
//! committed; a blob's variants in `data/blobs/{id}.v/{name}`, which goes
//! with the blob.
//!
//! Commit is `fsync(file)`, `rename(tmp, blobs)`, `fsync(blobs/)`, the
//! usual recipe for a file that is either absent or complete after a crash
//! (the directory fsync makes the rename itself durable). The `blobs/`
//! directory is opened once, at start-up, and that descriptor is fsynced on
//! every commit: the request path never opens a directory (DESIGN.md "no
//! filesystem search and no `stat`"). Writes run on tokio's blocking pool
//! with the caller's `Bytes` moved in, so chunks are not copied on their
//! way to the kernel, and one write stays in flight while the caller reads
//! and hashes the next chunks: the copy into the page cache runs on the
//! other core instead of between two reads.

use super::direct::Target;
use super::{BlobStore, BlobStream, BlobWriter, BoxFut, Lease, Spool, SpoolWriter};
use bytes::Bytes;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::task::JoinHandle;

/// What a blob's variants directory adds to its id.
const VARIANTS: &str = ".v";

/// Chunk size for reading blobs back.
const READ_CHUNK: usize = 64 * 1024;

/// File-system blob store rooted at a data directory.
#[derive(Debug, Clone)]
pub struct FsBlobStore {
    tmp: PathBuf,
    blobs: PathBuf,
    /// Resumable uploads' spools (`fs_spool.rs`).
    uploads: PathBuf,
    /// `uploads/` itself, open for the directory fsync of each creation.
    uploads_dir: Arc<File>,
    /// One writer's bytes at a time per spool (`fs_spool::Locks`).
    spool_locks: crate::fs_spool::Locks,
    /// `blobs/` itself, open for the directory fsync of each commit.
    blobs_dir: Arc<File>,
    /// Write blobs with `O_DIRECT` where the file system allows it.
    direct: bool,
    /// The file system keeps extended attributes: spools take notes.
    notes: bool,
}

impl FsBlobStore {
    /// Creates `tmp/` and `blobs/` under `data` if missing.
    pub fn open(data: &Path) -> io::Result<FsBlobStore> {
        let tmp = data.join("tmp");
        let blobs = data.join("blobs");
        let uploads = data.join("uploads");
        fs::create_dir_all(&tmp)?;
        fs::create_dir_all(&blobs)?;
        fs::create_dir_all(&uploads)?;
        let blobs_dir = Arc::new(File::open(&blobs)?);
        let uploads_dir = Arc::new(File::open(&uploads)?);
        let notes = crate::fs_spool::notes_work(&uploads);
        Ok(FsBlobStore {
            tmp,
            blobs,
            uploads,
            uploads_dir,
            spool_locks: Default::default(),
            blobs_dir,
            direct: true,
            notes,
        })
    }

    /// Writes blobs through the page cache instead of with `O_DIRECT`
    /// (`direct.rs`), e.g. where they are read back at once.
    pub fn buffered(mut self) -> FsBlobStore {
        self.direct = false;
        self
    }

    pub fn tmp_dir(&self) -> &Path {
        &self.tmp
    }

    pub fn blob_dir(&self) -> &Path {
        &self.blobs
    }

    /// Where resumable uploads' spools are.
    pub fn uploads_dir(&self) -> &Path {
        &self.uploads
    }

    /// Where blob `id`'s variants are.
    fn variants_dir(&self, id: &str) -> PathBuf {
        self.blobs.join(format!("{id}{VARIANTS}"))
    }

    fn spool_paths(&self, id: &str) -> io::Result<crate::fs_spool::FsSpoolPaths> {
        if !crate::is_id(id) {
            let e = format!("{id:?} is not an upload id");
            return Err(io::Error::new(io::ErrorKind::InvalidInput, e));
        }
        Ok(crate::fs_spool::FsSpoolPaths {
            file: self.uploads.join(id),
            fin: self.blobs.join(id),
            dir: self.blobs_dir.clone(),
            spools_dir: self.uploads_dir.clone(),
            direct: self.direct,
            notes: self.notes,
            locks: self.spool_locks.clone(),
            id: id.to_string(),
        })
    }
}

/// Runs blocking file work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(format!("blocking task failed: {e}")))?
}

impl BlobStore for FsBlobStore {
    fn begin<'a>(
        &'a self,
        id: &'a str,
        _lease: Arc<Lease>,
    ) -> BoxFut<'a, io::Result<Box<dyn BlobWriter>>> {
        let tmp = self.tmp.join(id);
        let fin = self.blobs.join(id);
        let dir = self.blobs_dir.clone();
        let direct = self.direct;
        Box::pin(async move {
            let path = tmp.clone();
            let target = blocking(move || Target::create(&path, direct)).await?;
            Ok(Box::new(FsWriter {
                direct: target.is_direct(),
                target: Some(target),
                inflight: None,
                tmp,
                fin,
                dir,
                committed: false,
            }) as Box<dyn BlobWriter>)
        })
    }

    fn open<'a>(
        &'a self,
        id: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, io::Result<BlobStream>> {
        let path = self.blobs.join(id);
        Box::pin(read_range(path, offset, len))
    }

    fn kind(&self) -> &'static str {
        "file"
    }

    fn open_file<'a>(
        &'a self,
        id: &'a str,
        variant: Option<&'a str>,
    ) -> BoxFut<'a, io::Result<Option<std::fs::File>>> {
        Box::pin(async move {
            let path = match variant {
                None => self.blobs.join(id),
                Some(name) => {
                    crate::check_variant(id, name)?;
                    self.variants_dir(id).join(name)
                }
            };
            let f = std::fs::File::open(path)?;
            // Advice only (a larger read-ahead for a sequential reader): a
            // file system without it serves all the same.
            #[cfg(target_os = "linux")]
            let _ = rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::Sequential);
            Ok(Some(f))
        })
    }

    fn presign_get<'a>(
        &'a self,
        _id: &'a str,
        _variant: Option<&'a str>,
        _ttl: std::time::Duration,
        _answer: crate::Answer<'a>,
    ) -> BoxFut<'a, io::Result<Option<String>>> {
        // Files have no URL of their own: the server sends them.
        Box::pin(async { Ok(None) })
    }

    fn spool_read<'a>(
        &'a self,
        id: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, io::Result<Option<BlobStream>>> {
        Box::pin(async move {
            let path = self.spool_paths(id)?.file;
            Ok(Some(read_range(path, offset, len).await?))
        })
    }

    fn spool_readable(&self) -> bool {
        true
    }

    fn spool_note<'a>(&'a self, id: &'a str) -> BoxFut<'a, io::Result<Option<Vec<u8>>>> {
        // Read whether or not this start's probe let writers take notes:
        // an opener goes on from a note a previous start left, so its
        // state must too.
        Box::pin(async move {
            let (path, locks, id) = (
                self.spool_paths(id)?.file,
                self.spool_locks.clone(),
                id.to_string(),
            );
            blocking(move || crate::fs_spool::current_note(&locks, &path, &id)).await
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, io::Result<()>> {
        let path = self.blobs.join(id);
        let variants = self.variants_dir(id);
        Box::pin(async move {
            blocking(move || {
                remove_if_exists(&path)?;
                remove_dir_if_exists(&variants)
            })
            .await
        })
    }

    /// Written to `tmp/`, made durable, then hard-linked to its name: a link
    /// fails where the name exists, so the first variant stays (a rename
    /// would replace it), and a crash leaves a whole file or none.
    fn variant_put<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        bytes: Bytes,
    ) -> BoxFut<'a, io::Result<bool>> {
        Box::pin(async move {
            crate::check_variant(id, name)?;
            let dir = self.variants_dir(id);
            let fin = dir.join(name);
            let tmp = self.tmp.join(format!("{id}.v.{name}.{}", crate::new_id()));
            blocking(move || {
                let written = (|| {
                    let mut f = File::create(&tmp)?;
                    io::Write::write_all(&mut f, &bytes)?;
                    f.sync_all()?;
                    fs::create_dir_all(&dir)?;
                    match fs::hard_link(&tmp, &fin) {
                        Ok(()) => Ok(true),
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                        Err(e) => Err(e),
                    }
                })();
                remove_if_exists(&tmp)?;
                written
            })
            .await
        })
    }

    fn variant_size<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
    ) -> BoxFut<'a, io::Result<Option<u64>>> {
        Box::pin(async move {
            crate::check_variant(id, name)?;
            match tokio::fs::metadata(self.variants_dir(id).join(name)).await {
                Ok(m) => Ok(Some(m.len())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn variant_open<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, io::Result<BlobStream>> {
        Box::pin(async move {
            crate::check_variant(id, name)?;
            read_range(self.variants_dir(id).join(name), offset, len).await
        })
    }

    fn backend(&self) -> &'static str {
        "files"
    }

    /// The local disk, whose faults show on the writes themselves.
    fn ready(&self) -> BoxFut<'_, io::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    fn upload_memory(&self) -> u64 {
        if self.direct {
            crate::STAGING_BYTES as u64
        } else {
            0
        }
    }

    fn abort<'a>(&'a self, id: &'a str, _handle: Option<&'a str>) -> BoxFut<'a, io::Result<()>> {
        let (tmp, fin) = (self.tmp.join(id), self.blobs.join(id));
        let spool = self.uploads.join(id);
        let variants = self.variants_dir(id);
        Box::pin(async move {
            blocking(move || {
                remove_if_exists(&tmp)?;
                // A resumable upload's creation that failed.
                remove_if_exists(&spool)?;
                remove_if_exists(&fin)?;
                remove_dir_if_exists(&variants)
            })
            .await
        })
    }

    fn describe(&self) -> BoxFut<'_, io::Result<String>> {
        let (tmp, direct) = (self.tmp.clone(), self.direct);
        let root = self
            .blobs
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Box::pin(async move {
            // A probe through the same path an upload takes.
            let probe = tmp.join(format!("check-{}", crate::new_id()));
            let p = probe.clone();
            blocking(move || {
                fs::write(&p, b"bulkwire check")?;
                remove_if_exists(&p)
            })
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", probe.display())))?;
            Ok(format!(
                "files under {} ({}), writable",
                root.display(),
                if direct {
                    "direct I/O where the file system allows"
                } else {
                    "buffered I/O"
                }
            ))
        })
    }

    fn spool_create<'a>(
        &'a self,
        id: &'a str,
        _lease: Arc<Lease>,
    ) -> BoxFut<'a, io::Result<Spool>> {
        Box::pin(async move { crate::fs_spool::create(self.spool_paths(id)?).await })
    }

    fn spool_open<'a>(
        &'a self,
        id: &'a str,
        spool: Spool,
    ) -> BoxFut<'a, io::Result<Box<dyn SpoolWriter>>> {
        Box::pin(async move { crate::fs_spool::open(self.spool_paths(id)?, spool).await })
    }

    fn spool_finish<'a>(&'a self, id: &'a str, spool: Spool) -> BoxFut<'a, io::Result<()>> {
        Box::pin(async move { crate::fs_spool::finish(self.spool_paths(id)?, spool.len).await })
    }

    fn spool_abort<'a>(&'a self, id: &'a str, _spool: Spool) -> BoxFut<'a, io::Result<()>> {
        Box::pin(async move { crate::fs_spool::abort(self.spool_paths(id)?).await })
    }

    fn sweep<'a>(
        &'a self,
        keep: &'a (dyn Fn(&str) -> bool + Send + Sync),
    ) -> BoxFut<'a, io::Result<(usize, usize)>> {
        Box::pin(async move {
            // Start-up only, before the listener accepts: plain blocking
            // calls are fine here and `keep` need not be 'static.
            let temps = remove_all(&self.tmp, &|_| false)?;
            // Spools without an upload row: a creation that crashed
            // before its row was inserted.
            let temps = temps + remove_all(&self.uploads, keep)?;
            // A variants directory stays with its blob.
            let keep_blob = |name: &str| keep(name.strip_suffix(VARIANTS).unwrap_or(name));
            let orphans = remove_all(&self.blobs, &keep_blob)?;
            Ok((temps, orphans))
        })
    }
}

pub(crate) fn remove_if_exists(p: &Path) -> io::Result<()> {
    match fs::remove_file(p) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

pub(crate) fn remove_dir_if_exists(p: &Path) -> io::Result<()> {
    match fs::remove_dir_all(p) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Removes the entries of `dir` that `keep` rejects; returns how many.
fn remove_all(dir: &Path, keep: &dyn Fn(&str) -> bool) -> io::Result<usize> {
    let mut n = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if keep(&name.to_string_lossy()) {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            fs::remove_dir_all(&path)?;
        } else {
            remove_if_exists(&path)?;
        }
        n += 1;
    }
    Ok(n)
}

/// A blob being written to `tmp`.
struct FsWriter {
    /// The file, unless a write in flight holds it.
    target: Option<Target>,
    /// The file is open with `O_DIRECT`.
    direct: bool,
    /// The write in flight on the blocking pool; it hands the file back.
    inflight: Option<JoinHandle<io::Result<Target>>>,
    tmp: PathBuf,
    fin: PathBuf,
    /// The store's open `blobs/` directory.
    dir: Arc<File>,
    committed: bool,
}

fn gone() -> io::Error {
    io::Error::other("blob writer used after a failed write")
}

impl FsWriter {
    /// Waits for the write in flight, if any (its error is this call's),
    /// and takes the file back.
    async fn settle(&mut self) -> io::Result<Target> {
        match self.inflight.take() {
            Some(h) => h
                .await
                .map_err(|e| io::Error::other(format!("blocking task failed: {e}")))?,
            None => self.target.take().ok_or_else(gone),
        }
    }
}

impl BlobWriter for FsWriter {
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, io::Result<()>> {
        Box::pin(async move {
            let mut target = self.settle().await?;
            if chunks.is_empty() {
                self.target = Some(target);
                return Ok(());
            }
            self.inflight = Some(tokio::task::spawn_blocking(move || {
                target.write(&chunks)?;
                Ok(target)
            }));
            Ok(())
        })
    }

    fn commit(mut self: Box<Self>) -> BoxFut<'static, io::Result<()>> {
        Box::pin(async move {
            let target = self.settle().await?;
            let (tmp, fin, dir) = (self.tmp.clone(), self.fin.clone(), self.dir.clone());
            blocking(move || {
                let file = target.finish()?;
                file.sync_all()?;
                drop(file);
                fs::rename(&tmp, &fin)?;
                dir.sync_all()
            })
            .await?;
            self.committed = true;
            Ok(())
        })
    }

    fn takes_aligned(&self) -> bool {
        self.direct
    }
}

impl Drop for FsWriter {
    fn drop(&mut self) {
        if !self.committed {
            // An aborted or failed upload leaves no file behind. A write
            // still in flight finishes into the unlinked file, which goes
            // away when that write closes it.
            let _ = remove_if_exists(&self.tmp);
        }
    }
}

/// `len` bytes of the file at `path` from `offset`, in chunks.
async fn read_range(path: PathBuf, offset: u64, len: u64) -> io::Result<BlobStream> {
    let mut f = tokio::fs::File::open(path).await?;
    if offset > 0 {
        f.seek(io::SeekFrom::Start(offset)).await?;
    }
    let cap = READ_CHUNK.min(len.max(1) as usize);
    let s = tokio_util::io::ReaderStream::with_capacity(f.take(len), cap);
    Ok(Box::pin(s) as BlobStream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    async fn read_all(s: &FsBlobStore, id: &str, off: u64, len: u64) -> Vec<u8> {
        let mut st = s.open(id, off, len).await.unwrap();
        let mut v = Vec::new();
        while let Some(c) = st.next().await {
            v.extend_from_slice(&c.unwrap());
        }
        v
    }

    #[tokio::test]
    async fn commit_moves_to_blobs_and_drop_removes_temp() {
        let d = tempfile::tempdir().unwrap();
        let s = FsBlobStore::open(d.path()).unwrap();
        let mut w = s.begin("a1", Lease::detached("a1")).await.unwrap();
        w.write(vec![
            Bytes::from_static(b"hello "),
            Bytes::from_static(b"world"),
        ])
        .await
        .unwrap();
        assert!(s.tmp_dir().join("a1").exists());
        w.commit().await.unwrap();
        assert!(!s.tmp_dir().join("a1").exists());
        assert_eq!(read_all(&s, "a1", 0, 11).await, b"hello world");
        assert_eq!(read_all(&s, "a1", 6, 3).await, b"wor");

        let mut w = s.begin("a2", Lease::detached("a2")).await.unwrap();
        w.write(vec![Bytes::from_static(b"x")]).await.unwrap();
        drop(w);
        assert!(!s.tmp_dir().join("a2").exists());
        assert!(!s.blob_dir().join("a2").exists());
    }

    /// A writer on /dev/full: every write fails with ENOSPC.
    fn full_writer(dir: &Path) -> FsWriter {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        FsWriter {
            target: Some(Target::Buffered(file)),
            direct: false,
            inflight: None,
            tmp: dir.join("never"),
            fin: dir.join("never-either"),
            dir: Arc::new(File::open(dir).unwrap()),
            committed: false,
        }
    }

    #[tokio::test]
    async fn a_write_in_flight_reports_its_error_at_the_next_call() {
        let d = tempfile::tempdir().unwrap();
        let chunk = || vec![Bytes::from_static(b"data")];
        // The write is handed off: its failure is the next write's...
        let mut w = full_writer(d.path());
        w.write(chunk()).await.unwrap();
        let e = w.write(chunk()).await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28), "{e}");
        // ... also when that write is empty, which only waits for it ...
        let mut w = full_writer(d.path());
        w.write(chunk()).await.unwrap();
        let e = w.write(Vec::new()).await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28), "{e}");
        assert!(w.inflight.is_none());
        // ... or the commit's, which then renames nothing.
        let mut w = Box::new(full_writer(d.path()));
        w.write(chunk()).await.unwrap();
        let e = w.commit().await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28), "{e}");
        assert!(!d.path().join("never-either").exists());
    }

    #[tokio::test]
    async fn sweep_removes_temps_and_orphans_only() {
        let d = tempfile::tempdir().unwrap();
        let s = FsBlobStore::open(d.path()).unwrap();
        fs::write(s.tmp_dir().join("t"), b"partial").unwrap();
        fs::write(s.blob_dir().join("kept"), b"k").unwrap();
        fs::write(s.blob_dir().join("orphan"), b"o").unwrap();
        fs::create_dir(s.blob_dir().join("kept.v")).unwrap();
        fs::create_dir(s.blob_dir().join("orphan.v")).unwrap();
        let keep = |id: &str| id == "kept";
        assert_eq!(s.sweep(&keep).await.unwrap(), (1, 2));
        assert!(s.blob_dir().join("kept").exists());
        assert!(s.blob_dir().join("kept.v").exists(), "its variants stay");
        assert!(!s.blob_dir().join("orphan.v").exists());
        assert!(!s.blob_dir().join("orphan").exists());
        assert_eq!(fs::read_dir(s.tmp_dir()).unwrap().count(), 0);
    }

    /// A writer dropped with a write in flight (its request was cut or
    /// taken over) finishes that write before the next writer opens the
    /// spool: nothing of it lands in the file after the next one cut it.
    #[tokio::test]
    async fn a_dropped_spool_writer_ends_before_the_next_opens() {
        let d = tempfile::tempdir().unwrap();
        let s = FsBlobStore::open(d.path()).unwrap();
        let id = crate::new_id();
        let spool = s.spool_create(&id, Lease::detached(&id)).await.unwrap();
        let mut a = s.spool_open(&id, spool.clone()).await.unwrap();
        a.write(vec![Bytes::from(vec![0xAA; 64 << 20])])
            .await
            .unwrap();
        drop(a);
        let mut b = s.spool_open(&id, spool).await.unwrap();
        b.write(vec![Bytes::from(vec![0xBB; 1 << 20])])
            .await
            .unwrap();
        let st = b.sync().await.unwrap();
        b.finish().await.unwrap();
        let blob = s.blob_dir().join(&id);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let got = std::fs::read(&blob).unwrap();
        assert_eq!(got.len() as u64, st.len, "written to after it was finished");
        assert!(got.iter().all(|&b| b == 0xBB), "the dropped writer's bytes");
        assert!(
            s.spool_locks.0.lock().unwrap().is_empty(),
            "no lock outlives its writers"
        );
    }

    /// A store on `dir` whose spools keep notes; none (the test skipped)
    /// where the file system has no extended attributes (old tmpfs, some
    /// FUSE), which fails under CI.
    fn noting_store(dir: &Path) -> Option<FsBlobStore> {
        let s = FsBlobStore::open(dir).unwrap();
        if !s.notes {
            assert!(std::env::var_os("CI").is_none(), "no xattrs under {dir:?}");
            eprintln!("skipped: no extended attributes under {dir:?}");
            return None;
        }
        Some(s)
    }

    /// The blob a noted spool becomes carries no note.
    #[tokio::test]
    async fn a_finished_spool_drops_its_note() {
        let d = tempfile::tempdir().unwrap();
        let Some(s) = noting_store(d.path()) else {
            return;
        };
        let id = crate::new_id();
        let spool = s.spool_create(&id, Lease::detached(&id)).await.unwrap();
        let mut w = s.spool_open(&id, spool).await.unwrap();
        w.write(vec![Bytes::from_static(b"abc")]).await.unwrap();
        w.sync_noted(b"n".to_vec()).await.unwrap();
        let spool_file = s.uploads_dir().join(&id);
        let stored = crate::fs_spool::read_note(&spool_file).unwrap().unwrap();
        assert_eq!(
            stored,
            [3, 0, 0, 0, 0, 0, 0, 0, b'n'],
            "the length, then the note"
        );
        w.finish().await.unwrap();
        let blob = s.blob_dir().join(&id);
        assert_eq!(fs::read(&blob).unwrap(), b"abc");
        assert_eq!(crate::fs_spool::read_note(&blob).unwrap(), None);
    }

    /// A failed `fsync` with a note puts the previous note back, so that
    /// neither a reader nor the next writer takes bytes it may have lost;
    /// where that fails too, the spool's note is in doubt and refused.
    #[tokio::test]
    async fn a_failed_fsync_puts_the_previous_note_back_or_leaves_it_in_doubt() {
        use crate::direct::{FAIL_FSYNC, FAIL_RESTORE};
        let d = tempfile::tempdir().unwrap();
        let Some(s) = noting_store(d.path()) else {
            return;
        };
        let restorable = b"first".to_vec();
        let stuck = [b"first".as_slice(), FAIL_RESTORE].concat();
        for first in [restorable, stuck] {
            let id = crate::new_id();
            let spool = s.spool_create(&id, Lease::detached(&id)).await.unwrap();
            let mut w = s.spool_open(&id, spool.clone()).await.unwrap();
            w.write(vec![Bytes::from_static(b"abc")]).await.unwrap();
            w.sync_noted(first.clone()).await.unwrap();
            w.write(vec![Bytes::from_static(b"defg")]).await.unwrap();
            let second = [b"second".as_slice(), FAIL_FSYNC].concat();
            let e = w.sync_noted(second).await.unwrap_err();
            assert!(e.to_string().contains("injected fault"), "{e}");
            drop(w);
            if first.ends_with(FAIL_RESTORE) {
                let e = s.spool_note(&id).await.unwrap_err();
                assert!(e.to_string().contains("in doubt"), "{e}");
                let e = s.spool_open(&id, spool).await.err().unwrap();
                assert!(e.to_string().contains("in doubt"), "{e}");
                continue;
            }
            assert_eq!(s.spool_note(&id).await.unwrap(), Some(first.clone()));
            let stored = crate::fs_spool::read_note(&s.uploads_dir().join(&id)).unwrap();
            assert_eq!(stored.unwrap()[8..], first[..], "the attribute put back");
            // The next writer opens at the note: the unsynced bytes go.
            let mut w = s.spool_open(&id, spool).await.unwrap();
            assert_eq!(w.sync().await.unwrap().len, 3);
            w.write(vec![Bytes::from_static(b"xyz")]).await.unwrap();
            w.finish().await.unwrap();
            assert_eq!(fs::read(s.blob_dir().join(&id)).unwrap(), b"abcxyz");
        }
    }

    /// A writer says it takes aligned batches exactly when its file is
    /// open with `O_DIRECT`: the server's plain uploads then gather into
    /// them. The server's suites run that path only where the test
    /// directory takes direct I/O, so under CI it must.
    #[tokio::test]
    async fn a_direct_writer_takes_aligned_batches() {
        let d = tempfile::tempdir().unwrap();
        let s = FsBlobStore::open(d.path()).unwrap();
        let w = s.begin("a1", Lease::detached("a1")).await.unwrap();
        if !w.takes_aligned() {
            assert!(std::env::var_os("CI").is_none(), "no O_DIRECT under {d:?}");
            return eprintln!("skipped: no direct I/O under {d:?}");
        }
        let s = s.buffered();
        let w = s.begin("a2", Lease::detached("a2")).await.unwrap();
        assert!(!w.takes_aligned(), "a writer through the page cache");
    }

    #[tokio::test]
    async fn conformance() {
        let d = tempfile::tempdir().unwrap();
        let s: Arc<dyn BlobStore> = Arc::new(FsBlobStore::open(d.path()).unwrap());
        crate::conformance::blob_store(s.clone(), 3 << 20).await;
        crate::conformance::spools(s.clone(), 1 << 20).await;
        crate::conformance::spool_notes(s.clone()).await;
        assert_eq!(fs::read_dir(d.path().join("uploads")).unwrap().count(), 0);
        let m = crate::SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
        crate::conformance::janitor(Arc::new(m), s).await;
    }
}
