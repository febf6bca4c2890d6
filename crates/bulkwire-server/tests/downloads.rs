//! Downloads as they leave the server: every byte by `sendfile` from the
//! file store (by stream from the object stores), across the chunks the body is cut into,
//! on keep-alive connections between uploads; a blob truncated or
//! rewritten under a download cuts that download and nothing else;
//! readers that stop reading are closed after `send_timeout_ms` while
//! others are served; caching headers and conditions (RFC 9110 §13,
//! RFC 9111, RFC 8246); on S3 with `download_redirect`, curl `-L` and an
//! `<img>` in headless Chromium (`testsuite/node/img_chromium.js`) through
//! the redirect, with the item's type and disposition.

mod common;

use bulkwire_server::downloads::{Route, Via};
use bulkwire_server::Limits;
use common::*;
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One chunk of a `sendfile` body (`bulkwire_server::sendfile::CHUNK`).
const CHUNK: usize = bulkwire_server::sendfile::CHUNK;

/// Stores `data` as `name`; its id.
async fn stored(h: &Harness, name: &str, data: &[u8]) -> String {
    stored_as(h, name, "application/octet-stream", data).await
}

/// Stores `data` as `name` of type `ct`; its id.
async fn stored_as(h: &Harness, name: &str, ct: &str, data: &[u8]) -> String {
    let r = h.put(name, ct, data.to_vec()).await;
    assert_eq!(r.status(), 201);
    let j: Value = r.json().await.unwrap();
    j["media"][0]["id"].as_str().unwrap().to_string()
}

/// Whether the suite's store answers `download_redirect` with a redirect:
/// S3 only. Files have no URL of their own; Azure and GCS cannot sign the
/// item's headers into one (the storage chapter), and proxy.
fn redirects() -> bool {
    backend() == Backend::Shared && object_store() == "s3"
}

/// The way the suite's store sends: `sendfile` from files, else a stream.
fn via() -> Via {
    match backend() {
        Backend::Embedded => Via::Sendfile,
        Backend::Shared => Via::Stream,
    }
}

