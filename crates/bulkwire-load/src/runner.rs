//! The engine: connection tasks sending a [`Scenario`]'s bodies to a
//! [`Target`], open or closed loop, spread over [`Plan::threads`] client
//! threads that each run a single-threaded tokio runtime (one epoll loop per
//! thread, as wrk). Each connection speaks HTTP/1.1 itself ([`crate::wire`]):
//! the head and the body's segments in one `writev`, the answer counted.
//!
//! **Open loop** (wrk2's model): request `i` is *intended* to go out at
//! `start + i / rate`, whatever happened to earlier requests. `connections`
//! tasks each take the next ticket, wait for its intended time and send it
//! on their own keep-alive connection. When every connection is busy (a slow
//! server), tickets wait: their requests go out late, and the *corrected*
//! latency, measured from the intended time, includes that wait, as a user
//! arriving on schedule would feel it. The *uncorrected* latency, from the
//! actual send, does not. A request sent more than `late_after` after its
//! intended time is counted as *late*: no connection was free in time (or
//! the client itself could not keep up).
//!
//! **Closed loop**: `connections` tasks each send the next request as soon as
//! the previous answer arrived. There is no schedule, so both views equal
//! the time from send to answer.
//!
//! A run stops issuing at `duration` or after `requests` tickets, whichever
//! comes first, and waits for requests in flight (each bounded by `timeout`).
//!
//! **Nothing to measure** ([`crate::verdict`]): a run none of whose first
//! second's requests got an answer is stopped at once with an error that
//! names the address (`connection refused: is a server listening on …?`);
//! a server that stops answering later does not stop the run, and the
//! report says so when the run ended without it ([`Report::stopped_answering`]).
//!
//! **Several targets** ([`run_targets`]: nodes of one service, same path and
//! query) are balanced per connection, round-robin, as an L4 balancer does:
//! connection *i* goes to target *i mod n* for the whole run (`deal`).
//! Requests follow the connections: in open loop the idle connections take
//! the tickets in turn, so the rate spreads as the connections do; in closed
//! loop a slower node's connections come back less often, so it gets fewer
//! requests. Each connection counts its own requests and adds them to its
//! target's totals when it ends: nothing is shared per request.
//!
//! **What counts as an error**: any answer but a 2xx, an answer whose body
//! is an XML-RPC or SOAP fault whatever its status ([`crate::fault`]), and
//! a request that got no answer (connect, I/O, timeout, render).
//!
//! **Method and path**: every request uses [`Plan::method`] (POST unless
//! told otherwise; `PUT` for raw uploads to `PUT /v1/media/{name}`); a
//! path holding `{seq}`/`{uuid}` is rendered per request into the request
//! line, a fixed one is encoded once with the other fixed headers.

use crate::error::{Error, Result};
use crate::limits::{LimitKind, Limits};
use crate::memory::MemoryReport;
use crate::pattern::{Pattern, Vars};
use crate::scenario::Scenario;
use crate::stats::{Bucket, Latency, Live, Outcome, Recorder, Sample};
use crate::target::{same_service, Target};
use crate::threshold::ThresholdResult;
use crate::verdict::{self, FirstSecond, StoppedAnswering, Tried};
use crate::wire::{push_decimal, Wire};
use http::header::{HeaderName, HeaderValue};
use rand::SeedableRng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// A fixed arrival rate, in requests per second.
    Open { rate: f64 },
    /// Each connection sends as soon as its previous answer arrived.
    Closed,
}

/// How long and how hard to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: Mode,
    /// Connection tasks (the pool cap).
    pub connections: usize,
    /// Stop issuing after this long.
    pub duration: Option<Duration>,
    /// Stop issuing after this many requests.
    pub requests: Option<u64>,
    /// Whole exchange per request (connect, send, answer).
    pub timeout: Duration,
    /// Client threads, each with its own single-threaded runtime and a
    /// share of the connections (default: the available parallelism).
    pub threads: usize,
    /// Open loop: a request sent later than this after its intended time is
    /// counted as late.
    pub late_after: Duration,
    /// The request method (default POST).
    pub method: http::Method,
    pub limits: Limits,
}

