//! Server configuration and limits (DESIGN.md "Bounded memory is a
//! contract").
//!
//! Everything is resolved once at start-up: the request path never reads a
//! file or the environment. [`Config`] comes from defaults, an optional TOML
//! file ([`Config::from_toml_str`]) and, in the CLI, flags and `BULKWIRE_*`
//! variables layered on top. Every cap lives in one [`Limits`] value with
//! finite defaults; an error for a limit names the field here and its value.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A user allowed in with HTTP Basic, and with the username/password
/// params of XML-RPC calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub name: String,
    pub password: String,
}

impl User {
    /// Parses `NAME:PASSWORD` (the password may contain `:`; the name may
    /// not, as in RFC 7617 §2).
    pub fn parse(s: &str) -> Result<User, String> {
        match s.split_once(':') {
            Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok(User {
                name: n.to_string(),
                password: p.to_string(),
            }),
            _ => Err(format!("user must be NAME:PASSWORD, got {s:?}")),
        }
    }
}

/// A listen address as people write it: `127.0.0.1:8080`, `[::1]:8080`,
/// `localhost:8092` (resolved now, an IPv4 address preferred, as browsers
/// try `localhost` on 127.0.0.1 first), or a bare port `8092` on 127.0.0.1
/// (the default address: nothing is exposed beyond this machine unless
/// asked for with `0.0.0.0:PORT`).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let s = s.trim();
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bad = |why: String| {
        format!(
            "listen address {s:?}: {why}; expected HOST:PORT (127.0.0.1:8080, localhost:8080, \
             [::1]:8080, 0.0.0.0:8080 for every interface) or a port (8080, on 127.0.0.1)"
        )
    };
    let addrs: Vec<SocketAddr> = match s.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => return Err(bad(e.to_string())),
    };
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| bad("the name has no address".into()))
}

fn de_listen<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    parse_listen(&s).map_err(serde::de::Error::custom)
}

/// Everything `bulkwire serve` needs, fixed at start-up.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on: `HOST:PORT` (a name such as `localhost` is
    /// resolved at start) or a bare port on 127.0.0.1 ([`parse_listen`]).
    #[serde(deserialize_with = "de_listen")]
    pub listen: SocketAddr,
    /// Data directory: `blobs/`, `tmp/`, `meta.sqlite`, `token.sha256`.
    pub data: PathBuf,
    /// Bearer tokens accepted on `/v1`, in clear (hashed in memory).
    pub tokens: Vec<String>,
    /// Users accepted with HTTP Basic on `/v1` (and later XML-RPC/SOAP).
    pub users: Vec<User>,
    /// The metadata store (see `crate::stores`): absent is SQLite under
    /// `data`, else `postgres://USER@HOST:PORT/DB` or `sqlite:PATH`.
    pub meta: Option<String>,
    /// The blob store: absent is files under `data`, else
    /// `s3://BUCKET/PREFIX` or `file:DIR`.
    pub blobs: Option<String>,
    /// S3 settings; each absent key falls back to its `AWS_*` variable.
    pub s3: S3Keys,
    /// The server's address as clients reach it (`https://media.example.com`,
    /// behind a proxy): every URL the server returns starts with it. Absent:
    /// `http://` and the request's `Host`.
    pub public_url: Option<String>,
    /// How long a media link stays valid (seconds or `"30d"`). Absent: until
    /// the media is deleted or the link key rotated, as WordPress's links.
    #[serde(deserialize_with = "bulkwire_units::de::opt_secs")]
    pub link_ttl: Option<u64>,
    /// Origins whose browser scripts may call the API (`https://app.example.com`;
    /// `"*"` for any). Absent: none (no CORS headers at all).
    pub cors_origins: Vec<String>,
    /// The application's own tokens (JWTs): where their keys come from and
    /// what their claims must say (see `crate::jwt`).
    pub auth: AuthKeys,
    /// The sizes (pixels, on a side) image variants are rounded up to, so
    /// that a cache holds few of them (see `crate::variants`).
    pub variant_sizes: Vec<u32>,
    /// How long events are kept and how webhooks are delivered
    /// (`crate::events`).
    pub events: crate::events::EventsConfig,
    /// Where events are POSTed, signed (`[[webhooks]]`).
    pub webhooks: Vec<crate::events::Webhook>,
    /// URLs asked before an upload is stored and before it commits.
    pub hooks: crate::events::HooksConfig,
    pub limits: Limits,
}

/// The `[s3]` table: what `AWS_ENDPOINT_URL`, `AWS_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_ALLOW_HTTP` would
/// say, and the multipart part size.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct S3Keys {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// The session token of temporary keys (`AWS_SESSION_TOKEN`).
    pub session_token: Option<String>,
    pub allow_http: Option<bool>,
    /// How long the EC2 instance metadata service may take to answer when
    /// the credential chain falls back to it (default 1 s).
    #[serde(deserialize_with = "opt_millis")]
    pub metadata_timeout_ms: Option<u64>,
    /// Bytes per multipart part (default 8 MiB, at least S3's 5 MiB); an
    /// upload holds at most two parts in memory.
    #[serde(deserialize_with = "bulkwire_units::de::opt_size")]
    pub part_size: Option<u64>,
    /// Answer a download (a link's or with credentials) with `307` to a
    /// presigned GET of the object, so that its bytes go from S3 to the
    /// client without passing through the node. Accepted with Azure and
    /// GCS blobs, as `part_size` is, where it changes nothing: their
    /// stores hand out no URL that keeps the item's headers
    /// (`BlobStore::presign_get`), and the node sends the bytes.
    pub download_redirect: bool,
    /// How long a redirect's URL is valid (default 5 minutes), never
    /// longer than the link it answers.
    #[serde(deserialize_with = "bulkwire_units::de::opt_secs")]
    pub download_redirect_ttl: Option<u64>,
}

