//! Leases and their janitor: notes, moves, claims of dead nodes' leases,
//! and cleanup end to end on a pair of stores.

use super::{read, row, write_blob};
use crate::lease::{janitor_id, sweep_expired, Leases};
use crate::{new_id, BlobStore, MetaStore};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn checks(m: &dyn MetaStore) {
    claims(m).await;
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
    assert!(m
        .insert(vec![row(&theirs)], &dead, crate::Quota::default(), None)
        .await
        .is_err());
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
    m.insert(vec![row(&mine)], &live, crate::Quota::default(), None)
        .await
        .unwrap();
    // A moved lease is no longer its node's: that node cannot commit.
    let x = new_id();
    m.lease(&x, &live).await.unwrap();
    assert!(m.lease_move(&x, &live, &j).await.unwrap());
    assert!(!m.lease_move(&x, &live, &j).await.unwrap(), "moved already");
    assert!(m
        .insert(vec![row(&x)], &live, crate::Quota::default(), None)
        .await
        .is_err());
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
    m.insert(vec![row(&kept)], &live, crate::Quota::default(), None)
        .await
        .unwrap();
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
            m.insert(vec![row(id)], &node, crate::Quota::default(), None)
                .await
                .unwrap();
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
    assert!(m.get(&committed, None).await.unwrap().is_some());
}
