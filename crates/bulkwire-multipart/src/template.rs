//! Body templates: encode a form's static bytes once, render it per request.
//!
//! A load test that rebuilds each `multipart/form-data` body re-encodes the
//! same headers and copies the same large file every time (k6's `FormData`
//! managed ~30 req/s for a 140 kB image; precomputed parts, >1,000). A
//! [`Template`] encodes the boundary, delimiters, headers and static values
//! once, at build. The per-request values are [`Slot`]s: [`Template::render`]
//! gives a [`Body`] made of shared static `Bytes` (refcount clones, no copy),
//! one small buffer holding this request's values, and the shared file data.
//!
//! The encoding is that of [`crate::build`] (RFC 7578 §4, RFC 2046 §5.1.1):
//! a render is byte for byte what a [`crate::build::Builder`] makes from the
//! same values. The boundary is checked against the static data at build and
//! against each value at render; so are control bytes in names, filenames and
//! content types (see [`crate::build`]), filename values at render.

use crate::body::{Body, Segment};
use crate::build::{self, Runs};
use bytes::Bytes;
use memchr::memmem::Finder;
use std::io;
use std::mem;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A per-request value: index into the values given to [`Template::render`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(pub usize);

/// A field value or filename: fixed in the template, or filled per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Static(&'a str),
    Slot(Slot),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Static(s)
    }
}

impl From<Slot> for Value<'_> {
    fn from(s: Slot) -> Self {
        Value::Slot(s)
    }
}

/// A filename may be raw bytes: a path's last component need not be UTF-8.
enum Filename<'a> {
    Static(&'a [u8]),
    Slot(Slot),
}

/// A part of the form before the boundary is known.
enum Item {
    Delimiter,
    /// Header text, already escaped.
    Head(Vec<u8>),
    Data(Bytes),
    File {
        path: PathBuf,
        len: u64,
    },
    /// `escape`: a filename, escaped like one; otherwise raw field data.
    Slot {
        index: usize,
        escape: bool,
    },
}

/// Collects the parts of a `multipart/form-data` template.
#[derive(Default)]
pub struct TemplateBuilder {
    items: Vec<Item>,
    /// Slots that fill a filename, with their field's name, for the checks
    /// at render.
    filename_slots: Vec<(usize, Box<str>)>,
    boundary: Option<String>,
    error: Option<io::Error>,
}

impl TemplateBuilder {
    /// An empty form with a random boundary.
    pub fn new() -> Self {
        TemplateBuilder::default()
    }

    /// Forces the boundary; see [`crate::build::Builder::boundary`].
    pub fn boundary(&mut self, boundary: &str) -> io::Result<&mut Self> {
        build::validate_boundary(boundary)?;
        self.boundary = Some(boundary.to_owned());
        Ok(self)
    }

