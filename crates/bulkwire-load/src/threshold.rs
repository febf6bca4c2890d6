//! Pass/fail criteria: `--threshold 'p95<50ms' --threshold 'errors<0.1%'`.
//!
//! Syntax: `METRIC OP VALUE`, OP one of `<`, `<=`, `>`, `>=`.
//! - latency: `p50`, `p90`, `p95`, `p99`, `p99.9`, `max`, `mean`, `min`, of
//!   the corrected view, or `uncorrected.p95` etc.; VALUE a duration
//!   (`50ms`, `1s`; a bare number is milliseconds).
//! - `errors`, `late`: a percentage of the requests that ended, answered
//!   or not (`0.1%`), or a count. Errors are non-2xx answers, XML-RPC and
//!   SOAP faults (whatever their status) and requests without an answer.
//! - `rps`: answers per second (requests without an answer do not count).
//!
//! Any failed threshold makes `bulkwire load` exit with code 99.

use crate::error::{Error, Result};
use crate::runner::Report;
use crate::stats::Latency;
use crate::units::parse_duration;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Metric {
    Latency { uncorrected: bool, stat: String },
    Errors,
    Late,
    Rps,
}

/// A parsed threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    text: String,
    metric: Metric,
    op: Op,
    /// Milliseconds, a count, a fraction (with `percent`) or req/s.
    value: f64,
    percent: bool,
}

/// A threshold checked against a report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ThresholdResult {
    pub threshold: String,
    /// The measured value, in [`Self::unit`].
    pub actual: f64,
    /// `ms`, `%`, `requests` or `req/s`.
    pub unit: &'static str,
    pub passed: bool,
}

impl Threshold {
    /// Parses `METRIC OP VALUE`.
    pub fn parse(text: &str) -> Result<Threshold> {
        let bad = |why: &str| Error::config(format!("threshold {text:?}: {why}"));
        let at = text.find(['<', '>']).ok_or_else(|| bad("no < or >"))?;
        let (name, rest) = text.split_at(at);
        let (op, value) = match rest.as_bytes() {
            [b'<', b'=', ..] => (Op::Le, &rest[2..]),
            [b'>', b'=', ..] => (Op::Ge, &rest[2..]),
            [b'<', ..] => (Op::Lt, &rest[1..]),
            _ => (Op::Gt, &rest[1..]),
        };
        let metric = metric(name.trim()).ok_or_else(|| bad("unknown metric"))?;
        let value = value.trim();
        let (value, percent) = match metric {
            Metric::Latency { .. } => (latency_ms(value).map_err(|e| bad(e.message()))?, false),
            Metric::Errors | Metric::Late => match value.strip_suffix('%') {
                Some(p) => (
                    number(p).ok_or_else(|| bad("not a percentage"))? / 100.0,
                    true,
                ),
                None => (number(value).ok_or_else(|| bad("not a count"))?, false),
            },
            Metric::Rps => (number(value).ok_or_else(|| bad("not a number"))?, false),
        };
        Ok(Threshold {
            text: text.trim().into(),
            metric,
            op,
            value,
            percent,
        })
    }

    /// Checks the report; `actual` is in the threshold's own unit.
    pub fn check(&self, r: &Report) -> ThresholdResult {
        let of = |n: u64| {
            if self.percent {
                n as f64 / (r.completed + r.no_answer).max(1) as f64
            } else {
                n as f64
            }
        };
        let actual = match &self.metric {
            Metric::Latency { uncorrected, stat } => {
                let l = if *uncorrected {
                    &r.uncorrected
                } else {
                    &r.corrected
                };
                stat_ms(l, stat)
            }
            Metric::Errors => of(r.errors),
            Metric::Late => of(r.late.count),
            Metric::Rps => r.rps,
        };
        let passed = match self.op {
            Op::Lt => actual < self.value,
            Op::Le => actual <= self.value,
            Op::Gt => actual > self.value,
            Op::Ge => actual >= self.value,
        };
        ThresholdResult {
            threshold: self.text.clone(),
            actual: if self.percent { actual * 100.0 } else { actual },
            unit: self.unit(),
            passed,
        }
    }

    fn unit(&self) -> &'static str {
        match self.metric {
            Metric::Latency { .. } => "ms",
            _ if self.percent => "%",
            Metric::Errors | Metric::Late => "requests",
            Metric::Rps => "req/s",
        }
    }
}

fn metric(name: &str) -> Option<Metric> {
    let (uncorrected, stat) = match name.strip_prefix("uncorrected.") {
        Some(s) => (true, s),
        None => (false, name.strip_prefix("corrected.").unwrap_or(name)),
    };
    match stat {
        "p50" | "p90" | "p95" | "p99" | "p99.9" | "max" | "mean" | "min" => Some(Metric::Latency {
            uncorrected,
            stat: stat.into(),
        }),
        "errors" if !uncorrected => Some(Metric::Errors),
        "late" if !uncorrected => Some(Metric::Late),
        "rps" if !uncorrected => Some(Metric::Rps),
        _ => None,
    }
}

fn stat_ms(l: &Latency, stat: &str) -> f64 {
    match stat {
        "p50" => l.p50_ms,
        "p90" => l.p90_ms,
        "p95" => l.p95_ms,
        "p99" => l.p99_ms,
        "p99.9" => l.p999_ms,
        "max" => l.max_ms,
        "mean" => l.mean_ms,
        _ => l.min_ms,
    }
}

fn number(s: &str) -> Option<f64> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// A duration in ms; a bare number is already ms.
fn latency_ms(s: &str) -> Result<f64> {
    if let Some(v) = number(s) {
        return Ok(v);
    }
    Ok(parse_duration(s)?.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_forms() {
        let t = Threshold::parse("p95<50ms").unwrap();
        assert_eq!((t.op, t.value, t.percent), (Op::Lt, 50.0, false));
        let t = Threshold::parse("uncorrected.p99 <= 1s").unwrap();
        assert_eq!(t.value, 1000.0);
        assert_eq!(
            t.metric,
            Metric::Latency {
                uncorrected: true,
                stat: "p99".into()
            }
        );
        let t = Threshold::parse("errors<0.1%").unwrap();
        assert!(t.percent && (t.value - 0.001).abs() < 1e-12);
        let t = Threshold::parse("rps>=100").unwrap();
        assert_eq!((t.op, t.value), (Op::Ge, 100.0));
        for bad in [
            "p95=5",
            "p42<5ms",
            "errors<x%",
            "uncorrected.errors<1",
            "p95<5parsecs",
        ] {
            assert!(Threshold::parse(bad).is_err(), "{bad}");
        }
    }
}
