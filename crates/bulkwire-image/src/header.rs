//! What an image's first bytes say, before any pixel is decoded: its
//! format, its stored width and height, and for JPEG its EXIF orientation
//! and whether it is progressive.
//!
//! [`HeaderScan`] is sans-IO: fed the bytes in chunks as they come (an
//! upload's body, a stored blob's start), it keeps at most
//! [`HEADER_KEEP`] bytes and stops as soon as it knows. JPEG is walked
//! marker by marker (ITU-T T.81 §B.1), segments skipped by their length
//! until the first start-of-frame; the first `Exif` APP1 segment is kept
//! for its orientation (EXIF 2.32 §4.6.4, tag 0x0112). PNG (ISO 15948
//! §11.2.2 `IHDR`), GIF (GIF89a §18) and WebP (RFC 9649 §2.5–2.7) say their
//! size in their first 30 bytes.

use crate::Error;

/// Bytes a scan keeps at most: one JPEG APP1 segment (its length is a
/// 16-bit count) and a few more.
pub const HEADER_KEEP: usize = 64 << 10;

/// Bytes a scan reads at most before it gives up: a JPEG whose frame
/// header comes later is refused (cameras put it within the first 100 KiB,
/// after the EXIF thumbnail).
pub const HEADER_SCAN_MAX: u64 = 1 << 20;

/// Image formats bulkwire decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jpeg,
    Png,
    Gif,
    WebP,
}

impl Format {
    /// The format of a stored media type, if it is one bulkwire decodes.
    pub fn from_media_type(ct: &str) -> Option<Format> {
        let essence = ct.split(';').next().unwrap_or("").trim();
        match essence.to_ascii_lowercase().as_str() {
            "image/jpeg" | "image/jpg" | "image/pjpeg" => Some(Format::Jpeg),
            "image/png" | "image/apng" => Some(Format::Png),
            "image/gif" => Some(Format::Gif),
            "image/webp" => Some(Format::WebP),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Jpeg => "JPEG",
            Format::Png => "PNG",
            Format::Gif => "GIF",
            Format::WebP => "WebP",
        }
    }
}

/// An image's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub format: Format,
    /// As stored (before the orientation is applied).
    pub width: u32,
    pub height: u32,
    /// EXIF orientation, 1 (as stored) to 8; 5 to 8 swap width and height.
    pub orientation: u8,
    /// A progressive JPEG, whose decoder keeps every coefficient.
    pub progressive: bool,
    /// Channels of the decoded pixels (1 to 4) and bytes per channel (1 or
    /// 2): what decoding the whole image holds per pixel.
    pub channels: u8,
    pub depth: u8,
}

impl Header {
    /// Width and height as shown (orientation applied).
    pub fn shown(&self) -> (u32, u32) {
        match self.orientation {
            5..=8 => (self.height, self.width),
            _ => (self.width, self.height),
        }
    }

    /// Pixels as stored.
    pub fn pixels(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }
}

/// The whole of `data` scanned at once.
pub fn probe(data: &[u8]) -> Result<Header, Error> {
    let mut s = HeaderScan::new();
    s.feed(data);
    s.finish()
}

/// A header read from chunks; see the module doc.
#[derive(Debug, Default)]
pub struct HeaderScan {
    /// The first bytes (to tell the format), then the Exif segment.
    kept: Vec<u8>,
    /// Input bytes seen.
    seen: u64,
    jpeg: Option<Jpeg>,
    done: Option<Result<Header, Error>>,
}

/// Where a JPEG walk is.
#[derive(Debug, Default)]
struct Jpeg {
    state: JState,
    /// The segment being read: its marker, its length and what was read.
    marker: u8,
    len: usize,
    got: usize,
    /// The segment's bytes, for the Exif APP1 and the frame header.
    seg: Vec<u8>,
    keep_seg: bool,
    orientation: u8,
    exif_seen: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum JState {
    /// Before a marker's `FF`.
    #[default]
    Marker,
    /// After `FF` (fill bytes `FF` may repeat).
    Code,
    /// The first byte of a segment's length.
    Len1,
    Len2(u8),
    Body,
}

impl HeaderScan {
    pub fn new() -> HeaderScan {
        HeaderScan::default()
    }

