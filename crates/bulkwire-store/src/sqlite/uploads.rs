//! Resumable uploads' rows ([`UploadStore`]).

use super::events::write_event;
use super::media::{adding, insert_media};
use super::{count_usage, lease_lost, now, SqliteMeta};
use crate::{
    BoxFut, EventOf, MediaRecord, MetaError, NewEvent, NewMedia, Quota, UploadRow, UploadStore,
};
use rusqlite::{params, Connection, OptionalExtension, Row};

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
    quota: Quota,
    event: Option<EventOf>,
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
    if let Some(m) = &media {
        let (owner, add) = adding(std::slice::from_ref(m))?;
        count_usage(&tx, &owner, add, quota)?;
    }
    let rec = media.map(|m| insert_media(&tx, m, now())).transpose()?;
    if let (Some(r), Some(f)) = (&rec, &event) {
        write_event(&tx, &f(r))?;
    }
    tx.commit()?;
    Ok(Some(rec))
}

impl UploadStore for SqliteMeta {
    fn upload_create<'a>(
        &'a self,
        row: UploadRow,
        max_open: usize,
        lease: Option<&'a str>,
        event: Option<NewEvent>,
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
            if let Some(e) = &event {
                write_event(&tx, e)?;
            }
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
        quota: Quota,
        event: Option<EventOf>,
    ) -> BoxFut<'a, Result<Option<Option<MediaRecord>>, MetaError>> {
        let row = row.clone();
        let writes = self.writes.clone();
        self.with(move |c| {
            let r = save_upload(c, &row, media, quota, event)?;
            writes.add(1);
            Ok(r)
        })
    }

    fn upload_remove<'a>(
        &'a self,
        id: &'a str,
        gen: i64,
        event: Option<NewEvent>,
    ) -> BoxFut<'a, Result<bool, MetaError>> {
        let id = id.to_string();
        self.with(move |c| {
            let tx = c.transaction()?;
            let n = tx
                .prepare_cached("DELETE FROM uploads WHERE id = ?1 AND gen = ?2")?
                .execute(params![id, gen])?;
            if let (1, Some(e)) = (n, &event) {
                write_event(&tx, e)?;
            }
            tx.commit()?;
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
