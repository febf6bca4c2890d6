//! Unit tests of the builder, and the helpers the template tests share.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A file in the temp dir with a unique name, removed on drop.
pub(crate) struct TempFile(pub PathBuf);

impl TempFile {
    pub(crate) fn new(data: &[u8]) -> TempFile {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("bulkwire-build-{}-{n}.bin", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, data).expect("write temp file");
        TempFile(path)
    }

    pub(crate) fn name(&self) -> String {
        self.0.file_name().unwrap().to_string_lossy().into_owned()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Reads 7 bytes at a time, so reads straddle every segment edge.
pub(crate) fn read_all(body: Body) -> io::Result<Vec<u8>> {
    let mut r = body.into_reader();
    let (mut out, mut buf) = (Vec::new(), [0u8; 7]);
    loop {
        match r.read(&mut buf)? {
            0 => return Ok(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

pub(crate) fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

fn forced(b: &str) -> Builder {
    let mut builder = Builder::new();
    builder.boundary(b).unwrap();
    builder
}

fn cursor(data: Vec<u8>) -> Box<dyn Read + Send> {
    Box::new(io::Cursor::new(data))
}

#[test]
fn exact_bytes_of_a_small_form() {
    let mut b = forced("XyZ");
    b.text("title", "hi")
        .bytes("doc", Some("a.txt"), Some("text/plain"), "hello");
    b.bytes("raw", None, None, &b"\x00\x01"[..])
        .bytes("f", Some("x.bin"), None, "");
    let body = b.finish().unwrap();
    let expected: &[u8] = b"--XyZ\r\n\
        Content-Disposition: form-data; name=\"title\"\r\n\r\n\
        hi\r\n--XyZ\r\n\
        Content-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\n\
        Content-Type: text/plain\r\n\r\n\
        hello\r\n--XyZ\r\n\
        Content-Disposition: form-data; name=\"raw\"\r\n\r\n\
        \x00\x01\r\n--XyZ\r\n\
        Content-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\n\
        Content-Type: application/octet-stream\r\n\r\n\
        \r\n--XyZ--\r\n";
    assert_eq!(body.content_type(), "multipart/form-data; boundary=XyZ");
    assert_eq!(
        (body.boundary(), body.content_length()),
        ("XyZ", expected.len() as u64)
    );
    assert_eq!(body.segments().len(), 1, "small pieces coalesce");
    assert!(body.is_in_memory());
    assert_eq!(body.to_bytes_vec().unwrap().concat(), expected);
    assert_eq!(read_all(body).unwrap(), expected);
}

#[test]
fn empty_form_is_just_the_close_delimiter() {
    let body = forced("B").finish().unwrap();
    assert_eq!(read_all(body).unwrap(), b"--B--\r\n");
}

#[test]
fn names_and_filenames_are_escaped_like_browsers() {
    let mut b = forced("B");
    b.bytes("a\"b\r\nc", Some("x\"y\rz\n.bin"), None, "d")
        .text("naïve ☃", "v");
    let out = read_all(b.finish().unwrap()).unwrap();
    let out = String::from_utf8(out).unwrap();
    let esc = r#"name="a%22b%0D%0Ac"; filename="x%22y%0Dz%0A.bin""#;
    assert!(out.contains(&format!("Content-Disposition: form-data; {esc}\r\n")));
    assert!(out.contains("name=\"naïve ☃\"\r\n"), "UTF-8 stays raw");
    for s in ["", "plain", "\"\"", "\r\n\r\n", "a%22b"] {
        let mut v = Vec::new();
        put_escaped(&mut v, s.as_bytes());
        assert_eq!(escaped_len(s.as_bytes()), v.len(), "{s:?}");
    }
}

#[test]
fn large_data_is_shared_small_data_coalesced() {
    let big = Bytes::from(pattern(COALESCE_MAX + 1));
    let edge = Bytes::from(pattern(COALESCE_MAX));
    let mut b = forced("B");
    b.bytes("big", Some("b"), None, big.clone())
        .bytes("edge", None, None, edge.clone());
    let body = b.finish().unwrap();
    let segs = body.to_bytes_vec().unwrap();
    assert_eq!(segs.len(), 3, "head, big, rest (edge copied)");
    assert_eq!(segs[1].as_ptr(), big.as_ptr(), "no copy of large data");
    assert!(segs.iter().all(|s| s.as_ptr() != edge.as_ptr()));
}

#[test]
fn content_length_matches_streamed_bytes() {
    let file = TempFile::new(&pattern(100_000));
    let big = Bytes::from(pattern(5000));
    let mut b = Builder::new();
    b.text("a", "1").file("f", &file.0, None, None).unwrap();
    b.bytes("big", Some("b.bin"), Some("image/png"), big.clone());
    b.reader(
        "r",
        Some("r.bin"),
        Some("application/x-r"),
        3000,
        cursor(pattern(3000)),
    );
    let body = b.finish().unwrap();
    assert!(!body.is_in_memory() && body.to_bytes_vec().is_none());
    let (bd, len) = (body.boundary().to_owned(), body.content_length());
    let out = read_all(body).unwrap();
    assert_eq!(out.len() as u64, len);
    let disp = |n: &str, f: &str| {
        format!("Content-Disposition: form-data; name=\"{n}\"; filename=\"{f}\"\r\n")
    };
    let expected = [
        format!("--{bd}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--{bd}\r\n")
            .into_bytes(),
        format!(
            "{}Content-Type: application/octet-stream\r\n\r\n",
            disp("f", &file.name())
        )
        .into_bytes(),
        pattern(100_000),
        format!(
            "\r\n--{bd}\r\n{}Content-Type: image/png\r\n\r\n",
            disp("big", "b.bin")
        )
        .into_bytes(),
        pattern(5000),
        format!(
            "\r\n--{bd}\r\n{}Content-Type: application/x-r\r\n\r\n",
            disp("r", "r.bin")
        )
        .into_bytes(),
        pattern(3000),
        format!("\r\n--{bd}--\r\n").into_bytes(),
    ];
    assert_eq!(out, expected.concat());
}

fn reader_body(declared: u64, actual: usize) -> Body {
    let mut b = Builder::new();
    b.reader("r", None, None, declared, cursor(pattern(actual)));
    b.finish().unwrap()
}

#[test]
fn reader_must_yield_its_declared_length() {
    assert!(read_all(reader_body(10, 10)).is_ok());
    let short = read_all(reader_body(10, 9)).unwrap_err();
    assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
    let long = read_all(reader_body(10, 11)).unwrap_err();
    assert_eq!(long.kind(), io::ErrorKind::InvalidData);
    assert!(read_all(reader_body(0, 0)).is_ok());
    assert_eq!(
        read_all(reader_body(0, 1)).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
}

#[test]
fn file_is_opened_lazily_and_a_failed_open_is_not_skipped() {
    let file = TempFile::new(b"abc");
    let mut b = forced("B");
    b.file("f", &file.0, Some("n"), Some("text/plain")).unwrap();
    let body = b.finish().unwrap();
    std::fs::remove_file(&file.0).unwrap();
    let mut r = body.into_reader();
    let mut out = Vec::new();
    assert_eq!(
        r.read_to_end(&mut out).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    assert!(out.ends_with(b"\r\n\r\n"), "headers came before the open");
    std::fs::write(&file.0, b"abc").unwrap();
    r.read_to_end(&mut out).unwrap();
    assert!(out.ends_with(b"\r\n\r\nabc\r\n--B--\r\n"));
}

#[test]
fn file_that_changed_since_it_was_added_is_an_error() {
    let file = TempFile::new(b"abc");
    let body = |b: &mut Builder| b.file("f", &file.0, None, None).unwrap().finish().unwrap();
    let (grown, shrunk) = (body(&mut Builder::new()), body(&mut Builder::new()));
    std::fs::write(&file.0, b"abcd").unwrap();
    assert_eq!(
        read_all(grown).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    std::fs::write(&file.0, b"ab").unwrap();
    assert_eq!(
        read_all(shrunk).unwrap_err().kind(),
        io::ErrorKind::UnexpectedEof
    );
}

#[test]
fn file_that_cannot_be_measured_is_refused_at_once() {
    let missing = std::env::temp_dir().join("bulkwire-build-no-such-file");
    assert_eq!(
        Builder::new()
            .file("f", missing, None, None)
            .err()
            .unwrap()
            .kind(),
        io::ErrorKind::NotFound
    );
    let dir = std::env::temp_dir();
    assert_eq!(
        Builder::new()
            .file("f", dir, None, None)
            .err()
            .unwrap()
            .kind(),
        io::ErrorKind::InvalidInput
    );
}

#[test]
fn colliding_boundary_is_redrawn() {
    let pieces: [&[u8]; 2] = [b"head", b"data --abc more"];
    let mut draws = ["abc", "ab", "fresh", "never"].into_iter();
    let b = choose_boundary(&pieces, || draws.next().unwrap().to_owned());
    assert_eq!((b.as_str(), draws.next()), ("fresh", Some("never")));
    assert!(collides(&[b"name=\"--x\""], "x") && !collides(&[b"-x"], "x"));
}

#[test]
fn forced_boundary_that_collides_is_an_error() {
    for (name, value) in [("a", "x--B"), ("--B", "x")] {
        let err = forced("B").text(name, value).finish().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
    assert!(forced("B").text("a", "-B B--").finish().is_ok());
}

#[test]
fn random_boundary_shape() {
    let mut b = Builder::new();
    let body = b.text("a", "b").finish().unwrap();
    let tail = body.boundary().strip_prefix("bulkwire-").unwrap();
    assert!(tail.len() == 32 && tail.bytes().all(|c| c.is_ascii_alphanumeric()));
    assert_eq!(
        body.content_type(),
        format!("multipart/form-data; boundary={}", body.boundary())
    );
    assert_ne!(random_boundary(), random_boundary());
}

#[test]
fn boundary_syntax_is_validated() {
    let seventy = "a".repeat(70);
    for ok in ["simple boundary", "'()+_,-./:=?", seventy.as_str()] {
        assert!(Builder::new().boundary(ok).is_ok(), "{ok:?}");
    }
    for bad in ["", "ab ", "a\rb", "a@b", "a\"b", "é", &"a".repeat(71)] {
        let err = Builder::new().boundary(bad).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
    }
    let body = forced("a b:c").finish().unwrap();
    assert_eq!(
        body.content_type(),
        "multipart/form-data; boundary=\"a b:c\""
    );
}

#[test]
fn related_and_mixed_parts_with_extra_headers() {
    let file = TempFile::new(b"FILE");
    let mut b = Builder::related("application/xop+xml");
    b.boundary("M").unwrap();
    b.part(Some("application/xop+xml; type=\"text/xml\""), "<e/>")
        .header("Content-ID", "<root>");
    b.part_file(&file.0, None)
        .unwrap()
        .part_reader(Some("a/b"), 2, cursor(b"RD".to_vec()));
    let body = b.finish().unwrap();
    assert_eq!(
        body.content_type(),
        "multipart/related; type=\"application/xop+xml\"; boundary=M"
    );
    let expected = "--M\r\nContent-Type: application/xop+xml; type=\"text/xml\"\r\nContent-ID: <root>\r\n\r\n<e/>\
        \r\n--M\r\n\r\nFILE\r\n--M\r\nContent-Type: a/b\r\n\r\nRD\r\n--M--\r\n";
    assert_eq!(body.content_length(), expected.len() as u64);
    assert_eq!(read_all(body).unwrap(), expected.as_bytes());
    let ct = Builder::mixed().finish().unwrap().content_type().to_owned();
    assert!(ct.starts_with("multipart/mixed; boundary=bulkwire-"));
    let q = Builder::related("a\"b\\").finish().unwrap();
    assert!(q
        .content_type()
        .starts_with(r#"multipart/related; type="a\"b\\"; boundary="#));
}

#[test]
fn chained_mistakes_are_reported_by_finish() {
    let cases: [fn(&mut Builder); 5] = [
        |b| {
            b.header("Content-ID", "<x>");
        },
        |b| {
            b.text("a", "b").header("Bad Name", "v");
        },
        |b| {
            b.text("a", "b").header("X-A", "v\r\nX-B: w");
        },
        |b| {
            b.bytes("a", Some("f"), Some("text/plain\r\nX: y"), "d");
        },
        |b| {
            b.part(Some("a/b\n"), "d");
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let mut b = Builder::new();
        case(&mut b);
        assert_eq!(
            b.finish().unwrap_err().kind(),
            io::ErrorKind::InvalidInput,
            "case {i}"
        );
        assert_eq!(
            b.finish().unwrap().content_length(),
            47,
            "builder reset after an error"
        );
    }
    assert!(Builder::related("a\nb").finish().is_err());
}

#[test]
fn parser_reads_back_what_the_builder_wrote() {
    use crate::testutil::{run_bytewise, run_whole};
    use crate::{Limits, Parser};
    let file = TempFile::new(&pattern(70_000));
    let mut b = Builder::new();
    b.text("quote\"name", "v\r\n--not-a-boundary")
        .file("f", &file.0, Some("a\nb.bin"), None)
        .unwrap();
    b.bytes("big", Some("big.bin"), Some("image/png"), pattern(4000));
    let body = b.finish().unwrap();
    let parser = || Parser::from_content_type(body.content_type(), Limits::default()).unwrap();
    let (p1, p2) = (parser(), parser());
    let bytes = read_all(body).unwrap();
    let outcome = run_whole(p1, &bytes);
    assert_eq!(outcome.error, None);
    let parts = outcome.parts();
    let got: Vec<_> = parts
        .iter()
        .map(|(i, d)| (i.name.as_deref(), i.filename.as_deref(), d.len()))
        .collect();
    assert_eq!(
        got,
        [
            (Some("quote\"name"), None, 19),
            (Some("f"), Some("a\nb.bin"), 70_000),
            (Some("big"), Some("big.bin"), 4000)
        ]
    );
    assert_eq!(
        parts[1].0.content_type.as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(
        (&parts[1].1, &parts[2].1),
        (&pattern(70_000), &pattern(4000))
    );
    assert_eq!(run_bytewise(p2, &bytes).parts(), parts);
}

/// Every byte the parser refuses in a header value (RFC 7230 §3.2.6) except
/// CR and LF, which names and filenames escape.
fn unescapable_controls() -> impl Iterator<Item = u8> {
    (0u8..0x20)
        .filter(|c| !matches!(c, b'\t' | b'\r' | b'\n'))
        .chain([0x7f])
}

#[test]
fn control_bytes_in_header_values_are_refused_naming_the_field() {
    type Case = (fn(&mut Builder, &str), &'static str);
    let cases: [Case; 6] = [
        (
            |b, s| {
                b.text(s, "v");
            },
            "form-data name {s}",
        ),
        (
            |b, s| {
                b.bytes("doc", Some(s), None, "d");
            },
            "filename {s} of field \"doc\"",
        ),
        (
            |b, s| {
                b.reader("doc", Some("f"), Some(s), 0, cursor(vec![]));
            },
            "content type {s} of field \"doc\"",
        ),
        (
            |b, s| {
                b.text("doc", "v").header("X-A", s);
            },
            "value of header X-A on part 0",
        ),
        (
            |b, s| {
                b.part(Some(s), "d");
            },
            "content type {s} of part 0",
        ),
        (
            |b, s| {
                b.text("a", "b").part_reader(Some(s), 0, cursor(vec![]));
            },
            "content type {s} of part 1",
        ),
    ];
    for c in unescapable_controls() {
        let s = format!("a{}b", c as char);
        for (i, (case, what)) in cases.iter().enumerate() {
            let mut b = Builder::new();
            case(&mut b, &s);
            let err = b.finish().unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "case {i}");
            let what = what.replace("{s}", &format!("{s:?}"));
            let want = format!("{what} has control byte {c:#04x} at 1");
            assert_eq!(err.to_string(), want, "case {i}");
        }
    }
    let err = Builder::related("a\u{7f}").finish().unwrap_err();
    let want = "related type parameter \"a\\u{7f}\" has control byte 0x7f at 1";
    assert_eq!(err.to_string(), want);
}

#[test]
fn control_byte_in_a_path_filename_is_refused() {
    let file = TempFile::new(b"x");
    let mut b = Builder::new();
    b.file("f", &file.0, Some("x\u{1b}[31m.txt"), None).unwrap();
    let err = b.finish().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("of field \"f\""), "{err}");
}

#[test]
fn tab_and_escaped_line_ends_go_through_and_parse_back() {
    use crate::testutil::run_whole;
    use crate::{Limits, Parser};
    let mut b = Builder::new();
    b.bytes("a\tb\r\n", Some("c\td\n"), Some("text/plain;\tq=1"), "x")
        .header("X-A", "1\t2");
    let body = b.finish().unwrap();
    let parser = Parser::from_content_type(body.content_type(), Limits::default()).unwrap();
    let outcome = run_whole(parser, &read_all(body).unwrap());
    assert_eq!(outcome.error, None);
    let info = &outcome.parts()[0].0;
    assert_eq!(info.name.as_deref(), Some("a\tb\r\n"));
    assert_eq!(info.filename.as_deref(), Some("c\td\n"));
    assert_eq!(info.content_type.as_deref(), Some("text/plain;\tq=1"));
    assert_eq!(info.headers[2], ("X-A".into(), "1\t2".into()));
}
