//! Counters of events, deliveries and hook calls, rendered with the rest
//! of `/metrics` (`crate::metrics`). Label sets are small and known (event
//! types, configured endpoints, two hooks), so a map under a lock is
//! enough: these move at the rate of uploads, not of bytes.

use crate::metrics::{counter, gauge};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// How a delivery attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Delivered {
    Delivered,
    Retried,
    Failed,
}

impl Delivered {
    fn as_str(self) -> &'static str {
        match self {
            Delivered::Delivered => "delivered",
            Delivered::Retried => "retried",
            Delivered::Failed => "failed",
        }
    }
}

/// Hook call latency bounds, seconds.
const HOOK_BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

#[derive(Debug, Default)]
struct Histogram {
    buckets: [u64; HOOK_BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Debug, Default)]
pub struct EventStats {
    written: Mutex<BTreeMap<String, u64>>,
    /// (endpoint, type, outcome).
    deliveries: Mutex<BTreeMap<(String, String, Delivered), u64>>,
    /// (hook, outcome).
    hooks: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    hook_seconds: Mutex<BTreeMap<&'static str, Histogram>>,
    /// The outbox as last looked at (every few seconds, by one task).
    pub outbox_events: AtomicI64,
    pub outbox_pending: AtomicI64,
    pub outbox_failed: AtomicI64,
    pub oldest_pending_s: AtomicI64,
    /// Commit-to-delivery time of delivered events, milliseconds summed,
    /// and their number.
    lag_ms: AtomicU64,
    lag_count: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EventStats {
    pub fn written(&self, kind: &str, n: u64) {
        *lock(&self.written).entry(kind.to_string()).or_default() += n;
    }

    pub fn written_of(&self, kind: &str) -> u64 {
        lock(&self.written).get(kind).copied().unwrap_or(0)
    }

    pub fn delivery(&self, endpoint: &str, kind: &str, how: Delivered, lag: Option<Duration>) {
        let key = (endpoint.to_string(), kind.to_string(), how);
        *lock(&self.deliveries).entry(key).or_default() += 1;
        if let Some(l) = lag {
            self.lag_ms.fetch_add(l.as_millis() as u64, Relaxed);
            self.lag_count.fetch_add(1, Relaxed);
        }
    }

    pub fn hook(&self, hook: &'static str, outcome: &'static str, took: Duration) {
        *lock(&self.hooks).entry((hook, outcome)).or_default() += 1;
        let mut h = lock(&self.hook_seconds);
        let h = h.entry(hook).or_default();
        let s = took.as_secs_f64();
        if let Some(i) = HOOK_BUCKETS.iter().position(|b| s <= *b) {
            h.buckets[i] += 1;
        }
        h.count += 1;
        h.sum += s;
    }

    pub fn render(&self, o: &mut String) {
        header(
            o,
            "bulkwire_events_written_total",
            "counter",
            "Events written, by type.",
        );
        for (k, v) in lock(&self.written).iter() {
            let _ = writeln!(o, "bulkwire_events_written_total{{type=\"{k}\"}} {v}");
        }
        let name = "bulkwire_webhook_deliveries_total";
        header(
            o,
            name,
            "counter",
            "Webhook delivery attempts by endpoint, type and outcome.",
        );
        for ((ep, k, how), v) in lock(&self.deliveries).iter() {
            let (ep, how) = (crate::metrics::escape(ep), how.as_str());
            let _ = writeln!(
                o,
                "{name}{{endpoint=\"{ep}\",type=\"{k}\",outcome=\"{how}\"}} {v}"
            );
        }
        counter(
            o,
            "bulkwire_webhook_lag_milliseconds_sum",
            "Time from an event's commit to its delivery, summed over delivered events.",
            self.lag_ms.load(Relaxed),
        );
        counter(
            o,
            "bulkwire_webhook_lag_count",
            "Events delivered (the lag sum's count).",
            self.lag_count.load(Relaxed),
        );
        self.render_outbox(o);
        self.render_hooks(o);
    }

    fn render_outbox(&self, o: &mut String) {
        let gauges = [
            (
                "bulkwire_outbox_events",
                "Events kept in the outbox.",
                &self.outbox_events,
            ),
            (
                "bulkwire_outbox_pending_deliveries",
                "Webhook deliveries not yet made.",
                &self.outbox_pending,
            ),
            (
                "bulkwire_outbox_failed_deliveries",
                "Webhook deliveries given up (bulkwire events list --failed).",
                &self.outbox_failed,
            ),
            (
                "bulkwire_outbox_oldest_pending_seconds",
                "Age of the oldest event a delivery still waits for.",
                &self.oldest_pending_s,
            ),
        ];
        for (n, help, v) in gauges {
            gauge(o, n, help, v.load(Relaxed));
        }
    }

    fn render_hooks(&self, o: &mut String) {
        let name = "bulkwire_hook_calls_total";
        header(o, name, "counter", "Hook calls by hook and outcome.");
        for ((hook, out), v) in lock(&self.hooks).iter() {
            let _ = writeln!(o, "{name}{{hook=\"{hook}\",outcome=\"{out}\"}} {v}");
        }
        let name = "bulkwire_hook_duration_seconds";
        header(o, name, "histogram", "Hook call duration.");
        for (hook, h) in lock(&self.hook_seconds).iter() {
            let mut cum = 0;
            for (b, v) in HOOK_BUCKETS.iter().zip(&h.buckets) {
                cum += v;
                let _ = writeln!(o, "{name}_bucket{{hook=\"{hook}\",le=\"{b}\"}} {cum}");
            }
            let _ = writeln!(
                o,
                "{name}_bucket{{hook=\"{hook}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(o, "{name}_sum{{hook=\"{hook}\"}} {}", h.sum);
            let _ = writeln!(o, "{name}_count{{hook=\"{hook}\"}} {}", h.count);
        }
    }
}

fn header(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_by_label() {
        let s = EventStats::default();
        s.written("media.created", 2);
        s.delivery("http://r/\"x\"", "media.created", Delivered::Retried, None);
        s.delivery(
            "http://r/\"x\"",
            "media.created",
            Delivered::Delivered,
            Some(Duration::from_millis(7)),
        );
        s.hook("pre_create", "rejected", Duration::from_millis(3));
        let mut o = String::new();
        s.render(&mut o);
        assert!(
            o.contains("bulkwire_events_written_total{type=\"media.created\"} 2\n"),
            "{o}"
        );
        assert!(o.contains(
            "bulkwire_webhook_deliveries_total{endpoint=\"http://r/\\\"x\\\"\",type=\"media.created\",outcome=\"retried\"} 1\n"
        ), "{o}");
        assert!(
            o.contains("bulkwire_webhook_lag_milliseconds_sum 7\n"),
            "{o}"
        );
        assert!(
            o.contains("bulkwire_hook_calls_total{hook=\"pre_create\",outcome=\"rejected\"} 1\n")
        );
        assert!(o.contains(
            "bulkwire_hook_duration_seconds_bucket{hook=\"pre_create\",le=\"0.005\"} 1\n"
        ));
    }
}
