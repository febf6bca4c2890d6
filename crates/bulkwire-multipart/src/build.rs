//! Multipart body builder: RFC 7578 §4 `multipart/form-data`, with the body
//! syntax of RFC 2046 §5.1.1 (also used for `multipart/related` and `mixed`).
//!
//! [`Builder::finish`] picks the boundary and encodes every header once, giving
//! a [`Body`]: [`Segment`]s whose total length is known before the first byte
//! is produced, so `Content-Length` goes out up front. In-memory data stays in
//! shared [`Bytes`]; files are named by path, measured once when added, and
//! opened only when a [`BodyReader`] reaches them.
//!
//! Names and filenames are escaped as the WHATWG HTML form-data encoding does
//! (`"` → `%22`, CR → `%0D`, LF → `%0A`, everything else raw UTF-8), which
//! RFC 7578 §4.2 allows and every browser sends.
//!
//! # Boundary
//! A random boundary is `bulkwire-` plus 32 random alphanumerics (≈190 bits).
//! It is redrawn while any in-memory header or part data contains
//! `--boundary`. File and reader parts are not scanned: that would cost a pass
//! over the payload, and the chance that data holds a fresh 190-bit random
//! string is about `len / 2^190`. A boundary forced with [`Builder::boundary`]
//! is checked the same way and a collision is an error, not a broken body.

use bytes::{Buf, Bytes};
use memchr::memmem::Finder;
use rand::{distributions::Alphanumeric, Rng};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::mem;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// In-memory data up to this size is copied next to its headers, so a small
/// field costs no segment (no iovec) of its own; larger data stays shared.
pub(crate) const COALESCE_MAX: usize = 1024;

/// What a file part without an explicit type is sent as (RFC 7578 §4.4).
const DEFAULT_FILE_TYPE: &str = "application/octet-stream";

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

/// The multipart subtype, which decides the body's `Content-Type`.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    FormData,
    /// Holds RFC 2387's `type` parameter, already quoted.
    Related(String),
    Mixed,
}

impl Kind {
    pub(crate) fn content_type(&self, boundary: &str) -> String {
        let b = boundary_param(boundary);
        match self {
            Kind::FormData => format!("multipart/form-data; boundary={b}"),
            Kind::Related(t) => format!("multipart/related; type={t}; boundary={b}"),
            Kind::Mixed => format!("multipart/mixed; boundary={b}"),
        }
    }
}

enum Data {
    Mem(Bytes),
    File {
        path: PathBuf,
        len: u64,
    },
    Reader {
        len: u64,
        reader: Box<dyn Read + Send>,
    },
}

struct Part {
    /// Header lines, each ending in CRLF; the blank line is added on encoding
    /// so that [`Builder::header`] can still append.
    head: Vec<u8>,
    data: Data,
}

/// Collects parts, then encodes them into a [`Body`].
///
/// Adders are chainable; a mistake in one that cannot fail on the spot (a
/// control character in a content type, a bad header name) is reported by
/// [`Builder::finish`].
pub struct Builder {
    kind: Kind,
    boundary: Option<String>,
    parts: Vec<Part>,
    error: Option<io::Error>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// A `multipart/form-data` body (RFC 7578).
    pub fn new() -> Self {
        Builder::with_kind(Kind::FormData)
    }

    /// A `multipart/related` body (RFC 2387) whose root part is `type_param`.
    pub fn related(type_param: &str) -> Self {
        let mut b = Builder::with_kind(Kind::Related(quote(type_param)));
        if has_control(type_param) {
            b.fail("related type parameter has a control character");
        }
        b
    }

    /// A `multipart/mixed` body (RFC 2046 §5.1.3).
    pub fn mixed() -> Self {
        Builder::with_kind(Kind::Mixed)
    }

    fn with_kind(kind: Kind) -> Self {
        Builder {
            kind,
            boundary: None,
            parts: Vec::new(),
            error: None,
        }
    }

