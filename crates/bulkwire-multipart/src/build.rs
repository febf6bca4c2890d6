//! Multipart body builder: RFC 7578 §4 `multipart/form-data`, with the body
//! syntax of RFC 2046 §5.1.1 (also used for `multipart/related` and `mixed`).
//!
//! [`Builder::finish`] picks the boundary and encodes every header once, giving
//! a [`Body`] (module [`crate::body`]): [`Segment`]s whose total length is
//! known before the first byte is produced, so `Content-Length` goes out up
//! front. In-memory data stays in shared [`Bytes`]; files are named by path,
//! measured once when added, and opened only when a [`BodyReader`] reaches
//! them.
//!
//! Names and filenames are escaped as the WHATWG HTML form-data encoding does
//! (`"` → `%22`, CR → `%0D`, LF → `%0A`, everything else raw UTF-8), which
//! RFC 7578 §4.2 allows and every browser sends; a backslash is sent as the
//! quoted-pair `\\`, since receivers (Go's `mime`, python-multipart, ours)
//! read `\"` and `\\` inside a quoted string as escapes. Any other control byte
//! (HT aside) in a name, filename, content type or header value cannot be
//! sent at all, since parsers refuse it in a header (RFC 7230 §3.2.6), so
//! [`Builder::finish`] reports it as `InvalidInput`, naming the field.
//!
//! # Boundary
//! A random boundary is `bulkwire-` plus 32 random alphanumerics (≈190 bits).
//! It is redrawn while any in-memory header or part data contains
//! `--boundary`. File and reader parts are not scanned: that would cost a pass
//! over the payload, and the chance that data holds a fresh 190-bit random
//! string is about `len / 2^190`. A boundary forced with [`Builder::boundary`]
//! is checked the same way and a collision is an error, not a broken body.

use bytes::Bytes;
use memchr::memmem::Finder;
use rand::{distributions::Alphanumeric, Rng};
use std::io::{self, Read};
use std::mem;
use std::path::{Path, PathBuf};

pub use crate::body::{Body, BodyReader, Segment};

/// In-memory data up to this size is copied next to its headers, so a small
/// field costs no segment (no iovec) of its own; larger data stays shared.
pub(crate) const COALESCE_MAX: usize = 1024;

/// What a file part without an explicit type is sent as (RFC 7578 §4.4).
const DEFAULT_FILE_TYPE: &str = "application/octet-stream";

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
        let what = || quoted("related type parameter", type_param.as_bytes());
        b.keep(check_value(type_param.as_bytes(), false, what));
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
        let Some(part) = self.parts.len().checked_sub(1) else {
            return self.fail("header() called before any part");
        };
        if !is_token(name) {
            return self.fail("header name is not an RFC 7230 token");
        }
        let what = || format!("value of header {name} on part {part}");
        let checked = check_value(value.as_bytes(), false, what);
        if checked.is_err() {
            return self.keep(checked);
        }
        put_header(&mut self.parts[part].head, name, value);
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
        let content_type = default_type(filename.is_some(), content_type);
        self.keep(check_form(name, filename, content_type));
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
        if let Some(t) = content_type {
            let part = self.parts.len();
            let what = || format!("{} of part {part}", quoted("content type", t.as_bytes()));
            self.keep(check_value(t.as_bytes(), false, what));
            put_header(&mut h, "Content-Type", t);
        }
        h
    }

    fn push(&mut self, head: Vec<u8>, data: Data) -> &mut Self {
        self.parts.push(Part { head, data });
        self
    }

    /// Keeps the first error; later ones are usually consequences of it.
    fn fail(&mut self, msg: &'static str) -> &mut Self {
        self.keep(Err(invalid(msg)))
    }

    fn keep(&mut self, r: io::Result<()>) -> &mut Self {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
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
            b'\\' => out.extend_from_slice(b"\\\\"),
            _ => out.push(c),
        }
    }
}

/// Length of `v` after [`put_escaped`].
pub(crate) fn escaped_len(v: &[u8]) -> usize {
    let extra = |c: &u8| match c {
        b'"' | b'\r' | b'\n' => 2,
        b'\\' => 1,
        _ => 0,
    };
    v.len() + v.iter().map(extra).sum::<usize>()
}

/// Checks a form part's name, filename and content type, the header values
/// a caller chooses; an error names the field.
pub(crate) fn check_form(
    name: &str,
    filename: Option<&[u8]>,
    content_type: Option<&str>,
) -> io::Result<()> {
    let name_of = || quoted("form-data name", name.as_bytes());
    check_value(name.as_bytes(), true, name_of)?;
    let of_field = |what: &str, v: &[u8]| format!("{} of field {name:?}", quoted(what, v));
    if let Some(f) = filename {
        check_value(f, true, || of_field("filename", f))?;
    }
    let Some(t) = content_type else {
        return Ok(());
    };
    check_value(t.as_bytes(), false, || {
        of_field("content type", t.as_bytes())
    })
}

/// Refuses a header value with a control byte other than HT, which no
/// parser accepts in a header (RFC 7230 §3.2.6). In a name or filename
/// (`escaped`) CR and LF are allowed: [`put_escaped`] encodes them.
pub(crate) fn check_value(
    v: &[u8],
    escaped: bool,
    what: impl FnOnce() -> String,
) -> io::Result<()> {
    let refused = |c: u8| match c {
        b'\t' => false,
        b'\r' | b'\n' => !escaped,
        _ => c < 0x20 || c == 0x7f,
    };
    let Some(i) = v.iter().position(|&c| refused(c)) else {
        return Ok(());
    };
    let msg = format!("{} has control byte {:#04x} at {i}", what(), v[i]);
    Err(invalid(msg))
}

/// `what "value"`, the value shown with its control bytes escaped.
pub(crate) fn quoted(what: &str, v: &[u8]) -> String {
    format!("{what} {:?}", String::from_utf8_lossy(v))
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

#[cfg(test)]
pub(crate) mod tests;
