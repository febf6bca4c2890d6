//! Load-tool limits (DESIGN.md "Bounded memory is a contract").
//!
//! The tool keeps every payload in memory once, shared by all requests, and
//! keeps per-second statistics and memory samples for the report: each of
//! these is capped here with a finite default. Exceeding one is an
//! [`crate::ErrorKind::Limit`] error naming the limit and its value, except
//! for the time series, which stop growing (and the report says so).

/// Caps for one load run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one payload file, read once into memory and shared.
    pub file_bytes: u64,
    /// Connections in the pool (`--connections`).
    pub connections: usize,
    /// Form fields and headers given per scenario.
    pub fields: usize,
    /// Seconds kept in the latency-over-time series (one bucket a second).
    pub timeline_seconds: usize,
    /// Server memory samples kept for the report.
    pub memory_samples: usize,
    /// Bytes read from a `/metrics` response before giving up on it.
    pub metrics_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            file_bytes: 1 << 30,
            connections: 10_000,
            fields: 1_000,
            timeline_seconds: 86_400,
            memory_samples: 100_000,
            metrics_bytes: 1 << 20,
        }
    }
}

/// Identifies one limit in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    FileBytes,
    Connections,
    Fields,
    TimelineSeconds,
    MemorySamples,
    MetricsBytes,
}

impl LimitKind {
    /// The field name in [`Limits`].
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::FileBytes => "file_bytes",
            LimitKind::Connections => "connections",
            LimitKind::Fields => "fields",
            LimitKind::TimelineSeconds => "timeline_seconds",
            LimitKind::MemorySamples => "memory_samples",
            LimitKind::MetricsBytes => "metrics_bytes",
        }
    }

    /// The configured value of this limit in `limits`.
    pub fn value(self, limits: &Limits) -> u64 {
        match self {
            LimitKind::FileBytes => limits.file_bytes,
            LimitKind::Connections => limits.connections as u64,
            LimitKind::Fields => limits.fields as u64,
            LimitKind::TimelineSeconds => limits.timeline_seconds as u64,
            LimitKind::MemorySamples => limits.memory_samples as u64,
            LimitKind::MetricsBytes => limits.metrics_bytes as u64,
        }
    }
}
