//! A server that holds under abuse (DESIGN.md "Admission and abuse"): strangers
//! trickling XML-RPC calls hold no upload slot or memory and leave `/v1`
//! uploads answering 201; a call must reach its password within
//! `preauth_bytes`; a body slower than `min_body_rate` is cut with 408
//! within its deadline; at `max_connections` the longest idle connection
//! is shed and, when all are busy, a new one gets 503; an MTOM request with
//! 250 unreferenced attachments holds one temp file; and the framing RFC
//! 9112 requires (411, 400), 404 for a blob deleted under a GET, 507 for a
//! full metadata store.

mod common;
mod soap_util;

use bulkwire_server::store::{BlobStore, BlobWriter, BoxFut, Lease, MetaError};
use bulkwire_server::Limits;
use bulkwire_xop::build::{include_element, Builder};
use bulkwire_xop::SoapVersion;
use bytes::Bytes;
use common::*;
use soap_util::*;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads one answer (head and a `Content-Length` body) without waiting for
/// the server to close: a lingering server keeps the connection open until
/// the client is done. Returns (status, head and body as text).
async fn read_answer(s: &mut (impl tokio::io::AsyncRead + Unpin)) -> (u16, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
                return (status, text);
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            other => panic!(
                "no complete answer ({other:?}): {}",
                String::from_utf8_lossy(&buf)
            ),
        }
    }
}

fn metric_u64(h: &Harness, name: &str) -> u64 {
    let line = h.metric(name);
    line.trim_start_matches(name).trim().parse().unwrap_or(0)
}

const XMLRPC_PREFIX: &str = "<?xml version=\"1.0\"?><methodCall><methodName>wp.uploadFile\
    </methodName><params><param><value><int>1</int></value></param><param><value><string>";

