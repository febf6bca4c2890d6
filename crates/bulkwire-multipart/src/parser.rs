//! The sans-IO multipart parser (RFC 2046 §5.1.1 body syntax, RFC 7578
//! form-data rules, RFC 2387 related).
//!
//! [`Parser::step`] is fed the unconsumed rest of the input and returns one
//! [`Event`] plus how many bytes it consumed; the caller drops those and
//! calls again, appending more input when it gets [`Event::NeedMore`]. Data
//! events borrow the caller's slice. The parser copies only what straddles
//! two inputs: a tail that may begin a delimiter (at most the delimiter's
//! length) and an incomplete header block (at most
//! [`Limits::header_bytes`]), so its memory is bounded whatever the body.
//!
//! Choices where RFC 2046 leaves room, or where other parsers differ:
//! - The first delimiter may start at byte 0 without a preceding CRLF
//!   (§5.1.1: the CRLF "is conceptually attached to the boundary").
//! - A line that begins with the delimiter but continues with anything other
//!   than `--`, transport padding or CRLF is an error, not data: §5.1.1 says
//!   a boundary matches when it "appear[s] in its entirety following the
//!   CRLF", so senders never put it in data, and guessing otherwise lets two
//!   parsers see different parts in the same bytes.
//! - A close delimiter with no part before it is an empty body (browsers send
//!   that for an empty form), although §5.1.1's grammar asks for one part.
//! - Anything after the close delimiter is epilogue and ignored, CRLF or not.
//! - Bare LF line ends are an error unless [`Parser::allow_bare_lf`] is set.

use crate::content_type::{validate_boundary, ContentType, Subtype};
use crate::error::{Error, ErrorKind};
use crate::headers::{self, Disposition, Index, Part};
use crate::limits::{LimitKind, Limits};
use crate::scan::{Delimiter, Scan};

/// What a step produced.
#[derive(Debug)]
pub enum Event<'a> {
    /// A part's header block was read; its data follows.
    PartStart(Part<'a>),
    /// Data of the current part, in order. Possibly empty-free: never `[]`.
    Data(&'a [u8]),
    /// The current part's data is complete.
    PartEnd,
    /// The close delimiter was read; later input is epilogue and ignored.
    End,
    /// All input was consumed; call again with more (or with `is_last`).
    NeedMore,
}

/// One step's result: bytes consumed from the input, and the event.
#[derive(Debug)]
pub struct Step<'a> {
    pub consumed: usize,
    pub event: Event<'a>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterDelim {
    Start,
    Dash,
    Padding,
    Cr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Preamble,
    AfterDelim(AfterDelim),
    Headers,
    Body,
    Epilogue,
}

/// Where an event's bytes live.
#[derive(Debug, Clone, Copy)]
enum Src {
    Input,
    Carry,
    HeaderBuf,
}

/// An event before it is tied to a borrow (ranges instead of slices).
#[derive(Debug, Clone, Copy)]
enum Out {
    Data(Src, usize, usize),
    PartStart(Src, usize, usize),
    PartEnd,
    End,
    NeedMore,
    /// Progress without an event (preamble, padding); keep stepping.
    Skip,
}

/// What the boundary scan of one input found.
enum Scanned {
    Data(Src, usize),
    Delimiter(usize),
    NeedMore(usize),
}

/// A streaming multipart parser for one body.
#[derive(Debug)]
pub struct Parser {
    delim: Delimiter,
    form_data: bool,
    limits: Limits,
    lenient_lf: bool,
    state: State,
    error: Option<Error>,
    /// Absolute offset of the next input byte.
    pos: u64,
    /// Held-back tail that may begin a delimiter.
    carry: Vec<u8>,
    /// Leading carry bytes that are not in the body: the CRLF assumed before
    /// byte 0 so that a first delimiter at the very start matches.
    carry_virtual: usize,
    /// Carry bytes handed out in the last event, removed at the next step.
    drain: usize,
    /// Scratch for a carry plus the start of the next input.
    window: Vec<u8>,
    /// A delimiter already found in the input, `after` bytes from its start.
    found: Option<usize>,
    hbuf: Vec<u8>,
    hbuf_lent: bool,
    /// Where the header-end search resumes in the header buffer, and where
    /// its current line starts.
    hscan: (usize, usize),
    header_start: u64,
    index: Index,
    disp: Disposition,
    parts: usize,
    part_bytes: u64,
    part_data_start: u64,
    part_is_field: bool,
    skipped: u64,
    peak_buffered: usize,
}