#[tokio::test]
async fn downloads_carry_every_byte_whole_and_by_range() {
    let h = start(Limits::default()).await;
    let d = h.srv.state.metrics.downloads.clone();
    let before = d.bytes(Route::Media, via());
    let mut sent = 0u64;
    for (i, len) in [1, 65_536, CHUNK + 3].into_iter().enumerate() {
        let data = payload(len, i as u64);
        let id = stored(&h, &format!("f{i}.bin"), &data).await;
        let got = h.download(&format!("/v1/media/{id}")).await;
        assert_eq!(got.len(), len);
        assert!(got == data, "{len} bytes");
        sent += len as u64;
        // Ranges: the first byte, the last, one across a chunk's end.
        let mut ranges = vec![(0, 0), (len - 1, len - 1)];
        if len > CHUNK {
            ranges.push((CHUNK - 10, CHUNK + 1));
        }
        for (a, b) in ranges {
            let r = h
                .get(&format!("/v1/media/{id}"))
                .header("range", format!("bytes={a}-{b}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 206);
            assert_eq!(r.bytes().await.unwrap(), data[a..=b], "{a}-{b} of {len}");
            sent += (b - a + 1) as u64;
        }
        let r = h
            .http
            .head(h.url(&format!("/v1/media/{id}")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["content-length"], len.to_string().as_str());
    }
    assert_eq!(d.bytes(Route::Media, via()) - before, sent);
    wait_until("no download in progress", || {
        d.in_progress.load(std::sync::atomic::Ordering::Relaxed) == 0
    })
    .await;
}

/// This process's threads named as `connection_threads` workers.
fn worker_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("bulkwire-conn-"))
        .count()
}

/// With `connection_threads`, connections are served by worker threads
/// with an event loop each (`bulkwire_server::workers`): uploads, and
/// downloads whole and by range, eight connections at once (on either
/// store: the shared ones' clients are the server runtime's); the workers
/// end with the server.
#[tokio::test]
async fn worker_threads_serve_connections_and_end_with_the_server() {
    let h = start_edited(|c| c.limits.connection_threads = 2).await;
    // They start with the server's task.
    wait_until("two workers started", || worker_threads() == 2).await;
    let mut tasks = Vec::new();
    for i in 0..8u64 {
        let (http, base) = (client(), h.url(""));
        tasks.push(tokio::spawn(async move {
            let data = payload(CHUNK / 4 + i as usize, 100 + i);
            let r = http
                .put(format!("{base}/v1/media/w{i}.bin"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/octet-stream")
                .body(data.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201);
            let j: Value = r.json().await.unwrap();
            let url = format!("{base}/v1/media/{}", j["media"][0]["id"].as_str().unwrap());
            let get = |range: Option<&str>| {
                let r = http.get(&url).bearer_auth(TOKEN);
                match range {
                    Some(v) => r.header("range", v),
                    None => r,
                }
            };
            let whole = get(None).send().await.unwrap().bytes().await.unwrap();
            assert!(whole == data, "connection {i}: every byte");
            let r = get(Some("bytes=1000-1999")).send().await.unwrap();
            assert_eq!(r.status(), 206);
            assert_eq!(r.bytes().await.unwrap(), data[1000..2000]);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let Harness { srv, dir, .. } = h;
    srv.shutdown().await.unwrap();
    drop(dir);
    wait_until("the workers ended with the server", || {
        worker_threads() == 0
    })
    .await;
}

/// Reads an answer's head, byte by byte (the body stays in the socket),
/// lower-cased.
async fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    String::from_utf8(head).unwrap().to_ascii_lowercase()
}

/// The `Content-Length` of a lower-cased head (0 without one).
fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// Reads one answer from a keep-alive connection: status, headers (lower
/// case), body by `Content-Length`.
async fn answer(s: &mut TcpStream) -> (u16, String, Vec<u8>) {
    let head = read_head(s).await;
    let status = head[9..12].parse().unwrap();
    let mut body = vec![0; content_length(&head)];
    s.read_exact(&mut body).await.unwrap();
    (status, head, body)
}

#[tokio::test]
async fn one_connection_serves_downloads_and_uploads_in_turn() {
    let h = start(Limits::default()).await;
    let data = payload(3 * CHUNK / 2, 7);
    let id = stored(&h, "keep.bin", &data).await;
    let mut s = TcpStream::connect(h.srv.addr).await.unwrap();
    let get = |extra: &str| {
        format!("GET /v1/media/{id} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n{extra}\r\n")
    };
    s.write_all(get("").as_bytes()).await.unwrap();
    let (st, _, body) = answer(&mut s).await;
    assert_eq!((st, body == data), (200, true));
    let up = b"uploaded between two downloads";
    let put = format!(
        "PUT /v1/media/between.txt HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
        up.len()
    );
    s.write_all(put.as_bytes()).await.unwrap();
    s.write_all(up).await.unwrap();
    let (st, _, body) = answer(&mut s).await;
    assert_eq!(st, 201, "{}", String::from_utf8_lossy(&body));
    // Pipelined: a range and a HEAD sent together, answered in turn.
    let both = format!(
        "{}{}",
        get("range: bytes=100-199\r\n"),
        get("").replacen("GET", "HEAD", 1)
    );
    s.write_all(both.as_bytes()).await.unwrap();
    let (st, _, body) = answer(&mut s).await;
    assert_eq!((st, &body[..]), (206, &data[100..200]));
    let head = read_head(&mut s).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    s.write_all(get("").as_bytes()).await.unwrap();
    let (st, _, body) = answer(&mut s).await;
    assert_eq!(
        (st, body == data),
        (200, true),
        "the connection still serves"
    );
}

/// Starts a download of `id` on a raw connection and reads its head and
/// `first` body bytes; the connection and the `Content-Length`.
async fn started(h: &Harness, id: &str, first: usize) -> (TcpStream, usize) {
    let mut s = TcpStream::connect(h.srv.addr).await.unwrap();
    let req =
        format!("GET /v1/media/{id} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let head = read_head(&mut s).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let len = content_length(&head);
    let mut buf = vec![0; first];
    s.read_exact(&mut buf).await.unwrap();
    (s, len)
}

/// Reads to the end (EOF or a reset) within 30 s; the bytes read.
async fn rest(s: &mut TcpStream) -> usize {
    let mut n = 0;
    let mut buf = vec![0; 1 << 16];
    let read = async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the download ends");
    n
}

#[tokio::test]
async fn a_blob_truncated_or_rewritten_under_a_download_cuts_it_and_the_next_works() {
    let h = start(Limits::default()).await;
    let good = payload(1 << 20, 1);
    let good_id = stored(&h, "good.bin", &good).await;
    for how in ["truncated", "rewritten shorter"] {
        let data = payload(64 << 20, 2);
        let id = stored(&h, &format!("{how}.bin"), &data).await;
        let (mut s, len) = started(&h, &id, 64 << 10).await;
        assert_eq!(len, data.len());
        let path = h.data().join("blobs").join(&id);
        match how {
            "truncated" => std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(1 << 20)
                .unwrap(),
            // What `cp other blob` does: O_TRUNC, then the new bytes.
            _ => std::fs::write(&path, payload(2 << 20, 3)).unwrap(),
        }
        let got = (64 << 10) + rest(&mut s).await;
        assert!(got < len, "{how}: cut short ({got} of {len} bytes)");
        // The server is whole and serves the next download.
        assert_eq!(h.download(&format!("/v1/media/{good_id}")).await, good);
    }
    let r = h.http.get(h.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn a_deleted_blob_finishes_the_download_in_progress() {
    let h = start(Limits::default()).await;
    let data = payload(32 << 20, 4);
    let id = stored(&h, "gone.bin", &data).await;
    let (mut s, len) = started(&h, &id, 1 << 10).await;
    let r = h
        .http
        .delete(h.url(&format!("/v1/media/{id}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    // Keep-alive: the answer ends at its length, not at a close.
    let mut body = vec![0; len - (1 << 10)];
    let read = tokio::time::timeout(Duration::from_secs(30), s.read_exact(&mut body));
    read.await.expect("sent whole in time").expect("sent whole");
    assert!(body[..] == data[1 << 10..], "the deleted item's own bytes");
    let r = h.get(&format!("/v1/media/{id}")).send().await.unwrap();
    assert_eq!(r.status(), 404);
}

/// Downloads remember an item's row (`media_cache_ms`); an item deleted
/// where this server does not see it (another node, the CLI) is still a
/// 404 at once, for GET and HEAD: its bytes are gone (its variants:
/// `tests/variants.rs`).
#[tokio::test]
async fn an_item_deleted_elsewhere_is_gone_though_its_row_was_remembered() {
    let h = start(Limits::default()).await;
    let data = payload(3 << 20, 9);
    let id = stored(&h, "elsewhere.bin", &data).await;
    let path = format!("/v1/media/{id}");
    assert_eq!(h.download(&path).await, data, "the row is remembered now");
    let state = &h.srv.state;
    let gone = state.meta.delete(&id, None, "elsewhere", None).await;
    assert!(gone.unwrap().is_some(), "the row was there");
    state.blobs.delete(&id).await.unwrap();
    let r = h.get(&path).send().await.unwrap();
    assert_eq!(
        r.status(),
        404,
        "GET of a remembered row whose blob is gone"
    );
    let r = h.http.head(h.url(&path)).bearer_auth(TOKEN).send().await;
    assert_eq!(r.unwrap().status(), 404, "HEAD");
    let r = h.get("/healthz").send().await.unwrap();
    assert_eq!(r.status(), 200);
}

/// Raises the soft descriptor limit to the hard one (this process holds
/// both ends of every connection); fails when that is not `want`.
fn descriptors(want: u64) {
    let got = bulkwire_server::conns::raise_descriptor_limit();
    assert!(
        got >= want,
        "this test needs {want} descriptors, the hard limit is {got}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_stop_are_closed_after_send_timeout_and_others_are_served() {
    const READERS: usize = 1000;
    descriptors(2 * READERS as u64 + 256);
    let h = start_edited(|c| c.limits.send_timeout_ms = 2_000).await;
    let data = payload(16 << 20, 5);
    let id = stored(&h, "big.bin", &data).await;
    let small = payload(100_000, 6);
    let small_id = stored(&h, "small.bin", &small).await;
    let req =
        format!("GET /v1/media/{id} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\r\n");
    let mut conns = Vec::with_capacity(READERS);
    for _ in 0..READERS {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        // A small window: the stalled bytes in flight stay few.
        sock.set_recv_buffer_size(4096).unwrap();
        let mut s = sock.connect(h.srv.addr).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        conns.push(s);
    }
    let t0 = Instant::now();
    // While they stall, another client is served.
    assert_eq!(h.download(&format!("/v1/media/{small_id}")).await, small);
    let d = h.srv.state.metrics.downloads.clone();
    let cut = || d.send_timeouts.load(std::sync::atomic::Ordering::Relaxed);
    let deadline = Duration::from_millis(2_000 + 5_000);
    while cut() < READERS as u64 && t0.elapsed() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        cut(),
        READERS as u64,
        "closed within send_timeout + 5 s ({:?})",
        t0.elapsed()
    );
    for s in &mut conns {
        assert!(rest(s).await < data.len(), "cut, not sent whole");
    }
    assert_eq!(h.download(&format!("/v1/media/{small_id}")).await, small);
    wait_until("every stalled download let go", || {
        d.in_progress.load(std::sync::atomic::Ordering::Relaxed) == 0
    })
    .await;
}

#[tokio::test]
async fn downloads_are_cacheable_as_immutable() {
    let h = start_edited(|_| {}).await;
    let id = stored(&h, "c.bin", b"cacheable").await;
    let path = format!("/v1/media/{id}");
    let r = h.get(&path).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let hs = r.headers().clone();
    assert_eq!(hs["cache-control"], "private, max-age=31536000, immutable");
    let lm = hs["last-modified"].to_str().unwrap().to_string();
    let etag = hs["etag"].to_str().unwrap().to_string();
    let made = httpdate::parse_http_date(&lm).unwrap();
    let age = std::time::SystemTime::now().duration_since(made).unwrap();
    assert!(
        age < Duration::from_secs(60),
        "Last-Modified is its creation"
    );
    // If-Modified-Since: current is 304 with the validators; older is 200.
    let r = h
        .get(&path)
        .header("if-modified-since", &lm)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    assert_eq!(r.headers()["etag"], etag.as_str());
    assert_eq!(r.headers()["last-modified"], lm.as_str());
    assert!(r.headers().contains_key("cache-control"));
    let older = httpdate::fmt_http_date(made - Duration::from_secs(86_400));
    let r = h
        .get(&path)
        .header("if-modified-since", older)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // If-None-Match decides when both come (RFC 9110 §13.2.2).
    let r = h
        .get(&path)
        .header("if-none-match", "\"other\"")
        .header("if-modified-since", &lm)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Through a link without expiry: public, for a CDN to keep.
    let link = link_of(&h, &id).await;
    let r = h.http.get(h.url(&link)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
}

#[tokio::test]
async fn a_link_with_an_expiry_is_cached_no_longer_than_it_lives() {
    let h = start_edited(|c| c.link_ttl = Some(600)).await;
    let id = stored(&h, "ttl.bin", b"short-lived").await;
    let link = link_of(&h, &id).await;
    assert!(link.contains("exp="), "{link}");
    let r = h.http.get(h.url(&link)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let cc = r.headers()["cache-control"].to_str().unwrap().to_string();
    let age: u64 = cc
        .strip_prefix("public, max-age=")
        .and_then(|v| v.strip_suffix(", immutable"))
        .unwrap_or_else(|| panic!("{cc}"))
        .parse()
        .unwrap();
    assert!((590..=600).contains(&age), "{cc}");
    assert_eq!(
        h.srv.state.metrics.downloads.bytes(Route::Link, via()),
        11,
        "counted on the link route"
    );
}

/// The item's link, as listing hands it out.
async fn link_of(h: &Harness, id: &str) -> String {
    let r = h.get("/v1/media?limit=100").send().await.unwrap();
    let j: Value = r.json().await.unwrap();
    let m = j["media"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap()
        .clone();
    m["url"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn metrics_name_downloads_by_store_route_and_way() {
    let h = start(Limits::default()).await;
    let id = stored(&h, "m.bin", &payload(5000, 9)).await;
    h.download(&format!("/v1/media/{id}")).await;
    let store = match backend() {
        Backend::Embedded => "file",
        Backend::Shared => object_store(),
    };
    let way = match via() {
        Via::Sendfile => "sendfile",
        Via::Stream => "stream",
    };
    let line = h.metric(&format!(
        "bulkwire_download_bytes_total{{store=\"{store}\",route=\"media\",via=\"{way}\"}}"
    ));
    assert!(line.ends_with(" 5000"), "{line}");
    assert!(h.metric("bulkwire_sent_bytes_total").ends_with(" 5000"));
    assert!(h.metric("bulkwire_downloads_in_progress").ends_with(" 0"));
    assert!(h.metric("bulkwire_send_timeouts_total").ends_with(" 0"));
}

/// A client that answers a redirect with the redirect itself.
fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `curl -sS -L` of `url` (with `args`): the status line and headers of
/// the last answer, and its body. On a blocking thread: the server under
/// test answers on this test's runtime.
async fn curl_follow(url: &str, args: &[&str]) -> (String, Vec<u8>) {
    let url = url.to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || curl_follow_blocking(&url, &args))
        .await
        .unwrap()
}

fn curl_follow_blocking(url: &str, args: &[String]) -> (String, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let out = std::process::Command::new("curl")
        .args(["-sS", "-L", "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = std::fs::read_to_string(head).unwrap();
    // With -L, -D holds every answer's head: the last one is the object's.
    let last = head.rsplit("HTTP/").next().unwrap().to_ascii_lowercase();
    (last, std::fs::read(body).unwrap())
}

#[tokio::test]
async fn download_redirect_sends_the_client_to_the_object_store() {
    let h = start_edited(|c| {
        c.s3.download_redirect = true;
        c.link_ttl = Some(120);
    })
    .await;
    let data = payload(3 << 20, 11);
    let r = h.put("a photo.png", "image/png", data.clone()).await;
    assert_eq!(r.status(), 201);
    let j: Value = r.json().await.unwrap();
    let id = j["media"][0]["id"].as_str().unwrap().to_string();
    let link = h.url(&link_of(&h, &id).await);
    let d = h.srv.state.metrics.downloads.clone();
    let no_follow = no_redirects();
    let r = no_follow.get(&link).send().await.unwrap();
    if !redirects() {
        // No URL that keeps the item's headers (files, Azure, GCS): the
        // node sends the bytes, with them, redirect or not.
        assert_eq!(r.status(), 200);
        let disposition = r.headers()["content-disposition"].to_str().unwrap();
        assert!(disposition.starts_with("inline; filename=\"a photo.png\""));
        assert_eq!(r.headers()["content-type"], "image/png");
        assert_eq!(r.bytes().await.unwrap(), data);
        assert_eq!(d.redirects.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(d.bytes(Route::Link, via()), data.len() as u64);
        return;
    }
    assert_eq!(r.status(), 307);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    let sw = bulkwire_testenv::must(bulkwire_testenv::shared_seaweed());
    assert!(to.starts_with(&sw.endpoint()), "{to}");
    let cc = r.headers()["cache-control"].to_str().unwrap();
    let kept: u64 = cc
        .strip_prefix("private, max-age=")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (58..=60).contains(&kept),
        "half the URL's life, the link's 120 s: {cc}"
    );
    // curl -L: the object store's answer, with the item's type and name.
    let (head, body) = curl_follow(&link, &[]).await;
    assert!(head.starts_with("1.1 200"), "{head}");
    assert!(body == data, "the same bytes");
    assert!(head.contains("content-type: image/png"), "{head}");
    assert!(
        head.contains("content-disposition: inline; filename=\"a photo.png\""),
        "{head}"
    );
    assert!(head.contains("cache-control: public, max-age="), "{head}");
    // A range goes along; credentials are not sent on to another host.
    let (head, body) = curl_follow(&link, &["-r", "100-199"]).await;
    assert!(head.starts_with("1.1 206"), "{head}");
    assert_eq!(body, data[100..200]);
    let auth = format!("Authorization: Bearer {TOKEN}");
    let (head, body) = curl_follow(&h.url(&format!("/v1/media/{id}")), &["-H", &auth]).await;
    assert!(head.starts_with("1.1 200"), "{head}");
    assert!(
        head.contains("cache-control: private, max-age=31536000, immutable"),
        "{head}"
    );
    assert!(body == data);
    // Conditions are answered here, without a redirect.
    let etag = format!("\"{}\"", sha256(&data));
    let r = no_follow
        .get(&link)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    // The node carried none of the bytes.
    for route in [Route::Link, Route::Media] {
        assert_eq!(
            d.bytes(route, Via::Stream) + d.bytes(route, Via::Sendfile),
            0
        );
    }
    assert_eq!(d.redirects.load(std::sync::atomic::Ordering::Relaxed), 4);
}

/// A picture on a page, as a browser shows it: an `<img>` of the item's
/// link in headless Chromium follows the redirect itself and decodes the
/// object store's answer, which carries the item's type and disposition.
#[cfg_attr(
    any(missing_chromium, missing_node),
    ignore = "needs chromium and node (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test]
async fn a_browser_img_follows_the_redirect() {
    let h = start_edited(|c| c.s3.download_redirect = true).await;
    let id = stored_as(
        &h,
        "a photo.png",
        "image/png",
        &common::clients::png(64, 48, 7),
    )
    .await;
    let link = h.url(&link_of(&h, &id).await);
    let modules = common::clients::npm_modules(&[common::clients::PLAYWRIGHT]);
    let mut cmd = std::process::Command::new("node");
    cmd.env("NODE_PATH", modules)
        .arg(common::clients::repo("testsuite/node/img_chromium.js"))
        .arg(
            serde_json::json!({
                "url": link,
                "chromium": common::clients::chromium(),
                "timeoutMs": 60_000,
            })
            .to_string(),
        );
    let (out, _) = common::clients::run_client(cmd, Duration::from_secs(90)).await;
    let j = common::clients::report(&out);
    assert_eq!(
        (j["width"].as_u64(), j["height"].as_u64()),
        (Some(64), Some(48)),
        "{j}"
    );
    let answers = j["answers"].as_array().unwrap();
    let last = answers.last().unwrap();
    assert_eq!(last["status"], 200, "{j}");
    assert_eq!(last["contentType"], "image/png", "{j}");
    let disposition = last["disposition"].as_str().unwrap_or("");
    assert!(
        disposition.starts_with("inline; filename=\"a photo.png\""),
        "{j}"
    );
    let d = &h.srv.state.metrics.downloads;
    if !redirects() {
        // No URL that keeps the item's headers (files, Azure, GCS): the
        // node sent it.
        assert_eq!(answers.len(), 1, "{j}");
        assert_eq!(d.bytes(Route::Link, via()), last_len(&h, &id).await);
        return;
    }
    assert_eq!(answers.len(), 2, "{j}");
    assert_eq!(answers[0]["status"], 307, "{j}");
    let to = answers[0]["location"].as_str().unwrap();
    assert_eq!(last["url"], to, "{j}");
    let sw = bulkwire_testenv::must(bulkwire_testenv::shared_seaweed());
    assert!(to.starts_with(&sw.endpoint()), "{to}");
    assert_eq!(
        d.bytes(Route::Link, Via::Stream),
        0,
        "the node carried none of it"
    );
    assert_eq!(d.redirects.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// The stored size of item `id`.
async fn last_len(h: &Harness, id: &str) -> u64 {
    let r = h.get(&format!("/v1/media/{id}")).send().await.unwrap();
    r.bytes().await.unwrap().len() as u64
}

/// An SVG (a script-capable type) is `attachment` wherever its bytes come
/// from: a redirect's URL carries the disposition signed, and a store
/// that cannot sign it is never redirected to.
#[tokio::test]
async fn an_svg_stays_an_attachment_with_download_redirect() {
    let h = start_edited(|c| c.s3.download_redirect = true).await;
    let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>1</script></svg>";
    let r = h.put("logo.svg", "image/svg+xml", svg.to_vec()).await;
    assert_eq!(r.status(), 201);
    let j: Value = r.json().await.unwrap();
    let id = j["media"][0]["id"].as_str().unwrap().to_string();
    let link = h.url(&link_of(&h, &id).await);
    let (head, body) = curl_follow(&link, &[]).await;
    assert!(head.starts_with("1.1 200"), "{head}");
    assert_eq!(body, svg);
    assert!(head.contains("content-type: image/svg+xml"), "{head}");
    assert!(
        head.contains("content-disposition: attachment; filename=\"logo.svg\""),
        "{head}"
    );
    let d = &h.srv.state.metrics.downloads;
    let redirected = d.redirects.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(redirected, u64::from(redirects()));
}

#[tokio::test]
async fn an_expired_link_is_refused_before_any_redirect() {
    let h = start_edited(|c| {
        c.s3.download_redirect = true;
        c.link_ttl = Some(1);
    })
    .await;
    let id = stored(&h, "soon.bin", b"expires").await;
    let link = h.url(&link_of(&h, &id).await);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let no_follow = no_redirects();
    let r = no_follow.get(&link).send().await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(!r.headers().contains_key("location"));
    let d = &h.srv.state.metrics.downloads;
    assert_eq!(d.redirects.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn rerun_on_shared_stores() {
    common::rerun_on_shared_stores(&[
        // About the file store's files on disk.
        "a_blob_truncated_or_rewritten_under_a_download_cuts_it_and_the_next_works",
        "a_deleted_blob_finishes_the_download_in_progress",
        // 1,000 connections against S3 reads say nothing of the socket.
        "readers_that_stop_are_closed_after_send_timeout_and_others_are_served",
    ]);
}
