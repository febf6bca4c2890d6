//! Resumable uploads at `/v1/uploads`: tus 1.0.0 with the extensions
//! creation, creation-with-upload, creation-defer-length, termination,
//! expiration, checksum (sha1, sha256) and concatenation
//! (<https://tus.io/protocols/resumable-upload>), and the IETF draft
//! "Resumable Uploads for HTTP" (draft-ietf-httpbis-resumable-upload) in
//! interop versions 5 (-03/-04) and 6 (-05), on the same URLs.
//!
//! | request | answer |
//! |---|---|
//! | `OPTIONS /v1/uploads` | capabilities (no credentials needed) |
//! | `POST /v1/uploads` | 201 `Location`: a new upload, maybe with its first bytes |
//! | `HEAD /v1/uploads/{id}` | its durable offset (tus 200, IETF 204) |
//! | `PATCH /v1/uploads/{id}` | appends at `Upload-Offset` (204) |
//! | `DELETE /v1/uploads/{id}` | terminates it (204) |
//!
//! A finished upload is an ordinary media item with the same id
//! (`/v1/media/{id}`). Its state lives in the metadata store, so any node
//! continues any upload (`state.rs`; on the single-node embedded store the
//! newest durable point may be a note on the spool file until its row
//! catches up, see `load_state`); one writer at a time (`lock.rs`);
//! durable offsets only (`append.rs`).

mod append;
mod hash;
mod lock;
mod proto;
mod state;

pub use lock::Writers;

use self::append::{complete_saved, Append, Want};
use self::proto::{Concat, Proto};
use self::state::{gone, ConcatState, UploadState};
use crate::admission::admit;
use crate::error::{ApiError, Kind};
use crate::principal::{Principal, Scopes};
use crate::response::{self, empty, Response};
use crate::state::AppState;
use crate::store::{is_id, new_id, UploadRow};
use crate::upload::{storage_error, BodyReader, Ingest};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, StatusCode};
use hyper::body::Incoming;
use std::sync::Arc;

const FORMAT: &str = "tus";
const EXTENSIONS: &str = "creation,creation-with-upload,creation-defer-length,termination,\
                          expiration,checksum,concatenation";

/// Everything under `/v1/uploads`; `rest` is what follows it.
pub async fn route(state: &Arc<AppState>, req: Request<Incoming>, rest: &str) -> Response {
    let proto = proto::proto(req.headers(), req.method() == Method::OPTIONS);
    if req.method() == Method::OPTIONS {
        return decorate(options(state), proto.unwrap_or(Proto::Tus), None);
    }
    let auth = req.headers().get(http::header::AUTHORIZATION);
    let auth = auth.map(|v| v.as_bytes().to_vec());
    let client = crate::access::client(req.extensions());
    let who = match state
        .auth
        .authenticate(&*state.meta, auth.as_deref(), client)
        .await
        .and_then(|who| who.require(Scopes::UPLOAD).map(|()| who))
    {
        Ok(o) => o,
        Err(e) => return reject(state, req, e, Proto::Tus),
    };
    crate::access::set_principal(req.extensions(), &who.name);
    let proto = match proto {
        Ok(p) => p,
        Err(e) => return reject(state, req, e, Proto::Tus),
    };
    let id = rest.strip_prefix('/').unwrap_or("").to_string();
    let m = req.method().clone();
    // Another owner's upload is answered as a missing one, on every method.
    let on_upload = matches!(m, Method::HEAD | Method::PATCH | Method::DELETE);
    if !id.is_empty() && on_upload {
        if let Err(e) = check_owner(state, &id, &who).await {
            return reject(state, req, e, proto);
        }
    }
    match (m, id.is_empty()) {
        (Method::POST, true) => create(state, req, proto, &who).await,
        (Method::HEAD, false) => {
            let r = head(state, &id, proto, req.headers(), &who).await;
            answer(state, r, proto)
        }
        (Method::PATCH, false) => patch(state, req, &id, proto, who.gets_links()).await,
        (Method::DELETE, false) => answer(state, terminate(state, &id, &who).await, proto),
        (m, collection) => {
            let allow = match collection {
                true => "POST, OPTIONS",
                false => "HEAD, PATCH, DELETE, OPTIONS",
            };
            let e = ApiError::method_not_allowed(&m, allow);
            reject(state, req, e, proto)
        }
    }
}

