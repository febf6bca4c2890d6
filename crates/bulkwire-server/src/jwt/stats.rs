//! Counters for `/metrics`: tokens accepted and refused by reason, JWKS fetches by outcome, keys
//! held. Single relaxed atomics; rendered by [`JwtStats::render`] into the exposition text.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why a token was refused: [`super::JwtRefusal::reason`] is one of these.
pub const REASONS: [&str; 12] = [
    "malformed",
    "unsupported_alg",
    "key_mismatch",
    "unknown_kid",
    "bad_signature",
    "expired",
    "not_yet_valid",
    "wrong_issuer",
    "wrong_audience",
    "missing_claim",
    "invalid_claim",
    "ambiguous_key",
];

/// How a JWKS fetch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    Ok,
    /// No complete answer within `jwt_jwks_timeout`.
    Timeout,
    /// More than `jwt_jwks_bytes`.
    TooLarge,
    /// An answer other than 2xx.
    Status,
    /// Connecting, TLS or reading failed.
    Transport,
    /// Not a JWK Set.
    Invalid,
}

pub const FETCH_OUTCOMES: [&str; 6] = [
    "ok",
    "timeout",
    "too_large",
    "status",
    "transport",
    "invalid",
];

#[derive(Debug, Default)]
pub struct JwtStats {
    accepted: AtomicU64,
    refused: [AtomicU64; REASONS.len()],
    fetches: [AtomicU64; FETCH_OUTCOMES.len()],
    /// Keys held from the last good fetch.
    keys: AtomicU64,
}

impl JwtStats {
    pub(crate) fn accepted(&self) {
        self.accepted.fetch_add(1, Relaxed);
    }

    pub(crate) fn refused(&self, reason: &str) {
        if let Some(i) = REASONS.iter().position(|r| *r == reason) {
            self.refused[i].fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn fetched(&self, outcome: FetchOutcome) {
        self.fetches[outcome as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn set_keys(&self, n: usize) {
        self.keys.store(n as u64, Relaxed);
    }

    /// Tokens accepted so far.
    pub fn accepted_total(&self) -> u64 {
        self.accepted.load(Relaxed)
    }

    /// Tokens refused for `reason` (one of [`REASONS`]).
    pub fn refused_total(&self, reason: &str) -> u64 {
        REASONS
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.refused[i].load(Relaxed))
    }

    /// JWKS fetches that ended with `outcome`.
    pub fn fetches_total(&self, outcome: FetchOutcome) -> u64 {
        self.fetches[outcome as usize].load(Relaxed)
    }

    /// Appends the exposition lines.
    pub fn render(&self, o: &mut String) {
        let _ = writeln!(
            o,
            "# HELP bulkwire_jwt_accepted_total JWT bearer tokens accepted.\n\
             # TYPE bulkwire_jwt_accepted_total counter\n\
             bulkwire_jwt_accepted_total {}",
            self.accepted.load(Relaxed)
        );
        let _ = writeln!(
            o,
            "# HELP bulkwire_jwt_refused_total JWT bearer tokens refused, by reason.\n\
             # TYPE bulkwire_jwt_refused_total counter"
        );
        for (r, v) in REASONS.iter().zip(&self.refused) {
            let _ = writeln!(
                o,
                "bulkwire_jwt_refused_total{{reason=\"{r}\"}} {}",
                v.load(Relaxed)
            );
        }
        let _ = writeln!(
            o,
            "# HELP bulkwire_jwks_fetches_total JWKS fetches, by outcome.\n\
             # TYPE bulkwire_jwks_fetches_total counter"
        );
        for (out, v) in FETCH_OUTCOMES.iter().zip(&self.fetches) {
            let _ = writeln!(
                o,
                "bulkwire_jwks_fetches_total{{outcome=\"{out}\"}} {}",
                v.load(Relaxed)
            );
        }
        let _ = writeln!(
            o,
            "# HELP bulkwire_jwks_keys Keys held from the last good JWKS fetch.\n\
             # TYPE bulkwire_jwks_keys gauge\n\
             bulkwire_jwks_keys {}",
            self.keys.load(Relaxed)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_has_every_reason_and_outcome() {
        let s = JwtStats::default();
        s.accepted();
        s.refused("expired");
        s.refused("expired");
        s.fetched(FetchOutcome::TooLarge);
        s.set_keys(3);
        let mut t = String::new();
        s.render(&mut t);
        assert!(t.contains("bulkwire_jwt_accepted_total 1\n"), "{t}");
        assert!(t.contains("bulkwire_jwt_refused_total{reason=\"expired\"} 2\n"));
        assert!(t.contains("bulkwire_jwt_refused_total{reason=\"malformed\"} 0\n"));
        assert!(t.contains("bulkwire_jwks_fetches_total{outcome=\"too_large\"} 1\n"));
        assert!(t.contains("bulkwire_jwks_keys 3\n"));
        assert_eq!(s.refused_total("expired"), 2);
        assert_eq!(s.fetches_total(FetchOutcome::TooLarge), 1);
    }
}
