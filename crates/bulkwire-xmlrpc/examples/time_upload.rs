//! Times a `wp.uploadFile` upload parse against a bare base64-simd decode
//! of the same text and prints the ratios and the peak RSS growth of the
//! parse. Usage: `time_upload [MIB ...] [--reps N] [--quick]` (default: 10
//! and 200 MiB, best of 5). `--quick` runs only the counting parse and the
//! bare decode, once each, for instruction-count profiling under
//! `valgrind --tool=callgrind` (compare the inclusive counts of
//! `parse_with` and `bare_decode`). `--profile N` builds the body and then
//! only parses it N times into a counting sink, for a sampling profiler
//! (`perf record`) that should see nothing else.
//!
//! For each payload size the body (base64 wrapped at 76 columns, as Python
//! sends it) is built in memory first. Then:
//! - RSS growth: the peak-RSS counter is reset (`/proc/self/clear_refs`,
//!   Linux) and the body parsed once in 64 KiB chunks into a counting sink;
//!   the growth is VmHWM after minus VmRSS before. The target is at most
//!   8 MiB whatever the payload size.
//! - Throughput: best of N for the parse into a counting sink and into a
//!   SHA-256 sink; the baseline is `base64_simd::STANDARD.decode` of the
//!   same text with white space stripped beforehand (outside the timing)
//!   into a preallocated buffer, plus a bare SHA-256 of the payload.
//!   `ratio_count` = baseline / parse (target ≥ 0.8);
//!   `ratio_sha256` = (baseline + sha256) / parse with the SHA-256 sink.
//!   A second baseline, `base64_simd::forgiving_decode` of the wrapped
//!   text as it is (white space included, what a non-streaming server
//!   would have to do), gives `ratio_forgiving` = forgiving / parse.

use base64_simd::AsOut;
use bulkwire_xmlrpc::testutil::{stripped_base64, upload_body};
use bulkwire_xmlrpc::{Base64Sink, CountSink, Limits, Parser, Sha256Sink};
use sha2::Digest;
use std::hint::black_box;
use std::time::Instant;

const CHUNK: usize = 64 * 1024;

fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

/// A field of /proc/self/status in KiB (Linux); 0 elsewhere.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or("");
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The base64 text of the body as sent, line breaks included.
fn wrapped_base64(body: &[u8]) -> Vec<u8> {
    let find = |n: &[u8]| body.windows(n.len()).position(|w| w == n).unwrap();
    body[find(b"<base64>") + 8..find(b"</base64>")].to_vec()
}

#[inline(never)]
fn parse_with<S: Base64Sink>(body: &[u8], sink: S) -> S {
    let mut p = Parser::new(Limits::default(), sink);
    let mut chunks = body.chunks(CHUNK).peekable();
    while let Some(c) = chunks.next() {
        p.feed(c, chunks.peek().is_none()).unwrap();
    }
    p.finish().unwrap().1
}

/// Peak RSS growth of one parse, in KiB.
fn rss_growth(body: &[u8]) -> Option<u64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    let before = status_kib("VmRSS:");
    let sink = parse_with(body, CountSink::default());
    black_box(sink.total);
    Some(status_kib("VmHWM:").saturating_sub(before))
}

/// The bare baseline: one SIMD decode of the stripped text.
#[inline(never)]
fn bare_decode(text: &[u8], out: &mut [u8]) -> usize {
    let r = base64_simd::STANDARD.decode(black_box(text), out.as_out());
    r.unwrap().len()
}

/// `--quick`: one counting parse and one bare decode, nothing else.
fn quick(mib: u64) {
    let payload = mib << 20;
    let body = upload_body(payload);
    let total = parse_with(&body, CountSink::default()).total;
    assert_eq!(total, payload);
    let text = stripped_base64(&body);
    let mut out = vec![0u8; payload as usize];
    assert_eq!(bare_decode(&text, &mut out), payload as usize);
    println!("payload_mib={mib} quick run done");
}

fn run(mib: u64, reps: usize) {
    let payload = mib << 20;
    let body = upload_body(payload);
    let growth = rss_growth(&body);
    let count = best(reps, || {
        black_box(parse_with(&body, CountSink::default()).total);
    });
    let sha = best(reps, || {
        black_box(parse_with(&body, Sha256Sink::default()));
    });
    let text = stripped_base64(&body);
    let wrapped = wrapped_base64(&body);
    drop(body);
    let mut out = vec![0u8; wrapped.len()];
    let forgiving = best(reps, || {
        let r = base64_simd::forgiving_decode(black_box(&wrapped), out.as_mut_slice().as_out());
        black_box(r.unwrap().len());
    });
    drop(wrapped);
    out.truncate(payload as usize);
    let bare = best(reps, || {
        black_box(bare_decode(&text, &mut out));
    });
    let sha_only = best(reps, || {
        black_box(sha2::Sha256::digest(black_box(&out)));
    });
    let mbps = |ms: f64| payload as f64 / 1e6 / (ms / 1e3);
    let growth = growth.map_or("n/a".to_owned(), |g| g.to_string());
    println!(
        "payload_mib={mib} parse_count_ms={count:.2} parse_sha256_ms={sha:.2} \
         bare_decode_ms={bare:.2} sha256_only_ms={sha_only:.2} \
         parse_count_mb_s={:.0} bare_decode_mb_s={:.0} \
         ratio_count={:.2} ratio_sha256={:.2} forgiving_ms={forgiving:.2} \
         ratio_forgiving={:.2} rss_growth_kib={growth}",
        mbps(count),
        mbps(bare),
        bare / count,
        (bare + sha_only) / sha,
        forgiving / count,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut reps = 5;
    let mut sizes = Vec::new();
    let mut quick_only = false;
    let mut profile = 0;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick_only = true,
            "--profile" => profile = it.next().expect("--profile N").parse().expect("a number"),
            "--reps" => reps = it.next().expect("--reps N").parse().expect("a number"),
            mib => sizes.push(mib.parse().expect("payload size in MiB")),
        }
    }
    if sizes.is_empty() {
        sizes = vec![10, 200];
    }
    for mib in sizes {
        if profile > 0 {
            let body = upload_body(mib << 20);
            for _ in 0..profile {
                black_box(parse_with(&body, CountSink::default()).total);
            }
            continue;
        }
        if quick_only {
            quick(mib);
            continue;
        }
        run(mib, reps);
    }
}
