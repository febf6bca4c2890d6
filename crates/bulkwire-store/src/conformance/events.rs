//! The outbox: events written in the transactions of the changes they
//! report (and only of those that commit), read back in order, delivered
//! per endpoint under leases with the events of one item in order.

use super::row;
use crate::{new_id, Event, EventOf, MediaRecord, MetaStore, NewEvent, Quota, Settle, UploadRow};
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn checks(m: Arc<dyn MetaStore>) {
    written_with_their_changes_only(&*m).await;
    delivered_in_item_order_under_leases(&*m).await;
    claims_are_exclusive(m.clone()).await;
    failed_retried_and_pruned(&*m).await;
}

fn event_of(kind: &'static str) -> EventOf {
    Arc::new(move |r: &MediaRecord| {
        let data = serde_json::json!({"id": r.id, "size": r.size});
        NewEvent::new(&r.id, Event::new(kind, "n", &r.owner, Some("req-1"), data))
    })
}

/// Every event past `after`, as (type, item id in `data`).
async fn since(m: &dyn MetaStore, after: i64) -> Vec<(String, String)> {
    let got = m.events(after, None, 10_000).await.unwrap();
    got.iter()
        .map(|s| {
            let id = s.event.data["id"].as_str().unwrap_or_default().to_string();
            (s.event.kind.clone(), id)
        })
        .collect()
}

async fn last_seq(m: &dyn MetaStore) -> i64 {
    let mut after = 0;
    loop {
        let page = m.events(after, None, 1000).await.unwrap();
        match page.last() {
            Some(s) => after = s.seq,
            None => {
                // The head is the same last event, in one lookup (other
                // tests may write meanwhile: never behind it).
                assert!(m.events_head().await.unwrap() >= after);
                return after;
            }
        }
    }
}

async fn written_with_their_changes_only(m: &dyn MetaStore) {
    let start = last_seq(m).await;
    let node = new_id();
    let (a, b) = (new_id(), new_id());
    for id in [&a, &b] {
        m.lease(id, &node).await.unwrap();
    }
    let created = event_of("media.created");
    m.insert(
        vec![row(&a)],
        &node,
        Quota::default(),
        Some(created.clone()),
    )
    .await
    .unwrap();
    // An insert that fails (a quota) writes no event, nor its row.
    let tight = Quota {
        bytes: Some(0),
        items: None,
    };
    let e = m
        .insert(vec![row(&b)], &node, tight, Some(created.clone()))
        .await
        .unwrap_err();
    assert!(e.over_quota.is_some());
    m.release(&b, &node).await.unwrap();
    // A delete of a missing row writes none; of a present one, one.
    let deleted = event_of("media.deleted");
    assert!(m
        .delete(&new_id(), None, &node, Some(deleted.clone()))
        .await
        .unwrap()
        .is_none());
    m.delete(&a, None, &node, Some(deleted))
        .await
        .unwrap()
        .unwrap();
    m.release(&a, &node).await.unwrap();
    // Resumable uploads: created, then removed (terminated).
    let u = new_id();
    let up = UploadRow {
        id: u.clone(),
        owner: "admin".into(),
        expires: 4_000_000_000,
        gen: 1,
        open: true,
        state: "{}".into(),
    };
    let ev = |kind| {
        let data = serde_json::json!({"id": u});
        NewEvent::new(&u, Event::new(kind, "n", "admin", None, data))
    };
    assert!(m
        .upload_create(up, 100, None, Some(ev("upload.created")))
        .await
        .unwrap());
    assert!(!m
        .upload_remove(&u, 99, Some(ev("upload.terminated")))
        .await
        .unwrap());
    assert!(m
        .upload_remove(&u, 1, Some(ev("upload.terminated")))
        .await
        .unwrap());
    let want = [
        ("media.created", a.clone()),
        ("media.deleted", a.clone()),
        ("upload.created", u.clone()),
        ("upload.terminated", u.clone()),
    ]
    .map(|(k, i)| (k.to_string(), i));
    assert_eq!(since(m, start).await, want);
    // The owner filter.
    let mine = m.events(start, Some("nobody-at-all"), 100).await.unwrap();
    assert!(mine.is_empty());
    let theirs = m.events(start, Some("admin"), 100).await.unwrap();
    assert_eq!(theirs.len(), 4);
    assert_eq!(theirs[0].event.request_id.as_deref(), Some("req-1"));
}

