//! Shared helpers: a server on 127.0.0.1 with a temp data dir, a reqwest
//! client, and raw-socket requests for stalls and disconnects.
#![allow(dead_code)]

pub mod clients;
pub mod hook;

use bulkwire_server::principal::Role;
use bulkwire_server::store::{
    AzureConfig, BlobStore, BlobStream, BlobWriter, BoxFut, CredentialStore, Delivery, EventOf,
    EventStore, FailedDelivery, FsBlobStore, GcsConfig, Lease, LeaseStore, ListQuery, MediaRecord,
    MediaStore, MetaCore, MetaError, MetaStore, NewEvent, NewMedia, NewToken, ObjectBlobStore,
    OutboxStats, Pending, PgMeta, Quota, S3BlobStore, S3Config, Settle, Spool, SpoolWriter,
    SqliteMeta, StoredEvent, StoredUser, Token, UploadRow, UploadStore, Usage, UserInfo, UserSet,
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
        ..Config::default()
    }
}

pub struct Harness {
    pub srv: RunningServer,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
}

/// A server on the stores the test run is about (see [`Backend`]).
pub async fn start(limits: Limits) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let (blobs, meta) = (blob_store(dir.path()), meta_store(dir.path()).await);
    start_with(dir, limits, blobs, meta).await
}

/// A server on the stores the test run is about, with `edit` applied to
/// the test configuration (`[auth]` keys, limits).
pub async fn start_edited(edit: impl FnOnce(&mut Config)) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let (blobs, meta) = (blob_store(dir.path()), meta_store(dir.path()).await);
    let mut c = config(dir.path(), Limits::default());
    edit(&mut c);
    let srv = Server::bind_with(c, blobs, meta)
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

/// The stores the suite runs against. `BULKWIRE_TEST_STORES=shared` is
/// PostgreSQL + SeaweedFS (S3), real servers started by `bulkwire-testenv`
/// once per test process; anything else is the embedded default. The same
/// tests run over both: each suite's `rerun_on_shared_stores` runs its own
/// binary again with the variable set (see [`rerun_on_shared_stores`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Embedded,
    Shared,
}

pub fn backend() -> Backend {
    match std::env::var("BULKWIRE_TEST_STORES").as_deref() {
        Ok("shared") => Backend::Shared,
        _ => Backend::Embedded,
    }
}

/// The object store of a shared run: `BULKWIRE_TEST_OBJECT_STORE` = `s3`
/// (SeaweedFS, the default), `azure` (Azurite) or `gcs`
/// (fake-gcs-server). [`rerun_on_shared_stores`] runs the suite on each.
pub fn object_store() -> &'static str {
    match std::env::var("BULKWIRE_TEST_OBJECT_STORE").as_deref() {
        Ok("azure") => "azure",
        Ok("gcs") => "gcs",
        _ => "s3",
    }
}

/// The object stores [`rerun_on_shared_stores`] runs the suite on:
/// `BULKWIRE_TEST_OBJECT_STORES` (comma-separated), else all three.
fn object_stores() -> Vec<String> {
    std::env::var("BULKWIRE_TEST_OBJECT_STORES")
        .unwrap_or_else(|_| "s3,azure,gcs".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// One bucket for the whole shared run; each test has its own prefix.
pub const BUCKET: &str = "bulkwire-suite";

/// The S3 part size in shared runs: S3's minimum, so that files of a few
/// MiB already go through multipart uploads.
pub const PART_SIZE: usize = 5 << 20;

/// A name for `dir` that is a valid PostgreSQL database name and S3 key
/// prefix: its temp-dir suffix, lower-cased, and a counter (two temp dirs
/// may differ only in case).
fn name_of(dir: &Path) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    static NAMES: std::sync::Mutex<Vec<(PathBuf, String)>> = std::sync::Mutex::new(Vec::new());
    static N: AtomicUsize = AtomicUsize::new(0);
    let mut names = NAMES.lock().unwrap();
    if let Some((_, n)) = names.iter().find(|(d, _)| d == dir) {
        return n.clone();
    }
    let base: String = dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    let n = format!("t{}_{base}", N.fetch_add(1, SeqCst));
    names.push((dir.to_path_buf(), n.clone()));
    n
}

fn seaweed() -> &'static bulkwire_testenv::Seaweed {
    static BUCKET_MADE: std::sync::Once = std::sync::Once::new();
    let sw = bulkwire_testenv::must(bulkwire_testenv::shared_seaweed());
    BUCKET_MADE.call_once(|| bulkwire_testenv::must(sw.create_bucket(BUCKET)));
    sw
}

