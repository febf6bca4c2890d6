//! What a verified token grants: its claims mapped to an owner, scopes and upload limits.
//!
//! - `sub` (RFC 7519 §4.1.2) is the owner: a non-empty string.
//! - `scope` is a space-separated list of names, as OAuth 2.0 writes it (RFC 6749 §3.3, RFC
//!   8693 §4.2). The names this server knows are [`Scope`]'s; **other names are ignored**: an
//!   identity provider's access token commonly carries scopes meant for other resource servers
//!   (`openid`, `email`, `orders:write`), and refusing those tokens would make one token per
//!   service mandatory. Ignoring an unknown name can only grant less, never more: a misspelt
//!   `uplaod` grants nothing and the upload is refused for lack of `upload`.
//! - `bulkwire.max_bytes` and `bulkwire.quota_bytes` are integer byte counts;
//!   `bulkwire.content_types` a list of media type patterns (`image/png`, `image/*`, `*/*`).
//!
//! A claim of the wrong type is a refusal naming it, never a silent default: a token that meant
//! to limit an upload and failed to say so in the expected form must not pass unlimited.

use super::JwtRefusal;
use serde_json::{Map, Value};
use std::fmt;

/// What a principal may do (DESIGN.md "Who may do what").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    Upload,
    Read,
    Delete,
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Upload, Scope::Read, Scope::Delete, Scope::Admin];

    /// The name in a `scope` claim.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Upload => "upload",
            Scope::Read => "read",
            Scope::Delete => "delete",
            Scope::Admin => "admin",
        }
    }

    /// The scope a name stands for; `None` for a name this server does not know. Scope names
    /// are case-sensitive (RFC 6749 §3.3).
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.name() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`Scope`]s.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Scopes(u8);

impl Scopes {
    /// The known names of a space-separated `scope` value; unknown names are ignored (see the
    /// module doc), as are repeated spaces.
    pub fn from_claim(scope: &str) -> Scopes {
        scope
            .split(' ')
            .filter_map(Scope::parse)
            .fold(Scopes::default(), |s, x| s.with(x))
    }

    pub fn with(self, s: Scope) -> Scopes {
        Scopes(self.0 | s.bit())
    }

    pub fn contains(self, s: Scope) -> bool {
        self.0 & s.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }
}

impl FromIterator<Scope> for Scopes {
    fn from_iter<I: IntoIterator<Item = Scope>>(it: I) -> Scopes {
        it.into_iter().fold(Scopes::default(), Scopes::with)
    }
}

impl fmt::Debug for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(Scope::name)).finish()
    }
}

/// What a verified token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtClaims {
    /// `sub`: the owner of what the bearer makes.
    pub sub: String,
    /// The known names of `scope`.
    pub scopes: Scopes,
    /// `bulkwire.max_bytes`: the largest upload this token may make.
    pub max_bytes: Option<u64>,
    /// `bulkwire.content_types`: media type patterns an upload's type must match, lowercased.
    /// `Some` of an empty list allows no type.
    pub content_types: Option<Vec<String>>,
    /// `bulkwire.quota_bytes`: the bytes the owner may hold in all.
    pub quota_bytes: Option<u64>,
    /// `exp`, seconds since the Unix epoch.
    pub expires: u64,
}

impl JwtClaims {
    /// True when `media_type` (parameters after `;` ignored) matches one of
    /// `bulkwire.content_types`, or the token names none.
    pub fn allows_content_type(&self, media_type: &str) -> bool {
        match &self.content_types {
            None => true,
            Some(ps) => ps.iter().any(|p| media_type_matches(p, media_type)),
        }
    }

