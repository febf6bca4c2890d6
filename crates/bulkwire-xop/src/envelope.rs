//! The root envelope walker: the SOAP envelope (SOAP 1.1 §4, SOAP 1.2 Part 1
//! §5) streamed through `bulkwire_xml::Tokenizer` (no DTD, bounded), with
//! XOP 1.0 §3 `xop:Include` resolution and the consumer's path selection.
//!
//! It keeps one frame per open element: the rendered path, a bit mask of
//! the [`Select`] paths still matching, and the element's role. A selected
//! *binary* element streams its base64 text through
//! `bulkwire_xml::base64::Decoder` into the sink, or holds an `xop:Include`;
//! a selected *text* element collects its text up to
//! [`crate::Limits::text_bytes`]; everything else is only checked.
//!
//! Rules (XOP 1.0 §3.1, §4.2): an `xop:Include` must be the only child of
//! its element (white space around it is tolerated: pretty-printers add
//! it) and have no content; its `href` must be a `cid:` URL; it must not
//! name the root part. The envelope's bytes outside binary elements are
//! capped by [`crate::Limits::envelope_bytes`]: the input given to the
//! tokenizer is cut at the cap, so the error comes at the same byte however
//! the body was chunked.
//!
//! Error positions: a token borrows the tokenizer, so a fault found while
//! handling one is returned as a [`Fail`] relative to that token and placed
//! once the token is dropped (`Tokenizer::token_offset`). Offsets inside a
//! text token are exact, as text runs are cut only at `<`, `&` and CR.

use crate::cid;
use crate::error::{Error, ErrorKind};
use crate::limits::{LimitKind, Limits};
use crate::message::{Binary, BinaryInfo, Field, Include, QName, Sink, SoapVersion};
use crate::path::Select;
use bulkwire_xml::base64::Decoder;
use bulkwire_xml::{ns, Attrs, Scope, Token, Tokenizer};
use std::io;
use std::sync::Arc;

/// What the walker has found so far; owned by the parser.
#[derive(Debug)]
pub(crate) struct Collected<O> {
    pub version: Option<SoapVersion>,
    pub operation: Option<QName>,
    pub fields: Vec<Field>,
    pub binaries: Vec<Binary<O>>,
    pub includes: Vec<Include>,
    /// A binary has begun in the sink and not finished.
    pub open: bool,
}

impl<O> Default for Collected<O> {
    fn default() -> Self {
        Collected {
            version: None,
            operation: None,
            fields: Vec::new(),
            binaries: Vec::new(),
            includes: Vec::new(),
            open: false,
        }
    }
}

/// Where a fault lies, before the token is dropped.
#[derive(Debug, Clone, Copy)]
pub(crate) enum At {
    /// This many bytes after the current token's start.
    Token(u64),
    /// This offset in the pushed base64 text of the current value.
    Text(u64),
}

/// A fault found while handling a token.
#[derive(Debug)]
pub(crate) struct Fail {
    err: Error,
    at: At,
}

fn fail(kind: ErrorKind, msg: &'static str, at: At) -> Fail {
    Fail {
        err: Error::new(kind, msg, 0),
        at,
    }
}

fn malformed(msg: &'static str, at: u64) -> Fail {
    fail(ErrorKind::Malformed, msg, At::Token(at))
}

fn over(limit: LimitKind, value: u64, at: u64) -> Fail {
    Fail {
        err: Error::limit(limit, value, 0),
        at: At::Token(at),
    }
}

/// Errors out of the base64 decoder's sink callback.
enum PushErr {
    Xml(bulkwire_xml::Error),
    Sink(io::Error),
}

impl From<bulkwire_xml::Error> for PushErr {
    fn from(e: bulkwire_xml::Error) -> Self {
        PushErr::Xml(e)
    }
}

