//! Split-differential target for the MTOM/XOP parser: a message parsed
//! whole, cut at hashed offsets, and (when small) one byte at a time must
//! give the same message or the same error (kind, offset, part, limit),
//! and a limit error must name its configured value.
//!
//! Input layout: `flags`, then the Content-Type up to the first `\n`, then
//! the body. flags bit 0: small limits (envelope 256 B, text 16 B, 2
//! includes, 2 attachments, 2 inline binaries, depth 8).
#![no_main]

use bulkwire_fuzz::fnv;
use bulkwire_xop::testutil::{random_splits, run_split, Outcome, RecordingSink};
use bulkwire_xop::{Limits, Parser, Select};
use libfuzzer_sys::fuzz_target;

const BYTEWISE_MAX: usize = 4096;

fn select() -> Select {
    Select::new()
        .binary("/Envelope/Body/{*}upload/data")
        .unwrap()
        .binary("/Envelope/Body/{*}upload/{*}file")
        .unwrap()
        .text("/Envelope/Body/{*}upload/name")
        .unwrap()
        .text("/Envelope/Header/{*}id")
        .unwrap()
}

fn limits(small: bool) -> Limits {
    if !small {
        return Limits::default();
    }
    let mut l = Limits {
        envelope_bytes: 256,
        text_bytes: 16,
        includes: 2,
        attachments: 2,
        inline_binaries: 2,
        fields: 2,
        content_id_len: 24,
        ..Limits::default()
    };
    l.xml.depth = 8;
    l.multipart.parts = 4;
    l
}

fn check(o: &Outcome, limits: &Limits, len: usize) {
    if let Err((_, offset, _, limit)) = o {
        assert!(*offset <= len as u64, "error offset {offset} past {len}");
        if let Some((kind, value)) = limit {
            assert_eq!(*value, kind.value(limits), "limit {kind:?}");
        }
    }
    if let Ok(m) = o {
        assert!(m.includes.len() <= limits.includes);
        for b in &m.binaries {
            assert_eq!(b.len, b.output.data.len() as u64);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some(nl) = rest.iter().position(|&c| c == b'\n') else {
        return;
    };
    let Ok(ct) = std::str::from_utf8(&rest[..nl]) else {
        return;
    };
    let body = &rest[nl + 1..];
    let limits = limits(flags & 1 != 0);
    let mk = || Parser::new(ct, select(), limits.clone(), RecordingSink::default());
    let Ok(first) = mk() else {
        return;
    };
    let whole = run_split(first, body, &[]);
    check(&whole, &limits, body.len());
    let h = fnv(data);
    let splits = random_splits(body.len(), 1 + (h % 15) as usize, h);
    let split = run_split(mk().unwrap(), body, &splits);
    assert_eq!(whole, split, "whole vs split at {splits:?}");
    if body.len() < BYTEWISE_MAX {
        let every: Vec<usize> = (1..body.len()).collect();
        assert_eq!(
            whole,
            run_split(mk().unwrap(), body, &every),
            "whole vs bytewise"
        );
    }
});
