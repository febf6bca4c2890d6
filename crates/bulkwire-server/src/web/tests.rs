use super::*;
use http_body_util::BodyExt;

async fn body(r: Response) -> Vec<u8> {
    r.into_body().collect().await.unwrap().to_bytes().to_vec()
}

fn header<'a>(r: &'a Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name}: {:?}", r.headers()))
        .to_str()
        .unwrap()
}

fn assert_secured(r: &Response) {
    assert_eq!(header(r, "content-security-policy"), CSP);
    assert_eq!(header(r, "x-content-type-options"), "nosniff");
    assert_eq!(header(r, "referrer-policy"), "no-referrer");
}

const PAGES: [(&str, &str); 3] = [
    ("/", "text/html; charset=utf-8"),
    ("/assets/app.js", "text/javascript; charset=utf-8"),
    ("/assets/app.css", "text/css; charset=utf-8"),
];

#[tokio::test]
async fn get_serves_each_asset_with_its_headers() {
    for (path, ct) in PAGES {
        let r = route(&Method::GET, path, &HeaderMap::new()).unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_secured(&r);
        assert_eq!(header(&r, "content-type"), ct, "{path}");
        assert_eq!(header(&r, "cache-control"), "no-cache", "{path}");
        let etag = header(&r, "etag").to_string();
        assert!(etag.len() == 34 && etag.starts_with('"') && etag.ends_with('"'));
        let len: usize = header(&r, "content-length").parse().unwrap();
        let b = body(r).await;
        assert_eq!(b.len(), len, "{path}");
        let a = ASSETS.iter().find(|a| a.path == path).unwrap();
        assert_eq!(b, a.bytes, "{path}");
    }
}

#[tokio::test]
async fn head_has_the_headers_of_get_and_no_body() {
    for (path, _) in PAGES {
        let get = route(&Method::GET, path, &HeaderMap::new()).unwrap();
        let head = route(&Method::HEAD, path, &HeaderMap::new()).unwrap();
        assert_eq!(head.status(), StatusCode::OK);
        for name in [
            "content-type",
            "content-length",
            "etag",
            "cache-control",
            "content-security-policy",
            "x-content-type-options",
            "referrer-policy",
        ] {
            assert_eq!(header(&head, name), header(&get, name), "{path} {name}");
        }
        assert!(body(head).await.is_empty(), "{path}");
    }
}

#[test]
fn etags_are_stable_and_differ_between_assets() {
    let tag = |p| header(&route(&Method::GET, p, &HeaderMap::new()).unwrap(), "etag").to_string();
    assert_eq!(tag("/"), tag("/"));
    let mut all: Vec<String> = PAGES.iter().map(|(p, _)| tag(p)).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), PAGES.len());
}

#[tokio::test]
async fn if_none_match_with_the_etag_is_304() {
    let etag = header(
        &route(&Method::GET, "/", &HeaderMap::new()).unwrap(),
        "etag",
    )
    .to_string();
    for (value, fresh) in [
        (etag.clone(), true),
        (format!("W/{etag}"), true),
        (format!("\"other\", {etag}"), true),
        ("*".to_string(), true),
        ("\"other\"".to_string(), false),
    ] {
        let mut h = HeaderMap::new();
        h.insert(IF_NONE_MATCH, HeaderValue::from_str(&value).unwrap());
        let r = route(&Method::GET, "/", &h).unwrap();
        let want = if fresh {
            StatusCode::NOT_MODIFIED
        } else {
            StatusCode::OK
        };
        assert_eq!(r.status(), want, "{value}");
        assert_eq!(header(&r, "etag"), etag);
        assert_secured(&r);
        assert_eq!(body(r).await.is_empty(), fresh, "{value}");
    }
}

#[tokio::test]
async fn unknown_asset_is_404_json_and_secured() {
    for path in [
        "/assets/",
        "/assets/nope.js",
        "/assets/app.js/x",
        "/assets/../app.js",
    ] {
        let r = route(&Method::GET, path, &HeaderMap::new()).unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        assert_secured(&r);
        assert_eq!(header(&r, "content-type"), "application/json");
        let j: serde_json::Value = serde_json::from_slice(&body(r).await).unwrap();
        assert_eq!(j["error"], "not_found");
    }
}

#[test]
fn other_methods_are_405_with_allow() {
    for m in [
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
    ] {
        for path in ["/", "/assets/app.js", "/assets/nope"] {
            let r = route(&m, path, &HeaderMap::new()).unwrap();
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{m} {path}");
            assert_eq!(header(&r, "allow"), "GET, HEAD");
            assert_secured(&r);
        }
    }
}

#[test]
fn other_paths_are_not_ours() {
    for path in [
        "/v1/media",
        "/index.html",
        "/assets",
        "/assetsx/app.js",
        "/healthz",
        "//",
    ] {
        for m in [Method::GET, Method::POST] {
            assert!(route(&m, path, &HeaderMap::new()).is_none(), "{m} {path}");
        }
    }
}

fn text(path: &str) -> &'static str {
    let a = ASSETS.iter().find(|a| a.path == path).unwrap();
    std::str::from_utf8(a.bytes).unwrap()
}

/// The CSP allows no inline script or style: the page must have none.
#[test]
fn the_page_has_no_inline_script_or_style() {
    let html = text("/");
    assert!(!html.contains("<style"), "a <style> element");
    assert!(!html.contains(" style="), "a style attribute");
    assert!(!html.contains("javascript:"));
    for tag in html.split("<script").skip(1) {
        let open = &tag[..tag.find('>').unwrap()];
        assert!(
            open.contains("src=\"/assets/"),
            "an inline script: <script{open}>"
        );
        assert!(tag[open.len() + 1..].starts_with("</script>"));
    }
    // No `on…=` handler attributes either.
    let lower = html.to_ascii_lowercase();
    for h in [
        " onclick=",
        " onload=",
        " onerror=",
        " onsubmit=",
        " onchange=",
    ] {
        assert!(!lower.contains(h), "{h}");
    }
    // Nor does the script create any.
    let js = text("/assets/app.js");
    for bad in [
        "innerHTML",
        "setAttribute('style'",
        ".cssText",
        "eval(",
        "new Function",
    ] {
        assert!(!js.contains(bad), "app.js uses {bad}");
    }
}

/// Everything the page references is served here; nothing names another origin.
#[test]
fn the_page_loads_only_its_own_assets() {
    for a in &ASSETS {
        let t = std::str::from_utf8(a.bytes).unwrap();
        assert!(!t.contains("://"), "{} names an absolute URL", a.path);
    }
    let html = text("/");
    for piece in html.split("\"/assets/").skip(1) {
        let name = &piece[..piece.find('"').unwrap()];
        let path = format!("/assets/{name}");
        let r = route(&Method::GET, &path, &HeaderMap::new()).unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
}
