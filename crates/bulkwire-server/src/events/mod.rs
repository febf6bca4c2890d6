//! Telling the application (DESIGN.md "Telling the application"): events
//! written in the transactions of the changes they report (the outbox,
//! `bulkwire_store::EventStore`), delivered to webhooks by every node
//! ([`dispatch`]), read by long-polling consumers ([`feed`]), and hooks
//! that may refuse an upload before its bytes and before its commit
//! ([`crate::hooks`]).
//!
//! A handler describes where its change comes from with an [`Origin`] (the
//! format, the request's `X-Request-Id`, the base of the links) and hands
//! the store an event maker ([`media_created`], [`media_deleted`],
//! [`upload_event`]): the store writes the event only when the change
//! commits, and the maker sees the row as committed.

pub mod config;
pub mod dispatch;
pub mod feed;
pub mod sign;
pub mod stats;

use crate::state::AppState;
use crate::store::{EventOf, MediaRecord, NewEvent};
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio::sync::watch;

pub use config::{EventsConfig, HookFailure, HooksConfig, Webhook};
pub use stats::EventStats;

/// This node's side of the outbox: wake-ups and counters.
pub struct Events {
    pub stats: EventStats,
    /// Bumped after each local commit that wrote events: dispatchers plan
    /// and feeds look at once, instead of at their next poll.
    written: watch::Sender<u64>,
    /// The last event's `seq` as this node last saw it ([`feed`]).
    pub(crate) head: watch::Sender<i64>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            stats: EventStats::default(),
            written: watch::channel(0).0,
            head: watch::channel(0).0,
        }
    }
}

impl Events {
    /// Counts `n` events of `kind` committed here and wakes whoever waits
    /// for new events.
    pub fn written(&self, kind: &str, n: usize) {
        if n == 0 {
            return;
        }
        self.stats.written(kind, n as u64);
        self.written.send_modify(|g| *g = g.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.written.subscribe()
    }
}

/// Where a change comes from: what the events about it carry besides the
/// row.
#[derive(Debug, Clone)]
pub struct Origin {
    /// `multipart`, `raw`, `xmlrpc`, `soap`, `tus`, `ietf`.
    pub format: &'static str,
    /// The request's `X-Request-Id`.
    pub request_id: Option<String>,
    /// Scheme and authority links start with (`crate::response::base_url`).
    pub base: String,
    /// The client's address (for hooks).
    pub client: Option<std::net::IpAddr>,
}

impl Origin {
    /// The origin of a request.
    pub fn of(
        state: &AppState,
        format: &'static str,
        headers: &http::HeaderMap,
        ext: &http::Extensions,
    ) -> Origin {
        Origin {
            format,
            request_id: crate::access::request_id(ext),
            base: crate::response::base_url(&state.config, headers),
            client: crate::access::client(ext),
        }
    }
}

/// `media.created` for each row an insert commits: `data` is the media
/// object the API returns (with its link), `format`, and `extra`'s keys
/// (`fields` of a form, `metadata` of a resumable upload).
pub fn media_created(state: &Arc<AppState>, origin: &Origin, extra: Map<String, Value>) -> EventOf {
    let (state, origin) = (state.clone(), origin.clone());
    Arc::new(move |m: &MediaRecord| {
        let sizes = &state.config.variant_sizes;
        let mut data = crate::response::media_json(m, &origin.base, &state.links, true, sizes);
        if let Value::Object(o) = &mut data {
            o.insert("format".into(), origin.format.into());
            o.extend(extra.clone());
        }
        event(&state, &origin, "media.created", &m.id, &m.owner, data)
    })
}

/// `media.deleted`: the media object as it was, without a link.
pub fn media_deleted(state: &Arc<AppState>, origin: &Origin) -> EventOf {
    let (state, origin) = (state.clone(), origin.clone());
    Arc::new(move |m: &MediaRecord| {
        let sizes = &state.config.variant_sizes;
        let data = crate::response::media_json(m, &origin.base, &state.links, false, sizes);
        event(&state, &origin, "media.deleted", &m.id, &m.owner, data)
    })
}

/// An event about resumable upload `id` (`upload.created`,
/// `upload.terminated`, `upload.progress`); `data` gets its `id` and
/// `format`.
pub fn upload_event(
    state: &AppState,
    origin: &Origin,
    kind: &str,
    id: &str,
    owner: &str,
    mut data: Map<String, Value>,
) -> NewEvent {
    data.insert("id".into(), id.into());
    data.insert("format".into(), origin.format.into());
    event(state, origin, kind, id, owner, Value::Object(data))
}

fn event(
    state: &AppState,
    origin: &Origin,
    kind: &str,
    item: &str,
    owner: &str,
    data: Value,
) -> NewEvent {
    let e = crate::store::Event::new(kind, &state.node, owner, origin.request_id.as_deref(), data);
    NewEvent::new(item, e)
}

/// A form's text fields as a JSON object (the last value of a repeated
/// name wins, as in the API's answer).
pub fn fields_json(fields: &[(String, String)]) -> Map<String, Value> {
    let f: Map<String, Value> = fields
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let mut m = Map::new();
    m.insert("fields".into(), Value::Object(f));
    m
}
