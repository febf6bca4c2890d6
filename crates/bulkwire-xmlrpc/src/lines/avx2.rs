//! Decodes one 76-character base64 line (RFC 4648 §4 alphabet, no
//! padding) to its 57 bytes with AVX2, validating every character, in
//! three 32-character steps (characters 0–31, 32–63 and 44–75; the last
//! overlaps the second and rewrites 9 of its bytes identically).
//!
//! Each step is the vectorized lookup of Muła and Lemire, "Faster Base64
//! Encoding and Decoding Using AVX2 Instructions" (ACM TWEB 2018): the
//! high and low nibble of each character index two 16-entry tables whose
//! AND is zero exactly for the 64 alphabet characters; a third table gives
//! the offset that maps a character to its 6-bit value; two multiply-adds
//! and two shuffles pack 32 values into 24 bytes.
//!
//! This is the crate's only `unsafe`: the AVX2 functions must be called
//! only on a CPU that has AVX2 ([`Avx2::detect`] checks it once), and the
//! 32-byte loads and stores take pointers from arrays of exactly 32 bytes.
#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m256i, _mm256_add_epi8, _mm256_and_si256, _mm256_broadcastsi128_si256, _mm256_cmpeq_epi8,
    _mm256_loadu_si256, _mm256_madd_epi16, _mm256_maddubs_epi16, _mm256_or_si256,
    _mm256_permutevar8x32_epi32, _mm256_set1_epi32, _mm256_set1_epi8, _mm256_setr_epi32,
    _mm256_shuffle_epi8, _mm256_srli_epi32, _mm256_storeu_si256, _mm256_testz_si256, _mm_setr_epi8,
};

/// Proof that the CPU has AVX2: only [`Avx2::detect`] makes one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx2(());

impl Avx2 {
    pub(crate) fn detect() -> Option<Avx2> {
        std::is_x86_feature_detected!("avx2").then_some(Avx2(()))
    }

    /// Decodes `src` into `dst[..57]` (the 8 bytes after are scratch);
    /// false, with `dst` in any state, if a character is not in the
    /// alphabet.
    #[inline]
    pub(crate) fn line(self, src: &[u8; 76], dst: &mut [u8; 65]) -> bool {
        // SAFETY: an `Avx2` exists only if the CPU has AVX2 (`detect`).
        unsafe { line(src, dst) }
    }
}

#[target_feature(enable = "avx2")]
fn line(src: &[u8; 76], dst: &mut [u8; 65]) -> bool {
    let (o1, e1) = step(load(&src[..32]));
    let (o2, e2) = step(load(&src[32..64]));
    let (o3, e3) = step(load(&src[44..]));
    let e = _mm256_or_si256(_mm256_or_si256(e1, e2), e3);
    if _mm256_testz_si256(e, e) == 0 {
        return false;
    }
    store(&mut dst[..32], o1);
    store(&mut dst[24..56], o2);
    store(&mut dst[33..], o3);
    true
}

/// 32 characters to 24 bytes (in the low 24 of the result), and a vector
/// that is non-zero where a character is not in the alphabet.
#[target_feature(enable = "avx2")]
fn step(s: __m256i) -> (__m256i, __m256i) {
    let lut_lo = lanes([
        0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B,
        0x1A,
    ]);
    let lut_hi = lanes([
        0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
        0x10,
    ]);
    let lut_roll = lanes([0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0]);
    // 0x2F keeps a nibble (and bit 5, which the 16-entry lookups ignore)
    // and clears bit 7, which would zero a lookup; it is also '/', the one
    // character its high nibble does not place.
    let m2f = _mm256_set1_epi8(0x2f);
    let hi_n = _mm256_and_si256(_mm256_srli_epi32(s, 4), m2f);
    let lo_n = _mm256_and_si256(s, m2f);
    let bad = _mm256_and_si256(
        _mm256_shuffle_epi8(lut_lo, lo_n),
        _mm256_shuffle_epi8(lut_hi, hi_n),
    );
    let slash = _mm256_cmpeq_epi8(s, m2f);
    let roll = _mm256_shuffle_epi8(lut_roll, _mm256_add_epi8(slash, hi_n));
    let v = _mm256_add_epi8(s, roll);
    // 4 × 6 bits → 24 bits per 32-bit word, then the 3 bytes of each word
    // in order, 12 per 128-bit lane, and the two lanes joined.
    let ab = _mm256_maddubs_epi16(v, _mm256_set1_epi32(0x0140_0140));
    let w = _mm256_madd_epi16(ab, _mm256_set1_epi32(0x0001_1000));
    let w = _mm256_shuffle_epi8(
        w,
        lanes([2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1]),
    );
    let out = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 1, 2, 4, 5, 6, -1, -1));
    (out, bad)
}

#[target_feature(enable = "avx2")]
fn lanes(t: [i8; 16]) -> __m256i {
    let t = _mm_setr_epi8(
        t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[12], t[13],
        t[14], t[15],
    );
    _mm256_broadcastsi128_si256(t)
}

#[target_feature(enable = "avx2")]
fn load(s: &[u8]) -> __m256i {
    let s: &[u8; 32] = s.try_into().expect("32 bytes");
    // SAFETY: `s` is 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

#[target_feature(enable = "avx2")]
fn store(d: &mut [u8], v: __m256i) {
    let d: &mut [u8; 32] = d.try_into().expect("32 bytes");
    // SAFETY: `d` is 32 writable bytes; the store is unaligned.
    unsafe { _mm256_storeu_si256(d.as_mut_ptr().cast(), v) }
}
