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

use super::{BoxFut, MediaRecord, MetaError, MetaStore, NewMedia};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

/// Writes after which the checkpointer runs at once (SQLite's own
/// autocheckpoint, 1,000 WAL pages, comes every ~330 single-row inserts):
/// the WAL stays under ~12 MiB.
const CHECKPOINT_WRITES: u64 = 1000;
/// Longest the checkpointer leaves fewer writes unchecked.
const CHECKPOINT_IDLE: Duration = Duration::from_secs(10);

/// SQLite metadata store.
#[derive(Clone)]
pub struct SqliteMeta {
    conn: Arc<Mutex<Connection>>,
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

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS media (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    field        TEXT,
    filename     TEXT,
    content_type TEXT NOT NULL,
    size         INTEGER NOT NULL,
    sha256       TEXT NOT NULL,
    created      INTEGER NOT NULL
);";

const COLUMNS: &str = "seq, id, field, filename, content_type, size, sha256, created";

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
        conn.execute_batch(SCHEMA).map_err(err)?;
        let conn = Arc::new(Mutex::new(conn));
        let writes = Arc::new(Writes::default());
        let (weak, w) = (Arc::downgrade(&conn), writes.clone());
        std::thread::Builder::new()
            .name("sqlite-ckpt".into())
            .spawn(move || checkpointer(weak, w))
            .map_err(|e| MetaError::new(format!("starting the checkpointer: {e}")))?;
        Ok(SqliteMeta { conn, writes })
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

fn insert_all(c: &mut Connection, rows: Vec<NewMedia>) -> rusqlite::Result<Vec<MediaRecord>> {
    let tx = c.transaction()?;
    let created = now();
    let mut out = Vec::with_capacity(rows.len());
    {
        let mut st = tx.prepare_cached(
            "INSERT INTO media (id, field, filename, content_type, size, sha256, created)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        for m in rows {
            st.execute(params![
                m.id,
                m.field,
                m.filename,
                m.content_type,
                m.size as i64,
                m.sha256,
                created
            ])?;
            out.push(MediaRecord {
                seq: tx.last_insert_rowid(),
                id: m.id,
                field: m.field,
                filename: m.filename,
                content_type: m.content_type,
                size: m.size,
                sha256: m.sha256,
                created,
            });
        }
    }
    tx.commit()?;
    Ok(out)
}

impl MetaStore for SqliteMeta {
    fn insert(&self, rows: Vec<NewMedia>) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>> {
        let writes = self.writes.clone();
        self.with(move |c| {
            let r = insert_all(c, rows)?;
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

    fn list(&self, after: i64, limit: usize) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>> {
        self.with(move |c| {
            let sql = format!("SELECT {COLUMNS} FROM media WHERE seq > ?1 ORDER BY seq LIMIT ?2");
            let mut st = c.prepare_cached(&sql)?;
            let rows = st.query_map(params![after, limit as i64], record)?;
            rows.collect()
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        let id = id.to_string();
        let writes = self.writes.clone();
        self.with(move |c| {
            let n = c
                .prepare_cached("DELETE FROM media WHERE id = ?1")?
                .execute([id])?;
            writes.add(n as u64);
            Ok(n > 0)
        })
    }

    fn ready(&self) -> BoxFut<'_, Result<(), MetaError>> {
        self.with(|c| c.query_row("SELECT 1", [], |_| Ok(())))
    }

    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>> {
        self.with(|c| {
            let mut st = c.prepare("SELECT id FROM media")?;
            let ids = st.query_map([], |r| r.get::<_, String>(0))?;
            ids.collect()
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
            if let Err(err) = m.insert(rows).await {
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
        let r = m.insert(vec![new("a"), new("b"), new("c")]).await.unwrap();
        assert!(r[0].seq < r[1].seq && r[1].seq < r[2].seq);
        assert_eq!(m.get("b").await.unwrap().unwrap(), r[1]);
        assert_eq!(m.get("zz").await.unwrap(), None);
        let page = m.list(0, 2).await.unwrap();
        assert_eq!(
            page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let page = m.list(page[1].seq, 2).await.unwrap();
        assert_eq!(
            page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["c"]
        );
        assert!(m.delete("a").await.unwrap());
        assert!(!m.delete("a").await.unwrap());
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
        // Well past SQLite's autocheckpoint (1,000 pages): the WAL only
        // grows while fewer than CHECKPOINT_WRITES writes came.
        for i in 0..(CHECKPOINT_WRITES - 1) {
            m.insert(vec![new(&format!("r{i}"))]).await.unwrap();
        }
        let wal = std::fs::metadata(d.path().join("m.sqlite-wal"))
            .unwrap()
            .len();
        assert!(wal > 1000 * 4096, "the WAL holds {wal} bytes");
        assert_eq!(db_len(), empty, "an insert checkpointed");
        // The write that reaches the threshold wakes the checkpointer.
        m.insert(vec![new("last")]).await.unwrap();
        let t = std::time::Instant::now();
        while db_len() == empty {
            assert!(t.elapsed() < Duration::from_secs(5), "no checkpoint");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(m.all_ids().await.unwrap().len() as u64, CHECKPOINT_WRITES);
    }

    #[tokio::test]
    async fn insert_is_all_or_nothing() {
        let d = tempfile::tempdir().unwrap();
        let m = SqliteMeta::open(&d.path().join("m.sqlite")).unwrap();
        m.insert(vec![new("a")]).await.unwrap();
        // The second row clashes on the unique id: neither row may stay.
        assert!(m.insert(vec![new("b"), new("a")]).await.is_err());
        assert_eq!(m.get("b").await.unwrap(), None);
        assert_eq!(m.all_ids().await.unwrap().len(), 1);
    }
}
