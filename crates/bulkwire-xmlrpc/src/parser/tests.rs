//! Parser unit tests: every type, the grammar's refusals, limits, offsets,
//! sink protocol. Each body runs whole, byte by byte and at random splits
//! (`testutil::run_all`), which asserts identical outcomes.

use crate::testutil::{run_all, Outcome};
use crate::{Call, DateTime, Fault};
use crate::{ErrorKind, LimitKind, Limits, Message, Response, Value};

type V = Value<Vec<u8>>;

fn run(body: &str) -> Outcome {
    run_with(&Limits::default(), body)
}

fn run_with(limits: &Limits, body: &str) -> Outcome {
    run_all(limits, body.as_bytes(), 4096, 5)
}

fn call(body: &str) -> Call<Vec<u8>> {
    let out = run(body);
    match out.message {
        Some(Message::Call(c)) => c,
        other => panic!("not a call: {other:?} {:?}", out.error),
    }
}

fn param(value_xml: &str) -> V {
    let body = format!(
        "<methodCall><methodName>m</methodName><params><param>{value_xml}</param></params></methodCall>"
    );
    let mut c = call(&body);
    assert_eq!(c.params.len(), 1);
    c.params.remove(0)
}

/// The error of a body, as (kind, offset, message).
fn error(body: &str) -> (ErrorKind, u64, &'static str) {
    let out = run(body);
    let (k, off, _, msg) = out.error.unwrap_or_else(|| panic!("no error: {out:?}"));
    assert!(out.message.is_none());
    (k, off, msg)
}

fn wrap(value_xml: &str) -> String {
    format!("<methodCall><methodName>m</methodName><params><param>{value_xml}</param></params></methodCall>")
}

#[test]
fn every_scalar_type() {
    assert_eq!(param("<value><int>-12</int></value>"), V::Int(-12));
    assert_eq!(param("<value><i4> 7 </i4></value>"), V::Int(7));
    assert_eq!(
        param("<value><i8>-9000000000</i8></value>"),
        V::I8(-9_000_000_000)
    );
    assert_eq!(param("<value><boolean>1</boolean></value>"), V::Bool(true));
    assert_eq!(param("<value><boolean>0</boolean></value>"), V::Bool(false));
    assert_eq!(
        param("<value><double>-0.25</double></value>"),
        V::Double(-0.25)
    );
    assert_eq!(
        param("<value><string>a &lt;b&gt; &amp; &#233;&#x1F600;</string></value>"),
        V::String("a <b> & \u{e9}\u{1F600}".into())
    );
    assert_eq!(param("<value><string/></value>"), V::String(String::new()));
    assert_eq!(
        param("<value><dateTime.iso8601>19980717T14:08:55</dateTime.iso8601></value>"),
        V::DateTime(DateTime::parse("19980717T14:08:55").unwrap())
    );
    assert_eq!(param("<value><nil/></value>"), V::Nil);
    assert_eq!(
        param("<value><base64>aGVsbG8=</base64></value>"),
        V::Base64(b"hello".to_vec())
    );
    assert_eq!(param("<value><base64/></value>"), V::Base64(Vec::new()));
}

#[test]
fn untyped_values_are_raw_strings() {
    assert_eq!(param("<value> a b \n</value>"), V::String(" a b \n".into()));
    assert_eq!(param("<value></value>"), V::String(String::new()));
    assert_eq!(param("<value/>"), V::String(String::new()));
    // White space around a type element is not part of the value.
    assert_eq!(param("<value>\n  <int>3</int>\n</value>"), V::Int(3));
    assert_eq!(
        param("<value>x&#13;\r\ny</value>"),
        V::String("x\r\ny".into())
    );
}

#[test]
fn extensions_namespace() {
    let ns = "xmlns:ex=\"http://ws.apache.org/xmlrpc/namespaces/extensions\"";
    let body = format!(
        "<methodResponse {ns}><params><param><value><ex:nil/></value></param>\
         <param><value><ex:i8>5</ex:i8></value></param></params></methodResponse>"
    );
    let out = run(&body);
    assert_eq!(
        out.message,
        Some(Message::Response(Response::Params(vec![V::Nil, V::I8(5)])))
    );
    let body = "<methodResponse xmlns:ex=\"urn:other\"><params><param><value><ex:nil/></value></param></params></methodResponse>";
    let at = body.find("<ex:nil/>").unwrap() as u64;
    assert_eq!(error(body), (ErrorKind::Malformed, at, "unknown element"));
}

