//! MTOM parse speed: a message with a 12 MiB attachment parsed into a
//! counting sink (fed whole and in 64 KiB chunks), next to a bare
//! `memmem::Finder` scan for the boundary over the same bytes in the same
//! run. Target: parse ≤ 1.10 × memmem. (The 1 GiB case is in
//! `examples/time_mtom.rs`, behind `BULKWIRE_GIB=1`.)

use bulkwire_xop::testutil::upload_message as message;
use bulkwire_xop::{CountingSink, Limits, Parser, Select};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use memchr::memmem::Finder;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

fn parse(ct: &str, select: &Arc<Select>, body: &[u8], chunk: usize) -> u64 {
    let mut p = Parser::new(
        ct,
        select.clone(),
        Limits::default(),
        CountingSink::default(),
    )
    .unwrap();
    let mut chunks = body.chunks(chunk).peekable();
    while let Some(c) = chunks.next() {
        p.feed(c, chunks.peek().is_none()).unwrap();
    }
    p.finish().unwrap().binaries[0].len
}

fn bench(c: &mut Criterion) {
    let (ct, body) = message(12 << 20);
    let select = Arc::new(
        Select::new()
            .binary("/Envelope/Body/{urn:bulkwire:media}upload/data")
            .unwrap(),
    );
    let boundary = ct
        .split("boundary=\"")
        .nth(1)
        .unwrap()
        .trim_end_matches('"');
    let finder = Finder::new(format!("\r\n--{boundary}").as_bytes()).into_owned();
    let mut g = c.benchmark_group("mtom/12MiB");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    g.bench_function("memmem", |b| {
        b.iter(|| finder.find_iter(black_box(&body)).count())
    });
    g.bench_function(BenchmarkId::new("parse", "whole"), |b| {
        b.iter(|| parse(&ct, &select, black_box(&body), usize::MAX))
    });
    g.bench_function(BenchmarkId::new("parse", "64KiB"), |b| {
        b.iter(|| parse(&ct, &select, black_box(&body), 64 * 1024))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
