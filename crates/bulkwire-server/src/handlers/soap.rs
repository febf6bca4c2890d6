//! `POST /soap`: the SOAP 1.1 and 1.2 service `urn:bulkwire:media`, whose
//! one operation `upload` stores a file; `GET /soap?wsdl` describes it.
//!
//! The request is document/literal wrapped (WS-I Basic Profile 1.1 §4.7):
//! the Body's child `{urn:bulkwire:media}upload` holds unqualified `name`,
//! optional `contentType` and `data` (`xs:base64Binary`). `data` is taken
//! as an MTOM/XOP attachment (SOAP MTOM §3, XOP 1.0 §3) or as inline base64
//! alike: `bulkwire_xop::Parser` streams either into the [`Staging`] sink
//! while it decodes, and after each slice of at most
//! [`staging::STAGE_INPUT`] body bytes the staged bytes go to storage
//! through [`FileSink`], so memory per upload does not grow with the file.
//! The answer is `uploadResponse` (`id`, `url`, `size`, `sha256`) in the
//! request's SOAP version; `url`, the item's link, only for a principal
//! with `read` (links are handed out to no one else).
//!
//! Errors are SOAP faults in the request's version (from its
//! `Content-Type`): `Client`/`Sender` for the client's errors, `Server`/
//! `Receiver` for the server's, with the detail `uploadFault` (`kind`,
//! `limit`, `value`). The HTTP status is the server's usual one — 400
//! malformed, 401 credentials (with `WWW-Authenticate: Basic`), 413 over a
//! limit, 415 not SOAP, 5xx for the server's side — rather than SOAP 1.1's
//! blanket 500: clients read the fault body either way (SOAP 1.2 Part 2
//! §7.5.2.2 itself answers a `Sender` fault with 400), and a proxy or a
//! log sees what happened. Credentials are HTTP Basic for a `--user` or a
//! Bearer token, as on `/v1`; the WSDL needs none. The `SOAPAction` header
//! and the SOAP 1.2 `action` parameter are not required.

mod staging;
pub mod xml;

use crate::admission::admit;
use crate::error::{ApiError, Kind};
use crate::metrics::Outcome;
use crate::principal::{Principal, Scopes};
use crate::response::{self, Response};
use crate::state::AppState;
use crate::upload::{
    check_declared_length, check_quota, declared_length, BodyReader, FileSink, Ingest,
};
use bulkwire_xop::{LimitKind, Message, Parser, Select, SoapVersion};
use bytes::Bytes;
use http::header::{HeaderValue, CONNECTION, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, Method, Request, StatusCode};
use hyper::body::Incoming;
use staging::{Op, Staging, STAGE_CAP, STAGE_INPUT};
use std::sync::{Arc, OnceLock};
pub use xml::{Uploaded, NS};

const FORMAT: &str = "soap";

/// Rendered paths of the selected elements (see `bulkwire_xop::Select`).
pub const DATA: &str = "/Envelope/Body/upload/data";
pub const NAME: &str = "/Envelope/Body/upload/name";
pub const CONTENT_TYPE_FIELD: &str = "/Envelope/Body/upload/contentType";

/// The stored file's form field name.
const FIELD: &str = "data";

/// Bytes of `bulkwire_xml::base64::Decoder`'s two blocks (64 KiB of text
/// staged, 48 KiB decoded).
const DECODER_BYTES: usize = 112 * 1024;

/// Memory a SOAP upload holds beyond the shared upload reserve: the
/// staging buffer, the base64 decoder, and the XML tokenizer's tag and
/// namespace buffers plus its element stack. (Text fields fit the shared
/// reserve's `fields_total_bytes`, see [`xop_limits`].)
fn extra_reserve(x: &bulkwire_xop::Limits) -> u64 {
    let xml = x.xml.tag_bytes + x.xml.namespace_bytes + x.xml.depth * 256;
    (STAGE_CAP + DECODER_BYTES + xml) as u64
}

/// The element selection, built once.
fn select() -> Arc<Select> {
    static SELECT: OnceLock<Arc<Select>> = OnceLock::new();
    SELECT
        .get_or_init(|| {
            let p = |c: &str| format!("/Envelope/Body/{{{NS}}}upload/{c}");
            let s = Select::new()
                .binary(&p("data"))
                .and_then(|s| s.text(&p("name")))
                .and_then(|s| s.text(&p("contentType")))
                .expect("fixed, valid paths");
            Arc::new(s)
        })
        .clone()
}

