//! A small Prometheus registry on atomics (text exposition format 0.0.4).
//!
//! Counters in the spirit of a database driver's client statistics
//! (DESIGN.md "Observability"): bytes in and out, uploads by format and
//! outcome, rejections by reason, parser buffer growth and peak, active
//! uploads, request latency, process memory. Hot-path updates are single
//! relaxed atomic operations; only rejections take a lock (their label set
//! is open-ended and they are rare).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// Upload formats; XML-RPC and SOAP handlers will report under theirs.
pub const FORMATS: [&str; 5] = ["multipart", "raw", "xmlrpc", "soap", "tus"];

/// How an upload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Refused for the client's fault or a cap (4xx, 503).
    Rejected,
    /// The client went away.
    Aborted,
    /// Storage failed (5xx).
    Failed,
}

const OUTCOMES: [&str; 4] = ["ok", "rejected", "aborted", "failed"];

/// Request duration histogram bounds, seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0, 120.0,
];

#[derive(Debug, Default)]
pub struct Metrics {
    pub bytes_received: AtomicU64,
    /// Blob bytes sent by hyper from a store's stream (tus `GET` of an
    /// unfinished upload included); `sendfile`'s are in `downloads`.
    pub bytes_sent: AtomicU64,
    /// Downloads by store, route and how (`crate::downloads`).
    pub downloads: std::sync::Arc<crate::downloads::Downloads>,
    uploads: [[AtomicU64; 4]; FORMATS.len()],
    pub files_stored: AtomicU64,
    /// Image variants made and stored (`crate::variants`).
    pub variants_made: AtomicU64,
    rejected: Mutex<BTreeMap<String, u64>>,
    pub buffer_growth: AtomicU64,
    pub peak_parser_buffer: AtomicU64,
    /// Most decoded bytes one upload staged between a codec's synchronous
    /// sink and storage (SOAP, XML-RPC).
    pub peak_staging_buffer: AtomicU64,
    pub active_uploads: AtomicI64,
    /// Slow uploads told to yield their slot to a new one.
    pub uploads_preempted: AtomicU64,
    /// Connections being served, and their cap (`max_connections`).
    pub connections: std::sync::Arc<AtomicI64>,
    pub max_connections: AtomicU64,
    /// Connections in a lingering close, and the bytes they discarded.
    pub lingering: AtomicI64,
    pub lingered_bytes: AtomicU64,
    /// Idle connections closed to make room at the cap.
    pub connections_shed: AtomicU64,
    /// Connections refused at the cap (answered 503, or closed when even
    /// the refusals were at their cap).
    pub connections_refused: AtomicU64,
    duration_buckets: [AtomicU64; BUCKETS.len()],
    duration_count: AtomicU64,
    duration_sum_us: AtomicU64,
    /// Store latency and errors (`crate::metered`).
    pub store: std::sync::Arc<crate::metered::StoreStats>,
    /// JWT verification and JWKS fetches (`crate::jwt`), once a verifier is attached.
    jwt: std::sync::OnceLock<std::sync::Arc<crate::jwt::JwtStats>>,
}

impl Metrics {
    pub fn upload_done(&self, format: &str, outcome: Outcome) {
        let f = FORMATS.iter().position(|x| *x == format).unwrap_or(0);
        self.uploads[f][outcome as usize].fetch_add(1, Relaxed);
    }

    /// Counts a refused request under `reason`.
    pub fn rejected(&self, reason: String) {
        let mut m = self.rejected.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(reason).or_default() += 1;
    }

