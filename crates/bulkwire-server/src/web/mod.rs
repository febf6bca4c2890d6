//! The browser face: `GET /` (the upload page and media library) and its assets, embedded in
//! the binary at compile time (no CDN, no Node at run time, no build step).
//!
//! The page is plain HTML, CSS and one ES module (`assets/`); it talks to `/v1` like any other
//! client (tus 1.0 for uploads, `/v1/media` for the library: newest first, its search and type
//! filter answered by the server, pages by cursor; `/v1/me` for the name shown as signed in).
//! Every answer here carries a strict
//! `Content-Security-Policy` (no inline script or style, nothing from another origin),
//! `nosniff` and `no-referrer`. Assets are revalidated on every load (`no-cache`) against an
//! `ETag` that is a hash of the embedded bytes, so a new binary's page is picked up at once
//! (RFC 9111 §5.2.2.4, RFC 9110 §8.8.3).

use crate::error::{ApiError, Kind};
use crate::response::{self, Response};
use http::header::{
    HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use http::{HeaderMap, Method, StatusCode};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// What the page may load and do: its own script, style and images (plus `blob:`/`data:`
/// images), requests to its own origin only; no forms, frames or `<base>`.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' blob: data:; media-src 'self'; connect-src 'self'; form-action 'none'; \
    frame-ancestors 'none'; base-uri 'none'";

/// One embedded file.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const ASSETS: [Asset; 3] = [
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        bytes: include_bytes!("assets/index.html"),
    },
    Asset {
        path: "/assets/app.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("assets/app.js"),
    },
    Asset {
        path: "/assets/app.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("assets/app.css"),
    },
];

/// The strong ETag of each asset (`"` + first 16 bytes of its SHA-256 in hex + `"`), in
/// [`ASSETS`] order, computed once.
fn etags() -> &'static [HeaderValue; 3] {
    static ETAGS: OnceLock<[HeaderValue; 3]> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS.each_ref().map(|a| {
            let h = Sha256::digest(a.bytes);
            HeaderValue::from_str(&format!("\"{}\"", hex::encode(&h[..16]))).unwrap()
        })
    })
}

/// The answer for a browser path (`/`, `/assets/…`), or `None` when `path` is not one;
/// `304 Not Modified` when `If-None-Match` names the asset's ETag.
pub fn route(method: &Method, path: &str, headers: &HeaderMap) -> Option<Response> {
    if path != "/" && !path.starts_with("/assets/") {
        return None;
    }
    if method != Method::GET && method != Method::HEAD {
        let e = ApiError::method_not_allowed(method, "GET, HEAD");
        // The body, if any, was not read: the connection cannot be reused.
        return Some(secured(response::error(&e, true)));
    }
    let Some(i) = ASSETS.iter().position(|a| a.path == path) else {
        let e = ApiError::new(Kind::NotFound, "no such asset");
        return Some(secured(response::error(&e, false)));
    };
    Some(serve(
        &ASSETS[i],
        &etags()[i],
        method == Method::HEAD,
        headers,
    ))
}

fn serve(a: &Asset, etag: &HeaderValue, head: bool, req: &HeaderMap) -> Response {
    let fresh = req.get_all(IF_NONE_MATCH).iter().any(|v| matches(v, etag));
    let (status, body) = match (fresh, head) {
        (true, _) => (StatusCode::NOT_MODIFIED, None),
        (false, true) => (StatusCode::OK, None),
        (false, false) => (StatusCode::OK, Some(a.bytes)),
    };
    let mut r = Response::new(match body {
        Some(b) => response::full(b),
        None => response::empty(),
    });
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(ETAG, etag.clone());
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if !fresh {
        h.insert(CONTENT_TYPE, HeaderValue::from_static(a.content_type));
        h.insert(CONTENT_LENGTH, HeaderValue::from(a.bytes.len()));
    }
    secured(r)
}

/// `If-None-Match` (RFC 9110 §13.1.2): `*` or a list with this ETag (weak comparison).
fn matches(v: &HeaderValue, etag: &HeaderValue) -> bool {
    let Ok(v) = v.to_str() else { return false };
    let want = etag.to_str().unwrap_or_default();
    v.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == want)
}

/// The security headers every answer under `/` and `/assets/` carries.
fn secured(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    r
}

#[cfg(test)]
mod tests;
