//! Resumable uploads' rows ([`UploadStore`]).

use super::error::db;
use super::events::{events_first, write_event};
use super::leases::END_LEASE;
use super::media::{
    adding, count_usage, insert_media, inserted, too_big, INSERT_LOCK, INSERT_MEDIA,
};
use super::{lease_lost, rows, Params, PgError, PgMeta};
use crate::{
    BoxFut, EventOf, MediaRecord, MetaError, NewEvent, NewMedia, Quota, UploadRow, UploadStore,
};
use tokio_postgres::Row;

const UPLOAD_COLUMNS: &str = "id, owner, expires, gen, open, state";
const UPLOAD_GET: &str = "SELECT id, owner, expires, gen, open, state FROM uploads WHERE id = $1";
const UPLOAD_CLAIM: &str = "UPDATE uploads SET gen = gen + 1 WHERE id = $1
     RETURNING id, owner, expires, gen, open, state";
const UPLOAD_CLAIM_EXPIRED: &str = "UPDATE uploads SET gen = gen + 1
     WHERE id = $1 AND expires < extract(epoch FROM now())::bigint
     RETURNING id, owner, expires, gen, open, state";
const UPLOAD_SAVE: &str =
    "UPDATE uploads SET state = $3, expires = $4, open = $5 WHERE id = $1 AND gen = $2";
const UPLOAD_REMOVE: &str = "DELETE FROM uploads WHERE id = $1 AND gen = $2";
const UPLOAD_EXPIRED: &str = "SELECT id, owner, expires, gen, open, state FROM uploads
     WHERE expires < extract(epoch FROM now())::bigint ORDER BY expires LIMIT $1";

/// The advisory lock key space of per-owner upload counts ("bulkupl").
const OWNER_LOCK: i32 = 0x62_75_6c_75;

impl PgMeta {
    /// Counts the owner's open uploads and inserts, under a per-owner
    /// advisory lock: two creations at once cannot both pass the count.
    async fn create_upload(
        &self,
        row: UploadRow,
        max_open: usize,
        lease: Option<&str>,
        event: Option<NewEvent>,
    ) -> Result<bool, MetaError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(db)?;
        if event.is_some() {
            events_first(&tx).await?;
        }
        if let Some(node) = lease {
            if tx.execute(END_LEASE, &[&row.id, &node]).await.map_err(db)? != 1 {
                return Err(lease_lost(&row.id, node));
            }
        }
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&OWNER_LOCK, &row.owner],
        )
        .await
        .map_err(db)?;
        let open: i64 = tx
            .query_one(
                "SELECT count(*) FROM uploads WHERE owner = $1 AND open",
                &[&row.owner],
            )
            .await
            .and_then(|r| r.try_get(0))
            .map_err(db)?;
        if open as usize >= max_open {
            return Ok(false);
        }
        let sql = format!("INSERT INTO uploads ({UPLOAD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)");
        let p: Params<'_> = &[
            &row.id,
            &row.owner,
            &row.expires,
            &row.gen,
            &row.open,
            &row.state,
        ];
        tx.execute(&sql, p).await.map_err(db)?;
        if let Some(e) = &event {
            write_event(&tx, e).await?;
        }
        tx.commit().await.map_err(db)?;
        Ok(true)
    }

    /// A fenced save and, with `media`, its row, in one transaction.
    async fn save_upload(
        &self,
        row: &UploadRow,
        media: Option<NewMedia>,
        quota: Quota,
        event: Option<EventOf>,
    ) -> Result<Option<Option<MediaRecord>>, MetaError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(db)?;
        if media.is_some() {
            // As in `insert_all`: seq order is commit order.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&INSERT_LOCK])
                .await
                .map_err(db)?;
        }
        let p: Params<'_> = &[&row.id, &row.gen, &row.state, &row.expires, &row.open];
        if tx.execute(UPLOAD_SAVE, p).await.map_err(db)? != 1 {
            return Ok(None);
        }
        let rec = match media {
            None => None,
            Some(m) => {
                let size = i64::try_from(m.size).map_err(|_| too_big(&m))?;
                let (owner, add) = adding(std::slice::from_ref(&m))?;
                count_usage(&tx, &owner, add, quota).await?;
                let put = tx.prepare_cached(INSERT_MEDIA).await.map_err(db)?;
                let r = insert_media(&tx, &put, &m, size).await.map_err(db)?;
                Some(inserted(m, &r).map_err(db)?)
            }
        };
        if let (Some(r), Some(f)) = (&rec, &event) {
            write_event(&tx, &f(r)).await?;
        }
        tx.commit().await.map_err(db)?;
        Ok(Some(rec))
    }
}

fn upload_row(r: &Row) -> Result<UploadRow, PgError> {
    Ok(UploadRow {
        id: r.try_get(0)?,
        owner: r.try_get(1)?,
        expires: r.try_get(2)?,
        gen: r.try_get(3)?,
        open: r.try_get(4)?,
        state: r.try_get(5)?,
    })
}

impl UploadStore for PgMeta {
    fn upload_create<'a>(
        &'a self,
        row: UploadRow,
        max_open: usize,
        lease: Option<&'a str>,
        event: Option<NewEvent>,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(self.create_upload(row, max_open, lease, event))
    }

    fn upload_get<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(UPLOAD_GET, &[&id]).await?;
            row.map(|r| upload_row(&r)).transpose().map_err(db)
        })
    }

    fn upload_claim<'a>(&'a self, id: &'a str) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(UPLOAD_CLAIM, &[&id]).await?;
            row.map(|r| upload_row(&r)).transpose().map_err(db)
        })
    }

    fn upload_claim_expired<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFut<'a, Result<Option<UploadRow>, MetaError>> {
        Box::pin(async move {
            let row = self.query_opt(UPLOAD_CLAIM_EXPIRED, &[&id]).await?;
            row.map(|r| upload_row(&r)).transpose().map_err(db)
        })
    }

    fn upload_save<'a>(
        &'a self,
        row: &'a UploadRow,
        media: Option<NewMedia>,
        quota: Quota,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Option<Option<MediaRecord>>, MetaError>> {
        Box::pin(self.save_upload(row, media, quota, event))
    }

    fn upload_remove<'a>(
        &'a self,
        id: &'a str,
        gen: i64,
        event: Option<NewEvent>,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        Box::pin(async move {
            let Some(e) = event else {
                return Ok(self.execute(UPLOAD_REMOVE, &[&id, &gen]).await? == 1);
            };
            let mut c = self.client().await?;
            let tx = c.transaction().await.map_err(db)?;
            events_first(&tx).await?;
            let gone = tx.execute(UPLOAD_REMOVE, &[&id, &gen]).await.map_err(db)? == 1;
            if gone {
                write_event(&tx, &e).await?;
            }
            tx.commit().await.map_err(db)?;
            Ok(gone)
        })
    }

    fn upload_expired(&self, limit: usize) -> BoxFut<'_, Result<Vec<UploadRow>, MetaError>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Box::pin(async move { rows(self.query(UPLOAD_EXPIRED, &[&limit]).await?, upload_row) })
    }
}