#[test]
fn structs_and_arrays_nest() {
    let v = param(
        "<value><struct>\
           <member><name>a</name><value><array><data>\
             <value><int>1</int></value><value>two</value>\
             <value><array><data/></array></value>\
           </data></array></value></member>\
           <member><name>b</name><value><struct/></value></member>\
           <member><name>a</name><value><base64>AA==</base64></value></member>\
         </struct></value>",
    );
    let want = V::Struct(vec![
        (
            "a".into(),
            V::Array(vec![V::Int(1), V::String("two".into()), V::Array(vec![])]),
        ),
        ("b".into(), V::Struct(vec![])),
        ("a".into(), V::Base64(vec![0])),
    ]);
    assert_eq!(v, want);
}

#[test]
fn base64_paths_and_wrapping() {
    let body = "<?xml version='1.0'?>\n<methodCall>\n<methodName> wp.uploadFile\n</methodName>\n<params>\n\
        <param><value><int>1</int></value></param>\n\
        <param><value><struct><member><name>files</name><value><array><data>\
        <value><base64>\nAAEC\r\nAwQF\nBg==\n</base64></value>\
        <value><struct><member><name>bits</name><value><base64>Zm9v</base64></value></member></struct></value>\
        </data></array></value></member></struct></value></param>\n</params>\n</methodCall>\n";
    let out = run(body);
    assert_eq!(out.paths, ["params[1].files[0]", "params[1].files[1].bits"]);
    let Some(Message::Call(c)) = out.message else {
        panic!("{out:?}")
    };
    assert_eq!(c.method, "wp.uploadFile");
    let files = c.params[1].get("files").unwrap();
    let V::Array(files) = files else { panic!() };
    assert_eq!(files[0], V::Base64(vec![0, 1, 2, 3, 4, 5, 6]));
    assert_eq!(files[1].get("bits"), Some(&V::Base64(b"foo".to_vec())));
}

#[test]
fn responses_and_faults() {
    let out = run("<methodResponse><params><param><value><string>ok</string></value></param></params></methodResponse>");
    assert_eq!(
        out.message,
        Some(Message::Response(Response::Params(vec![V::String(
            "ok".into()
        )])))
    );
    let body = "<methodResponse><fault><value><struct>\
        <member><name>faultCode</name><value><int>403</int></value></member>\
        <member><name>faultString</name><value><string>Incorrect username or password.</string></value></member>\
        </struct></value></fault></methodResponse>";
    assert_eq!(
        run(body).message,
        Some(Message::Response(Response::Fault(Fault::new(
            403,
            "Incorrect username or password."
        ))))
    );
    let bad = "<methodResponse><fault><value><struct>\
        <member><name>faultCode</name><value>x</value></member>\
        </struct></value></fault></methodResponse>";
    let (k, off, msg) = error(bad);
    assert_eq!(
        (k, off),
        (ErrorKind::Malformed, bad.find("</fault>").unwrap() as u64)
    );
    assert!(msg.contains("faultCode"));
}

#[test]
fn empty_params_and_no_params() {
    let c = call(
        "<methodCall><methodName>mt.supportedMethods</methodName><params>\n</params></methodCall>",
    );
    assert_eq!(
        (c.method.as_str(), c.params.len()),
        ("mt.supportedMethods", 0)
    );
    let c = call("<methodCall><methodName>x</methodName></methodCall>");
    assert!(c.params.is_empty());
}