    pub fn observe_request(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| s <= *b) {
            self.duration_buckets[i].fetch_add(1, Relaxed);
        }
        self.duration_count.fetch_add(1, Relaxed);
        self.duration_sum_us
            .fetch_add(d.as_micros() as u64, Relaxed);
    }

    pub fn parser_peak(&self, bytes: usize) {
        self.peak_parser_buffer.fetch_max(bytes as u64, Relaxed);
    }

    pub fn staging_peak(&self, bytes: usize) {
        self.peak_staging_buffer.fetch_max(bytes as u64, Relaxed);
    }

    /// Renders a JWT verifier's counters with the others (`JwtVerifier::stats`); a second
    /// call is ignored.
    pub fn attach_jwt(&self, stats: std::sync::Arc<crate::jwt::JwtStats>) {
        let _ = self.jwt.set(stats);
    }

    /// Uploads counted for (format, outcome); for tests and the CLI.
    pub fn uploads(&self, format: &str, outcome: Outcome) -> u64 {
        let f = FORMATS.iter().position(|x| *x == format).unwrap_or(0);
        self.uploads[f][outcome as usize].load(Relaxed)
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut o = String::with_capacity(4096);
        counter(
            &mut o,
            "bulkwire_received_bytes_total",
            "Request body bytes received.",
            self.bytes_received.load(Relaxed),
        );
        counter(
            &mut o,
            "bulkwire_sent_bytes_total",
            "Blob bytes sent in responses.",
            self.bytes_sent.load(Relaxed) + self.downloads.sendfile_total(),
        );
        counter(
            &mut o,
            "bulkwire_files_stored_total",
            "Files committed to storage.",
            self.files_stored.load(Relaxed),
        );
        counter(
            &mut o,
            "bulkwire_variants_made_total",
            "Image variants made and stored.",
            self.variants_made.load(Relaxed),
        );
        self.downloads.render(&mut o);
        self.render_uploads(&mut o);
        self.render_rejected(&mut o);
        counter(
            &mut o,
            "bulkwire_parser_buffer_growth_total",
            "Times a parser's own buffer had to grow.",
            self.buffer_growth.load(Relaxed),
        );
        gauge(
            &mut o,
            "bulkwire_parser_buffer_peak_bytes",
            "Most bytes one parser held at once.",
            self.peak_parser_buffer.load(Relaxed) as i64,
        );
        gauge(
            &mut o,
            "bulkwire_staging_buffer_peak_bytes",
            "Most decoded bytes one upload staged between codec and storage.",
            self.peak_staging_buffer.load(Relaxed) as i64,
        );
        gauge(
            &mut o,
            "bulkwire_active_uploads",
            "Uploads in progress.",
            self.active_uploads.load(Relaxed),
        );
        counter(
            &mut o,
            "bulkwire_uploads_preempted_total",
            "Uploads below min_body_rate that yielded their slot to a new one.",
            self.uploads_preempted.load(Relaxed),
        );
        self.render_connections(&mut o);
        self.render_durations(&mut o);
        self.store.render(&mut o);
        if let Some(j) = self.jwt.get() {
            j.render(&mut o);
        }
        render_memory(&mut o);
        o
    }

    fn render_uploads(&self, o: &mut String) {
        header(
            o,
            "bulkwire_uploads_total",
            "counter",
            "Uploads by format and outcome.",
        );
        for (f, row) in FORMATS.iter().zip(&self.uploads) {
            for (out, v) in OUTCOMES.iter().zip(row) {
                let _ = writeln!(
                    o,
                    "bulkwire_uploads_total{{format=\"{f}\",outcome=\"{out}\"}} {}",
                    v.load(Relaxed)
                );
            }
        }
    }

    fn render_rejected(&self, o: &mut String) {
        header(
            o,
            "bulkwire_rejected_total",
            "counter",
            "Requests refused, by reason.",
        );
        let m = self.rejected.lock().unwrap_or_else(|p| p.into_inner());
        for (reason, v) in m.iter() {
            let _ = writeln!(
                o,
                "bulkwire_rejected_total{{reason=\"{}\"}} {v}",
                escape(reason)
            );
        }
    }

    fn render_connections(&self, o: &mut String) {
        let gauges = [
            ("bulkwire_connections", "Connections being served.", self.connections.load(Relaxed)),
            (
                "bulkwire_max_connections",
                "The cap on connections (limits.max_connections, or derived).",
                self.max_connections.load(Relaxed) as i64,
            ),
            (
                "bulkwire_lingering_connections",
                "Connections closing: answered, half-closed, discarding what the client still sends.",
                self.lingering.load(Relaxed),
            ),
        ];
        for (name, help, v) in gauges {
            gauge(o, name, help, v);
        }
        let counters = [
            (
                "bulkwire_lingered_bytes_total",
                "Bytes read and discarded by lingering closes.",
                &self.lingered_bytes,
            ),
            (
                "bulkwire_connections_shed_total",
                "Idle connections closed to make room at max_connections.",
                &self.connections_shed,
            ),
            (
                "bulkwire_connections_refused_total",
                "Connections refused at max_connections with every one busy.",
                &self.connections_refused,
            ),
        ];
        for (name, help, v) in counters {
            counter(o, name, help, v.load(Relaxed));
        }
    }

    fn render_durations(&self, o: &mut String) {
        let name = "bulkwire_request_duration_seconds";
        header(
            o,
            name,
            "histogram",
            "Request duration, head to last body byte.",
        );
        let mut cum = 0;
        for (b, v) in BUCKETS.iter().zip(&self.duration_buckets) {
            cum += v.load(Relaxed);
            let _ = writeln!(o, "{name}_bucket{{le=\"{b}\"}} {cum}");
        }
        let count = self.duration_count.load(Relaxed);
        let _ = writeln!(o, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.duration_sum_us.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(o, "{name}_sum {sum}\n{name}_count {count}");
    }
}

