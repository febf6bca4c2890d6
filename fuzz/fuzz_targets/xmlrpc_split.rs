//! Split-differential target for the XML-RPC parser: a body parsed whole,
//! cut at fuzzer-chosen offsets, and (when small) one byte at a time must
//! give the same message, the same base64 values and paths, and the same
//! error (kind, offset, limit, message), also the same as the general
//! path alone (the fast path for wrapped base64 off); an open base64 value
//! must be aborted exactly when parsing fails inside it.
//!
//! Input layout: `flags, body`. Flags bit 0: small limits (so limit errors
//! are reachable); bits 1-2: splits — 0 hashed offsets, 1 at each 0xFF
//! byte of the body (removed), 2 every `n`-th byte with `n` from bits 3-7.
#![no_main]

use bulkwire_xmlrpc::testutil::{random_splits, run_bytewise, run_general, run_split, run_whole};
use bulkwire_xmlrpc::Limits;
use libfuzzer_sys::fuzz_target;

const BYTEWISE_MAX: usize = 2048;

fn limits(small: bool) -> Limits {
    if !small {
        return Limits::default();
    }
    Limits {
        depth: 12,
        name_len: 20,
        tag_bytes: 64,
        attrs: 2,
        namespace_bytes: 96,
        elements: 60,
        string_bytes: 16,
        tree_bytes: 64,
        members: 3,
        items: 3,
        params: 3,
        method_name_len: 12,
    }
}

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let limits = limits(flags & 1 == 1);
    let (body, splits) = match (flags >> 1) & 3 {
        1 => {
            let mut b = Vec::new();
            let mut s = Vec::new();
            for &c in body {
                if c == 0xFF {
                    s.push(b.len());
                } else {
                    b.push(c);
                }
            }
            (b, s)
        }
        2 => {
            let n = 1 + (flags >> 3) as usize;
            (body.to_vec(), (n..body.len()).step_by(n).collect())
        }
        _ => (body.to_vec(), random_splits(body.len(), 16, fnv(body))),
    };
    let whole = run_whole(&limits, &body);
    assert_eq!(run_general(&limits, &body), whole, "general path");
    assert_eq!(
        run_split(&limits, &body, &splits),
        whole,
        "splits {splits:?}"
    );
    if body.len() <= BYTEWISE_MAX {
        assert_eq!(run_bytewise(&limits, &body), whole, "byte by byte");
    }
    // A value is aborted only by an error, at most one, and never after
    // a complete message.
    assert!(whole.aborted <= usize::from(whole.error.is_some()));
    assert_eq!(whole.message.is_some(), whole.error.is_none());
});
