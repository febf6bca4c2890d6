//! The open temp file of a blob being written: through the page cache, or,
//! where the file system takes it (Linux ext4, xfs, …), with `O_DIRECT`.
//!
//! Why direct I/O: a large upload's bytes are written once and not read
//! soon. Through the page cache the kernel copies every byte into newly
//! allocated cache pages (the single largest cost of a 1 GiB upload here,
//! more than SHA-256), and the commit's fsync then waits for all of them.
//! With `O_DIRECT` the device reads the bytes from our buffer: one copy
//! into an aligned buffer, no page allocation, and nothing left to flush.
//!
//! `O_DIRECT` wants the buffer address, the file offset and the length
//! aligned to the device's logical block size; [`ALIGN`] (4 KiB) covers
//! every common one. Whole blocks are written as they fill; the last,
//! partial block is written padded with zeros and the file then cut to its
//! size (`ftruncate`), so no `fcntl` is needed to leave direct mode.
//!
//! A writer that gathers its bytes into an [`AlignedBatch`] (a resumable
//! upload's append, a plain upload's file sink) spares the staging copy:
//! an aligned chunk of whole blocks goes to the device straight from the
//! caller's memory, so the write job is the device's time alone and the
//! copy runs on the thread that gathered the bytes, beside the previous
//! write.

use bytes::Bytes;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Alignment of address, offset and length for `O_DIRECT`.
pub const ALIGN: usize = 4096;
/// The aligned staging buffer: each direct write is up to this long.
const DIRECT_BUF: usize = 512 * 1024;
/// Memory one write in flight holds for its staging.
pub const STAGING_BYTES: usize = DIRECT_BUF + ALIGN;

/// A temp file open for writing.
pub(super) enum Target {
    Buffered(File),
    Direct(Direct),
}

/// A file open with `O_DIRECT`, and the bytes after its last whole block.
pub(super) struct Direct {
    file: File,
    /// Fewer than [`ALIGN`] bytes, written with the next batch.
    tail: Vec<u8>,
    /// Bytes written to the file so far (a multiple of `ALIGN`).
    offset: u64,
}

/// The aligned buffer one write goes through. It lives only for that write,
/// so an idle writer (a SOAP attachment waiting for the envelope) holds no
/// more than its tail.
struct Staging {
    /// Over-allocated by `ALIGN`; the aligned part starts at `at`.
    buf: Vec<u8>,
    at: usize,
    held: usize,
}

impl Target {
    /// Creates `path` (it must not exist), in direct mode if `direct` and
    /// the file system allows it.
    pub(super) fn create(path: &Path, direct: bool) -> io::Result<Target> {
        let Some(flag) = direct.then(direct_flag).flatten() else {
            return Ok(Target::Buffered(create(path, 0)?));
        };
        match create(path, flag) {
            Ok(file) => Ok(Target::Direct(Direct::new(file))),
            // EINVAL: no direct I/O here (tmpfs before Linux 6.6, some
            // FUSE and network file systems). The file may exist by now.
            Err(e) if e.raw_os_error() == Some(22) => {
                let f = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(path)?;
                Ok(Target::Buffered(f))
            }
            Err(e) => Err(e),
        }
    }

    /// Appends the chunks.
    pub(super) fn write(&mut self, chunks: &[Bytes]) -> io::Result<()> {
        match self {
            Target::Buffered(f) => write_all_vectored(f, chunks),
            Target::Direct(d) => d.write(chunks),
        }
    }