/// Writes one event about `item` (an upload's creation).
async fn emit(m: &dyn MetaStore, item: &str, kind: &str) {
    let up = UploadRow {
        id: new_id(),
        owner: "admin".into(),
        expires: 4_000_000_000,
        gen: 1,
        open: false,
        state: "{}".into(),
    };
    let data = serde_json::json!({"id": item});
    let e = NewEvent::new(item, Event::new(kind, "n", "admin", None, data));
    assert!(m
        .upload_create(up, usize::MAX, None, Some(e))
        .await
        .unwrap());
}

async fn plan_all(m: &dyn MetaStore, endpoint: &str, kinds: &[String]) {
    while m.deliveries_plan(endpoint, kinds, 50).await.unwrap() > 0 {}
}

/// Plans and delivers everything the endpoint has, until nothing is due
/// (the events of one item come one claim after another).
async fn drain(m: &dyn MetaStore, endpoint: &str) {
    plan_all(m, endpoint, &["*".to_string()]).await;
    let lease = Duration::from_secs(60);
    loop {
        let got = m
            .deliveries_claim(endpoint, "drain", lease, 1000)
            .await
            .unwrap();
        if got.is_empty() {
            return;
        }
        for d in got {
            m.delivery_settle(endpoint, d.seq, "drain", Settle::Delivered)
                .await
                .unwrap();
        }
    }
}

async fn delivered_in_item_order_under_leases(m: &dyn MetaStore) {
    let endpoint = format!("ep-{}", new_id());
    let all = vec!["*".to_string()];
    // Past events are planned too: deliver them first.
    drain(m, &endpoint).await;
    let (x, y) = (new_id(), new_id());
    emit(m, &x, "upload.created").await;
    emit(m, &y, "upload.created").await;
    emit(m, &x, "media.created").await;
    plan_all(m, &endpoint, &all).await;
    let lease = Duration::from_secs(60);
    // x's second event waits for its first: one of x, one of y.
    let got = m.deliveries_claim(&endpoint, "a", lease, 10).await.unwrap();
    let ids: Vec<_> = got
        .iter()
        .map(|d| d.event.data["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, [x.clone(), y.clone()], "{got:?}");
    // Claimed: nobody else gets them, nor x's next.
    assert!(m
        .deliveries_claim(&endpoint, "b", lease, 10)
        .await
        .unwrap()
        .is_empty());
    // x's first is retried later: its next still waits (order holds).
    let retry = Settle::Retry {
        after: Duration::from_secs(3600),
        error: "503".into(),
    };
    assert!(m
        .delivery_settle(&endpoint, got[0].seq, "a", retry)
        .await
        .unwrap());
    assert!(
        !m.delivery_settle(&endpoint, got[1].seq, "b", Settle::Delivered)
            .await
            .unwrap(),
        "not b's claim"
    );
    assert!(m
        .delivery_settle(&endpoint, got[1].seq, "a", Settle::Delivered)
        .await
        .unwrap());
    assert!(m
        .deliveries_claim(&endpoint, "b", lease, 10)
        .await
        .unwrap()
        .is_empty());
    // A short lease runs out: another node takes the delivery.
    let z = new_id();
    emit(m, &z, "upload.created").await;
    plan_all(m, &endpoint, &all).await;
    let short = m
        .deliveries_claim(&endpoint, "dies", Duration::from_millis(1), 10)
        .await
        .unwrap();
    assert_eq!(short.len(), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = m.deliveries_claim(&endpoint, "c", lease, 10).await.unwrap();
    assert_eq!(
        again.iter().map(|d| d.seq).collect::<Vec<_>>(),
        [short[0].seq]
    );
    assert!(!m
        .delivery_settle(&endpoint, short[0].seq, "dies", Settle::Delivered)
        .await
        .unwrap());
    assert!(m
        .delivery_settle(&endpoint, short[0].seq, "c", Settle::Delivered)
        .await
        .unwrap());
    // A type filter: only the types asked for are planned.
    let only = format!("ep-{}", new_id());
    let kinds = vec!["media.created".to_string()];
    let start = last_seq(m).await;
    m.deliveries_begin(&only).await.unwrap();
    let w = new_id();
    emit(m, &w, "upload.created").await;
    emit(m, &w, "media.created").await;
    // A new endpoint began at the end of the outbox: only what came since.
    plan_all(m, &only, &kinds).await;
    m.deliveries_begin(&only).await.unwrap();
    let got = m.deliveries_claim(&only, "a", lease, 10_000).await.unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].seq > start && got[0].event.kind == "media.created");
    assert_eq!(got[0].event.data["id"], w.as_str());
}

/// Two claimers at once never get the same delivery.
async fn claims_are_exclusive(m: Arc<dyn MetaStore>) {
    let endpoint = format!("ep-{}", new_id());
    let all = vec!["*".to_string()];
    drain(&*m, &endpoint).await;
    let lease = Duration::from_secs(60);
    for _ in 0..20 {
        emit(&*m, &new_id(), "upload.created").await;
    }
    plan_all(&*m, &endpoint, &all).await;
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let (m, endpoint) = (m.clone(), endpoint.clone());
            tokio::spawn(async move {
                let node = format!("n{i}");
                let mut mine = Vec::new();
                loop {
                    let got = m
                        .deliveries_claim(&endpoint, &node, lease, 3)
                        .await
                        .unwrap();
                    if got.is_empty() {
                        return mine;
                    }
                    mine.extend(got.iter().map(|d| d.seq));
                }
            })
        })
        .collect();
    let mut seen = Vec::new();
    for t in tasks {
        seen.extend(t.await.unwrap());
    }
    let n = seen.len();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!((seen.len(), n), (20, 20), "each delivery claimed once");
}