/// Everything under `/soap`.
pub async fn route(state: &Arc<AppState>, req: Request<Incoming>) -> Response {
    let m = req.method();
    let wsdl = req
        .uri()
        .query()
        .is_some_and(|q| q.eq_ignore_ascii_case("wsdl"));
    if (m == Method::GET || m == Method::HEAD) && wsdl {
        let addr = address(req.headers(), state);
        return response::text(StatusCode::OK, "text/xml; charset=utf-8", xml::wsdl(&addr));
    }
    if m == Method::POST {
        return upload(state, req).await;
    }
    let mut e = ApiError::method_not_allowed(m, "GET, HEAD, POST");
    e.message = format!("{}: POST a SOAP request, or GET /soap?wsdl", e.message);
    state.metrics.rejected(e.reason());
    let unread = !http_body::Body::is_end_stream(req.body());
    fault_response(SoapVersion::Soap11, &e, unread)
}

/// The WSDL's service address: this server's base URL (`public_url`, else
/// the request's `Host`, as every URL it hands out) and `/soap`.
fn address(h: &HeaderMap, state: &AppState) -> String {
    format!("{}/soap", crate::response::base_url(&state.config, h))
}

/// The SOAP version to answer a fault in, before the envelope is read: a
/// SOAP 1.2 media type anywhere in `Content-Type` (bare, or as MTOM's
/// `type`/`start-info`) means 1.2.
fn version_of(content_type: &str) -> SoapVersion {
    if content_type
        .to_ascii_lowercase()
        .contains("application/soap+xml")
    {
        SoapVersion::Soap12
    } else {
        SoapVersion::Soap11
    }
}

/// Handles the request; never fails (errors become faults).
pub async fn upload(state: &Arc<AppState>, req: Request<Incoming>) -> Response {
    let (parts, body) = req.into_parts();
    let ct = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let version = version_of(&ct);
    let mut reader = BodyReader::new(state, &parts, body);
    let auth = parts.headers.get(http::header::AUTHORIZATION);
    let allowed = state
        .auth
        .authenticate(
            &*state.meta,
            auth.map(|v| v.as_bytes()),
            crate::access::client(&parts.extensions),
        )
        .await
        .and_then(|who| who.require(Scopes::UPLOAD).map(|()| who));
    let who = match allowed {
        Ok(who) => who,
        Err(e) => {
            state.metrics.rejected(e.reason());
            return fault_response(version, &e, !reader.is_done());
        }
    };
    crate::access::set_principal(&parts.extensions, &who.name);
    let result = run(state, &ct, &parts.headers, &mut reader, &who).await;
    finish(state, version, &reader, result)
}

/// The files the binaries of one message went to, by binary index.
#[derive(Default)]
struct Files {
    open: Option<(usize, FileSink)>,
    done: Vec<(usize, FileSink)>,
}

impl Files {
    fn take(&mut self, index: usize) -> Option<FileSink> {
        let at = self.done.iter().position(|(i, _)| *i == index)?;
        Some(self.done.swap_remove(at).1)
    }
}

async fn run(
    state: &Arc<AppState>,
    ct: &str,
    headers: &HeaderMap,
    reader: &mut BodyReader,
    who: &Principal,
) -> Result<(SoapVersion, Uploaded), ApiError> {
    let limits = &state.config.limits;
    check_declared_length(headers, "body_bytes", limits.body_bytes)?;
    check_quota(state, who, declared_length(headers), 1).await?;
    let xop = xop_limits(limits);
    let _admission = admit(state, reader.progress(), extra_reserve(&xop)).await?;
    let staging = Staging::new(limits.soap_early_attachments);
    let mut parser = Parser::new(ct, select(), xop, staging).map_err(codec_error)?;
    let mut ingest = Ingest::new(state, who);
    let mut files = Files::default();
    loop {
        let chunk = reader.next().await?;
        let Some(input) = chunk else {
            let r = parser.feed(&[], true);
            r.map_err(|e| sink_error(e, parser.sink()))?;
            apply(&mut ingest, &mut files, parser.sink().drain()).await?;
            break;
        };
        for piece in input.chunks(STAGE_INPUT) {
            let r = parser.feed(piece, false);
            r.map_err(|e| sink_error(e, parser.sink()))?;
            apply(&mut ingest, &mut files, parser.sink().drain()).await?;
        }
    }
    record_peaks(state, &parser);
    let msg = parser.finish().map_err(codec_error)?;
    store(&msg, &mut ingest, &mut files).await?;
    let (records, _) = ingest.commit().await?;
    let r = records
        .first()
        .ok_or_else(|| ApiError::storage("no row committed"))?;
    let uploaded = Uploaded {
        id: r.id.clone(),
        url: who.gets_links().then(|| {
            let base = crate::response::base_url(&state.config, headers);
            format!("{base}{}", state.links.path(&r.id))
        }),
        size: r.size,
        sha256: r.sha256.clone(),
    };
    Ok((msg.version, uploaded))
}

