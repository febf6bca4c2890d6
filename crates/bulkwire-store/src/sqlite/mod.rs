//! Metadata in SQLite (rusqlite, bundled SQLite), one connection run on
//! tokio's blocking pool.
//!
//! WAL journal with `synchronous=FULL`: a committed row survives a crash
//! and power loss, and readers do not wait for the writer. Statements are
//! cached by rusqlite, so a request does no SQL parsing after the first.
//!
//! Checkpoints (copying the WAL back into the database) run on a thread of
//! their own, not inside whichever insert crosses SQLite's autocheckpoint
//! threshold: a checkpoint sizes the database file (`fstat`) and writes
//! and syncs many pages, none of which belongs on the request path
//! (DESIGN.md "no `stat` on the request path").
//!
//! This module holds the connection, its checkpointer and [`MetaCore`];
//! each concern's trait is implemented, with its statements, in a module
//! of its own: `media`, `credentials`, `leases`, `uploads`; `schema` runs
//! the migrations. Every statement runs through [`SqliteMeta::with`] (or
//! [`SqliteMeta::relaxed`], for rows this store never needs after a crash).

mod credentials;
mod events;
mod leases;
mod media;
mod schema;
#[cfg(test)]
mod tests;
mod uploads;

use crate::schema::SCHEMA_VERSION;
use crate::{BoxFut, MetaCore, MetaError};
use rusqlite::Connection;
use schema::migrate;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

/// Prepared statements kept per connection.
const STATEMENTS: usize = 64;

/// Writes after which the checkpointer runs at once (SQLite's own
/// autocheckpoint, 1,000 WAL pages, comes every ~330 single-row inserts).
/// An upload writes twice (its lease, then its row with the lease's end),
/// about eight WAL pages in all: 250 writes keep the WAL near 1,000 pages
/// (4 MiB), well inside the 4,096 frames the WAL index's first 32 KiB
/// shared-memory region covers, whose successor is mapped after an `fstat`
/// by whichever request's write needs it.
const CHECKPOINT_WRITES: u64 = 250;
/// Longest the checkpointer leaves fewer writes unchecked.
const CHECKPOINT_IDLE: Duration = Duration::from_secs(10);

/// SQLite metadata store.
#[derive(Clone)]
pub struct SqliteMeta {
    conn: Arc<Mutex<Connection>>,
    path: std::path::PathBuf,
    writes: Arc<Writes>,
}

/// Writes since the last checkpoint, and the checkpointer's wake-up.
#[derive(Default)]
struct Writes {
    count: Mutex<u64>,
    wake: Condvar,
}

impl Writes {
    fn add(&self, n: u64) {
        let mut c = self.count.lock().unwrap_or_else(|p| p.into_inner());
        *c += n;
        if *c >= CHECKPOINT_WRITES {
            self.wake.notify_one();
        }
    }

    /// Waits for enough writes, or the idle time; takes the count.
    fn wait(&self) -> u64 {
        let c = self.count.lock().unwrap_or_else(|p| p.into_inner());
        let (mut c, _) = self
            .wake
            .wait_timeout_while(c, CHECKPOINT_IDLE, |n| *n < CHECKPOINT_WRITES)
            .unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *c)
    }
}

/// The checkpointer thread: a passive checkpoint after each batch of
/// writes; it ends once the store is dropped.
fn checkpointer(conn: Weak<Mutex<Connection>>, writes: Arc<Writes>) {
    loop {
        let n = writes.wait();
        let Some(conn) = conn.upgrade() else {
            return;
        };
        if n > 0 {
            let c = conn.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = c.execute_batch("PRAGMA wal_checkpoint(PASSIVE)") {
                tracing::warn!("sqlite checkpoint: {e}");
            }
        }
    }
}

/// The insert found the upload's lease gone or taken over by a janitor.
/// A quota refusal carried out of a transaction as a rusqlite error (the
/// transaction rolls back as it is dropped), turned back by [`err`].
#[derive(Debug)]
struct OverQuotaErr(crate::OverQuota);

impl std::fmt::Display for OverQuotaErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "over {} = {}", self.0.limit, self.0.value)
    }
}

impl std::error::Error for OverQuotaErr {}