    /// True once the header is known (or known to be unreadable).
    pub fn is_done(&self) -> bool {
        self.done.is_some()
    }

    /// Takes the next bytes; returns whether the scan is done.
    pub fn feed(&mut self, mut chunk: &[u8]) -> bool {
        while !chunk.is_empty() && self.done.is_none() {
            if self.seen >= HEADER_SCAN_MAX {
                self.done = Some(Err(Error::undecodable(format!(
                    "no image header within the first {} KiB",
                    HEADER_SCAN_MAX >> 10
                ))));
                break;
            }
            let room = (HEADER_SCAN_MAX - self.seen).min(chunk.len() as u64) as usize;
            let (now, rest) = chunk.split_at(room);
            chunk = rest;
            if let Some(j) = &mut self.jpeg {
                let used = j.feed(now, &mut self.done);
                self.seen += used as u64;
                continue;
            }
            // The first bytes tell the format.
            let n = (32 - self.kept.len()).min(now.len());
            self.kept.extend_from_slice(&now[..n]);
            self.seen += n as u64;
            if self.kept.len() >= 32 {
                self.start();
            }
            // The bytes past the first 32 go to the JPEG walk, if any.
            if n < now.len() && self.done.is_none() {
                let rest_now = &now[n..];
                if let Some(j) = &mut self.jpeg {
                    let used = j.feed(rest_now, &mut self.done);
                    self.seen += used as u64;
                }
            }
        }
        self.done.is_some()
    }

    /// The header, at the end of the input.
    pub fn finish(mut self) -> Result<Header, Error> {
        if self.done.is_none() && self.jpeg.is_none() {
            self.start();
        }
        self.done.unwrap_or_else(|| {
            Err(Error::undecodable(
                "the image ends before its header does (truncated)",
            ))
        })
    }

    /// Tells the format from the first bytes kept; JPEG starts its walk
    /// on them.
    fn start(&mut self) {
        let b = std::mem::take(&mut self.kept);
        match sniff(&b) {
            Sniffed::Jpeg => {
                let mut j = Jpeg::default();
                j.feed(&b[2..], &mut self.done);
                self.jpeg = Some(j);
            }
            Sniffed::Other(f) => self.done = Some(small_header(f, &b)),
            Sniffed::Unsupported(what) => self.done = Some(Err(Error::unsupported(what))),
            Sniffed::Short => {
                self.done = Some(Err(Error::undecodable(
                    "the image ends before its header does (truncated)",
                )))
            }
        }
    }
}

enum Sniffed {
    Jpeg,
    Other(Format),
    Unsupported(String),
    Short,
}

fn sniff(b: &[u8]) -> Sniffed {
    if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Sniffed::Jpeg;
    }
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Sniffed::Other(Format::Png);
    }
    if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        return Sniffed::Other(Format::Gif);
    }
    if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        return Sniffed::Other(Format::WebP);
    }
    if b.len() >= 12 && &b[4..8] == b"ftyp" {
        let brand = String::from_utf8_lossy(&b[8..12]).to_string();
        let what = match brand.as_str() {
            "avif" | "avis" => "AVIF",
            "heic" | "heix" | "heim" | "heis" | "hevc" | "hevx" | "mif1" | "msf1" => "HEIC/HEIF",
            _ => "",
        };
        if !what.is_empty() {
            return Sniffed::Unsupported(format!(
                "{what} images are not decoded here (no well-kept pure-Rust decoder): \
                 upload JPEG, PNG, WebP or GIF for variants"
            ));
        }
    }
    if b.len() < 12 {
        return Sniffed::Short;
    }
    Sniffed::Unsupported(
        "not an image bulkwire decodes (JPEG, PNG, WebP or GIF): its bytes say otherwise".into(),
    )
}

