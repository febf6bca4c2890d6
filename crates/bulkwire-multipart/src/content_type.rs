//! The `Content-Type` of a multipart message (RFC 2045 §5.1, RFC 2046 §5.1.1,
//! RFC 2387 §3 for `multipart/related`'s `type`, `start` and `start-info`).

use crate::error::{Error, ErrorKind};
use crate::params::{self, Escapes};

/// Which multipart flavour a message is; decides form-data-only rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Subtype {
    /// RFC 7578.
    FormData,
    /// RFC 2387 (MTOM/XOP rides on it).
    Related,
    /// RFC 2046 §5.1.3.
    Mixed,
    /// RFC 2046 §5.1.4; parsed like mixed.
    Alternative,
}

/// A parsed multipart `Content-Type` header value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentType {
    pub subtype: Subtype,
    pub boundary: String,
    /// RFC 2387 `start`: Content-ID of the root part.
    pub start: Option<String>,
    /// RFC 2387 `type`: media type of the root part.
    pub type_: Option<String>,
    /// RFC 2387 `start-info` (XOP uses it for the SOAP media type).
    pub start_info: Option<String>,
    /// Every parameter, names lower-cased, values unescaped.
    pub params: Vec<(String, String)>,
}

impl ContentType {
    /// Parses a header value such as
    /// `multipart/form-data; boundary="----x"`.
    ///
    /// A media type other than multipart is [`ErrorKind::Unsupported`]; a
    /// missing or empty boundary, or a syntax error, is
    /// [`ErrorKind::Malformed`] with the offset into `value`.
    pub fn parse(value: &str) -> Result<ContentType, Error> {
        let (essence, ps) = params::split_value(value.as_bytes());
        let subtype = subtype_of(essence)?;
        let mut params = Vec::new();
        for p in ps {
            let p = p.map_err(|at| malformed("bad Content-Type parameter", at))?;
            let name = String::from_utf8_lossy(p.name).to_ascii_lowercase();
            if params.iter().any(|(n, _)| *n == name) {
                return Err(malformed("duplicate Content-Type parameter", 0));
            }
            let v = params::decode(&p, Escapes::QuotedPair);
            params.push((name, String::from_utf8_lossy(&v).into_owned()));
        }
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let boundary = get("boundary").filter(|b| !b.is_empty());
        let boundary = boundary.ok_or_else(|| malformed("no boundary parameter", 0))?;
        Ok(ContentType {
            subtype,
            boundary,
            start: get("start"),
            type_: get("type"),
            start_info: get("start-info"),
            params,
        })
    }
}

fn malformed(msg: &'static str, at: usize) -> Error {
    Error::new(ErrorKind::Malformed, msg, at as u64)
}

fn subtype_of(essence: &[u8]) -> Result<Subtype, Error> {
    let lower = essence.to_ascii_lowercase();
    match lower.as_slice() {
        b"multipart/form-data" => Ok(Subtype::FormData),
        b"multipart/related" => Ok(Subtype::Related),
        b"multipart/mixed" => Ok(Subtype::Mixed),
        b"multipart/alternative" => Ok(Subtype::Alternative),
        _ => Err(Error::new(
            ErrorKind::Unsupported,
            "not a supported multipart media type",
            0,
        )),
    }
}

/// Checks a boundary against RFC 2046 §5.1.1: 1 to `max_len` characters from
/// `bchars`, not ending in a space.
pub fn validate_boundary(b: &[u8], max_len: usize) -> Result<(), Error> {
    if b.is_empty() {
        return Err(malformed("empty boundary", 0));
    }
    if b.len() > max_len {
        let l = crate::LimitKind::BoundaryLen;
        return Err(Error::limit(l, max_len as u64, 0));
    }
    if let Some(i) = b.iter().position(|&c| !is_bchar(c)) {
        return Err(malformed(
            "boundary has a character outside RFC 2046 bchars",
            i,
        ));
    }
    if b.ends_with(b" ") {
        return Err(malformed("boundary ends with a space", b.len() - 1));
    }
    Ok(())
}

fn is_bchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"'()+_,-./:=? ".contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn related_with_all_params() {
        let ct = ContentType::parse(
            r#"Multipart/Related; type="application/xop+xml"; boundary="uuid:32d5"; start="<root@cxf>"; start-info="text/xml""#,
        )
        .unwrap();
        assert_eq!(ct.subtype, Subtype::Related);
        assert_eq!(ct.boundary, "uuid:32d5");
        assert_eq!(ct.start.as_deref(), Some("<root@cxf>"));
        assert_eq!(ct.type_.as_deref(), Some("application/xop+xml"));
        assert_eq!(ct.start_info.as_deref(), Some("text/xml"));
    }

    #[test]
    fn unquoted_boundary() {
        let ct = ContentType::parse("multipart/form-data; boundary=abc-123").unwrap();
        assert_eq!(
            (ct.subtype, ct.boundary.as_str()),
            (Subtype::FormData, "abc-123")
        );
    }

    #[test]
    fn errors() {
        let e = ContentType::parse("text/plain; boundary=x").unwrap_err();
        assert_eq!((e.kind(), e.http_status()), (ErrorKind::Unsupported, 415));
        let e = ContentType::parse("multipart/form-data").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed);
        let e = ContentType::parse("multipart/form-data; boundary=a; boundary=b").unwrap_err();
        assert_eq!(e.message(), "duplicate Content-Type parameter");
    }

    #[test]
    fn boundary_rules() {
        assert!(validate_boundary(b"simple boundary", 70).is_ok());
        assert!(validate_boundary(&[b'a'; 70], 70).is_ok());
        let e = validate_boundary(&[b'a'; 71], 70).unwrap_err();
        assert_eq!(
            e.limit_exceeded(),
            Some((crate::LimitKind::BoundaryLen, 70))
        );
        assert_eq!(validate_boundary(b"a\rb", 70).unwrap_err().offset(), 1);
        assert!(validate_boundary(b"ab ", 70).is_err());
        assert!(validate_boundary(b"", 70).is_err());
    }
}
