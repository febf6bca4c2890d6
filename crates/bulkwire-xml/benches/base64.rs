//! Streaming base64 decode against the bare one-shot SIMD decode, on 64 MiB
//! of random bytes encoded with 76-column `\n` line breaks (what Python's
//! xmlrpc.client sends):
//! (a) `base64_simd::forgiving_decode_to_vec` of the whole text, the
//!     baseline; (b) our `Decoder` fed the whole text; (c) our `Decoder` fed
//!     64 KiB chunks; both into a sink that only sums lengths. A `memcpy` of
//!     the text and our `Encoder` are measured alongside for scale.
//! Throughput is per byte of base64 text. After the criterion runs, a
//! best-of-7 timing of (a)–(c) prints the ratio ours / baseline (target:
//! at least 0.8).

use bulkwire_xml::base64::{Decoder, Encoder, LineEnd};
use bulkwire_xml::{Error, Limits, Token, Tokenizer};
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};

const DATA_LEN: usize = 64 << 20;

fn random_bytes(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n);
    v
}

fn encode(data: &[u8]) -> Vec<u8> {
    let mut text = Vec::new();
    let mut enc = Encoder::new(Some(LineEnd::Lf));
    let mut sink = |b: &[u8]| -> Result<(), ()> {
        text.extend_from_slice(b);
        Ok(())
    };
    enc.push(data, &mut sink).unwrap();
    enc.finish(&mut sink).unwrap();
    text
}

/// Our decoder over `text` in `chunk`-sized pushes; returns bytes decoded.
fn decode(dec: &mut Decoder, text: &[u8], chunk: usize) -> u64 {
    let mut total = 0u64;
    let mut sink = |b: &[u8]| -> Result<(), bulkwire_xml::Error> {
        total += b.len() as u64;
        Ok(())
    };
    dec.reset();
    for c in text.chunks(chunk) {
        dec.push(c, &mut sink).unwrap();
    }
    dec.finish(&mut sink).unwrap();
    total
}

/// A `methodCall` whose one parameter is `text` as `<base64>`, tokenized in
/// `chunk`-sized pieces with the value streamed into `dec`.
fn xmlrpc(dec: &mut Decoder, doc: &[u8], chunk: usize) -> u64 {
    let mut tk = Tokenizer::new(Limits::default());
    let mut total = 0u64;
    let mut sink = |b: &[u8]| -> Result<(), Error> {
        total += b.len() as u64;
        Ok(())
    };
    let mut inside = false;
    dec.reset();
    let mut chunks = doc.chunks(chunk).peekable();
    while let Some(c) = chunks.next() {
        let last = chunks.peek().is_none();
        tk.feed(c, last, |t| {
            match t {
                Token::Start {
                    name: b"base64", ..
                } => inside = true,
                Token::End {
                    name: b"base64", ..
                } => {
                    inside = false;
                    dec.finish(&mut sink)?;
                }
                Token::Text(t) if inside => dec.push(t, &mut sink)?,
                _ => {}
            }
            Ok::<(), Error>(())
        })
        .unwrap();
    }
    total
}

fn method_call(text: &[u8]) -> Vec<u8> {
    let head = b"<?xml version='1.0'?>\n<methodCall>\n<methodName>wp.uploadFile</methodName>\n\
<params>\n<param>\n<value><base64>\n";
    let tail = b"\n</base64></value>\n</param>\n</params>\n</methodCall>\n";
    [&head[..], text, tail].concat()
}

fn baseline(text: &[u8]) -> u64 {
    base64_simd::forgiving_decode_to_vec(text).unwrap().len() as u64
}

fn bench(c: &mut Criterion) {
    let data = random_bytes(DATA_LEN);
    let text = encode(&data);
    let mut dec = Decoder::new();
    assert_eq!(base64_simd::forgiving_decode_to_vec(&text).unwrap(), data);
    assert_eq!(decode(&mut dec, &text, 64 << 10), DATA_LEN as u64);
    let doc = method_call(&text);
    assert_eq!(xmlrpc(&mut dec, &doc, 64 << 10), DATA_LEN as u64);

    let mut g = c.benchmark_group("base64/decode-64MiB-wrapped76");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8));
    let mut dst = vec![0u8; text.len()];
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&text));
            black_box(&dst);
        })
    });
    g.bench_function("simd-forgiving-to-vec", |b| {
        b.iter(|| baseline(black_box(&text)))
    });
    g.bench_function(BenchmarkId::new("decoder", "whole"), |b| {
        b.iter(|| decode(&mut dec, black_box(&text), usize::MAX))
    });
    g.bench_function(BenchmarkId::new("decoder", "64KiB"), |b| {
        b.iter(|| decode(&mut dec, black_box(&text), 64 << 10))
    });
    g.bench_function(BenchmarkId::new("tokenizer+decoder", "64KiB"), |b| {
        b.iter(|| xmlrpc(&mut dec, black_box(&doc), 64 << 10))
    });
    g.finish();

    let mut g = c.benchmark_group("base64/encode-64MiB-wrapped76");
    g.throughput(Throughput::Bytes(DATA_LEN as u64));
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    g.bench_function("encoder/64KiB", |b| {
        b.iter(|| {
            let mut enc = Encoder::new(Some(LineEnd::Lf));
            let mut n = 0u64;
            let mut sink = |b: &[u8]| -> Result<(), ()> {
                n += b.len() as u64;
                Ok(())
            };
            for c in data.chunks(64 << 10) {
                enc.push(c, &mut sink).unwrap();
            }
            enc.finish(&mut sink).unwrap();
            n
        })
    });
    g.finish();

    summary(&text, &doc, &mut dec);
}

/// Best of 7 runs of each decode, and the ratios to the baseline.
fn summary(text: &[u8], doc: &[u8], dec: &mut Decoder) {
    let best = |f: &mut dyn FnMut() -> u64| {
        (0..7)
            .map(|_| {
                let t = Instant::now();
                black_box(f());
                t.elapsed()
            })
            .min()
            .unwrap()
    };
    let mb_s = |d: Duration| text.len() as f64 / d.as_secs_f64() / 1e6;
    let base = best(&mut || baseline(black_box(text)));
    let whole = best(&mut || decode(dec, black_box(text), usize::MAX));
    let chunked = best(&mut || decode(dec, black_box(text), 64 << 10));
    let path = best(&mut || xmlrpc(dec, black_box(doc), 64 << 10));
    // The floor: one SIMD decode of the text without line breaks into a
    // buffer allocated (and touched) beforehand.
    let plain: Vec<u8> = text.iter().copied().filter(|&b| b != b'\n').collect();
    let mut out = vec![1u8; plain.len() / 4 * 3];
    let floor = best(&mut || {
        let o = base64_simd::AsOut::as_out(&mut out[..]);
        base64_simd::STANDARD
            .decode(black_box(&plain), o)
            .unwrap()
            .len() as u64
    });
    println!("\nsummary, best of 7, {} bytes of base64 text:", text.len());
    println!("  (a) forgiving_decode_to_vec  {:8.0} MB/s", mb_s(base));
    let rows = [
        ("(b) Decoder whole", whole),
        ("(c) Decoder 64 KiB", chunked),
        ("tokenizer+Decoder 64 KiB", path),
        ("floor: STANDARD.decode", floor),
    ];
    for (name, d) in rows {
        let ratio = base.as_secs_f64() / d.as_secs_f64();
        println!("  {name:27}  {:8.0} MB/s  {ratio:.2}x baseline", mb_s(d));
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
