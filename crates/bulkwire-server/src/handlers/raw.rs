//! `PUT /v1/media/{name}`: the body is the file, stored under a new id with
//! `name` (percent-decoded, RFC 3986 §2.1) as its filename and the request's
//! `Content-Type`.

use super::finish_upload;
use crate::error::{ApiError, Kind};
use crate::events::Origin;
use crate::principal::Principal;
use crate::response::{self, Response};
use crate::state::AppState;
use crate::upload::{check_declared_length, check_quota, declared_length, BodyReader, Ingest};
use http::{HeaderMap, Request};
use hyper::body::Incoming;
use std::sync::Arc;

const FORMAT: &str = "raw";

pub async fn upload(
    state: &Arc<AppState>,
    name: &str,
    req: Request<Incoming>,
    who: &Principal,
) -> Response {
    let (parts, body) = req.into_parts();
    let mut reader = BodyReader::new(state, &parts, body);
    let origin = Origin::of(state, FORMAT, &parts.headers, &parts.extensions);
    let result = run(state, name, &parts.headers, &mut reader, who, origin).await;
    finish_upload(state, FORMAT, &reader, result)
}

async fn run(
    state: &Arc<AppState>,
    name: &str,
    headers: &HeaderMap,
    reader: &mut BodyReader,
    who: &Principal,
    origin: Origin,
) -> Result<Response, ApiError> {
    let limits = &state.config.limits;
    let name = percent_decode(name)?;
    check_declared_length(headers, "body_bytes", limits.body_bytes)?;
    check_declared_length(headers, "file_bytes", limits.file_bytes)?;
    let declared = declared_length(headers);
    if let Some(n) = declared {
        who.rules.check_size(n)?;
    }
    check_quota(state, who, declared, 1).await?;
    let ct = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let mut ingest = Ingest::new(state, who, origin);
    ingest.admit_at_first_file(reader.progress(), 0, declared);
    let mut sink = ingest.begin_file(None, Some(name), ct).await?;
    while let Some(chunk) = reader.next().await? {
        sink.push(chunk)?;
        sink.flush().await?;
    }
    ingest.finish_file(sink).await?;
    let (records, fields) = ingest.commit().await?;
    Ok(response::created(state, headers, &records, fields, who))
}

/// Decodes `%XX` escapes; the result must be non-empty UTF-8 without
/// control characters or `/`.
pub fn percent_decode(s: &str) -> Result<String, ApiError> {
    let bad = |m: &str| ApiError::new(Kind::Malformed, format!("bad name in URL: {m}"));
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = b
                .get(i + 1..i + 3)
                .ok_or_else(|| bad("truncated %-escape"))?;
            let h = std::str::from_utf8(h).map_err(|_| bad("bad %-escape"))?;
            out.push(u8::from_str_radix(h, 16).map_err(|_| bad("bad %-escape"))?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    let s = String::from_utf8(out).map_err(|_| bad("not UTF-8"))?;
    if s.is_empty() || s.chars().any(|c| c.is_control() || c == '/') {
        return Err(bad("empty, or a control character or '/'"));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_percent_decoded_and_checked() {
        assert_eq!(percent_decode("a%20b%C3%A9.txt").unwrap(), "a bé.txt");
        assert_eq!(percent_decode("plain").unwrap(), "plain");
        for bad in ["", "%", "%4", "%zz", "%0A", "a%2Fb", "%FF"] {
            assert_eq!(percent_decode(bad).unwrap_err().status(), 400, "{bad}");
        }
    }
}
