//! Unit tests of templates: a render equals the builder's output.

use super::*;
use crate::build::tests::{pattern, read_all, TempFile};
use crate::build::{Builder, COALESCE_MAX};

fn forced(b: &str) -> TemplateBuilder {
    let mut t = TemplateBuilder::new();
    t.boundary(b).unwrap();
    t
}

/// The same form as a template and, for given values, as a builder.
struct Form {
    big: Bytes,
    file: TempFile,
}

impl Form {
    fn new() -> Form {
        Form {
            big: Bytes::from(pattern(COALESCE_MAX * 8)),
            file: TempFile::new(&pattern(10_000)),
        }
    }

    fn template(&self) -> Template {
        let mut t = forced("TB");
        t.text("a", "static").text("b", Slot(0));
        t.file_bytes("f", Slot(1), Some("image/png"), self.big.clone());
        t.file_bytes("g", "g\".txt", None, "small")
            .text("c", Slot(0));
        t.file("h", &self.file.0, None, None).unwrap();
        t.build().unwrap()
    }

    fn builder(&self, v: [&str; 2]) -> Body {
        let mut b = Builder::new();
        b.boundary("TB").unwrap();
        b.text("a", "static").text("b", v[0]);
        b.bytes("f", Some(v[1]), Some("image/png"), self.big.clone());
        b.bytes("g", Some("g\".txt"), None, "small").text("c", v[0]);
        b.file("h", &self.file.0, None, None).unwrap();
        b.finish().unwrap()
    }
}

#[test]
fn render_equals_builder_output() {
    let form = Form::new();
    let t = form.template();
    assert_eq!(t.slots(), 2);
    for v in [["one", "pic.png"], ["v\"al\r\n", "p\"i\rc\n.png"], ["", ""]] {
        let (body, want) = (t.render(&v).unwrap(), form.builder(v));
        assert_eq!(body.content_type(), want.content_type());
        assert_eq!(body.content_length(), want.content_length(), "{v:?}");
        let n = t.static_len() + 2 * v[0].len() as u64 + build::escaped_len(v[1].as_bytes()) as u64;
        assert_eq!(body.content_length(), n);
        let out = read_all(body).unwrap();
        assert_eq!(out.len() as u64, n);
        assert_eq!(out, read_all(want).unwrap(), "{v:?}");
    }
}

#[test]
fn renders_share_file_data_and_static_bytes() {
    let form = Form::new();
    let t = form.template();
    let (r1, r2) = (
        t.render(&["x", "y"]).unwrap(),
        t.render(&["z", "w"]).unwrap(),
    );
    let ptrs = |b: &Body| -> Vec<*const u8> {
        let seg = |s: &Segment| match s {
            Segment::Bytes(b) => b.as_ptr(),
            _ => std::ptr::null(),
        };
        b.segments().iter().map(seg).collect()
    };
    let (p1, p2) = (ptrs(&r1), ptrs(&r2));
    assert!(p1.contains(&form.big.as_ptr()) && p2.contains(&form.big.as_ptr()));
    assert_eq!(p1[0], p2[0], "the first static run is shared");
    let slot_segments = p1.iter().zip(&p2).filter(|(a, b)| a != b).count();
    assert_eq!(slot_segments, 3, "only the slot values differ");
    let file = r1
        .segments()
        .iter()
        .find(|s| matches!(s, Segment::File { .. }));
    assert!(matches!(file, Some(Segment::File { len: 10_000, .. })));
}

#[test]
fn render_into_reuses_the_vector() {
    let form = Form::new();
    let t = form.template();
    let mut out = Vec::new();
    let n = t.render_into(&["a", "b"], &mut out).unwrap();
    let (len, cap) = (out.len(), out.capacity());
    assert_eq!(
        t.render_into(&[String::from("a"), String::from("b")], &mut out)
            .unwrap(),
        n
    );
    assert_eq!((out.len(), out.capacity()), (len, cap));
    assert_eq!(out.iter().map(Segment::len).sum::<u64>(), n);
}

#[test]
fn render_checks_its_values() {
    let t = Form::new().template();
    for bad in [&["a"][..], &["a", "b", "c"], &[]] {
        assert_eq!(
            t.render(bad).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
    for v in [["x--TB", "f"], ["x", "--TB--"]] {
        assert_eq!(
            t.render(&v).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
    assert!(t.render(&["-TB", "--T B"]).is_ok());
}

#[test]
fn build_checks_static_parts() {
    let collide = forced("TB").text("a", "--TB").build();
    assert_eq!(collide.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    let name = forced("TB").file_bytes("--TB", Slot(0), None, "d").build();
    assert_eq!(name.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    let ctype = forced("TB")
        .file_bytes("a", "f", Some("a/b\r\n"), "d")
        .build();
    assert_eq!(ctype.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    let missing = std::env::temp_dir().join("bulkwire-template-no-such-file");
    assert!(TemplateBuilder::new()
        .file("h", missing, None, None)
        .is_err());
    assert!(TemplateBuilder::new().boundary("bad\n").is_err());
}

#[test]
fn exact_bytes_without_slots_and_random_boundary() {
    let t = forced("B").text("a", "1").build().unwrap();
    let body = t.render::<&str>(&[]).unwrap();
    assert_eq!(
        read_all(body).unwrap(),
        b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--B--\r\n"
    );
    let t = TemplateBuilder::new().text("a", Slot(0)).build().unwrap();
    assert!(t.boundary().starts_with("bulkwire-") && t.boundary().len() == 41);
    assert_eq!(
        t.content_type(),
        format!("multipart/form-data; boundary={}", t.boundary())
    );
    fn shareable<T: Send + Sync + Clone>(_: &T) {}
    shareable(&t);
}

#[test]
fn control_bytes_in_names_filenames_and_types_are_refused() {
    let name = forced("TB").text("a\u{1}", "v").build().unwrap_err();
    assert_eq!(
        name.to_string(),
        "form-data name \"a\\u{1}\" has control byte 0x01 at 1"
    );
    let file = forced("TB").file_bytes("f", "x\u{0}", None, "d").build();
    let want = "filename \"x\\0\" of field \"f\" has control byte 0x00 at 1";
    assert_eq!(file.unwrap_err().to_string(), want);
    let ctype = forced("TB")
        .file_bytes("f", Slot(0), Some("a/\u{7f}"), "d")
        .build();
    assert_eq!(ctype.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    let ok = forced("TB")
        .file_bytes("a\tb\r\n", "c\td\"", None, "d")
        .build();
    assert!(ok.is_ok(), "HT goes raw, CR, LF and quote are escaped");
}

#[test]
fn render_refuses_a_control_byte_in_a_filename_value_only() {
    let mut t = forced("TB");
    t.text("a", Slot(0))
        .file_bytes("f", Slot(1), None, "d")
        .text("b", Slot(1));
    let t = t.build().unwrap();
    assert!(
        t.render(&["\u{1}\u{7f}", "x\r\n\t\""]).is_ok(),
        "data is raw"
    );
    let err = t.render(&["a", "x\u{1f}"]).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    let want = "filename \"x\\u{1f}\" (value 1) of field \"f\" has control byte 0x1f at 1";
    assert_eq!(err.to_string(), want);
    let mut out = Vec::new();
    assert!(t.render_into(&["a", "\u{8}"], &mut out).is_err());
}
