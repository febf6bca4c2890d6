//! The attacker side of the soak benchmark (`bench/soak`): connections that
//! hold a server's resources while sending almost nothing.
//!
//! Three classes of actors, each one task that connects, trickles its
//! request and reconnects 200 ms after the connection ends, until
//! `--duration` is over:
//!
//! | class | request | then, every `--every` seconds |
//! |---|---|---|
//! | `slowloris` | `GET /healthz HTTP/1.1` and `Host`, header block never ended | one more header line `X-Pad-N: x` |
//! | `tricklers` | `POST /xmlrpc`, `Content-Length: 10485760`, the XML-RPC prefix of an unauthenticated `wp.uploadFile` up to the first byte of `username` | one byte `a` of that username: the call never reaches a password, so the server owes it no upload slot and no memory reservation |
//! | `slow_uploads` | `PUT /v1/media/slow-N` with `Authorization: Bearer TOKEN`, `Content-Length: 1048576` | one byte of the body |
//!
//! Each connection is split: the writer trickles while the reader waits for
//! an answer and parses its status line (RFC 9112 §4). An answer ends the
//! attempt (the actor closes, as a client that gave up would, and
//! reconnects); so does the server closing or resetting the connection, or
//! a failed write. Failed connects (10 s at most each) are counted and
//! retried after the same pause. Every buffer is a fixed array of a few
//! hundred bytes; the number of tasks is what the flags say.
//!
//! ```sh
//! ulimit -n "$(ulimit -Hn)"   # 3,000 connections need more than 1,024 descriptors
//! cargo run --release -p bulkwire-server --example abuse -- \
//!     --addr 127.0.0.1:8080 --duration 60 --token T \
//!     [--slowloris 3000] [--tricklers 64] [--slow-uploads 64] [--every 5] \
//!     [--ramp 10] [--pid "$(pidof bulkwire)"]
//! ```
//!
//! Actors start spread over `--ramp` seconds (default 10) so the server's
//! accept backlog is not flooded. With `--pid`, the server's `VmRSS`,
//! `VmHWM` (`/proc/PID/status`) and open descriptors (`/proc/PID/fd`) are
//! sampled once a second. A progress line goes to stderr every 10 s; at the
//! end one JSON object goes to stdout: per class `{actors, connections,
//! answers: {status: count}, closed_without_answer, resets, connect_errors,
//! open_at_end, open_peak, held_s: {mean, max}}` (`held_s` over the
//! connections that ended before the run did), and with `--pid`
//! `server: {pid, peak_rss_kib, peak_fds, …}`.
//!
//! The program does not raise its own descriptor limit (that takes a
//! dependency the crate does not have); it warns on stderr when the soft
//! limit is below what the actors need.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::{sleep, sleep_until, timeout, timeout_at, Instant};

/// Wait between a connection's end (or a failed connect) and the next one.
const PAUSE: Duration = Duration::from_millis(200);
/// Longest wait for one connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed write, how long the reader may still bring an answer.
const AFTER_WRITE_ERROR: Duration = Duration::from_secs(1);
/// Bytes of an answer kept: enough for any status line worth parsing.
const STATUS_LINE_MAX: usize = 256;
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Samples between two progress lines.
const PROGRESS_EVERY: u64 = 10;
/// Most actors of one class.
const MAX_ACTORS: usize = 100_000;
/// Descriptors the program needs besides its connections.
const FD_SLACK: u64 = 64;

const TRICKLER_LENGTH: u64 = 10 << 20;
const SLOW_UPLOAD_LENGTH: u64 = 1 << 20;
/// An unauthenticated `wp.uploadFile(1, username…`: the string never ends.
const XMLRPC_PREFIX: &str = "<?xml version=\"1.0\"?><methodCall>\
<methodName>wp.uploadFile</methodName><params><param><value><int>1</int>\
</value></param><param><value><string>";