impl S3Keys {
    /// A redirect's lifetime when none is set.
    pub const DOWNLOAD_REDIRECT_TTL: u64 = 300;

    /// `download_redirect_ttl`, or its default.
    pub fn redirect_ttl(&self) -> std::time::Duration {
        let s = self
            .download_redirect_ttl
            .unwrap_or(Self::DOWNLOAD_REDIRECT_TTL);
        std::time::Duration::from_secs(s.max(1))
    }
}

/// Milliseconds or nothing (an absent key is `None` through `#[serde(default)]`).
fn opt_millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    bulkwire_units::de::millis(d).map(Some)
}

#[cfg(feature = "s3")]
impl S3Keys {
    /// The keys set here, over a URL's defaults (the `AWS_*` variables
    /// fill what is still unset).
    pub fn apply(&self, mut c: crate::store::S3Config) -> crate::store::S3Config {
        c.endpoint = self.endpoint.clone().or(c.endpoint);
        if let Some(r) = &self.region {
            c.region = r.clone();
        }
        c.access_key_id = self.access_key_id.clone().or(c.access_key_id);
        c.secret_access_key = self.secret_access_key.clone().or(c.secret_access_key);
        c.session_token = self.session_token.clone().or(c.session_token);
        if let Some(ms) = self.metadata_timeout_ms {
            c.metadata_timeout = std::time::Duration::from_millis(ms);
        }
        c.allow_http = self.allow_http.unwrap_or(c.allow_http);
        if let Some(p) = self.part_size {
            c.part_size = usize::try_from(p).unwrap_or(usize::MAX);
        }
        c
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data: PathBuf::from("./bulkwire-data"),
            tokens: Vec::new(),
            users: Vec::new(),
            meta: None,
            blobs: None,
            s3: S3Keys::default(),
            public_url: None,
            link_ttl: None,
            cors_origins: Vec::new(),
            auth: AuthKeys::default(),
            variant_sizes: DEFAULT_VARIANT_SIZES.to_vec(),
            events: Default::default(),
            webhooks: Vec::new(),
            hooks: Default::default(),
            limits: Limits::default(),
        }
    }
}

/// WordPress's sub-sizes (thumbnail 150, medium 300, medium_large 768,
/// large 1024) and a large screen's 2048.
pub const DEFAULT_VARIANT_SIZES: [u32; 5] = [150, 300, 768, 1024, 2048];

/// The largest variant side `variant_sizes` may name.
pub const MAX_VARIANT_SIZE: u32 = 8192;

impl Config {
    /// `variant_sizes` is a non-empty list of sizes from 1 to
    /// [`MAX_VARIANT_SIZE`], in increasing order.
    pub fn validate_variant_sizes(&self) -> Result<(), String> {
        let s = &self.variant_sizes;
        let ok = !s.is_empty()
            && s.iter().all(|v| (1..=MAX_VARIANT_SIZE).contains(v))
            && s.windows(2).all(|w| w[0] < w[1]);
        if !ok {
            return Err(format!(
                "variant_sizes must be sizes from 1 to {MAX_VARIANT_SIZE} pixels in increasing \
                 order, such as [150, 300, 768, 1024, 2048]; got {s:?}"
            ));
        }
        Ok(())
    }

    /// `[events]`, `[[webhooks]]` and `[hooks]`, each naming its fault.
    pub fn validate_events(&self) -> Result<(), String> {
        self.events.validate()?;
        crate::events::config::validate_webhooks(&self.webhooks)?;
        self.hooks.validate()
    }

    /// `public_url` and `cors_origins` are origins: a scheme, a host, an
    /// optional port, nothing after (a path would be doubled in every URL).
    pub fn validate_urls(&self) -> Result<(), String> {
        let origin = |s: &str| {
            let rest = s
                .strip_prefix("https://")
                .or_else(|| s.strip_prefix("http://"));
            rest.is_some_and(|r| !r.is_empty() && !r.contains(['/', '?', '#', ' ']))
        };
        if let Some(u) = &self.public_url {
            if !origin(u) {
                return Err(format!(
                    "public_url {u:?} must be an origin like https://media.example.com (no path)"
                ));
            }
        }
        if let Some(o) = self.cors_origins.iter().find(|o| *o != "*" && !origin(o)) {
            return Err(format!(
                "cors_origins entry {o:?} must be an origin like https://app.example.com, or \"*\""
            ));
        }
        Ok(())
    }

    /// Reads a TOML document; absent keys keep their defaults, unknown keys
    /// are an error (a typo in a limit's name must not pass silently).
    pub fn from_toml_str(s: &str) -> Result<Config, String> {
        let c: Config = toml::from_str(s).map_err(|e| e.to_string())?;
        c.limits.validate()?;
        c.validate_variant_sizes()?;
        c.validate_urls()?;
        // Each key alone: the CLI checks the whole after its flags and
        // variables (`AuthKeys::validate`).
        c.auth.validate_keys()?;
        c.validate_events()?;
        Ok(c)
    }
}

