//! Media rows ([`MediaStore`]).

use super::events::write_event;
use super::{count_usage, lease_lost, now, SqliteMeta};
use crate::list::{self, Arg};
use crate::{
    BoxFut, EventOf, ListQuery, MediaRecord, MediaStore, MetaError, NewMedia, Quota, Usage,
};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::collections::HashSet;

const COLUMNS: &str =
    "seq, id, field, filename, content_type, size, sha256, created, owner, width, height";

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
        owner: r.get(8)?,
        width: r.get(9)?,
        height: r.get(10)?,
    })
}

/// What rows of one owner add to its usage; their owner (all the same:
/// one request's, by one principal).
pub(super) fn adding(rows: &[NewMedia]) -> rusqlite::Result<(String, Usage)> {
    let owner = rows.first().map(|m| m.owner.clone()).unwrap_or_default();
    if rows.iter().any(|m| m.owner != owner) {
        return Err(rusqlite::Error::ToSqlConversionFailure(
            "the rows of one insert have one owner".into(),
        ));
    }
    let add = Usage {
        bytes: rows.iter().map(|m| m.size).sum(),
        items: rows.len() as u64,
    };
    Ok((owner, add))
}

fn insert_all(
    c: &mut Connection,
    rows: Vec<NewMedia>,
    node: &str,
    quota: Quota,
    event: Option<EventOf>,
) -> rusqlite::Result<Vec<MediaRecord>> {
    let (owner, add) = adding(&rows)?;
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
    if !out.is_empty() {
        count_usage(&tx, &owner, add, quota)?;
    }
    if let Some(f) = &event {
        for r in &out {
            write_event(&tx, &f(r))?;
        }
    }
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
                            name_fold, type_key, type_top, owner, width, height)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
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
        m.owner,
        m.width,
        m.height,
    ])?;
    Ok(MediaRecord {
        seq: tx.last_insert_rowid(),
        id: m.id,
        owner: m.owner,
        field: m.field,
        filename: m.filename,
        content_type: m.content_type,
        size: m.size,
        sha256: m.sha256,
        created,
        width: m.width,
        height: m.height,
    })
}

impl MediaStore for SqliteMeta {
    fn insert<'a>(
        &'a self,
        rows: Vec<NewMedia>,
        node: &'a str,
        quota: Quota,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Vec<MediaRecord>, MetaError>> {
        let writes = self.writes.clone();
        let node = node.to_string();
        self.with(move |c| {
            let r = insert_all(c, rows, &node, quota, event)?;
            writes.add(r.len() as u64);
            Ok(r)
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        let (id, owner) = (id.to_string(), owner.map(str::to_string));
        self.with(move |c| {
            let sql =
                format!("SELECT {COLUMNS} FROM media WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)");
            c.prepare_cached(&sql)?
                .query_row(params![id, owner], record)
                .optional()
        })
    }

    fn usage<'a>(&'a self, owner: &'a str) -> BoxFut<'a, Result<Usage, MetaError>> {
        let owner = owner.to_string();
        self.with(move |c| {
            let u = c
                .prepare_cached("SELECT bytes, items FROM usage WHERE owner = ?1")?
                .query_row([owner], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
                .optional()?;
            let (bytes, items) = u.unwrap_or((0, 0));
            Ok(Usage {
                bytes: bytes.max(0) as u64,
                items: items.max(0) as u64,
            })
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

    fn delete<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
        node: &'a str,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        let (id, owner, node) = (id.to_string(), owner.map(str::to_string), node.to_string());
        let writes = self.writes.clone();
        self.with(move |c| {
            let tx = c.transaction()?;
            let sql = format!(
                "DELETE FROM media WHERE id = ?1 AND (?2 IS NULL OR owner = ?2) RETURNING {COLUMNS}"
            );
            let gone = tx
                .prepare_cached(&sql)?
                .query_row(params![id, owner], record)
                .optional()?;
            if let Some(m) = &gone {
                tx.prepare_cached(
                    "UPDATE usage SET bytes = bytes - ?2, items = items - 1 WHERE owner = ?1",
                )?
                .execute(params![m.owner, m.size as i64])?;
                tx.prepare_cached("DELETE FROM uploads WHERE id = ?1 AND open = 0")?
                    .execute([&id])?;
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO pending (id, node, handle, started) VALUES (?1, ?2, NULL, ?3)",
                )?
                .execute(params![id, node, now()])?;
                if let Some(f) = &event {
                    write_event(&tx, &f(m))?;
                }
            }
            tx.commit()?;
            writes.add(gone.is_some() as u64);
            Ok(gone)
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
