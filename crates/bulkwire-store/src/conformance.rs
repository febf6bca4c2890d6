//! One behaviour, every backend: checks that each `MetaStore` and
//! `BlobStore` implementation runs in its own tests (SQLite and files here,
//! PostgreSQL and S3 against real servers), so that handlers may rely on
//! the traits' documented contract whatever the backend.
//!
//! Built for tests only (`cfg(test)` or the `conformance` feature). Each
//! check uses ids of its own, so a store shared between tests is fine.

use crate::lease::{janitor_id, sweep_expired, Leases};
use crate::list::fold_name;
use crate::{
    new_id, token_id, BlobStore, Lease, ListQuery, MediaRecord, MetaStore, NewMedia, Order, Spool,
    TypeFilter, UploadRow, UserSet,
};
use bytes::Bytes;
use futures_util::StreamExt;
use std::collections::HashSet;
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
    listing_order(&*m).await;
    listing_by_name(&*m).await;
    listing_by_type(&*m).await;
    listing_pages_across_inserts_and_deletes(&*m).await;
    listing_pages_while_rows_are_inserted_at_once(&*m).await;
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
    let oldest = ListQuery::new(Order::OldestFirst, 2);
    let page = m.list(oldest.clone().after(r[0].seq - 1)).await.unwrap();
    assert_eq!(page, r[..2]);
    let page = m.list(oldest.after(r[1].seq)).await.unwrap();
    assert_eq!(page[0], r[2]);
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

fn named(id: &str, name: Option<&str>, content_type: &str) -> NewMedia {
    NewMedia {
        filename: name.map(str::to_string),
        content_type: content_type.into(),
        ..row(id)
    }
}

/// Inserts rows (leased, in one transaction) under new ids: their records.
async fn insert_named(m: &dyn MetaStore, rows: &[(Option<&str>, &str)]) -> Vec<MediaRecord> {
    let node = new_id();
    let mut new = Vec::new();
    for (name, ct) in rows {
        let id = new_id();
        m.lease(&id, &node).await.unwrap();
        new.push(named(&id, *name, ct));
    }
    m.insert(new, &node).await.unwrap()
}

fn ids(rows: &[MediaRecord]) -> Vec<&str> {
    rows.iter().map(|r| r.id.as_str()).collect()
}

/// The ids of `rows` that are among `mine`, in the order listed.
fn only<'a>(rows: &'a [MediaRecord], mine: &[MediaRecord]) -> Vec<&'a str> {
    let mine: HashSet<&str> = ids(mine).into_iter().collect();
    ids(rows).into_iter().filter(|i| mine.contains(i)).collect()
}

/// Newest first, oldest first, a page's `after` and `limit`; the default
/// order is newest first.
async fn listing_order(m: &dyn MetaStore) {
    assert_eq!(Order::default(), Order::NewestFirst);
    let tag = new_id();
    let names: Vec<String> = (0..5).map(|i| format!("{tag}-{i}.bin")).collect();
    let rows: Vec<_> = names
        .iter()
        .map(|n| (Some(n.as_str()), "application/octet-stream"))
        .collect();
    let r = insert_named(m, &rows).await;
    let mut newest: Vec<&str> = ids(&r);
    newest.reverse();
    // Unfiltered: the store may hold rows of other checks; ours come in
    // order among them, and every page is ordered.
    let all = m
        .list(ListQuery::new(Order::NewestFirst, 10_000))
        .await
        .unwrap();
    assert!(all.windows(2).all(|w| w[0].seq > w[1].seq), "newest first");
    assert_eq!(only(&all, &r), newest);
    let all = m
        .list(ListQuery::new(Order::OldestFirst, 10_000))
        .await
        .unwrap();
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq), "oldest first");
    assert_eq!(only(&all, &r), ids(&r));
    // Filtered to this check's rows: exact pages.
    let mine = |order, limit| ListQuery {
        name: Some(tag.clone()),
        ..ListQuery::new(order, limit)
    };
    let desc = m.list(mine(Order::NewestFirst, 10)).await.unwrap();
    assert_eq!(ids(&desc), newest);
    let asc = m.list(mine(Order::OldestFirst, 10)).await.unwrap();
    assert_eq!(asc, r);
    let page = m.list(mine(Order::NewestFirst, 2)).await.unwrap();
    assert_eq!(ids(&page), newest[..2]);
    let page = m
        .list(mine(Order::NewestFirst, 2).after(page[1].seq))
        .await
        .unwrap();
    assert_eq!(ids(&page), newest[2..4], "after is exclusive");
    let page = m
        .list(mine(Order::OldestFirst, 10).after(r[2].seq))
        .await
        .unwrap();
    assert_eq!(page, r[3..]);
    let page = m.list(mine(Order::NewestFirst, 10).after(r[0].seq)).await;
    assert_eq!(page.unwrap(), [], "nothing older than the oldest");
}

