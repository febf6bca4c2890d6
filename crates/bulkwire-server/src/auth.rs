//! Credentials for `/v1`, `/soap` and XML-RPC logins:
//! `Authorization: Bearer TOKEN` (RFC 6750 §2.1) or `Basic` (RFC 7617), and
//! the username/password params of an XML-RPC call.
//!
//! Credentials live in the metadata store, so every node accepts the same
//! ones (`bulkwire token …`, `bulkwire user …`):
//! - a token is kept as its SHA-256 digest. Tokens are 256 random bits, so
//!   a fast hash is enough (nobody can search that space) and the check is
//!   one indexed lookup;
//! - a password is kept as an Argon2id hash in PHC string format (RFC 9106;
//!   the `argon2` crate's defaults: 19 MiB, 2 passes). People choose weak
//!   passwords, so a stolen database must make guessing slow.
//!
//! Argon2 is slow on purpose, and XML-RPC clients send the password with
//! every call, so a login that passed is remembered for
//! [`Limits::auth_cache_ms`](crate::Limits::auth_cache_ms) under a keyed
//! digest of name and password (never the password itself), and at most
//! [`Limits::password_checks`](crate::Limits::password_checks) hashes run
//! at once (each holds 19 MiB). Tokens are remembered the same way, so a
//! busy node asks the store once per token per period; a revocation takes
//! effect within that period. Failures are never remembered.
//!
//! `--token`/`--user` from the command line or TOML are accepted too, held
//! in memory only as digests (they are never written to the store: they
//! stop working when the flag is removed).

use crate::config::{Limits, User};
use crate::store::{token_id, MetaError, MetaStore, UserSet};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::Engine;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The name bad bearer tokens are counted under (per address): a name no
/// user can have (it holds a NUL).
const BEARER: &[u8] = b"\0bearer";

/// The file in the data directory where releases before the metadata
/// store kept the generated token's digest; imported at start.
pub const TOKEN_FILE: &str = "token.sha256";

type Digest32 = [u8; 32];

fn digest(b: &[u8]) -> Digest32 {
    Sha256::digest(b).into()
}

/// Equality without an early exit.
fn same(a: &Digest32, b: &Digest32) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A new random token: 256 bits as 64 hex digits.
pub fn new_token() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// The digest under which a token is stored.
pub fn token_digest(token: &str) -> Digest32 {
    digest(token.as_bytes())
}

/// An Argon2id hash of `password` in PHC string format, with a random salt.
pub fn hash_password(password: &[u8]) -> Result<String, String> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>()).map_err(|e| e.to_string())?;
    Argon2::default()
        .hash_password(password, &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("hashing the password: {e}"))
}

/// True when `password` matches a stored PHC hash (false for a hash that
/// does not parse: never an error a client could tell apart).
fn verify_password(hash: &str, password: &[u8]) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| Argon2::default().verify_password(password, &h).is_ok())
}

/// Logins that passed, by keyed digest, until they expire. Bounded: when
/// full, expired entries go, and if none had, everything goes (the cost is
/// one more store lookup or hash per credential, never a wrong answer).
struct Cache {
    key: [u8; 32],
    ttl: Duration,
    cap: usize,
    map: Mutex<HashMap<Digest32, Instant>>,
}

impl Cache {
    fn new(ttl: Duration, cap: usize) -> Cache {
        Cache {
            key: rand::random(),
            ttl,
            cap,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// A digest of the parts under this process's random key, each part
    /// length-prefixed so that ("ab", "c") and ("a", "bc") differ.
    fn key(&self, parts: &[&[u8]]) -> Digest32 {
        let mut h = Sha256::new();
        h.update(self.key);
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p);
        }
        h.finalize().into()
    }

    fn hit(&self, k: &Digest32) -> bool {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(k).is_some_and(|t| t.elapsed() < self.ttl)
    }

