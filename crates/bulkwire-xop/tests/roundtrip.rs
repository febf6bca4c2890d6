//! Property tests: messages built from random attachments (boundary-like
//! data included) parse back to the same bytes at random chunkings, and the
//! blocking and async adapters agree with the sans-IO parser.

use bulkwire_xop::testutil::{random_splits, run_split, run_whole, RecordingSink};
use bulkwire_xop::{build, read, stream, Limits, MemorySink, Parser, Select, SoapVersion};
use proptest::prelude::*;

const NS: &str = "http://schemas.xmlsoap.org/soap/envelope/";

fn message(atts: &[Vec<u8>], tricky: bool) -> (String, Vec<u8>, Vec<Vec<u8>>) {
    let mut b = build::Builder::new(SoapVersion::Soap11);
    let mut elements = String::new();
    let mut expected = Vec::new();
    for (i, a) in atts.iter().enumerate() {
        let cid = format!("part{i}@test");
        let mut data = Vec::new();
        if tricky {
            data.extend_from_slice(b"\r\n--bulkwire-\r\n--\r\n<x:Include/>");
        }
        data.extend_from_slice(a);
        elements.push_str(&format!("<file>{}</file>", build::include_element(&cid)));
        b.bytes(&cid, "application/octet-stream", data.clone());
        expected.push(data);
    }
    let env = format!(
        "<s:Envelope xmlns:s=\"{NS}\"><s:Body><m:up xmlns:m=\"urn:t\">{elements}</m:up></s:Body></s:Envelope>"
    );
    b.envelope(env);
    let body = b.finish().unwrap();
    (
        body.content_type().to_owned(),
        body.to_vec().unwrap(),
        expected,
    )
}

fn select() -> Select {
    Select::new()
        .binary("/Envelope/Body/{urn:t}up/file")
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn built_messages_parse_back(
        atts in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..3000), 0..5),
        tricky in any::<bool>(),
        seed in any::<u64>(),
        cuts in 1usize..20,
    ) {
        let (ct, bytes, expected) = message(&atts, tricky);
        let mk = || Parser::new(&ct, select(), Limits::default(), RecordingSink::default()).unwrap();
        let whole = run_whole(mk(), &bytes);
        let m = whole.as_ref().unwrap();
        let got: Vec<Vec<u8>> = m.binaries.iter().map(|b| b.output.data.clone()).collect();
        prop_assert_eq!(&got, &expected);
        for b in &m.binaries {
            prop_assert_eq!(&b.paths, &vec!["/Envelope/Body/up/file".to_owned()]);
        }
        let splits = random_splits(bytes.len(), cuts, seed);
        prop_assert_eq!(run_split(mk(), &bytes, &splits), whole);
    }
}

#[test]
fn reader_and_stream_adapters_agree() {
    let atts = vec![vec![1u8; 100_000], (0..=255).collect()];
    let (ct, bytes, expected) = message(&atts, true);
    let mk = || Parser::new(&ct, select(), Limits::default(), MemorySink::new(1 << 20)).unwrap();
    let m = read::parse_reader_with_buffer(&bytes[..], mk(), 777).unwrap();
    let got: Vec<Vec<u8>> = m.binaries.iter().map(|b| b.output.clone()).collect();
    assert_eq!(got, expected);
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = bytes
        .chunks(1000)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let m2 = rt
        .block_on(stream::parse_stream(
            futures_util::stream::iter(chunks),
            mk(),
        ))
        .unwrap();
    assert_eq!(m2, m);
    // A truncated body is an error through the adapter too.
    let e = read::parse_reader(&bytes[..bytes.len() - 10], mk()).unwrap_err();
    let inner = e
        .get_ref()
        .unwrap()
        .downcast_ref::<bulkwire_xop::Error>()
        .unwrap();
    assert_eq!(inner.kind(), bulkwire_xop::ErrorKind::Truncated);
}

#[test]
fn memory_sink_cap_is_a_sink_error() {
    let (ct, bytes, _) = message(&[vec![0u8; 5000]], false);
    let mut p = Parser::new(&ct, select(), Limits::default(), MemorySink::new(1000)).unwrap();
    let e = p.feed(&bytes, true).unwrap_err();
    assert_eq!(
        (e.kind(), e.http_status()),
        (bulkwire_xop::ErrorKind::Sink, 500)
    );
}

#[test]
fn file_and_reader_attachments_stream() {
    let dir = std::env::temp_dir().join(format!("bulkwire-xop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.bin");
    let file_data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &file_data).unwrap();
    let reader_data = vec![9u8; 4321];
    let mut b = build::Builder::new(SoapVersion::Soap12);
    let env = format!(
        "<s:Envelope xmlns:s=\"http://www.w3.org/2003/05/soap-envelope\"><s:Body><m:up xmlns:m=\"urn:t\"><file>{}</file><file>{}</file></m:up></s:Body></s:Envelope>",
        build::include_element("f"),
        build::include_element("r")
    );
    b.envelope(env)
        .file("f", "application/octet-stream", &path)
        .reader(
            "r",
            "image/png",
            4321,
            Box::new(std::io::Cursor::new(reader_data.clone())),
        );
    let body = b.finish().unwrap();
    assert!(body.to_vec().is_none(), "a file part is not in memory");
    let ct = body.content_type().to_owned();
    let len = body.content_length();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut body.into_reader(), &mut bytes).unwrap();
    assert_eq!(bytes.len() as u64, len, "Content-Length was exact");
    let p = Parser::new(&ct, select(), Limits::default(), MemorySink::new(1 << 20)).unwrap();
    let m = read::parse_reader(&bytes[..], p).unwrap();
    assert_eq!(m.binaries[0].output, file_data);
    assert_eq!(m.binaries[1].output, reader_data);
    assert_eq!(m.binaries[1].content_type.as_deref(), Some("image/png"));
    std::fs::remove_dir_all(&dir).unwrap();
}
