//! Google Cloud Storage (`gs://BUCKET/PREFIX`): reads, listings and
//! deletes through `object_store`'s GCS client (its credential chain too:
//! a service-account JSON, workload identity, the metadata server), and
//! writes through GCS's JSON API, with a small client here ([`GcsJson`]).
//!
//! Why writes are our own: `object_store` writes with GCS's XML API (a
//! `PUT` per object, S3-style multipart uploads), which the emulator the
//! tests use (fake-gcs-server 1.54) refuses ("invalid uploadType"; the
//! crate's own CI runs a patched fork), and which needs HMAC keys on the
//! S3-compatible path that many organisations disable. The JSON API is
//! where the service and the emulator agree:
//!
//! - a blob smaller than a part is one `uploadType=media` upload;
//! - a larger one is a resumable upload session: its session URI is the
//!   multipart upload id (noted in the lease), every part is one chunk at
//!   its fixed offset (`Content-Range: bytes A-B/*`, a multiple of 256 KiB:
//!   [`GcsConfig::PART_ALIGN`]), and the last one carries the total
//!   (`bytes A-B/TOTAL`), which finalizes the object. A blob whose size is
//!   a whole number of parts is finalized by an empty `bytes */TOTAL`.
//!   Nothing is visible at the key before that, as with S3. GCS may keep
//!   less of a chunk than was sent; its `308`'s `Range` says how much, and
//!   the rest is sent again from there.
//! - a resumable upload's spool ([`crate::spool`]) is no session: its
//!   parts are objects `PREFIX/tus/ID/parts/NNNNNN` (one `media` upload
//!   each, a part sent again replaces it), named in the saved state by
//!   generation and length, and finishing composes them into the key (32
//!   per request, in rounds; each at its saved generation) and deletes
//!   them. Its upload id is `parts:` and their folder; abort deletes them.
//!
//! Why spools cannot use a session: a writer that takes over an upload
//! cannot know whether the one before it (killed, or cut off) got a chunk
//! into the session after the state it saved, and a session keeps what it
//! got. Sending the chunk again is not idempotent: the emulator appends it
//! a second time (fake-gcs-server 1.54 ignores the chunk's offset), and
//! GCS ignores bytes it already has (its docs, "resumable uploads",
//! "resent data"), so the dead writer's stay, whatever the new one sends;
//! asking first (`bytes */*`) is no way out, since the emulator answers
//! that by finalizing the object, and GCS's answer would name bytes no
//! saved state vouches for. Part objects are S3's parts again: the saved
//! state decides which bytes the blob gets. (A spool saved with a session
//! URI, by a node before this layout, goes on in its session.)
//!
//! Each session part's id records where it ended (`e:END`, or `f:END` for
//! the chunk that finalized), so completing needs no status query.
//! Aborting deletes the session (GCS answers 499). A chunk is sent once
//! its predecessor is settled, never twice by one writer.
//!
//! A variant is one `multipart` upload with `ifGenerationMatch=0`: the
//! first one stays (the emulator checks conditions on that kind of upload
//! only).

use crate::s3::{invalid, Clients, Cloud, Common, ObjectBlobStore};
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::gcp::{GcpCredentialProvider, GoogleCloudStorage, GoogleCloudStorageBuilder};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, ObjectStore, ObjectStoreExt, PutPayload, PutResult};
use std::io;
use std::sync::Arc;
use std::time::Duration;

/// `gs://BUCKET/PREFIX` and how to reach it.
#[derive(Debug, Clone)]
pub struct GcsConfig {
    pub bucket: String,
    pub prefix: String,
    /// The JSON API's base URL (`https://storage.googleapis.com`); an
    /// emulator's comes from `gcs_base_url` in the service-account JSON.
    pub part_size: usize,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub retry_timeout: Duration,
    /// Variables (`GOOGLE_*`) for `object_store`'s builder.
    pub vars: Vec<(String, String)>,
}

