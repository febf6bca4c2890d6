//! `POST /xmlrpc` (alias `/xmlrpc.php`): the WordPress XML-RPC media API
//! (<http://xmlrpc.com/spec.md>; WordPress `wp_xmlrpc_server`), so that
//! WordPress clients upload here unchanged.
//!
//! Methods: `wp.uploadFile` and `metaWeblog.newMediaObject`
//! (`blog_id, username, password, {name, type, bits, overwrite}` → the
//! media struct with `id`, `file`, `url`, `type`), `wp.getMediaItem`,
//! `wp.getMediaLibrary`, `mt.supportedMethods`, `system.listMethods`,
//! `system.methodHelp`, `system.methodSignature`, `system.multicall`; see
//! [`methods`].
//!
//! Streaming: the body goes through the sans-IO [`bulkwire_xmlrpc::Parser`]
//! in slices of [`FEED_SLICE`] bytes. The one `base64` value accepted,
//! params\[3\].bits of an upload, is decoded into the [`Staging`] sink and
//! after each slice the staged bytes go to a [`FileSink`], so memory per
//! upload does not grow with the file (WordPress's IXR parser needed
//! 2.5 GB for a 200 MB upload). Credentials come before the struct: they
//! are checked as soon as the password param is complete, and only then does
//! the call take an upload slot and its memory reservation and open the
//! file: a bad login never holds either, nor writes a byte. Until then the
//! call may read at most `preauth_bytes` of body (a call that uploads
//! nothing is read whole within them), and the body's minimum rate applies
//! from the first byte, so strangers cannot lock users out by trickling
//! calls that never reach a password.
//!
//! Errors are XML-RPC faults over HTTP 200, with WordPress's codes: 403
//! bad login, -32601 unknown method, -32700 not well-formed, -32600 not a
//! `methodCall`, -32602 invalid params, 404 no such media, 500 storage or
//! a limit (body, file, codec; the message names the limit), -32300 the
//! body stalled or broke. Only a saturated server answers HTTP 503 (with
//! `Retry-After` and a fault body): that is the transport's business.

pub mod methods;

use crate::admission::{admit, Admission, Progress};
use crate::conns::{ConnHandle, Unauthenticated};
use crate::error::{ApiError, Kind};
use crate::metrics::Outcome;
use crate::principal::Scopes;
use crate::response::{self, Response};
use crate::state::AppState;
use crate::upload::{check_declared_length, BodyReader, FileSink, Ingest};
use bulkwire_xmlrpc::{
    encode_fault, encode_response, Base64Sink, EncodeOptions, ErrorKind, Fault, LimitKind, Parser,
    PathSeg, Value, ValuePath,
};
use bytes::{Bytes, BytesMut};
use http::header::{HeaderValue, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Request, StatusCode};
use hyper::body::Incoming;
use methods::{Ctx, In, Info, Out};
pub use methods::{Methods, BAD_LOGIN};
use std::sync::Arc;

const FORMAT: &str = "xmlrpc";

/// Body bytes fed to the parser between two flushes of the staging.
pub const FEED_SLICE: usize = 64 * 1024;

/// Most decoded bytes staged between two flushes. One slice decodes to at
/// most 3/4 of itself plus the codec's staged block (64 KiB of text →
/// 48 KiB), so 96 KiB; the rest is margin. Reaching it is a bug, reported
/// as the limit `xmlrpc_staging`.
pub const STAGING_CAP: usize = 160 * 1024;

/// Memory an XML-RPC request holds beyond the shared upload reserve: the
/// staging, the codec's base64 blocks (64 KiB lines stage, 112 KiB
/// decoder) and the value tree's nodes (at most
/// [`crate::config::XMLRPC_ELEMENTS`], about 64 bytes each).
const EXTRA_RESERVE: u64 = (STAGING_CAP + 176 * 1024) as u64 + crate::config::XMLRPC_ELEMENTS * 64;

/// Why a call failed: a fault chosen by a method, or a server error that
/// becomes one.
#[derive(Debug)]
pub enum Failure {
    Fault(Fault),
    Api(ApiError),
}

impl From<Fault> for Failure {
    fn from(f: Fault) -> Self {
        Failure::Fault(f)
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Failure::Api(e)
    }
}

impl Failure {
    /// The fault the client gets.
    pub fn fault(&self) -> Fault {
        match self {
            Failure::Fault(f) => f.clone(),
            Failure::Api(e) => api_fault(e),
        }
    }

