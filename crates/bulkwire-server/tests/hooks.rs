//! `[hooks]` (crate::hooks) from the application's side, in process: a hook
//! endpoint on 127.0.0.1 (tests/common/hook.rs) that checks every call's
//! signature itself and answers as each test says.
//!
//! - curl (`-F` form-data and `-T` raw) refused by `pre_create`: the hook's
//!   status and message reach the client and nothing is stored;
//! - a request waiting for `pre_create` holds no upload slot: 64 of them
//!   wait on a server with `max_uploads = 4` while another principal
//!   downloads and uploads; then their hook times out, closed: 503 with
//!   `Retry-After`, nothing stored, and `/metrics` counts the calls;
//! - `pre_finish` reads the stored bytes through its link, checks their
//!   SHA-256, refuses: no row, no blob (form-data, raw, tus);
//! - a hook that times out or answers 500 is a failure: closed is 503 with
//!   `Retry-After` and nothing stored, open lets the upload through;
//! - a hook's amendment (name, type, metadata) is what is stored, at
//!   `pre_create` (form-data, raw, tus, XML-RPC, SOAP) and at `pre_finish`.
//!
//! The real third-party clients refused by `pre_create` are in
//! tus_clients.rs, xmlrpc_clients.rs and soap_clients.rs; `pre_finish` on
//! PostgreSQL + SeaweedFS is in bulkwire-cli's tests/hooks.rs.

mod common;
mod soap_util;

use bulkwire_server::events::HookFailure;
use bulkwire_server::store::NewToken;
use common::hook::*;
use common::*;
use reqwest::Response;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

// ---------------------------------------------------------------------------
// Requests

/// The error body's message, and the answer's status.
async fn refusal(r: Response) -> (u16, Option<String>, String) {
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let text = r.text().await.unwrap();
    (status, retry, text)
}

async fn form(h: &Harness, name: &str, data: &[u8]) -> Response {
    let part = reqwest::multipart::Part::bytes(data.to_vec())
        .file_name(name.to_string())
        .mime_str("application/x-form")
        .unwrap();
    let f = reqwest::multipart::Form::new()
        .text("note", "before the file")
        .part("file", part);
    h.post_form(f).await
}

async fn raw(h: &Harness, name: &str, data: &[u8]) -> Response {
    h.put(name, "application/x-raw", data.to_vec()).await
}

fn b64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// A tus 1.0 creation of `len` bytes named `name`: the answer.
async fn tus_create(h: &Harness, name: &str, len: usize) -> Response {
    let meta = format!(
        "filename {},filetype {}",
        b64(name.as_bytes()),
        b64(b"application/x-tus")
    );
    h.http
        .post(h.url("/v1/uploads"))
        .bearer_auth(TOKEN)
        .header("tus-resumable", "1.0.0")
        .header("upload-length", len)
        .header("upload-metadata", meta)
        .send()
        .await
        .unwrap()
}

/// The upload id of a 201 creation.
fn created_id(r: &Response) -> String {
    assert_eq!(r.status(), 201, "{r:?}");
    let loc = r.headers()["location"].to_str().unwrap();
    loc.rsplit('/').next().unwrap().to_string()
}

async fn tus_patch(h: &Harness, id: &str, data: &[u8]) -> Response {
    h.http
        .patch(h.url(&format!("/v1/uploads/{id}")))
        .bearer_auth(TOKEN)
        .header("tus-resumable", "1.0.0")
        .header("content-type", "application/offset+octet-stream")
        .header("upload-offset", 0)
        .body(data.to_vec())
        .send()
        .await
        .unwrap()
}

/// A whole tus upload in one PATCH: the PATCH's answer and the id.
async fn tus(h: &Harness, name: &str, data: &[u8]) -> (Response, String) {
    let id = created_id(&tus_create(h, name, data.len()).await);
    (tus_patch(h, &id, data).await, id)
}

/// `wp.uploadFile` as alice, the file's name and type before its bits.
async fn xmlrpc(h: &Harness, name: &str, data: &[u8]) -> String {
    let body = format!(
        "<?xml version=\"1.0\"?><methodCall><methodName>wp.uploadFile</methodName><params>\
         <param><value><int>1</int></value></param>\
         <param><value><string>alice</string></value></param>\
         <param><value><string>wonder:land</string></value></param>\
         <param><value><struct>\
         <member><name>name</name><value><string>{name}</string></value></member>\
         <member><name>type</name><value><string>application/x-xmlrpc</string></value></member>\
         <member><name>bits</name><value><base64>{}</base64></value></member>\
         </struct></value></param></params></methodCall>",
        b64(data)
    );
    let r = h
        .http
        .post(h.url("/xmlrpc"))
        .header("content-type", "text/xml")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "XML-RPC answers faults with 200");
    r.text().await.unwrap()
}