/// The emulator of a shared run on Azure or GCS, its bucket made once.
fn emulator() -> &'static bulkwire_testenv::Emulator {
    static BUCKET_MADE: std::sync::Once = std::sync::Once::new();
    let e = match object_store() {
        "azure" => bulkwire_testenv::must(bulkwire_testenv::shared_azurite()),
        _ => bulkwire_testenv::must(bulkwire_testenv::shared_fake_gcs()),
    };
    BUCKET_MADE.call_once(|| {
        bulkwire_testenv::must(e.create_bucket(BUCKET));
        // object_store reads Azurite's address from the environment only.
        for (k, v) in e.vars() {
            if k == "AZURITE_BLOB_STORAGE_URL" {
                std::env::set_var(k, v);
            }
        }
    });
    e
}

/// The blob store the suite runs against: files under `dir`, or a prefix
/// of its own in the shared bucket of the run's object store.
pub fn blob_store(dir: &Path) -> Arc<dyn BlobStore> {
    match backend() {
        Backend::Embedded => Arc::new(FsBlobStore::open(dir).unwrap()),
        Backend::Shared if object_store() == "azure" => {
            let e = emulator();
            let mut c = AzureConfig::from_url(&format!("az://{BUCKET}/{}", name_of(dir))).unwrap();
            c.part_size = PART_SIZE;
            Arc::new(ObjectBlobStore::azure(c.with_vars(e.vars().into_iter())).unwrap())
        }
        Backend::Shared if object_store() == "gcs" => {
            let e = emulator();
            let mut c = GcsConfig::from_url(&format!("gs://{BUCKET}/{}", name_of(dir))).unwrap();
            c.part_size = PART_SIZE;
            Arc::new(ObjectBlobStore::gcs(c.with_vars(e.vars().into_iter())).unwrap())
        }
        Backend::Shared => {
            let sw = seaweed();
            let mut c = S3Config::from_url(&format!("s3://{BUCKET}/{}", name_of(dir))).unwrap();
            c.endpoint = Some(sw.endpoint());
            c.region = sw.region().into();
            c.access_key_id = Some(sw.access_key().into());
            c.secret_access_key = Some(sw.secret_key().into());
            c.allow_http = true;
            c.part_size = PART_SIZE;
            Arc::new(S3BlobStore::new(c).unwrap())
        }
    }
}

/// The metadata store the suite runs against: SQLite under `dir`, or a
/// database of its own on the shared PostgreSQL.
pub async fn meta_store(dir: &Path) -> Arc<dyn MetaStore> {
    match backend() {
        Backend::Embedded => {
            Arc::new(SqliteMeta::open(&dir.join(bulkwire_server::META_FILE)).unwrap())
        }
        Backend::Shared => {
            let pg = bulkwire_testenv::must(bulkwire_testenv::shared_postgres());
            let name = name_of(dir);
            let url = tokio::task::spawn_blocking(move || pg.create_database(&name))
                .await
                .unwrap();
            let url = bulkwire_testenv::must(url);
            Arc::new(
                PgMeta::connect(&url, 8, Duration::from_secs(5))
                    .await
                    .unwrap(),
            )
        }
    }
}

/// Memory one upload reserves with the suite's blob store, for tests that
/// size `memory_budget` around it.
pub fn upload_reserve(l: &Limits) -> u64 {
    match backend() {
        Backend::Embedded => l.upload_reserve(),
        Backend::Shared => l.upload_reserve_for(2 * PART_SIZE as u64),
    }
}

