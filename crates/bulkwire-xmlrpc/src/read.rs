//! Blocking adapter: parses a message from any [`std::io::Read`] through
//! one fixed buffer, so memory stays that of the buffer plus the parser's
//! whatever the body (the `base64` values go to the sink as they decode).

use crate::error::StreamError;
use crate::parser::Parser;
use crate::sink::Base64Sink;
use crate::value::Message;
use std::io::{self, Read};

/// Input buffer size of [`parse_read`].
pub const DEFAULT_BUFFER: usize = 64 * 1024;

/// Reads `reader` to its end through `parser`; returns the message and the
/// sink. On a read error the open `base64` value, if any, is aborted.
pub fn parse_read<R: Read, S: Base64Sink>(
    reader: R,
    parser: Parser<S>,
) -> Result<(Message<S::Output>, S), StreamError<io::Error>> {
    parse_read_with(reader, parser, DEFAULT_BUFFER)
}

/// [`parse_read`] with a buffer of `size` bytes.
pub fn parse_read_with<R: Read, S: Base64Sink>(
    mut reader: R,
    mut parser: Parser<S>,
    size: usize,
) -> Result<(Message<S::Output>, S), StreamError<io::Error>> {
    let mut buf = vec![0u8; size.max(1)];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                parser.abort();
                return Err(StreamError::Source(e));
            }
        };
        parser.feed(&buf[..n], n == 0).map_err(StreamError::Parse)?;
        if n == 0 {
            return parser.finish().map_err(StreamError::Parse);
        }
    }
}
