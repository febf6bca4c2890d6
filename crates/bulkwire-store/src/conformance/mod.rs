//! One behaviour, every backend: checks that each `MetaStore` and
//! `BlobStore` implementation runs in its own tests (SQLite and files here,
//! PostgreSQL and S3 against real servers), so that handlers may rely on
//! the traits' documented contract whatever the backend.
//!
//! Built for tests only (`cfg(test)` or the `conformance` feature). Each
//! check uses ids of its own, so a store shared between tests is fine.
//!
//! A module per concern, as the store's traits are: `media` and `listing`
//! ([`MediaStore`](crate::MediaStore)), `credentials`, `leases` (with the
//! janitor end to end), `uploads`, and `blobs` for [`BlobStore`]. A new
//! concern's checks go in a module of their own, run by [`meta_store`].

mod blobs;
mod credentials;
mod events;
mod leases;
mod listing;
mod media;
mod owners;
mod uploads;

pub use blobs::{blob_store, spool_notes, spools};
pub use leases::janitor;

use crate::{BlobStore, Lease, MetaStore, NewMedia};
use bytes::Bytes;
use futures_util::StreamExt;
use std::sync::Arc;

/// Every `MetaStore` check, concern by concern.
pub async fn meta_store(m: Arc<dyn MetaStore>) {
    m.ready().await.unwrap();
    assert!(!m.describe().await.unwrap().is_empty());
    media::checks(&*m).await;
    credentials::checks(&*m).await;
    leases::checks(&*m).await;
    uploads::checks(&*m).await;
    owners::checks(m.clone()).await;
    events::checks(m.clone()).await;
}

fn row(id: &str) -> NewMedia {
    NewMedia {
        id: id.into(),
        owner: "admin".into(),
        field: Some("f".into()),
        filename: Some("a.bin".into()),
        content_type: "application/octet-stream".into(),
        size: 3,
        sha256: "ab".repeat(32),
        width: None,
        height: None,
    }
}

async fn write_blob(b: &dyn BlobStore, lease: Arc<Lease>, data: &[u8], chunk: usize) {
    let id = lease.id().to_owned();
    let mut w = b.begin(&id, lease).await.unwrap();
    for c in data.chunks(chunk.max(1)) {
        w.write(vec![Bytes::copy_from_slice(c)]).await.unwrap();
    }
    w.commit().await.unwrap();
}

async fn read(b: &dyn BlobStore, id: &str, off: u64, len: u64) -> Vec<u8> {
    let mut s = b.open(id, off, len).await.unwrap();
    let mut v = Vec::new();
    while let Some(c) = s.next().await {
        v.extend_from_slice(&c.unwrap());
    }
    v
}