impl GcsConfig {
    /// Every chunk but the last is a multiple of this (GCS's rule).
    pub const PART_ALIGN: usize = 256 << 10;
    /// GCS's largest object: 5 TiB.
    pub const MAX_OBJECT: u64 = 5 << 40;

    /// `gs://BUCKET[/PREFIX]` with S3's defaults for the rest.
    pub fn from_url(url: &str) -> io::Result<GcsConfig> {
        let (bucket, prefix) = split_url(url, "gs")?;
        Ok(GcsConfig {
            bucket,
            prefix,
            part_size: crate::S3Config::DEFAULT_PART_SIZE,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            retry_timeout: Duration::from_secs(30),
            vars: Vec::new(),
        })
    }

    /// Takes the `GOOGLE_*` variables `object_store` reads
    /// (`GOOGLE_SERVICE_ACCOUNT`, `GOOGLE_SERVICE_ACCOUNT_KEY`,
    /// `GOOGLE_APPLICATION_CREDENTIALS`, …).
    pub fn with_vars(mut self, vars: impl Iterator<Item = (String, String)>) -> GcsConfig {
        self.vars = vars.filter(|(k, _)| k.starts_with("GOOGLE_")).collect();
        self
    }
}

/// `SCHEME://BUCKET[/PREFIX]` → (bucket, prefix without slashes).
pub(crate) fn split_url(url: &str, scheme: &str) -> io::Result<(String, String)> {
    let rest = url
        .split_once("://")
        .filter(|(s, _)| s.eq_ignore_ascii_case(scheme))
        .map(|(_, rest)| rest)
        .ok_or_else(|| invalid(format!("{url:?}: expected {scheme}://BUCKET/PREFIX")))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(invalid(format!("{url:?} names no bucket")));
    }
    Ok((bucket.to_string(), prefix.trim_matches('/').to_string()))
}

const GCS: Cloud = Cloud {
    name: "GCS",
    backend: "gcs",
    max_parts: usize::MAX,
    // `object_store` signs `response-*` parameters into a V4 URL, but GCS
    // has no `response-cache-control` (an object's own metadata says its
    // caching; Google's clients report `response-content-type` losing to
    // an object's stored type); and fake-gcs-server 1.54 neither checks
    // signatures nor applies any `response-*`, so no test could show a
    // redirect keeping an SVG's `attachment`.
    signs_answers: false,
};

impl ObjectBlobStore {
    /// Google Cloud Storage; sends no request.
    pub fn gcs(cfg: GcsConfig) -> io::Result<ObjectBlobStore> {
        if cfg.part_size == 0 || !cfg.part_size.is_multiple_of(GcsConfig::PART_ALIGN) {
            return Err(invalid(format!(
                "GCS part_size {} must be a multiple of 256 KiB (GCS's chunk rule)",
                cfg.part_size
            )));
        }
        crate::s3::install_tls_provider();
        let build = |timeout: Option<Duration>| -> io::Result<GoogleCloudStorage> {
            let o = crate::s3::client_options(cfg.connect_timeout, timeout);
            let mut b = GoogleCloudStorageBuilder::new();
            for (k, v) in &cfg.vars {
                if let Ok(key) = k.to_ascii_lowercase().parse() {
                    b = b.with_config(key, v);
                }
            }
            let retry = crate::s3::retry_config(cfg.retry_timeout);
            b.with_bucket_name(&cfg.bucket)
                .with_client_options(o.with_allow_http(true))
                .with_retry(retry)
                .build()
                .map_err(|e| invalid(format!("GCS client for bucket {}: {e}", cfg.bucket)))
        };
        let store = build(Some(cfg.timeout))?;
        let reader = build(None)?;
        let base = base_url(&cfg.vars);
        let json = Arc::new(GcsJson {
            http: reqwest::Client::builder()
                .connect_timeout(cfg.connect_timeout)
                .timeout(cfg.timeout)
                .build()
                .map_err(io::Error::other)?,
            base: base.clone(),
            bucket: cfg.bucket.clone(),
            creds: store.credentials().clone(),
            part_size: cfg.part_size,
            objects: Arc::new(store.clone()),
        });
        let credentials = credentials_source(&cfg.vars);
        let clients = Clients {
            store: Arc::new(store.clone()),
            reader: Arc::new(reader),
            parts: json.clone(),
            pager: Some(Arc::new(store.clone())),
            signer: Arc::new(store),
            put: Some(json),
        };
        let common = Common {
            bucket: cfg.bucket,
            prefix: cfg.prefix,
            endpoint: (base != DEFAULT_BASE).then_some(base),
            part_size: cfg.part_size,
            timeout: cfg.timeout,
            credentials,
        };
        ObjectBlobStore::with(GCS, clients, &common)
    }
}

