//! XML-RPC requests captured from real clients (Python `xmlrpc.client`,
//! python-wordpress-xmlrpc, Node `xmlrpc`, Go `kolo/xmlrpc`) parse as those
//! clients meant them: whole, byte by byte and at 100 random split points,
//! with identical results.

use bulkwire_testsuite::{capture, capture_names};
use bulkwire_xmlrpc::testutil::{random_splits, run_bytewise, run_split, run_whole};
use bulkwire_xmlrpc::{Call, Limits, Message, Value};

type V = Value<Vec<u8>>;

const CAPTURES: [&str; 8] = [
    "stdlib-1.http",
    "stdlib_mw-2.http",
    "stdlib_wrapped-18.http",
    "wpxmlrpc-3.http",
    "wpxmlrpc-4.http",
    "node_xmlrpc-8.http",
    "go_kolo-10.http",
    "go_kolo-11.http",
];

fn parse(file: &str) -> Call<Vec<u8>> {
    let c = capture(file);
    assert!(c.request_line.starts_with("POST /xmlrpc.php"), "{file}");
    assert!(c.header("content-type").unwrap().starts_with("text/xml"));
    let limits = Limits::default();
    let whole = run_whole(&limits, &c.body);
    assert_eq!(whole.error, None, "{file}");
    assert_eq!(
        run_bytewise(&limits, &c.body),
        whole,
        "{file}: byte by byte"
    );
    let splits = random_splits(c.body.len(), 100, 0x5eed);
    assert_eq!(
        run_split(&limits, &c.body, &splits),
        whole,
        "{file}: 100 random splits"
    );
    for seed in 1..20u64 {
        let splits = random_splits(c.body.len(), 1 + (seed % 5) as usize, seed);
        assert_eq!(
            run_split(&limits, &c.body, &splits),
            whole,
            "{file}: splits {splits:?}"
        );
    }
    match whole.message {
        Some(Message::Call(call)) => call,
        other => panic!("{file}: not a call: {other:?}"),
    }
}

fn s(text: &str) -> V {
    V::String(text.into())
}

fn file(name: &str, ty: &str, bits: V, overwrite: Option<bool>) -> V {
    let mut m = vec![
        ("name".to_owned(), s(name)),
        ("type".to_owned(), s(ty)),
        ("bits".to_owned(), bits),
    ];
    if let Some(o) = overwrite {
        m.push(("overwrite".to_owned(), V::Bool(o)));
    }
    V::Struct(m)
}

fn login(blog: V) -> Vec<V> {
    vec![blog, s("admin"), s("secret")]
}

#[test]
fn every_xmlrpc_capture_is_covered() {
    let names = capture_names();
    for c in CAPTURES {
        assert!(
            names.iter().any(|n| n == c),
            "{c} missing from vectors/clients"
        );
    }
    let xmlrpc = names.iter().filter(|n| {
        let body = capture(n).body;
        body.windows(11).any(|w| w == b"<methodCall")
    });
    assert_eq!(
        xmlrpc.count(),
        CAPTURES.len(),
        "a new XML-RPC capture needs a test here"
    );
}

#[test]
fn python_stdlib() {
    let hello = b"hello world\x00\xff".repeat(4);
    let c = parse("stdlib-1.http");
    assert_eq!(c.method, "wp.uploadFile");
    let mut want = login(V::Int(1));
    want.push(file(
        "hello.txt",
        "text/plain",
        V::Base64(hello.clone()),
        Some(true),
    ));
    assert_eq!(c.params, want);

    let c = parse("stdlib_mw-2.http");
    assert_eq!(c.method, "metaWeblog.newMediaObject");
    let mut want = login(s("1"));
    want.push(file("hello.txt", "text/plain", V::Base64(hello), None));
    assert_eq!(c.params, want);
}

#[test]
fn python_stdlib_wrapped_base64() {
    let c = parse("stdlib_wrapped-18.http");
    assert_eq!(c.method, "wp.uploadFile");
    let bits = V::Base64((0..200u8).collect());
    let mut want = login(V::Int(1));
    want.push(file("b.bin", "application/octet-stream", bits, None));
    assert_eq!(c.params, want);
}

#[test]
fn python_wordpress_xmlrpc() {
    let c = parse("wpxmlrpc-3.http");
    assert_eq!(c.method, "mt.supportedMethods");
    assert!(c.params.is_empty());

    let c = parse("wpxmlrpc-4.http");
    assert_eq!(c.method, "wp.uploadFile");
    let bits = V::Base64(b"\xff\xd8\xff\xe0 fake jpeg".to_vec());
    let mut want = login(V::Int(0));
    want.push(file("hello.jpg", "image/jpeg", bits, Some(false)));
    assert_eq!(c.params, want);
}

#[test]
fn node_xmlrpc() {
    let c = parse("node_xmlrpc-8.http");
    assert_eq!(c.method, "wp.uploadFile");
    let bits = V::Base64(b"hello\x00\xff".to_vec());
    let mut want = login(V::Int(1));
    want.push(file(
        "hello.bin",
        "application/octet-stream",
        bits,
        Some(true),
    ));
    assert_eq!(c.params, want);
}

#[test]
fn go_kolo_xmlrpc() {
    // kolo/xmlrpc sends a []byte as an array of i4 ...
    let c = parse("go_kolo-10.http");
    assert_eq!(c.method, "wp.uploadFile");
    let bytes = b"hello\x00\xff"
        .iter()
        .map(|&b| V::Int(i32::from(b)))
        .collect();
    let mut want = login(V::Int(1));
    want.push(file(
        "hello.bin",
        "application/octet-stream",
        V::Array(bytes),
        Some(true),
    ));
    assert_eq!(c.params, want);

    // ... and a base64 type as base64, with map members in key order.
    let c = parse("go_kolo-11.http");
    assert_eq!(c.method, "wp.uploadFile");
    let mut want = login(V::Int(1));
    want.push(V::Struct(vec![
        ("bits".into(), V::Base64(b"hello\x00\xff".to_vec())),
        ("overwrite".into(), V::Bool(true)),
        ("name".into(), s("hello.bin")),
        ("type".into(), s("application/octet-stream")),
    ]));
    assert_eq!(c.params, want);
}
