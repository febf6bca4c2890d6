//! The JWK Set (RFC 7517 §5) at `jwt_jwks_url`: fetched, checked, held, and fetched again when
//! a token names a key it lacks — at most once per `jwt_jwks_refresh`, however many tokens do.
//!
//! One fetch at a time, shared: the first request that misses a `kid` starts a fetch on its own
//! task (a client that goes away does not cancel it for the others), and every request that
//! misses while it runs waits for it, bounded by `jwt_jwks_timeout`. A miss when the last fetch
//! began less than `jwt_jwks_refresh` ago fetches nothing and is refused at once. The clock
//! runs from a fetch's start whatever its end, so a key server that fails is not asked more
//! often than one that answers.
//!
//! A fetch is bounded in time (`jwt_jwks_timeout`, connecting included) and size
//! (`jwt_jwks_bytes`: a `Content-Length` over it is refused before the body, and the body is
//! read chunk by chunk and abandoned at the cap, never buffered whole first). No redirect is
//! followed and no compression is asked for. A good fetch replaces every key held, so a key
//! removed from the set stops being accepted at the next fetch.
//!
//! Keys kept, each for one algorithm: RSA of 2048 to 4096 bits for RS256 (RFC 7518 §3.3),
//! EC P-256 for ES256, OKP Ed25519 for EdDSA; a key whose `use` is not `sig`, whose `key_ops`
//! lack `verify`, or whose `alg` names another algorithm is left out, and so are `oct` keys:
//! HS256 takes only `jwt_secret`.

use super::stats::{FetchOutcome, JwtStats};
use super::{Alg, JwtRefusal, Refetch};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::DecodingKey;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One usable key.
#[derive(Debug)]
pub(crate) struct Key {
    pub(crate) kid: Option<String>,
    pub(crate) alg: Alg,
    pub(crate) key: DecodingKey,
}

/// The keys of one good fetch.
#[derive(Debug, Default)]
pub(crate) struct KeySet {
    keys: Vec<Arc<Key>>,
    by_kid: HashMap<String, Vec<Arc<Key>>>,
}

/// What a key set says about a token's (`kid`, `alg`).
pub(crate) enum Lookup {
    Found(Arc<Key>),
    /// The set has no key by that id (or, without an id, none for the algorithm).
    Unknown,
    /// A key by that id exists, for another algorithm.
    Mismatch(Alg),
    /// No `kid`, and several keys for the algorithm.
    Ambiguous(usize),
}

impl KeySet {
    fn new(keys: Vec<Key>) -> KeySet {
        let keys: Vec<Arc<Key>> = keys.into_iter().map(Arc::new).collect();
        let mut by_kid: HashMap<String, Vec<Arc<Key>>> = HashMap::new();
        for k in &keys {
            if let Some(id) = &k.kid {
                by_kid.entry(id.clone()).or_default().push(k.clone());
            }
        }
        KeySet { keys, by_kid }
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    pub(crate) fn find(&self, kid: Option<&str>, alg: Alg) -> Lookup {
        match kid {
            Some(id) => match self.by_kid.get(id) {
                None => Lookup::Unknown,
                Some(ks) => match ks.iter().find(|k| k.alg == alg) {
                    Some(k) => Lookup::Found(k.clone()),
                    None => Lookup::Mismatch(ks[0].alg),
                },
            },
            None => {
                let mut of_alg = self.keys.iter().filter(|k| k.alg == alg);
                match (of_alg.next(), of_alg.count()) {
                    (None, _) => Lookup::Unknown,
                    (Some(k), 0) => Lookup::Found(k.clone()),
                    (Some(_), more) => Lookup::Ambiguous(more + 1),
                }
            }
        }
    }
}

/// The set's keys this server can use; the others are logged and left out.
pub(crate) fn parse_set(body: &[u8]) -> Result<KeySet, String> {
    let doc: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let list = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("not a JWK Set: no \"keys\" array (RFC 7517 §5)")?;
    let mut keys = Vec::with_capacity(list.len());
    for (i, jwk) in list.iter().enumerate() {
        match parse_key(jwk) {
            Ok(k) => keys.push(k),
            Err(why) => tracing::debug!(key = i, kid = ?jwk.get("kid"), "JWKS key left out: {why}"),
        }
    }
    Ok(KeySet::new(keys))
}

fn field<'a>(jwk: &'a Value, name: &str) -> Option<&'a str> {
    jwk.get(name).and_then(Value::as_str)
}

