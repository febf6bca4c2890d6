//! `POST /v1/media` with `multipart/form-data` (RFC 7578): each file part
//! streams into storage as it arrives; text fields are returned.
//!
//! Each body chunk is run through the sans-IO parser to `NeedMore`; data
//! events become zero-copy `Bytes` slices of the chunk (or a small copy when
//! they come from the parser's delimiter carry), queued on the current
//! [`FileSink`] and written before the next chunk is read. A part with a
//! `filename` parameter is a file (RFC 7578 §4.2); one with an empty
//! filename and no data is what browsers send for an empty file input, and
//! is skipped.

use super::finish_upload;
use crate::error::{ApiError, Kind};
use crate::events::Origin;
use crate::principal::Principal;
use crate::response::{self, Response};
use crate::state::AppState;
use crate::upload::{
    check_declared_length, check_quota, declared_length, BodyReader, FileSink, Ingest,
};
use bulkwire_multipart::{ContentType, Event, Parser, PartInfo, Subtype};
use bytes::Bytes;
use http::{HeaderMap, Request};
use hyper::body::Incoming;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

const FORMAT: &str = "multipart";

/// Handles the request; never fails (errors become responses).
pub async fn upload(state: &Arc<AppState>, req: Request<Incoming>, who: &Principal) -> Response {
    let (parts, body) = req.into_parts();
    let mut reader = BodyReader::new(state, &parts, body);
    let origin = Origin::of(state, FORMAT, &parts.headers, &parts.extensions);
    let result = run(state, &parts.headers, &mut reader, who, origin).await;
    finish_upload(state, FORMAT, &reader, result)
}

/// What the part being read goes to.
enum Current {
    None,
    File {
        sink: Box<FileSink>,
        empty_name: bool,
    },
    Field {
        name: String,
        value: Vec<u8>,
    },
}

/// A parser event made owned, so the parser's borrow ends before awaiting.
enum Action {
    Start(PartInfo),
    Data(Bytes),
    End,
}

/// The boundary of a `multipart/form-data` body. Anything else is 415 with
/// what to send instead: the commonest mistake is a raw body posted here
/// (`curl --data-binary @f` sends `application/x-www-form-urlencoded`).
fn form_boundary(headers: &HeaderMap) -> Result<String, ApiError> {
    let ct = headers.get(http::header::CONTENT_TYPE);
    let unsupported = || {
        let got = match ct {
            Some(v) => format!("Content-Type {:?}", String::from_utf8_lossy(v.as_bytes())),
            None => "no Content-Type".to_string(),
        };
        ApiError::new(
            Kind::Unsupported,
            format!(
                "POST /v1/media takes multipart/form-data (curl -F file=@photo.jpg), got {got}; \
                 send a raw body with PUT /v1/media/NAME (curl -T photo.jpg)"
            ),
        )
    };
    let raw = ct
        .ok_or_else(unsupported)?
        .to_str()
        .map_err(|_| unsupported())?;
    let multipart = raw
        .get(..10)
        .is_some_and(|p| p.eq_ignore_ascii_case("multipart/"));
    if !multipart {
        return Err(unsupported());
    }
    // A multipart type keeps the codec's precise answer (no boundary, …).
    let ct = ContentType::parse(raw)?;
    if ct.subtype != Subtype::FormData {
        return Err(unsupported());
    }
    Ok(ct.boundary)
}

async fn run(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    reader: &mut BodyReader,
    who: &Principal,
    origin: Origin,
) -> Result<Response, ApiError> {
    let limits = &state.config.limits;
    let boundary = form_boundary(headers)?;
    check_declared_length(headers, "body_bytes", limits.body_bytes)?;
    // A body holds its files and a little more: what it declares bounds
    // them before the first byte.
    let declared = declared_length(headers);
    check_quota(state, who, declared, 1).await?;
    let mut parser = Parser::new(boundary.as_bytes(), Subtype::FormData, limits.multipart())?;
    let mut ingest = Ingest::new(state, who, origin);
    // Admitted at the first file part, once the pre_create hook has seen
    // its headers and the fields before it: the fields and part headers
    // read meanwhile are bounded by their own limits.
    ingest.admit_at_first_file(reader.progress(), 0, declared);
    let mut cur = Current::None;
    let mut capacity = parser.buffer_capacity();
    loop {
        let chunk = reader.next().await?;
        let last = chunk.is_none();
        let input = chunk.unwrap_or_default();
        feed(&mut parser, &input, last, &mut ingest, &mut cur).await?;
        if let Current::File { sink, .. } = &mut cur {
            sink.flush().await?;
        }
        if parser.buffer_capacity() > capacity {
            capacity = parser.buffer_capacity();
            state.metrics.buffer_growth.fetch_add(1, Relaxed);
        }
        if last {
            break;
        }
    }
    state.metrics.parser_peak(parser.peak_buffered_bytes());
    if ingest.files() == 0 {
        return Err(no_file(ingest.fields()));
    }
    let (records, fields) = ingest.commit().await?;
    Ok(response::created(state, headers, &records, fields, who))
}