#[test]
fn grammar_errors_have_offsets() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "<foo/>",
            "<foo/>",
            "the root element must be methodCall or methodResponse",
        ),
        (
            "<methodCall><params/></methodCall>",
            "<params/>",
            "element not allowed here",
        ),
        (
            "<methodCall><methodName>m</methodName><value/></methodCall>",
            "<value/>",
            "element not allowed here",
        ),
        (
            "<methodCall></methodCall>",
            "</methodCall>",
            "methodCall without a methodName",
        ),
        (
            "<methodCall><methodName> </methodName></methodCall>",
            " </methodName>",
            "empty methodName",
        ),
        (
            "<methodResponse></methodResponse>",
            "</methodResponse>",
            "methodResponse without params or fault",
        ),
        (
            &wrap("<value><int>1</int><int>2</int></value>"),
            "<int>2",
            "element not allowed here",
        ),
        (
            &wrap("<value>x<int>1</int></value>"),
            "x<int>",
            "text and a type element in one value",
        ),
        (
            &wrap("<value><int>1</int>x</value>"),
            "x</value>",
            "text where elements are expected",
        ),
        (&wrap(""), "</param>", "param without a value"),
        (
            &wrap("<value><struct><member><value/></member></struct></value>"),
            "<value/></member>",
            "element not allowed here",
        ),
        (
            &wrap("<value><struct><member><name>a</name></member></struct></value>"),
            "</member>",
            "member without a name and a value",
        ),
        (
            &wrap("<value><array></array></value>"),
            "</array>",
            "array without data",
        ),
        (
            &wrap("<value><int>1</int></value><value/>"),
            "<value/></param>",
            "element not allowed here",
        ),
        (
            &wrap("<value><bogus/></value>"),
            "<bogus/>",
            "unknown element",
        ),
        (
            &wrap("<value><int>2147483648</int></value>"),
            "2147483648",
            "integer out of range for i4 (-2^31 to 2^31-1)",
        ),
        (
            &wrap("<value><int></int></value>"),
            "</int>",
            "invalid integer",
        ),
        (
            &wrap("<value><boolean>2</boolean></value>"),
            "2</boolean>",
            "invalid boolean (expected 0 or 1)",
        ),
        (
            &wrap("<value><double>1.2.3</double></value>"),
            "1.2.3",
            "invalid double",
        ),
        (
            &wrap("<value><nil>x</nil></value>"),
            "x</nil>",
            "text inside nil",
        ),
        (
            &wrap("<value><string>a\u{1}</string></value>"),
            "a\u{1}",
            "text holds a character XML 1.0 does not allow",
        ),
        (
            &wrap("<value><base64>aGVs!G8=</base64></value>"),
            "!G8",
            "invalid base64 character",
        ),
        (
            &wrap("<value><base64>aGVsbG8</base64></value>"),
            "</base64>",
            "base64 text ends inside a quantum (padding missing)",
        ),
        (
            "<methodCall>text</methodCall>",
            "text",
            "text where elements are expected",
        ),
    ];
    for (body, at, msg) in cases {
        let (_, off, m) = error(body);
        let want = body.find(at).unwrap_or_else(|| panic!("{at:?} in {body}")) as u64;
        assert_eq!((off, m), (want, *msg), "{body}");
    }
}

#[test]
fn invalid_utf8_bytes_are_refused() {
    let body = [
        &b"<methodCall><methodName>m</methodName><params><param><value><string>"[..],
        b"\xC3\x28",
        b"</string></value></param></params></methodCall>",
    ]
    .concat();
    let out = run_all(&Limits::default(), &body, 4096, 3);
    let e = out.error.unwrap();
    assert_eq!(
        (e.0, e.3),
        (ErrorKind::Malformed, "text is not valid UTF-8")
    );
}

#[test]
fn base64_error_offsets_map_through_references_and_crlf() {
    // The bad character comes after a reference and CRLF line ends, which
    // shift text offsets against body offsets.
    let body = wrap("<value><base64>QU&#74;D\r\nRE&#x56;G\r\nR!==</base64></value>");
    let (k, off, _) = error(&body);
    assert_eq!(
        (k, off),
        (ErrorKind::Malformed, body.find('!').unwrap() as u64)
    );
    // Non-zero bits before padding: the offending character was carried
    // from an earlier push in the split runs.
    let body = wrap("<value><base64>AAAA\r\nAB<!-- c -->\r\n==</base64></value>");
    let (_, off, msg) = error(&body);
    assert_eq!(off, body.find("B<!--").unwrap() as u64, "{msg}");
}