/// The name search: a case-insensitive substring, Unicode case included,
/// with `%`, `_`, `\` and the store's own escape character taken literally.
async fn listing_by_name(m: &dyn MetaStore) {
    let tag = new_id();
    let (a, b, c) = (
        format!("{tag} 100%_done\\x!.txt"),
        format!("{tag} 1000Xdone.txt"),
        format!("{tag} Éclair ΣΟΦΙΑΣ.JPG"),
    );
    let r = insert_named(
        m,
        &[
            (Some(&a), "text/plain"),
            (Some(&b), "text/plain"),
            (Some(&c), "image/jpeg"),
            (None, "text/plain"),
        ],
    )
    .await;
    let (ra, rb, rc) = (r[0].id.as_str(), r[1].id.as_str(), r[2].id.as_str());
    for (term, want) in [
        (tag.as_str(), vec![rc, rb, ra]),
        (&tag.to_uppercase(), vec![rc, rb, ra]),
        ("100%", vec![ra]),
        ("%_d", vec![ra]),
        ("_", vec![ra]),
        ("\\x", vec![ra]),
        ("x!", vec![ra]),
        ("0xD", vec![rb]),
        ("ÉCLAIR", vec![rc]),
        ("éclair", vec![rc]),
        ("Σοφιας", vec![rc]),
        (".jpg", vec![rc]),
        ("eclair", vec![]),
    ] {
        let q = ListQuery {
            name: Some(term.to_string()),
            ..ListQuery::new(Order::NewestFirst, 10_000)
        };
        let got = m.list(q).await.unwrap();
        assert_eq!(only(&got, &r), want, "name search {term:?}");
        // Whatever else the store holds: only names that contain it.
        for row in &got {
            let name = fold_name(row.filename.as_deref().unwrap_or(""));
            assert!(name.contains(&fold_name(term)), "{term:?} found {row:?}");
        }
    }
}

/// The type filter: one type, or a top-level type's every subtype,
/// compared without parameters and case.
async fn listing_by_type(m: &dyn MetaStore) {
    let tag = new_id();
    let n = |s: &str| format!("{tag}-{s}");
    let (p, j, t, v, s) = (n("p.png"), n("j.jpg"), n("t.txt"), n("v.mp4"), n("s.svg"));
    let r = insert_named(
        m,
        &[
            (Some(&p), "Image/PNG"),
            (Some(&j), "image/jpeg"),
            (Some(&t), "text/plain; charset=utf-8"),
            (Some(&v), "video/mp4"),
            (Some(&s), "image/svg+xml"),
        ],
    )
    .await;
    let id = |i: usize| r[i].id.as_str();
    for (filter, want) in [
        ("image/png", vec![id(0)]),
        ("IMAGE/png", vec![id(0)]),
        ("image/*", vec![id(4), id(1), id(0)]),
        ("text/plain", vec![id(2)]),
        ("text/*", vec![id(2)]),
        ("image/svg+xml", vec![id(4)]),
        ("video/*", vec![id(3)]),
        ("application/*", vec![]),
        ("image/gif", vec![]),
    ] {
        let f = TypeFilter::parse(filter).unwrap();
        let q = ListQuery {
            name: Some(tag.clone()),
            media_type: Some(f.clone()),
            ..ListQuery::new(Order::NewestFirst, 100)
        };
        assert_eq!(ids(&m.list(q).await.unwrap()), want, "type {filter}");
        // Unfiltered by name: nothing of another type, ours in order.
        let q = ListQuery {
            media_type: Some(f),
            ..ListQuery::new(Order::OldestFirst, 10_000)
        };
        let got = m.list(q).await.unwrap();
        let mut asc = want.clone();
        asc.reverse();
        assert_eq!(only(&got, &r), asc, "type {filter}, oldest first");
        let essence = filter.to_ascii_lowercase();
        for row in &got {
            let ct = row.content_type.to_ascii_lowercase();
            let ok = match essence.strip_suffix('*') {
                Some(top) => ct.starts_with(top),
                None => ct.split(';').next().unwrap().trim() == essence,
            };
            assert!(ok, "type {filter} found {row:?}");
        }
    }
}