/// PNG, GIF and WebP: the size from the first 32 bytes.
fn small_header(f: Format, b: &[u8]) -> Result<Header, Error> {
    let short = || Error::undecodable(format!("{} header is truncated", f.name()));
    let be32 =
        |i: usize| -> Option<u32> { Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?)) };
    let le16 = |i: usize| -> Option<u32> {
        Some(u16::from_le_bytes(b.get(i..i + 2)?.try_into().ok()?) as u32)
    };
    let le24 = |i: usize| -> Option<u32> {
        let s = b.get(i..i + 3)?;
        Some(u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16)
    };
    let (width, height, channels, depth) = match f {
        Format::Png => {
            if b.get(12..16) != Some(b"IHDR") {
                return Err(Error::undecodable("PNG without IHDR first"));
            }
            let (w, h) = (be32(16).ok_or_else(short)?, be32(20).ok_or_else(short)?);
            let bits = *b.get(24).ok_or_else(short)?;
            let channels = match b.get(25).ok_or_else(short)? {
                0 => 1,
                2 => 3,
                3 => 4, // a palette is expanded (with its transparency)
                4 => 2,
                6 => 4,
                c => return Err(Error::undecodable(format!("PNG colour type {c}"))),
            };
            (w, h, channels, if bits == 16 { 2 } else { 1 })
        }
        Format::Gif => (le16(6).ok_or_else(short)?, le16(8).ok_or_else(short)?, 4, 1),
        Format::WebP => match b.get(12..16) {
            Some(b"VP8X") => (
                le24(24).ok_or_else(short)? + 1,
                le24(27).ok_or_else(short)? + 1,
                4,
                1,
            ),
            Some(b"VP8L") => {
                if b.get(20) != Some(&0x2f) {
                    return Err(Error::undecodable("WebP lossless without its signature"));
                }
                let v = u32::from_le_bytes(
                    b.get(21..25)
                        .ok_or_else(short)?
                        .try_into()
                        .unwrap_or_default(),
                );
                ((v & 0x3fff) + 1, ((v >> 14) & 0x3fff) + 1, 4, 1)
            }
            Some(b"VP8 ") => {
                if b.get(23..26) != Some(&[0x9d, 0x01, 0x2a]) {
                    return Err(Error::undecodable("WebP lossy without its start code"));
                }
                (
                    le16(26).ok_or_else(short)? & 0x3fff,
                    le16(28).ok_or_else(short)? & 0x3fff,
                    4,
                    1,
                )
            }
            _ => {
                return Err(Error::undecodable(
                    "WebP without a VP8, VP8L or VP8X chunk first",
                ))
            }
        },
        Format::Jpeg => unreachable!("JPEG is walked"),
    };
    if width == 0 || height == 0 {
        return Err(Error::undecodable(format!(
            "{} of {width}×{height} pixels",
            f.name()
        )));
    }
    Ok(Header {
        format: f,
        width,
        height,
        orientation: 1,
        progressive: false,
        channels,
        depth,
    })
}

impl Jpeg {
    /// Walks `b`; returns how many bytes it used (all, unless it is done).
    fn feed(&mut self, b: &[u8], done: &mut Option<Result<Header, Error>>) -> usize {
        let mut i = 0;
        while i < b.len() && done.is_none() {
            let c = b[i];
            match self.state {
                JState::Marker => {
                    if c != 0xFF {
                        *done = Some(Err(Error::undecodable(
                            "JPEG: a marker was expected (the file is damaged)",
                        )));
                        break;
                    }
                    self.state = JState::Code;
                    i += 1;
                }
                JState::Code => {
                    i += 1;
                    match c {
                        0xFF => {}
                        // Markers without a length.
                        0x01 | 0xD0..=0xD7 => self.state = JState::Marker,
                        0xD8 => self.state = JState::Marker,
                        0xD9 | 0xDA => {
                            *done = Some(Err(Error::undecodable(
                                "JPEG without a frame header before its image data",
                            )));
                        }
                        m => {
                            self.marker = m;
                            self.state = JState::Len1;
                        }
                    }
                }
                JState::Len1 => {
                    self.state = JState::Len2(c);
                    i += 1;
                }
                JState::Len2(hi) => {
                    i += 1;
                    let len = (usize::from(hi) << 8 | usize::from(c)).saturating_sub(2);
                    self.len = len;
                    self.got = 0;
                    self.seg.clear();
                    let exif = self.marker == 0xE1 && !self.exif_seen;
                    self.keep_seg = exif || is_sof(self.marker);
                    self.state = JState::Body;
                    if len == 0 {
                        self.end_segment(done);
                    }
                }
                JState::Body => {
                    let n = (self.len - self.got).min(b.len() - i);
                    if self.keep_seg && self.seg.len() < HEADER_KEEP {
                        let k = n.min(HEADER_KEEP - self.seg.len());
                        self.seg.extend_from_slice(&b[i..i + k]);
                    }
                    self.got += n;
                    i += n;
                    if self.got == self.len {
                        self.end_segment(done);
                    }
                }
            }
        }
        i
    }

