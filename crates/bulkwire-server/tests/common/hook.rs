//! The application's side of `[hooks]` for tests (hooks.rs and the
//! *_clients.rs suites): a hook endpoint on 127.0.0.1 (hyper) that records
//! every call, checks its Standard Webhooks signature by recomputing the
//! HMAC-SHA256 over "id.timestamp.body" itself (not with the server's
//! code), and answers as the test says; a server configured to call it;
//! and what "nothing was stored" means.

use super::{client, count_files, start_configured, wait_until, Backend, Harness};
use base64::Engine;
use bulkwire_server::events::HooksConfig;
use bulkwire_server::Config;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;

/// The hooks' secret: `whsec_` and 32 bytes in base64.
pub const SECRET: &str = "whsec_YnVsa3dpcmUgaG9vayB0ZXN0cyBzZWNyZXQsIDMyIEI=";

/// What the hook endpoint answers: a status and a body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// 200 with `v`.
pub fn answer(v: Value) -> Answer {
    Answer {
        status: 200,
        body: v.to_string(),
    }
}

/// 200 `{}`: go on.
pub fn go_on() -> Answer {
    answer(json!({}))
}

/// A refusal with `status` and `message`.
pub fn reject(status: u16, message: &str) -> Answer {
    answer(json!({"reject": {"status": status, "message": message}}))
}

/// One call the endpoint received.
#[derive(Debug, Clone)]
pub struct HookCall {
    /// The path it was POSTed to (`/pre_create`, `/pre_finish`).
    pub path: String,
    pub body: Value,
    /// Why its signature is not right (`None`: it is).
    pub bad_signature: Option<String>,
    pub webhook_id: String,
}

type Respond = Arc<dyn Fn(Value) -> Pin<Box<dyn Future<Output = Answer> + Send>> + Send + Sync>;

