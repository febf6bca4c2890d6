//! CORS (the Fetch standard's CORS protocol): browser scripts on the origins in `cors_origins`
//! may call the API. Default: no origin, and no CORS header is ever sent.
//!
//! A preflight (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin is answered
//! here, before any credential check: a browser sends none with it. It allows the methods and
//! request headers the upload APIs use, tus's `Upload-*`/`Tus-*` included. Every other answer to
//! an allowed origin carries `Access-Control-Allow-Origin` (that origin, with `Vary: Origin`) and
//! exposes the headers a client must read (`Location`, `Upload-Offset`, …). An origin not in the
//! list gets nothing, so the browser keeps the answer from the script.

use crate::response::{empty, Response};
use crate::Config;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};

const METHODS: &str = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
const REQUEST_HEADERS: &str = "Authorization, Content-Type, Range, If-None-Match, SOAPAction, \
     X-Request-Id, Tus-Resumable, Upload-Length, Upload-Offset, Upload-Metadata, Upload-Concat, \
     Upload-Defer-Length, Upload-Checksum, Upload-Complete, Upload-Draft-Interop-Version, \
     X-HTTP-Method-Override";
const EXPOSED: &str = "Location, Upload-Offset, Upload-Length, Upload-Expires, Upload-Complete, \
     Upload-Limit, Upload-Draft-Interop-Version, Tus-Resumable, Tus-Version, Tus-Extension, \
     Tus-Max-Size, Tus-Checksum-Algorithm, ETag, Content-Range, Content-Disposition, Link, \
     X-Request-Id";
/// Seconds a browser may cache a preflight's answer.
const MAX_AGE: &str = "600";

/// The request's `Origin` when `cors_origins` allows it.
pub fn allowed(config: &Config, h: &HeaderMap) -> Option<HeaderValue> {
    let origin = h.get(header::ORIGIN)?;
    let o = origin.to_str().ok()?;
    config
        .cors_origins
        .iter()
        .any(|a| a == "*" || a.eq_ignore_ascii_case(o))
        .then(|| origin.clone())
}

/// The answer to a preflight from an allowed origin, else `None`.
pub fn preflight(config: &Config, method: &Method, h: &HeaderMap) -> Option<Response> {
    if method != Method::OPTIONS || !h.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD) {
        return None;
    }
    let origin = allowed(config, h)?;
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    let hs = r.headers_mut();
    hs.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    hs.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(METHODS),
    );
    hs.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(REQUEST_HEADERS),
    );
    hs.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static(MAX_AGE),
    );
    hs.insert(header::VARY, HeaderValue::from_static("Origin"));
    Some(r)
}

/// Adds the headers an allowed origin's script needs to read an answer.
pub fn decorate(origin: Option<HeaderValue>, r: &mut Response) {
    let Some(origin) = origin else { return };
    let hs = r.headers_mut();
    hs.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    hs.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED),
    );
    hs.append(header::VARY, HeaderValue::from_static("Origin"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(origins: &[&str]) -> Config {
        Config {
            cors_origins: origins.iter().map(|s| s.to_string()).collect(),
            ..Config::default()
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_listed_origins_are_allowed() {
        let h = headers(&[("origin", "https://app.example")]);
        assert!(allowed(&config(&[]), &h).is_none());
        assert!(allowed(&config(&["https://other.example"]), &h).is_none());
        assert_eq!(
            allowed(&config(&["https://app.example"]), &h).unwrap(),
            "https://app.example"
        );
        assert!(allowed(&config(&["*"]), &h).is_some());
        assert!(allowed(&config(&["*"]), &HeaderMap::new()).is_none());
    }

    #[test]
    fn a_preflight_names_the_upload_headers_and_needs_no_credentials() {
        let c = config(&["https://app.example"]);
        let h = headers(&[
            ("origin", "https://app.example"),
            ("access-control-request-method", "PATCH"),
        ]);
        let r = preflight(&c, &Method::OPTIONS, &h).unwrap();
        assert_eq!(r.status(), 204);
        let allow = r.headers()["access-control-allow-headers"]
            .to_str()
            .unwrap();
        for want in [
            "Authorization",
            "Upload-Offset",
            "Tus-Resumable",
            "Upload-Metadata",
        ] {
            assert!(allow.contains(want), "{want}");
        }
        assert!(preflight(&c, &Method::GET, &h).is_none());
        let plain_options = headers(&[("origin", "https://app.example")]);
        assert!(
            preflight(&c, &Method::OPTIONS, &plain_options).is_none(),
            "tus OPTIONS"
        );
        let stranger = headers(&[
            ("origin", "https://evil.example"),
            ("access-control-request-method", "PATCH"),
        ]);
        assert!(preflight(&c, &Method::OPTIONS, &stranger).is_none());
    }
}
