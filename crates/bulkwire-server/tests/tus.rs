//! Protocol conformance of the resumable-upload endpoint (`/v1/uploads`)
//! with raw requests: tus 1.0.0 core and its extensions (creation,
//! creation-with-upload, creation-defer-length, termination, expiration,
//! checksum, concatenation), the IETF draft's interop versions 5 and 6,
//! and what the server promises beyond the protocols: durable offsets
//! across a dropped connection, one writer per upload, the janitor, and
//! the per-credential cap on unfinished uploads. Real clients are in
//! tus_clients.rs.

mod common;

use base64::Engine as _;
use bulkwire_server::store::{BlobStore, BoxFut, Spool};
use bulkwire_server::Limits;
use bytes::Bytes;
use common::*;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;
use sha2::Digest as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::oneshot;

const OCTETS: &str = "application/offset+octet-stream";
const PARTIAL: &str = "application/partial-upload";
const MIB: usize = 1 << 20;
const UNKNOWN_ID: &str = "0123456789abcdef0123456789abcdef";
const TUS_OK: &str = "bulkwire_uploads_total{format=\"tus\",outcome=\"ok\"}";

// ---------------------------------------------------------------------------
// Requests

fn path(id: &str) -> String {
    format!("/v1/uploads/{id}")
}

/// A tus 1.0.0 request with the suite's token.
fn tus(h: &Harness, m: Method, p: &str) -> RequestBuilder {
    h.http
        .request(m, h.url(p))
        .bearer_auth(TOKEN)
        .header("tus-resumable", "1.0.0")
}

/// An IETF draft request (interop version `v`) with the suite's token.
fn ietf(h: &Harness, m: Method, p: &str, v: u8) -> RequestBuilder {
    h.http
        .request(m, h.url(p))
        .bearer_auth(TOKEN)
        .header("upload-draft-interop-version", v.to_string())
}