    /// Opens an existing file to append at `len` (a resumable upload's
    /// spool): everything after `len` is cut off first. In direct mode the
    /// bytes of the last partial block are read back, so that writes stay
    /// block-aligned.
    pub(super) fn append_at(path: &Path, len: u64, direct: bool) -> io::Result<Target> {
        let mut f = OpenOptions::new().read(true).write(true).open(path)?;
        // Usually nothing to cut (the last writer ended on a durable
        // point), and a truncate is an inode update.
        if f.metadata()?.len() != len {
            f.set_len(len)?;
        }
        let aligned = len / ALIGN as u64 * ALIGN as u64;
        let flag = direct.then(direct_flag).flatten();
        let d = flag.map(|flag| OpenOptions::new().write(true).custom_flags(flag).open(path));
        match d {
            Some(Ok(file)) => {
                let mut tail = vec![0u8; (len - aligned) as usize];
                f.read_exact_at(&mut tail, aligned)?;
                Ok(Target::Direct(Direct {
                    file,
                    tail,
                    offset: aligned,
                }))
            }
            // No direct I/O here (EINVAL): through the page cache.
            Some(Err(e)) if e.raw_os_error() != Some(22) => Err(e),
            _ => {
                std::io::Seek::seek(&mut f, io::SeekFrom::Start(len))?;
                Ok(Target::Buffered(f))
            }
        }
    }

    /// Makes everything written so far durable (`fdatasync`), and stays
    /// open for more: in direct mode the partial last block is written
    /// padded and the file cut to its size, and kept to be written again.
    pub(super) fn sync(&mut self) -> io::Result<()> {
        match self {
            Target::Buffered(f) => f.sync_data(),
            Target::Direct(d) => {
                d.write_tail()?;
                d.file.sync_data()
            }
        }
    }

    /// As [`Target::sync`], with `note` set as extended attribute `name`
    /// before one `fsync` (not `fdatasync`: it must carry the attribute)
    /// makes the bytes, the size and the note durable together.
    pub(super) fn sync_noted(&mut self, name: &str, note: &[u8]) -> io::Result<()> {
        if let Target::Direct(d) = self {
            d.write_tail()?;
        }
        let file = self.file();
        rustix::fs::fsetxattr(file, name, note, rustix::fs::XattrFlags::empty())?;
        #[cfg(test)]
        injected(note, FAIL_FSYNC)?;
        file.sync_all()
    }

    /// Sets attribute `name` back to `last`, or removes it without one.
    pub(super) fn restore_note(&self, name: &str, last: Option<&[u8]>) -> io::Result<()> {
        let file = self.file();
        #[cfg(test)]
        injected(last.unwrap_or_default(), FAIL_RESTORE)?;
        let r = match last {
            Some(v) => rustix::fs::fsetxattr(file, name, v, rustix::fs::XattrFlags::empty()),
            None => rustix::fs::fremovexattr(file, name),
        };
        match r {
            Ok(()) | Err(rustix::io::Errno::NODATA) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn file(&self) -> &File {
        match self {
            Target::Buffered(f) => f,
            Target::Direct(d) => &d.file,
        }
    }

    /// Writes whatever is held and hands back the file, complete, for the
    /// commit's fsync.
    pub(super) fn finish(self) -> io::Result<File> {
        match self {
            Target::Buffered(f) => Ok(f),
            Target::Direct(d) => d.finish(),
        }
    }

    pub(super) fn is_direct(&self) -> bool {
        matches!(self, Target::Direct(_))
    }
}

#[cfg(target_os = "linux")]
fn direct_flag() -> Option<i32> {
    Some(rustix::fs::OFlags::DIRECT.bits() as i32)
}

#[cfg(not(target_os = "linux"))]
fn direct_flag() -> Option<i32> {
    None
}

/// `create_new`: ids are random, a clash means something is wrong.
fn create(path: &Path, flags: i32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(flags)
        .open(path)
}

impl Direct {
    fn new(file: File) -> Direct {
        Direct {
            file,
            tail: Vec::with_capacity(ALIGN),
            offset: 0,
        }
    }

    fn write(&mut self, chunks: &[Bytes]) -> io::Result<()> {
        let chunks = self.write_aligned(chunks)?;
        if chunks.is_empty() {
            return Ok(());
        }
        let mut st = Staging::new();
        st.push(&self.tail, &self.file, &mut self.offset)?;
        for c in chunks {
            st.push(c, &self.file, &mut self.offset)?;
        }
        st.write_blocks(&self.file, &mut self.offset)?;
        self.tail.clear();
        self.tail.extend_from_slice(st.held());
        Ok(())
    }

    /// Writes the leading chunks that start on a block in memory and in
    /// the file straight from their memory; the first that does not (and
    /// everything after it) is left for the staging buffer. A chunk's last
    /// partial block becomes the tail.
    fn write_aligned<'c>(&mut self, mut chunks: &'c [Bytes]) -> io::Result<&'c [Bytes]> {
        while let Some((c, rest)) = chunks.split_first() {
            if !self.tail.is_empty() || c.as_ptr().align_offset(ALIGN) != 0 {
                break;
            }
            let whole = c.len() / ALIGN * ALIGN;
            self.file.write_all_at(&c[..whole], self.offset)?;
            self.offset += whole as u64;
            self.tail.extend_from_slice(&c[whole..]);
            chunks = rest;
        }
        Ok(chunks)
    }

