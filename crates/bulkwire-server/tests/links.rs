//! Media links (`bulkwire_server::links`) and CORS, over HTTP: a link fetches its item without
//! credentials, with every header of the authenticated download; a tampered, foreign or expired
//! link is 403 whether or not the id exists; a deleted item's link is 404 at once; a link grants
//! nothing but GET/HEAD of its item; rotating the key revokes every link; URLs are absolute,
//! from `public_url` when set; a 201 carries `Location`; CORS preflights need no credentials and
//! only listed origins get CORS headers.

mod common;

use bulkwire_server::links::KEY_NAME;
use bulkwire_server::{Config, Limits, Server};
use common::*;
use serde_json::Value;
use std::time::Duration;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n not really an image";

/// Uploads `data` as `name` and returns its media JSON.
async fn upload(h: &Harness, name: &str, ct: &str, data: &[u8]) -> Value {
    let r = h.put(name, ct, data.to_vec()).await;
    assert_eq!(r.status(), 201);
    let j: Value = r.json().await.unwrap();
    j["media"][0].clone()
}

fn anonymous() -> reqwest::Client {
    client()
}

#[tokio::test]
async fn a_link_downloads_without_credentials_with_every_header() {
    let h = start(Limits::default()).await;
    let m = upload(&h, "pic.png", "image/png", PNG).await;
    let url = m["url"].as_str().unwrap();
    let id = m["id"].as_str().unwrap();
    assert!(
        url.starts_with(&h.url(&format!("/v1/media/{id}?sig="))),
        "{url}"
    );
    let r = anonymous().get(url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let hs = r.headers().clone();
    assert_eq!(hs["content-type"], "image/png");
    assert_eq!(hs["x-content-type-options"], "nosniff");
    assert!(hs["content-disposition"]
        .to_str()
        .unwrap()
        .starts_with("inline"));
    let etag = hs["etag"].to_str().unwrap().to_string();
    assert_eq!(r.bytes().await.unwrap(), PNG);
    let part = anonymous()
        .get(url)
        .header("range", "bytes=0-3")
        .send()
        .await
        .unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(part.bytes().await.unwrap(), &PNG[..4]);
    let same = anonymous()
        .get(url)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(same.status(), 304);
    let head = anonymous().head(url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(
        head.headers()["content-length"],
        PNG.len().to_string().as_str()
    );

    // An active type keeps being an attachment through a link.
    let svg = upload(&h, "x.svg", "image/svg+xml", b"<svg/>").await;
    let r = anonymous()
        .get(svg["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .starts_with("attachment"));
}

#[tokio::test]
async fn tampered_foreign_and_made_up_links_are_403_alike() {
    let h = start(Limits::default()).await;
    let a = upload(&h, "a.bin", "application/octet-stream", b"a").await;
    let b = upload(&h, "b.bin", "application/octet-stream", b"b").await;
    let (a_url, b_id) = (a["url"].as_str().unwrap(), b["id"].as_str().unwrap());
    let a_sig = a_url.split_once("sig=").unwrap().1;
    let mut flipped = a_sig.as_bytes().to_vec();
    flipped[0] = if flipped[0] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    let a_id = a["id"].as_str().unwrap();
    let unknown = "0123456789abcdef0123456789abcdef";
    let cases = [
        format!("/v1/media/{a_id}?sig={flipped}"),
        format!("/v1/media/{b_id}?sig={a_sig}"),
        format!("/v1/media/{unknown}?sig={a_sig}"),
        format!("/v1/media/{a_id}?sig="),
        format!("/v1/media/{a_id}?exp=99999999999&sig={a_sig}"),
    ];
    let mut bodies = Vec::new();
    for path in &cases {
        let r = anonymous().get(h.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 403, "{path}");
        let j: Value = r.json().await.unwrap();
        bodies.push(j["message"].as_str().unwrap().to_string());
    }
    // The same answer for an id that exists and one that does not.
    assert!(bodies.iter().all(|b| b == "invalid link"), "{bodies:?}");
}

#[tokio::test]
async fn a_deleted_items_link_is_404_at_once() {
    let h = start(Limits::default()).await;
    let m = upload(&h, "gone.bin", "application/octet-stream", b"x").await;
    let url = m["url"].as_str().unwrap();
    assert_eq!(anonymous().get(url).send().await.unwrap().status(), 200);
    let id = m["id"].as_str().unwrap();
    let d = h
        .http
        .delete(h.url(&format!("/v1/media/{id}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(d.status(), 204);
    assert_eq!(anonymous().get(url).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn a_link_grants_no_listing_deleting_or_uploading() {
    let h = start(Limits::default()).await;
    let m = upload(&h, "keep.bin", "application/octet-stream", b"keep").await;
    let url = m["url"].as_str().unwrap();
    let query = url.split_once('?').unwrap().1;
    let c = anonymous();
    let list = c
        .get(h.url(&format!("/v1/media?{query}")))
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), 401);
    assert_eq!(c.delete(url).send().await.unwrap().status(), 401);
    let put = c.put(url).body("overwrite").send().await.unwrap();
    assert_eq!(put.status(), 401);
    let tus = c
        .post(h.url(&format!("/v1/uploads?{query}")))
        .header("tus-resumable", "1.0.0")
        .header("upload-length", "4")
        .send()
        .await
        .unwrap();
    assert_eq!(tus.status(), 401);
    assert_eq!(h.list_all().await.len(), 1);
    assert_eq!(
        c.get(url).send().await.unwrap().bytes().await.unwrap(),
        "keep"
    );
}

#[tokio::test]
async fn links_expire_after_link_ttl() {
    let h = start_configured(|c| c.link_ttl = Some(1)).await;
    let m = upload(&h, "soon.bin", "application/octet-stream", b"x").await;
    let url = m["url"].as_str().unwrap();
    assert!(url.contains("?exp="), "{url}");
    assert_eq!(anonymous().get(url).send().await.unwrap().status(), 200);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let r = anonymous().get(url).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let j: Value = r.json().await.unwrap();
    assert_eq!(j["message"], "expired link");
    // Credentials still work.
    let id = m["id"].as_str().unwrap();
    assert_eq!(h.download(&format!("/v1/media/{id}")).await, b"x");
}

#[tokio::test]
async fn rotating_the_key_revokes_every_link() {
    let h = start_configured(|c| c.limits.auth_cache_ms = 1000).await;
    let m = upload(&h, "r.bin", "application/octet-stream", b"r").await;
    let old = m["url"].as_str().unwrap().to_string();
    assert_eq!(anonymous().get(&old).send().await.unwrap().status(), 200);
    let meta = &h.srv.state.meta;
    meta.secret_set(KEY_NAME, vec![9; 32]).await.unwrap();
    let mut status = 200;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        status = anonymous()
            .get(&old)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        if status == 403 {
            break;
        }
    }
    assert_eq!(status, 403, "the old link still works after the rotation");
    let fresh = h.list_all().await[0]["url"].as_str().unwrap().to_string();
    assert_ne!(fresh, old);
    assert_eq!(anonymous().get(&fresh).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn urls_are_absolute_from_public_url_and_a_201_has_location() {
    let h = start_configured(|c| c.public_url = Some("https://media.example.com".into())).await;
    let r = h
        .put("p.bin", "application/octet-stream", b"p".to_vec())
        .await;
    assert_eq!(r.status(), 201);
    let loc = r.headers()["location"].to_str().unwrap().to_string();
    let j: Value = r.json().await.unwrap();
    let id = j["media"][0]["id"].as_str().unwrap();
    assert_eq!(loc, format!("https://media.example.com/v1/media/{id}"));
    let url = j["media"][0]["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("https://media.example.com/v1/media/{id}?sig=")),
        "{url}"
    );
    let listed = h.list_all().await;
    assert!(listed[0]["url"]
        .as_str()
        .unwrap()
        .starts_with("https://media.example.com/"));

    let bad = Config {
        public_url: Some("https://media.example.com/base/".into()),
        ..config(h.dir.path(), Limits::default())
    };
    let e = Server::bind(bad).await.err().unwrap().to_string();
    assert!(e.contains("public_url"), "{e}");
}

#[tokio::test]
async fn cors_preflight_needs_no_credentials_and_only_listed_origins_get_headers() {
    let app = "http://app.example:3000";
    let h = start_configured(|c| c.cors_origins = vec![app.into()]).await;
    let pre = anonymous()
        .request(reqwest::Method::OPTIONS, h.url("/v1/uploads"))
        .header("origin", app)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, tus-resumable, upload-length",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 204);
    assert_eq!(pre.headers()["access-control-allow-origin"], app);
    let allow = pre.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap();
    assert!(
        allow.contains("Authorization") && allow.contains("Upload-Length"),
        "{allow}"
    );

    let r = h
        .http
        .post(h.url("/v1/uploads"))
        .bearer_auth(TOKEN)
        .header("origin", app)
        .header("tus-resumable", "1.0.0")
        .header("upload-length", "3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(r.headers()["access-control-allow-origin"], app);
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap();
    assert!(
        exposed.contains("Location") && exposed.contains("Upload-Offset"),
        "{exposed}"
    );

    let stranger = h
        .http
        .get(h.url("/v1/media"))
        .bearer_auth(TOKEN)
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(stranger.status(), 200);
    assert!(stranger
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    let pre = anonymous()
        .request(reqwest::Method::OPTIONS, h.url("/v1/media"))
        .header("origin", "http://evil.example")
        .header("access-control-request-method", "DELETE")
        .send()
        .await
        .unwrap();
    assert!(pre.headers().get("access-control-allow-origin").is_none());
}

/// `Link: <…>; rel="related"` from the value of a tus answer's `Link` header.
fn link_target(r: &reqwest::Response) -> String {
    let v = r.headers()["link"].to_str().unwrap().to_string();
    assert!(v.ends_with(">; rel=\"related\""), "{v}");
    v.trim_start_matches('<')
        .split('>')
        .next()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_finished_resumable_upload_answers_with_its_media_link() {
    let h = start(Limits::default()).await;
    let data = b"resumable bytes".to_vec();
    let c = h
        .http
        .post(h.url("/v1/uploads"))
        .bearer_auth(TOKEN)
        .header("tus-resumable", "1.0.0")
        .header("upload-length", data.len().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(c.status(), 201);
    assert!(c.headers().get("link").is_none(), "not finished yet");
    let loc = c.headers()["location"].to_str().unwrap().to_string();
    let patch = |body: Vec<u8>, offset: usize| {
        h.http
            .patch(&loc)
            .bearer_auth(TOKEN)
            .header("tus-resumable", "1.0.0")
            .header("upload-offset", offset.to_string())
            .header("content-type", "application/offset+octet-stream")
            .body(body)
    };
    let first = patch(data[..5].to_vec(), 0).send().await.unwrap();
    assert_eq!(first.status(), 204);
    assert!(first.headers().get("link").is_none(), "not finished yet");
    let last = patch(data[5..].to_vec(), 5).send().await.unwrap();
    assert_eq!(last.status(), 204);
    let link = link_target(&last);
    let id = loc.rsplit('/').next().unwrap();
    assert!(
        link.starts_with(&h.url(&format!("/v1/media/{id}?sig="))),
        "{link}"
    );
    let got = anonymous().get(&link).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.bytes().await.unwrap(), data);
    let head = h
        .http
        .head(&loc)
        .bearer_auth(TOKEN)
        .header("tus-resumable", "1.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(link_target(&head), link);
}
