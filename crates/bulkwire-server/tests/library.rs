//! The media library's listing (`GET /v1/media`) and `GET /v1/me`, over
//! HTTP, on the embedded stores and (`rerun_on_shared_stores`) on
//! PostgreSQL + SeaweedFS: the rough edges of issue 23 ("The first hour").
//! A new upload was on the last of ~197 pages (oldest first, no search,
//! no type filter), and the page showed "token" as the signed-in name.

mod common;

use bulkwire_server::Limits;
use common::*;
use serde_json::Value;
use std::collections::HashSet;

/// `name` as a path segment: every byte but letters and digits escaped.
fn segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `PUT /v1/media/{name}`: the new item's id.
async fn upload(h: &Harness, name: &str, ct: &str) -> String {
    let r = h.put(&segment(name), ct, name.as_bytes().to_vec()).await;
    assert_eq!(r.status(), 201, "{name}");
    let j: Value = r.json().await.unwrap();
    assert_eq!(j["media"][0]["filename"], name);
    j["media"][0]["id"].as_str().unwrap().to_string()
}

async fn list(h: &Harness, query: &str) -> Value {
    let r = h.get(&format!("/v1/media?{query}")).send().await.unwrap();
    assert_eq!(r.status(), 200, "{query}");
    r.json().await.unwrap()
}

