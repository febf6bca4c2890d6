//! The sans-IO XML-RPC parser (<http://xmlrpc.com/spec.md>): a state
//! machine over [`bulkwire_xml::Tokenizer`] that builds the value tree of a
//! `methodCall` or `methodResponse` and streams every `base64` value, as
//! its text arrives, into a [`Base64Sink`]: text in the usual 76-column
//! layout is read straight from the body ahead of the tokenizer and
//! decoded block-wise (`lines.rs`); anything else goes through the
//! tokenizer and the block decoder of `bulkwire-xml`, with identical
//! results and errors.
//!
//! [`Parser::feed`] takes each input chunk whole (nothing is borrowed past
//! the call): the tokenizer copies only what straddles chunks (a tag, a
//! reference), scalar text is collected up to [`Limits::string_bytes`], and
//! base64 text is decoded in place, so memory stays bounded whatever the
//! payload. Results and errors (kind, offset, limit) are the same for every
//! chunking of a body.
//!
//! Grammar accepted (white space between elements is ignored):
//! ```text
//! methodCall     = <methodCall> <methodName>text</methodName> [<params> param* </params>] </methodCall>
//! methodResponse = <methodResponse> (<params> param* </params> | <fault> value </fault>) </methodResponse>
//! param          = <param> value </param>
//! value          = <value> (text | int | i4 | i8 | boolean | string | double
//!                  | dateTime.iso8601 | base64 | struct | array | nil) </value>
//! struct         = <struct> (<member> <name>text</name> value </member>)* </struct>
//! array          = <array> <data> value* </data> </array>
//! ```

use crate::error::{Error, ErrorKind};
use crate::limits::{LimitKind, Limits};
use crate::lines::{Lines, Take};
use crate::scalar::{self, is_ws, Elem, Scalar};
use crate::sink::Base64Sink;
use crate::value::{Call, Fault, Message, PathSeg, Response, Value, ValuePath};
use bulkwire_xml::base64::Decoder;
use bulkwire_xml::{Token, Tokenizer};

/// An open element and what it has collected so far.
#[derive(Debug)]
enum Frame<B> {
    MethodCall {
        name: bool,
        params: bool,
    },
    MethodResponse {
        body: bool,
    },
    MethodName,
    Params,
    Param(Option<Value<B>>),
    Fault(Option<Value<B>>),
    /// `typed`: the value of the type element, once it ended.
    Value {
        typed: Option<Value<B>>,
        child: bool,
    },
    Scalar(Scalar),
    Base64,
    Struct(Vec<(String, Value<B>)>),
    Member {
        name: Option<String>,
        value: Option<Value<B>>,
    },
    Name,
    Array(Option<Vec<Value<B>>>),
    Data(Vec<Value<B>>),
}

/// A token with its text re-borrowed from the input (or copied, when the
/// tokenizer produced it), so the tokenizer can be asked for offsets.
enum Ev {
    Start(Option<Elem>),
    End,
    Text(TextAt),
    Skip,
    NeedMore,
    Eof,
}

enum TextAt {
    Input(usize, usize),
    /// A reference's replacement or a normalized line end (at most 4 bytes).
    Small([u8; 8], usize),
}

/// Maps offsets in the text pushed to the base64 decoder back to body
/// offsets: each entry is (text offset, body offset − text offset) from
/// where that shift starts. The shift changes only at references, line-end
/// normalization, comments and CDATA markup; a decoder error can point at
/// most 3 characters back, so a few entries suffice.
#[derive(Debug, Default)]
struct Shifts {
    ring: [(u64, u64); 8],
    len: usize,
}

impl Shifts {
    fn record(&mut self, text_off: u64, body_off: u64) {
        let shift = body_off - text_off;
        if self.len > 0 && self.ring[(self.len - 1) % 8].1 == shift {
            return;
        }
        self.ring[self.len % 8] = (text_off, shift);
        self.len += 1;
    }

