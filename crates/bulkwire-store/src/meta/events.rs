//! The event outbox (DESIGN.md "Telling the application"): an event is a
//! row written in the same transaction as the change it reports — the media
//! row's insert, its delete, a resumable upload's creation or removal — so
//! that a committed upload always has its event and an aborted one never.
//! Events are read back in one order on every node (the feed: `seq`), and
//! delivered to each webhook endpoint at least once, the events of one item
//! in order, by any node under a lease (`deliveries`).
//!
//! `seq` is commit order on every backend: SQLite has one writer, and on
//! PostgreSQL every transaction that writes an event holds the insert lock
//! from before its first row lock until it commits (`postgres/events.rs`),
//! so a reader that has seen `seq` n never later finds an n-1 it skipped.

use super::{MediaRecord, MetaError};
use crate::BoxFut;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// One event as delivered and fed:
/// `{"id","type","time","node","owner","request_id","data"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// A UUIDv7: unique, and sortable by the time it was made.
    pub id: String,
    /// `media.created`, `media.deleted`, `upload.created`,
    /// `upload.terminated`, `upload.expired`, `upload.progress`.
    #[serde(rename = "type")]
    pub kind: String,
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// The node that made the change.
    pub node: String,
    /// The owner of the item the event is about.
    pub owner: String,
    /// The request's `X-Request-Id`; null for the janitor's changes.
    pub request_id: Option<String>,
    pub data: serde_json::Value,
}

impl Event {
    /// A new event of `kind` about `owner`'s item, now.
    pub fn new(
        kind: &str,
        node: &str,
        owner: &str,
        request_id: Option<&str>,
        data: serde_json::Value,
    ) -> Event {
        Event {
            id: uuid::Uuid::now_v7().to_string(),
            kind: kind.to_string(),
            time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            node: node.to_string(),
            owner: owner.to_string(),
            request_id: request_id.map(str::to_string),
            data,
        }
    }

    /// The JSON body as sent and stored.
    pub fn to_json(&self) -> String {
        // Strings, an option and a JSON value: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// An event to write, and the item whose order it keeps (a media item's or
/// a resumable upload's id: the two are the same for an upload that became
/// an item, so `upload.created` comes before its `media.created`).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub event: Event,
    pub item: String,
}

impl NewEvent {
    pub fn new(item: &str, event: Event) -> NewEvent {
        NewEvent {
            item: item.to_string(),
            event,
        }
    }
}

/// The event a media row's insert or delete writes, made from the row as
/// the transaction has it (its `seq` and `created` are known only there).
pub type EventOf = Arc<dyn Fn(&MediaRecord) -> NewEvent + Send + Sync>;

/// An event as stored: its place in the feed and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub seq: i64,
    pub event: Event,
}

/// A delivery of an event to one endpoint, claimed by a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub seq: i64,
    /// Tries before this one.
    pub attempts: u32,
    /// When the event was written (seconds since the epoch, store clock):
    /// past `webhook_max_age` a delivery that keeps failing is given up.
    pub created: i64,
    pub event: Event,
}

/// How a claimed delivery ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// The endpoint answered 2xx.
    Delivered,
    /// Try again `after` from now; the error is kept for `events list`.
    Retry { after: Duration, error: String },
    /// Given up (past `webhook_max_age`): kept, listed as failed.
    Failed { error: String },
}

/// A delivery that failed for good (`bulkwire events list --failed`).
#[derive(Debug, Clone, PartialEq)]
pub struct FailedDelivery {
    pub endpoint: String,
    pub seq: i64,
    pub attempts: u32,
    pub error: String,
    pub event: Event,
}

/// What the outbox holds (`/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxStats {
    pub events: u64,
    /// Seconds since the oldest event kept was written.
    pub oldest_age_s: u64,
    pub pending: u64,
    /// Seconds since the oldest event still waiting for a delivery was
    /// written (0 when none waits): a receiver that is down shows here.
    pub oldest_pending_s: u64,
    pub failed: u64,
}

/// The outbox's reads and deliveries; events are written by the other
/// concerns' transactions (`insert`, `delete`, `upload_*`).
pub trait EventStore: Send + Sync + 'static {
    /// Up to `limit` events past `after` in feed order (all when `after`
    /// is 0), only `owner`'s with one.
    fn events<'a>(
        &'a self,
        after: i64,
        owner: Option<&'a str>,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<StoredEvent>, MetaError>>;

    /// Starts `endpoint` at the end of the outbox if the store has never
    /// seen it (a webhook added to the configuration gets the events from
    /// its first start on, not the history); an endpoint it knows keeps its
    /// mark. Called at start, before the node serves.
    fn deliveries_begin<'a>(&'a self, endpoint: &'a str) -> BoxFut<'a, Result<(), MetaError>>;

    /// Makes a pending delivery to `endpoint` of each event past its mark
    /// whose type is in `kinds` (`*` for every type), up to `limit`
    /// events, and moves the mark, in one transaction; the number of
    /// events looked at.
    fn deliveries_plan<'a>(
        &'a self,
        endpoint: &'a str,
        kinds: &'a [String],
        limit: usize,
    ) -> BoxFut<'a, Result<usize, MetaError>>;

    /// Leases to `node`, for `lease`, up to `limit` due deliveries to
    /// `endpoint` whose item has no earlier pending delivery (the events of
    /// one item go in order), oldest first; another node's claims whose
    /// lease ran out are due again.
    fn deliveries_claim<'a>(
        &'a self,
        endpoint: &'a str,
        node: &'a str,
        lease: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Delivery>, MetaError>>;

    /// Ends `node`'s claim of a delivery; `false` when the claim is no
    /// longer its own (the lease ran out and another node took it).
    fn delivery_settle<'a>(
        &'a self,
        endpoint: &'a str,
        seq: i64,
        node: &'a str,
        how: Settle,
    ) -> BoxFut<'a, Result<bool, MetaError>>;

    /// Up to `limit` failed deliveries, oldest first.
    fn deliveries_failed(&self, limit: usize)
        -> BoxFut<'_, Result<Vec<FailedDelivery>, MetaError>>;

    /// Makes failed deliveries pending again, due now: those of the event
    /// with this id, or every one; the number.
    fn deliveries_retry<'a>(
        &'a self,
        event_id: Option<&'a str>,
    ) -> BoxFut<'a, Result<u64, MetaError>>;

    /// Removes events older than `age` that no delivery waits for (a
    /// failed one is kept with its event); the number removed.
    fn events_prune(&self, age: Duration) -> BoxFut<'_, Result<u64, MetaError>>;

    fn outbox_stats(&self) -> BoxFut<'_, Result<OutboxStats, MetaError>>;

    /// The last event's `seq` (0 when there is none): one index lookup, for
    /// long-polling readers to learn cheaply that there is something new.
    fn events_head(&self) -> BoxFut<'_, Result<i64, MetaError>>;
}
