//! The access log: one line per request at `info`, target `bulkwire::access`, with the method,
//! the path (query values of credential-like keys replaced by `REDACTED`), the status, the
//! request body bytes read, the response body bytes sent, the duration, the client's address
//! and a request id.
//!
//! The line is written when hyper drops the answer's body, i.e. once it is sent or the
//! connection is gone, so the duration and bytes out cover a whole download, not only the
//! handler. `outcome` says which: `sent` or `cut` (the body was dropped before its end).
//!
//! The request id is the client's (or its proxy's) `X-Request-Id` when that is short, visible
//! ASCII; else a fresh random one. Either way it is sent back as `X-Request-Id`, so a user can
//! quote the line that belongs to their request.

use crate::response::Body;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Method, Request};
use http_body::Frame;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A client-given id longer than this is replaced (it goes into every log line).
const MAX_ID: usize = 64;

/// Query keys whose values are credentials or capabilities: never logged.
const SECRET_KEYS: [&str; 8] = [
    "token",
    "access_token",
    "sig",
    "signature",
    "key",
    "password",
    "pass",
    "x-amz-signature",
];

/// One request on its way; shared with the body reader through the request's extensions.
#[derive(Debug)]
pub struct Entry {
    method: Method,
    /// Kept as is (a reference count): redacted only when a line is written.
    uri: http::Uri,
    peer: Option<SocketAddr>,
    id: HeaderValue,
    start: Instant,
    bytes_in: AtomicU64,
    /// Who the request was, once authenticated.
    principal: std::sync::OnceLock<String>,
}

/// Records who a request is on its access entry.
pub fn set_principal(ext: &http::Extensions, name: &str) {
    if let Some(e) = ext.get::<Arc<Entry>>() {
        e.principal(name);
    }
}

/// The request's id (`X-Request-Id`, the client's or a fresh one).
pub fn request_id(ext: &http::Extensions) -> Option<String> {
    let e = ext.get::<Arc<Entry>>()?;
    e.id().to_str().ok().map(str::to_string)
}

/// The client's address of a request (its access entry's).
pub fn client(ext: &http::Extensions) -> Option<std::net::IpAddr> {
    ext.get::<Arc<Entry>>().and_then(|e| e.client())
}

impl Entry {
    /// Records who the request is, for its access line.
    pub fn principal(&self, name: &str) {
        let _ = self.principal.set(name.to_string());
    }

    /// The client's address (for per-address rules such as login
    /// throttling).
    pub fn client(&self) -> Option<std::net::IpAddr> {
        self.peer.map(|p| p.ip())
    }

    /// Starts the entry for `req` and puts it in the request's extensions.
    pub fn begin<B>(req: &mut Request<B>, peer: Option<SocketAddr>) -> Arc<Entry> {
        let e = Arc::new(Entry {
            method: req.method().clone(),
            uri: req.uri().clone(),
            peer,
            id: new_request_id(req.headers().get(&X_REQUEST_ID)),
            start: Instant::now(),
            bytes_in: AtomicU64::new(0),
            principal: std::sync::OnceLock::new(),
        });
        req.extensions_mut().insert(e.clone());
        e
    }

    /// Counts request body bytes read by a handler.
    pub fn received(&self, n: u64) {
        self.bytes_in.fetch_add(n, Relaxed);
    }

    pub fn id(&self) -> &HeaderValue {
        &self.id
    }
}

/// Wraps the answer's body, the one wrapper every answer gets: it holds `busy` (the connection
/// is never shed while the answer is on its way, `crate::conns`), counts the bytes sent, and
/// writes the line when hyper drops it, once it is sent or the connection is gone.
pub fn logged(entry: Arc<Entry>, status: u16, body: Body, busy: crate::conns::Busy) -> Body {
    use http_body_util::BodyExt;
    Logged {
        body,
        entry,
        status,
        sent: 0,
        ended: false,
        _busy: busy,
    }
    .boxed_unsync()
}

