//! The fast path for `base64` text laid out as nearly every client sends
//! it: lines of exactly 76 characters (RFC 2045 §6.8), each followed by one
//! LF (Python's `encodebytes`, Java's MIME encoder) or one CRLF (.NET,
//! PHP's `chunk_split`), after a little white space.
//!
//! Such text is read straight from the body, before the XML tokenizer sees
//! it, and compacted without looking at each character: 76 bytes are copied
//! blind, the line end after them is checked, and the SIMD decode of a
//! block validates everything at once — a `<`, `&` or white space
//! among the copied characters cannot pass it, so a block that decodes is
//! plain character data and the tokenizer can skip it whole. A 76-character
//! line is 19 whole quanta, so blocks never split a quantum. Blocks are
//! small (112 lines, 8.3 KiB): the staged text and its output stay in the
//! L1 cache and reading the body overlaps decoding; 64 KiB blocks measured
//! clearly slower (the copy then waits on memory while the decode idles
//! it), for 3 % fewer instructions.
//!
//! The stage holds the block's raw text exactly (its leading white space,
//! then lines with one known line end each, then the current partial line),
//! so anything else — a shorter line (the last one), a comment, a reference,
//! padding, an invalid character — is handled by rebuilding the raw bytes
//! not yet committed and replaying them through the tokenizer and the
//! general decoder of `bulkwire-xml`, which then takes the rest of the
//! value: results and error offsets are exactly those of the general path.

/// Characters per wrapped line.
const LINE: usize = 76;
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