/// The fault code of an XML-RPC answer, if it is a fault.
fn fault_code(answer: &str) -> Option<i64> {
    let at = answer.find("<name>faultCode</name>")?;
    let rest = &answer[at..];
    let v = rest.split("<int>").nth(1).or(rest.split("<i4>").nth(1))?;
    v.split('<').next()?.parse().ok()
}

/// A SOAP 1.1 `upload` with inline base64, as alice.
async fn soap(h: &Harness, name: &str, data: &[u8]) -> Response {
    let env = soap_util::envelope(
        soap_util::SOAP11,
        name,
        Some("application/x-soap"),
        &b64(data),
    );
    h.http
        .post(h.url("/soap"))
        .header("content-type", "text/xml; charset=utf-8")
        .header("authorization", soap_util::basic("alice:wonder:land"))
        .body(env)
        .send()
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------
// curl refused by pre_create

/// curl, which must run: (status, body).
fn curl(args: &[&str]) -> (u16, String) {
    bulkwire_runtimes::need(bulkwire_runtimes::Runtime::Curl);
    let out = Command::new("curl")
        .args(["-sS", "--noproxy", "*", "--max-time", "60"])
        .args(["-w", "\n%{http_code}"])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (body, status) = stdout.rsplit_once('\n').unwrap();
    (status.parse().unwrap(), body.to_string())
}

#[cfg_attr(
    missing_curl,
    ignore = "needs curl (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_form_and_raw_show_the_pre_create_refusal() {
    let hook = HookServer::answering(|b| {
        let message = format!(
            "no {} upload for you, {}",
            b["format"].as_str().unwrap(),
            7191
        );
        reject(403, &message)
    })
    .await;
    let h = start_hooked(&hook, pre_create_only).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("curl.bin");
    std::fs::write(&file, payload(3 * MIB + 5, 71)).unwrap();
    let auth = format!("Authorization: Bearer {TOKEN}");
    // A field before the file: the hook sees it.
    let (status, body) = curl(&[
        "-H",
        &auth,
        "-F",
        "note=sent first",
        "-F",
        &format!("file=@{};type=application/x-curl", file.display()),
        &h.url("/v1/media"),
    ]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("no multipart upload for you, 7191"), "{body}");
    let (status, body) = curl(&[
        "-H",
        &auth,
        "-T",
        file.to_str().unwrap(),
        &h.url("/v1/media/raw.bin"),
    ]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("no raw upload for you, 7191"), "{body}");
    assert_nothing_stored(&h).await;
    let calls = hook.calls_to("pre_create");
    assert_eq!(calls.len(), 2, "{calls:?}");
    let (f, r) = (&calls[0], &calls[1]);
    assert_eq!(f["format"], "multipart");
    assert_eq!(f["filename"], "curl.bin");
    assert_eq!(f["content_type"], "application/x-curl");
    assert_eq!(f["fields"], json!({"note": "sent first"}));
    assert_eq!(r["format"], "raw");
    assert_eq!(r["filename"], "raw.bin");
    assert_eq!(r["declared_size"], 3 * MIB + 5);
    for c in &calls {
        assert_eq!(c["principal"]["name"], "admin", "{c}");
        assert_eq!(c["owner"], "admin", "{c}");
        assert_eq!(c["client"], "127.0.0.1", "{c}");
        assert!(c["request_id"].is_string(), "{c}");
    }
    assert_eq!(hook_metric(&h, "pre_create", "rejected").await, 2);
}

// ---------------------------------------------------------------------------
// No slot held while the hook waits

/// A token of `owner`'s with the upload and read scopes.
async fn token_of(h: &Harness, owner: &str) -> String {
    let token = format!("{owner}-token-0123456789");
    let t = NewToken {
        label: owner.into(),
        owner: owner.into(),
        scopes: "upload,read".into(),
        expires: None,
    };
    let digest = bulkwire_server::auth::token_digest(&token);
    h.srv.state.meta.token_add(digest, t).await.unwrap();
    token
}