impl Parser {
    /// A parser for a body with this boundary (without the leading `--`).
    pub fn new(boundary: &[u8], subtype: Subtype, limits: Limits) -> Result<Parser, Error> {
        validate_boundary(boundary, limits.boundary_len)?;
        let delim = Delimiter::new(boundary, false);
        let mut p = Parser {
            form_data: subtype == Subtype::FormData,
            lenient_lf: false,
            state: State::Preamble,
            error: None,
            pos: 0,
            carry: Vec::new(),
            carry_virtual: 0,
            drain: 0,
            window: Vec::new(),
            found: None,
            hbuf: Vec::new(),
            hbuf_lent: false,
            hscan: (0, 0),
            header_start: 0,
            index: Index::default(),
            disp: Disposition::default(),
            parts: 0,
            part_bytes: 0,
            part_data_start: 0,
            part_is_field: false,
            skipped: 0,
            peak_buffered: 0,
            limits,
            delim,
        };
        p.reset_buffers();
        Ok(p)
    }

    /// A parser for a body sent with this `Content-Type` header value.
    pub fn from_content_type(content_type: &str, limits: Limits) -> Result<Parser, Error> {
        let ct = ContentType::parse(content_type)?;
        Parser::new(ct.boundary.as_bytes(), ct.subtype, limits)
    }

    /// Accepts bare LF wherever RFC 2046 requires CRLF (some hand-written
    /// clients send it). Call before the first step.
    pub fn allow_bare_lf(mut self) -> Parser {
        let boundary = self.delim.needle()[4..].to_vec();
        self.delim = Delimiter::new(&boundary, true);
        self.lenient_lf = true;
        self.reset_buffers();
        self
    }

    fn reset_buffers(&mut self) {
        let hold = self.delim.max_holdback();
        self.carry = Vec::with_capacity(hold);
        self.window = Vec::with_capacity(2 * hold + 1);
        let virt: &[u8] = if self.lenient_lf { b"\n" } else { b"\r\n" };
        self.carry.extend_from_slice(virt);
        self.carry_virtual = virt.len();
    }

    /// Bytes the parser holds now (delimiter carry plus header buffer).
    pub fn buffered_bytes(&self) -> usize {
        self.carry.len() + self.hbuf.len() + self.window.len()
    }

    /// The most bytes the parser has held at once.
    pub fn peak_buffered_bytes(&self) -> usize {
        self.peak_buffered
    }

    /// Capacity of every buffer the parser owns, allocated or not yet.
    pub fn buffer_capacity(&self) -> usize {
        self.carry.capacity() + self.hbuf.capacity() + self.window.capacity()
    }

