//! Upload leases and node heartbeats ([`LeaseStore`]).

use super::{lease_lost, now, SqliteMeta};
use crate::{BoxFut, LeaseStore, MetaError, Pending};
use rusqlite::params;
use std::time::Duration;

impl LeaseStore for SqliteMeta {
    fn lease<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        let (id, node) = (id.to_string(), node.to_string());
        self.relaxed(move |c| {
            c.prepare_cached(
                "INSERT INTO pending (id, node, handle, started) VALUES (?1, ?2, NULL, ?3)",
            )?
            .execute(params![id, node, now()])?;
            Ok(())
        })
    }

    fn lease_note<'a>(
        &'a self,
        id: &'a str,
        node: &'a str,
        handle: &'a str,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        let (id, node, handle) = (id.to_string(), node.to_string(), handle.to_string());
        self.relaxed(move |c| {
            let n = c
                .prepare_cached("UPDATE pending SET handle = ?3 WHERE id = ?1 AND node = ?2")?
                .execute(params![id, node, handle])?;
            // A lease that is gone (taken over) cannot record the handle:
            // the writer must abort rather than send parts nobody tracks.
            match n {
                1 => Ok(()),
                _ => Err(lease_lost(&id)),
            }
        })
    }

    fn lease_move<'a>(
        &'a self,
        id: &'a str,
        from: &'a str,
        to: &'a str,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let (id, from, to) = (id.to_string(), from.to_string(), to.to_string());
        self.relaxed(move |c| {
            let n = c
                .prepare_cached("UPDATE pending SET node = ?3 WHERE id = ?1 AND node = ?2")?
                .execute(params![id, from, to])?;
            Ok(n == 1)
        })
    }

    fn release<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        let (id, node) = (id.to_string(), node.to_string());
        self.relaxed(move |c| {
            c.prepare_cached("DELETE FROM pending WHERE id = ?1 AND node = ?2")?
                .execute(params![id, node])?;
            Ok(())
        })
    }

    fn heartbeat<'a>(&'a self, node: &'a str) -> BoxFut<'a, Result<(), MetaError>> {
        let node = node.to_string();
        self.relaxed(move |c| {
            c.prepare_cached(
                "INSERT INTO nodes (node, heartbeat) VALUES (?1, ?2)
                 ON CONFLICT (node) DO UPDATE SET heartbeat = excluded.heartbeat",
            )?
            .execute(params![node, now()])?;
            Ok(())
        })
    }

    fn claim_expired<'a>(
        &'a self,
        node: &'a str,
        expiry: Duration,
        limit: usize,
    ) -> BoxFut<'a, Result<Vec<Pending>, MetaError>> {
        let node = node.to_string();
        let cutoff = now() - expiry.as_secs() as i64;
        // One connection, one transaction: nothing else can claim between
        // the select and the update.
        self.with(move |c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let claimed: Vec<Pending> = {
                let mut st = tx.prepare_cached(
                    "SELECT p.id, p.handle FROM pending p LEFT JOIN nodes n ON n.node = p.node
                     WHERE p.node = ?1 OR n.heartbeat IS NULL OR n.heartbeat < ?2
                     ORDER BY p.started LIMIT ?3",
                )?;
                let rows = st.query_map(params![node, cutoff, limit as i64], |r| {
                    Ok(Pending {
                        id: r.get(0)?,
                        handle: r.get(1)?,
                    })
                })?;
                rows.collect::<rusqlite::Result<_>>()?
            };
            {
                let mut up = tx.prepare_cached("UPDATE pending SET node = ?2 WHERE id = ?1")?;
                for p in &claimed {
                    up.execute(params![p.id, node])?;
                }
            }
            tx.commit()?;
            Ok(claimed)
        })
    }
}
