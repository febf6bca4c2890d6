//! One behaviour, every backend: checks that each `MetaStore` and
//! `BlobStore` implementation runs in its own tests (SQLite and files here,
//! PostgreSQL and S3 against real servers), so that handlers may rely on
//! the traits' documented contract whatever the backend.
//!
//! Built for tests only (`cfg(test)` or the `conformance` feature). Each
//! check uses ids of its own, so a store shared between tests is fine.

use crate::lease::{janitor_id, sweep_expired, Leases};
use crate::{
    new_id, token_id, BlobStore, Lease, MediaRecord, MetaStore, NewMedia, Spool, UploadRow, UserSet,
};
use bytes::Bytes;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;

fn row(id: &str) -> NewMedia {
    NewMedia {
        id: id.into(),
        field: Some("f".into()),
        filename: Some("a.bin".into()),
        content_type: "application/octet-stream".into(),
        size: 3,
        sha256: "ab".repeat(32),
    }
}

async fn leased_insert(m: &dyn MetaStore, ids: &[&str], node: &str) -> Vec<MediaRecord> {
    for id in ids {
        m.lease(id, node).await.unwrap();
    }
    m.insert(ids.iter().map(|i| row(i)).collect(), node)
        .await
        .unwrap()
}

/// Every `MetaStore` check.
pub async fn meta_store(m: Arc<dyn MetaStore>) {
    m.ready().await.unwrap();
    assert!(!m.describe().await.unwrap().is_empty());
    rows(&*m).await;
    insert_needs_its_own_lease(&*m).await;
    credentials(&*m).await;
    claims(&*m).await;
    uploads(&*m).await;
    secrets(&*m).await;
}

/// A secret is created once and read back the same by every caller, until
/// it is replaced.
async fn secrets(m: &dyn MetaStore) {
    let name = format!("test-{}", new_id());
    let first = m.secret(&name, vec![1; 32]).await.unwrap();
    assert_eq!(first, vec![1; 32]);
    let again = m.secret(&name, vec![2; 32]).await.unwrap();
    assert_eq!(again, first, "a second start must not replace the key");
    m.secret_set(&name, vec![3; 32]).await.unwrap();
    assert_eq!(m.secret(&name, vec![4; 32]).await.unwrap(), vec![3; 32]);
    let other = format!("{name}-other");
    assert_eq!(m.secret(&other, vec![5; 16]).await.unwrap(), vec![5; 16]);
}

fn upload(owner: &str, expires: i64) -> UploadRow {
    UploadRow {
        id: new_id(),
        owner: owner.into(),
        expires,
        gen: 0,
        open: true,
        state: r#"{"len":0}"#.into(),
    }
}

/// Resumable upload rows: per-owner limit, fencing, completion with its
/// media row in the same transaction, expiry.
async fn uploads(m: &dyn MetaStore) {
    let owner = new_id();
    let far = i64::MAX / 2;
    let (a, b) = (upload(&owner, far), upload(&owner, far));
    assert!(m.upload_create(a.clone(), 2, None).await.unwrap());
    assert!(m.upload_create(b.clone(), 2, None).await.unwrap());
    assert!(
        !m.upload_create(upload(&owner, far), 2, None).await.unwrap(),
        "limit"
    );
    assert!(
        m.upload_create(upload(&new_id(), far), 2, None)
            .await
            .unwrap(),
        "per owner"
    );
    assert_eq!(m.upload_get(&a.id).await.unwrap().unwrap(), a);
    // The insert ends the creator's lease, and only its own.
    let node = new_id();
    let leased = upload(&new_id(), far);
    m.lease(&leased.id, &node).await.unwrap();
    let other = m.upload_create(leased.clone(), 1, Some("another")).await;
    assert!(other.is_err(), "another node's lease");
    assert!(m
        .upload_create(leased.clone(), 1, Some(&node))
        .await
        .unwrap());
    assert!(
        !m.lease_move(&leased.id, &node, "x").await.unwrap(),
        "lease ended"
    );
    // A newer writer fences the older one out.
    let w1 = m.upload_claim(&a.id).await.unwrap().unwrap();
    let w2 = m.upload_claim(&a.id).await.unwrap().unwrap();
    assert_eq!((w1.gen, w2.gen), (1, 2));
    let stale = UploadRow {
        state: "old".into(),
        ..w1
    };
    assert_eq!(m.upload_save(&stale, None).await.unwrap(), None);
    let saved = UploadRow {
        state: "new".into(),
        ..w2.clone()
    };
    assert_eq!(m.upload_save(&saved, None).await.unwrap(), Some(None));
    assert_eq!(m.upload_get(&a.id).await.unwrap().unwrap().state, "new");
    // Completion: closed (no longer counted) and a media row at once.
    let done = UploadRow {
        open: false,
        ..saved
    };
    let rec = m.upload_save(&done, Some(row(&a.id))).await.unwrap();
    assert_eq!(rec.unwrap().unwrap().id, a.id);
    assert_eq!(m.get(&a.id).await.unwrap().unwrap().size, 3);
    assert!(m.upload_create(upload(&owner, far), 2, None).await.unwrap());
    assert!(
        m.all_ids().await.unwrap().contains(&b.id),
        "spools are kept at start-up"
    );
    // Expired rows, and a fenced remove.
    let old = upload(&new_id(), 1);
    assert!(m.upload_create(old.clone(), 1, None).await.unwrap());
    let expired = m.upload_expired(10_000).await.unwrap();
    assert!(expired.iter().any(|r| r.id == old.id), "{expired:?}");
    assert!(!expired.iter().any(|r| r.id == b.id));
    // The janitor claims only what is still expired.
    assert_eq!(m.upload_claim_expired(&b.id).await.unwrap(), None);
    let old = m.upload_claim_expired(&old.id).await.unwrap().unwrap();
    assert_eq!(old.gen, 1);
    assert!(!m.upload_remove(&old.id, 5).await.unwrap());
    assert!(m.upload_remove(&old.id, 1).await.unwrap());
    assert_eq!(m.upload_get(&old.id).await.unwrap(), None);
    assert_eq!(m.upload_claim(&old.id).await.unwrap(), None);
}