    fn put(&self, k: Digest32) {
        if self.ttl.is_zero() || self.cap == 0 {
            return;
        }
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.cap {
            let ttl = self.ttl;
            map.retain(|_, t| t.elapsed() < ttl);
            if map.len() >= self.cap {
                map.clear();
            }
        }
        map.insert(k, Instant::now());
    }
}

/// Why a request's credentials were refused. Each answer says which
/// schemes are accepted and where a credential comes from: a 401 is often
/// a new user's first contact with the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization` header.
    Missing,
    /// A scheme other than Bearer and Basic.
    Scheme(String),
    /// A bearer token the store does not know (or revoked).
    BadToken,
    /// Basic credentials that are not base64 of `NAME:PASSWORD`.
    BadBasicSyntax,
    /// A wrong user name or password (never said which).
    BadPassword,
    /// Too many failures from this address for this name (429).
    Throttled(crate::throttle::Throttled),
}

impl Refusal {
    pub fn message(&self) -> String {
        const GET: &str = "a token is printed by `bulkwire serve` at its first start or made by \
                           `bulkwire token create`; a user by `bulkwire user add NAME`";
        match self {
            Refusal::Missing => format!(
                "no credentials: send `Authorization: Bearer TOKEN` or HTTP Basic \
                 (a user's name and password); {GET}"
            ),
            Refusal::Scheme(s) => format!(
                "the Authorization scheme {s:?} is not accepted here: send Bearer TOKEN or \
                 Basic; {GET}"
            ),
            Refusal::BadToken => "bearer token not accepted: this server's store does not know it \
                 or it was revoked (`bulkwire token list` shows the store's tokens; \
                 `bulkwire token create`, run with this server's --data or --meta, makes one)"
                .into(),
            Refusal::BadBasicSyntax => {
                "HTTP Basic credentials must be base64 of NAME:PASSWORD (RFC 7617)".into()
            }
            Refusal::BadPassword => {
                "HTTP Basic: wrong user name or password (`bulkwire user list` \
                 shows the users, `bulkwire user passwd NAME` sets a password)"
                    .into()
            }
            Refusal::Throttled(t) => t.error().message,
        }
    }

    /// The 401 answer (429 for a throttled one).
    pub fn error(&self) -> crate::ApiError {
        match self {
            Refusal::Throttled(t) => t.error(),
            _ => crate::ApiError::new(crate::Kind::Unauthorized, self.message()),
        }
    }
}

/// The accepted credentials: the store's, plus those given at start-up.
pub struct Auth {
    /// Digests of `--token` values.
    tokens: Vec<Digest32>,
    /// `--user` values: (name, digest of password).
    users: Vec<(String, Digest32)>,
    cache: Cache,
    /// Argon2 verifications running at once.
    hashing: std::sync::Arc<Semaphore>,
    /// Set once a user is known to exist (configured or in the store): a
    /// failed XML-RPC login on a server without users says how to make one.
    users_seen: std::sync::atomic::AtomicBool,
    /// Failed logins by address and name (`crate::throttle`).
    pub throttle: crate::throttle::Throttle,
    /// Argon2 verifications run (`bulkwire_password_checks_total`).
    pub password_checks: std::sync::atomic::AtomicU64,
}

