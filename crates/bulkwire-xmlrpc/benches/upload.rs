//! A WordPress `wp.uploadFile` call with a big payload (base64 wrapped at
//! 76 columns, as Python sends it), parsed in 64 KiB chunks with the payload
//! decoded into a counting sink and into a SHA-256 sink, against a bare
//! `base64_simd::STANDARD.decode` of the same base64 text with its white
//! space stripped beforehand (outside the timing: the baseline gets the
//! easiest input and a preallocated output) and a bare SHA-256 of the
//! payload. Throughput is in payload bytes.
//!
//! `BULKWIRE_BENCH_MIB` sets the payload size (default 200).

use base64_simd::AsOut;
use bulkwire_xmlrpc::testutil::{stripped_base64, upload_body};
use bulkwire_xmlrpc::{Base64Sink, CountSink, Limits, Parser, Sha256Sink};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sha2::Digest;
use std::hint::black_box;

const CHUNK: usize = 64 * 1024;

fn parse_with<S: Base64Sink>(body: &[u8], sink: S) -> S {
    let mut p = Parser::new(Limits::default(), sink);
    let mut chunks = body.chunks(CHUNK).peekable();
    while let Some(c) = chunks.next() {
        p.feed(c, chunks.peek().is_none()).unwrap();
    }
    p.finish().unwrap().1
}

fn upload(c: &mut Criterion) {
    let mib: u64 = std::env::var("BULKWIRE_BENCH_MIB").map_or(200, |v| v.parse().unwrap());
    let payload = mib << 20;
    let body = upload_body(payload);
    let text = stripped_base64(&body);
    let mut out = vec![0u8; payload as usize];
    let mut g = c.benchmark_group(format!("upload_{mib}MiB"));
    g.sample_size(10);
    g.throughput(Throughput::Bytes(payload));
    g.bench_function("parse_count_sink", |b| {
        b.iter(|| black_box(parse_with(black_box(&body), CountSink::default()).total))
    });
    g.bench_function("parse_sha256_sink", |b| {
        b.iter(|| black_box(parse_with(black_box(&body), Sha256Sink::default())))
    });
    g.bench_function("bare_base64_simd_decode", |b| {
        b.iter(|| {
            base64_simd::STANDARD
                .decode(black_box(&text), out.as_mut_slice().as_out())
                .unwrap()
                .len()
        })
    });
    base64_simd::STANDARD
        .decode(&text, out.as_mut_slice().as_out())
        .unwrap();
    g.bench_function("bare_sha256", |b| {
        b.iter(|| black_box(sha2::Sha256::digest(black_box(&out))))
    });
    g.finish();
}

criterion_group!(benches, upload);
criterion_main!(benches);