#[test]
fn dtd_is_refused() {
    let (k, _, _) = error("<!DOCTYPE methodCall [<!ENTITY x \"y\">]><methodCall/>");
    assert_eq!(k, ErrorKind::Unsupported);
}

#[test]
fn truncation() {
    let body = wrap("<value><base64>aGVsbG8=</base64></value>");
    for cut in [0, 10, 60, body.find("bG8").unwrap(), body.len() - 1] {
        let out = run_all(&Limits::default(), &body.as_bytes()[..cut], 4096, 2);
        let e = out.error.expect("truncated");
        assert_eq!((e.0, e.1), (ErrorKind::Truncated, cut as u64), "cut {cut}");
        let inside = cut > body.find("<base64>").unwrap() && cut <= body.find("</base64>").unwrap();
        assert_eq!(out.aborted, usize::from(inside), "cut {cut}");
    }
}

fn limit_of(limits: &Limits, body: &str) -> (LimitKind, u64, u64) {
    let out = run_with(limits, body);
    let (k, off, lim, _) = out.error.unwrap_or_else(|| panic!("no error: {out:?}"));
    assert_eq!(k, ErrorKind::Limit);
    let (which, v) = lim.unwrap();
    (which, v, off)
}

#[test]
fn limits_name_the_limit_and_value() {
    let small = Limits {
        string_bytes: 4,
        members: 1,
        items: 2,
        params: 1,
        method_name_len: 3,
        depth: 8,
        tree_bytes: 6,
        ..Limits::default()
    };
    let b = wrap("<value><string>abcde</string></value>");
    assert_eq!(
        limit_of(&small, &b),
        (LimitKind::StringBytes, 4, b.find("abcde").unwrap() as u64)
    );
    let b = wrap("<value>abc&amp;e</value>");
    assert_eq!(limit_of(&small, &b).0, LimitKind::StringBytes);
    let b = wrap("<value><struct><member><name>a</name><value/></member><member>");
    assert_eq!(
        limit_of(&small, &b),
        (LimitKind::Members, 1, b.rfind("<member>").unwrap() as u64)
    );
    let b = wrap("<value><array><data><value/><value/><value/></data></array></value>");
    assert_eq!(
        limit_of(&small, &b),
        (
            LimitKind::Items,
            2,
            b.find("<value/></data>").unwrap() as u64
        )
    );
    let b = "<methodCall><methodName>m</methodName><params><param><value/></param><param>";
    assert_eq!(
        limit_of(&small, b),
        (LimitKind::Params, 1, b.rfind("<param>").unwrap() as u64)
    );
    let b = "<methodCall><methodName>abcd</methodName></methodCall>";
    assert_eq!(limit_of(&small, b), (LimitKind::MethodNameLen, 3, 24));
    let b = wrap("<value><array><data><value><array><data><value/></data></array></value></data></array></value>");
    assert_eq!(limit_of(&small, &b).0, LimitKind::Depth);
    let b = wrap(
        "<value><struct><member><name>abcd</name><value>efg</value></member></struct></value>",
    );
    assert_eq!(
        limit_of(&small, &b),
        (LimitKind::TreeBytes, 6, b.find("efg").unwrap() as u64)
    );
    let few = Limits {
        elements: 4,
        ..Limits::default()
    };
    assert_eq!(limit_of(&few, &wrap("<value/>")).0, LimitKind::Elements);
    let short = Limits {
        name_len: 5,
        ..Limits::default()
    };
    assert_eq!(limit_of(&short, "<methodCall/>").0, LimitKind::NameLen);
}

#[test]
fn sink_errors_abort_and_point_at_the_tag() {
    use crate::testutil::RecordSink;
    let body = wrap("<value><base64>aGVsbG8gd29ybGQ=</base64></value>");
    let mut p = crate::Parser::new(Limits::default(), RecordSink::new(4));
    let e = p.feed(body.as_bytes(), true).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Sink);
    assert_eq!(e.offset(), body.find("<base64>").unwrap() as u64);
    assert_eq!(e.http_status(), 500);
    assert_eq!(p.sink().aborted, 1);
    // Sticky.
    assert_eq!(p.feed(b"", true).unwrap_err().kind(), ErrorKind::Sink);
}