impl Auth {
    /// From configured tokens and users (in memory) and the store. Imports
    /// a `token.sha256` left by an earlier release. When neither the
    /// configuration nor the store has any credential, creates a token in
    /// the store and returns it (to print once).
    pub async fn start(
        meta: &dyn MetaStore,
        data: &Path,
        tokens: &[String],
        users: &[User],
        limits: &Limits,
    ) -> Result<(Auth, Option<String>), String> {
        let auth = Auth {
            tokens: tokens.iter().map(|t| token_digest(t)).collect(),
            users: users
                .iter()
                .map(|u| (u.name.clone(), digest(u.password.as_bytes())))
                .collect(),
            cache: Cache::new(
                Duration::from_millis(limits.auth_cache_ms),
                limits.auth_cache_entries,
            ),
            hashing: std::sync::Arc::new(Semaphore::new(limits.password_checks)),
            users_seen: (!users.is_empty()).into(),
            throttle: crate::throttle::Throttle::new(limits),
            password_checks: 0.into(),
        };
        import_token_file(meta, data).await?;
        if !auth.tokens.is_empty() || !auth.users.is_empty() {
            return Ok((auth, None));
        }
        let stored = meta.tokens().await.map_err(|e| e.to_string())?;
        if !stored.is_empty() || !meta.users().await.map_err(|e| e.to_string())?.is_empty() {
            return Ok((auth, None));
        }
        let token = new_token();
        meta.token_add(token_digest(&token), "generated at first start".into())
            .await
            .map_err(|e| e.to_string())?;
        Ok((auth, Some(token)))
    }

    /// Whether the `Authorization` header value is accepted; an error when
    /// the store cannot say.
    pub async fn check(
        &self,
        meta: &dyn MetaStore,
        header: Option<&[u8]>,
    ) -> Result<bool, MetaError> {
        Ok(self.identify(meta, header).await?.is_some())
    }

    /// Who the `Authorization` header names, if it is accepted:
    /// `token:ID` (the token's id, never the token) or `user:NAME`. Open
    /// resumable uploads are counted per identity.
    pub async fn identify(
        &self,
        meta: &dyn MetaStore,
        header: Option<&[u8]>,
    ) -> Result<Option<String>, MetaError> {
        Ok(self.verdict(meta, header, None).await?.ok())
    }

    /// [`Auth::identify`], with a refusal as the 401 to answer and a store
    /// that cannot say as its 503/500.
    pub async fn authenticate(
        &self,
        meta: &dyn MetaStore,
        header: Option<&[u8]>,
        client: Option<IpAddr>,
    ) -> Result<String, crate::ApiError> {
        match self.verdict(meta, header, client).await {
            Ok(Ok(who)) => Ok(who),
            Ok(Err(r)) => Err(r.error()),
            Err(e) => Err(e.into()),
        }
    }

    /// Who the header names, or why it is refused.
    async fn verdict(
        &self,
        meta: &dyn MetaStore,
        header: Option<&[u8]>,
        client: Option<IpAddr>,
    ) -> Result<Result<String, Refusal>, MetaError> {
        let Some(header) = header else {
            return Ok(Err(Refusal::Missing));
        };
        let Some((scheme, cred)) = split_scheme(header) else {
            // A scheme with nothing after it.
            let s = header.trim_ascii();
            return Ok(Err(if s.eq_ignore_ascii_case(b"bearer") {
                Refusal::BadToken
            } else if s.eq_ignore_ascii_case(b"basic") {
                Refusal::BadBasicSyntax
            } else {
                Refusal::Scheme(String::from_utf8_lossy(s).chars().take(32).collect())
            }));
        };
        if scheme.eq_ignore_ascii_case(b"bearer") {
            let attempt = match self.throttle.check(client, BEARER) {
                Ok(a) => a,
                Err(t) => return Ok(Err(Refusal::Throttled(t))),
            };
            if !self.check_token(meta, cred).await? {
                attempt.failed();
                return Ok(Err(Refusal::BadToken));
            }
            drop(attempt);
            Ok(Ok(format!("token:{}", token_id(&digest(cred)))))
        } else if scheme.eq_ignore_ascii_case(b"basic") {
            let Some((name, password)) = basic(cred) else {
                return Ok(Err(Refusal::BadBasicSyntax));
            };
            let r = self.login(meta, &name, &password, client).await?;
            Ok(r.map(|()| format!("user:{name}")))
        } else {
            let s = String::from_utf8_lossy(scheme);
            Ok(Err(Refusal::Scheme(s.chars().take(32).collect())))
        }
    }