/// Counts `add` in `owner`'s usage; an error (the transaction is then
/// rolled back) when that takes it past `quota`.
fn count_usage(
    tx: &rusqlite::Transaction<'_>,
    owner: &str,
    add: crate::Usage,
    quota: crate::Quota,
) -> rusqlite::Result<()> {
    let (bytes, items): (i64, i64) = tx
        .prepare_cached(
            "INSERT INTO usage (owner, bytes, items) VALUES (?1, ?2, ?3)
             ON CONFLICT (owner) DO UPDATE
                SET bytes = bytes + excluded.bytes, items = items + excluded.items
             RETURNING bytes, items",
        )?
        .query_row(
            rusqlite::params![owner, add.bytes as i64, add.items as i64],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
    let after = crate::Usage {
        bytes: bytes.max(0) as u64,
        items: items.max(0) as u64,
    };
    match quota.exceeded(after, add) {
        Some(o) => Err(rusqlite::Error::ToSqlConversionFailure(Box::new(
            OverQuotaErr(o),
        ))),
        None => Ok(()),
    }
}

fn lease_lost(id: &str) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(
        format!("the lease on upload {id} was lost (taken over by a janitor)").into(),
    )
}

/// SQLite's "database or disk is full" (`SQLITE_FULL`: ENOSPC, a quota,
/// or `max_page_count`) is the store being out of room.
fn err(e: rusqlite::Error) -> MetaError {
    if let rusqlite::Error::ToSqlConversionFailure(b) = &e {
        if let Some(OverQuotaErr(o)) = b.downcast_ref::<OverQuotaErr>() {
            return MetaError::over_quota(*o);
        }
    }
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => MetaError::full(e.to_string()),
        _ => MetaError::new(e.to_string()),
    }
}

impl SqliteMeta {
    /// Opens (creating if needed) the database file at `path`.
    pub fn open(path: &Path) -> Result<SqliteMeta, MetaError> {
        let conn = Connection::open(path).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        // Every statement stays prepared: some thirty fixed ones and up to
        // twelve shapes of a listing (rusqlite keeps 16 by default).
        conn.set_prepared_statement_cache_capacity(STATEMENTS);
        let mut conn = conn;
        let at = migrate(&mut conn).map_err(err)?;
        if at > SCHEMA_VERSION {
            return Err(MetaError::new(format!(
                "{}: schema version {at} is newer than this build's {SCHEMA_VERSION}",
                path.display()
            )));
        }
        let conn = Arc::new(Mutex::new(conn));
        let writes = Arc::new(Writes::default());
        let (weak, w) = (Arc::downgrade(&conn), writes.clone());
        std::thread::Builder::new()
            .name("sqlite-ckpt".into())
            .spawn(move || checkpointer(weak, w))
            .map_err(|e| MetaError::new(format!("starting the checkpointer: {e}")))?;
        Ok(SqliteMeta {
            conn,
            path: path.to_path_buf(),
            writes,
        })
    }

    /// As [`SqliteMeta::with`], committing without an fsync
    /// (`synchronous=NORMAL` for these statements): for lease and heartbeat
    /// rows, which this store never needs after a crash (only one process
    /// uses the file, and its next start sweeps every leftover), so that an
    /// upload pays one fsync in SQLite (its row), not two. A later FULL
    /// commit makes them durable with it.
    fn relaxed<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFut<'static, Result<T, MetaError>> {
        let writes = self.writes.clone();
        self.with(move |c| {
            c.pragma_update(None, "synchronous", "NORMAL")?;
            let r = f(c);
            c.pragma_update(None, "synchronous", "FULL")?;
            // They grow the WAL like any write: counted, so that the
            // checkpointer keeps the WAL inside the WAL index's first
            // shared-memory region (a second one is mapped after an
            // `fstat`, on whichever request's write needs it).
            writes.add(1);
            r
        })
    }

    /// Runs `f` with the connection on the blocking pool.
    fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFut<'static, Result<T, MetaError>> {
        let conn = self.conn.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut c = conn.lock().unwrap_or_else(|p| p.into_inner());
                f(&mut c).map_err(err)
            })
            .await
            .map_err(|e| MetaError::new(format!("blocking task failed: {e}")))?
        })
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl MetaCore for SqliteMeta {
    fn ready(&self) -> BoxFut<'_, Result<(), MetaError>> {
        self.with(|c| c.query_row("SELECT 1", [], |_| Ok(())))
    }

    fn describe(&self) -> BoxFut<'_, Result<String, MetaError>> {
        let path = self.path.clone();
        self.with(move |c| {
            let v: String = c.query_row("SELECT sqlite_version()", [], |r| r.get(0))?;
            let s: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            Ok(format!(
                "SQLite {v} at {}, schema version {s}",
                path.display()
            ))
        })
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn single_process(&self) -> bool {
        // The file is opened by one process (DESIGN.md: the embedded store
        // is one node).
        true
    }
}
