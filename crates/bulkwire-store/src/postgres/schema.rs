//! The schema and its migrations, under an advisory lock.

use super::PgError;
use crate::list;
use deadpool_postgres::Client;
use tokio_postgres::IsolationLevel;

/// The schema, by version (`schema_version`): each step runs once, in
/// order, in the migration transaction. The same steps as SQLite's, so
/// that a schema version means the same on both.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE media (
        seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id           TEXT NOT NULL UNIQUE,
        field        TEXT,
        filename     TEXT,
        content_type TEXT NOT NULL,
        size         BIGINT NOT NULL CHECK (size >= 0),
        sha256       TEXT NOT NULL,
        created      TIMESTAMPTZ NOT NULL DEFAULT now()
    );",
    "CREATE TABLE tokens (
        id      TEXT PRIMARY KEY,
        digest  BYTEA NOT NULL UNIQUE,
        label   TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE TABLE users (
        name    TEXT PRIMARY KEY,
        hash    TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE TABLE pending (
        id      TEXT PRIMARY KEY,
        node    TEXT NOT NULL,
        handle  TEXT,
        started TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE INDEX pending_node ON pending (node);
    CREATE TABLE nodes (
        node      TEXT PRIMARY KEY,
        heartbeat TIMESTAMPTZ NOT NULL
    );",
    "CREATE TABLE uploads (
        id      TEXT PRIMARY KEY,
        owner   TEXT NOT NULL,
        expires BIGINT NOT NULL,
        gen     BIGINT NOT NULL,
        open    BOOLEAN NOT NULL,
        state   TEXT NOT NULL
    );
    CREATE INDEX uploads_open_owner ON uploads (owner) WHERE open;
    CREATE INDEX uploads_expires ON uploads (expires);",
    "CREATE TABLE secrets (
        name    TEXT PRIMARY KEY,
        value   BYTEA NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );",
    // The listing's keys (`list.rs`), filled in Rust: for the rows of
    // before, by `fill_list_keys` in the same transaction.
    "ALTER TABLE media
        ADD COLUMN IF NOT EXISTS name_fold TEXT,
        ADD COLUMN IF NOT EXISTS type_key TEXT NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS type_top TEXT NOT NULL DEFAULT '';
    CREATE INDEX IF NOT EXISTS media_type_top ON media (type_top, seq);",
];

/// The version whose step added the listing's keys.
const LIST_KEYS: usize = 5;

/// Rows read at once while filling in the listing's keys.
const FILL_BATCH: i64 = 1000;

/// The schema version this build writes.
pub const PG_SCHEMA_VERSION: usize = MIGRATIONS.len();

/// The advisory lock key that serialises migrations: "bulkwire" in ASCII.
const MIGRATION_LOCK: i64 = 0x6275_6c6b_7769_7265;
pub(super) const SCHEMA: &str = "SELECT coalesce(max(version), 0) FROM schema_version";

/// Brings the schema up to date; returns the version found. READ
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
    for (i, step) in MIGRATIONS.iter().enumerate().skip(found) {
        tx.batch_execute(step).await?;
        let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&version],
        )
        .await?;
    }
    if found < LIST_KEYS {
        fill_list_keys(&tx).await?;
    }
    tx.commit().await?;
    Ok(found)
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
