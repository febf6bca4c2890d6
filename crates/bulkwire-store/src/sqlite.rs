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

use super::list::{self, Arg};
use super::{
    token_id, BoxFut, CredentialStore, LeaseStore, ListQuery, MediaRecord, MediaStore, MetaCore,
    MetaError, NewMedia, Pending, Token, UploadRow, UploadStore, UserInfo, UserSet,
};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::collections::HashSet;
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

/// The schema, by version (`PRAGMA user_version`): each step runs once,
/// in order, in one transaction with the version bump. Version 1 is the
/// media table of the first release (created without a version, hence
/// `IF NOT EXISTS`).
const MIGRATIONS: &[&str] = &[
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
pub const SCHEMA_VERSION: usize = MIGRATIONS.len();

fn migrate(c: &mut Connection) -> rusqlite::Result<usize> {
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

const COLUMNS: &str = "seq, id, field, filename, content_type, size, sha256, created";

/// The insert found the upload's lease gone or taken over by a janitor.
fn lease_lost(id: &str) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(
        format!("the lease on upload {id} was lost (taken over by a janitor)").into(),
    )
}

/// SQLite's "database or disk is full" (`SQLITE_FULL`: ENOSPC, a quota,
/// or `max_page_count`) is the store being out of room.
fn err(e: rusqlite::Error) -> MetaError {
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

fn record(r: &Row<'_>) -> rusqlite::Result<MediaRecord> {
    Ok(MediaRecord {
        seq: r.get(0)?,
        id: r.get(1)?,
        field: r.get(2)?,
        filename: r.get(3)?,
        content_type: r.get(4)?,
        size: r.get::<_, i64>(5)? as u64,
        sha256: r.get(6)?,
        created: r.get(7)?,
    })
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn insert_all(
    c: &mut Connection,
    rows: Vec<NewMedia>,
    node: &str,
) -> rusqlite::Result<Vec<MediaRecord>> {
    let tx = c.transaction()?;
    {
        let mut end = tx.prepare_cached("DELETE FROM pending WHERE id = ?1 AND node = ?2")?;
        for m in &rows {
            if end.execute(params![m.id, node])? != 1 {
                return Err(lease_lost(&m.id));
            }
        }
    }
    let created = now();
    let out = rows
        .into_iter()
        .map(|m| insert_media(&tx, m, created))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    tx.commit()?;
    Ok(out)
}

fn insert_media(
    tx: &rusqlite::Transaction<'_>,
    m: NewMedia,
    created: i64,
) -> rusqlite::Result<MediaRecord> {
    let (type_key, type_top) = list::type_keys(&m.content_type);
    tx.prepare_cached(
        "INSERT INTO media (id, field, filename, content_type, size, sha256, created,
                            name_fold, type_key, type_top)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        m.id,
        m.field,
        m.filename,
        m.content_type,
        m.size as i64,
        m.sha256,
        created,
        m.filename.as_deref().map(list::fold_name),
        type_key,
        type_top,
    ])?;
    Ok(MediaRecord {
        seq: tx.last_insert_rowid(),
        id: m.id,
        field: m.field,
        filename: m.filename,
        content_type: m.content_type,
        size: m.size,
        sha256: m.sha256,
        created,
    })
}

const UPLOAD_COLUMNS: &str = "id, owner, expires, gen, open, state";

fn upload_row(r: &Row<'_>) -> rusqlite::Result<UploadRow> {
    Ok(UploadRow {
        id: r.get(0)?,
        owner: r.get(1)?,
        expires: r.get(2)?,
        gen: r.get(3)?,
        open: r.get(4)?,
        state: r.get(5)?,
    })
}

/// A fenced save, and the media row in the same transaction.
fn save_upload(
    c: &mut Connection,
    row: &UploadRow,
    media: Option<NewMedia>,
) -> rusqlite::Result<Option<Option<MediaRecord>>> {
    let tx = c.transaction()?;
    let n = tx
        .prepare_cached(
            "UPDATE uploads SET state = ?3, expires = ?4, open = ?5 WHERE id = ?1 AND gen = ?2",
        )?
        .execute(params![row.id, row.gen, row.state, row.expires, row.open])?;
    if n != 1 {
        return Ok(None);
    }
    let rec = media.map(|m| insert_media(&tx, m, now())).transpose()?;
    tx.commit()?;
    Ok(Some(rec))
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

impl MediaStore for SqliteMeta {
    fn insert<'a>(
        &'a self,
        rows: Vec<NewMedia>,
        node: &'a str,
    ) -> BoxFut<'a, Result<Vec<MediaRecord>, MetaError>> {
        let writes = self.writes.clone();
        let node = node.to_string();
        self.with(move |c| {
            let r = insert_all(c, rows, &node)?;
            writes.add(r.len() as u64);
            Ok(r)
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        let id = id.to_string();
        self.with(move |c| {
            let sql = format!("SELECT {COLUMNS} FROM media WHERE id = ?1");
            c.prepare_cached(&sql)?.query_row([id], record).optional()
        })
    }

    fn list(&self, q: ListQuery) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>> {
        self.with(move |c| {
            let (tail, args) = list::where_order_limit(&q, '?');
            let sql = format!("SELECT {COLUMNS} FROM media {tail}");
            let args = args.into_iter().map(|a| match a {
                Arg::Int(i) => rusqlite::types::Value::Integer(i),
                Arg::Text(t) => rusqlite::types::Value::Text(t),
            });
            let mut st = c.prepare_cached(&sql)?;
            let rows = st.query_map(rusqlite::params_from_iter(args), record)?;
            rows.collect()
        })
    }

    fn delete<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        let (id, node) = (id.to_string(), node.to_string());
        let writes = self.writes.clone();
        self.with(move |c| {
            let tx = c.transaction()?;
            let n = tx
                .prepare_cached("DELETE FROM media WHERE id = ?1")?
                .execute([&id])?;
            if n > 0 {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO pending (id, node, handle, started) VALUES (?1, ?2, NULL, ?3)",
                )?
                .execute(params![id, node, now()])?;
            }
            tx.commit()?;
            writes.add(n as u64);
            Ok(n > 0)
        })
    }

    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>> {
        self.with(|c| {
            let mut st = c.prepare("SELECT id FROM media UNION SELECT id FROM uploads")?;
            let ids = st.query_map([], |r| r.get::<_, String>(0))?;
            ids.collect()
        })
    }
}

