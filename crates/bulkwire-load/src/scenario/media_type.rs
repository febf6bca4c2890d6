//! The media type of a file sent without `--content-type` (issue 23: a JPEG
//! sent as `application/octet-stream` was stored so, and the media library
//! showed a placeholder for it).
//!
//! Its bytes first, then its name: a binary format's magic bytes (`infer`:
//! JPEG, PNG, GIF, WebP, PDF, MP4, ZIP, Office files, …) say what the file
//! is whatever it is called; where they say nothing, the extension
//! (`mime_guess`: `.svg`, `.csv`, `.json`, `.txt`, …); failing both,
//! `application/octet-stream`. `infer`'s few text matchers (`text/xml`,
//! `text/html`, shell scripts) come after the extension, which is the more
//! specific for text: an SVG, an Atom feed and an XHTML page all start
//! with `<?xml`. The server guesses a stored item's type with the same two
//! crates (the root `Cargo.toml` shares them).

use std::path::Path;

/// The type when neither the bytes nor the name say.
pub const UNKNOWN: &str = "application/octet-stream";

/// How much of the file the magic-byte matchers are shown: every signature
/// `infer` knows lies within it (the furthest, ISO 9660's, at 32 KiB).
const MAGIC_BYTES: usize = 64 * 1024;

/// The media type of `data`, read from `path` (see the module docs).
pub fn guess(path: &Path, data: &[u8]) -> &'static str {
    let magic = infer::get(&data[..data.len().min(MAGIC_BYTES)]);
    if let Some(t) = magic.filter(|t| t.matcher_type() != infer::MatcherType::Text) {
        return t.mime_type();
    }
    mime_guess::from_path(path)
        .first_raw()
        .or(magic.map(|t| t.mime_type()))
        .unwrap_or(UNKNOWN)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JPEG: &[u8] = &[0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, b'J', b'F', b'I', b'F', 0];
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    fn g(name: &str, data: &[u8]) -> &'static str {
        guess(Path::new(name), data)
    }

    #[test]
    fn the_bytes_say_what_a_binary_file_is_whatever_its_name() {
        assert_eq!(g("photo.jpg", JPEG), "image/jpeg");
        assert_eq!(g("upload.bin", JPEG), "image/jpeg");
        assert_eq!(g("no-extension", PNG), "image/png");
        assert_eq!(g("misnamed.jpg", PNG), "image/png");
        assert_eq!(g("doc", b"%PDF-1.7\n%\xe2\xe3"), "application/pdf");
    }

    #[test]
    fn the_extension_says_what_the_bytes_do_not() {
        assert_eq!(g("photo.jpg", b"not a jpeg at all"), "image/jpeg");
        assert_eq!(g("table.csv", b"a,b\n1,2\n"), "text/csv");
        assert_eq!(g("DATA.JSON", b"{}"), "application/json");
        // An SVG starts as any XML does: its name is the more specific.
        let svg = b"<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>";
        assert_eq!(g("logo.svg", svg), "image/svg+xml");
        assert_eq!(
            g("logo", svg),
            "text/xml",
            "the text matcher as a last guess"
        );
    }

    #[test]
    fn neither_gives_octet_stream() {
        assert_eq!(g("payload", &[1, 2, 3, 4]), UNKNOWN);
        assert_eq!(g("payload.unknown-ext", &[]), UNKNOWN);
    }
}