impl Plan {
    /// Defaults: 64 connections open loop, 10 closed loop; 30 s timeout;
    /// late after 10 ms.
    pub fn new(mode: Mode) -> Plan {
        Plan {
            mode,
            connections: match mode {
                Mode::Open { .. } => 64,
                Mode::Closed => 10,
            },
            duration: None,
            requests: None,
            timeout: Duration::from_secs(30),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            late_after: Duration::from_millis(10),
            method: http::Method::POST,
            limits: Limits::default(),
        }
    }

    fn check(&self) -> Result<()> {
        if self.duration.is_none() && self.requests.is_none() {
            return Err(Error::config("give a duration or a number of requests"));
        }
        if self.connections == 0 {
            return Err(Error::config("connections must be at least 1"));
        }
        if self.threads == 0 {
            return Err(Error::config("threads must be at least 1"));
        }
        if self.connections > self.limits.connections {
            let what = format!("{} connections asked", self.connections);
            return Err(Error::limit(
                LimitKind::Connections,
                self.limits.connections as u64,
                what,
            ));
        }
        if matches!(self.method, http::Method::HEAD | http::Method::CONNECT) {
            // A HEAD answer announces a body it does not send, and CONNECT
            // makes a tunnel: neither fits a request-body load.
            return Err(Error::config(format!(
                "method {} is not supported; use GET, POST, PUT, PATCH, DELETE or another",
                self.method
            )));
        }
        if let Mode::Open { rate } = self.mode {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(Error::config(format!("rate must be positive, got {rate}")));
            }
        }
        Ok(())
    }
}

/// The results of one run (JSON output is this, serialized).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    /// The request method.
    pub method: String,
    /// The target's URL (the first one's, when there are several).
    pub url: String,
    /// `open` or `closed`.
    pub mode: &'static str,
    /// Open loop: requests per second asked for.
    pub rate: Option<f64>,
    pub connections: usize,
    /// From the start to the last answer.
    pub elapsed_s: f64,
    /// Requests issued.
    pub sent: u64,
    /// Requests answered, whatever the status (faults included): only these
    /// have a latency and count in `rps`.
    pub completed: u64,
    /// Requests that ended without an answer (refused, reset, timed out; by
    /// reason in `by_error`): errors, never completions.
    pub no_answer: u64,
    /// 2xx answers that were not faults.
    pub ok: u64,
    /// Everything else: other statuses, faults (whatever their status) and
    /// requests without an answer.
    pub errors: u64,
    /// `errors / (completed + no_answer)`: of every request that ended.
    pub error_rate: f64,
    /// Every answer by HTTP status, faults included.
    pub by_status: BTreeMap<String, u64>,
    /// Answers that were XML-RPC or SOAP faults.
    pub faults: u64,
    /// Faults by code: `xmlrpc:403`, `soap:Client`, … (`other` past
    /// [`crate::stats::FAULT_CODES`] codes).
    pub by_fault: BTreeMap<String, u64>,
    /// Requests without an answer, by reason: `connect`, `connect-timeout`,
    /// `io`, `timeout`, `render`.
    pub by_error: BTreeMap<String, u64>,
    /// Answers per second of `elapsed_s`.
    pub rps: f64,
    /// Request body bytes sent (headers not counted).
    pub bytes_sent: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
    pub sent_bytes_per_s: f64,
    pub received_bytes_per_s: f64,
    /// From the intended send time (open loop); equals `uncorrected` closed.
    pub corrected: Latency,
    /// From the actual send.
    pub uncorrected: Latency,
    pub late: Late,
    /// Set when the run ended on a second or more of requests without an
    /// answer: the server went away and did not come back
    /// ([`crate::verdict`]); `bulkwire load` then exits non-zero.
    pub stopped_answering: Option<StoppedAnswering>,
    /// Per second, by completion time, of the corrected view.
    pub timeline: Vec<Bucket>,
    pub timeline_truncated: bool,
    pub memory: Option<MemoryReport>,
    pub thresholds: Vec<ThresholdResult>,
    /// What went wrong beside the requests (e.g. no memory gauge on the
    /// metrics page); left out of the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Per target, in the order given, when there are several (empty, and
    /// left out of the JSON, with one). The totals above cover them all.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetCounts>,
}