#[test]
fn finish_before_the_end_is_truncated() {
    let mut p = crate::Parser::new(Limits::default(), crate::CountSink::default());
    p.feed(b"<methodCall><methodName>m</methodName>", false)
        .unwrap();
    assert_eq!(p.method_name(), Some("m"));
    assert!(!p.is_done());
    assert_eq!(p.finish().unwrap_err().kind(), ErrorKind::Truncated);
}

#[test]
fn big_base64_streams_in_bounded_memory() {
    // 4 MiB of payload, 76-column lines, fed in 64 KiB chunks: the parser
    // holds only what straddles chunks.
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i * 7 + (i >> 9)) as u8).collect();
    let v = vec![V::Base64(data.clone())];
    let opts = crate::EncodeOptions {
        wrap: Some(crate::LineEnd::Lf),
        ..Default::default()
    };
    let body = crate::encode_call("up", &v, &opts)
        .unwrap()
        .to_vec()
        .unwrap();
    let mut p = crate::Parser::new(Limits::default(), crate::Sha256Sink::default());
    let mut chunks = body.chunks(65_536).peekable();
    while let Some(c) = chunks.next() {
        p.feed(c, chunks.peek().is_none()).unwrap();
    }
    assert!(p.peak_buffered_bytes() < 256, "{}", p.peak_buffered_bytes());
    let (msg, _) = p.finish().unwrap();
    let Message::Call(c) = msg else { panic!() };
    let Value::Base64(d) = &c.params[0] else {
        panic!()
    };
    use sha2::Digest;
    assert_eq!(d.len, data.len() as u64);
    assert_eq!(d.sha256, <[u8; 32]>::from(sha2::Sha256::digest(&data)));
}