const DEFAULT_BASE: &str = "https://storage.googleapis.com";

/// The emulator's `gcs_base_url` from the service-account JSON, else GCS.
fn base_url(vars: &[(String, String)]) -> String {
    let key = vars
        .iter()
        .find(|(k, _)| k == "GOOGLE_SERVICE_ACCOUNT_KEY")
        .map(|(_, v)| v.clone())
        .or_else(|| {
            let path = vars.iter().find(|(k, _)| {
                matches!(
                    k.as_str(),
                    "GOOGLE_SERVICE_ACCOUNT"
                        | "GOOGLE_SERVICE_ACCOUNT_PATH"
                        | "GOOGLE_APPLICATION_CREDENTIALS"
                )
            })?;
            std::fs::read_to_string(&path.1).ok()
        });
    key.and_then(|k| serde_json::from_str::<serde_json::Value>(&k).ok())
        .and_then(|v| v.get("gcs_base_url")?.as_str().map(str::to_string))
        .unwrap_or_else(|| DEFAULT_BASE.to_string())
        .trim_end_matches('/')
        .to_string()
}

/// What `--check` says of the credentials (never the key itself).
fn credentials_source(vars: &[(String, String)]) -> String {
    for (k, v) in vars {
        match k.as_str() {
            "GOOGLE_SERVICE_ACCOUNT_KEY" => {
                return "a service-account key (GOOGLE_SERVICE_ACCOUNT_KEY)".into()
            }
            "GOOGLE_SERVICE_ACCOUNT"
            | "GOOGLE_SERVICE_ACCOUNT_PATH"
            | "GOOGLE_APPLICATION_CREDENTIALS" => return format!("{k}={v}"),
            _ => {}
        }
    }
    "application default credentials, else the metadata server (workload identity)".into()
}

/// GCS's JSON API for writes (see the module doc).
pub(crate) struct GcsJson {
    http: reqwest::Client,
    base: String,
    bucket: String,
    creds: GcpCredentialProvider,
    part_size: usize,
    /// `object_store`'s client, to list and delete a spool's part objects.
    objects: Arc<dyn ObjectStore>,
}

impl std::fmt::Debug for GcsJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GcsJson({}/{})", self.base, self.bucket)
    }
}

fn generic(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> object_store::Error {
    object_store::Error::Generic {
        store: "GCS",
        source: e.into(),
    }
}

fn body(payload: PutPayload) -> (u64, reqwest::Body) {
    let len = payload.content_length() as u64;
    let chunks: Vec<Bytes> = payload.into_iter().collect();
    let s = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, io::Error>));
    (len, reqwest::Body::wrap_stream(s))
}

/// The bytes of `payload` after its first `n`.
fn skip(payload: &PutPayload, mut n: usize) -> PutPayload {
    let mut rest = Vec::new();
    for b in payload.iter() {
        match n >= b.len() {
            true => n -= b.len(),
            false => {
                rest.push(b.slice(n..));
                n = 0;
            }
        }
    }
    rest.into_iter().collect()
}

