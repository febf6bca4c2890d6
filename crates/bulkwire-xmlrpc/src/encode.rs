//! The streaming encoder: a `methodCall`, `methodResponse` or fault
//! (<http://xmlrpc.com/spec.md>) whose exact length is known before the
//! first byte is written, with every `base64` value read from its
//! [`Blob`] in blocks and encoded on the fly by `bulkwire-xml`'s SIMD
//! base64 encoder, optionally wrapped at 76 columns (RFC 2045 §6.8) as
//! Python's `xmlrpc.client` does.
//!
//! Encoding happens in two steps. [`encode_call`] / [`encode_response`]
//! walk the tree once and render every byte except the payloads into one
//! small buffer (its size is that of the scalars, never of a payload),
//! noting where each blob goes; [`Encoded::len`] is then exact, for a
//! `Content-Length`, and [`Encoded::write_to`] streams the body in blocks.

use crate::error::{Error, ErrorKind};
use crate::scalar::xml_char;
use crate::value::{Fault, Value};
use bulkwire_xml::base64::{encoded_len, Encoder, LineEnd};
use std::io::{self, Read, Write};
use std::path::PathBuf;

/// Read size for blobs (a multiple of 3, so no carry between reads).
const READ_BLOCK: usize = 48 * 1024;
/// Deepest value tree the encoder walks (parsed trees are far shallower).
const MAX_DEPTH: usize = 512;

/// The bytes of a `base64` value to send: a length known in advance and a
/// reader that yields exactly that many bytes.
pub trait Blob {
    /// Bytes the reader will yield.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A reader over the bytes, opened when the value is written.
    fn open(&self) -> io::Result<Box<dyn Read + '_>>;
}

impl Blob for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn open(&self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(self.as_slice()))
    }
}

impl Blob for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn open(&self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(*self))
    }
}

impl Blob for bytes::Bytes {
    fn len(&self) -> u64 {
        bytes::Bytes::len(self) as u64
    }
    fn open(&self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(&self[..]))
    }
}

/// A file, opened when written. The length is given, not looked up, so
/// that building a body does no `stat`; a file of another length fails the
/// write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileBlob {
    pub path: PathBuf,
    pub len: u64,
}

impl Blob for FileBlob {
    fn len(&self) -> u64 {
        self.len
    }
    fn open(&self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(std::fs::File::open(&self.path)?))
    }
}

/// How to render a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Wrap base64 at 76 columns with this line end (Python's
    /// `xmlrpc.client.Binary` uses LF), or not at all (the default: every
    /// parser strips the white space, and the body is smaller).
    pub wrap: Option<LineEnd>,
    /// Start with `<?xml version="1.0"?>`.
    pub declaration: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            wrap: None,
            declaration: true,
        }
    }
}

/// A rendered message: text with holes where blobs go.
#[derive(Debug)]
pub struct Encoded<'a, B> {
    text: Vec<u8>,
    pieces: Vec<Piece<'a, B>>,
    wrap: Option<LineEnd>,
    len: u64,
}

#[derive(Debug)]
enum Piece<'a, B> {
    Text(usize, usize),
    Blob(&'a B),
}

/// Renders `<methodCall>` with `method` and `params`.
pub fn encode_call<'a, B: Blob>(
    method: &str,
    params: &'a [Value<B>],
    opts: &EncodeOptions,
) -> Result<Encoded<'a, B>, Error> {
    let mut r = Render::new(opts);
    r.raw(b"<methodCall><methodName>");
    r.escaped(method)?;
    r.raw(b"</methodName><params>");
    for p in params {
        r.param(p)?;
    }
    r.raw(b"</params></methodCall>");
    Ok(r.done())
}