/// A wrapped value over two fast-path blocks, damaged in various ways: the
/// fast path and the general decoder must agree, whatever the chunking.
#[test]
fn fast_path_agrees_with_the_general_decoder() {
    let data: Vec<u8> = (0..60_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let v = vec![V::Base64(data.clone())];
    let opts = crate::EncodeOptions {
        wrap: Some(crate::LineEnd::Lf),
        ..Default::default()
    };
    let body = crate::encode_call("m", &v, &opts)
        .unwrap()
        .to_vec()
        .unwrap();
    let start = body.windows(8).position(|w| w == b"<base64>").unwrap() + 8;
    let end = body.windows(9).position(|w| w == b"</base64>").unwrap();
    let limits = Limits::default();
    let check = |b: &[u8], _what: &str| run_all(&limits, b, 0, 3);
    let ok = check(&body, "intact");
    assert_eq!(ok.message.unwrap().into_call().unwrap().params, v);

    for pos in [0, 5, 75, 76, 77, 65_511, 65_512, 65_600, end - start - 3] {
        let at = start + pos;
        let mut bad = body.clone();
        bad[at] = b'!';
        let out = check(&bad, "bang");
        let e = out.error.unwrap();
        assert_eq!(
            (e.0, e.1, e.3),
            (ErrorKind::Malformed, at as u64, "invalid base64 character"),
            "pos {pos}"
        );
        // Harmless changes: CR before LF, a comment, a blank line, a
        // reference for a character.
        for (insert, name) in [
            (&b"\r"[..], "cr"),
            (b"<!--x-->", "comment"),
            (b"\n", "blank"),
        ] {
            let mut b = body.clone();
            b.splice(at..at, insert.iter().copied());
            let out = check(&b, name);
            assert_eq!(out.error, None, "{name} at {pos}");
            assert_eq!(
                out.message.unwrap().into_call().unwrap().params,
                v,
                "{name} at {pos}"
            );
        }
        let mut b = body.clone();
        b.splice(at..at + 1, format!("&#{};", body[at]).bytes());
        assert_eq!(check(&b, "ref").error, None, "reference at {pos}");
        // Padding in the middle is an error wherever it is.
        let mut b = body.clone();
        b.splice(at..at, *b"==");
        assert_eq!(
            check(&b, "pad").error.map(|e| e.0),
            Some(ErrorKind::Malformed),
            "pad at {pos}"
        );
    }
    for wrap in [None, Some(crate::LineEnd::CrLf)] {
        let opts = crate::EncodeOptions {
            wrap,
            ..Default::default()
        };
        let body = crate::encode_call("m", &v, &opts)
            .unwrap()
            .to_vec()
            .unwrap();
        let out = check(&body, "other wrapping");
        assert_eq!(out.message.unwrap().into_call().unwrap().params, v);
    }
}

#[test]
fn whole_lines_then_line_breaks_before_the_end_tag() {
    // 57 bytes are exactly one 76-character line: the value ends on the
    // fast path, after blank lines (as Python writes it).
    let data: Vec<u8> = (0..114u8).collect();
    let b64 = base64_simd::STANDARD.encode_to_string(&data);
    for (text, n) in [
        (format!("\n{}\n\n", &b64[..76]), 57),
        (format!("\n{}\n{}\n", &b64[..76], &b64[76..]), 114),
    ] {
        let v = param(&format!("<value><base64>{text}</base64></value>"));
        assert_eq!(v, V::Base64(data[..n].to_vec()));
    }
}

/// A call with one base64 value of `n` pseudo-random bytes, wrapped.
fn wrapped_call(n: usize, wrap: crate::LineEnd) -> (Vec<V>, Vec<u8>) {
    let data: Vec<u8> = (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let v = vec![V::Base64(data)];
    let opts = crate::EncodeOptions {
        wrap: Some(wrap),
        ..Default::default()
    };
    let body = crate::encode_call("m", &v, &opts)
        .unwrap()
        .to_vec()
        .unwrap();
    (v, body)
}

/// Whole and at 100 random splits for each seed: the same outcome as the
/// general path alone, which is returned.
fn agrees_with_general(body: &[u8], seeds: std::ops::RangeInclusive<u64>) -> Outcome {
    use crate::testutil::{random_splits, run_general, run_split, run_whole};
    let limits = Limits::default();
    let general = run_general(&limits, body);
    assert_eq!(run_whole(&limits, body), general, "whole");
    for seed in seeds {
        let splits = random_splits(body.len(), 100, seed);
        assert_eq!(
            run_split(&limits, body, &splits),
            general,
            "splits {splits:?}"
        );
    }
    general
}

/// Markup and references dropped anywhere into a regular block — in the
/// first lines, around the block boundary, in the last lines — are
/// replayed through the tokenizer: the outcome (value or error, with its
/// offset) is exactly the general path's, whatever the chunking.
#[test]
fn markup_inside_regular_blocks_is_replayed_exactly() {
    let (v, body) = wrapped_call(60_000, crate::LineEnd::Lf);
    let start = body.windows(8).position(|w| w == b"<base64>").unwrap() + 8;
    let end = body.windows(9).position(|w| w == b"</base64>").unwrap();
    // The first block ends after its lines (the encoder puts no line end
    // before the first one).
    let block = crate::lines::MAX_LINES * 77;
    let positions = (0..80)
        .chain(block - 40..block + 40)
        .chain(end - start - 80..=end - start);
    let mut verdicts = [0usize; 2];
    for pos in positions {
        let at = start + pos;
        for insert in [&b"<"[..], b"&#65;", b"<!--x-->", b"&lt;", b"]]>"] {
            let mut b = body.clone();
            b.splice(at..at, insert.iter().copied());
            let seeds = 1..=u64::from(pos % 7 == 0);
            let out = agrees_with_general(&b, seeds);
            verdicts[usize::from(out.error.is_some())] += 1;
            if insert == b"<!--x-->" {
                assert_eq!(out.error, None, "comment at {pos}");
                assert_eq!(out.message.unwrap().into_call().unwrap().params, v);
            }
        }
    }
    assert!(verdicts[0] > 200 && verdicts[1] > 200, "{verdicts:?}");
}

/// CRLF line ends, and damage of every kind at a few places.
#[test]
fn crlf_blocks_and_damage_agree_with_the_general_path() {
    let (v, body) = wrapped_call(60_000, crate::LineEnd::CrLf);
    let out = agrees_with_general(&body, 1..=3);
    assert_eq!(out.message.unwrap().into_call().unwrap().params, v);
    let start = body.windows(8).position(|w| w == b"<base64>").unwrap() + 8;
    let block = crate::lines::MAX_LINES * 78;
    for pos in [0, 1, 2, 75, 76, 77, 78, 79, block - 2, block, block + 1] {
        let at = start + pos;
        for (insert, cut) in [
            (&b"<"[..], 0),
            (b"\n", 0),
            (b"\r", 0),
            (b"!", 1),
            (b"=", 1),
            (b"", 1),
            (b"&#13;", 0),
        ] {
            let mut b = body.clone();
            b.splice(at..at + cut, insert.iter().copied());
            agrees_with_general(&b, 1..=2);
        }
    }
}

/// Several values, each ending inside a line: the next one can start
/// inside a replay of the previous one's last line; empty values too.
#[test]
fn values_starting_inside_replays_agree_with_the_general_path() {
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 31 + (i >> 3)) as u8).collect();
    let mut items: Vec<V> = [0usize, 1, 56, 57, 58, 114, 200, 2999]
        .iter()
        .map(|&n| V::Base64(data[..n].to_vec()))
        .collect();
    items.push(V::Array(items.clone()));
    for wrap in [crate::LineEnd::Lf, crate::LineEnd::CrLf] {
        let opts = crate::EncodeOptions {
            wrap: Some(wrap),
            ..Default::default()
        };
        let body = crate::encode_call("m", &items, &opts)
            .unwrap()
            .to_vec()
            .unwrap();
        let out = agrees_with_general(&body, 1..=5);
        assert_eq!(out.message.unwrap().into_call().unwrap().params, items);
        let bytewise = crate::testutil::run_bytewise(&Limits::default(), &body);
        assert_eq!(
            bytewise,
            crate::testutil::run_general(&Limits::default(), &body)
        );
    }
    for text in ["<base64/>", "<base64></base64>", "<base64>\n</base64>"] {
        assert_eq!(
            param(&format!("<value>{text}</value>")),
            V::Base64(Vec::new())
        );
    }
}