/// 404 unless upload `id` (or, once its row is gone, the item it became)
/// is `who`'s, or `who` reaches every owner's: the upload's owner never
/// changes, so one read before the request's work is enough. tusd leaves
/// this to a hook (tus/tusd#669); here every request of an upload checks
/// it.
async fn check_owner(state: &AppState, id: &str, who: &Principal) -> Result<(), ApiError> {
    if !is_id(id) {
        return Err(not_found(id));
    }
    if who.everyone {
        return Ok(());
    }
    match state.meta.upload_get(id).await? {
        Some(row) if who.sees(&row.owner) => Ok(()),
        Some(_) => Err(not_found(id)),
        None => match state.meta.get(id, who.owner()).await? {
            Some(_) => Ok(()),
            None => Err(not_found(id)),
        },
    }
}

/// Seconds since the epoch.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A new expiry for an upload touched now.
pub(crate) fn expires(state: &AppState) -> i64 {
    now().saturating_add(state.config.limits.upload_expiry_s as i64)
}

fn set(r: &mut Response, name: &'static str, value: impl ToString) {
    if let Ok(v) = HeaderValue::try_from(value.to_string()) {
        r.headers_mut().insert(HeaderName::from_static(name), v);
    }
}

/// The headers every answer of the protocol carries.
fn decorate(mut r: Response, proto: Proto, offset: Option<u64>) -> Response {
    if proto == Proto::Tus {
        set(&mut r, "tus-resumable", "1.0.0");
    }
    if let Some(o) = offset {
        set(&mut r, "upload-offset", o);
    }
    r
}

fn answer(state: &Arc<AppState>, r: Result<Response, ApiError>, proto: Proto) -> Response {
    let r = r.unwrap_or_else(|e| {
        state.metrics.rejected(e.reason());
        response::error(&e, false)
    });
    decorate(r, proto, None)
}

/// An error before the body was touched (see `handlers::reject`). A
/// version the server does not speak is answered with the one it does
/// (tus core: 412 "MUST include the Tus-Version header").
fn reject(state: &Arc<AppState>, req: Request<Incoming>, e: ApiError, proto: Proto) -> Response {
    state.metrics.rejected(e.reason());
    let unread = !http_body::Body::is_end_stream(req.body());
    let mut r = decorate(response::error(&e, unread), proto, None);
    if e.kind == Kind::Precondition {
        set(&mut r, "tus-version", "1.0.0");
        set(&mut r, "upload-draft-interop-version", "6");
    }
    r
}

fn no_content() -> Response {
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}

/// `OPTIONS`: what this server speaks (tus core "OPTIONS", IETF
/// `Upload-Limit`).
fn options(state: &AppState) -> Response {
    let max = state.config.limits.file_bytes;
    let mut r = no_content();
    set(&mut r, "tus-version", "1.0.0");
    set(&mut r, "tus-extension", EXTENSIONS);
    set(&mut r, "tus-max-size", max);
    set(&mut r, "tus-checksum-algorithm", proto::ALGS);
    set(&mut r, "upload-limit", format!("max-size={max}"));
    r
}

/// The absolute URL of upload `id` (`public_url`, else the request's `Host`).
fn location(state: &AppState, h: &HeaderMap, id: &str) -> String {
    format!("{}/v1/uploads/{id}", response::base_url(&state.config, h))
}

/// `Link` to a finished upload's media (same id): its link (`crate::links`),
/// which works without credentials, as every `url` the server hands out,
/// and as every one only to a principal that gets links (`readable`:
/// [`Principal::gets_links`]).
fn set_link(r: &mut Response, state: &AppState, h: &HeaderMap, id: &str, readable: bool) {
    if readable {
        let base = response::base_url(&state.config, h);
        let link = format!("<{base}{}>; rel=\"related\"", state.links.path(id));
        set(r, "link", link);
    }
}

