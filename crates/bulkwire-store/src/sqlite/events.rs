//! The event outbox ([`EventStore`]): events written inside the other
//! concerns' transactions ([`write_event`]), read back in `seq` order, and
//! delivered per endpoint under leases. One writer at a time (SQLite), so
//! `seq` order is commit order.

use super::{now, SqliteMeta};
use crate::{
    BoxFut, Delivery, Event, EventStore, FailedDelivery, MetaError, NewEvent, OutboxStats, Settle,
    StoredEvent,
};
use rusqlite::{params, OptionalExtension, Row, Transaction};
use std::time::Duration;

/// Writes `e` in the caller's transaction.
pub(super) fn write_event(tx: &Transaction<'_>, e: &NewEvent) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO events (id, kind, owner, item, body, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        e.event.id,
        e.event.kind,
        e.event.owner,
        e.item,
        e.event.to_json(),
        now()
    ])?;
    Ok(())
}

/// An event's body as stored; a body that does not parse is an error, not
/// a silent skip (the feed and the deliveries would lose it).
fn body(s: &str) -> rusqlite::Result<Event> {
    serde_json::from_str(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn stored(r: &Row<'_>) -> rusqlite::Result<StoredEvent> {
    Ok(StoredEvent {
        seq: r.get(0)?,
        event: body(&r.get::<_, String>(1)?)?,
    })
}

/// `*` or a list of types, as SQL's `IN (…)` cannot take a list parameter:
/// the filter runs in Rust over the events looked at.
fn wanted(kinds: &[String], kind: &str) -> bool {
    kinds.iter().any(|k| k == "*" || k == kind)
}

/// Whole seconds, as `events.created` keeps times.
fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2)
}

