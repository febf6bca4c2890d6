//! The streaming decoder. See the module docs of [`crate::base64`].
//!
//! Each push is cut at its first `=` (if any): before it, white space is
//! stripped and the base64 runs are decoded in large blocks, with no
//! per-character check (the SIMD decode validates); from it on, only
//! padding and white space may follow, checked byte by byte. When a block
//! fails, the first invalid character is found by scanning the push's text
//! from the last point known good, so the offset is exact and the same
//! whatever the chunking.

use super::is_ws;
use crate::error::{Error, ErrorKind};
use base64_simd::AsOut;

/// Stripped characters staged for one SIMD decode.
const STAGE: usize = 64 * 1024;
/// Bytes one full stage decodes to.
const OUT: usize = STAGE / 4 * 3;
/// Runs without white space at least this long skip the stage.
const DIRECT_MIN: usize = 256;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

const fn valid_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 64 {
        t[ALPHABET[i] as usize] = true;
        i += 1;
    }
    t
}

static VALID: [bool; 256] = valid_table();

/// Where the decoder is with respect to padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pad {
    /// No `=` seen yet.
    Data,
    /// One `=` seen after two characters; one more is due.
    Need,
    /// The final quantum is complete; only white space may follow.
    Done,
}

/// A streaming base64 decoder for one value. Allocates its two fixed
/// buffers (112 KiB) once, in [`Decoder::new`]; [`Decoder::reset`] reuses
/// them for the next value.
pub struct Decoder {
    stage: Box<[u8]>,
    staged: usize,
    out: Box<[u8]>,
    out_len: usize,
    carry: [u8; 3],
    carry_len: usize,
    /// Absolute text offsets of the carried characters.
    carry_at: [u64; 3],
    /// Absolute text offset of the start of the current push.
    pos: u64,
    /// Index in the current push before which every character is known
    /// valid (decoded or carried).
    valid_to: usize,
    pad: Pad,
    decoded: u64,
    error: Option<Error>,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("offset", &self.pos)
            .field("decoded", &self.decoded)
            .field("carry_len", &self.carry_len)
            .field("pad", &self.pad)
            .finish()
    }
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder {
            stage: vec![0; STAGE].into_boxed_slice(),
            staged: 0,
            out: vec![0; OUT + 3].into_boxed_slice(),
            out_len: 0,
            carry: [0; 3],
            carry_len: 0,
            carry_at: [0; 3],
            pos: 0,
            valid_to: 0,
            pad: Pad::Data,
            decoded: 0,
            error: None,
        }
    }

    /// Starts a new value, keeping the buffers.
    pub fn reset(&mut self) {
        self.staged = 0;
        self.out_len = 0;
        self.carry_len = 0;
        self.pos = 0;
        self.pad = Pad::Data;
        self.decoded = 0;
        self.error = None;
    }

    /// Bytes handed to the sink so far.
    pub fn decoded_len(&self) -> u64 {
        self.decoded
    }

    /// Bytes of text pushed so far (the offset of the next one).
    pub fn text_len(&self) -> u64 {
        self.pos
    }

    /// Decodes the next piece of text, handing decoded bytes to `sink` (in
    /// blocks of up to 48 KiB, at least once per push that completes a
    /// quantum). Decoding errors are sticky. After an error from the sink
    /// the decoder is in an unspecified state and must not be used.
    pub fn push<E: From<Error>>(
        &mut self,
        text: &[u8],
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(e) = &self.error {
            return Err(e.clone().into());
        }
        let body_end = match self.pad {
            Pad::Data => memchr::memchr(b'=', text).unwrap_or(text.len()),
            _ => 0,
        };
        self.valid_to = 0;
        let r = self.body(&text[..body_end], sink).and_then(|()| {
            for (i, &b) in text.iter().enumerate().skip(body_end) {
                self.padding(b, i, sink)?;
            }
            Ok(())
        });
        self.pos += text.len() as u64;
        r
    }

    /// Ends the value: the last quantum must be complete.
    pub fn finish<E: From<Error>>(
        &mut self,
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(e) = &self.error {
            return Err(e.clone().into());
        }
        let msg = match self.pad {
            Pad::Data if self.carry_len == 0 => return self.emit(sink),
            Pad::Data => "base64 text ends inside a quantum (padding missing)",
            Pad::Need => "base64 text ends inside its padding",
            Pad::Done => return self.emit(sink),
        };
        Err(self.fail(Error::new(ErrorKind::Truncated, msg, self.pos)))
    }

    fn fail<E: From<Error>>(&mut self, e: Error) -> E {
        self.error = Some(e.clone());
        e.into()
    }

    fn emit<E>(&mut self, sink: &mut impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        if self.out_len > 0 {
            sink(&self.out[..self.out_len])?;
            self.decoded += self.out_len as u64;
            self.out_len = 0;
        }
        Ok(())
    }

    /// Text before any `=`: white space stripped, runs staged or decoded
    /// directly, then everything but a partial quantum decoded.
    fn body<E: From<Error>>(
        &mut self,
        text: &[u8],
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if text.is_empty() {
            return Ok(());
        }
        let old_carry = (self.carry_len, self.carry_at);
        self.stage[..self.carry_len].copy_from_slice(&self.carry[..self.carry_len]);
        self.staged = self.carry_len;
        self.carry_len = 0;
        let mut i = 0;
        while i < text.len() {
            if is_ws(text[i]) {
                i += 1;
                continue;
            }
            let j = i + run_len(&text[i..]);
            self.run(text, i, j, sink)?;
            i = j;
        }
        self.settle(text, old_carry, sink)
    }

    /// The run `text[i..j]`, which has no white space.
    fn run<E: From<Error>>(
        &mut self,
        text: &[u8],
        mut i: usize,
        j: usize,
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if j - i >= DIRECT_MIN && self.staged < 4 {
            i = self.direct(text, i, j, sink)?;
        }
        while i < j {
            let take = (j - i).min(STAGE - self.staged);
            self.stage[self.staged..self.staged + take].copy_from_slice(&text[i..i + take]);
            self.staged += take;
            i += take;
            if self.staged == STAGE {
                self.decode_stage(STAGE, text, sink)?;
                self.valid_to = i;
            }
        }
        Ok(())
    }

    /// Decodes the aligned middle of a long run straight from the input,
    /// after completing the carried quantum; returns where the rest starts.
    fn direct<E: From<Error>>(
        &mut self,
        text: &[u8],
        mut i: usize,
        j: usize,
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<usize, E> {
        if self.staged > 0 {
            let need = 4 - self.staged;
            self.stage[self.staged..4].copy_from_slice(&text[i..i + need]);
            self.staged = 4;
            i += need;
            self.decode_stage(4, text, sink)?;
            self.valid_to = i;
        }
        let end = i + (j - i) / 4 * 4;
        while i < end {
            let n = (end - i).min(STAGE);
            self.decode_block(&text[i..i + n], text, sink)?;
            i += n;
            self.valid_to = i;
        }
        Ok(i)
    }

    /// Decodes `stage[..n]` (`n` a multiple of 4) and keeps the rest.
    fn decode_stage<E: From<Error>>(
        &mut self,
        n: usize,
        text: &[u8],
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let stage = std::mem::take(&mut self.stage);
        let r = self.decode_block(&stage[..n], text, sink);
        self.stage = stage;
        self.stage.copy_within(n..self.staged, 0);
        self.staged -= n;
        r
    }

    /// Decodes `src` (a multiple of 4, no `=`) into the output buffer,
    /// emitting first if it lacks room. `text` is the current push, for
    /// locating an invalid character.
    fn decode_block<E: From<Error>>(
        &mut self,
        src: &[u8],
        text: &[u8],
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let m = src.len() / 4 * 3;
        if self.out_len + m > self.out.len() {
            self.emit(sink)?;
        }
        let dst = &mut self.out[self.out_len..self.out_len + m];
        match base64_simd::STANDARD.decode(src, dst.as_out()) {
            Ok(_) => {
                self.out_len += m;
                Ok(())
            }
            Err(_) => Err(self.fail(self.locate(text))),
        }
    }

    /// The error for the first character after `valid_to` that is neither
    /// white space nor in the alphabet.
    fn locate(&self, text: &[u8]) -> Error {
        let from = self.valid_to.min(text.len());
        let bad = text[from..]
            .iter()
            .position(|&b| !is_ws(b) && !VALID[b as usize]);
        let at = self.pos + (from + bad.unwrap_or(0)) as u64;
        Error::malformed("invalid base64 character", at)
    }

    /// End of the body: decodes all complete quanta, carries the rest (at
    /// most 3 characters) with their offsets, checked now so that a later
    /// push never has to look back.
    fn settle<E: From<Error>>(
        &mut self,
        text: &[u8],
        (old_len, old_at): (usize, [u64; 3]),
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let full = self.staged / 4 * 4;
        if full > 0 {
            self.decode_stage(full, text, sink)?;
        }
        let r = self.staged;
        self.carry[..r].copy_from_slice(&self.stage[..r]);
        self.carry_len = r;
        self.staged = 0;
        // Offsets of the last `r` characters: from the text, backwards, and
        // from the old carry for any the text did not supply.
        let mut k = r;
        for (idx, &b) in text.iter().enumerate().rev() {
            if k == 0 {
                break;
            }
            if !is_ws(b) {
                k -= 1;
                self.carry_at[k] = self.pos + idx as u64;
            }
        }
        for n in (0..k).rev() {
            self.carry_at[n] = old_at[old_len - (k - n)];
        }
        if let Some(n) = self.carry[..r].iter().position(|&b| !VALID[b as usize]) {
            let at = self.carry_at[n];
            return Err(self.fail(Error::malformed("invalid base64 character", at)));
        }
        self.emit(sink)
    }

    /// One byte at or after the first `=` (index `i` of the push).
    fn padding<E: From<Error>>(
        &mut self,
        b: u8,
        i: usize,
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if is_ws(b) {
            return Ok(());
        }
        let at = self.pos + i as u64;
        let msg = match (self.pad, b) {
            (Pad::Data, b'=') if self.carry_len == 2 => {
                self.pad = Pad::Need;
                return Ok(());
            }
            (Pad::Data, b'=') if self.carry_len == 3 => return self.last_quantum(sink),
            (Pad::Data, _) => "'=' where a quantum cannot end",
            (Pad::Need, b'=') => return self.last_quantum(sink),
            (Pad::Need, _) => "expected a second '='",
            (Pad::Done, b'=') => "too much padding",
            (Pad::Done, _) => "base64 text after the padding",
        };
        Err(self.fail(Error::malformed(msg, at)))
    }

    /// Decodes the carried 2 or 3 characters with their padding.
    fn last_quantum<E: From<Error>>(
        &mut self,
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let n = self.carry_len;
        let mut q = *b"====";
        q[..n].copy_from_slice(&self.carry[..n]);
        if self.out_len + 2 > self.out.len() {
            self.emit(sink)?;
        }
        let dst = &mut self.out[self.out_len..self.out_len + n - 1];
        if base64_simd::STANDARD.decode(&q, dst.as_out()).is_err() {
            let msg = "base64 character with non-zero unused bits before the padding";
            let at = self.carry_at[n - 1];
            return Err(self.fail(Error::malformed(msg, at)));
        }
        self.out_len += n - 1;
        self.carry_len = 0;
        self.pad = Pad::Done;
        self.emit(sink)
    }
}

