//! Markup: finding where a `<...>` construct ends, then handling it (XML 1.0
//! §3.1 tags, §2.6 processing instructions, §2.5 comments, §2.7 CDATA).
//!
//! The scan only delimits: for a tag, the first `>` outside quotes; for a
//! processing instruction, the first `?>`; for `<!`, just enough bytes to
//! tell a comment (`<!--`) or a CDATA section (`<![CDATA[`) from a
//! declaration, which is refused at once. Only a tag or processing
//! instruction that straddles inputs is copied, into a buffer capped by
//! [`crate::Limits::tag_bytes`]; the complete tag is then parsed in one go.

use super::tag::ParsedTag;
use super::{Doc, Lex, Out, Pending, TagAt, Tokenizer};
use crate::error::{Error, ErrorKind};
use crate::limits::LimitKind;

/// What kind of markup is being delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Only `<` seen so far.
    Unknown,
    /// A start, empty-element or end tag.
    Tag,
    Pi,
    /// After `<!`; `pattern` is what must follow.
    Bang(&'static [u8]),
    Comment,
    CData,
}

/// Resumable delimiting state of the current markup.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MarkupScan {
    pub(crate) kind: Kind,
    /// Bytes of the markup seen so far, `<` included.
    pub(crate) len: usize,
    /// The open quote inside a tag, or 0.
    quote: u8,
    /// The last byte seen of a processing instruction was `?`.
    prev_q: bool,
}

impl MarkupScan {
    pub(crate) fn new() -> Self {
        MarkupScan {
            kind: Kind::Unknown,
            len: 0,
            quote: 0,
            prev_q: false,
        }
    }