    /// A text field with a fixed or per-request value.
    pub fn text<'a>(&mut self, name: &str, value: impl Into<Value<'a>>) -> &mut Self {
        self.keep(build::check_form(name, None, None));
        let mut h = Vec::new();
        build::put_disposition(&mut h, name);
        build::end_disposition(&mut h, None);
        h.extend_from_slice(b"\r\n");
        self.items.extend([Item::Delimiter, Item::Head(h)]);
        self.items.push(match value.into() {
            Value::Static(s) => Item::Data(Bytes::copy_from_slice(s.as_bytes())),
            Value::Slot(s) => Item::Slot {
                index: s.0,
                escape: false,
            },
        });
        self
    }

    /// A file part from memory; `data` is shared by every render, never copied
    /// (unless it is small enough to ride along with the headers).
    pub fn file_bytes<'a>(
        &mut self,
        name: &str,
        filename: impl Into<Value<'a>>,
        content_type: Option<&str>,
        data: impl Into<Bytes>,
    ) -> &mut Self {
        let filename = match filename.into() {
            Value::Static(f) => Filename::Static(f.as_bytes()),
            Value::Slot(s) => Filename::Slot(s),
        };
        self.file_head(name, filename, content_type);
        self.items.push(Item::Data(data.into()));
        self
    }

    /// A file part read from `path` when a rendered body is read; its length is
    /// taken now, once. The filename defaults to the path's last component.
    pub fn file(
        &mut self,
        name: &str,
        path: impl AsRef<Path>,
        filename: Option<&str>,
        content_type: Option<&str>,
    ) -> io::Result<&mut Self> {
        let (path, len) = build::measure(path.as_ref())?;
        let default = build::default_filename(&path);
        let filename = filename.map_or(&default[..], str::as_bytes);
        self.file_head(name, Filename::Static(filename), content_type);
        self.items.push(Item::File { path, len });
        Ok(self)
    }

    fn file_head(&mut self, name: &str, filename: Filename<'_>, content_type: Option<&str>) {
        let content_type = build::default_type(true, content_type);
        let static_name = match filename {
            Filename::Static(f) => Some(f),
            Filename::Slot(s) => {
                self.filename_slots.push((s.0, name.into()));
                None
            }
        };
        self.keep(build::check_form(name, static_name, content_type));
        let mut h = Vec::new();
        build::put_disposition(&mut h, name);
        h.extend_from_slice(build::FILENAME_OPEN);
        self.items.push(Item::Delimiter);
        match filename {
            Filename::Static(f) => build::put_escaped(&mut h, f),
            Filename::Slot(s) => {
                self.items.push(Item::Head(mem::take(&mut h)));
                self.items.push(Item::Slot {
                    index: s.0,
                    escape: true,
                });
            }
        }
        h.push(b'"');
        build::end_disposition(&mut h, content_type);
        h.extend_from_slice(b"\r\n");
        self.items.push(Item::Head(h));
    }

    /// Keeps the first error for [`TemplateBuilder::build`].
    fn keep(&mut self, r: io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }

    /// Picks the boundary (checked against all static bytes) and encodes
    /// everything static. The builder is left empty.
    pub fn build(&mut self) -> io::Result<Template> {
        let items = mem::take(&mut self.items);
        let filename_slots = mem::take(&mut self.filename_slots);
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let boundary = build::pick_boundary(self.boundary.as_deref(), &static_bytes(&items))?;
        let mut runs = Runs::new(&boundary);
        let mut slots = 0;
        for item in items {
            match item {
                Item::Delimiter => runs.delimiter(),
                Item::Head(h) => runs.text(&h),
                Item::Data(d) => runs.shared(d),
                Item::File { path, len } => runs.push(len, Piece::File { path, len }),
                Item::Slot { index, escape } => {
                    slots = slots.max(index + 1);
                    runs.push(0, Piece::Slot { index, escape });
                }
            }
        }
        let (pieces, static_len) = runs.close();
        let needle = format!("--{boundary}");
        Ok(Template {
            finder: Finder::new(needle.as_bytes()).into_owned(),
            content_type: build::Kind::FormData.content_type(&boundary).into(),
            boundary: boundary.into(),
            pieces,
            static_len,
            slots,
            filename_slots,
        })
    }
}

fn static_bytes(items: &[Item]) -> Vec<&[u8]> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Head(h) => Some(&h[..]),
            Item::Data(d) => Some(&d[..]),
            _ => None,
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Piece {
    Bytes(Bytes),
    File { path: PathBuf, len: u64 },
    Slot { index: usize, escape: bool },
}

impl From<Bytes> for Piece {
    fn from(b: Bytes) -> Self {
        Piece::Bytes(b)
    }
}

/// An encoded form with per-request slots. Cheap to share across threads.
#[derive(Debug, Clone)]
pub struct Template {
    boundary: Arc<str>,
    content_type: Arc<str>,
    pieces: Vec<Piece>,
    static_len: u64,
    slots: usize,
    filename_slots: Vec<(usize, Box<str>)>,
    /// Built once: every render checks its values with it.
    finder: Finder<'static>,
}

