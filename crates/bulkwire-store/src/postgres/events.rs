//! The event outbox ([`EventStore`]) on PostgreSQL, which many nodes share.
//!
//! - `seq` is commit order: every transaction that writes an event takes
//!   the insert lock first ([`events_first`], the lock media inserts hold
//!   already), before any row lock, and holds it until it commits; a
//!   reader that saw `seq` n never later finds an n-1 it skipped. (The lock
//!   serialises only the few statements of those transactions.)
//! - Claims are one `UPDATE` over `FOR UPDATE SKIP LOCKED`: two nodes never
//!   take the same delivery and never wait for each other; a claim is a
//!   lease (`lease_until`, the database's clock), and a node that dies
//!   leaves its claims to expire and be taken by another.

use super::error::db;
use super::media::INSERT_LOCK;
use super::PgMeta;
use crate::{
    BoxFut, Delivery, Event, EventStore, FailedDelivery, MetaError, NewEvent, OutboxStats, Settle,
    StoredEvent,
};
use std::time::Duration;
use tokio_postgres::Row;

const WRITE: &str = "INSERT INTO events (id, kind, owner, item, body) VALUES ($1, $2, $3, $4, $5)";
const EVENTS: &str =
    "SELECT seq, body FROM events WHERE seq > $1 AND ($2::text IS NULL OR owner = $2)
     ORDER BY seq LIMIT $3";
const BEGIN: &str = "INSERT INTO event_scans (endpoint, seq)
     SELECT $1, COALESCE(max(seq), 0) FROM events ON CONFLICT (endpoint) DO NOTHING";
const SCAN_MARK: &str = "SELECT seq FROM event_scans WHERE endpoint = $1 FOR UPDATE";
const SCAN_NEW: &str = "INSERT INTO event_scans (endpoint, seq) VALUES ($1, 0)
     ON CONFLICT (endpoint) DO NOTHING";
const SCAN_EVENTS: &str = "SELECT seq, kind, item FROM events WHERE seq > $1 ORDER BY seq LIMIT $2";
const PLAN: &str = "INSERT INTO deliveries (endpoint, seq, item, state, attempts, next_at)
     VALUES ($1, $2, $3, 'pending', 0, now()) ON CONFLICT DO NOTHING";
const SCAN_MOVE: &str = "UPDATE event_scans SET seq = $2 WHERE endpoint = $1";
/// Due, not leased (or its lease ran out), and the first pending one of
/// its item: the events of one item go out in order.
const CLAIM: &str = "UPDATE deliveries d
     SET lease_node = $2, lease_until = now() + $3 * interval '1 millisecond'
     FROM events e
     WHERE e.seq = d.seq AND (d.endpoint, d.seq) IN (
        SELECT p.endpoint, p.seq FROM deliveries p
        WHERE p.endpoint = $1 AND p.state = 'pending' AND p.next_at <= now()
          AND (p.lease_until IS NULL OR p.lease_until < now())
          AND NOT EXISTS (SELECT 1 FROM deliveries q
                WHERE q.endpoint = p.endpoint AND q.item = p.item
                  AND q.state = 'pending' AND q.seq < p.seq)
        ORDER BY p.seq LIMIT $4
        FOR UPDATE SKIP LOCKED)
     RETURNING d.seq, d.attempts, floor(extract(epoch FROM e.created))::bigint, e.body";
const SETTLE: &str = "UPDATE deliveries
     SET state = $4, next_at = now() + $5 * interval '1 millisecond', error = $6,
         attempts = attempts + 1, lease_node = NULL, lease_until = NULL
     WHERE endpoint = $1 AND seq = $2 AND lease_node = $3 AND state = 'pending'";
const FAILED: &str = "SELECT d.endpoint, d.seq, d.attempts, COALESCE(d.error, ''), e.body
     FROM deliveries d JOIN events e ON e.seq = d.seq
     WHERE d.state = 'failed' ORDER BY d.seq LIMIT $1";
const RETRY: &str = "UPDATE deliveries SET state = 'pending', next_at = now()
     WHERE state = 'failed' AND ($1::text IS NULL OR seq = (SELECT seq FROM events WHERE id = $1))";
