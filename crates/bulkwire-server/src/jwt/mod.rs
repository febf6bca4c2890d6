//! The application's own tokens: JWT bearer tokens (RFC 7519) checked by the rules of RFC 8725
//! (JWT Best Current Practices), for `Auth` to accept wherever it accepts a bearer token.
//!
//! - Keys: RS256, ES256 and EdDSA (Ed25519) from a JWK Set at `[auth] jwt_jwks_url`
//!   ([`jwks`]: cached, fetched again on an unknown `kid` at most once per `jwt_jwks_refresh`,
//!   each fetch bounded in time and size); HS256 from `[auth] jwt_secret` (at least 32 bytes).
//!   Each algorithm has exactly one source of keys, so a token cannot choose how it is checked
//!   (RFC 8725 §2.1, §3.1): HS256 is checked only against the secret, never against a public
//!   key, which defeats the classic confusion of an HS256 token "signed" with the RSA public
//!   key's PEM; a key from the JWKS is used only for the one algorithm its type (and its `alg`,
//!   when present) stands for.
//! - `alg: none`, any other algorithm, and a `crit` header (no extension is understood, RFC 7515
//!   §4.1.11) are refused. The header's `jku`, `jwk`, `x5u` and `x5c` are never followed: keys
//!   come from the configuration only (RFC 8725 §3.10).
//! - Claims: `exp` required (with `jwt_leeway` of clock skew), `nbf` honoured, `iss` must equal
//!   `jwt_issuer` when set, `aud` must contain `jwt_audience` when set, and without
//!   `jwt_audience` a token carrying `aud` is refused (RFC 7519 §4.1.3: this server is not
//!   among its audience). The signature is checked before any claim is looked at.
//! - What the claims grant ([`JwtClaims`], and as a `crate::principal::Principal` with
//!   [`JwtClaims::principal`]): `sub` the owner, `scope` the scopes (unknown names ignored), and
//!   the upload limits `bulkwire.max_bytes`, `bulkwire.content_types`, `bulkwire.quota_bytes`.
//!
//! The crate: `jsonwebtoken` (the most used JWT crate, maintained, with JWK support), built
//! with its `rust_crypto` backend (RustCrypto's `rsa`, `p256`, `ed25519-dalek`, `hmac`) and
//! without `aws_lc_rs`: pure Rust, so the static musl build needs no C toolchain, and no
//! second crypto library beside rustls's `ring`. The `rsa` crate's known timing leak
//! (RUSTSEC-2023-0071) concerns private-key operations; a verifier only uses public keys.

mod claims;
mod jwks;
pub mod stats;

pub use claims::{scopes_of_claim, JwtClaims};
pub use stats::{FetchOutcome, JwtStats};

use crate::config::AuthKeys;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The algorithms accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Alg {
    RS256,
    ES256,
    EdDSA,
    HS256,
}

impl Alg {
    pub fn name(self) -> &'static str {
        match self {
            Alg::RS256 => "RS256",
            Alg::ES256 => "ES256",
            Alg::EdDSA => "EdDSA",
            Alg::HS256 => "HS256",
        }
    }

    fn parse(name: &str) -> Option<Alg> {
        [Alg::RS256, Alg::ES256, Alg::EdDSA, Alg::HS256]
            .into_iter()
            .find(|a| a.name() == name)
    }

    fn algorithm(self) -> Algorithm {
        match self {
            Alg::RS256 => Algorithm::RS256,
            Alg::ES256 => Algorithm::ES256,
            Alg::EdDSA => Algorithm::EdDSA,
            Alg::HS256 => Algorithm::HS256,
        }
    }
}

/// Whether a fetch of the JWKS was tried for an unknown key id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refetch {
    /// Fetched again (or a fetch already running was waited for): the key is not in it.
    Fetched,
    /// The fetch failed (the log says why, and `bulkwire_jwks_fetches_total` counts it).
    Failed,
    /// Not fetched: the last fetch began less than `jwt_jwks_refresh` ago; one may start after
    /// `wait`.
    RateLimited { wait: Duration },
}