async fn rows(m: &dyn MetaStore) {
    let node = new_id();
    let (a, b, c) = (new_id(), new_id(), new_id());
    let r = leased_insert(m, &[&a, &b, &c], &node).await;
    assert!(r[0].seq < r[1].seq && r[1].seq < r[2].seq);
    assert_eq!(m.get(&b).await.unwrap().unwrap(), r[1]);
    assert_eq!(m.get(&new_id()).await.unwrap(), None);
    let page = m.list(r[0].seq - 1, 2).await.unwrap();
    assert_eq!(page, r[..2]);
    assert_eq!(m.list(r[1].seq, 1).await.unwrap(), r[2..]);
    // Delete leaves a lease on the id, for the blob, until released.
    assert!(m.delete(&a, &node).await.unwrap());
    assert!(!m.delete(&a, &node).await.unwrap());
    assert_eq!(m.get(&a).await.unwrap(), None);
    let j = format!("j-{}", new_id());
    let claimed = m.claim_expired(&j, Duration::ZERO, 1000).await.unwrap();
    assert!(claimed.iter().any(|p| p.id == a), "the deletion's lease");
    for p in claimed {
        m.release(&p.id, &j).await.unwrap();
    }
}

async fn insert_needs_its_own_lease(m: &dyn MetaStore) {
    let (node, other) = (new_id(), new_id());
    let (a, b) = (new_id(), new_id());
    // No lease at all.
    assert!(m.insert(vec![row(&a)], &node).await.is_err());
    // One of two rows leased by another node: neither row is inserted.
    m.lease(&a, &node).await.unwrap();
    m.lease(&b, &other).await.unwrap();
    assert!(m.insert(vec![row(&a), row(&b)], &node).await.is_err());
    assert_eq!(m.get(&a).await.unwrap(), None);
    assert_eq!(m.get(&b).await.unwrap(), None);
    // The failed insert did not end the lease it did hold.
    m.insert(vec![row(&a)], &node).await.unwrap();
    m.release(&b, &other).await.unwrap();
    // A duplicate id fails and changes nothing.
    m.lease(&b, &node).await.unwrap();
    assert!(m.insert(vec![row(&b), row(&a)], &node).await.is_err());
    assert_eq!(m.get(&b).await.unwrap(), None);
    m.release(&b, &node).await.unwrap();
}

