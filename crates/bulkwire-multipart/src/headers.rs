//! Part header blocks (RFC 2046 §5.1.1 body-part headers, RFC 5322 §2.2
//! field syntax, RFC 7578 §4.2 Content-Disposition for form-data).
//!
//! A block is indexed in place: each field is a pair of ranges into the
//! block, so the common unfolded block is never copied. Folded lines
//! (RFC 5322 §2.2.3) are legal MIME and are unfolded by the parser into its
//! header buffer before indexing, so values here are always one line.

use crate::error::{Error, ErrorKind};
use crate::limits::{LimitKind, Limits};
use crate::params::{self, Escapes, RawParam};
use std::borrow::Cow;
use std::ops::Range;

/// Ranges of one header field inside its block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    name: Range<u32>,
    value: Range<u32>,
}

/// What indexing a block found: where the known fields are.
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    pub fields: Vec<Field>,
    pub folded: bool,
    disposition: Option<usize>,
    content_type: Option<usize>,
    content_id: Option<usize>,
    transfer_encoding: Option<usize>,
}

/// Token characters of RFC 7230 §3.2.6, allowed in field names.
const fn tchar_table() -> [bool; 256] {
    let mut t = [false; 256];
    let extra = b"!#$%&'*+-.^_`|~";
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric();
        c += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
}
static TCHAR: [bool; 256] = tchar_table();

