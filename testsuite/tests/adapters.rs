//! The adapters' promises about their source: the blocking reader never reads
//! ahead of its consumer by more than its buffer and one delimiter, the async
//! stream pulls a chunk only when the parser has used up the last one, and
//! the stream's data events are slices of the source chunks, not copies.

use bulkwire_multipart::stream::{MultipartStream, StreamEvent};
use bulkwire_multipart::{Builder, Event, Limits, MultipartReader, Parser};
use bytes::Bytes;
use futures_util::StreamExt;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::cell::Cell;
use std::convert::Infallible;
use std::io::{self, Read};
use std::rc::Rc;

const BOUNDARY: &str = "adapters-BP";
/// `CRLF--boundary`: the most the parser holds back as a possible delimiter.
const HOLDBACK: usize = 4 + BOUNDARY.len();

/// Random bytes salted with near-delimiters (`CRLF--` and proper prefixes of
/// the boundary, each followed by `#` so that no random byte completes one),
/// so that the parser holds bytes back now and then.
fn salted(len: usize, rng: &mut StdRng) -> Vec<u8> {
    let delim = format!("\r\n--{BOUNDARY}").into_bytes();
    let mut v = Vec::with_capacity(len + delim.len());
    while v.len() < len {
        if rng.gen_ratio(1, 8) {
            v.extend_from_slice(&delim[..rng.gen_range(1..delim.len())]);
            v.push(b'#');
        } else {
            v.push(rng.gen());
        }
    }
    v.truncate(len);
    v
}

/// A form with small and large parts, and each part's data.
fn body(seed: u64) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let datas: Vec<Vec<u8>> = [10, 50_000, 0, 3_000]
        .iter()
        .map(|&n| salted(n, &mut rng))
        .collect();
    let mut b = Builder::new();
    b.boundary(BOUNDARY).unwrap();
    for (i, d) in datas.iter().enumerate() {
        b.bytes(&format!("f{i}"), Some("x.bin"), None, d.clone());
    }
    let mut out = Vec::new();
    b.finish()
        .unwrap()
        .into_reader()
        .read_to_end(&mut out)
        .unwrap();
    (out, datas)
}

fn parser() -> Parser {
    let ct = format!("multipart/form-data; boundary={BOUNDARY}");
    Parser::from_content_type(&ct, Limits::default()).unwrap()
}

/// Offset in `body` where each part's data starts, from the core parser.
fn data_starts(body: &[u8]) -> Vec<usize> {
    let (mut p, mut at, mut starts) = (parser(), 0, Vec::new());
    loop {
        let step = p.step(&body[at..], true).unwrap();
        at += step.consumed;
        match step.event {
            Event::PartStart(_) => starts.push(at),
            Event::End => return starts,
            _ => {}
        }
    }
}

/// Counts the bytes it has handed out; reads 1 to `max` at a time.
struct Counting {
    inner: io::Cursor<Vec<u8>>,
    pulled: Rc<Cell<usize>>,
    rng: StdRng,
    max: usize,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.rng.gen_range(1..=self.max).min(buf.len());
        let n = self.inner.read(&mut buf[..n])?;
        self.pulled.set(self.pulled.get() + n);
        Ok(n)
    }
}

#[test]
fn reader_reads_ahead_at_most_its_buffer_and_a_delimiter() {
    for (seed, size) in [(1, 1), (2, 7), (3, 64), (4, 1000), (5, 4096), (6, 70_000)] {
        let (bytes, datas) = body(seed);
        let starts = data_starts(&bytes);
        let pulled = Rc::new(Cell::new(0));
        let src = Counting {
            inner: io::Cursor::new(bytes.clone()),
            pulled: pulled.clone(),
            rng: StdRng::seed_from_u64(seed),
            max: 5000,
        };
        let mut r = MultipartReader::with_buffer(src, parser(), size);
        let mut rng = StdRng::seed_from_u64(seed ^ 7);
        let check = |pos: usize| {
            let (got, cap) = (pulled.get(), pos + size + HOLDBACK);
            assert!(got <= cap, "buffer {size}: pulled {got} at {pos}");
        };
        for (i, want) in datas.iter().enumerate() {
            r.next_part().unwrap().expect("a part");
            check(starts[i]);
            let (mut data, mut buf) = (Vec::new(), [0u8; 512]);
            loop {
                let k = rng.gen_range(1..=buf.len());
                let n = r.read(&mut buf[..k]).unwrap();
                data.extend_from_slice(&buf[..n]);
                check(starts[i] + data.len());
                if n == 0 {
                    break;
                }
            }
            assert_eq!(&data, want, "part {i}");
        }
        assert!(r.next_part().unwrap().is_none());
        // The close delimiter's CRLF is epilogue: no need to read it.
        assert!(pulled.get() >= bytes.len() - 2);
    }
}

/// `bytes` cut into `n` chunks of nearly equal size, each its own allocation.
fn chunks(bytes: &[u8], n: usize) -> Vec<Bytes> {
    let size = bytes.len().div_ceil(n);
    bytes.chunks(size).map(Bytes::copy_from_slice).collect()
}

type Source = Box<dyn futures_util::Stream<Item = Result<Bytes, Infallible>> + Unpin>;

