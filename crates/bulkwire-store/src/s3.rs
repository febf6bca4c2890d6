//! Blobs in an S3-compatible object store (AWS S3, SeaweedFS, Ceph, Garage,
//! R2) through `object_store`'s low-level multipart API (DESIGN.md
//! "Storage: embedded by default, real engines to scale out").
//!
//! How "temporary object → committed" maps onto S3: an upload is a
//! multipart upload at the blob's final key `PREFIX/ID`. S3 shows nothing
//! at that key until `CompleteMultipartUpload`, which [`BlobWriter::commit`]
//! sends only once the last byte is in (and so the caller's hash); the
//! media row is inserted after the commit, and the upload's lease covers
//! everything in between. The multipart upload id is noted in the lease
//! ([`Lease::note`]) before the first part is sent, so that any node's
//! janitor can abort it; once completed, the lease's abort deletes the key.
//! A blob smaller than one part is a single `PUT` at commit: nothing exists
//! before it, and afterwards the key is all there is to remove. The one
//! window no lease covers is between `CreateMultipartUpload` and the note
//! (a crash there leaves an upload id nobody recorded): the bucket's
//! lifecycle rule `AbortIncompleteMultipartUpload` is the backstop, and
//! every bucket bulkwire writes to should have one.
//!
//! Bounded memory (DESIGN.md "Bounded memory is a contract"): a writer
//! holds at most two parts, one being filled and one being sent on a
//! spawned task, both made of the caller's `Bytes` (slices of them where a
//! part ends inside a chunk), never copied into one buffer. `write` waits
//! for the part in flight before handing over the next one: that wait is
//! the backpressure, and [`BlobStore::upload_memory`] is two parts. A slice
//! keeps its whole chunk alive, so callers pass chunks far smaller than a
//! part (the server's batches are). Parts are exactly `part_size` but the
//! last, as S3 (every part but the last at least 5 MiB) and R2 (equal
//! parts) require; S3 allows 10,000 parts, so a blob may be at most
//! `10,000 × part_size`.
//!
//! A dead S3 fails uploads instead of hanging them: each request has a
//! total timeout and a connect timeout, and `object_store` retries
//! transient failures with backoff for at most `retry_timeout`. Reads use
//! a second client without a total timeout (a large blob streamed to a
//! slow client may take hours); there the response headers, and each body
//! chunk while the reader waits for it, must come within `timeout`.
//!
//! TLS is rustls with the `ring` provider: `object_store`'s `aws` feature
//! would compile `aws-lc-sys`, a C build of minutes.

use crate::aws_creds::Source;
use crate::{is_id, BlobStore, BlobStream, BlobWriter, BoxFut, Lease, Spool, SpoolWriter};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::signer::{SignedUrlOptions, Signer};
use object_store::{
    ClientOptions, GetOptions, MultipartId, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig,
};
use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Where and how to reach the bucket. Build it with
/// [`S3Config::from_url`], then [`S3Config::with_env`] or set fields.
#[derive(Clone)]
pub struct S3Config {
    pub bucket: String,
    /// Key prefix without leading or trailing `/`; empty: keys are bare ids.
    pub prefix: String,
    /// An S3-compatible server (`http://127.0.0.1:8333`): addressed
    /// path-style. `None`: AWS itself.
    pub endpoint: Option<String>,
    /// Empty: [`S3Config::DEFAULT_REGION`].
    pub region: String,
    /// `[s3]`'s own keys; `None`: the AWS credential chain
    /// ([`crate::aws_creds`]) picks a source.
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// With temporary keys: their session token (`X-Amz-Security-Token`).
    pub session_token: Option<String>,
    /// The source the chain picked ([`S3Config::with_env`]); `None`: only
    /// `[s3]`'s keys, if any (the chain is not consulted).
    pub credentials: Option<Result<Source, String>>,
    /// How long the EC2 instance metadata service may take to answer the
    /// start's probe when the chain falls back to it.
    pub metadata_timeout: Duration,
    /// Allows a plain `http://` endpoint.
    pub allow_http: bool,
    /// Bytes per part, at least [`S3Config::MIN_PART_SIZE`]. A writer holds two.
    pub part_size: usize,
    /// One request, from connecting to its last byte, so it must cover
    /// sending one part (reads: until the headers, and each body chunk).
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// How long a failing request is retried, with backoff.
    pub retry_timeout: Duration,
}

impl S3Config {
    /// S3's smallest part (all but the last part of a multipart upload).
    pub const MIN_PART_SIZE: usize = 5 << 20;
    /// S3's largest part.
    pub const MAX_PART_SIZE: usize = 5 << 30;
    /// S3's most parts in one multipart upload.
    pub const MAX_PARTS: usize = 10_000;
    /// The default part size: S3's minimum plus room, in few requests.
    pub const DEFAULT_PART_SIZE: usize = 8 << 20;
    /// The region when neither the configuration nor `AWS_REGION` names one.
    pub const DEFAULT_REGION: &'static str = "us-east-1";

