//! Round-trip target: parts built with `Builder` and parsed back with the
//! `Parser` the body's own `Content-Type` selects come back unchanged (name,
//! filename, content type, data), with no error, whole and chunked alike.
//! A body `Builder::finish` refuses (a forced boundary found in the data, a
//! control byte it will not encode) is skipped.
//!
//! One change is expected, not a bug: a name or filename holding `%22`,
//! `%0D` or `%0A` comes back with them decoded. WHATWG escapes `"`, CR, LF
//! that way and leaves `%` alone, so on the wire those are the browsers'
//! escapes (see `testsuite/tests/roundtrip.rs`, `round_trips`).
#![no_main]

use arbitrary::Arbitrary;
use bulkwire_fuzz::{boundary_from, drive, fnv};
use bulkwire_multipart::testutil::random_splits;
use bulkwire_multipart::{Builder, Limits, Parser};
use libfuzzer_sys::fuzz_target;
use std::io::Read;

/// Parts beyond this are dropped: more only repeats the same code.
const MAX_PARTS: usize = 64;

/// A forced boundary when the input gives none; fixed, unlike the builder's
/// random default, so that every crash reproduces.
const DEFAULT_BOUNDARY: &str = "bulkwire-fuzz-6Lq0Zb1xVn3TgH8wKd5PjR2sYc7mFa9e";

#[derive(Arbitrary, Debug)]
enum Type {
    TextPlain,
    Utf8Text,
    OctetStream,
    Json,
    Png,
    /// RFC 2045 parameters, quoted, with characters the header parser splits on.
    Quoted,
}

impl Type {
    fn as_str(&self) -> &'static str {
        match self {
            Type::TextPlain => "text/plain",
            Type::Utf8Text => "text/plain; charset=utf-8",
            Type::OctetStream => "application/octet-stream",
            Type::Json => "application/json",
            Type::Png => "image/png",
            Type::Quoted => "text/x-fuzz; a=\"b;c\\\"d\"; e=f",
        }
    }
}

#[derive(Arbitrary, Debug)]
struct FuzzPart {
    name: String,
    filename: Option<String>,
    content_type: Option<Type>,
    data: Vec<u8>,
    /// Add with `Builder::text` when the part is a plain UTF-8 field.
    as_text: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// Mapped to RFC 2046 bchars; `None` uses [`DEFAULT_BOUNDARY`].
    boundary: Option<Vec<u8>>,
    parts: Vec<FuzzPart>,
}

/// What the parser should report for one part.
#[derive(Debug, PartialEq, Eq)]
struct Expected {
    name: Option<String>,
    filename: Option<String>,
    content_type: Option<String>,
    data: Vec<u8>,
}

fn add(builder: &mut Builder, p: &FuzzPart) -> Expected {
    let ct = p.content_type.as_ref().map(Type::as_str);
    let text = std::str::from_utf8(&p.data).ok();
    match text {
        Some(value) if p.as_text && p.filename.is_none() && ct.is_none() => {
            builder.text(&p.name, value);
        }
        _ => {
            builder.bytes(&p.name, p.filename.as_deref(), ct, p.data.clone());
        }
    }
    // RFC 7578 §4.4: a file part without a type is sent as octet-stream.
    let default = p.filename.as_ref().map(|_| "application/octet-stream");
    Expected {
        name: Some(whatwg_decoded(&p.name)),
        filename: p.filename.as_deref().map(whatwg_decoded),
        content_type: ct.or(default).map(str::to_owned),
        data: p.data.clone(),
    }
}

/// `s` with `%22`, `%0D`, `%0A` (any case) read as `"`, CR, LF, left to
/// right, as the parser reads a name the builder sent.
fn whatwg_decoded(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let hex = rest.get(i + 1..i + 3).map(str::to_ascii_uppercase);
        let decoded = match hex.as_deref() {
            Some("22") => Some('"'),
            Some("0D") => Some('\r'),
            Some("0A") => Some('\n'),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[i + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fuzz_target!(|input: Input| {
    let boundary = match &input.boundary {
        Some(b) if (1..=70).contains(&b.len()) => boundary_from(b),
        _ => DEFAULT_BOUNDARY.as_bytes().to_vec(),
    };
    let boundary = String::from_utf8(boundary).expect("bchars are ASCII");
    let mut builder = Builder::new();
    builder
        .boundary(&boundary)
        .expect("a boundary of bchars is valid");
    let expected: Vec<Expected> = input
        .parts
        .iter()
        .take(MAX_PARTS)
        .map(|p| add(&mut builder, p))
        .collect();
    let Ok(body) = builder.finish() else {
        return;
    };
    let content_type = body.content_type().to_owned();
    let content_length = body.content_length();
    let mut bytes = Vec::new();
    body.into_reader()
        .read_to_end(&mut bytes)
        .expect("an in-memory body reads");
    assert_eq!(bytes.len() as u64, content_length, "Content-Length");

    // Names are not limited by the builder; give their header blocks room.
    let header_room = input
        .parts
        .iter()
        .map(|p| 3 * (p.name.len() + p.filename.as_ref().map_or(0, String::len)) + 256)
        .max()
        .unwrap_or(0);
    let limits = Limits {
        header_bytes: header_room.max(Limits::default().header_bytes),
        ..Limits::default()
    };
    let parser = || {
        Parser::from_content_type(&content_type, limits.clone())
            .expect("the builder's Content-Type parses")
    };
    let whole = drive(parser(), boundary.len(), &bytes, &[]);
    assert_eq!(whole.error, None, "parse error on a built body");
    let got: Vec<Expected> = whole
        .parts()
        .into_iter()
        .map(|(info, data)| Expected {
            name: info.name,
            filename: info.filename,
            content_type: info.content_type,
            data,
        })
        .collect();
    assert_eq!(got, expected);

    let h = fnv(&bytes);
    let splits = random_splits(bytes.len(), 1 + (h % 8) as usize, h);
    let split = drive(parser(), boundary.len(), &bytes, &splits);
    assert_eq!(
        (&whole.events, &whole.error),
        (&split.events, &split.error),
        "whole vs split at {splits:?}"
    );
});