/// The `[auth]` table: JWT bearer tokens (RFC 7519) the application issues
/// itself, checked by `crate::jwt::JwtVerifier`. Keys of one type come from
/// one place only: HS256 from `jwt_secret`, RS256, ES256 and EdDSA from the
/// JWKS at `jwt_jwks_url` (its `oct` keys are ignored). Neither set: no JWT
/// is accepted.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthKeys {
    /// Where the public keys are: an `http://` or `https://` URL serving a
    /// JWK Set (RFC 7517 §5).
    pub jwt_jwks_url: Option<String>,
    /// The HS256 key, at least [`AuthKeys::MIN_SECRET_BYTES`] bytes (RFC
    /// 7518 §3.2: a key as long as the hash).
    pub jwt_secret: Option<String>,
    /// `iss` a token must carry; absent: not checked.
    pub jwt_issuer: Option<String>,
    /// A value `aud` must carry; absent: a token with `aud` is refused (RFC
    /// 7519 §4.1.3: this server is not among its audience).
    pub jwt_audience: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub jwt_leeway: u64,
    /// Least time between two fetches of the JWKS for an unknown `kid`, in
    /// seconds: tokens with made-up key ids cannot make the server hammer
    /// the key server.
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub jwt_jwks_refresh: u64,
    /// Longest a JWKS fetch may take, connecting included, in seconds.
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub jwt_jwks_timeout: u64,
    /// Most bytes of a JWKS document; a longer one is abandoned as it
    /// arrives.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub jwt_jwks_bytes: u64,
}

impl Default for AuthKeys {
    fn default() -> Self {
        AuthKeys {
            jwt_jwks_url: None,
            jwt_secret: None,
            jwt_issuer: None,
            jwt_audience: None,
            jwt_leeway: 30,
            jwt_jwks_refresh: 60,
            jwt_jwks_timeout: 5,
            jwt_jwks_bytes: 1 << 20,
        }
    }
}

/// The secret is never printed (configurations are logged in debug output).
impl std::fmt::Debug for AuthKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthKeys")
            .field("jwt_jwks_url", &self.jwt_jwks_url)
            .field("jwt_secret", &self.jwt_secret.as_ref().map(|_| "<hidden>"))
            .field("jwt_issuer", &self.jwt_issuer)
            .field("jwt_audience", &self.jwt_audience)
            .field("jwt_leeway", &self.jwt_leeway)
            .field("jwt_jwks_refresh", &self.jwt_jwks_refresh)
            .field("jwt_jwks_timeout", &self.jwt_jwks_timeout)
            .field("jwt_jwks_bytes", &self.jwt_jwks_bytes)
            .finish()
    }
}

impl AuthKeys {
    /// Shortest `jwt_secret` accepted: 256 bits, the output of SHA-256.
    pub const MIN_SECRET_BYTES: usize = 32;

    /// True when JWTs are accepted at all.
    pub fn jwt_enabled(&self) -> bool {
        self.jwt_jwks_url.is_some() || self.jwt_secret.is_some()
    }