    /// The last partial block is written padded with zeros, then the file
    /// is cut to its size.
    fn finish(mut self) -> io::Result<File> {
        self.write_tail()?;
        Ok(self.file)
    }

    /// Writes the partial last block padded with zeros at its aligned
    /// offset and cuts the file to its size; the block stays held (the
    /// next write rewrites it whole).
    fn write_tail(&mut self) -> io::Result<()> {
        if self.tail.is_empty() {
            return Ok(());
        }
        let size = self.offset + self.tail.len() as u64;
        let mut st = Staging::new();
        let mut at_offset = self.offset;
        st.push(&self.tail, &self.file, &mut at_offset)?;
        let at = st.at;
        st.buf[at + st.held..at + ALIGN].fill(0);
        self.file
            .write_all_at(&st.buf[at..at + ALIGN], self.offset)?;
        self.file.set_len(size)
    }
}

impl Staging {
    fn new() -> Staging {
        let buf = vec![0u8; DIRECT_BUF + ALIGN];
        let at = buf.as_ptr().align_offset(ALIGN);
        Staging { buf, at, held: 0 }
    }

    fn held(&self) -> &[u8] {
        &self.buf[self.at..self.at + self.held]
    }

    /// Copies `bytes` in, writing whole blocks at `offset` when full.
    fn push(&mut self, mut bytes: &[u8], file: &File, offset: &mut u64) -> io::Result<()> {
        while !bytes.is_empty() {
            let n = (DIRECT_BUF - self.held).min(bytes.len());
            let to = self.at + self.held;
            self.buf[to..to + n].copy_from_slice(&bytes[..n]);
            self.held += n;
            bytes = &bytes[n..];
            if self.held == DIRECT_BUF {
                self.write_blocks(file, offset)?;
            }
        }
        Ok(())
    }

    /// Writes the held whole blocks; the partial rest moves to the front.
    fn write_blocks(&mut self, file: &File, offset: &mut u64) -> io::Result<()> {
        let whole = self.held / ALIGN * ALIGN;
        if whole == 0 {
            return Ok(());
        }
        let at = self.at;
        file.write_all_at(&self.buf[at..at + whole], *offset)?;
        *offset += whole as u64;
        self.buf.copy_within(at + whole..at + self.held, at);
        self.held -= whole;
        Ok(())
    }
}

/// Bytes gathered by copying into memory aligned for `O_DIRECT`, then
/// frozen into [`Bytes`] that a direct write takes as they are. The
/// capacity is fixed at creation: bytes past it would move the buffer, so
/// [`AlignedBatch::extend`] refuses them.
pub struct AlignedBatch {
    /// Over-allocated by `ALIGN`; the aligned part starts at `at`.
    buf: Vec<u8>,
    at: usize,
}

impl AlignedBatch {
    /// Room for `cap` bytes; nothing is touched until it is filled.
    pub fn with_capacity(cap: usize) -> AlignedBatch {
        let mut buf: Vec<u8> = Vec::with_capacity(cap + ALIGN);
        let at = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
        buf.resize(at, 0);
        AlignedBatch { buf, at }
    }

