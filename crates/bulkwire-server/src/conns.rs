//! Connections under a budget, and the lingering close (DESIGN.md
//! "Admission and abuse").
//!
//! **Budget.** At most [`crate::Limits::max_connections`] connections are
//! served at once. By default the cap is derived from the process's
//! descriptor limit ([`derive_max_connections`]), so that accepting never
//! fails for want of a descriptor while storage still finds one. At the cap
//! the connection that has been idle longest (no request in progress: a
//! keep-alive connection between requests, or one that has not sent a
//! complete request head yet, which is what a slowloris client looks like)
//! is closed to make room, as HAProxy sheds; when every connection is busy
//! the new one is answered `503` with `Retry-After` and closed. Every
//! accepted socket gets an answer or a clean close: never an `accept` that
//! fails and leaves it in the kernel's queue.
//!
//! **Lingering close** (RFC 9112 §9.6: a server that closes while the
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

use crate::error::ApiError;
use crate::state::AppState;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

/// Descriptors kept out of the connection budget for everything that is not
/// a connection: stdio, the listener, the runtime's epoll and wakers, the
/// signal pipe, the blob directory, SQLite's database, WAL and shm files
/// for two connections, and room to spare.
pub const FIXED_DESCRIPTORS: u64 = 64;

/// Connections answered `503` at the cap at once; beyond, a new
/// connection at the cap is closed without an answer.
pub const REFUSING_MAX: usize = 64;

/// The cap on connections when none is configured: every connection may
/// hold one blob file besides its socket (a download, or an upload's temp
/// file), every upload its SOAP early attachments, and the refusals at the
/// cap one each; never more than [`DERIVED_MAX`].
pub fn derive_max_connections(nofile: u64, l: &crate::Limits) -> usize {
    let uploads = (l.max_uploads * l.soap_early_attachments) as u64;
    let reserve = FIXED_DESCRIPTORS + uploads + REFUSING_MAX as u64;
    let n = nofile.saturating_sub(reserve) / 2;
    (n as usize).clamp(1, DERIVED_MAX)
}

/// Largest derived cap: a connection holds hyper's buffers (up to
/// `read_buffer` while a request head or body arrives), so the count is
/// bounded even where descriptors are plenty.
pub const DERIVED_MAX: usize = 4096;

/// The process's descriptor limit, first raising the soft limit to the hard
/// one (as Go's runtime does): the soft default of 1,024 is a relic of
/// `select(2)`, which nothing here uses.
pub fn descriptor_limit() -> u64 {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let r = getrlimit(Resource::Nofile);
        if let (Some(cur), Some(max)) = (r.current, r.maximum) {
            let raised = Rlimit {
                current: Some(max),
                maximum: Some(max),
            };
            if cur < max && setrlimit(Resource::Nofile, raised).is_ok() {
                return max;
            }
        }
        r.current.unwrap_or(u64::MAX)
    }
    #[cfg(not(target_os = "linux"))]
    {
        1024
    }
}

/// One connection's entry.
struct Entry {
    /// Requests in progress (their answers not yet sent).
    busy: u32,
    /// Set while idle: its place in [`Registry::idle`].
    idle_since: Option<u64>,
    shed: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    /// A counter that orders idle periods: smaller began earlier.
    clock: u64,
    open: HashMap<u64, Entry>,
    /// Idle connections by when they became idle.
    idle: BTreeMap<u64, u64>,
}

impl Registry {
    fn set_idle(&mut self, id: u64) {
        self.clock += 1;
        let stamp = self.clock;
        if let Some(e) = self.open.get_mut(&id) {
            e.idle_since = Some(stamp);
            self.idle.insert(stamp, id);
        }
    }

    /// Closes the connection idle longest; false when none is idle.
    fn shed_oldest(&mut self) -> bool {
        let Some((_, id)) = self.idle.pop_first() else {
            return false;
        };
        let Some(e) = self.open.get_mut(&id) else {
            return false;
        };
        e.idle_since = None;
        if let Some(tx) = e.shed.take() {
            let _ = tx.send(());
        }
        true
    }
}

/// The connection budget.
pub struct Conns {
    max: usize,
    reg: Mutex<Registry>,
    refusing: Arc<tokio::sync::Semaphore>,
}

/// What to do with a connection just accepted.
pub enum Admit {
    /// Serve it; the receiver fires when it must close to make room.
    Serve(Arc<ConnHandle>, oneshot::Receiver<()>),
    /// Answer 503 and close (the permit bounds those at once).
    Refuse(tokio::sync::OwnedSemaphorePermit),
    /// Close at once: even the refusals are at their cap.
    Drop,
}

