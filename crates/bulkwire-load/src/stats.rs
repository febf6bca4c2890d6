//! Recording results: HdrHistograms of latency, counts by outcome (every
//! answer by status, faults also by fault code, failures without an answer
//! by reason), and a per-second timeline, all bounded (the histograms are
//! fixed-size; the timeline stops at `Limits::timeline_seconds`; there are
//! at most 1,000 statuses and [`FAULT_CODES`] fault codes).
//!
//! Two latency views are kept for every response (see the crate docs):
//! *corrected*, from the request's intended send time (open loop), and
//! *uncorrected*, from the moment it was actually handed to the connection.
//!
//! Only answers are *completed*: they alone have a latency and count
//! towards req/s. A request that got no answer (refused, reset, timed out)
//! is an error counted by reason, never a completion with a latency of 0.

use crate::fault::Fault;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Highest latency the histograms hold: anything above is clamped to it.
const MAX_MICROS: u64 = 3_600_000_000;

/// Distinct fault codes counted each; further codes count under
/// [`OTHER_FAULTS`] (a server could send a new code per request).
pub const FAULT_CODES: usize = 100;
/// The key of faults past the first [`FAULT_CODES`] codes.
pub const OTHER_FAULTS: &str = "other";

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A response with this status.
    Status(u16),
    /// A response with this status whose body is an XML-RPC or SOAP fault
    /// (an error whatever the status: XML-RPC faults come with 200).
    Fault(u16, Fault),
    /// No response: `connect`, `io`, `timeout` or `render`.
    Failed(&'static str),
}

impl Outcome {
    /// Success is a 2xx response that is not a fault.
    pub fn is_ok(self) -> bool {
        matches!(self, Outcome::Status(s) if (200..300).contains(&s))
    }

    /// Whether a response came (its latency counts).
    pub fn answered(self) -> bool {
        !matches!(self, Outcome::Failed(_))
    }
}

/// One finished request.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub intended: Instant,
    pub sent: Instant,
    pub done: Instant,
    pub outcome: Outcome,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Counters readable while the run goes on (progress line).
#[derive(Debug, Default)]
pub struct Live {
    pub sent: AtomicU64,
    /// Requests answered (whatever the status).
    pub completed: AtomicU64,
    /// Non-2xx answers, faults and requests without an answer.
    pub errors: AtomicU64,
    pub bytes_sent: AtomicU64,
}

/// One second of the run, by completion time.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Bucket {
    /// Seconds since the start of the run.
    pub t: u64,
    /// Answers (whatever their status) that came in this second.
    pub count: u64,
    /// Non-2xx answers, faults and requests without an answer.
    pub errors: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Percentiles of one latency view, in milliseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub stdev_ms: f64,
    pub p25_ms: f64,
    pub p50_ms: f64,
    pub p75_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// `[percentile, ms]` points for a percentile plot, at 0, 50, 75, 87.5 …
    /// (halving the distance to 100 each step).
    pub spectrum: Vec<[f64; 2]>,
}

pub(crate) struct Recorder {
    start: Instant,
    late_after: Duration,
    timeline_cap: usize,
    inner: Mutex<Stats>,
}

struct Stats {
    corrected: Histogram<u64>,
    uncorrected: Histogram<u64>,
    late: u64,
    late_max: Duration,
    /// Answers, whatever their status.
    completed: u64,
    /// Requests that ended without an answer.
    no_answer: u64,
    ok: u64,
    by_status: BTreeMap<u16, u64>,
    by_fault: BTreeMap<Fault, u64>,
    other_faults: u64,
    by_error: BTreeMap<&'static str, u64>,
    bytes_sent: u64,
    bytes_received: u64,
    last_done: Option<Instant>,
    last_answer: Option<Instant>,
    /// Requests without an answer that ended after `last_answer`.
    no_answer_since: u64,
    second: Second,
    timeline: Vec<Bucket>,
    timeline_truncated: bool,
}

/// The second being filled; rolled into a [`Bucket`] when time moves on.
struct Second {
    t: u64,
    hist: Histogram<u64>,
    count: u64,
    errors: u64,
}