/// Bytes not allowed in a field value: controls other than HT (so CR and LF
/// only ever end a line). Bytes >= 0x80 pass: browsers send raw UTF-8.
fn bad_value_byte(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

/// Finds the first [`bad_value_byte`], eight bytes at a time: a word is
/// looked at byte by byte only if it may hold a control or DEL (HT included),
/// which keeps header checking off the profile of many-small-part bodies.
fn first_bad_value_byte(v: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = v.chunks_exact(8);
    let mut off = 0;
    for w in &mut words {
        let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        let below_space = x.wrapping_sub(0x20 * ONES) & !x & HIGH;
        let y = x ^ (0x7f * ONES);
        let del = y.wrapping_sub(ONES) & !y & HIGH;
        if below_space | del != 0 {
            if let Some(i) = w.iter().position(|&b| bad_value_byte(b)) {
                return Some(off + i);
            }
        }
        off += 8;
    }
    let rest = words.remainder();
    rest.iter()
        .position(|&b| bad_value_byte(b))
        .map(|i| off + i)
}

impl Index {
    /// Starts an empty index for a new block.
    pub fn reset(&mut self) {
        self.fields.clear();
        self.folded = false;
        self.disposition = None;
        self.content_type = None;
        self.content_id = None;
        self.transfer_encoding = None;
    }

    /// Indexes a whole block whose line ends are already checked (every
    /// line, the last included, ends in CRLF, or LF when `lenient_lf`).
    /// `base` is the block's absolute offset, for errors.
    pub fn build(&mut self, block: &[u8], base: u64, lim: &Limits) -> Result<(), Error> {
        self.reset();
        let mut pos = 0;
        while pos < block.len() {
            let nl = memchr::memchr(b'\n', &block[pos..]).map_or(block.len(), |i| pos + i);
            let end = if nl > pos && block[nl - 1] == b'\r' {
                nl - 1
            } else {
                nl
            };
            self.line(block, pos..end, base, lim)?;
            pos = nl + 1;
        }
        Ok(())
    }

    /// Adds one non-empty line (without its line end): a new field, or the
    /// continuation of the last one when it starts with whitespace.
    pub fn line(
        &mut self,
        block: &[u8],
        line: Range<usize>,
        base: u64,
        lim: &Limits,
    ) -> Result<(), Error> {
        if matches!(block[line.start], b' ' | b'\t') {
            self.continue_field(block, line.start, line.end, base)
        } else {
            self.add_field(block, line.start, line.end, base, lim)
        }
    }

    fn continue_field(
        &mut self,
        block: &[u8],
        pos: usize,
        end: usize,
        base: u64,
    ) -> Result<(), Error> {
        let Some(last) = self.fields.last_mut() else {
            let msg = "header block starts with whitespace";
            return Err(Error::new(ErrorKind::Malformed, msg, base + pos as u64));
        };
        if let Some(i) = first_bad_value_byte(&block[pos..end]) {
            return Err(bad(pos + i, base));
        }
        self.folded = true;
        last.value.end = end as u32;
        Ok(())
    }

    /// The slot of a field the parser reads itself; matched on length first
    /// since most names are none of these.
    fn known_slot(&mut self, name: &[u8]) -> Option<&mut Option<usize>> {
        let (slot, want): (&mut Option<usize>, &[u8]) = match name.len() {
            19 => (&mut self.disposition, b"content-disposition"),
            12 => (&mut self.content_type, b"content-type"),
            10 => (&mut self.content_id, b"content-id"),
            25 => (&mut self.transfer_encoding, b"content-transfer-encoding"),
            _ => return None,
        };
        name.eq_ignore_ascii_case(want).then_some(slot)
    }

    fn add_field(
        &mut self,
        block: &[u8],
        pos: usize,
        end: usize,
        base: u64,
        lim: &Limits,
    ) -> Result<(), Error> {
        if self.fields.len() >= lim.headers {
            return Err(Error::limit(
                LimitKind::Headers,
                lim.headers as u64,
                base + pos as u64,
            ));
        }
        let line = &block[pos..end];
        let colon = match known_name(line) {
            Some(colon) => colon,
            None => field_name_len(line).ok_or_else(|| {
                let name = line.iter().position(|&b| !TCHAR[b as usize]);
                let at = pos + name.unwrap_or(line.len());
                Error::new(
                    ErrorKind::Malformed,
                    "bad header field name",
                    base + at as u64,
                )
            })?,
        };
        if let Some(i) = first_bad_value_byte(&line[colon + 1..]) {
            return Err(bad(pos + colon + 1 + i, base));
        }
        let n = self.fields.len();
        if let Some(slot) = self.known_slot(&line[..colon]) {
            if slot.is_some() {
                let msg = "duplicate header field";
                return Err(Error::new(ErrorKind::Malformed, msg, base + pos as u64));
            }
            *slot = Some(n);
        }
        self.fields.push(Field {
            name: pos as u32..(pos + colon) as u32,
            value: (pos + colon + 1) as u32..end as u32,
        });
        Ok(())
    }
}

/// Length of the field name before the `:` (RFC 5322 §3.6.8: one or more
/// token characters), or `None` when the line does not start that way.
fn field_name_len(line: &[u8]) -> Option<usize> {
    let colon = line
        .iter()
        .position(|&b| !TCHAR[b as usize])
        .unwrap_or(line.len());
    (colon > 0 && line.get(colon) == Some(&b':')).then_some(colon)
}

/// A field name with its colon, lower case, matched a word at a time.
struct NamePattern {
    words: [u64; 3],
    /// 0x20 in the bytes where the pattern has a letter: OR-ing it in folds
    /// only `A`-`Z` onto `a`-`z`; every other byte must match exactly.
    masks: [u64; 3],
    offsets: [usize; 3],
    len: usize,
}

impl NamePattern {
    /// `p` is 8 to 24 bytes; the three words overlap to cover it.
    const fn new(p: &[u8]) -> NamePattern {
        let len = p.len();
        let mid = if len >= 16 { 8 } else { len - 8 };
        let offsets = [0, mid, len - 8];
        let mut words = [0u64; 3];
        let mut masks = [0u64; 3];
        let mut k = 0;
        while k < 3 {
            let mut i = 0;
            while i < 8 {
                let b = p[offsets[k] + i];
                words[k] |= (b as u64) << (8 * i);
                if b.is_ascii_lowercase() {
                    masks[k] |= 0x20 << (8 * i);
                }
                i += 1;
            }
            k += 1;
        }
        NamePattern {
            words,
            masks,
            offsets,
            len,
        }
    }

    fn matches(&self, line: &[u8]) -> bool {
        if line.len() < self.len {
            return false;
        }
        (0..3).all(|k| {
            let at = self.offsets[k];
            let w = u64::from_le_bytes(line[at..at + 8].try_into().unwrap_or([0; 8]));
            w | self.masks[k] == self.words[k]
        })
    }
}

static DISPOSITION: NamePattern = NamePattern::new(b"content-disposition:");
static CONTENT_TYPE: NamePattern = NamePattern::new(b"content-type:");

/// The colon position for the two names nearly every part carries, found
/// without the per-byte token scan that dominates tiny form fields.
fn known_name(line: &[u8]) -> Option<usize> {
    if DISPOSITION.matches(line) {
        Some(DISPOSITION.len - 1)
    } else if CONTENT_TYPE.matches(line) {
        Some(CONTENT_TYPE.len - 1)
    } else {
        None
    }
}

fn bad(at: usize, base: u64) -> Error {
    Error::new(
        ErrorKind::Malformed,
        "bad byte in header block",
        base + at as u64,
    )
}

/// Unfolds a header block in place (RFC 5322 §2.2.3: a line end followed by
/// whitespace is removed, the whitespace kept) and returns the new length.
pub(crate) fn unfold_in_place(buf: &mut [u8]) -> usize {
    let mut w = 0;
    let mut r = 0;
    while r < buf.len() {
        let crlf = buf[r] == b'\r' && buf.get(r + 1) == Some(&b'\n');
        let eol = if crlf {
            2
        } else {
            usize::from(buf[r] == b'\n')
        };
        if eol > 0 && matches!(buf.get(r + eol), Some(b' ' | b'\t')) {
            r += eol;
            continue;
        }
        buf[w] = buf[r];
        w += 1;
        r += 1;
    }
    w
}

/// A parameter value's place in its header block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ParamAt {
    value: Range<u32>,
    quoted: bool,
}

