//! Upload leases and node heartbeats ([`LeaseStore`]).

use super::{lease_lost, rows, Params, PgMeta};
use crate::{BoxFut, LeaseStore, MetaError, Pending};
use std::time::Duration;

pub(super) const END_LEASE: &str = "DELETE FROM pending WHERE id = $1 AND node = $2";
const LEASE: &str = "INSERT INTO pending (id, node) VALUES ($1, $2)";
const LEASE_NOTE: &str = "UPDATE pending SET handle = $3 WHERE id = $1 AND node = $2";
const HEARTBEAT: &str = "INSERT INTO nodes (node, heartbeat) VALUES ($1, now())
     ON CONFLICT (node) DO UPDATE SET heartbeat = excluded.heartbeat";

/// The claimer's own leases (a retry) and those of nodes without a recent
/// heartbeat. Liveness is a `NOT IN` over `nodes`, not a join: when a row
/// was claimed by a concurrent janitor, READ COMMITTED re-checks the new
/// row version against the *same* joined `nodes` row, which no longer
/// matches its node, so a `LEFT JOIN ... IS NULL` test would pass and the
/// lease would be claimed twice. The subquery is evaluated against the new
/// node, whose own heartbeat keeps the lease where it is.
const CLAIM: &str = "UPDATE pending SET node = $1 WHERE id IN (
        SELECT id FROM pending
        WHERE node = $1 OR node NOT IN (
            SELECT node FROM nodes
            WHERE heartbeat >= now() - make_interval(secs => $2::float8))
        ORDER BY started
        LIMIT $3
        FOR UPDATE SKIP LOCKED)
     RETURNING id, handle";

impl LeaseStore for PgMeta {
    fn lease<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(LEASE, &[&id, &node]).await.map(drop) })
    }

    fn lease_note<'a>(
        &'a self,
        id: &'a str,
        node: &'a str,
        handle: &'a str,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move {
            let params: Params<'_> = &[&id, &node, &handle];
            match self.execute(LEASE_NOTE, params).await? {
                1 => Ok(()),
                _ => Err(lease_lost(id, node)),
            }
        })
    }

    fn lease_move<'a>(
        &'a self,
        id: &'a str,
        from: &'a str,
        to: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move {
            let sql = "UPDATE pending SET node = $3 WHERE id = $1 AND node = $2";
            Ok(self.execute(sql, &[&id, &from, &to]).await? == 1)
        })
    }

    fn release<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(END_LEASE, &[&id, &node]).await.map(drop) })
    }

    fn heartbeat<'a>(&'a self, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        Box::pin(async move { self.execute(HEARTBEAT, &[&node]).await.map(drop) })
    }

    fn claim_expired<'a>(
        &'a self,
        node: &'a str,
        expiry: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Pending>, MetaError>> {
        let (expiry, limit) = (
            expiry.as_secs_f64(),
            i64::try_from(limit).unwrap_or(i64::MAX),
        );
        Box::pin(async move {
            let params: Params<'_> = &[&node, &expiry, &limit];
            rows(self.query(CLAIM, params).await?, |r| {
                Ok(Pending {
                    id: r.try_get(0)?,
                    handle: r.try_get(1)?,
                })
            })
        })
    }
}
