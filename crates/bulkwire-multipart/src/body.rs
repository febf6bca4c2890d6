//! An encoded multipart body: [`Segment`]s whose total length is known
//! before the first byte goes out (so `Content-Length` can be sent up front),
//! and a [`BodyReader`] that streams them in constant memory.
//!
//! [`crate::build::Builder`] and [`crate::template::Template`] make bodies;
//! this module only holds and reads them. A file segment is opened when the
//! reader reaches it, and a file or reader that yields a different length
//! than promised is an error (the `Content-Length` already went out).

use bytes::{Buf, Bytes};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One piece of an encoded body, in order.
pub enum Segment {
    /// Bytes in memory: delimiters, headers, in-memory part data.
    Bytes(Bytes),
    /// `len` bytes of the file at `path`; `len` was measured when it was added.
    File { path: PathBuf, len: u64 },
    /// A caller's reader that must yield exactly `len` bytes. Taken once.
    Reader {
        len: u64,
        reader: Box<dyn Read + Send>,
    },
}

impl Segment {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Segment::Bytes(b) => b.len() as u64,
            Segment::File { len, .. } | Segment::Reader { len, .. } => *len,
        }
    }

    /// Whether the segment has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Bytes> for Segment {
    fn from(b: Bytes) -> Self {
        Segment::Bytes(b)
    }
}

impl fmt::Debug for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segment::Bytes(b) => f.debug_tuple("Bytes").field(&b.len()).finish(),
            Segment::File { path, len } => f
                .debug_struct("File")
                .field("path", path)
                .field("len", len)
                .finish(),
            Segment::Reader { len, .. } => f.debug_struct("Reader").field("len", len).finish(),
        }
    }
}

/// An encoded body: its headers' values and its segments.
#[derive(Debug)]
pub struct Body {
    boundary: Arc<str>,
    content_type: Arc<str>,
    segments: Vec<Segment>,
    len: u64,
}

impl Body {
    pub(crate) fn new(
        boundary: Arc<str>,
        content_type: Arc<str>,
        segments: Vec<Segment>,
        len: u64,
    ) -> Body {
        debug_assert_eq!(len, segments.iter().map(Segment::len).sum::<u64>());
        Body {
            boundary,
            content_type,
            segments,
            len,
        }
    }

    /// The `Content-Type` header value, e.g. `multipart/form-data; boundary=…`.
    pub fn content_type(&self) -> &str {
        &self.content_type
    }

    /// The boundary, without the leading dashes.
    pub fn boundary(&self) -> &str {
        &self.boundary
    }

    /// The exact body length, for `Content-Length`.
    pub fn content_length(&self) -> u64 {
        self.len
    }

    /// The segments in order, e.g. for vectored writes.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The segments, owned (a [`Segment::Reader`] can be read only this way).
    pub fn into_segments(self) -> Vec<Segment> {
        self.segments
    }

    /// Whether every segment is in memory.
    pub fn is_in_memory(&self) -> bool {
        self.segments.iter().all(|s| matches!(s, Segment::Bytes(_)))
    }

    /// The segments as shared `Bytes` (no copy), if all are in memory.
    pub fn to_bytes_vec(&self) -> Option<Vec<Bytes>> {
        let mem = |s: &Segment| match s {
            Segment::Bytes(b) => Some(b.clone()),
            _ => None,
        };
        self.segments.iter().map(mem).collect()
    }

    /// A blocking reader over the whole body, in constant memory. Files are
    /// read straight into the caller's buffer: give it a large one (64 KiB).
    pub fn into_reader(self) -> BodyReader {
        BodyReader {
            rest: self.segments.into_iter(),
            current: Current::Done,
        }
    }
}

/// Streams a [`Body`]: memory segments are copied straight from their
/// `Bytes`; files are opened when reached and read into the caller's buffer,
/// so memory use does not depend on the body's size.
pub struct BodyReader {
    rest: std::vec::IntoIter<Segment>,
    current: Current,
}

enum Current {
    Done,
    Mem(Bytes),
    /// A file not opened yet: opening waits until the reader gets there, and
    /// a failed open leaves it here, so a retry cannot skip the file.
    Closed {
        path: PathBuf,
        len: u64,
    },
    Exact(Exact),
}

impl From<Segment> for Current {
    fn from(s: Segment) -> Current {
        match s {
            Segment::Bytes(b) => Current::Mem(b),
            Segment::File { path, len } => Current::Closed { path, len },
            Segment::Reader { len, reader } => Current::Exact(Exact::new(reader, len)),
        }
    }
}

fn open(path: &Path) -> io::Result<File> {
    File::open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn copy_out(b: &mut Bytes, buf: &mut [u8]) -> usize {
    let n = b.len().min(buf.len());
    buf[..n].copy_from_slice(&b[..n]);
    b.advance(n);
    n
}

/// A source that must yield exactly `declared` bytes: the Content-Length
/// was promised before the first byte, so any difference is an error.
struct Exact {
    inner: Box<dyn Read + Send>,
    remaining: u64,
    declared: u64,
}

impl Exact {
    fn new(inner: Box<dyn Read + Send>, len: u64) -> Exact {
        Exact {
            inner,
            remaining: len,
            declared: len,
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 {
            return self.expect_end();
        }
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            let msg = format!(
                "part source ended {} bytes short of its declared {}",
                self.remaining, self.declared
            );
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, msg));
        }
        self.remaining -= n as u64;
        Ok(n)
    }

    fn expect_end(&mut self) -> io::Result<usize> {
        match self.inner.read(&mut [0u8; 1])? {
            0 => Ok(0),
            _ => {
                let msg = format!(
                    "part source is longer than its declared {} bytes",
                    self.declared
                );
                Err(io::Error::new(io::ErrorKind::InvalidData, msg))
            }
        }
    }
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let n = match &mut self.current {
                Current::Mem(b) => copy_out(b, buf),
                Current::Exact(e) => e.read(buf)?,
                Current::Closed { path, len } => {
                    let file = Box::new(open(path)?);
                    self.current = Current::Exact(Exact::new(file, *len));
                    continue;
                }
                Current::Done => 0,
            };
            if n > 0 {
                return Ok(n);
            }
            match self.rest.next() {
                Some(s) => self.current = Current::from(s),
                None => {
                    self.current = Current::Done;
                    return Ok(0);
                }
            }
        }
    }
}
