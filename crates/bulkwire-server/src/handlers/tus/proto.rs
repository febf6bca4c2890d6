//! The request headers of resumable uploads, parsed without I/O: tus 1.0.0
//! (<https://tus.io/protocols/resumable-upload>, "Headers" and the
//! extensions) and the IETF draft's interop versions 5 and 6
//! (draft-ietf-httpbis-resumable-upload-03 §8 and -05 §8: `Upload-Complete`
//! is an RFC 8941 §3.3.6 Boolean, `Upload-Offset` and `Upload-Length` are
//! Integers).

use crate::error::{ApiError, Kind};
use base64::Engine as _;
use http::HeaderMap;

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::new(Kind::Malformed, m)
}

/// Which protocol a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// tus 1.0.0 (`Tus-Resumable: 1.0.0`).
    Tus,
    /// The IETF draft, by `Upload-Draft-Interop-Version` (5: draft -03/-04,
    /// 6: draft -05, which tus-js-client sends).
    Ietf(u8),
}

/// The interop versions served.
pub const INTEROP: [u8; 2] = [5, 6];

/// The protocol of a request; `options` requests need no `Tus-Resumable`
/// (tus core: OPTIONS is how a client learns the version).
pub fn proto(h: &HeaderMap, options: bool) -> Result<Proto, ApiError> {
    if let Some(v) = h.get("upload-draft-interop-version") {
        let v = v.to_str().ok().and_then(|v| v.trim().parse::<u8>().ok());
        return match v {
            Some(v) if INTEROP.contains(&v) => Ok(Proto::Ietf(v)),
            _ => Err(ApiError::new(
                Kind::Precondition,
                "Upload-Draft-Interop-Version: this server speaks 5 and 6",
            )),
        };
    }
    match h.get("tus-resumable").map(|v| v.as_bytes()) {
        Some(b"1.0.0") => Ok(Proto::Tus),
        None if options => Ok(Proto::Tus),
        _ => Err(ApiError::new(
            Kind::Precondition,
            "Tus-Resumable: this server speaks tus 1.0.0 (or send Upload-Draft-Interop-Version 5 or 6)",
        )),
    }
}

/// A header's value as text, if present.
pub fn text<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    match h.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim()))
            .map_err(|_| bad(format!("{name}: not visible ASCII"))),
    }
}

/// A non-negative integer header (`Upload-Offset`, `Upload-Length`).
pub fn number(h: &HeaderMap, name: &str) -> Result<Option<u64>, ApiError> {
    let Some(v) = text(h, name)? else {
        return Ok(None);
    };
    let ok = !v.is_empty() && v.len() <= 19 && v.bytes().all(|b| b.is_ascii_digit());
    match ok.then(|| v.parse::<u64>().ok()).flatten() {
        Some(n) => Ok(Some(n)),
        None => Err(bad(format!("{name}: {v:?} is not a non-negative integer"))),
    }
}

/// An RFC 8941 Boolean (`?0`/`?1`).
pub fn boolean(h: &HeaderMap, name: &str) -> Result<Option<bool>, ApiError> {
    match text(h, name)? {
        None => Ok(None),
        Some("?1") => Ok(Some(true)),
        Some("?0") => Ok(Some(false)),
        Some(v) => Err(bad(format!("{name}: {v:?} is not ?0 or ?1"))),
    }
}

/// One `Upload-Metadata` key and its decoded value, if it has one.
pub type Pair = (String, Option<Vec<u8>>);

/// `Upload-Metadata`: comma-separated `key base64value` pairs (the value
/// may be absent); keys are unique, non-empty and without spaces or commas.
pub fn metadata(v: &str, max: usize) -> Result<Vec<Pair>, ApiError> {
    if v.len() > max {
        return Err(ApiError::limit("upload_metadata_bytes", max as u64));
    }
    let mut out: Vec<Pair> = Vec::new();
    for pair in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut it = pair.split(' ').filter(|s| !s.is_empty());
        let key = it.next().unwrap_or_default();
        let value = it.next();
        if it.next().is_some() || out.iter().any(|(k, _)| k == key) {
            return Err(bad(format!(
                "Upload-Metadata: bad or repeated pair {pair:?}"
            )));
        }
        let value = value
            .map(|b| base64::engine::general_purpose::STANDARD.decode(b))
            .transpose()
            .map_err(|_| bad(format!("Upload-Metadata: {key}: not base64")))?;
        out.push((key.to_string(), value));
    }
    Ok(out)
}

/// A checksum algorithm of the tus checksum extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Sha1,
    Sha256,
}

/// What `Tus-Checksum-Algorithm` lists.
pub const ALGS: &str = "sha1,sha256";

/// `Upload-Checksum: ALG BASE64`; an algorithm not served is 400, as the
/// extension says.
pub fn checksum(v: &str) -> Result<(Alg, Vec<u8>), ApiError> {
    let (alg, sum) = v
        .split_once(' ')
        .ok_or_else(|| bad("Upload-Checksum: expected \"ALGORITHM BASE64\""))?;
    let (alg, len) = match alg {
        "sha1" => (Alg::Sha1, 20),
        "sha256" => (Alg::Sha256, 32),
        a => {
            return Err(bad(format!(
                "Upload-Checksum: algorithm {a:?} not supported (use {ALGS})"
            )))
        }
    };
    let sum = base64::engine::general_purpose::STANDARD
        .decode(sum.trim())
        .map_err(|_| bad("Upload-Checksum: not base64"))?;
    if sum.len() != len {
        return Err(bad(format!(
            "Upload-Checksum: a {alg:?} digest has {len} bytes"
        )));
    }
    Ok((alg, sum))
}