/// What a session holds after a `308`: its `Range: bytes=0-N` says `N+1`
/// bytes, no `Range` none.
fn persisted(r: &reqwest::Response) -> object_store::Result<u64> {
    let Some(v) = r.headers().get("range") else {
        return Ok(0);
    };
    let last = v
        .to_str()
        .ok()
        .and_then(|s| s.strip_prefix("bytes=0-"))
        .and_then(|n| n.parse::<u64>().ok());
    last.map(|n| n + 1)
        .ok_or_else(|| generic(format!("a 308 with Range {v:?}")))
}

/// An object a compose names: where, which generation, how long.
struct Source {
    name: Path,
    generation: String,
    len: u64,
}

impl Source {
    /// From an upload's or a compose's answer (the object resource, whose
    /// int64 fields are JSON strings).
    async fn answered(name: Path, r: reqwest::Response) -> object_store::Result<Source> {
        let v: serde_json::Value =
            serde_json::from_slice(&r.bytes().await.map_err(generic)?).map_err(generic)?;
        let field = |k: &str| match &v[k] {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        let (Some(generation), Some(len)) = (field("generation"), field("size")) else {
            return Err(generic(format!("{name}: no generation or size in {v}")));
        };
        let len = len.parse().map_err(generic)?;
        Ok(Source {
            name,
            generation,
            len,
        })
    }

    /// Part `idx` of the upload in `dir`, as its id (`GENERATION:LEN`) names it.
    fn part(dir: &Path, idx: usize, id: &PartId) -> object_store::Result<Source> {
        let (generation, len) = id
            .content_id
            .split_once(':')
            .filter(|(g, _)| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|(g, l)| Some((g.to_string(), l.parse().ok()?)))
            .ok_or_else(|| {
                generic(format!(
                    "part id {:?} is not a part object's",
                    id.content_id
                ))
            })?;
        Ok(Source {
            name: part_key(dir, idx),
            generation,
            len,
        })
    }
}

/// A spool's upload of part objects: this, then the folder of its parts.
const PARTS: &str = "parts:";
/// GCS composes at most 32 objects in one request.
const COMPOSE_MAX: usize = 32;

/// The folder of a part-object upload; `None` for a session URI.
fn parts_dir(id: &str) -> object_store::Result<Option<Path>> {
    id.strip_prefix(PARTS)
        .map(|d| Path::parse(d).map_err(generic))
        .transpose()
}

fn part_key(dir: &Path, idx: usize) -> Path {
    dir.clone().join(format!("{idx:06}").as_str())
}

impl GcsJson {
    /// A spool's upload: its parts will be objects under `dir`, composed
    /// at the end (see the module doc). Sends no request.
    pub(crate) fn parts_upload(&self, dir: &Path) -> MultipartId {
        format!("{PARTS}{dir}")
    }

    async fn authed(
        &self,
        req: reqwest::RequestBuilder,
    ) -> object_store::Result<reqwest::RequestBuilder> {
        let c = self.creds.get_credential().await?;
        Ok(match c.bearer.is_empty() {
            true => req,
            false => req.bearer_auth(&c.bearer),
        })
    }

    fn upload_url(&self, kind: &str, key: &Path) -> String {
        let name: String = form_urlencoded(key.as_ref());
        format!(
            "{}/upload/storage/v1/b/{}/o?uploadType={kind}&name={name}",
            self.base, self.bucket
        )
    }

    /// One `uploadType=media` upload.
    pub(crate) async fn put(&self, key: &Path, payload: PutPayload) -> object_store::Result<()> {
        self.media(key, payload).await.map(drop)
    }