/// Milliseconds: deliveries' `next_at` and `lease_until` (a lease or a
/// first retry shorter than a second must not round to nothing or to two).
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl EventStore for SqliteMeta {
    fn events<'a>(
        &'a self,
        after: i64,
        owner: Option<&'a str>,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<StoredEvent>, MetaError>> {
        let owner = owner.map(str::to_string);
        self.with(move |c| {
            let mut st = c.prepare_cached(
                "SELECT seq, body FROM events WHERE seq > ?1 AND (?2 IS NULL OR owner = ?2)
                 ORDER BY seq LIMIT ?3",
            )?;
            let rows = st.query_map(params![after, owner, limit as i64], stored)?;
            rows.collect()
        })
    }

    fn deliveries_begin<'a>(&'a self, endpoint: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        let endpoint = endpoint.to_string();
        self.with(move |c| {
            c.prepare_cached(
                "INSERT OR IGNORE INTO event_scans (endpoint, seq)
                 SELECT ?1, COALESCE(max(seq), 0) FROM events",
            )?
            .execute([endpoint])?;
            Ok(())
        })
    }

    fn deliveries_plan<'a>(
        &'a self,
        endpoint: &'a str,
        kinds: &'a [String],
        limit: usize,
    ) -> BoxFut<'a, Result<usize, MetaError>> {
        let (endpoint, kinds) = (endpoint.to_string(), kinds.to_vec());
        let writes = self.writes.clone();
        self.with(move |c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let mark: i64 = tx
                .prepare_cached("SELECT seq FROM event_scans WHERE endpoint = ?1")?
                .query_row([&endpoint], |r| r.get(0))
                .optional()?
                .unwrap_or(0);
            let seen: Vec<(i64, String, String)> = {
                let mut st = tx.prepare_cached(
                    "SELECT seq, kind, item FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                )?;
                let rows = st.query_map(params![mark, limit as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
                rows.collect::<rusqlite::Result<_>>()?
            };
            let Some(last) = seen.last().map(|s| s.0) else {
                return Ok(0);
            };
            {
                let mut put = tx.prepare_cached(
                    "INSERT OR IGNORE INTO deliveries
                        (endpoint, seq, item, state, attempts, next_at) VALUES (?1, ?2, ?3, 'pending', 0, ?4)",
                )?;
                for (seq, _, item) in seen.iter().filter(|s| wanted(&kinds, &s.1)) {
                    put.execute(params![endpoint, seq, item, now_ms()])?;
                }
            }
            tx.prepare_cached(
                "INSERT INTO event_scans (endpoint, seq) VALUES (?1, ?2)
                 ON CONFLICT (endpoint) DO UPDATE SET seq = excluded.seq",
            )?
            .execute(params![endpoint, last])?;
            tx.commit()?;
            writes.add(1);
            Ok(seen.len())
        })
    }

    fn deliveries_claim<'a>(
        &'a self,
        endpoint: &'a str,
        node: &'a str,
        lease: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Delivery>, MetaError>> {
        let (endpoint, node) = (endpoint.to_string(), node.to_string());
        self.with(move |c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let t = now_ms();
            let claimed: Vec<Delivery> = {
                let mut st = tx.prepare_cached(
                    "SELECT d.seq, d.attempts, e.created, e.body FROM deliveries d
                     JOIN events e ON e.seq = d.seq
                     WHERE d.endpoint = ?1 AND d.state = 'pending' AND d.next_at <= ?2
                       AND (d.lease_until IS NULL OR d.lease_until < ?2)
                       AND NOT EXISTS (SELECT 1 FROM deliveries q
                            WHERE q.endpoint = d.endpoint AND q.item = d.item
                              AND q.state = 'pending' AND q.seq < d.seq)
                     ORDER BY d.seq LIMIT ?3",
                )?;
                let rows = st.query_map(params![endpoint, t, limit as i64], |r| {
                    Ok(Delivery {
                        seq: r.get(0)?,
                        attempts: r.get::<_, i64>(1)?.max(0) as u32,
                        created: r.get(2)?,
                        event: body(&r.get::<_, String>(3)?)?,
                    })
                })?;
                rows.collect::<rusqlite::Result<_>>()?
            };
            {
                let mut take = tx.prepare_cached(
                    "UPDATE deliveries SET lease_node = ?3, lease_until = ?4
                     WHERE endpoint = ?1 AND seq = ?2",
                )?;
                for d in &claimed {
                    take.execute(params![endpoint, d.seq, node, t + ms(lease).max(1)])?;
                }
            }
            tx.commit()?;
            Ok(claimed)
        })
    }

    fn delivery_settle<'a>(
        &'a self,
        endpoint: &'a str,
        seq: i64,
        node: &'a str,
        how: Settle,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let (endpoint, node) = (endpoint.to_string(), node.to_string());
        let writes = self.writes.clone();
        self.with(move |c| {
            let (state, next, error, tried) = match how {
                Settle::Delivered => ("delivered", 0, None, 1),
                Settle::Retry { after, error } => ("pending", now_ms() + ms(after), Some(error), 1),
                Settle::Failed { error } => ("failed", 0, Some(error), 1),
            };
            let n = c
                .prepare_cached(
                    "UPDATE deliveries SET state = ?4, next_at = ?5, error = ?6,
                        attempts = attempts + ?7, lease_node = NULL, lease_until = NULL
                     WHERE endpoint = ?1 AND seq = ?2 AND lease_node = ?3 AND state = 'pending'",
                )?
                .execute(params![endpoint, seq, node, state, next, error, tried])?;
            writes.add(1);
            Ok(n == 1)
        })
    }

    fn deliveries_failed(
        &self,
        limit: usize,
    ) -> BoxFut<'_, Result<Vec<FailedDelivery>, MetaError>> {
        self.with(move |c| {
            let mut st = c.prepare_cached(
                "SELECT d.endpoint, d.seq, d.attempts, COALESCE(d.error, ''), e.body
                 FROM deliveries d JOIN events e ON e.seq = d.seq
                 WHERE d.state = 'failed' ORDER BY d.seq LIMIT ?1",
            )?;
            let rows = st.query_map([limit as i64], |r| {
                Ok(FailedDelivery {
                    endpoint: r.get(0)?,
                    seq: r.get(1)?,
                    attempts: r.get::<_, i64>(2)?.max(0) as u32,
                    error: r.get(3)?,
                    event: body(&r.get::<_, String>(4)?)?,
                })
            })?;
            rows.collect()
        })
    }

    fn deliveries_retry<'a>(
        &'a self,
        event_id: Option<&'a str>,
    ) -> BoxFut<'a, Result<u64, MetaError>> {
        let id = event_id.map(str::to_string);
        self.with(move |c| {
            let n = c
                .prepare_cached(
                    "UPDATE deliveries SET state = 'pending', next_at = ?2
                     WHERE state = 'failed'
                       AND (?1 IS NULL OR seq = (SELECT seq FROM events WHERE id = ?1))",
                )?
                .execute(params![id, now_ms()])?;
            Ok(n as u64)
        })
    }

    fn events_prune(&self, age: Duration) -> BoxFut<'_, Result<u64, MetaError>> {
        self.with(move |c| {
            let tx = c.transaction()?;
            let before = now() - secs(age);
            let n = tx
                .prepare_cached(
                    "DELETE FROM events WHERE created <= ?1 AND NOT EXISTS
                        (SELECT 1 FROM deliveries d WHERE d.seq = events.seq AND d.state != 'delivered')",
                )?
                .execute([before])?;
            tx.prepare_cached(
                "DELETE FROM deliveries WHERE state = 'delivered'
                 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.seq = deliveries.seq)",
            )?
            .execute([])?;
            tx.commit()?;
            Ok(n as u64)
        })
    }

    fn outbox_stats(&self) -> BoxFut<'_, Result<OutboxStats, MetaError>> {
        self.with(|c| {
            let (events, oldest): (i64, Option<i64>) = c
                .prepare_cached("SELECT count(*), min(created) FROM events")?
                .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let count = |state: &str| -> rusqlite::Result<i64> {
                c.prepare_cached("SELECT count(*) FROM deliveries WHERE state = ?1")?
                    .query_row([state], |r| r.get(0))
            };
            let waiting: Option<i64> = c
                .prepare_cached(
                    "SELECT min(e.created) FROM deliveries d JOIN events e ON e.seq = d.seq
                     WHERE d.state = 'pending'",
                )?
                .query_row([], |r| r.get(0))?;
            let age = |t: Option<i64>| t.map_or(0, |o| (now() - o).max(0) as u64);
            Ok(OutboxStats {
                events: events.max(0) as u64,
                oldest_age_s: age(oldest),
                pending: count("pending")?.max(0) as u64,
                oldest_pending_s: age(waiting),
                failed: count("failed")?.max(0) as u64,
            })
        })
    }

    fn events_head(&self) -> BoxFut<'_, Result<i64, MetaError>> {
        self.with(|c| {
            c.prepare_cached("SELECT COALESCE(max(seq), 0) FROM events")?
                .query_row([], |r| r.get(0))
        })
    }
}
