//! Async adapter: a multipart body from a `Stream` of `Bytes` chunks (as
//! hyper and axum deliver it) to a `Stream` of owned events.
//!
//! Data events are `Bytes::slice`s of the input chunks, so part data is never
//! copied. The source is polled only when the parser has consumed the
//! current chunk and the consumer asks for the next event: backpressure
//! reaches the socket, and at most one chunk is held.

use crate::error::Error;
use crate::info::PartInfo;
use crate::parser::{Event, Parser};
use bytes::Bytes;
use futures_core::Stream;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// An owned parser event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    PartStart(PartInfo),
    Data(Bytes),
    PartEnd,
    End,
}

/// Either the body was bad or the source failed.
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

/// Parses a stream of chunks into a stream of [`StreamEvent`]s.
pub struct MultipartStream<S> {
    inner: S,
    parser: Parser,
    chunk: Bytes,
    eof: bool,
    finished: bool,
}

impl<S> MultipartStream<S> {
    pub fn new(inner: S, parser: Parser) -> Self {
        MultipartStream {
            inner,
            parser,
            chunk: Bytes::new(),
            eof: false,
            finished: false,
        }
    }

    /// The parser, e.g. for its buffer statistics.
    pub fn parser(&self) -> &Parser {
        &self.parser
    }

    /// Runs the parser on the current chunk; `None` when it needs more.
    fn step(&mut self) -> Result<Option<StreamEvent>, Error> {
        let step = self.parser.step(&self.chunk, self.eof)?;
        let consumed = step.consumed;
        let ev = match step.event {
            Event::NeedMore => None,
            Event::PartStart(p) => Some(StreamEvent::PartStart(PartInfo::from(&p))),
            // Data from the chunk is sliced out of it; held-back bytes
            // (at most one delimiter long) are copied.
            Event::Data(d) if consumed == d.len() => {
                Some(StreamEvent::Data(self.chunk.slice(..consumed)))
            }
            Event::Data(d) => Some(StreamEvent::Data(Bytes::copy_from_slice(d))),
            Event::PartEnd => Some(StreamEvent::PartEnd),
            Event::End => Some(StreamEvent::End),
        };
        let _ = self.chunk.split_to(consumed);
        Ok(ev)
    }
}

impl<S, E> Stream for MultipartStream<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<StreamEvent, StreamError<E>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.finished {
                return Poll::Ready(None);
            }
            match this.step() {
                Err(e) => {
                    this.finished = true;
                    return Poll::Ready(Some(Err(StreamError::Parse(e))));
                }
                Ok(Some(ev)) => return Poll::Ready(Some(Ok(ev))),
                Ok(None) if this.eof => {
                    this.finished = true;
                    return Poll::Ready(None);
                }
                Ok(None) => {}
            }
            match ready!(Pin::new(&mut this.inner).poll_next(cx)) {
                Some(Ok(chunk)) => this.chunk = chunk,
                Some(Err(e)) => {
                    this.finished = true;
                    return Poll::Ready(Some(Err(StreamError::Source(e))));
                }
                None => this.eof = true,
            }
        }
    }
}