    /// A create-only write (`ifGenerationMatch=0`): false where an object
    /// is there already. A `multipart` upload (metadata, then the bytes),
    /// the one kind whose conditions the emulator (1.54) checks.
    pub(crate) async fn put_new(&self, key: &Path, bytes: Bytes) -> object_store::Result<bool> {
        let boundary = format!("bulkwire-{}", crate::new_id());
        let head = format!(
            "--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{{}}\r\n\
             --{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
        );
        let tail = format!("\r\n--{boundary}--\r\n");
        let parts = [Bytes::from(head), bytes, Bytes::from(tail)];
        let (len, b) = body(parts.into_iter().collect());
        let url = format!("{}&ifGenerationMatch=0", self.upload_url("multipart", key));
        let req = (self.http.post(url))
            .header(
                "Content-Type",
                format!("multipart/related; boundary={boundary}"),
            )
            .header("Content-Length", len)
            .body(b);
        let r = self.authed(req).await?.send().await.map_err(generic)?;
        match r.status().as_u16() {
            412 => Ok(false),
            _ => expect(r, &[200, 201], key).await.map(|_| true),
        }
    }

    async fn media(
        &self,
        key: &Path,
        payload: PutPayload,
    ) -> object_store::Result<reqwest::Response> {
        let (len, b) = body(payload);
        let req = self
            .http
            .post(self.upload_url("media", key))
            .header("Content-Type", "application/octet-stream")
            .header("Content-Length", len)
            .body(b);
        let r = self.authed(req).await?.send().await.map_err(generic)?;
        expect(r, &[200, 201], key).await
    }

    async fn chunk(
        &self,
        session: &str,
        range: String,
        payload: PutPayload,
        want: &[u16],
        key: &Path,
    ) -> object_store::Result<reqwest::Response> {
        let (len, b) = body(payload);
        let req = self
            .http
            .put(session)
            .header("Content-Range", range)
            .header("Content-Length", len)
            .body(b);
        let r = self.authed(req).await?.send().await.map_err(generic)?;
        expect(r, want, key).await
    }

    /// Part `idx` of a session, one chunk at its fixed offset; a short one
    /// is the last, and finalizes. GCS may keep less than a request
    /// carried ("you should not assume that the server received all bytes
    /// sent"): its `308` says how much, and the rest goes again.
    async fn session_part(
        &self,
        key: &Path,
        session: &str,
        idx: usize,
        data: PutPayload,
    ) -> object_store::Result<PartId> {
        let start = (idx as u64) * self.part_size as u64;
        let len = data.content_length() as u64;
        if len == 0 {
            return Err(generic("an empty chunk"));
        }
        let end = start + len;
        let last = len as usize != self.part_size;
        let total = match last {
            true => end.to_string(),
            false => "*".into(),
        };
        let (mut at, mut data) = (start, data);
        loop {
            let range = format!("bytes {at}-{}/{total}", end - 1);
            let r = self.chunk(session, range, data.clone(), &[200, 201, 308], key);
            let r = r.await?;
            if r.status().as_u16() != 308 {
                return match last {
                    true => Ok(PartId {
                        content_id: format!("f:{end}"),
                    }),
                    false => Err(generic(format!("{key}: finalized before its end"))),
                };
            }
            let held = persisted(&r)?;
            if !last && held >= end {
                return Ok(PartId {
                    content_id: format!("e:{end}"),
                });
            }
            if held <= at || held >= end {
                let e = format!("{key}: GCS holds {held} bytes after a chunk from {at} to {end}");
                return Err(generic(e));
            }
            data = skip(&data, (held - at) as usize);
            at = held;
        }
    }

    /// Finalizes a session whose last part was whole (`e:END`), unless
    /// the last chunk did (`f:END`).
    async fn session_complete(
        &self,
        key: &Path,
        session: &str,
        parts: &[PartId],
    ) -> object_store::Result<()> {
        let last = parts.last().map(|p| p.content_id.as_str()).unwrap_or("e:0");
        let (kind, end) = last
            .split_once(':')
            .ok_or_else(|| generic(format!("part id {last:?} is not GCS's")))?;
        let total: u64 = end
            .parse()
            .map_err(|_| generic(format!("part id {last:?}")))?;
        if kind != "f" {
            let range = format!("bytes */{total}");
            self.chunk(session, range, PutPayload::default(), &[200, 201], key)
                .await?;
        }
        Ok(())
    }