async fn put_as(h: &Harness, token: &str, name: &str, data: Vec<u8>) -> Response {
    h.http
        .put(h.url(&format!("/v1/media/{name}")))
        .bearer_auth(token)
        .body(data)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_upload_slot_is_held_while_the_hook_waits() {
    const SLOW: usize = 64;
    // The hook keeps "slow" waiting longer than hook_timeout; others go on.
    let hook = HookServer::start(|b| async move {
        if b["principal"]["name"] == "slow" {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        go_on()
    })
    .await;
    let h = start_hooked(&hook, |c| {
        pre_create_only(c);
        c.hooks.hook_timeout = 8;
        c.limits.max_uploads = 4;
    })
    .await;
    let (slow, fast) = (token_of(&h, "slow").await, token_of(&h, "fast").await);
    let kept = payload(100_000, 81);
    let r = put_as(&h, &fast, "kept.bin", kept.clone()).await;
    assert_eq!(r.status(), 201);
    let kept_id = r.json::<Value>().await.unwrap()["media"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let began = Instant::now();
    let waiting: Vec<_> = (0..SLOW)
        .map(|i| {
            let (h2, slow) = (h.http.clone(), slow.clone());
            let url = h.url(&format!("/v1/media/slow-{i}.bin"));
            tokio::spawn(async move {
                let r = h2
                    .put(url)
                    .bearer_auth(slow)
                    .body(payload(64 << 10, i as u64));
                refusal(r.send().await.unwrap()).await
            })
        })
        .collect();
    hook.wait_for(1 + SLOW, Duration::from_secs(30)).await;
    let all_waiting = began.elapsed();
    // All 64 wait for the application: none holds a slot or memory.
    assert_eq!(
        h.metric("bulkwire_active_uploads "),
        "bulkwire_active_uploads 0"
    );
    let got = h
        .http
        .get(h.url(&format!("/v1/media/{kept_id}")))
        .bearer_auth(&fast);
    let got = got.send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.bytes().await.unwrap().as_ref(), kept.as_slice());
    let r = put_as(&h, &fast, "meanwhile.bin", payload(200_000, 82)).await;
    assert_eq!(r.status(), 201, "{:?}", r.text().await);
    // Still waiting, all of them: the checks above ran while they did.
    assert!(waiting.iter().all(|w| !w.is_finished()));

    // Their hook does not answer within hook_timeout: closed, 503.
    for w in waiting {
        let (status, retry, body) = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("an answer within 60 s")
            .unwrap();
        assert_eq!(status, 503, "{body}");
        assert_eq!(retry.as_deref(), Some("5"), "{body}");
        assert!(body.contains("pre_create hook did not answer"), "{body}");
    }
    let listed = h.list_all().await;
    let names: Vec<&str> = listed
        .iter()
        .map(|m| m["filename"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kept.bin", "meanwhile.bin"]);
    assert_eq!(h.probe().blob_count(), 2);
    assert_eq!(h.probe().temp_count(), 0);
    assert_eq!(hook_metric(&h, "pre_create", "timeout").await, SLOW as u64);
    assert_eq!(hook_metric(&h, "pre_create", "allowed").await, 2);
    let slow_calls = hook.calls_to("pre_create");
    let slow_calls = slow_calls
        .iter()
        .filter(|c| c["principal"]["name"] == "slow");
    assert_eq!(slow_calls.count(), SLOW);
    eprintln!("{SLOW} uploads waiting for their hook after {all_waiting:?}");
}

// ---------------------------------------------------------------------------
// pre_finish refuses after reading the bytes

/// What a `pre_finish` hook read through its link: (format, status,
/// bytes read, their SHA-256, the `sha256` it was told, the `size`).
type Read = (String, u16, usize, String, String, u64);

/// A `pre_finish` hook that reads the bytes through `url`, then refuses
/// with 409 and a message naming the format; what it read goes to `log`.
async fn reading_hook(log: Arc<Mutex<Vec<Read>>>, links: Arc<Mutex<Vec<String>>>) -> HookServer {
    HookServer::start(move |b| {
        let (log, links) = (log.clone(), links.clone());
        async move {
            let url = b["url"].as_str().unwrap().to_string();
            links.lock().unwrap().push(url.clone());
            let r = client().get(&url).send().await.unwrap();
            let status = r.status().as_u16();
            let bytes = r.bytes().await.unwrap();
            let format = b["format"].as_str().unwrap().to_string();
            log.lock().unwrap().push((
                format.clone(),
                status,
                bytes.len(),
                sha256(&bytes),
                b["sha256"].as_str().unwrap().to_string(),
                b["size"].as_u64().unwrap(),
            ));
            reject(
                409,
                &format!("pre_finish read your {format} bytes and says no"),
            )
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_finish_reads_the_bytes_refuses_and_leaves_nothing() {
    let (log, links) = Default::default();
    let hook = reading_hook(Arc::clone(&log), Arc::clone(&links)).await;
    let h = start_hooked(&hook, pre_finish_only).await;
    let data = payload(3 * MIB + 11, 91);
    let want = |f: &str| format!("pre_finish read your {f} bytes and says no");

    let (status, _, body) = refusal(form(&h, "form.bin", &data).await).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains(&want("multipart")), "{body}");
    let (status, _, body) = refusal(raw(&h, "raw.bin", &data).await).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains(&want("raw")), "{body}");
    let (r, id) = tus(&h, "tus.bin", &data).await;
    let (status, _, body) = refusal(r).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains(&want("tus")), "{body}");

    // The tus upload's row went with its blob, and the upload is gone.
    assert_eq!(h.srv.state.meta.upload_get(&id).await.unwrap(), None);
    let head = h
        .http
        .head(h.url(&format!("/v1/uploads/{id}")))
        .bearer_auth(TOKEN);
    let head = head.header("tus-resumable", "1.0.0").send().await.unwrap();
    assert_eq!(head.status(), 404);
    let types = event_types(&h).await;
    assert!(!types.iter().any(|t| t == "media.created"), "{types:?}");
    assert!(types.iter().any(|t| t == "upload.terminated"), "{types:?}");
    assert_eq!(h.list_all().await, Vec::<Value>::new());
    let (p, uploads) = (h.probe(), h.data().join("uploads"));
    wait_until("no blob, temp or upload file left", || {
        p.blob_count() == 0 && p.temp_count() == 0 && count_files(&uploads) == 0
    })
    .await;

    // The hook read every upload's bytes, whole, through its link.
    let read = log.lock().unwrap().clone();
    let formats: Vec<&str> = read.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(formats, ["multipart", "raw", "tus"]);
    for (format, status, len, got, told, size) in &read {
        assert_eq!(*status, 200, "{format}");
        assert_eq!((*len, *size), (data.len(), data.len() as u64), "{format}");
        assert_eq!(
            got, told,
            "{format}: the bytes read are not the sha256 told"
        );
        assert_eq!(got, &sha256(&data), "{format}");
    }
    // A link is good only while its hook runs.
    let links = links.lock().unwrap().clone();
    for url in &links {
        assert!(url.starts_with(&h.url("/v1/finishing/")), "{url}");
        let r = client().get(url).send().await.unwrap();
        assert_eq!(r.status(), 404, "{url}");
    }
    assert_eq!(hook_metric(&h, "pre_finish", "rejected").await, 3);
    assert_eq!(hook.calls_to("pre_finish").len(), 3);
}

// ---------------------------------------------------------------------------
// A hook that fails

/// Uploads in every format; each answer as (what, status, Retry-After,
/// body). XML-RPC's fault code stands for its status.
async fn every_format(h: &Harness) -> Vec<(&'static str, u16, Option<String>, String)> {
    let data = payload(300_000, 101);
    let mut out = Vec::new();
    let (s, r, b) = refusal(form(h, "form.bin", &data).await).await;
    out.push(("form", s, r, b));
    let (s, r, b) = refusal(raw(h, "raw.bin", &data).await).await;
    out.push(("raw", s, r, b));
    let c = tus_create(h, "tus.bin", data.len()).await;
    let (s, r, b) = match c.status().as_u16() {
        201 => {
            let id = created_id(&c);
            refusal(tus_patch(h, &id, &data).await).await
        }
        _ => refusal(c).await,
    };
    // A finished tus upload answers its PATCH with 204.
    out.push(("tus", if s == 204 { 201 } else { s }, r, b));
    let (s, r, b) = refusal(soap(h, "soap.bin", &data).await).await;
    out.push(("soap", if s == 200 { 201 } else { s }, r, b));
    let x = xmlrpc(h, "xmlrpc.bin", &data).await;
    let s = fault_code(&x).map_or(201, |c| c as u16);
    out.push(("xmlrpc", s, None, x));
    out
}

async fn failing(hook: &HookServer, failure: HookFailure) -> Harness {
    start_hooked(hook, |c| {
        c.hooks.hook_timeout = 1;
        c.hooks.hook_failure = failure;
    })
    .await
}

/// Closed: every format is refused 503 (with Retry-After where the answer
/// is HTTP's, a fault 503 in XML-RPC) and nothing is stored. Open: every
/// upload goes through.
async fn failure_modes(hook: &HookServer, outcome: &str) {
    let h = failing(hook, HookFailure::Closed).await;
    for (what, status, retry, body) in every_format(&h).await {
        assert_eq!(status, 503, "{what}: {body}");
        assert!(
            body.contains("pre_create hook did not answer"),
            "{what}: {body}"
        );
        if what != "xmlrpc" {
            assert_eq!(retry.as_deref(), Some("5"), "{what}: {body}");
        }
    }
    assert_nothing_stored(&h).await;
    assert_eq!(hook_metric(&h, "pre_create", outcome).await, 5);
    assert_eq!(hook_metric(&h, "pre_finish", outcome).await, 0);

    let h = failing(hook, HookFailure::Open).await;
    for (what, status, _, body) in every_format(&h).await {
        assert_eq!(status, 201, "{what}: {body}");
    }
    assert_eq!(h.list_all().await.len(), 5);
    assert_eq!(hook_metric(&h, "pre_create", outcome).await, 5);
    assert_eq!(hook_metric(&h, "pre_finish", outcome).await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_times_out_is_503_closed_and_ignored_open() {
    let hook = HookServer::start(|_| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        go_on()
    })
    .await;
    failure_modes(&hook, "timeout").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_answers_500_is_503_closed_and_ignored_open() {
    let hook = HookServer::answering(|_| Answer {
        status: 500,
        body: json!({"reject": {"status": 403, "message": "a 500 is no answer"}}).to_string(),
    })
    .await;
    failure_modes(&hook, "failed").await;
}

// ---------------------------------------------------------------------------
// Amendments

/// The items' (filename, content_type) by the name they were sent with
/// (`<format>.bin`, in upload order).
async fn stored_names(h: &Harness) -> Vec<(String, String)> {
    let listed = h.list_all().await;
    listed
        .iter()
        .map(|m| {
            let f = m["filename"].as_str().unwrap().to_string();
            (f, m["content_type"].as_str().unwrap().to_string())
        })
        .collect()
}

/// The `metadata` of every `media.created` event.
async fn created_metadata(h: &Harness) -> Vec<Value> {
    let evs = events(h).await;
    let created = evs.iter().filter(|e| e["type"] == "media.created");
    created.map(|e| e["data"]["metadata"].clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_create_amendments_are_what_is_stored() {
    let hook = HookServer::answering(|_| {
        answer(json!({"filename": "renamed.txt", "content_type": "text/x-test", "metadata": {"k": "v"}}))
    })
    .await;
    let h = start_hooked(&hook, pre_create_only).await;
    for (what, status, _, body) in every_format(&h).await {
        assert_eq!(status, 201, "{what}: {body}");
    }
    let names = stored_names(&h).await;
    let want = ("renamed.txt".to_string(), "text/x-test".to_string());
    assert_eq!(names, vec![want; 5], "form, raw, tus, SOAP, XML-RPC");
    // The metadata the events carry is the hook's.
    assert_eq!(created_metadata(&h).await, vec![json!({"k": "v"}); 5]);
    let calls = hook.calls_to("pre_create");
    let told: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["format"].as_str().unwrap(),
                c["filename"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        told,
        [
            ("multipart", "form.bin"),
            ("raw", "raw.bin"),
            ("tus", "tus.bin"),
            ("soap", "-"),
            ("xmlrpc", "xmlrpc.bin")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_finish_amendments_are_what_is_stored() {
    let hook = HookServer::answering(|b| {
        let f = format!("{}-finished.txt", b["format"].as_str().unwrap());
        answer(
            json!({"filename": f, "content_type": "text/x-finished", "metadata": {"at": "finish"}}),
        )
    })
    .await;
    let h = start_hooked(&hook, pre_finish_only).await;
    for (what, status, _, body) in every_format(&h).await {
        assert_eq!(status, 201, "{what}: {body}");
    }
    let names: Vec<String> = stored_names(&h)
        .await
        .into_iter()
        .map(|(f, t)| {
            assert_eq!(t, "text/x-finished", "{f}");
            f
        })
        .collect();
    assert_eq!(
        names,
        [
            "multipart-finished.txt",
            "raw-finished.txt",
            "tus-finished.txt",
            "soap-finished.txt",
            "xmlrpc-finished.txt"
        ]
    );
    assert_eq!(created_metadata(&h).await, vec![json!({"at": "finish"}); 5]);
}