/// Why a token was refused, in words fit for a 401 body (its `Display`); [`JwtRefusal::reason`]
/// is a short label for metrics and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwtRefusal {
    /// Not a JWS in compact form, a header or payload that is not a JSON object, or a `crit`
    /// header.
    Malformed(&'static str),
    /// `alg` is `none`, not one of RS256, ES256, EdDSA, HS256, or one no configured key is for.
    UnsupportedAlg(String),
    /// The key named by `kid` is for another algorithm than the token's `alg`.
    KeyMismatch {
        kid: String,
        alg: Alg,
        key_alg: Alg,
    },
    /// No `kid`, and the JWKS has several keys for the algorithm.
    AmbiguousKey {
        alg: Alg,
        keys: usize,
    },
    /// The JWKS has no key by this id (`None`: the token names none, and no key fits).
    UnknownKeyId {
        kid: Option<String>,
        refetch: Refetch,
    },
    BadSignature,
    Expired,
    NotYetValid,
    WrongIssuer,
    WrongAudience,
    /// A required claim is absent: `exp`, `sub`, and `iss`/`aud` when configured.
    MissingClaim(&'static str),
    /// A claim of the wrong type or form.
    InvalidClaim {
        claim: &'static str,
        why: &'static str,
    },
}

impl JwtRefusal {
    /// One of [`stats::REASONS`].
    pub fn reason(&self) -> &'static str {
        match self {
            JwtRefusal::Malformed(_) => "malformed",
            JwtRefusal::UnsupportedAlg(_) => "unsupported_alg",
            JwtRefusal::KeyMismatch { .. } => "key_mismatch",
            JwtRefusal::AmbiguousKey { .. } => "ambiguous_key",
            JwtRefusal::UnknownKeyId { .. } => "unknown_kid",
            JwtRefusal::BadSignature => "bad_signature",
            JwtRefusal::Expired => "expired",
            JwtRefusal::NotYetValid => "not_yet_valid",
            JwtRefusal::WrongIssuer => "wrong_issuer",
            JwtRefusal::WrongAudience => "wrong_audience",
            JwtRefusal::MissingClaim(_) => "missing_claim",
            JwtRefusal::InvalidClaim { .. } => "invalid_claim",
        }
    }
}

impl fmt::Display for JwtRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwtRefusal::Malformed(why) => write!(f, "malformed token: {why}"),
            JwtRefusal::UnsupportedAlg(why) => write!(f, "token algorithm not accepted: {why}"),
            JwtRefusal::KeyMismatch { kid, alg, key_alg } => write!(
                f,
                "token algorithm {} does not match key {kid:?}, which is for {}",
                alg.name(),
                key_alg.name()
            ),
            JwtRefusal::AmbiguousKey { alg, keys } => write!(
                f,
                "the token names no key (kid) and {keys} {} keys could check it",
                alg.name()
            ),
            JwtRefusal::UnknownKeyId { kid, refetch } => {
                match kid {
                    Some(k) => write!(f, "unknown key id {k:?}")?,
                    None => write!(f, "the token names no key (kid) and no key fits it")?,
                }
                match refetch {
                    Refetch::Fetched => write!(f, " (the key set was fetched again)"),
                    Refetch::Failed => write!(f, " (the key set could not be fetched)"),
                    Refetch::RateLimited { wait } => write!(
                        f,
                        " (the key set was fetched moments ago; not again for {} s)",
                        wait.as_secs().max(1)
                    ),
                }
            }
            JwtRefusal::BadSignature => write!(f, "the token's signature does not verify"),
            JwtRefusal::Expired => write!(f, "the token has expired (exp)"),
            JwtRefusal::NotYetValid => write!(f, "the token is not valid yet (nbf)"),
            JwtRefusal::WrongIssuer => {
                write!(f, "the token's issuer (iss) is not the one accepted")
            }
            JwtRefusal::WrongAudience => {
                write!(f, "the token's audience (aud) does not include this server")
            }
            JwtRefusal::MissingClaim(c) => write!(f, "the token lacks the {c:?} claim"),
            JwtRefusal::InvalidClaim { claim, why } => {
                write!(f, "the token's {claim:?} claim {why}")
            }
        }
    }
}

impl std::error::Error for JwtRefusal {}

/// A token-supplied string as shown back: at most 64 characters.
fn shown(s: &str) -> String {
    s.chars().take(64).collect()
}

