//! Reading and deleting stored media: `GET|HEAD /v1/media/{id}` (RFC 9110
//! §14 ranges, §13.1.2 `If-None-Match`, §8.8.3 `ETag`), `GET /v1/media`
//! (newest first or oldest first, by name and type, keyset pages behind an
//! opaque cursor; see `bulkwire_store::list`), `DELETE /v1/media/{id}`.
//!
//! Downloads take the size from the metadata row and open the blob by id:
//! no `stat`, no directory search. From the file store the bytes go out
//! with `sendfile(2)` (`crate::sendfile`), from S3 as a stream. An item's
//! bytes never change under its id, so every download is cacheable for a
//! year (RFC 9111 §5.2.2, RFC 8246 `immutable`): `public` through a link
//! without expiry (a CDN may keep it), `public` no longer than the link
//! lives with one, `private` with credentials (a shared cache must not
//! serve it to another user); `Last-Modified` is the item's creation
//! (RFC 9110 §8.8.2), and `If-Modified-Since` is answered 304 when no
//! `If-None-Match` came (§13.2.2). The stored content type is sent with
//! `X-Content-Type-Options: nosniff`, and active types (HTML, XML and
//! `+xml` such as SVG, JavaScript) are sent as attachments, so an upload
//! cannot run script in the server's origin.

use crate::downloads::{Route, Via};
use crate::error::{ApiError, Kind};
use crate::principal::Principal;
use crate::response::{self, empty, Response};
use crate::sendfile::{FileBody, FileSlot};
use crate::state::AppState;
use crate::store::{is_id, BlobStream, ListQuery, MediaRecord, Order, TypeFilter};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;
use std::borrow::Cow;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The item `id`, if it exists for `owner` (`None`: every owner's):
/// another owner's item answers exactly as a missing one (404), never 403,
/// which would tell that the id exists.
pub(crate) async fn find(
    state: &AppState,
    id: &str,
    owner: Option<&str>,
) -> Result<MediaRecord, ApiError> {
    let not_found = || ApiError::new(Kind::NotFound, "no such media");
    if !is_id(id) {
        return Err(not_found());
    }
    state.meta.get(id, owner).await?.ok_or_else(not_found)
}

/// How a download was asked for: the request's method and headers, its
/// connection (for `sendfile`), and through what.
pub(crate) struct Ask<'a> {
    pub method: &'a Method,
    pub headers: &'a HeaderMap,
    slot: Option<Arc<FileSlot>>,
    pub by: By,
}

/// What a download was asked through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum By {
    Credentials,
    /// A signed link, and its expiry (Unix seconds) if it has one.
    Link(Option<u64>),
}

impl<'a> Ask<'a> {
    pub fn of<B>(req: &'a http::Request<B>, by: By) -> Ask<'a> {
        Ask {
            method: req.method(),
            headers: req.headers(),
            slot: req.extensions().get::<Arc<FileSlot>>().cloned(),
            by,
        }
    }

    /// `Cache-Control` for bytes that never change under their URL; only
    /// a link with an expiry needs one of its own.
    pub(crate) fn cache_control(&self) -> Cow<'static, str> {
        const YEAR: u64 = 31_536_000;
        match self.by {
            By::Credentials => Cow::Borrowed("private, max-age=31536000, immutable"),
            By::Link(None) => Cow::Borrowed("public, max-age=31536000, immutable"),
            By::Link(Some(exp)) => {
                let left = exp.saturating_sub(crate::links::unix_now()).min(YEAR);
                Cow::Owned(format!("public, max-age={left}, immutable"))
            }
        }
    }
}

/// `GET` or `HEAD` one blob.
pub(crate) async fn download(
    state: &Arc<AppState>,
    ask: &Ask<'_>,
    id: &str,
    owner: Option<&str>,
) -> Result<Response, ApiError> {
    let m = find(state, id, owner).await?;
    let kind = if is_active_type(&m.content_type) {
        "attachment"
    } else {
        "inline"
    };
    let s = Sendable {
        etag: format!("\"{}\"", m.sha256),
        content_type: &m.content_type,
        disposition: disposition_for(kind, m.filename.as_deref()),
        cache_control: ask.cache_control(),
        modified: m.created,
    };
    let route = match ask.by {
        By::Credentials => Route::Media,
        By::Link(_) => Route::Link,
    };
    send(state, ask, &s, BlobKey::Item(&m.id), m.size, route).await
}