    /// The claims of a verified payload (its `exp` and `sub` already checked present by the
    /// validation).
    pub(crate) fn from_payload(p: &Map<String, Value>) -> Result<JwtClaims, JwtRefusal> {
        let sub = match p.get("sub") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::String(_)) => return Err(invalid("sub", "is empty")),
            Some(_) => return Err(invalid("sub", "must be a string")),
            None => return Err(JwtRefusal::MissingClaim("sub")),
        };
        let expires = match p.get("exp") {
            Some(v) => numeric_date(v).ok_or_else(|| invalid("exp", "must be a NumericDate"))?,
            None => return Err(JwtRefusal::MissingClaim("exp")),
        };
        let scopes = match p.get("scope") {
            None | Some(Value::Null) => Scopes::default(),
            Some(Value::String(s)) => Scopes::from_claim(s),
            Some(_) => {
                return Err(invalid(
                    "scope",
                    "must be a string of space-separated names (RFC 8693 §4.2)",
                ))
            }
        };
        Ok(JwtClaims {
            sub,
            scopes,
            max_bytes: bytes(p, "bulkwire.max_bytes")?,
            content_types: content_types(p)?,
            quota_bytes: bytes(p, "bulkwire.quota_bytes")?,
            expires,
        })
    }
}

fn invalid(claim: &'static str, why: &'static str) -> JwtRefusal {
    JwtRefusal::InvalidClaim { claim, why }
}

/// A NumericDate (RFC 7519 §2): seconds, possibly with a fraction, after the epoch.
fn numeric_date(v: &Value) -> Option<u64> {
    match v.as_u64() {
        Some(n) => Some(n),
        None => v
            .as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64),
    }
}

fn bytes(p: &Map<String, Value>, claim: &'static str) -> Result<Option<u64>, JwtRefusal> {
    match p.get(claim) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(claim, "must be a whole number of bytes")),
    }
}

fn content_types(p: &Map<String, Value>) -> Result<Option<Vec<String>>, JwtRefusal> {
    const CLAIM: &str = "bulkwire.content_types";
    let list = match p.get(CLAIM) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(invalid(CLAIM, "must be a list of media type patterns")),
    };
    let mut out = Vec::with_capacity(list.len());
    for v in list {
        let pattern = v.as_str().filter(|s| is_pattern(s)).ok_or_else(|| {
            invalid(
                CLAIM,
                "holds an entry that is not TYPE/SUBTYPE, TYPE/* or */*",
            )
        })?;
        out.push(pattern.to_ascii_lowercase());
    }
    Ok(Some(out))
}

