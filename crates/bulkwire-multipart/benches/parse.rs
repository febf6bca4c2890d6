//! Parser speed on the standard bodies A–D, each next to a `memcpy` and a
//! bare `memmem` scan for the delimiter over the same bytes, in the same run.
//! `bench/multipart-ratios` turns the results into the README table.

use bulkwire_multipart::{Event, Limits, Parser, Subtype};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use memchr::memmem::Finder;
use std::hint::black_box;
use std::time::Duration;

mod bodies;

fn parser() -> Parser {
    let limits = Limits {
        parts: 20_000,
        ..Limits::default()
    };
    Parser::new(bodies::BOUNDARY, Subtype::FormData, limits).unwrap()
}

/// Parses `body` fed in `chunk`-sized slices; returns data bytes and parts.
fn parse(body: &[u8], chunk: usize) -> (u64, usize) {
    let mut p = parser();
    let (mut bytes, mut parts) = (0u64, 0usize);
    let mut chunks = body.chunks(chunk).peekable();
    while let Some(mut c) = chunks.next() {
        let last = chunks.peek().is_none();
        loop {
            let s = p.step(c, last).unwrap();
            c = &c[s.consumed..];
            match s.event {
                Event::Data(d) => bytes += d.len() as u64,
                Event::PartStart(_) => parts += 1,
                Event::NeedMore => break,
                _ => {}
            }
        }
    }
    (bytes, parts)
}

fn memmem_scan(body: &[u8]) -> usize {
    let needle = [&b"\r\n--"[..], bodies::BOUNDARY].concat();
    Finder::new(&needle).find_iter(body).count()
}

fn bench(c: &mut Criterion) {
    for name in ["A", "B", "C", "D"] {
        let body = bodies::load(name);
        let mut g = c.benchmark_group(format!("multipart/{name}"));
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.sample_size(20)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(4));
        let mut dst = vec![0u8; body.len()];
        g.bench_function("memcpy", |b| {
            b.iter(|| {
                dst.copy_from_slice(black_box(&body));
                black_box(&dst);
            })
        });
        g.bench_function("memmem", |b| b.iter(|| memmem_scan(black_box(&body))));
        g.bench_function(BenchmarkId::new("parse", "whole"), |b| {
            b.iter(|| parse(black_box(&body), usize::MAX))
        });
        g.bench_function(BenchmarkId::new("parse", "64KiB"), |b| {
            b.iter(|| parse(black_box(&body), 64 * 1024))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