/// What is stored under a test's data dir (or its prefix): committed blobs
/// and unfinished temporary objects (temp files, S3 multipart uploads).
#[derive(Debug, Clone)]
pub struct Probe {
    dir: PathBuf,
}

impl Probe {
    pub fn blob_count(&self) -> usize {
        match backend() {
            Backend::Embedded => count_files(&self.dir.join("blobs")),
            Backend::Shared if object_store() != "s3" => self.emulator_keys().len(),
            Backend::Shared => self.s3_count("list-type=2&prefix=", "<Key>"),
        }
    }

    /// Unfinished temporary objects. On Azure and GCS none can be listed
    /// (uncommitted blocks and open resumable sessions are not objects;
    /// the services drop them after a week): 0 there, and the checks that
    /// count them run on S3 and the files.
    pub fn temp_count(&self) -> usize {
        match backend() {
            Backend::Embedded => count_files(&self.dir.join("tmp")),
            Backend::Shared if object_store() != "s3" => 0,
            Backend::Shared => self.s3_count("uploads&prefix=", "<UploadId>"),
        }
    }

    /// Unfinished resumable uploads' bytes: spool files under
    /// data/uploads, or the S3 multipart uploads they are.
    /// Whether [`Probe::spool_count`] sees unfinished uploads: not on
    /// Azure or GCS, whose uncommitted blocks and open sessions cannot be
    /// listed (it is 0 there, as [`Probe::temp_count`]).
    pub fn sees_spools(&self) -> bool {
        backend() == Backend::Embedded || object_store() == "s3"
    }

    pub fn spool_count(&self) -> usize {
        match backend() {
            Backend::Embedded => count_files(&self.dir.join("uploads")),
            Backend::Shared => self.temp_count(),
        }
    }

    pub fn blob_exists(&self, id: &str) -> bool {
        match backend() {
            Backend::Embedded => self.dir.join("blobs").join(id).exists(),
            Backend::Shared if object_store() != "s3" => {
                let key = format!("{}/{id}", name_of(&self.dir));
                self.emulator_keys().contains(&key)
            }
            Backend::Shared => {
                let key = format!("/{BUCKET}/{}/{id}", name_of(&self.dir));
                let (status, _) = bulkwire_testenv::must(seaweed().s3_curl("HEAD", &key, &[]));
                status == 200
            }
        }
    }

    /// Every key under this test's prefix in the emulator's bucket.
    fn emulator_keys(&self) -> Vec<String> {
        let prefix = format!("{}/", name_of(&self.dir));
        bulkwire_testenv::must(emulator().list_keys(BUCKET, &prefix))
    }

    /// Counts `tag` in a bucket listing of this test's prefix.
    fn s3_count(&self, query: &str, tag: &str) -> usize {
        let q = format!("/{BUCKET}?{query}{}/", name_of(&self.dir));
        let (status, body) = bulkwire_testenv::must(seaweed().s3_curl("GET", &q, &[]));
        assert_eq!(status, 200, "{q}: {body}");
        body.matches(tag).count()
    }
}

