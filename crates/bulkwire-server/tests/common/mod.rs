//! Shared helpers: a server on 127.0.0.1 with a temp data dir, a reqwest
//! client, and raw-socket requests for stalls and disconnects.
#![allow(dead_code)]

use bulkwire_server::store::{
    BlobStore, BlobStream, BlobWriter, BoxFut, FsBlobStore, MediaRecord, MetaError, MetaStore,
    NewMedia, SqliteMeta,
};
use bulkwire_server::{Config, Limits, RunningServer, Server, User};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const TOKEN: &str = "test-token-1";

pub fn config(data: &Path, limits: Limits) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data: data.to_path_buf(),
        tokens: vec![TOKEN.into()],
        users: vec![User::parse("alice:wonder:land").unwrap()],
        limits,
    }
}

pub struct Harness {
    pub srv: RunningServer,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
}

pub async fn start(limits: Limits) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::bind(config(dir.path(), limits))
        .await
        .unwrap()
        .spawn()
        .unwrap();
    Harness {
        srv,
        dir,
        http: client(),
    }
}

/// A server on the given stores (usually test doubles wrapping the
/// embedded ones under `dir`).
pub async fn start_with(
    dir: tempfile::TempDir,
    limits: Limits,
    blobs: Arc<dyn BlobStore>,
    meta: Arc<dyn MetaStore>,
) -> Harness {
    let srv = Server::bind_with(config(dir.path(), limits), blobs, meta)
        .await
        .unwrap()
        .spawn()
        .unwrap();
    Harness {
        srv,
        dir,
        http: client(),
    }
}

/// The embedded metadata store with `insert` and/or `ready` failing with
/// the given errors; everything else is the store's own.
pub struct FailingMeta {
    pub inner: SqliteMeta,
    pub insert: Option<MetaError>,
    pub ready: Option<MetaError>,
}

impl FailingMeta {
    pub fn open(dir: &Path) -> FailingMeta {
        FailingMeta {
            inner: SqliteMeta::open(&dir.join(bulkwire_server::META_FILE)).unwrap(),
            insert: None,
            ready: None,
        }
    }
}

impl MetaStore for FailingMeta {
    fn insert(&self, rows: Vec<NewMedia>) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>> {
        match &self.insert {
            Some(e) => {
                let e = e.clone();
                Box::pin(async move { Err(e) })
            }
            None => self.inner.insert(rows),
        }
    }
    fn get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        self.inner.get(id)
    }
    fn list(&self, after: i64, limit: usize) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>> {
        self.inner.list(after, limit)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.delete(id)
    }
    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>> {
        self.inner.all_ids()
    }
    fn ready(&self) -> BoxFut<'_, Result<(), MetaError>> {
        match &self.ready {
            Some(e) => {
                let e = e.clone();
                Box::pin(async move { Err(e) })
            }
            None => self.inner.ready(),
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

impl Harness {
    pub fn url(&self, p: &str) -> String {
        self.srv.url(p)
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    pub fn get(&self, p: &str) -> reqwest::RequestBuilder {
        self.http.get(self.url(p)).bearer_auth(TOKEN)
    }

    pub async fn put(&self, name: &str, ct: &str, data: Vec<u8>) -> reqwest::Response {
        self.http
            .put(self.url(&format!("/v1/media/{name}")))
            .bearer_auth(TOKEN)
            .header("content-type", ct)
            .body(data)
            .send()
            .await
            .unwrap()
    }

    pub async fn post_form(&self, form: reqwest::multipart::Form) -> reqwest::Response {
        self.http
            .post(self.url("/v1/media"))
            .bearer_auth(TOKEN)
            .multipart(form)
            .send()
            .await
            .unwrap()
    }

    /// Every listed id, following cursors.
    pub async fn list_all(&self) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        let mut q = "/v1/media?limit=2".to_string();
        loop {
            let j: serde_json::Value = self.get(&q).send().await.unwrap().json().await.unwrap();
            out.extend(j["media"].as_array().unwrap().iter().cloned());
            match j["next"].as_str() {
                Some(n) => q = format!("/v1/media?limit=2&after={n}"),
                None => return out,
            }
        }
    }

    pub async fn download(&self, url: &str) -> Vec<u8> {
        let r = self.get(url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap().to_vec()
    }

    /// Asserts nothing is listed and no file is left in tmp/ or blobs/.
    pub async fn assert_empty(&self) {
        assert_eq!(self.list_all().await, Vec::<serde_json::Value>::new());
        wait_until("tmp/ and blobs/ empty", || {
            count_files(&self.data().join("tmp")) == 0
                && count_files(&self.data().join("blobs")) == 0
        })
        .await;
    }

    pub fn metric(&self, name: &str) -> String {
        self.srv
            .state
            .metrics
            .render()
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or("")
            .to_string()
    }
}

pub fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// Waits (up to 10 s) for an eventual state, e.g. cleanup after a
/// disconnect the server learns of asynchronously. Not a timing assertion:
/// only the end state is checked.
pub async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Deterministic pseudo-random bytes.
pub fn payload(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Opens a connection and sends a request head plus the first body bytes.
pub async fn raw_start(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    s.flush().await.unwrap();
    s
}

/// A multipart upload head for `raw_start`, declaring `len` body bytes.
pub fn form_head(boundary: &str, len: usize) -> String {
    format!(
        "POST /v1/media HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len}\r\n\r\n"
    )
}

/// Reads a whole response until the server closes (10 s cap); returns
/// (status, raw text).
pub async fn raw_response(s: &mut TcpStream) -> (u16, String) {
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

/// How a test changes the embedded blob store: what `begin` does.
pub trait BeginHook: Send + Sync + 'static {
    fn begin<'a>(
        &'a self,
        inner: &'a FsBlobStore,
        id: &'a str,
    ) -> BoxFut<'a, std::io::Result<Box<dyn BlobWriter>>>;
}

/// The embedded blob store with `begin` going through a test's hook;
/// everything else is the store's own.
pub struct Hooked<H> {
    pub inner: FsBlobStore,
    pub hook: H,
}

impl<H: BeginHook> BlobStore for Hooked<H> {
    fn begin<'a>(&'a self, id: &'a str) -> BoxFut<'a, std::io::Result<Box<dyn BlobWriter>>> {
        self.hook.begin(&self.inner, id)
    }
    fn open<'a>(
        &'a self,
        id: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, std::io::Result<BlobStream>> {
        self.inner.open(id, offset, len)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, std::io::Result<()>> {
        self.inner.delete(id)
    }
    fn discard(&self, id: &str) {
        self.inner.discard(id)
    }
    fn sweep<'a>(
        &'a self,
        keep: &'a (dyn Fn(&str) -> bool + Send + Sync),
    ) -> BoxFut<'a, std::io::Result<(usize, usize)>> {
        self.inner.sweep(keep)
    }
}