    pub fn len(&self) -> usize {
        self.buf.len() - self.at
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Room left.
    pub fn room(&self) -> usize {
        self.buf.capacity() - self.buf.len()
    }

    /// Empties the batch, keeping its memory.
    fn clear(&mut self) {
        self.buf.truncate(self.at);
    }

    /// Appends `bytes`, which must fit in [`AlignedBatch::room`].
    pub fn extend(&mut self, bytes: &[u8]) {
        assert!(bytes.len() <= self.room(), "an aligned batch cannot grow");
        self.buf.extend_from_slice(bytes);
    }
}

impl AsRef<[u8]> for AlignedBatch {
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.at..]
    }
}

/// The owner behind a frozen batch's [`Bytes`]; the pool keeps a second
/// reference to see when the last reader has let go.
struct Shared(Arc<AlignedBatch>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.as_ref().as_ref()
    }
}

/// Idle batches of one size, shared by a process's writers. Fresh memory
/// is faulted in page by page as it is first written, which cost more
/// than the copy itself (60,000 page faults per GiB); a batch used again
/// is not. At most [`AlignedPool::IDLE`] are kept: what one upload keeps
/// in flight. Idle ones are outside the server's `memory_budget` (a batch
/// counts in an upload's reservation once taken); the book says so (docs/src/security.md).
pub struct AlignedPool {
    size: usize,
    idle: Mutex<Vec<AlignedBatch>>,
}

impl AlignedPool {
    /// Idle batches kept: one writer's gathering batch and the
    /// [`Batches::KEEP`] it may have in flight.
    pub const IDLE: usize = Batches::KEEP + 1;

    /// A pool of batches of `size` bytes.
    pub fn new(size: usize) -> Arc<AlignedPool> {
        Arc::new(AlignedPool {
            size,
            idle: Mutex::new(Vec::new()),
        })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    fn take(&self) -> AlignedBatch {
        let b = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        b.unwrap_or_else(|| AlignedBatch::with_capacity(self.size))
    }

    fn give(&self, mut b: AlignedBatch) {
        b.clear();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < Self::IDLE {
            idle.push(b);
        }
    }
}

/// One writer's batches: taken from the pool, frozen into [`Bytes`] for
/// the hash and the disk, and filled again once both have let go;
/// returned to the pool when the writer ends.
pub struct Batches {
    pool: Arc<AlignedPool>,
    /// Frozen batches, oldest first, at most [`Batches::KEEP`]; older ones
    /// are freed by their last reader.
    out: VecDeque<Arc<AlignedBatch>>,
}

impl Batches {
    /// Frozen batches followed: enough for the hash's window (one being
    /// hashed, two waiting), which holds the write's (one being written,
    /// one waiting), and one more.
    pub const KEEP: usize = 4;

    pub fn new(pool: Arc<AlignedPool>) -> Batches {
        Batches {
            pool,
            out: VecDeque::new(),
        }
    }

    /// An empty batch: the oldest frozen one if nobody reads it any more,
    /// else one from the pool.
    pub fn batch(&mut self) -> AlignedBatch {
        if let Some(oldest) = self.out.pop_front() {
            match Arc::try_unwrap(oldest) {
                Ok(mut b) => {
                    b.clear();
                    return b;
                }
                Err(still_read) => self.out.push_front(still_read),
            }
        }
        self.pool.take()
    }

