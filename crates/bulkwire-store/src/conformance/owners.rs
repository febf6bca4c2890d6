//! Owners: reads, listings and deletes by owner, usage counted in the
//! transaction of every insert and delete, and quotas that hold exactly,
//! also when inserts for one owner race.

use super::row;
use crate::{new_id, ListQuery, MetaStore, NewMedia, Order, Quota, Usage};
use std::sync::Arc;

pub(super) async fn checks(m: Arc<dyn MetaStore>) {
    reads_by_owner(&*m).await;
    usage_and_quotas(&*m).await;
    racing_inserts_never_overshoot(m.clone()).await;
    a_finished_upload_goes_with_its_item(&*m).await;
}

fn owned(id: &str, owner: &str, size: u64) -> NewMedia {
    NewMedia {
        owner: owner.into(),
        size,
        ..row(id)
    }
}

async fn put(
    m: &dyn MetaStore,
    rows: Vec<NewMedia>,
    quota: Quota,
) -> Result<Vec<crate::MediaRecord>, crate::MetaError> {
    let node = new_id();
    for r in &rows {
        m.lease(&r.id, &node).await.unwrap();
    }
    let out = m.insert(rows.clone(), &node, quota, None).await;
    if out.is_err() {
        for r in &rows {
            m.release(&r.id, &node).await.unwrap();
        }
    }
    out
}

async fn reads_by_owner(m: &dyn MetaStore) {
    let (alice, bob) = (format!("alice-{}", new_id()), format!("bob-{}", new_id()));
    let (a, b) = (new_id(), new_id());
    let ra = put(m, vec![owned(&a, &alice, 1)], Quota::default())
        .await
        .unwrap();
    put(m, vec![owned(&b, &bob, 1)], Quota::default())
        .await
        .unwrap();
    assert_eq!(ra[0].owner, alice);
    assert_eq!(m.get(&a, Some(&alice)).await.unwrap(), Some(ra[0].clone()));
    assert_eq!(
        m.get(&a, Some(&bob)).await.unwrap(),
        None,
        "another owner's reads as missing"
    );
    assert!(m.get(&a, None).await.unwrap().is_some(), "every owner's");
    let mut q = ListQuery::new(Order::NewestFirst, 10);
    q.owner = Some(alice.clone());
    let page = m.list(q).await.unwrap();
    assert_eq!(page.iter().map(|r| &r.id).collect::<Vec<_>>(), [&a]);
    // Bob cannot delete Alice's item; nothing changes.
    assert_eq!(
        m.delete(&a, Some(&bob), &new_id(), None).await.unwrap(),
        None
    );
    assert!(m.get(&a, None).await.unwrap().is_some());
    let node = new_id();
    assert!(m
        .delete(&a, Some(&alice), &node, None)
        .await
        .unwrap()
        .is_some());
    m.release(&a, &node).await.unwrap();
}

async fn usage_and_quotas(m: &dyn MetaStore) {
    let o = format!("q-{}", new_id());
    assert_eq!(m.usage(&o).await.unwrap(), Usage::default());
    let q = Quota {
        bytes: Some(100),
        items: Some(3),
    };
    put(
        m,
        vec![owned(&new_id(), &o, 40), owned(&new_id(), &o, 40)],
        q,
    )
    .await
    .unwrap();
    assert_eq!(
        m.usage(&o).await.unwrap(),
        Usage {
            bytes: 80,
            items: 2
        }
    );
    // 21 more bytes would be 101: refused whole, usage unchanged.
    let over = new_id();
    let e = put(m, vec![owned(&over, &o, 21)], q).await.unwrap_err();
    let oq = e.over_quota.expect("an over-quota error");
    assert_eq!(
        (oq.limit, oq.value, oq.usage, oq.adding),
        ("quota_bytes", 100, 80, 21)
    );
    assert_eq!(m.get(&over, None).await.unwrap(), None);
    assert_eq!(
        m.usage(&o).await.unwrap(),
        Usage {
            bytes: 80,
            items: 2
        }
    );
    // Exactly up to the limit is fine; then the items limit bites.
    let last = put(m, vec![owned(&new_id(), &o, 20)], q).await.unwrap();
    let e = put(m, vec![owned(&new_id(), &o, 0)], q).await.unwrap_err();
    assert_eq!(e.over_quota.map(|o| o.limit), Some("quota_items"));
    // A delete gives room back.
    let node = new_id();
    m.delete(&last[0].id, None, &node, None)
        .await
        .unwrap()
        .unwrap();
    m.release(&last[0].id, &node).await.unwrap();
    assert_eq!(
        m.usage(&o).await.unwrap(),
        Usage {
            bytes: 80,
            items: 2
        }
    );
    put(m, vec![owned(&new_id(), &o, 20)], q).await.unwrap();
}

/// 40 inserts for one owner at once, each of 10 bytes, under a quota of
/// 100 bytes: exactly 10 pass, whatever the interleaving.
async fn racing_inserts_never_overshoot(m: Arc<dyn MetaStore>) {
    let o = format!("race-{}", new_id());
    let q = Quota {
        bytes: Some(100),
        items: None,
    };
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let (m, o) = (m.clone(), o.clone());
            tokio::spawn(async move { put(&*m, vec![owned(&new_id(), &o, 10)], q).await })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(e) => assert!(e.over_quota.is_some(), "{e}"),
        }
    }
    assert_eq!(ok, 10);
    assert_eq!(
        m.usage(&o).await.unwrap(),
        Usage {
            bytes: 100,
            items: 10
        }
    );
    let mut q = ListQuery::new(Order::OldestFirst, 100);
    q.owner = Some(o);
    assert_eq!(m.list(q).await.unwrap().len(), 10, "rows agree with usage");
}

/// Deleting an item a resumable upload made removes the finished upload's
/// row too: its `HEAD` no longer reports a complete upload whose link 404s.
async fn a_finished_upload_goes_with_its_item(m: &dyn MetaStore) {
    let id = new_id();
    let up = crate::UploadRow {
        id: id.clone(),
        owner: "admin".into(),
        expires: 4_000_000_000,
        gen: 1,
        open: true,
        state: "{}".into(),
    };
    assert!(m.upload_create(up.clone(), 100, None, None).await.unwrap());
    let done = crate::UploadRow { open: false, ..up };
    let rec = m
        .upload_save(&done, Some(row(&id)), Quota::default(), None)
        .await
        .unwrap();
    assert!(rec.is_some_and(|r| r.is_some()));
    let node = new_id();
    assert!(m.delete(&id, None, &node, None).await.unwrap().is_some());
    m.release(&id, &node).await.unwrap();
    assert_eq!(m.upload_get(&id).await.unwrap(), None);
}