    /// Part `idx` of a spool: an object of its own, replaced if sent again.
    async fn object_part(
        &self,
        dir: &Path,
        idx: usize,
        data: PutPayload,
    ) -> object_store::Result<PartId> {
        let name = part_key(dir, idx);
        let r = self.media(&name, data).await?;
        let s = Source::answered(name, r).await?;
        Ok(PartId {
            content_id: format!("{}:{}", s.generation, s.len),
        })
    }

    /// Composes the parts the ids name (each at the generation its id
    /// saved, never a later one) into `key`, 32 at a time, then removes
    /// the part objects.
    async fn compose_parts(
        &self,
        key: &Path,
        dir: &Path,
        parts: &[PartId],
    ) -> object_store::Result<()> {
        let mut sources = (parts.iter().enumerate())
            .map(|(i, p)| Source::part(dir, i, p))
            .collect::<object_store::Result<Vec<_>>>()?;
        let want: u64 = sources.iter().map(|s| s.len).sum();
        let mut level = 0;
        while sources.len() > COMPOSE_MAX {
            let mut next = Vec::with_capacity(sources.len().div_ceil(COMPOSE_MAX));
            for (i, group) in sources.chunks(COMPOSE_MAX).enumerate() {
                next.push(
                    self.compose(dir.clone().join(format!("c{level}-{i:06}").as_str()), group)
                        .await?,
                );
            }
            sources = next;
            level += 1;
        }
        if sources.is_empty() {
            return Err(generic(format!("{key}: no part to compose")));
        }
        let made = self.compose(key.clone(), &sources).await?;
        if made.len != want {
            let e = format!("{key}: composed {} bytes of parts holding {want}", made.len);
            return Err(generic(e));
        }
        if let Err(e) = self.remove_parts(dir).await {
            tracing::warn!("GCS {dir}: {e} (removed with the upload)");
        }
        Ok(())
    }

    async fn compose(&self, dest: Path, sources: &[Source]) -> object_store::Result<Source> {
        let objects: Vec<serde_json::Value> = (sources.iter())
            .map(|s| {
                serde_json::json!({
                    "name": s.name.as_ref(),
                    "objectPreconditions": { "ifGenerationMatch": s.generation },
                })
            })
            .collect();
        let request = serde_json::json!({
            "sourceObjects": objects,
            "destination": { "contentType": "application/octet-stream" },
        });
        let url = format!(
            "{}/storage/v1/b/{}/o/{}/compose",
            self.base,
            self.bucket,
            form_urlencoded(dest.as_ref())
        );
        let req = (self.http.post(url))
            .header("Content-Type", "application/json")
            .body(request.to_string());
        let r = self.authed(req).await?.send().await.map_err(generic)?;
        let r = expect(r, &[200], &dest).await?;
        Source::answered(dest, r).await
    }