fn xmlrpc_head(len: usize) -> String {
    format!(
        "POST /xmlrpc HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: {len}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_xmlrpc_tricklers_leave_uploads_answering_201() {
    let h = start(Limits::default()).await;
    // 64 strangers, each mid-way through params[1] and sending a byte now
    // and then: before, each took an upload slot and 4.1 MiB of the
    // 256 MiB budget, and every upload got 503 memory_budget.
    let mut tricklers = Vec::new();
    for _ in 0..64 {
        let s = raw_start(h.srv.addr, &xmlrpc_head(10 << 20), XMLRPC_PREFIX.as_bytes()).await;
        tricklers.push(s);
    }
    for t in &mut tricklers {
        t.write_all(b"a").await.unwrap();
    }
    let sent = 64 * (XMLRPC_PREFIX.len() as u64 + 1);
    wait_until("the tricklers' bytes read", || {
        metric_u64(&h, "bulkwire_received_bytes_total ") >= sent
    })
    .await;
    assert_eq!(metric_u64(&h, "bulkwire_active_uploads "), 0);
    for i in 0..8 {
        let data = payload(256 * 1024, i);
        let r = h.put(&format!("f{i}.bin"), "x/y", data).await;
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }
    let form = reqwest::multipart::Form::new().part(
        "f",
        reqwest::multipart::Part::bytes(payload(1000, 9)).file_name("f"),
    );
    assert_eq!(h.post_form(form).await.status(), 201);
    assert_eq!(h.list_all().await.len(), 9);
}

#[tokio::test]
async fn a_trickler_is_cut_by_the_minimum_rate_with_a_fault() {
    let h = start(Limits {
        min_body_rate_grace_ms: 1500,
        ..Limits::default()
    })
    .await;
    let t0 = Instant::now();
    let mut s = raw_start(h.srv.addr, &xmlrpc_head(10 << 20), XMLRPC_PREFIX.as_bytes()).await;
    let (status, text) = read_answer(&mut s).await;
    let waited = t0.elapsed();
    // XML-RPC answers everything over 200; the fault says why.
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("<int>-32300</int>"), "{text}");
    assert!(text.contains("min_body_rate"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    // The deadline: the grace plus 1 s per 500 bytes (~0.4 s here).
    assert!(waited >= Duration::from_millis(1500), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    h.assert_empty().await;
}

#[tokio::test]
async fn a_call_must_reach_its_password_within_preauth_bytes() {
    let h = start(Limits::default()).await;
    // params[0] an array of 400 short strings (~18 KiB): within every
    // codec limit, beyond preauth_bytes (16 KiB) before any password.
    let item = "<value><string>0123456789abcdefghij</string></value>";
    let mut body = String::from(
        "<?xml version=\"1.0\"?><methodCall><methodName>wp.uploadFile</methodName>\
         <params><param><value><array><data>",
    );
    for _ in 0..400 {
        body.push_str(item);
    }
    body.push_str("</data></array></value></param></params></methodCall>");
    let r = h
        .http
        .post(h.url("/xmlrpc"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("<name>faultCode</name>"), "{text}");
    assert!(text.contains("[limits] preauth_bytes = 16 KiB"), "{text}");
}

#[tokio::test]
async fn a_one_byte_per_5_s_upload_is_cut_with_408_within_its_deadline() {
    let grace = Duration::from_millis(2000);
    let h = start(Limits {
        min_body_rate_grace_ms: grace.as_millis() as u64,
        ..Limits::default()
    })
    .await;
    let head = format!(
        "PUT /v1/media/slow.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Length: 1000\r\n\r\n"
    );
    let t0 = Instant::now();
    let s = raw_start(h.srv.addr, &head, b"a").await;
    let (mut rd, mut wr) = s.into_split();
    let trickle = async {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            if wr.write_all(b"a").await.is_err() {
                break;
            }
        }
    };
    let (status, text) = tokio::select! {
        a = read_answer(&mut rd) => a,
        () = trickle => panic!("the connection broke before an answer"),
    };
    let waited = t0.elapsed();
    assert_eq!(status, 408, "{text}");
    assert!(text.contains("\"name\":\"min_body_rate\""), "{text}");
    // Deadline: grace + 1 byte at 500 bytes/s (slack for a busy CI machine),
    // far from the 30 s idle timeout.
    assert!(waited >= grace, "{waited:?}");
    assert!(waited < grace + Duration::from_secs(5), "{waited:?}");
    h.assert_empty().await;
}

#[tokio::test]
async fn at_max_connections_the_idle_one_is_shed_and_busy_ones_kept() {
    let h = start(Limits {
        max_connections: Some(2),
        ..Limits::default()
    })
    .await;
    let head = format!(
        "PUT /v1/media/busy.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Length: 1000\r\n\r\n"
    );
    // One busy (mid-upload), one idle (connected, nothing sent).
    let mut busy = raw_start(h.srv.addr, &head, b"0123456789").await;
    wait_until("the upload began", || {
        metric_u64(&h, "bulkwire_active_uploads ") == 1
    })
    .await;
    let mut idle = TcpStream::connect(h.srv.addr).await.unwrap();
    wait_until("two connections", || {
        metric_u64(&h, "bulkwire_connections ") == 2
    })
    .await;
    // A third: the idle one makes room.
    let mut third = raw_start(h.srv.addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", b"").await;
    assert_eq!(read_answer(&mut third).await.0, 200);
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut b)).await;
    assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "{n:?}");
    assert_eq!(metric_u64(&h, "bulkwire_connections_shed_total "), 1);
    // Make the third busy too: the next one is refused with 503.
    third
        .write_all(head.replace("busy.bin", "busy2.bin").as_bytes())
        .await
        .unwrap();
    wait_until("two uploads", || {
        metric_u64(&h, "bulkwire_active_uploads ") == 2
    })
    .await;
    let mut fourth = raw_start(h.srv.addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", b"").await;
    let (status, text) = read_answer(&mut fourth).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("max_connections"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("retry-after: 1"),
        "{text}"
    );
    // The busy upload was never disturbed: it completes.
    busy.write_all(&[b'x'; 990]).await.unwrap();
    assert_eq!(read_answer(&mut busy).await.0, 201);
}

/// A blob store that counts its writers alive at once (each holds a file
/// descriptor in the embedded store).
#[derive(Default)]
struct Live {
    now: AtomicUsize,
    peak: AtomicUsize,
}

struct LiveHook(Arc<Live>);

struct LiveWriter {
    inner: Box<dyn BlobWriter>,
    _alive: Alive,
}

/// One writer alive, until dropped (after its commit, if any).
struct Alive(Arc<Live>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, SeqCst);
    }
}