    /// `s3://BUCKET` or `s3://BUCKET/PREFIX`, with the defaults: 8 MiB
    /// parts, 60 s per request, 5 s to connect, 30 s of retries.
    pub fn from_url(url: &str) -> io::Result<S3Config> {
        let rest = url
            .split_once("://")
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("s3"))
            .map(|(_, rest)| rest)
            .ok_or_else(|| invalid(format!("S3 URL {url:?}: expected s3://BUCKET/PREFIX")))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(invalid(format!("S3 URL {url:?} names no bucket")));
        }
        Ok(S3Config {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            endpoint: None,
            region: String::new(),
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
            credentials: None,
            metadata_timeout: Duration::from_secs(1),
            allow_http: false,
            part_size: S3Config::DEFAULT_PART_SIZE,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            retry_timeout: Duration::from_secs(30),
        })
    }

    /// Fills unset fields from `AWS_ENDPOINT_URL`, `AWS_REGION` (else
    /// [`S3Config::DEFAULT_REGION`]) and `AWS_ALLOW_HTTP` (`true` or `1`),
    /// and picks the credential source: `[s3]`'s keys, else the AWS chain
    /// ([`crate::aws_creds`]: environment, profile, web identity,
    /// container, instance metadata).
    pub fn with_env(self) -> S3Config {
        self.with_vars(|k| std::env::var(k).ok())
    }

    /// As [`S3Config::with_env`], with `var` for the environment (tests).
    pub fn with_vars(mut self, var: impl Fn(&str) -> Option<String>) -> S3Config {
        let var = |k: &str| var(k).filter(|v| !v.is_empty());
        self.endpoint = self.endpoint.or_else(|| var("AWS_ENDPOINT_URL"));
        let keys = (
            self.access_key_id.clone(),
            self.secret_access_key.clone(),
            self.session_token.clone(),
        );
        self.credentials = Some(Source::pick(keys, &var));
        if self.region.is_empty() {
            self.region = var("AWS_REGION").unwrap_or_else(|| S3Config::DEFAULT_REGION.to_string());
        }
        let yes = |v: String| v.eq_ignore_ascii_case("true") || v == "1";
        self.allow_http |= var("AWS_ALLOW_HTTP").is_some_and(yes);
        self
    }

    fn check(&self) -> io::Result<()> {
        if let Some(Err(e)) = &self.credentials {
            return Err(invalid(format!("S3: {e}")));
        }
        if self.metadata_timeout.is_zero() {
            return Err(invalid(
                "S3 metadata_timeout must not be zero ([s3] metadata_timeout_ms)".into(),
            ));
        }
        if self.bucket.is_empty() {
            return Err(invalid("S3: no bucket configured".into()));
        }
        if !(S3Config::MIN_PART_SIZE..=S3Config::MAX_PART_SIZE).contains(&self.part_size) {
            return Err(invalid(format!(
                "S3 part_size {} is outside S3's limits: at least 5 MiB ({} bytes, \
                 MIN_PART_SIZE: every part but the last), at most 5 GiB",
                self.part_size,
                S3Config::MIN_PART_SIZE,
            )));
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(invalid(
                "S3 timeout and connect_timeout must not be zero".into(),
            ));
        }
        let plain = self
            .endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"));
        if plain && !self.allow_http {
            return Err(invalid(format!(
                "S3 endpoint {} is plain HTTP: set allow_http (AWS_ALLOW_HTTP=true) to use it",
                self.endpoint.as_deref().unwrap_or_default()
            )));
        }
        Ok(())
    }

    /// The source the chain picked, else `[s3]`'s keys, else the chain
    /// without the environment (a config built in code).
    fn source(&self) -> Source {
        match &self.credentials {
            Some(Ok(s)) => s.clone(),
            _ => {
                let keys = (
                    self.access_key_id.clone(),
                    self.secret_access_key.clone(),
                    self.session_token.clone(),
                );
                Source::pick(keys, &|_| None).unwrap_or(Source::Instance {
                    endpoint: crate::aws_creds::DEFAULT_METADATA_ENDPOINT.into(),
                })
            }
        }
    }

    fn region(&self) -> &str {
        if self.region.is_empty() {
            S3Config::DEFAULT_REGION
        } else {
            &self.region
        }
    }

    fn client(&self, client: ClientOptions) -> io::Result<AmazonS3> {
        let retry = retry_config(self.retry_timeout);
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(&self.bucket)
            .with_region(self.region())
            .with_client_options(client.with_allow_http(self.allow_http))
            .with_retry(retry)
            // One `DELETE` per blob: every S3 has it, unlike bulk delete.
            .with_disable_bulk_delete(true)
            // SigV4 over `UNSIGNED-PAYLOAD`: signing the payload would hash
            // every byte with SHA-256 a second time (the server already
            // hashes each upload for its row), which measured as a third
            // of the node's CPU per GiB. The request head stays signed;
            // the bytes are protected by TLS (and, over plain HTTP on a
            // private network, by TCP's checksum) and by the sha256 the
            // server computes and returns.
            .with_unsigned_payload(true);
        if let Some(endpoint) = &self.endpoint {
            b = b
                .with_endpoint(endpoint.trim_end_matches('/'))
                .with_virtual_hosted_style_request(false);
        }
        b = self.source().apply(b);
        b.build()
            .map_err(|e| invalid(format!("S3 client for bucket {}: {e}", self.bucket)))
    }
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = self.secret_access_key.as_ref().map(|_| "<redacted>");
        let token = self.session_token.as_ref().map(|_| "<redacted>");
        f.debug_struct("S3Config")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &secret)
            .field("session_token", &token)
            .field("credentials", &self.credentials)
            .field("allow_http", &self.allow_http)
            .field("part_size", &self.part_size)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry_timeout", &self.retry_timeout)
            .finish()
    }
}

pub(crate) fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// reqwest is built without a TLS crypto provider of its own (its default
/// would compile aws-lc-sys): `ring` becomes the process default, unless
/// the program installed one already, which then serves S3 as well.
pub(crate) fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Blobs in one bucket (container) of an object store under one prefix:
/// S3 ([`ObjectBlobStore::new`]), Azure Blob Storage
/// ([`ObjectBlobStore::azure`]) or Google Cloud Storage
/// ([`ObjectBlobStore::gcs`]). One implementation over `object_store`'s
/// traits (REVIEW.md item 4): what differs per service is its client, its
/// multipart mechanics ([`MultipartStore`]: S3's parts, Azure's blocks,
/// GCS's resumable session) and its part rules ([`Cloud`]). Cheap to clone.
#[derive(Clone)]
pub struct ObjectBlobStore {
    s3: Arc<Shared>,
}

/// The S3 store is the object store with S3's client.
pub type S3BlobStore = ObjectBlobStore;

