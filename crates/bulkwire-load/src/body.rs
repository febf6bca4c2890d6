//! The request body type handed to hyper by the `bench` commands' uploads
//! (the load runner writes the segments itself, see `wire`): a list of
//! shared `Bytes`, one frame each, with an exact size hint (so
//! `Content-Length` is known before the first byte). hyper queues the frames
//! and writes them with vectored I/O (`writev`), so the file bytes go from
//! their one shared buffer straight to the socket.

use crate::scenario::Payload;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A body of in-memory segments.
#[derive(Debug)]
pub struct Segments {
    rest: std::vec::IntoIter<Bytes>,
    remaining: u64,
}

impl From<Payload> for Segments {
    fn from(p: Payload) -> Self {
        Segments {
            rest: p.segments.into_iter(),
            remaining: p.len,
        }
    }
}

impl http_body::Body for Segments {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        // Empty segments would be empty frames: skip them.
        for b in self.rest.by_ref() {
            if !b.is_empty() {
                self.remaining -= b.len() as u64;
                return Poll::Ready(Some(Ok(Frame::data(b))));
            }
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}