/// One target's share of a run.
#[derive(Debug, Clone, Serialize)]
pub struct TargetCounts {
    pub url: String,
    /// Connections dealt to it.
    pub connections: usize,
    /// Requests answered on its connections (whatever the status).
    pub requests: u64,
    /// Non-2xx answers, faults and requests that got no answer.
    pub errors: u64,
    /// `requests` per second of the run's `elapsed_s`.
    pub rps: f64,
}

/// Requests that could not be sent on time (open loop).
#[derive(Debug, Clone, Serialize)]
pub struct Late {
    pub count: u64,
    pub after_ms: f64,
    /// Largest delay between intended and actual send.
    pub max_ms: f64,
}

/// A header value: fixed, or rendered per request.
enum Header {
    Static(HeaderValue),
    Pattern(Pattern),
}

/// What every connection task shares.
struct Ctx {
    /// The targets; a connection uses one for the whole run.
    nodes: Vec<Node>,
    plan: Plan,
    scenario: Arc<dyn Scenario>,
    rec: Recorder,
    live: Arc<Live>,
    next: AtomicU64,
    start: Instant,
    end: Option<Instant>,
    first: FirstSecond,
    /// Set to true to call the run off: every client thread drops its
    /// connections, requests in flight included.
    stop: tokio::sync::watch::Sender<bool>,
}

/// One target as its connections use it.
struct Node {
    target: Target,
    /// The request line (unless `path` is set) and every fixed header
    /// (this node's `Host`), encoded once.
    head: Vec<u8>,
    /// A path with variables, rendered into each request's request line.
    path: Option<Pattern>,
    /// Headers rendered per request (`{seq}`/`{uuid}`, or a value that
    /// failed `HeaderValue`'s check, which fails each request as `render`).
    dynamic: Vec<(HeaderName, Pattern)>,
    /// Connections dealt to it.
    connections: usize,
    /// Added to by each of its connections once, when it ends: answers, and
    /// errors (with the requests that got no answer).
    completed: AtomicU64,
    errors: AtomicU64,
    /// The first failed connect's error, for the message when nothing
    /// answers.
    connect_error: OnceLock<std::io::Error>,
}

/// Runs `plan` against `target` on [`Plan::threads`] client threads, and
/// waits for them on the current tokio runtime; `live` is updated as
/// requests finish (for a progress line).
pub async fn run(
    target: Target,
    plan: Plan,
    scenario: Arc<dyn Scenario>,
    live: Arc<Live>,
) -> Result<Report> {
    run_targets(vec![target], plan, scenario, live).await
}

