//! The engine: connection tasks on one tokio runtime sending a
//! [`Scenario`]'s bodies to a [`Target`], open or closed loop.
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

use crate::body::Segments;
use crate::error::{Error, Result};
use crate::limits::{LimitKind, Limits};
use crate::memory::MemoryReport;
use crate::pattern::{Pattern, Vars};
use crate::scenario::Scenario;
use crate::stats::{Bucket, Latency, Live, Outcome, Recorder, Sample};
use crate::target::Target;
use crate::threshold::ThresholdResult;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http_body_util::BodyExt;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rand::SeedableRng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;

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
    /// Open loop: a request sent later than this after its intended time is
    /// counted as late.
    pub late_after: Duration,
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
            late_after: Duration::from_millis(10),
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
        if self.connections > self.limits.connections {
            let what = format!("{} connections asked", self.connections);
            return Err(Error::limit(
                LimitKind::Connections,
                self.limits.connections as u64,
                what,
            ));
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
    /// Requests finished (answered or failed).
    pub completed: u64,
    /// 2xx answers.
    pub ok: u64,
    /// Everything but 2xx: other statuses and failures without an answer.
    pub errors: u64,
    /// `errors / completed`.
    pub error_rate: f64,
    pub by_status: BTreeMap<String, u64>,
    pub by_error: BTreeMap<String, u64>,
    /// Completed per second of `elapsed_s`.
    pub rps: f64,
    /// Request body bytes sent (headers not counted).
    pub bytes_sent: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
    pub sent_bytes_per_s: f64,
    /// From the intended send time (open loop); equals `uncorrected` closed.
    pub corrected: Latency,
    /// From the actual send.
    pub uncorrected: Latency,
    pub late: Late,
    /// Per second, by completion time, of the corrected view.
    pub timeline: Vec<Bucket>,
    pub timeline_truncated: bool,
    pub memory: Option<MemoryReport>,
    pub thresholds: Vec<ThresholdResult>,
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
    target: Target,
    plan: Plan,
    scenario: Arc<dyn Scenario>,
    content_type: HeaderValue,
    /// `Target::headers`, with the static ones converted once.
    headers: Vec<(HeaderName, Header)>,
    rec: Recorder,
    live: Arc<Live>,
    next: AtomicU64,
    start: Instant,
    end: Option<Instant>,
}

/// Runs `plan` against `target` on the current tokio runtime; `live` is
/// updated as requests finish (for a progress line).
pub async fn run(
    target: Target,
    plan: Plan,
    scenario: Arc<dyn Scenario>,
    live: Arc<Live>,
) -> Result<Report> {
    plan.check()?;
    let content_type = HeaderValue::from_str(scenario.content_type())
        .map_err(|e| Error::config(format!("content type: {e}")))?;
    let headers = target
        .headers
        .iter()
        .map(|(n, p)| (n.clone(), header(p)))
        .collect();
    let start = Instant::now();
    let ctx = Arc::new(Ctx {
        headers,
        end: plan.duration.map(|d| start + d),
        rec: Recorder::new(
            start.into_std(),
            plan.late_after,
            plan.limits.timeline_seconds,
        ),
        target,
        plan,
        scenario,
        content_type,
        live,
        next: AtomicU64::new(0),
        start,
    });
    let tasks: Vec<_> = (0..ctx.plan.connections)
        .map(|_| tokio::spawn(worker(ctx.clone())))
        .collect();
    for t in tasks {
        t.await.map_err(|e| Error::io("connection task", e))?;
    }
    Ok(report(&ctx))
}

/// Builds a multi-threaded runtime with `threads` workers (default: the
/// available parallelism) and runs on it.
pub fn run_blocking(
    threads: Option<usize>,
    target: Target,
    plan: Plan,
    scenario: Arc<dyn Scenario>,
    live: Arc<Live>,
) -> Result<Report> {
    runtime(threads)?.block_on(run(target, plan, scenario, live))
}

