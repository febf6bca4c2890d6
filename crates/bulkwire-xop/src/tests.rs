//! Unit tests of the whole parser on small hand-made messages. Each runs
//! whole, byte by byte and at random splits, which must agree.

use crate::testutil::{random_splits, run_bytewise, run_split, run_whole, Outcome, RecordingSink};
use crate::{build, ErrorKind, LimitKind, Limits, Parser, Select, SoapVersion};

const S11: &str = "http://schemas.xmlsoap.org/soap/envelope/";
const S12: &str = "http://www.w3.org/2003/05/soap-envelope";
const B: &str = "b-1";

fn select() -> Select {
    Select::new()
        .binary("/Envelope/Body/{urn:m}upload/data")
        .unwrap()
        .text("/Envelope/Body/{urn:m}upload/name")
        .unwrap()
        .text("/Envelope/Body/{urn:m}upload/contentType")
        .unwrap()
}

fn envelope(ns: &str, inner: &str) -> String {
    format!(
        "<s:Envelope xmlns:s=\"{ns}\"><s:Body><m:upload xmlns:m=\"urn:m\">{inner}</m:upload></s:Body></s:Envelope>"
    )
}

fn inc(cid: &str) -> String {
    format!("<x:Include xmlns:x=\"http://www.w3.org/2004/08/xop/include\" href=\"cid:{cid}\"/>")
}

