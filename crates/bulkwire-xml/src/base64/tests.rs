//! The streaming codec against one-shot `base64_simd` over random data and
//! random chunkings: whole, one byte at a time and at random splits must
//! all give the one-shot bytes, or the same error at the same offset.

use super::{encoded_len, Decoder, Encoder, LineEnd};
use crate::testutil::{random_splits, xorshift};
use crate::{Error, ErrorKind};

type Outcome = Result<Vec<u8>, (ErrorKind, u64)>;

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x = xorshift(x);
            (x >> 24) as u8
        })
        .collect()
}

fn decode_split(text: &[u8], splits: &[usize]) -> Outcome {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    let mut sink = |b: &[u8]| -> Result<(), Error> {
        assert!(!b.is_empty(), "empty sink call");
        out.extend_from_slice(b);
        Ok(())
    };
    let mut start = 0;
    let mut r = Ok(());
    for end in splits.iter().copied().chain([text.len()]) {
        let end = end.clamp(start, text.len());
        r = d.push(&text[start..end], &mut sink);
        if r.is_err() {
            break;
        }
        start = end;
    }
    let r = r.and_then(|()| d.finish(&mut sink));
    match r {
        Ok(()) => {
            assert_eq!(d.decoded_len(), out.len() as u64);
            Ok(out)
        }
        Err(e) => Err((e.kind(), e.offset())),
    }
}

/// Decodes `text` whole, byte by byte and at random splits; all must agree.
fn decode_all_ways(text: &[u8]) -> Outcome {
    let whole = decode_split(text, &[]);
    let bytes: Vec<usize> = (1..text.len()).collect();
    assert_eq!(decode_split(text, &bytes), whole, "bytewise");
    for seed in 1..=12u64 {
        let splits = random_splits(text.len(), 1 + seed as usize % 6, seed * 7919);
        assert_eq!(decode_split(text, &splits), whole, "splits {splits:?}");
    }
    whole
}

fn one_shot(text: &[u8]) -> Option<Vec<u8>> {
    let stripped: Vec<u8> = text.iter().copied().filter(|&b| !super::is_ws(b)).collect();
    base64_simd::STANDARD.decode_to_vec(stripped).ok()
}

fn wrap(chars: &[u8], le: &[u8]) -> Vec<u8> {
    chars.chunks(76).collect::<Vec<_>>().join(le)
}

/// Sprinkles white space of every kind at random places.
fn sprinkle(text: &[u8], seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(text.len() * 2);
    for &b in text {
        x = xorshift(x);
        if x.is_multiple_of(5) {
            out.push(b" \t\r\n"[(x >> 8) as usize % 4]);
        }
        if x.is_multiple_of(17) {
            out.extend_from_slice(b"\r\n ");
        }
        out.push(b);
    }
    out
}

#[test]
fn random_data_decodes_like_one_shot() {
    let lens = [0usize, 1, 2, 3, 4, 5, 56, 57, 58, 100, 255, 256, 1000, 3001];
    for (i, &n) in lens.iter().enumerate() {
        let data = random_bytes(n, 11 + i as u64);
        let plain = base64_simd::STANDARD.encode_to_string(&data).into_bytes();
        let texts = [
            plain.clone(),
            wrap(&plain, b"\n"),
            [wrap(&plain, b"\r\n"), b"\r\n".to_vec()].concat(),
            sprinkle(&plain, 3 + i as u64),
            [b"\n  ".to_vec(), plain.clone(), b" \t\n".to_vec()].concat(),
        ];
        for text in &texts {
            let want = one_shot(text).expect("valid text");
            assert_eq!(want, data);
            assert_eq!(decode_all_ways(text), Ok(want), "n = {n}");
        }
    }
}