/// What differs between the services beyond their clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cloud {
    /// In messages: `S3`, `Azure`, `GCS`.
    pub(crate) name: &'static str,
    /// In metrics: `s3`, `azure`, `gcs`.
    pub(crate) backend: &'static str,
    /// Most parts (blocks, chunks) of one object.
    pub(crate) max_parts: usize,
    /// Whether a presigned GET can carry the item's `Content-Type`,
    /// `Content-Disposition` and `Cache-Control`, signed, and the service
    /// answers with them ([`BlobStore::presign_get`]). Where it cannot,
    /// downloads are never redirected: an SVG answered without its
    /// `attachment` would run as a page on the store's origin.
    pub(crate) signs_answers: bool,
}

impl Cloud {
    pub(crate) const S3: Cloud = Cloud {
        name: "S3",
        backend: "s3",
        max_parts: S3Config::MAX_PARTS,
        // SigV4 signs `response-content-type`, `-disposition` and
        // `-cache-control` with the rest of the query.
        signs_answers: true,
    };
}

/// One service's clients, as [`Shared`] holds them.
pub(crate) struct Clients {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) reader: Arc<dyn ObjectStore>,
    pub(crate) parts: Arc<dyn MultipartStore>,
    /// A cheap one-key listing, where the service has one.
    pub(crate) pager: Option<Arc<dyn PaginatedListStore>>,
    /// Presigned URLs (the downloads' redirect option).
    pub(crate) signer: Arc<dyn Signer>,
    /// Single-request writes, where `store.put` is not the service's way
    /// (GCS's emulator takes only the JSON API's uploads).
    pub(crate) put: Option<Arc<crate::gcs::GcsJson>>,
}

/// What the store and its writers share.
pub(crate) struct Shared {
    pub(crate) cloud: Cloud,
    /// Writes and small requests: every request has a total timeout.
    pub(crate) store: Arc<dyn ObjectStore>,
    /// Ranged reads: no total timeout (see the module doc).
    reader: Arc<dyn ObjectStore>,
    parts: Arc<dyn MultipartStore>,
    pager: Option<Arc<dyn PaginatedListStore>>,
    signer: Arc<dyn Signer>,
    put_json: Option<Arc<crate::gcs::GcsJson>>,
    bucket: String,
    pub(crate) prefix: Path,
    endpoint: Option<String>,
    pub(crate) part_size: usize,
    timeout: Duration,
    /// Where the keys come from, for `--check` and the start's probe
    /// (S3's chain; the other services name theirs in `credentials`).
    source: Option<Source>,
    /// What `--check` says of the credentials on the other services.
    credentials: String,
    metadata_timeout: Duration,
    /// The instance metadata service answered once: no need to ask again.
    metadata_seen: std::sync::atomic::AtomicBool,
}

impl ObjectBlobStore {
    /// Checks `cfg` and builds the S3 clients; sends no request (see
    /// [`BlobStore::ready`] and [`BlobStore::describe`]).
    pub fn new(cfg: S3Config) -> io::Result<ObjectBlobStore> {
        cfg.check()?;
        install_tls_provider();
        let store = cfg.client(client_options(cfg.connect_timeout, Some(cfg.timeout)))?;
        let reader = cfg.client(client_options(cfg.connect_timeout, None))?;
        let clients = Clients {
            store: Arc::new(store.clone()),
            reader: Arc::new(reader),
            parts: Arc::new(store.clone()),
            pager: Some(Arc::new(store.clone())),
            signer: Arc::new(store),
            put: None,
        };
        let mut s = ObjectBlobStore::with(Cloud::S3, clients, &cfg.common())?;
        let shared = Arc::get_mut(&mut s.s3).expect("not shared yet");
        shared.source = Some(cfg.source());
        shared.metadata_timeout = cfg.metadata_timeout;
        Ok(s)
    }

    /// The store over one service's clients.
    pub(crate) fn with(cloud: Cloud, c: Clients, cfg: &Common) -> io::Result<ObjectBlobStore> {
        let prefix = Path::parse(&cfg.prefix)
            .map_err(|e| invalid(format!("{} prefix {:?}: {e}", cloud.name, cfg.prefix)))?;
        Ok(ObjectBlobStore {
            s3: Arc::new(Shared {
                cloud,
                store: c.store,
                reader: c.reader,
                parts: c.parts,
                pager: c.pager,
                signer: c.signer,
                put_json: c.put,
                bucket: cfg.bucket.clone(),
                prefix,
                endpoint: cfg.endpoint.clone(),
                part_size: cfg.part_size,
                timeout: cfg.timeout,
                source: None,
                credentials: cfg.credentials.clone(),
                metadata_timeout: Duration::from_secs(1),
                metadata_seen: Default::default(),
            }),
        })
    }
}

/// What every service's store needs beyond its client.
pub(crate) struct Common {
    pub(crate) bucket: String,
    pub(crate) prefix: String,
    pub(crate) endpoint: Option<String>,
    pub(crate) part_size: usize,
    pub(crate) timeout: Duration,
    pub(crate) credentials: String,
}

impl S3Config {
    fn common(&self) -> Common {
        Common {
            bucket: self.bucket.clone(),
            prefix: self.prefix.clone(),
            endpoint: self.endpoint.clone(),
            part_size: self.part_size,
            timeout: self.timeout,
            credentials: String::new(),
        }
    }
}

