//! Every python-multipart vector, whole, byte by byte and at 100 random split
//! points, with identical results; compared with its `.yaml` expectation
//! except where bulkwire follows the RFC instead (see `DIFFERS`).

use bulkwire_multipart::testutil::{random_splits, run_bytewise, run_split, run_whole, Outcome};
use bulkwire_multipart::{ErrorKind, Limits, Parser, Subtype};
use bulkwire_testsuite::{expectation, python_multipart_names, vector_path, ExpectedPart};

fn parser(boundary: &str) -> Parser {
    Parser::new(boundary.as_bytes(), Subtype::FormData, Limits::default()).unwrap()
}

/// Parses one vector every way and checks the outcomes agree.
fn outcome(name: &str) -> Outcome {
    let body = std::fs::read(vector_path(&format!("python-multipart/{name}.http"))).unwrap();
    let b = expectation(name).boundary;
    let whole = run_whole(parser(&b), &body);
    let check = |o: Outcome, how: &str| {
        assert_eq!(
            (&o.events, &o.error),
            (&whole.events, &whole.error),
            "{name}: {how} differs from whole"
        );
    };
    check(run_bytewise(parser(&b), &body), "byte by byte");
    for seed in 0..100u64 {
        let splits = random_splits(body.len(), 1 + (seed % 5) as usize, seed + 1);
        check(
            run_split(parser(&b), &body, &splits),
            &format!("split at {splits:?}"),
        );
    }
    whole
}

fn check_parts(name: &str, o: &Outcome, expected: &[ExpectedPart]) {
    assert_eq!(o.error, None, "{name}");
    let got = o.parts();
    assert_eq!(got.len(), expected.len(), "{name}: part count");
    for ((info, data), exp) in got.iter().zip(expected) {
        assert_eq!(info.name.as_deref(), Some(exp.name.as_str()), "{name}");
        assert_eq!(info.is_file(), exp.is_file, "{name}: {}", exp.name);
        assert_eq!(info.filename, exp.file_name, "{name}");
        if let Some(ct) = &exp.content_type {
            // RFC 7578 §4.4: a part without Content-Type is text/plain.
            let got = info.content_type.as_deref().unwrap_or("text/plain");
            assert_eq!(got, ct, "{name}");
        }
        let cte = info
            .content_transfer_encoding
            .as_deref()
            .map(str::to_ascii_lowercase);
        assert_eq!(
            &transfer_decode(cte.as_deref(), data),
            &exp.data,
            "{name}: data of {}",
            exp.name
        );
    }
}

/// RFC 7578 §4.7: Content-Transfer-Encoding is deprecated for form-data and
/// no sender uses it; bulkwire hands the bytes out as sent and reports the
/// field, python-multipart decodes them. The test decodes ours to compare.
fn transfer_decode(cte: Option<&str>, data: &[u8]) -> Vec<u8> {
    use base64::Engine;
    match cte {
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
        Some("quoted-printable") => quoted_printable(data),
        _ => data.to_vec(),
    }
}

