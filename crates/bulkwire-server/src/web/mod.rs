//! The browser face: `GET /` (the upload page and media library) and its assets, embedded in
//! the binary at compile time (no CDN, no Node at run time, no build step).

use crate::response::Response;
use http::Method;

/// The answer for a browser path (`/`, `/assets/…`), or `None` when `path` is not one.
pub fn route(method: &Method, path: &str) -> Option<Response> {
    let _ = (method, path);
    None
}