/// A regular value stays on the fast path across inputs, staging ahead of
/// the tokenizer, and `offset` still counts every byte fed.
#[test]
fn regular_values_stay_on_the_fast_path() {
    for wrap in [crate::LineEnd::Lf, crate::LineEnd::CrLf] {
        let (v, body) = wrapped_call(200_000, wrap);
        let mut p =
            crate::Parser::new(Limits::default(), crate::testutil::RecordSink::new(1 << 20));
        let mut fed = 0;
        for c in body.chunks(10_000) {
            let last = fed + c.len() == body.len();
            p.feed(c, last).unwrap();
            fed += c.len();
            assert_eq!(p.offset(), fed as u64);
            if (20_000..200_000).contains(&fed) {
                let lines = p.st.lines.as_deref().unwrap();
                assert!(lines.active, "fast path on at {fed}");
                assert!(p.tk.offset() < fed as u64, "staged ahead at {fed}");
            }
        }
        let (msg, _) = p.finish().unwrap();
        assert_eq!(msg.into_call().unwrap().params, v);
    }
}

/// Text before a type element is an error at the text's first byte, also
/// when that byte is the CR of a CRLF and the CRLF arrives whole (found by
/// the `xmlrpc_split` fuzz target: the whole body pointed at the LF, a
/// body cut between CR and LF at the CR).
#[test]
fn text_before_a_type_element_points_at_its_first_byte() {
    for text in ["\r\nx", "x\r\n", "\r\n\r\nx", " \r\n x"] {
        let body = wrap(&format!("<value>{text}<string>a</string></value>"));
        let at = body.find("<value>").unwrap() as u64 + 7;
        let out = run_all(&Limits::default(), body.as_bytes(), 4096, 20);
        let (kind, offset, _, msg) = out.error.expect("an error");
        assert_eq!(
            (kind, offset, msg),
            (
                ErrorKind::Malformed,
                at,
                "text and a type element in one value"
            ),
            "{text:?}"
        );
    }
}
