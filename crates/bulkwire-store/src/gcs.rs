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
//!   multipart upload id (noted in the lease, saved in a resumable
//!   upload's row, so any node can go on with it), every part is one
//!   chunk at its fixed offset (`Content-Range: bytes A-B/*`, a multiple of
//!   256 KiB: [`GcsConfig::PART_ALIGN`]), and the last one carries the total
//!   (`bytes A-B/TOTAL`), which finalizes the object. A blob whose size is
//!   a whole number of parts is finalized by an empty `bytes */TOTAL`.
//!   Nothing is visible at the key before that, as with S3.
//!
//! Each part's id records where it ended (`e:END`, or `f:END` for the
//! chunk that finalized), so completing needs no status query: the
//! emulator answers one (`bytes */*`) by finalizing the object.
//! Aborting deletes the session (GCS answers 499).
//!
//! A chunk is sent once its predecessor is settled, never twice by one
//! writer. Unlike S3's parts, a chunk sent again (a writer that took over
//! an upload resending a part its first node sent but did not save) is
//! not idempotent on the emulator, which appends it again; GCS itself
//! expects the client to resume from the offset it reports.

use crate::s3::{invalid, Clients, Cloud, Common, ObjectBlobStore};
use async_trait::async_trait;
use bytes::Bytes;
use object_store::gcp::{GcpCredentialProvider, GoogleCloudStorage, GoogleCloudStorageBuilder};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{ClientOptions, MultipartId, PutPayload, PutResult, RetryConfig};
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
            let mut o = ClientOptions::new().with_connect_timeout(cfg.connect_timeout);
            o = match timeout {
                Some(t) => o.with_timeout(t),
                None => o.with_timeout_disabled(),
            };
            let mut b = GoogleCloudStorageBuilder::new();
            for (k, v) in &cfg.vars {
                if let Ok(key) = k.to_ascii_lowercase().parse() {
                    b = b.with_config(key, v);
                }
            }
            let retry = RetryConfig {
                retry_timeout: cfg.retry_timeout,
                ..RetryConfig::default()
            };
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

impl GcsJson {
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
        let (len, b) = body(payload);
        let req = self
            .http
            .post(self.upload_url("media", key))
            .header("Content-Type", "application/octet-stream")
            .header("Content-Length", len)
            .body(b);
        let r = self.authed(req).await?.send().await.map_err(generic)?;
        expect(r, &[200, 201], key).await.map(drop)
    }

    async fn chunk(
        &self,
        session: &str,
        range: String,
        payload: PutPayload,
        want: &[u16],
        key: &Path,
    ) -> object_store::Result<()> {
        let (len, b) = body(payload);
        let req = self
            .http
            .put(session)
            .header("Content-Range", range)
            .header("Content-Length", len)
            .body(b);
        let r = self.authed(req).await?.send().await.map_err(generic)?;
        expect(r, want, key).await.map(drop)
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
        let start = (part_idx as u64) * self.part_size as u64;
        let len = data.content_length() as u64;
        if len == 0 {
            return Err(generic("an empty chunk"));
        }
        let end = start + len;
        // A whole part goes on; a short one is the last, and finalizes.
        let (range, want, id_of) = match len as usize == self.part_size {
            true => (format!("bytes {start}-{}/*", end - 1), &[308u16][..], "e"),
            false => (
                format!("bytes {start}-{}/{end}", end - 1),
                &[200u16, 201][..],
                "f",
            ),
        };
        self.chunk(id, range, data, want, path).await?;
        Ok(PartId {
            content_id: format!("{id_of}:{end}"),
        })
    }

    async fn complete_multipart(
        &self,
        path: &Path,
        id: &MultipartId,
        parts: Vec<PartId>,
    ) -> object_store::Result<PutResult> {
        let last = parts.last().map(|p| p.content_id.as_str()).unwrap_or("e:0");
        let (kind, end) = last
            .split_once(':')
            .ok_or_else(|| generic(format!("part id {last:?} is not GCS's")))?;
        let total: u64 = end
            .parse()
            .map_err(|_| generic(format!("part id {last:?}")))?;
        if kind != "f" {
            let range = format!("bytes */{total}");
            self.chunk(id, range, PutPayload::default(), &[200, 201], path)
                .await?;
        }
        Ok(PutResult {
            e_tag: None,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn abort_multipart(&self, path: &Path, id: &MultipartId) -> object_store::Result<()> {
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
}
