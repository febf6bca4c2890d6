//! Routing: a fixed table matched on method and path, built into the code
//! (no filesystem lookups, no per-request configuration reads).
//!
//! | route | handler |
//! |---|---|
//! | `GET /healthz` | liveness |
//! | `GET /metrics` | Prometheus text |
//! | `POST /v1/media` | [`form::upload`] (`multipart/form-data`) |
//! | `PUT /v1/media/{name}` | [`raw::upload`] |
//! | `GET`, `HEAD /v1/media` | [`media::list`] |
//! | `GET`, `HEAD /v1/media/{id}` | [`media::download`] |
//! | `DELETE /v1/media/{id}` | [`media::delete`] |
//! | `GET`, `HEAD /v1/media/{id}/variant` | [`crate::variants::answer`] (image variants) |
//! | `GET`, `HEAD /v1/me` | [`me::answer`] (who the credentials name) |
//! | `GET`, `HEAD /v1/events` | [`crate::events::feed::answer`] (the event feed) |
//! | `GET`, `HEAD /v1/finishing/{id}` | [`media::finishing`] (a `pre_finish` hook reads the bytes) |
//! | `POST /soap`, `GET /soap?wsdl` | [`soap::route`] (SOAP 1.1/1.2, MTOM) |
//! | `POST /xmlrpc` (alias `/xmlrpc.php`) | [`xmlrpc::call`] (WordPress media API) |
//! | `/v1/uploads`, `/v1/uploads/{id}` | [`tus::route`] (tus 1.0, IETF resumable uploads) |
//!
//! Any other method on these paths is 405 with `Allow` (RFC 9110 section
//! 15.5.6). Everything under `/v1` needs credentials (see [`crate::auth`]); `/soap`
//! checks them itself, to answer with a SOAP fault, and `/xmlrpc` takes a
//! user's name and password in the call, as WordPress does.

pub mod form;
pub mod me;
pub mod media;
pub mod raw;
pub mod soap;
pub mod tus;
pub mod xmlrpc;

use crate::access;
use crate::conns::{Busy, ConnHandle};
use crate::error::{ApiError, Kind};
use crate::metrics::Outcome;
use crate::principal::{Principal, Scopes};
use crate::response::{self, Response};
use crate::state::AppState;
use crate::upload::BodyReader;
use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// The service function: every request, timed and logged (`crate::access`,
/// `X-Request-Id`). `busy` marks the connection busy (never shed) until the
/// answer's body is dropped, which hyper does once it is sent.
pub async fn handle(
    state: Arc<AppState>,
    mut req: Request<Incoming>,
    busy: Busy,
    peer: Option<SocketAddr>,
) -> Result<Response, Infallible> {
    let start = Instant::now();
    let entry = access::Entry::begin(&mut req, peer);
    let origin = crate::cors::allowed(&state.config, req.headers());
    let preflight = crate::cors::preflight(&state.config, req.method(), req.headers());
    let mut r = match framing_error(&req) {
        // The framing itself is in doubt: whatever follows on this
        // connection must not be read as the next request.
        Some(e) => {
            state.metrics.rejected(e.reason());
            response::error(&e, true)
        }
        None => match preflight {
            Some(r) => r,
            None => route(&state, req, busy.conn()).await,
        },
    };
    crate::cors::decorate(origin, &mut r);
    state.metrics.observe_request(start.elapsed());
    let status = r.status().as_u16();
    let mut r = r.map(|b| access::logged(entry.clone(), status, b, busy));
    r.headers_mut()
        .insert(access::X_REQUEST_ID, entry.id().clone());
    Ok(r)
}

/// `GET /readyz`: 200 when both stores answer, else 503 (`Retry-After`)
/// naming the store and why, within [`READY_TIMEOUT`]. `/healthz` stays
/// liveness: the process answers.
async fn readyz(state: &Arc<AppState>) -> Response {
    if state.draining.load(std::sync::atomic::Ordering::Relaxed) {
        return response::error(&draining(), false);
    }
    let meta = tokio::time::timeout(READY_TIMEOUT, state.meta.ready());
    let blobs = tokio::time::timeout(READY_TIMEOUT, state.blobs.ready());
    let (meta, blobs) = tokio::join!(meta, blobs);
    let why = |store: &str, r: Result<Result<(), String>, _>| match r {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("{store}: {e}")),
        Err(_) => Some(format!("{store}: no answer within {READY_TIMEOUT:?}")),
    };
    let faults: Vec<String> = [
        why("metadata store", meta.map(|r| r.map_err(|e| e.to_string()))),
        why("blob store", blobs.map(|r| r.map_err(|e| e.to_string()))),
    ]
    .into_iter()
    .flatten()
    .collect();
    if faults.is_empty() {
        return response::text(StatusCode::OK, "text/plain", "ready\n".into());
    }
    let e = ApiError::new(Kind::Busy, format!("not ready: {}", faults.join("; ")));
    response::error(&e, false)
}

