//! What downloads send, counted (`/metrics`): bytes by store and route and
//! by how they went out, downloads in progress, connections cut by
//! `send_timeout_ms`, and S3 redirects.

use crate::metrics::{counter, gauge, header};
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// The routes a download is answered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /v1/media/{id}`, authenticated.
    Media = 0,
    /// `GET /l/{id}…`, a signed link.
    Link = 1,
    /// An image variant, on either.
    Variant = 2,
    /// `GET /v1/finishing/{id}`: an upload a `pre_finish` hook reads.
    Finishing = 3,
}

const ROUTES: [&str; 4] = ["media", "link", "variant", "finishing"];

/// How the bytes went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `sendfile(2)` from the file store (`crate::sendfile`).
    Sendfile = 0,
    /// Read from the store and written by hyper.
    Stream = 1,
}

const VIAS: [&str; 2] = ["sendfile", "stream"];

#[derive(Debug, Default)]
pub struct Downloads {
    bytes: [[AtomicU64; VIAS.len()]; ROUTES.len()],
    /// Download bodies alive (sending, or waiting for the client).
    pub in_progress: AtomicI64,
    /// Connections whose write waited `send_timeout_ms` without a byte
    /// accepted, closed.
    pub send_timeouts: AtomicU64,
    /// Downloads answered 307 to the object store (`[s3]
    /// download_redirect`).
    pub redirects: AtomicU64,
    /// The blob store's kind (`file`, `s3`, …), the `store` label.
    store: OnceLock<&'static str>,
}

impl Downloads {
    pub fn sent(&self, route: Route, via: Via, n: u64) {
        self.bytes[route as usize][via as usize].fetch_add(n, Relaxed);
    }

    /// Bytes sent on `route` by `via`; for tests.
    pub fn bytes(&self, route: Route, via: Via) -> u64 {
        self.bytes[route as usize][via as usize].load(Relaxed)
    }

    /// Every route's bytes sent by `sendfile`.
    pub fn sendfile_total(&self) -> u64 {
        self.bytes
            .iter()
            .map(|r| r[Via::Sendfile as usize].load(Relaxed))
            .sum()
    }

    /// Names the blob store in the `store` label; set once at start.
    pub fn set_store(&self, kind: &'static str) {
        let _ = self.store.set(kind);
    }

    pub(crate) fn render(&self, o: &mut String) {
        let store = self.store.get().copied().unwrap_or("file");
        header(
            o,
            "bulkwire_download_bytes_total",
            "counter",
            "Blob bytes sent by downloads, by store, route and how (sendfile or stream).",
        );
        for (route, row) in ROUTES.iter().zip(&self.bytes) {
            for (via, v) in VIAS.iter().zip(row) {
                let _ = writeln!(
                    o,
                    "bulkwire_download_bytes_total{{store=\"{store}\",route=\"{route}\",via=\"{via}\"}} {}",
                    v.load(Relaxed)
                );
            }
        }
        gauge(
            o,
            "bulkwire_downloads_in_progress",
            "Downloads being sent.",
            self.in_progress.load(Relaxed),
        );
        counter(
            o,
            "bulkwire_send_timeouts_total",
            "Connections closed after send_timeout_ms without a byte accepted.",
            self.send_timeouts.load(Relaxed),
        );
        counter(
            o,
            "bulkwire_download_redirects_total",
            "Downloads answered with a redirect to the object store.",
            self.redirects.load(Relaxed),
        );
    }
}
