//! Downloads from the file store without a user-space copy: `sendfile(2)`
//! from the blob's file into the connection's socket, inside hyper's
//! HTTP/1.1 framing (RFC 9112 §6.2: a response with `Content-Length` is
//! its bytes and nothing else, so the body can go out by any means once
//! the head is written).
//!
//! hyper writes what a body yields; it has no way to be told "these bytes
//! are in that file". So a [`FileBody`] yields placeholders: `Bytes` views
//! of [`SENTINEL`], a static region of zeros that nothing ever reads, one
//! per chunk, and it *arms* the connection's [`FileSlot`] with where the
//! chunk's real bytes are (file, offset, length) before it yields it. The
//! connection's I/O ([`crate::linger::Io`]) sees hyper's `writev` reach a
//! slice of [`SENTINEL`], checks that it is exactly the unsent rest of the
//! armed chunk, and sends that many bytes of the file with `sendfile`
//! instead. hyper counts them against `Content-Length` as the body's own.
//!
//! Why this is safe:
//! - hyper queues body buffers without copying them when the I/O writes
//!   vectored (its `Queue` strategy); the server forces that with
//!   `http1::Builder::writev(true)`, so a placeholder reaches the I/O as
//!   itself, never copied into a buffer where it could not be recognised.
//! - A placeholder is only ever turned into file bytes when it matches the
//!   armed chunk to the byte (position within the chunk and length); any
//!   other sight of [`SENTINEL`] is an error that cuts the connection, so
//!   zeros are never sent in place of content.
//! - One chunk is armed at a time per connection: the body yields the next
//!   only once the I/O has sent the last (HTTP/1.1 answers one request at
//!   a time on a connection, and hyper writes an answer's head only once
//!   the last answer's body has left its queue).
//! - An armed chunk outlives its body: hyper drops a body once it has
//!   yielded `Content-Length` bytes, before its last chunk is written; the
//!   chunk keeps its file open until it has been sent or the connection
//!   is gone.
//! - Blobs are not mapped, so a file truncated under a download cannot
//!   raise `SIGBUS`: `sendfile` returns 0 at the file's new end, and the
//!   download ends with an error (hyper closes the connection: the client
//!   sees fewer bytes than `Content-Length`). Blobs are immutable once
//!   committed (written to a temporary file, synced, renamed into place,
//!   never opened for writing again; `DELETE` unlinks, which leaves an open
//!   download its inode), so only an outside hand can truncate one.
//!
//! The head before a placeholder is written with `MSG_MORE`
//! ([`send_more`]), so that it leaves with the file's first bytes.
//!
//! Pages not in the page cache are read by `sendfile` on the runtime's
//! thread, as nginx does without `aio`: the file store opens the file with
//! `POSIX_FADV_SEQUENTIAL` (a larger read-ahead). Linux only; elsewhere
//! downloads stream ([`AVAILABLE`]).

use crate::downloads::{Downloads, Route, Via};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::fs::File;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// The placeholders' region: the most one chunk can be. Zero-initialised,
/// so it lives in `.bss` and costs address space, not memory; no one reads
/// it (hyper only passes its address to the I/O).
static SENTINEL: [u8; CHUNK] = [0; CHUNK];

/// One chunk's most bytes: what one armed placeholder stands for.
pub const CHUNK: usize = 8 << 20;

/// The most one `sendfile` call is asked for, so that one fast download
/// does not hold a runtime thread for long (nginx's `sendfile_max_chunk`
/// is 2 MiB too).
const SEND_MAX: usize = 2 << 20;

/// Whether `s` lies in the placeholders' region.
fn in_sentinel(s: &[u8]) -> bool {
    let base = SENTINEL.as_ptr() as usize;
    let p = s.as_ptr() as usize;
    !s.is_empty() && p >= base && p < base + CHUNK
}