    fn outcome(&self) -> Outcome {
        match self {
            Failure::Api(e) if e.kind == Kind::Aborted => Outcome::Aborted,
            Failure::Api(e)
                if matches!(
                    e.kind,
                    Kind::Storage | Kind::StorageFull | Kind::Unavailable
                ) =>
            {
                Outcome::Failed
            }
            _ => Outcome::Rejected,
        }
    }

    fn reason(&self) -> String {
        match self {
            Failure::Fault(f) => format!("xmlrpc_fault:{}", f.code),
            Failure::Api(e) => e.reason(),
        }
    }
}

fn api_fault(e: &ApiError) -> Fault {
    let code = match e.kind {
        Kind::Malformed | Kind::Truncated | Kind::Unsupported => Fault::PARSE_ERROR,
        Kind::Unauthorized => Fault::FORBIDDEN,
        Kind::NotFound => 404,
        Kind::Timeout | Kind::Aborted => -32300,
        Kind::Busy | Kind::Unavailable => 503,
        Kind::TooMany => 429,
        _ => Fault::SERVER_ERROR,
    };
    Fault::new(code, e.message.clone())
}

/// The server's name for a codec limit: the form-field limits it is
/// derived from where there is one ([`crate::Limits::xmlrpc`]).
fn limit_name(k: LimitKind) -> &'static str {
    match k {
        LimitKind::StringBytes => "field_bytes",
        LimitKind::TreeBytes => "fields_total_bytes",
        other => other.name(),
    }
}

/// A codec error: what the staging refused, a limit, or a parse error.
fn codec_failure(e: bulkwire_xmlrpc::Error, refusal: Option<Failure>) -> Failure {
    if let (ErrorKind::Sink, Some(f)) = (e.kind(), refusal) {
        return f;
    }
    if let Some((k, v)) = e.limit_exceeded() {
        let mut a = ApiError::limit(limit_name(k), v);
        a.message = format!("{}: {e}", a.message);
        return a.into();
    }
    Fault::new(
        Fault::PARSE_ERROR,
        format!("parse error. not well formed: {e}"),
    )
    .into()
}

/// The decoded bytes of the upload's `bits`, between the codec's
/// synchronous sink calls and the asynchronous [`FileSink`].
#[derive(Debug)]
pub struct Staging {
    buf: BytesMut,
    /// `base64` values begun (at most one is accepted).
    values: u32,
    len: u64,
    peak: usize,
    /// Why the sink failed, for [`codec_failure`].
    refusal: Option<Failure>,
}

impl Staging {
    fn new() -> Staging {
        Staging {
            buf: BytesMut::new(),
            values: 0,
            len: 0,
            peak: 0,
            refusal: None,
        }
    }

    fn refuse(&mut self, f: Failure, why: &'static str) -> SinkError {
        self.refusal = Some(f);
        SinkError(why)
    }
}

