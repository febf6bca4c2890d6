//! End-to-end: the xmlrpc and mtom scenarios against the recording test
//! server, which parses every body back with `bulkwire-xmlrpc` and
//! `bulkwire-xop` while it streams in. Each body must equal, byte for byte,
//! what the codec encodes on its own for that request's name, and the names
//! must carry distinct `{seq}` and `{uuid}` values.

mod common;

use bulkwire_load::scenario::{SoapUpload, UploadCall};
use bulkwire_load::{execute, Options, Pattern, ScenarioKind};
use common::{payload_file, sha, Behavior, TestServer};
use std::collections::HashSet;

fn options(url: &str, kind: ScenarioKind, path: std::path::PathBuf) -> Options {
    let mut o = Options::new(url, kind);
    o.quiet = true;
    o.files = vec![path];
    o.filename = Some("up-{seq}-{uuid}.jpg".into());
    o.content_type = Some("image/jpeg".into());
    o.connections = Some(4);
    o.requests = Some(60);
    o
}

/// `up-SEQ-UUID.jpg` → (seq, uuid).
fn split_name(name: &str) -> (u64, String) {
    let rest = name
        .strip_prefix("up-")
        .unwrap()
        .strip_suffix(".jpg")
        .unwrap();
    let (seq, uuid) = rest.split_once('-').unwrap();
    (seq.parse().unwrap(), uuid.to_owned())
}

fn check_variation(names: &[String]) {
    let mut seqs = Vec::new();
    let mut uuids = HashSet::new();
    for n in names {
        let (seq, uuid) = split_name(n);
        assert_eq!(uuid.len(), 36, "{n}");
        assert!(uuids.insert(uuid), "uuid repeated in {n}");
        seqs.push(seq);
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (0..names.len() as u64).collect::<Vec<_>>());
}

#[test]
fn xmlrpc_bodies_parse_back_and_equal_the_codecs_encoding() {
    let server = TestServer::start(Behavior::default());
    let (path, data) = payload_file("photo-rpc.jpg", 100_001);
    let mut o = options(&server.url("/xmlrpc"), ScenarioKind::Xmlrpc, path);
    o.user = Some("editor:pa&ss<1>".into());
    let r = execute(&o).unwrap().report;
    assert_eq!((r.sent, r.ok, r.errors), (60, 60, 0));
    assert_eq!(r.scenario, "xmlrpc");

    let seen = server.seen();
    assert_eq!(seen.len(), 60);
    let mut call = UploadCall::new(
        "editor",
        "pa&ss<1>",
        Pattern::parse("x").unwrap(),
        data.clone().into(),
    );
    call.content_type = "image/jpeg".into();
    let mut names = Vec::new();
    let mut total = 0;
    for s in &seen {
        assert_eq!(s.parse_error, None);
        assert_eq!(s.content_type, "text/xml");
        assert_eq!(s.content_length, Some(s.len));
        // Credentials travel in the call, not in a header.
        assert_eq!(s.header("authorization"), None);
        let x = s.xml.as_ref().unwrap();
        assert_eq!(x.method, "wp.uploadFile");
        assert_eq!(x.blog_id, Some(1));
        assert_eq!(x.username.as_deref(), Some("editor"));
        assert_eq!(x.password.as_deref(), Some("pa&ss<1>"));
        assert_eq!(x.content_type.as_deref(), Some("image/jpeg"));
        assert_eq!(
            (x.len, x.sha256.as_str()),
            (data.len() as u64, &*sha(&data))
        );
        let name = x.name.clone().unwrap();
        let params = call.params(&name, &data[..]);
        let want = bulkwire_xmlrpc::encode_call("wp.uploadFile", &params, &call.options())
            .unwrap()
            .to_vec()
            .unwrap();
        assert_eq!(s.sha256, sha(&want), "byte-exact for {name}");
        names.push(name);
        total += s.len;
    }
    assert_eq!(r.bytes_sent, total);
    check_variation(&names);
}

#[test]
fn mtom_bodies_parse_back_and_equal_the_builders_message() {
    let server = TestServer::start(Behavior::default());
    let (path, data) = payload_file("photo-mtom.jpg", 70_000);
    let mut o = options(&server.url("/soap"), ScenarioKind::Mtom, path);
    o.user = Some("alice:s3cret".into());
    let r = execute(&o).unwrap().report;
    assert_eq!((r.sent, r.ok, r.errors), (60, 60, 0));
    assert_eq!(r.scenario, "mtom");

    let seen = server.seen();
    assert_eq!(seen.len(), 60);
    let mut up = SoapUpload::new(Pattern::parse("x").unwrap(), data.clone().into());
    up.content_type = "image/jpeg".into();
    let mut names = Vec::new();
    for s in &seen {
        assert_eq!(s.parse_error, None);
        assert_eq!(s.content_length, Some(s.len));
        assert_eq!(s.header("authorization"), Some("Basic YWxpY2U6czNjcmV0"));
        let x = s.xml.as_ref().unwrap();
        assert!(x.attachment, "data came as an XOP attachment");
        assert_eq!(x.content_type.as_deref(), Some("image/jpeg"));
        assert_eq!(
            (x.len, x.sha256.as_str()),
            (data.len() as u64, &*sha(&data))
        );
        let name = x.name.clone().unwrap();
        let boundary = s.content_type.rsplit("boundary=\"").next().unwrap();
        let mut b = up.builder(&name);
        b.boundary(boundary.trim_end_matches('"'));
        let want = b.finish().unwrap();
        assert_eq!(want.content_type(), s.content_type);
        assert_eq!(
            s.sha256,
            sha(&want.to_vec().unwrap()),
            "byte-exact for {name}"
        );
        names.push(name);
    }
    check_variation(&names);
}

