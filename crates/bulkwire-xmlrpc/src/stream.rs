//! Async adapter: parses a message from a `Stream` of `Bytes` chunks (as
//! hyper and axum deliver a body), one chunk at a time: the source is
//! polled only once the parser has taken the previous chunk, so
//! backpressure reaches the socket and at most one chunk is held.
//!
//! The sink is called synchronously from the parser; a sink writing to
//! async storage hands blocks to a bounded channel or writes to a file.

use crate::error::StreamError;
use crate::parser::Parser;
use crate::sink::Base64Sink;
use crate::value::Message;
use bytes::Bytes;
use futures_core::Stream;
use std::pin::Pin;

/// Drives `parser` over `stream` to its end; returns the message and the
/// sink. On a source error the open `base64` value, if any, is aborted.
pub async fn parse_stream<St, E, S>(
    mut stream: St,
    mut parser: Parser<S>,
) -> Result<(Message<S::Output>, S), StreamError<E>>
where
    St: Stream<Item = Result<Bytes, E>> + Unpin,
    S: Base64Sink,
{
    loop {
        let next = std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await;
        match next {
            Some(Ok(chunk)) => parser.feed(&chunk, false).map_err(StreamError::Parse)?,
            Some(Err(e)) => {
                parser.abort();
                return Err(StreamError::Source(e));
            }
            None => {
                parser.feed(&[], true).map_err(StreamError::Parse)?;
                return parser.finish().map_err(StreamError::Parse);
            }
        }
    }
}