fn ids(j: &Value) -> Vec<String> {
    j["media"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

/// What `query` says, as a 400 must: the message.
async fn refused(h: &Harness, query: &str) -> String {
    let r = h.get(&format!("/v1/media?{query}")).send().await.unwrap();
    assert_eq!(r.status(), 400, "{query}");
    let j: Value = r.json().await.unwrap();
    assert_eq!(j["error"], "malformed", "{query}: {j}");
    j["message"].as_str().unwrap().to_string()
}

/// Percent-encoding of a query value (everything but letters and digits).
fn enc(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn the_newest_upload_is_listed_first_and_order_asc_keeps_upload_order() {
    let h = start(Limits::default()).await;
    let mut uploaded = Vec::new();
    for i in 0..5 {
        uploaded.push(upload(&h, &format!("f{i}.txt"), "text/plain").await);
    }
    let mut newest = uploaded.clone();
    newest.reverse();
    let j = list(&h, "").await;
    assert_eq!(ids(&j), newest, "the default is newest first");
    assert!(j["next"].is_null(), "{j}");
    assert_eq!(ids(&list(&h, "order=desc").await), newest);
    assert_eq!(ids(&list(&h, "order=asc").await), uploaded);
    // A new upload is on the first page, first.
    let last = upload(&h, "latest.txt", "text/plain").await;
    let j = list(&h, "limit=2").await;
    assert_eq!(ids(&j), [last.clone(), newest[0].clone()]);
    assert!(j["next"].is_string(), "{j}");
    let all: Vec<String> = h
        .list_pages("limit=2")
        .await
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(all[0], last);
    assert_eq!(all[1..], newest);
    // `next` is null on the last page, even when it is full.
    let j = list(&h, "limit=6").await;
    assert_eq!(ids(&j).len(), 6);
    assert!(j["next"].is_null(), "{j}");
    let j = list(&h, "limit=5").await;
    let j = list(
        &h,
        &format!("limit=5&after={}", j["next"].as_str().unwrap()),
    )
    .await;
    assert_eq!(ids(&j), [uploaded[0].clone()]);
    assert!(j["next"].is_null(), "{j}");
}

#[tokio::test]
async fn a_name_search_matches_any_part_of_a_name_in_any_case_wildcards_literal() {
    let h = start(Limits::default()).await;
    let a = upload(&h, "Report 100%_final\\x2.pdf", "application/pdf").await;
    let b = upload(&h, "report 1000Xfinal.pdf", "application/pdf").await;
    let c = upload(&h, "Café ÉCLAIR.JPG", "image/jpeg").await;
    let d = upload(&h, "notes.txt", "text/plain").await;
    for (q, want) in [
        ("report", vec![&b, &a]),
        ("REPORT", vec![&b, &a]),
        ("100%", vec![&a]),
        ("%_f", vec![&a]),
        ("_", vec![&a]),
        ("\\x", vec![&a]),
        ("0xF", vec![&b]),
        ("éclair", vec![&c]),
        ("CAFÉ", vec![&c]),
        (".txt", vec![&d]),
        ("nothing", vec![]),
        ("", vec![&d, &c, &b, &a]),
    ] {
        let got = ids(&list(&h, &format!("q={}", enc(q))).await);
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "q={q:?}");
    }
    // `+` is a space (a form's encoding), and search combines with order.
    let got = ids(&list(&h, "q=report+1&order=asc").await);
    assert_eq!(got, [a.clone(), b.clone()]);
}

#[tokio::test]
async fn a_type_filter_takes_one_type_or_a_top_level_wildcard() {
    let h = start(Limits::default()).await;
    let png = upload(&h, "a.png", "image/png").await;
    let jpg = upload(&h, "b.jpg", "Image/JPEG").await;
    let txt = upload(&h, "c.txt", "text/plain; charset=utf-8").await;
    let bin = upload(&h, "d.bin", "application/octet-stream").await;
    let pdf = upload(&h, "e.pdf", "application/pdf").await;
    for (t, want) in [
        ("image/*", vec![&jpg, &png]),
        ("image/png", vec![&png]),
        ("image/jpeg", vec![&jpg]),
        ("IMAGE/JPEG", vec![&jpg]),
        ("text/plain", vec![&txt]),
        ("text/*", vec![&txt]),
        ("application/*", vec![&pdf, &bin]),
        ("application/octet-stream", vec![&bin]),
        ("video/*", vec![]),
    ] {
        let got = ids(&list(&h, &format!("type={}", enc(t))).await);
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "type={t}");
    }
    let got = ids(&list(&h, "type=image/*&q=A&order=asc").await);
    assert_eq!(got, [png]);
}

#[tokio::test]
async fn a_bad_type_or_an_overlong_q_is_400_saying_why() {
    let h = start(Limits::default()).await;
    upload(&h, "a.png", "image/png").await;
    for t in [
        "image",
        "*/*",
        "image/p*",
        "text/plain;charset=utf-8",
        "im%20age/png",
    ] {
        let m = refused(&h, &format!("type={t}")).await;
        assert!(
            m.contains("type must be a media type such as image/png"),
            "{m}"
        );
        assert!(m.contains("wildcard such as image/*"), "{m}");
    }
    let long = "é".repeat(128); // 256 bytes: the most taken
    let none = list(&h, &format!("q={}", enc(&long))).await;
    assert_eq!(ids(&none), Vec::<String>::new());
    let m = refused(&h, &format!("q={}x", enc(&long))).await;
    assert!(m.contains("q is 257 bytes") && m.contains("256"), "{m}");
    let m = refused(&h, "q=%FF").await;
    assert!(m.contains("UTF-8"), "{m}");
    let m = refused(&h, "order=newest").await;
    assert!(m.contains("order must be desc"), "{m}");
    let m = refused(&h, "after=12").await;
    assert!(m.contains("after must be"), "{m}");
    let m = refused(&h, "bogus=1").await;
    assert!(m.contains("unknown query parameter \"bogus\""), "{m}");
    // A cursor is not read in the other order.
    upload(&h, "b.png", "image/png").await;
    let asc = list(&h, "order=asc&limit=1").await;
    let next = asc["next"].as_str().unwrap();
    let m = refused(&h, &format!("order=desc&after={next}")).await;
    assert!(m.contains("order=asc"), "{m}");
}

/// 50 items, paged 7 at a time in each order, while items are uploaded and
/// deleted between pages: every item there from the start and not deleted
/// comes exactly once, in order; the new ones come at the end of the
/// oldest-first walk and not in the newest-first one (they are newer than
/// its first page).
#[tokio::test]
async fn cursor_pages_go_through_50_items_in_both_orders_once_each() {
    let h = start(Limits::default()).await;
    for i in 0..50 {
        upload(&h, &format!("item-{i:02}.txt"), "text/plain").await;
    }
    for order in ["desc", "asc"] {
        let existing: Vec<String> = h
            .list_pages("order=asc&limit=1000")
            .await
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect();
        let (mut seen, mut added, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
        let mut q = format!("order={order}&limit=7");
        loop {
            let j = list(&h, &q).await;
            seen.extend(ids(&j));
            if seen.len() == 14 {
                for i in 0..3 {
                    added.push(upload(&h, &format!("new-{order}-{i}.txt"), "text/plain").await);
                }
                let unseen = existing.iter().find(|i| !seen.contains(i)).unwrap();
                for id in [unseen.clone(), seen[3].clone()] {
                    let r = h
                        .http
                        .delete(h.url(&format!("/v1/media/{id}")))
                        .bearer_auth(TOKEN)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 204);
                    deleted.push(id);
                }
            }
            match j["next"].as_str() {
                Some(n) => q = format!("order={order}&limit=7&after={n}"),
                None => break,
            }
        }
        let unique: HashSet<&String> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "order={order}: an item twice");
        let mut want: Vec<String> = existing
            .iter()
            .filter(|i| **i != deleted[0])
            .cloned()
            .collect();
        if order == "asc" {
            want.extend(added);
        } else {
            want.reverse();
        }
        assert_eq!(seen, want, "order={order}");
    }
}