    /// The batch's bytes, without a copy.
    pub fn freeze(&mut self, b: AlignedBatch) -> Bytes {
        let b = Arc::new(b);
        let bytes = Bytes::from_owner(Shared(b.clone()));
        self.out.push_back(b);
        if self.out.len() > Self::KEEP {
            self.out.pop_front();
        }
        bytes
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        for b in self.out.drain(..) {
            if let Ok(b) = Arc::try_unwrap(b) {
                self.pool.give(b);
            }
        }
    }
}

/// Writes every chunk with as few `writev` calls as the kernel allows.
/// One call per batch rather than one per chunk matters beyond the syscall
/// count: the page cache sizes its folios by the length of the write, and
/// copying into a few large folios is several times faster than into many
/// small ones.
fn write_all_vectored(file: &mut File, chunks: &[Bytes]) -> io::Result<()> {
    let slices: Vec<IoSlice<'_>> = chunks.iter().map(|c| IoSlice::new(c)).collect();
    let mut done = loop {
        match file.write_vectored(&slices) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => break r?,
        }
    };
    // A short write (rare on a file): the rest chunk by chunk.
    for c in chunks {
        if done >= c.len() {
            done -= c.len();
            continue;
        }
        file.write_all(&c[done..])?;
        done = 0;
    }
    Ok(())
}

/// A note holding this fails its `fsync` (after the attribute is set),
/// in this crate's tests: the faults of a disk, without one.
#[cfg(test)]
pub(crate) const FAIL_FSYNC: &[u8] = b"<fail the fsync>";

/// A note holding this cannot be put back after a failed `fsync`.
#[cfg(test)]
pub(crate) const FAIL_RESTORE: &[u8] = b"<fail the restore>";