/// The base64url field `name`, decoded.
fn b64_field(jwk: &Value, name: &str) -> Result<Vec<u8>, String> {
    let s = field(jwk, name).ok_or_else(|| format!("no \"{name}\""))?;
    URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|e| format!("\"{name}\" is not base64url: {e}"))
}

fn parse_key(jwk: &Value) -> Result<Key, String> {
    if let Some(u) = jwk.get("use") {
        if u.as_str() != Some("sig") {
            return Err(format!("use {u} is not \"sig\""));
        }
    }
    if let Some(ops) = jwk.get("key_ops") {
        let verify = ops
            .as_array()
            .is_some_and(|a| a.iter().any(|o| o.as_str() == Some("verify")));
        if !verify {
            return Err("key_ops lacks \"verify\"".into());
        }
    }
    let kid = match jwk.get("kid") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("kid is not a string".into()),
    };
    let (alg, key) = match field(jwk, "kty") {
        Some("RSA") => (Alg::RS256, rsa_key(jwk)?),
        Some("EC") => (Alg::ES256, ec_key(jwk)?),
        Some("OKP") => (Alg::EdDSA, okp_key(jwk)?),
        Some("oct") => return Err("an oct key: HS256 takes only jwt_secret".into()),
        other => return Err(format!("kty {other:?} is not RSA, EC or OKP")),
    };
    if let Some(a) = jwk.get("alg") {
        if a.as_str() != Some(alg.name()) {
            return Err(format!("alg {a} is not {}", alg.name()));
        }
    }
    Ok(Key { kid, alg, key })
}

fn rsa_key(jwk: &Value) -> Result<DecodingKey, String> {
    let n = b64_field(jwk, "n")?;
    let e = b64_field(jwk, "e")?;
    let bits = match n.iter().position(|b| *b != 0) {
        Some(i) => (n.len() - i) * 8 - n[i].leading_zeros() as usize,
        None => 0,
    };
    if !(2048..=4096).contains(&bits) {
        return Err(format!(
            "an RSA key of {bits} bits (2048 to 4096 are accepted)"
        ));
    }
    if e.is_empty() || e.len() > 8 {
        return Err("an RSA exponent of more than 64 bits".into());
    }
    Ok(DecodingKey::from_rsa_raw_components(&n, &e))
}

fn ec_key(jwk: &Value) -> Result<DecodingKey, String> {
    if field(jwk, "crv") != Some("P-256") {
        return Err(format!("crv {:?} is not P-256", jwk.get("crv")));
    }
    let (x, y) = (b64_field(jwk, "x")?, b64_field(jwk, "y")?);
    if x.len() != 32 || y.len() != 32 {
        return Err("a P-256 coordinate is not 32 bytes".into());
    }
    DecodingKey::from_ec_components(&URL_SAFE_NO_PAD.encode(x), &URL_SAFE_NO_PAD.encode(y))
        .map_err(|e| e.to_string())
}

fn okp_key(jwk: &Value) -> Result<DecodingKey, String> {
    if field(jwk, "crv") != Some("Ed25519") {
        return Err(format!("crv {:?} is not Ed25519", jwk.get("crv")));
    }
    let x = b64_field(jwk, "x")?;
    if x.len() != 32 {
        return Err("an Ed25519 key is not 32 bytes".into());
    }
    DecodingKey::from_ed_components(&URL_SAFE_NO_PAD.encode(x)).map_err(|e| e.to_string())
}

/// A fetch's result, sent to everyone waiting for it: whether it brought a key set.
type Done = watch::Receiver<Option<bool>>;

struct State {
    keys: Arc<KeySet>,
    /// When the last fetch began.
    last_fetch: Option<Instant>,
    /// The fetch running now.
    running: Option<Done>,
}

/// The key set at one URL, and the fetches that keep it.
pub(crate) struct Jwks {
    url: String,
    client: reqwest013::Client,
    refresh: Duration,
    timeout: Duration,
    max_bytes: u64,
    stats: Arc<JwtStats>,
    state: Mutex<State>,
}

