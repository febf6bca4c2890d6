//! The sans-IO streaming XML tokenizer: the subset of XML 1.0 (Fifth
//! Edition) and Namespaces in XML 1.0 (Third Edition) that XML-RPC and
//! SOAP/MTOM messages use, in bounded memory whatever the document.
//!
//! [`Tokenizer::step`] is fed the unconsumed rest of the input and returns
//! one [`Token`] plus how many bytes it consumed; the caller drops those and
//! calls again, appending more input when it gets [`Token::NeedMore`].
//! Character data is handed out in pieces that borrow the input, never
//! accumulated: a 200 MiB `<base64>` value streams through in the caller's
//! chunks. The tokenizer copies only what straddles two inputs: an
//! incomplete tag (at most [`Limits::tag_bytes`]) or an incomplete reference
//! (at most 12 bytes).
//!
//! What is accepted, and what is refused on purpose:
//! - UTF-8 (US-ASCII being a subset) only: a UTF-8 byte-order mark is
//!   skipped, a UTF-16 one or an XML declaration naming another encoding is
//!   [`crate::ErrorKind::Unsupported`]. Character data is passed through
//!   without checking that it is valid UTF-8 or free of control characters:
//!   consumers that need a `str` validate it, and base64 rejects anything
//!   outside its alphabet anyway.
//! - No DTD: any `<!` other than a comment or a CDATA section (`<!DOCTYPE`,
//!   `<!ENTITY`, …) is refused when its first letter arrives; only the five
//!   predefined entities and character references exist, nothing is ever
//!   expanded or fetched.
//! - References are replaced, line ends normalized to LF (§2.11), attribute
//!   values normalized (§3.3.3). Character references must name an XML
//!   `Char` (§2.2: not NUL, a surrogate, U+FFFE/U+FFFF or above U+10FFFF).
//! - Processing instructions other than the XML declaration are skipped;
//!   comments are skipped as they stream.
//! - White space between elements is handed out as [`Token::Text`] like any
//!   character data (the tokenizer cannot know which elements have mixed
//!   content); white space outside the root element is skipped.
//! - `<name/>` gives [`Token::Start`] with `empty` set, then a [`Token::End`].
//! - Namespace declarations are tracked per element and every prefix used
//!   in an element or attribute name must be declared; duplicate attributes
//!   are caught by qualified name (not by expanded name).
//!
//! Errors carry the absolute offset of the offending byte, found at the same
//! byte whatever the chunking: a tag is parsed only once all of it is at
//! hand, and every other construct is judged byte by byte.

mod chars;
mod markup;
mod scope;
mod tag;
mod text;
mod token;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_errors;

pub use scope::Scope;
pub use token::{Attr, Attrs, Step, Token};

use crate::error::{Error, ErrorKind};
use crate::limits::Limits;
use chars::{Replacement, MAX_REF};
use markup::MarkupScan;
use scope::{Namespaces, Open};
use tag::ParsedTag;

/// The lexical state: what the next input byte continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// At the start: this many bytes of a UTF-8 byte-order mark seen.
    Bom(u8),
    /// Between markup.
    Text,
    /// Inside `<...`, delimited by `Tokenizer::scan`.
    Markup,
    /// Inside `&...;`.
    Reference,
    /// Inside a comment; how many `-` were last seen.
    Comment(u8),
    /// Inside a CDATA section; how many `]` are held back.
    CData(u8),
    /// [`Token::Eof`] was handed out.
    Done,
}

/// Where in the document structure we are (XML 1.0 §2.1 `document`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Doc {
    Prolog,
    Root,
    Epilog,
}

/// Work left over from the previous token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    None,
    /// An empty-element tag was handed out; its end comes next.
    End,
    /// An end was handed out; pop the element at the next step.
    Pop,
}

/// Where a complete tag's bytes are.
#[derive(Debug, Clone, Copy)]
enum TagAt {
    /// A range of the input given to the dispatch that found it.
    Input(usize, usize),
    /// The tag buffer.
    Buf,
}

