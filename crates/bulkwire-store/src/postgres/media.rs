//! Media rows ([`MediaStore`]).

use super::error::db;
use super::events::{events_first, write_event};
use super::leases::END_LEASE;
use super::{lease_lost, rows, Params, PgError, PgMeta};
use crate::list::{self, Arg};
use crate::{
    BoxFut, EventOf, ListQuery, MediaRecord, MediaStore, MetaError, NewMedia, Quota, Usage,
};
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
         floor(extract(epoch FROM created))::bigint, owner, width, height"
    };
}

pub(super) const INSERT_MEDIA: &str = "INSERT INTO media
        (id, field, filename, content_type, size, sha256, name_fold, type_key, type_top, owner,
         width, height)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     RETURNING seq, floor(extract(epoch FROM created))::bigint";
const GET_MEDIA: &str = concat!(
    "SELECT ",
    media_columns!(),
    " FROM media WHERE id = $1 AND ($2::text IS NULL OR owner = $2)"
);
const DELETE_MEDIA: &str = concat!(
    "DELETE FROM media WHERE id = $1 AND ($2::text IS NULL OR owner = $2) RETURNING ",
    media_columns!()
);
/// Counts rows in their owner's usage; the row stays locked until the
/// transaction ends, so that two transactions for one owner (on any
/// nodes) add up one after the other and the quota check sees the sum.
const COUNT_USAGE: &str = "INSERT INTO usage (owner, bytes, items) VALUES ($1, $2, $3)
     ON CONFLICT (owner) DO UPDATE
        SET bytes = usage.bytes + excluded.bytes, items = usage.items + excluded.items
     RETURNING bytes, items";
const UNCOUNT_USAGE: &str =
    "UPDATE usage SET bytes = bytes - $2, items = items - 1 WHERE owner = $1";
const USAGE: &str = "SELECT bytes, items FROM usage WHERE owner = $1";
/// A finished resumable upload whose item is deleted goes with it.
const DELETE_FINISHED_UPLOAD: &str = "DELETE FROM uploads WHERE id = $1 AND NOT open";

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
        quota: Quota,
        event: Option<EventOf>,
    ) -> Result<Vec<MediaRecord>, MetaError> {
        let (owner, add) = adding(&rows)?;
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
        if !out.is_empty() {
            count_usage(&tx, &owner, add, quota).await?;
        }
        if let Some(f) = &event {
            for r in &out {
                write_event(&tx, &f(r)).await?;
            }
        }
        tx.commit().await.map_err(db)?;
        Ok(out)
    }

    /// Removes the row (with `owner`, only that owner's), takes it off its
    /// owner's usage, removes the finished upload it came from and leases
    /// the id, in one transaction.
    async fn delete_leased(
        &self,
        id: &str,
        owner: Option<&str>,
        node: &str,
        event: Option<EventOf>,
    ) -> Result<Option<MediaRecord>, MetaError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(db)?;
        if event.is_some() {
            events_first(&tx).await?;
        }
        let del = tx.prepare_cached(DELETE_MEDIA).await.map_err(db)?;
        let gone = tx.query_opt(&del, &[&id, &owner]).await.map_err(db)?;
        let gone = gone.map(|r| record(&r)).transpose().map_err(db)?;
        if let Some(m) = &gone {
            let size = i64::try_from(m.size).unwrap_or(i64::MAX);
            tx.execute(UNCOUNT_USAGE, &[&m.owner, &size])
                .await
                .map_err(db)?;
            tx.execute(DELETE_FINISHED_UPLOAD, &[&id])
                .await
                .map_err(db)?;
            let lease = tx.prepare_cached(LEASE_DELETED).await.map_err(db)?;
            tx.execute(&lease, &[&id, &node]).await.map_err(db)?;
            if let Some(f) = &event {
                write_event(&tx, &f(m)).await?;
            }
        }
        tx.commit().await.map_err(db)?;
        Ok(gone)
    }
}

