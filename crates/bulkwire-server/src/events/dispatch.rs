//! Webhook delivery: one loop per `[[webhooks]]` endpoint on every node.
//!
//! Each round plans (a delivery for each new event of a wanted type, from
//! the endpoint's mark: `deliveries_plan`), claims what is due under a
//! lease (`deliveries_claim`; on PostgreSQL `FOR UPDATE SKIP LOCKED`, so
//! nodes share the work and never send one delivery at once; a dead node's
//! claims come due again when their lease runs out) and sends each claim,
//! at most `webhook_concurrency` at a time. An answer 2xx is delivery;
//! anything else, a timeout or a refused connection waits and tries again
//! (under 2 s first, doubling, each wait at most `webhook_retry_max`,
//! jittered) until the event is `webhook_max_age` old, then the delivery is
//! failed and kept (`bulkwire events list --failed`, `events retry`).
//! Delivery is at least once: a node that dies between the receiver's
//! answer and its settle leaves the claim to be sent again, with the same
//! `webhook-id`.
//!
//! A round starts when this node commits an event, when a delivery ends
//! (the next event of its item may be due) and at least every
//! [`POLL`] (events other nodes wrote, retries coming due).

use super::sign::Signer;
use super::stats::Delivered;
use super::Webhook;
use crate::state::AppState;
use crate::store::{Delivery, Settle};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};

/// Longest a dispatcher waits before looking at the store again.
pub const POLL: Duration = Duration::from_millis(500);

/// Events looked at per plan.
const PLAN_BATCH: usize = 500;

/// Wait after a store error before the next round.
const STORE_RETRY: Duration = Duration::from_secs(1);

/// One endpoint as its dispatcher sees it.
struct Endpoint {
    url: String,
    kinds: Vec<String>,
    signer: Signer,
    client: reqwest013::Client,
    /// Free delivery slots (`webhook_concurrency`).
    slots: Arc<Semaphore>,
    /// A delivery ended: its item's next event may be due.
    settled: Notify,
}

/// Makes sure the store knows every endpoint (a new one starts at the end
/// of the outbox), before the node serves, so that no event committed
/// after start-up is missed by a webhook added with this start.
pub async fn begin(state: &AppState) -> Result<(), String> {
    for w in &state.config.webhooks {
        state
            .meta
            .deliveries_begin(&w.url)
            .await
            .map_err(|e| format!("webhook {}: {e}", w.url))?;
    }
    Ok(())
}

/// Starts one dispatcher per webhook, and the outbox's upkeep (metrics,
/// pruning); they run until the runtime stops.
pub fn start(state: &Arc<AppState>) -> Result<Vec<tokio::task::JoinHandle<()>>, String> {
    let mut tasks = vec![tokio::spawn(upkeep(state.clone()))];
    for w in &state.config.webhooks {
        let ep = endpoint(state, w)?;
        tasks.push(tokio::spawn(run(state.clone(), Arc::new(ep))));
    }
    Ok(tasks)
}

fn endpoint(state: &AppState, w: &Webhook) -> Result<Endpoint, String> {
    let e = &state.config.events;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest013::Client::builder()
        .timeout(e.webhook_timeout())
        .connect_timeout(e.webhook_timeout())
        .redirect(reqwest013::redirect::Policy::none())
        .user_agent(concat!("bulkwire/", env!("CARGO_PKG_VERSION")))
        .pool_max_idle_per_host(e.webhook_concurrency)
        .build()
        .map_err(|err| format!("webhook {}: the HTTP client: {err}", w.url))?;
    Ok(Endpoint {
        url: w.url.clone(),
        kinds: w.events.clone(),
        signer: Signer::new(&w.secret).map_err(|err| format!("webhook {}: {err}", w.url))?,
        client,
        slots: Arc::new(Semaphore::new(e.webhook_concurrency)),
        settled: Notify::new(),
    })
}

/// The lease of a claim: long enough to send it (`webhook_timeout`) and
/// settle it, short enough that a dead node's claims come back soon.
fn lease(state: &AppState) -> Duration {
    state.config.events.webhook_timeout() * 2 + Duration::from_secs(10)
}