/// What a creation request declares.
struct Creation {
    length: Option<u64>,
    metadata: Option<String>,
    filename: Option<String>,
    filetype: Option<String>,
    concat: Option<Concat>,
    /// The body carries the first bytes.
    with_body: bool,
    /// IETF `Upload-Complete: ?1`: the body is the whole upload.
    complete: bool,
}

fn parse_creation(state: &AppState, h: &HeaderMap, proto: Proto) -> Result<Creation, ApiError> {
    let l = &state.config.limits;
    let metadata = proto::text(h, "upload-metadata")?.map(str::to_string);
    let pairs = match &metadata {
        Some(m) => proto::metadata(m, l.upload_metadata_bytes)?,
        None => Vec::new(),
    };
    let utf8 = |k: &str| -> Result<Option<String>, ApiError> {
        match pairs
            .iter()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| v.clone())
        {
            None => Ok(None),
            Some(v) => String::from_utf8(v).map(Some).map_err(|_| {
                ApiError::new(Kind::Malformed, format!("Upload-Metadata: {k}: not UTF-8"))
            }),
        }
    };
    let (filename, filetype) = (utf8("filename")?, utf8("filetype")?);
    if filename
        .as_ref()
        .is_some_and(|f| f.len() > l.filename_bytes)
    {
        return Err(ApiError::limit("filename_bytes", l.filename_bytes as u64));
    }
    let concat = proto::text(h, "upload-concat")?
        .map(|v| proto::concat(v, l.concat_uploads))
        .transpose()?;
    let length = proto::number(h, "upload-length")?;
    let defer = proto::text(h, "upload-defer-length")?;
    let ct = proto::text(h, "content-type")?;
    let (with_body, complete) = match proto {
        Proto::Tus => {
            let is_final = matches!(concat, Some(Concat::Final(_)));
            match (length, defer) {
                (Some(_), None) | (None, Some("1")) => {}
                (None, None) if is_final => {}
                _ => {
                    let m = "send either Upload-Length or Upload-Defer-Length: 1";
                    return Err(ApiError::new(Kind::Malformed, m));
                }
            }
            let data = ct == Some("application/offset+octet-stream");
            if !data && has_body(h) {
                let m = "a creation body must be application/offset+octet-stream";
                return Err(ApiError::new(Kind::Unsupported, m));
            }
            (data, false)
        }
        Proto::Ietf(_) => {
            let complete = proto::boolean(h, "upload-complete")?.ok_or_else(|| {
                ApiError::new(Kind::Malformed, "an upload creation needs Upload-Complete")
            })?;
            (true, complete)
        }
    };
    if length.is_some_and(|n| n > l.file_bytes) {
        return Err(ApiError::limit("file_bytes", l.file_bytes));
    }
    if length.is_some() && matches!(concat, Some(Concat::Final(_))) {
        let m = "a final concatenation takes its length from its parts: no Upload-Length";
        return Err(ApiError::new(Kind::Malformed, m));
    }
    Ok(Creation {
        length,
        metadata,
        filename,
        filetype,
        concat,
        with_body,
        complete,
    })
}

/// True if the request says it has a body (`Content-Length` > 0 or chunked).
fn has_body(h: &HeaderMap) -> bool {
    match content_length(h) {
        Some(n) => n > 0,
        None => h.contains_key(http::header::TRANSFER_ENCODING),
    }
}