    fn body_offset(&self, text_off: u64) -> u64 {
        let first = self.len.saturating_sub(8);
        let shift = (first..self.len)
            .rev()
            .map(|i| self.ring[i % 8])
            .find(|&(start, _)| start <= text_off)
            .or_else(|| self.len.checked_sub(1).map(|i| self.ring[i % 8]))
            .map_or(0, |(_, s)| s);
        text_off + shift
    }
}

/// The open `base64` value.
#[derive(Debug, Default)]
struct Open64 {
    /// Offset of its `<base64>` tag.
    tag: u64,
    shifts: Shifts,
}

/// Everything but the tokenizer, so that a token borrowed from the
/// tokenizer can be handled while this is mutated.
struct State<S: Base64Sink> {
    limits: Limits,
    sink: S,
    decoder: Option<Box<Decoder>>,
    lines: Option<Box<Lines>>,
    /// Off in tests that want the general path alone.
    fast_path: bool,
    /// Raw bytes of the fast path, rebuilt to be replayed through the
    /// tokenizer.
    raw: Vec<u8>,
    open64: Option<Open64>,
    stack: Vec<Frame<S::Output>>,
    /// Text of the current scalar, method name or member name.
    text: Vec<u8>,
    /// Body offset of its first byte.
    text_at: Option<u64>,
    peak_text: usize,
    tree_bytes: u64,
    method: Option<String>,
    params: Vec<Value<S::Output>>,
    fault: Option<Fault>,
    call: bool,
    done: bool,
}

/// Parses one XML-RPC message; see the module docs.
pub struct Parser<S: Base64Sink> {
    tk: Tokenizer,
    st: State<S>,
    error: Option<Error>,
    /// How deep replays of fast-path bytes are nested.
    replaying: u8,
}

impl<S: Base64Sink> std::fmt::Debug for Parser<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parser")
            .field("offset", &self.offset())
            .field("depth", &self.st.stack.len())
            .field("done", &self.st.done)
            .finish()
    }
}

impl<S: Base64Sink> Parser<S> {
    /// A parser that hands `base64` values to `sink`.
    pub fn new(limits: Limits, sink: S) -> Parser<S> {
        Parser {
            tk: Tokenizer::new(limits.xml()),
            st: State {
                limits,
                sink,
                decoder: None,
                lines: None,
                fast_path: true,
                raw: Vec::new(),
                open64: None,
                stack: Vec::new(),
                text: Vec::new(),
                text_at: None,
                peak_text: 0,
                tree_bytes: 0,
                method: None,
                params: Vec::new(),
                fault: None,
                call: false,
                done: false,
            },
            error: None,
            replaying: 0,
        }
    }

    /// Turns the fast path for wrapped base64 text off (or back on) for
    /// values that start from now on, so that tests can compare it with
    /// the general path.
    #[doc(hidden)]
    pub fn set_fast_path(&mut self, on: bool) {
        self.st.fast_path = on;
    }