impl ParamAt {
    fn of(block: &[u8], p: &RawParam<'_>) -> Self {
        // `p.value` is a sub-slice of `block`; its distance from the block's
        // start is its range (plain address arithmetic, no unsafe). Checked,
        // so that a value from anywhere else is an empty range, not a panic.
        let start = (p.value.as_ptr() as usize).wrapping_sub(block.as_ptr() as usize);
        let start = if start
            .checked_add(p.value.len())
            .is_some_and(|end| end <= block.len())
        {
            start
        } else {
            debug_assert!(false, "parameter value outside its header block");
            block.len()
        };
        let end = (start + p.value.len()).min(block.len());
        ParamAt {
            value: start as u32..end as u32,
            quoted: p.quoted,
        }
    }

    fn get<'a>(&self, block: &'a [u8]) -> RawParam<'a> {
        let value = &block[self.value.start as usize..self.value.end as usize];
        RawParam {
            name: b"",
            value,
            quoted: self.quoted,
        }
    }
}

/// Content-Disposition parameters the parser itself needs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Disposition {
    pub name: Option<ParamAt>,
    pub filename: Option<ParamAt>,
}

impl Index {
    /// Reads `name` and `filename` from Content-Disposition. Per RFC 7578
    /// §4.2, `filename*` is not used for form-data and never replaces
    /// `filename`; a repeated `name` or `filename` is rejected because
    /// parsers that pick different copies disagree about what was sent.
    /// `Err` carries the offset of the fault within `block`.
    pub fn disposition(&self, block: &[u8]) -> Result<Disposition, usize> {
        let Some(i) = self.disposition else {
            return Ok(Disposition::default());
        };
        let f = &self.fields[i];
        let value = &block[f.value.start as usize..f.value.end as usize];
        if let Some(d) = simple_disposition(block, value) {
            return Ok(d);
        }
        self.disposition_general(block, f)
    }