/// The index of the first placeholder in `bufs`, if any.
pub(crate) fn first_placeholder(bufs: &[io::IoSlice<'_>]) -> Option<usize> {
    bufs.iter().position(|b| in_sentinel(b))
}

/// The chunk a connection is sending from a file.
struct Armed {
    file: Arc<File>,
    /// File offset of the chunk's first byte.
    at: u64,
    len: usize,
    sent: usize,
    /// Counts the bytes once sent (by store and route).
    counter: (Arc<Downloads>, Route),
    /// The download's place in `downloads_in_progress`, on its last chunk:
    /// hyper drops a body as soon as it has yielded `Content-Length` bytes,
    /// which is before they are sent.
    _last: Option<InProgress>,
}

/// One download in `downloads_in_progress`, until dropped.
struct InProgress(Arc<Downloads>);

impl InProgress {
    fn new(d: Arc<Downloads>) -> InProgress {
        d.in_progress.fetch_add(1, Relaxed);
        InProgress(d)
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.in_progress.fetch_sub(1, Relaxed);
    }
}

#[derive(Default)]
struct Slot {
    armed: Option<Armed>,
    /// Why the last chunk could not be sent; the body reports it.
    failed: Option<(io::ErrorKind, &'static str)>,
    /// The body waiting for the chunk to be sent.
    waker: Option<Waker>,
}

/// What a connection's I/O and the download body on it share.
#[derive(Default)]
pub struct FileSlot(Mutex<Slot>);

/// Where the I/O is to send a placeholder's bytes from.
pub(crate) struct Send {
    pub file: Arc<File>,
    pub at: u64,
    pub count: usize,
}

impl FileSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The file bytes `placeholder` stands for (at most [`SEND_MAX`]), or
    /// an error when it is not the unsent rest of the armed chunk.
    pub(crate) fn expect(&self, placeholder: &[u8]) -> io::Result<Send> {
        let s = self.lock();
        let a = s.armed.as_ref().ok_or_else(out_of_step)?;
        let pos = placeholder.as_ptr() as usize - SENTINEL.as_ptr() as usize;
        if pos != a.sent || placeholder.len() != a.len - a.sent {
            return Err(out_of_step());
        }
        Ok(Send {
            file: a.file.clone(),
            at: a.at + a.sent as u64,
            count: (a.len - a.sent).min(SEND_MAX),
        })
    }

    /// `n` bytes of the armed chunk went out; the body is woken when it
    /// is whole.
    pub(crate) fn sent(&self, n: usize) {
        let mut s = self.lock();
        let Some(a) = s.armed.as_mut() else {
            return;
        };
        a.sent += n;
        a.counter.0.sent(a.counter.1, Via::Sendfile, n as u64);
        if a.sent < a.len {
            return;
        }
        s.armed = None;
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }

    /// The armed chunk cannot be sent; the body ends with `why`.
    pub(crate) fn fail(&self, kind: io::ErrorKind, why: &'static str) {
        let mut s = self.lock();
        s.armed = None;
        s.failed = Some((kind, why));
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }

    /// Ready once nothing is armed (the last chunk went out).
    fn poll_idle(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = self.lock();
        if let Some((kind, why)) = s.failed.take() {
            return Poll::Ready(Err(io::Error::new(kind, why)));
        }
        if s.armed.is_some() {
            s.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    fn arm(&self, a: Armed) {
        let mut s = self.lock();
        s.failed = None;
        s.armed = Some(a);
    }
}

fn out_of_step() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "download placeholder out of step with its file: connection cut",
    )
}

/// Whether this platform sends files this way (Linux's `sendfile(2)`);
/// elsewhere downloads stream.
pub const AVAILABLE: bool = cfg!(target_os = "linux");

/// Writes a download's head with `MSG_MORE` (`send(2)`): the kernel holds
/// a short segment back for the bytes that follow, so the head leaves with
/// the file's first bytes in full segments. Without it, under
/// `TCP_NODELAY`, the client gets the head alone and the file in more,
/// smaller pieces, and spends twice the CPU reading them. `sendfile`
/// pushes at its own end (it marks only the pieces before its last as
/// "more"), so nothing is left held. It replaces `TCP_CORK` set before the
/// head and cleared after the file (nginx's `tcp_nopush`): two `setsockopt`
/// fewer per download, and under a paced congestion control (BBR) a much
/// higher rate (docs/src/performance/server.md#downloads, item 6).
#[cfg(target_os = "linux")]
pub(crate) fn send_more(
    out: &impl std::os::fd::AsFd,
    head: &[io::IoSlice<'_>],
) -> io::Result<usize> {
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendFlags};
    let flags = SendFlags::MORE | SendFlags::NOSIGNAL;
    Ok(sendmsg(
        out,
        head,
        &mut SendAncillaryBuffer::default(),
        flags,
    )?)
}

/// Never called: without `sendfile` no body yields placeholders
/// ([`AVAILABLE`]), so no head is written this way.
#[cfg(not(target_os = "linux"))]
pub(crate) fn send_more(_: &impl std::os::fd::AsFd, _: &[io::IoSlice<'_>]) -> io::Result<usize> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "MSG_MORE"))
}

/// Sends as much of `send` as the socket `out` takes now.
#[cfg(target_os = "linux")]
pub(crate) fn send_file(out: &impl std::os::fd::AsFd, send: &Send) -> io::Result<usize> {
    let mut at = send.at;
    let n = rustix::fs::sendfile(out, &*send.file, Some(&mut at), send.count)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "blob shorter than its record (truncated under a download)",
        ));
    }
    Ok(n)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn send_file(_: &impl std::os::fd::AsFd, _: &Send) -> io::Result<usize> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "sendfile"))
}