fn record_peaks(state: &AppState, parser: &Parser<Staging>) {
    let staged = parser.sink().peak();
    state.metrics.staging_peak(staged);
    let mp = parser.multipart().map_or(0, |m| m.peak_buffered_bytes());
    state.metrics.parser_peak(mp);
}

/// Replays what the codec staged onto storage: opens, fills and closes
/// files, then writes what is queued, before more input is read.
async fn apply(
    ingest: &mut Ingest,
    files: &mut Files,
    (ops, bytes): (Vec<Op>, Bytes),
) -> Result<(), ApiError> {
    let stray = || ApiError::storage("the codec wrote outside a binary");
    for op in ops {
        match op {
            Op::Begin {
                index,
                content_type,
            } => {
                let ct = content_type.as_deref();
                let sink = ingest.begin_file(Some(FIELD.into()), None, ct).await?;
                files.open = Some((index, sink));
            }
            Op::Data(r) => files
                .open
                .as_mut()
                .ok_or_else(stray)?
                .1
                .push(bytes.slice(r))?,
            Op::Finish => {
                let (index, mut sink) = files.open.take().ok_or_else(stray)?;
                // Written out now: a finished binary waits in `done`
                // holding no batch and no write in flight.
                sink.write_all_and_wait().await?;
                files.done.push((index, sink));
            }
            // Dropping the sink removes its temp file.
            Op::Abort => files.open = None,
        }
    }
    if let Some((_, sink)) = &mut files.open {
        sink.flush().await?;
    }
    Ok(())
}

/// Checks the parsed message and commits the `data` file's blob; every
/// other binary (an attachment nothing referred to) is dropped.
async fn store(
    msg: &Message<usize>,
    ingest: &mut Ingest,
    files: &mut Files,
) -> Result<(), ApiError> {
    let bad = |m: String| ApiError::new(Kind::Malformed, m);
    match &msg.operation {
        Some(op) if op.ns.as_deref() == Some(NS) && op.local == "upload" => {}
        Some(op) => {
            let ns = op.ns.as_deref().unwrap_or("");
            return Err(bad(format!(
                "unknown operation {{{ns}}}{}; this service has {{{NS}}}upload",
                op.local
            )));
        }
        None => return Err(bad("the SOAP Body is empty".into())),
    }
    let mut data = msg
        .binaries
        .iter()
        .filter(|b| b.paths.iter().any(|p| p == DATA));
    let bin = data
        .next()
        .ok_or_else(|| bad("upload has no data element".into()))?;
    if data.next().is_some() {
        return Err(bad("upload has more than one data element".into()));
    }
    let mut sink = files
        .take(bin.output)
        .ok_or_else(|| ApiError::storage("the data binary has no file"))?;
    let name = msg.field(NAME).map(str::to_owned);
    ingest.describe_file(&mut sink, name, msg.field(CONTENT_TYPE_FIELD))?;
    ingest.finish_file(sink).await?;
    let dropped = std::mem::take(&mut files.done).len();
    if dropped > 0 {
        tracing::debug!(dropped, "unreferenced MTOM attachments discarded");
    }
    Ok(())
}

/// The codec's limits from the server's (DESIGN.md "Bounded memory").
pub fn xop_limits(l: &crate::Limits) -> bulkwire_xop::Limits {
    bulkwire_xop::Limits {
        envelope_bytes: l.soap_envelope_bytes,
        attachments: l.parts,
        includes: l.parts,
        inline_binaries: l.parts,
        // `name` and `contentType`, each at most `field_bytes`, together
        // within `fields_total_bytes` (held until the commit).
        text_bytes: usize::try_from(l.field_bytes.min(l.fields_total_bytes / 2))
            .unwrap_or(usize::MAX),
        fields: 2,
        multipart: l.multipart(),
        ..bulkwire_xop::Limits::default()
    }
}

/// The server's name for a codec limit: the [`crate::Limits`] field it
/// comes from (see [`xop_limits`]), else the codec's own name.
fn limit_name(l: LimitKind) -> &'static str {
    use bulkwire_multipart::LimitKind as Mp;
    match l {
        LimitKind::EnvelopeBytes => "soap_envelope_bytes",
        LimitKind::TextBytes => "field_bytes",
        // Fixed at 2 (`name`, `contentType`), not a server limit.
        LimitKind::Fields => "soap_text_fields",
        LimitKind::Attachments | LimitKind::Includes | LimitKind::InlineBinaries => "parts",
        LimitKind::Multipart(Mp::HeaderBytes) => "part_header_bytes",
        LimitKind::Multipart(Mp::Headers) => "part_headers",
        other => other.name(),
    }
}

/// Maps a codec error, or what the staging refused (`staging::Inner::admit`).
fn sink_error(e: bulkwire_xop::Error, staging: &Staging) -> ApiError {
    match staging.refusal() {
        Some(refused) => refused,
        None => codec_error(e),
    }
}

