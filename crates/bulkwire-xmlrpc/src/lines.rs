//! The fast path for `base64` text laid out as nearly every client sends
//! it: lines of exactly 76 characters (RFC 2045 §6.8), each followed by one
//! LF (Python's `encodebytes`, Java's MIME encoder) or one CRLF (.NET,
//! PHP's `chunk_split`), after a little white space.
//!
//! Such text is read straight from the body, before the XML tokenizer sees
//! it, and each whole line is decoded where it lies: the line end after its
//! 76 characters is checked, and the line decoder validates every
//! character at once — a `<`, `&`, `=` or white space among them fails it,
//! so a line that decodes is plain character data and the tokenizer can
//! skip it whole. A 76-character line is 19 whole quanta, so lines never
//! split a quantum. The decoder is AVX2 where the CPU has it (`avx2.rs`,
//! 1.6× base64-simd's own decode of the same text stripped of line ends,
//! which would first need a copy to strip them), else base64-simd one line
//! at a time. Only a line cut by the end of an input is copied, into a
//! 76-byte buffer, and decoded once it is whole.
//!
//! Decoded lines are handed to the sink in blocks of up to 112 lines
//! (6.2 KiB, L1-resident). Exactly what the body held is known at every
//! point (the white space before the first line, whole lines with one known
//! line end each, the current partial line), so anything else — a shorter
//! line (the last one), a comment, a reference, padding, an invalid
//! character — is handled by committing the whole lines before it and
//! replaying the raw bytes not yet committed through the tokenizer and the
//! general decoder of `bulkwire-xml`, which then takes the rest of the
//! value: results and error offsets are exactly those of the general path.

#[cfg(target_arch = "x86_64")]
mod avx2;

use base64_simd::AsOut;

/// Characters per wrapped line.
const LINE: usize = 76;
/// Bytes a line decodes to.
const LINE_OUT: usize = LINE / 4 * 3;
/// Scratch after a line's output that a vector decoder may overwrite.
const SLACK: usize = 8;
/// Whole lines per block.
pub(crate) const MAX_LINES: usize = 112;
/// Most white space taken before a block's first line.
const MAX_LEAD: usize = 16;

/// What [`Lines::take`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// All of the input is staged.
    More,
    /// The block is full at `t[i..]`: commit it, then take `t[i..]`.
    Full(usize),
    /// The layout is not the regular one at `t[i..]`: commit what can be,
    /// replay the rest, and hand `t[i..]` to the tokenizer.
    Stop(usize),
}

/// A block decoded: its output, and its raw bytes and text bytes (after
/// line-end normalization) for the tokenizer to skip.
pub(crate) struct Committed<'a> {
    pub(crate) out: &'a [u8],
    pub(crate) bytes: u64,
    pub(crate) text_bytes: u64,
}

/// Decodes one line of 76 characters (no padding) into 57 bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LineDecoder {
    #[cfg(target_arch = "x86_64")]
    Avx2(avx2::Avx2),
    /// base64-simd, one call per line.
    Portable,
}

impl LineDecoder {
    /// The fastest this CPU runs.
    pub(crate) fn detect() -> LineDecoder {
        #[cfg(target_arch = "x86_64")]
        if let Some(a) = avx2::Avx2::detect() {
            return LineDecoder::Avx2(a);
        }
        LineDecoder::Portable
    }

    /// Decodes `src` into `dst[..57]` (the rest is scratch); false if a
    /// character is not in the alphabet (padding included).
    #[inline]
    pub(crate) fn line(self, src: &[u8; LINE], dst: &mut [u8; LINE_OUT + SLACK]) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            LineDecoder::Avx2(a) => a.line(src, dst),
            LineDecoder::Portable => {
                let out = dst[..LINE_OUT].as_out();
                matches!(base64_simd::STANDARD.decode(src, out), Ok(o) if o.len() == LINE_OUT)
            }
        }
    }
}