    /// Parses the next chunk of the body, all of it; `is_last` says no
    /// chunk follows. Errors are sticky: every later call returns the same
    /// one, and an open `base64` value has been aborted in the sink.
    pub fn feed(&mut self, input: &[u8], is_last: bool) -> Result<(), Error> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let r = self.run(input, is_last);
        if let Err(e) = &r {
            self.error = Some(e.clone());
            if self.st.open64.take().is_some() {
                self.st.sink.abort();
            }
        }
        r
    }

    fn run(&mut self, mut input: &[u8], is_last: bool) -> Result<(), Error> {
        loop {
            if self.fast_path_on() {
                input = self.fast(input, is_last)?;
                // Still on: all input staged, or a replay started another
                // value, whose fast path takes the rest.
                if self.fast_path_on() {
                    if input.is_empty() && !is_last {
                        return Ok(());
                    }
                    continue;
                }
            }
            let (consumed, ev) = self.next(input, is_last)?;
            let base = input;
            input = &input[consumed..];
            let at = self.tk.token_offset();
            match ev {
                Ev::Start(elem) => self.st.start(elem, at)?,
                Ev::End => self.st.end(at)?,
                Ev::Text(TextAt::Input(a, b)) => self.st.text(&base[a..b], at)?,
                Ev::Text(TextAt::Small(buf, n)) => self.st.text(&buf[..n], at)?,
                Ev::Skip => {}
                Ev::NeedMore => return Ok(()),
                Ev::Eof => return self.st.eof(self.tk.offset()),
            }
        }
    }

    /// True while the fast path reads the open `base64` value's text from
    /// the body, ahead of the tokenizer. It can start only where the
    /// tokenizer reads plain character data (right after `<base64>`), and
    /// not inside a replay of a replay (which keeps recursion shallow).
    fn fast_path_on(&mut self) -> bool {
        let Some(lines) = self.st.lines.as_deref_mut() else {
            return false;
        };
        if !lines.active {
            return false;
        }
        if lines.pending() == 0 && (!self.tk.in_text() || self.replaying > 1) {
            lines.active = false;
            return false;
        }
        true
    }

    /// Stages `input` on the fast path, committing full blocks; at the
    /// first irregularity (or the end of the body, or a `<` in the last
    /// partial line of an input) commits what decodes and replays the rest
    /// through the tokenizer. Returns the input left for the tokenizer.
    fn fast<'i>(&mut self, mut input: &'i [u8], is_last: bool) -> Result<&'i [u8], Error> {
        loop {
            let lines = self.st.lines.as_deref_mut().expect("fast path on");
            match lines.take(input) {
                Take::More => {
                    if is_last || lines.partial_has_markup() {
                        self.commit()?;
                        self.replay()?;
                    }
                    return Ok(&[]);
                }
                Take::Full(i) => {
                    input = &input[i..];
                    if !self.commit()? {
                        self.replay()?;
                        return Ok(input);
                    }
                }
                Take::Stop(i) => {
                    self.commit()?;
                    self.replay()?;
                    return Ok(&input[i..]);
                }
            }
        }
    }

    /// Decodes the staged whole lines, if they decode, into the sink, and
    /// lets the tokenizer skip their bytes. False if nothing was committed.
    fn commit(&mut self) -> Result<bool, Error> {
        let lines = self.st.lines.as_deref_mut().expect("fast path on");
        let Some(c) = lines.commit() else {
            return Ok(false);
        };
        let skipped = self.tk.skip_text(c.bytes, c.text_bytes);
        debug_assert!(
            skipped,
            "the tokenizer waits in text while lines are staged"
        );
        emit(&mut self.st.sink, c.out, self.st.open64.as_ref())?;
        Ok(true)
    }

    /// Turns the fast path off for the open value and runs the bytes it
    /// staged but did not commit through the tokenizer (and so through the
    /// general decoder), exactly as they came in the body.
    fn replay(&mut self) -> Result<(), Error> {
        let lines = self.st.lines.as_deref_mut().expect("fast path on");
        let mut raw = std::mem::take(&mut self.st.raw);
        lines.take_raw(&mut raw);
        self.replaying += 1;
        let r = self.run(&raw, false);
        self.replaying -= 1;
        self.st.raw = raw;
        r
    }

    /// One tokenizer step, turned into an [`Ev`] that no longer borrows it.
    fn next(&mut self, input: &[u8], is_last: bool) -> Result<(usize, Ev), Error> {
        let step = match self.tk.step(input, is_last) {
            Ok(s) => s,
            Err(e) => return Err(Error::from_xml(&e, e.offset())),
        };
        let ev = match step.event {
            Token::Start { name, ns, .. } => {
                let (uri, local) = ns.resolve(name);
                Ev::Start(Elem::from_name(uri, local))
            }
            Token::End { .. } => Ev::End,
            Token::Text(t) => Ev::Text(locate(input, t)),
            Token::Decl { .. } => Ev::Skip,
            Token::NeedMore => Ev::NeedMore,
            Token::Eof => Ev::Eof,
        };
        Ok((step.consumed, ev))
    }

    /// The body will not be completed (its source failed): aborts the open
    /// `base64` value in the sink, if any. Later feeds fail.
    pub fn abort(&mut self) {
        if self.st.open64.take().is_some() {
            self.st.sink.abort();
        }
        let at = self.offset();
        self.error
            .get_or_insert_with(|| Error::new(ErrorKind::Truncated, "the body was aborted", at));
    }

    /// True once the whole message was parsed (after the last chunk).
    pub fn is_done(&self) -> bool {
        self.st.done
    }

    /// Ends the parse: the message and the sink. Fails if
    /// [`Parser::feed`] failed or the last chunk has not been fed.
    pub fn finish(self) -> Result<(Message<S::Output>, S), Error> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if !self.st.done {
            let msg = "the body's last chunk was not fed";
            return Err(Error::new(ErrorKind::Truncated, msg, self.offset()));
        }
        let st = self.st;
        let msg = match (st.call, st.fault) {
            (true, _) => Message::Call(Call {
                method: st.method.unwrap_or_default(),
                params: st.params,
            }),
            (false, Some(f)) => Message::Response(Response::Fault(f)),
            (false, None) => Message::Response(Response::Params(st.params)),
        };
        Ok((msg, st.sink))
    }

    /// The method name, once its element ended (before any param starts):
    /// lets a sink or a server check the method before the payload comes.
    pub fn method_name(&self) -> Option<&str> {
        self.st.method.as_deref()
    }

    /// The params completed so far.
    pub fn params(&self) -> &[Value<S::Output>] {
        &self.st.params
    }

    /// The members completed so far of the innermost struct being read:
    /// a server learns an upload's `name` and `type` before its `bits`
    /// end (WordPress clients send them first).
    pub fn open_struct(&self) -> &[(String, Value<S::Output>)] {
        self.st
            .stack
            .iter()
            .rev()
            .find_map(|f| match f {
                Frame::Struct(m) => Some(m.as_slice()),
                _ => None,
            })
            .unwrap_or(&[])
    }

    pub fn sink(&self) -> &S {
        &self.st.sink
    }

    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.st.sink
    }

    /// Bytes of the body consumed so far.
    pub fn offset(&self) -> u64 {
        let staged = self.st.lines.as_deref().filter(|l| l.active);
        self.tk.offset() + staged.map_or(0, Lines::pending)
    }

    /// The most bytes held at once for what straddles chunks plus scalar
    /// text (the base64 decoder's fixed 112 KiB are not counted).
    pub fn peak_buffered_bytes(&self) -> usize {
        self.tk.peak_buffered_bytes() + self.st.peak_text
    }

    pub fn limits(&self) -> &Limits {
        &self.st.limits
    }
}

