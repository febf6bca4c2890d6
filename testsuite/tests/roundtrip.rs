//! Round trip: whatever the [`Builder`] and a [`Template`] make, the parser
//! reads back as the same parts, whole, at random split points and byte by
//! byte, and so do the blocking and async adapters.
//!
//! Part data is salted with what a boundary scan trips over: every proper
//! prefix of the delimiter `CRLF--boundary`, the boundary text alone, CRLF
//! and dash runs. A forced boundary that occurs in a part must be refused by
//! `finish()`, so that case is checked too rather than filtered out.

use bulkwire_multipart::stream::{MultipartStream, StreamEvent};
use bulkwire_multipart::testutil::{random_splits, run_bytewise, run_split, run_whole, Outcome};
use bulkwire_multipart::{
    Builder, Limits, MultipartReader, Parser, PartInfo, Slot, TemplateBuilder, Value,
};
use bytes::Bytes;
use futures_util::StreamExt;
use proptest::prelude::*;
use proptest::{collection::vec, option};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::fmt;
use std::io::{self, Read};

/// The random boundary's fixed prefix: with no forced boundary, data salted
/// with it comes as close to the real delimiter as a test can know.
const RANDOM_PREFIX: &str = "bulkwire-";

/// How a part is handed to the builder.
#[derive(Debug, Clone, Copy, PartialEq)]
enum How {
    Text,
    Bytes,
    Reader,
    /// `Builder::part`: no Content-Disposition, so `multipart/mixed` only.
    Bare,
}

#[derive(Debug, Clone)]
struct PartSpec {
    how: How,
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    extra: Option<String>,
    data: Vec<u8>,
}

/// What a part must parse back as.
#[derive(Clone, PartialEq)]
struct Expected {
    name: Option<String>,
    filename: Option<String>,
    content_type: Option<String>,
    extra: Option<String>,
    data: Vec<u8>,
}

/// Data shown by length, checksum and an escaped start, so that a failure
/// stays readable.
impl fmt::Debug for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sum = self
            .data
            .iter()
            .fold(0u32, |h, &b| h.rotate_left(5) ^ u32::from(b));
        let head = Bytes::copy_from_slice(&self.data[..self.data.len().min(48)]);
        f.debug_struct("Expected")
            .field("name", &self.name)
            .field("filename", &self.filename)
            .field("content_type", &self.content_type)
            .field("extra", &self.extra)
            .field(
                "data",
                &format_args!("{} bytes, sum {sum:08x}, {head:?}", self.data.len()),
            )
            .finish()
    }
}

#[derive(Debug, Clone)]
struct Form {
    boundary: Option<String>,
    mixed: bool,
    parts: Vec<PartSpec>,
    seeds: [u64; 3],
}

/// RFC 2046 bchars, 1 to 70, not ending in a space; sometimes a short one of
/// dashes, which sit next to the delimiter's own dashes.
fn boundary() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        2 => Just(None),
        2 => "[0-9A-Za-z'()+_,./:=? -]{0,69}[0-9A-Za-z'()+_,./:=?-]".prop_map(Some),
        1 => "[-a ]{0,3}[-a]".prop_map(Some),
    ]
}

/// Names and filenames: UTF-8, quotes, line ends, tabs, separators.
fn name() -> impl Strategy<Value = String> {
    r#"[a-zA-Z0-9 _.;=':/"\r\n\té☃😀%\\-]{0,12}"#.prop_filter("round-trippable", |n| round_trips(n))
}

/// Names that survive WHATWG escaping plus the parser's decoding. Left out:
/// `%22`, `%0D`, `%0A` sent raw, which a parser decodes as the browsers'
/// escapes (WHATWG does not escape `%`, so this is inherent). Backslashes
/// round-trip: the builder sends them as the quoted-pair `\\`.
fn round_trips(n: &str) -> bool {
    let lower = n.to_ascii_lowercase();
    !["%22", "%0d", "%0a"].iter().any(|e| lower.contains(e))
}

