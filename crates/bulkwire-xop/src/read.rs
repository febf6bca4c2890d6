//! Blocking adapter: parses a message from any [`std::io::Read`] with one
//! fixed input buffer, handing binaries to the sink as they arrive.

use crate::message::{Message, Sink};
use crate::parser::Parser;
use std::io::{self, Read};

/// Input buffer size when none is given.
pub const DEFAULT_BUFFER: usize = 64 * 1024;

/// Reads `source` to its end through `parser`. A parse error comes back as
/// an `io::Error` of kind `InvalidData` wrapping the [`crate::Error`].
pub fn parse_reader<R: Read, S: Sink>(
    source: R,
    parser: Parser<S>,
) -> io::Result<Message<S::Output>> {
    parse_reader_with_buffer(source, parser, DEFAULT_BUFFER)
}

/// [`parse_reader`] with an input buffer of `size` bytes.
pub fn parse_reader_with_buffer<R: Read, S: Sink>(
    mut source: R,
    mut parser: Parser<S>,
    size: usize,
) -> io::Result<Message<S::Output>> {
    let mut buf = vec![0u8; size.max(1)];
    loop {
        let n = match source.read(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => r?,
        };
        parser.feed(&buf[..n], n == 0)?;
        if n == 0 {
            return Ok(parser.finish()?);
        }
    }
}