const PRUNE: &str = "DELETE FROM events
     WHERE created <= now() - $1 * interval '1 millisecond' AND NOT EXISTS
        (SELECT 1 FROM deliveries d WHERE d.seq = events.seq AND d.state != 'delivered')";
const PRUNE_DELIVERIES: &str = "DELETE FROM deliveries WHERE state = 'delivered'
     AND NOT EXISTS (SELECT 1 FROM events e WHERE e.seq = deliveries.seq)";
const STATS: &str = "SELECT (SELECT count(*) FROM events),
        COALESCE(floor(extract(epoch FROM now() - (SELECT min(created) FROM events)))::bigint, 0),
        (SELECT count(*) FROM deliveries WHERE state = 'pending'),
        (SELECT count(*) FROM deliveries WHERE state = 'failed'),
        COALESCE(floor(extract(epoch FROM now() - (SELECT min(e.created)
            FROM deliveries d JOIN events e ON e.seq = d.seq WHERE d.state = 'pending')))::bigint, 0)";
const HEAD: &str = "SELECT COALESCE(max(seq), 0)::bigint FROM events";

/// Takes the insert lock, before the transaction's first row lock: every
/// transaction that writes an event commits in `seq` order, and none waits
/// for it while holding a lock another event writer needs.
pub(super) async fn events_first(tx: &deadpool_postgres::Transaction<'_>) -> Result<(), MetaError> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&INSERT_LOCK])
        .await
        .map_err(db)?;
    Ok(())
}

/// Writes `e` in the caller's transaction (which took [`events_first`]).
pub(super) async fn write_event(
    tx: &deadpool_postgres::Transaction<'_>,
    e: &NewEvent,
) -> Result<(), MetaError> {
    let st = tx.prepare_cached(WRITE).await.map_err(db)?;
    let body = e.event.to_json();
    tx.execute(
        &st,
        &[&e.event.id, &e.event.kind, &e.event.owner, &e.item, &body],
    )
    .await
    .map_err(db)?;
    Ok(())
}

fn body(s: &str) -> Result<Event, MetaError> {
    serde_json::from_str(s).map_err(|e| MetaError::new(format!("an unreadable event: {e}")))
}

