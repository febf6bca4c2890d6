//! `bulkwire parse` on XML-RPC and SOAP/MTOM bodies captured from real
//! clients: the JSON it prints is checked against values worked out here
//! independently (base64 decoded by the `base64` crate, attachments found
//! by the multipart parser, hashed by `sha2`).

use base64::Engine;
use bulkwire_testsuite::capture;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::process::{Command, Output, Stdio};

fn bulkwire(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bulkwire"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = stdin.to_vec();
    let mut pipe = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut pipe, &input));
    let out = child.wait_with_output().unwrap();
    let _ = writer.join().unwrap();
    out
}

fn parse(content_type: &str, body: &[u8]) -> Output {
    bulkwire(&["parse", "--content-type", content_type, "-"], body)
}

fn lines(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn error(out: &Output) -> Value {
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    serde_json::from_slice(&out.stderr).expect("one JSON object on stderr")
}

fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The text between the first `<base64>` and `</base64>`, decoded.
fn base64_value(body: &[u8]) -> Vec<u8> {
    let s = String::from_utf8_lossy(body);
    let start = s.find("<base64>").unwrap() + "<base64>".len();
    let end = s.find("</base64>").unwrap();
    let text: String = s[start..end].split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

#[test]
fn xmlrpc_call_from_python_stdlib() {
    let c = capture("stdlib-1.http");
    let out = lines(&parse(c.header("Content-Type").unwrap(), &c.body));
    assert_eq!(out.len(), 1);
    let bits = base64_value(&c.body);
    assert_eq!(
        out[0],
        json!({
            "method": "wp.uploadFile",
            "params": [1, "admin", "secret", {
                "name": "hello.txt",
                "type": "text/plain",
                "bits": {"base64": {"size": bits.len(), "sha256": sha(&bits)}},
                "overwrite": true,
            }],
        })
    );
}

#[test]
fn every_xmlrpc_capture_names_its_method() {
    for (file, method) in [
        ("stdlib_mw-2.http", "metaWeblog.newMediaObject"),
        ("stdlib_wrapped-18.http", "wp.uploadFile"),
        ("wpxmlrpc-4.http", "wp.uploadFile"),
        ("node_xmlrpc-8.http", "wp.uploadFile"),
        ("go_kolo-11.http", "wp.uploadFile"),
    ] {
        let c = capture(file);
        let out = lines(&parse(c.header("Content-Type").unwrap(), &c.body));
        assert_eq!(out[0]["method"], method, "{file}");
        let bits = base64_value(&c.body);
        let found = out[0]["params"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|p| p.get("bits"))
            .unwrap_or_else(|| panic!("{file}: no bits member"));
        assert_eq!(found["base64"]["size"], bits.len(), "{file}");
        assert_eq!(found["base64"]["sha256"], sha(&bits), "{file}");
    }
}

#[test]
fn xmlrpc_captures_without_base64() {
    let c = capture("wpxmlrpc-3.http");
    let out = lines(&parse(c.header("Content-Type").unwrap(), &c.body));
    assert_eq!(
        out[0],
        json!({"method": "mt.supportedMethods", "params": []})
    );
    // Go's kolo/xmlrpc sends a []byte as an array of ints.
    let c = capture("go_kolo-10.http");
    let out = lines(&parse(c.header("Content-Type").unwrap(), &c.body));
    let bits = &out[0]["params"][3]["bits"];
    let bytes: Vec<u8> = bits
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u8)
        .collect();
    assert!(bytes.starts_with(b"hello"), "{bits}");
}

#[test]
fn xmlrpc_response_and_fault() {
    let ok = b"<?xml version='1.0'?><methodResponse><params><param><value><struct>\
        <member><name>id</name><value><i8>9000000000</i8></value></member>\
        <member><name>when</name><value><dateTime.iso8601>20261123T10:00:00</dateTime.iso8601></value></member>\
        <member><name>none</name><value><nil/></value></member>\
        </struct></value></param></params></methodResponse>";
    let out = lines(&parse("text/xml", ok));
    assert_eq!(
        out[0],
        json!({"params": [{"id": {"i8": 9000000000i64}, "when": {"dateTime.iso8601": "20261123T10:00:00"}, "none": null}]})
    );
    let fault = b"<methodResponse><fault><value><struct>\
        <member><name>faultCode</name><value><int>403</int></value></member>\
        <member><name>faultString</name><value><string>Incorrect username or password.</string></value></member>\
        </struct></value></fault></methodResponse>";
    let out = lines(&parse("text/xml", fault));
    assert_eq!(
        out[0],
        json!({"fault": {"faultCode": 403, "faultString": "Incorrect username or password."}})
    );
}

#[test]
fn xmlrpc_errors_are_one_json_object() {
    // An i4 beyond 32 bits, and a body cut short.
    let big = b"<methodCall><methodName>m</methodName><params><param><value><i4>2147483648</i4></value></param></params></methodCall>";
    let e = error(&parse("text/xml", big));
    assert_eq!(e["error"], "malformed", "{e}");
    let at = big.windows(10).position(|w| w == b"2147483648").unwrap() as u64;
    let offset = e["offset"].as_u64().unwrap();
    assert!((at..=at + 10 + 5).contains(&offset), "{e}");
    let cut = b"<methodCall><methodName>m</methodName><params>";
    let e = error(&parse("text/xml", cut));
    assert_eq!(e["error"], "truncated", "{e}");
    let doctype = b"<!DOCTYPE x [<!ENTITY a 'b'>]><methodCall/>";
    assert_eq!(error(&parse("text/xml", doctype))["error"], "unsupported");
}

/// Attachments of an MTOM capture as the multipart parser sees them:
/// (Content-ID without brackets, size, sha256), the root part excluded.
fn attachments(content_type: &str, body: &[u8]) -> Vec<(String, u64, String)> {
    let parser =
        bulkwire_multipart::Parser::from_content_type(content_type, Default::default()).unwrap();
    let mut r = bulkwire_multipart::MultipartReader::new(body, parser);
    let mut out = Vec::new();
    while let Some(info) = r.next_part().unwrap() {
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut r, &mut data).unwrap();
        let cid = info.content_id.unwrap_or_default();
        let cid = cid
            .trim()
            .trim_start_matches('<')
            .trim_end_matches('>')
            .to_string();
        if info.index > 0 {
            out.push((cid, data.len() as u64, sha(&data)));
        }
    }
    out
}

