//! Content-IDs and `cid:` URLs (RFC 2392), the names XOP uses to point from
//! an `xop:Include` to a MIME part (XOP 1.0 §4.2, MTOM §3.2).
//!
//! A part's `Content-ID` header is `<addr-spec>` (RFC 2045 §7); an `href` is
//! `cid:` followed by the same addr-spec with URL-unsafe characters written
//! as `%hh` (RFC 2392 §2). Both normalize to the bare addr-spec, which is
//! compared byte for byte. Choices:
//! - Angle brackets are optional in the header (Apache CXF and others leave
//!   them out in some versions) and, after percent-decoding, tolerated in an
//!   `href` (`cid:%3Cx%3E`).
//! - An `href` with any other scheme is refused, never fetched: resolving
//!   `http:` or `file:` URLs from a request body is server-side request
//!   forgery.
//! - The decoded id must be UTF-8, non-empty and at most
//!   [`crate::Limits::content_id_len`] bytes.

use crate::error::{Error, ErrorKind};
use crate::limits::LimitKind;

/// Normalizes a `Content-ID` header value: white space and one pair of
/// angle brackets removed. Error offsets are into `value`.
pub fn content_id(value: &[u8], max_len: usize) -> Result<String, Error> {
    let v = trim(value);
    let inner = match v {
        [b'<', inner @ .., b'>'] => inner,
        _ => v,
    };
    finish(inner.to_vec(), max_len)
}

/// Resolves an `href` to the Content-ID it names. Error offsets are into
/// `href`.
pub fn cid_url(href: &[u8], max_len: usize) -> Result<String, Error> {
    let href = trim(href);
    if href.len() < 4 || !href[..4].eq_ignore_ascii_case(b"cid:") {
        let msg = "xop:Include href is not a cid: URL (never fetched)";
        return Err(Error::new(ErrorKind::Unsupported, msg, 0));
    }
    let decoded = percent_decode(&href[4..])
        .map_err(|i| Error::malformed("bad %-escape in a cid: URL", 4 + i as u64))?;
    let inner = match decoded.as_slice() {
        [b'<', inner @ .., b'>'] => inner.to_vec(),
        _ => decoded,
    };
    finish(inner, max_len)
}

/// `cid:` plus `id`, with everything but RFC 3986 unreserved characters and
/// the sub-delimiters safe in an XML attribute percent-encoded.
pub fn to_cid_url(id: &str) -> String {
    let mut out = String::with_capacity(4 + id.len());
    out.push_str("cid:");
    for &b in id.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn finish(id: Vec<u8>, max_len: usize) -> Result<String, Error> {
    if id.is_empty() {
        return Err(Error::malformed("empty Content-ID", 0));
    }
    if id.len() > max_len {
        return Err(Error::limit(LimitKind::ContentIdLen, max_len as u64, 0));
    }
    String::from_utf8(id).map_err(|_| Error::malformed("Content-ID is not UTF-8", 0))
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// `%hh` → byte; `Err` holds the index of a bad `%`.
fn percent_decode(s: &[u8]) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'%' {
            out.push(s[i]);
            i += 1;
            continue;
        }
        let hex = |j: usize| s.get(j).and_then(|c| (*c as char).to_digit(16));
        match (hex(i + 1), hex(i + 2)) {
            (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
            _ => return Err(i),
        }
        i += 3;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_forms() {
        assert_eq!(content_id(b" <a@b> ", 64).unwrap(), "a@b");
        assert_eq!(content_id(b"a@b", 64).unwrap(), "a@b");
        assert_eq!(content_id(b"<<a>>", 64).unwrap(), "<a>");
        assert_eq!(
            content_id(b"<>", 64).unwrap_err().kind(),
            ErrorKind::Malformed
        );
        let e = content_id(b"<abcdef>", 5).unwrap_err();
        assert_eq!(e.limit_exceeded(), Some((LimitKind::ContentIdLen, 5)));
        assert!(content_id(b"<\xff>", 64).is_err());
    }

    #[test]
    fn urls() {
        assert_eq!(cid_url(b"cid:file_0", 64).unwrap(), "file_0");
        assert_eq!(cid_url(b"CID:a%40b%2Fc", 64).unwrap(), "a@b/c");
        assert_eq!(cid_url(b"cid:%3Cx@y%3E", 64).unwrap(), "x@y");
        assert_eq!(cid_url(b"cid:%e2%82%ac", 64).unwrap(), "€");
        let e = cid_url(b"http://169.254.169.254/", 64).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        let e = cid_url(b"file:/etc/passwd", 64).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        let e = cid_url(b"cid:ab%4", 64).unwrap_err();
        assert_eq!((e.kind(), e.offset()), (ErrorKind::Malformed, 6));
        assert!(cid_url(b"cid:", 64).is_err());
        assert!(cid_url(b"cid:%zz", 64).is_err());
    }

    #[test]
    fn encoding_round_trips() {
        for id in [
            "a@b",
            "x y/z",
            "100%<>\"'&",
            "é@ü",
            "92572b7c-1@cxf.apache.org",
        ] {
            let url = to_cid_url(id);
            assert!(!url[4..].contains(['<', '>', '"', '&', '\'', ' ']), "{url}");
            assert_eq!(cid_url(url.as_bytes(), 64).unwrap(), id);
        }
        assert_eq!(to_cid_url("a b"), "cid:a%20b");
    }
}