impl Conns {
    pub fn new(max: usize) -> Conns {
        Conns {
            max,
            reg: Mutex::new(Registry::default()),
            refusing: Arc::new(tokio::sync::Semaphore::new(REFUSING_MAX)),
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.reg.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections being served.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// Registers a new connection, shedding the one idle longest at the
    /// cap. Returns whether one was shed.
    pub fn admit(self: &Arc<Self>) -> (Admit, bool) {
        let mut reg = self.lock();
        let mut shed = false;
        if reg.open.len() >= self.max {
            shed = reg.shed_oldest();
            if !shed {
                drop(reg);
                return match self.refusing.clone().try_acquire_owned() {
                    Ok(p) => (Admit::Refuse(p), false),
                    Err(_) => (Admit::Drop, false),
                };
            }
        }
        reg.next_id += 1;
        let id = reg.next_id;
        let (tx, rx) = oneshot::channel();
        reg.open.insert(
            id,
            Entry {
                busy: 0,
                idle_since: None,
                shed: Some(tx),
            },
        );
        reg.set_idle(id);
        let h = ConnHandle {
            conns: self.clone(),
            id,
        };
        (Admit::Serve(Arc::new(h), rx), shed)
    }
}

/// A served connection's place in the budget; dropping it frees the place.
pub struct ConnHandle {
    conns: Arc<Conns>,
    id: u64,
}

impl ConnHandle {
    /// Marks a request in progress until the guard (kept in the answer's
    /// body) is dropped: a busy connection is never shed.
    pub fn busy(self: &Arc<Self>) -> Busy {
        let mut reg = self.conns.lock();
        if let Some(e) = reg.open.get_mut(&self.id) {
            e.busy += 1;
            if let Some(stamp) = e.idle_since.take() {
                reg.idle.remove(&stamp);
            }
        }
        Busy(self.clone())
    }
}

impl Drop for ConnHandle {
    fn drop(&mut self) {
        let mut reg = self.conns.lock();
        if let Some(e) = reg.open.remove(&self.id) {
            if let Some(stamp) = e.idle_since {
                reg.idle.remove(&stamp);
            }
        }
    }
}

/// A request in progress on a connection (see [`ConnHandle::busy`]).
pub struct Busy(Arc<ConnHandle>);

impl Drop for Busy {
    fn drop(&mut self) {
        let h = &self.0;
        let mut reg = h.conns.lock();
        let Some(e) = reg.open.get_mut(&h.id) else {
            return;
        };
        e.busy = e.busy.saturating_sub(1);
        if e.busy == 0 && e.shed.is_some() {
            reg.set_idle(h.id);
        }
    }
}

/// The answer at the cap: written whole, then a lingering close.
pub async fn refuse(stream: TcpStream, state: Arc<AppState>, max: usize) {
    use tokio::io::AsyncWriteExt;
    let e = ApiError::busy("max_connections", max as u64);
    let body = e.to_json().to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut io = Io::new(stream, state);
    let msg = [head.as_bytes(), body.as_bytes()].concat();
    if io.write_all(&msg).await.is_ok() {
        let _ = io.shutdown().await;
    }
}

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
    linger: Option<Linger>,
    /// Counted in the lingering gauge (until the linger ends or drops).
    counted: bool,
    finished: bool,
}

/// The discard buffer of a lingering connection.
const LINGER_BUF: usize = 16 * 1024;

impl Io {
    pub fn new(stream: TcpStream, state: Arc<AppState>) -> Io {
        Io {
            stream,
            state,
            linger: None,
            counted: false,
            finished: false,
        }
    }

    fn start_linger(&mut self) -> &mut Linger {
        let l = &self.state.config.limits;
        let now = Instant::now();
        let idle_for = Duration::from_millis(l.linger_idle_ms);
        self.state.metrics.lingering.fetch_add(1, Relaxed);
        self.counted = true;
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

use std::future::Future;

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
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_cap_leaves_a_reserve_and_a_descriptor_per_connection_for_a_file() {
        let l = crate::Limits::default();
        // 1024 - 64 fixed - 64 uploads x 4 early attachments - 64 refusals.
        assert_eq!(derive_max_connections(1024, &l), (1024 - 64 - 256 - 64) / 2);
        assert_eq!(derive_max_connections(1 << 20, &l), DERIVED_MAX);
        assert_eq!(derive_max_connections(10, &l), 1);
    }

    fn serve(c: &Arc<Conns>) -> Arc<ConnHandle> {
        match c.admit().0 {
            Admit::Serve(h, _rx) => h,
            _ => panic!("refused"),
        }
    }

    #[test]
    fn at_the_cap_the_longest_idle_is_shed_and_busy_ones_never() {
        let c = Arc::new(Conns::new(2));
        let (a, mut a_rx) = match c.admit().0 {
            Admit::Serve(h, rx) => (h, rx),
            _ => panic!(),
        };
        let b = serve(&c);
        // a is older; once b is busy and a idle, a third sheds a.
        let busy_b = b.busy();
        let (third, shed) = c.admit();
        assert!(shed);
        assert!(a_rx.try_recv().is_ok(), "a was told to close");
        assert!(matches!(third, Admit::Serve(..)));
        drop(a);
        // Now b (busy) and the third (idle): a fourth sheds the third.
        let (fourth, shed) = c.admit();
        assert!(shed && matches!(fourth, Admit::Serve(..)));
        drop(third);
        // b busy, fourth busy: a fifth is refused.
        let Admit::Serve(f, _) = fourth else { panic!() };
        let _busy_f = f.busy();
        assert!(matches!(c.admit(), (Admit::Refuse(_), false)));
        // b's answer done: it is idle and can be shed.
        drop(busy_b);
        assert!(matches!(c.admit(), (Admit::Serve(..), true)));
    }

    #[test]
    fn refusals_are_capped() {
        let c = Arc::new(Conns::new(1));
        let h = serve(&c);
        let _b = h.busy();
        let permits: Vec<_> = (0..REFUSING_MAX)
            .map(|_| match c.admit().0 {
                Admit::Refuse(p) => p,
                _ => panic!(),
            })
            .collect();
        assert!(matches!(c.admit().0, Admit::Drop));
        drop(permits);
        assert!(matches!(c.admit().0, Admit::Refuse(_)));
    }
}