/// True when `token` has the shape of a JWS in compact form (RFC 7515 §7.1): three base64url
/// segments joined by dots, the first two non-empty (an unsigned `alg: none` token has an
/// empty third). A stored opaque token (hex) never has a dot, so `Auth` can tell the two apart
/// without a store lookup.
pub fn looks_like_jwt(token: &str) -> bool {
    let b64url = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let mut parts = token.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(p), Some(s), None) => {
            !h.is_empty() && !p.is_empty() && b64url(h) && b64url(p) && b64url(s)
        }
        _ => false,
    }
}

/// The header fields read before the signature is checked: only which key and algorithm.
struct Head {
    alg: Alg,
    kid: Option<String>,
}

fn head(token: &str) -> Result<Head, JwtRefusal> {
    if !looks_like_jwt(token) {
        return Err(JwtRefusal::Malformed(
            "not three base64url segments joined by dots",
        ));
    }
    let b64 = token.split('.').next().unwrap_or_default();
    let bytes = URL_SAFE_NO_PAD
        .decode(b64)
        .map_err(|_| JwtRefusal::Malformed("the header is not base64url"))?;
    let h: Map<String, Value> = serde_json::from_slice(&bytes)
        .map_err(|_| JwtRefusal::Malformed("the header is not a JSON object"))?;
    let alg = match h.get("alg") {
        Some(Value::String(a)) if a.eq_ignore_ascii_case("none") => {
            return Err(JwtRefusal::UnsupportedAlg(
                "\"none\": unsigned tokens are never accepted".into(),
            ))
        }
        Some(Value::String(a)) => Alg::parse(a).ok_or_else(|| {
            JwtRefusal::UnsupportedAlg(format!(
                "{:?} (RS256, ES256, EdDSA and HS256 are)",
                shown(a)
            ))
        })?,
        _ => return Err(JwtRefusal::Malformed("the header has no \"alg\" string")),
    };
    if h.contains_key("crit") {
        return Err(JwtRefusal::Malformed(
            "the header has \"crit\", and no extension is understood",
        ));
    }
    let kid = match h.get("kid") {
        None => None,
        Some(Value::String(k)) => Some(k.clone()),
        Some(_) => {
            return Err(JwtRefusal::Malformed(
                "the header's \"kid\" is not a string",
            ))
        }
    };
    Ok(Head { alg, kid })
}

/// Checks JWT bearer tokens against the configured keys and claims. Cheap to share behind an
/// `Arc`; [`JwtVerifier::verify`] takes `&self`.
pub struct JwtVerifier {
    secret: Option<DecodingKey>,
    jwks: Option<Arc<jwks::Jwks>>,
    issuer: Option<String>,
    audience: Option<String>,
    leeway: u64,
    stats: Arc<JwtStats>,
}

impl fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("hs256", &self.secret.is_some())
            .field("jwks", &self.jwks.is_some())
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish()
    }
}

impl JwtVerifier {
    /// The verifier the `[auth]` keys describe; `None` when neither `jwt_jwks_url` nor
    /// `jwt_secret` is set. Fetches nothing: [`JwtVerifier::start`] does.
    pub fn new(keys: &AuthKeys) -> Result<Option<JwtVerifier>, String> {
        keys.validate()?;
        if !keys.jwt_enabled() {
            return Ok(None);
        }
        let stats = Arc::new(JwtStats::default());
        let jwks = match &keys.jwt_jwks_url {
            Some(url) => Some(Arc::new(jwks::Jwks::new(
                url.clone(),
                Duration::from_secs(keys.jwt_jwks_refresh),
                Duration::from_secs(keys.jwt_jwks_timeout),
                keys.jwt_jwks_bytes,
                stats.clone(),
            )?)),
            None => None,
        };
        Ok(Some(JwtVerifier {
            secret: keys
                .jwt_secret
                .as_ref()
                .map(|s| DecodingKey::from_secret(s.as_bytes())),
            jwks,
            issuer: keys.jwt_issuer.clone(),
            audience: keys.jwt_audience.clone(),
            leeway: keys.jwt_leeway,
            stats,
        }))
    }

