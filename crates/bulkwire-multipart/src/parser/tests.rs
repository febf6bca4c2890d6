//! Unit tests of the parser's state machine. Every case runs whole, byte by
//! byte and at random splits, and must give identical outcomes.

use crate::testutil::{random_splits, run_bytewise, run_split, run_whole, Outcome, Owned};
use crate::{ErrorKind, LimitKind, Limits, Parser, Subtype};

const B: &[u8] = b"xyzzy";

fn parser(sub: Subtype, limits: Limits) -> Parser {
    Parser::new(B, sub, limits).unwrap()
}

/// Runs `body` every way and checks the outcomes agree.
fn all_ways(mk: impl Fn() -> Parser, body: &[u8]) -> Outcome {
    let whole = run_whole(mk(), body);
    assert_eq!(
        run_bytewise(mk(), body),
        Outcome {
            peak_buffered: 0,
            ..whole.clone()
        }
        .with_peak(&run_bytewise(mk(), body))
    );
    for seed in 1..=30 {
        let splits = random_splits(body.len(), 1 + seed as usize % 7, seed);
        let got = run_split(mk(), body, &splits);
        assert_eq!(
            (&got.events, &got.error),
            (&whole.events, &whole.error),
            "splits {splits:?}"
        );
    }
    whole
}

impl Outcome {
    fn with_peak(mut self, other: &Outcome) -> Outcome {
        self.peak_buffered = other.peak_buffered;
        self
    }
}

fn form(body: &[u8]) -> Outcome {
    all_ways(|| parser(Subtype::FormData, Limits::default()), body)
}

fn mixed(body: &[u8]) -> Outcome {
    all_ways(|| parser(Subtype::Mixed, Limits::default()), body)
}

fn err(o: &Outcome) -> (ErrorKind, u64) {
    let e = o.error.expect("an error");
    (e.0, e.1)
}

#[test]
fn two_parts() {
    let body = b"--xyzzy\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--xyzzy\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n\x00\r\n\x01\r\n--xyzzy--\r\n";
    let o = form(body);
    assert_eq!(o.error, None);
    let parts = o.parts();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].0.name.as_deref(), Some("a"));
    assert_eq!(parts[0].1, b"hello");
    assert_eq!(parts[1].0.filename.as_deref(), Some("x.bin"));
    assert_eq!(
        parts[1].0.content_type.as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(parts[1].1, b"\x00\r\n\x01");
    assert_eq!(o.events.last(), Some(&Owned::End));
    assert_eq!(o.events.iter().filter(|e| **e == Owned::PartEnd).count(), 2);
}

#[test]
fn preamble_epilogue_and_padding() {
    let body = b"preamble\r\n--xyzzy \t\r\nX: 1\r\n\r\ndata\r\n--xyzzy--  \r\nepilogue --xyzzy\r\n";
    let o = mixed(body);
    assert_eq!(o.error, None);
    let parts = o.parts();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].1, b"data");
    assert_eq!(parts[0].0.headers, vec![("X".to_string(), "1".to_string())]);
}

#[test]
fn empty_headers_and_empty_data() {
    let o = mixed(b"--xyzzy\r\n\r\n\r\n--xyzzy\r\n\r\nz\r\n--xyzzy--");
    assert_eq!(o.error, None);
    let parts = o.parts();
    assert_eq!((parts[0].1.len(), parts[1].1.as_slice()), (0, &b"z"[..]));
    assert!(parts[0].0.headers.is_empty());
}

#[test]
fn empty_body_is_zero_parts() {
    let o = form(b"--xyzzy--\r\n");
    assert_eq!((o.error, o.events.clone()), (None, vec![Owned::End]));
}

#[test]
fn near_boundaries_are_data() {
    let data = b"\r\n--xyzz\r\n--xyzzX\r--xyzzy\n--xyzzy-\r\n-\r\n--";
    let body = [b"--xyzzy\r\n\r\n".as_slice(), data, b"\r\n--xyzzy--"].concat();
    let o = mixed(&body);
    assert_eq!(o.error, None);
    assert_eq!(o.parts()[0].1, data);
}

#[test]
fn delimiter_prefix_of_a_data_line_is_an_error() {
    // RFC 2046 §5.1.1: the boundary matches as a prefix of the line.
    let body = b"--xyzzy\r\n\r\nab\r\n--xyzzy-Q\r\n--xyzzy--";
    assert_eq!(err(&mixed(body)), (ErrorKind::Malformed, 23));
}