    /// Any Content-Disposition value, through the general parameter parser.
    fn disposition_general(&self, block: &[u8], f: &Field) -> Result<Disposition, usize> {
        let mut d = Disposition::default();
        let value = &block[f.value.start as usize..f.value.end as usize];
        let (_, ps) = params::split_value(value);
        for p in ps {
            let p = p.map_err(|at| f.value.start as usize + at)?;
            let slot = if p.name.eq_ignore_ascii_case(b"name") {
                &mut d.name
            } else if p.name.eq_ignore_ascii_case(b"filename") {
                &mut d.filename
            } else {
                continue;
            };
            if slot.is_some() {
                return Err(f.value.start as usize);
            }
            *slot = Some(ParamAt::of(block, &p));
        }
        Ok(d)
    }
}

/// The shape browsers and HTTP libraries send for nearly every part,
/// ` form-data; name="…"` optionally followed by `; filename="…"`, with
/// lower-case parameter names, one space after each `;`, and quoted values
/// without a backslash. Reads it in one pass with no per-parameter
/// bookkeeping; returns `None` for anything else (other parameters,
/// escapes, whitespace, duplicates, errors), which the general parser then
/// handles, so both paths give the same result wherever this one answers
/// (a test checks that on generated values).
fn simple_disposition(block: &[u8], value: &[u8]) -> Option<Disposition> {
    let rest = value.strip_prefix(b" ")?;
    let mut rest = match rest.get(..9) {
        Some(t) if t.eq_ignore_ascii_case(b"form-data") => &rest[9..],
        _ => return None,
    };
    let mut d = Disposition::default();
    while !rest.is_empty() {
        let (slot, after) = if let Some(r) = rest.strip_prefix(b"; name=\"") {
            (&mut d.name, r)
        } else if let Some(r) = rest.strip_prefix(b"; filename=\"") {
            (&mut d.filename, r)
        } else {
            return None;
        };
        let close = memchr::memchr2(b'"', b'\\', after)?;
        if after[close] != b'"' || slot.is_some() {
            return None;
        }
        let v = &after[..close];
        *slot = Some(ParamAt::of(
            block,
            &RawParam {
                name: b"",
                value: v,
                quoted: true,
            },
        ));
        rest = &after[close + 1..];
    }
    Some(d)
}

/// The headers of one part, borrowed from the block they were parsed from.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    pub(crate) index: usize,
    pub(crate) block: &'a [u8],
    pub(crate) idx: &'a Index,
    pub(crate) disp: &'a Disposition,
}

impl<'a> Part<'a> {
    /// Zero-based position of this part in the body.
    pub fn index(&self) -> usize {
        self.index
    }