async fn credentials(m: &dyn MetaStore) {
    let digest: [u8; 32] = rand::random();
    let t = m.token_add(digest, "ci".into()).await.unwrap();
    assert_eq!(t.id, token_id(&digest));
    assert!(m.token_known(digest).await.unwrap());
    assert!(!m.token_known(rand::random()).await.unwrap());
    assert!(m.tokens().await.unwrap().contains(&t));
    assert!(m.token_add(digest, "again".into()).await.is_err(), "unique");
    assert!(m.token_revoke(&t.id).await.unwrap());
    assert!(!m.token_revoke(&t.id).await.unwrap());
    assert!(!m.token_known(digest).await.unwrap());

    let name = format!("u{}", new_id());
    assert!(!m.user_set(&name, "h1", UserSet::Update).await.unwrap());
    assert!(m.user_set(&name, "h1", UserSet::Create).await.unwrap());
    assert!(!m.user_set(&name, "h2", UserSet::Create).await.unwrap());
    assert_eq!(m.user_hash(&name).await.unwrap().as_deref(), Some("h1"));
    assert!(m.user_set(&name, "h2", UserSet::Update).await.unwrap());
    assert!(m.user_set(&name, "h3", UserSet::Upsert).await.unwrap());
    assert_eq!(m.user_hash(&name).await.unwrap().as_deref(), Some("h3"));
    assert!(m.users().await.unwrap().iter().any(|u| u.name == name));
    assert!(m.user_remove(&name).await.unwrap());
    assert!(!m.user_remove(&name).await.unwrap());
    assert_eq!(m.user_hash(&name).await.unwrap(), None);
}

