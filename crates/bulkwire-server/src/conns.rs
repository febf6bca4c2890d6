//! Connections under a budget (DESIGN.md "Admission and abuse").
//!
//! At most [`crate::Limits::max_connections`] connections are served at
//! once. By default the cap is derived from the process's descriptor limit
//! ([`derive_max_connections`]), so that accepting never fails for want of a
//! descriptor while storage still finds one. At the cap one connection makes
//! room for the new one, as HAProxy sheds, in the order of [`State::tier`]:
//! one without a complete request head (what slowloris looks like) or with
//! a request not yet authenticated, closed at once; then an idle keep-alive
//! one, closed gracefully once its last answer is flushed; then one in its
//! lingering close (`crate::linger`). A busy connection is never closed;
//! when every one is busy the new one is answered `503` with `Retry-After`.
//! Every accepted socket gets an answer or a clean close: never an `accept`
//! that fails and leaves it in the kernel's queue.

use crate::error::ApiError;
use crate::linger::Io;
use crate::state::AppState;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};

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
/// file), every upload its SOAP early attachments, every resumable writer
/// still hashing after its answer (it holds an upload slot) or parked (at
/// most `max_uploads`, `handlers::tus::lock`) its spool file, and the
/// refusals at the cap one each; never more than [`DERIVED_MAX`].
pub fn derive_max_connections(nofile: u64, l: &crate::Limits) -> usize {
    let uploads = (l.max_uploads * (l.soap_early_attachments + 2)) as u64;
    let reserve = FIXED_DESCRIPTORS + uploads + REFUSING_MAX as u64;
    let n = nofile.saturating_sub(reserve) / 2;
    (n as usize).clamp(1, DERIVED_MAX)
}

/// Largest derived cap. Connections are not in `memory_budget`: each holds
/// hyper's buffers (a few KiB idle, up to `read_buffer` while a request head
/// or body arrives faster than it is consumed), so the count is bounded
/// even where descriptors are plenty.
pub const DERIVED_MAX: usize = 4096;

/// The process's descriptor limit (soft), which the derived cap follows.
pub fn descriptor_limit() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let r = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        r.current.unwrap_or(u64::MAX)
    }
    #[cfg(not(target_os = "linux"))]
    {
        1024
    }
}

/// Raises the soft descriptor limit to the hard one, as Go's runtime does
/// (the soft default of 1,024 is a relic of `select(2)`, which nothing here
/// uses); returns the limit in force. For a program's start-up (`bulkwire
/// serve` calls it), not for a library to do behind an embedder's back.
pub fn raise_descriptor_limit() -> u64 {
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
    }
    descriptor_limit()
}

/// Where a connection stands, for shedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Accepted; no request head complete yet (what slowloris looks like).
    Fresh,
    /// A request whose credentials are not checked yet (an XML-RPC call
    /// before its password): nothing admitted, nothing to protect.
    Unauthenticated,
    /// A request in progress or its answer being sent: never shed.
    Busy,
    /// Served, waiting for the next request (keep-alive).
    Idle,
    /// Answered and half-closed, discarding what the client still sends.
    Lingering,
}

impl State {
    /// Shedding order: tier 0 first. The lingering go last, since closing
    /// them may cost a send-first client the answer it was sent.
    fn tier(self) -> Option<usize> {
        match self {
            State::Fresh | State::Unauthenticated => Some(0),
            State::Idle => Some(1),
            State::Lingering => Some(2),
            State::Busy => None,
        }
    }
}

/// How a shed connection is to close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shed {
    /// Close at once: it has no answer in flight.
    Close,
    /// Let hyper finish what it is sending, then close (`graceful_shutdown`
    /// closes an idle keep-alive connection as soon as it has flushed).
    Graceful,
}