/// A response body whose bytes `sendfile` sends (see the module doc).
pub struct FileBody {
    file: Arc<File>,
    at: u64,
    left: u64,
    slot: Arc<FileSlot>,
    /// Counts its bytes.
    downloads: Arc<Downloads>,
    route: Route,
    /// Handed to the last chunk.
    live: Option<InProgress>,
}

impl FileBody {
    /// `len` bytes of `file` from `at`, on the connection of `slot`.
    pub fn new(
        file: File,
        (at, len): (u64, u64),
        slot: Arc<FileSlot>,
        downloads: Arc<Downloads>,
        route: Route,
    ) -> FileBody {
        FileBody {
            file: Arc::new(file),
            at,
            left: len,
            slot,
            live: Some(InProgress::new(downloads.clone())),
            downloads,
            route,
        }
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if let Err(e) = std::task::ready!(self.slot.poll_idle(cx)) {
            return Poll::Ready(Some(Err(e)));
        }
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(CHUNK as u64) as usize;
        let last = if self.left == n as u64 {
            self.live.take()
        } else {
            None
        };
        self.slot.arm(Armed {
            file: self.file.clone(),
            at: self.at,
            len: n,
            sent: 0,
            counter: (self.downloads.clone(), self.route),
            _last: last,
        });
        self.at += n as u64;
        self.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&SENTINEL[..n])))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_recognised_only_inside_the_region() {
        let other = [0u8; 16];
        let bufs = [
            io::IoSlice::new(b"HTTP/1.1 200 OK\r\n\r\n"),
            io::IoSlice::new(&other),
            io::IoSlice::new(&SENTINEL[5..100]),
        ];
        assert_eq!(first_placeholder(&bufs), Some(2));
        assert_eq!(first_placeholder(&bufs[..2]), None);
        assert!(!in_sentinel(&SENTINEL[..0]));
    }

    #[test]
    fn a_placeholder_must_be_the_unsent_rest_of_the_armed_chunk() {
        let d = Arc::new(Downloads::default());
        let slot = FileSlot::default();
        assert!(slot.expect(&SENTINEL[..10]).is_err(), "nothing armed");
        let f = Arc::new(tempfile::tempfile().unwrap());
        slot.arm(Armed {
            file: f,
            at: 100,
            len: 10,
            sent: 0,
            counter: (d.clone(), Route::Link),
            _last: Some(InProgress::new(d.clone())),
        });
        assert!(slot.expect(&SENTINEL[..9]).is_err(), "short");
        assert!(slot.expect(&SENTINEL[1..10]).is_err(), "shifted");
        let s = slot.expect(&SENTINEL[..10]).unwrap();
        assert_eq!((s.at, s.count), (100, 10));
        slot.sent(4);
        assert!(slot.expect(&SENTINEL[..10]).is_err(), "already partly sent");
        assert_eq!(d.in_progress.load(Relaxed), 1, "not sent whole yet");
        let s = slot.expect(&SENTINEL[4..10]).unwrap();
        assert_eq!((s.at, s.count), (104, 6));
        slot.sent(6);
        assert!(slot.expect(&SENTINEL[10..10]).is_err(), "whole: disarmed");
        assert_eq!(d.bytes(Route::Link, Via::Sendfile), 10);
        assert_eq!(d.in_progress.load(Relaxed), 0, "the last chunk sent");
    }
}