/// [`run`] against several nodes of one service (the same path and query),
/// connections dealt out round-robin: connection `i` to `targets[i % n]`
/// (see the module docs). Each target needs a connection of its own.
pub async fn run_targets(
    targets: Vec<Target>,
    plan: Plan,
    scenario: Arc<dyn Scenario>,
    live: Arc<Live>,
) -> Result<Report> {
    plan.check()?;
    same_service(&targets)?;
    if targets.len() > plan.connections {
        return Err(Error::config(format!(
            "{} targets need at least {} connections (one each), got {}",
            targets.len(),
            targets.len(),
            plan.connections
        )));
    }
    let content_type = HeaderValue::from_str(scenario.content_type())
        .map_err(|e| Error::config(format!("content type: {e}")))?;
    let threads = plan.threads.min(plan.connections);
    let n = targets.len();
    let dealt = deal(plan.connections, threads, n);
    let nodes = targets
        .into_iter()
        .enumerate()
        .map(|(i, target)| {
            let (head, dynamic) = fixed_head(&target, &content_type, &plan.method);
            Node {
                connections: share(plan.connections, n, i),
                path: (!target.path_pattern.is_static()).then(|| target.path_pattern.clone()),
                target,
                head,
                dynamic,
                completed: AtomicU64::new(0),
                errors: AtomicU64::new(0),
                connect_error: OnceLock::new(),
            }
        })
        .collect();
    let start = Instant::now();
    let ctx = Arc::new(Ctx {
        nodes,
        end: plan.duration.map(|d| start + d),
        rec: Recorder::new(
            start.into_std(),
            plan.late_after,
            plan.limits.timeline_seconds,
        ),
        plan,
        scenario,
        live,
        next: AtomicU64::new(0),
        start,
        first: FirstSecond::new(start),
        stop: tokio::sync::watch::channel(false).0,
    });
    // Each thread's runtime reports back here; a panic drops its sender.
    let mut done = Vec::with_capacity(threads);
    for (t, conns) in dealt.into_iter().enumerate() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let ctx = ctx.clone();
        std::thread::Builder::new()
            .name(format!("load-{t}"))
            .spawn(move || drop(tx.send(client_thread(ctx, conns))))
            .map_err(|e| Error::io("client thread", e))?;
        done.push(rx);
    }
    let threads = async {
        for rx in done {
            rx.await
                .map_err(|_| Error::io("client thread", "panicked"))??;
        }
        Ok::<_, Error>(())
    };
    tokio::pin!(threads);
    tokio::select! {
        r = &mut threads => r?,
        () = verdict::nothing_answered(&ctx.first, &ctx.live) => {
            ctx.stop.send_replace(true);
            threads.await?;
            return Err(unreachable(&ctx));
        }
    }
    // A run shorter than its first second, or one whose every request
    // timed out, may end before the verdict above: the same rule.
    if ctx.live.completed.load(Ordering::Acquire) == 0
        && ctx.live.errors.load(Ordering::Acquire) > 0
    {
        return Err(unreachable(&ctx));
    }
    Ok(report(&ctx))
}

/// The error of a run nothing answered, from what its connections saw.
fn unreachable(ctx: &Ctx) -> Error {
    verdict::unreachable(&Tried {
        places: ctx.nodes.iter().map(|n| n.target.place()).collect(),
        connect_error: ctx.nodes.iter().find_map(|n| n.connect_error.get()),
        by_error: ctx.rec.by_error(),
        timeout: ctx.plan.timeout,
    })
}

/// Each client thread's connections, as the target index of each: threads
/// get consecutive connection numbers, as evenly as they go, and connection
/// `i` goes to target `i % targets` (round-robin, fixed for the run).
fn deal(connections: usize, threads: usize, targets: usize) -> Vec<Vec<usize>> {
    let mut next = 0;
    (0..threads)
        .map(|t| {
            let conns = (connections + threads - 1 - t) / threads;
            next += conns;
            (next - conns..next).map(|i| i % targets).collect()
        })
        .collect()
}

/// How many connections [`deal`] gives to target `i` of `targets`: `i`,
/// `i + targets`, `i + 2 targets`, … below `connections`.
fn share(connections: usize, targets: usize, i: usize) -> usize {
    (connections + targets - 1 - i) / targets
}

