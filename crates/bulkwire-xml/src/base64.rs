//! Streaming base64 (RFC 4648 §4, the standard alphabet with `=` padding)
//! over the SIMD codec of `base64-simd`, for values that arrive or leave in
//! pieces: the text of an XML-RPC `<base64>` or an `xs:base64Binary`
//! element, split wherever the transport split it, usually with line breaks
//! every 76 columns (RFC 2045 §6.8, as Python's `base64.encodebytes` and
//! PHP's `chunk_split` write it).
//!
//! - [`Decoder`] strips ASCII white space (SP, HT, CR, LF), stages the rest
//!   in a fixed 64 KiB buffer, decodes it in one SIMD call into a fixed
//!   output buffer and hands that to a sink; runs without white space are
//!   decoded straight from the input. Nothing is allocated per push and at
//!   most 3 characters are carried from one push to the next.
//! - [`Encoder`] encodes in 48 KiB blocks, optionally wrapping at 76 columns
//!   with `\n` or `\r\n`; [`encoded_len`] gives the exact output length in
//!   advance (for a `Content-Length`).
//!
//! Decoding is strict, like `base64_simd::STANDARD`: padding is required and
//! must end the text, and the unused bits of the last character must be
//! zero. Errors carry the absolute offset, in the pushed text, of the
//! offending character (white space included in the count).

mod decode;
mod encode;
#[cfg(test)]
mod tests;

pub use decode::Decoder;
pub use encode::Encoder;

/// Characters per line when wrapping (RFC 2045 §6.8).
pub const LINE_LEN: u64 = 76;

/// The line end written after each full line when wrapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnd {
    Lf,
    CrLf,
}

impl LineEnd {
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            LineEnd::Lf => b"\n",
            LineEnd::CrLf => b"\r\n",
        }
    }
}

/// Exact length of the text [`Encoder`] writes for `n` bytes: padded
/// quanta, plus a line end between lines (none after the last) when
/// wrapping.
pub fn encoded_len(n: u64, wrap: Option<LineEnd>) -> u64 {
    let chars = n.div_ceil(3) * 4;
    match wrap {
        Some(le) if chars > 0 => chars + (chars - 1) / LINE_LEN * le.as_bytes().len() as u64,
        _ => chars,
    }
}

/// ASCII white space skipped inside base64 text (XML's `S`).
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}