    /// Forces the boundary instead of a random one: 1 to 70 RFC 2046
    /// `bchars`, not ending in a space.
    pub fn boundary(&mut self, boundary: &str) -> io::Result<&mut Self> {
        validate_boundary(boundary)?;
        self.boundary = Some(boundary.to_owned());
        Ok(self)
    }

    /// A text field.
    pub fn text(&mut self, name: &str, value: &str) -> &mut Self {
        let head = self.form_head(name, None, None);
        self.push(head, Data::Mem(Bytes::copy_from_slice(value.as_bytes())))
    }

    /// A field from memory; with a `filename` it is a file part, sent as
    /// `application/octet-stream` unless `content_type` says otherwise.
    pub fn bytes(
        &mut self,
        name: &str,
        filename: Option<&str>,
        content_type: Option<&str>,
        data: impl Into<Bytes>,
    ) -> &mut Self {
        let head = self.form_head(name, filename.map(str::as_bytes), content_type);
        self.push(head, Data::Mem(data.into()))
    }

    /// A file part read from `path` when the body is read. The file's length is
    /// taken now, once; the filename defaults to the path's last component.
    pub fn file(
        &mut self,
        name: &str,
        path: impl AsRef<Path>,
        filename: Option<&str>,
        content_type: Option<&str>,
    ) -> io::Result<&mut Self> {
        let (path, len) = measure(path.as_ref())?;
        let filename = filename.map_or_else(|| default_filename(&path), |f| f.as_bytes().to_vec());
        let head = self.form_head(name, Some(&filename), content_type);
        Ok(self.push(head, Data::File { path, len }))
    }

    /// A file part from a reader that must yield exactly `len` bytes; reading
    /// the body fails if it yields fewer or more.
    pub fn reader(
        &mut self,
        name: &str,
        filename: Option<&str>,
        content_type: Option<&str>,
        len: u64,
        reader: Box<dyn Read + Send>,
    ) -> &mut Self {
        let head = self.form_head(name, filename.map(str::as_bytes), content_type);
        self.push(head, Data::Reader { len, reader })
    }

    /// A part without `Content-Disposition`, for `related` and `mixed` bodies.
    pub fn part(&mut self, content_type: Option<&str>, data: impl Into<Bytes>) -> &mut Self {
        let head = self.type_head(content_type);
        self.push(head, Data::Mem(data.into()))
    }

    /// Like [`Builder::part`], with the data read from `path` (measured now).
    pub fn part_file(
        &mut self,
        path: impl AsRef<Path>,
        content_type: Option<&str>,
    ) -> io::Result<&mut Self> {
        let (path, len) = measure(path.as_ref())?;
        let head = self.type_head(content_type);
        Ok(self.push(head, Data::File { path, len }))
    }

    /// Like [`Builder::part`], with `len` bytes from `reader`.
    pub fn part_reader(
        &mut self,
        content_type: Option<&str>,
        len: u64,
        reader: Box<dyn Read + Send>,
    ) -> &mut Self {
        let head = self.type_head(content_type);
        self.push(head, Data::Reader { len, reader })
    }

    /// Adds a header line (e.g. `Content-ID`) to the part added last.
    pub fn header(&mut self, name: &str, value: &str) -> &mut Self {
        if !is_token(name) {
            return self.fail("header name is not an RFC 7230 token");
        }
        if has_control(value) {
            return self.fail("header value has a control character");
        }
        match self.parts.last_mut() {
            Some(p) => put_header(&mut p.head, name, value),
            None => return self.fail("header() called before any part"),
        }
        self
    }