/// A header value: no control but HT, no white space at the ends (the
/// parser trims it, RFC 7230 §3.2.4).
fn header_value() -> impl Strategy<Value = String> {
    r#"([!-~é]([ -~\té☃]{0,20}[!-~☃])?)?"#
}

/// Part data: random bytes mixed with near-delimiters for this boundary.
fn data(boundary: Option<String>) -> impl Strategy<Value = Vec<u8>> {
    let text = boundary.unwrap_or_else(|| RANDOM_PREFIX.to_owned());
    let delim = format!("\r\n--{text}").into_bytes();
    let n = delim.len();
    let piece = prop_oneof![
        4 => vec(any::<u8>(), 0..24),
        3 => (0..n).prop_map(move |k| delim[..k].to_vec()),
        1 => Just(text.into_bytes()),
        1 => (1..4usize).prop_map(|k| b"\r\n".repeat(k)),
        1 => (1..4usize).prop_map(|k| b"-".repeat(k)),
        1 => Just(b"\r".to_vec()),
        1 => vec(any::<u8>(), 1000..2500),
    ];
    vec(piece, 0..6).prop_map(|v| v.concat())
}

fn part(boundary: Option<String>, mixed: bool) -> impl Strategy<Value = PartSpec> {
    let how = if mixed {
        prop_oneof![
            Just(How::Text),
            Just(How::Bytes),
            Just(How::Reader),
            Just(How::Bare)
        ]
        .boxed()
    } else {
        prop_oneof![Just(How::Text), Just(How::Bytes), Just(How::Reader)].boxed()
    };
    let content_type = prop_oneof![Just(String::new()), header_value()];
    (
        how,
        name(),
        option::of(name()),
        option::of(content_type),
        option::weighted(0.2, header_value()),
        data(boundary),
    )
        .prop_map(|(how, name, filename, content_type, extra, data)| {
            let (filename, content_type) = match how {
                How::Text => (None, None),
                How::Bare => (None, content_type),
                How::Bytes | How::Reader => (filename, content_type),
            };
            PartSpec {
                how,
                name,
                filename,
                content_type,
                extra,
                data,
            }
        })
}

fn form() -> impl Strategy<Value = Form> {
    (boundary(), any::<bool>())
        .prop_flat_map(|(boundary, mixed)| {
            let parts = vec(part(boundary.clone(), mixed), 0..5);
            let collide = option::weighted(0.1, any::<(usize, usize)>());
            (
                Just(boundary),
                Just(mixed),
                parts,
                collide,
                any::<[u64; 3]>(),
            )
        })
        .prop_map(|(boundary, mixed, mut parts, collide, seeds)| {
            // Now and then the whole delimiter, which a forced boundary must
            // refuse.
            if let (Some((p, at)), false) = (collide, parts.is_empty()) {
                let text = boundary.as_deref().unwrap_or(RANDOM_PREFIX);
                let n = parts.len();
                let data = &mut parts[p % n].data;
                let at = at % (data.len() + 1);
                data.splice(at..at, format!("\r\n--{text}").into_bytes());
            }
            Form {
                boundary,
                mixed,
                parts,
                seeds,
            }
        })
}

