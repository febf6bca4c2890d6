//! Events over HTTP, in process on the embedded store (`crate::events`):
//! the body every event carries (a UUIDv7 id, type, node, owner, the
//! request's `X-Request-Id`, the format and the form's fields or the
//! upload's metadata); a refused upload writes none; an owner reads only
//! its own items' events on `GET /v1/events`, an admin all; `wait` holds an
//! empty answer and returns as soon as an event is written; and a webhook
//! receiver that first answers 500 gets the event again with the same
//! `webhook-id`, signed as Standard Webhooks say, and `/metrics` counts the
//! retry. `rerun_on_shared_stores` runs the feed's tests again on
//! PostgreSQL + SeaweedFS. The durability tests (kill -9, outages, two nodes) are
//! `crates/bulkwire-cli/tests/events.rs`.

mod common;

use bulkwire_server::auth::token_digest;
use bulkwire_server::events::{config::new_secret, Webhook};
use bulkwire_server::store::NewToken;
use bulkwire_server::Limits;
use common::*;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BOB: &str = "bob-token-0123456789";
const TUS: (&str, &str) = ("tus-resumable", "1.0.0");

/// `GET /v1/events?{query}` with `token`: the page.
async fn feed(h: &Harness, token: &str, query: &str) -> Value {
    let r = h
        .http
        .get(h.url(&format!("/v1/events?{query}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "/v1/events?{query}");
    r.json().await.unwrap()
}

fn events(page: &Value) -> Vec<Value> {
    page["events"].as_array().unwrap().clone()
}

/// A UUID of version 7 and the RFC 9562 variant, as text.
fn is_uuid_v7(s: &str) -> bool {
    let b = s.as_bytes();
    let dashes = [8, 13, 18, 23];
    s.len() == 36
        && b.iter()
            .enumerate()
            .all(|(i, c)| match dashes.contains(&i) {
                true => *c == b'-',
                false => c.is_ascii_hexdigit() && !c.is_ascii_uppercase(),
            })
        && b[14] == b'7'
        && matches!(b[19], b'8' | b'9' | b'a' | b'b')
}

/// What every event says whatever its type.
fn common_fields(e: &Value, kind: &str, node: &str, request_id: &str) {
    assert!(is_uuid_v7(e["id"].as_str().unwrap()), "{e}");
    assert_eq!(e["type"], kind, "{e}");
    assert_eq!(e["node"], node, "{e}");
    assert_eq!(e["owner"], "admin", "{e}");
    assert_eq!(e["request_id"], request_id, "{e}");
    let t = e["time"].as_str().unwrap();
    assert!(humantime::parse_rfc3339(t).is_ok(), "time {t:?}");
}

#[tokio::test]
async fn events_carry_id_type_node_owner_request_id_format_fields_and_metadata() {
    let h = start(Limits::default()).await;
    let node = h.srv.state.node.to_string();
    let form = reqwest::multipart::Form::new()
        .text("note", "from the form")
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"form bytes".to_vec()).file_name("f.txt"),
        );
    let r = h
        .http
        .post(h.url("/v1/media"))
        .bearer_auth(TOKEN)
        .header("x-request-id", "req-form")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let form_media = r.json::<Value>().await.unwrap()["media"][0].clone();
    let r = h
        .http
        .post(h.url("/v1/uploads"))
        .bearer_auth(TOKEN)
        .header(TUS.0, TUS.1)
        .header("x-request-id", "req-tus")
        .header("upload-length", "5")
        // filename "t.txt", note "hi", and a key without a value.
        .header("upload-metadata", "filename dC50eHQ=,note aGk=,flag")
        .header("content-type", "application/offset+octet-stream")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let tus_id = r.headers()["location"]
        .to_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let r = h
        .http
        .delete(h.url(&format!("/v1/media/{}", form_media["id"].as_str().unwrap())))
        .bearer_auth(TOKEN)
        .header("x-request-id", "req-delete")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);

    let page = feed(&h, TOKEN, "").await;
    let got = events(&page);
    let kinds: Vec<&str> = got.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let want = [
        "media.created",
        "upload.created",
        "media.created",
        "media.deleted",
    ];
    assert_eq!(kinds, want, "{page}");
    let (created, upload, tus, deleted) = (&got[0], &got[1], &got[2], &got[3]);

    common_fields(created, "media.created", &node, "req-form");
    let d = &created["data"];
    for k in ["id", "owner", "filename", "content_type", "size", "sha256"] {
        assert_eq!(d[k], form_media[k], "data.{k}: {created}");
    }
    assert!(d["url"].as_str().unwrap().contains("?sig="), "{d}");
    assert!(d["created"].is_string() || d["created"].is_number(), "{d}");
    assert_eq!(d["format"], "multipart");
    assert_eq!(d["fields"], serde_json::json!({"note": "from the form"}));

    common_fields(upload, "upload.created", &node, "req-tus");
    assert_eq!(upload["data"]["id"], tus_id.as_str());
    assert_eq!(upload["data"]["format"], "tus");
    assert_eq!(upload["data"]["length"], 5);
    common_fields(tus, "media.created", &node, "req-tus");
    let d = &tus["data"];
    assert_eq!(d["id"], tus_id.as_str(), "the upload's id is the item's");
    assert_eq!((&d["format"], &d["size"]), (&"tus".into(), &5.into()));
    assert_eq!(d["sha256"], sha256(b"hello").as_str());
    let meta = serde_json::json!({"filename": "t.txt", "note": "hi", "flag": null});
    assert_eq!(d["metadata"], meta);
    assert_eq!(upload["data"]["metadata"], meta);

    common_fields(deleted, "media.deleted", &node, "req-delete");
    assert_eq!(deleted["data"]["id"], form_media["id"]);
    assert!(
        deleted["data"]["url"].is_null(),
        "no link to a deleted item"
    );

    let ids: std::collections::HashSet<&str> =
        got.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), got.len(), "every event has its own id");
    // The cursor: nothing after the last event, and `next` stays.
    let next = page["next"].as_str().unwrap();
    let after = feed(&h, TOKEN, &format!("after={next}")).await;
    assert_eq!(events(&after), Vec::<Value>::new());
    assert_eq!(after["next"], next);
    let one = feed(&h, TOKEN, "limit=1").await;
    assert_eq!(events(&one), vec![created.clone()]);
    let rest = feed(
        &h,
        TOKEN,
        &format!("after={}", one["next"].as_str().unwrap()),
    )
    .await;
    assert_eq!(events(&rest), got[1..].to_vec());
}

