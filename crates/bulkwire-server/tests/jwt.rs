//! The JWT verifier (`bulkwire_server::jwt`) against tokens and keys made by an independent
//! library, and against JWKS servers that behave, rotate, hang and flood.
//!
//! - Keys, JWK Sets and tokens come from PyJWT with `cryptography` (PyPI, in a venv under
//!   target/tmp made on first use), through `tests/py/jwt_tokens.py`: RSA, EC P-256 and
//!   Ed25519 keys, one token per case. A missing Python fails these tests, and shows them as
//!   ignored when it was missing at build time (crate bulkwire-runtimes).
//! - The JWKS is served by a small hyper server on 127.0.0.1 that counts its requests, so a
//!   test can say how many fetches happened.
//! - The fetch bounds are checked against raw TCP servers that accept and never answer, or
//!   stream 100 MiB: the tokens there are refused at the key lookup, before any signature, so
//!   they are written by hand (a header naming an unknown `kid`) and need no Python.
//!
//! Durations asserted here are upper bounds with generous slack (a hung fetch must not hold a
//! request beyond its timeout), never speed claims.

use bulkwire_server::jwt::{looks_like_jwt, FetchOutcome, JwtRefusal, JwtVerifier, Refetch};
use bulkwire_server::AuthKeys;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const SECRET: &str = "an-hs256-secret-of-more-than-32-bytes";
const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "bulkwire-test";
/// Tokens with random unknown key ids.
const UNKNOWN: usize = 10_000;
/// The packages the tokens are made with (PyPI).
const PACKAGES: [&str; 2] = ["PyJWT>=2.8,<3", "cryptography>=42"];

// ---------------------------------------------------------------------------
// Tokens from PyJWT

struct Fixture {
    jwks: Value,
    jwks_rotated: Value,
    tokens: HashMap<String, String>,
    unknown: Vec<String>,
}

impl Fixture {
    fn token(&self, name: &str) -> &str {
        self.tokens
            .get(name)
            .unwrap_or_else(|| panic!("jwt_tokens.py made no {name:?}"))
    }
}

fn runs(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Python of a venv under target/tmp with PyJWT and cryptography, made on first use. Pip
/// runs as `python -m pip`: a venv's `bin/pip` script names the interpreter by its absolute
/// path, so one in a target directory copied from elsewhere would install there.
fn python() -> PathBuf {
    bulkwire_runtimes::need(bulkwire_runtimes::Runtime::Python);
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("jwt-venv");
    let py = venv.join("bin/python");
    let has = |py: &Path| runs(Command::new(py).args(["-c", "import jwt, cryptography"]));
    if py.exists() && has(&py) {
        return py;
    }
    if !py.exists() && !runs(Command::new("python3").args(["-m", "venv"]).arg(&venv)) {
        bulkwire_runtimes::missing(
            "python3 -m venv",
            bulkwire_runtimes::Runtime::Python.install(),
        );
    }
    let pip = runs(
        Command::new(&py)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(PACKAGES),
    );
    if !pip || !has(&py) {
        bulkwire_runtimes::missing(
            &format!("{} from PyPI", PACKAGES.join(" and ")),
            "a reachable PyPI",
        );
    }
    py
}

/// Runs `tests/py/jwt_tokens.py` once per test process.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/jwt_tokens.py");
        let out = Command::new(python())
            .arg(script)
            .args([SECRET, ISSUER, AUDIENCE, &UNKNOWN.to_string()])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let j: Value = match stdout.lines().last().map(serde_json::from_str::<Value>) {
            Some(Ok(j)) if out.status.success() && j["ok"] == true => j,
            _ => panic!(
                "jwt_tokens.py failed ({:?}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
        };
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        Fixture {
            jwks: j["jwks"].clone(),
            jwks_rotated: j["jwks_rotated"].clone(),
            tokens: j["tokens"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect(),
            unknown: strings(&j["unknown"]),
        }
    })
}

// ---------------------------------------------------------------------------
// JWKS servers

/// A hyper server on 127.0.0.1 answering every GET with the current JWKS, counting requests.
struct JwksServer {
    url: String,
    body: Arc<Mutex<Bytes>>,
    hits: Arc<AtomicU64>,
}