async fn claims(m: &dyn MetaStore) {
    let (live, dead) = (new_id(), new_id());
    let (mine, theirs) = (new_id(), new_id());
    m.heartbeat(&live).await.unwrap();
    m.lease(&mine, &live).await.unwrap();
    m.lease(&theirs, &dead).await.unwrap();
    m.lease_note(&theirs, &dead, "upload-1").await.unwrap();
    assert!(
        m.lease_note(&theirs, &live, "x").await.is_err(),
        "not live's lease"
    );
    assert!(
        m.lease_note(&new_id(), &live, "x").await.is_err(),
        "no lease"
    );
    // A lease of a node without heartbeat expires; a live node's does not.
    let j = janitor_id(&new_id());
    // A janitor's own id is heartbeated with its node.
    m.heartbeat(&j).await.unwrap();
    let got = m
        .claim_expired(&j, Duration::from_secs(3600), 1000)
        .await
        .unwrap();
    let theirs_claimed = got.iter().find(|p| p.id == theirs).expect("claimed");
    assert_eq!(theirs_claimed.handle.as_deref(), Some("upload-1"));
    assert!(!got.iter().any(|p| p.id == mine), "a live node's lease");
    // Claimed: the dead node can no longer commit it.
    assert!(m.insert(vec![row(&theirs)], &dead).await.is_err());
    // Another janitor does not get it again; the claimer does (a retry).
    let k = janitor_id(&new_id());
    let again = m
        .claim_expired(&k, Duration::from_secs(3600), 1000)
        .await
        .unwrap();
    assert!(!again.iter().any(|p| p.id == theirs));
    let retry = m
        .claim_expired(&j, Duration::from_secs(3600), 1000)
        .await
        .unwrap();
    assert!(retry.iter().any(|p| p.id == theirs));
    for p in retry {
        m.release(&p.id, &j).await.unwrap();
    }
    m.insert(vec![row(&mine)], &live).await.unwrap();
    // A moved lease is no longer its node's: that node cannot commit.
    let x = new_id();
    m.lease(&x, &live).await.unwrap();
    assert!(m.lease_move(&x, &live, &j).await.unwrap());
    assert!(!m.lease_move(&x, &live, &j).await.unwrap(), "moved already");
    assert!(m.insert(vec![row(&x)], &live).await.is_err());
    m.release(&x, &j).await.unwrap();
    assert!(!m.lease_move(&x, &j, &live).await.unwrap(), "released");
    // A batch limit is honoured.
    let many: Vec<String> = (0..3).map(|_| new_id()).collect();
    for id in &many {
        m.lease(id, &dead).await.unwrap();
    }
    let one = m
        .claim_expired(&k, Duration::from_secs(3600), 1)
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    let rest = m
        .claim_expired(&k, Duration::from_secs(3600), 1000)
        .await
        .unwrap();
    for p in rest {
        m.release(&p.id, &k).await.unwrap();
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

/// Every `BlobStore` check. `big` is a size that crosses the backend's
/// part or batch size (an S3 multipart upload).
pub async fn blob_store(b: Arc<dyn BlobStore>, big: usize) {
    b.ready().await.unwrap();
    assert!(!b.describe().await.unwrap().is_empty());
    for (len, chunk) in [(0, 1), (5, 2), (big, 64 << 10), (big + 12_345, 1 << 20)] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let id = new_id();
        write_blob(&*b, Lease::detached(&id), &data, chunk).await;
        assert_eq!(read(&*b, &id, 0, len as u64).await, data, "len {len}");
        if len > 10 {
            let (o, l) = (len as u64 / 3, len as u64 / 2);
            let want = &data[o as usize..(o + l) as usize];
            assert_eq!(read(&*b, &id, o, l).await, want, "range of {len}");
        }
        b.delete(&id).await.unwrap();
        b.delete(&id).await.unwrap();
    }
    // Dropped before commit: nothing becomes visible, and abort (what a
    // janitor does) removes whatever the writer left.
    let id = new_id();
    let lease = Lease::detached(&id);
    let mut w = b.begin(&id, lease.clone()).await.unwrap();
    w.write(vec![Bytes::from(vec![1u8; big])]).await.unwrap();
    w.write(Vec::new()).await.unwrap();
    let handle = lease.handle();
    std::mem::forget(w);
    b.abort(&id, handle.as_deref()).await.unwrap();
    b.abort(&id, handle.as_deref()).await.unwrap();
    // A committed blob is removed by abort too (a deletion's lease).
    let id = new_id();
    write_blob(&*b, Lease::detached(&id), b"abc", 3).await;
    b.abort(&id, None).await.unwrap();
    let gone = b.open(&id, 0, 3).await;
    let empty = match gone {
        Err(_) => true,
        Ok(mut s) => s.next().await.is_none_or(|r| r.is_err()),
    };
    assert!(empty, "an aborted blob is gone");
}

/// Resumable spools: appends across writers at every kind of offset (in a
/// part, on a part's edge), bytes written after the last save discarded by
/// the next writer, finish (twice: idempotent), abort. `part` is the
/// backend's part size (S3), or any size for files.
pub async fn spools(b: Arc<dyn BlobStore>, part: usize) {
    let id = new_id();
    let data: Vec<u8> = (0..2 * part + 1234).map(|i| (i * 13 % 251) as u8).collect();
    let mut spool = b.spool_create(&id, Lease::detached(&id)).await.unwrap();
    assert_eq!(spool.len, 0);
    // Cuts: inside the first part, exactly at its end, inside the last.
    for cut in [part / 3, part, 2 * part + 1000, data.len()] {
        let from = spool.len as usize;
        let mut w = b.spool_open(&id, spool.clone()).await.unwrap();
        for c in data[from..cut].chunks(100_000) {
            w.write(vec![Bytes::copy_from_slice(c)]).await.unwrap();
        }
        spool = w.sync().await.unwrap();
        assert_eq!(spool.len as usize, cut);
        w.saved(true).await;
        // One writer at a time: the next one opens once this one is gone.
        drop(w);
        // A writer that sends more and is never saved: its bytes are not
        // the upload's.
        if cut < data.len() {
            let mut w = b.spool_open(&id, spool.clone()).await.unwrap();
            w.write(vec![Bytes::from(vec![0xEE; 4321])]).await.unwrap();
            let lost: Spool = w.sync().await.unwrap();
            assert_eq!(lost.len as usize, cut + 4321);
            w.saved(false).await;
        }
    }
    let w = b.spool_open(&id, spool.clone()).await.unwrap();
    w.finish().await.unwrap();
    b.spool_finish(&id, spool.clone()).await.unwrap();
    assert_eq!(read(&*b, &id, 0, data.len() as u64).await, data);
    b.spool_abort(&id, spool.clone()).await.unwrap();
    b.spool_abort(&id, spool).await.unwrap();
    // An empty upload, and one aborted half-way.
    let id = new_id();
    let spool = b.spool_create(&id, Lease::detached(&id)).await.unwrap();
    b.spool_finish(&id, spool).await.unwrap();
    assert!(read(&*b, &id, 0, 0).await.is_empty());
    b.delete(&id).await.unwrap();
    let id = new_id();
    let spool = b.spool_create(&id, Lease::detached(&id)).await.unwrap();
    let mut w = b.spool_open(&id, spool).await.unwrap();
    w.write(vec![Bytes::from(vec![1u8; part + 7])])
        .await
        .unwrap();
    let spool = w.sync().await.unwrap();
    w.saved(true).await;
    drop(w);
    b.spool_abort(&id, spool).await.unwrap();
}

/// Spool notes (`SpoolWriter::sync_noted`): a writer that keeps them
/// hands back the last one (not one of a plain sync after it) until the
/// spool is finished; one that keeps none refuses one and syncs nothing.
pub async fn spool_notes(b: Arc<dyn BlobStore>) {
    let id = new_id();
    let spool = b.spool_create(&id, Lease::detached(&id)).await.unwrap();
    assert_eq!(b.spool_note(&id).await.unwrap(), None);
    let mut w = b.spool_open(&id, spool.clone()).await.unwrap();
    w.write(vec![Bytes::from(vec![7u8; 5000])]).await.unwrap();
    if !w.notes() {
        assert!(w.sync_noted(b"n".to_vec()).await.is_err());
        assert_eq!(b.spool_note(&id).await.unwrap(), None);
        drop(w);
        return b.spool_abort(&id, spool).await.unwrap();
    }
    let s = w.sync_noted(b"first".to_vec()).await.unwrap();
    assert_eq!(s.len, 5000);
    assert_eq!(b.spool_note(&id).await.unwrap().unwrap(), b"first");
    // A writer opened with a state older than the note (its row was not
    // saved) does not cut the noted bytes off: it goes on after them.
    w.write(vec![Bytes::from(vec![0xEE; 100])]).await.unwrap();
    drop(w);
    assert_eq!(b.spool_note(&id).await.unwrap().unwrap(), b"first");
    let mut w = b.spool_open(&id, spool.clone()).await.unwrap();
    assert_eq!(w.sync().await.unwrap().len, 5000, "opened at the note");
    w.write(vec![Bytes::from(vec![8u8; 3000])]).await.unwrap();
    let s = w.sync_noted(b"second".to_vec()).await.unwrap();
    assert_eq!(s.len, 8000);
    w.write(vec![Bytes::from(vec![9u8; 10])]).await.unwrap();
    let s = w.sync().await.unwrap();
    assert_eq!(s.len, 8010);
    assert_eq!(b.spool_note(&id).await.unwrap().unwrap(), b"second");
    let long = vec![b'x'; crate::NOTE_MAX + 1];
    assert!(
        w.sync_noted(long).await.is_err(),
        "a note longer than NOTE_MAX"
    );
    w.finish().await.unwrap();
    assert_eq!(
        b.spool_note(&id).await.unwrap(),
        None,
        "gone with the spool"
    );
    assert_eq!(read(&*b, &id, 4998, 4).await, [7, 7, 8, 8]);
    b.delete(&id).await.unwrap();
}

/// The janitor end to end on one pair of stores: an upload of a dead node
/// (its blob committed, no row) is removed, a live node's is kept.
pub async fn janitor(m: Arc<dyn MetaStore>, b: Arc<dyn BlobStore>) {
    let (live, dead) = (new_id(), new_id());
    m.heartbeat(&live).await.unwrap();
    let (kept, lost) = (new_id(), new_id());
    for (id, node) in [(&kept, &live), (&lost, &dead)] {
        let leases = Leases::new(m.clone(), b.clone(), node.as_str().into());
        let lease = leases.take(id).await.unwrap();
        write_blob(&*b, lease.clone(), b"leftover", 8).await;
        // Neither upload ends: the lease stays as a crash would leave it.
        std::mem::forget(lease);
    }
    let me = new_id();
    let n = sweep_expired(&*m, &*b, &me, Duration::from_secs(3600))
        .await
        .unwrap();
    assert!(n >= 1, "cleaned {n}");
    assert_eq!(read(&*b, &kept, 0, 8).await, b"leftover");
    let lost_left = match b.open(&lost, 0, 8).await {
        Err(_) => false,
        Ok(mut s) => matches!(s.next().await, Some(Ok(c)) if !c.is_empty()),
    };
    assert!(!lost_left, "the dead node's blob is gone");
    // The live node can still commit its upload.
    m.insert(vec![row(&kept)], &live).await.unwrap();
    dropped_leases(m, b).await;
}

/// A lease dropped unended: its cleanup removes the upload's blob, unless
/// the row committed (its caller went away, or saw an error, after the
/// commit): then the blob is the row's and stays.
async fn dropped_leases(m: Arc<dyn MetaStore>, b: Arc<dyn BlobStore>) {
    let node = new_id();
    let leases = Leases::new(m.clone(), b.clone(), node.as_str().into());
    let (committed, failed) = (new_id(), new_id());
    for id in [&committed, &failed] {
        let lease = leases.take(id).await.unwrap();
        write_blob(&*b, lease.clone(), b"data", 4).await;
        if id == &committed {
            m.insert(vec![row(id)], &node).await.unwrap();
        }
        drop(lease);
    }
    let gone = |id: String| {
        let b = b.clone();
        async move {
            match b.open(&id, 0, 4).await {
                Err(_) => true,
                Ok(mut s) => !matches!(s.next().await, Some(Ok(c)) if !c.is_empty()),
            }
        }
    };
    let t = std::time::Instant::now();
    while !gone(failed.clone()).await {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the failed upload's blob stays"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        read(&*b, &committed, 0, 4).await,
        b"data",
        "a committed row's blob"
    );
    assert!(m.get(&committed).await.unwrap().is_some());
}