/// `(headers, data)` parts as a multipart/related body.
fn related(parts: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (h, d) in parts {
        out.extend_from_slice(format!("--{B}\r\n{h}\r\n\r\n").as_bytes());
        out.extend_from_slice(d);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{B}--\r\n").as_bytes());
    out
}

const ROOT_H: &str = "Content-Type: application/xop+xml; type=\"text/xml\"\r\nContent-ID: <root>";

fn att_h(cid: &str) -> String {
    format!("Content-Type: image/png\r\nContent-ID: <{cid}>")
}

fn mtom_ct(extra: &str) -> String {
    format!("multipart/related; type=\"application/xop+xml\"; boundary={B}{extra}")
}

fn run_with(ct: &str, body: &[u8], limits: Limits) -> Outcome {
    let mk = || Parser::new(ct, select(), limits.clone(), RecordingSink::default()).unwrap();
    let whole = run_whole(mk(), body);
    assert_eq!(run_bytewise(mk(), body), whole, "byte by byte");
    for seed in 0..40 {
        let splits = random_splits(body.len(), 1 + seed as usize % 5, seed + 1);
        assert_eq!(run_split(mk(), body, &splits), whole, "splits {splits:?}");
    }
    whole
}

fn run(ct: &str, body: &[u8]) -> Outcome {
    run_with(ct, body, Limits::default())
}

fn err(o: Outcome) -> (ErrorKind, u64, Option<usize>, Option<(LimitKind, u64)>) {
    o.expect_err("an error")
}

#[test]
fn mtom_with_include_and_fields() {
    let env = envelope(
        S11,
        &format!("<name>a.png</name><data>{}</data>", inc("a%40b")),
    );
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let body = related(&[(ROOT_H, env.as_bytes()), (&att_h("a@b"), &data)]);
    let m = run(&mtom_ct("; start=\"<root>\""), &body).unwrap();
    assert_eq!(m.version, SoapVersion::Soap11);
    assert_eq!(m.root.as_ref().unwrap().cid.as_deref(), Some("root"));
    let op = m.operation.as_ref().unwrap();
    assert_eq!(
        (op.ns.as_deref(), op.local.as_str()),
        (Some("urn:m"), "upload")
    );
    assert_eq!(m.field("/Envelope/Body/upload/name"), Some("a.png"));
    assert_eq!(m.includes.len(), 1);
    assert_eq!(m.includes[0].path, "/Envelope/Body/upload/data");
    let b = m.binary("/Envelope/Body/upload/data").unwrap();
    assert_eq!(b.cid.as_deref(), Some("a@b"));
    assert_eq!(b.content_type.as_deref(), Some("image/png"));
    assert_eq!(b.output.data, data);
    assert_eq!(b.len, 3000);
    assert_eq!(b.output.paths_at_begin, vec!["/Envelope/Body/upload/data"]);
    assert!(m.unreferenced.is_empty());
}

#[test]
fn attachment_before_root_and_unreferenced() {
    let env = envelope(S11, &format!("<data>{}</data>", inc("x")));
    let body = related(&[
        (&att_h("x"), b"first"),
        (&att_h("spare"), b"extra"),
        (ROOT_H, env.as_bytes()),
    ]);
    let m = run(&mtom_ct("; start=\"<root>\""), &body).unwrap();
    assert_eq!(m.root.as_ref().unwrap().index, 2);
    assert_eq!(m.binaries.len(), 2);
    assert_eq!(m.binaries[0].output.paths_at_begin, Vec::<String>::new());
    assert_eq!(m.binaries[0].paths, vec!["/Envelope/Body/upload/data"]);
    assert_eq!(m.binaries[0].output.data, b"first");
    assert_eq!(m.unreferenced, vec!["spare"]);
}

#[test]
fn inline_base64_soap12() {
    let env = envelope(
        S12,
        "<name>n</name><data xmlns:xm=\"http://www.w3.org/2005/05/xmlmime\" xm:contentType=\"text/plain\">\n aGVs\r\n bG8=\n</data><other>x</other>",
    );
    let m = run("application/soap+xml; charset=utf-8", env.as_bytes()).unwrap();
    assert_eq!(m.version, SoapVersion::Soap12);
    assert!(!m.is_mtom());
    let b = m.binary("/Envelope/Body/upload/data").unwrap();
    assert_eq!(b.output.data, b"hello");
    assert_eq!(b.cid, None);
    assert_eq!(b.content_type.as_deref(), Some("text/plain"));
    assert_eq!(m.fields.len(), 1);
    // An empty binary element is an empty value.
    let env = envelope(S11, "<data/>");
    let m = run("text/xml", env.as_bytes()).unwrap();
    assert_eq!(m.binaries[0].len, 0);
}

#[test]
fn bad_base64_is_placed_in_the_document() {
    let env = envelope(S11, "<data>aGVs!G8=</data>");
    let at = env.find('!').unwrap() as u64;
    let (kind, offset, ..) = err(run("text/xml", env.as_bytes()));
    assert_eq!((kind, offset), (ErrorKind::Malformed, at));
    let env = envelope(S11, "<data>aGVsbG8</data>");
    let at = env.find("</data>").unwrap() as u64;
    let (kind, offset, ..) = err(run("text/xml", env.as_bytes()));
    assert_eq!((kind, offset), (ErrorKind::Truncated, at));
}

#[test]
fn include_rules() {
    let ct = mtom_ct("");
    let cases: [(String, &str); 6] = [
        (format!("<data>x{}</data>", inc("a")), "<x:Include"),
        (format!("<data>{}y</data>", inc("a")), "y</data>"),
        (format!("<data><b/>{}</data>", inc("a")), "<b/>"),
        (format!("<other><b/>{}</other>", inc("a")), "<x:Include"),
        (
            format!("<data>{}{}</data>", inc("a"), inc("a")),
            "<x:Include",
        ),
        (format!("<data>{}</data>", inc("root")), "<x:Include"),
    ];
    for (inner, marker) in cases {
        let env = envelope(S11, &inner);
        let body = related(&[(ROOT_H, env.as_bytes()), (&att_h("a"), b"z")]);
        let head = body.windows(5).position(|w| w == b"<s:En").unwrap();
        let at = head + env.rfind(marker).unwrap();
        let (kind, offset, part, _) = err(run(&ct, &body));
        assert_eq!(
            (kind, offset, part),
            (ErrorKind::Malformed, at as u64, Some(0)),
            "{inner}"
        );
    }
    // White space around a sole Include is fine.
    let env = envelope(S11, &format!("<data>\n  {}\n</data>", inc("a")));
    let body = related(&[(ROOT_H, env.as_bytes()), (&att_h("a"), b"z")]);
    assert!(run(&ct, &body).is_ok());
}

#[test]
fn href_must_be_cid() {
    let env = envelope(S11, "<data><x:Include xmlns:x=\"http://www.w3.org/2004/08/xop/include\" href=\"http://169.254.169.254/\"/></data>");
    let body = related(&[(ROOT_H, env.as_bytes())]);
    let (kind, ..) = err(run(&mtom_ct(""), &body));
    assert_eq!(kind, ErrorKind::Unsupported);
}

#[test]
fn content_id_errors() {
    let env = envelope(S11, &format!("<data>{}</data>", inc("a")));
    let ct = mtom_ct("");
    // Missing attachment.
    let body = related(&[(ROOT_H, env.as_bytes())]);
    let (kind, offset, ..) = err(run(&ct, &body));
    assert_eq!(
        (kind, offset),
        (ErrorKind::Malformed, body.len() as u64 - 2)
    );
    // Attachment without Content-ID.
    let body = related(&[(ROOT_H, env.as_bytes()), ("Content-Type: a/b", b"z")]);
    let (kind, _, part, _) = err(run(&ct, &body));
    assert_eq!((kind, part), (ErrorKind::Malformed, Some(1)));
    // Duplicate, with and without angle brackets.
    let body = related(&[
        (ROOT_H, env.as_bytes()),
        (&att_h("a"), b"z"),
        ("Content-ID: a", b"z"),
    ]);
    let (kind, _, part, _) = err(run(&ct, &body));
    assert_eq!((kind, part), (ErrorKind::Malformed, Some(2)));
    // `start` naming no part.
    let body = related(&[(ROOT_H, env.as_bytes()), (&att_h("a"), b"z")]);
    let (kind, ..) = err(run(&mtom_ct("; start=\"<nope>\""), &body));
    assert_eq!(kind, ErrorKind::Malformed);
    // A base64-encoded attachment is refused, not stored encoded.
    let h = format!("{}\r\nContent-Transfer-Encoding: base64", att_h("a"));
    let body = related(&[(ROOT_H, env.as_bytes()), (&h, b"eg==")]);
    let (kind, _, part, _) = err(run(&ct, &body));
    assert_eq!((kind, part), (ErrorKind::Unsupported, Some(1)));
}

#[test]
fn media_types_and_versions() {
    let env = envelope(S12, "");
    let body = related(&[(ROOT_H, env.as_bytes())]);
    let (kind, ..) = err(run(&mtom_ct(""), &body));
    assert_eq!(
        kind,
        ErrorKind::Malformed,
        "SOAP 1.2 envelope, text/xml type"
    );
    let p = Parser::new(
        "application/json",
        select(),
        Limits::default(),
        RecordingSink::default(),
    );
    assert_eq!(p.err().unwrap().http_status(), 415);
    let p = Parser::new(
        "multipart/form-data; boundary=x",
        select(),
        Limits::default(),
        RecordingSink::default(),
    );
    assert_eq!(p.err().unwrap().kind(), ErrorKind::Unsupported);
    let body = related(&[("Content-Type: text/xml", env.as_bytes())]);
    let (kind, ..) = err(run(&mtom_ct(""), &body));
    assert_eq!(kind, ErrorKind::Unsupported, "root not xop+xml");
    let (kind, ..) = err(run("text/xml", b"<!DOCTYPE x [<!ENTITY e \"x\">]><x/>"));
    assert_eq!(kind, ErrorKind::Unsupported, "no DTD");
    let (kind, ..) = err(run("text/xml", b"<Envelope/>"));
    assert_eq!(kind, ErrorKind::Malformed, "not in the SOAP namespace");
}

#[test]
fn limits_are_exact_whatever_the_chunking() {
    // The envelope cap does not count inline base64.
    let b64 = "QUFB".repeat(500);
    let env = envelope(S11, &format!("<name>n</name><data>{b64}</data>"));
    let limits = Limits {
        envelope_bytes: 200,
        ..Limits::default()
    };
    let m = run_with("text/xml", env.as_bytes(), limits.clone()).unwrap();
    assert_eq!(m.binaries[0].len, 1500);
    let env = envelope(S11, &format!("<other>{}</other>", "x".repeat(300)));
    let (kind, offset, _, limit) = err(run_with("text/xml", env.as_bytes(), limits));
    assert_eq!((kind, offset), (ErrorKind::Limit, 200));
    assert_eq!(limit, Some((LimitKind::EnvelopeBytes, 200)));
    // A text field over its cap.
    let env = envelope(S11, "<name>abc&amp;defgh</name>");
    let limits = Limits {
        text_bytes: 6,
        ..Limits::default()
    };
    let (kind, offset, _, limit) = err(run_with("text/xml", env.as_bytes(), limits));
    assert_eq!(
        (kind, limit),
        (ErrorKind::Limit, Some((LimitKind::TextBytes, 6)))
    );
    assert_eq!(offset, env.find("def").unwrap() as u64 + 2);
}

#[test]
fn truncated_message() {
    let env = envelope(S11, "<name>n</name>");
    let (kind, ..) = err(run("text/xml", &env.as_bytes()[..env.len() - 3]));
    assert_eq!(kind, ErrorKind::Truncated);
    let body = related(&[(ROOT_H, env.as_bytes())]);
    let (kind, ..) = err(run(&mtom_ct(""), &body[..body.len() - 5]));
    assert_eq!(kind, ErrorKind::Truncated);
}

#[test]
fn builder_round_trip_and_checks() {
    let mut b = build::Builder::new(SoapVersion::Soap12);
    let env = envelope(
        S12,
        &format!(
            "<name>f</name><data>{}</data>",
            build::include_element("q r%@x")
        ),
    );
    let data = vec![b'-'; 5000];
    b.envelope(env.clone())
        .bytes("q r%@x", "application/pdf", data.clone());
    let body = b.finish().unwrap();
    let bytes = body.to_vec().unwrap();
    assert_eq!(bytes.len() as u64, body.content_length());
    assert!(body
        .content_type()
        .contains("start-info=\"application/soap+xml\""));
    let m = run(body.content_type(), &bytes).unwrap();
    assert_eq!(m.version, SoapVersion::Soap12);
    assert_eq!(m.binaries[0].output.data, data);
    assert_eq!(m.binaries[0].cid.as_deref(), Some("q r%@x"));
    // An Include naming nothing, and a duplicate Content-ID, are refused.
    b.envelope(env.clone());
    assert!(b.finish().is_err());
    b.envelope(env)
        .bytes("q r%@x", "a/b", "1")
        .bytes("q r%@x", "a/b", "2");
    assert!(b.finish().is_err());
}
