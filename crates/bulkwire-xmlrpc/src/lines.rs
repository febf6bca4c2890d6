//! The fast path for `base64` text laid out as nearly every client sends
//! it: lines of exactly 76 characters (RFC 2045 §6.8), each followed by one
//! LF (Python's `encodebytes`, PHP's `chunk_split`, Java's MIME encoder),
//! or not wrapped at all.
//!
//! Such text is compacted without looking at each character: 76 bytes are
//! copied blind, the byte after them must be LF, and the SIMD decode of a
//! 64 KiB block validates everything at once. A 76-character line is 19
//! whole quanta, so blocks never split a quantum. Anything else — a
//! shorter line, CR, a reference or comment between text runs, padding,
//! an invalid character — hands the value over to the general decoder of
//! `bulkwire-xml` from the start of the current block, by rebuilding that
//! block's exact text (lines plus the LFs before each), so results and
//! error offsets are exactly those of the general decoder.

/// Characters per wrapped line.
const LINE: usize = 76;
/// Characters staged per block: a whole number of lines (64 KiB − 24).
const STAGE: usize = LINE * 862;

/// Most LFs before one line (more go the general way, so that rebuilding
/// a block stays bounded).
const MAX_NL: usize = 4;

/// What a push found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Push {
    /// All taken.
    Taken,
    /// The stage is full at a line end: decode it, then push `t[i..]`.
    Full(usize),
    /// The layout is not the regular one at `t[i..]`: fall back.
    Irregular(usize),
}

/// Staged lines of the current block.
#[derive(Debug)]
pub(crate) struct Lines {
    stage: Box<[u8]>,
    staged: usize,
    /// LFs before each line of the block.
    nl: Vec<u32>,
    /// LFs seen after the last line, before the next one starts.
    pending_nl: u32,
    /// Characters of the current line.
    col: usize,
    /// Body offset of the block's first byte.
    block_at: u64,
    /// Body offset the next text token must start at.
    next_at: Option<u64>,
    out: Vec<u8>,
    /// No text taken since the value started or the block was decoded
    /// by the general decoder.
    pub(crate) active: bool,
}

impl Lines {
    pub(crate) fn new() -> Lines {
        Lines {
            stage: vec![0; STAGE].into_boxed_slice(),
            staged: 0,
            nl: Vec::with_capacity(STAGE / LINE),
            pending_nl: 0,
            col: 0,
            block_at: 0,
            next_at: None,
            out: vec![0; STAGE / 4 * 3],
            active: false,
        }
    }

    /// A new value starts.
    pub(crate) fn start(&mut self) {
        self.clear_block(0);
        self.col = 0;
        self.next_at = None;
        self.active = true;
    }

    fn clear_block(&mut self, at: u64) {
        self.staged = 0;
        self.nl.clear();
        self.pending_nl = 0;
        self.block_at = at;
    }

    /// Takes the text token `t` found at body offset `at`.
    pub(crate) fn push(&mut self, t: &[u8], at: u64) -> Push {
        match self.next_at {
            None => self.block_at = at,
            Some(n) if n != at => return Push::Irregular(0),
            Some(_) => {}
        }
        let r = self.take(t);
        let used = match r {
            Push::Taken => t.len(),
            Push::Full(i) | Push::Irregular(i) => i,
        };
        self.next_at = Some(at + used as u64);
        r
    }

    fn take(&mut self, t: &[u8]) -> Push {
        let mut i = 0;
        while i < t.len() {
            if self.col == LINE {
                if t[i] != b'\n' {
                    return Push::Irregular(i);
                }
                self.col = 0;
            }
            if self.col == 0 {
                if self.staged + LINE > STAGE {
                    return Push::Full(i);
                }
                i = self.whole_lines(t, i);
                if self.staged + LINE > STAGE {
                    continue;
                }
                if i == t.len() {
                    break;
                }
                let n = t[i..].iter().take_while(|&&b| b == b'\n').count();
                // Blank lines are rebuilt on fallback: keep them few.
                if self.pending_nl as usize + n > MAX_NL {
                    return Push::Irregular(i);
                }
                self.pending_nl += n as u32;
                i += n;
                if i == t.len() {
                    break;
                }
                self.nl.push(std::mem::take(&mut self.pending_nl));
            }
            let take = (LINE - self.col).min(t.len() - i);
            self.stage[self.staged..self.staged + take].copy_from_slice(&t[i..i + take]);
            self.staged += take;
            self.col += take;
            i += take;
        }
        Push::Taken
    }

