//! Migrations: the shared steps ([`crate::schema`]) as PostgreSQL runs
//! them, under an advisory lock.

use super::PgError;
use crate::list;
use crate::schema::{Backfill, SCHEMA_VERSION, STEPS};
use deadpool_postgres::Client;
use tokio_postgres::IsolationLevel;

/// Rows read at once while filling in the listing's keys.
const FILL_BATCH: i64 = 1000;

/// The schema version this build writes (the same on every backend).
pub const PG_SCHEMA_VERSION: usize = SCHEMA_VERSION;

/// The advisory lock key that serialises migrations: "bulkwire" in ASCII.
const MIGRATION_LOCK: i64 = 0x6275_6c6b_7769_7265;

/// The schema version a database is at (0 before the first step).
pub(super) const SCHEMA: &str = "SELECT coalesce(max(version), 0) FROM schema_version";

/// Brings the schema up to date ([`STEPS`]); returns the version found.
/// Each step not run yet runs in order, with its backfill, and records
/// its version in `schema_version`, all in one transaction. READ
/// COMMITTED whatever the server's default: each statement after the lock
/// must see what the node that held it before committed.
pub(super) async fn migrate(c: &mut Client) -> Result<usize, PgError> {
    let tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let exists: bool = tx
        .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])
        .await?
        .try_get(0)?;
    if !exists {
        tx.batch_execute(
            "CREATE TABLE schema_version (
                version INTEGER PRIMARY KEY,
                applied TIMESTAMPTZ NOT NULL DEFAULT now()
            )",
        )
        .await?;
    }
    let found: i32 = tx.query_one(SCHEMA, &[]).await?.try_get(0)?;
    let found = usize::try_from(found).unwrap_or(0);
    for (i, step) in STEPS.iter().enumerate().skip(found) {
        tx.batch_execute(step.postgres).await?;
        if let Some(b) = step.backfill {
            backfill(&tx, b).await?;
        }
        let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(found)
}

/// Runs a step's [`Backfill`].
async fn backfill(tx: &tokio_postgres::Transaction<'_>, b: Backfill) -> Result<(), PgError> {
    match b {
        Backfill::ListKeys => fill_list_keys(tx).await,
    }
}

/// Computes the listing's keys of rows that have none (rows older than
/// the columns), a batch at a time in `seq` order.
async fn fill_list_keys(tx: &tokio_postgres::Transaction<'_>) -> Result<(), PgError> {
    let read = tx
        .prepare(
            "SELECT seq, filename, content_type FROM media
             WHERE seq > $1 AND type_key = '' ORDER BY seq LIMIT $2",
        )
        .await?;
    let set = tx
        .prepare("UPDATE media SET name_fold = $2, type_key = $3, type_top = $4 WHERE seq = $1")
        .await?;
    let mut after = 0i64;
    loop {
        let batch = tx.query(&read, &[&after, &FILL_BATCH]).await?;
        let Some(last) = batch.last() else {
            return Ok(());
        };
        after = last.try_get(0)?;
        for r in &batch {
            let seq: i64 = r.try_get(0)?;
            let name: Option<String> = r.try_get(1)?;
            let (key, top) = list::type_keys(r.try_get(2)?);
            let fold = name.as_deref().map(list::fold_name);
            tx.execute(&set, &[&seq, &fold, &key, &top]).await?;
        }
    }
}