const USAGE: &str = "usage: abuse --addr HOST:PORT [--duration SECS (60)] [--slowloris N (3000)] \
[--tricklers N (64)] [--slow-uploads N (64)] [--token TOKEN] [--every SECS (5)] [--ramp SECS (10)] \
[--pid PID]";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Slowloris,
    Trickler,
    SlowUpload,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Slowloris, Kind::Trickler, Kind::SlowUpload];

    fn name(self) -> &'static str {
        match self {
            Kind::Slowloris => "slowloris",
            Kind::Trickler => "tricklers",
            Kind::SlowUpload => "slow_uploads",
        }
    }

    /// What is sent at once: the request head and, for bodies, the prefix.
    fn head(self, id: usize, token: &str) -> String {
        match self {
            Kind::Slowloris => "GET /healthz HTTP/1.1\r\nHost: x\r\n".into(),
            Kind::Trickler => format!(
                "POST /xmlrpc HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\n\
                 Content-Length: {TRICKLER_LENGTH}\r\n\r\n{XMLRPC_PREFIX}"
            ),
            Kind::SlowUpload => format!(
                "PUT /v1/media/slow-{id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
                 Content-Type: application/octet-stream\r\nContent-Length: {SLOW_UPLOAD_LENGTH}\r\n\r\n"
            ),
        }
    }

    /// The `n`th trickled piece.
    fn piece(self, n: u64) -> String {
        match self {
            Kind::Slowloris => format!("X-Pad-{n}: x\r\n"),
            Kind::Trickler => "a".into(),
            Kind::SlowUpload => "b".into(),
        }
    }

    /// Pieces that fit in the declared body (a header block has no end).
    fn pieces(self) -> u64 {
        match self {
            Kind::Slowloris => u64::MAX,
            Kind::Trickler => TRICKLER_LENGTH - XMLRPC_PREFIX.len() as u64,
            Kind::SlowUpload => SLOW_UPLOAD_LENGTH,
        }
    }
}

#[derive(Debug)]
struct Args {
    addr: SocketAddr,
    duration: Duration,
    /// Actors per class, in the order of [`Kind::ALL`].
    counts: [usize; 3],
    token: String,
    every: Duration,
    ramp: Duration,
    pid: Option<u32>,
}

fn parse_secs(flag: &str, v: &str, max: f64) -> Result<Duration, String> {
    match v.parse::<f64>() {
        Ok(s) if (0.0..=max).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("bad {flag} {v:?} (seconds, at most {max})")),
    }
}

fn parse_count(flag: &str, v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if n <= MAX_ACTORS => Ok(n),
        _ => Err(format!("bad {flag} {v:?} (at most {MAX_ACTORS})")),
    }
}