impl StoreHook for LiveHook {
    fn begin<'a>(
        &'a self,
        inner: &'a dyn BlobStore,
        id: &'a str,
        lease: Arc<Lease>,
    ) -> BoxFut<'a, io::Result<Box<dyn BlobWriter>>> {
        Box::pin(async move {
            let w = inner.begin(id, lease).await?;
            let n = self.0.now.fetch_add(1, SeqCst) + 1;
            self.0.peak.fetch_max(n, SeqCst);
            let alive = Alive(self.0.clone());
            Ok(Box::new(LiveWriter {
                inner: w,
                _alive: alive,
            }) as Box<dyn BlobWriter>)
        })
    }
}

impl BlobWriter for LiveWriter {
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, io::Result<()>> {
        self.inner.write(chunks)
    }
    fn commit(self: Box<Self>) -> BoxFut<'static, io::Result<()>> {
        let LiveWriter { inner, _alive } = *self;
        Box::pin(async move {
            let r = inner.commit().await;
            drop(_alive);
            r
        })
    }
    fn takes_aligned(&self) -> bool {
        self.inner.takes_aligned()
    }
}

#[tokio::test]
async fn mtom_with_250_unreferenced_attachments_holds_one_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let live = Arc::new(Live::default());
    let blobs = Hooked {
        inner: common::blob_store(dir.path()),
        hook: LiveHook(live.clone()),
    };
    let meta = common::meta_store(dir.path()).await;
    let h = start_with(dir, Limits::default(), Arc::new(blobs), meta).await;
    let data = payload(10_000, 1);
    let mut b = Builder::new(SoapVersion::Soap12);
    b.envelope(envelope(SOAP12, "d.bin", None, &include_element("data@t")))
        .bytes("data@t", "application/octet-stream", data.clone());
    for i in 0..250 {
        b.bytes(
            &format!("junk{i}@t"),
            "application/octet-stream",
            vec![7u8; 100],
        );
    }
    let body = b.finish().unwrap();
    let r = h
        .http
        .post(h.url("/soap"))
        .header("content-type", body.content_type())
        .header("authorization", basic("alice:wonder:land"))
        .body(body.to_vec().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // The `data` file alone ever had a writer (a descriptor).
    assert_eq!(live.peak.load(SeqCst), 1);
    let all = h.list_all().await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["sha256"], sha256(&data));
}

/// Sends a raw request and reads its answer.
async fn raw_status(h: &Harness, req: &str) -> (u16, String) {
    let mut s = raw_start(h.srv.addr, req, b"").await;
    read_answer(&mut s).await
}

