//! Blocking adapter: a multipart body from any [`std::io::Read`], each part's
//! data readable in turn through `Read`.
//!
//! The adapter owns one fixed input buffer and reads from the source only
//! when the parser has consumed everything in it, so it never reads ahead of
//! the consumer by more than that buffer.

use crate::info::PartInfo;
use crate::parser::{Event, Parser};
use std::io::{self, Read};

/// Input buffer size when none is given.
pub const DEFAULT_BUFFER: usize = 64 * 1024;

/// Reads parts from a blocking source. Call [`MultipartReader::next_part`],
/// then read the part's data from the reader itself until it returns 0.
pub struct MultipartReader<R> {
    inner: R,
    parser: Parser,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    eof: bool,
    /// Part data handed out by the parser but not yet read by the caller:
    /// a range of `buf`, or a copy of held-back bytes in `spill`.
    pending: (usize, usize),
    spill: Vec<u8>,
    in_part: bool,
    done: bool,
}

enum Next {
    Part(PartInfo),
    Data,
    PartEnd,
    End,
}

impl<R: Read> MultipartReader<R> {
    pub fn new(inner: R, parser: Parser) -> Self {
        Self::with_buffer(inner, parser, DEFAULT_BUFFER)
    }

    /// `size` is the input buffer, the adapter's only allocation besides the
    /// parser's own and one small spill buffer.
    pub fn with_buffer(inner: R, parser: Parser, size: usize) -> Self {
        MultipartReader {
            inner,
            parser,
            buf: vec![0; size.max(1)].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            pending: (0, 0),
            spill: Vec::new(),
            in_part: false,
            done: false,
        }
    }

    /// The parser, e.g. for [`Parser::peak_buffered_bytes`].
    pub fn parser(&self) -> &Parser {
        &self.parser
    }

    /// Skips what is left of the current part and returns the next part's
    /// headers, or `None` after the close delimiter.
    pub fn next_part(&mut self) -> io::Result<Option<PartInfo>> {
        self.pending = (0, 0);
        self.spill.clear();
        loop {
            match self.advance()? {
                Next::Part(info) => return Ok(Some(info)),
                Next::End => return Ok(None),
                Next::Data | Next::PartEnd => {
                    // Drop what the caller did not read, wherever it lives.
                    self.pending = (0, 0);
                    self.spill.clear();
                }
            }
        }
    }

    /// Runs the parser until it yields an event.
    fn advance(&mut self) -> io::Result<Next> {
        loop {
            if self.done {
                return Ok(Next::End);
            }
            let step = self
                .parser
                .step(&self.buf[self.start..self.end], self.eof)
                .map_err(io::Error::from)?;
            let at = self.start;
            self.start += step.consumed;
            let next = match step.event {
                Event::NeedMore if self.eof => Next::End,
                Event::NeedMore => {
                    self.fill()?;
                    continue;
                }
                Event::PartStart(p) => Next::Part(PartInfo::from(&p)),
                Event::Data(d) if step.consumed == d.len() => {
                    self.pending = (at, at + d.len());
                    Next::Data
                }
                Event::Data(d) => {
                    // Held-back bytes from the parser's own carry.
                    self.spill.clear();
                    self.spill.extend_from_slice(d);
                    Next::Data
                }
                Event::PartEnd => Next::PartEnd,
                Event::End => Next::End,
            };
            self.in_part = matches!(next, Next::Part(_) | Next::Data);
            self.done = matches!(next, Next::End);
            return Ok(next);
        }
    }

    fn fill(&mut self) -> io::Result<()> {
        self.start = 0;
        self.end = 0;
        let n = loop {
            match self.inner.read(&mut self.buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        self.end = n;
        self.eof = n == 0;
        Ok(())
    }

    /// Reads the rest of the body to check it is well-formed.
    pub fn finish(mut self) -> io::Result<Parser> {
        while self.next_part()?.is_some() {}
        Ok(self.parser)
    }
}

impl<R: Read> Read for MultipartReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if !self.spill.is_empty() {
                let n = out.len().min(self.spill.len());
                out[..n].copy_from_slice(&self.spill[..n]);
                self.spill.drain(..n);
                return Ok(n);
            }
            let (a, b) = self.pending;
            if a < b {
                let n = out.len().min(b - a);
                out[..n].copy_from_slice(&self.buf[a..a + n]);
                self.pending.0 += n;
                return Ok(n);
            }
            if !self.in_part || out.is_empty() {
                return Ok(0);
            }
            match self.advance()? {
                Next::Data => continue,
                Next::PartEnd | Next::End => return Ok(0),
                // The parser always ends a part before starting the next.
                Next::Part(_) => return Err(io::Error::other("part started inside a part")),
            }
        }
    }
}
