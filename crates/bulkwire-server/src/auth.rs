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
//!
//! Every accepted credential becomes a [`Principal`] (`crate::principal`):
//! a stored token its owner and scopes (refused past its expiry; its last
//! use recorded to the minute), a user their name and role, a JWT
//! (`crate::jwt`) its `sub`, `scope` and limits, a flag `admin`. The
//! principal carries its quota, resolved here: a JWT's
//! `bulkwire.quota_bytes`, else the owner's own (`bulkwire user quota`),
//! else its role's (`[limits] quota_bytes`, `quota_items`). A cached login
//! keeps its principal, so a role or quota change takes effect within
//! `auth_cache_ms` too. Failed logins are throttled (`crate::throttle`);
//! a JWT, which is no guess at a secret, never is.

use crate::principal::{Principal, Role, Scopes, Via};
use crate::store::{MetaError, MetaStore, NewToken, Quota, UserSet};
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

/// Logins that passed, by keyed digest, with the principal they named,
/// until they expire. Bounded: when full, expired entries go, and if none
/// had, everything goes (the cost is one more store lookup or hash per
/// credential, never a wrong answer).
struct Cache {
    key: [u8; 32],
    ttl: Duration,
    cap: usize,
    map: Mutex<HashMap<Digest32, (Instant, Principal)>>,
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

