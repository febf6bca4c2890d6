//! The schema and its migrations.

use crate::list;
use rusqlite::{params, Connection};

/// The schema, by version (`PRAGMA user_version`): each step runs once,
/// in order, in one transaction with the version bump. Version 1 is the
/// media table of the first release (created without a version, hence
/// `IF NOT EXISTS`).
pub(super) const MIGRATIONS: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS media (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        id           TEXT NOT NULL UNIQUE,
        field        TEXT,
        filename     TEXT,
        content_type TEXT NOT NULL,
        size         INTEGER NOT NULL,
        sha256       TEXT NOT NULL,
        created      INTEGER NOT NULL
    );",
    "CREATE TABLE tokens (
        id      TEXT PRIMARY KEY,
        digest  BLOB NOT NULL UNIQUE,
        label   TEXT NOT NULL,
        created INTEGER NOT NULL
    );
    CREATE TABLE users (
        name    TEXT PRIMARY KEY,
        hash    TEXT NOT NULL,
        created INTEGER NOT NULL
    );
    CREATE TABLE pending (
        id      TEXT PRIMARY KEY,
        node    TEXT NOT NULL,
        handle  TEXT,
        started INTEGER NOT NULL
    );
    CREATE INDEX pending_node ON pending (node);
    CREATE TABLE nodes (
        node      TEXT PRIMARY KEY,
        heartbeat INTEGER NOT NULL
    );",
    "CREATE TABLE uploads (
        id      TEXT PRIMARY KEY,
        owner   TEXT NOT NULL,
        expires INTEGER NOT NULL,
        gen     INTEGER NOT NULL,
        open    INTEGER NOT NULL,
        state   TEXT NOT NULL
    );
    CREATE INDEX uploads_open_owner ON uploads (owner) WHERE open = 1;
    CREATE INDEX uploads_expires ON uploads (expires);",
    "CREATE TABLE secrets (
        name    TEXT PRIMARY KEY,
        value   BLOB NOT NULL,
        created INTEGER NOT NULL
    );",
    // The listing's keys (`list.rs`), filled in Rust: for the rows of
    // before, by `fill_list_keys` in the same transaction.
    "ALTER TABLE media ADD COLUMN name_fold TEXT;
    ALTER TABLE media ADD COLUMN type_key TEXT NOT NULL DEFAULT '';
    ALTER TABLE media ADD COLUMN type_top TEXT NOT NULL DEFAULT '';
    CREATE INDEX IF NOT EXISTS media_type_top ON media (type_top, seq);",
];

/// The version whose step added the listing's keys.
const LIST_KEYS: usize = 5;

/// Rows read at once while filling in the listing's keys.
const FILL_BATCH: i64 = 1000;

/// The schema version this build writes.
pub(super) const SCHEMA_VERSION: usize = MIGRATIONS.len();

pub(super) fn migrate(c: &mut Connection) -> rusqlite::Result<usize> {
    let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let at: usize = tx.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    for step in MIGRATIONS.iter().skip(at) {
        tx.execute_batch(step)?;
    }
    if at < LIST_KEYS {
        fill_list_keys(&tx)?;
    }
    if at < SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION as i64)?;
    }
    tx.commit()?;
    Ok(at)
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
