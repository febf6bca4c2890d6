//! Everything between markup: character data (XML 1.0 §2.4), references
//! (§4.1), line-end normalization (§2.11), comments (§2.5), CDATA sections
//! (§2.7), white space outside the root element (§2.1 `Misc`) and the
//! byte-order mark (§4.3.3).
//!
//! Text is handed out in runs borrowed from the input, cut only at `<`, `&`
//! and CR; nothing of it is buffered. A reference is the one thing copied, at
//! most 12 bytes of it, when it straddles inputs. Comments and CDATA
//! sections are scanned as they stream; a `]` or `]]` held back at the end
//! of an input is handed out later from a static string, not a buffer.

use super::chars::{decode_ref, is_ws, scan_ref, RefScan, MAX_REF};
use super::{Doc, Lex, Out, Tokenizer};
use crate::error::{Error, ErrorKind};

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

impl Tokenizer {
    /// The UTF-8 byte-order mark, if any, at the very start.
    pub(super) fn bom(&mut self, seen: u8, input: &[u8]) -> Result<(usize, Out), Error> {
        let Some(&b) = input.first() else {
            return Ok((0, Out::NeedMore));
        };
        if seen == 0 && b != BOM[0] {
            if b == 0xFE || b == 0xFF {
                let msg = "UTF-16 documents are not supported";
                return Err(Error::new(ErrorKind::Unsupported, msg, self.pos));
            }
            self.lex = Lex::Text;
            return Ok((0, Out::Skip));
        }
        if b != BOM[seen as usize] {
            return Err(Error::malformed("invalid byte-order mark", self.pos));
        }
        self.lex = if seen == 2 {
            self.bom_len = 3;
            Lex::Text
        } else {
            Lex::Bom(seen + 1)
        };
        Ok((1, Out::Skip))
    }

    pub(super) fn text(&mut self, input: &[u8], is_last: bool) -> Result<(usize, Out), Error> {
        if self.doc != Doc::Root {
            return self.misc(input);
        }
        if self.skip_lf && !input.is_empty() {
            self.skip_lf = false;
            if input[0] == b'\n' {
                return Ok((1, Out::Skip));
            }
        }
        self.tok_start = self.pos;
        match memchr::memchr3(b'<', b'&', b'\r', input) {
            None if input.is_empty() => Ok((0, Out::NeedMore)),
            None => Ok((input.len(), Out::Text(0, input.len()))),
            Some(0) => match input[0] {
                b'<' => self.open_markup(input),
                b'&' => {
                    self.ref_start = self.pos;
                    self.ent_len = 0;
                    self.lex = Lex::Reference;
                    self.reference(input)
                }
                _ => Ok(self.carriage_return(input, is_last)),
            },
            Some(i) => Ok((i, Out::Text(0, i))),
        }
    }

    /// CR or CRLF becomes one LF (§2.11), a text token of its own that
    /// starts at the CR; a CR at the end of the input becomes LF at once,
    /// and an LF starting the next input is then dropped. The token starts
    /// at the CR however the input is cut (an LF run starting at the LF
    /// would give a different offset when the CRLF is split).
    fn carriage_return(&mut self, input: &[u8], is_last: bool) -> (usize, Out) {
        match input.get(1) {
            Some(b'\n') => (2, Out::Static(b"\n")),
            Some(_) => (1, Out::Static(b"\n")),
            None => {
                self.skip_lf = !is_last;
                (1, Out::Static(b"\n"))
            }
        }
    }

    /// Outside the root element only white space, comments and processing
    /// instructions may appear; the white space is skipped.
    fn misc(&mut self, input: &[u8]) -> Result<(usize, Out), Error> {
        let n = input.iter().position(|&b| !is_ws(b)).unwrap_or(input.len());
        if n > 0 {
            return Ok((n, Out::Skip));
        }
        match input.first() {
            None => Ok((0, Out::NeedMore)),
            Some(b'<') => self.open_markup(input),
            Some(_) => {
                let msg = if self.doc == Doc::Prolog {
                    "character data before the root element"
                } else {
                    "character data after the root element"
                };
                Err(Error::malformed(msg, self.pos))
            }
        }
    }

    /// A reference that began at `self.ref_start`, whose first `ent_len`
    /// bytes are held in `ent`.
    pub(super) fn reference(&mut self, input: &[u8]) -> Result<(usize, Out), Error> {
        let k = self.ent_len;
        let m = input.len().min(MAX_REF - k);
        let mut window = [0u8; MAX_REF];
        window[..k].copy_from_slice(&self.ent[..k]);
        window[k..k + m].copy_from_slice(&input[..m]);
        match scan_ref(&window[..k + m]) {
            RefScan::Done(n) => {
                let r = decode_ref(&window[..n]);
                self.repl = r.map_err(|msg| Error::malformed(msg, self.ref_start))?;
                self.ent_len = 0;
                self.lex = Lex::Text;
                self.tok_start = self.ref_start;
                Ok((n - k, Out::Repl))
            }
            RefScan::More => {
                self.ent[k..k + m].copy_from_slice(&input[..m]);
                self.ent_len = k + m;
                Ok((m, Out::NeedMore))
            }
            RefScan::Bad(i, msg) => Err(Error::malformed(msg, self.ref_start + i as u64)),
        }
    }

    /// Skips a comment up to `-->`; `dashes` is how many `-` ended the input
    /// seen so far. A `--` inside is accepted (XML 1.0 forbids it; browsers
    /// and most parsers in lenient modes do not care).
    pub(super) fn comment(&mut self, mut dashes: u8, input: &[u8]) -> (usize, Out) {
        let mut i = 0;
        while i < input.len() {
            match input[i] {
                b'-' => {
                    dashes = (dashes + 1).min(2);
                    i += 1;
                }
                b'>' if dashes == 2 => {
                    self.lex = Lex::Text;
                    return (i + 1, Out::Skip);
                }
                _ => {
                    dashes = 0;
                    i += memchr::memchr(b'-', &input[i..]).unwrap_or(input.len() - i);
                }
            }
        }
        self.lex = Lex::Comment(dashes);
        (i, Out::NeedMore)
    }

    /// Streams a CDATA section as text up to `]]>`; `brackets` is how many
    /// `]` ended the input seen so far, not yet handed out.
    pub(super) fn cdata(&mut self, brackets: u8, input: &[u8], is_last: bool) -> (usize, Out) {
        let Some(&first) = input.first() else {
            return (0, Out::NeedMore);
        };
        if self.skip_lf {
            self.skip_lf = false;
            if first == b'\n' {
                return (1, Out::Skip);
            }
        }
        self.tok_start = self.pos;
        if brackets > 0 {
            return self.cdata_brackets(brackets, first);
        }
        match memchr::memchr2(b']', b'\r', input) {
            None => (input.len(), Out::Text(0, input.len())),
            Some(0) if first == b']' => {
                self.lex = Lex::CData(1);
                (1, Out::Skip)
            }
            Some(0) => self.carriage_return(input, is_last),
            Some(i) => (i, Out::Text(0, i)),
        }
    }

    fn cdata_brackets(&mut self, brackets: u8, first: u8) -> (usize, Out) {
        match first {
            // `]]]`: the first bracket is data, the last two may still end it.
            b']' if brackets == 2 => (1, Out::Static(b"]")),
            b']' => {
                self.lex = Lex::CData(2);
                (1, Out::Skip)
            }
            b'>' if brackets == 2 => {
                self.lex = Lex::Text;
                (1, Out::Skip)
            }
            _ => {
                self.lex = Lex::CData(0);
                (0, Out::Static(&b"]]"[..brackets as usize]))
            }
        }
    }
}
