//! The bridge between the codec's synchronous [`Sink`] and the server's
//! async [`crate::upload::FileSink`].
//!
//! `bulkwire_xop::Parser::feed` calls the sink while it decodes; storage
//! writes are async. So the sink only records what happened — a binary
//! began, these bytes, it finished or was aborted — in a staging buffer
//! allocated once per upload, and the handler replays the record after each
//! `feed` (see `super::apply`). The handler feeds at most
//! [`STAGE_INPUT`] body bytes at a time and one slice of input decodes to at
//! most as many bytes plus the codec's small carry (a few base64 characters,
//! a possible boundary prefix), so the buffer stays under [`STAGE_CAP`]
//! whatever the payload size. The decoded bytes leave as zero-copy `Bytes`
//! slices of the buffer; once they are written the allocation is reused.
//!
//! Descriptors: only a binary that can be the upload's `data` gets a file.
//! One that the root part says nothing refers to is discarded as it
//! streams; one before the root (an MTOM `start` naming a later part) must
//! be kept until the root is read, at most
//! [`crate::Limits::soap_early_attachments`] of them; a second `data` is
//! refused when it begins. So a request holds at most
//! `1 + soap_early_attachments` temp files, however many attachments it
//! carries.

use crate::error::{ApiError, Kind};
use bulkwire_xop::{BinaryInfo, Sink};
use bytes::{Bytes, BytesMut};
use std::io;
use std::ops::Range;
use std::sync::Mutex;

/// Most body bytes fed to the codec before the staged bytes are written.
pub const STAGE_INPUT: usize = 64 * 1024;

/// Hard cap of the staging buffer: one input slice, plus room for what the
/// codec may carry from the slice before (a multipart delimiter is at most
/// 74 bytes, a base64 quantum 3).
pub const STAGE_CAP: usize = STAGE_INPUT + 4096;

/// One recorded sink call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A binary began: its index in the message and content type.
    Begin {
        index: usize,
        content_type: Option<String>,
    },
    /// Decoded bytes of the open binary, as a range of the drained buffer.
    Data(Range<usize>),
    Finish,
    Abort,
}

#[derive(Debug)]
struct Inner {
    buf: BytesMut,
    ops: Vec<Op>,
    peak: usize,
    /// Index of the binary that is open.
    open: Option<usize>,
    /// The open binary is being discarded (nothing refers to it).
    discarding: bool,
    /// Attachments kept before the root, and their cap.
    early: usize,
    early_max: usize,
    /// A binary at the `data` path has begun.
    data_seen: bool,
    /// Why the sink failed, for `super::codec_error`.
    refusal: Option<ApiError>,
}

/// A [`Sink`] that stages decoded bytes for the async side. Its `Output` is
/// the binary's index, which maps a [`bulkwire_xop::Binary`] back to the
/// file its bytes went to.
#[derive(Debug)]
pub struct Staging(Mutex<Inner>);

impl Staging {
    /// Keeps at most `early_max` attachments that come before the root.
    pub fn new(early_max: usize) -> Staging {
        Staging(Mutex::new(Inner {
            buf: BytesMut::with_capacity(STAGE_CAP),
            ops: Vec::new(),
            peak: 0,
            open: None,
            discarding: false,
            early: 0,
            early_max,
            data_seen: false,
            refusal: None,
        }))
    }

    /// Why the sink refused a binary, if it did.
    pub fn refusal(&self) -> Option<ApiError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .refusal
            .take()
    }

    /// Takes what was recorded since the last call: the operations and the
    /// bytes their `Data` ranges index.
    pub fn drain(&self) -> (Vec<Op>, Bytes) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let ops = std::mem::take(&mut g.ops);
        let bytes = g.buf.split().freeze();
        (ops, bytes)
    }

    /// Most bytes staged at once.
    pub fn peak(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).peak
    }
}

impl Inner {
    /// Decides where a binary goes: a file (the `data` binary, or an
    /// attachment before the root, within its cap) or nowhere.
    fn admit(&mut self, info: &BinaryInfo<'_>) -> Result<(), ApiError> {
        if info.paths.iter().any(|p| p == super::DATA) {
            if std::mem::replace(&mut self.data_seen, true) {
                let m = "upload has more than one data element";
                return Err(ApiError::new(Kind::Malformed, m));
            }
            return Ok(());
        }
        if info.paths_final {
            self.discarding = true;
            return Ok(());
        }
        self.early += 1;
        if self.early > self.early_max {
            let mut e = ApiError::limit("soap_early_attachments", self.early_max as u64);
            e.message = format!(
                "{}: attachments before the root part are kept until it is read",
                e.message
            );
            return Err(e);
        }
        Ok(())
    }
}

impl Sink for Staging {
    type Output = usize;

