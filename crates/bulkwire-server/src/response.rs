//! Response bodies and small constructors shared by the handlers.

use crate::error::{ApiError, Kind};
use crate::store::MediaRecord;
use bytes::Bytes;
use http::header::{HeaderValue, CONNECTION, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::StatusCode;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use std::io;

/// Every response body: in-memory JSON/text or a blob streamed from storage.
pub type Body = UnsyncBoxBody<Bytes, io::Error>;
pub type Response = http::Response<Body>;

pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|e| match e {}).boxed_unsync()
}

pub fn empty() -> Body {
    Empty::new().map_err(|e| match e {}).boxed_unsync()
}

pub fn json(status: StatusCode, v: &serde_json::Value) -> Response {
    let mut r = Response::new(full(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

pub fn text(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// The JSON error response; `close` when the request body was not read to
/// its end (the connection cannot be reused).
pub fn error(e: &ApiError, close: bool) -> Response {
    let mut r = json(e.status(), &e.to_json());
    let h = r.headers_mut();
    match e.kind {
        Kind::Busy => {
            h.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        // A store that is away takes longer than a slot to come back.
        Kind::Unavailable => {
            h.insert(RETRY_AFTER, HeaderValue::from_static("5"));
        }
        Kind::Unauthorized => {
            h.insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"bulkwire\", Basic realm=\"bulkwire\""),
            );
        }
        _ => {}
    }
    if let Some(s) = e.retry_after {
        h.insert(RETRY_AFTER, HeaderValue::from(s));
    }
    if let Some(allow) = e.allow {
        h.insert(http::header::ALLOW, HeaderValue::from_static(allow));
    }
    if close {
        h.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// The absolute URL of this server as the client reached it: `public_url`
/// when configured (behind a proxy), else `http://` and the request's `Host`
/// when it is a plain host\[:port\], else the listening address.
pub fn base_url(config: &crate::Config, h: &http::HeaderMap) -> String {
    if let Some(u) = &config.public_url {
        return u.trim_end_matches('/').to_string();
    }
    let host = h.get(http::header::HOST).and_then(|v| v.to_str().ok());
    let plain = |b: u8| b.is_ascii_alphanumeric() || b".-:[]".contains(&b);
    match host.filter(|h| !h.is_empty() && h.len() <= 255 && h.bytes().all(plain)) {
        Some(host) => format!("http://{host}"),
        None => format!("http://{}", config.listen),
    }
}

/// The public view of a row; `url` is its link (`crate::links`), absolute.
/// A media item as the API answers it. `url` is its link (a capability:
/// whoever holds it reads the item), handed out only to a principal that
/// may read the item (`readable`); null otherwise.
pub fn media_json(
    m: &MediaRecord,
    base: &str,
    links: &crate::links::Links,
    readable: bool,
) -> serde_json::Value {
    let url = readable.then(|| format!("{base}{}", links.path(&m.id)));
    serde_json::json!({
        "id": m.id,
        "owner": m.owner,
        "field": m.field,
        "filename": m.filename,
        "content_type": m.content_type,
        "size": m.size,
        "sha256": m.sha256,
        "created": m.created,
        "url": url,
    })
}

/// `201 Created` for a finished upload, with `Location` the first file's
/// resource (RFC 9110 §15.3.2).
pub fn created(
    state: &crate::AppState,
    h: &http::HeaderMap,
    records: &[MediaRecord],
    fields: Vec<(String, String)>,
    who: &crate::principal::Principal,
) -> Response {
    let base = base_url(&state.config, h);
    let readable = who.gets_links();
    let media: Vec<_> = records
        .iter()
        .map(|m| media_json(m, &base, &state.links, readable))
        .collect();
    let fields: serde_json::Map<String, serde_json::Value> =
        fields.into_iter().map(|(k, v)| (k, v.into())).collect();
    // `url` at the top as well: the first file's link, where Uppy's
    // XHRUpload (and clients like it) look for an upload's URL.
    let url = media.first().map(|m| m["url"].clone());
    let mut r = json(
        StatusCode::CREATED,
        &serde_json::json!({"media": media, "fields": fields, "url": url}),
    );
    if let Some(first) = records.first() {
        let loc = format!("{base}/v1/media/{}", first.id);
        if let Ok(v) = HeaderValue::from_str(&loc) {
            r.headers_mut().insert(http::header::LOCATION, v);
        }
    }
    r
}
