//! Parser events as owned values, so that no borrow of the parser is held
//! while Python code runs.
//!
//! [`bulkwire_multipart::Parser::step`] hands out events that borrow either
//! the caller's input or the parser's own small buffers (the held-back tail
//! of a possible delimiter, RFC 2046 §5.1.1, and a header block that
//! straddled two writes). A binding must release the parser before it calls
//! a callback (a callback may call the parser again), so each event is turned
//! into a [`Loc`]: a range into the input when the bytes are there, which
//! is what python-multipart's `(data, start, end)` callbacks want (no copy),
//! or a small owned copy when they live in the parser.

use bulkwire_multipart::{Error, Event, Parser, PartInfo};
use std::ops::Range;

/// Where an event's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loc {
    /// `input[range]`, the very buffer the caller passed.
    Input(Range<usize>),
    /// Bytes from the parser's own buffers (at most a delimiter's length of
    /// data, or one header block).
    Owned(Vec<u8>),
}

impl Loc {
    /// `s` as a range of `input` when it lies inside it, else a copy. The
    /// distance is plain address arithmetic on two slices (no `unsafe`):
    /// a slice that is not inside `input` gives an out-of-range distance
    /// and is copied.
    pub fn of(input: &[u8], s: &[u8]) -> Loc {
        let start = (s.as_ptr() as usize).wrapping_sub(input.as_ptr() as usize);
        match start.checked_add(s.len()) {
            Some(end) if end <= input.len() => Loc::Input(start..end),
            _ => Loc::Owned(s.to_vec()),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Loc::Input(r) => r.is_empty(),
            Loc::Owned(v) => v.is_empty(),
        }
    }

    /// The bytes, given the input the ranges refer to.
    pub fn bytes<'a>(&'a self, input: &'a [u8]) -> &'a [u8] {
        match self {
            Loc::Input(r) => &input[r.clone()],
            Loc::Owned(v) => v,
        }
    }
}

/// One header field: name and value (trimmed, unfolded) as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: Loc,
    pub value: Loc,
}

/// An event, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    /// A part's header block is complete. `info` is filled only when the
    /// caller asked for it (the iterator API); the drop-in parser needs
    /// only the fields.
    PartStart {
        headers: Vec<Header>,
        info: Option<Box<PartInfo>>,
    },
    Data(Loc),
    PartEnd,
    End,
    NeedMore,
}

/// Takes one step of `parser` over `input[*pos..]` and advances `*pos`.
/// Ranges in the event are relative to the whole `input`.
pub fn step(
    parser: &mut Parser,
    input: &[u8],
    pos: &mut usize,
    is_last: bool,
    want_info: bool,
) -> Result<Ev, Error> {
    let s = parser.step(&input[*pos..], is_last)?;
    *pos += s.consumed;
    Ok(match s.event {
        Event::PartStart(part) => Ev::PartStart {
            headers: part
                .headers()
                .map(|(n, v)| Header {
                    name: Loc::of(input, n),
                    value: Loc::of(input, v),
                })
                .collect(),
            info: want_info.then(|| Box::new(PartInfo::from(&part))),
        },
        Event::Data(d) => Ev::Data(Loc::of(input, d)),
        Event::PartEnd => Ev::PartEnd,
        Event::End => Ev::End,
        Event::NeedMore => Ev::NeedMore,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkwire_multipart::{Limits, Subtype};

    fn parser() -> Parser {
        Parser::new(b"b", Subtype::FormData, Limits::default()).unwrap()
    }

    /// Every event of `chunks`, with data resolved to bytes.
    fn events(chunks: &[&[u8]]) -> Vec<(String, Vec<u8>, bool)> {
        let mut p = parser();
        let mut out = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            let mut pos = 0;
            loop {
                match step(&mut p, c, &mut pos, i + 1 == chunks.len(), false).unwrap() {
                    Ev::NeedMore => break,
                    Ev::Data(l) => {
                        let owned = matches!(l, Loc::Owned(_));
                        out.push(("data".into(), l.bytes(c).to_vec(), owned));
                    }
                    Ev::PartStart { headers, .. } => {
                        for h in headers {
                            let mut kv = h.name.bytes(c).to_vec();
                            kv.push(b'=');
                            kv.extend_from_slice(h.value.bytes(c));
                            out.push(("header".into(), kv, false));
                        }
                    }
                    Ev::PartEnd => out.push(("end_part".into(), vec![], false)),
                    Ev::End => out.push(("end".into(), vec![], false)),
                }
            }
        }
        out
    }

    const BODY: &[u8] =
        b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--b--\r\n";

    #[test]
    fn data_in_the_input_is_a_range_not_a_copy() {
        let ev = events(&[BODY]);
        assert_eq!(ev[0].1, b"Content-Disposition=form-data; name=\"a\"");
        assert_eq!((ev[1].1.as_slice(), ev[1].2), (&b"hello"[..], false));
        assert_eq!(ev.len(), 4);
    }

    #[test]
    fn data_held_back_by_the_parser_is_copied() {
        // "hello\r\n-" may begin a delimiter: the parser keeps the tail.
        let cut = BODY.iter().position(|&b| b == b'h').unwrap() + 8;
        let ev = events(&[&BODY[..cut], &BODY[cut..]]);
        let data: Vec<u8> = ev
            .iter()
            .filter(|e| e.0 == "data")
            .flat_map(|e| e.1.clone())
            .collect();
        assert_eq!(data, b"hello");
    }

    #[test]
    fn loc_of_a_foreign_slice_is_owned() {
        let a = [1u8, 2, 3];
        let b = [4u8, 5];
        assert_eq!(Loc::of(&a, &a[1..]), Loc::Input(1..3));
        assert_eq!(Loc::of(&a, &b), Loc::Owned(vec![4, 5]));
        assert_eq!(Loc::of(&a[1..], &a[..1]), Loc::Owned(vec![1]));
    }
}