/// Where a text token's bytes are: a range of `input`, or a copy.
fn locate(input: &[u8], t: &[u8]) -> TextAt {
    let range = input.as_ptr_range();
    let p = t.as_ptr();
    if range.contains(&p) {
        let a = p as usize - range.start as usize;
        return TextAt::Input(a, a + t.len());
    }
    let mut buf = [0u8; 8];
    let n = t.len().min(8);
    buf[..n].copy_from_slice(&t[..n]);
    TextAt::Small(buf, n)
}

/// What a sink or decoder failure inside a push was.
enum PushErr<E> {
    Xml(bulkwire_xml::Error),
    Sink(E),
}

impl<E> From<bulkwire_xml::Error> for PushErr<E> {
    fn from(e: bulkwire_xml::Error) -> Self {
        PushErr::Xml(e)
    }
}

impl<S: Base64Sink> State<S> {
    fn limit(&self, kind: LimitKind, at: u64) -> Error {
        Error::limit(kind, kind.value(&self.limits), at)
    }

    // ---- start tags ----

    fn start(&mut self, elem: Option<Elem>, at: u64) -> Result<(), Error> {
        let Some(elem) = elem else {
            let msg = match self.stack.is_empty() {
                true => "the root element must be methodCall or methodResponse",
                false => "unknown element",
            };
            return Err(Error::malformed(msg, at));
        };
        let frame = match self.stack.last_mut() {
            None => root(elem, at)?,
            Some(top) => child(top, elem, at)?,
        };
        if let Frame::MethodCall { .. } = frame {
            self.call = true;
        }
        self.check_count(&frame, at)?;
        self.open_type(&frame, at)?;
        self.stack.push(frame);
        Ok(())
    }