/// Runs this test binary again against PostgreSQL and each object store
/// of [`object_stores`] (SeaweedFS, Azurite, fake-gcs-server), skipping
/// this test and `skip` (tests about the embedded store's files, named
/// here so that the exclusions are visible), and fails with a failing
/// run's output unless every test passed on every store. Called by one test per suite; under
/// the shared backend itself it is never run (`--skip`).
pub fn rerun_on_shared_stores(skip: &[&str]) {
    assert_eq!(
        backend(),
        Backend::Embedded,
        "run with --skip rerun_on_shared_stores"
    );
    // The object stores' runs at once, each in its own process with its
    // own services: a run mostly waits on PostgreSQL and its object store
    // (a third of one core busy, measured), so together they take about
    // as long as the slowest alone instead of the sum (CI time).
    let runs: Vec<Result<String, String>> = std::thread::scope(|s| {
        let runs: Vec<_> = object_stores()
            .into_iter()
            .map(|store| s.spawn(move || rerun_on(&store, skip)))
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for said in runs.iter().flatten() {
        println!("{said}");
    }
    if let Some(Err(e)) = runs.into_iter().find(Result::is_err) {
        panic!("{e}");
    }
}

/// The suite on PostgreSQL and the object store `store`: what it passed,
/// or why it failed with the tail of its output.
fn rerun_on(store: &str, skip: &[&str]) -> Result<String, String> {
    let started = Instant::now();
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.env("BULKWIRE_TEST_STORES", "shared")
        .env("BULKWIRE_TEST_OBJECT_STORE", store)
        .args(["--skip", "rerun_on_shared_stores"]);
    for s in skip {
        cmd.args(["--skip", s]);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let tail: String = text
        .chars()
        .rev()
        .take(20_000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let name = match store {
        "azure" => "PostgreSQL + Azurite (Azure)",
        "gcs" => "PostgreSQL + fake-gcs-server (GCS)",
        _ => "PostgreSQL + SeaweedFS (S3)",
    };
    if !out.status.success() {
        return Err(format!("the suite on {name} failed:\n{tail}"));
    }
    let passed = text
        .lines()
        .find_map(|l| l.strip_prefix("test result: ok. "))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("no test ran on {name}:\n{tail}"))?;
    let took = started.elapsed();
    Ok(format!("on {name}: {passed} passed in {took:.1?}"))
}

/// A server on the embedded stores with `edit` applied to the test
/// configuration (`public_url`, `cors_origins`, `link_ttl`, limits).
pub async fn start_configured(edit: impl FnOnce(&mut Config)) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), Limits::default());
    edit(&mut c);
    let srv = Server::bind(c).await.unwrap().spawn().unwrap();
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

/// A metadata store with `insert` and/or `ready` failing with the given
/// errors, token lookups as slow as `token_delay` (a store across the
/// network); everything else is the wrapped store's own.
pub struct FailingMeta {
    pub inner: Arc<dyn MetaStore>,
    pub insert: Option<MetaError>,
    pub ready: Option<MetaError>,
    pub token_delay: Option<std::time::Duration>,
}

impl FailingMeta {
    pub fn on(inner: Arc<dyn MetaStore>) -> FailingMeta {
        FailingMeta {
            inner,
            insert: None,
            ready: None,
            token_delay: None,
        }
    }
}

fn fail<'a, T: Send + 'a>(e: &MetaError) -> BoxFut<'a, Result<T, MetaError>> {
    let e = e.clone();
    Box::pin(async move { Err(e) })
}

impl MetaCore for FailingMeta {
    fn ready(&self) -> BoxFut<'_, Result<(), MetaError>> {
        match &self.ready {
            Some(e) => fail(e),
            None => self.inner.ready(),
        }
    }
    fn describe(&self) -> BoxFut<'_, Result<String, MetaError>> {
        self.inner.describe()
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn single_process(&self) -> bool {
        self.inner.single_process()
    }
}

impl MediaStore for FailingMeta {
    fn insert<'a>(
        &'a self,
        rows: Vec<NewMedia>,
        node: &'a str,
        quota: Quota,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Vec<MediaRecord>, MetaError>> {
        match &self.insert {
            Some(e) => fail(e),
            None => self.inner.insert(rows, node, quota, event),
        }
    }
    fn get<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        self.inner.get(id, owner)
    }
    fn usage<'a>(&'a self, owner: &'a str) -> BoxFut<'a, Result<Usage, MetaError>> {
        self.inner.usage(owner)
    }
    fn list(&self, q: ListQuery) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>> {
        self.inner.list(q)
    }
    fn delete<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
        node: &'a str,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        self.inner.delete(id, owner, node, event)
    }
    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>> {
        self.inner.all_ids()
    }
}