    /// False when no user exists at all, neither configured nor in the
    /// store (asked until one is seen, then never again: users are rarely
    /// all removed, and a server under a guessing attack must not list
    /// them per failure).
    pub async fn any_user(&self, meta: &dyn MetaStore) -> Result<bool, MetaError> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.users_seen.load(Relaxed) {
            return Ok(true);
        }
        let some = !meta.users().await?.is_empty();
        if some {
            self.users_seen.store(true, Relaxed);
        }
        Ok(some)
    }

    async fn check_token(&self, meta: &dyn MetaStore, token: &[u8]) -> Result<bool, MetaError> {
        let d = digest(token);
        if self.tokens.iter().fold(false, |ok, t| ok | same(t, &d)) {
            return Ok(true);
        }
        let k = self.cache.key(&[b"token", &d]);
        if self.cache.hit(&k) {
            return Ok(true);
        }
        let ok = meta.token_known(d).await?;
        if ok {
            self.cache.put(k);
        }
        Ok(ok)
    }

    /// A login with a name and password (Basic, XML-RPC, SOAP), throttled
    /// per address and name before the password is checked
    /// (`crate::throttle`).
    pub async fn login(
        &self,
        meta: &dyn MetaStore,
        name: &str,
        password: &[u8],
        client: Option<IpAddr>,
    ) -> Result<Result<(), Refusal>, MetaError> {
        let attempt = match self.throttle.check(client, name.as_bytes()) {
            Ok(a) => a,
            Err(t) => return Ok(Err(Refusal::Throttled(t))),
        };
        if self.check_user(meta, name, password).await? {
            attempt.passed();
            Ok(Ok(()))
        } else {
            attempt.failed();
            Ok(Err(Refusal::BadPassword))
        }
    }

    /// Checks a user's name and password, unthrottled (see [`Auth::login`]).
    pub async fn check_user(
        &self,
        meta: &dyn MetaStore,
        name: &str,
        password: &[u8],
    ) -> Result<bool, MetaError> {
        let d = digest(password);
        let configured = self
            .users
            .iter()
            .fold(false, |ok, (n, p)| ok | (n == name && same(p, &d)));
        if configured {
            return Ok(true);
        }
        let k = self.cache.key(&[b"user", name.as_bytes(), password]);
        if self.cache.hit(&k) {
            return Ok(true);
        }
        let Some(hash) = meta.user_hash(name).await? else {
            return Ok(false);
        };
        self.users_seen
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let ok = self.verify(hash, password.to_vec()).await;
        if ok {
            self.cache.put(k);
        }
        Ok(ok)
    }

    /// One Argon2 verification on the blocking pool, within
    /// `password_checks`.
    async fn verify(&self, hash: String, password: Vec<u8>) -> bool {
        let Ok(permit) = self.hashing.clone().acquire_owned().await else {
            return false;
        };
        self.password_checks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The permit goes with the hash: should this request be dropped
        // mid-wait, the hash still counts until it ends.
        tokio::task::spawn_blocking(move || {
            let ok = verify_password(&hash, &password);
            drop(permit);
            ok
        })
        .await
        .unwrap_or(false)
    }
}

impl Auth {
    /// Its counters for `/metrics`: Argon2 runs, failed and throttled
    /// logins, the throttle table.
    pub fn render_metrics(&self, o: &mut String) {
        use crate::metrics::{counter, gauge};
        use std::sync::atomic::Ordering::Relaxed;
        let t = &self.throttle.counts;
        counter(
            o,
            "bulkwire_password_checks_total",
            "Argon2 password verifications run.",
            self.password_checks.load(Relaxed),
        );
        counter(
            o,
            "bulkwire_login_failures_total",
            "Failed logins (wrong password, unknown user or token).",
            t.failures.load(Relaxed),
        );
        counter(
            o,
            "bulkwire_logins_throttled_total",
            "Logins refused with 429 before any password check.",
            t.throttled.load(Relaxed),
        );
        gauge(
            o,
            "bulkwire_login_table_entries",
            "Addresses and names whose failed logins are remembered.",
            self.throttle.len() as i64,
        );
        counter(
            o,
            "bulkwire_login_table_evicted_total",
            "Entries dropped to keep the login table within login_table_entries.",
            t.evicted.load(Relaxed),
        );
    }
}

