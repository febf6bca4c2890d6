//! Resumable uploads' rows.

use super::row;
use crate::{new_id, MetaStore, UploadRow};

pub(super) async fn checks(m: &dyn MetaStore) {
    uploads(m).await;
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
    assert!(m.upload_create(a.clone(), 2, None, None).await.unwrap());
    assert!(m.upload_create(b.clone(), 2, None, None).await.unwrap());
    assert!(
        !m.upload_create(upload(&owner, far), 2, None, None)
            .await
            .unwrap(),
        "limit"
    );
    assert!(
        m.upload_create(upload(&new_id(), far), 2, None, None)
            .await
            .unwrap(),
        "per owner"
    );
    assert_eq!(m.upload_get(&a.id).await.unwrap().unwrap(), a);
    // The insert ends the creator's lease, and only its own.
    let node = new_id();
    let leased = upload(&new_id(), far);
    m.lease(&leased.id, &node).await.unwrap();
    let other = m
        .upload_create(leased.clone(), 1, Some("another"), None)
        .await;
    assert!(other.is_err(), "another node's lease");
    assert!(m
        .upload_create(leased.clone(), 1, Some(&node), None)
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
    assert_eq!(
        m.upload_save(&stale, None, crate::Quota::default(), None)
            .await
            .unwrap(),
        None
    );
    let saved = UploadRow {
        state: "new".into(),
        ..w2.clone()
    };
    assert_eq!(
        m.upload_save(&saved, None, crate::Quota::default(), None)
            .await
            .unwrap(),
        Some(None)
    );
    assert_eq!(m.upload_get(&a.id).await.unwrap().unwrap().state, "new");
    // Completion: closed (no longer counted) and a media row at once.
    let done = UploadRow {
        open: false,
        ..saved
    };
    let rec = m
        .upload_save(&done, Some(row(&a.id)), crate::Quota::default(), None)
        .await
        .unwrap();
    assert_eq!(rec.unwrap().unwrap().id, a.id);
    assert_eq!(m.get(&a.id, None).await.unwrap().unwrap().size, 3);
    assert!(m
        .upload_create(upload(&owner, far), 2, None, None)
        .await
        .unwrap());
    assert!(
        m.all_ids().await.unwrap().contains(&b.id),
        "spools are kept at start-up"
    );
    // Expired rows, and a fenced remove.
    let old = upload(&new_id(), 1);
    assert!(m.upload_create(old.clone(), 1, None, None).await.unwrap());
    let expired = m.upload_expired(10_000).await.unwrap();
    assert!(expired.iter().any(|r| r.id == old.id), "{expired:?}");
    assert!(!expired.iter().any(|r| r.id == b.id));
    // The janitor claims only what is still expired.
    assert_eq!(m.upload_claim_expired(&b.id).await.unwrap(), None);
    let old = m.upload_claim_expired(&old.id).await.unwrap().unwrap();
    assert_eq!(old.gen, 1);
    assert!(!m.upload_remove(&old.id, 5, None).await.unwrap());
    assert!(m.upload_remove(&old.id, 1, None).await.unwrap());
    assert_eq!(m.upload_get(&old.id).await.unwrap(), None);
    assert_eq!(m.upload_claim(&old.id).await.unwrap(), None);
}
