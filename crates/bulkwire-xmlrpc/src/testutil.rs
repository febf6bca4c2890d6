//! Drives a parser over chunked input and records what it produced, for
//! tests here, in `tests/`, in the testsuite crate and in the fuzz targets
//! (public but hidden).

use crate::{Base64Sink, ErrorKind, LimitKind, Limits, Message, Parser, ValuePath};

/// A sink that keeps each value (up to `max` bytes) and the path it was
/// found at, and checks the parser's calling protocol (begin, write*,
/// finish or abort).
#[derive(Debug, Clone)]
pub struct RecordSink {
    max: usize,
    open: Option<Vec<u8>>,
    /// `ValuePath` of each value begun, as text.
    pub paths: Vec<String>,
    pub aborted: usize,
}

impl RecordSink {
    pub fn new(max: usize) -> Self {
        RecordSink {
            max,
            open: None,
            paths: Vec::new(),
            aborted: 0,
        }
    }
}

impl Base64Sink for RecordSink {
    type Output = Vec<u8>;
    type Error = std::io::Error;

    fn begin(&mut self, path: &ValuePath) -> std::io::Result<()> {
        assert!(self.open.is_none(), "begin while a value is open");
        self.paths.push(path.to_string());
        self.open = Some(Vec::new());
        Ok(())
    }
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        assert!(!bytes.is_empty(), "empty write");
        let buf = self.open.as_mut().expect("write outside a value");
        if buf.len() + bytes.len() > self.max {
            return Err(std::io::Error::other("record sink full"));
        }
        buf.extend_from_slice(bytes);
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        Ok(self.open.take().expect("finish outside a value"))
    }
    fn abort(&mut self) {
        assert!(self.open.take().is_some(), "abort outside a value");
        self.aborted += 1;
    }
}

/// An error as (kind, offset, limit, message), comparable across runs.
pub type ErrorSummary = (ErrorKind, u64, Option<(LimitKind, u64)>, &'static str);

/// What parsing a body gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub message: Option<Message<Vec<u8>>>,
    pub error: Option<ErrorSummary>,
    /// Paths of the base64 values begun, in order.
    pub paths: Vec<String>,
    pub aborted: usize,
}

/// Summarises an error for comparison.
pub fn summary(e: &crate::Error) -> ErrorSummary {
    (e.kind(), e.offset(), e.limit_exceeded(), e.message())
}

/// Feeds `body` cut at `splits` (sorted offsets) to a new parser.
pub fn run_split(limits: &Limits, body: &[u8], splits: &[usize]) -> Outcome {
    run_split_with(limits, body, splits, true)
}

/// The whole body through the general path alone (the fast path for
/// wrapped base64 text off): the reference the fast path must match.
pub fn run_general(limits: &Limits, body: &[u8]) -> Outcome {
    run_split_with(limits, body, &[], false)
}

fn run_split_with(limits: &Limits, body: &[u8], splits: &[usize], fast: bool) -> Outcome {
    let mut parser = Parser::new(limits.clone(), RecordSink::new(1 << 30));
    parser.set_fast_path(fast);
    let mut bounds: Vec<usize> = splits.iter().copied().filter(|&s| s < body.len()).collect();
    bounds.push(body.len());
    let mut start = 0;
    let mut error = None;
    for (i, &end) in bounds.iter().enumerate() {
        let end = end.max(start);
        if let Err(e) = parser.feed(&body[start..end], i + 1 == bounds.len()) {
            error = Some(summary(&e));
            break;
        }
        start = end;
    }
    let (paths, aborted) = (parser.sink().paths.clone(), parser.sink().aborted);
    let message = match parser.finish() {
        Ok((m, _)) => Some(m),
        Err(e) => {
            assert_eq!(error, Some(summary(&e)), "finish repeats the feed error");
            None
        }
    };
    Outcome {
        message,
        error,
        paths,
        aborted,
    }
}

