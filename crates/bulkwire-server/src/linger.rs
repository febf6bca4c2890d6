//! Connections' sockets, and how they close.
//!
//! The lingering close (RFC 9112 §9.6: a server that closes while the
//! client may still be sending must take care that the client reads the
//! answer). A connection is closed by hyper through
//! `AsyncWrite::poll_shutdown` of its I/O; [`Io`] makes that a lingering
//! close, as nginx's `lingering_close` and Go's `closeWriteAndWait` do:
//! send FIN (half-close the write side, so the answer is complete), then
//! read and discard what the client still sends until it closes, for at
//! most `linger_ms` in all, `linger_idle_ms` without data and
//! `linger_bytes`, then close. Without it, closing with unread bytes in the
//! receive queue makes the kernel send a reset, which destroys the answer
//! in the client's receive queue before a client that sends its whole body
//! first (Python's `http.client`, `xmlrpc.client`) has read it. A lingering
//! connection holds a 16 KiB buffer and its descriptor, no upload slot and
//! no memory reservation, and is counted in `/metrics`.
//!
//! [`Io`] also bounds how long a write may wait (`send_timeout_ms`, nginx's
//! `send_timeout`): a client that stops reading holds its socket buffer
//! and nothing more, and once no byte has been accepted for that long the
//! write fails and hyper closes the connection. And it sends a download's
//! file bytes with `sendfile(2)` where the body stands for them
//! (`crate::sendfile`).

use crate::conns::ConnHandle;
use crate::sendfile::{self, FileSlot};
use crate::state::AppState;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// The bounds of one lingering close.
struct Linger {
    total: Pin<Box<Sleep>>,
    idle: Pin<Box<Sleep>>,
    idle_for: Duration,
    left: u64,
    write_closed: bool,
    buf: Box<[u8]>,
}

/// A connection's socket: reads and writes pass through; shutting it down
/// is a lingering close (see the module doc).
pub struct Io {
    stream: TcpStream,
    state: Arc<AppState>,
    /// Its place in the budget (none for a refusal at the cap).
    conn: Option<Arc<ConnHandle>>,
    linger: Option<Linger>,
    /// Counted in the lingering gauge (until the linger ends or drops).
    counted: bool,
    finished: bool,
    /// Shared with each download body served on this connection.
    slot: Arc<FileSlot>,
    /// Armed while a write waits: no byte accepted until it fires.
    stall: Option<Pin<Box<Sleep>>>,
    stalled: bool,
}

/// The discard buffer of a lingering connection.
const LINGER_BUF: usize = 16 * 1024;

impl Io {
    pub fn new(stream: TcpStream, state: Arc<AppState>, conn: Option<Arc<ConnHandle>>) -> Io {
        Io {
            stream,
            state,
            conn,
            linger: None,
            counted: false,
            finished: false,
            slot: Arc::default(),
            stall: None,
            stalled: false,
        }
    }

    /// What a download body on this connection shares with its I/O.
    pub fn file_slot(&self) -> Arc<FileSlot> {
        self.slot.clone()
    }

    /// Writes `bufs`: up to the first download placeholder as they are,
    /// a placeholder as its file's bytes.
    fn poll_write_bufs(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match sendfile::first_placeholder(bufs) {
            None => Pin::new(&mut self.stream).poll_write_vectored(cx, bufs),
            Some(0) => self.poll_send_file(cx, &bufs[0]),
            Some(i) => self.poll_send_head(cx, &bufs[..i]),
        }
    }

