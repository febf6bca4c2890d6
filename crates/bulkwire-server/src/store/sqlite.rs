//! Metadata in SQLite (rusqlite, bundled SQLite), one connection run on
//! tokio's blocking pool.
//!
//! WAL journal with `synchronous=FULL`: a committed row survives a crash
//! and power loss, and readers do not wait for the writer. Statements are
//! cached by rusqlite, so a request does no SQL parsing after the first.

use super::{BoxFut, MediaRecord, MetaError, MetaStore, NewMedia};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// SQLite metadata store.
#[derive(Clone)]
pub struct SqliteMeta {
    conn: Arc<Mutex<Connection>>,
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

fn err(e: rusqlite::Error) -> MetaError {
    MetaError(e.to_string())
}

impl SqliteMeta {
    /// Opens (creating if needed) the database file at `path`.
    pub fn open(path: &Path) -> Result<SqliteMeta, MetaError> {
        let conn = Connection::open(path).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(SqliteMeta {
            conn: Arc::new(Mutex::new(conn)),
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
            .map_err(|e| MetaError(format!("blocking task failed: {e}")))?
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
        self.with(move |c| insert_all(c, rows))
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
        self.with(move |c| {
            Ok(c.prepare_cached("DELETE FROM media WHERE id = ?1")?
                .execute([id])?
                > 0)
        })
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
