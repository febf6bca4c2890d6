//! The listing (`MediaStore::list`, [`list`](crate::list)): order, keyset
//! pages, the name search and the type filter, also while rows come and go.

use super::row;
use crate::list::fold_name;
use crate::{new_id, ListQuery, MediaRecord, MetaStore, NewMedia, Order, TypeFilter};
use std::collections::HashSet;

pub(super) async fn checks(m: &dyn MetaStore) {
    listing_order(m).await;
    listing_by_name(m).await;
    listing_by_type(m).await;
    listing_pages_across_inserts_and_deletes(m).await;
    listing_pages_while_rows_are_inserted_at_once(m).await;
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
    m.insert(new, &node, crate::Quota::default(), None)
        .await
        .unwrap()
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
                    assert!(m
                        .delete(&id, None, &new_id(), None)
                        .await
                        .unwrap()
                        .is_some());
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