/// Whole body in one slice.
pub fn run_whole(limits: &Limits, body: &[u8]) -> Outcome {
    run_split(limits, body, &[])
}

/// One byte at a time.
pub fn run_bytewise(limits: &Limits, body: &[u8]) -> Outcome {
    let splits: Vec<usize> = (1..body.len()).collect();
    run_split(limits, body, &splits)
}

/// `n` random cut points from a small deterministic generator (xorshift),
/// so failures are reproducible from the seed.
pub fn random_splits(len: usize, n: usize, seed: u64) -> Vec<usize> {
    let mut x = seed | 1;
    let mut v: Vec<usize> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (len as u64 + 1)) as usize
        })
        .collect();
    v.sort_unstable();
    v
}

/// Runs `body` whole, byte by byte (if at most `bytewise_max` long) and at
/// 100 random split points for each of `seeds` seeds; asserts every run
/// gives the same outcome and returns it.
pub fn run_all(limits: &Limits, body: &[u8], bytewise_max: usize, seeds: u64) -> Outcome {
    let whole = run_whole(limits, body);
    if body.len() <= bytewise_max {
        assert_eq!(run_bytewise(limits, body), whole, "byte by byte");
    }
    for seed in 1..=seeds {
        let splits = random_splits(body.len(), 100, seed);
        assert_eq!(run_split(limits, body, &splits), whole, "splits {splits:?}");
    }
    whole
}

/// A blob of `len` pseudo-random bytes generated as it is read (so a
/// 200 MiB body can be built without a 200 MiB payload buffer beside it).
#[derive(Debug, Clone, Copy)]
pub struct PatternBlob {
    pub len: u64,
    pub seed: u64,
}

struct PatternReader {
    left: u64,
    x: u64,
}

impl std::io::Read for PatternReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = out
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        for chunk in out[..n].chunks_mut(8) {
            self.x ^= self.x << 13;
            self.x ^= self.x >> 7;
            self.x ^= self.x << 17;
            chunk.copy_from_slice(&self.x.to_le_bytes()[..chunk.len()]);
        }
        self.left -= n as u64;
        Ok(n)
    }
}

impl crate::Blob for PatternBlob {
    fn len(&self) -> u64 {
        self.len
    }
    fn open(&self) -> std::io::Result<Box<dyn std::io::Read + '_>> {
        Ok(Box::new(PatternReader {
            left: self.len,
            x: self.seed | 1,
        }))
    }
}

/// The body of a WordPress `wp.uploadFile` call (`blog_id, username,
/// password, struct{name, type, bits, overwrite}`) carrying `payload`
/// pseudo-random bytes, base64 wrapped at 76 columns with LF as Python's
/// `xmlrpc.client` sends it. Built in one exactly sized buffer.
pub fn upload_body(payload: u64) -> Vec<u8> {
    use crate::{encode_call, EncodeOptions, LineEnd, Value};
    let file = Value::Struct(vec![
        ("name".into(), Value::String("upload.bin".into())),
        (
            "type".into(),
            Value::String("application/octet-stream".into()),
        ),
        (
            "bits".into(),
            Value::Base64(PatternBlob {
                len: payload,
                seed: 42,
            }),
        ),
        ("overwrite".into(), Value::Bool(true)),
    ]);
    let params = vec![
        Value::Int(1),
        Value::String("admin".into()),
        Value::String("secret".into()),
        file,
    ];
    let opts = EncodeOptions {
        wrap: Some(LineEnd::Lf),
        ..EncodeOptions::default()
    };
    let enc = encode_call("wp.uploadFile", &params, &opts).expect("renders");
    enc.to_vec().expect("in memory")
}

/// The base64 text of an [`upload_body`], white space removed: what a bare
/// `base64_simd` decode gets as its input in the baselines.
pub fn stripped_base64(body: &[u8]) -> Vec<u8> {
    let start = find(body, b"<base64>") + 8;
    let end = find(body, b"</base64>");
    body[start..end]
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect()
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("present")
}
