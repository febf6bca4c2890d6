//! Drives a parser over chunked input and records owned events, for tests
//! here and in the testsuite crate (`feature = "testutil"` is not needed:
//! this module is public but hidden).

use crate::{Error, Event, LimitKind, Parser, PartInfo};

/// An owned event; consecutive data events are merged so that any chunking
/// of the same body yields the same list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owned {
    Start(PartInfo),
    Data(Vec<u8>),
    End,
    PartEnd,
}

/// An error summarised as (kind, offset, part, limit), comparable across runs.
pub type ErrorSummary = (
    crate::ErrorKind,
    u64,
    Option<usize>,
    Option<(LimitKind, u64)>,
);

/// What parsing a whole body gave: events, then either success or an error
/// summarised as (kind, offset, part, limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub events: Vec<Owned>,
    pub error: Option<ErrorSummary>,
    pub peak_buffered: usize,
}

impl Outcome {
    /// Parts as (info, data) pairs.
    pub fn parts(&self) -> Vec<(PartInfo, Vec<u8>)> {
        let mut out: Vec<(PartInfo, Vec<u8>)> = Vec::new();
        for e in &self.events {
            match e {
                Owned::Start(p) => out.push((p.clone(), Vec::new())),
                Owned::Data(d) => out
                    .last_mut()
                    .expect("data inside a part")
                    .1
                    .extend_from_slice(d),
                _ => {}
            }
        }
        out
    }
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

/// Feeds `body` cut at `splits` (sorted offsets) to `parser`.
pub fn run_split(mut parser: Parser, body: &[u8], splits: &[usize]) -> Outcome {
    let mut events = Vec::new();
    let mut bounds: Vec<usize> = splits.iter().copied().filter(|&s| s < body.len()).collect();
    bounds.push(body.len());
    let mut start = 0;
    let mut error = None;
    'chunks: for (i, &end) in bounds.iter().enumerate() {
        let is_last = i + 1 == bounds.len();
        let mut chunk = &body[start..end.max(start)];
        loop {
            match parser.step(chunk, is_last) {
                Err(e) => {
                    error = Some(summary(&e));
                    break 'chunks;
                }
                Ok(step) => {
                    chunk = &chunk[step.consumed..];
                    if matches!(step.event, Event::NeedMore) {
                        assert!(chunk.is_empty(), "NeedMore with input left");
                        break;
                    }
                    push(&mut events, step.event);
                }
            }
        }
        start = end.max(start);
    }
    Outcome {
        events,
        error,
        peak_buffered: parser.peak_buffered_bytes(),
    }
}

fn summary(e: &Error) -> ErrorSummary {
    (e.kind(), e.offset(), e.part(), e.limit_exceeded())
}

/// Whole body in one slice.
pub fn run_whole(parser: Parser, body: &[u8]) -> Outcome {
    run_split(parser, body, &[])
}

/// One byte at a time.
pub fn run_bytewise(parser: Parser, body: &[u8]) -> Outcome {
    let splits: Vec<usize> = (1..body.len()).collect();
    run_split(parser, body, &splits)
}

/// `n` random cut points from a small deterministic generator (xorshift),
/// so failures are reproducible from the seed.
pub fn random_splits(len: usize, n: usize, seed: u64) -> Vec<usize> {
    let mut x = seed | 1;
    let mut v: Vec<usize> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (len as u64 + 1)) as usize
        })
        .collect();
    v.sort_unstable();
    v
}