/// One client thread: a connection task per entry of `conns` (its target)
/// on a single-threaded runtime of its own, so each connection's wake-ups,
/// I/O and timers stay on one thread and one epoll loop (as wrk's threads),
/// with no work stealing or cross-thread wake-ups between them.
fn client_thread(ctx: Arc<Ctx>, conns: Vec<usize>) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))?;
    rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for node in conns {
            tasks.spawn(worker(ctx.clone(), node));
        }
        let mut stop = ctx.stop.subscribe();
        let all = async {
            while let Some(t) = tasks.join_next().await {
                t.map_err(|e| Error::io("connection task", e))?;
            }
            Ok(())
        };
        tokio::select! {
            r = all => r,
            // Called off: the tasks are dropped with the set, mid-request
            // or not (the run's report is not made).
            _ = stop.wait_for(|stop| *stop) => Ok(()),
        }
    })
}

/// Runs on a new [`runtime`] with `threads` client threads (default: the
/// available parallelism).
pub fn run_blocking(
    threads: Option<usize>,
    target: Target,
    mut plan: Plan,
    scenario: Arc<dyn Scenario>,
    live: Arc<Live>,
) -> Result<Report> {
    if let Some(n) = threads {
        plan.threads = n;
    }
    runtime()?.block_on(run(target, plan, scenario, live))
}

/// The runtime a run is started from, for what goes on beside the load
/// (memory sampling, the progress line): single-threaded, all drivers on.
/// The load itself runs on [`Plan::threads`] threads of its own.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))
}

/// A multi-threaded runtime with `threads` workers (default: the available
/// parallelism), for work that is not a [`run`] (the sweep's uploads).
pub fn multi_thread_runtime(threads: Option<usize>) -> Result<tokio::runtime::Runtime> {
    let n = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(n.max(1))
        .enable_all()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))
}

/// The request line (RFC 9112 §3; left to each request when the path has
/// variables) and the headers that are the same on every request, as
/// bytes; the headers to render per request.
fn fixed_head(
    target: &Target,
    content_type: &HeaderValue,
    method: &http::Method,
) -> (Vec<u8>, Vec<(HeaderName, Pattern)>) {
    let mut head = match target.path_pattern.is_static() {
        true => format!("{method} {} HTTP/1.1\r\n", target.path).into_bytes(),
        false => Vec::new(),
    };
    let mut field = |name: &[u8], value: &[u8]| {
        for piece in [name, b": ", value, b"\r\n"] {
            head.extend_from_slice(piece);
        }
    };
    field(b"host", target.host.as_bytes());
    field(b"content-type", content_type.as_bytes());
    let mut dynamic = Vec::new();
    for (name, p) in &target.headers {
        match header(p) {
            Header::Static(v) => field(name.as_str().as_bytes(), v.as_bytes()),
            Header::Pattern(p) => dynamic.push((name.clone(), p)),
        }
    }
    (head, dynamic)
}

fn header(p: &Pattern) -> Header {
    match p.literal().map(HeaderValue::try_from) {
        Some(Ok(v)) => Header::Static(v),
        // `Target::header` checked a sample value; a bad one fails its request.
        _ => Header::Pattern(p.clone()),
    }
}