/// Renders a successful `<methodResponse>` carrying `value`.
pub fn encode_response<'a, B: Blob>(
    value: &'a Value<B>,
    opts: &EncodeOptions,
) -> Result<Encoded<'a, B>, Error> {
    let mut r = Render::new(opts);
    r.raw(b"<methodResponse><params>");
    r.param(value)?;
    r.raw(b"</params></methodResponse>");
    Ok(r.done())
}

/// Renders a fault response. Never fails: characters XML 1.0 cannot carry
/// in the fault string become U+FFFD.
pub fn encode_fault(fault: &Fault) -> Vec<u8> {
    let string: String = fault
        .string
        .chars()
        .map(|c| if xml_char(c) { c } else { '\u{FFFD}' })
        .collect();
    let v: Value<Vec<u8>> = Value::Struct(vec![
        ("faultCode".into(), Value::Int(fault.code)),
        ("faultString".into(), Value::String(string)),
    ]);
    let mut r = Render::new(&EncodeOptions::default());
    r.raw(b"<methodResponse><fault>");
    r.value(&v, 0).expect("sanitized fault renders");
    r.raw(b"</fault></methodResponse>");
    r.text
}

impl<B: Blob> Encoded<'_, B> {
    /// Exact length of the body in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes the body, reading each blob in 48 KiB blocks; returns the
    /// bytes written (always [`Encoded::len`]). A blob whose reader yields
    /// another length than it declared fails with `InvalidData`.
    pub fn write_to<W: Write + ?Sized>(&self, w: &mut W) -> io::Result<u64> {
        let mut buf = Vec::new();
        let mut n = 0;
        for p in &self.pieces {
            match *p {
                Piece::Text(a, b) => {
                    w.write_all(&self.text[a..b])?;
                    n += (b - a) as u64;
                }
                Piece::Blob(blob) => {
                    buf.resize(READ_BLOCK, 0);
                    n += write_blob(blob, &mut buf, self.wrap, w)?;
                }
            }
        }
        debug_assert_eq!(n, self.len);
        Ok(n)
    }

    /// The whole body in memory (for small messages and tests).
    pub fn to_vec(&self) -> io::Result<Vec<u8>> {
        let mut v = Vec::with_capacity(usize::try_from(self.len).unwrap_or(0));
        self.write_to(&mut v)?;
        Ok(v)
    }
}

/// Streams one blob through a base64 encoder (`bulkwire-xml`'s has no
/// reset; one per blob costs two allocations, nothing next to a payload).
fn write_blob<B: Blob, W: Write + ?Sized>(
    blob: &B,
    buf: &mut [u8],
    wrap: Option<LineEnd>,
    w: &mut W,
) -> io::Result<u64> {
    let mut enc = Encoder::new(wrap);
    let mut reader = blob.open()?;
    let mut out = |b: &[u8]| w.write_all(b);
    let mut total = 0u64;
    loop {
        let k = match reader.read(buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += k as u64;
        if total > blob.len() {
            break;
        }
        enc.push(&buf[..k], &mut out)?;
    }
    if total != blob.len() {
        let msg = format!("blob declared {} bytes but yielded {total}", blob.len());
        return Err(io::Error::new(io::ErrorKind::InvalidData, msg));
    }
    enc.finish(&mut out)?;
    Ok(encoded_len(total, wrap))
}

struct Render<'a, B> {
    text: Vec<u8>,
    pieces: Vec<Piece<'a, B>>,
    /// Start of the text not yet in `pieces`.
    mark: usize,
    blob_len: u64,
    wrap: Option<LineEnd>,
}

impl<'a, B: Blob> Render<'a, B> {
    fn new(opts: &EncodeOptions) -> Self {
        let mut r = Render {
            text: Vec::new(),
            pieces: Vec::new(),
            mark: 0,
            blob_len: 0,
            wrap: opts.wrap,
        };
        if opts.declaration {
            r.raw(b"<?xml version=\"1.0\"?>\n");
        }
        r
    }

    fn raw(&mut self, b: &[u8]) {
        self.text.extend_from_slice(b);
    }