/// A form without a file part stored nothing, which a 201 with an empty
/// list would hide (curl exits 0). The commonest cause is curl's `-F
/// file=photo.jpg` with the `@` forgotten, which sends the path as text:
/// the answer names that field.
fn no_file(fields: &[(String, String)]) -> ApiError {
    let looks_like_path = |v: &str| {
        v.len() <= 255 && v.contains('.') && !v.contains(char::is_whitespace) && !v.is_empty()
    };
    let hint = match fields.iter().find(|(_, v)| looks_like_path(v)) {
        Some((name, v)) => {
            format!("; field {name:?} holds the text {v:?}: did you mean -F {name}=@{v}?")
        }
        None => String::new(),
    };
    ApiError::new(
        Kind::Malformed,
        format!(
            "the form has no file part, so nothing was stored: send each file as a part \
             with a filename (curl -F name=@path; without the @ curl sends the path as \
             text){hint}"
        ),
    )
}

/// Runs one chunk through the parser, acting on each event.
async fn feed(
    parser: &mut Parser,
    input: &Bytes,
    last: bool,
    ingest: &mut Ingest,
    cur: &mut Current,
) -> Result<(), ApiError> {
    let mut off = 0;
    loop {
        let action = {
            let step = parser.step(&input[off..], last)?;
            off += step.consumed;
            match step.event {
                Event::PartStart(p) => Action::Start(PartInfo::from(&p)),
                Event::Data(d) => Action::Data(share(input, d)),
                Event::PartEnd => Action::End,
                Event::End => continue,
                Event::NeedMore => return Ok(()),
            }
        };
        match action {
            Action::Start(info) => *cur = start_part(ingest, info).await?,
            Action::Data(b) => data(ingest, cur, b)?,
            Action::End => end_part(ingest, std::mem::replace(cur, Current::None)).await?,
        }
    }
}

/// `d` as `Bytes` without a copy when it lies in `input`.
fn share(input: &Bytes, d: &[u8]) -> Bytes {
    let r = input.as_ptr_range();
    let inside = r.start <= d.as_ptr() && d.as_ptr_range().end <= r.end;
    if inside && !d.is_empty() {
        input.slice_ref(d)
    } else {
        Bytes::copy_from_slice(d)
    }
}

async fn start_part(ingest: &mut Ingest, info: PartInfo) -> Result<Current, ApiError> {
    match info.filename {
        Some(filename) => {
            let empty_name = filename.is_empty();
            let sink = ingest
                .begin_file(info.name, Some(filename), info.content_type.as_deref())
                .await?;
            Ok(Current::File {
                sink: Box::new(sink),
                empty_name,
            })
        }
        None => Ok(Current::Field {
            name: info.name.unwrap_or_default(),
            value: Vec::new(),
        }),
    }
}

fn data(ingest: &mut Ingest, cur: &mut Current, b: Bytes) -> Result<(), ApiError> {
    match cur {
        Current::File { sink, .. } => sink.push(b),
        Current::Field { value, .. } => {
            ingest.check_field_bytes(b.len())?;
            value.extend_from_slice(&b);
            Ok(())
        }
        Current::None => Err(ApiError::new(Kind::Malformed, "data outside a part")),
    }
}

async fn end_part(ingest: &mut Ingest, cur: Current) -> Result<(), ApiError> {
    match cur {
        // Dropping the sink removes its temp file.
        Current::File {
            sink,
            empty_name: true,
        } if sink.size() == 0 => Ok(()),
        Current::File { sink, .. } => ingest.finish_file(*sink).await,
        Current::Field { name, value } => ingest.add_field(name, value),
        Current::None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_slices_inside_and_copies_outside() {
        let input = Bytes::from_static(b"hello world");
        let s = share(&input, &input[6..]);
        assert_eq!(s, "world");
        assert_eq!(s.as_ptr(), input[6..].as_ptr());
        let other = b"carry".to_vec();
        let c = share(&input, &other);
        assert_eq!(c, "carry");
        assert_ne!(c.as_ptr(), other.as_ptr());
    }

    #[test]
    fn a_form_without_a_file_names_the_forgotten_at() {
        let e = no_file(&[("file".into(), "photo.jpg".into())]);
        assert_eq!(e.status(), 400);
        assert!(
            e.message.contains("did you mean -F file=@photo.jpg?"),
            "{e}"
        );
        let e = no_file(&[("title".into(), "my holiday".into())]);
        assert!(e.message.contains("-F name=@path"), "{e}");
        assert!(!e.message.contains("did you mean"), "{e}");
    }

    #[test]
    fn only_form_data_is_accepted() {
        let mut h = HeaderMap::new();
        assert_eq!(form_boundary(&h).unwrap_err().status(), 415);
        h.insert(
            http::header::CONTENT_TYPE,
            "application/json".parse().unwrap(),
        );
        assert_eq!(form_boundary(&h).unwrap_err().status(), 415);
        h.insert(
            http::header::CONTENT_TYPE,
            "multipart/related; boundary=x".parse().unwrap(),
        );
        assert_eq!(form_boundary(&h).unwrap_err().status(), 415);
        h.insert(
            http::header::CONTENT_TYPE,
            "multipart/form-data".parse().unwrap(),
        );
        assert_eq!(form_boundary(&h).unwrap_err().status(), 400);
        h.insert(
            http::header::CONTENT_TYPE,
            "multipart/form-data; boundary=x".parse().unwrap(),
        );
        assert_eq!(form_boundary(&h).unwrap(), "x");
    }
}