struct Logged {
    body: Body,
    entry: Arc<Entry>,
    status: u16,
    sent: u64,
    ended: bool,
    // Held, never read: released when the answer's body is dropped.
    _busy: crate::conns::Busy,
}

impl http_body::Body for Logged {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let p = Pin::new(&mut self.body).poll_frame(cx);
        match &p {
            Poll::Ready(Some(Ok(f))) => {
                let n = f.data_ref().map_or(0, |d| d.len() as u64);
                self.sent += n;
            }
            Poll::Ready(None) => self.ended = true,
            _ => {}
        }
        p
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let e = &self.entry;
        // hyper never polls a body it knows is empty (or a HEAD answer's).
        let ended =
            self.ended || http_body::Body::is_end_stream(&self.body) || e.method == Method::HEAD;
        // The fields are formatted only when the line is enabled (the macro
        // checks first), straight into the subscriber's writer.
        tracing::info!(
            target: "bulkwire::access",
            method = %e.method,
            path = %Redacted(&e.uri),
            status = self.status,
            bytes_in = e.bytes_in.load(Relaxed),
            bytes_out = self.sent,
            ms = format_args!("{:.3}", e.start.elapsed().as_secs_f64() * 1e3),
            client = %Peer(e.peer),
            principal = %e.principal.get().map_or("-", String::as_str),
            request_id = %e.id.to_str().unwrap_or("-"),
            outcome = %if ended { "sent" } else { "cut" },
        );
    }
}

/// A client's address, or nothing.
struct Peer(Option<SocketAddr>);

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(p) => p.fmt(f),
            None => Ok(()),
        }
    }
}

/// The client's id when it is usable as is, else a random 16-hex-digit one.
fn new_request_id(given: Option<&HeaderValue>) -> HeaderValue {
    let usable = |v: &&HeaderValue| {
        let b = v.as_bytes();
        !b.is_empty() && b.len() <= MAX_ID && b.iter().all(|c| c.is_ascii_graphic())
    };
    if let Some(v) = given.filter(usable) {
        return v.clone();
    }
    let mut hex = [0u8; 16];
    let n = rand::random::<u64>();
    for (i, d) in hex.iter_mut().enumerate() {
        *d = b"0123456789abcdef"[(n >> (60 - 4 * i) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&hex).expect("hex digits are a valid header value")
}

/// The path and query, with the values of [`SECRET_KEYS`] replaced, written
/// as it is displayed (no string built).
struct Redacted<'a>(&'a http::Uri);

impl std::fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.path())?;
        let Some(q) = self.0.query() else {
            return Ok(());
        };
        for (i, pair) in q.split('&').enumerate() {
            f.write_str(if i == 0 { "?" } else { "&" })?;
            match pair.split_once('=') {
                Some((k, _)) if SECRET_KEYS.iter().any(|s| k.eq_ignore_ascii_case(s)) => {
                    write!(f, "{k}=REDACTED")?
                }
                _ => f.write_str(pair)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_the_query_are_redacted_and_the_rest_kept() {
        let u: http::Uri = "/v1/media/ab?sig=s3cret&x=1&Token=t&X-Amz-Signature=z"
            .parse()
            .unwrap();
        assert_eq!(
            Redacted(&u).to_string(),
            "/v1/media/ab?sig=REDACTED&x=1&Token=REDACTED&X-Amz-Signature=REDACTED"
        );
        let u: http::Uri = "/v1/media".parse().unwrap();
        assert_eq!(Redacted(&u).to_string(), "/v1/media");
    }

    #[test]
    fn a_sane_client_id_is_kept_anything_else_replaced() {
        let given = HeaderValue::from_static("req-42");
        assert_eq!(new_request_id(Some(&given)), given);
        let long = HeaderValue::from_str(&"x".repeat(MAX_ID + 1)).unwrap();
        let fresh = new_request_id(Some(&long));
        assert_eq!(fresh.len(), 16);
        assert_ne!(fresh, long);
        let spaced = HeaderValue::from_static("a b");
        assert_ne!(new_request_id(Some(&spaced)), spaced);
        assert_ne!(new_request_id(None), new_request_id(None));
    }
}