/// A token before it is tied to a borrow (ranges instead of slices).
#[derive(Debug, Clone, Copy)]
enum Out {
    Text(usize, usize),
    Static(&'static [u8]),
    /// The replacement of the last reference.
    Repl,
    Start(TagAt),
    End,
    Decl(TagAt),
    NeedMore,
    Eof,
    /// Progress without a token; keep stepping.
    Skip,
}

impl Out {
    /// Moves input ranges by `base`, where the dispatch's input started.
    fn shift(self, base: usize) -> Out {
        let at = |t: TagAt| match t {
            TagAt::Input(a, b) => TagAt::Input(base + a, base + b),
            TagAt::Buf => TagAt::Buf,
        };
        match self {
            Out::Text(a, b) => Out::Text(base + a, base + b),
            Out::Start(t) => Out::Start(at(t)),
            Out::Decl(t) => Out::Decl(at(t)),
            other => other,
        }
    }
}

/// A streaming XML tokenizer for one document.
#[derive(Debug)]
pub struct Tokenizer {
    limits: Limits,
    lex: Lex,
    doc: Doc,
    pending: Pending,
    error: Option<Error>,
    /// Absolute offset of the next input byte.
    pos: u64,
    /// Length of the byte-order mark: where an XML declaration may start.
    bom_len: u8,
    markup_start: u64,
    scan: MarkupScan,
    /// The part of a tag or processing instruction seen in earlier inputs.
    tagbuf: Vec<u8>,
    /// The tag buffer backs the last token; clear it at the next step.
    tag_lent: bool,
    parsed: ParsedTag,
    ent: [u8; MAX_REF],
    ent_len: usize,
    ref_start: u64,
    repl: Replacement,
    skip_lf: bool,
    ns: Namespaces,
    open: Open,
    elements: u64,
    text_run: u64,
    text_total: u64,
    tok_start: u64,
    peak_buffered: usize,
}

impl Tokenizer {
    pub fn new(limits: Limits) -> Tokenizer {
        Tokenizer {
            limits,
            lex: Lex::Bom(0),
            doc: Doc::Prolog,
            pending: Pending::None,
            error: None,
            pos: 0,
            bom_len: 0,
            markup_start: 0,
            scan: MarkupScan::new(),
            tagbuf: Vec::new(),
            tag_lent: false,
            parsed: ParsedTag::default(),
            ent: [0; MAX_REF],
            ent_len: 0,
            ref_start: 0,
            repl: Replacement::Static(b""),
            skip_lf: false,
            ns: Namespaces::default(),
            open: Open::default(),
            elements: 0,
            text_run: 0,
            text_total: 0,
            tok_start: 0,
            peak_buffered: 0,
        }
    }

    /// Bytes held because they straddle inputs (part of a tag or of a
    /// reference).
    pub fn buffered_bytes(&self) -> usize {
        self.tagbuf.len() + self.ent_len
    }

    /// The most bytes [`Tokenizer::buffered_bytes`] has been.
    pub fn peak_buffered_bytes(&self) -> usize {
        self.peak_buffered
    }

    /// Capacity of every buffer the tokenizer owns: the straddle buffers,
    /// decoded attribute values, open-element names and namespaces.
    pub fn buffer_capacity(&self) -> usize {
        self.tagbuf.capacity()
            + MAX_REF
            + self.parsed.capacity()
            + self.ns.capacity()
            + self.open.capacity()
    }

    /// Absolute offset of the next byte the tokenizer expects.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// Absolute offset where the last token began (its `<`, its `&`, or its
    /// first byte of text), for consumers' error messages.
    pub fn token_offset(&self) -> u64 {
        self.tok_start
    }

    /// Elements open now.
    pub fn depth(&self) -> usize {
        self.open.depth()
    }

    /// Elements started so far.
    pub fn elements(&self) -> u64 {
        self.elements
    }

    /// Bytes of character data handed out since the last start or end tag:
    /// what a consumer limits a value by.
    pub fn text_bytes(&self) -> u64 {
        self.text_run
    }

    /// Bytes of character data handed out in the whole document.
    pub fn total_text_bytes(&self) -> u64 {
        self.text_total
    }

    /// True when the next input byte is read as character data inside the
    /// root element and nothing is pending (no part of a tag, reference,
    /// comment, CDATA section or CRLF, no element end to hand out): then a
    /// consumer that reads such data itself may [`Tokenizer::skip_text`] it.
    pub fn in_text(&self) -> bool {
        self.error.is_none()
            && self.lex == Lex::Text
            && self.doc == Doc::Root
            && self.pending == Pending::None
            && !self.skip_lf
    }

    /// Consumes `bytes` bytes of input that the caller read itself, as if
    /// they had been stepped through as [`Token::Text`]: the offset moves
    /// on and the text counters grow by `text_bytes`, their length once line
    /// ends are normalized (a CRLF counts as one byte, §2.11).
    ///
    /// The caller vouches that the bytes hold no `<` or `&` and do not end
    /// with a CR (so they are plain character data, and the next input byte
    /// is read afresh); the tokenizer does not look at them. This is what
    /// lets a consumer that validates a large text itself (a base64 decode
    /// rejects `<` and `&`) skip the tokenizer's scan. Returns false, doing
    /// nothing, unless [`Tokenizer::in_text`].
    pub fn skip_text(&mut self, bytes: u64, text_bytes: u64) -> bool {
        if !self.in_text() {
            return false;
        }
        self.pos += bytes;
        self.text_run += text_bytes;
        self.text_total += text_bytes;
        true
    }

    /// True once [`Token::Eof`] was handed out.
    pub fn is_done(&self) -> bool {
        self.lex == Lex::Done
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Namespaces in scope now (see [`Scope`]).
    pub fn scope(&self) -> Scope<'_> {
        Scope::new(&self.ns)
    }

    /// Resolves an element name in the current scope: (namespace URI, local
    /// part). Between steps, the scope is that of the last token.
    pub fn resolve<'q>(&self, qname: &'q [u8]) -> (Option<&[u8]>, &'q [u8]) {
        self.scope().resolve(qname)
    }