#[tokio::test]
async fn a_refused_upload_writes_no_event() {
    let h = start(Limits {
        file_bytes: 1000,
        ..Limits::default()
    })
    .await;
    // A form whose first file fits and whose second does not: nothing of
    // it is stored, and nothing is told.
    let form = reqwest::multipart::Form::new()
        .part(
            "a",
            reqwest::multipart::Part::bytes(vec![1; 10]).file_name("a.bin"),
        )
        .part(
            "b",
            reqwest::multipart::Part::bytes(vec![2; 2000]).file_name("b.bin"),
        );
    assert_eq!(h.post_form(form).await.status(), 413);
    let r = h.put("big.bin", "application/octet-stream", vec![3; 2000]);
    assert_eq!(r.await.status(), 413);
    // Unauthenticated and malformed requests.
    let r = h
        .http
        .put(h.url("/v1/media/x.bin"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = h
        .http
        .post(h.url("/v1/media"))
        .bearer_auth(TOKEN)
        .header("content-type", "multipart/form-data; boundary=zz")
        .body("--zz\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\nno end")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(h.list_all().await, Vec::<Value>::new());
    assert_eq!(events(&feed(&h, TOKEN, "").await), Vec::<Value>::new());

    let r = h
        .put("ok.bin", "application/octet-stream", vec![4; 10])
        .await;
    assert_eq!(r.status(), 201);
    let got = events(&feed(&h, TOKEN, "").await);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["data"]["filename"], "ok.bin");
    let m = metrics(&h).await;
    assert!(
        m.contains("bulkwire_events_written_total{type=\"media.created\"} 1\n"),
        "{m}"
    );
}

#[tokio::test]
async fn an_owner_reads_only_its_own_events_and_an_admin_all() {
    let h = start(Limits::default()).await;
    let bob = NewToken {
        label: "bob".into(),
        owner: "bob".into(),
        scopes: "upload,read".into(),
        expires: None,
    };
    let meta = &h.srv.state.meta;
    meta.token_add(token_digest(BOB), bob).await.unwrap();
    let r = h.put("admins.bin", "application/octet-stream", vec![1; 10]);
    assert_eq!(r.await.status(), 201);
    let r = h
        .http
        .put(h.url("/v1/media/bobs.bin"))
        .bearer_auth(BOB)
        .body(vec![2; 10])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);

    let bobs = events(&feed(&h, BOB, "").await);
    assert_eq!(bobs.len(), 1, "{bobs:?}");
    assert_eq!(bobs[0]["owner"], "bob");
    assert_eq!(bobs[0]["data"]["filename"], "bobs.bin");
    let all = events(&feed(&h, TOKEN, "").await);
    let names: Vec<&str> = all
        .iter()
        .map(|e| e["data"]["filename"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admins.bin", "bobs.bin"]);
    assert_eq!(all[1], bobs[0], "the same event through both");
    // Waiting on the feed for more of one's own returns empty when only
    // another owner's item comes.
    let next = feed(&h, BOB, "").await["next"]
        .as_str()
        .unwrap()
        .to_string();
    let poll = {
        let (http, url) = (
            h.http.clone(),
            h.url(&format!("/v1/events?after={next}&wait=1")),
        );
        tokio::spawn(async move { http.get(url).bearer_auth(BOB).send().await })
    };
    let r = h.put("admins2.bin", "application/octet-stream", vec![3; 10]);
    assert_eq!(r.await.status(), 201);
    let page: Value = poll.await.unwrap().unwrap().json().await.unwrap();
    assert_eq!(events(&page), Vec::<Value>::new(), "{page}");
}

#[tokio::test]
async fn wait_holds_an_empty_answer_and_returns_when_an_event_is_written() {
    let h = start(Limits::default()).await;
    // Nothing comes: the answer is empty, with the same cursor.
    let page = feed(&h, TOKEN, "after=0&wait=0.5").await;
    assert_eq!(events(&page), Vec::<Value>::new());
    assert_eq!(page["next"], "0");

    let wait = Duration::from_secs(30);
    let poll = {
        let (http, url) = (h.http.clone(), h.url("/v1/events?after=0&wait=30"));
        tokio::spawn(async move {
            let t = Instant::now();
            let r = http.get(url).bearer_auth(TOKEN).send().await.unwrap();
            (r.json::<Value>().await.unwrap(), t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !poll.is_finished(),
        "an empty feed answered before its wait"
    );
    let r = h.put("new.bin", "application/octet-stream", vec![1; 10]);
    assert_eq!(r.await.status(), 201);
    let (page, took) = poll.await.unwrap();
    let got = events(&page);
    assert_eq!(got.len(), 1, "{page}");
    assert_eq!(got[0]["data"]["filename"], "new.bin");
    assert!(took < wait, "returned only at the end of its wait");
}

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
struct Seen {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> &str {
        let h = self.headers.iter().find(|(k, _)| k == name);
        h.map_or("", |(_, v)| v.as_str())
    }
}

/// A webhook receiver on 127.0.0.1 answering each request with the next
/// of `statuses` (the last one from then on); what it saw.
async fn receiver(statuses: Vec<u16>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let Some(req) = read_request(&mut s).await else {
                continue;
            };
            let n = {
                let mut log = log.lock().unwrap();
                log.push(req);
                log.len()
            };
            let status = statuses[(n - 1).min(statuses.len() - 1)];
            let head =
                format!("HTTP/1.1 {status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            let _ = s.write_all(head.as_bytes()).await;
        }
    });
    (url, seen)
}

/// One request's head and its `Content-Length` body.
async fn read_request(s: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let headers: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[end + 4..].to_vec();
    while body.len() < len {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen { headers, body })
}

/// Standard Webhooks' check, written here from the specification (not
/// with the server's signer): HMAC-SHA256 over "id.timestamp.body" with
/// the secret's bytes, `v1,` and base64.
fn signed_by(seen: &Seen, secret: &str) -> bool {
    use base64::Engine;
    use hmac::{KeyInit, Mac};
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64.decode(secret.strip_prefix("whsec_").unwrap()).unwrap();
    let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key).unwrap();
    let (id, ts) = (seen.header("webhook-id"), seen.header("webhook-timestamp"));
    m.update(format!("{id}.{ts}.").as_bytes());
    m.update(&seen.body);
    let want = format!("v1,{}", b64.encode(m.finalize().into_bytes()));
    seen.header("webhook-signature")
        .split(' ')
        .any(|s| s == want)
}

/// `/metrics` as a scraper reads it (events and deliveries included).
async fn metrics(h: &Harness) -> String {
    let r = h.http.get(h.url("/metrics")).send().await.unwrap();
    r.text().await.unwrap()
}

#[tokio::test]
async fn a_webhook_answered_500_gets_the_same_webhook_id_again_then_it_is_delivered() {
    let (url, seen) = receiver(vec![500, 200]).await;
    let secret = new_secret();
    let hook = Webhook {
        url: url.clone(),
        events: vec!["media.created".into()],
        secret: secret.clone(),
    };
    let h = start_configured(|c| {
        c.webhooks = vec![hook];
        c.events.webhook_timeout = 5;
    })
    .await;
    let r = h.put("hooked.bin", "application/octet-stream", vec![1; 10]);
    assert_eq!(r.await.status(), 201);
    let delivered =
        format!("bulkwire_webhook_deliveries_total{{endpoint=\"{url}\",type=\"media.created\",outcome=\"delivered\"}} 1\n");
    // The first retry waits 0.5 to 1 s.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = metrics(&h).await;
        if m.contains(&delivered) {
            break;
        }
        assert!(Instant::now() < deadline, "not delivered:\n{m}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one 500, one 200: {seen:?}");
    let event: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(event["type"], "media.created");
    assert_eq!(event["data"]["filename"], "hooked.bin");
    for s in &seen {
        assert_eq!(s.header("webhook-id"), event["id"].as_str().unwrap());
        assert_eq!(s.body, seen[0].body, "the same body again");
        assert_eq!(s.header("content-type"), "application/json");
        assert!(signed_by(s, &secret), "signature of {s:?}");
    }
    let retried = format!(
        "bulkwire_webhook_deliveries_total{{endpoint=\"{url}\",type=\"media.created\",outcome=\"retried\"}} 1\n"
    );
    let m = metrics(&h).await;
    assert!(m.contains(&retried), "{m}");
    // The feed has it too, the same event.
    let fed = events(&feed(&h, TOKEN, "").await);
    assert_eq!(fed, vec![event]);
}

#[test]
fn rerun_on_shared_stores() {
    // The webhook test starts its server with `start_configured`, on the
    // embedded store either way: it would only run twice.
    common::rerun_on_shared_stores(&[
        "a_webhook_answered_500_gets_the_same_webhook_id_again_then_it_is_delivered",
    ]);
}