#[cfg(test)]
fn injected(note: &[u8], mark: &[u8]) -> io::Result<()> {
    match note.windows(mark.len()).any(|w| w == mark) {
        true => Err(io::Error::other("injected fault")),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks of awkward sizes around the block and buffer sizes.
    fn chunks() -> (Vec<Bytes>, Vec<u8>) {
        let sizes = [
            1,
            ALIGN - 1,
            ALIGN,
            ALIGN + 1,
            100_000,
            DIRECT_BUF,
            DIRECT_BUF + 3,
            7,
        ];
        let mut all = Vec::new();
        let chunks = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let c: Vec<u8> = (0..n).map(|j| (j * 31 + i * 7) as u8).collect();
                all.extend_from_slice(&c);
                Bytes::from(c)
            })
            .collect();
        (chunks, all)
    }

    /// The temp dir takes O_DIRECT (the build saw it), so the direct path is
    /// the one the test above checked, not the fallback.
    #[cfg_attr(
        missing_odirect,
        ignore = "needs a temp dir with O_DIRECT (missing when this test was built; with CI set it fails instead)"
    )]
    #[test]
    fn direct_mode_is_taken_where_the_file_system_allows_it() {
        bulkwire_runtimes::need(bulkwire_runtimes::Runtime::ODirect);
        let d = tempfile::tempdir().unwrap();
        let t = Target::create(&d.path().join("f"), true).unwrap();
        assert!(t.is_direct(), "no O_DIRECT on {:?}", d.path());
    }

    #[test]
    fn both_modes_store_exactly_the_bytes() {
        let d = tempfile::tempdir().unwrap();
        let (chunks, all) = chunks();
        for direct in [false, true] {
            for split in [1, 3, chunks.len()] {
                let path = d.path().join(format!("f-{direct}-{split}"));
                let mut t = Target::create(&path, direct).unwrap();
                // Where the file system refuses O_DIRECT, `direct` falls back to
                // buffered writes, checked the same way; the test below makes sure
                // the direct path itself ran.
                if !direct {
                    assert!(!t.is_direct());
                }
                for batch in chunks.chunks(split) {
                    t.write(batch).unwrap();
                }
                let f = t.finish().unwrap();
                f.sync_all().unwrap();
                drop(f);
                assert_eq!(
                    std::fs::read(&path).unwrap(),
                    all,
                    "direct {direct} split {split}"
                );
            }
        }
        // An empty file, and one shorter than a block.
        for len in [0usize, 10] {
            let path = d.path().join(format!("small-{len}"));
            let mut t = Target::create(&path, true).unwrap();
            t.write(&[Bytes::from(vec![9u8; len])]).unwrap();
            drop(t.finish().unwrap());
            assert_eq!(std::fs::read(&path).unwrap(), vec![9u8; len]);
        }
    }

    #[test]
    fn appends_resume_at_any_offset_in_both_modes() {
        let d = tempfile::tempdir().unwrap();
        let (chunks, all) = chunks();
        for direct in [false, true] {
            let path = d.path().join(format!("spool-{direct}"));
            drop(Target::create(&path, direct).unwrap().finish().unwrap());
            let mut len = 0u64;
            for (i, c) in chunks.iter().enumerate() {
                let mut t = Target::append_at(&path, len, direct).unwrap();
                t.write(std::slice::from_ref(c)).unwrap();
                // Unsaved bytes past the next start are cut off by it.
                t.sync().unwrap();
                t.write(&[Bytes::from(vec![0xEE; 5000 + i])]).unwrap();
                t.sync().unwrap();
                len += c.len() as u64;
            }
            let t = Target::append_at(&path, len, direct).unwrap();
            drop(t.finish().unwrap());
            assert_eq!(std::fs::read(&path).unwrap(), all, "direct {direct}");
        }
    }

    /// Aligned batches go to the file as they are, mixed with unaligned
    /// chunks and partial blocks in any order, in both modes.
    #[test]
    fn aligned_batches_and_plain_chunks_store_exactly_the_bytes() {
        let d = tempfile::tempdir().unwrap();
        let pool = AlignedPool::new(3 * ALIGN);
        let mut batches = Batches::new(pool);
        let mut aligned = |fill: u8, n: usize| {
            let mut b = batches.batch();
            b.extend(&vec![fill; n]);
            batches.freeze(b)
        };
        let seq = [
            aligned(1, 3 * ALIGN),
            aligned(2, ALIGN + 10),
            // After a partial block: through the staging buffer.
            aligned(3, 2 * ALIGN),
            Bytes::from(vec![4u8; 5000]).slice(1..),
            aligned(5, ALIGN),
        ];
        for b in &seq[..3] {
            assert_eq!(b.as_ptr().align_offset(ALIGN), 0);
        }
        let all: Vec<u8> = seq.iter().flat_map(|b| b.iter().copied()).collect();
        for direct in [false, true] {
            for split in [1, 2, seq.len()] {
                let path = d.path().join(format!("a-{direct}-{split}"));
                let mut t = Target::create(&path, direct).unwrap();
                for batch in seq.chunks(split) {
                    t.write(batch).unwrap();
                }
                drop(t.finish().unwrap());
                assert_eq!(std::fs::read(&path).unwrap(), all, "{direct} {split}");
            }
        }
    }

    /// A batch comes back once its bytes are dropped everywhere, not
    /// before; a writer's batches go back to the pool when it ends.
    #[test]
    fn batches_are_recycled_only_once_nobody_reads_them() {
        let pool = AlignedPool::new(2 * ALIGN);
        let mut w = Batches::new(pool.clone());
        let mut b = w.batch();
        b.extend(&[7; 100]);
        let bytes = w.freeze(b);
        let first = bytes.as_ptr();
        let held = bytes.clone();
        drop(bytes);
        let second = w.batch();
        assert_ne!(second.as_ref().as_ptr(), first, "still read: a new one");
        assert!(second.is_empty());
        drop(held);
        let third = w.batch();
        assert_eq!(third.as_ref().as_ptr(), first, "let go: filled again");
        assert!(third.is_empty() && third.room() >= 2 * ALIGN);
        let again = w.freeze(third);
        drop(again);
        drop(w);
        let mut next = Batches::new(pool);
        assert_eq!(next.batch().as_ref().as_ptr(), first, "back in the pool");
    }

    #[test]
    fn create_refuses_an_existing_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("x");
        std::fs::write(&path, b"old").unwrap();
        for direct in [false, true] {
            let e = Target::create(&path, direct).err().expect("exists");
            assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        }
    }
}