    /// Rejects what cannot work, naming the key: [`AuthKeys::validate_keys`],
    /// and an issuer or audience with no key to check tokens. For the
    /// whole configuration, flags and variables included (a file may name
    /// the issuer and leave the secret to `BULKWIRE_JWT_SECRET`).
    pub fn validate(&self) -> Result<(), String> {
        self.validate_keys()?;
        if !self.jwt_enabled() {
            for (k, v) in [
                ("jwt_issuer", &self.jwt_issuer),
                ("jwt_audience", &self.jwt_audience),
            ] {
                if v.is_some() {
                    return Err(format!(
                        "auth.{k} is set but no JWT is accepted: set auth.jwt_jwks_url or \
                         auth.jwt_secret"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Each key on its own: a short secret, a secret that is a PEM key (a
    /// public key used as an HMAC secret is the algorithm confusion of RFC
    /// 8725 §2.1), a JWKS URL that is not http(s), and zero bounds.
    pub fn validate_keys(&self) -> Result<(), String> {
        if let Some(s) = &self.jwt_secret {
            if s.len() < Self::MIN_SECRET_BYTES {
                return Err(format!(
                    "auth.jwt_secret has {} bytes; HS256 needs at least {} (RFC 7518 §3.2)",
                    s.len(),
                    Self::MIN_SECRET_BYTES
                ));
            }
            if s.trim_start().starts_with("-----BEGIN") {
                return Err(
                    "auth.jwt_secret is a PEM key: public keys (RS256, ES256, EdDSA) \
                            belong in the JWKS at auth.jwt_jwks_url, and the HS256 secret \
                            must be no key of theirs (RFC 8725 §2.1)"
                        .into(),
                );
            }
        }
        if let Some(u) = &self.jwt_jwks_url {
            let rest = u
                .strip_prefix("https://")
                .or_else(|| u.strip_prefix("http://"));
            if !rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/') && !r.contains(' ')) {
                return Err(format!(
                    "auth.jwt_jwks_url {u:?} must be an http:// or https:// URL \
                     (https://login.example.com/.well-known/jwks.json)"
                ));
            }
        }
        let zero = [
            ("jwt_jwks_refresh", self.jwt_jwks_refresh),
            ("jwt_jwks_timeout", self.jwt_jwks_timeout),
            ("jwt_jwks_bytes", self.jwt_jwks_bytes),
        ];
        if let Some((n, _)) = zero.iter().find(|(_, v)| *v == 0) {
            return Err(format!("auth.{n} must be > 0"));
        }
        Ok(())
    }
}

/// Every cap the server applies, with finite defaults. In TOML, sizes take
/// an integer (bytes) or a string with a unit (`"4 GiB"`, `"64KiB"`), and
/// `_ms`/`_s` keys an integer in that unit or a duration (`"30s"`, `"24h"`):
/// crate `bulkwire-units`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Bytes in one request body.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub body_bytes: u64,
    /// Bytes in one stored file.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub file_bytes: u64,
    /// Parts in one multipart body (files and fields).
    pub parts: usize,
    /// Text fields (parts without `filename`) in one body.
    pub fields: usize,
    /// Bytes of one text field.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub field_bytes: u64,
    /// Bytes of all text fields of one body together (they are held in
    /// memory to be returned).
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub fields_total_bytes: u64,
    /// Bytes of a SOAP envelope outside its binary `data` (tags, text
    /// fields, white space); the binary itself streams to storage.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub soap_envelope_bytes: u64,
    /// Calls in one XML-RPC `system.multicall` (a fault beyond).
    pub xmlrpc_multicall: usize,
    /// Bytes of one part's header block.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub part_header_bytes: usize,
    /// Header fields in one part.
    pub part_headers: usize,
    /// Bytes before the first multipart delimiter.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub preamble: usize,
    /// Bytes after the close delimiter.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub epilogue: usize,
    /// Longest wait for the next piece of a request body (408 after).
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub idle_timeout_ms: u64,
    /// Longest wait for a request's header block.
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub header_timeout_ms: u64,
    /// Longest a write to a client may wait without a byte accepted
    /// (nginx's `send_timeout`): a client that stops reading a download
    /// holds its socket buffer and nothing more, and is closed after this.
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub send_timeout_ms: u64,
    /// Uploads in progress at once (503 beyond).
    pub max_uploads: usize,
    /// Bytes all uploads in progress may hold in memory together; each
    /// upload reserves [`Limits::upload_reserve`] of it (503 when short).
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub memory_budget: u64,
    /// The HTTP read buffer's cap, which bounds one body chunk.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub read_buffer: usize,
    /// File bytes gathered before they are handed to storage in one write
    /// (one batch is written while the next is gathered). Larger batches
    /// mean fewer hand-offs to the blocking pool, and more memory per
    /// upload: see [`Limits::upload_reserve`].
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub write_batch: usize,
    /// Lingering close: after an answer sent before the request body was
    /// read to its end, the server half-closes and reads and discards what
    /// the client still sends, so that a client that writes its whole body
    /// before reading gets the answer instead of a reset. At most
    /// `linger_ms` in all, `linger_idle_ms` without data, `linger_bytes`
    /// (nginx's `lingering_time`, `lingering_timeout`). No upload slot or
    /// memory reservation is held meanwhile.
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub linger_ms: u64,
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub linger_idle_ms: u64,
    /// Also read under its former name `drain_bytes`, the bound of the
    /// drain that lingering replaced.
    #[serde(alias = "drain_bytes")]
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub linger_bytes: u64,
    /// Slowest body accepted, in bytes per second, once
    /// `min_body_rate_grace_ms` have passed: a body's deadline is the grace
    /// plus one second per `min_body_rate` bytes received (Apache
    /// `mod_reqtimeout`'s `body=20,MinRate=500`); later is 408. 0 turns it
    /// off (the idle timeout still applies).
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub min_body_rate: u64,
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub min_body_rate_grace_ms: u64,
    /// Body bytes read before a request's credentials are checked: an
    /// XML-RPC call must have named its user and password within them, and
    /// a call that does not upload is read whole within them. Nothing is
    /// admitted (no upload slot, no memory reservation) before.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub preauth_bytes: u64,
    /// Connections open at once. Absent: derived from the process's
    /// descriptor limit at start-up (see `crate::conns`). At the cap a
    /// connection with nothing in flight is closed for the new one (see
    /// there in which order), or when every one is busy the new one gets
    /// 503.
    pub max_connections: Option<usize>,
    /// Threads that serve connections, each with an event loop of its own
    /// (as nginx's workers): a connection stays on the thread it was handed
    /// to, the one serving the fewest at its accept (`crate::workers`).
    /// 0 (the default): connections are served by the runtime the server
    /// runs on (tokio's work-stealing pool).
    pub connection_threads: usize,
    /// SOAP attachments stored before the root part says whether they are
    /// referenced (an MTOM `start` may name a later part); each holds a
    /// temp file. Attachments after the root that nothing refers to are
    /// discarded as they stream.
    pub soap_early_attachments: usize,
    /// Most items one `GET /v1/media` returns.
    pub list_limit: usize,
    /// Bytes of an uploaded file's name kept in metadata.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub filename_bytes: usize,
    /// How long in-flight requests may run on after SIGTERM/SIGINT.
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub shutdown_grace_ms: u64,
    /// How long a passed login (token or user) is remembered before the
    /// store is asked again: a revoked token or removed user stops working
    /// within this. 0 asks every time (see `crate::auth`).
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub auth_cache_ms: u64,
    /// Logins remembered at once.
    pub auth_cache_entries: usize,
    /// How long a download remembers an item's row (its size, type, owner:
    /// none of which changes under its id) instead of asking the metadata
    /// store again. An item deleted through another node or the CLI is
    /// still a 404 at once: its blob is gone. 0 asks every time.
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub media_cache_ms: u64,
    /// Item rows remembered at once (about 300 bytes each).
    pub media_cache_entries: usize,
    /// Argon2 password verifications running at once (19 MiB each).
    pub password_checks: usize,
    /// Connections to a PostgreSQL metadata store (the pool's size).
    pub meta_connections: usize,
    /// Longest wait for a metadata connection or an S3 request to start
    /// answering; a store that is away fails requests (503) after it.
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub store_timeout_ms: u64,
    /// A node whose heartbeat is older than this is presumed dead: any
    /// node's janitor then removes what its unfinished uploads left
    /// (`bulkwire_store::lease`). Heartbeats come every sixth of it.
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub lease_ms: u64,
    /// How often each node's janitor looks for expired leases.
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub janitor_interval_ms: u64,
    /// Bytes of a resumable upload's `Upload-Metadata` header.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub upload_metadata_bytes: usize,
    /// Unfinished resumable uploads one credential may have at once.
    pub open_uploads: usize,
    /// Seconds a resumable upload lives after its last request (tus
    /// `Upload-Expires`); then the janitor removes it and what it stored.
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub upload_expiry_s: u64,
    /// A resumable upload's bytes are made durable, and its offset saved,
    /// at least every this many bytes of a request's body (and at its end).
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub upload_sync_bytes: u64,
    /// Partial uploads one tus concatenation may name.
    pub concat_uploads: usize,
    /// Failed logins from one address for one name within `login_window`
    /// after which that pair is refused (429) without a password check
    /// (`crate::throttle`).
    pub login_failures: u32,
    /// The window failed logins are counted in (seconds or `"10m"`), and
    /// the longest a refused pair waits.
    #[serde(deserialize_with = "bulkwire_units::de::secs")]
    pub login_window: u64,
    /// Addresses and names whose failures are remembered at once.
    pub login_table_entries: usize,
    /// Bytes one owner's items may hold, by role: a size applies to
    /// authors and editors, a table (`{ author = "10 GiB" }`) to the roles
    /// it names. A user's own quota (`bulkwire user quota`) and a JWT's
    /// `bulkwire.quota_bytes` come first. Absent: none.
    pub quota_bytes: PerRole,
    /// Items one owner may have, by role (as `quota_bytes`).
    pub quota_items: PerRole,
    /// Most pixels (width × height, as its header declares them) of an
    /// image a variant is made from: more is 413 before any pixel is
    /// decoded (an image bomb declares billions in a few bytes).
    pub variant_max_pixels: u64,
    /// Most bytes of an image a variant is made from: it is read into
    /// memory (reserved from `memory_budget`) to be decoded; more is 413.
    #[serde(deserialize_with = "bulkwire_units::de::size")]
    pub variant_max_bytes: u64,
    /// Variants made at once, each on a thread of their own with its memory
    /// reserved from `memory_budget`. Absent: the number of cores.
    pub variant_jobs: Option<usize>,
    /// Variant requests waiting for a job at once; more are answered 503.
    pub variant_queue: usize,
    /// Longest a variant request waits for a job and its making takes
    /// (milliseconds or a duration), then 503 with `Retry-After`.
    #[serde(deserialize_with = "bulkwire_units::de::millis")]
    pub variant_timeout: u64,
}

/// A value per role ([`Limits::quota_bytes`], [`Limits::quota_items`]):
/// in TOML a plain value (sizes with a unit, for bytes) for authors and
/// editors, or a table by role name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerRole {
    pub author: Option<u64>,
    pub editor: Option<u64>,
    pub admin: Option<u64>,
}

impl PerRole {
    pub fn get(&self, role: crate::principal::Role) -> Option<u64> {
        use crate::principal::Role;
        match role {
            Role::Author => self.author,
            Role::Editor => self.editor,
            Role::Admin => self.admin,
        }
    }
}

/// None for no role at all (as an absent key reads), else the table.
impl Serialize for PerRole {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if *self == PerRole::default() {
            return s.serialize_none();
        }
        let mut m = s.serialize_map(None)?;
        for (k, v) in [
            ("author", self.author),
            ("editor", self.editor),
            ("admin", self.admin),
        ] {
            if let Some(v) = v {
                m.serialize_entry(k, &v)?;
            }
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for PerRole {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PerRole, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            #[serde(default, deserialize_with = "bulkwire_units::de::opt_size")]
            author: Option<u64>,
            #[serde(default, deserialize_with = "bulkwire_units::de::opt_size")]
            editor: Option<u64>,
            #[serde(default, deserialize_with = "bulkwire_units::de::opt_size")]
            admin: Option<u64>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Table(Table),
            #[serde(deserialize_with = "bulkwire_units::de::size")]
            One(u64),
        }
        let e = Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "a quota is a value (\"10 GiB\", 5000) for authors and editors, or a table \
                 by role ({ author = \"10 GiB\", editor = \"100 GiB\" })",
            )
        })?;
        Ok(match e {
            Either::One(v) => PerRole {
                author: Some(v),
                editor: Some(v),
                admin: None,
            },
            Either::Table(t) => PerRole {
                author: t.author,
                editor: t.editor,
                admin: t.admin,
            },
        })
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes: 8 << 30,
            file_bytes: 4 << 30,
            parts: 256,
            fields: 128,
            field_bytes: 64 << 10,
            fields_total_bytes: 256 << 10,
            soap_envelope_bytes: 1 << 20,
            xmlrpc_multicall: 32,
            part_header_bytes: 16 << 10,
            part_headers: 32,
            preamble: 16 << 10,
            epilogue: 16 << 10,
            idle_timeout_ms: 30_000,
            header_timeout_ms: 30_000,
            send_timeout_ms: 60_000,
            max_uploads: 64,
            memory_budget: 256 << 20,
            read_buffer: 256 << 10,
            write_batch: 1 << 20,
            linger_ms: 30_000,
            linger_idle_ms: 5_000,
            linger_bytes: 256 << 20,
            min_body_rate: 500,
            min_body_rate_grace_ms: 20_000,
            preauth_bytes: 16 << 10,
            max_connections: None,
            connection_threads: 0,
            soap_early_attachments: 4,
            list_limit: 1000,
            filename_bytes: 1024,
            shutdown_grace_ms: 30_000,
            auth_cache_ms: 30_000,
            auth_cache_entries: 4096,
            media_cache_ms: 60_000,
            media_cache_entries: 16_384,
            password_checks: 2,
            meta_connections: 16,
            store_timeout_ms: 5_000,
            lease_ms: 60_000,
            janitor_interval_ms: 20_000,
            upload_metadata_bytes: 4096,
            open_uploads: 100,
            upload_expiry_s: 24 * 3600,
            upload_sync_bytes: 8 << 20,
            concat_uploads: 256,
            login_failures: 10,
            login_window: 600,
            login_table_entries: 10_000,
            quota_bytes: PerRole::default(),
            quota_items: PerRole::default(),
            variant_max_pixels: 50_000_000,
            variant_max_bytes: 64 << 20,
            variant_jobs: None,
            variant_queue: 256,
            variant_timeout: 10_000,
        }
    }
}