/// Stores the digests of a `token.sha256` file written by a release
/// before credentials moved into the metadata store, then renames it so
/// that this happens once.
async fn import_token_file(meta: &dyn MetaStore, data: &Path) -> Result<(), String> {
    let path = data.join(TOKEN_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let known = meta.tokens().await.map_err(|e| e.to_string())?;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut d = [0u8; 32];
        hex::decode_to_slice(line, &mut d)
            .map_err(|e| format!("{}: bad token digest: {e}", path.display()))?;
        if !known.iter().any(|t| t.id == crate::store::token_id(&d)) {
            meta.token_add(d, format!("imported from {TOKEN_FILE}"))
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    let done = path.with_extension("sha256.imported");
    std::fs::rename(&path, &done).map_err(|e| format!("{}: {e}", path.display()))
}

/// Adds or changes a user in the store (the CLI's `user add|passwd` and
/// tests); `false` when `mode`'s condition failed.
pub async fn set_user(
    meta: &dyn MetaStore,
    name: &str,
    password: &[u8],
    mode: UserSet,
) -> Result<bool, String> {
    if name.is_empty() || name.contains(':') {
        return Err("a user name must be non-empty and without ':' (RFC 7617 §2)".into());
    }
    if password.is_empty() {
        return Err("the password is empty".into());
    }
    let password = password.to_vec();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| e.to_string())??;
    meta.user_set(name, &hash, mode)
        .await
        .map_err(|e| e.to_string())
}

/// `scheme SP credentials`, with surrounding whitespace trimmed.
fn split_scheme(h: &[u8]) -> Option<(&[u8], &[u8])> {
    let sp = h.iter().position(|&b| b == b' ')?;
    let cred = h[sp + 1..].trim_ascii();
    (!cred.is_empty()).then_some((&h[..sp], cred))
}

/// The name and password of Basic credentials.
fn basic(cred: &[u8]) -> Option<(String, Vec<u8>)> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(cred)
        .ok()?;
    let colon = raw.iter().position(|&b| b == b':')?;
    let name = std::str::from_utf8(&raw[..colon]).ok()?.to_string();
    Some((name, raw[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteMeta;

    fn basic_header(s: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
        .into_bytes()
    }

    fn meta(d: &Path) -> SqliteMeta {
        SqliteMeta::open(&d.join("m.sqlite")).unwrap()
    }

    #[tokio::test]
    async fn configured_bearer_and_basic() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let users = [User::parse("bob:s3:cret").unwrap()];
        let l = Limits::default();
        let (a, new) = Auth::start(&m, d.path(), &["tok".into()], &users, &l)
            .await
            .unwrap();
        assert!(new.is_none());
        assert!(m.tokens().await.unwrap().is_empty(), "flags are not stored");
        for (h, want) in [
            (&b"Bearer tok"[..], true),
            (b"bearer  tok ", true),
            (b"Bearer tok2", false),
            (b"Bearer", false),
            (&basic_header("bob:s3:cret"), true),
            (&basic_header("bob:s3"), false),
            (&basic_header("eve:s3:cret"), false),
            (b"Basic !!!", false),
            (b"Digest x", false),
        ] {
            let got = a.check(&m, Some(h)).await.unwrap();
            assert_eq!(got, want, "{}", String::from_utf8_lossy(h));
        }
        assert!(!a.check(&m, None).await.unwrap());
    }

    #[tokio::test]
    async fn stored_tokens_and_users_with_revocation() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let l = Limits {
            auth_cache_ms: 0,
            ..Limits::default()
        };
        let t = new_token();
        let info = m.token_add(token_digest(&t), "x".into()).await.unwrap();
        assert!(set_user(&m, "carol", b"pw pw", UserSet::Create)
            .await
            .unwrap());
        let hash = m.user_hash("carol").await.unwrap().unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(!hash.contains("pw pw"));
        let (a, new) = Auth::start(&m, d.path(), &[], &[], &l).await.unwrap();
        assert!(new.is_none(), "the store has credentials");
        let bearer = format!("Bearer {t}");
        assert!(a.check(&m, Some(bearer.as_bytes())).await.unwrap());
        assert!(a.check_user(&m, "carol", b"pw pw").await.unwrap());
        assert!(!a.check_user(&m, "carol", b"pw").await.unwrap());
        assert!(!a.check_user(&m, "dave", b"pw pw").await.unwrap());
        // Without a cache, revocation and removal act at once.
        m.token_revoke(&info.id).await.unwrap();
        m.user_remove("carol").await.unwrap();
        assert!(!a.check(&m, Some(bearer.as_bytes())).await.unwrap());
        assert!(!a.check_user(&m, "carol", b"pw pw").await.unwrap());
    }

    #[tokio::test]
    async fn a_passed_login_is_remembered_for_the_cache_period_only() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let l = Limits {
            auth_cache_ms: 300,
            ..Limits::default()
        };
        set_user(&m, "erin", b"secret", UserSet::Create)
            .await
            .unwrap();
        let (a, _) = Auth::start(&m, d.path(), &[], &[], &l).await.unwrap();
        assert!(a.check_user(&m, "erin", b"secret").await.unwrap());
        m.user_remove("erin").await.unwrap();
        assert!(a.check_user(&m, "erin", b"secret").await.unwrap(), "cached");
        assert!(
            !a.check_user(&m, "erin", b"other").await.unwrap(),
            "not a wrong one"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            !a.check_user(&m, "erin", b"secret").await.unwrap(),
            "expired"
        );
    }

    #[tokio::test]
    async fn generated_token_is_stored_hashed_and_made_once() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let l = Limits::default();
        let (a, tok) = Auth::start(&m, d.path(), &[], &[], &l).await.unwrap();
        let tok = tok.expect("a token on first start");
        let stored = m.tokens().await.unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].id, crate::store::token_id(&token_digest(&tok)));
        assert!(a
            .check(&m, Some(format!("Bearer {tok}").as_bytes()))
            .await
            .unwrap());
        let (_, again) = Auth::start(&m, d.path(), &[], &[], &l).await.unwrap();
        assert!(again.is_none());
    }

    #[tokio::test]
    async fn a_token_file_of_an_earlier_release_is_imported_once() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let tok = new_token();
        let line = format!("{}\n", hex::encode(token_digest(&tok)));
        std::fs::write(d.path().join(TOKEN_FILE), line).unwrap();
        let l = Limits::default();
        let (a, new) = Auth::start(&m, d.path(), &[], &[], &l).await.unwrap();
        assert!(new.is_none(), "the imported token counts");
        assert!(a
            .check(&m, Some(format!("Bearer {tok}").as_bytes()))
            .await
            .unwrap());
        assert!(!d.path().join(TOKEN_FILE).exists());
        Auth::start(&m, d.path(), &[], &[], &l).await.unwrap();
        assert_eq!(m.tokens().await.unwrap().len(), 1);
    }

    #[test]
    fn cache_keys_separate_their_parts() {
        let c = Cache::new(Duration::from_secs(1), 2);
        assert_ne!(c.key(&[b"ab", b"c"]), c.key(&[b"a", b"bc"]));
        for i in 0..10u8 {
            c.put(c.key(&[&[i]]));
        }
        assert!(c.map.lock().unwrap().len() <= 2, "bounded");
    }
}