async fn run(state: Arc<AppState>, ep: Arc<Endpoint>) {
    let mut written = state.events.subscribe();
    loop {
        let busy = match round(&state, &ep).await {
            Ok(busy) => busy,
            Err(e) => {
                tracing::warn!(endpoint = %ep.url, "webhook dispatcher: {e} (retried in {STORE_RETRY:?})");
                tokio::time::sleep(STORE_RETRY).await;
                continue;
            }
        };
        if busy {
            continue;
        }
        tokio::select! {
            _ = written.changed() => {}
            _ = ep.settled.notified() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// Plans, claims and starts sending; true when there may be more to do at
/// once.
async fn round(state: &Arc<AppState>, ep: &Arc<Endpoint>) -> Result<bool, crate::store::MetaError> {
    let planned = state
        .meta
        .deliveries_plan(&ep.url, &ep.kinds, PLAN_BATCH)
        .await?;
    let free = ep.slots.available_permits();
    if free == 0 {
        // Every slot is sending: a settle wakes the loop.
        return Ok(false);
    }
    let claimed = state
        .meta
        .deliveries_claim(&ep.url, &state.node, lease(state), free)
        .await?;
    let full = claimed.len() == free;
    for d in claimed {
        let Ok(slot) = ep.slots.clone().try_acquire_owned() else {
            break;
        };
        let (state, ep) = (state.clone(), ep.clone());
        tokio::spawn(async move {
            deliver(&state, &ep, d).await;
            drop(slot);
            ep.settled.notify_one();
        });
    }
    Ok(planned == PLAN_BATCH || full)
}

/// Sends one claimed delivery and settles it.
async fn deliver(state: &AppState, ep: &Endpoint, d: Delivery) {
    let cfg = &state.config.events;
    let kind = d.event.kind.clone();
    let outcome = send(state, ep, &d).await;
    let age = Duration::from_secs((unix_now() - d.created).max(0) as u64);
    let (how, settle) = match outcome {
        Ok(()) => (Delivered::Delivered, Settle::Delivered),
        Err(error) if age >= cfg.webhook_max_age() => {
            tracing::warn!(endpoint = %ep.url, id = %d.event.id, "webhook delivery failed for good: {error}");
            (Delivered::Failed, Settle::Failed { error })
        }
        Err(error) => {
            let after = backoff(d.attempts, cfg.webhook_retry_max());
            tracing::debug!(endpoint = %ep.url, id = %d.event.id, ?after, "webhook delivery: {error}");
            (Delivered::Retried, Settle::Retry { after, error })
        }
    };
    let lag = (how == Delivered::Delivered).then(|| lag_of(&d));
    state
        .events
        .stats
        .delivery(&ep.url, &kind, how, lag.flatten());
    // A settle that fails (the store is away) leaves the claim to run
    // out: the event is sent again, with the same id.
    match state
        .meta
        .delivery_settle(&ep.url, d.seq, &state.node, settle)
        .await
    {
        Ok(true) => {}
        Ok(false) => tracing::debug!(endpoint = %ep.url, seq = d.seq, "claim lost before settle"),
        Err(e) => tracing::warn!(endpoint = %ep.url, seq = d.seq, "settling a delivery: {e}"),
    }
}

/// POSTs the event, signed; `Err` says why it is not delivered.
async fn send(state: &AppState, ep: &Endpoint, d: &Delivery) -> Result<(), String> {
    let body = d.event.to_json();
    let mut req = ep
        .client
        .post(&ep.url)
        .header(http::header::CONTENT_TYPE, "application/json");
    for (k, v) in ep.signer.headers(&d.event.id, body.as_bytes()) {
        req = req.header(k, v);
    }
    let resp = req.body(body).send().await.map_err(|e| chain(&e))?;
    let status = resp.status();
    let answer = read_some(resp, state.config.events.webhook_answer_bytes).await;
    if status.is_success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&answer);
    let text: String = text.chars().take(200).collect();
    Err(format!("HTTP {}: {}", status.as_u16(), text.trim()))
}

/// At most `max` bytes of an answer; the rest is not read (the connection
/// is then not reused).
pub(crate) async fn read_some(mut resp: reqwest013::Response, max: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        let room = (max as usize).saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() as u64 >= max {
            break;
        }
    }
    out
}

/// The wait before try `attempts + 1`: 1 s doubled per try before, at most
/// `max`, a random 50–100 % of it (receivers coming back are not hit by
/// every node's backlog at the same instant).
pub fn backoff(attempts: u32, max: Duration) -> Duration {
    let full = Duration::from_secs(1u64 << attempts.min(30)).min(max);
    full.mul_f64(0.5 + rand::random::<f64>() * 0.5)
}

/// Commit to delivery, from the event's own time.
fn lag_of(d: &Delivery) -> Option<Duration> {
    let t = humantime::parse_rfc3339(&d.event.time).ok()?;
    std::time::SystemTime::now().duration_since(t).ok()
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// An error with its causes (reqwest's top line alone says only "error
/// sending request").
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// How often the upkeep looks at the outbox, and prunes it.
const UPKEEP: Duration = Duration::from_secs(5);
const PRUNE_EVERY: u32 = 12;

/// Keeps the outbox gauges fresh and removes events past `retention`.
async fn upkeep(state: Arc<AppState>) {
    let s = &state.events.stats;
    let mut round = 0u32;
    loop {
        if let Ok(o) = state.meta.outbox_stats().await {
            use std::sync::atomic::Ordering::Relaxed;
            s.outbox_events.store(o.events as i64, Relaxed);
            s.outbox_pending.store(o.pending as i64, Relaxed);
            s.outbox_failed.store(o.failed as i64, Relaxed);
            s.oldest_pending_s.store(o.oldest_pending_s as i64, Relaxed);
        }
        if round.is_multiple_of(PRUNE_EVERY) {
            match state
                .meta
                .events_prune(state.config.events.retention())
                .await
            {
                Ok(0) => {}
                Ok(n) => tracing::debug!(n, "events past their retention removed"),
                Err(e) => tracing::warn!("pruning events: {e}"),
            }
        }
        round = round.wrapping_add(1);
        tokio::time::sleep(UPKEEP).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_start_under_two_seconds_double_and_are_capped() {
        let max = Duration::from_secs(60);
        for _ in 0..100 {
            let first = backoff(0, max);
            assert!(first >= Duration::from_millis(500) && first <= Duration::from_secs(1));
            let second = backoff(1, max);
            assert!(second >= Duration::from_secs(1) && second <= Duration::from_secs(2));
            let late = backoff(40, max);
            assert!(late >= Duration::from_secs(30) && late <= max, "{late:?}");
        }
    }
}