impl PushErr {
    /// A decoding error sits at its text offset, a sink error at the token.
    fn into_fail(self, at_end: bool) -> Fail {
        match self {
            PushErr::Xml(e) => {
                let at = if at_end {
                    At::Token(0)
                } else {
                    At::Text(e.offset())
                };
                Fail {
                    err: Error::from_xml(&e, 0),
                    at,
                }
            }
            PushErr::Sink(e) => Fail {
                err: Error::sink(e, 0),
                at: At::Token(0),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bin {
    /// Selected; no content seen yet.
    Pending,
    /// Streaming inline base64.
    Inline,
    /// Holds an `xop:Include`.
    Included,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Plain,
    Text,
    Binary(Bin),
    Include,
}

#[derive(Debug, Clone)]
struct Frame {
    path_len: usize,
    mask: u64,
    role: Role,
    children: u32,
    /// Non-white-space text seen.
    text: bool,
    /// Has an `xop:Include` child.
    include: bool,
}

/// The token-by-token logic, apart from the tokenizer so that it can be
/// used while a token borrows the tokenizer.
struct Walker {
    select: Arc<Select>,
    limits: Limits,
    expect: Option<SoapVersion>,
    root_cid: Option<String>,
    frames: Vec<Frame>,
    path: String,
    text: Vec<u8>,
    fields_started: usize,
    inline_started: usize,
    content_type: Option<String>,
    decoder: Option<Box<Decoder>>,
    /// (text offset, document offset) of the last pushes that held base64
    /// characters; the decoder carries at most 3 characters, so 4 entries
    /// place any error it reports. `u64::MAX` as document offset: the
    /// current token, not yet placed.
    ring: [(u64, u64); 4],
    ring_len: usize,
}

/// The envelope of one message: tokenizer plus walker.
pub(crate) struct Envelope {
    tk: Tokenizer,
    walk: Walker,
    /// Body offset of the document's first byte.
    base: u64,
    non_binary: u64,
    done: bool,
}

/// What a step asks of the feed loop.
enum Flow {
    Continue,
    NeedMore,
    Eof,
}

impl Envelope {
    pub(crate) fn new(select: Arc<Select>, limits: &Limits) -> Envelope {
        Envelope {
            tk: Tokenizer::new(limits.xml.clone()),
            walk: Walker {
                select,
                limits: limits.clone(),
                expect: None,
                root_cid: None,
                frames: Vec::new(),
                path: String::new(),
                text: Vec::new(),
                fields_started: 0,
                inline_started: 0,
                content_type: None,
                decoder: None,
                ring: [(0, 0); 4],
                ring_len: 0,
            },
            base: 0,
            non_binary: 0,
            done: false,
        }
    }

    /// Where the document starts in the body, the SOAP version the media
    /// type declared, and the root part's Content-ID.
    pub(crate) fn start(&mut self, base: u64, expect: Option<SoapVersion>, cid: Option<String>) {
        self.base = base;
        self.walk.expect = expect;
        self.walk.root_cid = cid;
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Body offset of the next byte expected.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.tk.offset()
    }

    /// Feeds the next piece of the document; `is_last` ends it.
    pub(crate) fn feed<S: Sink>(
        &mut self,
        mut input: &[u8],
        is_last: bool,
        sink: &mut S,
        out: &mut Collected<S::Output>,
    ) -> Result<(), Error> {
        loop {
            let in_binary = self.walk.in_binary();
            let room = match in_binary {
                true => u64::MAX,
                false => self.walk.limits.envelope_bytes - self.non_binary,
            };
            let capped = input.len() as u64 > room;
            let piece = if capped {
                &input[..room as usize]
            } else {
                input
            };
            let step = self.tk.step(piece, is_last && !capped);
            let step = step.map_err(|e| Error::from_xml(&e, self.base))?;
            let consumed = step.consumed;
            let r = self.walk.token(step.event, sink, out);
            if !in_binary {
                self.non_binary += consumed as u64;
            }
            let tok = self.tk.token_offset();
            self.walk.place_ring(tok);
            let flow = r.map_err(|f| self.walk.place(f, self.base + tok))?;
            input = &input[consumed..];
            match flow {
                Flow::Continue => {}
                Flow::NeedMore if capped => {
                    let lim = self.walk.limits.envelope_bytes;
                    return Err(Error::limit(LimitKind::EnvelopeBytes, lim, self.offset()));
                }
                Flow::NeedMore => return Ok(()),
                Flow::Eof => {
                    self.done = true;
                    return Ok(());
                }
            }
        }
    }
}

fn first_non_ws(t: &[u8]) -> Option<usize> {
    t.iter()
        .position(|&b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Walker {
    fn in_binary(&self) -> bool {
        matches!(self.frames.last(), Some(f) if matches!(f.role, Role::Binary(_)))
    }

    /// Turns a fault into an error at its body offset (`tok`: the current
    /// token's).
    fn place(&self, f: Fail, tok: u64) -> Error {
        let at = match f.at {
            At::Token(j) => tok + j,
            At::Text(t) => {
                let hit = self.ring[..self.ring_len]
                    .iter()
                    .rev()
                    .find(|(start, _)| *start <= t);
                match hit {
                    Some(&(start, doc)) => doc + (t - start),
                    None => tok,
                }
            }
        };
        f.err.with_offset(at)
    }

    fn place_ring(&mut self, tok: u64) {
        if let Some(last) = self.ring[..self.ring_len].last_mut() {
            if last.1 == u64::MAX {
                last.1 = tok;
            }
        }
    }

    fn token<S: Sink>(
        &mut self,
        t: Token<'_>,
        sink: &mut S,
        out: &mut Collected<S::Output>,
    ) -> Result<Flow, Fail> {
        match t {
            Token::Start {
                name, attrs, ns, ..
            } => self.start(name, attrs, ns, out)?,
            Token::End { .. } => self.end(sink, out)?,
            Token::Text(text) => self.text(text, sink, out)?,
            Token::Decl { .. } => {}
            Token::NeedMore => return Ok(Flow::NeedMore),
            Token::Eof => return Ok(Flow::Eof),
        }
        Ok(Flow::Continue)
    }

    fn start<O>(
        &mut self,
        name: &[u8],
        attrs: Attrs<'_>,
        scope: Scope<'_>,
        out: &mut Collected<O>,
    ) -> Result<(), Fail> {
        let (uri, local) = scope.resolve(name);
        let is_include = uri == Some(ns::XOP) && local == b"Include";
        match self.frames.last_mut() {
            None => out.version = Some(self.root(uri, local)?),
            Some(parent) => adopt(parent, is_include)?,
        }
        if is_include {
            return self.include(attrs, out);
        }
        if self.frames.len() == 2 && out.operation.is_none() && self.path.ends_with("/Body") {
            out.operation = Some(QName {
                ns: uri.map(lossy),
                local: lossy(local),
            });
        }
        let depth = self.frames.len();
        let (mask, role) = self.select(depth, uri, local);
        let path_len = self.path.len();
        self.path.push('/');
        self.path.push_str(&String::from_utf8_lossy(local));
        match role {
            Role::Text => self.begin_field()?,
            Role::Binary(_) => self.content_type = xmime_type(attrs, scope),
            _ => {}
        }
        self.frames.push(Frame {
            path_len,
            mask,
            role,
            children: 0,
            text: false,
            include: false,
        });
        Ok(())
    }

    fn root(&self, uri: Option<&[u8]>, local: &[u8]) -> Result<SoapVersion, Fail> {
        let v = match uri {
            Some(u) if u == ns::SOAP11_ENV => SoapVersion::Soap11,
            Some(u) if u == ns::SOAP12_ENV => SoapVersion::Soap12,
            _ => return Err(malformed("the root element is not a SOAP Envelope", 0)),
        };
        if local != b"Envelope" {
            return Err(malformed("the root element is not a SOAP Envelope", 0));
        }
        if self.expect.is_some_and(|e| e != v) {
            let msg = "the envelope's SOAP version does not match the Content-Type";
            return Err(malformed(msg, 0));
        }
        Ok(v)
    }

    /// Which selectors still match at `depth`, and the element's role.
    fn select(&self, depth: usize, uri: Option<&[u8]>, local: &[u8]) -> (u64, Role) {
        let parent = self.frames.last().map_or(u64::MAX, |f| f.mask);
        let (mut mask, mut role) = (0u64, Role::Plain);
        for (bit, sel) in self.select.all().enumerate() {
            if parent & (1 << bit) == 0 || !sel.step_matches(depth, uri, local) {
                continue;
            }
            mask |= 1 << bit;
            if sel.len() == depth + 1 {
                role = match (role, self.select.is_binary_bit(bit)) {
                    (_, true) => Role::Binary(Bin::Pending),
                    (Role::Plain, false) => Role::Text,
                    (r, false) => r,
                };
            }
        }
        (mask, role)
    }

    fn begin_field(&mut self) -> Result<(), Fail> {
        if self.fields_started >= self.limits.fields {
            return Err(over(LimitKind::Fields, self.limits.fields as u64, 0));
        }
        self.fields_started += 1;
        self.text.clear();
        Ok(())
    }

    fn include<O>(&mut self, attrs: Attrs<'_>, out: &mut Collected<O>) -> Result<(), Fail> {
        if out.includes.len() >= self.limits.includes {
            return Err(over(LimitKind::Includes, self.limits.includes as u64, 0));
        }
        let href = attrs
            .iter()
            .find(|a| a.name == b"href")
            .ok_or_else(|| malformed("xop:Include without an href", 0))?;
        let cid = cid::cid_url(href.value, self.limits.content_id_len).map_err(|e| Fail {
            err: e,
            at: At::Token(0),
        })?;
        if self.root_cid.as_deref() == Some(cid.as_str()) {
            return Err(malformed("xop:Include names the root part", 0));
        }
        let parent = self.frames.last_mut().expect("an Include has a parent");
        parent.include = true;
        if parent.role == Role::Binary(Bin::Pending) {
            parent.role = Role::Binary(Bin::Included);
        }
        out.includes.push(Include {
            path: self.path.clone(),
            cid,
        });
        self.frames.push(Frame {
            path_len: self.path.len(),
            mask: 0,
            role: Role::Include,
            children: 0,
            text: false,
            include: false,
        });
        Ok(())
    }

    fn text<S: Sink>(
        &mut self,
        t: &[u8],
        sink: &mut S,
        out: &mut Collected<S::Output>,
    ) -> Result<(), Fail> {
        let Some(top) = self.frames.last_mut() else {
            return Ok(());
        };
        match top.role {
            Role::Text => self.field_text(t),
            Role::Binary(Bin::Inline) => self.push_base64(t, sink),
            Role::Binary(Bin::Pending) => {
                let Some(i) = first_non_ws(t) else {
                    return Ok(());
                };
                top.text = true;
                top.role = Role::Binary(Bin::Inline);
                self.begin_inline(i as u64, sink, out)?;
                self.push_base64(t, sink)
            }
            Role::Include => match first_non_ws(t) {
                Some(i) => Err(malformed("xop:Include has content", i as u64)),
                None => Ok(()),
            },
            Role::Plain | Role::Binary(Bin::Included) => {
                if top.text && !top.include {
                    return Ok(());
                }
                let Some(i) = first_non_ws(t) else {
                    return Ok(());
                };
                if top.include {
                    let msg = "xop:Include is not the only child of its element";
                    return Err(malformed(msg, i as u64));
                }
                top.text = true;
                Ok(())
            }
        }
    }

    fn field_text(&mut self, t: &[u8]) -> Result<(), Fail> {
        let room = self.limits.text_bytes - self.text.len();
        if t.len() > room {
            let lim = self.limits.text_bytes as u64;
            return Err(over(LimitKind::TextBytes, lim, room as u64));
        }
        self.text.extend_from_slice(t);
        Ok(())
    }

    fn begin_inline<S: Sink>(
        &mut self,
        at: u64,
        sink: &mut S,
        out: &mut Collected<S::Output>,
    ) -> Result<(), Fail> {
        if self.inline_started >= self.limits.inline_binaries {
            let lim = self.limits.inline_binaries as u64;
            return Err(over(LimitKind::InlineBinaries, lim, at));
        }
        self.inline_started += 1;
        let dec = self.decoder.get_or_insert_with(|| Box::new(Decoder::new()));
        dec.reset();
        self.ring_len = 0;
        let paths = [self.path.clone()];
        let info = BinaryInfo {
            index: out.binaries.len(),
            cid: None,
            content_type: self.content_type.as_deref(),
            paths: &paths,
            paths_final: true,
        };
        sink.begin(&info).map_err(|e| Fail {
            err: Error::sink(e, 0),
            at: At::Token(at),
        })?;
        out.open = true;
        Ok(())
    }

    fn push_base64<S: Sink>(&mut self, t: &[u8], sink: &mut S) -> Result<(), Fail> {
        let dec = self.decoder.as_mut().expect("begun");
        if first_non_ws(t).is_some() {
            if self.ring_len == self.ring.len() {
                self.ring.rotate_left(1);
                self.ring_len -= 1;
            }
            self.ring[self.ring_len] = (dec.text_len(), u64::MAX);
            self.ring_len += 1;
        }
        let mut write = |b: &[u8]| sink.write(b).map_err(PushErr::Sink);
        dec.push(t, &mut write).map_err(|e| e.into_fail(false))
    }

    fn end<S: Sink>(&mut self, sink: &mut S, out: &mut Collected<S::Output>) -> Result<(), Fail> {
        let Some(f) = self.frames.last().cloned() else {
            return Ok(());
        };
        match f.role {
            Role::Text => {
                let value = String::from_utf8(std::mem::take(&mut self.text))
                    .map_err(|_| malformed("a text field is not UTF-8", 0))?;
                out.fields.push(Field {
                    path: self.path.clone(),
                    value,
                });
            }
            Role::Binary(Bin::Pending) => {
                // An empty element: an empty base64 value.
                self.begin_inline(0, sink, out)?;
                self.finish_inline(sink, out)?;
            }
            Role::Binary(Bin::Inline) => self.finish_inline(sink, out)?,
            _ => {}
        }
        self.frames.pop();
        self.path.truncate(f.path_len);
        Ok(())
    }

    fn finish_inline<S: Sink>(
        &mut self,
        sink: &mut S,
        out: &mut Collected<S::Output>,
    ) -> Result<(), Fail> {
        let dec = self.decoder.as_mut().expect("begun");
        let mut write = |b: &[u8]| sink.write(b).map_err(PushErr::Sink);
        dec.finish(&mut write).map_err(|e| e.into_fail(true))?;
        let len = dec.decoded_len();
        let output = sink.finish().map_err(|e| Fail {
            err: Error::sink(e, 0),
            at: At::Token(0),
        })?;
        out.open = false;
        out.binaries.push(Binary {
            paths: vec![self.path.clone()],
            cid: None,
            content_type: self.content_type.take(),
            len,
            output,
        });
        Ok(())
    }
}

/// A child element starts inside `parent`: checks the XOP and selection
/// rules and counts it.
fn adopt(parent: &mut Frame, is_include: bool) -> Result<(), Fail> {
    match parent.role {
        Role::Include => return Err(malformed("xop:Include has child elements", 0)),
        Role::Text => return Err(malformed("an element inside a selected text field", 0)),
        Role::Binary(_) if !is_include => {
            return Err(malformed("an element inside a selected binary element", 0))
        }
        _ => {}
    }
    let alone = !parent.include && !(is_include && (parent.children > 0 || parent.text));
    if !alone {
        let msg = "xop:Include is not the only child of its element";
        return Err(malformed(msg, 0));
    }
    parent.children += 1;
    Ok(())
}

/// The `xmime:contentType` attribute (XML Media Types §2.1), if any.
fn xmime_type(attrs: Attrs<'_>, scope: Scope<'_>) -> Option<String> {
    attrs
        .iter()
        .find(|a| scope.resolve_attr(a.name) == (Some(ns::XMIME), &b"contentType"[..]))
        .map(|a| lossy(a.value))
}