impl fmt::Debug for ObjectBlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectBlobStore")
            .field("service", &self.s3.cloud.name)
            .field("bucket", &self.s3.bucket)
            .field("prefix", &self.s3.prefix.as_ref())
            .field("endpoint", &self.s3.endpoint)
            .field("part_size", &self.s3.part_size)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// `len` bytes of the object at `key` from `offset`.
    async fn ranged(self: Arc<Self>, key: Path, offset: u64, len: u64) -> io::Result<BlobStream> {
        if len == 0 {
            return Ok(Box::pin(futures_util::stream::empty()) as BlobStream);
        }
        let overflow = || self.error("get", &key, io::ErrorKind::InvalidInput, "bad range");
        let end = offset.checked_add(len).ok_or_else(overflow)?;
        let opts = GetOptions::new().with_range(Some(offset..end));
        let get = self.timed("get", &key, self.reader.get_opts(&key, opts));
        let body = get.await?.into_stream();
        Ok(read_stream(self, key, body))
    }

    /// The key of variant `name` of blob `id`: `PREFIX/ID.v/NAME`.
    pub(crate) fn variant_key(&self, id: &str, name: &str) -> io::Result<Path> {
        crate::check_variant(id, name)?;
        Ok(self.prefix.clone().join(format!("{id}.v")).join(name))
    }

    /// Deletes every variant of blob `id` (a listing of `PREFIX/ID.v/`).
    pub(crate) async fn delete_variants(&self, id: &str) -> io::Result<()> {
        let dir = self
            .key(id)
            .map(|_| self.prefix.clone().join(format!("{id}.v")))?;
        let keys = self.store.list(Some(&dir)).map(|m| m.map(|m| m.location));
        let keys: Vec<Path> = self.timed("list", &dir, keys.try_collect()).await?;
        for k in keys {
            self.delete(&k).await?;
        }
        Ok(())
    }

    /// The key of blob `id`: never built from anything but an id.
    pub(crate) fn key(&self, id: &str) -> io::Result<Path> {
        if !is_id(id) {
            return Err(invalid(format!("S3: {id:?} is not a blob id")));
        }
        Ok(self.prefix.clone().join(id))
    }

    /// An error naming S3, the operation and the key.
    pub(crate) fn error(
        &self,
        op: &str,
        key: &Path,
        kind: io::ErrorKind,
        e: impl fmt::Display,
    ) -> io::Error {
        let name = self.cloud.name;
        io::Error::new(kind, format!("{name} {op} {}/{key}: {e}", self.bucket))
    }

    /// Maps an `object_store` error; a missing object is `NotFound`.
    pub(crate) fn fail<'a>(
        &'a self,
        op: &'a str,
        key: &'a Path,
    ) -> impl Fn(object_store::Error) -> io::Error + 'a {
        move |e| {
            let kind = match e {
                object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
                _ => unreachable_kind(&e).unwrap_or(io::ErrorKind::Other),
            };
            self.error(op, key, kind, chain(&e))
        }
    }

    pub(crate) async fn put(&self, key: &Path, payload: PutPayload) -> io::Result<()> {
        let done = match &self.put_json {
            Some(gcs) => gcs.put(key, payload).await,
            None => self.store.put(key, payload).await.map(drop),
        };
        done.map_err(self.fail("put", key))
    }

    pub(crate) async fn create_multipart(&self, key: &Path) -> io::Result<MultipartId> {
        (self.parts.create_multipart(key).await).map_err(self.fail("create_multipart", key))
    }

    /// The multipart upload of a resumable upload's spool. On GCS, part
    /// objects under `dir` (a session cannot be continued by another
    /// writer: see [`crate::gcs`]); elsewhere the service's own, as for a
    /// blob.
    pub(crate) async fn create_spool_upload(
        &self,
        key: &Path,
        dir: &Path,
    ) -> io::Result<MultipartId> {
        match &self.put_json {
            Some(gcs) => Ok(gcs.parts_upload(dir)),
            None => self.create_multipart(key).await,
        }
    }

    pub(crate) async fn put_part(
        &self,
        key: &Path,
        upload: &MultipartId,
        idx: usize,
        payload: PutPayload,
    ) -> io::Result<PartId> {
        (self.parts.put_part(key, upload, idx, payload).await).map_err(self.fail("put_part", key))
    }

    pub(crate) async fn complete(
        &self,
        key: &Path,
        upload: &MultipartId,
        parts: Vec<PartId>,
    ) -> io::Result<()> {
        let done = self.parts.complete_multipart(key, upload, parts).await;
        done.map_err(self.fail("complete_multipart", key))?;
        Ok(())
    }

    /// Aborts a multipart upload; one S3 no longer knows (`NoSuchUpload`)
    /// is gone already.
    pub(crate) async fn abort_multipart(&self, key: &Path, upload: &MultipartId) -> io::Result<()> {
        not_found_ok(self.parts.abort_multipart(key, upload).await)
            .map_err(self.fail("abort_multipart", key))
    }

    pub(crate) async fn delete(&self, key: &Path) -> io::Result<()> {
        not_found_ok(self.store.delete(key).await).map_err(self.fail("delete", key))
    }

    /// Waits at most `timeout` for `f`: the reader's requests have no
    /// timeout of their own.
    pub(crate) async fn timed<T>(
        &self,
        op: &str,
        key: &Path,
        f: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> io::Result<T> {
        let timed_out = |_| self.error(op, key, io::ErrorKind::TimedOut, "no answer in time");
        tokio::time::timeout(self.timeout, f)
            .await
            .map_err(timed_out)?
            .map_err(self.fail(op, key))
    }
}

/// An error with its causes: `object_store`'s own message stops at
/// "error sending request", its sources say why (refused, certificate...).
/// The I/O kind of an S3 that could not be reached (no connection, no
/// answer in time, the connection lost mid-request), found among the
/// error's causes: the server answers those 503 with `Retry-After`, since
/// the request may succeed once the store is back, not 500.
fn unreachable_kind(e: &(dyn std::error::Error + 'static)) -> Option<io::ErrorKind> {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(h) = c.downcast_ref::<HttpError>() {
            return match h.kind() {
                HttpErrorKind::Connect => Some(io::ErrorKind::NotConnected),
                HttpErrorKind::Timeout => Some(io::ErrorKind::TimedOut),
                HttpErrorKind::Request | HttpErrorKind::Interrupted => {
                    Some(io::ErrorKind::ConnectionAborted)
                }
                _ => None,
            };
        }
        cause = c.source();
    }
    None
}

pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

fn not_found_ok(r: object_store::Result<()>) -> object_store::Result<()> {
    match r {
        Err(object_store::Error::NotFound { .. }) => Ok(()),
        r => r,
    }
}

