//! Server memory during a run: sampled from `/proc/PID/status` (`VmRSS`,
//! `VmHWM`; proc(5)) or from a Prometheus `/metrics` page: bulkwire's own
//! `bulkwire_process_resident_memory_bytes`, or the standard process
//! collector's `process_resident_memory_bytes` (other servers).
//!
//! A metrics page without either gauge is not worth aborting a load run
//! for: [`Watcher::start_or_skip`] says so in a warning and the run goes on
//! without memory figures. An unreachable page still stops the run before
//! it starts (a mistyped URL should not cost a whole run to find out).
//!
//! For a pid, the peak-RSS mark is reset at the start by writing `5` to
//! `/proc/PID/clear_refs` (proc(5), Linux ≥ 4.0) where allowed, so `VmHWM`
//! at the end is the peak *during the run*, including spikes between two
//! samples. Where not allowed, the peak is the highest sample.

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::target::Target;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Where to read the server's memory.
#[derive(Debug, Clone)]
pub enum Source {
    Pid(u32),
    Metrics(Box<Target>),
}

/// Memory over the run, in bytes.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MemoryReport {
    /// `pid 1234` or the metrics URL.
    pub source: String,
    pub interval_ms: f64,
    /// `[seconds since start, resident bytes]`.
    pub samples: Vec<[f64; 2]>,
    /// More samples were taken than `Limits::memory_samples` keeps.
    pub samples_truncated: bool,
    pub start_bytes: u64,
    pub end_bytes: u64,
    /// Highest resident size seen during the run.
    pub peak_bytes: u64,
    /// `end - start` (negative if the server shrank).
    pub growth_bytes: i64,
    /// Whether `VmHWM` was reset at the start (so it bounds the peak).
    pub hwm_reset: bool,
    /// Samples that could not be read.
    pub failed_samples: u64,
}

/// The gauges read from a metrics page, in order of preference.
pub const GAUGES: [&str; 2] = [
    "bulkwire_process_resident_memory_bytes",
    "process_resident_memory_bytes",
];

/// A sampling task; [`Watcher::stop`] ends it and gives the report.
pub struct Watcher {
    stop: watch::Sender<bool>,
    task: JoinHandle<MemoryReport>,
}

/// How [`Watcher::start_or_skip`] went.
pub enum Start {
    Watching(Watcher),
    /// The metrics page has no memory gauge: the warning to give.
    NoGauge(String),
}

/// Why a sample could not be taken.
enum Miss {
    /// The page was read but has no gauge.
    NoGauge,
    Other(String),
}

impl Watcher {
    /// Starts sampling every `interval` (first sample now). Errors if the
    /// first sample cannot be read (no such pid, no gauge).
    pub async fn start(source: Source, interval: Duration, limits: &Limits) -> Result<Watcher> {
        match Self::start_or_skip(source, interval, limits).await? {
            Start::Watching(w) => Ok(w),
            Start::NoGauge(why) => Err(Error::io("memory", why)),
        }
    }

    /// [`Watcher::start`], except that a metrics page without a memory
    /// gauge gives [`Start::NoGauge`] instead of an error.
    pub async fn start_or_skip(
        source: Source,
        interval: Duration,
        limits: &Limits,
    ) -> Result<Start> {
        let mut s = Sampler::new(source, interval, limits.clone());
        if let Some(why) = s.first().await? {
            return Ok(Start::NoGauge(why));
        }
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(s.run(rx));
        Ok(Start::Watching(Watcher { stop, task }))
    }

    /// Takes a last sample and returns the report.
    pub async fn stop(self) -> Result<MemoryReport> {
        let _ = self.stop.send(true);
        self.task.await.map_err(|e| Error::io("memory sampler", e))
    }
}

struct Sampler {
    source: Source,
    interval: Duration,
    limits: Limits,
    start: Instant,
    report: MemoryReport,
    /// Keep-alive connection to the metrics endpoint.
    conn: Option<hyper::client::conn::http1::SendRequest<Empty<bytes::Bytes>>>,
}