#[test]
fn large_values_fill_the_stage_and_take_the_direct_path() {
    let data = random_bytes(200_000, 5);
    let plain = base64_simd::STANDARD.encode_to_string(&data).into_bytes();
    for text in [plain.clone(), wrap(&plain, b"\n"), wrap(&plain, b"\r\n")] {
        assert_eq!(decode_split(&text, &[]).as_deref(), Ok(&data[..]));
        for seed in 1..=6u64 {
            let splits = random_splits(text.len(), 40, seed);
            assert_eq!(decode_split(&text, &splits).as_deref(), Ok(&data[..]));
        }
        let fixed: Vec<usize> = (1..text.len() / 4093 + 1).map(|k| k * 4093).collect();
        assert_eq!(decode_split(&text, &fixed).as_deref(), Ok(&data[..]));
    }
    // A short run, then a long one that continues the carried quantum.
    let text = [&plain[..5], b"\n", &plain[5..]].concat();
    assert_eq!(decode_split(&text, &[3, 7, 1000]).as_deref(), Ok(&data[..]));
}

#[test]
fn invalid_characters_at_exact_offsets() {
    let data = random_bytes(150_000, 9);
    let plain = base64_simd::STANDARD.encode_to_string(&data).into_bytes();
    let wrapped = wrap(&plain, b"\n");
    for text in [&plain, &wrapped] {
        for (k, bad) in [
            (0usize, b'*'),
            (1, b'-'),
            (3, 0u8),
            (1000, 0xC3),
            (70_001, b'.'),
        ]
        .into_iter()
        .chain([(text.len() - 3, b'_'), (text.len() - 10, 0x0C)])
        {
            let mut t = text.clone();
            if super::is_ws(t[k]) {
                continue;
            }
            t[k] = bad;
            let got = if t.len() > 10_000 {
                let splits = random_splits(t.len(), 30, k as u64 + 1);
                let whole = decode_split(&t, &[]);
                assert_eq!(decode_split(&t, &splits), whole);
                whole
            } else {
                decode_all_ways(&t)
            };
            assert_eq!(got, Err((ErrorKind::Malformed, k as u64)), "at {k}");
        }
    }
    // Two bad characters: the first one counts, wherever the chunks fall.
    assert_eq!(
        decode_all_ways(b"QUJD QU*D\x01JD"),
        Err((ErrorKind::Malformed, 7))
    );
    assert_eq!(
        decode_all_ways(b"QUJD\x0bQUJD"),
        Err((ErrorKind::Malformed, 4))
    );
}

#[test]
fn padding_rules() {
    use ErrorKind::{Malformed, Truncated};
    let ok = |t: &[u8], want: &[u8]| assert_eq!(decode_all_ways(t).as_deref(), Ok(want));
    ok(b"QQ==", b"A");
    ok(b"QUI=", b"AB");
    ok(b"QUJD", b"ABC");
    ok(b"QQ\n=\r\n= \n", b"A");
    ok(b"", b"");
    ok(b" \n ", b"");
    let bad = |t: &[u8], want| assert_eq!(decode_all_ways(t), Err(want), "{t:?}");
    bad(b"QQ=", (Truncated, 3));
    bad(b"QQ", (Truncated, 2));
    bad(b"QUJDQ", (Truncated, 5));
    bad(b"QUJDQ \n", (Truncated, 7));
    bad(b"QQ=A", (Malformed, 3));
    bad(b"QQ==A", (Malformed, 4));
    bad(b"QQ== \n=", (Malformed, 6));
    bad(b"QQ==QQ==", (Malformed, 4));
    bad(b"QUI==", (Malformed, 4));
    bad(b"=", (Malformed, 0));
    bad(b"Q=", (Malformed, 1));
    bad(b"QUJD=", (Malformed, 4));
    bad(b"Q===", (Malformed, 1));
    // Non-zero unused bits: the offending character is the last one.
    bad(b"QR==", (Malformed, 1));
    bad(b"QUJ=", (Malformed, 2));
    bad(b"QU\nJ\n=", (Malformed, 3));
    // An invalid character before the padding wins over the padding.
    bad(b"Q*==", (Malformed, 1));
    bad(b"QU*=", (Malformed, 2));
}