    /// The hot loop: while `t[i..]` holds a whole line and its LF and the
    /// stage has room, copies the line (a fixed-size copy) and counts the
    /// LF for the next line. Returns where it stopped, at a line start.
    fn whole_lines(&mut self, t: &[u8], mut i: usize) -> usize {
        let room = (STAGE - self.staged) / LINE;
        let lines = t.len().saturating_sub(i) / (LINE + 1);
        for _ in 0..room.min(lines) {
            let line: &[u8; LINE] = t[i..i + LINE].try_into().expect("LINE bytes");
            if t[i + LINE] != b'\n' || line[0] == b'\n' {
                break;
            }
            self.nl.push(std::mem::replace(&mut self.pending_nl, 1));
            let dst: &mut [u8; LINE] = (&mut self.stage[self.staged..self.staged + LINE])
                .try_into()
                .expect("LINE bytes");
            *dst = *line;
            self.staged += LINE;
            i += LINE + 1;
        }
        i
    }

    /// Decodes the staged block if it holds only whole lines without
    /// padding (padding goes through the general decoder, which checks
    /// that nothing follows it); `None` means fall back. `next_block_at`
    /// is where the next block starts.
    pub(crate) fn decode(&mut self, next_block_at: u64) -> Option<&[u8]> {
        let stage = &self.stage[..self.staged];
        if self.col != 0 && self.col != LINE || stage.last() == Some(&b'=') {
            return None;
        }
        let n = stage.len() / 4 * 3;
        let out = base64_simd::AsOut::as_out(&mut self.out[..n]);
        base64_simd::STANDARD.decode(stage, out).ok()?;
        // LFs already counted belong to the next block.
        let carry = self.pending_nl;
        self.clear_block(next_block_at.saturating_sub(u64::from(carry)));
        self.pending_nl = carry;
        self.col = 0;
        Some(&self.out[..n])
    }

    /// The exact text of the staged block, for the general decoder, and
    /// its body offset; the fast path is then off for this value.
    pub(crate) fn take_raw(&mut self, raw: &mut Vec<u8>) -> u64 {
        raw.clear();
        for (k, &nl) in self.nl.iter().enumerate() {
            raw.extend(std::iter::repeat(b'\n').take(nl as usize));
            let end = (k * LINE + LINE).min(self.staged);
            raw.extend_from_slice(&self.stage[k * LINE..end]);
        }
        raw.extend(std::iter::repeat(b'\n').take(self.pending_nl as usize));
        let at = self.block_at;
        self.clear_block(0);
        self.active = false;
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_lines_are_taken_and_rebuilt_exactly() {
        let mut l = Lines::new();
        l.start();
        let line = [b'A'; LINE];
        let text = [&b"\n"[..], &line, b"\n", &line, b"\n\nAB"].concat();
        // Any split gives the same stage.
        for cut in 0..text.len() {
            l.start();
            assert_eq!(l.push(&text[..cut], 100), Push::Taken);
            assert_eq!(l.push(&text[cut..], 100 + cut as u64), Push::Taken);
            assert_eq!(l.staged, 2 * LINE + 2);
            let mut raw = Vec::new();
            assert_eq!(l.take_raw(&mut raw), 100);
            assert_eq!(raw, text, "cut {cut}");
        }
    }

    #[test]
    fn irregular_layouts_are_refused() {
        let mut l = Lines::new();
        l.start();
        let text = [&[b'A'; LINE][..], b"B"].concat();
        assert_eq!(l.push(&text, 0), Push::Irregular(LINE));
        l.start();
        assert_eq!(l.push(b"AAAA", 0), Push::Taken);
        assert_eq!(l.push(b"AAAA", 5), Push::Irregular(0), "not contiguous");
        l.start();
        assert_eq!(l.push(b"AAAA\nAAAA", 0), Push::Taken);
        assert!(l.decode(9).is_none(), "a partial line goes the general way");
        l.start();
        assert_eq!(l.push(&[b'A'; LINE], 0), Push::Taken);
        assert_eq!(l.decode(LINE as u64).map(<[u8]>::len), Some(57));
        l.start();
        let mut padded = vec![b'A'; LINE];
        padded[LINE - 1] = b'=';
        assert_eq!(l.push(&padded, 0), Push::Taken);
        assert!(l.decode(LINE as u64).is_none());
    }

    #[test]
    fn a_full_stage_stops_at_a_line_end() {
        let mut l = Lines::new();
        l.start();
        let mut text = Vec::new();
        for _ in 0..STAGE / LINE + 1 {
            text.extend_from_slice(&[b'Q'; LINE]);
            text.push(b'\n');
        }
        let Push::Full(i) = l.push(&text, 0) else {
            panic!("full")
        };
        // Stopped after the last line's LF, which the next block keeps.
        assert_eq!(i, STAGE / LINE * (LINE + 1));
        assert_eq!(l.decode(i as u64).map(<[u8]>::len), Some(STAGE / 4 * 3));
        assert_eq!(l.push(&text[i..], i as u64), Push::Taken);
        assert_eq!(l.staged, LINE);
        let mut raw = Vec::new();
        assert_eq!(l.take_raw(&mut raw), i as u64 - 1);
        assert_eq!(raw, &text[i - 1..]);
    }
}