/// What a download says of the bytes it sends.
pub(crate) struct Sendable<'a> {
    pub etag: String,
    pub content_type: &'a str,
    pub disposition: String,
    pub cache_control: Cow<'static, str>,
    /// `Last-Modified`, Unix seconds.
    pub modified: i64,
}

impl Sendable<'_> {
    /// The validators and caching every answer about these bytes carries,
    /// a 304's too (RFC 9110 §15.4.5).
    fn validators(&self, hs: &mut HeaderMap) {
        hs.insert(header::ETAG, hv(&self.etag));
        let cc = match &self.cache_control {
            Cow::Borrowed(s) => HeaderValue::from_static(s),
            Cow::Owned(s) => hv(s),
        };
        hs.insert(header::CACHE_CONTROL, cc);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(self.modified.max(0) as u64);
        hs.insert(header::LAST_MODIFIED, hv(&httpdate::fmt_http_date(t)));
    }

    /// Whether the client's copy is current: `If-None-Match` lists the
    /// tag, or, without `If-None-Match`, `If-Modified-Since` is not before
    /// the bytes were made (§13.2.2 steps 3 and 4).
    pub(crate) fn unchanged(&self, h: &HeaderMap) -> bool {
        if h.contains_key(header::IF_NONE_MATCH) {
            return none_match(h, &self.etag);
        }
        let since = h
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok());
        since.is_some_and(|t| {
            let secs = t
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            secs >= self.modified
        })
    }
}

/// Which stored bytes a download sends: an item's, or one of its variants.
#[derive(Clone, Copy)]
pub(crate) enum BlobKey<'a> {
    Item(&'a str),
    Variant(&'a str, &'a str),
}

impl<'a> BlobKey<'a> {
    /// The blob's id, and the variant's name for a variant.
    fn parts(self) -> (&'a str, Option<&'a str>) {
        match self {
            BlobKey::Item(id) => (id, None),
            BlobKey::Variant(id, name) => (id, Some(name)),
        }
    }
}

/// `304 Not Modified` with the validators (and caching) it confirms.
pub(crate) fn not_modified(s: &Sendable<'_>) -> Response {
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::NOT_MODIFIED;
    s.validators(r.headers_mut());
    r
}