/// Most XML elements in one XML-RPC request ([`Limits::xmlrpc`]).
pub(crate) const XMLRPC_ELEMENTS: u64 = 8192;

/// Smallest HTTP read buffer hyper accepts.
const MIN_READ_BUFFER: usize = 8 * 1024;

impl Limits {
    /// True when `name` is a key of the `[limits]` table.
    pub fn has_key(name: &str) -> bool {
        static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        KEYS.get_or_init(|| match serde_json::to_value(Limits::default()) {
            Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        })
        .iter()
        .any(|k| k == name)
    }

    /// Rejects values the server cannot work with.
    pub fn validate(&self) -> Result<(), String> {
        if self.read_buffer < MIN_READ_BUFFER {
            return Err(format!("limits.read_buffer must be >= {MIN_READ_BUFFER}"));
        }
        let zero = [
            ("max_uploads", self.max_uploads as u64),
            ("write_batch", self.write_batch as u64),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("header_timeout_ms", self.header_timeout_ms),
            ("send_timeout_ms", self.send_timeout_ms),
            ("list_limit", self.list_limit as u64),
            ("linger_ms", self.linger_ms),
            ("linger_idle_ms", self.linger_idle_ms),
            ("preauth_bytes", self.preauth_bytes),
            ("max_connections", self.max_connections.unwrap_or(1) as u64),
            ("password_checks", self.password_checks as u64),
            ("meta_connections", self.meta_connections as u64),
            ("store_timeout_ms", self.store_timeout_ms),
            ("lease_ms", self.lease_ms),
            ("janitor_interval_ms", self.janitor_interval_ms),
            ("open_uploads", self.open_uploads as u64),
            ("upload_expiry_s", self.upload_expiry_s),
            ("upload_sync_bytes", self.upload_sync_bytes),
            ("concat_uploads", self.concat_uploads as u64),
            ("login_failures", self.login_failures as u64),
            ("login_window", self.login_window),
            ("login_table_entries", self.login_table_entries as u64),
            ("variant_max_pixels", self.variant_max_pixels),
            ("variant_max_bytes", self.variant_max_bytes),
            ("variant_jobs", self.variant_jobs.unwrap_or(1) as u64),
            ("variant_queue", self.variant_queue as u64),
            ("variant_timeout", self.variant_timeout),
        ];
        if let Some((n, _)) = zero.iter().find(|(_, v)| *v == 0) {
            return Err(format!("limits.{n} must be > 0"));
        }
        let most = crate::workers::MAX_WORKERS;
        if self.connection_threads > most {
            return Err(format!("limits.connection_threads must be <= {most}"));
        }
        // Heartbeats come every sixth of it and SQLite keeps whole seconds:
        // shorter, a node could see its own live uploads as expired.
        if self.lease_ms < 2000 {
            return Err("limits.lease_ms must be >= 2000".into());
        }
        Ok(())
    }