fn content_length(h: &HeaderMap) -> Option<u64> {
    h.get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// `POST /v1/uploads`.
async fn create(
    state: &Arc<AppState>,
    req: Request<Incoming>,
    proto: Proto,
    who: &Principal,
) -> Response {
    let (parts, body) = req.into_parts();
    let mut reader = BodyReader::new(state, &parts, body);
    let r = create_run(state, &parts.headers, proto, who, &mut reader).await;
    let counted = r.as_ref().map_or(true, |(_, appended)| *appended);
    let r = r.map(|(r, _)| r);
    if counted {
        return decorate(super::finish_upload(state, FORMAT, &reader, r), proto, None);
    }
    let r = r.unwrap_or_else(|e| {
        state.metrics.rejected(e.reason());
        response::error(&e, !reader.is_done())
    });
    decorate(r, proto, None)
}

/// The creation; true with the answer when bytes were appended (counted
/// as an upload in the metrics).
async fn create_run(
    state: &Arc<AppState>,
    h: &HeaderMap,
    proto: Proto,
    who: &Principal,
    reader: &mut BodyReader,
) -> Result<(Response, bool), ApiError> {
    let c = parse_creation(state, h, proto)?;
    // What the credential allows, before a byte of storage is taken.
    if let Some(len) = c.length {
        who.rules.check_size(len)?;
    }
    if let Some(t) = c.filetype.as_deref() {
        let t = crate::upload::clean_content_type(Some(t));
        if !crate::upload::unspecific(&t) {
            who.rules.check_type(&t)?;
        }
    }
    if let Some(Concat::Final(ids)) = &c.concat {
        let r = concat_final(state, h, &c, ids, who, reader).await?;
        return Ok((r, true));
    }
    // A partial upload is not an item of its own (its concatenation is).
    let item = u64::from(!matches!(c.concat, Some(Concat::Partial)));
    crate::upload::check_quota(state, who, c.length, item).await?;
    let id = new_id();
    let lease = state.leases.take(&id).await?;
    let spool = state
        .blobs
        .spool_create(&id, lease.clone())
        .await
        .map_err(storage_error)?;
    let mut st = UploadState::new(spool, c.length);
    st.filename = c.filename.clone();
    st.filetype = c.filetype.clone();
    st.metadata = c.metadata.clone();
    st.concat = matches!(c.concat, Some(Concat::Partial)).then_some(ConcatState::Partial);
    st.granted = state::Granted::of(who);
    let row = UploadRow {
        id: id.clone(),
        owner: who.name.clone(),
        expires: expires(state),
        gen: 0,
        open: true,
        state: st.to_json(),
    };
    let max = state.config.limits.open_uploads;
    if !state
        .meta
        .upload_create(row, max, Some(&state.node))
        .await?
    {
        // The lease, dropped unended, removes the spool.
        let mut e = ApiError::new(
            Kind::TooMany,
            format!(
                "open_uploads = {max} unfinished uploads reached for {}: finish or delete one",
                who.name
            ),
        );
        e.limit = Some(("open_uploads", max as u64));
        return Err(e);
    }
    // The row names the spool now: its insert ended the lease.
    lease.end();
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::CREATED;
    set(&mut r, "location", location(state, h, &id));
    let mut offset = None;
    let appended = c.with_body && (has_body(h) || c.complete);
    if appended {
        let want = Want {
            checksum: None,
            complete_at_end: c.complete,
            body_len: content_length(h),
        };
        match append_to(state, &id, 0, want, reader).await {
            Ok((o, complete)) => {
                offset = Some(o);
                if complete {
                    set_link(&mut r, state, h, &id, who.gets_links());
                }
            }
            Err(e) => {
                // The client never learns the upload's URL: nothing of it
                // may stay (nor count against open_uploads).
                // (Already gone when it was refused over quota.)
                match terminate(state, &id, who).await {
                    Err(t) if t.kind != Kind::NotFound => {
                        tracing::warn!(id, "removing a failed creation: {t} (it expires)");
                    }
                    _ => {}
                }
                return Err(e);
            }
        }
    } else if c.length == Some(0) {
        // Nothing to wait for: an empty file is complete at once.
        recover_completion(state, &id).await?;
        offset = Some(0);
        set_link(&mut r, state, h, &id, who.gets_links());
    } else if proto != Proto::Tus {
        offset = Some(0);
    }
    set(&mut r, "upload-expires", proto::http_date(expires(state)));
    if let Some(o) = offset {
        set(&mut r, "upload-offset", o);
    }
    if let Proto::Ietf(_) = proto {
        let complete = c.complete && appended;
        set(
            &mut r,
            "upload-complete",
            if complete { "?1" } else { "?0" },
        );
    }
    Ok((r, appended))
}

/// Claims the upload, checks where it stands, appends the body at
/// `offset` and completes the upload if that was its last byte. Returns
/// the new offset and whether it is complete.
async fn append_to(
    state: &Arc<AppState>,
    id: &str,
    offset: u64,
    want: Want,
    reader: &mut BodyReader,
) -> Result<(u64, bool), ApiError> {
    let mut guard = state.writers.take_for_append(id).await;
    if guard.superseded() {
        return Err(append::taken_over());
    }
    // A writer this node parked goes on with its row: nobody else can
    // have written it (`lock.rs`).
    let (row, st, writer) = match guard.parked.take() {
        Some(p) if state.meta.single_process() && p.row.expires >= now() => {
            (p.row, p.st, Some((p.writer, p.hasher, p.saving)))
        }
        _ => {
            let (row, st) = claim_row(state, id).await?;
            (row, st, None)
        }
    };
    if row.expires < now() && !st.complete {
        return Err(gone(id));
    }
    if st.is_final() {
        let m = "a final concatenation takes no bytes of its own";
        return Err(ApiError::new(Kind::Forbidden, m));
    }
    if offset != st.offset() {
        let at = st.offset();
        // The writer stays for the request that comes with the right one.
        if let Some((writer, hasher, saving)) = writer {
            guard.park(lock::Parked {
                row,
                st,
                writer,
                hasher,
                saving,
            });
        }
        return Err(mismatch(at));
    }
    if st.complete {
        if want.body_len.is_none_or(|n| n > 0) && !reader.is_done() {
            return Err(complete_already(st.offset()));
        }
        // An empty append at the end (a client checking it is done).
        return Ok((st.offset(), true));
    }
    let admission = admit(state, reader.progress(), 0).await?;
    let mut a = Append::open(state, row, st, &want, guard, writer).await?;
    a.body(reader).await?;
    if want.complete_at_end {
        if a.st.length.is_some_and(|l| l != a.st.offset()) {
            let m = "Upload-Complete: ?1 before Upload-Length was reached";
            return Err(ApiError::new(Kind::Malformed, m));
        }
        a.set_length(a.st.offset());
        a.checkpoint().await?;
    }
    let at = a.st.offset();
    if !a.is_full() {
        match a.hash_pending() {
            // The answer goes now; the hash catches up behind it.
            true => drop(tokio::spawn(a.settle_and_park(admission))),
            false => a.park(),
        }
        return Ok((at, false));
    }
    a.complete().await?;
    Ok((at, true))
}

/// Bytes for a finished upload: past its length (tus: 413, naming it).
fn complete_already(len: u64) -> ApiError {
    let mut e = ApiError::new(
        Kind::Limit,
        format!("the upload is complete at {len} bytes: no more bytes are taken"),
    );
    e.limit = Some(("Upload-Length", len));
    e
}

/// Makes the caller the upload's writer (its row's generation bumped, so
/// any other writer's next save fails): the row and its state. Callers
/// hold this node's writer slot for `id` first.
async fn claim_row(state: &AppState, id: &str) -> Result<(UploadRow, UploadState), ApiError> {
    let row = state.meta.upload_claim(id).await?;
    let row = row.ok_or_else(|| not_found(id))?;
    let st = load_state(state, id, &row).await?;
    Ok((row, st))
}

/// As [`claim_row`], the state as the row has it: for a `DELETE`, which
/// needs no offset (and must work whatever the spool's note says).
async fn claim_row_as_saved(
    state: &AppState,
    id: &str,
) -> Result<(UploadRow, UploadState), ApiError> {
    let row = state.meta.upload_claim(id).await?;
    let row = row.ok_or_else(|| not_found(id))?;
    let st = UploadState::parse(id, &row.state)?;
    Ok((row, st))
}

/// An upload's state as its row has it, brought up to its spool's note
/// where that is ahead: an append answers once its bytes and the note are
/// durable, and saves the row after (`append.rs`), so a row that a crash
/// or a failed save left behind is one note short.
async fn load_state(state: &AppState, id: &str, row: &UploadRow) -> Result<UploadState, ApiError> {
    let mut st = UploadState::parse(id, &row.state)?;
    // Only a node whose metadata no other node reads takes notes.
    if !st.complete && state.meta.single_process() {
        let note = state.blobs.spool_note(id).await.map_err(storage_error)?;
        if let Some(n) = note {
            st.take_note(id, &n)?;
        }
    }
    Ok(st)
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(Kind::NotFound, format!("no upload {id}"))
}

/// 409 naming the offset to resume from.
pub(super) fn mismatch(at: u64) -> ApiError {
    ApiError::new(
        Kind::Conflict,
        format!("Upload-Offset does not match: the upload is at {at}"),
    )
}

/// `PATCH /v1/uploads/{id}`; `readable`: the answer that completes it may
/// hand out the item's link.
async fn patch(
    state: &Arc<AppState>,
    req: Request<Incoming>,
    id: &str,
    proto: Proto,
    readable: bool,
) -> Response {
    let (parts, body) = req.into_parts();
    let mut reader = BodyReader::new(state, &parts, body);
    let r = patch_run(state, &parts.headers, id, proto, &mut reader).await;
    // A mismatch answers with the offset to resume from.
    let at = match &r {
        Err(e) if e.kind == Kind::Conflict => current_offset(state, id).await,
        _ => None,
    };
    let r = r.map(|(offset, complete)| {
        let mut r = no_content();
        set(&mut r, "upload-offset", offset);
        if complete {
            set_link(&mut r, state, &parts.headers, id, readable);
        }
        set(&mut r, "upload-expires", proto::http_date(expires(state)));
        if let Proto::Ietf(_) = proto {
            set(
                &mut r,
                "upload-complete",
                if complete { "?1" } else { "?0" },
            );
        }
        r
    });
    decorate(super::finish_upload(state, FORMAT, &reader, r), proto, at)
}

async fn current_offset(state: &Arc<AppState>, id: &str) -> Option<u64> {
    let row = state.meta.upload_get(id).await.ok()??;
    load_state(state, id, &row).await.ok().map(|s| s.offset())
}

async fn patch_run(
    state: &Arc<AppState>,
    h: &HeaderMap,
    id: &str,
    proto: Proto,
    reader: &mut BodyReader,
) -> Result<(u64, bool), ApiError> {
    if !is_id(id) {
        return Err(not_found(id));
    }
    let ct = proto::text(h, "content-type")?;
    let want_ct = match proto {
        Proto::Tus => Some("application/offset+octet-stream"),
        Proto::Ietf(6) => Some("application/partial-upload"),
        Proto::Ietf(_) => None,
    };
    if let Some(w) = want_ct.filter(|w| ct != Some(*w)) {
        let m = format!("a PATCH body must be {w}");
        return Err(ApiError::new(Kind::Unsupported, m));
    }
    let offset = proto::number(h, "upload-offset")?
        .ok_or_else(|| ApiError::new(Kind::Malformed, "PATCH needs Upload-Offset"))?;
    let (checksum, complete_at_end) = match proto {
        Proto::Tus => {
            let c = proto::text(h, "upload-checksum")?
                .map(proto::checksum)
                .transpose()?;
            (c, false)
        }
        Proto::Ietf(_) => {
            let c = proto::boolean(h, "upload-complete")?
                .ok_or_else(|| ApiError::new(Kind::Malformed, "an append needs Upload-Complete"))?;
            (None, c)
        }
    };
    if proto == Proto::Tus {
        if let Some(len) = proto::number(h, "upload-length")? {
            declare_length(state, id, offset, len).await?;
        }
    }
    let want = Want {
        checksum,
        complete_at_end,
        body_len: content_length(h),
    };
    append_to(state, id, offset, want, reader).await
}

/// tus `creation-defer-length`: a `PATCH` that fixes the length.
async fn declare_length(
    state: &Arc<AppState>,
    id: &str,
    offset: u64,
    len: u64,
) -> Result<(), ApiError> {
    let l = &state.config.limits;
    if len > l.file_bytes {
        return Err(ApiError::limit("file_bytes", l.file_bytes));
    }
    let _guard = state.writers.take(id).await;
    let (mut row, mut st) = claim_row(state, id).await?;
    match st.length {
        Some(have) if have == len => return Ok(()),
        Some(have) => {
            let m = format!("Upload-Length is {have} already");
            return Err(ApiError::new(Kind::Malformed, m));
        }
        None if len < st.offset().max(offset) => {
            let m = "Upload-Length below the upload's offset";
            return Err(ApiError::new(Kind::Malformed, m));
        }
        None => {}
    }
    st.granted.rules().check_size(len)?;
    st.length = Some(len);
    row.state = st.to_json();
    match state
        .meta
        .upload_save(&row, None, Default::default())
        .await?
    {
        Some(_) => Ok(()),
        None => Err(ApiError::new(Kind::Conflict, "a newer request took over")),
    }
}

/// `HEAD /v1/uploads/{id}`.
async fn head(
    state: &Arc<AppState>,
    id: &str,
    proto: Proto,
    h: &HeaderMap,
    who: &Principal,
) -> Result<Response, ApiError> {
    if !is_id(id) {
        return Err(not_found(id));
    }
    let Some(row) = state.meta.upload_get(id).await? else {
        // Its row expired after it became media: the media says the rest.
        let m = state.meta.get(id, who.owner()).await?;
        let m = m.ok_or_else(|| not_found(id))?;
        let mut r = status_answer(proto, m.size, Some(m.size), true);
        set_link(&mut r, state, h, id, who.gets_links());
        r.headers_mut().insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        );
        return Ok(r);
    };
    let mut st = load_state(state, id, &row).await?;
    // A finished upload is media: its row's expiry only ends the record.
    if row.expires < now() && !st.complete {
        return Err(gone(id));
    }
    if !st.complete && st.length == Some(st.offset()) {
        st = recover_completion(state, id).await?;
    }
    let mut r = status_answer(proto, st.offset(), st.length, st.complete);
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    if st.length.is_none() && proto == Proto::Tus {
        set(&mut r, "upload-defer-length", 1);
    }
    if let Some(m) = &st.metadata {
        set(&mut r, "upload-metadata", m);
    }
    match &st.concat {
        Some(ConcatState::Partial) => set(&mut r, "upload-concat", "partial"),
        Some(ConcatState::Final(ids)) => {
            // Absolute, as every URL the server hands out.
            let urls: Vec<String> = ids.iter().map(|i| location(state, h, i)).collect();
            set(&mut r, "upload-concat", format!("final;{}", urls.join(" ")));
        }
        None => {}
    }
    set(&mut r, "upload-expires", proto::http_date(row.expires));
    if st.complete {
        set_link(&mut r, state, h, id, who.gets_links());
    }
    Ok(r)
}

