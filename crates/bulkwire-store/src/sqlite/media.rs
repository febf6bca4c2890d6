//! Media rows ([`MediaStore`]).

use super::{lease_lost, now, SqliteMeta};
use crate::list::{self, Arg};
use crate::{BoxFut, ListQuery, MediaRecord, MediaStore, MetaError, NewMedia};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::collections::HashSet;

const COLUMNS: &str = "seq, id, field, filename, content_type, size, sha256, created";

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

pub(super) fn insert_media(
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
