//! The bytes of a resumable upload (tus 1.0 core and the IETF draft
//! "Resumable Uploads for HTTP", draft-ietf-httpbis-resumable-upload §4):
//! appended across many requests, on any node, durable at every offset the
//! server acknowledges.
//!
//! A [`Spool`] is everything a node needs to go on appending: it is saved
//! with the upload's row in the metadata store (the server's JSON state),
//! never kept in a node's memory. The backends:
//!
//! - files: one file `data/uploads/{id}`, appended to and made durable at
//!   each durable point. A node that resumes cuts the file back to the
//!   saved (or noted) length first: bytes written after the last durable
//!   point were never acknowledged, and may be half a chunk.
//!   Where the file is written with `O_DIRECT` and the file system has
//!   extended attributes, a sync may carry a *note* (`user.bulkwire.note`):
//!   set before the `fsync` that makes the bytes durable, so one flush
//!   commits both, and the caller may answer before its row is saved (the
//!   note then names the offset until the row catches up).
//! - S3: one multipart upload per spool, created at the start. Parts are
//!   cut at fixed offsets (part `i` holds bytes `[i·P, (i+1)·P)`, `P` fixed
//!   when the spool is made), so two nodes that write the same range of the
//!   same upload at once (a client retried while its first request hangs
//!   elsewhere) send the same part number with the same bytes, and the
//!   saved ETags decide which part the completion names: never a mix. Bytes
//!   after the last whole part are kept as a small *tail object* (tusd's
//!   `.part` idea) under a fresh key per save, read back into memory by the
//!   next writer and sent as part of the next whole part: memory stays at
//!   one part per upload, and a saved state never names a tail that a
//!   later write could overwrite.
//! - Azure and GCS: as S3, with each service's parts: blocks on Azure;
//!   on GCS objects of their own, composed at the end ([`crate::gcs`]
//!   says why not a resumable session).

use crate::BoxFut;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::io;

/// Where a resumable upload's bytes stand, as last saved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spool {
    /// Durable bytes: the upload's offset.
    pub len: u64,
    /// The backend's handle (S3: the multipart upload id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    /// S3: bytes per part, fixed for the upload's life.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub part_size: u64,
    /// S3: the ETags of the whole parts, in order (Azure: block ids;
    /// GCS: each part object's generation and length).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<String>,
    /// S3: the key of the tail object holding the bytes after the last
    /// whole part (`len - parts·part_size` of them), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Spool {
    /// Bytes after the last whole part (S3), all bytes for files.
    pub fn tail_len(&self) -> u64 {
        let whole = (self.parts.len() as u64).saturating_mul(self.part_size);
        self.len.saturating_sub(whole)
    }

    /// The S3 layout holds together: the whole parts fit in the length, the
    /// rest is shorter than a part, and a tail object exists exactly when
    /// there is a rest.
    pub fn is_consistent(&self) -> bool {
        let whole = (self.parts.len() as u64).checked_mul(self.part_size);
        let tail = self.tail_len();
        whole.is_some_and(|w| w <= self.len)
            && (self.part_size == 0 || tail < self.part_size)
            && self.tail.is_some() == (tail > 0)
    }
}

/// A resumable upload open for appending at its spool's length. No method
/// has a default: a wrapper must pass each one on (as [`crate::BlobStore`]).
pub trait SpoolWriter: Send {
    /// Appends chunks in order. As [`crate::BlobWriter::write`], at most
    /// one call's chunks are in flight: this returns once the previous
    /// call's are handed on (their error, if any, is this call's).
    fn write(&mut self, chunks: Vec<Bytes>) -> BoxFut<'_, io::Result<()>>;

    /// Makes everything written durable and returns the state that says
    /// so, for the caller to save. Nothing of it counts until saved (or
    /// noted: [`SpoolWriter::sync_noted`]).
    fn sync(&mut self) -> BoxFut<'_, io::Result<Spool>>;

    /// As [`SpoolWriter::sync`], and makes `note` durable in the same
    /// flush as the bytes, so that it never names a byte a crash could
    /// lose: the caller's record of a state it saves later, read back with
    /// [`crate::BlobStore::spool_note`]; at most [`crate::NOTE_MAX`] bytes.
    /// On a writer whose [`SpoolWriter::notes`] is false this fails and
    /// syncs nothing.
    fn sync_noted(&mut self, note: Vec<u8>) -> BoxFut<'_, io::Result<Spool>>;

    /// True where [`SpoolWriter::sync_noted`] keeps its note (a file on a
    /// file system with extended attributes).
    fn notes(&self) -> bool;

    /// Tells the writer whether the state of its last [`SpoolWriter::sync`]
    /// was saved: if so, what the previous state named and the new one no
    /// longer does (an old tail object) is removed; if not (the upload was
    /// taken over), what only the new state named is.
    fn saved(&mut self, ok: bool) -> BoxFut<'_, ()>;

    /// Makes the spool's bytes blob `id`, readable with
    /// [`crate::BlobStore::open`]. Call after a saved [`SpoolWriter::sync`]
    /// that reached the upload's length.
    fn finish(self: Box<Self>) -> BoxFut<'static, io::Result<()>>;

    /// True when this writer, synced and saved, may be kept open for the
    /// upload's next request on this node: it then holds one descriptor
    /// and no buffered bytes (a file). False where it would hold more (an
    /// S3 part being filled).
    fn parkable(&self) -> bool;

    /// True when the writer keeps the chunks handed to it beyond the call
    /// that hands them over (S3: until their part is sent), so that a
    /// small slice of a large buffer would pin the whole buffer that long.
    /// A caller then hands over whole buffers where it can.
    fn holds_chunks(&self) -> bool;
}

/// The error of [`SpoolWriter::sync_noted`] on a writer that keeps no notes.
pub fn no_notes() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "this spool keeps no notes (S3, or no direct I/O or extended attributes here)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_as_compact_json() {
        let s = Spool {
            len: 11 << 20,
            handle: Some("up".into()),
            part_size: 5 << 20,
            parts: vec!["e1".into(), "e2".into()],
            tail: Some("t".into()),
        };
        assert_eq!(s.tail_len(), 1 << 20);
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Spool>(&j).unwrap(), s);
        let files = Spool {
            len: 7,
            ..Spool::default()
        };
        assert_eq!(serde_json::to_string(&files).unwrap(), r#"{"len":7}"#);
        assert_eq!(files.tail_len(), 7);
    }
}