impl BlobStore for ObjectBlobStore {
    fn backend(&self) -> &'static str {
        self.s3.cloud.backend
    }

    fn begin<'a>(
        &'a self,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, io::Result<Box<dyn BlobWriter>>> {
        Box::pin(async move {
            let key = self.s3.key(id)?;
            Ok(Box::new(S3Writer::new(self.s3.clone(), key, lease)) as Box<dyn BlobWriter>)
        })
    }

    fn open<'a>(
        &'a self,
        id: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, io::Result<BlobStream>> {
        Box::pin(async move {
            let key = self.s3.key(id)?;
            self.s3.clone().ranged(key, offset, len).await
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, io::Result<()>> {
        Box::pin(async move {
            self.s3.delete(&self.s3.key(id)?).await?;
            self.s3.delete_variants(id).await
        })
    }

    fn abort<'a>(&'a self, id: &'a str, handle: Option<&'a str>) -> BoxFut<'a, io::Result<()>> {
        Box::pin(async move {
            let key = self.s3.key(id)?;
            if let Some(upload) = handle {
                self.s3.abort_multipart(&key, &upload.to_string()).await?;
            }
            self.s3.delete(&key).await?;
            self.s3.delete_variants(id).await
        })
    }

    /// One `PUT` with `If-None-Match: *` (S3's conditional write), on GCS
    /// one upload with `ifGenerationMatch=0`: the first variant stays. A
    /// store without conditional writes takes a plain `PUT`, where the
    /// last one stays; a variant's bytes are a function of its blob and
    /// name, so either is the same variant.
    fn variant_put<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        bytes: Bytes,
    ) -> BoxFut<'a, io::Result<bool>> {
        Box::pin(async move {
            let key = self.s3.variant_key(id, name)?;
            // GCS writes go through its JSON API (`crate::gcs`).
            if let Some(gcs) = &self.s3.put_json {
                return gcs
                    .put_new(&key, bytes)
                    .await
                    .map_err(self.s3.fail("put", &key));
            }
            let opts = object_store::PutOptions::from(object_store::PutMode::Create);
            let put = self.s3.store.put_opts(&key, bytes.clone().into(), opts);
            match put.await {
                Ok(_) => Ok(true),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                Err(object_store::Error::NotImplemented { .. }) => {
                    self.s3.put(&key, bytes.into()).await.map(|()| true)
                }
                Err(e) => Err(self.s3.fail("put", &key)(e)),
            }
        })
    }

    fn variant_size<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
    ) -> BoxFut<'a, io::Result<Option<u64>>> {
        Box::pin(async move {
            let key = self.s3.variant_key(id, name)?;
            match self.s3.timed("head", &key, self.s3.store.head(&key)).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn variant_open<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, io::Result<BlobStream>> {
        Box::pin(async move {
            let key = self.s3.variant_key(id, name)?;
            self.s3.clone().ranged(key, offset, len).await
        })
    }

    fn upload_memory(&self) -> u64 {
        2 * self.s3.part_size as u64
    }

    fn ready(&self) -> BoxFut<'_, io::Result<()>> {
        Box::pin(async move { self.s3.ready().await })
    }

    fn describe(&self) -> BoxFut<'_, io::Result<String>> {
        Box::pin(async move { self.s3.describe().await })
    }

    fn spool_create<'a>(&'a self, id: &'a str, lease: Arc<Lease>) -> BoxFut<'a, io::Result<Spool>> {
        Box::pin(crate::s3_spool::create(self.s3.clone(), id, lease))
    }

    fn spool_open<'a>(
        &'a self,
        id: &'a str,
        spool: Spool,
    ) -> BoxFut<'a, io::Result<Box<dyn SpoolWriter>>> {
        Box::pin(async move {
            let w = crate::s3_spool::open(self.s3.clone(), id, spool).await?;
            Ok(Box::new(w) as Box<dyn SpoolWriter>)
        })
    }

    fn spool_finish<'a>(&'a self, id: &'a str, spool: Spool) -> BoxFut<'a, io::Result<()>> {
        Box::pin(crate::s3_spool::finish_saved(self.s3.clone(), id, spool))
    }

    fn kind(&self) -> &'static str {
        self.s3.cloud.backend
    }

    fn open_file<'a>(
        &'a self,
        _id: &'a str,
        _variant: Option<&'a str>,
    ) -> BoxFut<'a, io::Result<Option<std::fs::File>>> {
        // Objects are not local files: downloads stream them (`open`).
        Box::pin(async { Ok(None) })
    }

    fn presign_get<'a>(
        &'a self,
        id: &'a str,
        variant: Option<&'a str>,
        ttl: Duration,
        answer: crate::Answer<'a>,
    ) -> BoxFut<'a, io::Result<Option<String>>> {
        Box::pin(async move {
            let key = match variant {
                None => self.s3.key(id)?,
                Some(name) => self.s3.variant_key(id, name)?,
            };
            // A URL whose answer lost the item's disposition would let a
            // browser render an SVG inline: no URL at all then (see
            // `Cloud::signs_answers`), and the node sends the bytes.
            if !self.s3.cloud.signs_answers {
                return Ok(None);
            }
            let opts = SignedUrlOptions::new().with_query([
                ("response-content-type", answer.content_type),
                ("response-content-disposition", answer.disposition),
                ("response-cache-control", answer.cache_control),
            ]);
            let url = self
                .s3
                .signer
                .signed_url_opts(http::Method::GET, &key, ttl, &opts)
                .await
                .map_err(self.s3.fail("presign", &key))?;
            Ok(Some(url.to_string()))
        })
    }

    fn spool_read<'a>(
        &'a self,
        _id: &'a str,
        _offset: u64,
        _len: u64,
    ) -> BoxFut<'a, io::Result<Option<BlobStream>>> {
        // The parts of an unfinished multipart upload cannot be read.
        Box::pin(async { Ok(None) })
    }

    fn spool_readable(&self) -> bool {
        false
    }

    fn spool_note<'a>(&'a self, _id: &'a str) -> BoxFut<'a, io::Result<Option<Vec<u8>>>> {
        // Every durable point is saved in the row before it is answered.
        Box::pin(async { Ok(None) })
    }

    fn spool_abort<'a>(&'a self, id: &'a str, spool: Spool) -> BoxFut<'a, io::Result<()>> {
        Box::pin(crate::s3_spool::abort(self.s3.clone(), id, spool))
    }

    fn sweep<'a>(
        &'a self,
        _keep: &'a (dyn Fn(&str) -> bool + Send + Sync),
    ) -> BoxFut<'a, io::Result<(usize, usize)>> {
        // A shared bucket: other nodes' uploads are the lease janitor's.
        Box::pin(async { Ok((0, 0)) })
    }
}

