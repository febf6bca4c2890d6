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
//! against each value at render.

use crate::build::{self, Body, Runs, Segment};
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
        if content_type.is_some_and(build::has_control) {
            self.error
                .get_or_insert_with(|| build::invalid("content type has a control character"));
        }
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

    /// Picks the boundary (checked against all static bytes) and encodes
    /// everything static. The builder is left empty.
    pub fn build(&mut self) -> io::Result<Template> {
        let items = mem::take(&mut self.items);
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
    /// [`Template::slots`] or a value contains `--boundary`.
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
        match values
            .iter()
            .position(|v| self.finder.find(v.as_ref()).is_some())
        {
            Some(i) => Err(build::invalid(format!("value {i} contains the boundary"))),
            None => Ok(()),
        }
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
mod tests {
    use super::*;
    use crate::build::tests::{pattern, read_all, TempFile};
    use crate::build::{Builder, COALESCE_MAX};

    fn forced(b: &str) -> TemplateBuilder {
        let mut t = TemplateBuilder::new();
        t.boundary(b).unwrap();
        t
    }

    /// The same form as a template and, for given values, as a builder.
    struct Form {
        big: Bytes,
        file: TempFile,
    }

    impl Form {
        fn new() -> Form {
            Form {
                big: Bytes::from(pattern(COALESCE_MAX * 8)),
                file: TempFile::new(&pattern(10_000)),
            }
        }

        fn template(&self) -> Template {
            let mut t = forced("TB");
            t.text("a", "static").text("b", Slot(0));
            t.file_bytes("f", Slot(1), Some("image/png"), self.big.clone());
            t.file_bytes("g", "g\".txt", None, "small")
                .text("c", Slot(0));
            t.file("h", &self.file.0, None, None).unwrap();
            t.build().unwrap()
        }

        fn builder(&self, v: [&str; 2]) -> Body {
            let mut b = Builder::new();
            b.boundary("TB").unwrap();
            b.text("a", "static").text("b", v[0]);
            b.bytes("f", Some(v[1]), Some("image/png"), self.big.clone());
            b.bytes("g", Some("g\".txt"), None, "small").text("c", v[0]);
            b.file("h", &self.file.0, None, None).unwrap();
            b.finish().unwrap()
        }
    }

    #[test]
    fn render_equals_builder_output() {
        let form = Form::new();
        let t = form.template();
        assert_eq!(t.slots(), 2);
        for v in [["one", "pic.png"], ["v\"al\r\n", "p\"i\rc\n.png"], ["", ""]] {
            let (body, want) = (t.render(&v).unwrap(), form.builder(v));
            assert_eq!(body.content_type(), want.content_type());
            assert_eq!(body.content_length(), want.content_length(), "{v:?}");
            let n =
                t.static_len() + 2 * v[0].len() as u64 + build::escaped_len(v[1].as_bytes()) as u64;
            assert_eq!(body.content_length(), n);
            let out = read_all(body).unwrap();
            assert_eq!(out.len() as u64, n);
            assert_eq!(out, read_all(want).unwrap(), "{v:?}");
        }
    }

    #[test]
    fn renders_share_file_data_and_static_bytes() {
        let form = Form::new();
        let t = form.template();
        let (r1, r2) = (
            t.render(&["x", "y"]).unwrap(),
            t.render(&["z", "w"]).unwrap(),
        );
        let ptrs = |b: &Body| -> Vec<*const u8> {
            let seg = |s: &Segment| match s {
                Segment::Bytes(b) => b.as_ptr(),
                _ => std::ptr::null(),
            };
            b.segments().iter().map(seg).collect()
        };
        let (p1, p2) = (ptrs(&r1), ptrs(&r2));
        assert!(p1.contains(&form.big.as_ptr()) && p2.contains(&form.big.as_ptr()));
        assert_eq!(p1[0], p2[0], "the first static run is shared");
        let slot_segments = p1.iter().zip(&p2).filter(|(a, b)| a != b).count();
        assert_eq!(slot_segments, 3, "only the slot values differ");
        let file = r1
            .segments()
            .iter()
            .find(|s| matches!(s, Segment::File { .. }));
        assert!(matches!(file, Some(Segment::File { len: 10_000, .. })));
    }

    #[test]
    fn render_into_reuses_the_vector() {
        let form = Form::new();
        let t = form.template();
        let mut out = Vec::new();
        let n = t.render_into(&["a", "b"], &mut out).unwrap();
        let (len, cap) = (out.len(), out.capacity());
        assert_eq!(
            t.render_into(&[String::from("a"), String::from("b")], &mut out)
                .unwrap(),
            n
        );
        assert_eq!((out.len(), out.capacity()), (len, cap));
        assert_eq!(out.iter().map(Segment::len).sum::<u64>(), n);
    }

    #[test]
    fn render_checks_its_values() {
        let t = Form::new().template();
        for bad in [&["a"][..], &["a", "b", "c"], &[]] {
            assert_eq!(
                t.render(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
        for v in [["x--TB", "f"], ["x", "--TB--"]] {
            assert_eq!(
                t.render(&v).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
        assert!(t.render(&["-TB", "--T B"]).is_ok());
    }

    #[test]
    fn build_checks_static_parts() {
        let collide = forced("TB").text("a", "--TB").build();
        assert_eq!(collide.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let name = forced("TB").file_bytes("--TB", Slot(0), None, "d").build();
        assert_eq!(name.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let ctype = forced("TB")
            .file_bytes("a", "f", Some("a/b\r\n"), "d")
            .build();
        assert_eq!(ctype.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let missing = std::env::temp_dir().join("bulkwire-template-no-such-file");
        assert!(TemplateBuilder::new()
            .file("h", missing, None, None)
            .is_err());
        assert!(TemplateBuilder::new().boundary("bad\n").is_err());
    }

    #[test]
    fn exact_bytes_without_slots_and_random_boundary() {
        let t = forced("B").text("a", "1").build().unwrap();
        let body = t.render::<&str>(&[]).unwrap();
        assert_eq!(
            read_all(body).unwrap(),
            b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--B--\r\n"
        );
        let t = TemplateBuilder::new().text("a", Slot(0)).build().unwrap();
        assert!(t.boundary().starts_with("bulkwire-") && t.boundary().len() == 41);
        assert_eq!(
            t.content_type(),
            format!("multipart/form-data; boundary={}", t.boundary())
        );
        fn shareable<T: Send + Sync + Clone>(_: &T) {}
        shareable(&t);
    }
}