impl Template {
    /// The boundary, fixed at build.
    pub fn boundary(&self) -> &str {
        &self.boundary
    }

    /// The `Content-Type` header value, the same for every render.
    pub fn content_type(&self) -> &str {
        &self.content_type
    }

    /// How many values a render takes: the highest slot index plus one.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Length of everything but the slot values.
    pub fn static_len(&self) -> u64 {
        self.static_len
    }

    /// The body for one request. `values[i]` fills `Slot(i)`; a filename
    /// value is escaped as [`crate::build`] escapes filenames.
    ///
    /// Errors with `InvalidInput` if the number of values is not
    /// [`Template::slots`], a value contains `--boundary`, or a filename
    /// value has a control byte other than HT, CR and LF.
    pub fn render<V: AsRef<[u8]>>(&self, values: &[V]) -> io::Result<Body> {
        let mut segments = Vec::with_capacity(self.pieces.len());
        let len = self.render_into(values, &mut segments)?;
        Ok(Body::new(
            self.boundary.clone(),
            self.content_type.clone(),
            segments,
            len,
        ))
    }

    /// Like [`Template::render`], but replaces the contents of `out` with the
    /// segments, so a load loop can reuse one vector. Returns the length.
    pub fn render_into<V: AsRef<[u8]>>(
        &self,
        values: &[V],
        out: &mut Vec<Segment>,
    ) -> io::Result<u64> {
        self.check(values)?;
        let mut values_buf = self.encode_values(values);
        let values_len = values_buf.len() as u64;
        out.clear();
        for p in &self.pieces {
            match p {
                Piece::Bytes(b) => out.push(Segment::Bytes(b.clone())),
                Piece::File { path, len } => out.push(Segment::File {
                    path: path.clone(),
                    len: *len,
                }),
                Piece::Slot { index, escape } => {
                    let n = value_len(values[*index].as_ref(), *escape);
                    if n > 0 {
                        out.push(Segment::Bytes(values_buf.split_to(n)));
                    }
                }
            }
        }
        Ok(self.static_len + values_len)
    }

    fn check<V: AsRef<[u8]>>(&self, values: &[V]) -> io::Result<()> {
        if values.len() != self.slots {
            let msg = format!(
                "template has {} slots, got {} values",
                self.slots,
                values.len()
            );
            return Err(build::invalid(msg));
        }
        let collides = |v: &V| self.finder.find(v.as_ref()).is_some();
        if let Some(i) = values.iter().position(collides) {
            return Err(build::invalid(format!("value {i} contains the boundary")));
        }
        for (i, field) in &self.filename_slots {
            let v = values[*i].as_ref();
            let what = || {
                let f = build::quoted("filename", v);
                format!("{f} (value {i}) of field {field:?}")
            };
            build::check_value(v, true, what)?;
        }
        Ok(())
    }

    /// All of a render's slot values in one buffer, in body order: one
    /// allocation per request, each value a refcounted slice of it.
    fn encode_values<V: AsRef<[u8]>>(&self, values: &[V]) -> Bytes {
        let mut buf = Vec::with_capacity(self.values_len(values));
        for (index, escape) in self.slot_pieces() {
            let v = values[index].as_ref();
            if escape {
                build::put_escaped(&mut buf, v);
            } else {
                buf.extend_from_slice(v);
            }
        }
        Bytes::from(buf)
    }

    fn values_len<V: AsRef<[u8]>>(&self, values: &[V]) -> usize {
        self.slot_pieces()
            .map(|(i, escape)| value_len(values[i].as_ref(), escape))
            .sum()
    }

    fn slot_pieces(&self) -> impl Iterator<Item = (usize, bool)> + '_ {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Slot { index, escape } => Some((*index, *escape)),
            _ => None,
        })
    }
}

fn value_len(v: &[u8], escape: bool) -> usize {
    if escape {
        build::escaped_len(v)
    } else {
        v.len()
    }
}

#[cfg(test)]
mod tests;