/// Paging through 50 rows 7 at a time while rows are inserted and deleted
/// between pages: no row twice, none of those there from the start and
/// still there at the end missing, each page past the last; new rows show
/// in the oldest-first walk (they are past its cursor) and not in the
/// newest-first one (they are before it).
async fn listing_pages_across_inserts_and_deletes(m: &dyn MetaStore) {
    for order in [Order::NewestFirst, Order::OldestFirst] {
        let tag = new_id();
        let names: Vec<String> = (0..50).map(|i| format!("{tag}-{i:02}")).collect();
        let rows: Vec<_> = names
            .iter()
            .map(|n| (Some(n.as_str()), "text/plain"))
            .collect();
        let first = insert_named(m, &rows).await;
        let q = ListQuery {
            name: Some(tag.clone()),
            ..ListQuery::new(order, 7)
        };
        let (mut seen, mut added, mut deleted) = (Vec::<MediaRecord>::new(), vec![], vec![]);
        let mut page = m.list(q.clone()).await.unwrap();
        while let Some(last) = page.last().map(|r| r.seq) {
            seen.extend(page);
            if seen.len() == 14 {
                let more: Vec<String> = (0..5).map(|i| format!("{tag}-new-{i}")).collect();
                let more: Vec<_> = more
                    .iter()
                    .map(|n| (Some(n.as_str()), "text/plain"))
                    .collect();
                added = insert_named(m, &more).await;
                // One row not seen yet, and one seen already.
                let unseen = first.iter().find(|r| !seen.contains(r)).unwrap().id.clone();
                for id in [unseen, seen[3].id.clone()] {
                    assert!(m.delete(&id, &new_id()).await.unwrap());
                    deleted.push(id);
                }
            }
            page = m.list(q.clone().after(last)).await.unwrap();
        }
        let got = ids(&seen);
        let unique: HashSet<&str> = got.iter().copied().collect();
        assert_eq!(unique.len(), got.len(), "{order:?}: a row listed twice");
        let ordered = match order {
            Order::NewestFirst => seen.windows(2).all(|w| w[0].seq > w[1].seq),
            Order::OldestFirst => seen.windows(2).all(|w| w[0].seq < w[1].seq),
        };
        assert!(ordered, "{order:?}: out of order");
        let mut want: Vec<&str> = ids(&first)
            .into_iter()
            .filter(|i| *i != deleted[0])
            .collect();
        if order == Order::OldestFirst {
            want.extend(ids(&added));
        } else {
            want.reverse();
        }
        assert_eq!(got, want, "{order:?}");
    }
}

/// Paging 3 rows at a time while four writers insert rows one by one at
/// the same time (on PostgreSQL from other connections): oldest first, the
/// walk goes on from its last cursor once the inserts are done and must
/// then have listed every row exactly once (a row committed behind the
/// cursor would be missed for good: a race this catches only by chance,
/// which PostgreSQL's insert lock rules out); newest first, every row from
/// the first it listed down.
async fn listing_pages_while_rows_are_inserted_at_once(m: &dyn MetaStore) {
    for order in [Order::OldestFirst, Order::NewestFirst] {
        let tag = new_id();
        let names: Vec<String> = (0..12).map(|i| format!("{tag}-{i:02}")).collect();
        let rows: Vec<_> = names
            .iter()
            .map(|n| (Some(n.as_str()), "text/plain"))
            .collect();
        let before = insert_named(m, &rows).await;
        let q = ListQuery {
            name: Some(tag.clone()),
            ..ListQuery::new(order, 3)
        };
        // Four writers at once, so that commits may race each other too.
        let insert = futures_util::future::join_all((0..4).map(|w| {
            let tag = &tag;
            async move {
                let mut added = Vec::new();
                for i in 0..5 {
                    let name = format!("{tag}-at-once-{w}-{i}");
                    added.extend(insert_named(m, &[(Some(&name), "text/plain")]).await);
                }
                added
            }
        }));
        let walk = async {
            let mut seen = Vec::<MediaRecord>::new();
            let mut page = m.list(q.clone()).await.unwrap();
            while !page.is_empty() {
                seen.extend(page);
                page = m
                    .list(q.clone().after(seen.last().unwrap().seq))
                    .await
                    .unwrap();
            }
            seen
        };
        let (added, mut seen) = tokio::join!(insert, walk);
        let mut added: Vec<MediaRecord> = added.into_iter().flatten().collect();
        added.sort_by_key(|r| r.seq);
        if order == Order::OldestFirst {
            loop {
                let last = seen.last().unwrap().seq;
                let page = m.list(q.clone().after(last)).await.unwrap();
                if page.is_empty() {
                    break;
                }
                seen.extend(page);
            }
        }
        // Every row from where the walk began on, once, in order.
        let start = seen[0].seq;
        let mut want: Vec<MediaRecord> = before.into_iter().chain(added).collect();
        want.sort_by_key(|r| r.seq);
        if order == Order::NewestFirst {
            want.retain(|r| r.seq <= start);
            want.reverse();
        }
        assert_eq!(ids(&seen), ids(&want), "{order:?}");
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