#[test]
fn delimiter_followed_by_garbage() {
    let o = mixed(b"--xyzzyQ\r\n\r\n");
    assert_eq!(err(&o), (ErrorKind::Malformed, 7));
    let o = mixed(b"--xyzzy-X");
    assert_eq!(err(&o), (ErrorKind::Malformed, 8));
    let o = mixed(b"--xyzzy\rX");
    assert_eq!(err(&o), (ErrorKind::Malformed, 8));
}

#[test]
fn truncation_anywhere_is_an_error() {
    let body = b"pre\r\n--xyzzy\r\nA: b\r\n\r\ndata\r\n--xyzzy--";
    for cut in 0..body.len() - 1 {
        let o = mixed(&body[..cut]);
        assert_eq!(err(&o), (ErrorKind::Truncated, cut as u64), "cut at {cut}");
    }
    assert_eq!(mixed(body).error, None);
}

#[test]
fn bare_lf_rejected_unless_allowed() {
    let body = b"--xyzzy\nA: 1\n\nab\r\ncd\n--xyzzy\r\nB: 2\r\n\r\n\r\n--xyzzy--";
    assert_eq!(err(&mixed(body)), (ErrorKind::Malformed, 7));
    let o = all_ways(
        || parser(Subtype::Mixed, Limits::default()).allow_bare_lf(),
        body,
    );
    assert_eq!(o.error, None);
    let parts = o.parts();
    assert_eq!(parts[0].1, b"ab\r\ncd");
    assert_eq!(parts[1].0.headers[0].0, "B");
    assert_eq!(parts[1].1, b"");
}

#[test]
fn folded_header_is_unfolded() {
    let body = b"--xyzzy\r\nContent-Disposition: form-data;\r\n name=\"f\";\r\n\tfilename=\"a b\"\r\n\r\nx\r\n--xyzzy--";
    let o = form(body);
    assert_eq!(o.error, None);
    let p = &o.parts()[0].0;
    assert_eq!(
        (p.name.as_deref(), p.filename.as_deref()),
        (Some("f"), Some("a b"))
    );
    assert_eq!(p.headers[0].1, "form-data; name=\"f\";\tfilename=\"a b\"");
}

#[test]
fn form_data_requires_a_name() {
    let o = form(b"--xyzzy\r\nContent-Type: text/plain\r\n\r\nx\r\n--xyzzy--");
    assert_eq!(err(&o), (ErrorKind::Malformed, 9));
    assert_eq!(o.error.unwrap().2, Some(0));
}

#[test]
fn header_errors_have_exact_offsets() {
    let o = mixed(b"--xyzzy\r\nGood: 1\r\nBad\r: 2\r\n\r\n\r\n--xyzzy--");
    assert_eq!(err(&o), (ErrorKind::Malformed, 21));
    let o = mixed(b"--xyzzy\r\n  folded: first\r\n\r\n\r\n--xyzzy--");
    assert_eq!(err(&o), (ErrorKind::Malformed, 9));
}

fn limits(f: impl Fn(&mut Limits)) -> Limits {
    let mut l = Limits::default();
    f(&mut l);
    l
}

fn limit_of(o: &Outcome) -> (LimitKind, u64, u64) {
    let e = o.error.expect("a limit error");
    assert_eq!(e.0, ErrorKind::Limit);
    let (k, v) = e.3.unwrap();
    (k, v, e.1)
}

