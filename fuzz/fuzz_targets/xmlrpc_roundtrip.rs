//! Round-trip target for the XML-RPC codec: an arbitrary value tree,
//! encoded as a call and as a response (wrapped or not), parses back to
//! the same tree at a fuzzer-chosen chunking, and the encoder's announced
//! length is the length written. Values the encoder refuses (strings with
//! characters XML 1.0 cannot carry, NaN aside) must be refused with
//! `Unsupported`, never rendered.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bulkwire_xmlrpc::testutil::{random_splits, run_split};
use bulkwire_xmlrpc::{
    encode_call, encode_response, Call, DateTime, EncodeOptions, ErrorKind, Limits, LineEnd,
    Message, Response, Value,
};
use libfuzzer_sys::fuzz_target;

type V = Value<Vec<u8>>;

fn value(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<V> {
    let kind = if depth == 0 {
        u.int_in_range(0..=7)?
    } else {
        u.int_in_range(0..=9)?
    };
    Ok(match kind {
        0 => V::Int(u.arbitrary()?),
        1 => V::I8(u.arbitrary()?),
        2 => V::Bool(u.arbitrary()?),
        3 => V::String(u.arbitrary()?),
        4 => V::Double(u.arbitrary()?),
        5 => {
            let (y, mo, d): (u16, u8, u8) = u.arbitrary()?;
            let s = format!("{:04}{:02}{:02}T12:00:00", y % 10000, mo % 100, d % 100);
            V::DateTime(DateTime::parse(&s).expect("shape"))
        }
        6 => V::Base64(u.arbitrary()?),
        7 => V::Nil,
        8 => {
            let n = u.int_in_range(0..=4)?;
            V::Array(
                (0..n)
                    .map(|_| value(u, depth - 1))
                    .collect::<Result<_, _>>()?,
            )
        }
        _ => {
            let n = u.int_in_range(0..=4)?;
            let mut m = Vec::new();
            for _ in 0..n {
                m.push((u.arbitrary()?, value(u, depth - 1)?));
            }
            V::Struct(m)
        }
    })
}

/// NaN is not equal to itself: compare doubles by bits.
fn same(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Double(x), V::Double(y)) => x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan(),
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (V::Struct(x), V::Struct(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k, a), (l, b))| k == l && same(a, b))
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(method) = String::arbitrary(&mut u) else {
        return;
    };
    let Ok(n) = u.int_in_range(0..=3u8) else {
        return;
    };
    let Ok(params) = (0..n)
        .map(|_| value(&mut u, 3))
        .collect::<Result<Vec<_>, _>>()
    else {
        return;
    };
    let wrap = match u.int_in_range(0..=2u8).unwrap_or(0) {
        0 => None,
        1 => Some(LineEnd::Lf),
        _ => Some(LineEnd::CrLf),
    };
    let opts = EncodeOptions {
        wrap,
        ..Default::default()
    };
    let seed = u.arbitrary::<u64>().unwrap_or(1);
    let limits = Limits::default();
    // A longer name is refused by a limit, not a round-trip failure.
    if method.len() > limits.method_name_len {
        return;
    }

    let enc = match encode_call(&method, &params, &opts) {
        Ok(e) => e,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            return;
        }
    };
    let body = enc.to_vec().unwrap();
    assert_eq!(body.len() as u64, enc.len());
    let out = run_split(&limits, &body, &random_splits(body.len(), 8, seed));
    match out.message {
        // An empty or all-white-space method name is refused by the parser.
        None if method.trim_matches([' ', '\t', '\n', '\r']).is_empty() => return,
        Some(Message::Call(Call {
            method: m,
            params: p,
        })) => {
            assert_eq!(m, method.trim_matches([' ', '\t', '\n', '\r']));
            assert!(p.len() == params.len() && p.iter().zip(&params).all(|(a, b)| same(a, b)));
        }
        other => panic!("{other:?} {:?}", out.error),
    }

    for v in &params {
        let enc = encode_response(v, &opts).expect("encoded above");
        let body = enc.to_vec().unwrap();
        assert_eq!(body.len() as u64, enc.len());
        let out = run_split(&limits, &body, &random_splits(body.len(), 4, seed ^ 7));
        let Some(Message::Response(Response::Params(p))) = out.message else {
            panic!("{:?}", out.error)
        };
        assert!(p.len() == 1 && same(&p[0], v));
    }
});