    fn hit(&self, k: &Digest32) -> Option<Principal> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(k)
            .filter(|(t, _)| Instant::now() < *t)
            .map(|(_, p)| p.clone())
    }

    /// Remembers `p` under `k` for the cache's time, or less when the
    /// credential expires sooner (`left` seconds).
    fn put(&self, k: Digest32, p: Principal, left: Option<i64>) {
        if self.ttl.is_zero() || self.cap == 0 {
            return;
        }
        let ttl = match left {
            Some(s) => self.ttl.min(Duration::from_secs(s.max(0) as u64)),
            None => self.ttl,
        };
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.cap {
            let now = Instant::now();
            map.retain(|_, (t, _)| now < *t);
            if map.len() >= self.cap {
                map.clear();
            }
        }
        map.insert(k, (Instant::now() + ttl, p));
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
    /// A stored token past its expiry (seconds since the epoch).
    Expired(i64),
    /// A JWT refused, and why (`crate::jwt::JwtRefusal`'s words).
    Jwt(String),
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
            Refusal::Expired(at) => format!(
                "bearer token expired at {} (`bulkwire token create --ttl` makes a new one)",
                httpdate::fmt_http_date(
                    std::time::UNIX_EPOCH + Duration::from_secs((*at).max(0) as u64)
                )
            ),
            Refusal::Jwt(why) => format!("JWT refused: {why}"),
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

/// The accepted credentials: the store's, plus those given at start-up,
/// plus the application's JWTs when configured.
pub struct Auth {
    /// Digests of `--token` values: principal `admin`, scope `admin`.
    tokens: Vec<Digest32>,
    /// `--user` values: (name, digest of password); role `admin`.
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
    /// The application's JWTs (`crate::jwt`), when `[auth]` names a key.
    pub jwt: Option<std::sync::Arc<crate::jwt::JwtVerifier>>,
    /// Quotas by role (`[limits] quota_bytes`, `quota_items`).
    quota_bytes: crate::config::PerRole,
    quota_items: crate::config::PerRole,
}

/// The user name under which an XML-RPC or SOAP call gives a JWT as its
/// password (a WordPress-compatible client handed a short-lived credential).
pub const JWT_USER: &str = "jwt";

impl Auth {
    /// From configured tokens and users (in memory), the store and the
    /// `[auth]` keys (the JWKS is fetched once here). Imports a
    /// `token.sha256` left by an earlier release. When neither the
    /// configuration nor the store has any credential, creates a token in
    /// the store (owner and scope `admin`) and returns it (to print once).
    pub async fn start(
        meta: &dyn MetaStore,
        config: &crate::Config,
    ) -> Result<(Auth, Option<String>), String> {
        let limits = &config.limits;
        let auth = Auth {
            tokens: config.tokens.iter().map(|t| token_digest(t)).collect(),
            users: config
                .users
                .iter()
                .map(|u| (u.name.clone(), digest(u.password.as_bytes())))
                .collect(),
            cache: Cache::new(
                Duration::from_millis(limits.auth_cache_ms),
                limits.auth_cache_entries,
            ),
            hashing: std::sync::Arc::new(Semaphore::new(limits.password_checks)),
            users_seen: (!config.users.is_empty()).into(),
            throttle: crate::throttle::Throttle::new(limits),
            password_checks: 0.into(),
            jwt: crate::jwt::JwtVerifier::start(&config.auth).await?,
            quota_bytes: limits.quota_bytes,
            quota_items: limits.quota_items,
        };
        import_token_file(meta, &config.data).await?;
        if !auth.tokens.is_empty() || !auth.users.is_empty() {
            return Ok((auth, None));
        }
        let stored = meta.tokens().await.map_err(|e| e.to_string())?;
        if !stored.is_empty() || !meta.users().await.map_err(|e| e.to_string())?.is_empty() {
            return Ok((auth, None));
        }
        let token = new_token();
        meta.token_add(
            token_digest(&token),
            admin_token("generated at first start"),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok((auth, Some(token)))
    }

    /// Who the `Authorization` header names, if it is accepted.
    pub async fn identify(
        &self,
        meta: &dyn MetaStore,
        header: Option<&[u8]>,
    ) -> Result<Option<Principal>, MetaError> {
        Ok(self.verdict(meta, header, None).await?.ok())
    }

    /// Who the `Authorization` header names; a refusal as the 401 (429) to
    /// answer, a store that cannot say as its 503/500.
    pub async fn authenticate(
        &self,
        meta: &dyn MetaStore,
        header: Option<&[u8]>,
        client: Option<IpAddr>,
    ) -> Result<Principal, crate::ApiError> {
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
    ) -> Result<Result<Principal, Refusal>, MetaError> {
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
            if let Some((jwt, token)) = self.as_jwt(cred) {
                return self.jwt_principal(meta, jwt, token).await;
            }
            let attempt = match self.throttle.check_token(client, BEARER) {
                Ok(a) => a,
                Err(t) => return Ok(Err(Refusal::Throttled(t))),
            };
            let r = self.token(meta, cred).await?;
            match &r {
                Err(_) => attempt.failed(),
                Ok(_) => drop(attempt),
            }
            Ok(r)
        } else if scheme.eq_ignore_ascii_case(b"basic") {
            let Some((name, password)) = basic(cred) else {
                return Ok(Err(Refusal::BadBasicSyntax));
            };
            self.login(meta, &name, &password, client).await
        } else {
            let s = String::from_utf8_lossy(scheme);
            Ok(Err(Refusal::Scheme(s.chars().take(32).collect())))
        }
    }

    /// The application's JWT in a bearer credential (when JWTs are
    /// configured and it has a JWT's shape). A JWT is checked on its own
    /// and never throttled nor counted as a failed login: it is no guess at
    /// a secret (its signature is the proof, and no number of tries finds
    /// one), and refusing it is routine (every session's token expires).
    /// Counted, the expired tokens of one proxy's or office's users would
    /// lock every bearer credential of that address out.
    fn as_jwt<'c>(&self, cred: &'c [u8]) -> Option<(&crate::jwt::JwtVerifier, &'c str)> {
        let jwt = self.jwt.as_deref()?;
        let text = std::str::from_utf8(cred).ok()?;
        crate::jwt::looks_like_jwt(text).then_some((jwt, text))
    }

    /// A JWT's principal: `sub`, its scopes and upload limits, and a quota
    /// (`bulkwire.quota_bytes` first, then `sub`'s as any owner's).
    async fn jwt_principal(
        &self,
        meta: &dyn MetaStore,
        jwt: &crate::jwt::JwtVerifier,
        token: &str,
    ) -> Result<Result<Principal, Refusal>, MetaError> {
        let claims = match jwt.verify(token).await {
            Ok(c) => c,
            Err(e) => return Ok(Err(Refusal::Jwt(e.to_string()))),
        };
        let mut p = claims.principal();
        p.quota = self.quota_of(meta, &p).await?;
        if let Some(b) = claims.quota_bytes {
            p.quota.bytes = Some(b);
        }
        Ok(Ok(p))
    }

    /// A stored or configured token's principal; expired is refused.
    async fn token(
        &self,
        meta: &dyn MetaStore,
        token: &[u8],
    ) -> Result<Result<Principal, Refusal>, MetaError> {
        let d = digest(token);
        if self.tokens.iter().fold(false, |ok, t| ok | same(t, &d)) {
            let mut p = Principal::flag(crate::principal::ADMIN);
            p.quota = self.role_quota(Role::Admin);
            return Ok(Ok(p));
        }
        let k = self.cache.key(&[b"token", &d]);
        if let Some(p) = self.cache.hit(&k) {
            return Ok(Ok(p));
        }
        let Some(t) = meta.token_find(d).await? else {
            return Ok(Err(Refusal::BadToken));
        };
        if t.expires.is_some_and(|e| e <= now_secs()) {
            return Ok(Err(Refusal::Expired(t.expires.unwrap_or(0))));
        }
        // The last use, to the minute; a store that cannot say it does not
        // refuse the token.
        if let Err(e) = meta.token_used(&t.id).await {
            tracing::debug!(error = %e, "recording a token's use");
        }
        let scopes = Scopes::parse(&t.scopes).unwrap_or(Scopes::NONE);
        let via = Via::Token { id: t.id.clone() };
        let mut p = Principal::scoped(&t.owner, scopes, via, Default::default());
        p.quota = self.quota_of(meta, &p).await?;
        self.cache
            .put(k, p.clone(), t.expires.map(|e| e - now_secs()));
        Ok(Ok(p))
    }

    /// The quota of a principal that is not a user's login: its owner's
    /// own if the owner is a user (a token made for a user counts against
    /// the user's quota), else its role's (`admin` with the admin scope,
    /// else `author`).
    async fn quota_of(&self, meta: &dyn MetaStore, p: &Principal) -> Result<Quota, MetaError> {
        let role = if p.is_admin() {
            Role::Admin
        } else {
            Role::Author
        };
        match meta.user_get(&p.name).await? {
            Some(u) => {
                let role = Role::parse(&u.info.role).unwrap_or(role);
                Ok(self.user_quota(role, u.info.quota))
            }
            None => Ok(self.role_quota(role)),
        }
    }

    /// A user's own quota, each part falling back to their role's.
    fn user_quota(&self, role: Role, own: Quota) -> Quota {
        let r = self.role_quota(role);
        Quota {
            bytes: own.bytes.or(r.bytes),
            items: own.items.or(r.items),
        }
    }

    fn role_quota(&self, role: Role) -> Quota {
        Quota {
            bytes: self.quota_bytes.get(role),
            items: self.quota_items.get(role),
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

    /// A login with a name and password (Basic, XML-RPC, SOAP), throttled
    /// per address and name before the password is checked
    /// (`crate::throttle`). With the name [`JWT_USER`] and JWTs
    /// configured, the password is a JWT (never throttled: see
    /// [`Auth::as_jwt`]).
    pub async fn login(
        &self,
        meta: &dyn MetaStore,
        name: &str,
        password: &[u8],
        client: Option<IpAddr>,
    ) -> Result<Result<Principal, Refusal>, MetaError> {
        if let (Some(jwt), true, Ok(token)) =
            (&self.jwt, name == JWT_USER, std::str::from_utf8(password))
        {
            return self.jwt_principal(meta, jwt, token).await;
        }
        let attempt = match self.throttle.check(client, name.as_bytes()) {
            Ok(a) => a,
            Err(t) => return Ok(Err(Refusal::Throttled(t))),
        };
        let r = self
            .check_user(meta, name, password)
            .await?
            .ok_or(Refusal::BadPassword);
        match &r {
            Ok(_) => attempt.passed(),
            Err(_) => attempt.failed(),
        }
        Ok(r)
    }

    /// Checks a user's name and password, unthrottled (see [`Auth::login`]);
    /// the user's principal when they match.
    pub async fn check_user(
        &self,
        meta: &dyn MetaStore,
        name: &str,
        password: &[u8],
    ) -> Result<Option<Principal>, MetaError> {
        let d = digest(password);
        let configured = self
            .users
            .iter()
            .fold(false, |ok, (n, p)| ok | (n == name && same(p, &d)));
        if configured {
            // A `--user` is a user whose role is `admin`.
            let mut p = Principal::user(name, Role::Admin);
            p.quota = self.role_quota(Role::Admin);
            return Ok(Some(p));
        }
        let k = self.cache.key(&[b"user", name.as_bytes(), password]);
        if let Some(p) = self.cache.hit(&k) {
            return Ok(Some(p));
        }
        let Some(u) = meta.user_get(name).await? else {
            return Ok(None);
        };
        self.users_seen
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if !self.verify(u.hash, password.to_vec()).await {
            return Ok(None);
        }
        // A role this build does not know reads as the least one.
        let role = Role::parse(&u.info.role).unwrap_or(Role::Author);
        let mut p = Principal::user(name, role);
        p.quota = self.user_quota(role, u.info.quota);
        self.cache.put(k, p.clone(), None);
        Ok(Some(p))
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

/// A token of owner and scope `admin` (the first start's, `--token`'s).
pub fn admin_token(label: &str) -> NewToken {
    NewToken {
        label: label.to_string(),
        owner: crate::principal::ADMIN.to_string(),
        scopes: Scopes::ADMIN.to_string(),
        expires: None,
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
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
            meta.token_add(d, admin_token(&format!("imported from {TOKEN_FILE}")))
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    let done = path.with_extension("sha256.imported");
    std::fs::rename(&path, &done).map_err(|e| format!("{}: {e}", path.display()))
}

/// Adds or changes a user in the store (the CLI's `user add|passwd` and
/// tests); a user created gets `role`. `false` when `mode`'s condition
/// failed.
pub async fn set_user(
    meta: &dyn MetaStore,
    name: &str,
    password: &[u8],
    mode: UserSet,
    role: Role,
) -> Result<bool, String> {
    if name.is_empty() || name.contains(':') {
        return Err("a user name must be non-empty and without ':' (RFC 7617 §2)".into());
    }
    if name == JWT_USER {
        return Err(format!(
            "the user name {JWT_USER:?} is kept for XML-RPC and SOAP logins with a JWT"
        ));
    }
    if password.is_empty() {
        return Err("the password is empty".into());
    }
    let password = password.to_vec();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| e.to_string())??;
    meta.user_set(name, &hash, mode, role.as_str())
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
    use crate::config::{Config, Limits, User};
    use crate::store::{CredentialStore, MediaStore, SqliteMeta};

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

    fn config(d: &Path, tokens: &[&str], users: &[&str], limits: Limits) -> Config {
        Config {
            data: d.to_path_buf(),
            tokens: tokens.iter().map(|t| t.to_string()).collect(),
            users: users.iter().map(|u| User::parse(u).unwrap()).collect(),
            limits,
            ..Config::default()
        }
    }

    async fn who(a: &Auth, m: &SqliteMeta, h: &[u8]) -> Option<Principal> {
        a.identify(m, Some(h)).await.unwrap()
    }

    #[tokio::test]
    async fn configured_bearer_and_basic_are_admin() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let c = config(d.path(), &["tok"], &["bob:s3:cret"], Limits::default());
        let (a, new) = Auth::start(&m, &c).await.unwrap();
        assert!(new.is_none());
        assert!(m.tokens().await.unwrap().is_empty(), "flags are not stored");
        for (h, want) in [
            (&b"Bearer tok"[..], Some("admin")),
            (b"bearer  tok ", Some("admin")),
            (b"Bearer tok2", None),
            (b"Bearer", None),
            (&basic_header("bob:s3:cret"), Some("bob")),
            (&basic_header("bob:s3"), None),
            (&basic_header("eve:s3:cret"), None),
            (b"Basic !!!", None),
            (b"Digest x", None),
        ] {
            let got = who(&a, &m, h).await;
            assert_eq!(
                got.as_ref().map(|p| p.name.as_str()),
                want,
                "{}",
                String::from_utf8_lossy(h)
            );
            assert!(got.is_none_or(|p| p.is_admin() && p.everyone));
        }
        assert!(a.identify(&m, None).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn stored_tokens_and_users_carry_owner_scopes_and_role() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let c = config(
            d.path(),
            &[],
            &[],
            Limits {
                auth_cache_ms: 0,
                ..Limits::default()
            },
        );
        let t = new_token();
        let nt = NewToken {
            label: "cam".into(),
            owner: "carol".into(),
            scopes: "upload".into(),
            expires: None,
        };
        let info = m.token_add(token_digest(&t), nt).await.unwrap();
        assert!(
            set_user(&m, "carol", b"pw pw", UserSet::Create, Role::Author)
                .await
                .unwrap()
        );
        let hash = m.user_get("carol").await.unwrap().unwrap().hash;
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(!hash.contains("pw pw"));
        let (a, new) = Auth::start(&m, &c).await.unwrap();
        assert!(new.is_none(), "the store has credentials");
        let bearer = format!("Bearer {t}");
        let p = who(&a, &m, bearer.as_bytes()).await.unwrap();
        assert_eq!(
            (p.name.as_str(), p.scopes, p.everyone),
            ("carol", Scopes::UPLOAD, false)
        );
        assert_eq!(
            p.via,
            Via::Token {
                id: info.id.clone()
            }
        );
        let u = a.check_user(&m, "carol", b"pw pw").await.unwrap().unwrap();
        assert_eq!(u.via, Via::User { role: Role::Author });
        assert!(a.check_user(&m, "carol", b"pw").await.unwrap().is_none());
        assert!(a.check_user(&m, "dave", b"pw pw").await.unwrap().is_none());
        assert!(set_user(&m, JWT_USER, b"x", UserSet::Create, Role::Author)
            .await
            .is_err());
        // Without a cache, revocation, removal and a new role act at once.
        m.user_role("carol", "editor").await.unwrap();
        let u = a.check_user(&m, "carol", b"pw pw").await.unwrap().unwrap();
        assert!(u.everyone && !u.is_admin(), "an editor");
        m.token_revoke(&info.id).await.unwrap();
        m.user_remove("carol").await.unwrap();
        assert!(who(&a, &m, bearer.as_bytes()).await.is_none());
        assert!(a.check_user(&m, "carol", b"pw pw").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_expired_token_is_refused_saying_so() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let c = config(d.path(), &[], &[], Limits::default());
        let t = new_token();
        let nt = NewToken {
            expires: Some(now_secs() - 1),
            ..admin_token("old")
        };
        m.token_add(token_digest(&t), nt).await.unwrap();
        let (a, _) = Auth::start(&m, &c).await.unwrap();
        let e = a
            .authenticate(&m, Some(format!("Bearer {t}").as_bytes()), None)
            .await
            .unwrap_err();
        assert_eq!(e.status(), 401);
        assert!(e.message.contains("expired at"), "{e}");
    }

    #[tokio::test]
    async fn quotas_come_from_the_user_then_the_role() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let mut l = Limits::default();
        l.quota_bytes.author = Some(100);
        l.quota_items.author = Some(5);
        let c = config(d.path(), &[], &[], l);
        set_user(&m, "ann", b"pw", UserSet::Create, Role::Author)
            .await
            .unwrap();
        let own = Quota {
            bytes: Some(7),
            items: None,
        };
        m.user_quota("ann", own).await.unwrap();
        let (a, _) = Auth::start(&m, &c).await.unwrap();
        let p = a.check_user(&m, "ann", b"pw").await.unwrap().unwrap();
        assert_eq!(
            p.quota,
            Quota {
                bytes: Some(7),
                items: Some(5)
            }
        );
        // A token owned by ann counts against ann's quota.
        let t = new_token();
        let nt = NewToken {
            owner: "ann".into(),
            scopes: "upload".into(),
            ..admin_token("t")
        };
        m.token_add(token_digest(&t), nt).await.unwrap();
        let p = who(&a, &m, format!("Bearer {t}").as_bytes()).await.unwrap();
        assert_eq!(p.quota.bytes, Some(7));
        // An owner who is no user: the role's (author without admin).
        let t2 = new_token();
        let nt = NewToken {
            owner: "app-user-42".into(),
            scopes: "upload,read".into(),
            ..admin_token("t2")
        };
        m.token_add(token_digest(&t2), nt).await.unwrap();
        let p = who(&a, &m, format!("Bearer {t2}").as_bytes())
            .await
            .unwrap();
        assert_eq!(
            p.quota,
            Quota {
                bytes: Some(100),
                items: Some(5)
            }
        );
        assert_eq!(m.usage("app-user-42").await.unwrap().items, 0);
    }

    #[tokio::test]
    async fn a_passed_login_is_remembered_for_the_cache_period_only() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let c = config(
            d.path(),
            &[],
            &[],
            Limits {
                auth_cache_ms: 300,
                ..Limits::default()
            },
        );
        set_user(&m, "erin", b"secret", UserSet::Create, Role::Author)
            .await
            .unwrap();
        let (a, _) = Auth::start(&m, &c).await.unwrap();
        assert!(a.check_user(&m, "erin", b"secret").await.unwrap().is_some());
        m.user_remove("erin").await.unwrap();
        let cached = a.check_user(&m, "erin", b"secret").await.unwrap();
        assert!(cached.is_some(), "cached");
        assert!(
            a.check_user(&m, "erin", b"other").await.unwrap().is_none(),
            "not a wrong one"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            a.check_user(&m, "erin", b"secret").await.unwrap().is_none(),
            "expired"
        );
    }

    #[tokio::test]
    async fn generated_token_is_admin_stored_hashed_and_made_once() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let c = config(d.path(), &[], &[], Limits::default());
        let (a, tok) = Auth::start(&m, &c).await.unwrap();
        let tok = tok.expect("a token on first start");
        let stored = m.tokens().await.unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].id, crate::store::token_id(&token_digest(&tok)));
        assert_eq!(
            (stored[0].owner.as_str(), stored[0].scopes.as_str()),
            ("admin", "admin")
        );
        let p = who(&a, &m, format!("Bearer {tok}").as_bytes())
            .await
            .unwrap();
        assert!(p.is_admin() && p.name == "admin");
        let (_, again) = Auth::start(&m, &c).await.unwrap();
        assert!(again.is_none());
    }

    #[tokio::test]
    async fn a_token_file_of_an_earlier_release_is_imported_once() {
        let d = tempfile::tempdir().unwrap();
        let m = meta(d.path());
        let tok = new_token();
        let line = format!("{}\n", hex::encode(token_digest(&tok)));
        std::fs::write(d.path().join(TOKEN_FILE), line).unwrap();
        let c = config(d.path(), &[], &[], Limits::default());
        let (a, new) = Auth::start(&m, &c).await.unwrap();
        assert!(new.is_none(), "the imported token counts");
        assert!(who(&a, &m, format!("Bearer {tok}").as_bytes())
            .await
            .is_some());
        assert!(!d.path().join(TOKEN_FILE).exists());
        Auth::start(&m, &c).await.unwrap();
        assert_eq!(m.tokens().await.unwrap().len(), 1);
    }

    #[test]
    fn cache_keys_separate_their_parts() {
        let c = Cache::new(Duration::from_secs(1), 2);
        assert_ne!(c.key(&[b"ab", b"c"]), c.key(&[b"a", b"bc"]));
        for i in 0..10u8 {
            c.put(c.key(&[&[i]]), Principal::flag("x"), None);
        }
        assert!(c.map.lock().unwrap().len() <= 2, "bounded");
    }
}
