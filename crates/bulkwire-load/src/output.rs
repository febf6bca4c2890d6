//! Human output: the summary table and the live progress line.

use crate::runner::Report;
use crate::stats::{Latency, Live};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Bytes as `12.3 MB` (decimal units, as rates are usually quoted).
pub fn human_bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

fn row(out: &mut String, name: &str, l: &Latency) {
    let _ = write!(out, "  {name:<12}");
    for v in [l.p50_ms, l.p90_ms, l.p95_ms, l.p99_ms, l.max_ms, l.mean_ms] {
        let _ = write!(out, " {v:>8.2} ms");
    }
    out.push('\n');
}

/// The summary table printed at the end of a run. Every number carries its
/// unit: requests, connections, seconds, bytes, ms, %.
pub fn table(r: &Report) -> String {
    let mut o = String::new();
    head(&mut o, r);
    latency(&mut o, r);
    outcomes(&mut o, r);
    if let Some(s) = &r.stopped_answering {
        let _ = writeln!(o, "  LOST      {s}");
    }
    for t in &r.targets {
        let s = if t.connections == 1 { "" } else { "s" };
        let _ = writeln!(
            o,
            "  target    {}: {} connection{s}, {} requests, {:.1} req/s, {} errors",
            t.url, t.connections, t.requests, t.rps, t.errors
        );
    }
    if let Some(m) = &r.memory {
        let _ = writeln!(
            o,
            "  server    {}: start {}, peak {}, end {}, growth {}{}",
            m.source,
            human_bytes(m.start_bytes as f64),
            human_bytes(m.peak_bytes as f64),
            human_bytes(m.end_bytes as f64),
            human_bytes(m.growth_bytes.unsigned_abs() as f64),
            if m.growth_bytes < 0 { " (shrank)" } else { "" }
        );
    }
    for t in &r.thresholds {
        let mark = if t.passed { "ok  " } else { "FAIL" };
        let _ = writeln!(
            o,
            "  {mark}      {} (actual {:.3} {})",
            t.threshold, t.actual, t.unit
        );
    }
    o
}

/// What ran, how many requests and how many bytes.
fn head(o: &mut String, r: &Report) {
    let pace = match r.rate {
        Some(rate) => format!("open loop at {rate:.1} req/s"),
        None => "closed loop".into(),
    };
    let s = if r.connections == 1 { "" } else { "s" };
    let _ = writeln!(
        o,
        "{} {} {} — {pace}, {} connection{s}",
        r.scenario, r.method, r.url, r.connections
    );
    // Completed means answered: a request without an answer is an error,
    // said here beside the count rather than hidden in it.
    let _ = write!(
        o,
        "  requests  {} sent, {} completed in {:.2} s: {:.1} req/s",
        r.sent, r.completed, r.elapsed_s, r.rps
    );
    if r.no_answer > 0 {
        let _ = write!(o, ", {} without an answer", r.no_answer);
    }
    o.push('\n');
    let _ = writeln!(
        o,
        "  bytes     sent {} ({}/s), received {} ({}/s), bodies only",
        human_bytes(r.bytes_sent as f64),
        human_bytes(r.sent_bytes_per_s),
        human_bytes(r.bytes_received as f64),
        human_bytes(r.received_bytes_per_s),
    );
}

/// Latency percentiles (both views in open loop) and late sends; none
/// when nothing was answered (there is no latency to show, and zeros would
/// read as a fast server).
fn latency(o: &mut String, r: &Report) {
    if r.completed == 0 {
        let _ = writeln!(o, "  latency   none: no request got an answer");
        return;
    }
    // The first column names each row's view; each percentile's name is
    // right-aligned over its column's numbers (see `row`).
    let _ = write!(o, "  {:<12}", "latency");
    for name in ["p50", "p90", "p95", "p99", "max", "mean"] {
        let _ = write!(o, " {name:>8}   ");
    }
    let _ = writeln!(o);
    if r.rate.is_some() {
        row(o, "corrected", &r.corrected);
        row(o, "uncorrected", &r.uncorrected);
        let _ = writeln!(
            o,
            "  late      {} requests sent more than {:.0} ms after their intended time (max {:.1} ms)",
            r.late.count, r.late.after_ms, r.late.max_ms
        );
    } else {
        // Closed loop has no schedule: the one view is send to answer.
        row(o, "send→answer", &r.uncorrected);
    }
}

/// Every answer by status, faults by code, failures by reason, and the
/// errors they add up to.
fn outcomes(o: &mut String, r: &Report) {
    // Shares of every request that ended, answered or not.
    let ended = r.completed + r.no_answer;
    let share = |n: u64| 100.0 * n as f64 / ended.max(1) as f64;
    let list = |o: &mut String, label: &str, counts: &BTreeMap<String, u64>| {
        if counts.is_empty() {
            return;
        }
        let _ = write!(o, "  {label:<9}");
        for (i, (k, n)) in counts.iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            let _ = write!(o, "{sep}{k}: {n} requests ({:.1} %)", share(*n));
        }
        o.push('\n');
    };
    list(o, "status", &r.by_status);
    list(o, "faults", &r.by_fault);
    list(o, "no answer", &r.by_error);
    // Disjoint: a fault with a 500 status counts as a fault only.
    let no_answer = r.no_answer;
    let other = r.errors.saturating_sub(r.faults + no_answer);
    let _ = writeln!(
        o,
        "  errors    {} requests ({:.3} %): {} faults, {other} other non-2xx, {no_answer} without an answer",
        r.errors,
        r.error_rate * 100.0,
        r.faults
    );
}

/// One progress line: elapsed, sent, completed, errors, current rate.
pub fn progress_line(
    live: &Live,
    elapsed: Duration,
    last_completed: u64,
    tick: Duration,
) -> String {
    let done = live.completed.load(Ordering::Relaxed);
    let rate = (done - last_completed.min(done)) as f64 / tick.as_secs_f64();
    format!(
        "\r{:>6.1}s  sent {}  done {}  errors {}  {:.0} req/s   ",
        elapsed.as_secs_f64(),
        live.sent.load(Ordering::Relaxed),
        done,
        live.errors.load(Ordering::Relaxed),
        rate
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_human() {
        assert_eq!(human_bytes(999.0), "999.0 B");
        assert_eq!(human_bytes(140_000.0), "140.0 kB");
        assert_eq!(human_bytes(2.5e9), "2.5 GB");
    }
}