impl Shared {
    /// One cheap request: list at most one key under the prefix. Unlike a
    /// `HEAD` of a missing key, it tells a missing bucket from a missing
    /// object.
    async fn ready(&self) -> io::Result<()> {
        self.probe_metadata().await?;
        let opts = PaginatedListOptions {
            max_keys: Some(1),
            ..PaginatedListOptions::default()
        };
        let prefix = (!self.prefix.as_ref().is_empty()).then(|| format!("{}/", self.prefix));
        match &self.pager {
            Some(pager) => {
                let list = pager.list_paginated(prefix.as_deref(), opts);
                self.timed("list", &self.prefix, list).await?;
            }
            None => {
                // One page of the listing (the stream asks for the next
                // page only when read on).
                let mut list = self.store.list(Some(&self.prefix));
                let first = async { list.next().await.transpose() };
                self.timed("list", &self.prefix, first).await?;
            }
        }
        Ok(())
    }

    /// Puts, reads back and deletes a probe object under the prefix.
    async fn describe(&self) -> io::Result<String> {
        self.probe_metadata().await?;
        let key = self
            .prefix
            .clone()
            .join(format!("check-{}", crate::new_id()));
        let probe = Bytes::from_static(b"bulkwire check");
        self.put(&key, probe.clone().into()).await?;
        let got = self.read_probe(&key).await;
        let deleted = self.delete(&key).await;
        if got? != probe {
            let e = "the probe object read back differs";
            return Err(self.error("get", &key, io::ErrorKind::InvalidData, e));
        }
        deleted?;
        let at = match (&self.endpoint, self.cloud.name) {
            (Some(e), _) => format!("at {e}"),
            (None, "S3") => "on AWS".to_string(),
            (None, _) => "at the service's own endpoint".to_string(),
        };
        let credentials = match &self.source {
            Some(s) => s.describe(),
            None => self.credentials.clone(),
        };
        let what = match self.cloud.name {
            "Azure" => "Azure container",
            "GCS" => "GCS bucket",
            _ => "S3 bucket",
        };
        let prefix = match self.prefix.as_ref() {
            "" => "no prefix".to_string(),
            p => format!("prefix {p}/"),
        };
        Ok(format!(
            "{what} {} {at} ({prefix}), part size {}, credentials: {credentials}, read/write probe ok",
            self.bucket,
            size(self.part_size),
        ))
    }
}

impl Shared {
    /// With the instance metadata service as the only source: asks it for
    /// an IMDSv2 session token, at most `metadata_timeout`, so that a
    /// machine where nothing answers there says so at once instead of
    /// every request waiting on the address.
    async fn probe_metadata(&self) -> io::Result<()> {
        use std::sync::atomic::Ordering;
        let Some(Source::Instance { endpoint }) = &self.source else {
            return Ok(());
        };
        if self.metadata_seen.load(Ordering::Relaxed) {
            return Ok(());
        }
        let url = format!("{endpoint}/latest/api/token");
        let client = reqwest::Client::builder()
            .timeout(self.metadata_timeout)
            .build()
            .map_err(io::Error::other)?;
        let answer = client
            .put(&url)
            .header("X-aws-ec2-metadata-token-ttl-seconds", "60")
            .send()
            .await;
        match answer {
            Ok(r) if r.status().is_success() => {
                self.metadata_seen.store(true, Ordering::Relaxed);
                Ok(())
            }
            Ok(r) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                crate::aws_creds::no_source(&format!(
                    "the instance metadata service at {endpoint} answered {} to an IMDSv2 token request",
                    r.status()
                )),
            )),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                crate::aws_creds::no_source(&format!(
                    "no instance metadata service answered at {endpoint} within {:?} \
                     ([s3] metadata_timeout_ms; AWS_EC2_METADATA_SERVICE_ENDPOINT moves it)",
                    self.metadata_timeout
                )),
            )),
        }
    }

    async fn read_probe(&self, key: &Path) -> io::Result<Bytes> {
        let got = self.timed("get", key, self.store.get(key)).await?;
        self.timed("get", key, got.bytes()).await
    }
}