/// The open value's text: decoded whole lines not yet committed, and the
/// partial line.
#[derive(Debug)]
pub(crate) struct Lines {
    decoder: LineDecoder,
    /// Whole lines decoded, `LINE_OUT` bytes each, and scratch after.
    out: Box<[u8]>,
    /// The current partial line's characters.
    line: [u8; LINE],
    /// White space before the block's first line, verbatim.
    lead: [u8; MAX_LEAD],
    lead_len: usize,
    /// Complete lines (decoded, with their line end).
    lines: usize,
    /// Characters of the current line.
    col: usize,
    /// Bytes of the current line's end seen (the CR of a CRLF).
    eol_got: usize,
    /// The value's line end, fixed by its first line: 0 (not yet), 1 (LF)
    /// or 2 (CRLF).
    eol: usize,
    /// The fast path is on for the open value: it was started and has not
    /// fallen back.
    pub(crate) active: bool,
}

impl Lines {
    pub(crate) fn new() -> Lines {
        Lines::with_decoder(LineDecoder::detect())
    }

    pub(crate) fn with_decoder(decoder: LineDecoder) -> Lines {
        Lines {
            decoder,
            out: vec![0; MAX_LINES * LINE_OUT + SLACK].into_boxed_slice(),
            line: [0; LINE],
            lead: [0; MAX_LEAD],
            lead_len: 0,
            lines: 0,
            col: 0,
            eol_got: 0,
            eol: 0,
            active: false,
        }
    }

    /// A new value starts.
    pub(crate) fn start(&mut self) {
        self.clear();
        self.eol = 0;
        self.active = true;
    }

    fn clear(&mut self) {
        self.lead_len = 0;
        self.lines = 0;
        self.col = 0;
        self.eol_got = 0;
    }

    /// Raw bytes staged and not yet committed: the tokenizer has not seen
    /// them.
    pub(crate) fn pending(&self) -> u64 {
        (self.lead_len + self.lines * (LINE + self.eol) + self.col + self.eol_got) as u64
    }

    /// Takes as much of `t`, the body bytes that follow the pending ones,
    /// as fits the regular layout.
    pub(crate) fn take(&mut self, t: &[u8]) -> Take {
        let mut i = 0;
        while i < t.len() {
            if self.col == 0 && self.lines == 0 {
                match self.lead(t, i) {
                    Ok(j) => i = j,
                    Err(j) => return Take::Stop(j),
                }
                if i == t.len() {
                    break;
                }
            }
            if self.col == 0 {
                if self.lines == MAX_LINES {
                    return Take::Full(i);
                }
                i = match self.eol {
                    1 => self.whole_lines::<1>(t, i),
                    2 => self.whole_lines::<2>(t, i),
                    _ => i,
                };
                if self.lines == MAX_LINES || i == t.len() {
                    continue;
                }
            }
            if self.col < LINE {
                let take = (LINE - self.col).min(t.len() - i);
                self.line[self.col..self.col + take].copy_from_slice(&t[i..i + take]);
                self.col += take;
                i += take;
                continue;
            }
            if !self.line_end(t[i]) {
                return Take::Stop(i);
            }
            i += 1;
        }
        Take::More
    }

    /// White space before the block's first line, from `t[i..]`; `Err` at
    /// the byte that makes it too long.
    fn lead(&mut self, t: &[u8], mut i: usize) -> Result<usize, usize> {
        while i < t.len() && crate::scalar::is_ws(t[i]) {
            if self.lead_len == MAX_LEAD {
                return Err(i);
            }
            self.lead[self.lead_len] = t[i];
            self.lead_len += 1;
            i += 1;
        }
        Ok(i)
    }

