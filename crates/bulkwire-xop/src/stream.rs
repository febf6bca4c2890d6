//! Async adapter: parses a message from a `Stream` of `Bytes` chunks (as
//! hyper and axum deliver a body). Each chunk is fed as it arrives and the
//! next is polled only after the sink has taken the current one, so the
//! adapter holds at most one chunk.

use crate::error::Error;
use crate::message::{Message, Sink};
use crate::parser::Parser;
use bytes::Bytes;
use futures_core::Stream;
use std::fmt;
use std::pin::Pin;

/// Either the message was bad or the source failed.
#[derive(Debug)]
pub enum StreamError<E> {
    Parse(Error),
    Source(E),
}

impl<E: fmt::Display> fmt::Display for StreamError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Parse(e) => e.fmt(f),
            StreamError::Source(e) => write!(f, "body stream failed: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for StreamError<E> {}

/// Drives `parser` over every chunk of `body`.
pub async fn parse_stream<B, E, S>(
    mut body: B,
    mut parser: Parser<S>,
) -> Result<Message<S::Output>, StreamError<E>>
where
    B: Stream<Item = Result<Bytes, E>> + Unpin,
    S: Sink,
{
    loop {
        let next = std::future::poll_fn(|cx| Pin::new(&mut body).poll_next(cx)).await;
        match next {
            Some(Ok(chunk)) => parser.feed(&chunk, false).map_err(StreamError::Parse)?,
            Some(Err(e)) => return Err(StreamError::Source(e)),
            None => {
                parser.feed(&[], true).map_err(StreamError::Parse)?;
                return parser.finish().map_err(StreamError::Parse);
            }
        }
    }
}
