//! Media rows ([`MediaStore`]).

use super::error::db;
use super::leases::END_LEASE;
use super::{lease_lost, rows, Params, PgError, PgMeta};
use crate::list::{self, Arg};
use crate::{BoxFut, ListQuery, MediaRecord, MediaStore, MetaError, NewMedia};
use std::collections::HashSet;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

/// The advisory lock key that serialises media inserts ("bulkins" + 1).
pub(super) const INSERT_LOCK: i64 = 0x62_75_6c_6b_69_6e_73_01;

/// A media row's columns, `created` as whole seconds since the epoch
/// (truncated, as SQLite's store does).
macro_rules! media_columns {
    () => {
        "seq, id, field, filename, content_type, size, sha256, \
         floor(extract(epoch FROM created))::bigint"
    };
}

pub(super) const INSERT_MEDIA: &str = "INSERT INTO media
        (id, field, filename, content_type, size, sha256, name_fold, type_key, type_top)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     RETURNING seq, floor(extract(epoch FROM created))::bigint";
const GET_MEDIA: &str = concat!("SELECT ", media_columns!(), " FROM media WHERE id = $1");
const DELETE_MEDIA: &str = "DELETE FROM media WHERE id = $1";

/// A deletion's lease replaces any lease on the id, as SQLite's
/// `INSERT OR REPLACE` does.
const LEASE_DELETED: &str = "INSERT INTO pending (id, node) VALUES ($1, $2)
     ON CONFLICT (id) DO UPDATE SET node = excluded.node, handle = NULL, started = now()";

impl PgMeta {
    /// Ends each row's lease, then inserts the rows, in one transaction.
    async fn insert_all(
        &self,
        rows: Vec<NewMedia>,
        node: &str,
    ) -> Result<Vec<MediaRecord>, MetaError> {
        let sizes = rows
            .iter()
            .map(|m| i64::try_from(m.size).map_err(|_| too_big(m)))
            .collect::<Result<Vec<i64>, _>>()?;
        let mut c = self.client().await?;
        // Dropped before commit (an early return), the transaction rolls back.
        let tx = c.transaction().await.map_err(db)?;
        // Inserts commit one at a time, so that `seq` order is commit
        // order: otherwise seq 11 could commit before seq 10, and a reader
        // paging with `after=11` would never see 10. The lock is held
        // only for the few statements of this transaction.
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&INSERT_LOCK])
            .await
            .map_err(db)?;
        let end = tx.prepare_cached(END_LEASE).await.map_err(db)?;
        for m in &rows {
            if tx.execute(&end, &[&m.id, &node]).await.map_err(db)? != 1 {
                return Err(lease_lost(&m.id, node));
            }
        }
        let put = tx.prepare_cached(INSERT_MEDIA).await.map_err(db)?;
        let mut out = Vec::with_capacity(rows.len());
        for (m, size) in rows.into_iter().zip(sizes) {
            let r = insert_media(&tx, &put, &m, size).await.map_err(db)?;
            out.push(inserted(m, &r).map_err(db)?);
        }
        tx.commit().await.map_err(db)?;
        Ok(out)
    }

    /// Removes the row and leases the id, in one transaction.
    async fn delete_leased(&self, id: &str, node: &str) -> Result<bool, MetaError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(db)?;
        let del = tx.prepare_cached(DELETE_MEDIA).await.map_err(db)?;
        let gone = tx.execute(&del, &[&id]).await.map_err(db)? > 0;
        if gone {
            let lease = tx.prepare_cached(LEASE_DELETED).await.map_err(db)?;
            tx.execute(&lease, &[&id, &node]).await.map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(gone)
    }
}

/// Inserts one media row with its listing keys (`RETURNING seq, created`).
pub(super) async fn insert_media(
    tx: &tokio_postgres::Transaction<'_>,
    put: &tokio_postgres::Statement,
    m: &NewMedia,
    size: i64,
) -> Result<Row, PgError> {
    let (key, top) = list::type_keys(&m.content_type);
    let fold = m.filename.as_deref().map(list::fold_name);
    let p: Params<'_> = &[
        &m.id,
        &m.field,
        &m.filename,
        &m.content_type,
        &size,
        &m.sha256,
        &fold,
        &key,
        &top,
    ];
    tx.query_one(put, p).await
}

pub(super) fn too_big(m: &NewMedia) -> MetaError {
    MetaError::new(format!(
        "PostgreSQL: {}: size {} is beyond a BIGINT",
        m.id, m.size
    ))
}

fn record(r: &Row) -> Result<MediaRecord, PgError> {
    Ok(MediaRecord {
        seq: r.try_get(0)?,
        id: r.try_get(1)?,
        field: r.try_get(2)?,
        filename: r.try_get(3)?,
        content_type: r.try_get(4)?,
        size: r.try_get::<_, i64>(5)?.max(0) as u64,
        sha256: r.try_get(6)?,
        created: r.try_get(7)?,
    })
}

/// The record of a row just inserted (`RETURNING seq, created`).
pub(super) fn inserted(m: NewMedia, r: &Row) -> Result<MediaRecord, PgError> {
    Ok(MediaRecord {
        seq: r.try_get(0)?,
        created: r.try_get(1)?,
        id: m.id,
        field: m.field,
        filename: m.filename,
        content_type: m.content_type,
        size: m.size,
        sha256: m.sha256,
    })
}

impl MediaStore for PgMeta {
    fn insert<'a>(
        &'a self,
        rows: Vec<NewMedia>,
        node: &'a str,
    ) -> BoxFut<'a, Result<Vec<MediaRecord>, MetaError>> {
        Box::pin(self.insert_all(rows, node))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(GET_MEDIA, &[&id]).await?;
            row.map(|r| record(&r)).transpose().map_err(db)
        })
    }

    fn list(&self, q: ListQuery) -> BoxFut<'_, Result<Vec<MediaRecord>, MetaError>> {
        Box::pin(async move {
            let (tail, args) = list::where_order_limit(&q, '$');
            let sql = format!("SELECT {} FROM media {tail}", media_columns!());
            let params: Vec<&(dyn ToSql + Sync)> = args
                .iter()
                .map(|a| match a {
                    Arg::Int(i) => i as &(dyn ToSql + Sync),
                    Arg::Text(t) => t,
                })
                .collect();
            rows(self.query(&sql, &params).await?, record)
        })
    }

    fn delete<'a>(&'a self, id: &'a str, node: &'a str) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(self.delete_leased(id, node))
    }

    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>> {
        Box::pin(async move {
            let sql = "SELECT id FROM media UNION SELECT id FROM uploads";
            let ids = self.query(sql, &[]).await?;
            ids.iter().map(|r| r.try_get(0).map_err(db)).collect()
        })
    }
}