fn parse_args() -> Result<Args, String> {
    let mut addr = None;
    let mut a = Args {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        duration: Duration::from_secs(60),
        counts: [3000, 64, 64],
        token: String::new(),
        every: Duration::from_secs(5),
        ramp: Duration::from_secs(10),
        pid: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--addr" => addr = Some(v.parse().map_err(|_| format!("bad address {v:?}"))?),
            "--duration" => a.duration = parse_secs(&flag, &v, 86_400.0)?,
            "--slowloris" => a.counts[0] = parse_count(&flag, &v)?,
            "--tricklers" => a.counts[1] = parse_count(&flag, &v)?,
            "--slow-uploads" => a.counts[2] = parse_count(&flag, &v)?,
            "--token" => a.token = v,
            "--every" => a.every = parse_secs(&flag, &v, 3600.0)?.max(Duration::from_millis(10)),
            "--ramp" => a.ramp = parse_secs(&flag, &v, 3600.0)?,
            "--pid" => a.pid = Some(v.parse().map_err(|_| format!("bad --pid {v:?}"))?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    a.addr = addr.ok_or("--addr is required")?;
    if a.counts[2] > 0 && a.token.is_empty() {
        return Err("--slow-uploads needs --token".into());
    }
    Ok(a)
}

/// How one connection ended.
#[derive(Debug)]
enum End {
    /// An answer with this status (`malformed` if its status line was not).
    Answer(String),
    /// The server closed without an answer.
    Closed,
    /// The connection was reset or broke without an answer.
    Reset,
    /// Still open when the run ended.
    StillOpen,
}

/// Counters of one class, shared by its actors.
#[derive(Default)]
struct ClassStats {
    connections: AtomicU64,
    connect_errors: AtomicU64,
    closed_without_answer: AtomicU64,
    resets: AtomicU64,
    open_at_end: AtomicU64,
    open: AtomicU64,
    open_peak: AtomicU64,
    /// Connections that ended before the run did, and how long they lasted.
    ended: AtomicU64,
    held_ms_sum: AtomicU64,
    held_ms_max: AtomicU64,
    answers: Mutex<BTreeMap<String, u64>>,
}

impl ClassStats {
    fn opened(&self) {
        self.connections.fetch_add(1, Relaxed);
        let open = self.open.fetch_add(1, Relaxed) + 1;
        self.open_peak.fetch_max(open, Relaxed);
    }

    fn closed(&self, end: End, held: Duration) {
        self.open.fetch_sub(1, Relaxed);
        let counter = match end {
            End::Answer(status) => {
                let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
                *answers.entry(status).or_default() += 1;
                None
            }
            End::Closed => Some(&self.closed_without_answer),
            End::Reset => Some(&self.resets),
            End::StillOpen => {
                self.open_at_end.fetch_add(1, Relaxed);
                return;
            }
        };
        if let Some(c) = counter {
            c.fetch_add(1, Relaxed);
        }
        let ms = u64::try_from(held.as_millis()).unwrap_or(u64::MAX);
        self.ended.fetch_add(1, Relaxed);
        self.held_ms_sum.fetch_add(ms, Relaxed);
        self.held_ms_max.fetch_max(ms, Relaxed);
    }

    fn report(&self, actors: usize) -> Value {
        let answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        let ended = self.ended.load(Relaxed);
        let mean_ms = self.held_ms_sum.load(Relaxed) as f64 / ended.max(1) as f64;
        json!({
            "actors": actors,
            "connections": self.connections.load(Relaxed),
            "answers": *answers,
            "closed_without_answer": self.closed_without_answer.load(Relaxed),
            "resets": self.resets.load(Relaxed),
            "connect_errors": self.connect_errors.load(Relaxed),
            "open_at_end": self.open_at_end.load(Relaxed),
            "open_peak": self.open_peak.load(Relaxed),
            "held_s": {
                "mean": mean_ms.round() / 1000.0,
                "max": self.held_ms_max.load(Relaxed) as f64 / 1000.0,
            },
        })
    }
}

/// `200` from `HTTP/1.1 200 OK`, else `malformed`.
fn status_of(line: &[u8]) -> String {
    let mut words = line.split(|&b| b == b' ');
    let version = words.next().unwrap_or_default();
    match words.next() {
        Some(code)
            if version.starts_with(b"HTTP/")
                && code.len() == 3
                && code.iter().all(u8::is_ascii_digit) =>
        {
            String::from_utf8_lossy(code).into_owned()
        }
        _ => "malformed".into(),
    }
}

/// Reads until the status line is in, or the connection ends.
async fn read_answer(mut rd: OwnedReadHalf) -> End {
    let mut buf = [0u8; STATUS_LINE_MAX];
    let mut len = 0;
    loop {
        let (n, failed) = match rd.read(&mut buf[len..]).await {
            Ok(n) => (n, false),
            Err(_) => (0, true),
        };
        len += n;
        let line_done = buf[..len].contains(&b'\n') || len == buf.len();
        if line_done || (n == 0 && len > 0) {
            return End::Answer(status_of(&buf[..len]));
        }
        if n == 0 {
            return if failed { End::Reset } else { End::Closed };
        }
    }
}

/// Sends the head, then one piece every `every`; `Ok` once the declared
/// body is all sent (never, at the rates this program is for).
async fn trickle(mut wr: OwnedWriteHalf, kind: Kind, id: usize, args: &Args) -> io::Result<()> {
    wr.write_all(kind.head(id, &args.token).as_bytes()).await?;
    for n in 0..kind.pieces() {
        sleep(args.every).await;
        wr.write_all(kind.piece(n).as_bytes()).await?;
    }
    Ok(())
}

/// One connection, from connect to its end or the end of the run.
async fn run_conn(stream: TcpStream, kind: Kind, id: usize, args: &Args, deadline: Instant) -> End {
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let reader = read_answer(rd);
    let writer = trickle(wr, kind, id, args);
    tokio::pin!(reader, writer);
    tokio::select! {
        end = &mut reader => end,
        () = sleep_until(deadline) => End::StillOpen,
        sent = &mut writer => match sent {
            Ok(()) => timeout_at(deadline, reader).await.unwrap_or(End::StillOpen),
            Err(_) => timeout(AFTER_WRITE_ERROR, reader).await.unwrap_or(End::Reset),
        },
    }
}

/// One actor: connects, trickles, reconnects, until `deadline`.
async fn actor(
    kind: Kind,
    id: usize,
    args: Arc<Args>,
    stats: Arc<[ClassStats; 3]>,
    start: Instant,
    deadline: Instant,
) {
    let stats = &stats[kind as usize];
    sleep_until(start).await;
    while Instant::now() < deadline {
        let give_up = deadline.min(Instant::now() + CONNECT_TIMEOUT);
        match timeout_at(give_up, TcpStream::connect(args.addr)).await {
            Ok(Ok(stream)) => {
                let t0 = Instant::now();
                stats.opened();
                let end = run_conn(stream, kind, id, &args, deadline).await;
                stats.closed(end, t0.elapsed());
            }
            _ if Instant::now() >= deadline => break,
            _ => {
                stats.connect_errors.fetch_add(1, Relaxed);
            }
        }
        sleep_until((Instant::now() + PAUSE).min(deadline)).await;
    }
}

/// `(VmRSS KiB, VmHWM KiB, open descriptors)` of `pid`, `None` once it is gone.
fn read_proc(pid: u32) -> Option<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some((field("VmRSS:"), field("VmHWM:"), fds))
}

/// Peaks of the server's memory and descriptors over the run.
#[derive(Default)]
struct Peaks {
    rss_kib: u64,
    hwm_kib: u64,
    fds: u64,
    last: Option<(u64, u64, u64)>,
    samples: u64,
    gone: bool,
}

impl Peaks {
    fn add(&mut self, s: Option<(u64, u64, u64)>) {
        let Some((rss, hwm, fds)) = s else {
            self.gone = true;
            return;
        };
        self.rss_kib = self.rss_kib.max(rss);
        self.hwm_kib = self.hwm_kib.max(hwm);
        self.fds = self.fds.max(fds);
        self.last = s;
        self.samples += 1;
    }

    fn report(&self, pid: u32) -> Value {
        json!({
            "pid": pid,
            // The bulkwire load tool resets VmHWM at its start: the peak is
            // the larger of the sampled VmRSS and every VmHWM seen.
            "peak_rss_kib": self.rss_kib.max(self.hwm_kib),
            "peak_sampled_rss_kib": self.rss_kib,
            "peak_fds": self.fds,
            "end_rss_kib": self.last.map(|l| l.0),
            "end_fds": self.last.map(|l| l.2),
            "samples": self.samples,
            "exited": self.gone,
        })
    }
}

fn progress(elapsed: Duration, stats: &[ClassStats; 3], last: Option<(u64, u64, u64)>) {
    let mut line = format!("abuse: {:>5.0}s open", elapsed.as_secs_f64());
    for k in Kind::ALL {
        line += &format!(" {} {}", k.name(), stats[k as usize].open.load(Relaxed));
    }
    if let Some((rss, _, fds)) = last {
        line += &format!("; server rss {:.1} MiB, fds {fds}", rss as f64 / 1024.0);
    }
    eprintln!("{line}");
}

/// Samples the server once a second until `deadline`; reports progress.
async fn sampler(
    pid: Option<u32>,
    stats: Arc<[ClassStats; 3]>,
    start: Instant,
    deadline: Instant,
) -> Option<Value> {
    let mut peaks = Peaks::default();
    let mut tick = 0u64;
    while Instant::now() < deadline {
        sleep_until((Instant::now() + SAMPLE_EVERY).min(deadline)).await;
        tick += 1;
        if let (Some(pid), false) = (pid, peaks.gone) {
            let s = tokio::task::spawn_blocking(move || read_proc(pid))
                .await
                .ok()
                .flatten();
            peaks.add(s);
        }
        if tick.is_multiple_of(PROGRESS_EVERY) {
            progress(start.elapsed(), &stats, peaks.last);
        }
    }
    pid.map(|pid| peaks.report(pid))
}

/// Warns when the soft descriptor limit is below what the actors need.
fn check_fd_limit(actors: usize) {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
        });
    let need = actors as u64 + FD_SLACK;
    if let Some(soft) = soft.filter(|&s| s < need) {
        eprintln!(
            "abuse: warning: open files limit {soft} < {need} needed; \
             run `ulimit -n \"$(ulimit -Hn)\"` first (connects will fail)"
        );
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("abuse: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    check_fd_limit(args.counts.iter().sum());
    let start = Instant::now();
    let deadline = start + args.duration;
    let stats: Arc<[ClassStats; 3]> = Arc::default();
    let mut actors = JoinSet::new();
    for kind in Kind::ALL {
        let n = args.counts[kind as usize];
        for id in 0..n {
            // Each class spreads its starts over the whole ramp.
            let at = start + args.ramp.mul_f64(id as f64 / n as f64);
            actors.spawn(actor(kind, id, args.clone(), stats.clone(), at, deadline));
        }
    }
    let sampling = tokio::spawn(sampler(args.pid, stats.clone(), start, deadline));
    // Every actor stops at the deadline; the margin only guards against a bug.
    let _ = timeout_at(deadline + Duration::from_secs(5), async {
        while actors.join_next().await.is_some() {}
    })
    .await;
    actors.abort_all();
    let server = sampling.await.ok().flatten();
    let mut report = json!({
        "addr": args.addr.to_string(),
        "duration_s": args.duration.as_secs_f64(),
        "every_s": args.every.as_secs_f64(),
    });
    for kind in Kind::ALL {
        let i = kind as usize;
        report[kind.name()] = stats[i].report(args.counts[i]);
    }
    if let Some(s) = server {
        report["server"] = s;
    }
    println!("{report}");
    ExitCode::SUCCESS
}