    /// The params, members and items limits, checked as each starts.
    fn check_count(&self, frame: &Frame<S::Output>, at: u64) -> Result<(), Error> {
        let parent = self.stack.last();
        let over = match (frame, parent) {
            (Frame::Param(_), _) => {
                (self.params.len() >= self.limits.params).then_some(LimitKind::Params)
            }
            (Frame::Member { .. }, Some(Frame::Struct(m))) => {
                (m.len() >= self.limits.members).then_some(LimitKind::Members)
            }
            (Frame::Value { .. }, Some(Frame::Data(items))) => {
                (items.len() >= self.limits.items).then_some(LimitKind::Items)
            }
            _ => None,
        };
        match over {
            Some(k) => Err(self.limit(k, at)),
            None => Ok(()),
        }
    }

    /// A type element inside `<value>`: any text before it must be white
    /// space; a `base64` value opens in the sink.
    fn open_type(&mut self, frame: &Frame<S::Output>, at: u64) -> Result<(), Error> {
        if let Some(Frame::Value { .. }) = self.stack.last() {
            if !self.text.iter().all(|&b| is_ws(b)) {
                let at = self.text_at.unwrap_or(at);
                return Err(Error::malformed("text and a type element in one value", at));
            }
            self.clear_text();
        }
        if let Frame::Base64 = frame {
            let path = self.path();
            self.sink
                .begin(&path)
                .map_err(|e| Error::sink(e.into(), at))?;
            self.decoder.get_or_insert_with(Box::default).reset();
            if self.fast_path {
                self.lines
                    .get_or_insert_with(|| Box::new(Lines::new()))
                    .start();
            }
            self.open64 = Some(Open64 {
                tag: at,
                ..Open64::default()
            });
        }
        Ok(())
    }

    /// Where the value being opened sits.
    fn path(&self) -> ValuePath {
        let mut segs = Vec::new();
        for f in &self.stack {
            match f {
                Frame::Param(_) => segs.push(PathSeg::Param(self.params.len())),
                Frame::Fault(_) => segs.push(PathSeg::Fault),
                Frame::Member { name: Some(n), .. } => segs.push(PathSeg::Member(n.clone())),
                Frame::Data(items) => segs.push(PathSeg::Item(items.len())),
                _ => {}
            }
        }
        ValuePath(segs)
    }

    // ---- text ----

    fn text(&mut self, text: &[u8], at: u64) -> Result<(), Error> {
        let max = match self.stack.last() {
            Some(Frame::Base64) => return self.base64(text, at),
            Some(Frame::MethodName) => (self.limits.method_name_len, LimitKind::MethodNameLen),
            Some(Frame::Name | Frame::Scalar(_) | Frame::Value { child: false, .. }) => {
                (self.limits.string_bytes, LimitKind::StringBytes)
            }
            _ => return whitespace_only(text, at),
        };
        let start = *self.text_at.get_or_insert(at);
        if self.text.len() + text.len() > max.0 {
            return Err(self.limit(max.1, start));
        }
        self.text.extend_from_slice(text);
        self.peak_text = self.peak_text.max(self.text.len());
        Ok(())
    }

    /// Text of a `base64` value from the tokenizer: the fast path reads
    /// the body itself, so this comes only once it is off.
    fn base64(&mut self, text: &[u8], at: u64) -> Result<(), Error> {
        debug_assert!(!self.lines.as_deref().is_some_and(|l| l.active));
        self.general(text, at)
    }