fn stored(r: &Row) -> Result<StoredEvent, MetaError> {
    let raw: String = r.try_get(1).map_err(db)?;
    Ok(StoredEvent {
        seq: r.try_get(0).map_err(db)?,
        event: body(&raw)?,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_millis() as f64
}

fn wanted(kinds: &[String], kind: &str) -> bool {
    kinds.iter().any(|k| k == "*" || k == kind)
}

impl PgMeta {
    async fn plan(
        &self,
        endpoint: &str,
        kinds: &[String],
        limit: usize,
    ) -> Result<usize, MetaError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(db)?;
        tx.execute(SCAN_NEW, &[&endpoint]).await.map_err(db)?;
        // The mark's row lock: two nodes planning at once take turns.
        let mark: i64 = tx
            .query_one(SCAN_MARK, &[&endpoint])
            .await
            .and_then(|r| r.try_get(0))
            .map_err(db)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let seen = tx.query(SCAN_EVENTS, &[&mark, &limit]).await.map_err(db)?;
        let Some(last) = seen.last() else {
            return Ok(0);
        };
        let last: i64 = last.try_get(0).map_err(db)?;
        let put = tx.prepare_cached(PLAN).await.map_err(db)?;
        for r in &seen {
            let (seq, kind, item): (i64, String, String) = (
                r.try_get(0).map_err(db)?,
                r.try_get(1).map_err(db)?,
                r.try_get(2).map_err(db)?,
            );
            if wanted(kinds, &kind) {
                tx.execute(&put, &[&endpoint, &seq, &item])
                    .await
                    .map_err(db)?;
            }
        }
        tx.execute(SCAN_MOVE, &[&endpoint, &last])
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(seen.len())
    }
}

impl EventStore for PgMeta {
    fn events<'a>(
        &'a self,
        after: i64,
        owner: Option<&'a str>,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<StoredEvent>, MetaError>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let got = self.query(EVENTS, &[&after, &owner, &limit]).await?;
            got.iter().map(stored).collect()
        })
    }

    fn deliveries_begin<'a>(&'a self, endpoint: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(BEGIN, &[&endpoint]).await.map(drop) })
    }

    fn deliveries_plan<'a>(
        &'a self,
        endpoint: &'a str,
        kinds: &'a [String],
        limit: usize,
    ) -> BoxFut<'a, Result<usize, MetaError>> {
        Box::pin(self.plan(endpoint, kinds, limit))
    }

    fn deliveries_claim<'a>(
        &'a self,
        endpoint: &'a str,
        node: &'a str,
        lease: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Delivery>, MetaError>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let got = self
                .query(CLAIM, &[&endpoint, &node, &ms(lease), &limit])
                .await?;
            let mut out = Vec::with_capacity(got.len());
            for r in &got {
                let raw: String = r.try_get(3).map_err(db)?;
                out.push(Delivery {
                    seq: r.try_get(0).map_err(db)?,
                    attempts: r.try_get::<_, i32>(1).map_err(db)?.max(0) as u32,
                    created: r.try_get(2).map_err(db)?,
                    event: body(&raw)?,
                });
            }
            // `RETURNING` keeps no order: oldest first, as documented.
            out.sort_by_key(|d| d.seq);
            Ok(out)
        })
    }

    fn delivery_settle<'a>(
        &'a self,
        endpoint: &'a str,
        seq: i64,
        node: &'a str,
        how: Settle,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move {
            let (state, after, error) = match how {
                Settle::Delivered => ("delivered", 0.0, None),
                Settle::Retry { after, error } => ("pending", ms(after), Some(error)),
                Settle::Failed { error } => ("failed", 0.0, Some(error)),
            };
            let n = self
                .execute(SETTLE, &[&endpoint, &seq, &node, &state, &after, &error])
                .await?;
            Ok(n == 1)
        })
    }

    fn deliveries_failed(
        &self,
        limit: usize,
    ) -> BoxFut<'_, Result<Vec<FailedDelivery>, MetaError>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let got = self.query(FAILED, &[&limit]).await?;
            let mut out = Vec::with_capacity(got.len());
            for r in &got {
                let raw: String = r.try_get(4).map_err(db)?;
                out.push(FailedDelivery {
                    endpoint: r.try_get(0).map_err(db)?,
                    seq: r.try_get(1).map_err(db)?,
                    attempts: r.try_get::<_, i32>(2).map_err(db)?.max(0) as u32,
                    error: r.try_get(3).map_err(db)?,
                    event: body(&raw)?,
                });
            }
            Ok(out)
        })
    }

    fn deliveries_retry<'a>(
        &'a self,
        event_id: Option<&'a str>,
    ) -> BoxFut<'a, Result<u64, MetaError>> {
        Box::pin(async move { self.execute(RETRY, &[&event_id]).await })
    }

    fn events_prune(&self, age: Duration) -> BoxFut<'_, Result<u64, MetaError>> {
        Box::pin(async move {
            let mut c = self.client().await?;
            let tx = c.transaction().await.map_err(db)?;
            let n = tx.execute(PRUNE, &[&ms(age)]).await.map_err(db)?;
            tx.execute(PRUNE_DELIVERIES, &[]).await.map_err(db)?;
            tx.commit().await.map_err(db)?;
            Ok(n)
        })
    }

    fn outbox_stats(&self) -> BoxFut<'_, Result<OutboxStats, MetaError>> {
        Box::pin(async move {
            let r = self.query(STATS, &[]).await?;
            let r = r.first().ok_or_else(|| MetaError::new("no statistics"))?;
            let n = |i: usize| -> Result<u64, MetaError> {
                Ok(r.try_get::<_, i64>(i).map_err(db)?.max(0) as u64)
            };
            Ok(OutboxStats {
                events: n(0)?,
                oldest_age_s: n(1)?,
                pending: n(2)?,
                failed: n(3)?,
                oldest_pending_s: n(4)?,
            })
        })
    }

    fn events_head(&self) -> BoxFut<'_, Result<i64, MetaError>> {
        Box::pin(async move {
            let r = self.query(HEAD, &[]).await?;
            let r = r.first().ok_or_else(|| MetaError::new("no head"))?;
            r.try_get::<_, i64>(0).map_err(db)
        })
    }
}