fn report(ctx: &Ctx) -> Report {
    let t = ctx.rec.finish();
    let sent = ctx.live.sent.load(Ordering::Relaxed);
    let elapsed = t
        .last_done
        .map_or(Duration::ZERO, |d| {
            d.saturating_duration_since(ctx.start.into_std())
        })
        .as_secs_f64();
    let per_s = |n: u64| {
        if elapsed > 0.0 {
            n as f64 / elapsed
        } else {
            0.0
        }
    };
    let ended = t.completed + t.no_answer;
    let errors = ended - t.ok;
    let since_start = |i: Option<std::time::Instant>| {
        i.map(|i| i.saturating_duration_since(ctx.start.into_std()))
    };
    let stopped_answering = verdict::stopped_answering(
        since_start(t.last_answer),
        since_start(t.last_done),
        t.no_answer_since,
    );
    let targets = match &ctx.nodes[..] {
        [_] => Vec::new(),
        nodes => nodes
            .iter()
            .map(|n| {
                let requests = n.completed.load(Ordering::Relaxed);
                TargetCounts {
                    url: n.target.url.clone(),
                    connections: n.connections,
                    requests,
                    errors: n.errors.load(Ordering::Relaxed),
                    rps: per_s(requests),
                }
            })
            .collect(),
    };
    Report {
        scenario: ctx.scenario.name().into(),
        method: ctx.plan.method.to_string(),
        url: ctx.nodes[0].target.url.clone(),
        mode: match ctx.plan.mode {
            Mode::Open { .. } => "open",
            Mode::Closed => "closed",
        },
        rate: match ctx.plan.mode {
            Mode::Open { rate } => Some(rate),
            Mode::Closed => None,
        },
        connections: ctx.plan.connections,
        elapsed_s: elapsed,
        sent,
        completed: t.completed,
        no_answer: t.no_answer,
        ok: t.ok,
        errors,
        error_rate: if ended > 0 {
            errors as f64 / ended as f64
        } else {
            0.0
        },
        by_status: t.by_status,
        faults: t.faults,
        by_fault: t.by_fault,
        by_error: t.by_error,
        rps: per_s(t.completed),
        bytes_sent: t.bytes_sent,
        bytes_received: t.bytes_received,
        sent_bytes_per_s: per_s(t.bytes_sent),
        received_bytes_per_s: per_s(t.bytes_received),
        corrected: t.corrected,
        uncorrected: t.uncorrected,
        late: Late {
            count: t.late,
            after_ms: ctx.plan.late_after.as_secs_f64() * 1000.0,
            max_ms: t.late_max_ms,
        },
        stopped_answering,
        timeline: t.timeline,
        timeline_truncated: t.timeline_truncated,
        memory: None,
        thresholds: Vec::new(),
        warnings: Vec::new(),
        targets,
    }
}

impl Ctx {
    /// The next request's sequence number and intended send time (`None` in
    /// closed loop), or `None` when the run is over.
    fn ticket(&self) -> Option<(u64, Option<Instant>)> {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        if self.plan.requests.is_some_and(|max| seq >= max) {
            return None;
        }
        let intended = match self.plan.mode {
            Mode::Open { rate } => Some(self.start + Duration::from_secs_f64(seq as f64 / rate)),
            Mode::Closed => None,
        };
        let at = intended.unwrap_or_else(Instant::now);
        if self.end.is_some_and(|end| at >= end) {
            return None;
        }
        Some((seq, intended))
    }
}

/// A connection task's own state, reused from request to request.
struct Worker {
    ctx: Arc<Ctx>,
    /// Index of its target in `ctx.nodes`.
    node: usize,
    /// Requests answered and failed on this connection, added to its
    /// node's counters at the end.
    completed: u64,
    errors: u64,
    /// The keep-alive connection, if open.
    conn: Option<Wire>,
    /// This request's head.
    head: Vec<u8>,
    /// A rendered header value.
    value: String,
    /// The timeout timer, armed at some earlier deadline (see [`within`]).
    watchdog: Pin<Box<Sleep>>,
}

async fn worker(ctx: Arc<Ctx>, node: usize) {
    let mut rng = rand::rngs::StdRng::from_entropy();
    let mut w = Worker {
        watchdog: Box::pin(tokio::time::sleep(ctx.plan.timeout)),
        ctx,
        node,
        completed: 0,
        errors: 0,
        conn: None,
        head: Vec::new(),
        value: String::new(),
    };
    while let Some((seq, intended)) = w.ctx.ticket() {
        // Connect before waiting, so a new connection's handshake does not
        // count against the request when there is slack.
        let ready = w.ready().await;
        if let Some(at) = intended {
            tokio::time::sleep_until(at).await;
        }
        let sent = Instant::now();
        w.ctx.live.sent.fetch_add(1, Ordering::Relaxed);
        let first = w.ctx.first.sent(sent);
        let vars = Vars::new(seq, &mut rng);
        let (outcome, up, down) = match ready {
            Ok(()) => w.exchange(&vars, sent).await,
            Err(why) => (Outcome::Failed(why), 0, 0),
        };
        let sample = Sample {
            intended: intended.unwrap_or(sent).into_std(),
            sent: sent.into_std(),
            done: std::time::Instant::now(),
            outcome,
            bytes_sent: up,
            bytes_received: down,
        };
        w.ctx.rec.record(&sample);
        count_live(&w.ctx.live, &sample);
        if first {
            w.ctx.first.ended();
        }
        w.completed += u64::from(sample.outcome.answered());
        w.errors += u64::from(!sample.outcome.is_ok());
    }
    let node = w.node();
    node.completed.fetch_add(w.completed, Ordering::Relaxed);
    node.errors.fetch_add(w.errors, Ordering::Relaxed);
}