    /// The codec's limits for one `multipart/form-data` body.
    pub fn multipart(&self) -> bulkwire_multipart::Limits {
        bulkwire_multipart::Limits {
            parts: self.parts,
            header_bytes: self.part_header_bytes,
            headers: self.part_headers,
            preamble: self.preamble,
            epilogue: self.epilogue,
            field_bytes: self.field_bytes,
            body_bytes: self.body_bytes,
            ..bulkwire_multipart::Limits::default()
        }
    }

    /// The XML-RPC codec's limits for one request: scalar text and the
    /// value tree are capped like form fields (`field_bytes`,
    /// `fields_total_bytes`); the element and container counts are fixed
    /// small, since the tree's nodes are not counted in `tree_bytes` and a
    /// media call needs a few dozen (a multicall a few hundred).
    pub fn xmlrpc(&self) -> bulkwire_xmlrpc::Limits {
        bulkwire_xmlrpc::Limits {
            string_bytes: usize::try_from(self.field_bytes).unwrap_or(usize::MAX),
            tree_bytes: self.fields_total_bytes,
            elements: XMLRPC_ELEMENTS,
            members: 1024,
            items: 4096,
            params: 16,
            ..bulkwire_xmlrpc::Limits::default()
        }
    }

    /// Threads the blocking pool may start: tokio's default (512) plus the
    /// two that each admitted upload may keep while it runs: a resumable
    /// append's hash and write loops (`handlers::tus::append`), a plain
    /// upload's hash loop and write job (`upload::FileSink`), so that
    /// uploads waiting on slow clients can never starve the pool's other
    /// work.
    pub fn blocking_threads(&self) -> usize {
        512 + 2 * self.max_uploads
    }