    /// Deletes every object under `dir`.
    async fn remove_parts(&self, dir: &Path) -> object_store::Result<()> {
        let keys: Vec<Path> = (self.objects.list(Some(dir)))
            .map_ok(|m| m.location)
            .try_collect()
            .await?;
        for k in keys {
            match self.objects.delete(&k).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The answer must have one of `want`; else an error with its body (a
/// session the service no longer knows is `NotFound`).
async fn expect(
    r: reqwest::Response,
    want: &[u16],
    key: &Path,
) -> object_store::Result<reqwest::Response> {
    let status = r.status().as_u16();
    if want.contains(&status) {
        return Ok(r);
    }
    let text = r.text().await.unwrap_or_default();
    let e = format!(
        "HTTP {status}: {}",
        text.chars().take(300).collect::<String>()
    );
    Err(match status {
        404 | 410 => object_store::Error::NotFound {
            path: key.to_string(),
            source: e.into(),
        },
        _ => generic(e),
    })
}

/// `%XX` for everything but unreserved characters.
fn form_urlencoded(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Sessions for uploads (`create_multipart`), part objects for spools
/// ([`GcsJson::parts_upload`]); the id says which an upload is.
#[async_trait]
impl MultipartStore for GcsJson {
    async fn create_multipart(&self, path: &Path) -> object_store::Result<MultipartId> {
        let req = self
            .http
            .post(self.upload_url("resumable", path))
            .header("Content-Type", "application/json")
            .header("X-Upload-Content-Type", "application/octet-stream")
            .body("{}");
        let r = self.authed(req).await?.send().await.map_err(generic)?;
        let r = expect(r, &[200, 201], path).await?;
        let session = r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| generic("a resumable upload without a session URI"))?;
        Ok(session.to_string())
    }

    async fn put_part(
        &self,
        path: &Path,
        id: &MultipartId,
        part_idx: usize,
        data: PutPayload,
    ) -> object_store::Result<PartId> {
        match parts_dir(id)? {
            Some(dir) => self.object_part(&dir, part_idx, data).await,
            None => self.session_part(path, id, part_idx, data).await,
        }
    }

    async fn complete_multipart(
        &self,
        path: &Path,
        id: &MultipartId,
        parts: Vec<PartId>,
    ) -> object_store::Result<PutResult> {
        match parts_dir(id)? {
            Some(dir) => self.compose_parts(path, &dir, &parts).await?,
            None => self.session_complete(path, id, &parts).await?,
        }
        Ok(PutResult {
            e_tag: None,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn abort_multipart(&self, path: &Path, id: &MultipartId) -> object_store::Result<()> {
        if let Some(dir) = parts_dir(id)? {
            return self.remove_parts(&dir).await;
        }
        let req = self.http.delete(id.as_str());
        let r = self.authed(req).await?.send().await.map_err(generic)?;
        // GCS answers a cancelled session with 499.
        expect(r, &[200, 204, 499], path).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_rules() {
        let c = GcsConfig::from_url("gs://b/a/b/").unwrap();
        assert_eq!((c.bucket.as_str(), c.prefix.as_str()), ("b", "a/b"));
        assert!(GcsConfig::from_url("s3://b").is_err());
        let mut c = GcsConfig::from_url("gs://b").unwrap();
        c.part_size = (5 << 20) + 1;
        let e = ObjectBlobStore::gcs(c).unwrap_err().to_string();
        assert!(e.contains("multiple of 256 KiB"), "{e}");
        assert_eq!(form_urlencoded("p/tus/x y"), "p%2Ftus%2Fx%20y");
    }

    #[test]
    fn part_objects_and_what_a_session_holds() {
        let dir = Path::parse("p/tus/ab/parts").unwrap();
        let id = format!("{PARTS}{dir}");
        assert_eq!(parts_dir(&id).unwrap(), Some(dir.clone()));
        assert_eq!(parts_dir("https://h/upload?upload_id=x").unwrap(), None);
        let p = PartId {
            content_id: "1712:5242880".into(),
        };
        let s = Source::part(&dir, 7, &p).unwrap();
        assert_eq!(s.name.as_ref(), "p/tus/ab/parts/000007");
        assert_eq!((s.generation.as_str(), s.len), ("1712", 5 << 20));
        let session = PartId {
            content_id: "e:5242880".into(),
        };
        assert!(Source::part(&dir, 0, &session).is_err());
        let payload: PutPayload = [Bytes::from_static(b"abc"), Bytes::from_static(b"defg")]
            .into_iter()
            .collect();
        let rest = |n| skip(&payload, n).into_iter().flatten().collect::<Vec<u8>>();
        assert_eq!(rest(0), b"abcdefg");
        assert_eq!(rest(3), b"defg");
        assert_eq!(rest(5), b"fg");
        assert_eq!(rest(7), b"");
    }
}