fn hist(sigfig: u8) -> Histogram<u64> {
    // Bounds and sigfig are constants within hdrhistogram's valid ranges.
    Histogram::new_with_bounds(1, MAX_MICROS, sigfig).expect("valid histogram bounds")
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_MICROS)
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl Recorder {
    pub(crate) fn new(start: Instant, late_after: Duration, timeline_cap: usize) -> Recorder {
        Recorder {
            start,
            late_after,
            timeline_cap,
            inner: Mutex::new(Stats {
                corrected: hist(3),
                uncorrected: hist(3),
                late: 0,
                late_max: Duration::ZERO,
                completed: 0,
                no_answer: 0,
                ok: 0,
                by_status: BTreeMap::new(),
                by_fault: BTreeMap::new(),
                other_faults: 0,
                by_error: BTreeMap::new(),
                bytes_sent: 0,
                bytes_received: 0,
                last_done: None,
                last_answer: None,
                no_answer_since: 0,
                second: Second::new(0),
                timeline: Vec::new(),
                timeline_truncated: false,
            }),
        }
    }

    pub(crate) fn record(&self, s: &Sample) {
        let t = s.done.saturating_duration_since(self.start).as_secs();
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        st.count(s);
        let lateness = s.sent.saturating_duration_since(s.intended);
        if lateness > self.late_after {
            st.late += 1;
        }
        st.late_max = st.late_max.max(lateness);
        if t > st.second.t {
            st.roll(t, self.timeline_cap);
        }
        if s.outcome.answered() {
            st.second.count += 1;
            let c = micros(s.done.saturating_duration_since(s.intended));
            let u = micros(s.done.saturating_duration_since(s.sent));
            // Values are clamped into the histogram's range, so this holds.
            let _ = st.corrected.record(c);
            let _ = st.uncorrected.record(u);
            let _ = st.second.hist.record(c);
        }
        if !s.outcome.is_ok() {
            st.second.errors += 1;
        }
    }

    /// Requests without an answer so far, by reason (for a message while
    /// the run goes on).
    pub(crate) fn by_error(&self) -> BTreeMap<&'static str, u64> {
        let st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        st.by_error.clone()
    }

    pub(crate) fn finish(&self) -> Totals {
        let mut st = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let t = st.second.t + 1;
        st.roll(t, self.timeline_cap);
        Totals {
            corrected: latency(&st.corrected),
            uncorrected: latency(&st.uncorrected),
            late: st.late,
            late_max_ms: st.late_max.as_secs_f64() * 1000.0,
            completed: st.completed,
            no_answer: st.no_answer,
            ok: st.ok,
            by_status: st
                .by_status
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            faults: st.by_fault.values().sum::<u64>() + st.other_faults,
            by_fault: st
                .by_fault
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .chain((st.other_faults > 0).then(|| (OTHER_FAULTS.to_string(), st.other_faults)))
                .collect(),
            by_error: st
                .by_error
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            bytes_sent: st.bytes_sent,
            bytes_received: st.bytes_received,
            last_done: st.last_done,
            last_answer: st.last_answer,
            no_answer_since: st.no_answer_since,
            timeline: std::mem::take(&mut st.timeline),
            timeline_truncated: st.timeline_truncated,
        }
    }
}

impl Stats {
    fn count(&mut self, s: &Sample) {
        match s.outcome {
            Outcome::Status(code) => {
                self.completed += 1;
                *self.by_status.entry(code).or_default() += 1;
            }
            Outcome::Fault(code, fault) => {
                self.completed += 1;
                *self.by_status.entry(code).or_default() += 1;
                let known = self.by_fault.len() < FAULT_CODES;
                match self.by_fault.get_mut(&fault) {
                    Some(n) => *n += 1,
                    None if known => drop(self.by_fault.insert(fault, 1)),
                    None => self.other_faults += 1,
                }
            }
            Outcome::Failed(why) => {
                self.no_answer += 1;
                *self.by_error.entry(why).or_default() += 1;
            }
        }
        if s.outcome.is_ok() {
            self.ok += 1;
        }
        self.bytes_sent += s.bytes_sent;
        self.bytes_received += s.bytes_received;
        self.last_done = self.last_done.max(Some(s.done));
        let latest = Some(s.done) > self.last_answer;
        match s.outcome.answered() {
            true if latest => (self.last_answer, self.no_answer_since) = (Some(s.done), 0),
            false if latest => self.no_answer_since += 1,
            _ => {}
        }
    }