    /// Memory one upload may hold at worst, reserved from
    /// [`Limits::memory_budget`] when it is admitted: the most batches any
    /// upload holds (see [`Limits::batches_reserve`]), then the aligned
    /// staging of the write in flight, its text fields, the parser's
    /// header buffer and delimiter carry.
    pub fn upload_reserve(&self) -> u64 {
        self.upload_reserve_for(crate::store::STAGING_BYTES as u64)
    }

    /// [`Limits::upload_reserve`] with a blob store that holds
    /// `store_memory` per upload (`BlobStore::upload_memory`: the file
    /// store's aligned staging, S3's two parts).
    pub fn upload_reserve_for(&self, store_memory: u64) -> u64 {
        let batches = self.batches_reserve();
        // Each file whose type is told from its first bytes keeps them
        // until it ends: one file at a time, or SOAP's early attachments.
        let sniff = (1 + self.soap_early_attachments as u64) * crate::upload::SNIFF_BYTES as u64;
        batches
            + store_memory
            + self.fields_total_bytes
            + self.part_header_bytes as u64
            + sniff
            + 4096
    }

    /// The most write-batch memory one upload holds, whichever way it
    /// gathers (`upload::FileSink`, `handlers::tus::append`): the largest
    /// of
    /// - a plain upload sharing the body's chunks: three batches (one
    ///   gathering, one being written, one waiting for or in the hash),
    ///   each up to `write_batch` plus the chunk that filled it (the read
    ///   buffer bounds a chunk);
    /// - a plain upload copying into aligned batches (`O_DIRECT`): the two
    ///   the writer and the hash hold, those one chunk fills before the
    ///   next hand-over, and the one it opened, each of `write_batch` in
    ///   whole blocks plus its alignment slack;
    /// - a resumable append: four aligned batches (one gathering, three
    ///   at most read by the hash and the disk), each chunk copied in and
    ///   dropped, plus the chunk.
    pub fn batches_reserve(&self) -> u64 {
        let (batch, chunk) = (self.write_batch as u64, self.read_buffer as u64);
        let aligned = crate::state::batch_size(self) as u64;
        let align = crate::store::ALIGN as u64;
        let shared = 3 * (batch + chunk);
        let gathered = (3 + chunk.div_ceil(aligned)) * (aligned + align);
        let append = 4 * aligned + chunk;
        shared.max(gathered).max(append)
    }

    /// [`Limits::variant_jobs`], or the number of cores.
    pub fn variant_jobs(&self) -> usize {
        self.variant_jobs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }

