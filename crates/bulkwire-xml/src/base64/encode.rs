//! The streaming encoder. See the module docs of [`crate::base64`].

use super::{encoded_len, LineEnd, LINE_LEN};
use base64_simd::AsOut;

/// Input bytes encoded per SIMD call (a multiple of 3).
const BLOCK: usize = 48 * 1024;
/// Characters of one block plus a carried quantum.
const RAW: usize = BLOCK / 3 * 4 + 4;
const LINE: usize = LINE_LEN as usize;

/// A streaming base64 encoder for one value. Allocates its fixed buffers
/// once; output goes to a sink in blocks of up to 64 KiB of text.
pub struct Encoder {
    wrap: Option<LineEnd>,
    carry: [u8; 3],
    carry_len: usize,
    /// Characters on the current line.
    col: usize,
    raw: Box<[u8]>,
    wrapped: Box<[u8]>,
    consumed: u64,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("wrap", &self.wrap)
            .field("consumed", &self.consumed)
            .finish()
    }
}

impl Encoder {
    /// An encoder that wraps lines at 76 columns with `wrap`, or not at all.
    pub fn new(wrap: Option<LineEnd>) -> Encoder {
        let wrapped = match wrap {
            Some(_) => RAW + (RAW / LINE + 1) * 2,
            None => 0,
        };
        Encoder {
            wrap,
            carry: [0; 3],
            carry_len: 0,
            col: 0,
            raw: vec![0; RAW].into_boxed_slice(),
            wrapped: vec![0; wrapped].into_boxed_slice(),
            consumed: 0,
        }
    }

    /// Exact output length for `n` input bytes; see [`encoded_len`].
    pub fn encoded_len(n: u64, wrap: Option<LineEnd>) -> u64 {
        encoded_len(n, wrap)
    }

    /// Bytes pushed so far.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Encodes the next piece of data; up to 2 bytes wait for the next push
    /// or [`Encoder::finish`].
    pub fn push<E>(
        &mut self,
        mut data: &[u8],
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.consumed += data.len() as u64;
        let mut n = 0;
        if self.carry_len > 0 {
            let take = (3 - self.carry_len).min(data.len());
            self.carry[self.carry_len..self.carry_len + take].copy_from_slice(&data[..take]);
            self.carry_len += take;
            data = &data[take..];
            if self.carry_len < 3 {
                return Ok(());
            }
            let q = self.carry;
            let _ = base64_simd::STANDARD.encode(&q, self.raw[..4].as_out());
            self.carry_len = 0;
            n = 4;
        }
        while data.len() >= 3 {
            let take = (data.len() / 3 * 3).min(BLOCK);
            let m = take / 3 * 4;
            let _ = base64_simd::STANDARD.encode(&data[..take], self.raw[n..n + m].as_out());
            data = &data[take..];
            self.write(n + m, sink)?;
            n = 0;
        }
        if n > 0 {
            self.write(n, sink)?;
        }
        self.carry[..data.len()].copy_from_slice(data);
        self.carry_len = data.len();
        Ok(())
    }

    /// Writes the last, padded quantum. No line end follows the last line.
    pub fn finish<E>(&mut self, sink: &mut impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        if self.carry_len > 0 {
            let src = &self.carry[..self.carry_len];
            let _ = base64_simd::STANDARD.encode(src, self.raw[..4].as_out());
            self.carry_len = 0;
            self.write(4, sink)?;
        }
        Ok(())
    }

    /// Hands `raw[..n]` to the sink, wrapped if configured.
    fn write<E>(
        &mut self,
        n: usize,
        sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(le) = self.wrap else {
            return sink(&self.raw[..n]);
        };
        let le = le.as_bytes();
        let (mut i, mut o) = (0, 0);
        while i < n {
            if self.col == LINE {
                self.wrapped[o..o + le.len()].copy_from_slice(le);
                o += le.len();
                self.col = 0;
            }
            let take = (LINE - self.col).min(n - i);
            self.wrapped[o..o + take].copy_from_slice(&self.raw[i..i + take]);
            o += take;
            i += take;
            self.col += take;
        }
        sink(&self.wrapped[..o])
    }
}