/// The runtime the CLI uses: one, multi-threaded, all drivers on.
pub fn runtime(threads: Option<usize>) -> Result<tokio::runtime::Runtime> {
    let n = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(n.max(1))
        .enable_all()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))
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
    let errors = t.completed - t.ok;
    Report {
        scenario: ctx.scenario.name().into(),
        url: ctx.target.url.clone(),
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
        ok: t.ok,
        errors,
        error_rate: if t.completed > 0 {
            errors as f64 / t.completed as f64
        } else {
            0.0
        },
        by_status: t.by_status,
        by_error: t.by_error,
        rps: per_s(t.completed),
        bytes_sent: t.bytes_sent,
        bytes_received: t.bytes_received,
        sent_bytes_per_s: per_s(t.bytes_sent),
        corrected: t.corrected,
        uncorrected: t.uncorrected,
        late: Late {
            count: t.late,
            after_ms: ctx.plan.late_after.as_secs_f64() * 1000.0,
            max_ms: t.late_max_ms,
        },
        timeline: t.timeline,
        timeline_truncated: t.timeline_truncated,
        memory: None,
        thresholds: Vec::new(),
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

/// One keep-alive connection: hyper's request sender and its driver, the
/// future that does the connection's I/O.
struct Connection {
    sender: SendRequest<Segments>,
    driver: Driver,
    /// The driver has finished (the connection is closed).
    closed: bool,
}

type Driver = Pin<Box<http1::Connection<TokioIo<TcpStream>, Segments>>>;
type Conn = Option<Connection>;

/// Runs `f` while polling the connection's driver in the same task. hyper
/// splits a client connection into a sender and a driver future; spawning
/// the driver as its own task would cost two cross-task wake-ups per
/// request, a large share of the client's CPU with fast servers.
async fn drive<F: Future>(driver: &mut Driver, closed: &mut bool, f: F) -> F::Output {
    tokio::pin!(f);
    loop {
        tokio::select! {
            biased;
            out = &mut f => return out,
            _ = driver.as_mut(), if !*closed => *closed = true,
        }
    }
}

async fn worker(ctx: Arc<Ctx>) {
    let mut conn: Conn = None;
    let mut rng = rand::rngs::StdRng::from_entropy();
    while let Some((seq, intended)) = ctx.ticket() {
        // Connect before waiting, so a new connection's handshake does not
        // count against the request when there is slack.
        let ready = ready(&ctx, &mut conn).await;
        if let Some(at) = intended {
            tokio::time::sleep_until(at).await;
        }
        let sent = Instant::now();
        ctx.live.sent.fetch_add(1, Ordering::Relaxed);
        let vars = Vars::new(seq, &mut rng);
        let (outcome, up, down) = match ready {
            Ok(()) => exchange(&ctx, &mut conn, &vars).await,
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
        ctx.rec.record(&sample);
        count_live(&ctx.live, &sample);
    }
}

fn count_live(live: &Live, s: &Sample) {
    live.completed.fetch_add(1, Ordering::Relaxed);
    live.bytes_sent.fetch_add(s.bytes_sent, Ordering::Relaxed);
    if !s.outcome.is_ok() {
        live.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// Makes sure `conn` is open and idle, reconnecting if the server closed it.
async fn ready(ctx: &Ctx, conn: &mut Conn) -> Result<(), &'static str> {
    if let Some(c) = conn {
        if !c.closed && !c.sender.is_closed() {
            let Connection {
                sender,
                driver,
                closed,
            } = c;
            if drive(driver, closed, sender.ready()).await.is_ok() {
                return Ok(());
            }
        }
    }
    *conn = None;
    match tokio::time::timeout(ctx.plan.timeout, connect(ctx.target.addr)).await {
        Ok(Some(c)) => {
            *conn = Some(c);
            Ok(())
        }
        Ok(None) => Err("connect"),
        Err(_) => Err("connect-timeout"),
    }
}

async fn connect(addr: std::net::SocketAddr) -> Option<Connection> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    tcp.set_nodelay(true).ok()?;
    let (sender, driver) = http1::Builder::new()
        .writev(true)
        .handshake(TokioIo::new(tcp))
        .await
        .ok()?;
    let mut c = Connection {
        sender,
        driver: Box::pin(driver),
        closed: false,
    };
    let Connection {
        sender,
        driver,
        closed,
    } = &mut c;
    drive(driver, closed, sender.ready()).await.ok()?;
    Some(c)
}

/// Sends one request on `conn` and reads the whole answer: the outcome and
/// the body bytes sent and received.
async fn exchange(ctx: &Ctx, conn: &mut Conn, vars: &Vars) -> (Outcome, u64, u64) {
    let payload = match ctx.scenario.render(vars) {
        Ok(p) => p,
        Err(_) => return (Outcome::Failed("render"), 0, 0),
    };
    let len = payload.len;
    let Some(Connection {
        sender,
        driver,
        closed,
    }) = conn.as_mut()
    else {
        return (Outcome::Failed("connect"), 0, 0);
    };
    let req = match request(ctx, vars, len, Segments::from(payload)) {
        Ok(r) => r,
        Err(_) => return (Outcome::Failed("render"), 0, 0),
    };
    let go = async {
        let resp = sender.send_request(req).await?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut n = 0u64;
        while let Some(frame) = body.frame().await {
            if let Ok(d) = frame?.into_data() {
                n += d.len() as u64;
            }
        }
        Ok::<_, hyper::Error>((status, n))
    };
    match tokio::time::timeout(ctx.plan.timeout, drive(driver, closed, go)).await {
        Ok(Ok((status, n))) => (Outcome::Status(status), len, n),
        Ok(Err(_)) => {
            *conn = None;
            (Outcome::Failed("io"), 0, 0)
        }
        Err(_) => {
            // The connection is mid-exchange: drop it.
            *conn = None;
            (Outcome::Failed("timeout"), 0, 0)
        }
    }
}

fn request(
    ctx: &Ctx,
    vars: &Vars,
    len: u64,
    body: Segments,
) -> std::result::Result<http::Request<Segments>, http::Error> {
    let mut b = http::Request::post(ctx.target.path.clone())
        .header(HOST, ctx.target.host.clone())
        .header(CONTENT_TYPE, ctx.content_type.clone())
        .header(CONTENT_LENGTH, HeaderValue::from(len));
    for (name, value) in &ctx.headers {
        b = match value {
            Header::Static(v) => b.header(name, v.clone()),
            Header::Pattern(p) => b.header(name, p.to_string(vars)),
        };
    }
    b.body(body)
}