    /// Picks the boundary and encodes the body. The builder is left empty
    /// (subtype and forced boundary kept) for the next body.
    pub fn finish(&mut self) -> io::Result<Body> {
        let parts = mem::take(&mut self.parts);
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let boundary = pick_boundary(self.boundary.as_deref(), &in_memory(&parts))?;
        let mut runs = Runs::new(&boundary);
        for p in parts {
            runs.delimiter();
            runs.text(&p.head);
            runs.text(b"\r\n");
            match p.data {
                Data::Mem(b) => runs.shared(b),
                Data::File { path, len } => runs.push(len, Segment::File { path, len }),
                Data::Reader { len, reader } => runs.push(len, Segment::Reader { len, reader }),
            }
        }
        let (segments, len) = runs.close();
        let content_type = self.kind.content_type(&boundary);
        Ok(Body::new(
            boundary.into(),
            content_type.into(),
            segments,
            len,
        ))
    }

    fn form_head(
        &mut self,
        name: &str,
        filename: Option<&[u8]>,
        content_type: Option<&str>,
    ) -> Vec<u8> {
        let content_type = self.checked(default_type(filename.is_some(), content_type));
        let mut h = Vec::with_capacity(64 + name.len());
        put_disposition(&mut h, name);
        if let Some(f) = filename {
            h.extend_from_slice(FILENAME_OPEN);
            put_escaped(&mut h, f);
            h.push(b'"');
        }
        end_disposition(&mut h, content_type);
        h
    }

    fn type_head(&mut self, content_type: Option<&str>) -> Vec<u8> {
        let mut h = Vec::new();
        if let Some(t) = self.checked(content_type) {
            put_header(&mut h, "Content-Type", t);
        }
        h
    }

    fn checked<'a>(&mut self, content_type: Option<&'a str>) -> Option<&'a str> {
        if content_type.is_some_and(has_control) {
            self.fail("content type has a control character");
        }
        content_type
    }

    fn push(&mut self, head: Vec<u8>, data: Data) -> &mut Self {
        self.parts.push(Part { head, data });
        self
    }

    /// Keeps the first error; later ones are usually consequences of it.
    fn fail(&mut self, msg: &'static str) -> &mut Self {
        self.error.get_or_insert_with(|| invalid(msg));
        self
    }
}

fn in_memory(parts: &[Part]) -> Vec<&[u8]> {
    let mut v = Vec::with_capacity(parts.len() * 2);
    for p in parts {
        v.push(&p.head[..]);
        if let Data::Mem(b) = &p.data {
            v.push(&b[..]);
        }
    }
    v
}

pub(crate) fn measure(path: &Path) -> io::Result<(PathBuf, u64)> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        let msg = format!("{} is not a regular file", path.display());
        return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
    }
    Ok((path.to_path_buf(), meta.len()))
}

/// The path's last component as the browser would send it (raw bytes).
pub(crate) fn default_filename(path: &Path) -> Vec<u8> {
    path.file_name()
        .map_or_else(Vec::new, |f| f.as_encoded_bytes().to_vec())
}

pub(crate) fn default_type(is_file: bool, content_type: Option<&str>) -> Option<&str> {
    content_type.or(is_file.then_some(DEFAULT_FILE_TYPE))
}

/// `Content-Disposition: form-data; name="…"`, without line end.
pub(crate) fn put_disposition(h: &mut Vec<u8>, name: &str) {
    h.extend_from_slice(b"Content-Disposition: form-data; name=\"");
    put_escaped(h, name.as_bytes());
    h.push(b'"');
}

pub(crate) const FILENAME_OPEN: &[u8] = b"; filename=\"";

/// Ends the disposition line and adds the `Content-Type` line, if any.
pub(crate) fn end_disposition(h: &mut Vec<u8>, content_type: Option<&str>) {
    h.extend_from_slice(b"\r\n");
    if let Some(t) = content_type {
        put_header(h, "Content-Type", t);
    }
}

fn put_header(h: &mut Vec<u8>, name: &str, value: &str) {
    for piece in [name.as_bytes(), b": ", value.as_bytes(), b"\r\n"] {
        h.extend_from_slice(piece);
    }
}

