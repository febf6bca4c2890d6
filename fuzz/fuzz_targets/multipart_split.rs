//! Split-differential target: parsing a body whole, cut at fuzzer-chosen
//! offsets, and one byte at a time must give the same events and the same
//! error (kind, offset, part, limit), and the parser's buffers must stay
//! within the bound that `parser.rs` promises.
//!
//! Input layout (see README.md):
//! - Raw mode, when the input starts with `--`: the input is the body, as
//!   captured on the wire. The boundary is the rest of the first line (minus
//!   transport padding), form-data, default limits; bare LF is allowed when
//!   that line ends in one. Splits come from a hash of the input.
//! - Otherwise `flags, blen, boundary[blen'], [7 limit bytes], [split
//!   spec], body`:
//!   - flags bits 0-1: subtype (0, 3 form-data; 1 related; 2 mixed)
//!   - bit 2: allow bare LF
//!   - bit 3: small limits, read from the 7 limit bytes
//!   - bits 4-5: splits: 0, 3 at 0xFF marker bytes in the body (removed);
//!     1 a count byte then that many offset deltas; 2 hashed
//!   - bit 6: wrap the body as `--B CRLF` body `CRLF --B-- CRLF`
//!   - bit 7: long boundary (blen' = 1 + blen % 70; else 1 + blen % 4)
#![no_main]

use bulkwire_fuzz::{boundary_from, drive, fnv};
use bulkwire_multipart::testutil::random_splits;
use bulkwire_multipart::{LimitKind, Limits, Parser, Subtype};
use libfuzzer_sys::fuzz_target;

/// Bodies up to this size are also parsed one byte at a time.
const BYTEWISE_MAX: usize = 4096;

#[derive(Debug)]
struct Case {
    boundary: Vec<u8>,
    subtype: Subtype,
    lenient: bool,
    limits: Limits,
    splits: Vec<usize>,
    body: Vec<u8>,
}

impl Case {
    fn decode(data: &[u8]) -> Option<Case> {
        if data.starts_with(b"--") {
            Case::raw(data)
        } else {
            Case::configured(data)
        }
    }

    fn raw(data: &[u8]) -> Option<Case> {
        let line_end = data.iter().position(|&c| c == b'\r' || c == b'\n');
        let line = &data[2..line_end.unwrap_or(data.len())];
        let padding = line.iter().rev().take_while(|&&c| c == b' ' || c == b'\t');
        let line = &line[..line.len() - padding.count()];
        if line.is_empty() {
            return None;
        }
        let boundary = boundary_from(&line[..line.len().min(70)]);
        let h = fnv(data);
        Some(Case {
            boundary,
            subtype: Subtype::FormData,
            lenient: line_end.is_some_and(|i| data[i] == b'\n'),
            limits: Limits::default(),
            splits: random_splits(data.len(), 1 + (h % 15) as usize, h),
            body: data.to_vec(),
        })
    }

    fn configured(data: &[u8]) -> Option<Case> {
        let (&flags, rest) = data.split_first()?;
        let (&blen, rest) = rest.split_first()?;
        let blen = 1 + if flags & 0x80 != 0 {
            blen as usize % 70
        } else {
            blen as usize % 4
        };
        let (boundary, mut rest) = (rest.get(..blen)?, rest.get(blen..)?);
        let boundary = boundary_from(boundary);
        let subtype = match flags & 3 {
            1 => Subtype::Related,
            2 => Subtype::Mixed,
            _ => Subtype::FormData,
        };
        let limits = if flags & 0x08 != 0 {
            let (l, r) = (rest.get(..7)?, &rest[7..]);
            rest = r;
            small_limits(l)
        } else {
            Limits::default()
        };
        let (splits, body) = match (flags >> 4) & 3 {
            1 => {
                let (&n, r) = rest.split_first()?;
                let n = n as usize % 16;
                let deltas = r.get(..n)?;
                let mut at = 0;
                let splits = deltas
                    .iter()
                    .map(|&d| {
                        at += d as usize;
                        at
                    })
                    .collect();
                (splits, r[n..].to_vec())
            }
            2 => {
                let h = fnv(rest);
                (
                    random_splits(rest.len(), 1 + (h % 15) as usize, h),
                    rest.to_vec(),
                )
            }
            _ => split_at_markers(rest),
        };
        let (body, splits) = if flags & 0x40 != 0 {
            wrap(&boundary, &body, &splits)
        } else {
            (body, splits)
        };
        Some(Case {
            boundary,
            subtype,
            lenient: flags & 0x04 != 0,
            limits,
            splits,
            body,
        })
    }
}

