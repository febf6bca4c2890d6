//! `POST /soap` and `GET /soap?wsdl` over real HTTP: SOAP 1.1 and 1.2, MTOM
//! (built with `bulkwire_xop::build::Builder`) and inline base64, each
//! upload read back through `GET /v1/media/{id}` and compared by SHA-256;
//! faults (status, code, detail) after which nothing is listed or left on
//! disk; the WSDL read with `bulkwire_xml`; and memory that stays bounded
//! for 64 MiB uploads.

mod common;
mod soap_util;

use bulkwire_server::Limits;
use bulkwire_xop::build::{include_element, Builder};
use bulkwire_xop::SoapVersion;
use common::*;
use soap_util::*;

const ALICE: &str = "alice:wonder:land";

struct Reply {
    status: u16,
    content_type: String,
    www_authenticate: Option<String>,
    body: Vec<u8>,
}

async fn post(
    h: &Harness,
    ct: &str,
    auth: Option<String>,
    body: impl Into<reqwest::Body>,
) -> Reply {
    let mut rb = h
        .http
        .post(h.url("/soap"))
        .header("content-type", ct)
        .header("soapaction", "\"urn:bulkwire:media#upload\"")
        .body(body);
    if let Some(a) = auth {
        rb = rb.header("authorization", a);
    }
    let r = rb.send().await.unwrap();
    let header = |n: &str| r.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
    Reply {
        status: r.status().as_u16(),
        content_type: header("content-type").unwrap_or_default(),
        www_authenticate: header("www-authenticate"),
        body: r.bytes().await.unwrap().to_vec(),
    }
}

fn env_ns(v: SoapVersion) -> &'static str {
    match v {
        SoapVersion::Soap11 => SOAP11,
        SoapVersion::Soap12 => SOAP12,
    }
}

fn bare_type(v: SoapVersion) -> &'static str {
    match v {
        SoapVersion::Soap11 => "text/xml; charset=utf-8",
        SoapVersion::Soap12 => {
            "application/soap+xml; charset=utf-8; action=\"urn:bulkwire:media#upload\""
        }
    }
}

/// An MTOM body whose `data` is the attachment `data@test`.
fn mtom(
    v: SoapVersion,
    name: &str,
    ct: Option<&str>,
    data: Vec<u8>,
) -> (String, Vec<bytes::Bytes>) {
    let mut b = Builder::new(v);
    let env = envelope(env_ns(v), name, ct, &include_element("data@test"));
    b.envelope(env)
        .bytes("data@test", "application/octet-stream", data);
    let body = b.finish().unwrap();
    (body.content_type().to_owned(), body.to_bytes_vec().unwrap())
}

fn stream(segments: Vec<bytes::Bytes>) -> reqwest::Body {
    let it = segments.into_iter().map(Ok::<_, std::io::Error>);
    reqwest::Body::wrap_stream(futures_util::stream::iter(it))
}