    /// One byte after the partial line's 76 characters: false if it cannot
    /// continue the value's line end, or if it completes the line and the
    /// line does not decode (the byte is then not taken).
    fn line_end(&mut self, b: u8) -> bool {
        match (self.eol, self.eol_got, b) {
            (0 | 1, 0, b'\n') | (2, 1, b'\n') => {
                let at = self.lines * LINE_OUT;
                let dst = (&mut self.out[at..at + LINE_OUT + SLACK]).try_into();
                if !self.decoder.line(&self.line, dst.expect("a line's room")) {
                    return false;
                }
                if self.eol == 0 {
                    self.eol = 1;
                }
                self.lines += 1;
                self.col = 0;
                self.eol_got = 0;
                true
            }
            (0 | 2, 0, b'\r') => {
                self.eol = 2;
                self.eol_got = 1;
                true
            }
            _ => false,
        }
    }

    /// The hot loop: while `t[i..]` holds a whole line with its `E`-byte
    /// line end, the block has room and the line decodes, decodes it in
    /// place. Returns where it stopped, at a line start.
    fn whole_lines<const E: usize>(&mut self, t: &[u8], mut i: usize) -> usize {
        const EOL: [u8; 2] = *b"\r\n";
        let eol = &EOL[2 - E..];
        while self.lines < MAX_LINES {
            let Some(s) = t.get(i..i + LINE + E) else {
                break;
            };
            let (src, end) = s.split_at(LINE);
            if end != eol {
                break;
            }
            let at = self.lines * LINE_OUT;
            let dst = (&mut self.out[at..at + LINE_OUT + SLACK]).try_into();
            let src = src.try_into().expect("a line");
            if !self.decoder.line(src, dst.expect("a line's room")) {
                break;
            }
            self.lines += 1;
            i += LINE + E;
        }
        i
    }

    /// True if the partial line holds a `<`: the value (or the document)
    /// goes on in markup that the tokenizer should see now, not at the
    /// next input.
    pub(crate) fn partial_has_markup(&self) -> bool {
        self.line[..self.col].contains(&b'<')
    }

    /// Hands out the block's decoded lines; `None` if there are none. The
    /// partial line stays.
    pub(crate) fn commit(&mut self) -> Option<Committed<'_>> {
        if self.lines == 0 {
            return None;
        }
        let bytes = (self.lead_len + self.lines * (LINE + self.eol)) as u64;
        let crlfs = (self.eol / 2 * self.lines) as u64 + crlf_pairs(&self.lead[..self.lead_len]);
        let n = self.lines * LINE_OUT;
        self.lead_len = 0;
        self.lines = 0;
        Some(Committed {
            out: &self.out[..n],
            bytes,
            text_bytes: bytes - crlfs,
        })
    }

    /// The exact raw bytes not yet committed, for the tokenizer; the fast
    /// path is then off for this value. Uncommitted whole lines are
    /// encoded back: 19 whole quanta decode one to one, so that is the
    /// text they came from.
    pub(crate) fn take_raw(&mut self, raw: &mut Vec<u8>) {
        let eol = &b"\r\n"[2 - self.eol.max(1)..];
        raw.clear();
        raw.extend_from_slice(&self.lead[..self.lead_len]);
        for line in self.out[..self.lines * LINE_OUT].chunks_exact(LINE_OUT) {
            raw.extend_from_slice(base64_simd::STANDARD.encode_to_string(line).as_bytes());
            raw.extend_from_slice(eol);
        }
        raw.extend_from_slice(&self.line[..self.col]);
        raw.extend_from_slice(&b"\r"[..self.eol_got]);
        self.clear();
        self.active = false;
    }
}