    /// [`JwtVerifier::new`], then the first fetch of the JWKS, waited for (at most
    /// `jwt_jwks_timeout`). A failed fetch is logged and the verifier returned all the same:
    /// tokens needing a key from the set are refused until a fetch succeeds.
    pub async fn start(keys: &AuthKeys) -> Result<Option<Arc<JwtVerifier>>, String> {
        let Some(v) = JwtVerifier::new(keys)? else {
            return Ok(None);
        };
        if let Some(j) = &v.jwks {
            if !j.fetch_now().await {
                tracing::warn!(
                    "auth.jwt_jwks_url: the first JWKS fetch failed; RS256, ES256 and EdDSA \
                     tokens are refused until one succeeds"
                );
            }
        }
        Ok(Some(Arc::new(v)))
    }

    /// Fetches the JWKS now, unless a fetch is running (then waits for it) or began less than
    /// `jwt_jwks_refresh` ago; true when a key set was fetched. Without a JWKS: false.
    pub async fn fetch_jwks(&self) -> bool {
        match &self.jwks {
            Some(j) => j.fetch_now().await,
            None => false,
        }
    }

    /// The counters for `/metrics` (attach them with `Metrics::attach_jwt`).
    pub fn stats(&self) -> &Arc<JwtStats> {
        &self.stats
    }

    /// Checks a bearer token: its key and algorithm, its signature, then its claims.
    pub async fn verify(&self, token: &str) -> Result<JwtClaims, JwtRefusal> {
        let r = self.check(token).await;
        match &r {
            Ok(_) => self.stats.accepted(),
            Err(e) => self.stats.refused(e.reason()),
        }
        r
    }

    async fn check(&self, token: &str) -> Result<JwtClaims, JwtRefusal> {
        let Head { alg, kid } = head(token)?;
        let from_set;
        let key = match (alg, &self.secret, &self.jwks) {
            (Alg::HS256, Some(secret), _) => secret,
            (Alg::HS256, None, _) => {
                return Err(JwtRefusal::UnsupportedAlg(
                    "HS256 (no jwt_secret is configured)".into(),
                ))
            }
            (_, _, Some(set)) => {
                from_set = set.key(kid.as_deref(), alg).await?;
                &from_set.key
            }
            (_, _, None) => {
                return Err(JwtRefusal::UnsupportedAlg(format!(
                    "{} (no jwt_jwks_url is configured)",
                    alg.name()
                )))
            }
        };
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, key, &self.validation(alg))
            .map_err(|e| refusal(e.into_kind()))?;
        JwtClaims::from_payload(&data.claims)
    }

    fn validation(&self, alg: Alg) -> Validation {
        let mut v = Validation::new(alg.algorithm());
        v.leeway = self.leeway;
        v.validate_exp = true;
        v.validate_nbf = true;
        v.validate_aud = true;
        let mut required = vec!["exp", "sub"];
        if let Some(i) = &self.issuer {
            v.set_issuer(&[i]);
            required.push("iss");
        }
        if let Some(a) = &self.audience {
            v.set_audience(&[a]);
            required.push("aud");
        }
        v.set_required_spec_claims(&required);
        v
    }
}

/// jsonwebtoken's error as a refusal.
fn refusal(kind: ErrorKind) -> JwtRefusal {
    match kind {
        ErrorKind::InvalidSignature => JwtRefusal::BadSignature,
        ErrorKind::ExpiredSignature => JwtRefusal::Expired,
        ErrorKind::ImmatureSignature => JwtRefusal::NotYetValid,
        ErrorKind::InvalidIssuer => JwtRefusal::WrongIssuer,
        ErrorKind::InvalidAudience => JwtRefusal::WrongAudience,
        ErrorKind::MissingRequiredClaim(c) => JwtRefusal::MissingClaim(claim_name(&c)),
        ErrorKind::InvalidClaimFormat(c) => JwtRefusal::InvalidClaim {
            claim: claim_name(&c),
            why: "has the wrong type",
        },
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidKeyFormat => {
            JwtRefusal::UnsupportedAlg("the algorithm does not fit the key".into())
        }
        ErrorKind::InvalidRsaKey(_) | ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidEddsaKey => {
            JwtRefusal::BadSignature
        }
        _ => JwtRefusal::Malformed("the token does not decode"),
    }
}

fn claim_name(c: &str) -> &'static str {
    ["exp", "nbf", "sub", "iss", "aud"]
        .into_iter()
        .find(|n| *n == c)
        .unwrap_or("a registered claim")
}

#[cfg(test)]
mod tests;
