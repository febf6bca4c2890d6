//! The `text/xml` requests captured from real clients
//! (`testsuite/vectors/clients/*.http`: Python xmlrpc.client,
//! python-wordpress-xmlrpc, Node xmlrpc, Go kolo/xmlrpc, zeep) tokenize
//! without error, whole, byte by byte and at random splits, identically; and
//! their base64 payloads stream through the tokenizer into the decoder to
//! the bytes the client sent.

use bulkwire_xml::base64::Decoder;
use bulkwire_xml::testutil::{all_ways, random_splits, Owned};
use bulkwire_xml::{ns, Error, Limits, Token, Tokenizer};
use std::path::PathBuf;

struct Capture {
    file: &'static str,
    /// Root element: (namespace URI, local name).
    root: (Option<&'static [u8]>, &'static [u8]),
    /// Local name of the element holding the payload, and the payload.
    payload: Option<(&'static [u8], Vec<u8>)>,
}

fn captures() -> Vec<Capture> {
    let hello_world = b"hello world\0\xff".repeat(4);
    let xmlrpc = |file, payload: Option<Vec<u8>>| Capture {
        file,
        root: (None, b"methodCall"),
        payload: payload.map(|p| (&b"base64"[..], p)),
    };
    vec![
        xmlrpc("stdlib-1", Some(hello_world.clone())),
        xmlrpc("stdlib_mw-2", Some(hello_world)),
        xmlrpc("stdlib_wrapped-18", Some((0..200u8).collect())),
        xmlrpc("wpxmlrpc-3", None),
        xmlrpc("wpxmlrpc-4", Some(b"\xff\xd8\xff\xe0 fake jpeg".to_vec())),
        xmlrpc("node_xmlrpc-8", Some(b"hello\0\xff".to_vec())),
        xmlrpc("go_kolo-10", None),
        xmlrpc("go_kolo-11", Some(b"hello\0\xff".to_vec())),
        Capture {
            file: "zeep-7",
            root: (Some(ns::SOAP11_ENV), b"Envelope"),
            payload: Some((b"data", b"\0\x01hello\xff".repeat(4))),
        },
    ]
}

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testsuite/vectors/clients")
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Decodes a `Transfer-Encoding: chunked` body (RFC 9112 §7.1).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let line = std::str::from_utf8(&raw[..eol]).unwrap();
        let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16).unwrap();
        raw = &raw[eol + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// The XML body of a capture, after checking its head.
fn body(file: &str) -> Vec<u8> {
    let raw = std::fs::read(vectors_dir().join(format!("{file}.http"))).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("head");
    let head = std::str::from_utf8(&raw[..split]).unwrap();
    let ct = header(head, "content-type").expect("Content-Type");
    assert!(ct.starts_with("text/xml"), "{file}: {ct}");
    let body = &raw[split + 4..];
    let chunked = header(head, "transfer-encoding").is_some_and(|v| v.contains("chunked"));
    if chunked {
        return dechunk(body);
    }
    let len: usize = header(head, "content-length").unwrap().parse().unwrap();
    assert_eq!(body.len(), len, "{file}: Content-Length");
    body.to_vec()
}

#[test]
fn captures_tokenize_identically_every_way() {
    for c in captures() {
        let doc = body(c.file);
        let o = all_ways(&Limits::default(), &doc);
        assert_eq!(o.error, None, "{}", c.file);
        assert_eq!(o.tokens.last(), Some(&Owned::Eof), "{}", c.file);
        let root = o.tokens.iter().find_map(|t| match t {
            Owned::Start { name, ns, .. } => Some((ns.clone(), name.clone())),
            _ => None,
        });
        let (uri, qname) = root.expect("a root element");
        let local = qname.rsplit(|&b| b == b':').next().unwrap().to_vec();
        assert_eq!((uri.as_deref(), &local[..]), c.root, "{}", c.file);
        assert!(o.peak_buffered <= Limits::default().tag_bytes, "{}", c.file);
    }
}

/// Streams `doc` cut at `splits` through the tokenizer, piping the text of
/// every element named `element` into a base64 decoder.
fn payload(doc: &[u8], splits: &[usize], element: &[u8]) -> Vec<u8> {
    let mut tk = Tokenizer::new(Limits::default());
    let mut dec = Decoder::new();
    let mut out = Vec::new();
    let mut inside = false;
    let mut start = 0;
    for (i, end) in splits.iter().copied().chain([doc.len()]).enumerate() {
        let end = end.clamp(start, doc.len());
        let is_last = i == splits.len();
        let mut sink = |b: &[u8]| -> Result<(), Error> {
            out.extend_from_slice(b);
            Ok(())
        };
        tk.feed(&doc[start..end], is_last, |t| {
            match t {
                Token::Start { name, ns, .. } if ns.resolve(name).1 == element => inside = true,
                Token::End { name, ns } if ns.resolve(name).1 == element => {
                    inside = false;
                    dec.finish(&mut sink)?;
                }
                Token::Text(text) if inside => dec.push(text, &mut sink)?,
                _ => {}
            }
            Ok::<(), Error>(())
        })
        .unwrap();
        start = end;
    }
    assert!(tk.is_done());
    out
}

#[test]
fn base64_payloads_stream_to_the_sent_bytes() {
    for c in captures() {
        let Some((element, want)) = c.payload else {
            continue;
        };
        let doc = body(c.file);
        let bytewise: Vec<usize> = (1..doc.len()).collect();
        assert_eq!(payload(&doc, &[], element), want, "{}", c.file);
        assert_eq!(payload(&doc, &bytewise, element), want, "{}", c.file);
        for seed in 1..=20 {
            let splits = random_splits(doc.len(), 1 + seed % 8, seed as u64);
            assert_eq!(payload(&doc, &splits, element), want, "{}", c.file);
        }
    }
}
