//! The parser's own memory stays bounded (delimiter + header limit) however
//! a body of over 1 GiB is chunked: in random chunks of 1 byte to 64 KiB and
//! as one giant slice. Data is checked by length and checksum.

use bulkwire_multipart::{Event, Limits, Parser, Subtype};

const BOUNDARY: &[u8] = b"----WebKitFormBoundary7MA4YWxkTrZu0gW";
const GIB: usize = 1 << 30;
const BLOCK: usize = 1 << 20;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// 1 MiB of random bytes salted with near-delimiters (`CRLF--` plus every
/// proper prefix of the boundary), ending in one so that it straddles the
/// next block.
fn block() -> Vec<u8> {
    let mut r = Rng(0x9e3779b97f4a7c15);
    let mut b: Vec<u8> = (0..BLOCK).map(|_| r.next() as u8).collect();
    let mut at = 0;
    while at + 64 < BLOCK {
        let k = (r.next() % BOUNDARY.len() as u64) as usize;
        let near = [&b"\r\n--"[..], &BOUNDARY[..k]].concat();
        b[at..at + near.len()].copy_from_slice(&near);
        at += 64 + (r.next() % 512) as usize;
    }
    let tail = [&b"\r\n--"[..], &BOUNDARY[..BOUNDARY.len() - 1]].concat();
    b[BLOCK - tail.len()..].copy_from_slice(&tail);
    b
}

fn head() -> Vec<u8> {
    [
        &b"--"[..],
        BOUNDARY,
        b"\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big\"\r\n\r\n",
    ]
    .concat()
}

fn tail() -> Vec<u8> {
    [&b"\r\n--"[..], BOUNDARY, b"--\r\n"].concat()
}

/// The bound the parser promises: a held-back delimiter prefix, a window of
/// two of those, and a header buffer of `header_bytes + 4`.
fn bound(l: &Limits) -> usize {
    let hold = 4 + BOUNDARY.len() + 1;
    hold + 2 * hold + 1 + l.header_bytes + 4
}

struct Tally {
    bytes: u64,
    sum: u64,
    parts: usize,
    ended: bool,
}

fn tally(t: &mut Tally, ev: Event<'_>) {
    match ev {
        Event::Data(d) => {
            t.bytes += d.len() as u64;
            t.sum = d
                .iter()
                .fold(t.sum, |s, &b| s.wrapping_mul(31).wrapping_add(b as u64));
        }
        Event::PartStart(_) => t.parts += 1,
        Event::End => t.ended = true,
        _ => {}
    }
}

fn expected(block: &[u8]) -> (u64, u64) {
    let mut sum = 0u64;
    for _ in 0..GIB / BLOCK {
        sum = block
            .iter()
            .fold(sum, |s, &b| s.wrapping_mul(31).wrapping_add(b as u64));
    }
    (GIB as u64, sum)
}

fn new_parser() -> Parser {
    Parser::new(BOUNDARY, Subtype::FormData, Limits::default()).unwrap()
}

#[test]
fn a_gib_in_random_chunks() {
    let block = block();
    let body_len = head().len() + GIB + tail().len();
    let at = |i: usize| -> u8 {
        let h = head();
        if i < h.len() {
            h[i]
        } else if i < h.len() + GIB {
            block[(i - h.len()) % BLOCK]
        } else {
            tail()[i - h.len() - GIB]
        }
    };
    let mut p = new_parser();
    let mut t = Tally {
        bytes: 0,
        sum: 0,
        parts: 0,
        ended: false,
    };
    let mut r = Rng(42);
    let mut chunk = vec![0u8; 1 << 16];
    let mut off = 0;
    let h_len = head().len();
    while off < body_len {
        // Log-uniform sizes from 1 byte to 64 KiB: many tiny chunks, some big.
        let size = ((1u64 << (r.next() % 17)) + r.next() % 7).clamp(1, 1 << 16) as usize;
        let n = size.min(body_len - off);
        if off >= h_len && off + n <= h_len + GIB {
            let s = (off - h_len) % BLOCK;
            let first = n.min(BLOCK - s);
            chunk[..first].copy_from_slice(&block[s..s + first]);
            chunk[first..n].copy_from_slice(&block[..n - first]);
        } else {
            for (j, c) in chunk[..n].iter_mut().enumerate() {
                *c = at(off + j);
            }
        }
        off += n;
        p.feed(
            &chunk[..n],
            off == body_len,
            |ev| -> Result<(), bulkwire_multipart::Error> {
                tally(&mut t, ev);
                Ok(())
            },
        )
        .unwrap();
        assert!(p.buffered_bytes() <= bound(p.limits()));
    }
    assert_eq!((t.bytes, t.sum), expected(&block));
    assert!(t.ended && t.parts == 1);
    assert!(
        p.peak_buffered_bytes() <= bound(p.limits()),
        "peak {}",
        p.peak_buffered_bytes()
    );
    assert!(
        p.buffer_capacity() <= bound(p.limits()),
        "capacity {}",
        p.buffer_capacity()
    );
    // The tail of each block is a delimiter prefix: the carry was exercised.
    assert!(p.peak_buffered_bytes() >= BOUNDARY.len());
}

#[test]
fn a_gib_in_one_slice() {
    let block = block();
    let mut body = head();
    body.reserve_exact(GIB + 64);
    for _ in 0..GIB / BLOCK {
        body.extend_from_slice(&block);
    }
    body.extend_from_slice(&tail());
    let mut p = new_parser();
    let mut t = Tally {
        bytes: 0,
        sum: 0,
        parts: 0,
        ended: false,
    };
    p.feed(&body, true, |ev| -> Result<(), bulkwire_multipart::Error> {
        tally(&mut t, ev);
        Ok(())
    })
    .unwrap();
    assert_eq!((t.bytes, t.sum), expected(&block));
    assert!(t.ended && t.parts == 1);
    // Nothing straddles: the parser copied nothing but the initial CRLF.
    assert!(
        p.peak_buffered_bytes() <= 2,
        "peak {}",
        p.peak_buffered_bytes()
    );
    assert!(p.buffer_capacity() <= bound(p.limits()));
}