#[derive(Debug)]
pub struct SinkError(&'static str);

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for SinkError {}

/// params\[3\].bits, the one place a `base64` value is taken.
fn is_bits(path: &ValuePath) -> bool {
    matches!(path.segments(), [PathSeg::Param(3), PathSeg::Member(m)] if m == "bits")
}

impl Base64Sink for Staging {
    type Output = u64;
    type Error = SinkError;

    fn begin(&mut self, path: &ValuePath) -> Result<(), SinkError> {
        if !is_bits(path) || self.values > 0 {
            let f = methods::invalid_params(&format!(
                "base64 at {path}: the only base64 value accepted is params[3].bits of an upload"
            ));
            return Err(self.refuse(f.into(), "base64 value refused"));
        }
        self.values += 1;
        self.buf.reserve(STAGING_CAP);
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), SinkError> {
        if self.buf.len() + bytes.len() > STAGING_CAP {
            let e = ApiError::limit("xmlrpc_staging", STAGING_CAP as u64);
            return Err(self.refuse(e.into(), "staging full"));
        }
        self.buf.extend_from_slice(bytes);
        self.len += bytes.len() as u64;
        self.peak = self.peak.max(self.buf.len());
        Ok(())
    }

    fn finish(&mut self) -> Result<u64, SinkError> {
        Ok(self.len)
    }

    fn abort(&mut self) {
        self.buf.clear();
    }
}

/// Handles the request; never fails (errors become faults). `conn` is the
/// connection's place in the budget, made sheddable until the login passed
/// (none when embedded without one).
pub async fn call(
    state: &Arc<AppState>,
    req: Request<Incoming>,
    conn: Option<&Arc<ConnHandle>>,
) -> Response {
    let (parts, body) = req.into_parts();
    let base = crate::response::base_url(&state.config, &parts.headers);
    let mut reader = BodyReader::new(state, &parts, body);
    let ctx = Ctx {
        state,
        base: &base,
        client: crate::access::client(&parts.extensions),
        extensions: &parts.extensions,
    };
    // Until its login is checked, the call holds nothing worth keeping its
    // connection for at the connection cap (see `crate::conns`).
    let unauthenticated = conn.map(|c| c.unauthenticated());
    let mut call = Call {
        ctx,
        unauthenticated,
        method: None,
        logged_in: false,
        admitted: None,
        progress: reader.progress().clone(),
        fed: 0,
        ingest: None,
        file: None,
    };
    let result = call.run(&parts.headers, &mut reader).await;
    let upload = call.method.is_some_and(Info::is_upload);
    // The slot and the memory go back before the answer is sent.
    drop(call);
    finish(state, upload, &reader, result)
}

/// One request in progress.
struct Call<'a> {
    ctx: Ctx<'a>,
    /// Held until the login passed (the connection is sheddable meanwhile).
    unauthenticated: Option<Unauthenticated>,
    method: Option<&'static Info>,
    logged_in: bool,
    /// The upload slot and memory, taken once the login passed.
    admitted: Option<Admission>,
    /// The body's progress, which admission may preempt.
    progress: Arc<Progress>,
    /// Body bytes fed to the parser.
    fed: u64,
    /// The upload, once the login named its owner.
    ingest: Option<Ingest>,
    file: Option<FileSink>,
}