impl CredentialStore for SqliteMeta {
    fn token_add(&self, digest: [u8; 32], label: String) -> BoxFut<'_, Result<Token, MetaError>> {
        let writes = self.writes.clone();
        self.with(move |c| {
            let t = Token {
                id: token_id(&digest),
                label,
                created: now(),
            };
            c.prepare_cached(
                "INSERT INTO tokens (id, digest, label, created) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![t.id, &digest[..], t.label, t.created])?;
            writes.add(1);
            Ok(t)
        })
    }

    fn token_known(&self, digest: [u8; 32]) -> BoxFut<'_, Result<bool, MetaError>> {
        self.with(move |c| {
            c.prepare_cached("SELECT 1 FROM tokens WHERE digest = ?1")?
                .exists([&digest[..]])
        })
    }

    fn tokens(&self) -> BoxFut<'_, Result<Vec<Token>, MetaError>> {
        self.with(|c| {
            let mut st = c.prepare("SELECT id, label, created FROM tokens ORDER BY created, id")?;
            let rows = st.query_map([], |r| {
                Ok(Token {
                    id: r.get(0)?,
                    label: r.get(1)?,
                    created: r.get(2)?,
                })
            })?;
            rows.collect()
        })
    }

    fn token_revoke<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        let id = id.to_string();
        self.with(move |c| Ok(c.execute("DELETE FROM tokens WHERE id = ?1", [id])? > 0))
    }

    fn user_set<'a>(
        &'a self,
        name: &'a str,
        hash: &'a str,
        mode: UserSet,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let (name, hash) = (name.to_string(), hash.to_string());
        self.with(move |c| {
            let n = match mode {
                UserSet::Create => c.execute(
                    "INSERT INTO users (name, hash, created) VALUES (?1, ?2, ?3)
                     ON CONFLICT (name) DO NOTHING",
                    params![name, hash, now()],
                )?,
                UserSet::Update => c.execute(
                    "UPDATE users SET hash = ?2 WHERE name = ?1",
                    params![name, hash],
                )?,
                UserSet::Upsert => c.execute(
                    "INSERT INTO users (name, hash, created) VALUES (?1, ?2, ?3)
                     ON CONFLICT (name) DO UPDATE SET hash = excluded.hash",
                    params![name, hash, now()],
                )?,
            };
            Ok(n > 0)
        })
    }

    fn user_hash<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<Option<String>, MetaError>> {
        let name = name.to_string();
        self.with(move |c| {
            c.prepare_cached("SELECT hash FROM users WHERE name = ?1")?
                .query_row([name], |r| r.get(0))
                .optional()
        })
    }

    fn user_remove<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        let name = name.to_string();
        self.with(move |c| Ok(c.execute("DELETE FROM users WHERE name = ?1", [name])? > 0))
    }

    fn users(&self) -> BoxFut<'_, Result<Vec<UserInfo>, MetaError>> {
        self.with(|c| {
            let mut st = c.prepare("SELECT name, created FROM users ORDER BY name")?;
            let rows = st.query_map([], |r| {
                Ok(UserInfo {
                    name: r.get(0)?,
                    created: r.get(1)?,
                })
            })?;
            rows.collect()
        })
    }

    fn secret<'a>(
        &'a self,
        name: &'a str,
        fresh: Vec<u8>,
    ) -> BoxFut<'a, Result<Vec<u8>, MetaError>> {
        let name = name.to_string();
        self.with(move |c| {
            c.prepare_cached(
                "INSERT OR IGNORE INTO secrets (name, value, created) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![name, fresh, now()])?;
            c.prepare_cached("SELECT value FROM secrets WHERE name = ?1")?
                .query_row([name], |r| r.get(0))
        })
    }

    fn secret_set<'a>(
        &'a self,
        name: &'a str,
        value: Vec<u8>,
    ) -> BoxFut<'a, Result<(), MetaError>> {
        let name = name.to_string();
        self.with(move |c| {
            c.prepare_cached(
                "INSERT INTO secrets (name, value, created) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value, created = excluded.created",
            )?
            .execute(params![name, value, now()])?;
            Ok(())
        })
    }
}

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