/// RFC 2045 §6.7 decoding, enough for the vectors (`=XX`, soft breaks).
fn quoted_printable(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < data.len() {
        match (data[i], data.get(i + 1..i + 3)) {
            (b'=', Some(b"\r\n")) => i += 3,
            (b'=', Some(hex)) => {
                out.push(u8::from_str_radix(std::str::from_utf8(hex).unwrap(), 16).unwrap());
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Vectors whose `.yaml` encodes a choice that differs from the RFCs; each
/// is pinned by its own test below.
const DIFFERS: &[&str] = &[
    "almost_match_boundary_without_final_hyphen",
    "almost_match_boundary_without_CR",
    "almost_match_boundary_without_LF",
    "bad_initial_boundary",
    "single_field_blocks",
];

#[test]
fn every_vector_matches_its_expectation() {
    let names = python_multipart_names();
    assert!(names.len() >= 29, "vectors present: {}", names.len());
    for name in names.iter().filter(|n| !DIFFERS.contains(&n.as_str())) {
        let o = outcome(name);
        match expectation(name).result {
            Ok(parts) => check_parts(name, &o, &parts),
            Err(offset) => {
                let e = o
                    .error
                    .unwrap_or_else(|| panic!("{name}: expected an error"));
                assert_eq!(e.0, ErrorKind::Malformed, "{name}");
                // Offsets are each parser's own; ours points at the first
                // byte that cannot be valid, which is at or before theirs
                // on every vector, and never more than one line earlier.
                assert!(
                    e.1 <= offset && offset - e.1 <= 42,
                    "{name}: ours {} theirs {offset}",
                    e.1
                );
            }
        }
    }
}

/// The transfer-encoded vectors pass through `transfer_decode` above; this
/// pins that the parser itself hands out the encoded bytes.
#[test]
fn transfer_encoding_is_reported_not_applied() {
    for (name, raw) in [
        ("base64_encoding", &b"VGVzdCAxMjM="[..]),
        ("quoted_printable_encoding", &b"foo=3Dbar"[..]),
    ] {
        let parts = outcome(name).parts();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].1, raw, "{name}");
        assert!(parts[0].0.content_transfer_encoding.is_some());
    }
}

/// RFC 2046 §5.1.1: a boundary "appear[ing] in its entirety following the
/// CRLF" is a delimiter, so `CRLF--boundary` followed by `-Q`, `Q` or `CR Q`
/// cannot be part data; what follows is neither `--` nor padding + CRLF, so
/// the body is malformed. python-multipart treats those lines as data, which
/// lets two parsers disagree about the parts in one body.
#[test]
fn boundary_prefix_line_is_malformed() {
    for name in [
        "almost_match_boundary_without_final_hyphen",
        "almost_match_boundary_without_CR",
        "almost_match_boundary_without_LF",
    ] {
        let body = std::fs::read(vector_path(&format!("python-multipart/{name}.http"))).unwrap();
        let delim = b"\r\n----boundary";
        let at = body.windows(delim.len()).position(|w| w == delim).unwrap() + delim.len();
        let e = outcome(name).error.expect("error");
        assert_eq!(e.0, ErrorKind::Malformed, "{name}");
        // The offset is the first byte after the delimiter that cannot
        // continue it: `-Q` and `\rQ` fail on their second byte.
        let expect = if body[at] == b'Q' { at } else { at + 1 };
        assert_eq!(e.1 as usize, expect, "{name}");
        assert_eq!(body[e.1 as usize], b'Q', "{name}");
    }
}

/// RFC 2046 §5.1.1: bytes before the first delimiter are preamble. The
/// misspelt first line is preamble, and the only delimiter is the close
/// delimiter, so the body has no parts (python-multipart: error at 9).
#[test]
fn misspelt_first_boundary_is_preamble() {
    let o = outcome("bad_initial_boundary");
    assert_eq!(o.error, None);
    assert!(o.parts().is_empty());
}

/// `single_field_blocks.http` delimits with `--boundary` while its `.yaml`
/// says the boundary is `--boundary` (so the delimiter would be
/// `----boundary`, RFC 2046 §5.1.1). With the stated boundary the whole body
/// is preamble and ends without a delimiter; with `boundary` it gives the
/// expected part.
#[test]
fn single_field_blocks_uses_another_boundary() {
    let name = "single_field_blocks";
    let o = outcome(name);
    assert_eq!(o.error.map(|e| e.0), Some(ErrorKind::Truncated));
    let body = std::fs::read(vector_path(&format!("python-multipart/{name}.http"))).unwrap();
    let exp = expectation(name).result.unwrap();
    for splits in [
        vec![],
        (1..body.len()).collect(),
        random_splits(body.len(), 4, 7),
    ] {
        let o = run_split(parser("boundary"), &body, &splits);
        check_parts(name, &o, &exp);
    }
}