fn escaped(v: &str) -> String {
    v.replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether a forced boundary occurs in a part's headers or in-memory data,
/// as sent (names escaped).
fn collides(form: &Form) -> bool {
    let Some(b) = &form.boundary else {
        return false;
    };
    let needle = format!("--{b}");
    form.parts.iter().any(|p| {
        let head = [
            escaped(&p.name),
            p.filename.as_deref().map(escaped).unwrap_or_default(),
            p.content_type.clone().unwrap_or_default(),
            p.extra.clone().unwrap_or_default(),
        ];
        head.iter().any(|h| h.contains(&needle)) || contains(&p.data, needle.as_bytes())
    })
}

fn text_value(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

fn build(form: &Form) -> io::Result<bulkwire_multipart::Body> {
    let mut b = if form.mixed {
        Builder::mixed()
    } else {
        Builder::new()
    };
    if let Some(bd) = &form.boundary {
        b.boundary(bd).unwrap();
    }
    for p in &form.parts {
        let (f, t) = (p.filename.as_deref(), p.content_type.as_deref());
        // A reader's data is not scanned for the boundary: data that holds
        // a forced one goes in as bytes, where finish() must see it.
        let reader_ok = match &form.boundary {
            Some(bd) => !contains(&p.data, format!("--{bd}").as_bytes()),
            None => true,
        };
        match p.how {
            How::Text => b.text(&p.name, &text_value(&p.data)),
            How::Reader if reader_ok => {
                let r = Box::new(io::Cursor::new(p.data.clone()));
                b.reader(&p.name, f, t, p.data.len() as u64, r)
            }
            How::Bytes | How::Reader => b.bytes(&p.name, f, t, p.data.clone()),
            How::Bare => b.part(t, p.data.clone()),
        };
        if let Some(v) = &p.extra {
            b.header("X-Extra", v);
        }
    }
    b.finish()
}

fn expected(form: &Form) -> Vec<Expected> {
    let expect = |p: &PartSpec| {
        let is_file = p.filename.is_some();
        let default_type = is_file.then(|| "application/octet-stream".to_owned());
        let data = match p.how {
            How::Text => text_value(&p.data).into_bytes(),
            _ => p.data.clone(),
        };
        Expected {
            name: (p.how != How::Bare).then(|| p.name.clone()),
            filename: p.filename.clone(),
            content_type: p.content_type.clone().or(default_type),
            extra: p.extra.clone(),
            data,
        }
    };
    form.parts.iter().map(expect).collect()
}

fn got(parts: &[(PartInfo, Vec<u8>)]) -> Vec<Expected> {
    let extra = |i: &PartInfo| {
        let h = i.headers.iter().find(|(n, _)| n == "X-Extra");
        h.map(|(_, v)| v.clone())
    };
    let one = |(i, d): &(PartInfo, Vec<u8>)| Expected {
        name: i.name.clone(),
        filename: i.filename.clone(),
        content_type: i.content_type.clone(),
        extra: extra(i),
        data: d.clone(),
    };
    parts.iter().map(one).collect()
}

/// Builds the form; `None` if the builder rightly refused it.
fn encode(form: &Form) -> Option<(String, Vec<u8>)> {
    let body = match build(form) {
        Err(e) => {
            assert!(collides(form), "unexpected error: {e}");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            return None;
        }
        Ok(body) => body,
    };
    assert!(!collides(form), "a colliding forced boundary was accepted");
    let (ct, len) = (body.content_type().to_owned(), body.content_length());
    let mut bytes = Vec::new();
    body.into_reader().read_to_end(&mut bytes).unwrap();
    assert_eq!(len, bytes.len() as u64, "content_length()");
    Some((ct, bytes))
}

fn parser(content_type: &str) -> Parser {
    Parser::from_content_type(content_type, Limits::default()).unwrap()
}

fn same_run(a: &Outcome, b: &Outcome) -> bool {
    a.events == b.events && a.error == b.error
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn builder_output_parses_back(form in form()) {
        let Some((ct, bytes)) = encode(&form) else { return Ok(()) };
        let whole = run_whole(parser(&ct), &bytes);
        prop_assert_eq!(&whole.error, &None);
        prop_assert_eq!(got(&whole.parts()), expected(&form));
        for seed in form.seeds {
            let splits = random_splits(bytes.len(), 1 + seed as usize % 24, seed);
            let split = run_split(parser(&ct), &bytes, &splits);
            prop_assert!(same_run(&split, &whole), "splits {:?}", splits);
        }
        if bytes.len() <= 4096 {
            prop_assert!(same_run(&run_bytewise(parser(&ct), &bytes), &whole));
        }
    }
}

/// A source that hands out 1 to `max` bytes per read, and now and then
/// `Interrupted`, which the adapter must retry.
struct Dribble {
    data: io::Cursor<Vec<u8>>,
    rng: StdRng,
    max: usize,
}

impl Read for Dribble {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.rng.gen_ratio(1, 16) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = self.rng.gen_range(1..=self.max).min(buf.len());
        self.data.read(&mut buf[..n])
    }
}

/// Parts through [`MultipartReader`]: random buffer, source reads and
/// consumer reads. Every part is read to its end: skipping one can leak its
/// held-back tail into the next (see `adapters.rs`).
fn via_reader(ct: &str, bytes: &[u8], seed: u64) -> Vec<(PartInfo, Vec<u8>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let src = Dribble {
        data: io::Cursor::new(bytes.to_vec()),
        rng: StdRng::seed_from_u64(seed ^ 1),
        max: rng.gen_range(1..200),
    };
    let mut r = MultipartReader::with_buffer(src, parser(ct), rng.gen_range(1..300));
    let mut parts = Vec::new();
    while let Some(info) = r.next_part().unwrap() {
        let (mut data, mut buf) = (Vec::new(), [0u8; 97]);
        loop {
            let k = rng.gen_range(1..=buf.len());
            match r.read(&mut buf[..k]).unwrap() {
                0 => break,
                n => data.extend_from_slice(&buf[..n]),
            }
        }
        parts.push((info, data));
    }
    r.finish().unwrap();
    parts
}

/// Parts through [`MultipartStream`] over random chunks, checking the event
/// order on the way.
fn via_stream(ct: &str, bytes: &[u8], seed: u64) -> Vec<(PartInfo, Vec<u8>)> {
    let body = Bytes::copy_from_slice(bytes);
    let splits = random_splits(bytes.len(), 1 + seed as usize % 32, seed);
    let mut chunks = Vec::new();
    let mut at = 0;
    for end in splits.into_iter().chain([bytes.len()]) {
        chunks.push(Ok::<_, io::Error>(body.slice(at..end)));
        at = end;
    }
    let stream = MultipartStream::new(futures_util::stream::iter(chunks), parser(ct));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let events: Vec<StreamEvent> = rt.block_on(stream.map(|e| e.unwrap()).collect());
    let mut parts: Vec<(PartInfo, Vec<u8>)> = Vec::new();
    let mut open = false;
    for (i, e) in events.iter().enumerate() {
        match e {
            StreamEvent::PartStart(info) if !open => parts.push((info.clone(), Vec::new())),
            StreamEvent::Data(d) if open && !d.is_empty() => {
                parts.last_mut().unwrap().1.extend_from_slice(d)
            }
            StreamEvent::PartEnd if open => {}
            StreamEvent::End if !open && i + 1 == events.len() => {}
            other => panic!("event {i} out of order: {other:?}"),
        }
        open = matches!(e, StreamEvent::PartStart(_) | StreamEvent::Data(_));
    }
    assert!(matches!(events.last(), Some(StreamEvent::End)));
    parts
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn adapters_return_the_parsers_parts(form in form()) {
        let Some((ct, bytes)) = encode(&form) else { return Ok(()) };
        let core = run_whole(parser(&ct), &bytes).parts();
        let infos = |v: &[(PartInfo, Vec<u8>)]| v.iter().map(|p| p.0.clone()).collect::<Vec<_>>();
        for (via, parts) in [
            ("reader", via_reader(&ct, &bytes, form.seeds[0])),
            ("stream", via_stream(&ct, &bytes, form.seeds[1])),
        ] {
            prop_assert_eq!(infos(&parts), infos(&core), "{}", via);
            prop_assert_eq!(got(&parts), got(&core), "{}", via);
        }
    }
}

/// A template part; a `usize` is a slot index.
#[derive(Debug, Clone)]
enum TPart {
    Text(String, Result<String, usize>),
    File(String, Result<String, usize>, Option<String>, Vec<u8>),
}

/// Slot values: anything a name or a field may hold, a control byte (fine
/// in a text field, refused in a filename) and near-delimiters.
fn slot_value(boundary: &str) -> impl Strategy<Value = String> {
    let delim = format!("\r\n--{boundary}");
    let n = delim.len();
    let piece = prop_oneof![
        4 => name(),
        1 => Just("\u{1}".to_owned()),
        2 => (0..=n).prop_map(move |k| delim[..k].to_owned()),
    ];
    vec(piece, 0..4).prop_map(|v| v.concat())
}

fn template_form() -> impl Strategy<Value = (String, Vec<TPart>, Vec<String>)> {
    let forced = "[0-9A-Za-z'()+_,./:=? -]{0,20}[0-9A-Za-z'()+_,./:=?-]";
    forced.prop_flat_map(|b| {
        let value = || prop_oneof![name().prop_map(Ok), (0..4usize).prop_map(Err)];
        let text = (name(), value()).prop_map(|(n, v)| TPart::Text(n, v));
        let ct = option::of(header_value());
        let file = (name(), value(), ct, data(Some(b.clone())))
            .prop_map(|(n, f, t, d)| TPart::File(n, f, t, d));
        let parts = vec(prop_oneof![text, file], 0..5);
        (Just(b.clone()), parts, vec(slot_value(&b), 4))
    })
}

/// Renumbers the slots that are used to 0, 1, … and keeps only their
/// values, so that a value no part uses cannot fail a render alone.
fn dense(parts: &mut [TPart], values: &[String]) -> Vec<String> {
    let mut used: Vec<usize> = Vec::new();
    for p in parts.iter_mut() {
        let (TPart::Text(_, Err(i)) | TPart::File(_, Err(i), ..)) = p else {
            continue;
        };
        let at = used.iter().position(|u| u == i).unwrap_or_else(|| {
            used.push(*i);
            used.len() - 1
        });
        *i = at;
    }
    used.iter().map(|&i| values[i].clone()).collect()
}

fn value(v: &Result<String, usize>) -> Value<'_> {
    match v {
        Ok(s) => Value::Static(s),
        Err(i) => Value::Slot(Slot(*i)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn template_render_equals_builder((b, mut parts, values) in template_form()) {
        let values = dense(&mut parts, &values);
        let resolve = |v: &Result<String, usize>| match v {
            Ok(s) => s.clone(),
            Err(i) => values[*i].clone(),
        };
        let (mut t, mut bld) = (TemplateBuilder::new(), Builder::new());
        t.boundary(&b).unwrap();
        bld.boundary(&b).unwrap();
        for p in &parts {
            match p {
                TPart::Text(n, v) => {
                    t.text(n, value(v));
                    bld.text(n, &resolve(v));
                }
                TPart::File(n, f, ct, d) => {
                    t.file_bytes(n, value(f), ct.as_deref(), d.clone());
                    bld.bytes(n, Some(&resolve(f)), ct.as_deref(), d.clone());
                }
            }
        }
        let rendered = t.build().and_then(|t| t.render(&values));
        match (rendered, bld.finish()) {
            (Ok(r), Ok(w)) => {
                prop_assert_eq!(r.content_type(), w.content_type());
                prop_assert_eq!(r.content_length(), w.content_length());
                let (mut rb, mut wb) = (Vec::new(), Vec::new());
                r.into_reader().read_to_end(&mut rb).unwrap();
                w.into_reader().read_to_end(&mut wb).unwrap();
                prop_assert_eq!(rb, wb);
            }
            (Err(r), Err(w)) => prop_assert_eq!(r.kind(), w.kind()),
            (r, w) => prop_assert!(false, "template {:?}, builder {:?}", r.err(), w.err()),
        }
    }
}