    /// Writes what comes before a placeholder (a download's head) with
    /// `MSG_MORE`, so that it leaves with the file's first bytes.
    fn poll_send_head(
        &mut self,
        cx: &mut Context<'_>,
        head: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_send_with(cx, |s| sendfile::send_more(s, head))
    }

    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        placeholder: &[u8],
    ) -> Poll<io::Result<usize>> {
        let send = self.slot.expect(placeholder)?;
        let r = ready!(self.poll_send_with(cx, |s| sendfile::send_file(s, &send)));
        match &r {
            Ok(n) => self.slot.sent(*n),
            Err(e) => self
                .slot
                .fail(e.kind(), "the download's file could not be sent"),
        }
        Poll::Ready(r)
    }

    /// Runs `send` on the socket once it is writable, again whenever it
    /// would block (tokio clears the readiness on `WouldBlock`).
    fn poll_send_with(
        &self,
        cx: &mut Context<'_>,
        mut send: impl FnMut(&TcpStream) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.stream.poll_write_ready(cx))?;
            let r = self
                .stream
                .try_io(tokio::io::Interest::WRITABLE, || send(&self.stream));
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }

    /// A write's outcome under `send_timeout_ms`: waiting starts the clock,
    /// any byte accepted stops it, and when it runs out the write fails.
    fn timed(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Pending => {
                if !self.stalled {
                    // The clock starts at the first wait after progress,
                    // not at every wait.
                    let limit = Duration::from_millis(self.state.config.limits.send_timeout_ms);
                    let deadline = Instant::now() + limit;
                    match &mut self.stall {
                        Some(s) => s.as_mut().reset(deadline),
                        None => self.stall = Some(Box::pin(tokio::time::sleep_until(deadline))),
                    }
                    self.stalled = true;
                }
                let stall = self.stall.as_mut().expect("armed above or before");
                if stall.as_mut().poll(cx).is_ready() {
                    let d = &self.state.metrics.downloads;
                    d.send_timeouts.fetch_add(1, Relaxed);
                    self.slot.fail(
                        io::ErrorKind::TimedOut,
                        "send_timeout_ms: the client stopped reading",
                    );
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "send_timeout_ms: the client accepted no byte for that long",
                    )));
                }
                Poll::Pending
            }
            r => {
                self.stalled = false;
                r
            }
        }
    }

    fn start_linger(&mut self) -> &mut Linger {
        let l = &self.state.config.limits;
        let now = Instant::now();
        let idle_for = Duration::from_millis(l.linger_idle_ms);
        self.state.metrics.lingering.fetch_add(1, Relaxed);
        self.counted = true;
        if let Some(c) = &self.conn {
            c.lingering();
        }
        self.linger.get_or_insert_with(|| Linger {
            total: Box::pin(tokio::time::sleep_until(
                now + Duration::from_millis(l.linger_ms),
            )),
            idle: Box::pin(tokio::time::sleep_until(now + idle_for)),
            idle_for,
            left: l.linger_bytes,
            write_closed: false,
            buf: vec![0; LINGER_BUF].into_boxed_slice(),
        })
    }

    fn end_linger(&mut self) {
        if self.counted {
            self.counted = false;
            self.state.metrics.lingering.fetch_sub(1, Relaxed);
        }
        self.finished = true;
        self.linger = None;
    }

    /// Half-closes, then discards input until end of stream or a bound.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.linger.is_none() {
            self.start_linger();
        }
        let Io {
            stream,
            linger,
            state,
            ..
        } = self;
        let lg = linger.as_mut().expect("started above");
        if !lg.write_closed {
            if ready!(Pin::new(&mut *stream).poll_shutdown(cx)).is_err() {
                return Poll::Ready(());
            }
            lg.write_closed = true;
        }
        loop {
            if lg.total.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            let mut rb = ReadBuf::new(&mut lg.buf);
            match Pin::new(&mut *stream).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) if rb.filled().is_empty() => return Poll::Ready(()),
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len() as u64;
                    state.metrics.lingered_bytes.fetch_add(n, Relaxed);
                    lg.left = lg.left.saturating_sub(n);
                    if lg.left == 0 {
                        return Poll::Ready(());
                    }
                    let next = Instant::now() + lg.idle_for;
                    lg.idle.as_mut().reset(next);
                }
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Pending => {
                    return match lg.idle.as_mut().poll(cx) {
                        Poll::Ready(()) => Poll::Ready(()),
                        Poll::Pending => Poll::Pending,
                    };
                }
            }
        }
    }
}

impl Drop for Io {
    fn drop(&mut self) {
        self.end_linger();
    }
}

impl AsyncRead for Io {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = self.poll_write_bufs(cx, &[io::IoSlice::new(buf)]);
        self.timed(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = self.poll_write_bufs(cx, bufs);
        self.timed(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.finished {
            return Poll::Ready(Ok(()));
        }
        ready!(self.poll_linger(cx));
        self.end_linger();
        Poll::Ready(Ok(()))
    }
}