impl UploadStore for SqliteMeta {
    fn upload_create<'a>(
        &'a self,
        row: UploadRow,
        max_open: usize,
        lease: Option<&'a str>,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let lease = lease.map(str::to_string);
        self.with(move |c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            if let Some(node) = &lease {
                let n = tx
                    .prepare_cached("DELETE FROM pending WHERE id = ?1 AND node = ?2")?
                    .execute(params![row.id, node])?;
                if n != 1 {
                    return Err(lease_lost(&row.id));
                }
            }
            let open: i64 = tx
                .prepare_cached("SELECT count(*) FROM uploads WHERE owner = ?1 AND open = 1")?
                .query_row([&row.owner], |r| r.get(0))?;
            if open as usize >= max_open {
                return Ok(false);
            }
            tx.prepare_cached(
                "INSERT INTO uploads (id, owner, expires, gen, open, state)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                row.id,
                row.owner,
                row.expires,
                row.gen,
                row.open,
                row.state
            ])?;
            tx.commit()?;
            Ok(true)
        })
    }

    fn upload_get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        let id = id.to_string();
        self.with(move |c| {
            let sql = format!("SELECT {UPLOAD_COLUMNS} FROM uploads WHERE id = ?1");
            c.prepare_cached(&sql)?
                .query_row([id], upload_row)
                .optional()
        })
    }

    fn upload_claim<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        let id = id.to_string();
        // Without an fsync: only this process uses the file, and after a
        // crash no writer is left for a generation to fence out (a lost
        // bump is harmless); the save that follows is durable.
        self.relaxed(move |c| {
            let sql = format!(
                "UPDATE uploads SET gen = gen + 1 WHERE id = ?1 RETURNING {UPLOAD_COLUMNS}"
            );
            c.prepare_cached(&sql)?
                .query_row([id], upload_row)
                .optional()
        })
    }

    fn upload_claim_expired<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        let id = id.to_string();
        self.with(move |c| {
            let sql = format!(
                "UPDATE uploads SET gen = gen + 1 WHERE id = ?1 AND expires < ?2
                 RETURNING {UPLOAD_COLUMNS}"
            );
            c.prepare_cached(&sql)?
                .query_row(params![id, now()], upload_row)
                .optional()
        })
    }

    fn upload_save<'a>(
        &'a self,
        row: &'a UploadRow,
        media: Option<NewMedia>,
    ) -> BoxFut<'a, Result<Option<Option<MediaRecord>>, MetaError>> {
        let row = row.clone();
        let writes = self.writes.clone();
        self.with(move |c| {
            let r = save_upload(c, &row, media)?;
            writes.add(1);
            Ok(r)
        })
    }

    fn upload_remove<'a>(&'a self, id: &'a str, gen: i64) -> BoxFut<'a, Result<bool, MetaError>> {
        let id = id.to_string();
        self.with(move |c| {
            let n = c
                .prepare_cached("DELETE FROM uploads WHERE id = ?1 AND gen = ?2")?
                .execute(params![id, gen])?;
            Ok(n == 1)
        })
    }

    fn upload_expired(&self, limit: usize) -> BoxFut<'_, Result<Vec<UploadRow>, MetaError>> {
        self.with(move |c| {
            let sql = format!(
                "SELECT {UPLOAD_COLUMNS} FROM uploads WHERE expires < ?1 ORDER BY expires LIMIT ?2"
            );
            let mut st = c.prepare_cached(&sql)?;
            let rows = st.query_map(params![now(), limit as i64], upload_row)?;
            rows.collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(id: &str) -> NewMedia {
        NewMedia {
            id: id.into(),
            field: Some("f".into()),
            filename: None,
            content_type: "text/plain".into(),
            size: 3,
            sha256: "00".into(),
        }
    }

    /// Leases each row's id to node "n", then inserts.
    async fn put(m: &SqliteMeta, rows: Vec<NewMedia>) -> Result<Vec<MediaRecord>, MetaError> {
        for r in &rows {
            m.lease(&r.id, "n").await?;
        }
        m.insert(rows, "n").await
    }

    #[tokio::test]
    async fn conformance() {
        let d = tempfile::tempdir().unwrap();
        let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
        crate::conformance::meta_store(Arc::new(m)).await;
    }

    #[tokio::test]
    async fn migrations_run_once_and_a_newer_schema_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("m.sqlite");
        // A database of the first release: the media table, no version.
        let c = Connection::open(&path).unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.execute("INSERT INTO media (id, field, filename, content_type, size, sha256, created) VALUES ('old', NULL, NULL, 't', 1, 'x', 0)", []).unwrap();
        c.execute("INSERT INTO media (id, field, filename, content_type, size, sha256, created) VALUES ('named', NULL, 'ÉCLAIR.PNG', 'Image/PNG', 1, 'x', 0)", []).unwrap();
        drop(c);
        let m = SqliteMeta::open(&path).unwrap();
        assert!(m.get("old").await.unwrap().is_some(), "rows survive");
        // Rows of before are found by name and type like new ones.
        let q = ListQuery {
            name: Some("éclair".into()),
            media_type: crate::TypeFilter::parse("image/png"),
            ..ListQuery::new(crate::Order::NewestFirst, 10)
        };
        let found = m.list(q).await.unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].id, "named");
        assert!(m
            .describe()
            .await
            .unwrap()
            .contains(&format!("schema version {SCHEMA_VERSION}")));
        drop(m);
        SqliteMeta::open(&path).unwrap();
        let c = Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
        drop(c);
        let e = SqliteMeta::open(&path)
            .err()
            .expect("a newer schema is refused");
        assert!(e.message.contains("newer"), "{e}");
    }

    #[tokio::test]
    async fn a_full_database_is_reported_as_full() {
        let d = tempfile::tempdir().unwrap();
        let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
        // SQLite answers SQLITE_FULL for a full disk and for a database at
        // its max_page_count alike; the latter can be had without a disk.
        m.with(|c| {
            let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            c.query_row(
                &format!("PRAGMA max_page_count = {}", pages + 2),
                [],
                |_| Ok(()),
            )
        })
        .await
        .unwrap();
        let mut e = None;
        for i in 0..10_000 {
            let rows = (0..50)
                .map(|j| new(&format!("{i}-{j}-{}", "x".repeat(100))))
                .collect();
            if let Err(err) = put(&m, rows).await {
                e = Some(err);
                break;
            }
        }
        let e = e.expect("the database filled up");
        assert!(e.full, "{e}");
        // Any other failure is not "full".
        let e = m.with(|c| c.execute("no sql", [])).await.unwrap_err();
        assert!(!e.full);
    }

    #[tokio::test]
    async fn insert_get_list_delete() {
        let d = tempfile::tempdir().unwrap();
        let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
        let r = put(&m, vec![new("a"), new("b"), new("c")]).await.unwrap();
        assert!(r[0].seq < r[1].seq && r[1].seq < r[2].seq);
        assert_eq!(m.get("b").await.unwrap().unwrap(), r[1]);
        assert_eq!(m.get("zz").await.unwrap(), None);
        let oldest = ListQuery::new(crate::Order::OldestFirst, 2);
        let page = m.list(oldest.clone()).await.unwrap();
        assert_eq!(
            page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let page = m.list(oldest.after(page[1].seq)).await.unwrap();
        assert_eq!(
            page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["c"]
        );
        assert!(m.delete("a", "n").await.unwrap());
        assert!(!m.delete("a", "n").await.unwrap());
        assert_eq!(m.all_ids().await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn inserts_do_not_checkpoint_the_checkpointer_does() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("m.sqlite");
        let m = SqliteMeta::open(&path).unwrap();
        // Rows reach the database file only through a checkpoint.
        let db_len = || std::fs::metadata(&path).unwrap().len();
        let empty = db_len();
        // Well past SQLite's autocheckpoint (1,000 pages), in writes the
        // checkpointer does not count: the WAL only grows.
        for t in 0..6 {
            m.with(move |c| {
                let tx = c.transaction()?;
                for i in 0..1000 {
                    tx.execute(
                        "INSERT INTO media (id, field, filename, content_type, size, sha256, created)
                         VALUES (?1, NULL, NULL, 't/t', 1, ?2, 0)",
                        params![format!("bulk-{t}-{i}"), "x".repeat(1000)],
                    )?;
                }
                tx.commit()
            })
            .await
            .unwrap();
        }
        let wal = std::fs::metadata(d.path().join("m.sqlite-wal"))
            .unwrap()
            .len();
        assert!(wal > 1000 * 4096, "the WAL holds {wal} bytes");
        assert_eq!(db_len(), empty, "SQLite checkpointed by itself");
        // Counted writes below the threshold do not checkpoint either.
        for _ in 0..(CHECKPOINT_WRITES - 1) {
            m.heartbeat("n").await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(db_len(), empty, "checkpointed before the threshold");
        // The write that reaches the threshold wakes the checkpointer.
        put(&m, vec![new("last")]).await.unwrap();
        let t = std::time::Instant::now();
        while db_len() == empty {
            assert!(t.elapsed() < Duration::from_secs(5), "no checkpoint");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(m.all_ids().await.unwrap().len(), 6001);
    }

    #[tokio::test]
    async fn insert_is_all_or_nothing() {
        let d = tempfile::tempdir().unwrap();
        let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
        put(&m, vec![new("a")]).await.unwrap();
        // The second row clashes on the unique id: neither row may stay.
        assert!(put(&m, vec![new("b"), new("a")]).await.is_err());
        assert_eq!(m.get("b").await.unwrap(), None);
        assert_eq!(m.all_ids().await.unwrap().len(), 1);
    }
}