/// The one download path (Go's `serveContent`): the conditions, `Range`
/// and `If-Range`, the body sent from the store, the headers of `s`.
pub(crate) async fn send(
    state: &Arc<AppState>,
    ask: &Ask<'_>,
    s: &Sendable<'_>,
    key: BlobKey<'_>,
    size: u64,
    route: Route,
) -> Result<Response, ApiError> {
    let h = ask.headers;
    if s.unchanged(h) {
        return Ok(not_modified(s));
    }
    if state.config.s3.download_redirect {
        if let Some(r) = redirect(state, ask, s, key).await? {
            return Ok(r);
        }
    }
    let range = match range_header(h, &s.etag) {
        Some(v) => parse_range(v, size),
        None => RangeReq::Full,
    };
    let (status, start, len) = match range {
        RangeReq::Full => (StatusCode::OK, 0, size),
        RangeReq::Part(a, b) => (StatusCode::PARTIAL_CONTENT, a, b - a + 1),
        RangeReq::Unsatisfiable => return Ok(unsatisfiable(size)),
    };
    let body = if *ask.method == Method::HEAD || len == 0 {
        empty()
    } else {
        body(state, ask, key, (start, len), route).await?
    };
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let hs = r.headers_mut();
    hs.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    s.validators(hs);
    hs.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    hs.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let ct = HeaderValue::from_str(s.content_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    hs.insert(header::CONTENT_TYPE, ct);
    hs.insert(header::CONTENT_DISPOSITION, hv(&s.disposition));
    if status == StatusCode::PARTIAL_CONTENT {
        let cr = format!("bytes {}-{}/{}", start, start + len - 1, size);
        hs.insert(header::CONTENT_RANGE, hv(&cr));
    }
    Ok(r)
}

/// `307 Temporary Redirect` to a presigned GET of `key` in the object
/// store, answering with `s`'s type, disposition and caching (`[s3]
/// download_redirect`); `None` where the store has no such URLs. The URL
/// lives `download_redirect_ttl`, no longer than the link asked through,
/// and the redirect itself may be kept for half that: a cached redirect
/// never points at an expired URL. The conditions were answered before
/// (304 needs no redirect); `Range` goes to the object store with the
/// client.
async fn redirect(
    state: &Arc<AppState>,
    ask: &Ask<'_>,
    s: &Sendable<'_>,
    key: BlobKey<'_>,
) -> Result<Option<Response>, ApiError> {
    let mut ttl = state.config.s3.redirect_ttl();
    if let By::Link(Some(exp)) = ask.by {
        let left = exp.saturating_sub(crate::links::unix_now()).max(1);
        ttl = ttl.min(std::time::Duration::from_secs(left));
    }
    let (id, variant) = key.parts();
    let answer = crate::store::Answer {
        content_type: s.content_type,
        disposition: &s.disposition,
        cache_control: &s.cache_control,
    };
    let url = state.blobs.presign_get(id, variant, ttl, answer).await;
    let Some(url) = url.map_err(crate::upload::storage_error)? else {
        return Ok(None);
    };
    state.metrics.downloads.redirects.fetch_add(1, Relaxed);
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::TEMPORARY_REDIRECT;
    let hs = r.headers_mut();
    hs.insert(header::LOCATION, hv(&url));
    let keep = format!("private, max-age={}", ttl.as_secs() / 2);
    hs.insert(header::CACHE_CONTROL, hv(&keep));
    Ok(Some(r))
}

/// The bytes `at` of `key`: the file itself, sent by `sendfile`, where
/// the store keeps local files and the connection can; else the store's
/// stream.
async fn body(
    state: &Arc<AppState>,
    ask: &Ask<'_>,
    key: BlobKey<'_>,
    at: (u64, u64),
    route: Route,
) -> Result<crate::response::Body, ApiError> {
    let (id, variant) = key.parts();
    let downloads = &state.metrics.downloads;
    if let Some(slot) = ask.slot.as_ref().filter(|_| crate::sendfile::AVAILABLE) {
        if let Some(f) = state
            .blobs
            .open_file(id, variant)
            .await
            .map_err(open_error)?
        {
            let b = FileBody::new(f, at, slot.clone(), downloads.clone(), route);
            return Ok(b.boxed_unsync());
        }
    }
    let (start, len) = at;
    let opened = match variant {
        None => state.blobs.open(id, start, len).await,
        Some(name) => state.blobs.variant_open(id, name, start, len).await,
    };
    Ok(counted(state, opened.map_err(open_error)?, route))
}

/// `stream` as a response body on `route`, counted.
fn counted(state: &Arc<AppState>, stream: BlobStream, route: Route) -> crate::response::Body {
    state.metrics.downloads.in_progress.fetch_add(1, Relaxed);
    CountingBody {
        stream,
        state: state.clone(),
        route,
    }
    .boxed_unsync()
}

/// A blob that cannot be opened: gone under a racing `DELETE` (its row
/// was read just before) is 404, as if the row had been gone too.
fn open_error(e: std::io::Error) -> ApiError {
    if e.kind() == std::io::ErrorKind::NotFound {
        return ApiError::new(Kind::NotFound, "no such media (deleted meanwhile)");
    }
    crate::upload::storage_error(e)
}

/// A value we formatted ourselves from visible ASCII.
fn hv(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static(""))
}

fn unsatisfiable(size: u64) -> Response {
    let e = ApiError::new(Kind::Malformed, "range not satisfiable");
    let mut r = response::json(StatusCode::RANGE_NOT_SATISFIABLE, &e.to_json());
    r.headers_mut()
        .insert(header::CONTENT_RANGE, hv(&format!("bytes */{size}")));
    r
}

/// `If-None-Match` lists our tag (weak comparison, §8.8.3.2) or is `*`.
pub(crate) fn none_match(h: &HeaderMap, etag: &str) -> bool {
    h.get_all(header::IF_NONE_MATCH).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .map(str::trim)
                .any(|t| t == "*" || t.trim_start_matches("W/") == etag)
        })
    })
}

/// The `Range` value to honour: ignored when `If-Range` names another
/// version (§13.1.5).
fn range_header<'a>(h: &'a HeaderMap, etag: &str) -> Option<&'a str> {
    if let Some(ir) = h.get(header::IF_RANGE) {
        if ir.to_str().map(str::trim).ok() != Some(etag) {
            return None;
        }
    }
    h.get(header::RANGE)?.to_str().ok()
}