    fn end_segment(&mut self, done: &mut Option<Result<Header, Error>>) {
        self.state = JState::Marker;
        if self.marker == 0xE1 && !self.exif_seen && self.seg.starts_with(b"Exif\0\0") {
            self.exif_seen = true;
            self.orientation = exif_orientation(&self.seg[6..]).unwrap_or(1);
        }
        if !is_sof(self.marker) {
            return;
        }
        let s = &self.seg;
        if s.len() < 6 {
            *done = Some(Err(Error::undecodable("JPEG frame header is truncated")));
            return;
        }
        let height = u32::from(u16::from_be_bytes([s[1], s[2]]));
        let width = u32::from(u16::from_be_bytes([s[3], s[4]]));
        let components = s[5];
        let r = if width == 0 || height == 0 {
            Err(Error::undecodable(format!(
                "JPEG of {width}×{height} pixels (a height given later, by DNL, is not supported)"
            )))
        } else if !matches!(components, 1 | 3 | 4) {
            Err(Error::undecodable(format!(
                "JPEG with {components} components"
            )))
        } else if matches!(self.marker, 0xC3 | 0xC7 | 0xCB | 0xCF) {
            Err(Error::unsupported("lossless JPEG is not decoded here"))
        } else {
            Ok(Header {
                format: Format::Jpeg,
                width,
                height,
                orientation: self.orientation.max(1),
                progressive: matches!(self.marker, 0xC2 | 0xC6 | 0xCA | 0xCE),
                channels: components,
                depth: if s[0] > 8 { 2 } else { 1 },
            })
        };
        *done = Some(r);
    }
}

/// Start-of-frame markers (T.81 Table B.1): C0–CF but DHT, JPG and DAC.
fn is_sof(m: u8) -> bool {
    matches!(m, 0xC0..=0xCF) && !matches!(m, 0xC4 | 0xC8 | 0xCC)
}

