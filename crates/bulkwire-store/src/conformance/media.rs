//! Media rows: insert, get, list, delete, and the lease an insert ends.

use super::{listing, row};
use crate::{new_id, ListQuery, MediaRecord, MetaStore, Order};
use std::time::Duration;

pub(super) async fn checks(m: &dyn MetaStore) {
    rows(m).await;
    an_image_keeps_its_size(m).await;
    listing::checks(m).await;
    insert_needs_its_own_lease(m).await;
}

async fn leased_insert(m: &dyn MetaStore, ids: &[&str], node: &str) -> Vec<MediaRecord> {
    for id in ids {
        m.lease(id, node).await.unwrap();
    }
    m.insert(
        ids.iter().map(|i| row(i)).collect(),
        node,
        crate::Quota::default(),
        None,
    )
    .await
    .unwrap()
}

async fn rows(m: &dyn MetaStore) {
    let node = new_id();
    let (a, b, c) = (new_id(), new_id(), new_id());
    let r = leased_insert(m, &[&a, &b, &c], &node).await;
    assert!(r[0].seq < r[1].seq && r[1].seq < r[2].seq);
    assert_eq!(m.get(&b, None).await.unwrap().unwrap(), r[1]);
    assert_eq!(m.get(&new_id(), None).await.unwrap(), None);
    let oldest = ListQuery::new(Order::OldestFirst, 2);
    let page = m.list(oldest.clone().after(r[0].seq - 1)).await.unwrap();
    assert_eq!(page, r[..2]);
    let page = m.list(oldest.after(r[1].seq)).await.unwrap();
    assert_eq!(page[0], r[2]);
    // Delete leaves a lease on the id, for the blob, until released.
    assert_eq!(
        m.delete(&a, None, &node, None).await.unwrap(),
        Some(r[0].clone())
    );
    assert_eq!(m.delete(&a, None, &node, None).await.unwrap(), None);
    assert_eq!(m.get(&a, None).await.unwrap(), None);
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
    assert!(m
        .insert(vec![row(&a)], &node, crate::Quota::default(), None)
        .await
        .is_err());
    // One of two rows leased by another node: neither row is inserted.
    m.lease(&a, &node).await.unwrap();
    m.lease(&b, &other).await.unwrap();
    assert!(m
        .insert(vec![row(&a), row(&b)], &node, crate::Quota::default(), None)
        .await
        .is_err());
    assert_eq!(m.get(&a, None).await.unwrap(), None);
    assert_eq!(m.get(&b, None).await.unwrap(), None);
    // The failed insert did not end the lease it did hold.
    m.insert(vec![row(&a)], &node, crate::Quota::default(), None)
        .await
        .unwrap();
    m.release(&b, &other).await.unwrap();
    // A duplicate id fails and changes nothing.
    m.lease(&b, &node).await.unwrap();
    assert!(m
        .insert(vec![row(&b), row(&a)], &node, crate::Quota::default(), None)
        .await
        .is_err());
    assert_eq!(m.get(&b, None).await.unwrap(), None);
    m.release(&b, &node).await.unwrap();
}

/// An image's width and height come back from `insert`, `get`, `list` and
/// `delete` as they went in; other rows have none.
async fn an_image_keeps_its_size(m: &dyn MetaStore) {
    let node = new_id();
    let (img, other) = (new_id(), new_id());
    for id in [&img, &other] {
        m.lease(id, &node).await.unwrap();
    }
    let mut r = row(&img);
    r.content_type = "image/jpeg".into();
    (r.width, r.height) = (Some(6000), Some(4000));
    let got = m
        .insert(vec![r, row(&other)], &node, crate::Quota::default(), None)
        .await
        .unwrap();
    assert_eq!((got[0].width, got[0].height), (Some(6000), Some(4000)));
    assert_eq!((got[1].width, got[1].height), (None, None));
    assert_eq!(m.get(&img, None).await.unwrap().unwrap(), got[0]);
    assert_eq!(m.get(&other, None).await.unwrap().unwrap(), got[1]);
    let page = m
        .list(ListQuery::new(Order::OldestFirst, 2).after(got[0].seq - 1))
        .await
        .unwrap();
    assert_eq!(page, got);
    for (id, r) in [(&img, &got[0]), (&other, &got[1])] {
        assert_eq!(
            m.delete(id, None, &node, None).await.unwrap().as_ref(),
            Some(r)
        );
        m.release(id, &node).await.unwrap();
    }
}
