//! Routing: a fixed table matched on method and path, built into the code
//! (no filesystem lookups, no per-request configuration reads).
//!
//! | route | handler |
//! |---|---|
//! | `GET /healthz` | liveness |
//! | `GET /metrics` | Prometheus text |
//! | `POST /v1/media` | [`form::upload`] (`multipart/form-data`) |
//! | `PUT /v1/media/{name}` | [`raw::upload`] |
//! | `GET /v1/media` | [`media::list`] |
//! | `GET`, `HEAD /v1/media/{id}` | [`media::download`] |
//! | `DELETE /v1/media/{id}` | [`media::delete`] |
//! | `POST /soap`, `GET /soap?wsdl` | [`soap::route`] (SOAP 1.1/1.2, MTOM) |
//! | `POST /xmlrpc` (alias `/xmlrpc.php`) | [`xmlrpc::call`] (WordPress media API) |
//!
//! Everything under `/v1` needs credentials (see [`crate::auth`]); `/soap`
//! checks them itself, to answer with a SOAP fault, and `/xmlrpc` takes a
//! user's name and password in the call, as WordPress does.

pub mod form;
pub mod media;
pub mod raw;
pub mod soap;
pub mod xmlrpc;

use crate::error::{ApiError, Kind};
use crate::metrics::Outcome;
use crate::response::{self, Response};
use crate::state::AppState;
use crate::upload::BodyReader;
use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

/// The service function: every request, timed.
pub async fn handle(state: Arc<AppState>, req: Request<Incoming>) -> Result<Response, Infallible> {
    let start = Instant::now();
    let r = route(&state, req).await;
    state.metrics.observe_request(start.elapsed());
    Ok(r)
}

async fn route(state: &Arc<AppState>, req: Request<Incoming>) -> Response {
    let path = req.uri().path();
    let m = req.method();
    match path {
        "/healthz" if m == Method::GET || m == Method::HEAD => {
            return response::text(StatusCode::OK, "text/plain", "ok\n".into())
        }
        "/metrics" if m == Method::GET => {
            let t = state.metrics.render();
            return response::text(StatusCode::OK, "text/plain; version=0.0.4", t);
        }
        _ => {}
    }
    if path == "/soap" {
        return soap::route(state, req).await;
    }
    if path == "/xmlrpc" || path == "/xmlrpc.php" {
        if m != Method::POST {
            let e = ApiError::new(
                Kind::MethodNotAllowed,
                "XML-RPC server accepts POST requests only",
            );
            return reject(state, req, e).await;
        }
        return xmlrpc::call(state, req).await;
    }
    let Some(rest) = path.strip_prefix("/v1/media") else {
        return reject(state, req, ApiError::new(Kind::NotFound, "no such route")).await;
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return reject(state, req, ApiError::new(Kind::NotFound, "no such route")).await;
    }
    let auth = req.headers().get(http::header::AUTHORIZATION);
    let allowed = state.auth.check(auth.map(|v| v.as_bytes()));
    if !allowed {
        let e = ApiError::new(Kind::Unauthorized, "missing or bad credentials");
        return reject(state, req, e).await;
    }
    let rest = rest.to_string();
    let r = media_route(state, req, &rest).await;
    r.unwrap_or_else(|e| {
        state.metrics.rejected(e.reason());
        response::error(&e, false)
    })
}

/// Routes under `/v1/media`; `rest` is what follows it.
async fn media_route(
    state: &Arc<AppState>,
    req: Request<Incoming>,
    rest: &str,
) -> Result<Response, ApiError> {
    let m = req.method().clone();
    let tail = rest.strip_prefix('/').unwrap_or("");
    match (m, rest.is_empty()) {
        (Method::POST, true) => Ok(form::upload(state, req).await),
        (Method::GET, true) => media::list(state, req.uri().query()).await,
        (Method::PUT, false) => Ok(raw::upload(state, tail, req).await),
        (m @ (Method::GET | Method::HEAD), false) => {
            media::download(state, &m, tail, req.headers()).await
        }
        (Method::DELETE, false) => media::delete(state, tail).await,
        _ => Ok(reject(
            state,
            req,
            ApiError::new(Kind::MethodNotAllowed, "method not allowed"),
        )
        .await),
    }
}

/// An error before a handler took the body: counted, the body drained
/// (bounded) so the client reads the answer.
async fn reject(state: &Arc<AppState>, req: Request<Incoming>, e: ApiError) -> Response {
    state.metrics.rejected(e.reason());
    let (parts, body) = req.into_parts();
    let mut reader = BodyReader::new(state, body, &parts.headers);
    reader.drain().await;
    response::error(&e, !reader.is_done())
}

/// Ends an upload handler: outcome metrics, and for an error the bounded
/// drain and the JSON error response.
pub(crate) async fn finish_upload(
    state: &Arc<AppState>,
    format: &str,
    reader: &mut BodyReader,
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
        Kind::Storage | Kind::StorageFull => Outcome::Failed,
        _ => Outcome::Rejected,
    };
    state.metrics.upload_done(format, outcome);
    if outcome == Outcome::Rejected {
        state.metrics.rejected(e.reason());
    }
    if !matches!(e.kind, Kind::Timeout | Kind::Aborted) {
        reader.drain().await;
    }
    if outcome == Outcome::Failed {
        tracing::warn!(format, error = %e, "upload failed");
    }
    response::error(&e, !reader.is_done())
}