/// 503 while the server drains for shutdown (`crate::server`).
fn draining() -> ApiError {
    ApiError::new(
        Kind::Busy,
        "draining: this server is shutting down; send new requests to another",
    )
}

/// Longest wait for a store's readiness answer.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// What hyper accepts but RFC 9112 does not: an HTTP/1.1 request without
/// exactly one `Host` (§3.2, 400), `chunked` applied twice (§6.1, 400), and
/// an HTTP/1.0 request with a body it cannot frame (§6.3: no
/// `Content-Length`, and HTTP/1.0 has no chunked coding; 411 where the
/// method carries a body, since hyper would read it as empty).
fn framing_error(req: &Request<Incoming>) -> Option<ApiError> {
    let h = req.headers();
    let hosts = h.get_all(http::header::HOST).iter().count();
    let v11 = req.version() == http::Version::HTTP_11;
    if hosts > 1 || (v11 && hosts == 0) {
        let m = "an HTTP/1.1 request needs exactly one Host header (RFC 9112 section 3.2)";
        return Some(ApiError::new(Kind::Malformed, m));
    }
    let chunked = h
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .filter(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
        .count();
    if chunked > 1 {
        let m = "chunked applied more than once (RFC 9112 section 6.1)";
        return Some(ApiError::new(Kind::Malformed, m));
    }
    let sends_body = matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH);
    let v10 = req.version() == http::Version::HTTP_10;
    if v10 && sends_body && !h.contains_key(http::header::CONTENT_LENGTH) {
        let m = "an HTTP/1.0 request body needs a Content-Length";
        return Some(ApiError::new(Kind::LengthRequired, m));
    }
    None
}

