//! The bulkwire upload/media server: `bulkwire serve`.
//!
//! - `POST /v1/media` (`multipart/form-data`, RFC 7578) and
//!   `PUT /v1/media/{name}` stream each file into storage as it arrives,
//!   through the sans-IO [`bulkwire_multipart::Parser`], with backpressure
//!   and memory per upload that does not grow with the payload.
//! - `GET|HEAD /v1/media/{id}` with single ranges, `ETag`/`If-None-Match`,
//!   `nosniff` and attachment disposition for active types;
//!   `GET /v1/media` (cursor pages), `DELETE /v1/media/{id}`,
//!   `GET /metrics`, `GET /healthz`.
//! - `POST /xmlrpc`: the WordPress XML-RPC media API (`wp.uploadFile`,
//!   `metaWeblog.newMediaObject`, …), `bits` streamed to storage through
//!   `bulkwire_xmlrpc`; see [`handlers::xmlrpc`].
//! - Storage behind [`store::BlobStore`] and [`store::MetaStore`]; the
//!   embedded default is files plus SQLite under the data directory. An
//!   upload is atomic; crash leftovers are swept at start.
//! - Every cap is in [`Limits`]; errors are JSON naming the limit.
//!
//! New upload formats (XML-RPC, SOAP/MTOM) plug into [`upload::Ingest`].
#![forbid(unsafe_code)]

pub mod access;
pub mod admission;
pub mod auth;
mod config;
pub mod conns;
pub mod cors;
pub mod downloads;
mod error;
pub mod events;
pub mod handlers;
pub mod hooks;
pub mod jwt;
pub mod linger;
pub mod links;
pub mod metered;
pub mod metrics;
pub mod principal;
pub mod response;
pub mod sendfile;
mod server;
mod state;
pub mod throttle;
mod ttl_cache;
/// The storage crate, re-exported: handlers see only its traits.
pub use bulkwire_store as store;
pub mod stores;
pub mod upload;
pub mod variants;
pub mod web;
mod workers;

pub use auth::Auth;
pub use config::{parse_listen, AuthKeys, Config, Limits, PerRole, S3Keys, User};
pub use error::{ApiError, Kind};
pub use server::{shutdown_signal, RunningServer, Server, META_FILE};
pub use state::AppState;