fn status_answer(proto: Proto, offset: u64, length: Option<u64>, complete: bool) -> Response {
    let mut r = no_content();
    if proto == Proto::Tus {
        *r.status_mut() = StatusCode::OK;
    }
    set(&mut r, "upload-offset", offset);
    if let Some(l) = length {
        set(&mut r, "upload-length", l);
    }
    if let Proto::Ietf(_) = proto {
        set(
            &mut r,
            "upload-complete",
            if complete { "?1" } else { "?0" },
        );
    }
    r
}

/// Finishes an upload whose last byte was saved by a node that died (or
/// failed) before it finished the blob: idempotent on the store's side.
async fn recover_completion(state: &Arc<AppState>, id: &str) -> Result<UploadState, ApiError> {
    let _guard = state.writers.take(id).await;
    let (row, mut st) = claim_row(state, id).await?;
    if st.complete || st.length != Some(st.offset()) {
        return Ok(st);
    }
    // Before the spool becomes the blob: a hash that lags reads it. (The
    // last byte's save never lags, but a state is not trusted to say so.)
    let h = hash::hasher_at_offset(state, id, &st).await?;
    state
        .blobs
        .spool_finish(id, st.spool.clone())
        .await
        .map_err(storage_error)?;
    let sha = hex::encode(sha2::Digest::finalize(h));
    complete_saved(state, row, &mut st, sha).await?;
    Ok(st)
}