#[derive(Debug, PartialEq, Eq)]
enum RangeReq {
    Full,
    /// Inclusive first and last byte.
    Part(u64, u64),
    Unsatisfiable,
}

/// One `bytes=` range (§14.1.2). Several ranges, another unit or bad syntax
/// are answered with the whole representation, as §14.2 allows.
fn parse_range(v: &str, size: u64) -> RangeReq {
    let Some((unit, spec)) = v.trim().split_once('=') else {
        return RangeReq::Full;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") || spec.contains(',') {
        return RangeReq::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeReq::Full;
    };
    let num = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.parse().ok())?
    };
    match (a.trim(), b.trim()) {
        ("", suffix) => match num(suffix) {
            Some(0) => RangeReq::Unsatisfiable,
            Some(n) if size > 0 => RangeReq::Part(size.saturating_sub(n), size - 1),
            Some(_) => RangeReq::Unsatisfiable,
            None => RangeReq::Full,
        },
        (first, last) => {
            let Some(first) = num(first) else {
                return RangeReq::Full;
            };
            let last = if last.is_empty() {
                Some(u64::MAX)
            } else {
                num(last)
            };
            match last {
                None => RangeReq::Full,
                Some(l) if l < first => RangeReq::Full,
                Some(_) if first >= size => RangeReq::Unsatisfiable,
                Some(l) => RangeReq::Part(first, l.min(size - 1)),
            }
        }
    }
}

/// Media types a browser would render actively: HTML, XML (incl. every
/// `+xml` type such as SVG and XHTML), JavaScript. Compared on the essence,
/// case-insensitively (RFC 9110 §8.3.1); an unparsable type counts as active.
pub fn is_active_type(ct: &str) -> bool {
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let Some((top, sub)) = essence.split_once('/') else {
        return true;
    };
    sub.ends_with("+xml")
        || sub == "xml"
        || sub == "html"
        || sub == "xhtml"
        || sub.contains("javascript")
        || sub.contains("ecmascript")
        || (top == "text" && (sub == "xsl" || sub == "jscript" || sub == "vbscript"))
}

/// `Content-Disposition` (RFC 6266): `kind` (`attachment` for active
/// types, else `inline`), the filename as an ASCII fallback plus RFC 8187
/// `filename*`.
pub(crate) fn disposition_for(kind: &str, filename: Option<&str>) -> String {
    let Some(name) = filename else {
        return kind.to_string();
    };
    let ascii: String = name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut enc = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            enc.push(b as char);
        } else {
            enc.push_str(&format!("%{b:02X}"));
        }
    }
    format!("{kind}; filename=\"{ascii}\"; filename*=UTF-8''{enc}")
}