/// CRLF pairs in `b` (each is one byte of text).
fn crlf_pairs(b: &[u8]) -> u64 {
    b.windows(2).filter(|w| w == b"\r\n").count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every decoder this machine can run: each test runs with all.
    fn decoders() -> Vec<LineDecoder> {
        let mut d = vec![LineDecoder::Portable];
        let best = LineDecoder::detect();
        if !matches!(best, LineDecoder::Portable) {
            d.push(best);
        }
        d
    }

    fn raw_of(l: &mut Lines) -> Vec<u8> {
        let mut raw = Vec::new();
        l.take_raw(&mut raw);
        raw
    }

    /// base64-simd's verdict on one line: its 57 bytes, if it is 19
    /// unpadded quanta.
    fn reference(src: &[u8; LINE]) -> Option<Vec<u8>> {
        let v = base64_simd::STANDARD.decode_to_vec(src).ok()?;
        (v.len() == LINE_OUT).then_some(v)
    }

    fn xorshift(mut x: u64) -> u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^ (x << 17)
    }

    #[test]
    fn line_decoders_agree_with_base64_simd_on_every_byte_at_every_column() {
        let mut x = 0x9E37_79B9_7F4A_7C15;
        let payload: Vec<u8> = (0..LINE_OUT)
            .map(|_| {
                x = xorshift(x);
                x as u8
            })
            .collect();
        let good: [u8; LINE] = base64_simd::STANDARD
            .encode_to_string(&payload)
            .as_bytes()
            .try_into()
            .unwrap();
        for d in decoders() {
            let mut dst = [0u8; LINE_OUT + SLACK];
            assert!(d.line(&good, &mut dst), "{d:?}");
            assert_eq!(&dst[..LINE_OUT], &payload[..], "{d:?}");
            for col in 0..LINE {
                for b in 0..=255u8 {
                    let mut src = good;
                    src[col] = b;
                    let want = reference(&src);
                    let mut dst = [0u8; LINE_OUT + SLACK];
                    let ok = d.line(&src, &mut dst);
                    assert_eq!(ok, want.is_some(), "{d:?} byte {b:#x} at {col}");
                    if let Some(w) = want {
                        assert_eq!(&dst[..LINE_OUT], &w[..], "{d:?} byte {b:#x} at {col}");
                    }
                }
            }
        }
    }

    #[test]
    fn line_decoders_agree_on_random_lines() {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut x = 1u64;
        for d in decoders() {
            for round in 0..20_000 {
                let mut src = [0u8; LINE];
                for c in &mut src {
                    x = xorshift(x);
                    *c = ALPHABET[(x % 64) as usize];
                }
                // Now and then one or two stray bytes anywhere.
                for _ in 0..round % 3 {
                    x = xorshift(x);
                    src[(x % LINE as u64) as usize] = (x >> 8) as u8;
                }
                let want = reference(&src);
                let mut dst = [0u8; LINE_OUT + SLACK];
                assert_eq!(d.line(&src, &mut dst), want.is_some(), "{d:?} {src:?}");
                if let Some(w) = want {
                    assert_eq!(&dst[..LINE_OUT], &w[..]);
                }
            }
        }
    }

    #[test]
    fn regular_lines_are_taken_and_rebuilt_exactly() {
        let line = [b'A'; LINE];
        for d in decoders() {
            for eol in [&b"\n"[..], b"\r\n"] {
                let text = [&b" \r\n"[..], &line, eol, &line, eol, b"AB"].concat();
                // Any split gives the same state.
                for cut in 0..text.len() {
                    let mut l = Lines::with_decoder(d);
                    l.start();
                    assert_eq!(l.take(&text[..cut]), Take::More);
                    assert_eq!(l.take(&text[cut..]), Take::More);
                    assert_eq!((l.lines, l.col, l.eol), (2, 2, eol.len()));
                    assert_eq!(l.pending(), text.len() as u64);
                    // Uncommitted whole lines are encoded back.
                    assert_eq!(raw_of(&mut l), text, "cut {cut}");
                    assert!(!l.active);
                }
            }
        }
    }

    #[test]
    fn irregular_layouts_stop_where_they_break() {
        for d in decoders() {
            let mut l = Lines::with_decoder(d);
            l.start();
            let text = [&[b'A'; LINE][..], b"B"].concat();
            assert_eq!(l.take(&text), Take::Stop(LINE));
            l.start();
            let text = [&[b'A'; LINE][..], b"\r\r"].concat();
            assert_eq!(l.take(&text), Take::Stop(LINE + 1));
            assert_eq!(raw_of(&mut l), &text[..LINE + 1]);
            // The line end is the value's: CRLF after LF is not regular.
            l.start();
            let text = [&[b'A'; LINE][..], b"\n", &[b'A'; LINE], b"\r\n"].concat();
            assert_eq!(l.take(&text), Take::Stop(2 * LINE + 1));
            l.start();
            assert_eq!(l.take(&[b' '; MAX_LEAD + 1]), Take::Stop(MAX_LEAD));
            // A line that does not decode stops at its line end, whole or
            // cut, and is replayed as it came.
            for bad in [b'=', b'<', b'\n', b' ', 0x80] {
                for eol in [&b"\n"[..], b"\r\n"] {
                    let mut text = [&[b'Q'; LINE][..], eol].concat();
                    text.extend_from_slice(&[b'A'; LINE]);
                    text[2 * LINE - 1 + eol.len()] = bad;
                    text.extend_from_slice(eol);
                    let stop = 2 * LINE + 2 * eol.len() - 1;
                    for cut in [0, 10, LINE + eol.len(), LINE + eol.len() + 5, stop] {
                        let mut l = Lines::with_decoder(d);
                        l.start();
                        assert_eq!(l.take(&text[..cut]), Take::More);
                        assert_eq!(l.take(&text[cut..]), Take::Stop(stop - cut), "{bad}");
                        assert_eq!(l.pending(), stop as u64);
                        let c = l.commit().unwrap();
                        assert_eq!(
                            (c.out.len(), c.bytes),
                            (LINE_OUT, (LINE + eol.len()) as u64)
                        );
                        assert_eq!(raw_of(&mut l), &text[LINE + eol.len()..stop]);
                    }
                }
            }
        }
    }

    #[test]
    fn commits_hand_out_whole_lines_only() {
        for d in decoders() {
            let mut l = Lines::with_decoder(d);
            l.start();
            assert_eq!(l.take(b"\r\nAAAA"), Take::More);
            assert!(l.commit().is_none(), "no whole line");
            let text = [&[b'Q'; LINE - 4][..], b"\r\nAB<"].concat();
            assert_eq!(l.take(&text), Take::More);
            assert!(l.partial_has_markup());
            let c = l.commit().unwrap();
            assert_eq!((c.out.len(), c.bytes, c.text_bytes), (57, 80, 78));
            let want = reference(
                &[&b"AAAA"[..], &[b'Q'; LINE - 4]]
                    .concat()
                    .try_into()
                    .unwrap(),
            );
            assert_eq!(c.out, &want.unwrap()[..]);
            assert_eq!(l.pending(), 3);
            assert_eq!(raw_of(&mut l), b"AB<");
        }
    }

    #[test]
    fn a_full_block_stops_at_a_line_start() {
        for d in decoders() {
            let mut l = Lines::with_decoder(d);
            l.start();
            let mut text = b"\n".to_vec();
            for _ in 0..MAX_LINES + 1 {
                text.extend_from_slice(&[b'Q'; LINE]);
                text.push(b'\n');
            }
            let Take::Full(i) = l.take(&text) else {
                panic!("full")
            };
            assert_eq!(i, 1 + MAX_LINES * (LINE + 1));
            let c = l.commit().unwrap();
            assert_eq!((c.out.len(), c.bytes), (MAX_LINES * 57, i as u64));
            assert!(c.out.chunks(3).all(|q| q == [0x41, 0x04, 0x10]));
            assert_eq!(l.take(&text[i..]), Take::More);
            assert_eq!(l.lines, 1);
            assert_eq!(raw_of(&mut l), &text[i..]);
        }
    }
}