    /// The general decoder, which maps its errors back to body offsets.
    fn general(&mut self, text: &[u8], at: u64) -> Result<(), Error> {
        let (Some(dec), Some(open)) = (self.decoder.as_deref_mut(), self.open64.as_mut()) else {
            return Err(Error::malformed("base64 text outside a value", at));
        };
        if text.iter().any(|&b| !is_ws(b)) {
            open.shifts.record(dec.text_len(), at);
        }
        let sink = &mut self.sink;
        let r = dec.push(text, &mut |b: &[u8]| sink.write(b).map_err(PushErr::Sink));
        r.map_err(|e| push_error(e, open))
    }

    fn clear_text(&mut self) {
        self.text.clear();
        self.text_at = None;
    }

    /// The collected text as a string kept in the tree.
    fn take_string(&mut self, at: u64) -> Result<String, Error> {
        let at = self.text_at.unwrap_or(at);
        let s = scalar::utf8(&self.text).map_err(|m| Error::malformed(m, at))?;
        self.tree_bytes += s.len() as u64;
        if self.tree_bytes > self.limits.tree_bytes {
            return Err(self.limit(LimitKind::TreeBytes, at));
        }
        let s = s.to_owned();
        self.clear_text();
        Ok(s)
    }

    // ---- end tags ----

    fn end(&mut self, at: u64) -> Result<(), Error> {
        let frame = self.stack.pop().expect("the tokenizer pairs every end");
        match frame {
            Frame::MethodCall { name: false, .. } => {
                Err(Error::malformed("methodCall without a methodName", at))
            }
            Frame::MethodResponse { body: false } => Err(Error::malformed(
                "methodResponse without params or fault",
                at,
            )),
            Frame::MethodCall { .. } | Frame::MethodResponse { .. } | Frame::Params => Ok(()),
            Frame::MethodName => self.end_method_name(at),
            Frame::Name => {
                let name = self.take_string(at)?;
                match self.stack.last_mut() {
                    Some(Frame::Member { name: n, .. }) => *n = Some(name),
                    _ => unreachable!("name only opens inside member"),
                }
                Ok(())
            }
            Frame::Scalar(kind) => {
                let v = self.end_scalar(kind, at)?;
                self.typed(v)
            }
            Frame::Base64 => {
                let v = self.end_base64(at)?;
                self.typed(v)
            }
            Frame::Struct(m) => self.typed(Value::Struct(m)),
            Frame::Array(Some(items)) => self.typed(Value::Array(items)),
            Frame::Array(None) => Err(Error::malformed("array without data", at)),
            Frame::Data(items) => {
                if let Some(Frame::Array(slot)) = self.stack.last_mut() {
                    *slot = Some(items);
                }
                Ok(())
            }
            Frame::Value { typed, child } => {
                let v = match typed {
                    Some(v) => v,
                    None if child => unreachable!("a typed child always yields a value"),
                    None => Value::String(self.take_string(at)?),
                };
                self.clear_text();
                self.deliver(v, at)
            }
            Frame::Member { name, value } => self.end_member(name, value, at),
            Frame::Param(v) => {
                let v = v.ok_or_else(|| Error::malformed("param without a value", at))?;
                self.params.push(v);
                Ok(())
            }
            Frame::Fault(v) => {
                let v = v.ok_or_else(|| Error::malformed("fault without a value", at))?;
                self.fault = Some(fault(v).ok_or_else(|| {
                    let msg = "fault value must be a struct with an int faultCode and a string faultString";
                    Error::malformed(msg, at)
                })?);
                Ok(())
            }
        }
    }

    fn end_method_name(&mut self, at: u64) -> Result<(), Error> {
        let text_at = self.text_at.unwrap_or(at);
        let name = scalar::trim(&self.text);
        if name.is_empty() {
            return Err(Error::malformed("empty methodName", text_at));
        }
        let name = scalar::utf8(name).map_err(|m| Error::malformed(m, text_at))?;
        self.method = Some(name.to_owned());
        self.clear_text();
        Ok(())
    }