/// WHATWG form-data escaping of a name or filename.
pub(crate) fn put_escaped(out: &mut Vec<u8>, v: &[u8]) {
    for &c in v {
        match c {
            b'"' => out.extend_from_slice(b"%22"),
            b'\r' => out.extend_from_slice(b"%0D"),
            b'\n' => out.extend_from_slice(b"%0A"),
            _ => out.push(c),
        }
    }
}

/// Length of `v` after [`put_escaped`]: each escape adds two bytes.
pub(crate) fn escaped_len(v: &[u8]) -> usize {
    let escapes = v.iter().filter(|c| matches!(c, b'"' | b'\r' | b'\n'));
    v.len() + 2 * escapes.count()
}

pub(crate) fn has_control(s: &str) -> bool {
    s.bytes().any(|c| (c < 0x20 && c != b'\t') || c == 0x7f)
}

fn is_token(s: &str) -> bool {
    let tchar = |c: u8| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c);
    !s.is_empty() && s.bytes().all(tchar)
}

/// An RFC 2045 quoted-string.
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The boundary as a parameter value: bchars such as space, `:` or `/` are
/// not token characters, so such a boundary must be quoted.
fn boundary_param(b: &str) -> String {
    if b.bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"'+_-.".contains(&c))
    {
        b.to_owned()
    } else {
        format!("\"{b}\"")
    }
}

fn is_bchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"'()+_,-./:=? ".contains(&c)
}

/// RFC 2046 §5.1.1: 1 to 70 bchars, not ending in a space.
pub(crate) fn validate_boundary(b: &str) -> io::Result<()> {
    if (1..=70).contains(&b.len()) && b.bytes().all(is_bchar) && !b.ends_with(' ') {
        return Ok(());
    }
    Err(invalid(
        "boundary must be 1 to 70 RFC 2046 bchars, not ending in a space",
    ))
}

pub(crate) fn random_boundary() -> String {
    let mut rng = rand::thread_rng();
    let tail: String = (&mut rng)
        .sample_iter(&Alphanumeric)
        .take(32)
        .map(char::from)
        .collect();
    format!("bulkwire-{tail}")
}

/// The forced boundary if it is safe for `pieces`, else a fresh random one.
pub(crate) fn pick_boundary(forced: Option<&str>, pieces: &[&[u8]]) -> io::Result<String> {
    match forced {
        Some(b) if collides(pieces, b) => Err(invalid(
            "the forced boundary occurs in a part's headers or data",
        )),
        Some(b) => Ok(b.to_owned()),
        None => Ok(choose_boundary(pieces, random_boundary)),
    }
}

/// Draws boundaries from `gen` until one occurs in none of `pieces`.
pub(crate) fn choose_boundary(pieces: &[&[u8]], mut gen: impl FnMut() -> String) -> String {
    loop {
        let b = gen();
        if !collides(pieces, &b) {
            return b;
        }
    }
}

/// Whether `--boundary` occurs in any piece. Checking the dash-boundary
/// rather than CRLF + dash-boundary also catches data that starts a part
/// with it, right after the header block's CRLF.
pub(crate) fn collides(pieces: &[&[u8]], boundary: &str) -> bool {
    let needle = format!("--{boundary}");
    let finder = Finder::new(needle.as_bytes());
    pieces.iter().any(|p| finder.find(p).is_some())
}

pub(crate) fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// Lays out a body: delimiters and small data go into one growing run, which
/// becomes a single `Bytes` whenever a separate segment must follow.
pub(crate) struct Runs<T> {
    out: Vec<T>,
    run: Vec<u8>,
    len: u64,
    dash_boundary: Vec<u8>,
    parts: usize,
}

impl<T: From<Bytes>> Runs<T> {
    pub(crate) fn new(boundary: &str) -> Self {
        let dash_boundary = format!("--{boundary}").into_bytes();
        Runs {
            out: Vec::new(),
            run: Vec::new(),
            len: 0,
            dash_boundary,
            parts: 0,
        }
    }

