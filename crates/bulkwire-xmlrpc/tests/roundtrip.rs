//! Encoder tests and the property that matters: any value tree, encoded
//! (wrapped or not) and parsed back at any chunking, is the same tree; and
//! the encoder's length is exact.

use bulkwire_xmlrpc::testutil::{random_splits, run_split, RecordSink};
use bulkwire_xmlrpc::{
    encode_call, encode_fault, encode_response, parse, parse_read_with, parse_stream, Blob,
    DateTime, EncodeOptions, ErrorKind, Fault, FileBlob, Limits, LineEnd, MemorySink, Message,
    Parser, Response, StreamError, Value,
};
use proptest::prelude::*;

type V = Value<Vec<u8>>;

fn opts(wrap: Option<LineEnd>) -> EncodeOptions {
    EncodeOptions {
        wrap,
        ..EncodeOptions::default()
    }
}

fn xml_string() -> impl Strategy<Value = String> {
    // Mostly markup-significant and line-end characters, some of anything
    // XML can carry.
    let ch = prop_oneof![
        prop::sample::select(vec!['a', '<', '>', '&', '\r', '\n', '\t', ' ', ']', '"', '\'', 'é', '\u{1F600}']),
        any::<char>().prop_filter("XML Char", |&c| {
            matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
        }),
    ];
    prop::collection::vec(ch, 0..12).prop_map(|v| v.into_iter().collect())
}

fn leaf() -> impl Strategy<Value = V> {
    prop_oneof![
        any::<i32>().prop_map(V::Int),
        any::<i64>().prop_map(V::I8),
        any::<bool>().prop_map(V::Bool),
        xml_string().prop_map(V::String),
        any::<f64>()
            .prop_filter("finite", |d| d.is_finite())
            .prop_map(V::Double),
        (1000u32..3000, 1u32..13, 1u32..29, 0u32..24, 0u32..60).prop_map(|(y, mo, d, h, mi)| {
            let s = format!("{y:04}{mo:02}{d:02}T{h:02}:{mi:02}:07");
            V::DateTime(DateTime::parse(&s).unwrap())
        }),
        prop::collection::vec(any::<u8>(), 0..300).prop_map(V::Base64),
        Just(V::Nil),
    ]
}

fn tree() -> impl Strategy<Value = V> {
    leaf().prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(V::Array),
            prop::collection::vec((xml_string(), inner), 0..5).prop_map(V::Struct),
        ]
    })
}