    fn end_scalar(&mut self, kind: Scalar, at: u64) -> Result<Value<S::Output>, Error> {
        let text_at = self.text_at.unwrap_or(at);
        let bad = |m| Error::malformed(m, text_at);
        let t = &self.text;
        let v = match kind {
            Scalar::Int => Value::Int(scalar::int(t).map_err(bad)?),
            Scalar::I8 => Value::I8(scalar::i8(t).map_err(bad)?),
            Scalar::Bool => Value::Bool(scalar::boolean(t).map_err(bad)?),
            Scalar::Double => Value::Double(scalar::double(t).map_err(bad)?),
            Scalar::Nil => {
                scalar::nil(t).map_err(bad)?;
                Value::Nil
            }
            Scalar::DateTime => {
                let d = scalar::date_time(t).map_err(bad)?;
                self.tree_bytes += d.as_str().len() as u64;
                if self.tree_bytes > self.limits.tree_bytes {
                    return Err(self.limit(LimitKind::TreeBytes, text_at));
                }
                Value::DateTime(d)
            }
            Scalar::String => return Ok(Value::String(self.take_string(at)?)),
        };
        self.clear_text();
        Ok(v)
    }

    /// The value's end tag at `at`: the last quantum is decoded and the
    /// sink finishes the value.
    fn end_base64(&mut self, at: u64) -> Result<Value<S::Output>, Error> {
        let open = self.open64.take().expect("base64 frame has its state");
        let dec = self.decoder.as_deref_mut().expect("decoder made at start");
        let sink = &mut self.sink;
        let r = dec.finish(&mut |b: &[u8]| sink.write(b).map_err(PushErr::Sink));
        if let Err(e) = r {
            self.sink.abort();
            // A value cut short is reported at its end tag.
            return Err(match e {
                PushErr::Xml(x) => Error::from_xml(&x, at),
                e => push_error(e, &open),
            });
        }
        self.finish_sink(open.tag)
    }

    fn finish_sink(&mut self, tag: u64) -> Result<Value<S::Output>, Error> {
        match self.sink.finish() {
            Ok(out) => Ok(Value::Base64(out)),
            Err(e) => Err(Error::sink(e.into(), tag)),
        }
    }

    fn end_member(
        &mut self,
        name: Option<String>,
        value: Option<Value<S::Output>>,
        at: u64,
    ) -> Result<(), Error> {
        let (Some(name), Some(value)) = (name, value) else {
            return Err(Error::malformed("member without a name and a value", at));
        };
        match self.stack.last_mut() {
            Some(Frame::Struct(m)) => m.push((name, value)),
            _ => unreachable!("member only opens inside struct"),
        }
        Ok(())
    }

    /// A type element ended: its value becomes the enclosing `<value>`'s.
    fn typed(&mut self, v: Value<S::Output>) -> Result<(), Error> {
        match self.stack.last_mut() {
            Some(Frame::Value { typed, .. }) => *typed = Some(v),
            _ => unreachable!("types only open inside value"),
        }
        Ok(())
    }

    /// A `<value>` ended: it goes to its param, fault, member or array.
    fn deliver(&mut self, v: Value<S::Output>, at: u64) -> Result<(), Error> {
        match self.stack.last_mut() {
            Some(Frame::Param(slot) | Frame::Fault(slot) | Frame::Member { value: slot, .. }) => {
                *slot = Some(v)
            }
            Some(Frame::Data(items)) => items.push(v),
            _ => return Err(Error::malformed("value not allowed here", at)),
        }
        Ok(())
    }

    fn eof(&mut self, at: u64) -> Result<(), Error> {
        if self.call && self.method.is_none() {
            return Err(Error::malformed("methodCall without a methodName", at));
        }
        self.done = true;
        Ok(())
    }
}

/// The frame for the root element.
fn root<B>(elem: Elem, at: u64) -> Result<Frame<B>, Error> {
    match elem {
        Elem::MethodCall => Ok(Frame::MethodCall {
            name: false,
            params: false,
        }),
        Elem::MethodResponse => Ok(Frame::MethodResponse { body: false }),
        _ => Err(Error::malformed(
            "the root element must be methodCall or methodResponse",
            at,
        )),
    }
}