/// `GET`/`HEAD /v1/finishing/{id}?exp=…&sig=…`: the bytes of an upload
/// whose `pre_finish` hook runs now (`crate::hooks`), for that hook to
/// read: 403 for a bad or expired link, 404 once the hook has answered.
pub async fn finishing(
    state: &Arc<AppState>,
    method: &Method,
    id: &str,
    query: &str,
) -> Result<Response, ApiError> {
    state.links.verify_finishing(id, query).map_err(|r| {
        let m = match r {
            crate::links::Refused::Bad => "invalid link",
            crate::links::Refused::Expired => "expired link",
        };
        ApiError::new(Kind::Forbidden, m)
    })?;
    let (size, content_type) = state.finishing.get(id).ok_or_else(|| {
        ApiError::new(Kind::NotFound, "no upload waiting for its pre_finish hook")
    })?;
    let body = match method == Method::HEAD || size == 0 {
        true => empty(),
        false => {
            let s = state.blobs.open(id, 0, size).await.map_err(open_error)?;
            counted(state, s, Route::Finishing)
        }
    };
    let mut r = Response::new(body);
    let hs = r.headers_mut();
    hs.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    hs.insert(header::CONTENT_TYPE, hv(&content_type));
    hs.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    hs.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

/// A download from a store's stream, counted; in progress until dropped.
struct CountingBody {
    stream: BlobStream,
    state: Arc<AppState>,
    route: Route,
}

impl Drop for CountingBody {
    fn drop(&mut self) {
        let d = &self.state.metrics.downloads;
        d.in_progress.fetch_sub(1, Relaxed);
    }
}

impl http_body::Body for CountingBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.stream.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(b))) => {
                let m = &self.state.metrics;
                m.bytes_sent.fetch_add(b.len() as u64, Relaxed);
                m.downloads.sent(self.route, Via::Stream, b.len() as u64);
                Poll::Ready(Some(Ok(Frame::data(b))))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Longest `q` (in bytes, once decoded). A name search reads the rows in
/// order until a page is full, and no file name needs a longer term.
pub const QUERY_MAX_BYTES: usize = 256;

/// `GET /v1/media?order=desc|asc&q=TEXT&type=PATTERN&limit=N&after=CURSOR`:
/// a page of rows, newest first unless `order=asc`; `next` is the cursor
/// for the following page, `null` on the last.
pub async fn list(
    state: &Arc<AppState>,
    who: &Principal,
    h: &HeaderMap,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    let mut q = list_query(query.unwrap_or(""), state.config.limits.list_limit)?;
    // `owner=` narrows to one owner within reach. Without every owner in
    // reach, that is only one's own: another owner's items are none of
    // one's own (an empty page), never one's own under another name.
    if let Some(own) = who.owner() {
        if q.owner.as_deref().is_some_and(|o| o != own) {
            let empty = serde_json::json!({"media": [], "next": null});
            return Ok(response::json(StatusCode::OK, &empty));
        }
        q.owner = Some(own.to_string());
    }
    let (order, limit) = (q.order, q.limit);
    // One row more than the page: `next` only when there is one.
    let mut rows = state
        .meta
        .list(ListQuery {
            limit: limit.saturating_add(1),
            ..q
        })
        .await?;
    let next = (rows.len() > limit).then(|| {
        rows.truncate(limit);
        rows.last().map(|r| cursor(order, r.seq))
    });
    let base = response::base_url(&state.config, h);
    let media: Vec<_> = rows
        .iter()
        .map(|m| response::media_json(m, &base, &state.links, true, &state.config.variant_sizes))
        .collect();
    Ok(response::json(
        StatusCode::OK,
        &serde_json::json!({"media": media, "next": next.flatten()}),
    ))
}

/// A listing's query string as a [`ListQuery`]. Each key at most once;
/// an empty `q` or `type` is no filter; `limit` above `max` is `max`.
fn list_query(query: &str, max: usize) -> Result<ListQuery, ApiError> {
    let bad = |m: String| ApiError::new(Kind::Malformed, m);
    let mut q = ListQuery::new(Order::NewestFirst, max.min(100));
    let (mut order, mut from) = (None, None);
    let mut seen: Vec<&str> = Vec::new();
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        if seen.contains(&k) {
            return Err(bad(format!("query parameter {k:?} is given twice")));
        }
        seen.push(k);
        match k {
            "limit" => {
                let n = v.parse::<usize>().ok().filter(|n| *n > 0);
                let why =
                    || format!("limit must be a whole number from 1 (at most {max} are sent)");
                q.limit = n.ok_or_else(|| bad(why()))?.min(max);
            }
            "after" => {
                let c = parse_cursor(v);
                let why = || "after must be the next cursor of an earlier page".to_string();
                from = Some(c.ok_or_else(|| bad(why()))?);
            }
            "order" => {
                order = Some(match v {
                    "desc" => Order::NewestFirst,
                    "asc" => Order::OldestFirst,
                    _ => {
                        let m = format!(
                            "order must be desc (newest first, the default) or asc, not {v:?}"
                        );
                        return Err(bad(m));
                    }
                })
            }
            "q" => q.name = Some(query_value("q", v)?).filter(|t| !t.is_empty()),
            "owner" => q.owner = Some(query_value("owner", v)?).filter(|t| !t.is_empty()),
            "type" => {
                let t = query_value("type", v)?;
                if !t.is_empty() {
                    let f = TypeFilter::parse(&t).ok_or_else(|| {
                        bad(format!(
                            "type must be a media type such as image/png or a top-level \
                             wildcard such as image/*, not {t:?}"
                        ))
                    })?;
                    q.media_type = Some(f);
                }
            }
            _ => return Err(bad(format!("unknown query parameter {k:?}"))),
        }
    }
    q.order = match (order, from) {
        (Some(o), Some((c, _))) if o != c => {
            let m = format!(
                "this cursor is from an order={} listing: ask with that order, or without after",
                order_name(c)
            );
            return Err(bad(m));
        }
        (o, c) => o.or(c.map(|c| c.0)).unwrap_or_default(),
    };
    q.after = from.map(|c| c.1);
    Ok(q)
}