/// `DELETE /v1/uploads/{id}` (tus termination, IETF cancellation): the
/// writer, if any, is stopped; the bytes go, then the row. A finished
/// upload's media item goes with it.
async fn terminate(state: &Arc<AppState>, id: &str, who: &Principal) -> Result<Response, ApiError> {
    if !is_id(id) {
        return Err(not_found(id));
    }
    let _guard = state.writers.take(id).await;
    let (row, st) = claim_row_as_saved(state, id).await?;
    if st.media {
        // A finished upload is an item: removing it takes `delete`.
        who.require(Scopes::DELETE)?;
        match super::media::delete(state, id, who).await {
            Ok(_) => {}
            Err(e) if e.kind == Kind::NotFound => {}
            Err(e) => return Err(e),
        }
    } else {
        state
            .blobs
            .spool_abort(id, st.spool)
            .await
            .map_err(storage_error)?;
    }
    state.meta.upload_remove(id, row.gen).await?;
    Ok(no_content())
}

/// tus concatenation: `POST` with `Upload-Concat: final;…` makes one media
/// item of complete partial uploads, in order, read back and written as a
/// new blob (hashed on the way, like any upload). The partial uploads stay
/// until they expire or are terminated.
async fn concat_final(
    state: &Arc<AppState>,
    h: &HeaderMap,
    c: &Creation,
    ids: &[String],
    who: &Principal,
    reader: &mut BodyReader,
) -> Result<Response, ApiError> {
    let l = &state.config.limits;
    let mut parts = Vec::with_capacity(ids.len());
    let mut total = 0u64;
    for pid in ids {
        // Another owner's partial upload is as good as missing (404, as a
        // missing upload is on every tus route, and in tusd); an expired
        // one is the janitor's (it may be removing it now).
        let row = state.meta.upload_get(pid).await?;
        let row = row
            .filter(|r| who.sees(&r.owner) && r.expires >= now())
            .ok_or_else(|| {
                ApiError::new(Kind::NotFound, format!("Upload-Concat: no upload {pid}"))
            })?;
        let st = UploadState::parse(pid, &row.state)?;
        if !(st.is_partial() && st.complete) {
            let m = format!("Upload-Concat: {pid} is not a complete partial upload");
            return Err(ApiError::new(Kind::Malformed, m));
        }
        total = total.saturating_add(st.offset());
        parts.push((pid.clone(), st));
    }
    if total > l.file_bytes {
        return Err(ApiError::limit("file_bytes", l.file_bytes));
    }
    who.rules.check_size(total)?;
    crate::upload::check_quota(state, who, Some(total), 1).await?;
    let _admission = admit(state, reader.progress(), 0).await?;
    let filename = c.filename.clone().or_else(|| parts[0].1.filename.clone());
    let filetype = c.filetype.clone().or_else(|| parts[0].1.filetype.clone());
    let mut ingest = Ingest::new(state, who);
    let mut sink = ingest
        .begin_file(None, filename, filetype.as_deref())
        .await?;
    for (pid, st) in &parts {
        let mut s = state
            .blobs
            .open(pid, 0, st.offset())
            .await
            .map_err(storage_error)?;
        while let Some(chunk) = std::future::poll_fn(|cx| s.as_mut().poll_next(cx)).await {
            sink.push(chunk.map_err(storage_error)?)?;
            sink.flush().await?;
        }
    }
    ingest.finish_file(sink).await?;
    let (records, _) = ingest.commit().await?;
    let rec = &records[0];
    let mut st = UploadState::new(Default::default(), Some(rec.size));
    st.spool.len = rec.size;
    st.concat = Some(ConcatState::Final(ids.to_vec()));
    st.complete = true;
    st.media = true;
    st.filename = rec.filename.clone();
    st.metadata = c.metadata.clone();
    let row = UploadRow {
        id: rec.id.clone(),
        owner: who.name.clone(),
        expires: expires(state),
        gen: 0,
        open: false,
        state: st.to_json(),
    };
    state.meta.upload_create(row, usize::MAX, None).await?;
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::CREATED;
    set(&mut r, "location", location(state, h, &rec.id));
    set(&mut r, "upload-offset", rec.size);
    set_link(&mut r, state, h, &rec.id, who.gets_links());
    Ok(r)
}
