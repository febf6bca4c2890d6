//! Configuration, the header rules and the refusal texts. Tokens signed by an independent
//! library, and a real JWKS server, are in `tests/jwt.rs`; the headers here are written by hand
//! and never signed (each is refused before a signature would be looked at).

use super::*;
use crate::Config;

fn b64(json: &str) -> String {
    URL_SAFE_NO_PAD.encode(json)
}

/// A token with this header, a small payload and a junk signature.
fn with_header(header: &str) -> String {
    format!(
        "{}.{}.c2ln",
        b64(header),
        b64(r#"{"sub":"a","exp":4102444800}"#)
    )
}

fn secret_only() -> JwtVerifier {
    let keys = AuthKeys {
        jwt_secret: Some("0123456789abcdef0123456789abcdef".into()),
        ..Default::default()
    };
    JwtVerifier::new(&keys).unwrap().unwrap()
}

#[test]
fn defaults_are_finite_and_jwt_is_off() {
    let k = AuthKeys::default();
    assert_eq!(
        (
            k.jwt_leeway,
            k.jwt_jwks_refresh,
            k.jwt_jwks_timeout,
            k.jwt_jwks_bytes
        ),
        (30, 60, 5, 1 << 20)
    );
    assert!(!k.jwt_enabled());
    assert!(JwtVerifier::new(&k).unwrap().is_none());
    assert!(format!("{:?}", secret_only()).contains("hs256: true"));
}

#[test]
fn toml_durations_and_sizes_take_units() {
    let c = Config::from_toml_str(
        "[auth]\njwt_jwks_url = \"https://idp.example/jwks.json\"\njwt_leeway = \"1m\"\n\
         jwt_jwks_refresh = \"2s\"\njwt_jwks_timeout = 3\njwt_jwks_bytes = \"64 KiB\"\n\
         jwt_issuer = \"https://idp.example\"\njwt_audience = \"bulkwire\"\n",
    )
    .unwrap();
    let a = &c.auth;
    assert_eq!(
        a.jwt_jwks_url.as_deref(),
        Some("https://idp.example/jwks.json")
    );
    assert_eq!(
        (a.jwt_leeway, a.jwt_jwks_refresh, a.jwt_jwks_timeout),
        (60, 2, 3)
    );
    assert_eq!(a.jwt_jwks_bytes, 64 << 10);
    let e = Config::from_toml_str("[auth]\njwt_leway = 3\n").unwrap_err();
    assert!(e.contains("jwt_leway"), "{e}");
}

#[test]
fn start_up_errors_name_the_key() {
    let bad = [
        ("jwt_secret = \"short\"", "auth.jwt_secret has 5 bytes"),
        (
            "jwt_secret = \"-----BEGIN PUBLIC KEY-----\\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\"",
            "auth.jwt_secret is a PEM key",
        ),
        ("jwt_jwks_url = \"ftp://idp.example/jwks\"", "auth.jwt_jwks_url"),
        ("jwt_jwks_url = \"/etc/jwks.json\"", "auth.jwt_jwks_url"),
        ("jwt_jwks_url = \"https://\"", "auth.jwt_jwks_url"),
        (
            "jwt_jwks_url = \"http://127.0.0.1:1/k\"\njwt_jwks_refresh = 0",
            "auth.jwt_jwks_refresh must be > 0",
        ),
        (
            "jwt_jwks_url = \"http://127.0.0.1:1/k\"\njwt_jwks_timeout = 0",
            "auth.jwt_jwks_timeout must be > 0",
        ),
        (
            "jwt_jwks_url = \"http://127.0.0.1:1/k\"\njwt_jwks_bytes = 0",
            "auth.jwt_jwks_bytes must be > 0",
        ),
    ];
    for (toml, want) in bad {
        let e = Config::from_toml_str(&format!("[auth]\n{toml}\n")).unwrap_err();
        assert!(e.contains(want), "{toml}: {e}");
    }
    // An issuer or audience without a key: the file alone may be so (the secret can come from
    // BULKWIRE_JWT_SECRET), the whole configuration may not.
    for (toml, want) in [
        (
            "jwt_issuer = \"https://idp.example\"",
            "auth.jwt_issuer is set but no JWT",
        ),
        (
            "jwt_audience = \"x\"",
            "auth.jwt_audience is set but no JWT",
        ),
    ] {
        let c = Config::from_toml_str(&format!("[auth]\n{toml}\n")).unwrap();
        let e = c.auth.validate().unwrap_err();
        assert!(e.contains(want), "{toml}: {e}");
        assert!(JwtVerifier::new(&c.auth).unwrap_err().contains(want));
    }
    // Both sources at once are fine: HS256 takes only the secret, the others only the JWKS.
    let both = "[auth]\njwt_secret = \"0123456789abcdef0123456789abcdef\"\n\
                jwt_jwks_url = \"http://127.0.0.1:1/jwks\"\n";
    assert!(Config::from_toml_str(both).is_ok());
    // The check is also the verifier's: a configuration built in code cannot skip it.
    let short = AuthKeys {
        jwt_secret: Some("x".repeat(31)),
        ..Default::default()
    };
    assert!(JwtVerifier::new(&short)
        .unwrap_err()
        .contains("at least 32"));
}

#[test]
fn the_secret_is_not_in_debug_output() {
    let keys = AuthKeys {
        jwt_secret: Some("do-not-print-me-0123456789abcdef".into()),
        ..Default::default()
    };
    let c = Config {
        auth: keys,
        ..Config::default()
    };
    let d = format!("{c:?}");
    assert!(
        !d.contains("do-not-print-me") && d.contains("<hidden>"),
        "{d}"
    );
}

#[test]
fn looks_like_jwt_tells_a_jws_from_an_opaque_token() {
    assert!(looks_like_jwt(
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln-_"
    ));
    assert!(
        looks_like_jwt("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0."),
        "alg none: empty signature"
    );
    let opaque = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    for no in [
        opaque, "", "a.b", "a.b.c.d", ".b.c", "a..c", "a.b=.c", "a.b.c/", "a b.c.d",
    ] {
        assert!(!looks_like_jwt(no), "{no:?}");
    }
}

#[tokio::test]
async fn the_header_decides_what_is_refused_before_any_key() {
    let v = secret_only();
    let cases = [
        (r#"{"alg":"none"}"#, "unsupported_alg", "\"none\""),
        (r#"{"alg":"NoNe","kid":"k"}"#, "unsupported_alg", "\"none\""),
        (r#"{"alg":"HS512"}"#, "unsupported_alg", "\"HS512\""),
        (r#"{"alg":"PS256"}"#, "unsupported_alg", "\"PS256\""),
        (
            r#"{"alg":"RS256","kid":"k"}"#,
            "unsupported_alg",
            "no jwt_jwks_url",
        ),
        (r#"{"alg":"HS256","crit":["exp"]}"#, "malformed", "crit"),
        (r#"{"alg":"HS256","kid":7}"#, "malformed", "kid"),
        (r#"{"typ":"JWT"}"#, "malformed", "alg"),
        (r#"["alg","HS256"]"#, "malformed", "JSON object"),
    ];
    for (header, reason, text) in cases {
        let e = v.verify(&with_header(header)).await.unwrap_err();
        assert_eq!(e.reason(), reason, "{header}: {e}");
        assert!(e.to_string().contains(text), "{header}: {e}");
    }
    let e = v.verify("not-a-jwt").await.unwrap_err();
    assert_eq!(e.reason(), "malformed");
    let e = v.verify("eyJ!.e30.x").await.unwrap_err();
    assert_eq!(e.reason(), "malformed");
    assert_eq!(v.stats().refused_total("unsupported_alg"), 5);
    assert_eq!(v.stats().refused_total("malformed"), 6);
}

#[tokio::test]
async fn hs256_needs_the_secret_and_a_wrong_signature_is_refused() {
    let keys = AuthKeys {
        jwt_jwks_url: Some("http://127.0.0.1:1/jwks.json".into()),
        ..Default::default()
    };
    let v = JwtVerifier::new(&keys).unwrap().unwrap();
    let e = v
        .verify(&with_header(r#"{"alg":"HS256"}"#))
        .await
        .unwrap_err();
    assert!(matches!(e, JwtRefusal::UnsupportedAlg(_)), "{e}");
    assert!(e.to_string().contains("no jwt_secret"), "{e}");
    let e = secret_only()
        .verify(&with_header(r#"{"alg":"HS256","typ":"JWT"}"#))
        .await
        .unwrap_err();
    assert_eq!(e, JwtRefusal::BadSignature);
}

#[test]
fn every_refusal_has_a_counted_reason_and_words() {
    let all = [
        JwtRefusal::Malformed("x"),
        JwtRefusal::UnsupportedAlg("x".into()),
        JwtRefusal::KeyMismatch {
            kid: "k".into(),
            alg: Alg::RS256,
            key_alg: Alg::ES256,
        },
        JwtRefusal::AmbiguousKey {
            alg: Alg::EdDSA,
            keys: 2,
        },
        JwtRefusal::UnknownKeyId {
            kid: Some("k".into()),
            refetch: Refetch::RateLimited {
                wait: Duration::from_secs(12),
            },
        },
        JwtRefusal::BadSignature,
        JwtRefusal::Expired,
        JwtRefusal::NotYetValid,
        JwtRefusal::WrongIssuer,
        JwtRefusal::WrongAudience,
        JwtRefusal::MissingClaim("exp"),
        JwtRefusal::InvalidClaim {
            claim: "scope",
            why: "is odd",
        },
    ];
    let mut reasons: Vec<_> = all.iter().map(JwtRefusal::reason).collect();
    reasons.sort();
    let mut known = stats::REASONS.to_vec();
    known.sort();
    assert_eq!(reasons, known);
    let limited = all[4].to_string();
    assert!(
        limited.contains("\"k\"") && limited.contains("not again for 12 s"),
        "{limited}"
    );
    for r in &all {
        assert!(r.to_string().len() > 10, "{r:?}");
    }
}

#[test]
fn a_long_key_id_is_shown_cut() {
    let e = JwtRefusal::UnknownKeyId {
        kid: Some(shown(&"k".repeat(1000))),
        refetch: Refetch::Fetched,
    };
    assert!(e.to_string().len() < 140, "{e}");
}