async fn route(state: &Arc<AppState>, req: Request<Incoming>, conn: &Arc<ConnHandle>) -> Response {
    let path = req.uri().path();
    let m = req.method();
    let get = m == Method::GET || m == Method::HEAD;
    match path {
        "/healthz" if get => return response::text(StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" if get => return readyz(state).await,
        "/metrics" if get => {
            let mut t = state.metrics.render();
            state.auth.render_metrics(&mut t);
            state.events.stats.render(&mut t);
            return response::text(StatusCode::OK, "text/plain; version=0.0.4", t);
        }
        "/healthz" | "/readyz" | "/metrics" => {
            let e = ApiError::method_not_allowed(m, "GET, HEAD");
            return reject(state, req, e);
        }
        _ => {}
    }
    if state.draining.load(std::sync::atomic::Ordering::Relaxed) {
        // The connection closes after this answer (`reject` with an unread
        // body, else `Connection: close` below).
        let mut r = reject(state, req, draining());
        r.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
        return r;
    }
    if let Some(r) = crate::web::route(m, path, req.headers()) {
        return r;
    }
    if path == "/soap" {
        return soap::route(state, req).await;
    }
    if path == "/xmlrpc" || path == "/xmlrpc.php" {
        if m != Method::POST {
            let mut e = ApiError::method_not_allowed(m, "POST");
            e.message = format!("{}: XML-RPC server accepts POST requests only", e.message);
            return reject(state, req, e);
        }
        return xmlrpc::call(state, req, Some(conn)).await;
    }
    if let Some(rest) = path.strip_prefix("/v1/uploads") {
        if rest.is_empty() || rest.starts_with('/') {
            let rest = rest.to_string();
            return tus::route(state, req, &rest).await;
        }
    }
    if let Some(id) = path.strip_prefix(crate::links::FINISHING) {
        if !get {
            let e = ApiError::method_not_allowed(m, "GET, HEAD");
            return reject(state, req, e);
        }
        let (id, query) = (id.to_string(), req.uri().query().unwrap_or("").to_string());
        return media::finishing(state, req.method(), &id, &query)
            .await
            .unwrap_or_else(|e| reject(state, req, e));
    }
    if path == "/v1/events" {
        return match identify(state, &req).await {
            Ok(_) if !get => {
                let e = ApiError::method_not_allowed(m, "GET, HEAD");
                reject(state, req, e)
            }
            Ok(who) => crate::events::feed::answer(state, &who, req.uri().query())
                .await
                .unwrap_or_else(|e| reject(state, req, e)),
            Err(e) => reject(state, req, e),
        };
    }
    if path == "/v1/me" {
        return match identify(state, &req).await {
            Ok(_) if !get => {
                let e = ApiError::method_not_allowed(m, "GET, HEAD");
                reject(state, req, e)
            }
            Ok(who) => me::answer(state, &who)
                .await
                .unwrap_or_else(|e| reject(state, req, e)),
            Err(e) => reject(state, req, e),
        };
    }
    let Some(rest) = path.strip_prefix("/v1/media") else {
        return reject(state, req, ApiError::new(Kind::NotFound, "no such route"));
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return reject(state, req, ApiError::new(Kind::NotFound, "no such route"));
    }
    // A link (`crate::links`): GET or HEAD of one item, its signature in
    // place of credentials. Anything else with a `sig` needs credentials.
    let one = rest
        .strip_prefix('/')
        .filter(|t| !t.is_empty() && !t.contains('/'));
    if let (Some(id), true) = (one, get && crate::links::has_sig(req.uri().query())) {
        let id = id.to_string();
        return link_download(state, req, &id).await;
    }
    // A variant's link: signed over the id and the variant's parameters.
    let variant_of = rest
        .strip_prefix('/')
        .and_then(|t| t.strip_suffix("/variant"))
        .filter(|t| !t.is_empty() && !t.contains('/'));
    if let (Some(id), true) = (variant_of, get && crate::links::has_sig(req.uri().query())) {
        let id = id.to_string();
        return link_variant(state, req, &id).await;
    }
    let who = match identify(state, &req).await {
        Ok(p) => p,
        Err(e) => return reject(state, req, e),
    };
    let rest = rest.to_string();
    let r = media_route(state, req, &rest, &who).await;
    r.unwrap_or_else(|e| {
        state.metrics.rejected(e.reason());
        response::error(&e, false)
    })
}

/// Who the request's `Authorization` names (see [`crate::Auth`]), also
/// for its access line; 401 when nobody, or the store's error when it
/// cannot say.
pub(crate) async fn identify(
    state: &Arc<AppState>,
    req: &Request<Incoming>,
) -> Result<Principal, ApiError> {
    let auth = req.headers().get(http::header::AUTHORIZATION);
    let p = state
        .auth
        .authenticate(
            &*state.meta,
            auth.map(|v| v.as_bytes()),
            crate::access::client(req.extensions()),
        )
        .await?;
    crate::access::set_principal(req.extensions(), &p.name);
    Ok(p)
}

/// `GET`/`HEAD /v1/media/{id}?[exp=…&]sig=…`: 403 for a bad or expired
/// signature (before the id is looked up: nothing about it is revealed),
/// else the download as with credentials (404 once the media is deleted).
async fn link_download(state: &Arc<AppState>, req: Request<Incoming>, id: &str) -> Response {
    let query = req.uri().query().unwrap_or("");
    let verdict = state.links.verify(id, query);
    let r = match verdict {
        // A link is a capability: whoever holds it reads the item, whoever
        // owns it.
        Ok(()) => {
            let ask = media::Ask::of(&req, media::By::Link(crate::links::expiry(query)));
            media::download(state, &ask, id, None).await
        }
        Err(crate::links::Refused::Bad) => Err(ApiError::new(Kind::Forbidden, "invalid link")),
        Err(crate::links::Refused::Expired) => Err(ApiError::new(Kind::Forbidden, "expired link")),
    };
    r.unwrap_or_else(|e| reject(state, req, e))
}

/// `GET`/`HEAD /v1/media/{id}/variant?…&sig=…`: as [`link_download`], the
/// signature over the id and the variant's parameters as given.
async fn link_variant(state: &Arc<AppState>, req: Request<Incoming>, id: &str) -> Response {
    let query = req.uri().query().unwrap_or("");
    let r = match crate::variants::parse(query, &state.config.variant_sizes) {
        Err(e) => Err(e),
        Ok(asked) => match state.links.verify_variant(id, &asked.params(), query) {
            Ok(()) => {
                let ask = media::Ask::of(&req, media::By::Link(crate::links::expiry(query)));
                crate::variants::answer(state, &ask, id, &asked, None).await
            }
            Err(crate::links::Refused::Bad) => Err(ApiError::new(Kind::Forbidden, "invalid link")),
            Err(crate::links::Refused::Expired) => {
                Err(ApiError::new(Kind::Forbidden, "expired link"))
            }
        },
    };
    r.unwrap_or_else(|e| reject(state, req, e))
}

/// Routes under `/v1/media`; `rest` is what follows it.
async fn media_route(
    state: &Arc<AppState>,
    req: Request<Incoming>,
    rest: &str,
    who: &Principal,
) -> Result<Response, ApiError> {
    let m = req.method().clone();
    let tail = rest.strip_prefix('/').unwrap_or("");
    let scope = match m {
        Method::POST | Method::PUT => Scopes::UPLOAD,
        Method::DELETE => Scopes::DELETE,
        _ => Scopes::READ,
    };
    if let Err(e) = who.require(scope) {
        return Ok(reject(state, req, e));
    }
    match (m, rest.is_empty()) {
        (Method::POST, true) => Ok(form::upload(state, req, who).await),
        // HEAD: the same answer, whose body hyper does not send.
        (Method::GET | Method::HEAD, true) => {
            media::list(state, who, req.headers(), req.uri().query()).await
        }
        (Method::GET | Method::HEAD, false) if tail.ends_with("/variant") => {
            let id = tail.trim_end_matches("/variant");
            let q = req.uri().query().unwrap_or("");
            let asked = crate::variants::parse(q, &state.config.variant_sizes)?;
            let ask = media::Ask::of(&req, media::By::Credentials);
            crate::variants::answer(state, &ask, id, &asked, who.owner()).await
        }
        (_, false) if tail.ends_with("/variant") => {
            let e = ApiError::method_not_allowed(req.method(), "GET, HEAD");
            Ok(reject(state, req, e))
        }
        (Method::PUT, false) => Ok(raw::upload(state, tail, req, who).await),
        (Method::GET | Method::HEAD, false) => {
            let ask = media::Ask::of(&req, media::By::Credentials);
            media::download(state, &ask, tail, who.owner()).await
        }
        (Method::DELETE, false) => {
            let origin = crate::events::Origin::of(state, "rest", req.headers(), req.extensions());
            media::delete(state, tail, who, &origin).await
        }
        (m, collection) => {
            let allow = match collection {
                true => "GET, HEAD, POST",
                false => "GET, HEAD, PUT, DELETE",
            };
            Ok(reject(state, req, ApiError::method_not_allowed(&m, allow)))
        }
    }
}

/// An error before a handler took the body: counted and answered at once.
/// A body that was not read makes it the connection's last answer; the
/// lingering close (`crate::linger`) lets the client finish sending and
/// read it.
fn reject(state: &Arc<AppState>, req: Request<Incoming>, e: ApiError) -> Response {
    state.metrics.rejected(e.reason());
    let unread = !http_body::Body::is_end_stream(req.body());
    response::error(&e, unread)
}

/// Ends an upload handler: outcome metrics, and for an error the JSON
/// error response (the connection's last when the body was not read to
/// its end).
pub(crate) fn finish_upload(
    state: &Arc<AppState>,
    format: &str,
    reader: &BodyReader,
    result: Result<Response, ApiError>,
) -> Response {
    let e = match result {
        Ok(r) => {
            state.metrics.upload_done(format, Outcome::Ok);
            return r;
        }
        Err(e) => e,
    };
    let outcome = match e.kind {
        Kind::Aborted => Outcome::Aborted,
        Kind::Storage | Kind::StorageFull | Kind::Unavailable => Outcome::Failed,
        _ => Outcome::Rejected,
    };
    state.metrics.upload_done(format, outcome);
    if outcome == Outcome::Rejected {
        state.metrics.rejected(e.reason());
    }
    if outcome == Outcome::Failed {
        tracing::warn!(format, error = %e, "upload failed");
    }
    response::error(&e, !reader.is_done())
}