    fn field(&self, i: Option<usize>) -> Option<&'a [u8]> {
        let f = &self.idx.fields[i?];
        Some(params::trim(
            &self.block[f.value.start as usize..f.value.end as usize],
        ))
    }

    /// All header fields in order, names as sent, values trimmed and unfolded.
    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let block = self.block;
        self.idx.fields.iter().map(move |f| {
            let name = &block[f.name.start as usize..f.name.end as usize];
            let value = &block[f.value.start as usize..f.value.end as usize];
            (name, params::trim(value))
        })
    }

    /// The value of the first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// Raw Content-Disposition value.
    pub fn content_disposition(&self) -> Option<&'a [u8]> {
        self.field(self.idx.disposition)
    }

    /// Content-Type value, if sent (RFC 7578 §4.4 default is text/plain).
    pub fn content_type(&self) -> Option<&'a [u8]> {
        self.field(self.idx.content_type)
    }

    /// Content-ID value as sent, angle brackets included (RFC 2045 §7).
    pub fn content_id(&self) -> Option<&'a [u8]> {
        self.field(self.idx.content_id)
    }

    /// Content-Transfer-Encoding value. The data is handed out as sent, not
    /// decoded: RFC 7578 §4.7 deprecates the field for form-data.
    pub fn content_transfer_encoding(&self) -> Option<&'a [u8]> {
        self.field(self.idx.transfer_encoding)
    }

    /// The form-data `name`, with quoted-pairs and the browsers' `%22`,
    /// `%0D`, `%0A` escapes undone.
    pub fn name(&self) -> Option<Cow<'a, [u8]>> {
        Some(params::decode(
            &self.disp.name.as_ref()?.get(self.block),
            Escapes::Browser,
        ))
    }

    /// The `filename`, decoded as [`Part::name`]; raw UTF-8 is kept as is.
    pub fn filename(&self) -> Option<Cow<'a, [u8]>> {
        Some(params::decode(
            &self.disp.filename.as_ref()?.get(self.block),
            Escapes::Browser,
        ))
    }

    /// [`Part::name`] as text (invalid UTF-8 replaced).
    pub fn name_str(&self) -> Option<String> {
        self.name()
            .map(|n| String::from_utf8_lossy(&n).into_owned())
    }

    /// [`Part::filename`] as text (invalid UTF-8 replaced).
    pub fn filename_str(&self) -> Option<String> {
        self.filename()
            .map(|n| String::from_utf8_lossy(&n).into_owned())
    }

    /// True when the part carries a `filename` parameter (a file field).
    pub fn is_file(&self) -> bool {
        self.disp.filename.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(block: &[u8]) -> Result<Index, Error> {
        let mut i = Index::default();
        i.build(block, 100, &Limits::default()).map(|_| i)
    }

    fn part<'a>(block: &'a [u8], idx: &'a Index, disp: &'a Disposition) -> Part<'a> {
        Part {
            index: 0,
            block,
            idx,
            disp,
        }
    }

    #[test]
    fn indexes_known_fields() {
        let b = b"content-disposition: form-data; name=\"f\"; filename=\"a%22.txt\"\r\nContent-Type:  text/plain \r\nX-A: 1\r\n";
        let i = index(b).unwrap();
        let d = i.disposition(b).unwrap();
        let p = part(b, &i, &d);
        assert_eq!(p.content_type(), Some(&b"text/plain"[..]));
        assert_eq!(p.name().as_deref(), Some(&b"f"[..]));
        assert_eq!(p.filename().as_deref(), Some(&b"a\".txt"[..]));
        assert_eq!(p.header("x-a"), Some(&b"1"[..]));
        assert_eq!(p.headers().count(), 3);
        assert!(p.is_file());
    }

    #[test]
    fn rejects_bad_lines_with_offsets() {
        assert_eq!(index(b": x\r\n").unwrap_err().offset(), 100);
        assert_eq!(index(b"A b: x\r\n").unwrap_err().offset(), 101);
        assert_eq!(index(b"A: x\0y\r\n").unwrap_err().offset(), 104);
        let e = index(b" A: x\r\n").unwrap_err();
        assert_eq!(e.message(), "header block starts with whitespace");
        assert_eq!(
            index(b"Content-ID: 1\r\ncontent-id: 2\r\n")
                .unwrap_err()
                .offset(),
            115
        );
    }

    #[test]
    fn value_check_finds_every_control_byte() {
        for len in 0..20 {
            for at in 0..len {
                for bad in [0u8, 1, 8, 10, 13, 0x1f, 0x7f] {
                    let mut v = vec![b'a'; len];
                    v[at] = bad;
                    assert_eq!(first_bad_value_byte(&v), Some(at), "{len} {at} {bad}");
                }
                let mut v = vec![0xffu8; len];
                v[at] = b'\t';
                assert_eq!(first_bad_value_byte(&v), None);
            }
        }
    }

    #[test]
    fn header_count_limit() {
        let lim = Limits {
            headers: 2,
            ..Limits::default()
        };
        let mut i = Index::default();
        let e = i.build(b"A: 1\r\nB: 2\r\nC: 3\r\n", 0, &lim).unwrap_err();
        assert_eq!(e.limit_exceeded(), Some((LimitKind::Headers, 2)));
        assert_eq!(e.offset(), 12);
    }

    #[test]
    fn folding_is_detected_and_unfolded() {
        let mut b = b"A: one\r\n two\r\n\tthree\r\nB: x\r\n".to_vec();
        assert!(index(&b).unwrap().folded);
        let n = unfold_in_place(&mut b);
        assert_eq!(&b[..n], b"A: one two\tthree\r\nB: x\r\n");
        let i = index(&b[..n]).unwrap();
        assert!(!i.folded);
        let d = Disposition::default();
        assert_eq!(
            part(&b[..n], &i, &d).header("a"),
            Some(&b"one two\tthree"[..])
        );
    }

    #[test]
    fn disposition_rules() {
        let b =
            b"Content-Disposition: form-data; filename*=UTF-8''evil; name=a; filename=\"ok\"\r\n";
        let i = index(b).unwrap();
        let d = i.disposition(b).unwrap();
        assert_eq!(part(b, &i, &d).filename().as_deref(), Some(&b"ok"[..]));
        let b = b"Content-Disposition: form-data; name=a; name=b\r\n";
        assert_eq!(index(b).unwrap().disposition(b).unwrap_err(), 20);
    }

    /// The fast path answers only where the general parser agrees with it,
    /// on values built from pieces that hit both paths' edge cases.
    #[test]
    fn simple_disposition_agrees_with_general() {
        let heads: &[&[u8]] = &[
            b" form-data",
            b" Form-Data",
            b"form-data",
            b"  form-data",
            b" form-datax",
        ];
        let params: &[&[u8]] = &[
            b"; name=\"a\"",
            b"; name=\"\"",
            b"; filename=\"f.txt\"",
            b"; filename=\"C:\\x\"",
            b"; name=\"a\\\"b\"",
            b"; name=a",
            b";name=\"a\"",
            b"; name =\"a\"",
            b"; NAME=\"a\"",
            b"; name=\"unterminated",
            b"; filename*=UTF-8''x",
            b"; name=\"x\" ",
            b";",
        ];
        let mut fast_hits = 0;
        for h in heads {
            for p1 in params {
                for p2 in params.iter().chain([&&b""[..]]) {
                    for p3 in params.iter().chain([&&b""[..]]).take(4) {
                        let mut b = b"Content-Disposition:".to_vec();
                        for piece in [*h, *p1, *p2, *p3] {
                            b.extend_from_slice(piece);
                        }
                        b.extend_from_slice(b"\r\n");
                        let Ok(i) = index(&b) else { continue };
                        let f = &i.fields[i.disposition.unwrap()];
                        let general = i.disposition_general(&b, f);
                        let value = &b[f.value.start as usize..f.value.end as usize];
                        if let Some(fast) = simple_disposition(&b, value) {
                            fast_hits += 1;
                            let general =
                                general.expect("fast path accepted what the general one rejects");
                            assert_eq!(fast.name, general.name, "{}", String::from_utf8_lossy(&b));
                            assert_eq!(
                                fast.filename,
                                general.filename,
                                "{}",
                                String::from_utf8_lossy(&b)
                            );
                        }
                    }
                }
            }
        }
        assert!(fast_hits > 0, "the fast path must be exercised");
        // The shapes real clients send take the fast path.
        let v = b" form-data; name=\"f\"; filename=\"x.bin\"";
        let d = simple_disposition(v, v).expect("common shape");
        assert_eq!(d.name.unwrap().get(v).value, b"f");
        assert_eq!(d.filename.unwrap().get(v).value, b"x.bin");
        assert!(simple_disposition(b" form-data; name=\"a\"", b" form-data; name=\"a\"").is_some());
    }

    #[test]
    fn known_names_fold_letters_only() {
        assert_eq!(known_name(b"Content-Disposition: x"), Some(19));
        assert_eq!(known_name(b"CONTENT-TYPE: x"), Some(12));
        assert_eq!(known_name(b"content-type:x"), Some(12));
        // OR-ing 0x20 into CR gives '-': only letters may be folded.
        assert_eq!(known_name(b"Content\rDisposition: x"), None);
        assert_eq!(known_name(b"Content-Typ: x"), None);
        assert_eq!(known_name(b"Content-Type : x"), None);
        assert_eq!(known_name(b"Content-Types: x"), None);
    }
}