impl CredentialStore for FailingMeta {
    fn token_add(&self, digest: [u8; 32], t: NewToken) -> BoxFut<'_, Result<Token, MetaError>> {
        self.inner.token_add(digest, t)
    }
    fn token_find(&self, digest: [u8; 32]) -> BoxFut<'_, Result<Option<Token>, MetaError>> {
        let delay = self.token_delay;
        Box::pin(async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            self.inner.token_find(digest).await
        })
    }
    fn token_used<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        self.inner.token_used(id)
    }
    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>> {
        self.inner.tokens()
    }
    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.token_revoke(id)
    }
    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
        role: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.user_set(name, hash, mode, role)
    }
    fn user_get<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<StoredUser>, MetaError>> {
        self.inner.user_get(name)
    }
    fn user_role<'a>(
        &'a self,
        name: &'a str,
        role: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.user_role(name, role)
    }
    fn user_quota<'a>(
        &'a self,
        name: &'a str,
        quota: Quota,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.user_quota(name, quota)
    }
    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.user_remove(name)
    }
    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>> {
        self.inner.users()
    }
    fn secret<'a>(
        &'a self,
        name: &'a str,
        fresh: Vec<u8>,
    ) -> BoxFut<'a, Result<Vec<u8>, MetaError>> {
        self.inner.secret(name, fresh)
    }
    fn secret_set<'a>(
        &'a self,
        name: &'a str,
        value: Vec<u8>,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        self.inner.secret_set(name, value)
    }
}

impl LeaseStore for FailingMeta {
    fn lease<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        self.inner.lease(id, node)
    }
    fn lease_note<'a>(
        &'a self,
        id: &'a str,
        node: &'a str,
        handle: &'a str,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        self.inner.lease_note(id, node, handle)
    }
    fn lease_move<'a>(
        &'a self,
        id: &'a str,
        from: &'a str,
        to: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.lease_move(id, from, to)
    }
    fn release<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        self.inner.release(id, node)
    }
    fn heartbeat<'a>(&'a self, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        self.inner.heartbeat(node)
    }
    fn claim_expired<'a>(
        &'a self,
        node: &'a str,
        expiry: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Pending>, MetaError>> {
        self.inner.claim_expired(node, expiry, limit)
    }
}

impl UploadStore for FailingMeta {
    fn upload_create<'a>(
        &'a self,
        row: UploadRow,
        max: usize,
        lease: Option<&'a str>,
        event: Option<NewEvent>,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.upload_create(row, max, lease, event)
    }
    fn upload_get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        self.inner.upload_get(id)
    }
    fn upload_claim<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        self.inner.upload_claim(id)
    }
    fn upload_claim_expired<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        self.inner.upload_claim_expired(id)
    }
    fn upload_save<'a>(
        &'a self,
        row: &'a UploadRow,
        media: Option<NewMedia>,
        quota: Quota,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Option<Option<MediaRecord>>, MetaError>> {
        self.inner.upload_save(row, media, quota, event)
    }
    fn upload_remove<'a>(
        &'a self,
        id: &'a str,
        gen: i64,
        event: Option<NewEvent>,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.upload_remove(id, gen, event)
    }
    fn upload_expired(&self, limit: usize) -> BoxFut<'_, Result<Vec<UploadRow>, MetaError>> {
        self.inner.upload_expired(limit)
    }
}

impl EventStore for FailingMeta {
    fn event_write<'a>(&'a self, event: &'a NewEvent) -> BoxFut<'a, Result<(), MetaError>> {
        self.inner.event_write(event)
    }
    fn events<'a>(
        &'a self,
        after: i64,
        owner: Option<&'a str>,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<StoredEvent>, MetaError>> {
        self.inner.events(after, owner, limit)
    }
    fn deliveries_begin<'a>(&'a self, endpoint: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        self.inner.deliveries_begin(endpoint)
    }
    fn deliveries_plan<'a>(
        &'a self,
        endpoint: &'a str,
        kinds: &'a [String],
        limit: usize,
    ) -> BoxFut<'a, Result<usize, MetaError>> {
        self.inner.deliveries_plan(endpoint, kinds, limit)
    }
    fn deliveries_claim<'a>(
        &'a self,
        endpoint: &'a str,
        node: &'a str,
        lease: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Delivery>, MetaError>> {
        self.inner.deliveries_claim(endpoint, node, lease, limit)
    }
    fn delivery_settle<'a>(
        &'a self,
        endpoint: &'a str,
        seq: i64,
        node: &'a str,
        how: Settle,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        self.inner.delivery_settle(endpoint, seq, node, how)
    }
    fn deliveries_failed(
        &self,
        limit: usize,
    ) -> BoxFut<'_, Result<Vec<FailedDelivery>, MetaError>> {
        self.inner.deliveries_failed(limit)
    }
    fn deliveries_retry<'a>(
        &'a self,
        event_id: Option<&'a str>,
    ) -> BoxFut<'a, Result<u64, MetaError>> {
        self.inner.deliveries_retry(event_id)
    }
    fn events_prune(&self, age: Duration) -> BoxFut<'_, Result<u64, MetaError>> {
        self.inner.events_prune(age)
    }
    fn outbox_stats(&self) -> BoxFut<'_, Result<OutboxStats, MetaError>> {
        self.inner.outbox_stats()
    }
    fn events_head(&self) -> BoxFut<'_, Result<i64, MetaError>> {
        self.inner.events_head()
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