/// Length of the run at the start of `b` up to the first white space byte.
/// Other control bytes stay in the run (the decode rejects them).
fn run_len(b: &[u8]) -> usize {
    let mut i = 0;
    loop {
        i += find_low(&b[i..]);
        if i == b.len() || is_ws(b[i]) {
            return i;
        }
        i += 1;
    }
}

/// Index of the first byte below 0x21 (space and the control bytes), eight
/// bytes at a time: in `(x - 0x21…) & !x & 0x80…` the lowest flagged byte is
/// exactly the first such byte (no borrow reaches it from below).
fn find_low(b: &[u8]) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut chunks = b.chunks_exact(8);
    let mut i = 0;
    for c in &mut chunks {
        let x = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        let m = x.wrapping_sub(LO * 0x21) & !x & HI;
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    let rest = chunks.remainder();
    i + rest.iter().position(|&c| c < 0x21).unwrap_or(rest.len())
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn find_low_is_exact() {
        let mut v = vec![b'A'; 40];
        assert_eq!(find_low(&v), 40);
        for i in 0..40 {
            for b in [0u8, b'\n', b' ', 0x1F] {
                v[i] = b;
                v[(i + 3) % 40] = 0x05;
                let want = v.iter().position(|&c| c < 0x21).unwrap();
                assert_eq!(find_low(&v), want);
                v.fill(b'A');
            }
        }
        v[3] = 0xC3;
        v[4] = b'\n';
        assert_eq!(find_low(&v), 4);
        assert_eq!(run_len(b"AB\x01C D"), 4);
    }
}
