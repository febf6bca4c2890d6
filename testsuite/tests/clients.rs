//! Multipart requests captured from real clients parse as those clients
//! meant them: whole, byte by byte and at 100 random split points.

use bulkwire_multipart::testutil::{random_splits, run_bytewise, run_split, run_whole, Outcome};
use bulkwire_multipart::{ContentType, Limits, Parser, PartInfo, Subtype};
use bulkwire_testsuite::{capture, capture_names};

fn parse(file: &str) -> (ContentType, Vec<(PartInfo, Vec<u8>)>) {
    let c = capture(file);
    let ct_text = c.header("content-type").expect("content type").to_owned();
    let ct = ContentType::parse(&ct_text).unwrap();
    let mk = || Parser::from_content_type(&ct_text, Limits::default()).unwrap();
    let whole = run_whole(mk(), &c.body);
    assert_eq!(whole.error, None, "{file}");
    let same = |o: Outcome, how: &str| assert_eq!(o.events, whole.events, "{file}: {how}");
    same(run_bytewise(mk(), &c.body), "byte by byte");
    for seed in 0..100u64 {
        let splits = random_splits(c.body.len(), 1 + (seed % 4) as usize, seed + 11);
        same(run_split(mk(), &c.body, &splits), "random splits");
    }
    (ct, whole.parts())
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

#[test]
fn every_multipart_capture_is_covered() {
    let multipart: Vec<String> = capture_names()
        .into_iter()
        .filter(|f| {
            capture(f)
                .header("content-type")
                .is_some_and(|v| v.starts_with("multipart/"))
        })
        .collect();
    let covered = [
        "curl_formdata-16.http",
        "requests_formdata-5.http",
        "toolbelt_formdata-6.http",
        "cxf_soap11_small-12.http",
        "cxf_soap11_8k-13.http",
        "cxf_soap12_small-14.http",
        "cxf_soap12_8k-15.http",
        "node_soap_mtom-17.http",
    ];
    assert_eq!(multipart.len(), covered.len());
    for f in &multipart {
        assert!(covered.contains(&f.as_str()), "{f} has no test");
    }
}

fn form_pair(file: &str, title: &str, filename: &str, data: &[u8]) {
    let (ct, parts) = parse(file);
    assert_eq!(ct.subtype, Subtype::FormData);
    assert_eq!(parts.len(), 2, "{file}");
    assert_eq!(parts[0].0.name.as_deref(), Some("title"));
    assert_eq!(parts[0].1, title.as_bytes());
    assert!(!parts[0].0.is_file());
    assert_eq!(parts[1].0.name.as_deref(), Some("file"));
    assert_eq!(
        parts[1].0.filename.as_deref(),
        Some(filename),
        "{file}: raw UTF-8 filename"
    );
    assert_eq!(
        parts[1].0.content_type.as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(parts[1].1, data, "{file}");
}

#[test]
fn curl_form() {
    form_pair("curl_formdata-16.http", "héllo", "naïve.bin", b"abc\0def");
}

#[test]
fn requests_form_with_boundary_like_data() {
    let data = b"\0\x01binary\r\n--notaboundary\r\n";
    form_pair("requests_formdata-5.http", "héllo", "résumé.bin", data);
}

#[test]
fn requests_toolbelt_form() {
    form_pair("toolbelt_formdata-6.http", "x", "a.bin", &[0; 16]);
}

/// CXF: CRLF before the first boundary, `Content-Transfer-Encoding: binary`,
/// no CRLF after the close delimiter, chunked transfer coding in the 8k case.
fn cxf(file: &str, soap: &str, len: usize) {
    let (ct, parts) = parse(file);
    assert_eq!(ct.subtype, Subtype::Related);
    assert_eq!(ct.start.as_deref(), Some("<root.message@cxf.apache.org>"));
    assert_eq!(ct.start_info.as_deref(), Some(soap));
    assert_eq!(parts.len(), 2, "{file}");
    let root = &parts[0].0;
    assert_eq!(
        root.content_id.as_deref(),
        Some("<root.message@cxf.apache.org>")
    );
    let root_type = root.content_type.as_deref().unwrap();
    assert!(
        root_type.starts_with("application/xop+xml") && root_type.contains(soap),
        "{root_type}"
    );
    assert!(parts[0].1.starts_with(b"<soap:Envelope") && parts[0].1.ends_with(b"</soap:Envelope>"));
    let att = &parts[1];
    assert_eq!(att.0.content_transfer_encoding.as_deref(), Some("binary"));
    let cid = att.0.content_id.as_deref().unwrap();
    let href = format!(
        "href=\"cid:{}\"",
        cid.trim_matches(|c| c == '<' || c == '>')
    );
    assert!(
        String::from_utf8_lossy(&parts[0].1).contains(&href),
        "{file}: root refers to {cid}"
    );
    assert_eq!(att.1, pattern(len), "{file}");
}

#[test]
fn cxf_soap11_small() {
    cxf("cxf_soap11_small-12.http", "text/xml", 64);
}

#[test]
fn cxf_soap11_8k() {
    cxf("cxf_soap11_8k-13.http", "text/xml", 8192);
}

#[test]
fn cxf_soap12_small() {
    cxf("cxf_soap12_small-14.http", "application/soap+xml", 64);
}

#[test]
fn cxf_soap12_8k() {
    cxf("cxf_soap12_8k-15.http", "application/soap+xml", 8192);
}

#[test]
fn node_soap_mtom() {
    let (ct, parts) = parse("node_soap_mtom-17.http");
    assert_eq!(ct.subtype, Subtype::Related);
    assert_eq!(
        ct.start.as_deref(),
        Some("<eb8e3b36-2928-4acf-b6ef-fbe5f2e1beac>")
    );
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].0.content_id.as_deref(), ct.start.as_deref());
    assert!(String::from_utf8_lossy(&parts[0].1).contains("href=\"cid:file_0\""));
    assert_eq!(parts[1].0.content_id.as_deref(), Some("<file_0>"));
    assert_eq!(parts[1].0.filename.as_deref(), Some("hello.bin"));
    assert_eq!(parts[1].1, b"\0\x01\x02\xff\r\n--");
}