    fn begin(&mut self, info: &BinaryInfo<'_>) -> io::Result<()> {
        let g = self.0.get_mut().unwrap_or_else(|p| p.into_inner());
        g.open = Some(info.index);
        if let Err(e) = g.admit(info) {
            let msg = e.message.clone();
            g.refusal = Some(e);
            return Err(io::Error::other(msg));
        }
        if g.discarding {
            return Ok(());
        }
        g.ops.push(Op::Begin {
            index: info.index,
            content_type: info.content_type.map(str::to_owned),
        });
        Ok(())
    }

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        let g = self.0.get_mut().unwrap_or_else(|p| p.into_inner());
        if g.discarding {
            return Ok(());
        }
        let start = g.buf.len();
        let end = start + data.len();
        if end > STAGE_CAP {
            // Only a codec breaking its own bound gets here; refuse rather
            // than grow.
            let msg = format!("staging buffer cap of {STAGE_CAP} bytes reached");
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, msg));
        }
        if start == 0 && g.buf.capacity() < STAGE_CAP {
            // The bytes of the last drain were written and dropped by now:
            // this takes the whole allocation back instead of a new one.
            g.buf.reserve(STAGE_CAP);
        }
        g.buf.extend_from_slice(data);
        g.peak = g.peak.max(end);
        match g.ops.last_mut() {
            Some(Op::Data(r)) if r.end == start => r.end = end,
            _ => g.ops.push(Op::Data(start..end)),
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<usize> {
        let g = self.0.get_mut().unwrap_or_else(|p| p.into_inner());
        if !std::mem::take(&mut g.discarding) {
            g.ops.push(Op::Finish);
        }
        g.open
            .take()
            .ok_or_else(|| io::Error::other("finish without begin"))
    }

    fn abort(&mut self) {
        let g = self.0.get_mut().unwrap_or_else(|p| p.into_inner());
        g.open = None;
        if !std::mem::take(&mut g.discarding) {
            g.ops.push(Op::Abort);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA_PATHS: &[String] = &[];

    /// A binary before the root (kept).
    fn info(index: usize) -> BinaryInfo<'static> {
        BinaryInfo {
            index,
            cid: Some("c"),
            content_type: Some("image/png"),
            paths: DATA_PATHS,
            paths_final: false,
        }
    }

    #[test]
    fn unreferenced_binaries_are_discarded_and_early_ones_capped() {
        let data = [super::super::DATA.to_string()];
        let other = ["/Envelope/Body/upload/other".to_string()];
        let mut s = Staging::new(1);
        // After the root, nothing refers to it: no op, no bytes.
        let gone = BinaryInfo {
            paths: &other,
            paths_final: true,
            ..info(0)
        };
        s.begin(&gone).unwrap();
        s.write(b"dropped").unwrap();
        assert_eq!(s.finish().unwrap(), 0);
        assert_eq!(s.drain(), (vec![], Bytes::new()));
        // The data binary is kept; a second one is refused.
        let d = BinaryInfo {
            paths: &data,
            paths_final: true,
            ..info(1)
        };
        s.begin(&d).unwrap();
        s.write(b"x").unwrap();
        s.finish().unwrap();
        assert_eq!(s.drain().0.len(), 3);
        assert!(s.begin(&BinaryInfo { index: 2, ..d }).is_err());
        assert_eq!(s.refusal().unwrap().status(), 400);
        // One early attachment is kept, a second is over the cap.
        s.begin(&info(3)).unwrap();
        s.finish().unwrap();
        assert!(s.begin(&info(4)).is_err());
        let e = s.refusal().unwrap();
        assert_eq!(e.limit, Some(("soap_early_attachments", 1)));
    }

    #[test]
    fn records_calls_and_merges_adjacent_writes() {
        let mut s = Staging::new(4);
        s.begin(&info(0)).unwrap();
        s.write(b"abc").unwrap();
        s.write(b"de").unwrap();
        assert_eq!(s.finish().unwrap(), 0);
        s.begin(&info(1)).unwrap();
        s.write(b"f").unwrap();
        let (ops, bytes) = s.drain();
        assert_eq!(&bytes[..], b"abcdef");
        let begin = |index| Op::Begin {
            index,
            content_type: Some("image/png".into()),
        };
        assert_eq!(
            ops,
            vec![
                begin(0),
                Op::Data(0..5),
                Op::Finish,
                begin(1),
                Op::Data(5..6)
            ]
        );
        // The next drain starts at 0 again and keeps the open binary.
        s.write(b"gh").unwrap();
        s.abort();
        let (ops, bytes) = s.drain();
        assert_eq!(
            (&bytes[..], ops),
            (&b"gh"[..], vec![Op::Data(0..2), Op::Abort])
        );
        assert_eq!(s.peak(), 6);
    }

    #[test]
    fn the_cap_is_an_error_not_growth() {
        let mut s = Staging::new(4);
        s.begin(&info(0)).unwrap();
        s.write(&vec![0; STAGE_CAP]).unwrap();
        let e = s.write(b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::OutOfMemory);
        let (_, bytes) = s.drain();
        assert_eq!(bytes.len(), STAGE_CAP);
        s.write(b"x").unwrap();
    }

    #[test]
    fn the_allocation_is_reused_once_bytes_are_dropped() {
        let mut s = Staging::new(4);
        s.begin(&info(0)).unwrap();
        s.write(&[1; 1000]).unwrap();
        let (_, bytes) = s.drain();
        let first = bytes.as_ptr();
        drop(bytes);
        s.write(&[2; 1000]).unwrap();
        let (_, bytes) = s.drain();
        assert_eq!(bytes.as_ptr(), first);
    }
}
