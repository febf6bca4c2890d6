//! Times parsing an MTOM message with one large attachment into a counting
//! sink, next to a bare `memmem::Finder` scan for the boundary over the
//! same bytes in the same run, and prints the ratio (target ≤ 1.10).
//!
//! Usage: `time_mtom [MIB] [REPS]` (default 12 MiB; REPS defaults to enough
//! repetitions for about 4 GiB of parsing, at least 5, because a 12 MiB
//! parse takes a fifth of a millisecond and best-of-5 of that is noise);
//! `BULKWIRE_GIB=1` adds a 1 GiB run. `CHUNK` sets the feed size (64 KiB).

use bulkwire_xop::testutil::upload_message as message;
use bulkwire_xop::{CountingSink, Limits, Parser, Select};
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

fn run(len: usize, reps: usize, chunk: usize) {
    let (ct, body) = message(len);
    let select = std::sync::Arc::new(
        Select::new()
            .binary("/Envelope/Body/{urn:bulkwire:media}upload/data")
            .unwrap(),
    );
    let mut bytes = 0;
    let ms = best(reps, || {
        let sink = CountingSink::default();
        let mut p = Parser::new(&ct, select.clone(), Limits::default(), sink).unwrap();
        let mut chunks = body.chunks(chunk).peekable();
        while let Some(c) = chunks.next() {
            p.feed(c, chunks.peek().is_none()).unwrap();
        }
        bytes = p.finish().unwrap().binaries[0].len;
    });
    assert_eq!(bytes as usize, len);
    let boundary = ct
        .split("boundary=\"")
        .nth(1)
        .unwrap()
        .trim_end_matches('"');
    let needle = format!("\r\n--{boundary}");
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let memmem = best(reps, || {
        std::hint::black_box(finder.find_iter(std::hint::black_box(&body)).count());
    });
    let mb = body.len() as f64 / (1 << 20) as f64;
    println!(
        "size_mib={mb:.1} parse_ms={ms:.3} memmem_ms={memmem:.3} ratio={:.3} parse_mib_s={:.0} memmem_mib_s={:.0}",
        ms / memmem,
        mb / ms * 1e3,
        mb / memmem * 1e3
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).map_or(12, |a| a.parse().unwrap());
    let reps: Option<usize> = args.get(2).map(|a| a.parse().unwrap());
    let reps_for = |len: usize| reps.unwrap_or(((4usize << 30) / len).clamp(5, 1000));
    let chunk: usize = std::env::var("CHUNK").map_or(64 * 1024, |c| c.parse().unwrap());
    run(mib << 20, reps_for(mib << 20), chunk);
    if std::env::var_os("BULKWIRE_GIB").is_some() {
        run(1 << 30, reps_for(1 << 30).min(5), chunk);
    }
}