#[test]
fn errors_are_sticky_and_sink_errors_pass_through() {
    let mut d = Decoder::new();
    let mut sink = |_: &[u8]| -> Result<(), Error> { Ok(()) };
    let e = d.push(b"QU*D", &mut sink).unwrap_err();
    assert_eq!(d.push(b"QUJD", &mut sink).unwrap_err(), e);
    assert_eq!(d.finish(&mut sink).unwrap_err(), e);
    d.reset();
    d.push(b"QUJD", &mut sink).unwrap();
    d.finish(&mut sink).unwrap();
    assert_eq!(d.decoded_len(), 3);

    #[derive(Debug, PartialEq)]
    enum Mine {
        Full,
        B64(ErrorKind),
    }
    impl From<Error> for Mine {
        fn from(e: Error) -> Self {
            Mine::B64(e.kind())
        }
    }
    let mut d = Decoder::new();
    let mut full = |_: &[u8]| -> Result<(), Mine> { Err(Mine::Full) };
    assert_eq!(d.push(b"QUJD", &mut full), Err(Mine::Full));
}

fn encode_split(data: &[u8], splits: &[usize], wrap: Option<LineEnd>) -> Vec<u8> {
    let mut e = Encoder::new(wrap);
    let mut out = Vec::new();
    let mut sink = |b: &[u8]| -> Result<(), ()> {
        out.extend_from_slice(b);
        Ok(())
    };
    let mut start = 0;
    for &end in splits.iter().chain([&data.len()]) {
        let end = end.clamp(start, data.len());
        e.push(&data[start..end], &mut sink).unwrap();
        start = end;
    }
    e.finish(&mut sink).unwrap();
    assert_eq!(e.consumed(), data.len() as u64);
    out
}

#[test]
fn encode_round_trips_with_and_without_wrapping() {
    for (i, n) in [
        0usize, 1, 2, 3, 56, 57, 58, 114, 1000, 49_151, 49_153, 150_001,
    ]
    .into_iter()
    .enumerate()
    {
        let data = random_bytes(n, 100 + i as u64);
        let plain = base64_simd::STANDARD.encode_to_string(&data).into_bytes();
        for lines in [None, Some(LineEnd::Lf), Some(LineEnd::CrLf)] {
            let want = match lines {
                None => plain.clone(),
                Some(le) => wrap(&plain, le.as_bytes()),
            };
            assert_eq!(encoded_len(n as u64, lines), want.len() as u64, "n = {n}");
            assert_eq!(Encoder::encoded_len(n as u64, lines), want.len() as u64);
            let mut splittings = vec![vec![], random_splits(n, 5, i as u64 + 1)];
            if n < 2000 {
                splittings.push((1..n).collect());
            }
            for splits in &splittings {
                let text = encode_split(&data, splits, lines);
                assert_eq!(text, want, "n = {n}, wrap = {lines:?}");
                let back = decode_split(&text, &random_splits(text.len(), 7, 3));
                assert_eq!(back.as_deref(), Ok(&data[..]));
            }
        }
    }
}

#[test]
fn encoded_len_edges() {
    assert_eq!(encoded_len(0, Some(LineEnd::CrLf)), 0);
    assert_eq!(encoded_len(57, Some(LineEnd::Lf)), 76);
    assert_eq!(encoded_len(58, Some(LineEnd::Lf)), 81);
    assert_eq!(encoded_len(58, Some(LineEnd::CrLf)), 82);
    assert_eq!(encoded_len(1 << 40, None), (1u64 << 40).div_ceil(3) * 4);
}

/// Random short texts over a hostile alphabet: ours accepts exactly what the
/// one-shot strict decode of the stripped text accepts, with the same bytes,
/// and fails the same way whatever the chunking.
#[test]
fn random_texts_agree_with_one_shot() {
    const ALPHABET: &[u8] = b"AQgw+/9=== \n\r\t*\x00\xC3-_";
    let mut x = 0xB64_u64;
    let (mut oks, mut errs) = (0, 0);
    for _ in 0..3000 {
        x = xorshift(x);
        let len = (x % 14) as usize;
        let text: Vec<u8> = (0..len)
            .map(|_| {
                x = xorshift(x);
                ALPHABET[(x >> 20) as usize % ALPHABET.len()]
            })
            .collect();
        let ours = decode_all_ways(&text);
        assert_eq!(ours.clone().ok(), one_shot(&text), "{text:?}");
        match ours {
            Ok(_) => oks += 1,
            Err(_) => errs += 1,
        }
    }
    assert!(oks > 100 && errs > 100, "{oks} {errs}");
}