impl Harness {
    /// `p` on this server; an absolute URL (a media link) as it is.
    pub fn url(&self, p: &str) -> String {
        if p.starts_with("http://") || p.starts_with("https://") {
            return p.to_string();
        }
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

    /// Every listed item in upload order (`order=asc`), following cursors.
    pub async fn list_all(&self) -> Vec<serde_json::Value> {
        self.list_pages("order=asc&limit=2").await
    }

    /// Every item `GET /v1/media?{query}` lists, page by page: the query
    /// again with each page's `next` as `after`, until `next` is null.
    pub async fn list_pages(&self, query: &str) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        let mut q = format!("/v1/media?{query}");
        loop {
            let r = self.get(&q).send().await.unwrap();
            assert_eq!(r.status(), 200, "{q}");
            let j: serde_json::Value = r.json().await.unwrap();
            out.extend(j["media"].as_array().unwrap().iter().cloned());
            match j["next"].as_str() {
                Some(n) => q = format!("/v1/media?{query}&after={n}"),
                None => return out,
            }
        }
    }

    pub async fn download(&self, url: &str) -> Vec<u8> {
        let r = self.get(url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap().to_vec()
    }

    /// Asserts nothing is listed and no temporary object or blob is left.
    pub async fn assert_empty(&self) {
        assert_eq!(self.list_all().await, Vec::<serde_json::Value>::new());
        let p = self.probe();
        wait_until("no temp object and no blob left", || {
            p.temp_count() == 0 && p.blob_count() == 0
        })
        .await;
    }

    /// What the stores hold for this test.
    pub fn probe(&self) -> Probe {
        Probe { dir: self.data() }
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

/// Adds a stored user with `role` to the server's store (HTTP Basic, XML-RPC
/// and SOAP logins with `password`).
pub async fn add_user(h: &Harness, name: &str, password: &str, role: Role) {
    let meta = &*h.srv.state.meta;
    let made =
        bulkwire_server::auth::set_user(meta, name, password.as_bytes(), UserSet::Create, role)
            .await
            .unwrap();
    assert!(made, "user {name} exists already");
}

/// Adds a stored token of `owner` with `scopes` (`upload,read`) to the
/// server's store; returns the secret to send as `Bearer`.
pub async fn add_token(h: &Harness, owner: &str, scopes: &str) -> String {
    let t = bulkwire_server::auth::new_token();
    let nt = NewToken {
        label: format!("{owner} {scopes}"),
        owner: owner.into(),
        scopes: scopes.into(),
        expires: None,
    };
    let meta = &*h.srv.state.meta;
    meta.token_add(bulkwire_server::auth::token_digest(&t), nt)
        .await
        .unwrap();
    t
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

/// How a test changes a blob store: what `begin` and `spool_note` do
/// (the wrapped store's own unless a test says otherwise).
pub trait StoreHook: Send + Sync + 'static {
    fn begin<'a>(
        &'a self,
        inner: &'a dyn BlobStore,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, std::io::Result<Box<dyn BlobWriter>>> {
        inner.begin(id, lease)
    }
    fn spool_note<'a>(
        &'a self,
        inner: &'a dyn BlobStore,
        id: &'a str,
    ) -> BoxFut<'a, std::io::Result<Option<Vec<u8>>>> {
        inner.spool_note(id)
    }
}

