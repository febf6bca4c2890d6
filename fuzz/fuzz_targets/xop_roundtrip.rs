//! Round-trip target for MTOM/XOP: attachments (with arbitrary bytes,
//! boundary-like ones included) and an envelope referring to them are
//! built with `build::Builder`, parsed back, whole and chunked, and every
//! attachment comes back with its Content-ID, type, path and bytes; inline
//! base64 and a text field come back too.
#![no_main]

use arbitrary::Arbitrary;
use bulkwire_fuzz::fnv;
use bulkwire_xop::testutil::{random_splits, run_split, RecordingSink};
use bulkwire_xop::{build, Limits, Parser, Select, SoapVersion};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    soap12: bool,
    name: String,
    inline: Vec<u8>,
    attachments: Vec<(String, Vec<u8>)>,
    /// Prepend `--` plus the start of the envelope's text to each
    /// attachment, so data looks like delimiters and markup.
    tricky: bool,
}

const MAX_ATTACHMENTS: usize = 16;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fuzz_target!(|input: Input| {
    let (version, ns) = if input.soap12 {
        (
            SoapVersion::Soap12,
            "http://www.w3.org/2003/05/soap-envelope",
        )
    } else {
        (
            SoapVersion::Soap11,
            "http://schemas.xmlsoap.org/soap/envelope/",
        )
    };
    // Names must be XML text the tokenizer keeps as is (no CR, controls).
    if input.name.chars().any(|c| c.is_control()) || input.name.len() > 200 {
        return;
    }
    let mut b = build::Builder::new(version);
    let mut elements = String::new();
    let mut expected = Vec::new();
    for (i, (id, data)) in input.attachments.iter().take(MAX_ATTACHMENTS).enumerate() {
        // Content-IDs: the fuzzer's text made header-safe, made unique.
        let id: String = id
            .chars()
            .filter(|c| !c.is_control() && *c != '<' && *c != '>')
            .take(40)
            .collect();
        let cid = format!("{i}.{}@fuzz", id.trim());
        let mut bytes = Vec::new();
        if input.tricky {
            bytes.extend_from_slice(b"\r\n--bulkwire-\r\n<s:Envelope>");
        }
        bytes.extend_from_slice(data);
        elements.push_str(&format!("<file>{}</file>", build::include_element(&cid)));
        b.bytes(&cid, "application/octet-stream", bytes.clone());
        expected.push((cid, bytes));
    }
    let b64 = {
        let mut enc = bulkwire_xml::base64::Encoder::new(Some(bulkwire_xml::base64::LineEnd::Lf));
        let mut out = Vec::new();
        enc.push(&input.inline, &mut |c: &[u8]| -> Result<(), ()> {
            out.extend_from_slice(c);
            Ok(())
        })
        .unwrap();
        enc.finish(&mut |c: &[u8]| -> Result<(), ()> {
            out.extend_from_slice(c);
            Ok(())
        })
        .unwrap();
        String::from_utf8(out).expect("base64 is ASCII")
    };
    let env = format!(
        "<s:Envelope xmlns:s=\"{ns}\"><s:Body><m:upload xmlns:m=\"urn:f\"><name>{}</name><data>{b64}</data>{elements}</m:upload></s:Body></s:Envelope>",
        escape(&input.name)
    );
    b.envelope(env);
    let body = b.finish().expect("the builder accepts this message");
    let ct = body.content_type().to_owned();
    let bytes = body.to_vec().expect("in memory");
    let select = Select::new()
        .binary("/Envelope/Body/{urn:f}upload/data")
        .unwrap()
        .text("/Envelope/Body/{urn:f}upload/name")
        .unwrap();
    let limits = Limits {
        envelope_bytes: 1 << 24,
        ..Limits::default()
    };
    let mk = || {
        Parser::new(
            &ct,
            select.clone(),
            limits.clone(),
            RecordingSink::default(),
        )
        .unwrap()
    };
    let whole = run_split(mk(), &bytes, &[]);
    let m = whole.as_ref().expect("a built message parses");
    assert_eq!(m.version, version);
    assert_eq!(
        m.field("/Envelope/Body/upload/name"),
        Some(input.name.as_str())
    );
    let inline = m.binary("/Envelope/Body/upload/data").expect("inline data");
    assert_eq!(inline.output.data, input.inline);
    let got: Vec<(String, Vec<u8>)> = m
        .binaries
        .iter()
        .filter_map(|b| Some((b.cid.clone()?, b.output.data.clone())))
        .collect();
    assert_eq!(got, expected);
    for b in m.binaries.iter().filter(|b| b.cid.is_some()) {
        assert_eq!(b.paths, vec!["/Envelope/Body/upload/file"]);
    }
    assert!(m.unreferenced.is_empty());
    let h = fnv(&bytes);
    let splits = random_splits(bytes.len(), 1 + (h % 8) as usize, h);
    assert_eq!(
        run_split(mk(), &bytes, &splits),
        whole,
        "whole vs split at {splits:?}"
    );
});