/// The raw text of the current block, staged.
#[derive(Debug)]
pub(crate) struct Lines {
    stage: Box<[u8]>,
    out: Box<[u8]>,
    /// White space before the block's first line, verbatim.
    lead: [u8; MAX_LEAD],
    lead_len: usize,
    /// Complete lines, each with its line end.
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
        Lines {
            stage: vec![0; MAX_LINES * LINE].into_boxed_slice(),
            out: vec![0; MAX_LINES * LINE / 4 * 3].into_boxed_slice(),
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

    /// Stages as much of `t`, the body bytes that follow the pending ones,
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
                let at = self.lines * LINE + self.col;
                self.stage[at..at + take].copy_from_slice(&t[i..i + take]);
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

    /// One byte after a line's 76 characters: false if it cannot continue
    /// the value's line end.
    fn line_end(&mut self, b: u8) -> bool {
        match (self.eol, self.eol_got, b) {
            (0 | 1, 0, b'\n') | (2, 1, b'\n') => {
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

    /// The hot loop: while `t[i..]` holds a whole line and its `E`-byte
    /// line end and the block has room, copies the line (a fixed-size copy)
    /// and checks the line end. Returns where it stopped, at a line start.
    fn whole_lines<const E: usize>(&mut self, t: &[u8], i: usize) -> usize {
        const EOL: [u8; 2] = *b"\r\n";
        let eol = &EOL[2 - E..];
        let n = ((t.len() - i) / (LINE + E)).min(MAX_LINES - self.lines);
        let src = &t[i..i + n * (LINE + E)];
        let dst = &mut self.stage[self.lines * LINE..(self.lines + n) * LINE];
        let mut done = 0;
        for (s, d) in src.chunks_exact(LINE + E).zip(dst.chunks_exact_mut(LINE)) {
            if s[LINE..] != *eol {
                break;
            }
            d.copy_from_slice(&s[..LINE]);
            done += 1;
        }
        self.lines += done;
        i + done * (LINE + E)
    }

    /// True if the partial line holds a `<`: the value (or the document)
    /// goes on in markup that the tokenizer should see now, not at the
    /// next input.
    pub(crate) fn partial_has_markup(&self) -> bool {
        let at = self.lines * LINE;
        self.stage[at..at + self.col].contains(&b'<')
    }

    /// Decodes the block's whole lines unless the last one ends in padding
    /// (the general decoder checks what follows padding); `None` leaves
    /// the block as it is. After a commit the partial line is the block.
    pub(crate) fn commit(&mut self) -> Option<Committed<'_>> {
        let end = self.lines * LINE;
        if self.lines == 0 || self.stage[end - 1] == b'=' {
            return None;
        }
        let n = end / 4 * 3;
        let out = base64_simd::AsOut::as_out(&mut self.out[..n]);
        base64_simd::STANDARD.decode(&self.stage[..end], out).ok()?;
        let bytes = (self.lead_len + self.lines * (LINE + self.eol)) as u64;
        let crlfs = (self.eol / 2 * self.lines) as u64 + crlf_pairs(&self.lead[..self.lead_len]);
        let text_bytes = bytes - crlfs;
        self.stage.copy_within(end..end + self.col, 0);
        self.lead_len = 0;
        self.lines = 0;
        Some(Committed {
            out: &self.out[..n],
            bytes,
            text_bytes,
        })
    }

    /// The exact raw bytes not yet committed, for the tokenizer; the fast
    /// path is then off for this value.
    pub(crate) fn take_raw(&mut self, raw: &mut Vec<u8>) {
        let eol = &b"\r\n"[2 - self.eol.max(1)..];
        raw.clear();
        raw.extend_from_slice(&self.lead[..self.lead_len]);
        for line in self.stage[..self.lines * LINE].chunks_exact(LINE) {
            raw.extend_from_slice(line);
            raw.extend_from_slice(eol);
        }
        let at = self.lines * LINE;
        raw.extend_from_slice(&self.stage[at..at + self.col]);
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

    fn raw_of(l: &mut Lines) -> Vec<u8> {
        let mut raw = Vec::new();
        l.take_raw(&mut raw);
        raw
    }

    #[test]
    fn regular_lines_are_staged_and_rebuilt_exactly() {
        let line = [b'A'; LINE];
        for eol in [&b"\n"[..], b"\r\n"] {
            let text = [&b" \r\n"[..], &line, eol, &line, eol, b"AB"].concat();
            // Any split gives the same stage.
            for cut in 0..text.len() {
                let mut l = Lines::new();
                l.start();
                assert_eq!(l.take(&text[..cut]), Take::More);
                assert_eq!(l.take(&text[cut..]), Take::More);
                assert_eq!((l.lines, l.col, l.eol), (2, 2, eol.len()));
                assert_eq!(l.pending(), text.len() as u64);
                assert_eq!(raw_of(&mut l), text, "cut {cut}");
                assert!(!l.active);
            }
        }
    }

    #[test]
    fn irregular_layouts_stop_where_they_break() {
        let mut l = Lines::new();
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
    }

    #[test]
    fn commits_decode_whole_lines_only() {
        let mut l = Lines::new();
        l.start();
        assert_eq!(l.take(b"\r\nAAAA"), Take::More);
        assert!(l.commit().is_none(), "no whole line");
        let text = [&[b'Q'; LINE - 4][..], b"\r\nAB<"].concat();
        assert_eq!(l.take(&text), Take::More);
        assert!(l.partial_has_markup());
        let c = l.commit().unwrap();
        assert_eq!((c.out.len(), c.bytes, c.text_bytes), (57, 80, 78));
        assert_eq!(l.pending(), 3);
        assert_eq!(raw_of(&mut l), b"AB<");
        // Padding at the end, or an invalid character, is not committed.
        for bad in [b'=', b'<', b'\n'] {
            l.start();
            let mut text = vec![b'A'; LINE];
            text[LINE - 1] = bad;
            text.push(b'\n');
            assert_eq!(l.take(&text), Take::More);
            assert!(l.commit().is_none());
            assert_eq!(raw_of(&mut l), text);
        }
    }

    #[test]
    fn a_full_block_stops_at_a_line_start() {
        let mut l = Lines::new();
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
        assert_eq!(l.take(&text[i..]), Take::More);
        assert_eq!(l.lines, 1);
        assert_eq!(raw_of(&mut l), &text[i..]);
    }
}