/// Maps a codec error: limit 413 naming the server limit, malformed or
/// truncated 400, not MTOM or SOAP 415, a failed sink 500.
fn codec_error(e: bulkwire_xop::Error) -> ApiError {
    use bulkwire_xop::ErrorKind as K;
    if let Some((l, v)) = e.limit_exceeded() {
        let mut a = ApiError::limit(limit_name(l), v);
        a.message = format!("{}: {e}", a.message);
        return a;
    }
    let kind = match e.kind() {
        K::Truncated => Kind::Truncated,
        K::Unsupported => Kind::Unsupported,
        K::Sink => Kind::Storage,
        _ => Kind::Malformed,
    };
    ApiError::new(kind, e.to_string())
}

/// Ends an upload: outcome metrics, and for an error the fault (as
/// `handlers::finish_upload` does for JSON), the connection's last when the
/// body was not read to its end.
fn finish(
    state: &Arc<AppState>,
    version: SoapVersion,
    reader: &BodyReader,
    result: Result<(SoapVersion, Uploaded), ApiError>,
) -> Response {
    let e = match result {
        Ok((v, u)) => {
            state.metrics.upload_done(FORMAT, Outcome::Ok);
            return response::text(StatusCode::OK, xml::content_type(v), xml::response(v, &u));
        }
        Err(e) => e,
    };
    let outcome = match e.kind {
        Kind::Aborted => Outcome::Aborted,
        Kind::Storage | Kind::StorageFull | Kind::Unavailable => Outcome::Failed,
        _ => Outcome::Rejected,
    };
    state.metrics.upload_done(FORMAT, outcome);
    if outcome == Outcome::Rejected {
        state.metrics.rejected(e.reason());
    }
    if outcome == Outcome::Failed {
        tracing::warn!(error = %e, "SOAP upload failed");
    }
    fault_response(version, &e, !reader.is_done())
}

/// A fault with the error's HTTP status and headers.
fn fault_response(v: SoapVersion, e: &ApiError, close: bool) -> Response {
    let mut r = response::text(e.status(), xml::content_type(v), xml::fault(v, e));
    let h = r.headers_mut();
    if let Some(allow) = e.allow {
        h.insert(http::header::ALLOW, HeaderValue::from_static(allow));
    }
    match e.kind {
        Kind::Busy => {
            h.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        Kind::Unauthorized => {
            h.insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"bulkwire\", Bearer realm=\"bulkwire\""),
            );
        }
        _ => {}
    }
    if close {
        h.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_from_content_type() {
        assert_eq!(version_of("text/xml; charset=utf-8"), SoapVersion::Soap11);
        assert_eq!(version_of("Application/SOAP+xml"), SoapVersion::Soap12);
        let mtom12 = "multipart/related; type=\"application/xop+xml\"; \
                      start-info=\"application/soap+xml\"; boundary=b";
        assert_eq!(version_of(mtom12), SoapVersion::Soap12);
        assert_eq!(version_of(""), SoapVersion::Soap11);
    }

    #[test]
    fn codec_limits_follow_server_limits_and_keep_their_names() {
        let l = crate::Limits {
            soap_envelope_bytes: 9,
            field_bytes: 7,
            ..crate::Limits::default()
        };
        let x = xop_limits(&l);
        assert_eq!((x.envelope_bytes, x.text_bytes), (9, 7));
        assert_eq!(limit_name(LimitKind::EnvelopeBytes), "soap_envelope_bytes");
        assert_eq!(limit_name(LimitKind::TextBytes), "field_bytes");
        // As the book says (docs/src/soap.md): 220 KiB with the default XML limits.
        let d = xop_limits(&crate::Limits::default());
        assert_eq!(extra_reserve(&d), 220 * 1024);
        assert_eq!((d.fields, d.text_bytes), (2, 64 * 1024));
        let mut p = Parser::new("text/xml", select(), x, Staging::new(4)).unwrap();
        let e = codec_error(
            p.feed(b"<soap:Envelope xmlns:soap=\"x\">", true)
                .unwrap_err(),
        );
        assert_eq!(e.status(), 413);
        assert_eq!(e.limit, Some(("soap_envelope_bytes", 9)));
    }

    #[test]
    fn codec_errors_map_to_statuses() {
        let e = Parser::new(
            "application/json",
            select(),
            xop_limits(&crate::Limits::default()),
            Staging::new(4),
        )
        .err()
        .map(codec_error)
        .unwrap();
        assert_eq!(e.status(), 415);
        let mut p = Parser::new(
            "text/xml",
            select(),
            xop_limits(&crate::Limits::default()),
            Staging::new(4),
        )
        .unwrap();
        let e = codec_error(p.feed(b"<notsoap/>", true).unwrap_err());
        assert_eq!(e.status(), 400);
    }
}