    /// Examines `bytes`, the next bytes of the markup that starts at absolute
    /// offset `start`; returns how many of them complete it, if they do.
    pub(crate) fn advance(&mut self, bytes: &[u8], start: u64) -> Result<Option<usize>, Error> {
        let mut i = 0;
        while i < bytes.len() {
            let (n, done) = match self.kind {
                Kind::Unknown => (self.classify(bytes[i]), false),
                Kind::Tag => self.tag(&bytes[i..]),
                Kind::Pi => self.pi(&bytes[i..]),
                Kind::Bang(pattern) => self.bang(pattern, bytes[i], start)?,
                Kind::Comment | Kind::CData => (0, true),
            };
            i += n;
            self.len += n;
            if done {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Takes the `<`, then decides the kind from the next byte, which a
    /// tag's own scan still has to see (it may be the `>` of `<>`).
    fn classify(&mut self, b: u8) -> usize {
        if self.len == 0 {
            return 1;
        }
        match b {
            b'!' => self.kind = Kind::Bang(b""),
            b'?' => self.kind = Kind::Pi,
            _ => {
                self.kind = Kind::Tag;
                return 0;
            }
        }
        1
    }

    /// Up to the first `>` outside quotes.
    fn tag(&mut self, bytes: &[u8]) -> (usize, bool) {
        let mut i = 0;
        loop {
            let found = if self.quote != 0 {
                memchr::memchr(self.quote, &bytes[i..])
            } else {
                memchr::memchr3(b'>', b'"', b'\'', &bytes[i..])
            };
            let Some(j) = found else {
                return (bytes.len(), false);
            };
            i += j + 1;
            match bytes[i - 1] {
                b'>' if self.quote == 0 => return (i, true),
                q if q == self.quote => self.quote = 0,
                q => self.quote = q,
            }
        }
    }

    /// Up to the first `?>`.
    fn pi(&mut self, bytes: &[u8]) -> (usize, bool) {
        let mut from = 0;
        while let Some(j) = memchr::memchr(b'>', &bytes[from..]) {
            let at = from + j;
            let q = if at == 0 {
                self.prev_q
            } else {
                bytes[at - 1] == b'?'
            };
            if q {
                return (at + 1, true);
            }
            from = at + 1;
        }
        self.prev_q = bytes.last() == Some(&b'?');
        (bytes.len(), false)
    }

    /// One byte after `<!`: the start of `--` or `[CDATA[`, or a refusal.
    fn bang(&mut self, pattern: &'static [u8], b: u8, start: u64) -> Result<(usize, bool), Error> {
        let pattern = match (pattern, b) {
            (b"", b'-') => &b"--"[..],
            (b"", b'[') => &b"[CDATA["[..],
            (b"", b'A'..=b'Z') => {
                let msg = "document type and other declarations are not supported";
                return Err(Error::new(ErrorKind::Unsupported, msg, start));
            }
            (p, _) => p,
        };
        let k = self.len - 2;
        if pattern.get(k) != Some(&b) {
            let at = start + self.len as u64;
            return Err(Error::malformed("expected '<!--' or '<![CDATA['", at));
        }
        if k + 1 < pattern.len() {
            self.kind = Kind::Bang(pattern);
            return Ok((1, false));
        }
        self.kind = if pattern == b"--" {
            Kind::Comment
        } else {
            Kind::CData
        };
        Ok((1, true))
    }
}

impl Tokenizer {
    /// `input` starts with `<`.
    pub(super) fn open_markup(&mut self, input: &[u8]) -> Result<(usize, Out), Error> {
        self.markup_start = self.pos;
        self.scan = MarkupScan::new();
        self.lex = Lex::Markup;
        self.markup(input)
    }

    /// Delimits the current markup in `input`, within the tag size limit.
    pub(super) fn markup(&mut self, input: &[u8]) -> Result<(usize, Out), Error> {
        let room = self.limits.tag_bytes - self.scan.len;
        let window = &input[..input.len().min(room)];
        match self.scan.advance(window, self.markup_start)? {
            Some(n) if self.tagbuf.is_empty() => self.complete(input, TagAt::Input(0, n), n),
            Some(n) => {
                self.tagbuf.extend_from_slice(&input[..n]);
                self.complete(input, TagAt::Buf, n)
            }
            None if self.scan.len >= self.limits.tag_bytes => {
                let lim = self.limits.tag_bytes as u64;
                Err(Error::limit(
                    LimitKind::TagBytes,
                    lim,
                    self.markup_start + lim,
                ))
            }
            None => {
                if self.tagbuf.capacity() < self.limits.tag_bytes {
                    self.tagbuf.reserve_exact(self.limits.tag_bytes);
                }
                self.tagbuf.extend_from_slice(window);
                Ok((window.len(), Out::NeedMore))
            }
        }
    }

    /// The markup is complete: `at` says where its bytes are, `n` how many
    /// of `input` it took.
    fn complete(&mut self, input: &[u8], at: TagAt, n: usize) -> Result<(usize, Out), Error> {
        let start = self.markup_start;
        self.lex = Lex::Text;
        match self.scan.kind {
            Kind::Comment => {
                self.tagbuf.clear();
                self.lex = Lex::Comment(0);
                return Ok((n, Out::Skip));
            }
            Kind::CData if self.doc != Doc::Root => {
                return Err(Error::malformed(
                    "CDATA section outside the root element",
                    start,
                ));
            }
            Kind::CData => {
                self.tagbuf.clear();
                self.lex = Lex::CData(0);
                return Ok((n, Out::Skip));
            }
            _ => {}
        }
        let buf = std::mem::take(&mut self.tagbuf);
        let tag = match at {
            TagAt::Input(a, b) => &input[a..b],
            TagAt::Buf => &buf[..],
        };
        let out = match self.scan.kind {
            Kind::Pi => self.pi(tag, at),
            _ if tag[1] == b'/' => self.end_tag(tag),
            _ => self.start_tag(tag, at),
        };
        self.tagbuf = buf;
        let out = out?;
        // Only a start tag or the declaration borrows the buffer; anything
        // else frees it now, since the step may go on to more markup.
        match out {
            Out::Start(TagAt::Buf) | Out::Decl(TagAt::Buf) => self.tag_lent = true,
            _ => self.tagbuf.clear(),
        }
        Ok((n, out))
    }

    fn start_tag(&mut self, tag: &[u8], at: TagAt) -> Result<Out, Error> {
        let base = self.markup_start;
        if self.doc == Doc::Epilog {
            return Err(Error::malformed("element after the root element", base));
        }
        let lim = &self.limits;
        self.parsed.parse_start(tag, base, lim)?;
        if self.open.depth() >= lim.depth {
            return Err(Error::limit(LimitKind::Depth, lim.depth as u64, base));
        }
        if self.elements >= lim.elements {
            return Err(Error::limit(LimitKind::Elements, lim.elements, base));
        }
        let mark = self.ns.mark();
        self.parsed.declare(tag, base, &mut self.ns, lim)?;
        self.open.push(self.parsed.name(tag), mark);
        self.elements += 1;
        self.doc = Doc::Root;
        if self.parsed.empty {
            self.pending = Pending::End;
        }
        self.tok_start = base;
        self.text_run = 0;
        Ok(Out::Start(at))
    }

    fn end_tag(&mut self, tag: &[u8]) -> Result<Out, Error> {
        let base = self.markup_start;
        self.parsed.parse_end(tag, base, &self.limits)?;
        match self.open.top() {
            None => Err(Error::malformed("end tag without an open element", base)),
            Some(top) if top != self.parsed.name(tag) => Err(Error::malformed(
                "end tag does not match the open element",
                base,
            )),
            Some(_) => Ok(self.close()),
        }
    }

    /// Hands out the end of the innermost element; it is popped at the next
    /// step, so the token can still borrow its name and namespaces.
    pub(super) fn close(&mut self) -> Out {
        self.pending = Pending::Pop;
        if self.open.depth() == 1 {
            self.doc = Doc::Epilog;
        }
        self.tok_start = self.markup_start;
        self.text_run = 0;
        Out::End
    }

    fn pi(&mut self, tag: &[u8], at: TagAt) -> Result<Out, Error> {
        let base = self.markup_start;
        let p: &mut ParsedTag = &mut self.parsed;
        if !p.parse_pi(tag, base, &self.limits)? {
            return Ok(Out::Skip);
        }
        if base != u64::from(self.bom_len) {
            let msg = "XML declaration (or reserved target 'xml') not at the start";
            return Err(Error::malformed(msg, base));
        }
        p.parse_decl(tag, base, &self.limits)?;
        self.tok_start = base;
        Ok(Out::Decl(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(m: &[u8]) -> Result<Option<usize>, Error> {
        MarkupScan::new().advance(m, 0)
    }

    fn scan_bytewise(m: &[u8]) -> Result<Option<usize>, Error> {
        let mut s = MarkupScan::new();
        for (i, b) in m.iter().enumerate() {
            if let Some(n) = s.advance(std::slice::from_ref(b), 0)? {
                return Ok(Some(i + n));
            }
        }
        Ok(None)
    }

    #[test]
    fn delimits_the_same_whole_and_bytewise() {
        let cases: &[&[u8]] = &[
            b"<a>x",
            b"<a b='>' c=\"'>\">x",
            b"</a >x",
            b"<?pi a>b?>x",
            b"<?xml version='1.0'?>",
            b"<!-- x",
            b"<![CDATA[x",
            b"<a b='",
        ];
        for m in cases {
            let want = scan_all(m).unwrap();
            assert_eq!(
                scan_bytewise(m).unwrap(),
                want,
                "{:?}",
                String::from_utf8_lossy(m)
            );
        }
        assert_eq!(scan_all(b"<a b='>' c=\"'>\">x").unwrap(), Some(16));
        assert_eq!(scan_all(b"<?pi a>b?>x").unwrap(), Some(10));
        assert_eq!(scan_all(b"<!-- x").unwrap(), Some(4));
        assert_eq!(scan_all(b"<a b='").unwrap(), None);
    }

    #[test]
    fn refuses_declarations() {
        let e = scan_bytewise(b"<!DOCTYPE a>").unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Unsupported, 0));
        let e = scan_all(b"<!-x").unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, 3));
        let e = scan_all(b"<![CDATX").unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, 7));
    }
}