    /// Closes the current second (and any empty ones before `t`).
    fn roll(&mut self, t: u64, cap: usize) {
        let mut cur = std::mem::replace(&mut self.second, Second::new(t));
        let mut push = |b: Bucket| {
            if self.timeline.len() < cap {
                self.timeline.push(b);
            } else {
                self.timeline_truncated = true;
            }
        };
        let from = cur.t;
        push(cur.bucket());
        for empty in from + 1..t {
            push(Second::new(empty).bucket());
        }
        cur.hist.reset();
        // Keep the allocation of the old histogram.
        self.second.hist = cur.hist;
    }
}

impl Second {
    fn new(t: u64) -> Second {
        Second {
            t,
            hist: hist(2),
            count: 0,
            errors: 0,
        }
    }

    fn bucket(&self) -> Bucket {
        let q = |p: f64| ms(self.hist.value_at_quantile(p));
        Bucket {
            t: self.t,
            count: self.count,
            errors: self.errors,
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            max_ms: ms(self.hist.max()),
        }
    }
}

/// Everything the recorder counted.
pub(crate) struct Totals {
    pub corrected: Latency,
    pub uncorrected: Latency,
    pub late: u64,
    pub late_max_ms: f64,
    /// Answers, whatever their status.
    pub completed: u64,
    /// Requests that ended without an answer.
    pub no_answer: u64,
    pub ok: u64,
    pub by_status: BTreeMap<String, u64>,
    pub faults: u64,
    pub by_fault: BTreeMap<String, u64>,
    pub by_error: BTreeMap<String, u64>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub last_done: Option<Instant>,
    pub last_answer: Option<Instant>,
    /// Requests without an answer that ended after `last_answer`.
    pub no_answer_since: u64,
    pub timeline: Vec<Bucket>,
    pub timeline_truncated: bool,
}