#[test]
fn mtom_from_apache_cxf_and_node_soap() {
    for (file, version) in [
        ("cxf_soap11_small-12.http", "1.1"),
        ("cxf_soap11_8k-13.http", "1.1"),
        ("cxf_soap12_small-14.http", "1.2"),
        ("cxf_soap12_8k-15.http", "1.2"),
        ("node_soap_mtom-17.http", "1.1"),
    ] {
        let c = capture(file);
        let ct = c.header("Content-Type").unwrap();
        let out = lines(&parse(ct, &c.body));
        let want = attachments(ct, &c.body);
        assert!(!want.is_empty(), "{file}");
        assert_eq!(
            out.len(),
            want.len() + 1,
            "{file}: one line per attachment, then the root"
        );
        for (line, (cid, size, digest)) in out.iter().zip(&want) {
            assert_eq!(line["content_id"], cid.as_str(), "{file}");
            assert_eq!(line["size"], *size, "{file}");
            assert_eq!(line["sha256"], digest.as_str(), "{file}");
        }
        let last = out.last().unwrap();
        assert_eq!(last["root"]["soap_version"], version, "{file}");
        assert_eq!(last["root"]["index"], 0, "{file}");
        let includes = last["includes"].as_array().unwrap();
        assert_eq!(includes.len(), want.len(), "{file}");
        for inc in includes {
            let path = inc["path"].as_str().unwrap();
            assert!(path.starts_with("/Envelope/Body/"), "{file}: {path}");
            assert!(
                want.iter().any(|(cid, ..)| inc["cid"] == cid.as_str()),
                "{file}"
            );
        }
        assert_eq!(last["unreferenced"], json!([]), "{file}");
    }
}

#[test]
fn mtom_include_that_is_not_cid_is_refused() {
    let c = capture("cxf_soap11_small-12.http");
    let ct = c.header("Content-Type").unwrap();
    let mut body = c.body.clone();
    let at = body
        .windows(10)
        .position(|w| w == b"href=\"cid:")
        .expect("an include");
    // Same length, so the rest of the message is unchanged.
    body[at + 6..at + 10].copy_from_slice(b"htt:");
    let e = error(&parse(ct, &body));
    assert_eq!(e["error"], "unsupported", "{e}");
}
