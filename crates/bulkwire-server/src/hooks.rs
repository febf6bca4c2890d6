//! Hooks that can say no (DESIGN.md "Telling the application"): the
//! application is asked, by an HTTP POST signed as webhooks are
//! (`crate::events::sign`, `[hooks] secret`), before an upload takes a
//! slot, memory or a byte of storage (`pre_create`) and after its last
//! byte is durable and hashed, before its row commits (`pre_finish`).
//!
//! The body is JSON: `hook`, `format`, `principal` (`name`, `role`,
//! `scopes`, `via`), `owner`, `declared_size`, `filename`,
//! `content_type`, `fields` (a form's, so far), `metadata` (a resumable
//! upload's), `client`, `request_id`; `pre_finish` adds `id`, `size`,
//! `sha256` and `url`, a link valid for a few minutes that reads the bytes.
//!
//! The answer, 2xx: `{}` (or nothing) lets the upload go on;
//! `{"reject": {"status": 403, "message": "…"}}` refuses it with that
//! status and message (faults for XML-RPC and SOAP); `{"metadata": {…},
//! "filename": "…", "content_type": "…"}` amends what is stored. Anything
//! else — another status, a body that is not that JSON, no answer within
//! `hook_timeout`, a refused connection — is a failure: 503 with
//! `Retry-After` (`hook_failure = "closed"`) or the upload goes on
//! (`"open"`). At most `hook_concurrency` calls are in flight; a request
//! waiting for a hook holds no upload slot and no memory reservation
//! (handlers ask before admission, `crate::upload::Ingest`).

use crate::error::{ApiError, Kind};
use crate::events::config::{HookFailure, HooksConfig};
use crate::events::sign::Signer;
use crate::principal::{Principal, Via};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Which hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    PreCreate,
    PreFinish,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::PreCreate => "pre_create",
            Stage::PreFinish => "pre_finish",
        }
    }
}

/// What the hook is asked about.
#[derive(Debug, Default, Clone)]
pub struct Ask {
    pub format: &'static str,
    pub declared_size: Option<u64>,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub fields: Option<Map<String, Value>>,
    pub metadata: Option<Value>,
    pub client: Option<std::net::IpAddr>,
    pub request_id: Option<String>,
    /// `pre_finish`: the stored bytes.
    pub finished: Option<Finished>,
}

/// An upload whose bytes are stored, its row not yet committed.
#[derive(Debug, Clone)]
pub struct Finished {
    pub id: String,
    pub size: u64,
    pub sha256: String,
    /// Absolute URL reading the bytes (`crate::links::Links::finishing_path`).
    pub url: String,
}

/// What a hook changes in what is stored.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Amend {
    pub metadata: Option<Map<String, Value>>,
    pub filename: Option<String>,
    pub content_type: Option<String>,
}

/// The configured hooks, their client and their bound.
pub struct Hooks {
    cfg: HooksConfig,
    signer: Option<Signer>,
    client: reqwest013::Client,
    calls: Arc<Semaphore>,
}

/// How long a `pre_finish` link to the bytes stays valid.
pub const FINISHING_LINK_TTL: Duration = Duration::from_secs(300);

/// `Retry-After` of a hook that failed, closed.
const RETRY_AFTER_S: u64 = 5;