/// One connection's entry.
struct Entry {
    state: State,
    /// Requests in progress (their answers not yet sent).
    busy: u32,
    /// When it entered its tier (a [`Registry::clock`] value).
    stamp: u64,
    /// Taken when the connection is shed: it never goes back to a tier.
    shed: Option<oneshot::Sender<Shed>>,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    /// A counter that orders entries within a tier: smaller came earlier.
    clock: u64,
    open: HashMap<u64, Entry>,
    /// Sheddable connections by tier, oldest first.
    tiers: [BTreeMap<u64, u64>; 3],
}

impl Registry {
    fn set_state(&mut self, id: u64, state: State) {
        let Some(e) = self.open.get_mut(&id) else {
            return;
        };
        if let Some(t) = e.state.tier() {
            self.tiers[t].remove(&e.stamp);
        }
        e.state = state;
        if let (Some(t), Some(_)) = (state.tier(), &e.shed) {
            self.clock += 1;
            e.stamp = self.clock;
            self.tiers[t].insert(self.clock, id);
        }
    }

    /// Tells the connection first in shedding order to close; false when
    /// every connection is busy.
    fn shed_one(&mut self) -> bool {
        for t in 0..self.tiers.len() {
            let Some((_, id)) = self.tiers[t].pop_first() else {
                continue;
            };
            let how = if t == 1 { Shed::Graceful } else { Shed::Close };
            if let Some(tx) = self.open.get_mut(&id).and_then(|e| e.shed.take()) {
                let _ = tx.send(how);
            }
            return true;
        }
        false
    }
}

/// The connection budget.
pub struct Conns {
    max: usize,
    reg: Mutex<Registry>,
    refusing: Arc<tokio::sync::Semaphore>,
    /// Connections being served (shared with the metrics).
    gauge: Arc<AtomicI64>,
    /// Woken when the last connection ends (graceful shutdown).
    emptied: Notify,
    /// Woken when any connection ends (the drain, see [`Conns::wait_closed`]).
    closed: Notify,
}

/// What to do with a connection just accepted.
pub enum Admit {
    /// Serve it; `shed` fires when it must close to make room, and
    /// `shed_other` says another connection was told to.
    Serve {
        handle: Arc<ConnHandle>,
        shed: oneshot::Receiver<Shed>,
        shed_other: bool,
    },
    /// Answer 503 and close (the permit bounds those at once).
    Refuse(tokio::sync::OwnedSemaphorePermit),
    /// Close at once: even the refusals are at their cap.
    Close,
}

