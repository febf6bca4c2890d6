//! Drives a parser over chunked input and records what it gave, for tests
//! here, in the testsuite crate and in the fuzz targets (public but hidden).

use crate::error::{Error, ErrorKind};
use crate::limits::LimitKind;
use crate::message::{BinaryInfo, Message, Sink};
use crate::parser::Parser;
use std::io;

/// What the sink was told and given for one binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub cid: Option<String>,
    pub content_type: Option<String>,
    /// The paths known when the binary began.
    pub paths_at_begin: Vec<String>,
    pub data: Vec<u8>,
}

/// Records every binary in memory (tests only: unbounded by design, the
/// inputs are small). Checks the begin/write/finish protocol as it goes.
#[derive(Debug, Default)]
pub struct RecordingSink {
    current: Option<Recorded>,
    /// Binaries aborted so far.
    pub aborted: usize,
}

impl Sink for RecordingSink {
    type Output = Recorded;
    fn begin(&mut self, info: &BinaryInfo<'_>) -> io::Result<()> {
        assert!(self.current.is_none(), "begin while a binary is open");
        self.current = Some(Recorded {
            cid: info.cid.map(str::to_owned),
            content_type: info.content_type.map(str::to_owned),
            paths_at_begin: info.paths.to_vec(),
            data: Vec::new(),
        });
        Ok(())
    }
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        assert!(!data.is_empty(), "empty write");
        let cur = self.current.as_mut().expect("write outside a binary");
        cur.data.extend_from_slice(data);
        Ok(())
    }
    fn finish(&mut self) -> io::Result<Recorded> {
        Ok(self.current.take().expect("finish outside a binary"))
    }
    fn abort(&mut self) {
        assert!(
            self.current.take().is_some(),
            "abort without an open binary"
        );
        self.aborted += 1;
    }
}

/// An error as (kind, offset, part, limit), comparable across runs.
pub type ErrorSummary = (ErrorKind, u64, Option<usize>, Option<(LimitKind, u64)>);

pub fn summary(e: &Error) -> ErrorSummary {
    (e.kind(), e.offset(), e.part(), e.limit_exceeded())
}

/// A whole run: the message or the error.
pub type Outcome = Result<Message<Recorded>, ErrorSummary>;

/// Feeds `body` cut at `splits` (sorted offsets; out-of-range ones ignored).
pub fn run_split(mut parser: Parser<RecordingSink>, body: &[u8], splits: &[usize]) -> Outcome {
    let mut bounds: Vec<usize> = splits.iter().copied().filter(|&s| s < body.len()).collect();
    bounds.push(body.len());
    let mut start = 0;
    for (i, &end) in bounds.iter().enumerate() {
        let end = end.max(start);
        let r = parser.feed(&body[start..end], i + 1 == bounds.len());
        if let Err(e) = r {
            let again = parser.feed(b"", true).expect_err("errors are sticky");
            assert_eq!(again, e, "a later call gave another error");
            return Err(summary(&e));
        }
        start = end;
    }
    parser.finish().map_err(|e| summary(&e))
}

/// Whole body in one slice.
pub fn run_whole(parser: Parser<RecordingSink>, body: &[u8]) -> Outcome {
    run_split(parser, body, &[])
}

/// One byte at a time.
pub fn run_bytewise(parser: Parser<RecordingSink>, body: &[u8]) -> Outcome {
    let splits: Vec<usize> = (1..body.len()).collect();
    run_split(parser, body, &splits)
}

pub use bulkwire_multipart::testutil::random_splits;

/// Pseudo-random bytes (xorshift), so a boundary scan sees no easy
/// patterns; the benches' attachment.
pub fn xorshift_payload(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// A SOAP 1.1 MTOM `upload` message with one `len`-byte attachment
/// (`cid:big@bulkwire`, included at `/Envelope/Body/upload/data`): its
/// Content-Type and body, for the benches and the timing example.
pub fn upload_message(len: usize) -> (String, Vec<u8>) {
    use crate::build;
    use crate::message::SoapVersion;
    let env = format!(
        "<s:Envelope xmlns:s=\"http://schemas.xmlsoap.org/soap/envelope/\"><s:Body>\
         <m:upload xmlns:m=\"urn:bulkwire:media\"><name>big.bin</name><data>{}</data>\
         </m:upload></s:Body></s:Envelope>",
        build::include_element("big@bulkwire")
    );
    let mut b = build::Builder::new(SoapVersion::Soap11);
    b.envelope(env).bytes(
        "big@bulkwire",
        "application/octet-stream",
        xorshift_payload(len),
    );
    let body = b.finish().expect("build");
    (
        body.content_type().to_owned(),
        body.to_vec().expect("in memory"),
    )
}