impl JwksServer {
    async fn start(jwks: &Value) -> JwksServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/.well-known/jwks.json",
            listener.local_addr().unwrap()
        );
        let body = Arc::new(Mutex::new(Bytes::from(jwks.to_string())));
        let hits = Arc::new(AtomicU64::new(0));
        let (b, h) = (body.clone(), hits.clone());
        tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let (b, h) = (b.clone(), h.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |_req| {
                        h.fetch_add(1, SeqCst);
                        let body = b.lock().unwrap().clone();
                        async move {
                            let resp = http::Response::builder()
                                .header("content-type", "application/jwk-set+json")
                                .body(Full::new(body))
                                .unwrap();
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(sock), svc)
                        .await;
                });
            }
        });
        JwksServer { url, body, hits }
    }

    fn serve(&self, jwks: &Value) {
        *self.body.lock().unwrap() = Bytes::from(jwks.to_string());
    }

    fn hits(&self) -> u64 {
        self.hits.load(SeqCst)
    }
}

/// A server that accepts connections and never answers; counts them.
async fn hanging_server() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicU64::new(0));
    let a = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            a.fetch_add(1, SeqCst);
            held.push(sock);
        }
    });
    (url, accepted)
}

/// What a flooding server managed to send before the client went away.
#[derive(Default)]
struct Flood {
    written: AtomicU64,
    completed: AtomicBool,
    connections: AtomicU64,
}

const FLOOD: u64 = 100 << 20;

/// A server that answers 200 and streams 100 MiB of junk, chunked or with a `Content-Length`
/// that says so.
async fn flooding_server(with_length: bool) -> (String, Arc<Flood>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let flood = Arc::new(Flood::default());
    let f = flood.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            f.connections.fetch_add(1, SeqCst);
            let f = f.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let framing = if with_length {
                    format!("Content-Length: {FLOOD}")
                } else {
                    "Transfer-Encoding: chunked".to_string()
                };
                let header = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
                );
                if sock.write_all(header.as_bytes()).await.is_err() {
                    return;
                }
                let junk = vec![b'['; 64 << 10];
                let chunk = if with_length {
                    junk.clone()
                } else {
                    let mut c = format!("{:x}\r\n", junk.len()).into_bytes();
                    c.extend_from_slice(&junk);
                    c.extend_from_slice(b"\r\n");
                    c
                };
                let mut sent = 0;
                while sent < FLOOD {
                    if sock.write_all(&chunk).await.is_err() {
                        return;
                    }
                    sent += junk.len() as u64;
                    f.written.fetch_add(junk.len() as u64, SeqCst);
                }
                if !with_length {
                    let _ = sock.write_all(b"0\r\n\r\n").await;
                }
                f.completed.store(true, SeqCst);
            });
        }
    });
    (url, flood)
}

// ---------------------------------------------------------------------------
// Helpers

fn keys(url: Option<&str>, secret: bool) -> AuthKeys {
    AuthKeys {
        jwt_jwks_url: url.map(str::to_string),
        jwt_secret: secret.then(|| SECRET.to_string()),
        jwt_issuer: Some(ISSUER.into()),
        jwt_audience: Some(AUDIENCE.into()),
        ..AuthKeys::default()
    }
}

async fn start(k: &AuthKeys) -> Arc<JwtVerifier> {
    JwtVerifier::start(k).await.unwrap().expect("a verifier")
}