fn wrap_choice() -> impl Strategy<Value = Option<LineEnd>> {
    prop_oneof![
        Just(None),
        Just(Some(LineEnd::Lf)),
        Just(Some(LineEnd::CrLf))
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn call_round_trips_at_any_chunking(
        method in "[a-zA-Z][a-zA-Z0-9_.:/]{0,20}",
        params in prop::collection::vec(tree(), 0..4),
        wrap in wrap_choice(),
        seed in any::<u64>(),
    ) {
        let enc = encode_call(&method, &params, &opts(wrap)).unwrap();
        let body = enc.to_vec().unwrap();
        prop_assert_eq!(body.len() as u64, enc.len());
        let splits = random_splits(body.len(), 1 + (seed % 40) as usize, seed);
        let out = run_split(&Limits::default(), &body, &splits);
        prop_assert_eq!(out.error, None);
        let want = Message::Call(bulkwire_xmlrpc::Call { method, params });
        prop_assert_eq!(out.message, Some(want));
    }

    #[test]
    fn response_round_trips(value in tree(), wrap in wrap_choice()) {
        let enc = encode_response(&value, &opts(wrap)).unwrap();
        let body = enc.to_vec().unwrap();
        prop_assert_eq!(body.len() as u64, enc.len());
        let (msg, _) = parse(&body, Limits::default(), MemorySink::new(1 << 20)).unwrap();
        prop_assert_eq!(msg, Message::Response(Response::Params(vec![value])));
    }

    #[test]
    fn fault_round_trips(code in any::<i32>(), string in ".{0,40}") {
        let body = encode_fault(&Fault::new(code, string.clone()));
        let (msg, _) = parse(&body, Limits::default(), MemorySink::new(0)).unwrap();
        let Message::Response(Response::Fault(f)) = msg else { panic!("fault") };
        prop_assert_eq!(f.code, code);
        // Characters XML cannot carry were replaced, everything else kept.
        let kept: String = string.chars().map(|c| match c {
            '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'.. => c,
            _ => '\u{FFFD}',
        }).collect();
        prop_assert_eq!(f.string, kept);
    }
}

#[test]
fn exact_text_of_a_small_call() {
    let params: Vec<V> = vec![
        V::Int(1),
        V::String("a<b>&\r".into()),
        V::Struct(vec![
            ("k".into(), V::Base64(b"hi".to_vec())),
            ("n".into(), V::Nil),
        ]),
        V::Array(vec![V::Bool(true), V::Double(0.5), V::I8(-3)]),
    ];
    let body = encode_call("m.x", &params, &EncodeOptions::default()).unwrap();
    let text = String::from_utf8(body.to_vec().unwrap()).unwrap();
    assert_eq!(
        text,
        "<?xml version=\"1.0\"?>\n<methodCall><methodName>m.x</methodName><params>\
         <param><value><int>1</int></value></param>\
         <param><value><string>a&lt;b&gt;&amp;&#13;</string></value></param>\
         <param><value><struct><member><name>k</name><value><base64>aGk=</base64></value></member>\
         <member><name>n</name><value><nil/></value></member></struct></value></param>\
         <param><value><array><data><value><boolean>1</boolean></value><value><double>0.5</double></value>\
         <value><i8>-3</i8></value></data></array></value></param></params></methodCall>"
    );
}

#[test]
fn wrapped_base64_is_76_columns_and_length_exact() {
    let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    for wrap in [Some(LineEnd::Lf), Some(LineEnd::CrLf)] {
        let params = vec![V::Base64(data.clone())];
        let enc = encode_call("m", &params, &opts(wrap)).unwrap();
        let body = enc.to_vec().unwrap();
        assert_eq!(body.len() as u64, enc.len());
        let text = std::str::from_utf8(&body).unwrap();
        let b64 = &text[text.find("<base64>").unwrap() + 8..text.find("</base64>").unwrap()];
        let lines: Vec<&str> = b64
            .split(
                wrap.unwrap()
                    .as_bytes()
                    .iter()
                    .map(|&b| b as char)
                    .collect::<String>()
                    .as_str(),
            )
            .collect();
        assert!(lines[..lines.len() - 1].iter().all(|l| l.len() == 76));
        assert_eq!(lines.concat().len(), 1336);
    }
}

#[test]
fn unencodable_strings_are_refused() {
    let params = vec![V::String("a\u{0}".into())];
    let e = encode_call("m", &params, &EncodeOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(encode_call::<Vec<u8>>("bad\u{1}", &[], &EncodeOptions::default()).is_err());
    let mut deep = V::Nil;
    for _ in 0..600 {
        deep = V::Array(vec![deep]);
    }
    assert_eq!(
        encode_response(&deep, &EncodeOptions::default())
            .unwrap_err()
            .kind(),
        ErrorKind::Unsupported
    );
}

/// A blob whose reader yields another length than declared.
struct Liar(u64, Vec<u8>);

impl Blob for Liar {
    fn len(&self) -> u64 {
        self.0
    }
    fn open(&self) -> std::io::Result<Box<dyn std::io::Read + '_>> {
        Ok(Box::new(&self.1[..]))
    }
}

#[test]
fn blob_length_is_checked() {
    for (declared, actual) in [(5, 4), (3, 4)] {
        let params = vec![Value::Base64(Liar(declared, vec![1; actual]))];
        let enc = encode_call("m", &params, &EncodeOptions::default()).unwrap();
        let e = enc.write_to(&mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    }
}

#[test]
fn file_blobs_stream_from_disk() {
    let path = std::env::temp_dir().join(format!("bulkwire-xmlrpc-{}.bin", std::process::id()));
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let params = vec![Value::Base64(FileBlob {
        path: path.clone(),
        len: data.len() as u64,
    })];
    let enc = encode_call("m", &params, &opts(Some(LineEnd::Lf))).unwrap();
    let body = enc.to_vec().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(body.len() as u64, enc.len());
    let (msg, _) = parse(&body, Limits::default(), MemorySink::new(1 << 20)).unwrap();
    let Message::Call(c) = msg else { panic!() };
    assert_eq!(c.params, vec![V::Base64(data)]);
}

fn sample_body() -> (Vec<u8>, Vec<V>) {
    let params = vec![
        V::String("x".into()),
        V::Base64((0..200_000u32).map(|i| (i * 31) as u8).collect()),
    ];
    let body = encode_call("up", &params, &opts(Some(LineEnd::Lf)))
        .unwrap()
        .to_vec()
        .unwrap();
    (body, params)
}

#[test]
fn blocking_adapter() {
    let (body, params) = sample_body();
    let parser = Parser::new(Limits::default(), RecordSink::new(1 << 20));
    let (msg, sink) = parse_read_with(&body[..], parser, 1000).unwrap();
    assert_eq!(sink.paths, ["params[1]"]);
    assert_eq!(msg.into_call().unwrap().params, params);
    // A failing reader aborts the open value.
    struct Failing<'a>(&'a [u8]);
    impl std::io::Read for Failing<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::Error::other("connection reset"));
            }
            let n = out.len().min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let parser = Parser::new(Limits::default(), RecordSink::new(1 << 20));
    let r = parse_read_with(Failing(&body[..body.len() / 2]), parser, 4096);
    assert!(matches!(r, Err(StreamError::Source(_))));
}