fn count_live(live: &Live, s: &Sample) {
    if s.outcome.answered() {
        live.completed.fetch_add(1, Ordering::Relaxed);
    }
    live.bytes_sent.fetch_add(s.bytes_sent, Ordering::Relaxed);
    if !s.outcome.is_ok() {
        live.errors.fetch_add(1, Ordering::Relaxed);
    }
}

impl Worker {
    fn node(&self) -> &Node {
        &self.ctx.nodes[self.node]
    }

    /// Makes sure `conn` is open and idle, reconnecting if the server closed it.
    async fn ready(&mut self) -> Result<(), &'static str> {
        if let Some(c) = &mut self.conn {
            if c.idle_ok().await {
                return Ok(());
            }
        }
        self.conn = None;
        match tokio::time::timeout(self.ctx.plan.timeout, connect(self.node().target.addr)).await {
            Ok(Ok(c)) => {
                self.conn = Some(c);
                Ok(())
            }
            Ok(Err(e)) => {
                // Kept once, for the message if nothing ever answers.
                let _ = self.node().connect_error.set(e);
                Err("connect")
            }
            Err(_) => Err("connect-timeout"),
        }
    }

    /// Sends one request on `conn` and reads the whole answer: the outcome
    /// and the body bytes sent and received.
    async fn exchange(&mut self, vars: &Vars, sent: Instant) -> (Outcome, u64, u64) {
        let Ok(payload) = self.ctx.scenario.render(vars) else {
            return (Outcome::Failed("render"), 0, 0);
        };
        let len = payload.len;
        let node = &self.ctx.nodes[self.node];
        let method = &self.ctx.plan.method;
        if !request_head(node, method, vars, len, &mut self.head, &mut self.value) {
            return (Outcome::Failed("render"), 0, 0);
        }
        let Some(wire) = self.conn.as_mut() else {
            return (Outcome::Failed("connect"), 0, 0);
        };
        let deadline = sent + self.ctx.plan.timeout;
        let go = wire.exchange(&self.head, &payload.segments);
        match within(&mut self.watchdog, deadline, go).await {
            Some(Ok(answer)) => {
                if !answer.reusable {
                    self.conn = None;
                }
                let outcome = match answer.fault {
                    Some(f) => Outcome::Fault(answer.status, f),
                    None => Outcome::Status(answer.status),
                };
                (outcome, len, answer.body_bytes)
            }
            Some(Err(_)) => {
                self.conn = None;
                (Outcome::Failed("io"), 0, 0)
            }
            None => {
                // The connection is mid-exchange: drop it.
                self.conn = None;
                (Outcome::Failed("timeout"), 0, 0)
            }
        }
    }
}

async fn connect(addr: std::net::SocketAddr) -> std::io::Result<Wire> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(Wire::new(tcp))
}