/// A token whose header names `kid` for RS256; its payload and signature are never read,
/// because the key lookup refuses it first.
fn unknown_kid_token(kid: &str) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!(
        "{}.{}.c2ln",
        b64(&format!(r#"{{"alg":"RS256","typ":"JWT","kid":"{kid}"}}"#)),
        b64(r#"{"sub":"a","exp":4102444800}"#)
    )
}

/// Peak resident memory of this process (VmHWM), bytes.
fn peak_rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

// ---------------------------------------------------------------------------
// Tests

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn tokens_of_every_algorithm_are_accepted_with_their_claims() {
    let f = fixture();
    let srv = JwksServer::start(&f.jwks).await;
    let v = start(&keys(Some(&srv.url), true)).await;
    assert_eq!(srv.hits(), 1, "one fetch at start");

    let c = v.verify(f.token("rs256")).await.unwrap();
    assert_eq!(c.sub, "alice");
    assert_eq!(c.scopes.names(), ["upload", "read"], "openid is ignored");
    assert_eq!(c.max_bytes, Some(1 << 20));
    assert_eq!(c.quota_bytes, Some(5_000_000_000));
    assert_eq!(
        c.content_types,
        Some(vec!["image/*".to_string(), "application/pdf".to_string()])
    );
    let p = c.principal();
    assert_eq!(
        (p.name.as_str(), p.via.kind(), p.everyone),
        ("alice", "jwt", false)
    );
    assert!(p.rules.check_type("image/webp").is_ok() && p.rules.check_type("video/mp4").is_err());
    assert!(p.rules.check_size(1 << 20).is_ok() && p.rules.check_size((1 << 20) + 1).is_err());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        c.expires > now && c.expires <= now + 700,
        "exp {}",
        c.expires
    );

    let c = v.verify(f.token("es256")).await.unwrap();
    assert_eq!(c.sub, "bob");
    assert_eq!(c.scopes.names(), ["delete", "admin"]);
    assert!(c.principal().everyone, "admin reaches every owner");

    let c = v.verify(f.token("eddsa")).await.unwrap();
    assert_eq!(c.sub, "dave");
    assert_eq!(c.scopes.names(), ["read"]);
    assert_eq!(
        (c.max_bytes, c.content_types, c.quota_bytes),
        (None, None, None)
    );

    let c = v.verify(f.token("hs256")).await.unwrap();
    assert_eq!(
        (c.sub.as_str(), c.scopes.names()),
        ("carol", vec!["upload"])
    );

    // jwt_leeway (30 s): 5 s after exp, 10 s before nbf.
    v.verify(f.token("expired_within_leeway")).await.unwrap();
    v.verify(f.token("nbf_within_leeway")).await.unwrap();

    for t in f.tokens.values() {
        assert!(looks_like_jwt(t), "{t}");
    }
    // The keys were cached: six verifications, one fetch.
    assert_eq!(srv.hits(), 1);
    assert_eq!(v.stats().accepted_total(), 6);
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn refusals_say_why() {
    let f = fixture();
    let srv = JwksServer::start(&f.jwks).await;
    let v = start(&keys(Some(&srv.url), true)).await;
    let refused = |name: &'static str| {
        let v = v.clone();
        async move {
            match v.verify(f.token(name)).await {
                Ok(c) => panic!("{name} was accepted: {c:?}"),
                Err(e) => e,
            }
        }
    };
    assert_eq!(refused("expired").await, JwtRefusal::Expired);
    assert_eq!(refused("not_yet_valid").await, JwtRefusal::NotYetValid);
    assert_eq!(refused("wrong_audience").await, JwtRefusal::WrongAudience);
    assert_eq!(refused("wrong_issuer").await, JwtRefusal::WrongIssuer);
    assert_eq!(refused("no_exp").await, JwtRefusal::MissingClaim("exp"));
    assert_eq!(refused("no_sub").await, JwtRefusal::MissingClaim("sub"));
    assert_eq!(refused("tampered").await, JwtRefusal::BadSignature);
    assert_eq!(refused("wrong_key").await, JwtRefusal::BadSignature);
    let e = refused("bad_max_bytes").await;
    assert!(
        matches!(
            e,
            JwtRefusal::InvalidClaim {
                claim: "bulkwire.max_bytes",
                ..
            }
        ),
        "{e:?}"
    );
    let e = refused("alg_none").await;
    assert!(
        matches!(e, JwtRefusal::UnsupportedAlg(_)) && e.to_string().contains("none"),
        "{e}"
    );
    // HS256 "signed" with the RSA public key's PEM, kid naming the RSA key: checked with the
    // secret, never with the key.
    assert_eq!(refused("hs256_rsa_pem").await, JwtRefusal::BadSignature);
    let e = refused("kid_of_other_type").await;
    assert!(matches!(e, JwtRefusal::KeyMismatch { .. }), "{e:?}");
    // The last fetch (at start) is under jwt_jwks_refresh (60 s) old: refused at once.
    let e = refused("unknown_kid").await;
    match &e {
        JwtRefusal::UnknownKeyId {
            kid: Some(k),
            refetch: Refetch::RateLimited { wait },
        } => assert!(k == "stranger" && *wait <= Duration::from_secs(60), "{e:?}"),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("\"stranger\""), "{e}");
    assert_eq!(srv.hits(), 1, "no fetch within jwt_jwks_refresh");

    // Without a secret, the confusion token meets no key at all.
    let jwks_only = start(&keys(Some(&srv.url), false)).await;
    let e = jwks_only
        .verify(f.token("hs256_rsa_pem"))
        .await
        .unwrap_err();
    assert!(matches!(e, JwtRefusal::UnsupportedAlg(_)), "{e:?}");
    // Without a JWKS, RS256 has no key.
    let secret_only = start(&keys(None, true)).await;
    let e = secret_only.verify(f.token("rs256")).await.unwrap_err();
    assert!(matches!(e, JwtRefusal::UnsupportedAlg(_)), "{e:?}");

    for (reason, n) in [("expired", 1), ("bad_signature", 3), ("unknown_kid", 1)] {
        assert_eq!(v.stats().refused_total(reason), n, "{reason}");
    }
    assert_eq!(v.stats().accepted_total(), 0);
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn a_rotated_key_is_accepted_after_one_refetch() {
    let f = fixture();
    let srv = JwksServer::start(&f.jwks).await;
    let k = AuthKeys {
        jwt_jwks_refresh: 2,
        ..keys(Some(&srv.url), false)
    };
    let v = start(&k).await;
    v.verify(f.token("es256")).await.unwrap();
    srv.serve(&f.jwks_rotated);
    // Within jwt_jwks_refresh of the start's fetch: not fetched, refused.
    let e = v.verify(f.token("rotated")).await.unwrap_err();
    assert!(
        matches!(
            e,
            JwtRefusal::UnknownKeyId {
                refetch: Refetch::RateLimited { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(srv.hits(), 1);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let c = v.verify(f.token("rotated")).await.unwrap();
    assert_eq!(c.sub, "alice");
    assert_eq!(srv.hits(), 2, "one refetch");
    // rsa-1 stayed, ec-1 left the set: its tokens are refused now.
    v.verify(f.token("rs256")).await.unwrap();
    v.verify(f.token("rotated")).await.unwrap();
    let e = v.verify(f.token("es256")).await.unwrap_err();
    assert!(matches!(e, JwtRefusal::UnknownKeyId { .. }), "{e:?}");
    assert_eq!(srv.hits(), 2);
    assert_eq!(v.stats().fetches_total(FetchOutcome::Ok), 2);
}

/// 10,000 tokens with random unknown key ids, 100 at once every 50 ms (about 5 s, several
/// refresh intervals of 2 s): the key server sees at most one fetch per interval, and sees one
/// again once an interval has passed.
#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_key_ids_fetch_at_most_once_per_refresh_interval() {
    let f = fixture();
    assert_eq!(f.unknown.len(), UNKNOWN);
    let srv = JwksServer::start(&f.jwks).await;
    let refresh = 2;
    let k = AuthKeys {
        jwt_jwks_refresh: refresh,
        ..keys(Some(&srv.url), false)
    };
    let began = Instant::now();
    let v = start(&k).await;
    let mut fetched_again = 0;
    for batch in f.unknown.chunks(100) {
        let checks = batch.iter().map(|t| {
            let v = v.clone();
            let t = t.clone();
            tokio::spawn(async move { v.verify(&t).await })
        });
        for r in futures_util::future::join_all(checks).await {
            match r.unwrap() {
                Err(JwtRefusal::UnknownKeyId { refetch, .. }) => {
                    fetched_again += u32::from(refetch == Refetch::Fetched)
                }
                other => panic!("{other:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = began.elapsed().as_secs_f64();
    let hits = srv.hits();
    let most = (elapsed / refresh as f64).floor() as u64 + 1;
    assert!(
        hits <= most,
        "{hits} fetches in {elapsed:.1} s with jwt_jwks_refresh = {refresh} s (at most {most})"
    );
    assert!(hits >= 2, "no refetch in {elapsed:.1} s: {hits} fetch(es)");
    assert!(fetched_again >= 1);
    assert_eq!(v.stats().refused_total("unknown_kid"), UNKNOWN as u64);
    assert_eq!(v.stats().fetches_total(FetchOutcome::Ok), hits);
}

/// A JWKS server that accepts and never answers: the start gives up after jwt_jwks_timeout, and
/// requests that find an unknown kid share one fetch and wait no longer than it may take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_jwks_server_holds_no_request_beyond_the_timeout() {
    let (url, accepted) = hanging_server().await;
    let timeout = Duration::from_secs(1);
    let bound = timeout + Duration::from_secs(2);
    let k = AuthKeys {
        jwt_jwks_timeout: timeout.as_secs(),
        ..keys(Some(&url), false)
    };

    let t = Instant::now();
    let v = start(&k).await;
    assert!(t.elapsed() <= bound, "start took {:?}", t.elapsed());
    assert_eq!(accepted.load(SeqCst), 1);
    assert_eq!(v.stats().fetches_total(FetchOutcome::Timeout), 1);
    // No key held, and the last fetch began within jwt_jwks_refresh: refused at once.
    let e = v.verify(&unknown_kid_token("k1")).await.unwrap_err();
    assert!(
        matches!(
            e,
            JwtRefusal::UnknownKeyId {
                refetch: Refetch::RateLimited { .. },
                ..
            }
        ),
        "{e:?}"
    );

    // A verifier that has not fetched yet: twenty requests at once, one fetch, each refused
    // within the bound.
    let v = Arc::new(JwtVerifier::new(&k).unwrap().unwrap());
    let t = Instant::now();
    let checks = (0..20).map(|i| {
        let v = v.clone();
        tokio::spawn(async move {
            let r = v.verify(&unknown_kid_token(&format!("k{i}"))).await;
            (r, Instant::now())
        })
    });
    for r in futures_util::future::join_all(checks).await {
        let (r, at) = r.unwrap();
        assert!(at - t <= bound, "a request waited {:?}", at - t);
        match r {
            Err(JwtRefusal::UnknownKeyId {
                refetch: Refetch::Failed,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        accepted.load(SeqCst),
        2,
        "one more connection for all twenty"
    );
    assert_eq!(v.stats().fetches_total(FetchOutcome::Timeout), 1);
}

/// A JWKS server that streams 100 MiB: the fetch stops at jwt_jwks_bytes (1 MiB) as the body
/// arrives (chunked), or at once when the Content-Length says so; the server could not send
/// it all, and this process's peak memory did not grow by anything like it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_server_sending_100_mib_is_cut_at_the_size_cap() {
    let before = peak_rss();
    for with_length in [false, true] {
        let (url, flood) = flooding_server(with_length).await;
        let k = keys(Some(&url), false);
        let bound = Duration::from_secs(k.jwt_jwks_timeout) + Duration::from_secs(2);
        let v = Arc::new(JwtVerifier::new(&k).unwrap().unwrap());
        let t = Instant::now();
        let e = v.verify(&unknown_kid_token("k")).await.unwrap_err();
        assert!(t.elapsed() <= bound, "took {:?}", t.elapsed());
        assert!(
            matches!(
                e,
                JwtRefusal::UnknownKeyId {
                    refetch: Refetch::Failed,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            v.stats().fetches_total(FetchOutcome::TooLarge),
            1,
            "with_length {with_length}"
        );
        // Had the client read on, the server would have finished by now (loopback moves
        // 100 MiB in well under a second); it has gone, and the server's writes fail.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!flood.completed.load(SeqCst), "the client read all 100 MiB");
        let written = flood.written.load(SeqCst);
        assert!(
            written < FLOOD / 2,
            "{written} bytes written before the client left"
        );
    }
    let grown = peak_rss().saturating_sub(before);
    assert!(grown < 48 << 20, "peak memory grew by {grown} bytes");
}