#[tokio::test]
async fn async_adapter() {
    let (body, params) = sample_body();
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = body
        .chunks(7777)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let parser = Parser::new(Limits::default(), MemorySink::new(1 << 20));
    let (msg, _) = parse_stream(futures_util::stream::iter(chunks), parser)
        .await
        .unwrap();
    assert_eq!(msg.into_call().unwrap().params, params);
    // A bad body is a parse error.
    let chunks = vec![Ok::<_, std::io::Error>(bytes::Bytes::from_static(
        b"<methodCall><x/>",
    ))];
    let parser = Parser::new(Limits::default(), MemorySink::new(0));
    let r = parse_stream(futures_util::stream::iter(chunks), parser).await;
    assert!(matches!(r, Err(StreamError::Parse(e)) if e.kind() == ErrorKind::Malformed));
}

/// `open_struct` shows the members of the struct being read that are
/// complete: an upload's name and type before its bits end, at any
/// chunking (a server asks the application about the file by then).
#[test]
fn open_struct_names_the_file_before_its_bits_end() {
    let body = "<?xml version=\"1.0\"?><methodCall><methodName>wp.uploadFile</methodName>\
        <params><param><value><int>1</int></value></param>\
        <param><value><string>u</string></value></param>\
        <param><value><string>p</string></value></param>\
        <param><value><struct>\
        <member><name>name</name><value><string>a.png</string></value></member>\
        <member><name>type</name><value><string>image/png</string></value></member>\
        <member><name>bits</name><value><base64>aGVsbG8gd29ybGQ=</base64></value></member>\
        </struct></value></param></params></methodCall>";
    let inside = body.find("aGVs").unwrap() + 2;
    for step in [1, 3, 7, body.len()] {
        let mut p = Parser::new(Limits::default(), MemorySink::new(1 << 20));
        let mut fed = 0;
        while fed < inside {
            let end = (fed + step).min(inside);
            p.feed(&body.as_bytes()[fed..end], false).unwrap();
            fed = end;
        }
        let names: Vec<(&str, Option<&str>)> = p
            .open_struct()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            names,
            [("name", Some("a.png")), ("type", Some("image/png"))],
            "step {step}"
        );
        p.feed(&body.as_bytes()[inside..], true).unwrap();
        assert!(p.open_struct().is_empty(), "no struct is open at the end");
    }
}
