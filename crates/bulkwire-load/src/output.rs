//! Human output: the summary table and the live progress line.

use crate::runner::Report;
use crate::stats::{Latency, Live};
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
    let _ = writeln!(
        out,
        "  {name:<12} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
        l.p50_ms, l.p90_ms, l.p95_ms, l.p99_ms, l.max_ms, l.mean_ms
    );
}

/// The summary table printed at the end of a run.
pub fn table(r: &Report) -> String {
    let mut o = String::new();
    let pace = match r.rate {
        Some(rate) => format!("open loop at {rate:.1}/s"),
        None => "closed loop".into(),
    };
    let _ = writeln!(
        o,
        "{} {} — {pace}, {} connections",
        r.scenario, r.url, r.connections
    );
    let _ = writeln!(
        o,
        "  requests  {} sent, {} completed in {:.2}s: {:.1} req/s, {}/s sent ({} total)",
        r.sent,
        r.completed,
        r.elapsed_s,
        r.rps,
        human_bytes(r.sent_bytes_per_s),
        human_bytes(r.bytes_sent as f64)
    );
    let _ = writeln!(
        o,
        "  latency ms        p50       p90       p95       p99       max      mean"
    );
    if r.rate.is_some() {
        row(&mut o, "corrected", &r.corrected);
        row(&mut o, "uncorrected", &r.uncorrected);
        let _ = writeln!(
            o,
            "  late      {} sent more than {:.0} ms after their intended time (max {:.1} ms)",
            r.late.count, r.late.after_ms, r.late.max_ms
        );
    } else {
        row(&mut o, "latency", &r.uncorrected);
    }
    let _ = write!(o, "  errors    {} ({:.3}%)", r.errors, r.error_rate * 100.0);
    let statuses = r.by_status.iter().filter(|(s, _)| !s.starts_with('2'));
    for (k, v) in statuses.chain(&r.by_error) {
        let _ = write!(o, "  {k}: {v}");
    }
    o.push('\n');
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
        let _ = writeln!(o, "  {mark}      {} (actual {:.3})", t.threshold, t.actual);
    }
    o
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