/// The hook endpoint.
pub struct HookServer {
    pub addr: SocketAddr,
    calls: Arc<Mutex<Vec<HookCall>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HookServer {
    /// Answers every call with what `f` makes of its JSON body.
    pub async fn answering(f: impl Fn(&Value) -> Answer + Send + Sync + 'static) -> HookServer {
        HookServer::start(move |v| {
            let a = f(&v);
            async move { a }
        })
        .await
    }

    /// Answers every call with what `f`'s future gives (it may wait, read
    /// the `pre_finish` link, …).
    pub async fn start<F>(f: impl Fn(Value) -> F + Send + Sync + 'static) -> HookServer
    where
        F: Future<Output = Answer> + Send + 'static,
    {
        let respond: Respond = Arc::new(move |v| Box::pin(f(v)));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = calls.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let (respond, seen) = (respond.clone(), seen.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req| serve(req, respond.clone(), seen.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(sock), svc)
                        .await;
                });
            }
        });
        HookServer { addr, calls, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `[hooks]` with both hooks here (`/pre_create`, `/pre_finish`) and
    /// [`SECRET`]; the rest as configured by default.
    pub fn config(&self) -> HooksConfig {
        HooksConfig {
            pre_create: Some(self.url("/pre_create")),
            pre_finish: Some(self.url("/pre_finish")),
            secret: Some(SECRET.into()),
            ..HooksConfig::default()
        }
    }

    /// Every call so far, each checked: signed right, and with a
    /// `webhook-id` of its own.
    pub fn calls(&self) -> Vec<HookCall> {
        let calls = self.calls.lock().unwrap().clone();
        let mut ids = std::collections::HashSet::new();
        for c in &calls {
            assert_eq!(c.bad_signature, None, "{} {}", c.path, c.body);
            assert!(ids.insert(c.webhook_id.clone()), "webhook-id twice: {c:?}");
        }
        calls
    }

    /// The checked calls to `hook` (`pre_create`, `pre_finish`).
    pub fn calls_to(&self, hook: &str) -> Vec<Value> {
        let path = format!("/{hook}");
        let calls = self.calls().into_iter().filter(|c| c.path == path);
        calls
            .map(|c| {
                assert_eq!(c.body["hook"], hook, "{}", c.body);
                c.body
            })
            .collect()
    }

    pub fn count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    /// Waits (up to `within`) until `n` calls have come.
    pub async fn wait_for(&self, n: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while self.count() < n {
            assert!(
                Instant::now() < deadline,
                "{} hook calls of {n} within {within:?}",
                self.count()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn serve(
    req: hyper::Request<hyper::body::Incoming>,
    respond: Respond,
    seen: Arc<Mutex<Vec<HookCall>>>,
) -> Result<hyper::Response<Full<Bytes>>, hyper::Error> {
    let path = req.uri().path().to_string();
    let (parts, body) = req.into_parts();
    let raw = body.collect().await?.to_bytes();
    let header = |k: &str| {
        parts
            .headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let bad_signature = check_signature(
        header("webhook-id").as_deref(),
        header("webhook-timestamp").as_deref(),
        header("webhook-signature").as_deref(),
        &raw,
    )
    .err();
    let body: Value = serde_json::from_slice(&raw).unwrap_or_else(
        |e| json!({"not_json": e.to_string(), "text": String::from_utf8_lossy(&raw)}),
    );
    let ct = header("content-type").unwrap_or_default();
    let bad_signature = match (parts.method.as_str(), ct.as_str()) {
        ("POST", "application/json") => bad_signature,
        (m, ct) => Some(format!("{m} with content-type {ct:?}")),
    };
    seen.lock().unwrap().push(HookCall {
        path,
        body: body.clone(),
        bad_signature,
        webhook_id: header("webhook-id").unwrap_or_default(),
    });
    let a = respond(body).await;
    Ok(hyper::Response::builder()
        .status(a.status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(a.body)))
        .unwrap())
}

/// Standard Webhooks, "Verifying webhooks": the three headers are there,
/// the timestamp is within five minutes of now, and one of the
/// space-separated `v1,` signatures is the base64 HMAC-SHA256, keyed with
/// the secret's bytes, of "id.timestamp.body".
fn check_signature(
    id: Option<&str>,
    ts: Option<&str>,
    sigs: Option<&str>,
    body: &[u8],
) -> Result<(), String> {
    use hmac::{Hmac, KeyInit, Mac};
    let (Some(id), Some(ts), Some(sigs)) = (id, ts, sigs) else {
        return Err(format!(
            "missing headers: webhook-id {id:?}, webhook-timestamp {ts:?}, webhook-signature {sigs:?}"
        ));
    };
    let t: u64 = ts.parse().map_err(|_| format!("timestamp {ts:?}"))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    if now.as_secs().abs_diff(t) > 300 {
        return Err(format!("timestamp {t} is not within 5 min of {now:?}"));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64.decode(SECRET.strip_prefix("whsec_").unwrap()).unwrap();
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(body);
    let want = format!("v1,{}", b64.encode(mac.finalize().into_bytes()));
    match sigs.split(' ').any(|s| s == want) {
        true => Ok(()),
        false => Err(format!("webhook-signature {sigs:?}, expected {want:?}")),
    }
}

/// A server on the embedded stores calling `hook` for both hooks (with
/// `edit` applied after).
pub async fn start_hooked(hook: &HookServer, edit: impl FnOnce(&mut Config)) -> Harness {
    start_configured(|c| {
        c.hooks = hook.config();
        edit(c);
    })
    .await
}

/// Only `pre_create` goes to `hook`.
pub fn pre_create_only(c: &mut Config) {
    c.hooks.pre_finish = None;
}

/// Only `pre_finish` goes to `hook`.
pub fn pre_finish_only(c: &mut Config) {
    c.hooks.pre_create = None;
}

/// The event types in the server's outbox (`GET /v1/events`).
pub async fn event_types(h: &Harness) -> Vec<String> {
    events(h)
        .await
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

/// Every event in the server's outbox.
pub async fn events(h: &Harness) -> Vec<Value> {
    let r = h.get("/v1/events?limit=1000").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let j: Value = r.json().await.unwrap();
    j["events"].as_array().unwrap().clone()
}

/// Nothing was stored: no item listed, no `media.created` or
/// `upload.created` event (each is written with its row, so no media or
/// upload row was ever committed), and no blob, temporary file or
/// resumable upload's file left (waiting up to 10 s for cleanup that
/// runs after the answer).
pub async fn assert_nothing_stored(h: &Harness) {
    assert_eq!(h.list_all().await, Vec::<Value>::new(), "listed");
    let types = event_types(h).await;
    assert!(
        !types
            .iter()
            .any(|t| t == "media.created" || t == "upload.created"),
        "rows were written: {types:?}"
    );
    let p = h.probe();
    let uploads = h.data().join("uploads");
    let embedded = super::backend() == Backend::Embedded;
    wait_until("no blob, temp object or upload file left", || {
        p.blob_count() == 0 && p.temp_count() == 0 && (!embedded || count_files(&uploads) == 0)
    })
    .await;
}

/// The `bulkwire_hook_calls_total` counters on `/metrics`, as
/// (hook, outcome, count).
pub async fn hook_metrics(h: &Harness) -> Vec<(String, String, u64)> {
    let text = client()
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("bulkwire_hook_calls_total{hook=\""))
        .map(|l| {
            let (hook, rest) = l.split_once("\",outcome=\"").unwrap();
            let (outcome, n) = rest.split_once("\"} ").unwrap();
            (hook.to_string(), outcome.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// One counter of [`hook_metrics`] (0 when absent).
pub async fn hook_metric(h: &Harness, hook: &str, outcome: &str) -> u64 {
    let all = hook_metrics(h).await;
    all.iter()
        .find(|(k, o, _)| k == hook && o == outcome)
        .map_or(0, |(_, _, n)| *n)
}