#[test]
fn each_limit_names_itself_at_a_fixed_offset() {
    let run = |l: Limits, sub: Subtype, body: &[u8]| all_ways(|| parser(sub, l.clone()), body);
    let body = b"--xyzzy\r\nContent-Disposition: form-data; name=a\r\n\r\n0123456789\r\n--xyzzy\r\nContent-Disposition: form-data; name=b\r\n\r\nx\r\n--xyzzy--\r\nepi";
    let o = run(limits(|l| l.parts = 1), Subtype::FormData, body);
    assert_eq!(limit_of(&o), (LimitKind::Parts, 1, 72));
    let o = run(limits(|l| l.field_bytes = 4), Subtype::FormData, body);
    assert_eq!(limit_of(&o), (LimitKind::FieldBytes, 4, 55));
    let o = run(limits(|l| l.header_bytes = 20), Subtype::FormData, body);
    assert_eq!(limit_of(&o), (LimitKind::HeaderBytes, 20, 29));
    let o = run(limits(|l| l.headers = 0), Subtype::FormData, body);
    assert_eq!(limit_of(&o), (LimitKind::Headers, 0, 9));
    let o = run(limits(|l| l.epilogue = 4), Subtype::FormData, body);
    assert_eq!(
        limit_of(&o),
        (LimitKind::Epilogue, 4, body.len() as u64 - 1)
    );
    let o = run(limits(|l| l.body_bytes = 50), Subtype::FormData, body);
    assert_eq!(limit_of(&o), (LimitKind::BodyBytes, 50, 50));
    let o = run(limits(|l| l.epilogue = 5), Subtype::FormData, body);
    assert_eq!(o.error, None);
    let pre = [b"x".repeat(100), b"\r\n".to_vec(), body.to_vec()].concat();
    let o = run(limits(|l| l.preamble = 99), Subtype::FormData, &pre);
    assert_eq!(limit_of(&o), (LimitKind::Preamble, 99, 99));
    let o = run(limits(|l| l.preamble = 100), Subtype::FormData, &pre);
    assert_eq!(o.error, None);
    // A file part is not a field: field_bytes does not apply.
    let file = b"--xyzzy\r\nContent-Disposition: form-data; name=a; filename=f\r\n\r\n0123456789\r\n--xyzzy--";
    assert_eq!(
        run(limits(|l| l.field_bytes = 4), Subtype::FormData, file).error,
        None
    );
}

#[test]
fn header_block_exactly_at_the_limit() {
    let block = b"A: 123456\r\n"; // 11 bytes
    let body = [b"--xyzzy\r\n".as_slice(), block, b"\r\nd\r\n--xyzzy--"].concat();
    let ok = all_ways(
        || parser(Subtype::Mixed, limits(|l| l.header_bytes = 11)),
        &body,
    );
    assert_eq!(ok.error, None);
    let o = all_ways(
        || parser(Subtype::Mixed, limits(|l| l.header_bytes = 10)),
        &body,
    );
    assert_eq!(limit_of(&o), (LimitKind::HeaderBytes, 10, 19));
}

#[test]
fn errors_are_sticky() {
    let mut p = parser(Subtype::Mixed, Limits::default());
    let e1 = p.step(b"--xyzzyQ", false).unwrap_err();
    let e2 = p.step(b"--xyzzy\r\n", false).unwrap_err();
    assert_eq!(e1, e2);
    assert_eq!(e1.http_status(), 400);
}

#[test]
fn carry_data_is_emitted_when_disproved() {
    // The chunk ends in a delimiter prefix that the next chunk disproves.
    let body = b"--xyzzy\r\n\r\nab\r\n--xyzQ\r\n--xyzzy--";
    let o = run_split(parser(Subtype::Mixed, Limits::default()), body, &[17]);
    assert_eq!(o.parts()[0].1, b"ab\r\n--xyzQ");
    assert!(o.peak_buffered <= 2 + 2 + B.len() + 2 + 1);
}

#[test]
fn from_content_type() {
    let p = Parser::from_content_type("multipart/form-data; boundary=\"xyzzy\"", Limits::default())
        .unwrap();
    let o = run_whole(
        p,
        b"--xyzzy\r\nContent-Disposition: form-data; name=\"k\"\r\n\r\nv\r\n--xyzzy--",
    );
    assert_eq!(o.parts()[0].1, b"v");
    let e = Parser::from_content_type("application/json", Limits::default()).unwrap_err();
    assert_eq!(e.http_status(), 415);
}

#[test]
fn valueless_parameters_do_not_panic() {
    // Found by the split-differential fuzz target: `name` without `=`.
    let o = form(b"--xyzzy\r\nContent-Disposition: form-data; name\r\n\r\nx\r\n--xyzzy--");
    assert_eq!(o.error, None);
    let p = &o.parts()[0];
    assert_eq!((p.0.name.as_deref(), p.1.as_slice()), (Some(""), &b"x"[..]));
    let o =
        form(b"--xyzzy\r\nContent-Disposition: form-data; name=a; filename\r\n\r\nx\r\n--xyzzy--");
    assert_eq!(o.parts()[0].0.filename.as_deref(), Some(""));
}
