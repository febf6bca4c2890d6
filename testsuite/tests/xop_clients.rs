//! SOAP requests captured from real clients (Apache CXF MTOM for SOAP 1.1
//! and 1.2, node-soap MTOM, zeep with inline base64) parse as those clients
//! meant them: whole, byte by byte and at 100 random split points, with
//! identical results. Expected values are computed here independently of
//! the codec: attachment bytes located in the raw body by their part
//! headers, inline base64 decoded with the `base64` crate, hashed with sha2.

use base64::Engine;
use bulkwire_testsuite::{capture, Capture};
use bulkwire_xop::testutil::{
    random_splits, run_bytewise, run_split, run_whole, Outcome, RecordingSink,
};
use bulkwire_xop::{Limits, Message, Parser, Select, SoapVersion};
use sha2::{Digest, Sha256};

const UPLOAD_NS: &str = "http://example.org/upload";
const DATA: &str = "/Envelope/Body/upload/data";
const NAME: &str = "/Envelope/Body/upload/name";

fn select() -> Select {
    Select::new()
        .binary(&format!("/Envelope/Body/{{{UPLOAD_NS}}}upload/data"))
        .unwrap()
        .text(&format!("/Envelope/Body/{{{UPLOAD_NS}}}upload/name"))
        .unwrap()
        .text(&format!("/Envelope/Body/{{{UPLOAD_NS}}}upload/contentType"))
        .unwrap()
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Parses a capture every way and checks the runs agree.
fn parse(file: &str) -> (Capture, Message<bulkwire_xop::testutil::Recorded>) {
    let c = capture(file);
    let ct = c.header("content-type").expect("content type").to_owned();
    let mk = || Parser::new(&ct, select(), Limits::default(), RecordingSink::default()).unwrap();
    let whole = run_whole(mk(), &c.body);
    let same = |o: Outcome, how: &str| assert_eq!(o, whole, "{file}: {how}");
    same(run_bytewise(mk(), &c.body), "byte by byte");
    for seed in 0..100u64 {
        let splits = random_splits(c.body.len(), 1 + (seed % 6) as usize, seed + 101);
        same(run_split(mk(), &c.body, &splits), "random splits");
    }
    let msg = whole.unwrap_or_else(|e| panic!("{file}: {e:?}"));
    (c, msg)
}

/// The data of the part whose header block contains `Content-ID: <cid>`,
/// found by plain byte search in the raw body: from the blank line after
/// that header to the CRLF before the next delimiter.
fn locate(body: &[u8], boundary: &str, cid: &str) -> Vec<u8> {
    let find = |hay: &[u8], needle: &[u8], from: usize| {
        hay[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|i| i + from)
    };
    let header = format!("Content-ID: <{cid}>");
    let h = find(body, header.as_bytes(), 0).expect("part header");
    let start = find(body, b"\r\n\r\n", h).unwrap() + 4;
    let end = find(body, format!("\r\n--{boundary}").as_bytes(), start).unwrap();
    body[start..end].to_vec()
}

fn boundary_of(c: &Capture) -> String {
    let ct = c.header("content-type").unwrap();
    let b = ct.split("boundary=").nth(1).unwrap();
    b.trim_start_matches('"')
        .split(['"', ';'])
        .next()
        .unwrap()
        .to_owned()
}

/// Checks an MTOM upload with one attachment named by `href_cid`.
fn mtom(file: &str, version: SoapVersion, href_cid: &str, len: usize) {
    let (c, m) = parse(file);
    assert_eq!(m.version, version, "{file}");
    assert!(m.is_mtom());
    let root = m.root.as_ref().unwrap();
    assert_eq!(root.index, 0);
    assert!(root.content_type.starts_with("application/xop+xml"));
    let op = m.operation.as_ref().unwrap();
    assert_eq!(
        (op.ns.as_deref(), op.local.as_str()),
        (Some(UPLOAD_NS), "upload")
    );
    assert_eq!(m.field(NAME), Some("hello.bin"), "{file}");
    assert_eq!(m.includes.len(), 1);
    assert_eq!(
        (m.includes[0].path.as_str(), m.includes[0].cid.as_str()),
        (DATA, href_cid)
    );
    assert_eq!(m.binaries.len(), 1);
    let b = &m.binaries[0];
    assert_eq!(b.cid.as_deref(), Some(href_cid));
    assert_eq!(b.paths, vec![DATA]);
    assert_eq!(
        b.output.paths_at_begin,
        vec![DATA],
        "the sink was told the path"
    );
    assert_eq!(b.content_type.as_deref(), Some("application/octet-stream"));
    let expected = locate(&c.body, &boundary_of(&c), href_cid);
    assert_eq!(expected.len(), len, "{file}: located attachment");
    assert_eq!(b.len, len as u64);
    assert_eq!(sha(&b.output.data), sha(&expected), "{file}");
    assert!(m.unreferenced.is_empty());
}

#[test]
fn cxf_soap11_small() {
    let cid = "92572b7c-6161-40b0-a036-d3ff8277637a-1@cxf.apache.org";
    mtom("cxf_soap11_small-12.http", SoapVersion::Soap11, cid, 64);
}

#[test]
fn cxf_soap12_small() {
    let cid = "457bef0f-83ab-4f34-9420-9db810b03fae-1@cxf.apache.org";
    mtom("cxf_soap12_small-14.http", SoapVersion::Soap12, cid, 64);
}

#[test]
fn cxf_soap11_8k() {
    let (c, _) = parse("cxf_soap11_8k-13.http");
    let cid = cid_in(&c.body);
    mtom("cxf_soap11_8k-13.http", SoapVersion::Soap11, &cid, 8192);
}

#[test]
fn cxf_soap12_8k_chunked() {
    let c = capture("cxf_soap12_8k-15.http");
    assert_eq!(c.header("transfer-encoding"), Some("chunked"));
    let cid = cid_in(&c.body);
    mtom("cxf_soap12_8k-15.http", SoapVersion::Soap12, &cid, 8192);
}

/// The `href` cid in an envelope, by plain text search.
fn cid_in(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let at = text.find("href=\"cid:").unwrap() + 10;
    text[at..].split('"').next().unwrap().to_owned()
}

#[test]
fn cxf_quirks_are_present() {
    // What makes the CXF captures worth having: CRLF before the first
    // delimiter, no CRLF after the close delimiter, binary transfer
    // encoding, href without angle brackets.
    let c = capture("cxf_soap11_small-12.http");
    assert!(c.body.starts_with(b"\r\n--uuid:"));
    assert!(c.body.ends_with(b"--"));
    assert!(String::from_utf8_lossy(&c.body).contains("Content-Transfer-Encoding: binary"));
    assert!(cid_in(&c.body).contains('@') && !cid_in(&c.body).starts_with('<'));
}

#[test]
fn node_soap_mtom() {
    mtom("node_soap_mtom-17.http", SoapVersion::Soap11, "file_0", 8);
    let (_, m) = parse("node_soap_mtom-17.http");
    // Attachment data ends in CRLF "--": boundary-like, still data.
    assert_eq!(m.binaries[0].output.data, b"\x00\x01\x02\xff\r\n--");
    assert_eq!(
        m.root.unwrap().cid.as_deref(),
        Some("eb8e3b36-2928-4acf-b6ef-fbe5f2e1beac")
    );
}

#[test]
fn zeep_inline_base64() {
    let (c, m) = parse("zeep-7.http");
    assert_eq!(m.version, SoapVersion::Soap11);
    assert!(!m.is_mtom());
    assert_eq!(m.field(NAME), Some("hello.bin"));
    assert!(m.includes.is_empty());
    let text = String::from_utf8_lossy(&c.body);
    let b64 = text
        .split("<data>")
        .nth(1)
        .unwrap()
        .split("</data>")
        .next()
        .unwrap();
    let expected = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    let b = m.binary(DATA).expect("inline data");
    assert_eq!(b.cid, None);
    assert_eq!(b.len, expected.len() as u64);
    assert_eq!(sha(&b.output.data), sha(&expected));
    assert_eq!(b.output.paths_at_begin, vec![DATA]);
}

#[test]
fn a_wrong_namespace_selects_nothing() {
    // Paths match by namespace, not by local name alone.
    let c = capture("cxf_soap11_small-12.http");
    let ct = c.header("content-type").unwrap();
    let sel = Select::new()
        .text("/Envelope/Body/{urn:other}upload/name")
        .unwrap();
    let m = run_whole(
        Parser::new(ct, sel, Limits::default(), RecordingSink::default()).unwrap(),
        &c.body,
    )
    .unwrap();
    assert!(m.fields.is_empty());
    assert_eq!(
        m.binaries.len(),
        1,
        "attachments stream whatever the selection"
    );
}
