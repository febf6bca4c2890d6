//! multer peer driver for bench/peers.
//! usage: peers-multer BODY BOUNDARY REPS EXPECTED_PARTS EXPECTED_PAYLOAD_BYTES
//! Prints one `key=value` line (see bench/peers/README.md).
use std::convert::Infallible;
use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use multer::{Constraints, Multipart, SizeLimit};

const CHUNK: usize = 64 * 1024;

fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok()))
        .unwrap_or(0)
}

fn best_ms<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    best
}

async fn parse(body: &Bytes, boundary: &str) -> (u64, u64) {
    let chunks: Vec<Result<Bytes, Infallible>> = (0..body.len())
        .step_by(CHUNK)
        .map(|i| Ok(body.slice(i..(i + CHUNK).min(body.len()))))
        .collect();
    let stream = futures_util::stream::iter(chunks);
    let constraints = Constraints::new()
        .size_limit(SizeLimit::new().whole_stream(u64::MAX).per_field(u64::MAX));
    let mut mp = Multipart::with_constraints(stream, boundary, constraints);
    let (mut parts, mut bytes) = (0u64, 0u64);
    while let Some(mut field) = mp.next_field().await.expect("next_field") {
        parts += 1;
        while let Some(c) = field.chunk().await.expect("chunk") {
            bytes += c.len() as u64;
        }
    }
    (parts, bytes)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 6 {
        eprintln!("usage: {} BODY BOUNDARY REPS EXPECTED_PARTS EXPECTED_PAYLOAD_BYTES", a[0]);
        std::process::exit(2);
    }
    let (path, boundary) = (&a[1], &a[2]);
    let reps: usize = a[3].parse().expect("REPS");
    let want_parts: u64 = a[4].parse().expect("EXPECTED_PARTS");
    let want_bytes: u64 = a[5].parse().expect("EXPECTED_PAYLOAD_BYTES");

    let body = Bytes::from(std::fs::read(path).expect("read body"));
    let rss0 = status_kib("VmRSS:");

    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut got = (0, 0);
    let ms = best_ms(reps, || got = rt.block_on(parse(black_box(&body), boundary)));
    let hwm = status_kib("VmHWM:");
    if got != (want_parts, want_bytes) {
        eprintln!("multer: got parts={} bytes={}, want parts={} bytes={}", got.0, got.1, want_parts, want_bytes);
        std::process::exit(1);
    }

    // In-language baselines, same process, same bytes.
    let delim = format!("\r\n--{boundary}");
    let finder = memchr::memmem::Finder::new(delim.as_bytes());
    let mut hits = 0;
    let memmem_ms = best_ms(reps, || hits = finder.find_iter(black_box(&body[..])).count());
    let mut dst = vec![0u8; body.len()];
    let memcpy_ms = best_ms(reps, || {
        dst.copy_from_slice(black_box(&body[..]));
        black_box(&mut dst);
    });

    println!(
        "ms={ms:.3} baseline_memmem_ms={memmem_ms:.3} memcpy_ms={memcpy_ms:.3} parts={} bytes={} delims={hits} rss_delta_kib={}",
        got.0,
        got.1,
        hwm.saturating_sub(rss0)
    );
}