/// Checks a 200 `uploadResponse` and reads the file back by its url.
async fn check_stored(h: &Harness, r: &Reply, v: SoapVersion, data: &[u8]) -> Uploaded {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let want_ct = match v {
        SoapVersion::Soap11 => "text/xml",
        SoapVersion::Soap12 => "application/soap+xml",
    };
    assert!(r.content_type.starts_with(want_ct), "{}", r.content_type);
    let u = uploaded(&r.body, env_ns(v));
    assert_eq!(u.size, data.len() as u64);
    assert_eq!(u.sha256, sha256(data));
    // The url is the item's link: absolute, fetched here without credentials.
    let link = h.url(&format!("/v1/media/{}?sig=", u.id));
    let url = u.url.as_deref().expect("a url for a credential with read");
    assert!(url.starts_with(&link), "{url} is not {link}…");
    let r = client().get(url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let back = r.bytes().await.unwrap();
    assert_eq!(sha256(&back), sha256(data));
    u
}

/// The listed metadata of the one stored file.
async fn only_listed(h: &Harness) -> serde_json::Value {
    let all = h.list_all().await;
    assert_eq!(all.len(), 1, "{all:?}");
    all[0].clone()
}

#[tokio::test]
async fn mtom_round_trips_soap11_and_soap12() {
    for (v, auth) in [
        (SoapVersion::Soap11, basic(ALICE)),
        (SoapVersion::Soap12, format!("Bearer {TOKEN}")),
    ] {
        let h = start(Limits::default()).await;
        let data = payload(300_000, 11);
        let (ct, segs) = mtom(v, "photo.png", Some("image/png"), data.clone());
        let r = post(&h, &ct, Some(auth), stream(segs)).await;
        check_stored(&h, &r, v, &data).await;
        let m = only_listed(&h).await;
        assert_eq!(m["filename"], "photo.png");
        assert_eq!(m["content_type"], "image/png");
        assert_eq!(m["field"], "data");
        assert_eq!(
            h.srv
                .state
                .metrics
                .uploads("soap", bulkwire_server::metrics::Outcome::Ok),
            1
        );
    }
}

#[tokio::test]
async fn inline_base64_round_trips_soap11_and_soap12() {
    for v in [SoapVersion::Soap11, SoapVersion::Soap12] {
        let h = start(Limits::default()).await;
        let data = payload(200_001, 12);
        let env = envelope(env_ns(v), "a &amp; b.bin", None, &base64_wrapped(&data));
        let r = post(&h, bare_type(v), Some(basic(ALICE)), env).await;
        check_stored(&h, &r, v, &data).await;
        let m = only_listed(&h).await;
        assert_eq!(m["filename"], "a & b.bin");
        assert_eq!(m["content_type"], "application/octet-stream");
    }
}

#[tokio::test]
async fn xmime_content_type_and_empty_data() {
    let h = start(Limits::default()).await;
    let env = envelope(SOAP11, "e.txt", None, "").replace(
        "<data>",
        "<data xmlns:xm=\"http://www.w3.org/2005/05/xmlmime\" xm:contentType=\"text/plain\">",
    );
    let r = post(&h, "text/xml", Some(basic(ALICE)), env).await;
    check_stored(&h, &r, SoapVersion::Soap11, b"").await;
    assert_eq!(only_listed(&h).await["content_type"], "text/plain");
}

#[tokio::test]
async fn an_unreferenced_attachment_is_not_stored() {
    let h = start(Limits::default()).await;
    let data = payload(5000, 3);
    let mut b = Builder::new(SoapVersion::Soap12);
    b.envelope(envelope(SOAP12, "x", None, &include_element("d@t")))
        .bytes("other@t", "application/octet-stream", payload(7000, 4))
        .bytes("d@t", "application/octet-stream", data.clone());
    let body = b.finish().unwrap();
    let r = post(
        &h,
        body.content_type(),
        Some(basic(ALICE)),
        body.to_vec().unwrap(),
    )
    .await;
    check_stored(&h, &r, SoapVersion::Soap12, &data).await;
    only_listed(&h).await;
    let p = h.probe();
    wait_until("one blob, no temp file", || {
        p.temp_count() == 0 && p.blob_count() == 1
    })
    .await;
}

/// Posts, expects a fault, and checks that nothing was kept.
async fn expect_fault(
    h: &Harness,
    ct: &str,
    auth: Option<String>,
    body: impl Into<reqwest::Body>,
    status: u16,
) -> (Reply, Fault) {
    let r = post(h, ct, auth, body).await;
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    let f = fault(&r.body);
    h.assert_empty().await;
    (r, f)
}

#[tokio::test]
async fn bad_credentials_are_a_401_fault_with_a_basic_challenge() {
    let h = start(Limits::default()).await;
    let env = envelope(SOAP11, "x", None, "AAAA");
    for auth in [
        None,
        Some(basic("alice:wrong")),
        Some("Bearer nope".to_owned()),
    ] {
        let (r, f) = expect_fault(&h, "text/xml", auth, env.clone(), 401).await;
        assert!(r.www_authenticate.unwrap().starts_with("Basic realm="));
        assert_eq!(
            (f.code.as_str(), f.kind.as_str()),
            ("env:Client", "unauthorized")
        );
    }
    let env12 = envelope(SOAP12, "x", None, "AAAA");
    let (r, f) = expect_fault(&h, "application/soap+xml", None, env12, 401).await;
    assert!(r.content_type.starts_with("application/soap+xml"));
    assert_eq!(f.code, "env:Sender");
}

#[tokio::test]
async fn malformed_envelopes_are_400_client_faults() {
    let h = start(Limits::default()).await;
    let good = envelope(SOAP11, "x", None, "AAAA");
    let cases = [
        good.replace("</s:Envelope>", ""),
        good.replace("AAAA", "AA!A"),
        good.replace(SOAP11, "urn:not-soap"),
    ];
    for body in cases {
        let (_, f) = expect_fault(&h, "text/xml", Some(basic(ALICE)), body.clone(), 400).await;
        assert_eq!(f.code, "env:Client", "{body}");
        assert!(
            ["malformed", "truncated"].contains(&f.kind.as_str()),
            "{f:?}"
        );
    }
    // A DTD (SOAP 1.1 §3, SOAP 1.2 Part 1 §5: none allowed) is content
    // the codec refuses on purpose: 415, still a Client fault.
    let dtd = "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"b\">]><x/>";
    let (_, f) = expect_fault(&h, "text/xml", Some(basic(ALICE)), dtd, 415).await;
    assert_eq!(
        (f.code.as_str(), f.kind.as_str()),
        ("env:Client", "unsupported")
    );
    // A SOAP 1.2 envelope sent as SOAP 1.1 is refused too.
    let v12 = envelope(SOAP12, "x", None, "AAAA");
    expect_fault(&h, "text/xml", Some(basic(ALICE)), v12, 400).await;
}

#[tokio::test]
async fn missing_data_and_wrong_operation_are_400_faults() {
    let h = start(Limits::default()).await;
    let no_data = envelope(SOAP12, "x", None, "AAAA").replace("<data>AAAA</data>", "");
    let (_, f) = expect_fault(&h, "application/soap+xml", Some(basic(ALICE)), no_data, 400).await;
    assert_eq!(f.code, "env:Sender");
    assert!(f.reason.contains("no data"), "{f:?}");
    let wrong = envelope(SOAP11, "x", None, "AAAA").replace("m:upload", "m:delete");
    let (_, f) = expect_fault(&h, "text/xml", Some(basic(ALICE)), wrong, 400).await;
    assert!(f.reason.contains("unknown operation"), "{f:?}");
    let twice = envelope(SOAP11, "x", None, "AAAA").replace("</data>", "</data><data>AAAA</data>");
    let (_, f) = expect_fault(&h, "text/xml", Some(basic(ALICE)), twice, 400).await;
    assert!(f.reason.contains("more than one"), "{f:?}");
}

#[tokio::test]
async fn not_soap_is_a_415_fault() {
    let h = start(Limits::default()).await;
    let (_, f) = expect_fault(&h, "application/json", Some(basic(ALICE)), "{}", 415).await;
    assert_eq!(f.kind, "unsupported");
}

#[tokio::test]
async fn limits_are_413_faults_naming_the_limit() {
    // The file, inline and as an attachment.
    let h = start(Limits {
        file_bytes: 1000,
        ..Limits::default()
    })
    .await;
    let env = envelope(SOAP11, "big", None, &base64_wrapped(&payload(1001, 1)));
    let (_, f) = expect_fault(&h, "text/xml", Some(basic(ALICE)), env, 413).await;
    assert_eq!(
        (f.code.as_str(), f.limit.as_deref()),
        ("env:Client", Some("file_bytes"))
    );
    let (ct, segs) = mtom(SoapVersion::Soap12, "big", None, payload(1001, 2));
    let (_, f) = expect_fault(&h, &ct, Some(basic(ALICE)), stream(segs), 413).await;
    assert_eq!(
        (f.code.as_str(), f.limit.as_deref()),
        ("env:Sender", Some("file_bytes"))
    );
    // The codec's: the envelope outside the data, a text field.
    let h = start(Limits {
        soap_envelope_bytes: 400,
        field_bytes: 50,
        ..Limits::default()
    })
    .await;
    let padded = envelope(SOAP11, "x", None, "AAAA").replace(
        "<s:Header/>",
        &format!("<s:Header>{}</s:Header>", " ".repeat(500)),
    );
    let (_, f) = expect_fault(&h, "text/xml", Some(basic(ALICE)), padded, 413).await;
    assert_eq!(f.limit.as_deref(), Some("soap_envelope_bytes"));
    let long_name = envelope(SOAP11, &"n".repeat(51), None, "AAAA");
    let (_, f) = expect_fault(&h, "text/xml", Some(basic(ALICE)), long_name, 413).await;
    assert_eq!(f.limit.as_deref(), Some("field_bytes"));
    assert!(h
        .metric("bulkwire_rejected_total{reason=\"limit:field_bytes\"}")
        .ends_with(" 1"));
}

#[tokio::test]
async fn wsdl_is_served_without_credentials_and_describes_both_bindings() {
    let h = start(Limits::default()).await;
    let r = h.http.get(h.url("/soap?wsdl")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/xml"));
    let doc = r.bytes().await.unwrap();
    let els = parse(&doc);
    const WSDL: &str = "http://schemas.xmlsoap.org/wsdl/";
    const WSOAP: &str = "http://schemas.xmlsoap.org/wsdl/soap/";
    const WSOAP12: &str = "http://schemas.xmlsoap.org/wsdl/soap12/";
    const XS: &str = "http://www.w3.org/2001/XMLSchema";
    let defs = &els[0];
    assert_eq!(
        (defs.ns.as_deref(), defs.local.as_str()),
        (Some(WSDL), "definitions")
    );
    assert_eq!(defs.attr("targetNamespace"), Some(NS));
    for (ns, style) in [(WSOAP, "document"), (WSOAP12, "document")] {
        let b = find(&els, Some(ns), "binding").expect("SOAP binding");
        assert_eq!(b.attr("style"), Some(style));
        assert_eq!(
            b.attr("transport"),
            Some("http://schemas.xmlsoap.org/soap/http")
        );
        let body = find(&els, Some(ns), "body").unwrap();
        assert_eq!(body.attr("use"), Some("literal"));
        let addr = find(&els, Some(ns), "address").unwrap();
        assert_eq!(addr.attr("location"), Some(h.url("/soap").as_str()));
    }
    let ports: Vec<_> = els
        .iter()
        .filter(|e| e.ns.as_deref() == Some(WSDL) && e.local == "port")
        .collect();
    assert_eq!(ports.len(), 2);
    let data = els
        .iter()
        .find(|e| e.ns.as_deref() == Some(XS) && e.attr("name") == Some("data"))
        .unwrap();
    assert_eq!(data.attr("type"), Some("xs:base64Binary"));
    let xmime = data.attrs.iter().find(|(ns, l, _)| {
        ns.as_deref() == Some("http://www.w3.org/2005/05/xmlmime") && l == "expectedContentTypes"
    });
    assert_eq!(
        xmime.map(|a| a.2.as_str()),
        Some("application/octet-stream")
    );
    for name in ["upload", "uploadResponse"] {
        assert!(els
            .iter()
            .any(|e| e.local == "element" && e.attr("name") == Some(name) && e.depth == 3));
    }
    // Other methods get a fault.
    let r = h.http.put(h.url("/soap")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    fault(&r.bytes().await.unwrap());
}

/// `len` payload bytes as inline base64 in 76-column lines, generated
/// while sending (the test holds no copy), and the payload's SHA-256.
fn inline_stream(v: SoapVersion, len: usize) -> (reqwest::Body, String) {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 57 * 1024; // whole base64 lines
    let env = envelope(env_ns(v), "big.bin", None, "@DATA@");
    let (head, tail) = env.split_once("@DATA@").unwrap();
    let mut hasher = Sha256::new();
    let mut blocks = Vec::new();
    let mut left = len;
    let mut seed = 0;
    while left > 0 {
        let n = left.min(BLOCK);
        blocks.push((n, seed));
        hasher.update(payload(n, seed));
        left -= n;
        seed += 1;
    }
    let head = bytes::Bytes::from(head.to_owned());
    let tail = bytes::Bytes::from(tail.to_owned());
    let body =
        futures_util::stream::iter(
            std::iter::once(head)
                .chain(blocks.into_iter().map(|(n, seed)| {
                    bytes::Bytes::from(base64_wrapped(&payload(n, seed)) + "\r\n")
                }))
                .chain(std::iter::once(tail))
                .map(Ok::<_, std::io::Error>),
        );
    (
        reqwest::Body::wrap_stream(body),
        hex::encode(hasher.finalize()),
    )
}

#[tokio::test]
async fn memory_stays_bounded_for_64_mib_inline_and_mtom() {
    const LEN: usize = 64 << 20;
    // What one upload may stage between codec and storage: one 64 KiB
    // input slice plus the codec's carry.
    const STAGING_BOUND: u64 = 64 * 1024 + 4096;
    let h = start(Limits::default()).await;
    let (body, sha) = inline_stream(SoapVersion::Soap11, LEN);
    let r = post(&h, "text/xml", Some(basic(ALICE)), body).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let u = uploaded(&r.body, SOAP11);
    assert_eq!((u.size, u.sha256.as_str()), (LEN as u64, sha.as_str()));
    let staged = h
        .srv
        .state
        .metrics
        .peak_staging_buffer
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        staged > 0 && staged <= STAGING_BOUND,
        "inline staged {staged}"
    );

    let data = bytes::Bytes::from(payload(LEN, 99));
    let mut b = Builder::new(SoapVersion::Soap12);
    b.envelope(envelope(SOAP12, "big.bin", None, &include_element("d@t")))
        .bytes("d@t", "application/octet-stream", data.clone());
    let mb = b.finish().unwrap();
    let ct = mb.content_type().to_owned();
    let r = post(
        &h,
        &ct,
        Some(basic(ALICE)),
        stream(mb.to_bytes_vec().unwrap()),
    )
    .await;
    let u = uploaded(&r.body, SOAP12);
    assert_eq!((u.size, u.sha256.clone()), (LEN as u64, sha256(&data)));
    assert_eq!(
        sha256(&h.download(u.url.as_deref().unwrap()).await),
        sha256(&data)
    );
    let staged = h
        .srv
        .state
        .metrics
        .peak_staging_buffer
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(staged <= STAGING_BOUND, "MTOM staged {staged}");
    // The multipart scan holds at most a delimiter's worth across chunks.
    let peak: u64 = h
        .metric("bulkwire_parser_buffer_peak_bytes ")
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(peak < 4096, "parser peak {peak}");
    assert!(h
        .metric("bulkwire_staging_buffer_peak_bytes ")
        .ends_with(&format!(" {staged}")));
}

#[tokio::test]
async fn a_budget_without_room_for_the_soap_buffers_is_a_503_receiver_fault() {
    // Room for the shared upload reserve (a raw PUT fits) but not for the
    // SOAP staging, decoder and tokenizer buffers on top.
    let base = Limits::default();
    let h = start(Limits {
        memory_budget: common::upload_reserve(&base) + 64 * 1024,
        ..base
    })
    .await;
    assert_eq!(
        h.put("x.bin", "application/octet-stream", vec![1; 10])
            .await
            .status(),
        201
    );
    let env = envelope(SOAP12, "x", None, "AAAA");
    let r = post(&h, "application/soap+xml", Some(basic(ALICE)), env).await;
    assert_eq!(r.status, 503);
    let f = fault(&r.body);
    assert_eq!((f.code.as_str(), f.kind.as_str()), ("env:Receiver", "busy"));
    assert_eq!(f.limit.as_deref(), Some("memory_budget"));
    assert_eq!(h.list_all().await.len(), 1);
}

/// The `url` of an upload is the item's link, a capability: a credential
/// without `read` (an upload-only token) gets none (the element is left
/// out, as the WSDL allows), and one without `upload` a 403 fault that
/// names the scope and stores nothing.
#[tokio::test]
async fn only_a_credential_with_read_gets_the_url() {
    let h = start(Limits::default()).await;
    let cam = add_token(&h, "cam", "upload").await;
    let data = payload(1000, 31);
    let env = envelope(SOAP11, "cam.bin", None, &base64_wrapped(&data));
    let r = post(&h, "text/xml", Some(format!("Bearer {cam}")), env.clone()).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let u = uploaded(&r.body, SOAP11);
    assert_eq!(u.url, None, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!((u.size, u.sha256.clone()), (1000, sha256(&data)));
    let m = only_listed(&h).await;
    assert_eq!(
        (&m["id"], &m["owner"]),
        (&u.id.as_str().into(), &"cam".into())
    );
    // The same upload by a reader gets its link.
    let r = post(&h, "text/xml", Some(basic(ALICE)), env.clone()).await;
    assert!(uploaded(&r.body, SOAP11).url.is_some());
    // Without upload: 403, naming the scope.
    let viewer = add_token(&h, "cam", "read").await;
    let r = post(&h, "text/xml", Some(format!("Bearer {viewer}")), env).await;
    assert_eq!(r.status, 403);
    let f = fault(&r.body);
    assert_eq!(
        (f.code.as_str(), f.kind.as_str()),
        ("env:Client", "forbidden")
    );
    assert!(f.reason.contains("upload scope"), "{}", f.reason);
    assert_eq!(h.list_all().await.len(), 2);
}

#[test]
fn rerun_on_shared_stores() {
    common::rerun_on_shared_stores(&[]);
}
