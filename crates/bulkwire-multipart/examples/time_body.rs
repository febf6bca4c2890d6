//! Times one body the way `bench/peers/run` times its peers (best of N, body
//! in memory, 64 KiB chunks) and prints `ms=… baseline_memmem_ms=…
//! memcpy_ms=…`. Usage: `time_body BODY BOUNDARY [REPS]`.

use bulkwire_multipart::{Event, Limits, Parser, Subtype};
use std::time::Instant;

fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

/// Peak resident set (VmHWM) in KiB, from /proc (Linux); 0 elsewhere.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or("");
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let body = std::fs::read(&args[1]).expect("body file");
    let boundary = args[2].as_bytes();
    let reps = args.get(3).map_or(5, |r| r.parse().unwrap());
    let limits = Limits {
        parts: 1_000_000,
        field_bytes: u64::MAX,
        ..Limits::default()
    };
    let chunk: usize = std::env::var("CHUNK").map_or(64 * 1024, |c| c.parse().unwrap());
    let rss_before = peak_rss_kib();
    let mut parts = 0;
    let mut bytes = 0;
    let ms = best(reps, || {
        let mut p = Parser::new(boundary, Subtype::FormData, limits.clone()).unwrap();
        let mut chunks = body.chunks(chunk).peekable();
        parts = 0;
        bytes = 0;
        while let Some(c) = chunks.next() {
            p.feed(
                c,
                chunks.peek().is_none(),
                |ev| -> Result<(), bulkwire_multipart::Error> {
                    match ev {
                        Event::PartStart(_) => parts += 1,
                        Event::Data(d) => bytes += d.len(),
                        _ => {}
                    }
                    Ok(())
                },
            )
            .unwrap();
        }
    });
    let rss_delta = peak_rss_kib() - rss_before;
    let needle = [&b"\r\n--"[..], boundary].concat();
    let finder = memchr::memmem::Finder::new(&needle);
    let memmem = best(reps, || {
        std::hint::black_box(finder.find_iter(std::hint::black_box(&body)).count());
    });
    // The same scan per input chunk, restarting at each chunk like a parser
    // that is fed slices (matches across chunk edges are not needed here).
    let memmem_chunked = best(reps, || {
        let n: usize = body
            .chunks(chunk)
            .map(|c| finder.find_iter(c).count())
            .sum();
        std::hint::black_box(n);
    });
    let mut dst = vec![0u8; body.len()];
    let memcpy = best(reps, || {
        dst.copy_from_slice(std::hint::black_box(&body));
        std::hint::black_box(&dst);
    });
    println!("ms={ms:.3} baseline_memmem_ms={memmem:.3} memcpy_ms={memcpy:.3} memmem_chunked_ms={memmem_chunked:.3} parts={parts} bytes={bytes} rss_delta_kib={rss_delta}");
}
