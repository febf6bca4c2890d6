//! Character classes of XML 1.0 (Fifth Edition) §2.2–§2.3 and the entity and
//! character references of §4.1 and §4.6.
//!
//! Names are checked byte-wise: the ASCII name characters exactly, and every
//! byte ≥ 0x80 accepted as part of a non-ASCII name character (the document
//! is UTF-8; §2.3's ranges of non-ASCII code points are not enforced).

/// XML white space (§2.3 `S`).
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// §2.3 `NameStartChar`, ASCII exactly, non-ASCII bytes accepted.
pub(crate) fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':' || b >= 0x80
}

/// §2.3 `NameChar`, ASCII exactly, non-ASCII bytes accepted.
pub(crate) fn is_name_char(b: u8) -> bool {
    is_name_start(b) || b.is_ascii_digit() || b == b'-' || b == b'.'
}

/// §2.2 `Char`: the code points a character reference may name.
pub(crate) fn is_xml_char(c: u32) -> bool {
    matches!(c, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

/// Longest reference accepted, `&` and `;` included: `&#x10FFFF;` is 10.
pub(crate) const MAX_REF: usize = 12;

/// What scanning the start of a reference found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RefScan {
    /// A syntactically complete reference of this many bytes.
    Done(usize),
    /// Valid so far; more bytes needed.
    More,
    /// The byte at this index cannot continue a reference.
    Bad(usize, &'static str),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RefKind {
    Name,
    Dec,
    Hex,
}

/// Scans a reference (`&name;`, `&#digits;`, `&#xhex;`) at the start of
/// `b`, which begins with `&`. Each byte is judged on its own, so a reference
/// split anywhere gives the same verdict at the same index.
pub(crate) fn scan_ref(b: &[u8]) -> RefScan {
    let mut kind = RefKind::Name;
    for (i, &c) in b.iter().enumerate().take(MAX_REF).skip(1) {
        if c == b';' {
            let min = match kind {
                RefKind::Name => 2,
                RefKind::Dec => 3,
                RefKind::Hex => 4,
            };
            if i < min {
                return RefScan::Bad(i, "empty entity or character reference");
            }
            return RefScan::Done(i + 1);
        }
        let ok = match (i, kind) {
            (1, _) if c == b'#' => {
                kind = RefKind::Dec;
                true
            }
            (1, _) => is_name_start(c),
            (2, RefKind::Dec) if c == b'x' => {
                kind = RefKind::Hex;
                true
            }
            (_, RefKind::Name) => is_name_char(c),
            (_, RefKind::Dec) => c.is_ascii_digit(),
            (_, RefKind::Hex) => c.is_ascii_hexdigit(),
        };
        if !ok {
            return RefScan::Bad(i, "invalid byte in entity or character reference");
        }
        if i == MAX_REF - 1 {
            return RefScan::Bad(i, "entity or character reference longer than 12 bytes");
        }
    }
    RefScan::More
}

/// The replacement text of a reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replacement {
    /// One of the five predefined entities (§4.6).
    Static(&'static [u8]),
    /// A character reference, UTF-8 encoded: bytes and length.
    Char([u8; 4], usize),
}

impl Replacement {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Replacement::Static(s) => s,
            Replacement::Char(b, n) => &b[..*n],
        }
    }
}

/// Decodes a complete reference as found by [`scan_ref`]. The error names
/// the problem; its position is the reference's `&`.
pub(crate) fn decode_ref(r: &[u8]) -> Result<Replacement, &'static str> {
    let body = &r[1..r.len() - 1];
    let Some(num) = body.strip_prefix(b"#") else {
        return match body {
            b"lt" => Ok(Replacement::Static(b"<")),
            b"gt" => Ok(Replacement::Static(b">")),
            b"amp" => Ok(Replacement::Static(b"&")),
            b"apos" => Ok(Replacement::Static(b"'")),
            b"quot" => Ok(Replacement::Static(b"\"")),
            _ => Err("undeclared entity (only the five predefined ones exist here)"),
        };
    };
    let (digits, radix) = match num.strip_prefix(b"x") {
        Some(h) => (h, 16),
        None => (num, 10),
    };
    let value = digits.iter().fold(0u32, |acc, &d| {
        let v = (d as char).to_digit(radix).unwrap_or(0);
        acc.saturating_mul(radix).saturating_add(v)
    });
    match char::from_u32(value).filter(|_| is_xml_char(value)) {
        Some(c) => {
            let mut buf = [0u8; 4];
            let n = c.encode_utf8(&mut buf).len();
            Ok(Replacement::Char(buf, n))
        }
        None => Err("character reference to a code point that is not an XML Char"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(r: &[u8]) -> Result<Vec<u8>, String> {
        match scan_ref(r) {
            RefScan::Done(n) => decode_ref(&r[..n])
                .map(|x| x.bytes().to_vec())
                .map_err(|m| m.to_string()),
            other => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn references() {
        assert_eq!(whole(b"&lt;").unwrap(), b"<");
        assert_eq!(whole(b"&quot;x").unwrap(), b"\"");
        assert_eq!(whole(b"&#65;").unwrap(), b"A");
        assert_eq!(whole(b"&#x1F600;").unwrap(), "😀".as_bytes());
        assert_eq!(whole(b"&#0000065;").unwrap(), b"A");
        assert_eq!(whole(b"&#x10FFFF;").unwrap(), "\u{10FFFF}".as_bytes());
        assert!(whole(b"&#0;").is_err());
        assert!(whole(b"&#xD800;").is_err());
        assert!(whole(b"&#x110000;").is_err());
        assert!(whole(b"&#8;").is_err());
        assert!(whole(b"&#xFFFE;").is_err());
        assert!(whole(b"&#99999999999;").is_err());
        assert!(whole(b"&nbsp;").is_err());
    }

    #[test]
    fn scan_positions() {
        assert_eq!(scan_ref(b"&"), RefScan::More);
        assert_eq!(scan_ref(b"&#x1"), RefScan::More);
        assert!(matches!(scan_ref(b"&;"), RefScan::Bad(1, _)));
        assert!(matches!(scan_ref(b"&#;"), RefScan::Bad(2, _)));
        assert!(matches!(scan_ref(b"&#x;"), RefScan::Bad(3, _)));
        assert!(matches!(scan_ref(b"&#1a;"), RefScan::Bad(3, _)));
        assert!(matches!(scan_ref(b"&lt "), RefScan::Bad(3, _)));
        assert!(matches!(scan_ref(b"&1;"), RefScan::Bad(1, _)));
        assert!(matches!(scan_ref(b"&#00000000000;"), RefScan::Bad(11, _)));
        assert_eq!(scan_ref(b"&#000000065;"), RefScan::Done(12));
    }
}