/// Percentiles of `h` in milliseconds (all zero when empty).
pub fn latency(h: &Histogram<u64>) -> Latency {
    let q = |p: f64| ms(h.value_at_quantile(p));
    let mut spectrum = Vec::new();
    if !h.is_empty() {
        let mut p = 0.0f64;
        // 0, 50, 75, … 99.9999: enough points for a log-scaled plot.
        for _ in 0..21 {
            spectrum.push([p * 100.0, q(p)]);
            p = 1.0 - (1.0 - p) / 2.0;
        }
        spectrum.push([100.0, ms(h.max())]);
    }
    Latency {
        count: h.len(),
        min_ms: if h.is_empty() { 0.0 } else { ms(h.min()) },
        mean_ms: h.mean() / 1000.0,
        stdev_ms: h.stdev() / 1000.0,
        p25_ms: q(0.25),
        p50_ms: q(0.5),
        p75_ms: q(0.75),
        p90_ms: q(0.9),
        p95_ms: q(0.95),
        p99_ms: q(0.99),
        p999_ms: q(0.999),
        max_ms: if h.is_empty() { 0.0 } else { ms(h.max()) },
        spectrum,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(
        start: Instant,
        intended_ms: u64,
        sent_ms: u64,
        done_ms: u64,
        outcome: Outcome,
    ) -> Sample {
        let at = |m| start + Duration::from_millis(m);
        Sample {
            intended: at(intended_ms),
            sent: at(sent_ms),
            done: at(done_ms),
            outcome,
            bytes_sent: 10,
            bytes_received: 1,
        }
    }

    #[test]
    fn corrected_and_uncorrected_differ_by_lateness() {
        let start = Instant::now();
        let r = Recorder::new(start, Duration::from_millis(10), 100);
        // Sent 500 ms late, answered 5 ms after the send.
        r.record(&sample(start, 100, 600, 605, Outcome::Status(200)));
        // On time.
        r.record(&sample(start, 1200, 1200, 1210, Outcome::Status(503)));
        r.record(&sample(start, 2500, 2500, 2500, Outcome::Failed("timeout")));
        let t = r.finish();
        assert_eq!(t.corrected.count, 2);
        assert!(
            (t.corrected.max_ms - 505.0).abs() < 1.0,
            "{}",
            t.corrected.max_ms
        );
        assert!(
            (t.uncorrected.max_ms - 10.0).abs() < 0.1,
            "{}",
            t.uncorrected.max_ms
        );
        assert_eq!(t.late, 1);
        assert!((t.late_max_ms - 500.0).abs() < 0.01);
        assert_eq!((t.completed, t.no_answer, t.ok), (2, 1, 1));
        assert_eq!(t.by_status.get("503"), Some(&1));
        assert_eq!(t.by_error.get("timeout"), Some(&1));
        assert_eq!(t.bytes_sent, 30);
        let counts: Vec<_> = t
            .timeline
            .iter()
            .map(|b| (b.t, b.count, b.errors))
            .collect();
        // The timeout is an error of its second, not a completion.
        assert_eq!(counts, [(0, 1, 0), (1, 1, 1), (2, 0, 1)]);
    }

    #[test]
    fn a_request_without_an_answer_is_an_error_never_a_completion() {
        let start = Instant::now();
        let r = Recorder::new(start, Duration::from_millis(10), 100);
        for _ in 0..3 {
            r.record(&sample(start, 0, 0, 0, Outcome::Failed("connect")));
        }
        let t = r.finish();
        assert_eq!((t.completed, t.no_answer, t.ok), (0, 3, 0));
        assert_eq!(t.by_error.get("connect"), Some(&3));
        assert_eq!(t.corrected.count, 0, "no latency without an answer");
        assert!(t.corrected.spectrum.is_empty());
        let b = &t.timeline[0];
        assert_eq!((b.count, b.errors), (0, 3));
    }

    #[test]
    fn faults_are_errors_counted_by_status_and_by_code() {
        let start = Instant::now();
        let r = Recorder::new(start, Duration::from_millis(10), 100);
        let f = |body: &str| crate::fault::classify(body.as_bytes()).unwrap();
        let rpc = f("<methodResponse><fault><value><struct><member><name>faultCode</name>\
                     <value><int>403</int></value></member></struct></value></fault></methodResponse>");
        let soap =
            f("<Envelope><Body><Fault><faultcode>Client</faultcode></Fault></Body></Envelope>");
        r.record(&sample(start, 0, 0, 5, Outcome::Fault(200, rpc)));
        r.record(&sample(start, 0, 0, 5, Outcome::Fault(200, rpc)));
        r.record(&sample(start, 0, 0, 5, Outcome::Fault(500, soap)));
        r.record(&sample(start, 0, 0, 5, Outcome::Status(200)));
        let t = r.finish();
        assert_eq!((t.completed, t.ok, t.faults), (4, 1, 3));
        assert_eq!(
            t.by_status.get("200"),
            Some(&3),
            "faults count under their status"
        );
        assert_eq!(t.by_status.get("500"), Some(&1));
        assert_eq!(t.by_fault.get("xmlrpc:403"), Some(&2));
        assert_eq!(t.by_fault.get("soap:Client"), Some(&1));
        assert_eq!(
            t.corrected.count, 4,
            "a fault is an answer: its latency counts"
        );
        assert_eq!(t.timeline[0].errors, 3);
    }

    #[test]
    fn fault_codes_are_bounded() {
        let start = Instant::now();
        let r = Recorder::new(start, Duration::from_millis(10), 100);
        for code in 0..FAULT_CODES + 5 {
            let body = format!(
                "<methodResponse><fault><value><struct><member><name>faultCode</name>\
                 <value><int>{code}</int></value></member></struct></value></fault></methodResponse>"
            );
            let fault = crate::fault::classify(body.as_bytes()).unwrap();
            r.record(&sample(start, 0, 0, 1, Outcome::Fault(200, fault)));
        }
        let t = r.finish();
        assert_eq!(t.by_fault.len(), FAULT_CODES + 1);
        assert_eq!(t.by_fault.get(OTHER_FAULTS), Some(&5));
        assert_eq!(t.faults, (FAULT_CODES + 5) as u64);
    }

    #[test]
    fn timeline_fills_gaps_and_stops_at_its_cap() {
        let start = Instant::now();
        let r = Recorder::new(start, Duration::from_millis(10), 3);
        r.record(&sample(start, 0, 0, 1, Outcome::Status(200)));
        r.record(&sample(start, 0, 0, 5001, Outcome::Status(200)));
        let t = r.finish();
        assert_eq!(
            t.timeline.iter().map(|b| b.count).collect::<Vec<_>>(),
            [1, 0, 0]
        );
        assert!(t.timeline_truncated);
    }

    #[test]
    fn spectrum_is_monotonic() {
        let mut h = hist(3);
        for v in 1..=10_000u64 {
            h.record(v * 10).unwrap();
        }
        let l = latency(&h);
        assert!((l.p50_ms - 50.0).abs() < 0.1, "{}", l.p50_ms);
        assert!(l
            .spectrum
            .windows(2)
            .all(|w| w[0][0] < w[1][0] && w[0][1] <= w[1][1]));
        assert_eq!(l.spectrum.last().unwrap()[1], l.max_ms);
    }
}