impl Sampler {
    fn new(source: Source, interval: Duration, limits: Limits) -> Sampler {
        let name = match &source {
            Source::Pid(p) => format!("pid {p}"),
            Source::Metrics(t) => t.url.clone(),
        };
        Sampler {
            source,
            interval,
            limits,
            start: Instant::now(),
            report: MemoryReport {
                source: name,
                interval_ms: interval.as_secs_f64() * 1000.0,
                samples: Vec::new(),
                samples_truncated: false,
                start_bytes: 0,
                end_bytes: 0,
                peak_bytes: 0,
                growth_bytes: 0,
                hwm_reset: false,
                failed_samples: 0,
            },
            conn: None,
        }
    }

    /// The first sample; `Some(warning)` if the page has no gauge.
    async fn first(&mut self) -> Result<Option<String>> {
        if let Source::Pid(p) = self.source {
            // Permission is needed (same user with ptrace rights, or root).
            self.report.hwm_reset = std::fs::write(format!("/proc/{p}/clear_refs"), "5").is_ok();
        }
        let rss = match self.read().await {
            Ok(rss) => rss,
            Err(Miss::NoGauge) => {
                return Ok(Some(format!(
                    "{} has no {} or {} gauge: server memory is not reported",
                    self.report.source, GAUGES[0], GAUGES[1]
                )))
            }
            Err(Miss::Other(e)) => {
                return Err(Error::io(format!("memory of {}", self.report.source), e))
            }
        };
        self.report.start_bytes = rss;
        self.keep(rss);
        Ok(None)
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>) -> MemoryReport {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => self.sample().await,
                _ = stop.changed() => break,
            }
        }
        self.sample().await;
        self.finish()
    }

    async fn sample(&mut self) {
        match self.read().await {
            Ok(rss) => self.keep(rss),
            Err(_) => self.report.failed_samples += 1,
        }
    }

    fn keep(&mut self, rss: u64) {
        let r = &mut self.report;
        r.end_bytes = rss;
        r.peak_bytes = r.peak_bytes.max(rss);
        if r.samples.len() < self.limits.memory_samples {
            r.samples
                .push([self.start.elapsed().as_secs_f64(), rss as f64]);
        } else {
            r.samples_truncated = true;
        }
    }

    fn finish(mut self) -> MemoryReport {
        if let (Source::Pid(p), true) = (&self.source, self.report.hwm_reset) {
            if let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/status")) {
                if let Some(hwm) = parse_status(&text).hwm {
                    self.report.peak_bytes = self.report.peak_bytes.max(hwm);
                }
            }
        }
        self.report.growth_bytes = self.report.end_bytes as i64 - self.report.start_bytes as i64;
        self.report
    }

    async fn read(&mut self) -> std::result::Result<u64, Miss> {
        match &self.source {
            Source::Pid(p) => {
                let text = std::fs::read_to_string(format!("/proc/{p}/status"))
                    .map_err(|e| Miss::Other(e.to_string()))?;
                parse_status(&text)
                    .rss
                    .ok_or_else(|| Miss::Other("no VmRSS line".into()))
            }
            Source::Metrics(t) => {
                let t = t.clone();
                let text = self.fetch(&t).await.map_err(Miss::Other)?;
                parse_metrics(&text).ok_or(Miss::NoGauge)
            }
        }
    }

    /// GETs the metrics page on a kept-alive connection, reading at most
    /// `Limits::metrics_bytes`.
    async fn fetch(&mut self, t: &Target) -> std::result::Result<String, String> {
        let conn = match self.conn.take() {
            Some(c) if !c.is_closed() => c,
            _ => connect(t).await?,
        };
        let mut conn = conn;
        conn.ready().await.map_err(|e| e.to_string())?;
        let req = http::Request::get(t.path.clone())
            .header(http::header::HOST, t.host.clone())
            .body(Empty::new())
            .map_err(|e| e.to_string())?;
        let resp = conn.send_request(req).await.map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("status {}", resp.status()));
        }
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        while let Some(f) = body.frame().await {
            if let Ok(d) = f.map_err(|e| e.to_string())?.into_data() {
                if buf.len() + d.len() > self.limits.metrics_bytes {
                    return Err(format!(
                        "metrics page over limit metrics_bytes = {}",
                        self.limits.metrics_bytes
                    ));
                }
                buf.extend_from_slice(&d);
            }
        }
        self.conn = Some(conn);
        String::from_utf8(buf).map_err(|e| e.to_string())
    }
}

async fn connect(
    t: &Target,
) -> std::result::Result<hyper::client::conn::http1::SendRequest<Empty<bytes::Bytes>>, String> {
    let tcp = tokio::net::TcpStream::connect(t.addr)
        .await
        .map_err(|e| e.to_string())?;
    let (sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = driver.await;
    });
    Ok(sender)
}