fn order_name(o: Order) -> &'static str {
    match o {
        Order::NewestFirst => "desc",
        Order::OldestFirst => "asc",
    }
}

/// A page's end as handed to the client: the order's letter and the last
/// row's `seq` (`d4714`). Opaque to clients; the order in it keeps a
/// cursor from being read in the other order, where it would skip rows.
fn cursor(order: Order, seq: i64) -> String {
    let o = match order {
        Order::NewestFirst => 'd',
        Order::OldestFirst => 'a',
    };
    format!("{o}{seq}")
}

fn parse_cursor(s: &str) -> Option<(Order, i64)> {
    let order = match s.as_bytes().first()? {
        b'd' => Order::NewestFirst,
        b'a' => Order::OldestFirst,
        _ => return None,
    };
    let seq = &s[1..];
    let digits = !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit());
    Some((order, seq.parse().ok().filter(|_| digits)?))
}

/// A query string value (`application/x-www-form-urlencoded`: `+` is a
/// space, `%XX` a byte), which must be UTF-8; `q` at most
/// [`QUERY_MAX_BYTES`].
fn query_value(key: &str, v: &str) -> Result<String, ApiError> {
    let bad = |m: String| ApiError::new(Kind::Malformed, m);
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                out.push(byte.ok_or_else(|| bad(format!("{key} has a bad %-escape")))?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    if out.len() > QUERY_MAX_BYTES {
        return Err(bad(format!(
            "{key} is {} bytes, over the limit of {QUERY_MAX_BYTES} bytes",
            out.len()
        )));
    }
    String::from_utf8(out).map_err(|_| bad(format!("{key} is not UTF-8")))
}

/// `DELETE /v1/media/{id}`: the row goes and a lease on the id appears in
/// one transaction, then the blob goes, then the lease; a crash between
/// leaves the lease, and the janitor removes the blob.
pub async fn delete(
    state: &Arc<AppState>,
    id: &str,
    who: &Principal,
    origin: &crate::events::Origin,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::new(Kind::NotFound, "no such media");
    if !is_id(id) {
        return Err(not_found());
    }
    let m = state
        .meta
        .delete(
            id,
            who.owner(),
            &state.node,
            Some(crate::events::media_deleted(state, origin)),
        )
        .await?
        .ok_or_else(not_found)?;
    state.events.written("media.deleted", 1);
    match state.blobs.delete(&m.id).await {
        Ok(()) => {
            if let Err(e) = state.meta.release(&m.id, &state.node).await {
                tracing::warn!(id = %m.id, error = %e, "lease not released; the janitor retries");
                state.leases.retry_later(&m.id);
            }
        }
        Err(e) => {
            tracing::warn!(id = %m.id, error = %e, "blob not removed; the janitor retries");
            state.leases.retry_later(&m.id);
        }
    }
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &str) -> Result<ListQuery, String> {
        list_query(q, 1000).map_err(|e| {
            assert_eq!(e.status(), 400, "{q}");
            e.message
        })
    }

    #[test]
    fn listing_queries() {
        let q = parse("").unwrap();
        assert_eq!(q, ListQuery::new(Order::NewestFirst, 100));
        let q = parse("order=asc&limit=5000&q=Caf%C3%A9+100%25&type=Image/*").unwrap();
        assert_eq!(q.order, Order::OldestFirst);
        assert_eq!(q.limit, 1000);
        assert_eq!(q.name.as_deref(), Some("Café 100%"));
        assert_eq!(q.media_type, Some(TypeFilter::Top("image".into())));
        let q = parse("q=&type=").unwrap();
        assert_eq!((q.name, q.media_type), (None, None), "empty is no filter");
        let long = "x".repeat(QUERY_MAX_BYTES);
        assert_eq!(
            parse(&format!("q={long}")).unwrap().name,
            Some(long.clone())
        );
        let e = parse(&format!("q={long}%41")).unwrap_err();
        assert!(e.contains("q is 257 bytes") && e.contains("256"), "{e}");
        for (bad, says) in [
            ("order=newest", "order must be desc"),
            ("type=image", "type must be a media type"),
            ("type=*/*", "type must be a media type"),
            ("type=text/plain;charset=utf-8", "type must be a media type"),
            ("q=%FF", "q is not UTF-8"),
            ("q=%4", "q has a bad %-escape"),
            ("q=a&q=b", "given twice"),
            ("limit=0", "limit must be"),
            ("after=12", "after must be"),
            ("after=d", "after must be"),
            ("after=d-1", "after must be"),
            ("after=x12", "after must be"),
            ("bogus=1", "unknown query parameter \"bogus\""),
            ("after=a7&order=desc", "from an order=asc listing"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_cursor_carries_its_order() {
        for order in [Order::NewestFirst, Order::OldestFirst] {
            let c = cursor(order, 4714);
            assert_eq!(parse_cursor(&c), Some((order, 4714)));
            // Without `order`, the cursor's own; with the same, fine.
            let q = parse(&format!("after={c}")).unwrap();
            assert_eq!((q.order, q.after), (order, Some(4714)));
            let same = format!("after={c}&order={}", order_name(order));
            assert_eq!(parse(&same).unwrap().order, order);
        }
        assert_ne!(cursor(Order::NewestFirst, 1), cursor(Order::OldestFirst, 1));
    }

    #[test]
    fn ranges() {
        use RangeReq::*;
        assert_eq!(parse_range("bytes=0-9", 100), Part(0, 9));
        assert_eq!(parse_range("bytes=90-", 100), Part(90, 99));
        assert_eq!(parse_range("bytes=90-500", 100), Part(90, 99));
        assert_eq!(parse_range("bytes=-10", 100), Part(90, 99));
        assert_eq!(parse_range("bytes=-500", 100), Part(0, 99));
        assert_eq!(parse_range("BYTES = 5-5", 100), Part(5, 5));
        assert_eq!(parse_range("bytes=100-", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=0-", 0), Unsatisfiable);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Full);
        assert_eq!(parse_range("bytes=5-1", 100), Full);
        assert_eq!(parse_range("items=0-1", 100), Full);
        assert_eq!(parse_range("bytes=x-1", 100), Full);
        assert_eq!(parse_range("bytes=+1-2", 100), Full);
    }

    #[test]
    fn active_types() {
        for t in [
            "text/html",
            "TEXT/HTML; charset=utf-8",
            "image/svg+xml",
            "Image/SVG+XML",
            "application/xhtml+xml",
            "application/xml",
            "text/xml",
            "application/javascript",
            "text/javascript",
            "application/x-javascript",
            "application/ecmascript",
            "garbage",
        ] {
            assert!(is_active_type(t), "{t}");
        }
        for t in [
            "image/png",
            "application/octet-stream",
            "text/plain",
            "application/json",
        ] {
            assert!(!is_active_type(t), "{t}");
        }
    }

    #[test]
    fn disposition_escapes_filename() {
        let disposition = |m: &MediaRecord| {
            let kind = if is_active_type(&m.content_type) {
                "attachment"
            } else {
                "inline"
            };
            disposition_for(kind, m.filename.as_deref())
        };
        let mut m = MediaRecord {
            seq: 1,
            id: "x".into(),
            owner: "admin".into(),
            field: None,
            filename: Some("a \"b\"é.svg".into()),
            content_type: "image/svg+xml".into(),
            size: 0,
            sha256: String::new(),
            created: 0,
            width: None,
            height: None,
        };
        assert_eq!(
            disposition(&m),
            "attachment; filename=\"a _b__.svg\"; filename*=UTF-8''a%20%22b%22%C3%A9.svg"
        );
        m.content_type = "image/png".into();
        m.filename = None;
        assert_eq!(disposition(&m), "inline");
    }

    #[test]
    fn if_none_match() {
        let mut h = HeaderMap::new();
        assert!(!none_match(&h, "\"a\""));
        h.insert(header::IF_NONE_MATCH, "\"b\", W/\"a\"".parse().unwrap());
        assert!(none_match(&h, "\"a\""));
        h.insert(header::IF_NONE_MATCH, "\"b\"".parse().unwrap());
        assert!(!none_match(&h, "\"a\""));
        h.insert(header::IF_NONE_MATCH, "*".parse().unwrap());
        assert!(none_match(&h, "\"a\""));
    }
}