    /// Absolute offset of the next byte the parser expects.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// Parts started so far.
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// True once the close delimiter has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Epilogue
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Consumes a prefix of `input` and returns the next event. `input` must
    /// start at the first byte not yet consumed; `is_last` says no byte
    /// follows it. Errors are sticky: every later call returns the same one.
    pub fn step<'a>(&'a mut self, input: &'a [u8], is_last: bool) -> Result<Step<'a>, Error> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.release();
        let room = self.limits.body_bytes.saturating_sub(self.pos);
        let capped = input.len() as u64 > room;
        let input = if capped {
            &input[..room as usize]
        } else {
            input
        };
        let mut consumed = 0;
        let out = loop {
            match self.dispatch(&input[consumed..], is_last && !capped) {
                Ok((n, out)) => {
                    self.pos += n as u64;
                    consumed += n;
                    self.peak_buffered = self.peak_buffered.max(self.buffered_bytes());
                    // Ranges into the input are relative to where this
                    // dispatch started.
                    let base = consumed - n;
                    match out {
                        Out::Skip => continue,
                        Out::Data(Src::Input, a, b) => {
                            break Out::Data(Src::Input, base + a, base + b)
                        }
                        Out::PartStart(Src::Input, a, b) => {
                            break Out::PartStart(Src::Input, base + a, base + b)
                        }
                        other => break other,
                    }
                }
                Err(e) => return Err(self.fail(e)),
            }
        };
        if matches!(out, Out::NeedMore) && capped {
            let e = Error::limit(LimitKind::BodyBytes, self.limits.body_bytes, self.pos);
            return Err(self.fail(e));
        }
        let this: &'a Parser = self;
        Ok(Step {
            consumed,
            event: this.materialize(input, out),
        })
    }

    /// Runs [`Parser::step`] over all of `input`, calling `f` for each event
    /// except `NeedMore`.
    pub fn feed<E>(
        &mut self,
        mut input: &[u8],
        is_last: bool,
        mut f: impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<Error>,
    {
        loop {
            let step = self.step(input, is_last)?;
            input = &input[step.consumed..];
            match step.event {
                Event::NeedMore => return Ok(()),
                ev => f(ev)?,
            }
        }
    }

    fn fail(&mut self, e: Error) -> Error {
        let part = match self.state {
            State::Headers => Some(self.parts),
            State::Body => Some(self.parts - 1),
            _ => None,
        };
        let e = e.in_part(part);
        self.error = Some(e.clone());
        e
    }

    /// Frees what the previous event lent out.
    fn release(&mut self) {
        if self.drain > 0 {
            self.carry.drain(..self.drain);
            self.drain = 0;
        }
        if self.hbuf_lent {
            self.hbuf.clear();
            self.hbuf_lent = false;
        }
    }

    fn materialize<'a>(&'a self, input: &'a [u8], out: Out) -> Event<'a> {
        let src = |s: Src| -> &'a [u8] {
            match s {
                Src::Input => input,
                Src::Carry => &self.carry,
                Src::HeaderBuf => &self.hbuf,
            }
        };
        match out {
            Out::Data(s, a, b) => Event::Data(&src(s)[a..b]),
            Out::PartStart(s, a, b) => Event::PartStart(Part {
                index: self.parts - 1,
                block: &src(s)[a..b],
                idx: &self.index,
                disp: &self.disp,
            }),
            Out::PartEnd => Event::PartEnd,
            Out::End => Event::End,
            Out::NeedMore | Out::Skip => Event::NeedMore,
        }
    }

    fn dispatch(&mut self, input: &[u8], is_last: bool) -> Result<(usize, Out), Error> {
        let (n, out) = match self.state {
            State::Preamble => self.preamble(input)?,
            State::Body => self.body(input)?,
            State::AfterDelim(at) => self.after_delimiter(at, input)?,
            State::Headers => self.headers(input)?,
            State::Epilogue => self.epilogue(input)?,
        };
        if matches!(out, Out::NeedMore) && is_last && self.state != State::Epilogue {
            let msg = "body ended before the close delimiter";
            return Err(Error::new(ErrorKind::Truncated, msg, self.pos + n as u64));
        }
        Ok((n, out))
    }

    fn preamble(&mut self, input: &[u8]) -> Result<(usize, Out), Error> {
        match self.scan(input) {
            Scanned::Data(src, len) => {
                let n = if matches!(src, Src::Carry) {
                    let real = len.saturating_sub(self.carry_virtual);
                    self.carry_virtual -= len - real;
                    self.carry.drain(..len);
                    self.skipped += real as u64;
                    0
                } else {
                    self.skipped += len as u64;
                    len
                };
                if self.skipped > self.limits.preamble as u64 {
                    let lim = self.limits.preamble;
                    return Err(Error::limit(LimitKind::Preamble, lim as u64, lim as u64));
                }
                Ok((n, Out::Skip))
            }
            Scanned::Delimiter(n) => {
                self.carry_virtual = 0;
                self.state = State::AfterDelim(AfterDelim::Start);
                Ok((n, Out::Skip))
            }
            Scanned::NeedMore(n) => Ok((n, Out::NeedMore)),
        }
    }

    fn body(&mut self, input: &[u8]) -> Result<(usize, Out), Error> {
        match self.scan(input) {
            Scanned::Data(src, found) => {
                let len = self.count_data(found)?;
                if len < found {
                    self.found = None; // measured from the end of `found`
                }
                match src {
                    Src::Input => Ok((len, Out::Data(src, 0, len))),
                    _ => {
                        self.drain = len;
                        Ok((0, Out::Data(src, 0, len)))
                    }
                }
            }
            Scanned::Delimiter(n) => {
                self.state = State::AfterDelim(AfterDelim::Start);
                Ok((n, Out::PartEnd))
            }
            Scanned::NeedMore(n) => Ok((n, Out::NeedMore)),
        }
    }

    /// Counts part data against `field_bytes`; returns how much of `len`
    /// may be handed out. Data up to the limit is delivered and the error
    /// comes next, so the events before it do not depend on chunking.
    fn count_data(&mut self, len: usize) -> Result<usize, Error> {
        if !self.part_is_field {
            return Ok(len);
        }
        let lim = self.limits.field_bytes;
        let room = lim - self.part_bytes;
        if room == 0 {
            let at = self.part_data_start + lim;
            return Err(Error::limit(LimitKind::FieldBytes, lim, at));
        }
        let len = len.min(usize::try_from(room).unwrap_or(usize::MAX));
        self.part_bytes += len as u64;
        Ok(len)
    }

    /// Finds the next delimiter, first across the held-back carry and the
    /// start of `input`, then in `input` alone.
    fn scan(&mut self, input: &[u8]) -> Scanned {
        if !self.carry.is_empty() {
            return self.scan_carry(input);
        }
        if let Some(after) = self.found.take() {
            if after <= input.len() {
                return Scanned::Delimiter(after);
            }
        }
        match self.delim.scan(input) {
            Scan::Found { data_end: 0, after } => Scanned::Delimiter(after),
            Scan::Found { data_end, after } => {
                // Remember the match so the next step need not search again.
                self.found = Some(after - data_end);
                Scanned::Data(Src::Input, data_end)
            }
            Scan::Partial { safe: 0 } => {
                self.carry.extend_from_slice(input);
                Scanned::NeedMore(input.len())
            }
            Scan::Partial { safe } => Scanned::Data(Src::Input, safe),
        }
    }

    /// The carry is a possible delimiter prefix; a delimiter that straddles
    /// into `input` can only start inside it, so a window of the carry plus
    /// one delimiter length of `input` decides.
    fn scan_carry(&mut self, input: &[u8]) -> Scanned {
        let k = self.carry.len();
        let m = input.len().min(self.delim.max_holdback() + 1);
        self.window.clear();
        self.window.extend_from_slice(&self.carry);
        self.window.extend_from_slice(&input[..m]);
        let scan = self.delim.scan(&self.window);
        self.window.clear();
        match scan {
            Scan::Found { data_end: 0, after } => {
                self.carry.clear();
                Scanned::Delimiter(after - k)
            }
            Scan::Found { data_end: end, .. } | Scan::Partial { safe: end } if end > 0 => {
                Scanned::Data(Src::Carry, end.min(k))
            }
            _ => {
                // The whole window may still start a delimiter, so it is
                // short: `input` was all in it.
                self.carry.extend_from_slice(input);
                Scanned::NeedMore(input.len())
            }
        }
    }

    /// After `CRLF--boundary`: `--` closes the body; otherwise transport
    /// padding and CRLF open a part (RFC 2046 §5.1.1).
    fn after_delimiter(&mut self, mut at: AfterDelim, input: &[u8]) -> Result<(usize, Out), Error> {
        if at == AfterDelim::Start && input.starts_with(b"\r\n") {
            return self.open_part(2); // the usual case, without the byte loop
        }
        for (i, &b) in input.iter().enumerate() {
            at = match (at, b) {
                (AfterDelim::Start, b'-') => AfterDelim::Dash,
                (AfterDelim::Dash, b'-') => {
                    self.state = State::Epilogue;
                    self.skipped = 0;
                    return Ok((i + 1, Out::End));
                }
                (AfterDelim::Start | AfterDelim::Padding, b' ' | b'\t') => AfterDelim::Padding,
                (AfterDelim::Start | AfterDelim::Padding, b'\r') => AfterDelim::Cr,
                (AfterDelim::Cr, b'\n') => return self.open_part(i + 1),
                (AfterDelim::Start | AfterDelim::Padding, b'\n') if self.lenient_lf => {
                    return self.open_part(i + 1)
                }
                _ => {
                    let msg = "unexpected bytes after a boundary delimiter";
                    return Err(Error::new(ErrorKind::Malformed, msg, self.pos + i as u64));
                }
            };
        }
        self.state = State::AfterDelim(at);
        Ok((input.len(), Out::NeedMore))
    }

    fn open_part(&mut self, consumed: usize) -> Result<(usize, Out), Error> {
        self.header_start = self.pos + consumed as u64;
        self.index.reset();
        self.hscan = (0, 0);
        if self.parts >= self.limits.parts {
            let lim = self.limits.parts as u64;
            return Err(Error::limit(LimitKind::Parts, lim, self.header_start));
        }
        self.state = State::Headers;
        Ok((consumed, Out::Skip))
    }

    fn headers(&mut self, input: &[u8]) -> Result<(usize, Out), Error> {
        let max = self.limits.header_bytes + 4;
        if self.hbuf.is_empty() {
            // Common case: the whole block is in the caller's slice.
            let window = &input[..input.len().min(max)];
            if let Some((len, next)) = self.header_end(window)? {
                return self.start_part(input, len, next);
            }
        }
        let old = self.hbuf.len();
        self.reserve_hbuf();
        let take = input.len().min(max - old);
        self.hbuf.extend_from_slice(&input[..take]);
        let hbuf = std::mem::take(&mut self.hbuf);
        let end = self.header_end(&hbuf);
        self.hbuf = hbuf;
        if let Some((len, next)) = end? {
            self.hbuf.truncate(len);
            return self.start_part_buffered(next - old);
        }
        if self.hbuf.len() >= max {
            return Err(self.header_limit());
        }
        Ok((take, Out::NeedMore))
    }

    /// Finds the empty line that ends the header block in `buf`, indexing
    /// every complete line on the way (one pass over the block), resuming
    /// where the last call stopped (`self.hscan`: search position, start of
    /// the current line). A line is looked at only once its LF has arrived,
    /// so every chunking meets the same first fault: a bare LF here, a bare
    /// CR or other control byte in [`Index::line`]. Returns the block length
    /// and the offset past the empty line.
    fn header_end(&mut self, buf: &[u8]) -> Result<Option<(usize, usize)>, Error> {
        let (from, mut line) = self.hscan;
        for i in memchr::memchr_iter(b'\n', &buf[from..]).map(|i| from + i) {
            let crlf = i > line && buf[i - 1] == b'\r';
            if !crlf && !self.lenient_lf {
                let at = self.header_start + i as u64;
                return Err(Error::new(
                    ErrorKind::Malformed,
                    "bare LF in header block",
                    at,
                ));
            }
            let end = i - usize::from(crlf);
            if end == line {
                return Ok(Some((line, i + 1)));
            }
            self.index
                .line(buf, line..end, self.header_start, &self.limits)?;
            line = i + 1;
        }
        self.hscan = (buf.len(), line);
        Ok(None)
    }

    /// The header buffer is allocated once, at its cap, so it never grows
    /// past [`Limits::header_bytes`] by doubling.
    fn reserve_hbuf(&mut self) {
        let max = self.limits.header_bytes + 4;
        if self.hbuf.capacity() < max {
            self.hbuf.reserve_exact(max - self.hbuf.len());
        }
    }

    fn header_limit(&self) -> Error {
        let lim = self.limits.header_bytes as u64;
        Error::limit(LimitKind::HeaderBytes, lim, self.header_start + lim)
    }

    /// The header block is `input[..len]`, still in the caller's slice, and
    /// already indexed.
    fn start_part(&mut self, input: &[u8], len: usize, next: usize) -> Result<(usize, Out), Error> {
        if len > self.limits.header_bytes {
            return Err(self.header_limit());
        }
        let block = &input[..len];
        if !self.index.folded {
            self.begin_part(block)?;
            self.part_data_start = self.pos + next as u64;
            return Ok((next, Out::PartStart(Src::Input, 0, len)));
        }
        self.hbuf.clear();
        self.reserve_hbuf();
        self.hbuf.extend_from_slice(block);
        self.start_part_buffered(next)
    }

    /// The header block is the whole header buffer, already indexed.
    fn start_part_buffered(&mut self, consumed: usize) -> Result<(usize, Out), Error> {
        if self.hbuf.len() > self.limits.header_bytes {
            return Err(self.header_limit());
        }
        if self.index.folded {
            let n = headers::unfold_in_place(&mut self.hbuf);
            self.hbuf.truncate(n);
            self.index
                .build(&self.hbuf, self.header_start, &self.limits)?;
        }
        let block = std::mem::take(&mut self.hbuf);
        let r = self.begin_part(&block);
        self.hbuf = block;
        r?;
        self.part_data_start = self.pos + consumed as u64;
        self.hbuf_lent = true;
        Ok((consumed, Out::PartStart(Src::HeaderBuf, 0, self.hbuf.len())))
    }

    /// Applies the per-part rules once the block is indexed.
    fn begin_part(&mut self, block: &[u8]) -> Result<(), Error> {
        let at = |i: usize| self.header_start + i as u64;
        self.disp = self
            .index
            .disposition(block)
            .map_err(|i| Error::new(ErrorKind::Malformed, "bad Content-Disposition", at(i)))?;
        if self.form_data && self.disp.name.is_none() {
            // RFC 7578 §4.2: every part has Content-Disposition: form-data
            // with a name.
            let msg = "form-data part without a Content-Disposition name";
            return Err(Error::new(ErrorKind::Malformed, msg, at(0)));
        }
        self.parts += 1;
        self.part_bytes = 0;
        self.part_is_field = self.form_data && self.disp.filename.is_none();
        self.state = State::Body;
        Ok(())
    }

    fn epilogue(&mut self, input: &[u8]) -> Result<(usize, Out), Error> {
        self.skipped += input.len() as u64;
        let lim = self.limits.epilogue as u64;
        if self.skipped > lim {
            let at = self.pos + input.len() as u64 - (self.skipped - lim);
            return Err(Error::limit(LimitKind::Epilogue, lim, at));
        }
        Ok((input.len(), Out::NeedMore))
    }
}

#[cfg(test)]
mod tests;