impl Call<'_> {
    async fn run(&mut self, h: &HeaderMap, reader: &mut BodyReader) -> Result<Out, Failure> {
        let state = self.ctx.state;
        let limits = &state.config.limits;
        check_declared_length(h, "body_bytes", limits.body_bytes)?;
        // Nothing is admitted yet: until `gate` has checked the login, the
        // call may not read more than `preauth_bytes` (see `slice_len`).
        let mut parser = Parser::new(limits.xmlrpc(), Staging::new());
        let r = self.read(reader, &mut parser).await;
        state.metrics.parser_peak(parser.peak_buffered_bytes());
        state.metrics.staging_peak(parser.sink().peak);
        r?;
        let msg = match parser.finish() {
            Ok((msg, _staging)) => msg,
            Err(e) => return Err(codec_failure(e, None)),
        };
        let Some(call) = msg.into_call() else {
            return Err(Fault::new(
                -32600,
                "server error. invalid xml-rpc. not conforming to spec. Request must be a methodCall",
            )
            .into());
        };
        let info = self
            .method
            .ok_or_else(|| methods::no_method(&call.method))?;
        if info.is_upload() {
            return self.upload(&call.params).await;
        }
        methods::dispatch(&self.ctx, info, &call.params).await
    }

    /// Feeds the whole body, slice by slice, acting after each.
    async fn read(
        &mut self,
        reader: &mut BodyReader,
        parser: &mut Parser<Staging>,
    ) -> Result<(), Failure> {
        loop {
            let chunk = reader.next().await?;
            let Some(chunk) = chunk else {
                return self.feed(parser, Bytes::new(), true).await;
            };
            let mut off = 0;
            while off < chunk.len() {
                let end = (off + self.slice_len()?).min(chunk.len());
                self.fed += (end - off) as u64;
                self.feed(parser, chunk.slice(off..end), false).await?;
                off = end;
            }
        }
    }

    /// How much body to feed next: a slice once admitted; before, what is
    /// left of `preauth_bytes` (an error when nothing is).
    fn slice_len(&self) -> Result<usize, Failure> {
        if self.admitted.is_some() {
            return Ok(FEED_SLICE);
        }
        let pre = self.ctx.state.config.limits.preauth_bytes;
        match pre.saturating_sub(self.fed) {
            0 => {
                let mut e = ApiError::limit("preauth_bytes", pre);
                e.message = format!(
                    "{}: an upload must give its username and password within the first \
                     {pre} bytes, and a call that uploads nothing must fit in them",
                    e.message
                );
                Err(e.into())
            }
            left => Ok(left.min(FEED_SLICE as u64) as usize),
        }
    }

    /// Takes the upload slot and memory (the shared reserve plus
    /// [`EXTRA_RESERVE`]), once the login passed.
    async fn admit(&mut self) -> Result<(), Failure> {
        let a = admit(self.ctx.state, &self.progress, EXTRA_RESERVE).await?;
        self.admitted = Some(a);
        Ok(())
    }

    async fn feed(
        &mut self,
        parser: &mut Parser<Staging>,
        input: Bytes,
        last: bool,
    ) -> Result<(), Failure> {
        if let Err(e) = parser.feed(&input, last) {
            return Err(codec_failure(e, parser.sink_mut().refusal.take()));
        }
        if self.gate(parser).await? {
            self.admit().await?;
        }
        self.store(parser.sink_mut()).await
    }

    /// As soon as they are known: the method must exist, and an upload's
    /// credentials must be right (before its bits reach storage). True when
    /// the login has just passed: the upload is to be admitted.
    async fn gate(&mut self, parser: &Parser<Staging>) -> Result<bool, Failure> {
        if self.method.is_none() {
            if let Some(name) = parser.method_name() {
                let info = self.ctx.state.xmlrpc.get(name);
                self.method = Some(info.ok_or_else(|| methods::no_method(name))?);
            }
        }
        let upload = self.method.is_some_and(Info::is_upload);
        if upload && !self.logged_in && parser.params().len() >= 3 {
            let who = methods::login(&self.ctx, parser.params(), Scopes::UPLOAD).await?;
            // The call's length is its base64 and XML, not the file's: only
            // the items can be checked before the bits (the commit checks
            // both exactly).
            crate::upload::check_quota(self.ctx.state, &who, None, 1).await?;
            self.ingest = Some(Ingest::new(self.ctx.state, &who));
            self.logged_in = true;
            self.unauthenticated = None;
            return Ok(true);
        }
        if parser.sink().values > 0 && !(upload && self.logged_in) {
            // Unreachable for an upload (its params 0–2 end before
            // params[3] starts); another method's params[3].bits.
            let f = methods::invalid_params("a base64 value is accepted only in an upload");
            return Err(f.into());
        }
        Ok(false)
    }

    /// Moves what the slice decoded to the file, opened at the first byte.
    async fn store(&mut self, staging: &mut Staging) -> Result<(), Failure> {
        if staging.values == 0 {
            return Ok(());
        }
        if self.file.is_none() {
            let ingest = self.ingest.as_mut().ok_or_else(not_logged_in)?;
            let f = ingest.begin_file(Some("bits".into()), None, None).await?;
            self.file = Some(f);
        }
        if staging.buf.is_empty() {
            return Ok(());
        }
        let file = self.file.as_mut().expect("opened above");
        // The slice's bytes join the file's write batch (no copy, unless
        // the sink gathers into aligned batches); the staging allocates
        // afresh once the batch still holds its buffer.
        file.push(staging.buf.split().freeze())?;
        file.flush().await?;
        Ok(())
    }

    /// `wp.uploadFile` / `metaWeblog.newMediaObject` after the body: the
    /// bits are in the file already; name it and commit.
    async fn upload(&mut self, params: &[In]) -> Result<Out, Failure> {
        let bad = |d: &str| Failure::from(methods::invalid_params(d));
        if params.len() != 4 {
            return Err(bad("blog_id, username, password and a data struct"));
        }
        // Checked in `gate` before the bits; again here so that the commit
        // never depends on that ordering alone.
        let who = methods::login(&self.ctx, params, Scopes::UPLOAD).await?;
        let data = &params[3];
        let name = data.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            return Err(bad("data.name must be a non-empty string"));
        }
        let Some(Value::Base64(_)) = data.get("bits") else {
            return Err(bad("data.bits must be base64"));
        };
        let ct = match data.get("type") {
            None => None,
            Some(Value::String(t)) => Some(t.as_str()),
            Some(_) => return Err(bad("data.type must be a string")),
        };
        let mut file = self.file.take().ok_or_else(|| bad("data.bits missing"))?;
        let mut ingest = self.ingest.take().ok_or_else(not_logged_in)?;
        ingest.describe_file(&mut file, Some(name.to_string()), ct)?;
        ingest.finish_file(file).await?;
        let (records, _) = ingest.commit().await?;
        let m = records.first().ok_or_else(|| ApiError::storage("no row"))?;
        Ok(methods::media_struct(
            m,
            self.ctx.base,
            &self.ctx.state.links,
            who.gets_links(),
        ))
    }
}