    /// Consumes a prefix of `input` and returns the next token. `input` must
    /// start at the first byte not yet consumed; `is_last` says no byte
    /// follows it. Errors are sticky: every later call returns the same one.
    pub fn step<'a>(&'a mut self, input: &'a [u8], is_last: bool) -> Result<Step<'a>, Error> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.release();
        let mut consumed = 0;
        let out = loop {
            let r = self.dispatch(&input[consumed..], is_last);
            let (n, out) = r.map_err(|e| self.fail(e))?;
            self.pos += n as u64;
            consumed += n;
            self.peak_buffered = self.peak_buffered.max(self.buffered_bytes());
            match out {
                Out::Skip => continue,
                Out::NeedMore if is_last => break self.at_end().map_err(|e| self.fail(e))?,
                other => break other.shift(consumed - n),
            }
        };
        debug_assert!(!matches!(out, Out::NeedMore) || consumed == input.len());
        self.count(out);
        let this: &'a Tokenizer = self;
        Ok(Step {
            consumed,
            event: this.materialize(input, out),
        })
    }

    /// Runs [`Tokenizer::step`] over all of `input`, calling `f` for each
    /// token except `NeedMore`.
    pub fn feed<E>(
        &mut self,
        mut input: &[u8],
        is_last: bool,
        mut f: impl FnMut(Token<'_>) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<Error>,
    {
        loop {
            let step = self.step(input, is_last)?;
            input = &input[step.consumed..];
            match step.event {
                Token::NeedMore => return Ok(()),
                Token::Eof => return f(Token::Eof),
                t => f(t)?,
            }
        }
    }

    fn fail(&mut self, e: Error) -> Error {
        self.error = Some(e.clone());
        e
    }

    /// Frees what the previous token lent out.
    fn release(&mut self) {
        if self.tag_lent {
            self.tagbuf.clear();
            self.tag_lent = false;
        }
        if self.pending == Pending::Pop {
            if let Some(mark) = self.open.pop() {
                self.ns.truncate(mark);
            }
            self.pending = Pending::None;
        }
    }

    fn dispatch(&mut self, input: &[u8], is_last: bool) -> Result<(usize, Out), Error> {
        if self.pending == Pending::End {
            return Ok((0, self.close()));
        }
        match self.lex {
            Lex::Bom(seen) => self.bom(seen, input),
            Lex::Text => self.text(input, is_last),
            Lex::Markup => self.markup(input),
            Lex::Reference => self.reference(input),
            Lex::Comment(dashes) => Ok(self.comment(dashes, input)),
            Lex::CData(brackets) => Ok(self.cdata(brackets, input, is_last)),
            Lex::Done => Ok((0, Out::Eof)),
        }
    }

    /// All input is consumed and none follows.
    fn at_end(&mut self) -> Result<Out, Error> {
        let msg = match (self.lex, self.doc) {
            (Lex::Text, Doc::Epilog) | (Lex::Done, _) => {
                self.lex = Lex::Done;
                return Ok(Out::Eof);
            }
            (Lex::Markup, _) => "input ended inside a tag",
            (Lex::Reference, _) => "input ended inside a reference",
            (Lex::Comment(_), _) => "input ended inside a comment",
            (Lex::CData(_), _) => "input ended inside a CDATA section",
            (_, Doc::Root) => "input ended with open elements",
            _ => "input ended before the root element",
        };
        Err(Error::new(ErrorKind::Truncated, msg, self.pos))
    }

    fn count(&mut self, out: Out) {
        let n = match out {
            Out::Text(a, b) => b - a,
            Out::Static(s) => s.len(),
            Out::Repl => self.repl.bytes().len(),
            _ => return,
        };
        self.text_run += n as u64;
        self.text_total += n as u64;
    }

    fn materialize<'a>(&'a self, input: &'a [u8], out: Out) -> Token<'a> {
        let tag = |at: TagAt| -> &'a [u8] {
            match at {
                TagAt::Input(a, b) => &input[a..b],
                TagAt::Buf => &self.tagbuf,
            }
        };
        match out {
            Out::Text(a, b) => Token::Text(&input[a..b]),
            Out::Static(s) => Token::Text(s),
            Out::Repl => Token::Text(self.repl.bytes()),
            Out::Start(at) => {
                let t = tag(at);
                Token::Start {
                    name: self.parsed.name(t),
                    empty: self.parsed.empty,
                    attrs: Attrs::new(t, &self.parsed),
                    ns: self.scope(),
                }
            }
            Out::End => Token::End {
                name: self.open.top().unwrap_or_default(),
                ns: self.scope(),
            },
            Out::Decl(at) => {
                let t = tag(at);
                let (a, b) = self.parsed.version;
                Token::Decl {
                    version: &t[a..b],
                    encoding: self.parsed.encoding.map(|(a, b)| &t[a..b]),
                }
            }
            Out::NeedMore | Out::Skip => Token::NeedMore,
            Out::Eof => Token::Eof,
        }
    }
}
