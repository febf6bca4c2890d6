//! What a verified token grants: its claims mapped to an owner, scopes and upload limits.
//!
//! - `sub` (RFC 7519 §4.1.2) is the owner: a non-empty string.
//! - `scope` is a space-separated list of names, as OAuth 2.0 writes it (RFC 6749 §3.3, RFC
//!   8693 §4.2). The names this server knows are [`Scopes`]'s; **other names are ignored**: an
//!   identity provider's access token commonly carries scopes meant for other resource servers
//!   (`openid`, `email`, `orders:write`), and refusing those tokens would make one token per
//!   service mandatory. Ignoring an unknown name can only grant less, never more: a misspelt
//!   `uplaod` grants nothing and the upload is refused for lack of `upload`.
//! - `bulkwire.max_bytes` and `bulkwire.quota_bytes` are integer byte counts;
//!   `bulkwire.content_types` a list of media type patterns (`image/png`, `image/*`, `*/*`).
//!
//! A claim of the wrong type is a refusal naming it, never a silent default: a token that meant
//! to limit an upload and failed to say so in the expected form must not pass unlimited.
//!
//! [`JwtClaims::principal`] is what `Auth` hands the handlers: `crate::principal`'s
//! [`Principal`] with its [`UploadRules`], which enforce the limits.

use super::JwtRefusal;
use crate::principal::{Principal, Scopes, UploadRules, Via};
use serde_json::{Map, Value};

/// The known names of a space-separated `scope` value; unknown names are ignored (see the module
/// doc), as are repeated spaces. Names are case-sensitive (RFC 6749 §3.3).
pub fn scopes_of_claim(scope: &str) -> Scopes {
    scope
        .split(' ')
        .filter_map(Scopes::named)
        .fold(Scopes::NONE, Scopes::union)
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
    /// `bulkwire.content_types`: media type patterns an upload's type must match, lowercased
    /// (`UploadRules::check_type`). `Some` of an empty list allows no type.
    pub content_types: Option<Vec<String>>,
    /// `bulkwire.quota_bytes`: the bytes the owner may hold in all.
    pub quota_bytes: Option<u64>,
    /// `exp`, seconds since the Unix epoch.
    pub expires: u64,
}

impl JwtClaims {
    /// The upload limits the token carries.
    pub fn rules(&self) -> UploadRules {
        UploadRules {
            max_bytes: self.max_bytes,
            content_types: self.content_types.clone(),
            quota_bytes: self.quota_bytes,
        }
    }

    /// The principal the token stands for: `sub` with its scopes and limits, reaching every
    /// owner's items only with `admin`.
    pub fn principal(&self) -> Principal {
        Principal::scoped(&self.sub, self.scopes, Via::Jwt, self.rules())
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
            None | Some(Value::Null) => Scopes::NONE,
            Some(Value::String(s)) => scopes_of_claim(s),
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

/// `type/subtype`, `type/*`, `*/*` or `*` (as `UploadRules::check_type` matches them), each
/// name made of RFC 6838 §4.2 restricted-name characters.
fn is_pattern(s: &str) -> bool {
    if s == "*" {
        return true;
    }
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
        assert_eq!(c.scopes.names(), ["upload", "read", "admin"]);
        assert_eq!(c.max_bytes, Some(1 << 20));
        assert_eq!(c.quota_bytes, Some(5_000_000_000));
        assert_eq!(
            c.content_types.as_deref(),
            Some(&["image/*".to_string(), "application/pdf".to_string()][..])
        );
        let p = c.principal();
        assert_eq!(
            (p.name.as_str(), p.scopes, p.everyone),
            ("alice", c.scopes, true)
        );
        assert_eq!(p.via.kind(), "jwt");
        assert_eq!(p.rules, c.rules());
        assert_eq!(p.rules.max_bytes, Some(1 << 20));
        assert!(p.rules.check_size(1 << 20).is_ok() && p.rules.check_size((1 << 20) + 1).is_err());
        assert!(p.rules.check_type("image/webp").is_ok());
        assert!(p.rules.check_type("application/pdf; x=1").is_ok());
        assert!(p.rules.check_type("video/mp4").is_err());
    }

    #[test]
    fn absent_optional_claims_are_none_and_no_scope_is_no_scopes() {
        let c = claims(json!({"sub": "bob", "exp": 1.9e9})).unwrap();
        assert_eq!(c.expires, 1_900_000_000);
        assert_eq!(c.scopes, Scopes::NONE);
        assert_eq!((c.max_bytes, c.quota_bytes), (None, None));
        assert_eq!(c.content_types, None);
        let p = c.principal();
        assert!(!p.everyone && p.require(Scopes::READ).is_err());
        assert!(p.rules.check_type("application/x-anything").is_ok());
    }

    #[test]
    fn scope_names_are_case_sensitive_and_unknown_ones_grant_nothing() {
        assert_eq!(scopes_of_claim("Upload READ uplaod delete"), Scopes::DELETE);
        assert_eq!(scopes_of_claim(""), Scopes::NONE);
        assert_eq!(scopes_of_claim("openid email"), Scopes::NONE);
        // Space-separated, as OAuth writes it: a comma is part of a (then unknown) name.
        assert_eq!(scopes_of_claim("upload,read"), Scopes::NONE);
        assert_eq!(
            scopes_of_claim(" upload  read "),
            Scopes::UPLOAD.union(Scopes::READ)
        );
        assert_eq!(
            scopes_of_claim("admin delete read upload").names(),
            ["upload", "read", "delete", "admin"]
        );
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
    fn content_type_patterns_are_checked_and_an_empty_list_allows_nothing() {
        for ok in [
            "image/png",
            "image/*",
            "*/*",
            "*",
            "application/vnd.ms-excel",
            "a/b+json",
        ] {
            assert!(is_pattern(ok), "{ok}");
        }
        for bad in [
            "image",
            "*/png",
            "image/",
            "/png",
            "im age/png",
            "image/png; q=1",
            "",
        ] {
            assert!(!is_pattern(bad), "{bad}");
        }
        let c = claims(json!({"sub": "a", "exp": 1, "bulkwire.content_types": []})).unwrap();
        assert!(c.rules().check_type("image/png").is_err());
    }
}