impl Hooks {
    pub fn new(cfg: &HooksConfig) -> Result<Hooks, String> {
        let signer = match &cfg.secret {
            Some(s) => Some(Signer::new(s).map_err(|e| format!("hooks.secret: {e}"))?),
            None => None,
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest013::Client::builder()
            .timeout(cfg.hook_timeout())
            .connect_timeout(cfg.hook_timeout())
            .redirect(reqwest013::redirect::Policy::none())
            .user_agent(concat!("bulkwire/", env!("CARGO_PKG_VERSION")))
            .pool_max_idle_per_host(cfg.hook_concurrency.min(64))
            .build()
            .map_err(|e| format!("hooks: the HTTP client: {e}"))?;
        Ok(Hooks {
            cfg: cfg.clone(),
            signer,
            client,
            calls: Arc::new(Semaphore::new(cfg.hook_concurrency)),
        })
    }

    /// True when `stage` has a URL.
    pub fn has(&self, stage: Stage) -> bool {
        self.url(stage).is_some()
    }

    fn url(&self, stage: Stage) -> Option<&str> {
        match stage {
            Stage::PreCreate => self.cfg.pre_create.as_deref(),
            Stage::PreFinish => self.cfg.pre_finish.as_deref(),
        }
    }

    /// Asks `stage`'s hook about `who`'s upload: what to amend, or the
    /// refusal (or the failure, closed) to answer. Without a hook for
    /// `stage`: nothing to amend.
    pub async fn ask(
        &self,
        stats: &crate::events::EventStats,
        stage: Stage,
        who: &Principal,
        ask: &Ask,
    ) -> Result<Amend, ApiError> {
        let Some(url) = self.url(stage) else {
            return Ok(Amend::default());
        };
        let start = Instant::now();
        let r = self.call(url, stage, who, ask).await;
        let outcome = match &r {
            Ok(Verdict::Go(_)) => "allowed",
            Ok(Verdict::No(_)) => "rejected",
            Err(Failed::Timeout) => "timeout",
            Err(Failed::Other(_)) => "failed",
        };
        stats.hook(stage.as_str(), outcome, start.elapsed());
        match r {
            Ok(Verdict::Go(a)) => Ok(a),
            Ok(Verdict::No(e)) => Err(e),
            Err(f) => self.failed(stage, url, f),
        }
    }

    fn failed(&self, stage: Stage, url: &str, f: Failed) -> Result<Amend, ApiError> {
        let why = match f {
            Failed::Timeout => format!("no answer within {} s", self.cfg.hook_timeout),
            Failed::Other(s) => s,
        };
        let hook = stage.as_str();
        tracing::warn!(hook, url, "hook failed: {why}");
        match self.cfg.hook_failure {
            HookFailure::Open => Ok(Amend::default()),
            HookFailure::Closed => {
                let mut e = ApiError::new(
                    Kind::Unavailable,
                    format!(
                        "the application's {hook} hook did not answer ({why}); nothing was \
                         stored, try again later"
                    ),
                );
                e.retry_after = Some(RETRY_AFTER_S);
                Err(e)
            }
        }
    }

    async fn call(
        &self,
        url: &str,
        stage: Stage,
        who: &Principal,
        ask: &Ask,
    ) -> Result<Verdict, Failed> {
        let deadline = tokio::time::Instant::now() + self.cfg.hook_timeout();
        // A free call within the same time a call may take.
        let _permit = tokio::time::timeout_at(deadline, self.calls.acquire())
            .await
            .map_err(|_| Failed::Timeout)?
            .map_err(|_| Failed::Other("hooks closed".into()))?;
        let body = body(stage, who, ask).to_string();
        let id = uuid_like();
        let mut req = self
            .client
            .post(url)
            .header(http::header::CONTENT_TYPE, "application/json");
        if let Some(s) = &self.signer {
            for (k, v) in s.headers(&id, body.as_bytes()) {
                req = req.header(k, v);
            }
        }
        let send = async {
            let resp = req
                .body(body)
                .send()
                .await
                .map_err(|e| match e.is_timeout() {
                    true => Failed::Timeout,
                    false => Failed::Other(crate::events::dispatch::chain(&e)),
                })?;
            let status = resp.status();
            let max = self.cfg.hook_answer_bytes;
            let answer = crate::events::dispatch::read_some(resp, max + 1).await;
            if answer.len() as u64 > max {
                return Err(Failed::Other(format!(
                    "its answer is longer than [hooks] hook_answer_bytes = {max}"
                )));
            }
            if !status.is_success() {
                return Err(Failed::Other(format!("HTTP {}", status.as_u16())));
            }
            verdict(&answer).map_err(Failed::Other)
        };
        tokio::time::timeout_at(deadline, send)
            .await
            .map_err(|_| Failed::Timeout)?
    }
}

enum Verdict {
    Go(Amend),
    No(ApiError),
}

enum Failed {
    Timeout,
    Other(String),
}

/// A message id for the signature headers: unique per call.
fn uuid_like() -> String {
    format!("hook_{}", crate::store::new_id())
}

fn body(stage: Stage, who: &Principal, a: &Ask) -> Value {
    let role = match &who.via {
        Via::User { role } => Some(role.as_str()),
        _ => None,
    };
    let mut b = serde_json::json!({
        "hook": stage.as_str(),
        "format": a.format,
        "principal": {
            "name": who.name,
            "role": role,
            "scopes": who.scopes.names(),
            "via": who.via.kind(),
        },
        "owner": who.name,
        "declared_size": a.declared_size,
        "filename": a.filename,
        "content_type": a.content_type,
        "fields": a.fields.clone().unwrap_or_default(),
        "metadata": a.metadata.clone().unwrap_or(Value::Object(Map::new())),
        "client": a.client.map(|c| c.to_string()),
        "request_id": a.request_id,
    });
    if let (Some(f), Value::Object(o)) = (&a.finished, &mut b) {
        o.insert("id".into(), f.id.clone().into());
        o.insert("size".into(), f.size.into());
        o.insert("sha256".into(), f.sha256.clone().into());
        o.insert("url".into(), f.url.clone().into());
    }
    b
}

/// Reads a 2xx answer: empty or `{}` goes on; `reject` refuses; the
/// amendable keys amend; anything else is a failure (a hook that answers
/// what this server cannot read has not said yes).
fn verdict(answer: &[u8]) -> Result<Verdict, String> {
    if answer.iter().all(u8::is_ascii_whitespace) {
        return Ok(Verdict::Go(Amend::default()));
    }
    let v: Value =
        serde_json::from_slice(answer).map_err(|e| format!("its answer is not JSON: {e}"))?;
    let Value::Object(o) = v else {
        return Err("its answer is not a JSON object".into());
    };
    if let Some(r) = o.get("reject") {
        let status = r.get("status").and_then(Value::as_u64).unwrap_or(403);
        let message = r
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("refused by the application")
            .to_string();
        let status = u16::try_from(status).unwrap_or(403);
        return Ok(Verdict::No(ApiError::refused(status, message)));
    }
    let text = |k: &str| -> Result<Option<String>, String> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("its answer's {k} is not a string")),
        }
    };
    let metadata = match o.get("metadata") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(_) => return Err("its answer's metadata is not an object".into()),
    };
    Ok(Verdict::Go(Amend {
        metadata,
        filename: text("filename")?,
        content_type: text("content_type")?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(a: &[u8]) -> Amend {
        match verdict(a) {
            Ok(Verdict::Go(a)) => a,
            _ => panic!("not a go: {}", String::from_utf8_lossy(a)),
        }
    }

    #[test]
    fn answers_go_amend_refuse_or_fail() {
        assert_eq!(go(b""), Amend::default());
        assert_eq!(go(b" {} "), Amend::default());
        let a = go(br#"{"filename":"b.png","content_type":"image/png","metadata":{"k":1}}"#);
        assert_eq!(a.filename.as_deref(), Some("b.png"));
        assert_eq!(a.content_type.as_deref(), Some("image/png"));
        assert_eq!(a.metadata.unwrap()["k"], 1);
        let Ok(Verdict::No(e)) = verdict(br#"{"reject":{"status":402,"message":"pay"}}"#) else {
            panic!("not a refusal");
        };
        assert_eq!((e.status().as_u16(), e.message.as_str()), (402, "pay"));
        let Ok(Verdict::No(e)) = verdict(br#"{"reject":{"status":200}}"#) else {
            panic!("not a refusal");
        };
        assert_eq!(e.status().as_u16(), 403, "a refusal is never a success");
        for bad in [
            &b"nope"[..],
            b"[1]",
            br#"{"filename":3}"#,
            br#"{"metadata":"x"}"#,
        ] {
            assert!(verdict(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_body_names_the_principal_and_the_upload() {
        let who = Principal::user("ann", crate::principal::Role::Author);
        let ask = Ask {
            format: "raw",
            declared_size: Some(5),
            filename: Some("a.txt".into()),
            finished: Some(Finished {
                id: "x".into(),
                size: 5,
                sha256: "ab".into(),
                url: "http://h/u".into(),
            }),
            ..Default::default()
        };
        let b = body(Stage::PreFinish, &who, &ask);
        assert_eq!(b["hook"], "pre_finish");
        assert_eq!(b["principal"]["role"], "author");
        assert_eq!(b["owner"], "ann");
        assert_eq!(
            (b["declared_size"].as_u64(), b["size"].as_u64()),
            (Some(5), Some(5))
        );
        assert_eq!(b["url"], "http://h/u");
        assert!(b["fields"].is_object() && b["metadata"].is_object());
    }
}

/// Uploads whose bytes a `pre_finish` hook may read now: at most one entry
/// per upload in flight (each holds a slot), removed when its hook has
/// answered.
#[derive(Default)]
pub struct Finishing {
    map: std::sync::Mutex<std::collections::HashMap<String, (u64, String)>>,
}

impl Finishing {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (u64, String)>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// (size, content type) of upload `id`, while its hook runs.
    pub fn get(&self, id: &str) -> Option<(u64, String)> {
        self.lock().get(id).cloned()
    }

    /// Readable until the guard drops.
    pub fn open(self: &Arc<Self>, id: &str, size: u64, content_type: &str) -> FinishingGuard {
        self.lock()
            .insert(id.to_string(), (size, content_type.to_string()));
        FinishingGuard {
            set: self.clone(),
            id: id.to_string(),
        }
    }
}

pub struct FinishingGuard {
    set: Arc<Finishing>,
    id: String,
}

impl Drop for FinishingGuard {
    fn drop(&mut self) {
        self.set.lock().remove(&self.id);
    }
}