/// A stream over `chunks` that counts how many have been pulled.
fn counted(chunks: Vec<Bytes>) -> (Source, Rc<Cell<usize>>) {
    let pulled = Rc::new(Cell::new(0));
    let count = pulled.clone();
    let s = futures_util::stream::iter(chunks.into_iter().map(Ok))
        .inspect(move |_| count.set(count.get() + 1));
    (Box::new(s), pulled)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

#[test]
fn stream_pulls_a_chunk_only_when_it_needs_one() {
    let mut rng = StdRng::seed_from_u64(11);
    let data = salted(100_000, &mut rng);
    let mut b = Builder::new();
    b.boundary(BOUNDARY).unwrap();
    b.bytes("f", Some("big.bin"), None, data.clone());
    let mut bytes = Vec::new();
    b.finish()
        .unwrap()
        .into_reader()
        .read_to_end(&mut bytes)
        .unwrap();
    let pieces = chunks(&bytes, 100);
    assert_eq!(pieces.len(), 100);
    let ends: Vec<usize> = pieces
        .iter()
        .scan(0, |end, c| {
            *end += c.len();
            Some(*end)
        })
        .collect();
    let start = data_starts(&bytes)[0];
    let (src, pulled) = counted(pieces);
    let mut s = MultipartStream::new(src, parser());
    let rt = runtime();
    let mut next = || rt.block_on(s.next()).unwrap().unwrap();
    assert!(matches!(next(), StreamEvent::PartStart(_)));
    assert_eq!(pulled.get(), 1, "headers are in the first chunk");
    let StreamEvent::Data(first) = next() else {
        panic!("data expected")
    };
    assert!(
        pulled.get() <= 2,
        "pulled {} for the first data",
        pulled.get()
    );
    // From then on: every chunk but the last pulled was used up, so it
    // ends within a delimiter of what the consumer has got.
    let mut pos = start + first.len();
    loop {
        let used_up = ends.iter().filter(|&&e| e <= pos + HOLDBACK).count();
        assert!(
            pulled.get() <= used_up + 1,
            "pulled {} at {pos}",
            pulled.get()
        );
        match next() {
            StreamEvent::Data(d) => pos += d.len(),
            StreamEvent::PartEnd => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(pos - start, data.len());
    assert!(matches!(next(), StreamEvent::End));
}

#[test]
fn stream_data_are_slices_of_the_source_chunks() {
    for seed in 0..8u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let data = salted(200_000, &mut rng);
        let mut b = Builder::new();
        b.boundary(BOUNDARY).unwrap();
        b.bytes("f", Some("big.bin"), None, data.clone());
        let mut bytes = Vec::new();
        b.finish()
            .unwrap()
            .into_reader()
            .read_to_end(&mut bytes)
            .unwrap();
        let mut pieces = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let end = (at + rng.gen_range(1..4000)).min(bytes.len());
            pieces.push(Bytes::copy_from_slice(&bytes[at..end]));
            at = end;
        }
        let ranges: Vec<_> = pieces.iter().map(|c| c.as_ptr_range()).collect();
        let inside = |d: &Bytes| {
            let r = d.as_ptr_range();
            ranges.iter().any(|c| c.start <= r.start && r.end <= c.end)
        };
        let n_chunks = pieces.len();
        let (src, _) = counted(pieces);
        let events: Vec<StreamEvent> = runtime().block_on(
            MultipartStream::new(src, parser())
                .map(|e| e.unwrap())
                .collect(),
        );
        let (mut got, mut copied, mut copies) = (Vec::new(), 0, 0);
        for e in &events {
            if let StreamEvent::Data(d) = e {
                got.extend_from_slice(d);
                if !inside(d) {
                    assert!(d.len() <= HOLDBACK, "a copy of {} bytes", d.len());
                    copied += d.len();
                    copies += 1;
                }
            }
        }
        assert_eq!(got, data, "seed {seed}");
        assert!(copies <= n_chunks, "{copies} copies for {n_chunks} chunks");
        assert!(
            copied * 100 < data.len(),
            "copied {copied} of {}",
            data.len()
        );
    }
}

/// `next_part` skips a part's data, including the copy of bytes the parser
/// had held back at a chunk edge (a regression: they once leaked into the
/// next part). The reader's first fill ends right after `a\r\n`, so that
/// `\r\n` is held back and later turns out to be data of part `a`.
#[test]
fn skipping_a_part_leaks_nothing_into_the_next() {
    let body: &[u8] = b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\na\r\nx\
        \r\n--B\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\nY\r\n--B--\r\n";
    let cut = body.windows(3).position(|w| w == b"a\r\n").unwrap() + 3;
    let p = Parser::from_content_type("multipart/form-data; boundary=B", Limits::default());
    let mut r = MultipartReader::with_buffer(body, p.unwrap(), cut);
    assert_eq!(r.next_part().unwrap().unwrap().name.as_deref(), Some("a"));
    assert_eq!(r.next_part().unwrap().unwrap().name.as_deref(), Some("b"));
    let mut data = Vec::new();
    r.read_to_end(&mut data).unwrap();
    assert_eq!(data, b"Y");
}