/// Bits before the login passed: `gate` refuses them first, so this is a
/// guard, not a path.
fn not_logged_in() -> Failure {
    methods::invalid_params("a base64 value is accepted only after the login").into()
}

/// `http://host` when the `Host` header is a plain host\[:port\].
/// Metrics and the response; after a failure before the body's end, the
/// connection's last (its lingering close lets a client that sends first
/// read the fault).
fn finish(
    state: &Arc<AppState>,
    upload: bool,
    reader: &BodyReader,
    result: Result<Out, Failure>,
) -> Response {
    let f = match result {
        Ok(v) => {
            if upload {
                state.metrics.upload_done(FORMAT, Outcome::Ok);
            }
            return match render(&v) {
                Ok(body) => xml(StatusCode::OK, body, false),
                Err(e) => fault_response(&Fault::new(500, e), false, false),
            };
        }
        Err(f) => f,
    };
    let outcome = f.outcome();
    if upload {
        state.metrics.upload_done(FORMAT, outcome);
    }
    if outcome == Outcome::Rejected {
        state.metrics.rejected(f.reason());
    }
    let api_kind = match &f {
        Failure::Api(e) => Some(e.kind),
        Failure::Fault(_) => None,
    };
    if outcome == Outcome::Failed {
        tracing::warn!(error = ?f, "xml-rpc upload failed");
    }
    let retry = match &f {
        Failure::Api(e) if e.kind == Kind::TooMany => e.retry_after,
        _ => None,
    };
    let r = fault_response(&f.fault(), api_kind == Some(Kind::Busy), !reader.is_done());
    throttled(r, retry)
}

/// A throttled login (`crate::throttle`) is HTTP 429 with `Retry-After`,
/// its body still the fault, so that a client that reads only faults has
/// the message too.
fn throttled(mut r: Response, retry: Option<u64>) -> Response {
    if let Some(s) = retry {
        *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

/// A result as a `methodResponse` body.
fn render(v: &Out) -> Result<Vec<u8>, String> {
    let e = encode_response(v, &EncodeOptions::default()).map_err(|e| e.to_string())?;
    e.to_vec().map_err(|e| e.to_string())
}

fn fault_response(f: &Fault, busy: bool, close: bool) -> Response {
    let status = if busy {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let mut r = xml(status, encode_fault(f), close);
    if busy {
        r.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

fn xml(status: StatusCode, body: Vec<u8>, close: bool) -> Response {
    let mut r = Response::new(response::full(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/xml; charset=UTF-8"),
    );
    if close {
        h.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(segs: Vec<PathSeg>) -> ValuePath {
        ValuePath(segs)
    }

    #[test]
    fn staging_takes_one_bits_value_and_caps_itself() {
        let mut s = Staging::new();
        let bad = path(vec![PathSeg::Param(2)]);
        assert!(s.begin(&bad).is_err());
        assert!(matches!(s.refusal.take(), Some(Failure::Fault(f)) if f.code == -32602));
        let bits = path(vec![PathSeg::Param(3), PathSeg::Member("bits".into())]);
        s.begin(&bits).unwrap();
        s.write(b"abc").unwrap();
        assert_eq!(s.finish().unwrap(), 3);
        assert!(s.begin(&bits).is_err(), "a second value");
        s.refusal = None;
        let big = vec![0u8; STAGING_CAP];
        assert!(s.write(&big).is_err());
        let Some(Failure::Api(e)) = s.refusal.take() else {
            panic!("a limit")
        };
        assert_eq!(e.limit, Some(("xmlrpc_staging", STAGING_CAP as u64)));
        assert_eq!(s.peak, 3);
    }

    #[test]
    fn api_errors_map_to_wordpress_fault_codes() {
        let f = Failure::from(ApiError::limit("body_bytes", 9)).fault();
        assert_eq!(f.code, 500);
        assert!(f.string.contains("body_bytes = 9"), "{}", f.string);
        let f = Failure::from(ApiError::new(Kind::Malformed, "x")).fault();
        assert_eq!(f.code, -32700);
        let f = Failure::from(ApiError::storage("disk")).fault();
        assert_eq!(f.code, 500);
        assert_eq!(
            Failure::from(ApiError::storage("disk")).outcome(),
            Outcome::Failed
        );
        assert_eq!(limit_name(LimitKind::StringBytes), "field_bytes");
        assert_eq!(limit_name(LimitKind::Depth), "depth");
    }
}