/// The concatenation extension's `Upload-Concat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Concat {
    Partial,
    /// The partial uploads' ids, in order.
    Final(Vec<String>),
}

/// `partial`, or `final;URL URL …` with URLs (absolute or paths) of this
/// server's uploads; at most `max` of them.
pub fn concat(v: &str, max: usize) -> Result<Concat, ApiError> {
    if v == "partial" {
        return Ok(Concat::Partial);
    }
    let Some(list) = v.strip_prefix("final;") else {
        return Err(bad(
            "Upload-Concat: expected \"partial\" or \"final;URL …\"",
        ));
    };
    let ids = list
        .split(' ')
        .filter(|u| !u.is_empty())
        .map(upload_id)
        .collect::<Result<Vec<_>, _>>()?;
    if ids.is_empty() {
        return Err(bad("Upload-Concat: final names no upload"));
    }
    if ids.len() > max {
        return Err(ApiError::limit("concat_uploads", max as u64));
    }
    Ok(Concat::Final(ids))
}

/// The id at the end of an upload URL `…/v1/uploads/ID`.
fn upload_id(url: &str) -> Result<String, ApiError> {
    let path = match url.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("", |i| &rest[i..]),
        None => url,
    };
    match path.strip_prefix("/v1/uploads/") {
        Some(id) if crate::store::is_id(id) => Ok(id.to_string()),
        _ => Err(bad(format!(
            "Upload-Concat: {url:?} is not an upload of this server"
        ))),
    }
}

/// An HTTP date (RFC 9110 §5.6.7) for `Upload-Expires`.
pub fn http_date(unix: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix.max(0) as u64);
    httpdate::fmt_http_date(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn protocol_by_header() {
        let h = headers(&[("tus-resumable", "1.0.0")]);
        assert_eq!(proto(&h, false).unwrap(), Proto::Tus);
        let h = headers(&[("upload-draft-interop-version", "6")]);
        assert_eq!(proto(&h, false).unwrap(), Proto::Ietf(6));
        for bad in [
            &[("tus-resumable", "0.2.2")][..],
            &[("upload-draft-interop-version", "3")],
            &[],
        ] {
            let e = proto(&headers(bad), false).unwrap_err();
            assert_eq!(e.status(), 412, "{bad:?}");
        }
        assert_eq!(proto(&HeaderMap::new(), true).unwrap(), Proto::Tus);
    }

    #[test]
    fn numbers_and_booleans() {
        let h = headers(&[("upload-offset", "42"), ("upload-complete", "?1")]);
        assert_eq!(number(&h, "upload-offset").unwrap(), Some(42));
        assert_eq!(number(&h, "upload-length").unwrap(), None);
        assert_eq!(boolean(&h, "upload-complete").unwrap(), Some(true));
        for v in ["-1", "1.5", "", "+3", "99999999999999999999"] {
            let h = headers(&[("upload-offset", Box::leak(v.to_string().into_boxed_str()))]);
            assert_eq!(
                number(&h, "upload-offset").unwrap_err().status(),
                400,
                "{v}"
            );
        }
        let h = headers(&[("upload-complete", "true")]);
        assert_eq!(boolean(&h, "upload-complete").unwrap_err().status(), 400);
    }

    #[test]
    fn metadata_pairs() {
        let m = metadata(
            "filename d29ybGRfZG9taW5hdGlvbl9wbGFuLnBkZg==,is_confidential",
            4096,
        )
        .unwrap();
        assert_eq!(m[0].0, "filename");
        assert_eq!(m[0].1.as_deref(), Some(&b"world_domination_plan.pdf"[..]));
        assert_eq!(m[1], ("is_confidential".to_string(), None));
        for v in ["a b c", "a !!!", "a YQ==,a YQ=="] {
            assert_eq!(metadata(v, 4096).unwrap_err().status(), 400, "{v}");
        }
        let e = metadata("filename YQ==", 4).unwrap_err();
        assert_eq!(e.limit, Some(("upload_metadata_bytes", 4)));
    }

    #[test]
    fn checksums() {
        let (a, d) = checksum("sha1 Kq5sNclPz7QV2+lfQIuc6R7oRu0=").unwrap();
        assert_eq!((a, d.len()), (Alg::Sha1, 20));
        assert_eq!(checksum("md5 AAAA").unwrap_err().status(), 400);
        assert_eq!(checksum("sha1 AAAA").unwrap_err().status(), 400);
        assert_eq!(checksum("sha256").unwrap_err().status(), 400);
    }

    #[test]
    fn concatenation() {
        assert_eq!(concat("partial", 4).unwrap(), Concat::Partial);
        let a = "0123456789abcdef0123456789abcdef";
        let v = format!("final;/v1/uploads/{a} http://h:1/v1/uploads/{a}");
        assert_eq!(
            concat(&v, 4).unwrap(),
            Concat::Final(vec![a.into(), a.into()])
        );
        for v in [
            "final;",
            "final;/v1/media/x",
            "whole",
            "final;/v1/uploads/../x",
        ] {
            assert_eq!(concat(v, 4).unwrap_err().status(), 400, "{v}");
        }
        assert_eq!(concat(&v, 1).unwrap_err().status(), 413);
    }

    #[test]
    fn dates() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }
}