#[test]
fn xmlrpc_without_user_is_a_config_error() {
    let (path, _) = payload_file("nouser.bin", 10);
    let o = options("http://127.0.0.1:9/xmlrpc", ScenarioKind::Xmlrpc, path);
    let e = execute(&o).unwrap_err();
    assert_eq!(e.kind(), bulkwire_load::ErrorKind::Config);
    assert!(e.to_string().contains("--user"), "{e}");
}

/// A file that starts as a JFIF JPEG does, named `name`.
fn jpeg_file(name: &str) -> std::path::PathBuf {
    let (path, mut data) = payload_file(name, 20_000);
    data.splice(0..11, *b"\xFF\xD8\xFF\xE0\x00\x10JFIF\x00");
    std::fs::write(&path, &data).unwrap();
    path
}

/// Issue 23: without `--content-type` a JPEG went as
/// `application/octet-stream`, was stored so, and the media library showed
/// a placeholder. Now each file part goes as its own type: from its magic
/// bytes whatever its name, else from its extension, else octet-stream;
/// a given `--content-type` still goes as given.
#[test]
fn formdata_sends_a_jpeg_as_image_jpeg_when_no_content_type_is_given() {
    let server = TestServer::start(Behavior::default());
    let jpeg = jpeg_file("holiday.jpg");
    let png = jpeg.with_file_name("scan-without-extension");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01").unwrap();
    let csv = jpeg.with_file_name("table.csv");
    std::fs::write(&csv, b"a,b\n1,2\n").unwrap();
    let unknown = jpeg.with_file_name("blob");
    std::fs::write(&unknown, [1u8, 2, 3, 4]).unwrap();
    let mut o = Options::new(&server.url("/v1/media"), ScenarioKind::FormData);
    o.quiet = true;
    o.files = vec![jpeg, png, csv, unknown];
    o.requests = Some(3);
    o.connections = Some(1);
    let r = execute(&o).unwrap().report;
    assert_eq!(r.ok, 3);
    let want = [
        ("holiday.jpg", "image/jpeg"),
        ("scan-without-extension", "image/png"),
        ("table.csv", "text/csv"),
        ("blob", "application/octet-stream"),
    ];
    for s in server.seen() {
        let got: Vec<_> = s
            .files
            .iter()
            .map(|f| (f.filename.as_str(), f.content_type.as_deref().unwrap()))
            .collect();
        assert_eq!(got, want);
    }

    o.content_type = Some("application/x-given".into());
    o.files.truncate(1);
    o.requests = Some(1);
    execute(&o).unwrap();
    let last = server.seen().pop().unwrap();
    assert_eq!(
        last.files[0].content_type.as_deref(),
        Some("application/x-given")
    );
}

/// The other scenarios that send a file with a type: the raw body's
/// `Content-Type` (`PUT /v1/media/{name}`), XML-RPC's `type` member and
/// the SOAP upload's `contentType` (and its attachment) are the file's own
/// when no `--content-type` is given.
#[test]
fn raw_put_xmlrpc_and_mtom_send_a_jpeg_as_image_jpeg_when_no_content_type_is_given() {
    let server = TestServer::start(Behavior::default());
    // Named as nothing in particular: the bytes say what it is.
    let path = jpeg_file("upload.dat");
    for (kind, url) in [
        (ScenarioKind::Raw, "/v1/media/img-{seq}.jpg"),
        (ScenarioKind::Xmlrpc, "/xmlrpc"),
        (ScenarioKind::Mtom, "/soap"),
    ] {
        let mut o = Options::new(&server.url(url), kind);
        o.quiet = true;
        o.files = vec![path.clone()];
        o.user = Some("editor:secret".into());
        o.requests = Some(2);
        o.connections = Some(1);
        if kind == ScenarioKind::Raw {
            o.method = "PUT".into();
            o.user = None;
        }
        let r = execute(&o).unwrap().report;
        assert_eq!(r.ok, 2, "{kind:?}");
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 6);
    for s in &seen[..2] {
        assert_eq!(
            (s.method.as_str(), s.content_type.as_str()),
            ("PUT", "image/jpeg")
        );
    }
    for s in &seen[2..] {
        let x = s.xml.as_ref().unwrap();
        assert_eq!(
            x.content_type.as_deref(),
            Some("image/jpeg"),
            "{}",
            x.method
        );
    }
}