/// The frame for `elem` opening inside `top`, which records that it did.
fn child<B>(top: &mut Frame<B>, elem: Elem, at: u64) -> Result<Frame<B>, Error> {
    let frame = match (top, elem) {
        (
            Frame::MethodCall {
                name: n @ false, ..
            },
            Elem::MethodName,
        ) => {
            *n = true;
            Frame::MethodName
        }
        (
            Frame::MethodCall {
                name: true,
                params: p @ false,
            },
            Elem::Params,
        )
        | (Frame::MethodResponse { body: p @ false }, Elem::Params) => {
            *p = true;
            Frame::Params
        }
        (Frame::MethodResponse { body: b @ false }, Elem::Fault) => {
            *b = true;
            Frame::Fault(None)
        }
        (Frame::Params, Elem::Param) => Frame::Param(None),
        (Frame::Param(None) | Frame::Fault(None) | Frame::Data(_), Elem::Value) => value_frame(),
        (
            Frame::Member {
                name: Some(_),
                value: None,
            },
            Elem::Value,
        ) => value_frame(),
        (
            Frame::Member {
                name: None,
                value: None,
            },
            Elem::Name,
        ) => Frame::Name,
        (Frame::Struct(_), Elem::Member) => Frame::Member {
            name: None,
            value: None,
        },
        (Frame::Array(None), Elem::Data) => Frame::Data(Vec::new()),
        (
            Frame::Value {
                child: c @ false, ..
            },
            t,
        ) if t.is_type() => {
            *c = true;
            type_frame(t)
        }
        _ => return Err(Error::malformed("element not allowed here", at)),
    };
    Ok(frame)
}

fn value_frame<B>() -> Frame<B> {
    Frame::Value {
        typed: None,
        child: false,
    }
}

fn type_frame<B>(t: Elem) -> Frame<B> {
    match t {
        Elem::Scalar(s) => Frame::Scalar(s),
        Elem::Base64 => Frame::Base64,
        Elem::Struct => Frame::Struct(Vec::new()),
        _ => Frame::Array(None),
    }
}

/// Text where only elements may be: white space is fine.
fn whitespace_only(text: &[u8], at: u64) -> Result<(), Error> {
    match text.iter().position(|&b| !is_ws(b)) {
        None => Ok(()),
        Some(i) => Err(Error::malformed(
            "text where elements are expected",
            at + i as u64,
        )),
    }
}

/// Hands fast-path output to the sink; a failure is reported at the tag.
fn emit<S: Base64Sink>(sink: &mut S, out: &[u8], open: Option<&Open64>) -> Result<(), Error> {
    if out.is_empty() {
        return Ok(());
    }
    let tag = open.map_or(0, |o| o.tag);
    sink.write(out).map_err(|e| Error::sink(e.into(), tag))
}

fn push_error<E>(e: PushErr<E>, open: &Open64) -> Error
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match e {
        PushErr::Xml(x) => Error::from_xml(&x, open.shifts.body_offset(x.offset())),
        PushErr::Sink(s) => Error::sink(s.into(), open.tag),
    }
}

/// A fault's struct: `faultCode` (int) and `faultString` (string).
fn fault<B>(v: Value<B>) -> Option<Fault> {
    let code = v.get("faultCode")?.as_i64()?;
    let string = v.get("faultString")?.as_str()?.to_owned();
    Some(Fault {
        code: i32::try_from(code).ok()?,
        string,
    })
}

/// Parses a whole body held in memory.
pub fn parse<S: Base64Sink>(
    body: &[u8],
    limits: Limits,
    sink: S,
) -> Result<(Message<S::Output>, S), Error> {
    let mut p = Parser::new(limits, sink);
    p.feed(body, true)?;
    p.finish()
}

#[cfg(test)]
mod tests;