/// A blob store with `begin` and `spool_note` going through a test's
/// hook; everything else is the wrapped store's own.
pub struct Hooked<H> {
    pub inner: Arc<dyn BlobStore>,
    pub hook: H,
}

impl<H: StoreHook> BlobStore for Hooked<H> {
    fn begin<'a>(
        &'a self,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, std::io::Result<Box<dyn BlobWriter>>> {
        self.hook.begin(&*self.inner, id, lease)
    }
    fn open<'a>(
        &'a self,
        id: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, std::io::Result<BlobStream>> {
        self.inner.open(id, offset, len)
    }
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn open_file<'a>(
        &'a self,
        id: &'a str,
        variant: Option<&'a str>,
    ) -> BoxFut<'a, std::io::Result<Option<std::fs::File>>> {
        self.inner.open_file(id, variant)
    }
    fn presign_get<'a>(
        &'a self,
        id: &'a str,
        variant: Option<&'a str>,
        ttl: Duration,
        answer: bulkwire_server::store::Answer<'a>,
    ) -> BoxFut<'a, std::io::Result<Option<String>>> {
        self.inner.presign_get(id, variant, ttl, answer)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, std::io::Result<()>> {
        self.inner.delete(id)
    }
    fn variant_put<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        bytes: bytes::Bytes,
    ) -> BoxFut<'a, std::io::Result<bool>> {
        self.inner.variant_put(id, name, bytes)
    }
    fn variant_size<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
    ) -> BoxFut<'a, std::io::Result<Option<u64>>> {
        self.inner.variant_size(id, name)
    }
    fn variant_open<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, std::io::Result<BlobStream>> {
        self.inner.variant_open(id, name, offset, len)
    }
    fn abort<'a>(
        &'a self,
        id: &'a str,
        handle: Option<&'a str>,
    ) -> BoxFut<'a, std::io::Result<()>> {
        self.inner.abort(id, handle)
    }
    fn spool_create<'a>(
        &'a self,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, std::io::Result<Spool>> {
        self.inner.spool_create(id, lease)
    }
    fn spool_open<'a>(
        &'a self,
        id: &'a str,
        spool: Spool,
    ) -> BoxFut<'a, std::io::Result<Box<dyn SpoolWriter>>> {
        self.inner.spool_open(id, spool)
    }
    fn spool_finish<'a>(&'a self, id: &'a str, spool: Spool) -> BoxFut<'a, std::io::Result<()>> {
        self.inner.spool_finish(id, spool)
    }
    fn spool_read<'a>(
        &'a self,
        id: &'a str,
        offset: u64,
        len: u64,
    ) -> BoxFut<'a, std::io::Result<Option<BlobStream>>> {
        self.inner.spool_read(id, offset, len)
    }
    fn spool_readable(&self) -> bool {
        self.inner.spool_readable()
    }
    fn spool_note<'a>(&'a self, id: &'a str) -> BoxFut<'a, std::io::Result<Option<Vec<u8>>>> {
        self.hook.spool_note(&*self.inner, id)
    }
    fn spool_abort<'a>(&'a self, id: &'a str, spool: Spool) -> BoxFut<'a, std::io::Result<()>> {
        self.inner.spool_abort(id, spool)
    }
    fn upload_memory(&self) -> u64 {
        self.inner.upload_memory()
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn ready(&self) -> BoxFut<'_, std::io::Result<()>> {
        self.inner.ready()
    }
    fn describe(&self) -> BoxFut<'_, std::io::Result<String>> {
        self.inner.describe()
    }
    fn sweep<'a>(
        &'a self,
        keep: &'a (dyn Fn(&str) -> bool + Send + Sync),
    ) -> BoxFut<'a, std::io::Result<(usize, usize)>> {
        self.inner.sweep(keep)
    }
}