/// Runs `f` until `deadline`; `None` if it was not done by then.
///
/// `tokio::time::timeout` would insert a timer entry into the wheel and
/// remove it again on every request. Deadlines of one connection only move
/// forward, so one timer per connection is enough: it stays armed at an
/// earlier request's deadline, and when it fires before this request's
/// deadline it is re-armed to it (once per `timeout`, not per request).
async fn within<F: Future>(
    watchdog: &mut Pin<Box<Sleep>>,
    deadline: Instant,
    f: F,
) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    poll_fn(|cx| {
        if let Poll::Ready(out) = f.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        while watchdog.as_mut().poll(cx).is_ready() {
            if Instant::now() >= deadline {
                return Poll::Ready(None);
            }
            watchdog.as_mut().reset(deadline);
        }
        Poll::Pending
    })
    .await
}

/// Writes this request's head into `out`: the request line if its path
/// has variables, the fixed part, the rendered headers and
/// `Content-Length`. False if a rendered value is not a valid header value
/// (the request fails as `render`).
fn request_head(
    node: &Node,
    method: &http::Method,
    vars: &Vars,
    len: u64,
    out: &mut Vec<u8>,
    value: &mut String,
) -> bool {
    out.clear();
    if let Some(path) = &node.path {
        value.clear();
        path.render(vars, value);
        // The literal parts were checked as a URI at start-up; the values
        // of {seq} and {uuid} are digits, hex and dashes.
        for piece in [
            method.as_str().as_bytes(),
            b" ",
            value.as_bytes(),
            b" HTTP/1.1\r\n",
        ] {
            out.extend_from_slice(piece);
        }
    }
    out.extend_from_slice(&node.head);
    for (name, p) in &node.dynamic {
        value.clear();
        p.render(vars, value);
        if !value.bytes().all(header_byte) {
            return false;
        }
        for piece in [name.as_str().as_bytes(), b": ", value.as_bytes(), b"\r\n"] {
            out.extend_from_slice(piece);
        }
    }
    out.extend_from_slice(b"content-length: ");
    push_decimal(out, len);
    out.extend_from_slice(b"\r\n\r\n");
    true
}

/// A byte `HeaderValue::from_str` accepts (visible ASCII, space, tab,
/// obs-text): checked here without building a `HeaderValue` per request.
fn header_byte(b: u8) -> bool {
    (b >= 0x20 && b != 0x7f) || b == b'\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_go_round_robin_over_targets_across_threads() {
        // Threads take consecutive connections; connection i goes to i % n.
        assert_eq!(deal(5, 2, 2), [vec![0, 1, 0], vec![1, 0]]);
        assert_eq!(deal(4, 4, 2), [vec![0], vec![1], vec![0], vec![1]]);
        assert_eq!(deal(7, 2, 3), [vec![0, 1, 2, 0], vec![1, 2, 0]]);
        assert_eq!(deal(3, 1, 1), [vec![0, 0, 0]]);
    }

    #[test]
    fn every_target_gets_its_share_of_connections() {
        for connections in 1..40 {
            for threads in 1..=connections.min(8) {
                for targets in 1..=connections.min(5) {
                    let d = deal(connections, threads, targets);
                    let all: Vec<usize> = d.iter().flatten().copied().collect();
                    let want: Vec<usize> = (0..connections).map(|i| i % targets).collect();
                    assert_eq!(all, want, "{connections} conns, {threads} threads");
                    let sizes: Vec<usize> = d.iter().map(Vec::len).collect();
                    let spread = |v: &[usize]| v.iter().max().unwrap() - v.iter().min().unwrap();
                    assert!(spread(&sizes) <= 1, "threads' shares {sizes:?}");
                    let per_target: Vec<usize> = (0..targets)
                        .map(|t| all.iter().filter(|&&n| n == t).count())
                        .collect();
                    let shares: Vec<usize> = (0..targets)
                        .map(|t| share(connections, targets, t))
                        .collect();
                    assert_eq!(shares, per_target, "{connections} conns");
                    assert!(spread(&per_target) <= 1, "targets' shares {per_target:?}");
                    assert!(per_target.iter().all(|&n| n > 0));
                }
            }
        }
    }
}