    pub fn variant_timeout(&self) -> Duration {
        Duration::from_millis(self.variant_timeout)
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    pub fn login_window(&self) -> Duration {
        Duration::from_secs(self.login_window)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }

    /// When a body that began at `start` and has brought `received` bytes
    /// must have brought more ([`Limits::min_body_rate`]); `None` when the
    /// rate is off.
    pub fn body_deadline(
        &self,
        start: std::time::Instant,
        received: u64,
    ) -> Option<std::time::Instant> {
        if self.min_body_rate == 0 {
            return None;
        }
        let earned = Duration::from_secs_f64(received as f64 / self.min_body_rate as f64);
        Some(start + Duration::from_millis(self.min_body_rate_grace_ms) + earned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each way of gathering can be the largest: by default a resumable
    /// append's four batches; with small batches, a plain upload's aligned
    /// batches with their slack; with chunks much larger than the batches,
    /// a plain upload's three that share them.
    #[test]
    fn the_batch_reserve_covers_every_way_of_gathering() {
        let kib = 1u64 << 10;
        let reserve = |write_batch, read_buffer| {
            let l = Limits {
                write_batch,
                read_buffer,
                ..Limits::default()
            };
            l.batches_reserve()
        };
        // Append: 4 × 1 MiB + 256 KiB (sharing 3.75 MiB, aligned 4 MiB + 16 KiB).
        assert_eq!(reserve(1 << 20, 256 << 10), 4096 * kib + 256 * kib);
        // Aligned: 4 × (8 KiB + 4 KiB) (sharing 3 × 8.1 KiB, append 32.1 KiB).
        assert_eq!(reserve(8192, 100), 4 * 12 * kib);
        // Sharing: 3 × (4 KiB + 1 MiB) (aligned 259 × 8 KiB, append 1 MiB + 16 KiB).
        assert_eq!(reserve(4096, 1 << 20), 3 * (4 * kib + 1024 * kib));
    }

    #[test]
    fn toml_overrides_some_keys_and_keeps_defaults() {
        let c = Config::from_toml_str(
            "listen = \"127.0.0.1:9000\"\ntokens = [\"t1\"]\n\
             [[users]]\nname = \"a\"\npassword = \"b\"\n\
             [limits]\nfile_bytes = 10\n",
        )
        .unwrap();
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.tokens, ["t1"]);
        assert_eq!(c.users[0].name, "a");
        assert_eq!(c.limits.file_bytes, 10);
        assert_eq!(c.limits.parts, Limits::default().parts);
    }

    /// Rough edge 7 of the first hour: `--listen localhost:8092` failed with
    /// `invalid socket address syntax`.
    #[test]
    fn listen_takes_a_host_name_with_its_port_and_a_bare_port() {
        let v4 = |p| SocketAddr::from(([127, 0, 0, 1], p));
        assert_eq!(parse_listen("localhost:8092"), Ok(v4(8092)));
        assert_eq!(parse_listen("8092"), Ok(v4(8092)));
        assert_eq!(parse_listen(" 127.0.0.1:9 "), Ok(v4(9)));
        assert_eq!(parse_listen("[::1]:80").unwrap().to_string(), "[::1]:80");
        assert_eq!(
            parse_listen("0.0.0.0:80").unwrap().to_string(),
            "0.0.0.0:80"
        );
        for bad in ["localhost", "70000", "host:port", ""] {
            let e = parse_listen(bad).unwrap_err();
            assert!(e.contains("expected HOST:PORT"), "{bad}: {e}");
        }
        let c = Config::from_toml_str("listen = \"localhost:8093\"\n").unwrap();
        assert_eq!(c.listen, v4(8093));
        let c = Config::from_toml_str("listen = \"8094\"\n").unwrap();
        assert_eq!(c.listen, v4(8094));
    }

    #[test]
    fn toml_rejects_unknown_limit_and_bad_values() {
        let e = Config::from_toml_str("[limits]\nfile_byte = 10\n").unwrap_err();
        assert!(e.contains("file_byte"), "{e}");
        let e = Config::from_toml_str("[limits]\nmax_uploads = 0\n").unwrap_err();
        assert!(e.contains("max_uploads"), "{e}");
        let e = Config::from_toml_str("variant_sizes = [300, 150]\n").unwrap_err();
        assert!(e.contains("variant_sizes"), "{e}");
        let c = Config::from_toml_str(
            "variant_sizes = [64, 128]\n[limits]\nvariant_timeout = \"2s\"\n",
        )
        .unwrap();
        assert_eq!(
            (c.variant_sizes, c.limits.variant_timeout),
            (vec![64, 128], 2000)
        );
    }

    #[test]
    fn body_deadline_grows_with_bytes() {
        let l = Limits::default();
        let t = std::time::Instant::now();
        assert_eq!(l.body_deadline(t, 0), Some(t + Duration::from_secs(20)));
        assert_eq!(l.body_deadline(t, 1000), Some(t + Duration::from_secs(22)));
        let off = Limits {
            min_body_rate: 0,
            ..Limits::default()
        };
        assert_eq!(off.body_deadline(t, 1000), None);
    }

    #[test]
    fn quotas_take_one_value_or_a_table_by_role() {
        let c = Config::from_toml_str("[limits]\nquota_bytes = \"10 GiB\"\nquota_items = 50\n")
            .unwrap();
        let l = &c.limits;
        assert_eq!(
            (l.quota_bytes.author, l.quota_bytes.editor),
            (Some(10 << 30), Some(10 << 30))
        );
        assert_eq!(
            l.quota_bytes.admin, None,
            "a plain value leaves admins alone"
        );
        assert_eq!(l.quota_items.author, Some(50));
        let c =
            Config::from_toml_str("[limits]\nquota_bytes = { author = \"1 GiB\", admin = 7 }\n")
                .unwrap();
        let q = c.limits.quota_bytes;
        assert_eq!(
            (q.author, q.editor, q.admin),
            (Some(1 << 30), None, Some(7))
        );
        let e = Config::from_toml_str("[limits]\nquota_bytes = { owner = 1 }\n").unwrap_err();
        assert!(e.contains("table by role"), "{e}");
        assert_eq!(Limits::default().quota_bytes, PerRole::default());
    }

    #[test]
    fn drain_bytes_is_read_as_linger_bytes() {
        let c = Config::from_toml_str("[limits]\ndrain_bytes = 7\n").unwrap();
        assert_eq!(c.limits.linger_bytes, 7);
    }

    #[test]
    fn user_parse() {
        let u = User::parse("bob:pa:ss").unwrap();
        assert_eq!((u.name.as_str(), u.password.as_str()), ("bob", "pa:ss"));
        assert!(User::parse("bob").is_err());
        assert!(User::parse(":x").is_err());
        assert!(User::parse("x:").is_err());
    }

    #[test]
    fn xmlrpc_limits_follow_server_limits() {
        let l = Limits {
            field_bytes: 7,
            fields_total_bytes: 70,
            ..Limits::default()
        };
        let x = l.xmlrpc();
        assert_eq!((x.string_bytes, x.tree_bytes), (7, 70));
        assert_eq!(x.elements, XMLRPC_ELEMENTS);
    }

    #[test]
    fn multipart_limits_follow_server_limits() {
        let l = Limits {
            parts: 3,
            field_bytes: 7,
            ..Limits::default()
        };
        let m = l.multipart();
        assert_eq!((m.parts, m.field_bytes, m.body_bytes), (3, 7, l.body_bytes));
    }
}