fn size(n: usize) -> String {
    if n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// A ranged GET's body as it arrives, each chunk awaited for at most
/// `timeout`: a stalled S3 fails the read, a slow consumer does not.
fn read_stream(
    s3: Arc<Shared>,
    key: Path,
    body: BoxStream<'static, object_store::Result<Bytes>>,
) -> BlobStream {
    let s = futures_util::stream::unfold(Some((s3, key, body)), |state| async move {
        let (s3, key, mut body) = state?;
        let next = match tokio::time::timeout(s3.timeout, body.next()).await {
            Ok(next) => next?,
            Err(_) => {
                let e = "no body bytes in time";
                return Some((Err(s3.error("get", &key, io::ErrorKind::TimedOut, e)), None));
            }
        };
        match next {
            Ok(chunk) => Some((Ok(chunk), Some((s3, key, body)))),
            Err(e) => Some((Err(s3.fail("get", &key)(e)), None)),
        }
    });
    Box::pin(s)
}

/// The part being filled: the caller's chunks, or slices of them.
#[derive(Default)]
pub(crate) struct Filling {
    pub(crate) chunks: Vec<Bytes>,
    pub(crate) len: usize,
}

impl Filling {
    /// Moves the front of `chunk` into the part, up to `size` bytes in
    /// all; true when the part is full.
    pub(crate) fn fill(&mut self, chunk: &mut Bytes, size: usize) -> bool {
        let n = chunk.len().min(size - self.len);
        if n == chunk.len() {
            self.chunks.push(std::mem::take(chunk));
        } else if n > 0 {
            self.chunks.push(chunk.split_to(n));
        }
        self.len += n;
        self.len == size
    }

    /// The part's bytes as one payload, without copying them.
    pub(crate) fn take(&mut self) -> PutPayload {
        self.len = 0;
        std::mem::take(&mut self.chunks).into_iter().collect()
    }
}

/// One blob being written: a single `PUT` at commit, or a multipart upload
/// once a part is full.
struct S3Writer {
    s3: Arc<Shared>,
    key: Path,
    lease: Arc<Lease>,
    filling: Filling,
    /// The multipart upload, once created and noted in the lease.
    upload: Option<MultipartId>,
    /// The parts sent, in order.
    parts: Vec<PartId>,
    /// The part being sent.
    inflight: Option<JoinHandle<io::Result<PartId>>>,
    /// Why the writer is unusable: a write failed, or was cancelled
    /// half-way (a part might be lost).
    broken: Option<String>,
    committed: bool,
}

impl S3Writer {
    fn new(s3: Arc<Shared>, key: Path, lease: Arc<Lease>) -> S3Writer {
        S3Writer {
            s3,
            key,
            lease,
            filling: Filling::default(),
            upload: None,
            parts: Vec::new(),
            inflight: None,
            broken: None,
            committed: false,
        }
    }

    fn error(&self, op: &str, e: impl fmt::Display) -> io::Error {
        self.s3.error(op, &self.key, io::ErrorKind::Other, e)
    }

    /// Refuses to go on after a failure, naming it.
    fn check(&self, op: &str) -> io::Result<()> {
        match &self.broken {
            Some(e) => Err(self.error(op, format!("unusable after an earlier failure: {e}"))),
            None => Ok(()),
        }
    }

    async fn write_chunks(&mut self, chunks: Vec<Bytes>) -> io::Result<()> {
        let finished = self.inflight.as_ref().is_some_and(|h| h.is_finished());
        if chunks.is_empty() || finished {
            self.settle().await?;
        }
        let size = self.s3.part_size;
        for mut chunk in chunks {
            while !chunk.is_empty() {
                if self.filling.fill(&mut chunk, size) {
                    self.send_part().await?;
                }
            }
        }
        Ok(())
    }

    /// Waits for the part in flight; its error is the caller's.
    async fn settle(&mut self) -> io::Result<()> {
        // Awaited in place, taken only once finished: a caller that is
        // cancelled here leaves the task in `inflight`, where `Drop` finds
        // it (a detached part upload would hold its bytes outside the
        // memory budget).
        let Some(h) = self.inflight.as_mut() else {
            return Ok(());
        };
        let joined = h.await;
        self.inflight = None;
        let part = joined.map_err(|e| self.error("put_part", e))??;
        self.parts.push(part);
        Ok(())
    }

    /// Hands the full part to a task once the previous one is sent.
    async fn send_part(&mut self) -> io::Result<()> {
        self.settle().await?;
        let idx = self.next_part()?;
        let upload = self.upload_id().await?;
        let rt = tokio::runtime::Handle::try_current().map_err(|e| self.error("put_part", e))?;
        let (s3, key, payload) = (self.s3.clone(), self.key.clone(), self.filling.take());
        let send = async move { s3.put_part(&key, &upload, idx, payload).await };
        self.inflight = Some(rt.spawn(send));
        Ok(())
    }

    fn next_part(&self) -> io::Result<usize> {
        let idx = self.parts.len();
        if idx >= self.s3.cloud.max_parts {
            let e = format!(
                "the blob exceeds {}'s {} parts of part_size {} bytes",
                self.s3.cloud.name, self.s3.cloud.max_parts, self.s3.part_size
            );
            return Err(self.error("put_part", e));
        }
        Ok(idx)
    }

    /// The multipart upload, created on the first full part and noted in
    /// the lease before any part is sent.
    async fn upload_id(&mut self) -> io::Result<MultipartId> {
        if let Some(upload) = &self.upload {
            return Ok(upload.clone());
        }
        let upload = self.s3.create_multipart(&self.key).await?;
        if let Err(e) = self.lease.note(&upload).await {
            if let Err(a) = self.s3.abort_multipart(&self.key, &upload).await {
                tracing::warn!("{a} (the lease's cleanup or the bucket lifecycle rule will)");
            }
            let e = format!("{e} (the upload was aborted)");
            return Err(self
                .s3
                .error("lease_note", &self.key, io::ErrorKind::Other, e));
        }
        self.upload = Some(upload.clone());
        Ok(upload)
    }

    /// Sends what is left and makes the blob visible at its key.
    async fn finish(&mut self) -> io::Result<()> {
        self.settle().await?;
        let Some(upload) = self.upload.clone() else {
            return self.s3.put(&self.key, self.filling.take()).await;
        };
        if self.filling.len > 0 {
            let idx = self.next_part()?;
            let last = self.filling.take();
            let part = self.s3.put_part(&self.key, &upload, idx, last).await?;
            self.parts.push(part);
        }
        let parts = std::mem::take(&mut self.parts);
        self.s3.complete(&self.key, &upload, parts).await
    }
}

impl BlobWriter for S3Writer {
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, io::Result<()>> {
        Box::pin(async move {
            self.check("write")?;
            // Stays unless this write finishes: a cancelled one poisons.
            self.broken = Some("a write was cancelled".into());
            let r = self.write_chunks(chunks).await;
            self.broken = r.as_ref().err().map(|e| e.to_string());
            r
        })
    }

    fn commit(mut self: Box<Self>) -> BoxFut<'static, io::Result<()>> {
        Box::pin(async move {
            self.check("commit")?;
            let r = self.finish().await;
            self.committed = r.is_ok();
            r
        })
    }

    /// The chunks are kept until their part is sent: no copy is spared.
    fn takes_aligned(&self) -> bool {
        false
    }
}