/// `VmRSS` and `VmHWM` of a `/proc/PID/status` text, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    pub rss: Option<u64>,
    pub hwm: Option<u64>,
}

/// Parses the `VmRSS:` and `VmHWM:` lines (values in kB).
pub fn parse_status(text: &str) -> Status {
    let kb = |line: &str| -> Option<u64> {
        let v = line.split_whitespace().next()?.parse::<u64>().ok()?;
        v.checked_mul(1024)
    };
    let mut s = Status::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("VmRSS:") {
            s.rss = kb(rest);
        } else if let Some(rest) = line.strip_prefix("VmHWM:") {
            s.hwm = kb(rest);
        }
    }
    s
}

/// The value of a resident-memory gauge ([`GAUGES`], the first one present
/// wins) in a Prometheus text exposition (labels allowed; a gauge's first
/// sample wins).
pub fn parse_metrics(text: &str) -> Option<u64> {
    GAUGES.iter().find_map(|name| gauge(text, name))
}

/// The first valid sample of gauge `name`.
fn gauge(text: &str, name: &str) -> Option<u64> {
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let rest = match rest.as_bytes().first() {
            Some(b'{') => &rest[rest.find('}')? + 1..],
            Some(b' ' | b'\t') => rest,
            _ => continue,
        };
        let v: f64 = rest.split_whitespace().next()?.parse().ok()?;
        if v.is_finite() && v >= 0.0 {
            return Some(v as u64);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        let t = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t    1024 kB\nThreads: 3\n";
        assert_eq!(
            parse_status(t),
            Status {
                rss: Some(1 << 20),
                hwm: Some(2 << 20)
            }
        );
        assert_eq!(parse_status("Name: x\n"), Status::default());
    }

    #[test]
    fn metrics_gauge() {
        let t = "# HELP process_resident_memory_bytes Resident memory size in bytes.\n\
                 # TYPE process_resident_memory_bytes gauge\n\
                 process_resident_memory_bytes_total 5\n\
                 process_resident_memory_bytes 1.2345e+07\n";
        assert_eq!(parse_metrics(t), Some(12_345_000));
        assert_eq!(
            parse_metrics("process_resident_memory_bytes{job=\"x\"} 42\n"),
            Some(42)
        );
        assert_eq!(parse_metrics("process_resident_memory_bytes NaN\n"), None);
        assert_eq!(parse_metrics("other 1\n"), None);
    }

    #[test]
    fn bulkwire_gauge_is_read_and_preferred() {
        // As bulkwire-server's /metrics renders it.
        let t = "# HELP bulkwire_process_resident_memory_bytes Resident set size.\n\
                 # TYPE bulkwire_process_resident_memory_bytes gauge\n\
                 bulkwire_process_resident_memory_bytes 31457280\n\
                 bulkwire_process_peak_resident_memory_bytes 41943040\n";
        assert_eq!(parse_metrics(t), Some(31_457_280));
        let both = format!("process_resident_memory_bytes 5\n{t}");
        assert_eq!(parse_metrics(&both), Some(31_457_280));
        assert_eq!(
            parse_metrics("bulkwire_process_peak_resident_memory_bytes 9\n"),
            None,
            "the peak gauge is not the resident size"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn samples_own_process() {
        let src = Source::Pid(std::process::id());
        let w = Watcher::start(src, Duration::from_millis(10), &Limits::default())
            .await
            .unwrap();
        // Touch 32 MiB so that the peak is visibly above the start.
        let v = vec![1u8; 32 << 20];
        tokio::time::sleep(Duration::from_millis(50)).await;
        let sum: u64 = v.iter().step_by(4096).map(|&b| u64::from(b)).sum();
        assert_eq!(sum, (32 << 20) / 4096);
        let r = w.stop().await.unwrap();
        assert!(r.samples.len() >= 2, "{:?}", r.samples);
        assert!(r.peak_bytes >= r.start_bytes + (16 << 20), "{r:?}");
        assert_eq!(r.failed_samples, 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn missing_pid_is_an_error() {
        let e = Watcher::start(
            Source::Pid(u32::MAX),
            Duration::from_millis(10),
            &Limits::default(),
        )
        .await;
        assert!(e.is_err());
    }
}