/// What rows of one owner add to its usage; their owner (all the same:
/// one request's, by one principal).
pub(super) fn adding(rows: &[NewMedia]) -> Result<(String, Usage), MetaError> {
    let owner = rows.first().map(|m| m.owner.clone()).unwrap_or_default();
    if rows.iter().any(|m| m.owner != owner) {
        return Err(MetaError::new("the rows of one insert have one owner"));
    }
    let add = Usage {
        bytes: rows.iter().map(|m| m.size).sum(),
        items: rows.len() as u64,
    };
    Ok((owner, add))
}

/// Counts `add` in `owner`'s usage (locking its row until the transaction
/// ends); an error, on which the caller drops (rolls back) the transaction,
/// when that takes it past `quota`.
pub(super) async fn count_usage(
    tx: &deadpool_postgres::Transaction<'_>,
    owner: &str,
    add: Usage,
    quota: Quota,
) -> Result<(), MetaError> {
    let big = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let st = tx.prepare_cached(COUNT_USAGE).await.map_err(db)?;
    let r = tx
        .query_one(&st, &[&owner, &big(add.bytes), &big(add.items)])
        .await
        .map_err(db)?;
    let (bytes, items): (i64, i64) = (r.try_get(0).map_err(db)?, r.try_get(1).map_err(db)?);
    let after = Usage {
        bytes: bytes.max(0) as u64,
        items: items.max(0) as u64,
    };
    match quota.exceeded(after, add) {
        Some(o) => Err(MetaError::over_quota(o)),
        None => Ok(()),
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
    let px = |v: Option<u32>| v.and_then(|v| i32::try_from(v).ok());
    let (width, height) = (px(m.width), px(m.height));
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
        &m.owner,
        &width,
        &height,
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
        owner: r.try_get(8)?,
        width: pixels(r.try_get(9)?),
        height: pixels(r.try_get(10)?),
    })
}

/// A width or height column (a positive `INTEGER`) as pixels.
fn pixels(v: Option<i32>) -> Option<u32> {
    v.and_then(|v| u32::try_from(v).ok())
}

/// The record of a row just inserted (`RETURNING seq, created`).
pub(super) fn inserted(m: NewMedia, r: &Row) -> Result<MediaRecord, PgError> {
    Ok(MediaRecord {
        seq: r.try_get(0)?,
        created: r.try_get(1)?,
        id: m.id,
        owner: m.owner,
        field: m.field,
        filename: m.filename,
        content_type: m.content_type,
        size: m.size,
        sha256: m.sha256,
        width: m.width.filter(|w| i32::try_from(*w).is_ok()),
        height: m.height.filter(|h| i32::try_from(*h).is_ok()),
    })
}

impl MediaStore for PgMeta {
    fn insert<'a>(
        &'a self,
        rows: Vec<NewMedia>,
        node: &'a str,
        quota: Quota,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Vec<MediaRecord>, MetaError>> {
        Box::pin(self.insert_all(rows, node, quota, event))
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(GET_MEDIA, &[&id, &owner]).await?;
            row.map(|r| record(&r)).transpose().map_err(db)
        })
    }

    fn usage<'a>(&'a self, owner: &'a str) -> BoxFut<'a, Result<Usage, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(USAGE, &[&owner]).await?;
            let (bytes, items) = match row {
                Some(r) => (
                    r.try_get::<_, i64>(0).map_err(db)?,
                    r.try_get::<_, i64>(1).map_err(db)?,
                ),
                None => (0, 0),
            };
            Ok(Usage {
                bytes: bytes.max(0) as u64,
                items: items.max(0) as u64,
            })
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

    fn delete<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
        node: &'a str,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Option<MediaRecord>, MetaError>> {
        Box::pin(self.delete_leased(id, owner, node, event))
    }

    fn all_ids(&self) -> BoxFut<'_, Result<HashSet<String>, MetaError>> {
        Box::pin(async move {
            let sql = "SELECT id FROM media UNION SELECT id FROM uploads";
            let ids = self.query(sql, &[]).await?;
            ids.iter().map(|r| r.try_get(0).map_err(db)).collect()
        })
    }
}