#[tokio::test]
async fn me_names_the_principal_never_just_token_with_scopes_usage_and_quota() {
    let h = start(Limits::default()).await;
    let me = |r: reqwest::RequestBuilder| async move {
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "application/json");
        r.json::<Value>().await.unwrap()
    };
    let j = me(h.get("/v1/me")).await;
    // A `--token` flag is the administrator: owner and scope `admin`.
    assert_eq!(j["name"], "admin");
    assert_eq!(j["scopes"], serde_json::json!(["admin"]));
    assert_eq!(
        (j["via"].as_str(), j["everyone"].as_bool()),
        (Some("flag"), Some(true))
    );
    assert_eq!(j["usage"], serde_json::json!({"bytes": 0, "items": 0}));
    assert_eq!(
        j["quota"],
        serde_json::json!({"bytes": null, "items": null})
    );
    h.put("a.bin", "application/octet-stream", vec![1; 10])
        .await;
    let j = me(h.get("/v1/me")).await;
    assert_eq!(j["usage"], serde_json::json!({"bytes": 10, "items": 1}));
    let basic = h
        .http
        .get(h.url("/v1/me"))
        .basic_auth("alice", Some("wonder:land"));
    let j = me(basic).await;
    assert_eq!(
        (j["name"].as_str(), j["role"].as_str()),
        (Some("alice"), Some("admin"))
    );
    for r in [
        h.http.get(h.url("/v1/me")),
        h.http.get(h.url("/v1/me")).bearer_auth("wrong"),
        h.http
            .get(h.url("/v1/me"))
            .basic_auth("alice", Some("wonder")),
    ] {
        assert_eq!(r.send().await.unwrap().status(), 401);
    }
    let r = h
        .http
        .post(h.url("/v1/me"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "GET, HEAD");
    let r = h
        .http
        .head(h.url("/v1/me"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// `owner=` narrows to one owner within reach: the administrator lists
/// anyone's by name; an author lists only their own, so their own name (or
/// none) lists them and another owner's an empty page, never their own
/// items under another name.
#[tokio::test]
async fn owner_filter_is_within_reach() {
    use bulkwire_server::principal::Role;
    let h = start(Limits::default()).await;
    for u in ["ann", "bob"] {
        add_user(&h, u, "pw:of-a-user", Role::Author).await;
    }
    let as_user = |u: &str, query: &str| {
        let url = h.url(&format!("/v1/media?{query}"));
        h.http.get(url).basic_auth(u, Some("pw:of-a-user"))
    };
    let mut own = HashSet::new();
    for (u, n) in [("ann", 2), ("bob", 1)] {
        for i in 0..n {
            let r = h
                .http
                .put(h.url(&format!("/v1/media/{u}-{i}.txt")))
                .basic_auth(u, Some("pw:of-a-user"))
                .body(format!("{u} {i}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201);
            let j: Value = r.json().await.unwrap();
            own.insert((u, j["media"][0]["id"].as_str().unwrap().to_string()));
        }
    }
    let of = |u: &str| -> HashSet<String> {
        own.iter()
            .filter(|(o, _)| *o == u)
            .map(|(_, id)| id.clone())
            .collect()
    };
    let listed = |r: reqwest::RequestBuilder| async move {
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), 200);
        let j: Value = r.json().await.unwrap();
        ids(&j).into_iter().collect::<HashSet<String>>()
    };
    assert_eq!(listed(h.get("/v1/media?owner=ann")).await, of("ann"));
    assert_eq!(listed(h.get("/v1/media?owner=bob")).await, of("bob"));
    assert_eq!(listed(as_user("ann", "")).await, of("ann"));
    assert_eq!(listed(as_user("ann", "owner=ann")).await, of("ann"));
    assert_eq!(listed(as_user("ann", "owner=bob")).await, HashSet::new());
    assert_eq!(listed(as_user("bob", "owner=ann")).await, HashSet::new());
    assert_eq!(listed(as_user("bob", "owner=admin")).await, HashSet::new());
}

#[test]
fn rerun_on_shared_stores() {
    common::rerun_on_shared_stores(&[]);
}