pub(crate) fn header(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

pub(crate) fn counter(o: &mut String, name: &str, help: &str, v: u64) {
    header(o, name, "counter", help);
    let _ = writeln!(o, "{name} {v}");
}

pub(crate) fn gauge(o: &mut String, name: &str, help: &str, v: i64) {
    header(o, name, "gauge", help);
    let _ = writeln!(o, "{name} {v}");
}

/// Label value escaping of the exposition format.
pub(crate) fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Resident and peak resident memory from `/proc/self/status` (kB values,
/// so no page-size guess); absent off Linux.
fn render_memory(o: &mut String) {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    let kb = |key: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
    };
    if let Some(v) = kb("VmRSS:") {
        gauge(
            o,
            "bulkwire_process_resident_memory_bytes",
            "Resident set size.",
            v * 1024,
        );
    }
    if let Some(v) = kb("VmHWM:") {
        gauge(
            o,
            "bulkwire_process_peak_resident_memory_bytes",
            "Peak resident set size.",
            v * 1024,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_has_counters_histogram_and_memory() {
        let m = Metrics::default();
        m.bytes_received.fetch_add(10, Relaxed);
        m.upload_done("raw", Outcome::Ok);
        m.rejected("limit:file_bytes".into());
        m.observe_request(Duration::from_millis(3));
        m.observe_request(Duration::from_secs(500));
        m.parser_peak(70);
        m.parser_peak(20);
        let t = m.render();
        assert!(t.contains("bulkwire_received_bytes_total 10\n"), "{t}");
        assert!(t.contains("bulkwire_uploads_total{format=\"raw\",outcome=\"ok\"} 1\n"));
        assert!(t.contains("bulkwire_rejected_total{reason=\"limit:file_bytes\"} 1\n"));
        assert!(t.contains("bulkwire_request_duration_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(t.contains("bulkwire_request_duration_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(t.contains("bulkwire_parser_buffer_peak_bytes 70\n"));
        if cfg!(target_os = "linux") {
            assert!(t.contains("bulkwire_process_resident_memory_bytes "));
        }
        assert!(!t.contains("bulkwire_jwt_"), "no verifier attached");
    }

    #[test]
    fn an_attached_jwt_verifier_is_rendered() {
        let m = Metrics::default();
        let keys = crate::AuthKeys {
            jwt_secret: Some("k".repeat(32)),
            ..Default::default()
        };
        let v = crate::jwt::JwtVerifier::new(&keys).unwrap().unwrap();
        m.attach_jwt(v.stats().clone());
        let t = m.render();
        assert!(
            t.contains("bulkwire_jwt_refused_total{reason=\"expired\"} 0\n"),
            "{t}"
        );
        assert!(
            t.contains("bulkwire_jwks_fetches_total{outcome=\"ok\"} 0\n"),
            "{t}"
        );
    }
}