impl Conns {
    pub fn new(max: usize, gauge: Arc<AtomicI64>) -> Conns {
        Conns {
            max,
            reg: Mutex::new(Registry::default()),
            refusing: Arc::new(tokio::sync::Semaphore::new(REFUSING_MAX)),
            gauge,
            emptied: Notify::new(),
            closed: Notify::new(),
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.reg.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new connection; at the cap, first tells another one to
    /// close (see [`State::tier`]), or refuses this one when all are busy.
    pub fn admit(self: &Arc<Self>) -> Admit {
        let mut reg = self.lock();
        let shed_other = reg.open.len() >= self.max && reg.shed_one();
        if reg.open.len() >= self.max && !shed_other {
            drop(reg);
            return match self.refusing.clone().try_acquire_owned() {
                Ok(p) => Admit::Refuse(p),
                Err(_) => Admit::Close,
            };
        }
        reg.next_id += 1;
        let id = reg.next_id;
        let (tx, rx) = oneshot::channel();
        let entry = Entry {
            state: State::Busy,
            busy: 0,
            stamp: 0,
            shed: Some(tx),
        };
        reg.open.insert(id, entry);
        reg.set_state(id, State::Fresh);
        self.gauge.fetch_add(1, Relaxed);
        let handle = Arc::new(ConnHandle {
            conns: self.clone(),
            id,
        });
        Admit::Serve {
            handle,
            shed: rx,
            shed_other,
        }
    }

    /// The connections open now, to wait for with [`Conns::wait_closed`].
    pub fn open_ids(&self) -> Vec<u64> {
        self.lock().open.keys().copied().collect()
    }

    /// Requests in progress on every connection (their answers not yet
    /// sent): what a drain waits for.
    pub fn in_flight(&self) -> usize {
        self.lock().open.values().map(|e| e.busy as usize).sum()
    }

    /// Waits until none of `ids` is open any more (connections opened
    /// since do not count: a draining server answers them at once).
    pub async fn wait_closed(&self, ids: Vec<u64>) {
        loop {
            let closed = self.closed.notified();
            if !ids.iter().any(|id| self.lock().open.contains_key(id)) {
                return;
            }
            closed.await;
        }
    }

    /// Waits until no connection is open.
    pub async fn wait_empty(&self) {
        loop {
            let emptied = self.emptied.notified();
            if self.lock().open.is_empty() {
                return;
            }
            emptied.await;
        }
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
        }
        reg.set_state(self.id, State::Busy);
        Busy(self.clone())
    }

    /// Makes the request in progress sheddable until its credentials are
    /// checked, i.e. until the guard is dropped.
    pub fn unauthenticated(self: &Arc<Self>) -> Unauthenticated {
        self.conns.lock().set_state(self.id, State::Unauthenticated);
        Unauthenticated(self.clone())
    }

    /// The connection is closing and discarding input (see [`Io`]).
    pub(crate) fn lingering(&self) {
        let mut reg = self.conns.lock();
        if reg.open.get(&self.id).is_some_and(|e| e.busy == 0) {
            reg.set_state(self.id, State::Lingering);
        }
    }

    /// Decides, when told to shed, whether closing now is safe: true unless
    /// a request got in meanwhile (or is past its credentials).
    pub fn may_close_now(&self) -> bool {
        let reg = self.conns.lock();
        reg.open
            .get(&self.id)
            .is_none_or(|e| e.state != State::Busy && e.state != State::Idle)
    }

    /// True before any request head came in.
    pub fn is_fresh(&self) -> bool {
        let reg = self.conns.lock();
        reg.open
            .get(&self.id)
            .is_some_and(|e| e.state == State::Fresh)
    }
}

impl Drop for ConnHandle {
    fn drop(&mut self) {
        let mut reg = self.conns.lock();
        if let Some(e) = reg.open.remove(&self.id) {
            if let Some(t) = e.state.tier() {
                reg.tiers[t].remove(&e.stamp);
            }
        }
        self.conns.gauge.fetch_sub(1, Relaxed);
        if reg.open.is_empty() {
            self.conns.emptied.notify_waiters();
        }
        self.conns.closed.notify_waiters();
    }
}

/// A request in progress on a connection (see [`ConnHandle::busy`]).
pub struct Busy(Arc<ConnHandle>);

impl Busy {
    pub fn conn(&self) -> &Arc<ConnHandle> {
        &self.0
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let h = &self.0;
        let mut reg = h.conns.lock();
        let Some(e) = reg.open.get_mut(&h.id) else {
            return;
        };
        e.busy = e.busy.saturating_sub(1);
        if e.busy == 0 {
            reg.set_state(h.id, State::Idle);
        }
    }
}

/// A request not yet authenticated (see [`ConnHandle::unauthenticated`]).
pub struct Unauthenticated(Arc<ConnHandle>);

impl Drop for Unauthenticated {
    fn drop(&mut self) {
        self.0.conns.lock().set_state(self.0.id, State::Busy);
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
    let mut io = Io::new(stream, state, None);
    let msg = [head.as_bytes(), body.as_bytes()].concat();
    if io.write_all(&msg).await.is_ok() {
        let _ = io.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_cap_leaves_a_reserve_and_a_descriptor_per_connection_for_a_file() {
        let l = crate::Limits::default();
        // 1024 - 64 fixed - 64 uploads x (4 early attachments + 1 spool
        // hashing after its answer + 1 parked) - 64 refusals.
        assert_eq!(derive_max_connections(1024, &l), (1024 - 64 - 384 - 64) / 2);
        assert_eq!(derive_max_connections(1 << 20, &l), DERIVED_MAX);
        assert_eq!(derive_max_connections(10, &l), 1);
    }

    fn conns(max: usize) -> Arc<Conns> {
        Arc::new(Conns::new(max, Default::default()))
    }

    /// A served connection and its shed signal.
    fn serve(c: &Arc<Conns>) -> (Arc<ConnHandle>, oneshot::Receiver<Shed>) {
        match c.admit() {
            Admit::Serve { handle, shed, .. } => (handle, shed),
            _ => panic!("refused"),
        }
    }

    fn sheds_another(a: &Admit) -> bool {
        matches!(
            a,
            Admit::Serve {
                shed_other: true,
                ..
            }
        )
    }

    #[test]
    fn shedding_order_is_fresh_then_idle_then_lingering_oldest_first() {
        let c = conns(10);
        let (idle, mut idle_rx) = serve(&c);
        drop(idle.busy()); // served one request: idle
        let (linger, mut linger_rx) = serve(&c);
        drop(linger.busy());
        linger.lingering();
        let (_old, mut old_rx) = serve(&c);
        let (pre, mut pre_rx) = serve(&c);
        let (_busy, mut busy_rx) = serve(&c);
        let _b = _busy.busy();
        // An XML-RPC call before its login counts as fresh (it entered the
        // tier last).
        let _req = pre.busy();
        let _unauth = pre.unauthenticated();
        let shed = |rx: &mut oneshot::Receiver<Shed>| {
            assert!(c.lock().shed_one());
            rx.try_recv()
        };
        assert_eq!(shed(&mut old_rx), Ok(Shed::Close));
        assert_eq!(shed(&mut pre_rx), Ok(Shed::Close));
        assert_eq!(shed(&mut idle_rx), Ok(Shed::Graceful));
        assert_eq!(shed(&mut linger_rx), Ok(Shed::Close));
        // Only the busy one is left: nothing to shed.
        assert!(!c.lock().shed_one());
        assert!(busy_rx.try_recv().is_err());
    }

    #[test]
    fn busy_ones_are_never_shed_and_a_shed_one_stays_out() {
        let c = conns(1);
        let (h, mut rx) = serve(&c);
        let busy = h.busy();
        assert!(matches!(c.admit(), Admit::Refuse(_)));
        drop(busy);
        let next = c.admit();
        assert!(sheds_another(&next));
        assert_eq!(rx.try_recv(), Ok(Shed::Graceful));
        // A request that got in before the connection closed: closing at
        // once is not safe while it runs, and once it is done the
        // connection does not become sheddable again (the tiers hold the
        // new connection alone).
        let again = h.busy();
        assert!(!h.may_close_now());
        drop(again);
        assert_eq!(c.lock().tiers.iter().map(|t| t.len()).sum::<usize>(), 1);
        drop(next);
    }

    #[test]
    fn the_gauge_counts_served_connections() {
        let c = conns(3);
        let a = serve(&c);
        let b = serve(&c);
        assert_eq!(c.gauge.load(Relaxed), 2);
        drop(a);
        assert_eq!(c.gauge.load(Relaxed), 1);
        drop(b);
        assert_eq!(c.gauge.load(Relaxed), 0);
    }

    #[test]
    fn refusals_are_capped() {
        let c = conns(1);
        let (h, _rx) = serve(&c);
        let _b = h.busy();
        let permits: Vec<_> = (0..REFUSING_MAX)
            .map(|_| match c.admit() {
                Admit::Refuse(p) => p,
                _ => panic!(),
            })
            .collect();
        assert!(matches!(c.admit(), Admit::Close));
        drop(permits);
        assert!(matches!(c.admit(), Admit::Refuse(_)));
    }
}