/// Small values for the limits a body can reach with a few bytes, so that
/// limit errors, and their offsets, are compared across chunkings too.
fn small_limits(l: &[u8]) -> Limits {
    Limits {
        header_bytes: l[0] as usize,
        parts: l[1] as usize % 8,
        field_bytes: u64::from(l[2] % 64),
        preamble: l[3] as usize % 32,
        headers: l[4] as usize % 8,
        epilogue: l[5] as usize % 32,
        body_bytes: if l[6] < 128 {
            u64::MAX
        } else {
            u64::from(l[6] - 128) * 4
        },
        ..Limits::default()
    }
}

/// Splits at 0xFF bytes, which are dropped, as oxigraph's targets do.
fn split_at_markers(data: &[u8]) -> (Vec<usize>, Vec<u8>) {
    let mut body = Vec::with_capacity(data.len());
    let mut splits = Vec::new();
    for &c in data {
        if c == 0xFF {
            splits.push(body.len());
        } else {
            body.push(c);
        }
    }
    (splits, body)
}

/// `--B CRLF` + body + `CRLF --B-- CRLF`: the body becomes the headers and
/// data of a first part, so that mutations start inside the structure.
fn wrap(boundary: &[u8], body: &[u8], splits: &[usize]) -> (Vec<u8>, Vec<usize>) {
    let head = [b"--", boundary, b"\r\n"].concat();
    let tail = [b"\r\n--", boundary, b"--\r\n"].concat();
    let out = [&head[..], body, &tail].concat();
    let splits = splits.iter().map(|s| s + head.len()).collect();
    (out, splits)
}

fn parser(case: &Case) -> Parser {
    let p = Parser::new(&case.boundary, case.subtype, case.limits.clone())
        .expect("a boundary of bchars is valid");
    if case.lenient {
        p.allow_bare_lf()
    } else {
        p
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(case) = Case::decode(data) else {
        return;
    };
    let blen = case.boundary.len();
    let body = &case.body[..];
    let whole = drive(parser(&case), blen, body, &[]);
    let split = drive(parser(&case), blen, body, &case.splits);
    assert_eq!(
        (&whole.events, &whole.error),
        (&split.events, &split.error),
        "whole vs split at {:?}",
        case.splits
    );
    if body.len() < BYTEWISE_MAX {
        let every: Vec<usize> = (1..body.len()).collect();
        let bytewise = drive(parser(&case), blen, body, &every);
        assert_eq!(
            (&whole.events, &whole.error),
            (&bytewise.events, &bytewise.error),
            "whole vs bytewise"
        );
    }
    check_outcome(&case, &whole);
});

/// Rules that hold whatever the chunking: error offsets are inside the
/// body, a limit error names its configured value, form-data parts are
/// named, and no field or part count passes its limit.
fn check_outcome(case: &Case, o: &bulkwire_multipart::testutil::Outcome) {
    if let Some((_, offset, _, limit)) = &o.error {
        assert!(
            *offset <= case.body.len() as u64,
            "error offset {offset} past the body ({} bytes)",
            case.body.len()
        );
        if let Some((kind, value)) = limit {
            assert_eq!(*value, kind.value(&case.limits), "limit {kind:?} value");
            assert_ne!(*kind, LimitKind::BoundaryLen);
        }
    }
    let parts = o.parts();
    assert!(
        parts.len() <= case.limits.parts,
        "more parts than the limit"
    );
    if case.subtype == Subtype::FormData {
        for (info, data) in &parts {
            assert!(info.name.is_some(), "form-data part without a name");
            if !info.is_file() {
                assert!(
                    data.len() as u64 <= case.limits.field_bytes,
                    "field over limit"
                );
            }
        }
    }
}