/// `type/subtype`, `type/*` or `*/*`, each name made of RFC 6838 §4.2 restricted-name
/// characters.
fn is_pattern(s: &str) -> bool {
    let name = |n: &str| {
        !n.is_empty()
            && n.len() <= 127
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    match s.split_once('/') {
        Some(("*", "*")) => true,
        Some((t, "*")) => name(t),
        Some((t, st)) => name(t) && name(st),
        None => false,
    }
}

/// Whether `media_type` (case-insensitive, parameters ignored) matches a lowercased pattern.
pub fn media_type_matches(pattern: &str, media_type: &str) -> bool {
    let mt = media_type.split(';').next().unwrap_or("").trim();
    let Some((t, st)) = mt.split_once('/') else {
        return false;
    };
    match pattern.split_once('/') {
        Some(("*", "*")) => true,
        Some((pt, "*")) => pt.eq_ignore_ascii_case(t),
        Some((pt, pst)) => pt.eq_ignore_ascii_case(t) && pst.eq_ignore_ascii_case(st),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(v: Value) -> Result<JwtClaims, JwtRefusal> {
        JwtClaims::from_payload(v.as_object().unwrap())
    }

    #[test]
    fn every_claim_maps_to_its_field() {
        let c = claims(json!({
            "sub": "alice", "exp": 1_900_000_000u64, "scope": "upload  read openid admin",
            "bulkwire.max_bytes": 1048576, "bulkwire.quota_bytes": 5_000_000_000u64,
            "bulkwire.content_types": ["image/*", "Application/PDF"], "iat": 1, "other": {}
        }))
        .unwrap();
        assert_eq!(c.sub, "alice");
        assert_eq!(c.expires, 1_900_000_000);
        assert_eq!(
            c.scopes.iter().collect::<Vec<_>>(),
            [Scope::Upload, Scope::Read, Scope::Admin]
        );
        assert!(!c.scopes.contains(Scope::Delete));
        assert_eq!(c.max_bytes, Some(1 << 20));
        assert_eq!(c.quota_bytes, Some(5_000_000_000));
        assert_eq!(
            c.content_types.as_deref(),
            Some(&["image/*".to_string(), "application/pdf".to_string()][..])
        );
        assert_eq!(format!("{:?}", c.scopes), r#"{"upload", "read", "admin"}"#);
    }

    #[test]
    fn absent_optional_claims_are_none_and_no_scope_is_no_scopes() {
        let c = claims(json!({"sub": "bob", "exp": 1.9e9})).unwrap();
        assert_eq!(c.expires, 1_900_000_000);
        assert!(c.scopes.is_empty());
        assert_eq!((c.max_bytes, c.quota_bytes), (None, None));
        assert_eq!(c.content_types, None);
        assert!(c.allows_content_type("application/x-anything"));
    }

    #[test]
    fn scope_names_are_case_sensitive_and_unknown_ones_grant_nothing() {
        let s = Scopes::from_claim("Upload READ uplaod delete");
        assert_eq!(s.iter().collect::<Vec<_>>(), [Scope::Delete]);
        assert!(Scopes::from_claim("").is_empty());
        let all: Scopes = Scope::ALL.into_iter().collect();
        assert_eq!(Scopes::from_claim("admin delete read upload"), all);
    }

    #[test]
    fn a_claim_of_the_wrong_type_is_refused_by_name() {
        let cases = [
            (json!({"sub": 7, "exp": 1}), "sub"),
            (json!({"sub": "", "exp": 1}), "sub"),
            (json!({"sub": "a", "exp": "soon"}), "exp"),
            (json!({"sub": "a", "exp": 1, "scope": ["upload"]}), "scope"),
            (
                json!({"sub": "a", "exp": 1, "bulkwire.max_bytes": "1 MiB"}),
                "bulkwire.max_bytes",
            ),
            (
                json!({"sub": "a", "exp": 1, "bulkwire.max_bytes": -1}),
                "bulkwire.max_bytes",
            ),
            (
                json!({"sub": "a", "exp": 1, "bulkwire.quota_bytes": 1.5}),
                "bulkwire.quota_bytes",
            ),
            (
                json!({"sub": "a", "exp": 1, "bulkwire.content_types": "image/*"}),
                "bulkwire.content_types",
            ),
            (
                json!({"sub": "a", "exp": 1, "bulkwire.content_types": ["image"]}),
                "bulkwire.content_types",
            ),
            (
                json!({"sub": "a", "exp": 1, "bulkwire.content_types": ["*/png"]}),
                "bulkwire.content_types",
            ),
            (
                json!({"sub": "a", "exp": 1, "bulkwire.content_types": [3]}),
                "bulkwire.content_types",
            ),
        ];
        for (payload, claim) in cases {
            match claims(payload.clone()) {
                Err(JwtRefusal::InvalidClaim { claim: c, .. }) => assert_eq!(c, claim, "{payload}"),
                other => panic!("{payload}: {other:?}"),
            }
        }
        assert_eq!(
            claims(json!({"exp": 1})),
            Err(JwtRefusal::MissingClaim("sub"))
        );
    }

    #[test]
    fn content_type_patterns_match_type_subtype_and_wildcards() {
        let m = media_type_matches;
        assert!(m("image/*", "image/png"));
        assert!(m("image/*", "IMAGE/JPEG; q=1"));
        assert!(!m("image/*", "video/mp4"));
        assert!(m("application/pdf", "application/PDF"));
        assert!(!m("application/pdf", "application/pdfx"));
        assert!(m("*/*", "text/plain"));
        assert!(!m("*/*", "nonsense"));
        let c = claims(json!({"sub": "a", "exp": 1, "bulkwire.content_types": []})).unwrap();
        assert!(
            !c.allows_content_type("image/png"),
            "an empty list allows nothing"
        );
    }
}