impl Drop for S3Writer {
    /// Best effort: aborts the multipart upload on a task (the lease's
    /// cleanup aborts it too, and the lifecycle rule after that).
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let inflight = self.inflight.take();
        if let Some(h) = &inflight {
            h.abort();
        }
        let Some(upload) = self.upload.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (s3, key) = (self.s3.clone(), self.key.clone());
        rt.spawn(async move {
            if let Some(h) = inflight {
                let _ = h.await;
            }
            if let Err(e) = s3.abort_multipart(&key, &upload).await {
                tracing::warn!("{e} (the lease's cleanup will retry)");
            }
        });
    }
}

/// Options of an object store's client (S3, Azure, GCS): connect within
/// `connect`; each request within `timeout`, or, for the reader whose
/// stream a download holds open, without a deadline (`None`).
pub(crate) fn client_options(connect: Duration, timeout: Option<Duration>) -> ClientOptions {
    let o = ClientOptions::new().with_connect_timeout(connect);
    match timeout {
        Some(t) => o.with_timeout(t),
        None => o.with_timeout_disabled(),
    }
}

/// The crate's retries, given up after `retry_timeout`.
pub(crate) fn retry_config(retry_timeout: Duration) -> RetryConfig {
    RetryConfig {
        retry_timeout,
        ..RetryConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> S3Config {
        S3Config::from_url("s3://b/p").unwrap()
    }

    #[test]
    fn urls() {
        let c = S3Config::from_url("s3://bucket/a/b/").unwrap();
        assert_eq!((c.bucket.as_str(), c.prefix.as_str()), ("bucket", "a/b"));
        let c = S3Config::from_url("S3://bucket").unwrap();
        assert_eq!((c.bucket.as_str(), c.prefix.as_str()), ("bucket", ""));
        assert_eq!(c.part_size, S3Config::DEFAULT_PART_SIZE);
        for bad in ["http://bucket/p", "bucket/p", "s3://", "s3:///p"] {
            let e = S3Config::from_url(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}");
            assert!(e.to_string().contains("S3 URL"), "{e}");
        }
    }

    #[test]
    fn env_fills_only_unset_fields() {
        let vars = |k: &str| {
            let v = match k {
                "AWS_ENDPOINT_URL" => "http://127.0.0.1:1",
                "AWS_ACCESS_KEY_ID" => "env-key",
                "AWS_SECRET_ACCESS_KEY" => "env-secret",
                "AWS_REGION" => "eu-west-3",
                "AWS_ALLOW_HTTP" => "TRUE",
                _ => return None,
            };
            Some(v.to_string())
        };
        let c = cfg().with_vars(vars);
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:1"));
        let from = |c: &S3Config| c.credentials.clone().unwrap().unwrap().describe();
        assert_eq!(
            from(&c),
            "static keys from the environment (key id env-key)"
        );
        assert_eq!(c.region, "eu-west-3");
        assert!(c.allow_http);
        let mut mine = cfg();
        mine.access_key_id = Some("mine".into());
        mine.secret_access_key = Some("s".into());
        mine.region = "us-west-2".into();
        let c = mine.with_vars(vars);
        assert_eq!(from(&c), "static keys from [s3] (key id mine)");
        assert_eq!(c.region, "us-west-2");
        let c = cfg().with_vars(|_| None);
        assert_eq!(
            (c.region.as_str(), c.allow_http),
            (S3Config::DEFAULT_REGION, false)
        );
    }

    #[test]
    fn debug_hides_the_secret() {
        let mut c = cfg();
        c.secret_access_key = Some("hunter2".into());
        let d = format!("{c:?}");
        assert!(!d.contains("hunter2") && d.contains("<redacted>"), "{d}");
    }

    #[test]
    fn config_checks() {
        let mut c = cfg();
        c.part_size = S3Config::MIN_PART_SIZE - 1;
        let e = S3BlobStore::new(c).unwrap_err().to_string();
        assert!(e.contains("part_size") && e.contains("5 MiB"), "{e}");
        let mut c = cfg();
        c.endpoint = Some("http://127.0.0.1:1".into());
        let e = S3BlobStore::new(c).unwrap_err().to_string();
        assert!(e.contains("allow_http"), "{e}");
        let mut c = cfg();
        c.prefix = "a//b".into();
        assert!(S3BlobStore::new(c).is_err());
    }

    #[test]
    fn keys_are_prefix_slash_id() {
        let id = crate::new_id();
        let s = S3BlobStore::new(cfg()).unwrap();
        assert_eq!(s.s3.key(&id).unwrap().as_ref(), format!("p/{id}"));
        let s = S3BlobStore::new(S3Config::from_url("s3://b").unwrap()).unwrap();
        assert_eq!(s.s3.key(&id).unwrap().as_ref(), id);
        assert!(s.s3.key("../x").is_err());
    }

    #[test]
    fn parts_are_exact_and_not_copied() {
        let data: Vec<u8> = (0..95u8).collect();
        let input: Vec<Bytes> = [7, 30, 1, 0, 40, 17]
            .iter()
            .scan(0, |at, &n| {
                *at += n;
                Some(Bytes::copy_from_slice(&data[*at - n..*at]))
            })
            .collect();
        let first = input[0].as_ptr();
        let (mut f, mut parts) = (Filling::default(), Vec::new());
        for mut c in input {
            while !c.is_empty() {
                if f.fill(&mut c, 20) {
                    parts.push(f.take());
                }
            }
        }
        parts.push(f.take());
        let sizes: Vec<usize> = parts.iter().map(|p| p.content_length()).collect();
        assert_eq!(sizes, [20, 20, 20, 20, 15]);
        assert_eq!(parts[0].as_ref()[0].as_ptr(), first, "a slice, not a copy");
        let all: Vec<u8> = parts
            .iter()
            .flat_map(|p| p.iter().flatten().copied())
            .collect();
        assert_eq!(all, data);
    }
}