async fn send(b: RequestBuilder) -> Response {
    b.send().await.unwrap()
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn header(r: &Response, name: &str) -> Option<String> {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

/// `Upload-Offset` of an answer, which must carry one.
fn offset(r: &Response) -> u64 {
    let v = header(r, "upload-offset");
    let v = v.unwrap_or_else(|| panic!("no Upload-Offset: {r:?}"));
    v.parse().unwrap()
}

/// The status, and the tus version header every tus answer must carry.
fn assert_tus(r: &Response, status: u16) {
    assert_eq!(r.status().as_u16(), status, "{r:?}");
    assert_eq!(
        header(r, "tus-resumable").as_deref(),
        Some("1.0.0"),
        "{r:?}"
    );
}

/// The error body's `limit.name`.
async fn limit_name(r: Response) -> String {
    let j: Value = r.json().await.unwrap();
    j["limit"]["name"].as_str().unwrap_or_default().to_string()
}

/// The upload id of a creation's answer: 201, and a `Location` that is
/// an absolute URL on this server ending in a 32-hex id.
fn created(h: &Harness, r: &Response) -> String {
    assert_eq!(r.status(), 201, "{r:?}");
    let loc = header(r, "location").expect("201 without Location");
    let prefix = h.url("/v1/uploads/");
    let id = loc.strip_prefix(&prefix).unwrap_or_else(|| {
        panic!("Location {loc} is not under {prefix}");
    });
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    assert!(id.len() == 32 && id.chars().all(hex), "upload id {id:?}");
    id.to_string()
}

/// A tus upload of `len` bytes.
async fn create(h: &Harness, len: usize) -> String {
    let r = send(tus(h, Method::POST, "/v1/uploads").header("upload-length", len)).await;
    created(h, &r)
}

fn patch_req(h: &Harness, id: &str, at: usize, body: &[u8]) -> RequestBuilder {
    tus(h, Method::PATCH, &path(id))
        .header("content-type", OCTETS)
        .header("upload-offset", at)
        .body(body.to_vec())
}

async fn patch(h: &Harness, id: &str, at: usize, body: &[u8]) -> Response {
    send(patch_req(h, id, at, body)).await
}

/// PATCHes `data[at..]` in `n` pieces, each answered 204 with its end.
async fn patch_rest(h: &Harness, id: &str, data: &[u8], at: usize, n: usize) {
    let step = (data.len() - at).div_ceil(n).max(1);
    let mut at = at;
    while at < data.len() {
        let end = (at + step).min(data.len());
        let r = patch(h, id, at, &data[at..end]).await;
        assert_tus(&r, 204);
        assert_eq!(offset(&r), end as u64, "{r:?}");
        at = end;
    }
}

async fn head(h: &Harness, id: &str) -> Response {
    send(tus(h, Method::HEAD, &path(id))).await
}

async fn head_offset(h: &Harness, id: &str) -> u64 {
    let r = head(h, id).await;
    assert_tus(&r, 200);
    offset(&r)
}

// ---------------------------------------------------------------------------
// Checks

/// A counter of the suite's own server, without the HTTP round trip.
fn metric_u64(h: &Harness, series: &str) -> u64 {
    let line = h.metric(series);
    line.trim_start_matches(series).trim().parse().unwrap_or(0)
}

/// A counter as `GET /metrics` shows it (0 when the series is absent).
async fn scraped(h: &Harness, series: &str) -> u64 {
    let r = send(h.http.get(h.url("/metrics"))).await;
    let t = r.text().await.unwrap();
    t.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0)
}

/// The upload is media under its own id: listed with its size, SHA-256,
/// name and type, and downloaded back byte for byte.
async fn assert_media(h: &Harness, id: &str, data: &[u8], name: Option<&str>, ct: &str) {
    let all = h.list_all().await;
    let Some(m) = all.iter().find(|m| m["id"] == id) else {
        panic!("{id} is not listed: {all:?}");
    };
    assert_eq!(m["size"], data.len() as u64, "{m}");
    assert_eq!(m["sha256"], sha256(data), "{m}");
    assert_eq!(m["filename"].as_str(), name, "{m}");
    assert_eq!(m["content_type"], ct, "{m}");
    let got = h.download(&format!("/v1/media/{id}")).await;
    // Not assert_eq!: a failure would print megabytes.
    assert!(
        got == data,
        "downloaded {} bytes (sha256 {}), uploaded {} (sha256 {})",
        got.len(),
        sha256(&got),
        data.len(),
        sha256(data)
    );
}

async fn is_listed(h: &Harness, id: &str) -> bool {
    h.list_all().await.iter().any(|m| m["id"] == id)
}

/// Nothing is stored: no media, no blob, no temporary object (S3: no
/// multipart upload, no tail object), and on the embedded store no spool
/// file under data/uploads.
async fn assert_nothing_stored(h: &Harness) {
    if backend() == Backend::Embedded {
        let dir = h.data().join("uploads");
        wait_until("data/uploads is empty", || count_files(&dir) == 0).await;
    }
    h.assert_empty().await;
}

/// Polls `HEAD` (up to 10 s) until it answers `status`.
async fn wait_head_status(h: &Harness, id: &str, status: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = head(h, id).await.status().as_u16();
        if got == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "HEAD {id} still {got}, want {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A raw tus PATCH head declaring `len` body bytes.
fn patch_head(id: &str, at: usize, len: usize) -> String {
    format!(
        "PATCH /v1/uploads/{id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Tus-Resumable: 1.0.0\r\nContent-Type: {OCTETS}\r\nUpload-Offset: {at}\r\n\
         Content-Length: {len}\r\n\r\n"
    )
}

// ---------------------------------------------------------------------------
// Discovery, credentials, versions

#[tokio::test]
async fn options_lists_version_extensions_and_limits_without_credentials() {
    let file_bytes = 123_456_789;
    let h = start(Limits {
        file_bytes,
        ..Limits::default()
    })
    .await;
    let r = send(h.http.request(Method::OPTIONS, h.url("/v1/uploads"))).await;
    assert_tus(&r, 204);
    assert_eq!(header(&r, "tus-version").as_deref(), Some("1.0.0"));
    let ext = header(&r, "tus-extension").unwrap();
    let ext: Vec<&str> = ext.split(',').map(str::trim).collect();
    for e in [
        "creation",
        "creation-with-upload",
        "creation-defer-length",
        "termination",
        "expiration",
        "checksum",
        "concatenation",
    ] {
        assert!(ext.contains(&e), "{e} not in Tus-Extension {ext:?}");
    }
    assert_eq!(header(&r, "tus-max-size"), Some(file_bytes.to_string()));
    let algs = header(&r, "tus-checksum-algorithm").unwrap();
    let algs: Vec<&str> = algs.split(',').map(str::trim).collect();
    assert!(
        algs.contains(&"sha1") && algs.contains(&"sha256"),
        "{algs:?}"
    );
}

#[tokio::test]
async fn missing_or_wrong_credentials_are_401_and_store_nothing() {
    let h = start(Limits::default()).await;
    let body = payload(100, 2);
    let post = || {
        h.http
            .post(h.url("/v1/uploads"))
            .header("tus-resumable", "1.0.0")
            .header("upload-length", 100)
            .header("content-type", OCTETS)
            .body(body.clone())
    };
    for r in [
        post(),
        post().bearer_auth("wrong"),
        post().basic_auth("alice", Some("wonder")),
    ] {
        let r = send(r).await;
        assert_tus(&r, 401);
        assert!(header(&r, "www-authenticate").is_some(), "{r:?}");
    }
    assert_eq!(
        metric_u64(&h, "bulkwire_rejected_total{reason=\"unauthorized\"}"),
        3
    );
    assert_eq!(metric_u64(&h, TUS_OK), 0);
    assert_nothing_stored(&h).await;
    // On an existing upload too: nothing appended, nothing terminated.
    let id = create(&h, 100).await;
    let r = send(
        h.http
            .patch(h.url(&path(&id)))
            .header("tus-resumable", "1.0.0")
            .header("content-type", OCTETS)
            .header("upload-offset", 0)
            .body(body.clone()),
    )
    .await;
    assert_tus(&r, 401);
    let r = send(
        h.http
            .delete(h.url(&path(&id)))
            .header("tus-resumable", "1.0.0"),
    )
    .await;
    assert_tus(&r, 401);
    let r = send(
        h.http
            .head(h.url(&path(&id)))
            .header("tus-resumable", "1.0.0"),
    )
    .await;
    assert_tus(&r, 401);
    assert_eq!(head_offset(&h, &id).await, 0);
}

#[tokio::test]
async fn unsupported_or_missing_protocol_version_is_412() {
    let h = start(Limits::default()).await;
    let post = || {
        h.http
            .post(h.url("/v1/uploads"))
            .bearer_auth(TOKEN)
            .header("upload-length", 10)
    };
    for (r, what) in [
        (
            post().header("tus-resumable", "0.2.2"),
            "Tus-Resumable 0.2.2",
        ),
        (post(), "no Tus-Resumable"),
        (
            post().header("upload-draft-interop-version", "3"),
            "interop 3",
        ),
        (
            post().header("upload-draft-interop-version", "x"),
            "interop x",
        ),
    ] {
        let r = send(r).await;
        assert_eq!(r.status(), 412, "{what}: {r:?}");
        let j: Value = r.json().await.unwrap();
        assert_eq!(j["error"], "precondition_failed", "{what}: {j}");
    }
    // Not only creation: every request but OPTIONS names its version.
    let id = create(&h, 10).await;
    let r = send(h.http.head(h.url(&path(&id))).bearer_auth(TOKEN)).await;
    assert_eq!(r.status(), 412);
    let r = send(
        h.http
            .patch(h.url(&path(&id)))
            .bearer_auth(TOKEN)
            .header("tus-resumable", "2.0.0")
            .header("content-type", OCTETS)
            .header("upload-offset", 0)
            .body(vec![1u8; 10]),
    )
    .await;
    assert_eq!(r.status(), 412);
    assert_eq!(head_offset(&h, &id).await, 0);
    // No request got as far as appending.
    assert_eq!(metric_u64(&h, TUS_OK), 0);
}

/// tus 1.0.0 "Tus-Resumable": a 412 for an unsupported version "MUST
/// include the Tus-Version header".
#[tokio::test]
async fn unsupported_version_412_names_the_supported_versions() {
    let h = start(Limits::default()).await;
    let r = send(
        h.http
            .post(h.url("/v1/uploads"))
            .bearer_auth(TOKEN)
            .header("tus-resumable", "0.2.2")
            .header("upload-length", 10),
    )
    .await;
    assert_eq!(r.status(), 412);
    assert_eq!(header(&r, "tus-version").as_deref(), Some("1.0.0"));
}

// ---------------------------------------------------------------------------
// Core protocol

/// `Upload-Expires` is an HTTP date about `after` from now.
fn assert_expires_in(r: &Response, after: Duration) {
    let v = header(r, "upload-expires").expect("no Upload-Expires");
    let t = httpdate::parse_http_date(&v).unwrap_or_else(|e| panic!("{v:?}: {e}"));
    let want = SystemTime::now() + after;
    let diff = match t.duration_since(want) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    assert!(diff < Duration::from_secs(120), "Upload-Expires {v}");
}

#[tokio::test]
async fn core_create_head_patch_in_chunks_becomes_media() {
    let h = start(Limits::default()).await;
    let data = payload(3 * MIB + 5, 4);
    let (name, ct) = ("résumé 2024.bin", "application/x-tus-core");
    let meta = format!(
        "filename {},filetype {},is_confidential",
        b64(name.as_bytes()),
        b64(ct.as_bytes())
    );
    let ok_before = scraped(&h, TUS_OK).await;
    let r = send(
        tus(&h, Method::POST, "/v1/uploads")
            .header("upload-length", data.len())
            .header("upload-metadata", &meta),
    )
    .await;
    assert_tus(&r, 201);
    assert_expires_in(&r, Duration::from_secs(24 * 3600));
    let id = created(&h, &r);

    let r = head(&h, &id).await;
    assert_tus(&r, 200);
    assert_eq!(offset(&r), 0);
    assert_eq!(header(&r, "upload-length"), Some(data.len().to_string()));
    assert_eq!(header(&r, "upload-metadata"), Some(meta.clone()));
    assert_eq!(header(&r, "cache-control").as_deref(), Some("no-store"));
    assert_eq!(header(&r, "upload-defer-length"), None);
    assert!(!is_listed(&h, &id).await, "listed before it is complete");

    patch_rest(&h, &id, &data, 0, 3).await;
    let r = head(&h, &id).await;
    assert_tus(&r, 200);
    assert_eq!(offset(&r), data.len() as u64);
    assert_eq!(header(&r, "upload-length"), Some(data.len().to_string()));
    assert_media(&h, &id, &data, Some(name), ct).await;
    // Each request that appended bytes counts as one upload.
    assert_eq!(scraped(&h, TUS_OK).await, ok_before + 3);
}

/// This process's descriptors open on a file whose path names `id`.
fn open_files_of(id: &str) -> usize {
    let fds = std::fs::read_dir("/proc/self/fd").unwrap();
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.to_string_lossy().contains(id))
        .count()
}

fn store_ops(h: &Harness, store: &str, op: &str) -> u64 {
    let backend = match (backend(), store) {
        (Backend::Embedded, "blobs") => "files",
        (Backend::Embedded, _) => "sqlite",
        (Backend::Shared, "blobs") => common::object_store(),
        (Backend::Shared, _) => "postgres",
    };
    let series = format!(
        "bulkwire_store_seconds_count{{store=\"{store}\",backend=\"{backend}\",op=\"{op}\"}}"
    );
    metric_u64(h, &series)
}

/// `store_ops` once it has stayed the same for 100 ms: nothing is left
/// running that counts there.
async fn settled_ops(h: &Harness, store: &str, op: &str) -> u64 {
    let mut last = store_ops(h, store, op);
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = store_ops(h, store, op);
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("{store} {op} operations never settled");
}

/// On the embedded store a request that ends on a saved offset leaves
/// its writer open for the next one (no claim, no open); every other
/// request for the upload closes it first. On shared stores every request
/// claims the row and opens the spool.
#[tokio::test]
async fn the_next_request_on_this_node_goes_on_with_the_open_writer() {
    let h = start(Limits::default()).await;
    let embedded = backend() == Backend::Embedded;
    let data = payload(4 * 300_000 + 7, 31);
    let id = create(&h, data.len()).await;
    assert_tus(&patch(&h, &id, 0, &data[..300_000]).await, 204);
    if embedded {
        assert_eq!(open_files_of(&id), 1, "parked with its spool open");
    }
    // Counted from here: the first save, behind its answer, has landed,
    // and so has its count (observed just after its commit is visible).
    row_caught_up(&h, &id).await;
    let meta = settled_ops(&h, "meta", "upload").await;
    let opens = store_ops(&h, "blobs", "spool");
    patch_rest(&h, &id, &data[..900_000], 300_000, 2).await;
    let opened = store_ops(&h, "blobs", "spool") - opens;
    // On the embedded store the last save runs behind its answer.
    let want = if embedded { 2 } else { 4 };
    for _ in 0..500 {
        if store_ops(&h, "meta", "upload") - meta >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let meta_ops = store_ops(&h, "meta", "upload") - meta;
    match embedded {
        // Two saves, nothing else.
        true => assert_eq!((opened, meta_ops), (0, 2)),
        // A claim and a save each, and an open each.
        false => assert_eq!((opened, meta_ops), (2, 4)),
    }
    // A wrong offset leaves the writer to the next request, which goes on
    // with it.
    let opens = store_ops(&h, "blobs", "spool");
    let r = patch(&h, &id, 0, &data[..10]).await;
    assert_tus(&r, 409);
    assert_eq!(offset(&r), 900_000);
    let r = patch(&h, &id, 900_000, &data[900_000..1_200_000]).await;
    assert_tus(&r, 204);
    let reopened = store_ops(&h, "blobs", "spool") - opens;
    assert_eq!(reopened, if embedded { 0 } else { 1 });
    // Any other holder of the upload, here a length declared late (and
    // refused), drops it and claims.
    let r = patch_req(&h, &id, 1_200_000, &[])
        .header("upload-length", data.len() + 1)
        .send()
        .await
        .unwrap();
    assert_tus(&r, 400);
    assert_eq!(open_files_of(&id), 0, "closed by the other request");
    patch_rest(&h, &id, &data, 1_200_000, 1).await;
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
    assert_eq!(open_files_of(&id), 0, "a finished upload parks nothing");

    let other = create(&h, 1000).await;
    assert_tus(&patch(&h, &other, 0, &[5u8; 400]).await, 204);
    assert_tus(&send(tus(&h, Method::DELETE, &path(&other))).await, 204);
    assert_eq!(open_files_of(&other), 0, "DELETE closes the parked writer");
    assert_tus(&head(&h, &other).await, 404);
}

/// A request may answer before the hash has caught up with its bytes;
/// its state then says where the hash stands, and a writer that does not
/// have the hash at hand (after a restart, or when the parked writer was
/// closed) reads the rest back from the spool: the file's SHA-256 is
/// exact. S3 cannot read back the parts of an unfinished upload: there a
/// state never lags, and one that does is refused, never hashed wrong.
#[tokio::test]
async fn a_hash_that_lags_behind_the_offset_is_caught_up_from_the_spool() {
    let h = start(Limits::default()).await;
    let data = payload(700_000, 32);
    let id = create(&h, data.len()).await;
    let fresh = create(&h, 1).await;
    assert_tus(&patch(&h, &id, 0, &data[..300_000]).await, 204);
    // The state as a writer that stopped right after answering leaves it,
    // its hash at the start.
    leave_hash_at_start(&h, &id, &fresh, |_| {}).await;
    // Another request for the upload closes the parked writer (and its
    // hash at hand).
    close_parked(&h, &id, 300_000, data.len() + 1).await;
    let reads = store_ops(&h, "blobs", "open");
    let r = patch(&h, &id, 300_000, &data[300_000..]).await;
    if backend() == Backend::Shared {
        assert_eq!(r.status(), 500, "S3 cannot read the parts back");
        assert_eq!(head_offset(&h, &id).await, 300_000);
        return;
    }
    assert_tus(&r, 204);
    // Once for the hash, once for the type: an upload without `filetype`
    // is typed by its first bytes, read back from the finished blob.
    assert_eq!(store_ops(&h, "blobs", "open"), reads + 2, "read back once");
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

/// A request for `id` at `at` that declares `Upload-Length` again (400):
/// it closes the writer parked for the upload, and its hash at hand.
async fn close_parked(h: &Harness, id: &str, at: usize, length: usize) {
    let r = patch_req(h, id, at, &[])
        .header("upload-length", length)
        .send()
        .await
        .unwrap();
    assert_tus(&r, 400);
}

/// Saves `id`'s state as a writer that answered before its hash caught up
/// and then stopped leaves it: the hash at the upload's start (as `fresh`,
/// an upload with nothing written, has it), `edit` applied on top.
async fn leave_hash_at_start(h: &Harness, id: &str, fresh: &str, edit: impl FnOnce(&mut Value)) {
    row_caught_up(h, id).await;
    let meta = &h.srv.state.meta;
    let initial = meta.upload_get(fresh).await.unwrap().unwrap();
    let initial: Value = serde_json::from_str(&initial.state).unwrap();
    let mut row = meta.upload_get(id).await.unwrap().unwrap();
    let mut st: Value = serde_json::from_str(&row.state).unwrap();
    st.as_object_mut().unwrap().remove("sha256");
    st["sha256_behind"] = serde_json::json!({"at": 0, "state": initial["sha256"]});
    edit(&mut st);
    row.state = st.to_string();
    assert!(meta
        .upload_save(&row, None, Default::default(), None)
        .await
        .unwrap()
        .is_some());
}

/// Waits until `id`'s row has the offset `HEAD` answers: on the embedded
/// store a row is saved behind the answer, and a test that edits it must
/// not race that save.
async fn row_caught_up(h: &Harness, id: &str) -> Value {
    let want = head_offset(h, id).await;
    for _ in 0..500 {
        let row = h.srv.state.meta.upload_get(id).await.unwrap().unwrap();
        let st: Value = serde_json::from_str(&row.state).unwrap();
        if st["spool"]["len"].as_u64() == Some(want) {
            return st;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the row of {id} never reached offset {want}");
}

/// An answer goes before its row is saved where the spool keeps notes (the
/// embedded store): a row left behind (a crash right after the answer, or
/// a failed save) loses nothing. `HEAD`, a 409 and the next writer take
/// the spool's note, and the file's SHA-256 is exact. On the shared
/// stores the row is saved before the answer.
#[tokio::test]
async fn a_row_left_behind_its_answer_is_caught_up_from_the_spool_note() {
    let h = start(Limits::default()).await;
    let data = payload(900_000, 34);
    let id = create(&h, data.len()).await;
    let created = h.srv.state.meta.upload_get(&id).await.unwrap().unwrap();
    assert_tus(&patch(&h, &id, 0, &data[..300_000]).await, 204);
    if backend() == Backend::Shared {
        let row = h.srv.state.meta.upload_get(&id).await.unwrap().unwrap();
        let st: Value = serde_json::from_str(&row.state).unwrap();
        assert_eq!(st["spool"]["len"], 300_000, "saved before the answer");
        return;
    }
    assert_tus(&patch(&h, &id, 300_000, &data[300_000..600_000]).await, 204);
    // The row as the creation left it, as if no save after an answer
    // had landed; the writer parked with the upload is closed.
    row_caught_up(&h, &id).await;
    close_parked(&h, &id, 600_000, data.len() + 1).await;
    let mut row = h.srv.state.meta.upload_get(&id).await.unwrap().unwrap();
    row.state = created.state;
    assert!(h
        .srv
        .state
        .meta
        .upload_save(&row, None, Default::default(), None)
        .await
        .unwrap()
        .is_some());
    assert_eq!(head_offset(&h, &id).await, 600_000);
    let r = patch(&h, &id, 0, &data[..10]).await;
    assert_tus(&r, 409);
    assert_eq!(offset(&r), 600_000);
    assert_tus(&patch(&h, &id, 600_000, &data[600_000..]).await, 204);
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

/// The upload a [`HoldNote`] holds, with the signal that its note was read
/// and the one that lets the reader go on.
type Held = (String, oneshot::Sender<()>, oneshot::Receiver<()>);

/// Holds the next `spool_note` of an armed upload once it has read the
/// note, until the test lets it go: the state a request has checked its
/// offset against goes stale meanwhile.
struct HoldNote(Arc<Mutex<Option<Held>>>);

impl StoreHook for HoldNote {
    fn spool_note<'a>(
        &'a self,
        inner: &'a dyn BlobStore,
        id: &'a str,
    ) -> BoxFut<'a, std::io::Result<Option<Vec<u8>>>> {
        let held = {
            let mut armed = self.0.lock().unwrap();
            match armed.as_ref() {
                Some((x, ..)) if x == id => armed.take(),
                _ => None,
            }
        };
        Box::pin(async move {
            let note = inner.spool_note(id).await;
            if let Some((_, read, go)) = held {
                read.send(()).unwrap();
                go.await.unwrap();
            }
            note
        })
    }
}

/// A request that checked its offset against the loaded state, and then
/// finds a newer note once it holds the spool (a cut-off request's last
/// `fsync` ended in between), answers 409 with the note's offset: its
/// bytes never land at another offset than the one the client named.
#[tokio::test]
async fn a_note_made_durable_after_the_state_was_loaded_is_409_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let inner = blob_store(dir.path());
    let armed = Arc::new(Mutex::new(None));
    let blobs = Hooked {
        inner: inner.clone(),
        hook: HoldNote(armed.clone()),
    };
    let meta = meta_store(dir.path()).await;
    let h = start_with(dir, Limits::default(), Arc::new(blobs), meta).await;
    let data = payload(900_000, 35);
    let id = create(&h, data.len()).await;
    assert_tus(&patch(&h, &id, 0, &data[..300_000]).await, 204);
    if backend() == Backend::Shared {
        assert_eq!(inner.spool_note(&id).await.unwrap(), None, "no notes on S3");
        return;
    }
    // The note 450,000 bytes of the same data leave (notes name no upload).
    let twin = create(&h, data.len()).await;
    assert_tus(&patch(&h, &twin, 0, &data[..450_000]).await, 204);
    row_caught_up(&h, &twin).await;
    let note = inner.spool_note(&twin).await.unwrap().unwrap();
    row_caught_up(&h, &id).await;
    close_parked(&h, &id, 300_000, data.len() + 1).await;

    let (read, was_read) = oneshot::channel();
    let (go, wait) = oneshot::channel();
    *armed.lock().unwrap() = Some((id.clone(), read, wait));
    let late = tokio::spawn(patch_req(&h, &id, 300_000, &data[300_000..600_000]).send());
    was_read.await.unwrap();
    // The request has checked 300,000: now another writer's durable point
    // takes the upload to 450,000, as the cut-off one's would.
    let spool = Spool {
        len: 300_000,
        ..Spool::default()
    };
    let mut w = inner.spool_open(&id, spool).await.unwrap();
    w.write(vec![Bytes::copy_from_slice(&data[300_000..450_000])])
        .await
        .unwrap();
    assert_eq!(w.sync_noted(note).await.unwrap().len, 450_000);
    drop(w);
    go.send(()).unwrap();

    let r = late.await.unwrap().unwrap();
    assert_tus(&r, 409);
    assert_eq!(offset(&r), 450_000);
    assert_eq!(head_offset(&h, &id).await, 450_000);
    assert_tus(&patch(&h, &id, 450_000, &data[450_000..]).await, 204);
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

/// A node that died after making the spool the blob, but before saving
/// that, with a saved hash that lags: the next `HEAD` finishes the upload
/// and hashes the lag from the blob, exactly.
#[tokio::test]
async fn a_lagging_hash_is_caught_up_from_a_spool_already_made_the_blob() {
    let h = start(Limits::default()).await;
    let data = payload(400_000, 33);
    let id = create(&h, data.len() + 1000).await;
    let fresh = create(&h, 1).await;
    assert_tus(&patch(&h, &id, 0, &data).await, 204);
    // Close the parked writer, then leave the state of a writer that had
    // saved its last byte with its hash at the start, and died after the
    // spool became the blob.
    close_parked(&h, &id, data.len(), 1).await;
    let len = data.len();
    leave_hash_at_start(&h, &id, &fresh, |st| st["length"] = len.into()).await;
    if backend() == Backend::Shared {
        // S3 never saves a lagging hash, and cannot read one back.
        assert_eq!(head(&h, &id).await.status(), 500);
        return;
    }
    let d = h.data();
    std::fs::rename(d.join("uploads").join(&id), d.join("blobs").join(&id)).unwrap();
    let r = head(&h, &id).await;
    assert_tus(&r, 200);
    assert_eq!(offset(&r), data.len() as u64);
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

#[tokio::test]
async fn wrong_offset_is_409_with_the_true_offset() {
    let h = start(Limits::default()).await;
    let data = payload(1000, 5);
    let id = create(&h, data.len()).await;
    assert_tus(&patch(&h, &id, 0, &data[..400]).await, 204);
    for at in [0, 399, 401, 1000] {
        let r = patch(&h, &id, at, &data[at.min(999)..]).await;
        assert_tus(&r, 409);
        assert_eq!(offset(&r), 400, "PATCH at {at}");
    }
    assert_eq!(head_offset(&h, &id).await, 400);
    patch_rest(&h, &id, &data, 400, 1).await;
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

#[tokio::test]
async fn patch_with_another_content_type_is_415() {
    let h = start(Limits::default()).await;
    let id = create(&h, 10).await;
    let base = || {
        tus(&h, Method::PATCH, &path(&id))
            .header("upload-offset", 0)
            .body(vec![7u8; 10])
    };
    for r in [
        base().header("content-type", "application/octet-stream"),
        base().header("content-type", PARTIAL),
        base(),
    ] {
        assert_tus(&send(r).await, 415);
    }
    assert_eq!(head_offset(&h, &id).await, 0);
}

// ---------------------------------------------------------------------------
// Checksum

fn sha1_b64(b: &[u8]) -> String {
    b64(&sha1::Sha1::digest(b))
}

fn sha256_b64(b: &[u8]) -> String {
    b64(&sha2::Sha256::digest(b))
}

async fn patch_sum(h: &Harness, id: &str, at: usize, body: &[u8], sum: &str) -> Response {
    send(patch_req(h, id, at, body).header("upload-checksum", sum)).await
}

/// A sync interval far below the chunk size: a chunk under a checksum
/// must still count only once verified, so none of a bad one may stay.
#[tokio::test]
async fn checksums_sha1_sha256_accepted_mismatch_is_460_and_keeps_nothing() {
    let h = start(Limits {
        upload_sync_bytes: 64 << 10,
        ..Limits::default()
    })
    .await;
    let data = payload(900_001, 7);
    let (c1, c2, c3) = (&data[..300_000], &data[300_000..600_000], &data[600_000..]);
    let id = create(&h, data.len()).await;
    let r = patch_sum(&h, &id, 0, c1, &format!("sha1 {}", sha1_b64(c1))).await;
    assert_tus(&r, 204);
    let r = patch_sum(&h, &id, 300_000, c2, &format!("sha256 {}", sha256_b64(c2))).await;
    assert_tus(&r, 204);
    assert_eq!(offset(&r), 600_000);

    // The right checksum over corrupted bytes, in both algorithms.
    let mut bad = c3.to_vec();
    bad[1234] ^= 0x5a;
    for sum in [
        format!("sha1 {}", sha1_b64(c3)),
        format!("sha256 {}", sha256_b64(c3)),
    ] {
        let r = patch_sum(&h, &id, 600_000, &bad, &sum).await;
        assert_tus(&r, 460);
        assert_eq!(head_offset(&h, &id).await, 600_000, "{sum}");
    }
    let r = patch_sum(&h, &id, 600_000, c3, "md5 HUXZLQLMuI/KZ5KDcJPcOA==").await;
    assert_tus(&r, 400);
    let r = patch_sum(&h, &id, 600_000, c3, "sha256 AAAA").await;
    assert_tus(&r, 400);
    assert_eq!(head_offset(&h, &id).await, 600_000);

    let r = patch_sum(&h, &id, 600_000, c3, &format!("sha256 {}", sha256_b64(c3))).await;
    assert_tus(&r, 204);
    assert_eq!(offset(&r), data.len() as u64);
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

// ---------------------------------------------------------------------------
// Limits

#[tokio::test]
async fn body_past_upload_length_is_413_and_the_upload_resumes() {
    let h = start(Limits::default()).await;
    let data = payload(1000, 8);
    let id = create(&h, data.len()).await;
    let mut long = data.clone();
    long.extend_from_slice(&[0u8; 500]);
    assert_tus(&patch(&h, &id, 0, &long).await, 413);
    // What was kept, if anything, is a prefix within the length.
    let at = head_offset(&h, &id).await as usize;
    assert!(at <= data.len(), "offset {at}");
    patch_rest(&h, &id, &data, at, 1).await;
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

#[tokio::test]
async fn upload_length_over_file_bytes_is_413_file_bytes() {
    let h = start(Limits {
        file_bytes: 10_000,
        ..Limits::default()
    })
    .await;
    let r = send(tus(&h, Method::POST, "/v1/uploads").header("upload-length", 10_001)).await;
    assert_tus(&r, 413);
    let j: Value = r.json().await.unwrap();
    assert_eq!(j["limit"]["name"], "file_bytes", "{j}");
    assert_eq!(j["limit"]["value"], 10_000, "{j}");
    // A deferred length is held to the same limit when it comes.
    let r = send(tus(&h, Method::POST, "/v1/uploads").header("upload-defer-length", "1")).await;
    let id = created(&h, &r);
    let r = send(patch_req(&h, &id, 0, b"abc").header("upload-length", 10_001)).await;
    assert_tus(&r, 413);
    assert_eq!(limit_name(r).await, "file_bytes");
    // And so are its bytes while it has none.
    let r = patch(&h, &id, 0, &payload(10_001, 9)).await;
    assert_tus(&r, 413);
    assert_eq!(limit_name(r).await, "file_bytes");
    // Exactly the limit is fine.
    create(&h, 10_000).await;
}

#[tokio::test]
async fn malformed_metadata_is_400_and_too_long_is_413() {
    let h = start(Limits {
        upload_metadata_bytes: 64,
        ..Limits::default()
    })
    .await;
    let post = |m: &str| {
        tus(&h, Method::POST, "/v1/uploads")
            .header("upload-length", 10)
            .header("upload-metadata", m)
    };
    for m in [
        "filename !!notbase64",
        "filename YQ==,filename Yg==",
        "filename YQ== extra",
        // Not UTF-8 (0xff): a file name must be text.
        "filename /w==",
    ] {
        let r = send(post(m)).await;
        assert_tus(&r, 400);
    }
    let long = format!("filename {}", b64(&[b'a'; 60]));
    let r = send(post(&long)).await;
    assert_tus(&r, 413);
    assert_eq!(limit_name(r).await, "upload_metadata_bytes");
    assert_nothing_stored(&h).await;
}

// ---------------------------------------------------------------------------
// Termination, unknown and expired uploads

#[tokio::test]
async fn unknown_upload_is_404() {
    let h = start(Limits::default()).await;
    for id in [UNKNOWN_ID, "not-an-id"] {
        assert_tus(&head(&h, id).await, 404);
        assert_tus(&patch(&h, id, 0, b"abc").await, 404);
        assert_tus(&send(tus(&h, Method::DELETE, &path(id))).await, 404);
    }
}

#[tokio::test]
async fn termination_removes_the_upload_and_its_bytes() {
    let h = start(Limits::default()).await;
    let data = payload(MIB, 10);
    let id = create(&h, 2 * MIB).await;
    assert_tus(&patch(&h, &id, 0, &data).await, 204);
    let r = send(tus(&h, Method::DELETE, &path(&id))).await;
    assert_tus(&r, 204);
    assert_tus(&head(&h, &id).await, 404);
    assert_tus(&patch(&h, &id, MIB, &data).await, 404);
    assert_tus(&send(tus(&h, Method::DELETE, &path(&id))).await, 404);
    assert_nothing_stored(&h).await;
}

#[tokio::test]
async fn terminating_a_finished_upload_removes_its_media() {
    let h = start(Limits::default()).await;
    let data = payload(5000, 11);
    let id = create(&h, data.len()).await;
    patch_rest(&h, &id, &data, 0, 1).await;
    assert!(is_listed(&h, &id).await);
    assert_tus(&send(tus(&h, Method::DELETE, &path(&id))).await, 204);
    assert_eq!(
        h.get(&format!("/v1/media/{id}"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_tus(&head(&h, &id).await, 404);
    assert_nothing_stored(&h).await;
}

/// An upload untouched for longer than `upload_expiry_s` is gone (410);
/// the janitor (next round in 20 s) has not removed it yet.
#[tokio::test]
async fn expired_upload_is_410() {
    let h = start(Limits {
        upload_expiry_s: 1,
        ..Limits::default()
    })
    .await;
    let id = create(&h, 100).await;
    let r = patch(&h, &id, 0, &[1u8; 10]).await;
    assert_tus(&r, 204);
    assert_expires_in(&r, Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_tus(&head(&h, &id).await, 410);
    assert_tus(&patch(&h, &id, 10, &[1u8; 10]).await, 410);
}

/// The janitor removes an expired upload: its row (HEAD 404, not 410)
/// and its bytes (spool file; S3 multipart upload and tail object).
#[tokio::test]
async fn janitor_removes_expired_uploads_and_their_bytes() {
    let h = start(Limits {
        upload_expiry_s: 1,
        janitor_interval_ms: 200,
        ..Limits::default()
    })
    .await;
    let id = create(&h, 100_000).await;
    assert_tus(&patch(&h, &id, 0, &payload(50_000, 12)).await, 204);
    wait_head_status(&h, &id, 404).await;
    assert_nothing_stored(&h).await;
}

/// A finished upload's row expires too, and the janitor removes it; the
/// media stays, and HEAD answers from it.
#[tokio::test]
async fn janitor_keeps_the_media_of_a_finished_upload() {
    let h = start(Limits {
        upload_expiry_s: 1,
        janitor_interval_ms: 200,
        ..Limits::default()
    })
    .await;
    let data = payload(50_000, 13);
    let id = create(&h, data.len()).await;
    patch_rest(&h, &id, &data, 0, 2).await;
    let open = create(&h, 10).await;
    wait_head_status(&h, &open, 404).await;
    wait_head_status(&h, &id, 200).await;
    assert_eq!(head_offset(&h, &id).await, data.len() as u64);
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
    let p = h.probe();
    wait_until("only the media blob is left", || {
        p.temp_count() == 0 && p.blob_count() == 1
    })
    .await;
}

/// tus "expiration" is about unfinished uploads; a finished one whose row
/// has expired but was not swept yet is still complete media, and must
/// not be reported gone (after the sweep HEAD says 200 from the media).
#[tokio::test]
async fn finished_upload_is_not_gone_when_its_row_expires() {
    let h = start(Limits {
        upload_expiry_s: 1,
        ..Limits::default()
    })
    .await;
    let data = payload(1000, 14);
    let id = create(&h, data.len()).await;
    patch_rest(&h, &id, &data, 0, 1).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert!(is_listed(&h, &id).await);
    let r = head(&h, &id).await;
    assert_tus(&r, 200);
    assert_eq!(offset(&r), data.len() as u64);
}

// ---------------------------------------------------------------------------
// Concatenation

/// A complete partial upload of `data`; returns its id and Location.
async fn partial(h: &Harness, data: &[u8]) -> (String, String) {
    let r = send(
        tus(h, Method::POST, "/v1/uploads")
            .header("upload-length", data.len())
            .header("upload-concat", "partial"),
    )
    .await;
    let id = created(h, &r);
    let loc = header(&r, "location").unwrap();
    patch_rest(h, &id, data, 0, 2).await;
    let r = head(h, &id).await;
    assert_eq!(header(&r, "upload-concat").as_deref(), Some("partial"));
    (id, loc)
}

async fn final_upload(h: &Harness, urls: &str) -> Response {
    let r = tus(h, Method::POST, "/v1/uploads")
        .header("upload-concat", format!("final;{urls}"))
        .header("upload-metadata", format!("filename {}", b64(b"whole.bin")));
    send(r).await
}

#[tokio::test]
async fn concatenation_of_partial_uploads_is_media_under_the_final_id() {
    let h = start(Limits::default()).await;
    let (a, b) = (payload(100_000, 15), payload(50_001, 16));
    let (ida, loca) = partial(&h, &a).await;
    let (idb, locb) = partial(&h, &b).await;
    assert!(!is_listed(&h, &ida).await, "a partial upload is no media");

    let r = final_upload(&h, &format!("{loca} {locb}")).await;
    assert_tus(&r, 201);
    let id = created(&h, &r);
    assert!(id != ida && id != idb);
    let whole = [a.clone(), b.clone()].concat();
    let r = head(&h, &id).await;
    assert_tus(&r, 200);
    let concat = header(&r, "upload-concat").unwrap();
    // Absolute, as every URL the server hands out.
    let (ua, ub) = (
        h.url(&format!("/v1/uploads/{ida}")),
        h.url(&format!("/v1/uploads/{idb}")),
    );
    assert_eq!(concat, format!("final;{ua} {ub}"));
    assert_eq!(offset(&r), whole.len() as u64);
    assert_eq!(header(&r, "upload-length"), Some(whole.len().to_string()));
    assert_media(
        &h,
        &id,
        &whole,
        Some("whole.bin"),
        "application/octet-stream",
    )
    .await;
    // The final upload takes no bytes of its own.
    assert_tus(&patch(&h, &id, whole.len(), b"x").await, 403);

    // In the order named, by path as well as by URL.
    let r = final_upload(&h, &format!("{} {}", path(&idb), path(&ida))).await;
    let id2 = created(&h, &r);
    let back = [b, a].concat();
    assert_media(
        &h,
        &id2,
        &back,
        Some("whole.bin"),
        "application/octet-stream",
    )
    .await;
}

/// 400 for an upload that is not a complete partial one; 404 for one that
/// does not exist, as on every other tus route (and in tusd).
#[tokio::test]
async fn concatenation_of_anything_but_complete_partial_uploads_is_refused() {
    let h = start(Limits::default()).await;
    let r = send(
        tus(&h, Method::POST, "/v1/uploads")
            .header("upload-length", 100)
            .header("upload-concat", "partial"),
    )
    .await;
    let open = created(&h, &r);
    assert_tus(&patch(&h, &open, 0, &[1u8; 10]).await, 204);
    let (done, _) = partial(&h, &payload(100, 17)).await;
    let plain = create(&h, 10).await;
    patch_rest(&h, &plain, &payload(10, 18), 0, 1).await;
    for (urls, what, status) in [
        (
            format!("{} {}", path(&done), path(&open)),
            "an incomplete partial",
            400,
        ),
        (
            format!("{} {}", path(&done), path(&plain)),
            "a plain upload",
            400,
        ),
        (
            format!("{} {}", path(&done), path(UNKNOWN_ID)),
            "an unknown upload",
            404,
        ),
    ] {
        let r = final_upload(&h, &urls).await;
        assert_tus(&r, status);
        let listed = h.list_all().await;
        assert_eq!(listed.len(), 1, "{what}: only the plain upload is media");
    }
}

// ---------------------------------------------------------------------------
// Creation variants

#[tokio::test]
async fn deferred_length_is_set_by_a_later_patch() {
    let h = start(Limits::default()).await;
    let data = payload(200_001, 19);
    let r = send(tus(&h, Method::POST, "/v1/uploads").header("upload-defer-length", "1")).await;
    let id = created(&h, &r);
    let r = head(&h, &id).await;
    assert_tus(&r, 200);
    assert_eq!(header(&r, "upload-defer-length").as_deref(), Some("1"));
    assert_eq!(header(&r, "upload-length"), None);
    assert_tus(&patch(&h, &id, 0, &data[..100_000]).await, 204);
    assert_eq!(
        header(&head(&h, &id).await, "upload-defer-length").as_deref(),
        Some("1")
    );
    assert!(!is_listed(&h, &id).await);

    let r = patch_req(&h, &id, 100_000, &data[100_000..]).header("upload-length", data.len());
    let r = send(r).await;
    assert_tus(&r, 204);
    assert_eq!(offset(&r), data.len() as u64);
    let r = head(&h, &id).await;
    assert_eq!(header(&r, "upload-length"), Some(data.len().to_string()));
    assert_eq!(header(&r, "upload-defer-length"), None);
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

#[tokio::test]
async fn creation_needs_exactly_one_of_length_and_deferred_length() {
    let h = start(Limits::default()).await;
    let post = || tus(&h, Method::POST, "/v1/uploads");
    for r in [
        post(),
        post()
            .header("upload-length", 10)
            .header("upload-defer-length", "1"),
        post().header("upload-defer-length", "2"),
        post().header("upload-length", "-1"),
    ] {
        assert_tus(&send(r).await, 400);
    }
    assert_nothing_stored(&h).await;
}

#[tokio::test]
async fn creation_with_upload_takes_the_first_bytes_or_the_whole_file() {
    let h = start(Limits::default()).await;
    let data = payload(MIB + 3, 20);
    let post = |body: &[u8], ct: &str| {
        tus(&h, Method::POST, "/v1/uploads")
            .header("upload-length", data.len())
            .header("content-type", ct)
            .body(body.to_vec())
    };
    let r = send(post(&data[..300_000], OCTETS)).await;
    assert_tus(&r, 201);
    assert_eq!(offset(&r), 300_000);
    let id = created(&h, &r);
    assert_eq!(head_offset(&h, &id).await, 300_000);
    patch_rest(&h, &id, &data, 300_000, 2).await;
    assert_media(&h, &id, &data, None, "application/octet-stream").await;

    let r = send(post(&data, OCTETS)).await;
    assert_eq!(offset(&r), data.len() as u64);
    let whole = created(&h, &r);
    assert_media(&h, &whole, &data, None, "application/octet-stream").await;

    // A body of another type is not upload data.
    assert_tus(&send(post(&data[..10], "text/plain")).await, 415);
    assert_eq!(h.list_all().await.len(), 2);
}

// ---------------------------------------------------------------------------
// Broken and concurrent requests

/// A PATCH cut mid-body keeps a durable prefix of what arrived (at least
/// up to the last sync point), and the upload resumes from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connection_mid_patch_keeps_a_durable_prefix() {
    let h = start(Limits {
        upload_sync_bytes: MIB as u64,
        ..Limits::default()
    })
    .await;
    let data = payload(10 * MIB, 21);
    let id = create(&h, data.len()).await;
    let sent = 3 * MIB;
    let s = raw_start(h.srv.addr, &patch_head(&id, 0, data.len()), &data[..sent]).await;
    drop(s);
    let aborted = "bulkwire_uploads_total{format=\"tus\",outcome=\"aborted\"}";
    wait_until("the PATCH ended as aborted", || {
        metric_u64(&h, aborted) == 1
    })
    .await;
    let at = head_offset(&h, &id).await as usize;
    assert!(
        (MIB..=sent).contains(&at),
        "offset {at} after {sent} bytes sent"
    );
    patch_rest(&h, &id, &data, at, 2).await;
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

/// One writer per upload: a second PATCH stops a stalled first one (409
/// on its connection) and continues from the durable offset. The file is
/// the first one's bytes up to that offset and the second one's after
/// it: none of the first's unsaved bytes, no interleaving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_patch_takes_over_from_a_stalled_one() {
    let h = start(Limits {
        upload_sync_bytes: MIB as u64,
        ..Limits::default()
    })
    .await;
    let (data, other) = (payload(4 * MIB, 22), payload(4 * MIB, 23));
    let id = create(&h, data.len()).await;
    let half = 2 * MIB + 12_345;
    let before = metric_u64(&h, "bulkwire_received_bytes_total");
    let mut first = raw_start(h.srv.addr, &patch_head(&id, 0, data.len()), &other[..half]).await;
    wait_until("the first PATCH's bytes were read", || {
        metric_u64(&h, "bulkwire_received_bytes_total") >= before + half as u64
    })
    .await;
    let (r, at) = resume(&h, &id, &data).await;
    assert_tus(&r, 204);
    assert_eq!(offset(&r), data.len() as u64);
    // The stalled request's checkpoints (every MiB) count.
    assert!((MIB..=half).contains(&at), "resumed at {at}");
    let (status, text) = raw_response(&mut first).await;
    assert_eq!(status, 409, "{text}");
    assert!(
        text.to_ascii_lowercase().contains("upload-offset:"),
        "{text}"
    );
    let file = [&other[..at], &data[at..]].concat();
    assert_media(&h, &id, &file, None, "application/octet-stream").await;
}

/// HEAD, then PATCH the rest from there; once more from the offset a
/// 409 names (a checkpoint may land between the two). The answer, and
/// the offset the PATCH went from.
async fn resume(h: &Harness, id: &str, data: &[u8]) -> (Response, usize) {
    let mut at = head_offset(h, id).await as usize;
    for _ in 0..2 {
        let r = patch(h, id, at, &data[at..]).await;
        if r.status() != 409 {
            return (r, at);
        }
        at = offset(&r) as usize;
    }
    panic!("two 409s in a row");
}

// ---------------------------------------------------------------------------
// IETF resumable uploads

#[tokio::test]
async fn ietf_interop_6_create_head_append_complete() {
    let h = start(Limits::default()).await;
    let data = payload(700_001, 23);
    let r = send(ietf(&h, Method::POST, "/v1/uploads", 6).header("upload-complete", "?0")).await;
    let id = created(&h, &r);
    assert_eq!(offset(&r), 0);
    assert_eq!(header(&r, "upload-complete").as_deref(), Some("?0"));

    let r = send(ietf(&h, Method::HEAD, &path(&id), 6)).await;
    assert_eq!(r.status(), 204);
    assert_eq!(offset(&r), 0);
    assert_eq!(header(&r, "upload-complete").as_deref(), Some("?0"));
    assert_eq!(header(&r, "cache-control").as_deref(), Some("no-store"));

    let r = send(ietf_append(&h, &id, 0, &data[..300_000], false)).await;
    assert_eq!(r.status(), 204);
    assert_eq!(offset(&r), 300_000);
    assert_eq!(header(&r, "upload-complete").as_deref(), Some("?0"));
    let r = send(ietf_append(&h, &id, 300_000, &data[300_000..], true)).await;
    assert_eq!(r.status(), 204);
    assert_eq!(offset(&r), data.len() as u64);
    assert_eq!(header(&r, "upload-complete").as_deref(), Some("?1"));
    let r = send(ietf(&h, Method::HEAD, &path(&id), 6)).await;
    assert_eq!(header(&r, "upload-complete").as_deref(), Some("?1"));
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

/// An interop 6 append: `application/partial-upload`.
fn ietf_append(h: &Harness, id: &str, at: usize, body: &[u8], last: bool) -> RequestBuilder {
    ietf(h, Method::PATCH, &path(id), 6)
        .header("content-type", PARTIAL)
        .header("upload-offset", at)
        .header("upload-complete", if last { "?1" } else { "?0" })
        .body(body.to_vec())
}

#[tokio::test]
async fn ietf_interop_6_conflict_type_and_cancellation() {
    let h = start(Limits::default()).await;
    let r = send(ietf(&h, Method::POST, "/v1/uploads", 6).header("upload-complete", "?0")).await;
    let id = created(&h, &r);
    assert_eq!(
        send(ietf_append(&h, &id, 0, b"abcdef", false))
            .await
            .status(),
        204
    );
    let r = send(ietf_append(&h, &id, 2, b"xyz", false)).await;
    assert_eq!(r.status(), 409);
    assert_eq!(offset(&r), 6);
    let append = |ct: &str| {
        ietf(&h, Method::PATCH, &path(&id), 6)
            .header("content-type", ct)
            .header("upload-offset", 6)
            .body(b"xyz".to_vec())
    };
    let r = append(OCTETS).header("upload-complete", "?0");
    assert_eq!(send(r).await.status(), 415);
    assert_eq!(
        send(append(PARTIAL)).await.status(),
        400,
        "no Upload-Complete"
    );
    let r = send(ietf(&h, Method::HEAD, &path(&id), 6)).await;
    assert_eq!(offset(&r), 6);
    assert_eq!(
        send(ietf(&h, Method::DELETE, &path(&id), 6)).await.status(),
        204
    );
    assert_eq!(
        send(ietf(&h, Method::HEAD, &path(&id), 6)).await.status(),
        404
    );
    assert_nothing_stored(&h).await;
}

#[tokio::test]
async fn ietf_interop_5_append_needs_no_content_type() {
    let h = start(Limits::default()).await;
    let data = payload(70_000, 24);
    let r = send(ietf(&h, Method::POST, "/v1/uploads", 5).header("upload-complete", "?0")).await;
    let id = created(&h, &r);
    let r = ietf(&h, Method::PATCH, &path(&id), 5)
        .header("upload-offset", 0)
        .header("upload-complete", "?1")
        .body(data.clone());
    let r = send(r).await;
    assert_eq!(r.status(), 204);
    assert_eq!(header(&r, "upload-complete").as_deref(), Some("?1"));
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

#[tokio::test]
async fn ietf_single_request_upload_is_complete_at_once() {
    let h = start(Limits::default()).await;
    let data = payload(MIB + 1, 25);
    let r = ietf(&h, Method::POST, "/v1/uploads", 6)
        .header("upload-complete", "?1")
        .header("content-type", PARTIAL)
        .body(data.clone());
    let r = send(r).await;
    let id = created(&h, &r);
    assert_eq!(offset(&r), data.len() as u64);
    assert_eq!(header(&r, "upload-complete").as_deref(), Some("?1"));
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

// ---------------------------------------------------------------------------
// Per-credential cap

async fn expect_429_open_uploads(who: RequestBuilder) {
    let r = send(who.header("upload-length", 10)).await;
    assert_tus(&r, 429);
    assert_eq!(limit_name(r).await, "open_uploads");
}

#[tokio::test]
async fn open_uploads_are_capped_per_credential() {
    let h = start(Limits {
        open_uploads: 2,
        ..Limits::default()
    })
    .await;
    let post = || tus(&h, Method::POST, "/v1/uploads");
    let (a, b) = (create(&h, 10).await, create(&h, 10).await);
    expect_429_open_uploads(post()).await;
    // Another credential has slots of its own.
    let alice = h
        .http
        .post(h.url("/v1/uploads"))
        .basic_auth("alice", Some("wonder:land"))
        .header("tus-resumable", "1.0.0")
        .header("upload-length", 10);
    created(&h, &send(alice).await);
    // Finishing one frees its slot…
    patch_rest(&h, &a, &payload(10, 26), 0, 1).await;
    let c = create(&h, 10).await;
    expect_429_open_uploads(post()).await;
    // …and so does terminating one.
    assert_tus(&send(tus(&h, Method::DELETE, &path(&b))).await, 204);
    create(&h, 10).await;
    expect_429_open_uploads(post()).await;
    assert_eq!(head_offset(&h, &c).await, 0);
}

// ---------------------------------------------------------------------------
// Quota

/// A resumable upload whose owner's quota filled up while it was under way
/// (it fitted when it was created): its last `PATCH` is 413 naming
/// `quota_items`, and nothing of it stays, as of a refused upload of any
/// other kind: no row (`HEAD` is 404), no spool, no blob, no S3 object or
/// multipart upload.
#[tokio::test]
async fn an_upload_refused_over_quota_at_its_end_leaves_nothing() {
    let one = bulkwire_server::PerRole {
        admin: Some(1),
        ..Default::default()
    };
    let h = start(Limits {
        quota_items: one,
        ..Limits::default()
    })
    .await;
    let data = payload(3000, 27);
    let id = create(&h, data.len()).await;
    assert_tus(&patch(&h, &id, 0, &data[..1000]).await, 204);
    let r = h.put("first.bin", "text/plain", b"first".to_vec()).await;
    assert_eq!(r.status(), 201, "the item the quota has room for");
    let first: Value = r.json().await.unwrap();
    let r = patch(&h, &id, 1000, &data[1000..]).await;
    assert_tus(&r, 413);
    assert_eq!(limit_name(r).await, "quota_items");
    assert_eq!(head(&h, &id).await.status(), 404, "the upload is gone");
    assert!(!is_listed(&h, &id).await);
    let r = h
        .http
        .delete(h.url(&format!(
            "/v1/media/{}",
            first["media"][0]["id"].as_str().unwrap()
        )))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_nothing_stored(&h).await;
}

// ---------------------------------------------------------------------------

#[test]
fn rerun_on_shared_stores() {
    // Every test runs there: the store-specific checks branch on the
    // backend (data/uploads on the embedded store, the S3 prefix's
    // multipart uploads and objects on the shared one).
    common::rerun_on_shared_stores(&[]);
}

// ---------------------------------------------------------------------------
// Edges found in review

#[tokio::test]
async fn an_empty_upload_is_media_at_its_creation() {
    let h = start(Limits::default()).await;
    let id = create(&h, 0).await;
    // Listed at once: a client that sends nothing more must not lose it.
    assert!(
        is_listed(&h, &id).await,
        "an empty upload is complete at once"
    );
    assert_media(&h, &id, b"", None, "application/octet-stream").await;
    assert_eq!(head_offset(&h, &id).await, 0);
}

#[tokio::test]
async fn bytes_for_a_finished_upload_are_413_and_an_empty_append_is_204() {
    let h = start(Limits::default()).await;
    let data = payload(11, 1);
    let id = create(&h, data.len()).await;
    assert_tus(&patch(&h, &id, 0, &data).await, 204);
    let r = patch(&h, &id, data.len(), b"more").await;
    assert_tus(&r, 413);
    assert_eq!(limit_name(r).await, "Upload-Length");
    let r = patch(&h, &id, data.len(), b"").await;
    assert_tus(&r, 204);
    assert_eq!(offset(&r), data.len() as u64);
    assert_media(&h, &id, &data, None, "application/octet-stream").await;
}

#[tokio::test]
async fn a_failed_creation_with_upload_leaves_nothing() {
    let h = start(Limits {
        open_uploads: 1,
        ..Limits::default()
    })
    .await;
    // Its body goes past its Upload-Length: 413, and no Location.
    let r = send(
        tus(&h, Method::POST, "/v1/uploads")
            .header("upload-length", 10)
            .header("content-type", OCTETS)
            .body(vec![7u8; 11]),
    )
    .await;
    assert_tus(&r, 413);
    assert_eq!(header(&r, "location"), None);
    assert_nothing_stored(&h).await;
    // Nor does it hold the credential's one open upload.
    let id = create(&h, 3).await;
    assert_tus(&patch(&h, &id, 0, b"abc").await, 204);
}

// ---------------------------------------------------------------------------
// Owners and scopes (the whole matrix is tests/permissions.rs)

/// A tus request with another credential.
fn tus_as(h: &Harness, bearer: &str, m: Method, p: &str) -> RequestBuilder {
    h.http
        .request(m, h.url(p))
        .bearer_auth(bearer)
        .header("tus-resumable", "1.0.0")
}

/// The `Link` of a finished upload is its item's link, a capability: it goes
/// only to a credential with `read`, as every `url` does. An upload-only
/// token (a camera's) finishes uploads by creation, by its last `PATCH`,
/// by concatenation and by an IETF append, and asks `HEAD`: no `Link`;
/// the administrator's `HEAD` of the same upload has it.
#[tokio::test]
async fn a_finished_upload_s_link_goes_only_to_a_credential_with_read() {
    let h = start(Limits::default()).await;
    let cam = add_token(&h, "cam", "upload").await;
    let post = || tus_as(&h, &cam, Method::POST, "/v1/uploads");
    let data = payload(30, 61);
    let mut finished = Vec::new();
    // Created with all its bytes.
    let r = send(
        post()
            .header("upload-length", 30)
            .header("content-type", OCTETS)
            .body(data.clone()),
    )
    .await;
    let id = created(&h, &r);
    assert_eq!(offset(&r), 30);
    finished.push((id, header(&r, "link")));
    // Its last PATCH, and two partial uploads then concatenated.
    let mut parts = Vec::new();
    for concat in [None, Some("partial"), Some("partial")] {
        let mut c = post().header("upload-length", 30);
        if let Some(v) = concat {
            c = c.header("upload-concat", v);
        }
        let id = created(&h, &send(c).await);
        let r = send(
            tus_as(&h, &cam, Method::PATCH, &path(&id))
                .header("content-type", OCTETS)
                .header("upload-offset", 0)
                .body(data.clone()),
        )
        .await;
        assert_tus(&r, 204);
        match concat {
            None => finished.push((id, header(&r, "link"))),
            Some(_) => parts.push(path(&id)),
        }
    }
    let r = send(post().header("upload-concat", format!("final;{}", parts.join(" ")))).await;
    finished.push((created(&h, &r), header(&r, "link")));
    // An IETF append with Upload-Complete: ?1.
    let ietf_as = |m: Method, p: &str| {
        h.http
            .request(m, h.url(p))
            .bearer_auth(&cam)
            .header("upload-draft-interop-version", "6")
    };
    let r = send(ietf_as(Method::POST, "/v1/uploads").header("upload-complete", "?0")).await;
    let id = created(&h, &r);
    let r = send(
        ietf_as(Method::PATCH, &path(&id))
            .header("content-type", PARTIAL)
            .header("upload-offset", 0)
            .header("upload-complete", "?1")
            .body(data.clone()),
    )
    .await;
    assert_eq!(r.status(), 204);
    finished.push((id, header(&r, "link")));

    assert_eq!(finished.len(), 4);
    for (id, link) in finished {
        assert_eq!(
            link, None,
            "{id}: the answer to the upload handed out its link"
        );
        let r = send(tus_as(&h, &cam, Method::HEAD, &path(&id))).await;
        assert_tus(&r, 200);
        assert_eq!(header(&r, "link"), None, "{id}: HEAD handed out the link");
        // The administrator (read, and every owner's) gets the link.
        let r = head(&h, &id).await;
        let link = header(&r, "link").expect("the admin's HEAD has the link");
        assert!(link.contains(&format!("/v1/media/{id}?")), "{link}");
        let m = h.list_all().await;
        let m = m.iter().find(|m| m["id"] == id.as_str()).unwrap();
        assert_eq!(m["owner"], "cam", "{m}");
    }
}

/// Another owner's partial uploads are missing ones to a concatenation:
/// 404, and nothing is made; its owner concatenates them.
#[tokio::test]
async fn concatenation_of_another_owner_s_partial_uploads_is_404() {
    let h = start(Limits::default()).await;
    let ann = add_token(&h, "ann", "upload,read").await;
    let (_, loc) = partial(&h, &payload(10, 62)).await;
    let r = send(
        tus_as(&h, &ann, Method::POST, "/v1/uploads")
            .header("upload-concat", format!("final;{loc}")),
    )
    .await;
    assert_tus(&r, 404);
    assert_eq!(h.list_all().await, Vec::<Value>::new());
    let r = final_upload(&h, &loc).await;
    assert_tus(&r, 201);
}
