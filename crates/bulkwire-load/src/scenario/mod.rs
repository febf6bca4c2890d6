//! Scenarios: what one request's body is, built from a template.
//!
//! A [`Scenario`] encodes every static byte of its body once, at start-up;
//! [`Scenario::render`] then gives one request's body as a list of shared
//! `Bytes` (refcount clones of the static pieces and of the file data, plus a
//! few small per-request pieces for `{seq}`/`{uuid}` values). Nothing large
//! is copied per request, and the list is written with vectored I/O.
//!
//! One module per format: [`formdata`] (RFC 7578 via
//! `bulkwire_multipart::Template`), [`xmlrpc`] (WordPress's `wp.uploadFile`,
//! the base64 text encoded once), [`mtom`] (SOAP upload with an XOP
//! attachment) and [`raw`]. A file sent without a given type is sent as
//! the type [`media_type::guess`] reads from its bytes and name.

pub mod formdata;
pub mod media_type;
pub mod mtom;
pub mod raw;
mod slot;
pub mod xmlrpc;

use crate::error::{Error, Result};
use crate::limits::{LimitKind, Limits};
use crate::pattern::Vars;
use bytes::Bytes;
use std::path::Path;

pub use formdata::{FileSpec, FormData};
pub use mtom::{Mtom, SoapUpload};
pub use raw::Raw;
pub use xmlrpc::{UploadCall, XmlRpc};

/// One request's body: segments in order and their total length.
#[derive(Debug, Clone, Default)]
pub struct Payload {
    pub segments: Vec<Bytes>,
    pub len: u64,
}

impl Payload {
    /// A payload of the given segments.
    pub fn new(segments: Vec<Bytes>) -> Payload {
        let len = segments.iter().map(|b| b.len() as u64).sum();
        Payload { segments, len }
    }

    /// The whole body in one buffer: for tests and for writing a fixed body
    /// to a file (a copy; never done on the request path).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len as usize);
        for s in &self.segments {
            v.extend_from_slice(s);
        }
        v
    }
}

/// A body template for a load run. Shared by every connection task.
pub trait Scenario: Send + Sync + 'static {
    /// Short name (`formdata`, `raw`, …) for reports.
    fn name(&self) -> &str;

    /// The `Content-Type` of every request.
    fn content_type(&self) -> &str;

    /// The body of the request with these variables. An error fails only this
    /// request (it is counted as a `render` error).
    fn render(&self, vars: &Vars) -> std::io::Result<Payload>;
}

/// Reads a payload file once into memory, to be shared by every request;
/// capped by [`Limits::file_bytes`].
pub fn load_file(path: &Path, limits: &Limits) -> Result<Bytes> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path.display(), e))?;
    if meta.len() > limits.file_bytes {
        let what = format!("{} is {} bytes", path.display(), meta.len());
        return Err(Error::limit(LimitKind::FileBytes, limits.file_bytes, what));
    }
    let data = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
    Ok(Bytes::from(data))
}
