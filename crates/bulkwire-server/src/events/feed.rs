//! `GET /v1/events?after=CURSOR&limit=N&wait=SECONDS`: the outbox as a
//! feed, for consumers that cannot take inbound HTTP.
//!
//! Answers `{"events": […], "next": CURSOR}` in `seq` order, which is
//! commit order on every backend and the same through every node; `next`
//! is the cursor to ask with next (the same as `after` when nothing was
//! new). Without `after`, the feed starts at the oldest event kept. With
//! `wait`, an empty answer is held until an event comes or `wait` seconds
//! (at most [`MAX_WAIT`]) pass. A principal that reaches only its own
//! items sees only their events; `admin` and `editor` see all.
//!
//! Waiting costs one store lookup per [`super::dispatch::POLL`] for the
//! whole node, not per waiter: a watcher task keeps the outbox's head in a
//! `watch` channel while someone waits, and a local commit wakes it at
//! once.

use crate::error::{ApiError, Kind};
use crate::principal::{Principal, Scopes};
use crate::response::{self, Response};
use crate::state::AppState;
use std::sync::Arc;
use std::time::Duration;

/// Longest `wait` honoured; a longer one is taken as this.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Events in a page when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;

#[derive(Debug)]
struct Query {
    after: i64,
    limit: usize,
    wait: Duration,
}

fn parse(query: Option<&str>, max_limit: usize) -> Result<Query, ApiError> {
    let mut q = Query {
        after: 0,
        limit: DEFAULT_LIMIT.min(max_limit),
        wait: Duration::ZERO,
    };
    let bad =
        |k: &str, v: &str, what: &str| ApiError::new(Kind::Malformed, format!("{k}={v:?}: {what}"));
    for kv in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "after" if v.is_empty() => {}
            "after" => {
                q.after = v
                    .parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(|| bad(k, v, "not a cursor this feed gave"))?
            }
            "limit" => {
                let n = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad(k, v, "a number of events, at least 1"))?;
                q.limit = n.min(max_limit);
            }
            "wait" => {
                let s = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .ok_or_else(|| bad(k, v, "seconds to wait, 0 to 60"))?;
                q.wait = Duration::from_secs_f64(s.min(MAX_WAIT.as_secs_f64()));
            }
            _ => {}
        }
    }
    Ok(q)
}

/// The handler; `who` needs `read`.
pub async fn answer(
    state: &Arc<AppState>,
    who: &Principal,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    who.require(Scopes::READ)?;
    let q = parse(query, state.config.events.feed_limit)?;
    let deadline = tokio::time::Instant::now() + q.wait;
    // Subscribed before the first read: an event committed between the
    // read and the wait still wakes it.
    let mut head = state.events.head.subscribe();
    loop {
        let got = state.meta.events(q.after, who.owner(), q.limit).await?;
        let now = tokio::time::Instant::now();
        if !got.is_empty() || now >= deadline {
            return Ok(page(q.after, got));
        }
        head.mark_unchanged();
        match tokio::time::timeout_at(deadline, head.changed()).await {
            Ok(Ok(())) => {}
            // The sender lives as long as the state: a closed channel or
            // the deadline both end the wait.
            _ => return Ok(page(q.after, Vec::new())),
        }
    }
}

fn page(after: i64, got: Vec<crate::store::StoredEvent>) -> Response {
    let next = got.last().map_or(after, |s| s.seq);
    let events: Vec<_> = got.into_iter().map(|s| s.event).collect();
    let body = serde_json::json!({ "events": events, "next": next.to_string() });
    response::json(http::StatusCode::OK, &body)
}

/// Keeps `state.events.head` at the outbox's last `seq` while anyone
/// waits on the feed: at each local commit at once, else every
/// [`super::dispatch::POLL`] (events written through other nodes).
pub async fn watch_head(state: Arc<AppState>) {
    let mut written = state.events.subscribe();
    loop {
        tokio::select! {
            _ = written.changed() => {}
            _ = tokio::time::sleep(super::dispatch::POLL) => {}
        }
        if state.events.head.receiver_count() == 0 {
            continue;
        }
        match state.meta.events_head().await {
            Ok(h) => {
                state.events.head.send_if_modified(|v| {
                    let new = *v != h;
                    *v = h;
                    new
                });
            }
            Err(e) => tracing::debug!("feed head: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_read_and_bounded() {
        let q = parse(Some("after=42&limit=5000&wait=600"), 1000).unwrap();
        assert_eq!((q.after, q.limit, q.wait), (42, 1000, MAX_WAIT));
        let q = parse(None, 1000).unwrap();
        assert_eq!(
            (q.after, q.limit, q.wait),
            (0, DEFAULT_LIMIT, Duration::ZERO)
        );
        let q = parse(Some("after=&wait=0.5"), 1000).unwrap();
        assert_eq!((q.after, q.wait), (0, Duration::from_millis(500)));
        for bad in ["after=x", "after=-1", "limit=0", "wait=-1", "wait=nan"] {
            assert_eq!(parse(Some(bad), 1000).unwrap_err().status(), 400, "{bad}");
        }
    }
}