    /// Character data (XML 1.0 §2.4): `&`, `<`, `>` and CR (which a parser
    /// would turn into LF, §2.11) are escaped; other characters XML cannot
    /// carry are refused.
    fn escaped(&mut self, s: &str) -> Result<(), Error> {
        if !s.chars().all(xml_char) {
            let msg = "string holds a character XML 1.0 cannot carry";
            return Err(Error::new(
                ErrorKind::Unsupported,
                msg,
                self.text.len() as u64,
            ));
        }
        let mut last = 0;
        for (i, b) in s.bytes().enumerate() {
            let rep: &[u8] = match b {
                b'&' => b"&amp;",
                b'<' => b"&lt;",
                b'>' => b"&gt;",
                b'\r' => b"&#13;",
                _ => continue,
            };
            self.text.extend_from_slice(&s.as_bytes()[last..i]);
            self.text.extend_from_slice(rep);
            last = i + 1;
        }
        self.text.extend_from_slice(&s.as_bytes()[last..]);
        Ok(())
    }

    fn param(&mut self, v: &'a Value<B>) -> Result<(), Error> {
        self.raw(b"<param>");
        self.value(v, 0)?;
        self.raw(b"</param>");
        Ok(())
    }

    fn value(&mut self, v: &'a Value<B>, depth: usize) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            let msg = "value nested too deeply to encode";
            return Err(Error::new(
                ErrorKind::Unsupported,
                msg,
                self.text.len() as u64,
            ));
        }
        self.raw(b"<value>");
        match v {
            Value::Int(i) => self.scalar("int", &i.to_string()),
            Value::I8(i) => self.scalar("i8", &i.to_string()),
            Value::Bool(b) => self.scalar("boolean", if *b { "1" } else { "0" }),
            Value::Double(d) => self.scalar("double", &d.to_string()),
            Value::DateTime(d) => self.scalar("dateTime.iso8601", d.as_str()),
            Value::String(s) => {
                self.raw(b"<string>");
                self.escaped(s)?;
                self.raw(b"</string>");
            }
            Value::Base64(b) => self.blob(b),
            Value::Struct(m) => self.members(m, depth)?,
            Value::Array(items) => {
                self.raw(b"<array><data>");
                for item in items {
                    self.value(item, depth + 1)?;
                }
                self.raw(b"</data></array>");
            }
            Value::Nil => self.raw(b"<nil/>"),
        }
        self.raw(b"</value>");
        Ok(())
    }

    fn members(&mut self, m: &'a [(String, Value<B>)], depth: usize) -> Result<(), Error> {
        self.raw(b"<struct>");
        for (k, v) in m {
            self.raw(b"<member><name>");
            self.escaped(k)?;
            self.raw(b"</name>");
            self.value(v, depth + 1)?;
            self.raw(b"</member>");
        }
        self.raw(b"</struct>");
        Ok(())
    }

    /// Text that needs no escaping (numbers, checked date-times).
    fn scalar(&mut self, tag: &str, text: &str) {
        let tag = tag.as_bytes();
        self.raw(b"<");
        self.raw(tag);
        self.raw(b">");
        self.raw(text.as_bytes());
        self.raw(b"</");
        self.raw(tag);
        self.raw(b">");
    }

    fn blob(&mut self, b: &'a B) {
        self.raw(b"<base64>");
        self.pieces.push(Piece::Text(self.mark, self.text.len()));
        self.mark = self.text.len();
        self.pieces.push(Piece::Blob(b));
        self.blob_len += encoded_len(b.len(), self.wrap);
        self.raw(b"</base64>");
    }

    fn done(mut self) -> Encoded<'a, B> {
        self.pieces.push(Piece::Text(self.mark, self.text.len()));
        Encoded {
            len: self.text.len() as u64 + self.blob_len,
            text: self.text,
            pieces: self.pieces,
            wrap: self.wrap,
        }
    }
}
