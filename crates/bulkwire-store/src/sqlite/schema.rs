//! Migrations: the shared steps ([`crate::schema`]) as SQLite runs them.

use crate::list;
use crate::schema::{Backfill, SCHEMA_VERSION, STEPS};
use rusqlite::{params, Connection};

/// Rows read at once while filling in the listing's keys.
const FILL_BATCH: i64 = 1000;

/// Brings the schema up to date ([`STEPS`]); returns the version found
/// (`PRAGMA user_version`). The steps not run yet run in order, each
/// with its backfill, in one transaction with the version bump.
pub(super) fn migrate(c: &mut Connection) -> rusqlite::Result<usize> {
    let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let at: usize = tx.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    for step in STEPS.iter().skip(at) {
        tx.execute_batch(step.sqlite)?;
        if let Some(b) = step.backfill {
            backfill(&tx, b)?;
        }
    }
    if at < SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION as i64)?;
    }
    tx.commit()?;
    Ok(at)
}

/// Runs a step's [`Backfill`].
fn backfill(tx: &rusqlite::Transaction<'_>, b: Backfill) -> rusqlite::Result<()> {
    match b {
        Backfill::ListKeys => fill_list_keys(tx),
    }
}

/// Computes the listing's keys of rows that have none (rows older than
/// the columns), a batch at a time in `seq` order.
fn fill_list_keys(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let mut after = 0i64;
    loop {
        let batch: Vec<(i64, Option<String>, String)> = tx
            .prepare(
                "SELECT seq, filename, content_type FROM media
                 WHERE seq > ?1 AND type_key = '' ORDER BY seq LIMIT ?2",
            )?
            .query_map(params![after, FILL_BATCH], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let Some(last) = batch.last() else {
            return Ok(());
        };
        after = last.0;
        let mut set = tx.prepare(
            "UPDATE media SET name_fold = ?2, type_key = ?3, type_top = ?4 WHERE seq = ?1",
        )?;
        for (seq, name, ct) in &batch {
            let (key, top) = list::type_keys(ct);
            set.execute(params![seq, name.as_deref().map(list::fold_name), key, top])?;
        }
    }
}