/// Tag 0x0112 of IFD0 in a TIFF structure (an Exif segment after its
/// `Exif\0\0`); `None` when absent or out of range.
pub fn exif_orientation(tiff: &[u8]) -> Option<u8> {
    let big = match tiff.get(..4)? {
        b"MM\0*" => true,
        b"II*\0" => false,
        _ => return None,
    };
    let u16_at = |i: usize| -> Option<u16> {
        let b: [u8; 2] = tiff.get(i..i + 2)?.try_into().ok()?;
        Some(if big {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    };
    let u32_at = |i: usize| -> Option<u32> {
        let b: [u8; 4] = tiff.get(i..i + 4)?.try_into().ok()?;
        Some(if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    let ifd = u32_at(4)? as usize;
    let count = usize::from(u16_at(ifd)?);
    for k in 0..count.min(512) {
        let e = ifd + 2 + 12 * k;
        if u16_at(e)? == 0x0112 {
            let v = u16_at(e + 8)?;
            return (1..=8).contains(&v).then_some(v as u8);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jpeg_with(orientation: Option<u16>, sof: u8, w: u16, h: u16) -> Vec<u8> {
        let mut v = vec![0xFF, 0xD8];
        // APP0 JFIF.
        v.extend_from_slice(&[0xFF, 0xE0, 0, 16]);
        v.extend_from_slice(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
        if let Some(o) = orientation {
            // APP1 Exif, big-endian TIFF, IFD0 with one entry, padded far
            // beyond a first chunk.
            let mut tiff = b"MM\0*\0\0\0\x08\0\x01".to_vec();
            tiff.extend_from_slice(&[0x01, 0x12, 0, 3, 0, 0, 0, 1]);
            tiff.extend_from_slice(&o.to_be_bytes());
            tiff.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
            tiff.resize(40_000, 0);
            let len = (2 + 6 + tiff.len()) as u16;
            v.extend_from_slice(&[0xFF, 0xE1]);
            v.extend_from_slice(&len.to_be_bytes());
            v.extend_from_slice(b"Exif\0\0");
            v.extend_from_slice(&tiff);
        }
        v.extend_from_slice(&[0xFF, 0xFF, 0xFF, sof, 0, 17, 8]);
        v.extend_from_slice(&h.to_be_bytes());
        v.extend_from_slice(&w.to_be_bytes());
        v.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
        v.extend_from_slice(&[0xFF, 0xDA]);
        v
    }

    /// Whole, byte by byte and at every split, the same header.
    fn every_way(data: &[u8]) -> Result<Header, Error> {
        let whole = probe(data);
        let mut s = HeaderScan::new();
        for b in data {
            s.feed(std::slice::from_ref(b));
        }
        assert_eq!(s.finish(), whole, "byte by byte");
        for cut in (0..data.len()).step_by(997) {
            let mut s = HeaderScan::new();
            s.feed(&data[..cut]);
            s.feed(&data[cut..]);
            assert_eq!(s.finish(), whole, "cut at {cut}");
        }
        whole
    }

    #[test]
    fn jpeg_size_orientation_and_progressive_behind_a_big_exif() {
        let h = every_way(&jpeg_with(Some(6), 0xC2, 6000, 4000)).unwrap();
        assert_eq!((h.width, h.height, h.orientation), (6000, 4000, 6));
        assert!(h.progressive);
        assert_eq!(h.shown(), (4000, 6000));
        let h = every_way(&jpeg_with(None, 0xC0, 65535, 65535)).unwrap();
        assert_eq!(
            (h.pixels(), h.orientation, h.progressive),
            (65535 * 65535, 1, false)
        );
    }

    #[test]
    fn png_gif_webp_sizes() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&100_000u32.to_be_bytes());
        png.extend_from_slice(&100_000u32.to_be_bytes());
        png.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        let h = every_way(&png).unwrap();
        assert_eq!(
            (h.format, h.width, h.height, h.channels),
            (Format::Png, 100_000, 100_000, 4)
        );
        let mut gif = b"GIF89a".to_vec();
        gif.extend_from_slice(&[0x10, 0x27, 0x20, 0x4e]);
        gif.resize(40, 0);
        let h = every_way(&gif).unwrap();
        assert_eq!((h.format, h.width, h.height), (Format::Gif, 10_000, 20_000));
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        webp.extend_from_slice(&[0x2b, 0x01, 0x00, 0xc7, 0x00, 0x00]);
        webp.resize(40, 0);
        let h = every_way(&webp).unwrap();
        assert_eq!((h.format, h.width, h.height), (Format::WebP, 300, 200));
    }

    #[test]
    fn garbage_truncation_and_other_formats() {
        let random: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert!(matches!(every_way(&random), Err(Error::Unsupported(_))));
        let j = jpeg_with(Some(3), 0xC0, 10, 10);
        let e = every_way(&j[..30_000]).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let e = probe(b"\0\0\0\x1cftypheic\0\0\0\0mif1heic").unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains("HEIC")),
            "{e}"
        );
        let e = probe(b"\0\0\0\x1cftypavif\0\0\0\0mif1avif").unwrap_err();
        assert!(e.to_string().contains("AVIF"), "{e}");
        assert!(probe(b"").is_err());
        // No frame header within the scan's reach.
        let mut long = vec![0xFF, 0xD8];
        for _ in 0..20 {
            long.extend_from_slice(&[0xFF, 0xE2, 0xFF, 0xFF]);
            long.resize(long.len() + 0xFFFD, 0);
        }
        let e = every_way(&long).unwrap_err();
        assert!(e.to_string().contains("no image header within"), "{e}");
    }
}