impl Jwks {
    pub(crate) fn new(
        url: String,
        refresh: Duration,
        timeout: Duration,
        max_bytes: u64,
        stats: Arc<JwtStats>,
    ) -> Result<Jwks, String> {
        // reqwest is built without a TLS provider of its own (its default would compile
        // aws-lc-sys): ring, as the S3 client installs it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest013::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest013::redirect::Policy::none())
            .user_agent(concat!("bulkwire/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("auth.jwt_jwks_url: the HTTP client: {e}"))?;
        Ok(Jwks {
            url,
            client,
            refresh,
            timeout,
            max_bytes,
            stats,
            state: Mutex::new(State {
                keys: Arc::default(),
                last_fetch: None,
                running: None,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn keys(&self) -> Arc<KeySet> {
        self.lock().keys.clone()
    }

    /// The key for a token's (`kid`, `alg`), fetching the set again when it lacks it and the
    /// rules above allow.
    pub(crate) async fn key(
        self: &Arc<Self>,
        kid: Option<&str>,
        alg: Alg,
    ) -> Result<Arc<Key>, JwtRefusal> {
        let refetch = match self.keys().find(kid, alg) {
            Lookup::Unknown => match self.join_or_start() {
                Ok(done) => self.wait(done).await,
                Err(wait) => Refetch::RateLimited { wait },
            },
            found => return resolve(found, kid, alg, Refetch::Fetched),
        };
        resolve(self.keys().find(kid, alg), kid, alg, refetch)
    }

    /// Fetches now, unless a fetch is running (then waits for it) or began less than
    /// `jwt_jwks_refresh` ago; true when the set was fetched.
    pub(crate) async fn fetch_now(self: &Arc<Self>) -> bool {
        match self.join_or_start() {
            Ok(done) => self.wait(done).await == Refetch::Fetched,
            Err(_) => false,
        }
    }

    /// The running fetch, or a new one; `Err(time until one may start)` when the last began
    /// less than `refresh` ago.
    fn join_or_start(self: &Arc<Self>) -> Result<Done, Duration> {
        let mut st = self.lock();
        if let Some(done) = &st.running {
            return Ok(done.clone());
        }
        if let Some(t) = st.last_fetch {
            let since = t.elapsed();
            if since < self.refresh {
                return Err(self.refresh - since);
            }
        }
        let (tx, rx) = watch::channel(None);
        st.last_fetch = Some(Instant::now());
        st.running = Some(rx.clone());
        drop(st);
        let me = self.clone();
        tokio::spawn(async move {
            // Cleared whatever happens, a panic included: a fetch that never ends would
            // otherwise make every later miss wait for it.
            let running = Running(&me);
            let ok = me.fetch_and_keep().await;
            drop(running);
            let _ = tx.send(Some(ok));
        });
        Ok(rx)
    }

    /// Waits for a fetch, no longer than it may take.
    async fn wait(&self, mut done: Done) -> Refetch {
        let bound = self.timeout + Duration::from_secs(1);
        match tokio::time::timeout(bound, done.wait_for(Option::is_some)).await {
            Ok(Ok(v)) if *v == Some(true) => Refetch::Fetched,
            _ => Refetch::Failed,
        }
    }

    async fn fetch_and_keep(&self) -> bool {
        let result = match tokio::time::timeout(self.timeout, self.fetch()).await {
            Ok(r) => r,
            Err(_) => Err((
                FetchOutcome::Timeout,
                format!(
                    "no complete answer within auth.jwt_jwks_timeout = {} s",
                    self.timeout.as_secs()
                ),
            )),
        };
        let parsed =
            result.and_then(|body| parse_set(&body).map_err(|e| (FetchOutcome::Invalid, e)));
        match parsed {
            Ok(set) => {
                tracing::info!(url = %self.url, keys = set.len(), "JWKS fetched");
                self.stats.fetched(FetchOutcome::Ok);
                self.stats.set_keys(set.len());
                self.lock().keys = Arc::new(set);
                true
            }
            Err((outcome, why)) => {
                tracing::warn!(url = %self.url, "JWKS fetch failed: {why}; tokens whose key is not held are refused");
                self.stats.fetched(outcome);
                false
            }
        }
    }

    /// The body at the URL, at most `max_bytes` of it.
    async fn fetch(&self) -> Result<Vec<u8>, (FetchOutcome, String)> {
        let transport = |e: reqwest013::Error| {
            let kind = if e.is_timeout() {
                FetchOutcome::Timeout
            } else {
                FetchOutcome::Transport
            };
            (kind, chain(&e))
        };
        let mut resp = self
            .client
            .get(&self.url)
            .header(
                http::header::ACCEPT,
                "application/jwk-set+json, application/json",
            )
            .send()
            .await
            .map_err(transport)?;
        if !resp.status().is_success() {
            return Err((FetchOutcome::Status, format!("answered {}", resp.status())));
        }
        let too_large = || {
            (
                FetchOutcome::TooLarge,
                format!(
                    "longer than auth.jwt_jwks_bytes = {}",
                    bulkwire_units::format_size(self.max_bytes)
                ),
            )
        };
        if resp.content_length().is_some_and(|n| n > self.max_bytes) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(transport)? {
            if (body.len() + chunk.len()) as u64 > self.max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// An error with its causes: reqwest's own text says only "error sending request".
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Clears the running fetch when dropped.
struct Running<'a>(&'a Jwks);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.lock().running = None;
    }
}

fn resolve(
    found: Lookup,
    kid: Option<&str>,
    alg: Alg,
    refetch: Refetch,
) -> Result<Arc<Key>, JwtRefusal> {
    match found {
        Lookup::Found(k) => Ok(k),
        Lookup::Mismatch(key_alg) => Err(JwtRefusal::KeyMismatch {
            kid: super::shown(kid.unwrap_or_default()),
            alg,
            key_alg,
        }),
        Lookup::Ambiguous(n) => Err(JwtRefusal::AmbiguousKey { alg, keys: n }),
        Lookup::Unknown => Err(JwtRefusal::UnknownKeyId {
            kid: kid.map(super::shown),
            refetch,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A 2048-bit modulus (the top bit set) and exponent 65537, base64url.
    fn rsa_n(bits: usize) -> String {
        let mut n = vec![0xffu8; bits / 8];
        n[0] = 0x80;
        URL_SAFE_NO_PAD.encode(n)
    }

    fn b64(len: usize) -> String {
        URL_SAFE_NO_PAD.encode(vec![7u8; len])
    }

    #[test]
    fn usable_keys_are_kept_and_the_others_left_out() {
        let set = json!({"keys": [
            {"kty": "RSA", "kid": "r", "n": rsa_n(2048), "e": "AQAB", "use": "sig", "alg": "RS256"},
            {"kty": "EC", "kid": "e", "crv": "P-256", "x": b64(32), "y": b64(32)},
            {"kty": "OKP", "kid": "o", "crv": "Ed25519", "x": b64(32), "key_ops": ["verify"]},
            {"kty": "RSA", "kid": "small", "n": rsa_n(1024), "e": "AQAB"},
            {"kty": "RSA", "kid": "enc", "n": rsa_n(2048), "e": "AQAB", "use": "enc"},
            {"kty": "RSA", "kid": "ps", "n": rsa_n(2048), "e": "AQAB", "alg": "PS256"},
            {"kty": "EC", "kid": "p384", "crv": "P-384", "x": b64(48), "y": b64(48)},
            {"kty": "OKP", "kid": "x448", "crv": "Ed448", "x": b64(57)},
            {"kty": "oct", "kid": "h", "k": b64(32)},
            {"kty": "OKP", "kid": "sign-only", "crv": "Ed25519", "x": b64(32), "key_ops": ["sign"]},
            {"kty": "RSA", "kid": "no-n", "e": "AQAB"},
            "not an object"
        ]});
        let s = parse_set(set.to_string().as_bytes()).unwrap();
        assert_eq!(s.len(), 3);
        assert!(matches!(s.find(Some("r"), Alg::RS256), Lookup::Found(_)));
        assert!(matches!(s.find(Some("e"), Alg::ES256), Lookup::Found(_)));
        assert!(matches!(s.find(Some("o"), Alg::EdDSA), Lookup::Found(_)));
        assert!(matches!(
            s.find(Some("r"), Alg::ES256),
            Lookup::Mismatch(Alg::RS256)
        ));
        for left_out in [
            "small",
            "enc",
            "ps",
            "p384",
            "x448",
            "h",
            "sign-only",
            "no-n",
        ] {
            assert!(
                matches!(s.find(Some(left_out), Alg::RS256), Lookup::Unknown),
                "{left_out}"
            );
        }
        // Without a kid: the one key of the algorithm, or none.
        assert!(matches!(s.find(None, Alg::EdDSA), Lookup::Found(_)));
        assert!(matches!(s.find(None, Alg::HS256), Lookup::Unknown));
    }

    #[test]
    fn without_a_kid_two_keys_of_the_algorithm_are_ambiguous() {
        let set = json!({"keys": [
            {"kty": "OKP", "kid": "a", "crv": "Ed25519", "x": b64(32)},
            {"kty": "OKP", "crv": "Ed25519", "x": b64(32)},
        ]});
        let s = parse_set(set.to_string().as_bytes()).unwrap();
        assert!(matches!(s.find(None, Alg::EdDSA), Lookup::Ambiguous(2)));
        assert!(matches!(s.find(Some("a"), Alg::EdDSA), Lookup::Found(_)));
    }

    #[test]
    fn a_document_that_is_not_a_jwk_set_is_refused() {
        assert!(parse_set(b"{\"keys\": 3}").unwrap_err().contains("keys"));
        assert!(parse_set(b"<html>").unwrap_err().contains("not JSON"));
    }
}