    /// Starts a part: the CRLF that ends the previous part belongs to the
    /// delimiter (RFC 2046 §5.1.1), so the first has none.
    pub(crate) fn delimiter(&mut self) {
        if self.parts > 0 {
            self.text(b"\r\n");
        }
        self.parts += 1;
        self.dash_boundary();
        self.text(b"\r\n");
    }

    fn dash_boundary(&mut self) {
        self.run.extend_from_slice(&self.dash_boundary);
        self.len += self.dash_boundary.len() as u64;
    }

    pub(crate) fn text(&mut self, b: &[u8]) {
        self.run.extend_from_slice(b);
        self.len += b.len() as u64;
    }

    pub(crate) fn shared(&mut self, b: Bytes) {
        if b.len() <= COALESCE_MAX {
            self.text(&b);
        } else {
            self.push(b.len() as u64, T::from(b));
        }
    }

    pub(crate) fn push(&mut self, len: u64, item: T) {
        self.flush();
        self.len += len;
        self.out.push(item);
    }

    fn flush(&mut self) {
        if !self.run.is_empty() {
            self.out
                .push(T::from(Bytes::from(mem::take(&mut self.run))));
        }
    }

    /// Adds the close delimiter; returns the items and their total length.
    pub(crate) fn close(mut self) -> (Vec<T>, u64) {
        if self.parts > 0 {
            self.text(b"\r\n");
        }
        self.dash_boundary();
        self.text(b"--\r\n");
        self.flush();
        (self.out, self.len)
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A file in the temp dir with a unique name, removed on drop.
    pub(crate) struct TempFile(pub PathBuf);

    impl TempFile {
        pub(crate) fn new(data: &[u8]) -> TempFile {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let name = format!("bulkwire-build-{}-{n}.bin", std::process::id());
            let path = std::env::temp_dir().join(name);
            std::fs::write(&path, data).expect("write temp file");
            TempFile(path)
        }

        pub(crate) fn name(&self) -> String {
            self.0.file_name().unwrap().to_string_lossy().into_owned()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Reads 7 bytes at a time, so reads straddle every segment edge.
    pub(crate) fn read_all(body: Body) -> io::Result<Vec<u8>> {
        let mut r = body.into_reader();
        let (mut out, mut buf) = (Vec::new(), [0u8; 7]);
        loop {
            match r.read(&mut buf)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    pub(crate) fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 251) as u8).collect()
    }

    fn forced(b: &str) -> Builder {
        let mut builder = Builder::new();
        builder.boundary(b).unwrap();
        builder
    }

    fn cursor(data: Vec<u8>) -> Box<dyn Read + Send> {
        Box::new(io::Cursor::new(data))
    }

    #[test]
    fn exact_bytes_of_a_small_form() {
        let mut b = forced("XyZ");
        b.text("title", "hi")
            .bytes("doc", Some("a.txt"), Some("text/plain"), "hello");
        b.bytes("raw", None, None, &b"\x00\x01"[..])
            .bytes("f", Some("x.bin"), None, "");
        let body = b.finish().unwrap();
        let expected: &[u8] = b"--XyZ\r\n\
            Content-Disposition: form-data; name=\"title\"\r\n\r\n\
            hi\r\n--XyZ\r\n\
            Content-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\n\
            Content-Type: text/plain\r\n\r\n\
            hello\r\n--XyZ\r\n\
            Content-Disposition: form-data; name=\"raw\"\r\n\r\n\
            \x00\x01\r\n--XyZ\r\n\
            Content-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\n\
            Content-Type: application/octet-stream\r\n\r\n\
            \r\n--XyZ--\r\n";
        assert_eq!(body.content_type(), "multipart/form-data; boundary=XyZ");
        assert_eq!(
            (body.boundary(), body.content_length()),
            ("XyZ", expected.len() as u64)
        );
        assert_eq!(body.segments().len(), 1, "small pieces coalesce");
        assert!(body.is_in_memory());
        assert_eq!(body.to_bytes_vec().unwrap().concat(), expected);
        assert_eq!(read_all(body).unwrap(), expected);
    }

    #[test]
    fn empty_form_is_just_the_close_delimiter() {
        let body = forced("B").finish().unwrap();
        assert_eq!(read_all(body).unwrap(), b"--B--\r\n");
    }

    #[test]
    fn names_and_filenames_are_escaped_like_browsers() {
        let mut b = forced("B");
        b.bytes("a\"b\r\nc", Some("x\"y\rz\n.bin"), None, "d")
            .text("naïve ☃", "v");
        let out = read_all(b.finish().unwrap()).unwrap();
        let out = String::from_utf8(out).unwrap();
        let esc = r#"name="a%22b%0D%0Ac"; filename="x%22y%0Dz%0A.bin""#;
        assert!(out.contains(&format!("Content-Disposition: form-data; {esc}\r\n")));
        assert!(out.contains("name=\"naïve ☃\"\r\n"), "UTF-8 stays raw");
        for s in ["", "plain", "\"\"", "\r\n\r\n", "a%22b"] {
            let mut v = Vec::new();
            put_escaped(&mut v, s.as_bytes());
            assert_eq!(escaped_len(s.as_bytes()), v.len(), "{s:?}");
        }
    }

    #[test]
    fn large_data_is_shared_small_data_coalesced() {
        let big = Bytes::from(pattern(COALESCE_MAX + 1));
        let edge = Bytes::from(pattern(COALESCE_MAX));
        let mut b = forced("B");
        b.bytes("big", Some("b"), None, big.clone())
            .bytes("edge", None, None, edge.clone());
        let body = b.finish().unwrap();
        let segs = body.to_bytes_vec().unwrap();
        assert_eq!(segs.len(), 3, "head, big, rest (edge copied)");
        assert_eq!(segs[1].as_ptr(), big.as_ptr(), "no copy of large data");
        assert!(segs.iter().all(|s| s.as_ptr() != edge.as_ptr()));
    }

    #[test]
    fn content_length_matches_streamed_bytes() {
        let file = TempFile::new(&pattern(100_000));
        let big = Bytes::from(pattern(5000));
        let mut b = Builder::new();
        b.text("a", "1").file("f", &file.0, None, None).unwrap();
        b.bytes("big", Some("b.bin"), Some("image/png"), big.clone());
        b.reader(
            "r",
            Some("r.bin"),
            Some("application/x-r"),
            3000,
            cursor(pattern(3000)),
        );
        let body = b.finish().unwrap();
        assert!(!body.is_in_memory() && body.to_bytes_vec().is_none());
        let (bd, len) = (body.boundary().to_owned(), body.content_length());
        let out = read_all(body).unwrap();
        assert_eq!(out.len() as u64, len);
        let disp = |n: &str, f: &str| {
            format!("Content-Disposition: form-data; name=\"{n}\"; filename=\"{f}\"\r\n")
        };
        let expected = [
            format!("--{bd}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--{bd}\r\n")
                .into_bytes(),
            format!(
                "{}Content-Type: application/octet-stream\r\n\r\n",
                disp("f", &file.name())
            )
            .into_bytes(),
            pattern(100_000),
            format!(
                "\r\n--{bd}\r\n{}Content-Type: image/png\r\n\r\n",
                disp("big", "b.bin")
            )
            .into_bytes(),
            pattern(5000),
            format!(
                "\r\n--{bd}\r\n{}Content-Type: application/x-r\r\n\r\n",
                disp("r", "r.bin")
            )
            .into_bytes(),
            pattern(3000),
            format!("\r\n--{bd}--\r\n").into_bytes(),
        ];
        assert_eq!(out, expected.concat());
    }

    fn reader_body(declared: u64, actual: usize) -> Body {
        let mut b = Builder::new();
        b.reader("r", None, None, declared, cursor(pattern(actual)));
        b.finish().unwrap()
    }

    #[test]
    fn reader_must_yield_its_declared_length() {
        assert!(read_all(reader_body(10, 10)).is_ok());
        let short = read_all(reader_body(10, 9)).unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
        let long = read_all(reader_body(10, 11)).unwrap_err();
        assert_eq!(long.kind(), io::ErrorKind::InvalidData);
        assert!(read_all(reader_body(0, 0)).is_ok());
        assert_eq!(
            read_all(reader_body(0, 1)).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn file_is_opened_lazily_and_a_failed_open_is_not_skipped() {
        let file = TempFile::new(b"abc");
        let mut b = forced("B");
        b.file("f", &file.0, Some("n"), Some("text/plain")).unwrap();
        let body = b.finish().unwrap();
        std::fs::remove_file(&file.0).unwrap();
        let mut r = body.into_reader();
        let mut out = Vec::new();
        assert_eq!(
            r.read_to_end(&mut out).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(out.ends_with(b"\r\n\r\n"), "headers came before the open");
        std::fs::write(&file.0, b"abc").unwrap();
        r.read_to_end(&mut out).unwrap();
        assert!(out.ends_with(b"\r\n\r\nabc\r\n--B--\r\n"));
    }

    #[test]
    fn file_that_changed_since_it_was_added_is_an_error() {
        let file = TempFile::new(b"abc");
        let body = |b: &mut Builder| b.file("f", &file.0, None, None).unwrap().finish().unwrap();
        let (grown, shrunk) = (body(&mut Builder::new()), body(&mut Builder::new()));
        std::fs::write(&file.0, b"abcd").unwrap();
        assert_eq!(
            read_all(grown).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        std::fs::write(&file.0, b"ab").unwrap();
        assert_eq!(
            read_all(shrunk).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn file_that_cannot_be_measured_is_refused_at_once() {
        let missing = std::env::temp_dir().join("bulkwire-build-no-such-file");
        assert_eq!(
            Builder::new()
                .file("f", missing, None, None)
                .err()
                .unwrap()
                .kind(),
            io::ErrorKind::NotFound
        );
        let dir = std::env::temp_dir();
        assert_eq!(
            Builder::new()
                .file("f", dir, None, None)
                .err()
                .unwrap()
                .kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn colliding_boundary_is_redrawn() {
        let pieces: [&[u8]; 2] = [b"head", b"data --abc more"];
        let mut draws = ["abc", "ab", "fresh", "never"].into_iter();
        let b = choose_boundary(&pieces, || draws.next().unwrap().to_owned());
        assert_eq!((b.as_str(), draws.next()), ("fresh", Some("never")));
        assert!(collides(&[b"name=\"--x\""], "x") && !collides(&[b"-x"], "x"));
    }

    #[test]
    fn forced_boundary_that_collides_is_an_error() {
        for (name, value) in [("a", "x--B"), ("--B", "x")] {
            let err = forced("B").text(name, value).finish().unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
        assert!(forced("B").text("a", "-B B--").finish().is_ok());
    }

    #[test]
    fn random_boundary_shape() {
        let mut b = Builder::new();
        let body = b.text("a", "b").finish().unwrap();
        let tail = body.boundary().strip_prefix("bulkwire-").unwrap();
        assert!(tail.len() == 32 && tail.bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(
            body.content_type(),
            format!("multipart/form-data; boundary={}", body.boundary())
        );
        assert_ne!(random_boundary(), random_boundary());
    }

    #[test]
    fn boundary_syntax_is_validated() {
        let seventy = "a".repeat(70);
        for ok in ["simple boundary", "'()+_,-./:=?", seventy.as_str()] {
            assert!(Builder::new().boundary(ok).is_ok(), "{ok:?}");
        }
        for bad in ["", "ab ", "a\rb", "a@b", "a\"b", "é", &"a".repeat(71)] {
            let err = Builder::new().boundary(bad).err().unwrap();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        let body = forced("a b:c").finish().unwrap();
        assert_eq!(
            body.content_type(),
            "multipart/form-data; boundary=\"a b:c\""
        );
    }

    #[test]
    fn related_and_mixed_parts_with_extra_headers() {
        let file = TempFile::new(b"FILE");
        let mut b = Builder::related("application/xop+xml");
        b.boundary("M").unwrap();
        b.part(Some("application/xop+xml; type=\"text/xml\""), "<e/>")
            .header("Content-ID", "<root>");
        b.part_file(&file.0, None)
            .unwrap()
            .part_reader(Some("a/b"), 2, cursor(b"RD".to_vec()));
        let body = b.finish().unwrap();
        assert_eq!(
            body.content_type(),
            "multipart/related; type=\"application/xop+xml\"; boundary=M"
        );
        let expected = "--M\r\nContent-Type: application/xop+xml; type=\"text/xml\"\r\nContent-ID: <root>\r\n\r\n<e/>\
            \r\n--M\r\n\r\nFILE\r\n--M\r\nContent-Type: a/b\r\n\r\nRD\r\n--M--\r\n";
        assert_eq!(body.content_length(), expected.len() as u64);
        assert_eq!(read_all(body).unwrap(), expected.as_bytes());
        let ct = Builder::mixed().finish().unwrap().content_type().to_owned();
        assert!(ct.starts_with("multipart/mixed; boundary=bulkwire-"));
        let q = Builder::related("a\"b\\").finish().unwrap();
        assert!(q
            .content_type()
            .starts_with(r#"multipart/related; type="a\"b\\"; boundary="#));
    }

    #[test]
    fn chained_mistakes_are_reported_by_finish() {
        let cases: [fn(&mut Builder); 5] = [
            |b| {
                b.header("Content-ID", "<x>");
            },
            |b| {
                b.text("a", "b").header("Bad Name", "v");
            },
            |b| {
                b.text("a", "b").header("X-A", "v\r\nX-B: w");
            },
            |b| {
                b.bytes("a", Some("f"), Some("text/plain\r\nX: y"), "d");
            },
            |b| {
                b.part(Some("a/b\n"), "d");
            },
        ];
        for (i, case) in cases.iter().enumerate() {
            let mut b = Builder::new();
            case(&mut b);
            assert_eq!(
                b.finish().unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "case {i}"
            );
            assert_eq!(
                b.finish().unwrap().content_length(),
                47,
                "builder reset after an error"
            );
        }
        assert!(Builder::related("a\nb").finish().is_err());
    }

    #[test]
    fn parser_reads_back_what_the_builder_wrote() {
        use crate::testutil::{run_bytewise, run_whole};
        use crate::{Limits, Parser};
        let file = TempFile::new(&pattern(70_000));
        let mut b = Builder::new();
        b.text("quote\"name", "v\r\n--not-a-boundary")
            .file("f", &file.0, Some("a\nb.bin"), None)
            .unwrap();
        b.bytes("big", Some("big.bin"), Some("image/png"), pattern(4000));
        let body = b.finish().unwrap();
        let parser = || Parser::from_content_type(body.content_type(), Limits::default()).unwrap();
        let (p1, p2) = (parser(), parser());
        let bytes = read_all(body).unwrap();
        let outcome = run_whole(p1, &bytes);
        assert_eq!(outcome.error, None);
        let parts = outcome.parts();
        let got: Vec<_> = parts
            .iter()
            .map(|(i, d)| (i.name.as_deref(), i.filename.as_deref(), d.len()))
            .collect();
        assert_eq!(
            got,
            [
                (Some("quote\"name"), None, 19),
                (Some("f"), Some("a\nb.bin"), 70_000),
                (Some("big"), Some("big.bin"), 4000)
            ]
        );
        assert_eq!(
            parts[1].0.content_type.as_deref(),
            Some("application/octet-stream")
        );
        assert_eq!(
            (&parts[1].1, &parts[2].1),
            (&pattern(70_000), &pattern(4000))
        );
        assert_eq!(run_bytewise(p2, &bytes).parts(), parts);
    }
}