#[tokio::test]
async fn framing_rfc_9112_requires() {
    let h = start(Limits::default()).await;
    let auth = format!("Authorization: Bearer {TOKEN}");
    // HTTP/1.0 has no chunked coding: a body needs a length (411), not a
    // 201 for an empty file.
    let (s, t) = raw_status(
        &h,
        &format!("PUT /v1/media/a HTTP/1.0\r\n{auth}\r\n\r\nbody"),
    )
    .await;
    assert_eq!(s, 411, "{t}");
    assert!(t.contains("length_required"), "{t}");
    // HTTP/1.1 without Host, or with two (§3.2).
    let (s, t) = raw_status(&h, "GET /healthz HTTP/1.1\r\n\r\n").await;
    assert_eq!(s, 400, "{t}");
    let (s, _) = raw_status(&h, "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").await;
    assert_eq!(s, 400);
    // chunked twice (§6.1), in two fields or in one.
    for te in [
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
        "Transfer-Encoding: chunked, chunked",
    ] {
        let req = format!("PUT /v1/media/b HTTP/1.1\r\nHost: x\r\n{auth}\r\n{te}\r\n\r\n0\r\n\r\n");
        let (s, t) = raw_status(&h, &req).await;
        assert_eq!(s, 400, "{te}: {t}");
    }
    // A 411 closes the connection: what the client meant as a body is
    // never read as the next request (request smuggling).
    let smuggled = format!(
        "PUT /v1/media/d HTTP/1.0\r\nConnection: keep-alive\r\n{auth}\r\n\r\n\
         GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    );
    let mut s = raw_start(h.srv.addr, &smuggled, b"").await;
    let (status, text) = raw_response(&mut s).await;
    assert_eq!(status, 411, "{text}");
    assert!(
        !text.contains("200 OK"),
        "the body ran as a request: {text}"
    );
    // What stays fine: HTTP/1.0 without Host, and with a length.
    assert_eq!(raw_status(&h, "GET /healthz HTTP/1.0\r\n\r\n").await.0, 200);
    let req = format!("PUT /v1/media/c HTTP/1.0\r\n{auth}\r\nContent-Length: 2\r\n\r\nok");
    assert_eq!(raw_status(&h, &req).await.0, 201);
    assert_eq!(h.list_all().await.len(), 1);
}

#[tokio::test]
async fn a_blob_deleted_under_a_get_is_404_not_500() {
    let h = start(Limits::default()).await;
    let r = h.put("a.bin", "x/y", payload(5000, 2)).await;
    let j: serde_json::Value = r.json().await.unwrap();
    let id = j["media"][0]["id"].as_str().unwrap().to_string();
    // The window of a racing DELETE: the row was read, the blob is gone.
    std::fs::remove_file(h.data().join("blobs").join(&id)).unwrap();
    let r = h.get(&format!("/v1/media/{id}")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    // Racing DELETEs: one 204, the other 404, never 500.
    let r = h.put("b.bin", "x/y", payload(5000, 3)).await;
    let j: serde_json::Value = r.json().await.unwrap();
    let url = j["media"][0]["url"].as_str().unwrap().to_string();
    let del = || h.http.delete(h.url(&url)).bearer_auth(TOKEN).send();
    let (a, b) = tokio::join!(del(), del());
    let mut got = [a.unwrap().status().as_u16(), b.unwrap().status().as_u16()];
    got.sort();
    assert_eq!(got, [204, 404]);
}

#[tokio::test]
async fn a_full_metadata_store_is_507_and_leaves_nothing() {
    // Inserts fail as SQLite's do when the disk is full (`SQLITE_FULL`;
    // that mapping is unit-tested against a real database in the store).
    let dir = tempfile::tempdir().unwrap();
    let meta = FailingMeta {
        insert: Some(MetaError::full("database or disk is full")),
        ..FailingMeta::on(common::meta_store(dir.path()).await)
    };
    let blobs = common::blob_store(dir.path());
    let h = start_with(dir, Limits::default(), blobs, Arc::new(meta)).await;
    let r = h.put("a.bin", "x/y", payload(100_000, 5)).await;
    assert_eq!(r.status(), 507);
    let j: serde_json::Value = r.json().await.unwrap();
    assert_eq!(j["error"], "storage_full");
    h.assert_empty().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_uploads_holding_every_slot_yield_to_a_new_one() {
    let h = start(Limits {
        max_uploads: 2,
        ..Limits::default()
    })
    .await;
    let head = |n: usize| {
        format!(
            "PUT /v1/media/slow{n}.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Length: 1000\r\n\r\n"
        )
    };
    // Two uploads a few bytes in, well within their 20 s grace, hold both
    // slots; before, every other upload got 503 until they were cut.
    let mut slow = Vec::new();
    for n in 0..2 {
        slow.push(raw_start(h.srv.addr, &head(n), b"0123456789").await);
    }
    wait_until("both slots taken", || {
        metric_u64(&h, "bulkwire_active_uploads ") == 2
    })
    .await;
    // Older than PREEMPT_MIN_AGE, at 10 bytes/s: below min_body_rate.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let data = payload(300_000, 8);
    let r = h.put("fast.bin", "x/y", data.clone()).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    assert_eq!(metric_u64(&h, "bulkwire_uploads_preempted_total "), 1);
    // One slow upload was told why, and stored nothing.
    let mut answers = Vec::new();
    for s in &mut slow {
        let mut b = [0u8; 1];
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(500), s.peek(&mut b)).await {
            answers.push(read_answer(s).await);
        }
    }
    assert_eq!(answers.len(), 1, "{answers:?}");
    let (status, text) = &answers[0];
    assert_eq!(*status, 408, "{text}");
    assert!(text.contains("while the server was full"), "{text}");
    let all = h.list_all().await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["sha256"], sha256(&data));
}

#[tokio::test]
async fn the_body_deadline_grows_with_the_bytes_received() {
    let h = start(Limits {
        min_body_rate_grace_ms: 1000,
        ..Limits::default()
    })
    .await;
    // 200 bytes every 100 ms, 2,000 bytes/s: four times min_body_rate, for
    // 3 s, three times the grace: never cut.
    let put = |name: &str, len: usize| {
        format!(
            "PUT /v1/media/{name} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Length: {len}\r\n\r\n"
        )
    };
    let mut s = raw_start(h.srv.addr, &put("steady.bin", 6000), b"").await;
    for _ in 0..30 {
        s.write_all(&[b's'; 200]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(read_answer(&mut s).await.0, 201);
    // 50 bytes every 300 ms, ~167 bytes/s: data keeps coming (no idle
    // timeout), but the deadline, grace + bytes / 500 per s, falls behind.
    let t0 = Instant::now();
    let s = raw_start(h.srv.addr, &put("dribble.bin", 100_000), b"").await;
    let (mut rd, mut wr) = s.into_split();
    let dribble = async {
        loop {
            if wr.write_all(&[b'd'; 50]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    let (status, text) = tokio::select! {
        a = read_answer(&mut rd) => a,
        () = dribble => panic!("the connection broke before an answer"),
    };
    assert_eq!(status, 408, "{text}");
    assert!(text.contains("min_body_rate"), "{text}");
    // Cut later than the grace alone: the bytes bought it time.
    assert!(
        t0.elapsed() > Duration::from_millis(1100),
        "{:?}",
        t0.elapsed()
    );
    let all = h.list_all().await;
    assert_eq!(all.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_whose_answer_is_still_being_sent_is_not_cut_by_shedding() {
    let h = start(Limits {
        max_connections: Some(1),
        ..Limits::default()
    })
    .await;
    let data = payload(1 << 20, 6);
    let r = h.put("big.bin", "x/y", data.clone()).await;
    let j: serde_json::Value = r.json().await.unwrap();
    let url = j["media"][0]["url"].as_str().unwrap().to_string();
    let before = metric_u64(&h, "bulkwire_sent_bytes_total ");
    let req = format!("GET {url} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    let mut dl = raw_start(h.srv.addr, &req, b"").await;
    // The client reads nothing yet: the server hands the whole blob to
    // hyper, which drops the answer's body (the request is done, the
    // connection idle) while the tail still waits in its buffer and the
    // kernel's. Before, shedding dropped the connection there and the
    // download ended short with a clean EOF.
    wait_until("the whole blob handed to hyper", || {
        metric_u64(&h, "bulkwire_sent_bytes_total ") >= before + data.len() as u64
    })
    .await;
    let newcomer = raw_start(h.srv.addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", b"");
    let mut newcomer = newcomer.await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut all = Vec::new();
    let r = tokio::time::timeout(Duration::from_secs(20), dl.read_to_end(&mut all)).await;
    assert!(r.is_ok(), "the download stalled");
    let text = String::from_utf8_lossy(&all);
    let head_end = text.find("\r\n\r\n").expect("a head") + 4;
    assert_eq!(all.len() - head_end, data.len(), "download cut short");
    assert_eq!(sha256(&all[head_end..]), sha256(&data));
    // The newcomer got in once the download's connection closed (the
    // download itself had shed the client's pooled keep-alive connection).
    assert_eq!(read_answer(&mut newcomer).await.0, 200);
    assert_eq!(metric_u64(&h, "bulkwire_connections_shed_total "), 2);
}
