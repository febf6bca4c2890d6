//! Shared driver for the bulkwire fuzz targets.
//!
//! [`drive`] feeds a body to a [`Parser`] cut at given offsets, like
//! `bulkwire_multipart::testutil::run_split`, and records the same
//! [`Outcome`] (consecutive data merged, so any two chunkings compare with
//! `==`). Unlike `run_split` it keeps the parser in hand, so after every
//! step it checks the memory contract of `parser.rs`: the parser holds at
//! most a delimiter carry, a window of two carries, and one header block.
//! It also checks that errors are sticky and that the events form
//! `(PartStart Data* PartEnd)* End`.

use bulkwire_multipart::testutil::{ErrorSummary, Outcome, Owned};
use bulkwire_multipart::{Error, Event, Parser, PartInfo};

/// RFC 2046 §5.1.1 `bchars`: what a boundary may be made of.
pub const BCHARS: &[u8] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? ";

/// Maps arbitrary bytes to a valid boundary of the same length (1..=70, the
/// caller ensures the length): a `bchar` stays, any other byte picks one,
/// and a final space, which §5.1.1 forbids, becomes `_`.
pub fn boundary_from(bytes: &[u8]) -> Vec<u8> {
    let mut b: Vec<u8> = bytes
        .iter()
        .map(|&c| {
            if BCHARS.contains(&c) {
                c
            } else {
                BCHARS[c as usize % BCHARS.len()]
            }
        })
        .collect();
    if let Some(last) = b.last_mut() {
        if *last == b' ' {
            *last = b'_';
        }
    }
    b
}

/// The most bytes a parser for `boundary_len` and `header_bytes` may hold:
/// carry (`max_holdback`, at most `CRLF--` + boundary + 1 in lenient mode),
/// window (two carries + 1) and the header buffer (`header_bytes + 4`).
pub fn buffer_bound(boundary_len: usize, header_bytes: usize) -> usize {
    (4 + boundary_len + 1) * 3 + 1 + header_bytes + 4
}

fn summary(e: &Error) -> ErrorSummary {
    (e.kind(), e.offset(), e.part(), e.limit_exceeded())
}

fn push(events: &mut Vec<Owned>, ev: Event<'_>) {
    match ev {
        Event::PartStart(p) => events.push(Owned::Start(PartInfo::from(&p))),
        Event::Data(d) => {
            assert!(!d.is_empty(), "empty data event");
            match events.last_mut() {
                Some(Owned::Data(prev)) => prev.extend_from_slice(d),
                _ => events.push(Owned::Data(d.to_vec())),
            }
        }
        Event::PartEnd => events.push(Owned::PartEnd),
        Event::End => events.push(Owned::End),
        Event::NeedMore => {}
    }
}

fn check_buffers(parser: &Parser, bound: usize) {
    assert!(
        parser.buffered_bytes() <= bound,
        "buffered_bytes {} > bound {bound}",
        parser.buffered_bytes()
    );
    assert!(
        parser.buffer_capacity() <= bound,
        "buffer_capacity {} > bound {bound}",
        parser.buffer_capacity()
    );
}

/// Feeds `body` cut at `splits` (sorted; out-of-range and repeated offsets
/// allowed, the latter give empty chunks) to `parser`, whose boundary is
/// `boundary_len` bytes long, checking the memory bound after every step.
pub fn drive(mut parser: Parser, boundary_len: usize, body: &[u8], splits: &[usize]) -> Outcome {
    let bound = buffer_bound(boundary_len, parser.limits().header_bytes);
    check_buffers(&parser, bound);
    let mut bounds: Vec<usize> = splits.iter().copied().filter(|&s| s < body.len()).collect();
    bounds.push(body.len());
    // Every event but NeedMore hands out or consumes at least one body byte.
    let max_steps = 2 * body.len() + 2 * bounds.len() + 16;
    let mut steps = 0;
    let mut events = Vec::new();
    let mut error = None;
    let mut start = 0;
    'chunks: for (i, &end) in bounds.iter().enumerate() {
        let is_last = i + 1 == bounds.len();
        let mut chunk = &body[start..end.max(start)];
        loop {
            steps += 1;
            assert!(steps <= max_steps, "no progress after {steps} steps");
            let (consumed, need_more) = match parser.step(chunk, is_last) {
                Err(e) => {
                    error = Some(summary(&e));
                    break 'chunks;
                }
                Ok(step) => {
                    let need_more = matches!(step.event, Event::NeedMore);
                    let consumed = step.consumed;
                    push(&mut events, step.event);
                    (consumed, need_more)
                }
            };
            check_buffers(&parser, bound);
            assert!(consumed <= chunk.len(), "consumed past the input");
            chunk = &chunk[consumed..];
            if need_more {
                assert!(chunk.is_empty(), "NeedMore with input left");
                break;
            }
        }
        start = end.max(start);
    }
    if let Some(first) = &error {
        let again = parser.step(b"", true).expect_err("errors are sticky");
        assert_eq!(&summary(&again), first, "a later call gave another error");
    }
    let peak = parser.peak_buffered_bytes();
    assert!(peak <= bound, "peak_buffered_bytes {peak} > bound {bound}");
    check_buffers(&parser, bound);
    check_grammar(&events, error.is_none());
    Outcome {
        events,
        error,
        peak_buffered: peak,
    }
}

/// Events follow `(Start Data? PartEnd)* End` (data merged); a run without
/// error ends with `End`, since its last chunk was marked `is_last`.
fn check_grammar(events: &[Owned], complete: bool) {
    #[derive(PartialEq, Debug)]
    enum At {
        Between,
        InPart,
        Done,
    }
    let mut at = At::Between;
    for (i, e) in events.iter().enumerate() {
        at = match (at, e) {
            (At::Between, Owned::Start(_)) => At::InPart,
            (At::InPart, Owned::Data(_)) => At::InPart,
            (At::InPart, Owned::PartEnd) => At::Between,
            (At::Between, Owned::End) => At::Done,
            (at, e) => panic!("event {i} {e:?} in state {at:?}"),
        };
    }
    if complete {
        assert_eq!(at, At::Done, "no error but no End event");
    }
}

/// A small deterministic hash (FNV-1a) to derive split points from the input.
pub fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