async fn failed_retried_and_pruned(m: &dyn MetaStore) {
    let endpoint = format!("ep-{}", new_id());
    let all = vec!["*".to_string()];
    drain(m, &endpoint).await;
    let lease = Duration::from_secs(60);
    let item = new_id();
    emit(m, &item, "upload.created").await;
    plan_all(m, &endpoint, &all).await;
    let d = m.deliveries_claim(&endpoint, "a", lease, 10).await.unwrap();
    let waiting = m.outbox_stats().await.unwrap();
    assert!(waiting.pending >= 1, "{waiting:?}");
    assert!(
        waiting.oldest_pending_s <= waiting.oldest_age_s,
        "{waiting:?}"
    );
    assert!(m.events_head().await.unwrap() >= d[0].seq);
    let fail = Settle::Failed {
        error: "connection refused".into(),
    };
    assert!(m
        .delivery_settle(&endpoint, d[0].seq, "a", fail)
        .await
        .unwrap());
    let failed = m.deliveries_failed(100_000).await.unwrap();
    let f = failed
        .iter()
        .find(|f| f.seq == d[0].seq)
        .expect("listed as failed");
    assert_eq!((f.attempts, f.error.as_str()), (1, "connection refused"));
    let stats = m.outbox_stats().await.unwrap();
    assert!(stats.failed >= 1 && stats.events >= 1);
    // A failed delivery keeps its event past any age.
    m.events_prune(Duration::ZERO).await.unwrap();
    assert!(m.events(d[0].seq - 1, None, 1).await.unwrap()[0].seq == d[0].seq);
    // Retried by its event's id: due again, delivered, then prunable.
    assert_eq!(m.deliveries_retry(Some(&f.event.id)).await.unwrap(), 1);
    let d = m.deliveries_claim(&endpoint, "b", lease, 10).await.unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].attempts, 1);
    m.delivery_settle(&endpoint, d[0].seq, "b", Settle::Delivered)
        .await
        .unwrap();
    m.events_prune(Duration::ZERO).await.unwrap();
    let left = m.events(d[0].seq - 1, None, 1).await.unwrap();
    assert!(
        left.first().is_none_or(|s| s.seq != d[0].seq),
        "pruned once delivered"
    );
}
