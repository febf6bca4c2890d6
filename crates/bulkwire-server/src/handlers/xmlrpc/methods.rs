//! The XML-RPC method table and every method but the uploads' streaming
//! part: `system.*` introspection (the de-facto XML-RPC introspection API
//! that WordPress's IXR server implements), `system.multicall`,
//! `mt.supportedMethods`, `wp.getMediaItem`, `wp.getMediaLibrary`, and the
//! WordPress media struct (`wp_xmlrpc_server::_prepare_media_item`) that
//! `wp.uploadFile` and `metaWeblog.newMediaObject` answer with.
//!
//! The table is built once at start-up into a hash map (DESIGN.md "The
//! request path does no filesystem search"): a call costs one lookup.

use super::Failure;
use crate::principal::{Principal, Scopes};
use crate::state::AppState;
use crate::store::{is_id, ListQuery, MediaRecord, Order};
use bulkwire_xmlrpc::{DateTime, Fault, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// A parsed parameter: a `base64` value stands as its length.
pub type In = Value<u64>;
/// A result (no blobs in answers).
pub type Out = Value<Vec<u8>>;

/// WordPress's fault string for a bad login (`wp_xmlrpc_server::login`).
pub const BAD_LOGIN: &str = "Incorrect username or password.";
/// [`BAD_LOGIN`] on a server without users.
pub const NO_USERS: &str = "Incorrect username or password. This server has no users yet: \
    XML-RPC logs in with a user made by `bulkwire user add NAME` (the API token is for the \
    HTTP API only).";
/// IXR's fault for recursive multicalls.
pub const RECURSIVE_MULTICALL: i32 = -32800;

/// What a method does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Id {
    UploadFile,
    NewMediaObject,
    GetMediaItem,
    GetMediaLibrary,
    SupportedMethods,
    ListMethods,
    MethodHelp,
    MethodSignature,
    Multicall,
    DeletePost,
}

/// One entry of the table.
#[derive(Debug)]
pub struct Info {
    pub name: &'static str,
    pub id: Id,
    /// Return type, then parameter types (`system.methodSignature`).
    pub signature: &'static [&'static str],
    pub help: &'static str,
}

impl Info {
    /// `bits` stream to storage: only these methods may carry `base64`.
    pub fn is_upload(&self) -> bool {
        matches!(self.id, Id::UploadFile | Id::NewMediaObject)
    }
}

const UPLOAD_SIG: &[&str] = &["struct", "int", "string", "string", "struct"];
const UPLOAD_HELP: &str = "Uploads a file: blog_id, username, password, \
    {name, type, bits, overwrite}. Returns {id, file, url, type, ...}. \
    The bits stream to storage; overwrite is accepted and ignored (every \
    upload is a new object).";

static TABLE: [Info; 10] = [
    Info {
        name: "wp.uploadFile",
        id: Id::UploadFile,
        signature: UPLOAD_SIG,
        help: UPLOAD_HELP,
    },
    Info {
        name: "metaWeblog.newMediaObject",
        id: Id::NewMediaObject,
        signature: UPLOAD_SIG,
        help: UPLOAD_HELP,
    },
    Info {
        name: "wp.getMediaItem",
        id: Id::GetMediaItem,
        signature: &["struct", "int", "string", "string", "string"],
        help: "Returns one media item: blog_id, username, password, attachment_id.",
    },
    Info {
        name: "wp.getMediaLibrary",
        id: Id::GetMediaLibrary,
        signature: &["array", "int", "string", "string", "struct"],
        help: "Lists media items in upload order: blog_id, username, password, \
               {number, offset, mime_type, parent_id}.",
    },
    Info {
        name: "wp.deletePost",
        id: Id::DeletePost,
        signature: &["boolean", "int", "string", "string", "string"],
        help: "Deletes a media item (an attachment): blog_id, username, password, post_id. \
               An author deletes their own items, an editor or administrator anyone's.",
    },
    Info {
        name: "mt.supportedMethods",
        id: Id::SupportedMethods,
        signature: &["array"],
        help: "Returns the names of the methods this server supports.",
    },
    Info {
        name: "system.listMethods",
        id: Id::ListMethods,
        signature: &["array"],
        help: "Returns the names of the methods this server supports.",
    },
    Info {
        name: "system.methodHelp",
        id: Id::MethodHelp,
        signature: &["string", "string"],
        help: "Returns a description of the named method.",
    },
    Info {
        name: "system.methodSignature",
        id: Id::MethodSignature,
        signature: &["array", "string"],
        help: "Returns the signatures of the named method: arrays of type names, \
               the return type first.",
    },
    Info {
        name: "system.multicall",
        id: Id::Multicall,
        signature: &["array", "array"],
        help: "Runs an array of {methodName, params} calls (uploads excluded) and \
               returns one [result] or fault struct for each.",
    },
];

/// The method table, built at start-up.
#[derive(Debug)]
pub struct Methods {
    by_name: HashMap<&'static str, &'static Info>,
}

impl Default for Methods {
    fn default() -> Self {
        Methods::new()
    }
}

impl Methods {
    pub fn new() -> Methods {
        Methods {
            by_name: TABLE.iter().map(|i| (i.name, i)).collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&'static Info> {
        self.by_name.get(name).copied()
    }

    /// Every method name, in table order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        TABLE.iter().map(|i| i.name)
    }
}

/// What the methods need of the request.
pub struct Ctx<'a> {
    pub state: &'a Arc<AppState>,
    /// `http://host` from the request, for absolute URLs; empty when the
    /// `Host` header is absent or odd (URLs are then relative).
    pub base: &'a str,
    /// The client's address (login throttling).
    pub client: Option<std::net::IpAddr>,
    /// The request's extensions (its access line names the principal).
    pub extensions: &'a http::Extensions,
}

pub fn no_method(name: &str) -> Fault {
    Fault::new(
        Fault::METHOD_NOT_FOUND,
        format!("server error. requested method {name} does not exist."),
    )
}

pub fn invalid_params(detail: &str) -> Fault {
    Fault::new(
        Fault::INVALID_PARAMS,
        format!("server error. wrong number of method parameters: {detail}"),
    )
}

/// Checks params 1 and 2 (username, password) against the users (with
/// the name `jwt`, the password is the application's JWT), then that the
/// principal holds `scope`; the principal.
pub async fn login(ctx: &Ctx<'_>, params: &[In], scope: Scopes) -> Result<Principal, Failure> {
    let state = ctx.state;
    let (Some(user), Some(pass)) = (params.get(1), params.get(2)) else {
        return Err(invalid_params("blog_id, username and password are required").into());
    };
    let (Some(user), Some(pass)) = (text(user), text(pass)) else {
        return Err(invalid_params("username and password must be strings").into());
    };
    let verdict = state
        .auth
        .login(&*state.meta, &user, pass.as_bytes(), ctx.client)
        .await;
    match verdict {
        Ok(Ok(who)) => {
            crate::access::set_principal(ctx.extensions, &who.name);
            who.require(scope).map_err(scope_fault)?;
            Ok(who)
        }
        Ok(Err(crate::auth::Refusal::Throttled(t))) => Err(t.error().into()),
        Ok(Err(_)) => Err(bad_login(state).await),
        Err(e) => Err(crate::ApiError::from(e).into()),
    }
}

/// WordPress answers 401 "Sorry, you are not allowed to …" for a
/// capability a user lacks: the same code, with the scope named.
fn scope_fault(e: crate::ApiError) -> Failure {
    Fault::new(
        401,
        format!("Sorry, you are not allowed to do that: {}", e.message),
    )
    .into()
}

/// WordPress's answer to a wrong login; on a server that has no user at
/// all (a fresh zero-configuration start has only a token), also how to
/// make one: XML-RPC logs in with a name and password, never a token.
async fn bad_login(state: &AppState) -> Failure {
    match state.auth.any_user(&*state.meta).await {
        Ok(false) => Fault::new(Fault::FORBIDDEN, NO_USERS).into(),
        Ok(true) => Fault::new(Fault::FORBIDDEN, BAD_LOGIN).into(),
        Err(e) => crate::ApiError::from(e).into(),
    }
}

/// A string, or an int given where a string is expected (PHP would
/// convert it).
fn text(v: &In) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Int(_) | Value::I8(_) => v.as_i64().map(|i| i.to_string()),
        _ => None,
    }
}

/// Runs a method that carries no upload.
pub async fn dispatch(ctx: &Ctx<'_>, info: &Info, params: &[In]) -> Result<Out, Failure> {
    match info.id {
        Id::Multicall => multicall(ctx, params).await,
        _ => simple(ctx, info, params).await,
    }
}

/// Every method but `system.multicall` and the uploads.
async fn simple(ctx: &Ctx<'_>, info: &Info, params: &[In]) -> Result<Out, Failure> {
    match info.id {
        Id::SupportedMethods | Id::ListMethods => Ok(names()),
        Id::MethodHelp => Ok(Value::String(named(ctx, params)?.help.to_string())),
        Id::MethodSignature => Ok(signature(named(ctx, params)?)),
        Id::GetMediaItem => media_item(ctx, params).await,
        Id::GetMediaLibrary => library(ctx, params).await,
        Id::DeletePost => delete_post(ctx, params).await,
        Id::Multicall => Err(Fault::new(
            RECURSIVE_MULTICALL,
            "Recursive calls to system.multicall are forbidden",
        )
        .into()),
        Id::UploadFile | Id::NewMediaObject => Err(invalid_params(
            "uploads are not accepted inside system.multicall (their bits must stream)",
        )
        .into()),
    }
}

fn names() -> Out {
    Value::Array(
        Methods::names()
            .map(|n| Value::String(n.to_string()))
            .collect(),
    )
}

/// The method named by the one parameter of `system.methodHelp` and
/// `system.methodSignature`.
fn named(ctx: &Ctx<'_>, params: &[In]) -> Result<&'static Info, Failure> {
    let name = params
        .first()
        .and_then(Value::as_str)
        .ok_or_else(|| invalid_params("a method name is required"))?;
    Ok(ctx.state.xmlrpc.get(name).ok_or_else(|| no_method(name))?)
}

fn signature(info: &Info) -> Out {
    let one = info
        .signature
        .iter()
        .map(|t| Value::String(t.to_string()))
        .collect();
    Value::Array(vec![Value::Array(one)])
}

/// `system.multicall`: at most [`crate::Limits::xmlrpc_multicall`] calls,
/// each answered with `[result]` or a fault struct.
async fn multicall(ctx: &Ctx<'_>, params: &[In]) -> Result<Out, Failure> {
    let Some(Value::Array(calls)) = params.first() else {
        return Err(invalid_params("system.multicall takes an array of calls").into());
    };
    let cap = ctx.state.config.limits.xmlrpc_multicall;
    if calls.len() > cap {
        return Err(crate::ApiError::limit("xmlrpc_multicall", cap as u64).into());
    }
    let mut out = Vec::with_capacity(calls.len());
    for c in calls {
        out.push(match one_of_many(ctx, c).await {
            Ok(v) => Value::Array(vec![v]),
            Err(f) => fault_struct(&f.fault()),
        });
    }
    Ok(Value::Array(out))
}

async fn one_of_many(ctx: &Ctx<'_>, c: &In) -> Result<Out, Failure> {
    let name = c
        .get("methodName")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid_params("each call needs a methodName string"))?;
    let info = ctx.state.xmlrpc.get(name).ok_or_else(|| no_method(name))?;
    let params = match c.get("params") {
        Some(Value::Array(p)) => p.as_slice(),
        None => &[],
        Some(_) => return Err(invalid_params("params must be an array").into()),
    };
    simple(ctx, info, params).await
}

/// A fault as a value (inside a multicall answer).
pub fn fault_struct(f: &Fault) -> Out {
    Value::Struct(vec![
        ("faultCode".into(), Value::Int(f.code)),
        ("faultString".into(), Value::String(f.string.clone())),
    ])
}

fn not_found() -> Fault {
    Fault::new(404, "Invalid attachment ID.")
}

/// `wp.getMediaItem(blog_id, username, password, attachment_id)`.
async fn media_item(ctx: &Ctx<'_>, params: &[In]) -> Result<Out, Failure> {
    let who = login(ctx, params, Scopes::READ).await?;
    let id = params
        .get(3)
        .and_then(text)
        .ok_or_else(|| invalid_params("attachment_id is required"))?;
    if !is_id(&id) {
        return Err(not_found().into());
    }
    let m = ctx.state.meta.get(&id, who.owner()).await;
    let m = m.map_err(storage_fault)?.ok_or_else(not_found)?;
    Ok(media_struct(
        &m,
        ctx.base,
        &ctx.state.links,
        who.gets_links(),
    ))
}

/// `wp.deletePost(blog_id, username, password, post_id)` for an
/// attachment: as `DELETE /v1/media/{id}`, another owner's item as a
/// missing one.
async fn delete_post(ctx: &Ctx<'_>, params: &[In]) -> Result<Out, Failure> {
    let who = login(ctx, params, Scopes::DELETE).await?;
    let id = params
        .get(3)
        .and_then(text)
        .ok_or_else(|| invalid_params("post_id is required"))?;
    match crate::handlers::media::delete(ctx.state, &id, &who).await {
        Ok(_) => Ok(Value::Bool(true)),
        Err(e) if e.kind == crate::Kind::NotFound => {
            Err(Fault::new(404, "Invalid post ID.").into())
        }
        Err(e) => Err(e.into()),
    }
}

fn storage_fault(e: impl std::fmt::Display) -> Failure {
    crate::ApiError::storage(e).into()
}

/// The `filter` of `wp.getMediaLibrary`.
struct Filter {
    number: usize,
    offset: usize,
    mime: Option<String>,
    /// A `parent_id` other than 0 or "": no media is attached to a post
    /// here, so nothing matches.
    other_parent: bool,
}

impl Filter {
    fn from(v: Option<&In>, max: usize) -> Filter {
        let int = |k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_i64);
        let number = int("number").filter(|n| *n > 0).map_or(max, |n| n as usize);
        let parent = v.and_then(|v| v.get("parent_id")).and_then(text);
        Filter {
            number: number.min(max),
            offset: int("offset").unwrap_or(0).max(0) as usize,
            mime: v
                .and_then(|v| v.get("mime_type"))
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_string),
            other_parent: parent.is_some_and(|p| !p.is_empty() && p != "0"),
        }
    }

    /// WordPress matches `image` against `image/png` and the full type.
    fn matches(&self, m: &MediaRecord) -> bool {
        match &self.mime {
            None => true,
            Some(t) => {
                let ct = m.content_type.split(';').next().unwrap_or("").trim();
                ct == t
                    || ct
                        .strip_prefix(t.as_str())
                        .is_some_and(|r| r.starts_with('/'))
            }
        }
    }
}

/// `wp.getMediaLibrary(blog_id, username, password, filter)`: at most
/// [`crate::Limits::list_limit`] items, in upload order.
async fn library(ctx: &Ctx<'_>, params: &[In]) -> Result<Out, Failure> {
    let who = login(ctx, params, Scopes::READ).await?;
    let max = ctx.state.config.limits.list_limit;
    let f = Filter::from(params.get(3), max);
    let mut out = Vec::new();
    if f.other_parent {
        return Ok(Value::Array(out));
    }
    let mut q = ListQuery::new(Order::OldestFirst, max);
    // An author's library is their own items, as in WordPress.
    q.owner = who.owner().map(str::to_string);
    let mut skip = f.offset;
    while out.len() < f.number {
        let page = ctx.state.meta.list(q.clone()).await;
        let page = page.map_err(storage_fault)?;
        let Some(last) = page.last() else { break };
        q.after = Some(last.seq);
        for m in page.iter().filter(|m| f.matches(m)) {
            if skip > 0 {
                skip -= 1;
            } else if out.len() < f.number {
                out.push(media_struct(m, ctx.base, &ctx.state.links, true));
            }
        }
    }
    Ok(Value::Array(out))
}

/// WordPress's media struct, plus the `id`, `file` and `url` members that
/// `wp.uploadFile` adds (`mw_newMediaObject`). `metadata` carries the
/// size and the SHA-256 (WordPress has `filesize` there too).
/// `url`, `link` and an image's `thumbnail` are its capability link
/// (`crate::links`): a WordPress client or an `<img>` fetches it as is.
/// Links go only to a principal with `read` (`readable`); for another
/// (a JWT that may only upload) the three are empty strings.
pub fn media_struct(
    m: &MediaRecord,
    base: &str,
    links: &crate::links::Links,
    readable: bool,
) -> Out {
    let link = match readable {
        true => format!("{base}{}", links.path(&m.id)),
        false => String::new(),
    };
    let name = m.filename.clone().unwrap_or_default();
    let s = |v: &str| Value::String(v.to_string());
    let size = i32::try_from(m.size).map_or(Value::I8(m.size as i64), Value::Int);
    let thumb = if m.content_type.starts_with("image/") && readable {
        link.as_str()
    } else {
        ""
    };
    Value::Struct(vec![
        ("attachment_id".into(), s(&m.id)),
        ("id".into(), s(&m.id)),
        ("date_created_gmt".into(), date(m.created)),
        ("parent".into(), Value::Int(0)),
        ("link".into(), s(&link)),
        ("url".into(), s(&link)),
        ("title".into(), s(&name)),
        ("file".into(), s(&name)),
        ("caption".into(), s("")),
        ("description".into(), s("")),
        (
            "metadata".into(),
            Value::Struct(vec![
                ("filesize".into(), size),
                ("sha256".into(), s(&m.sha256)),
            ]),
        ),
        ("type".into(), s(&m.content_type)),
        ("thumbnail".into(), s(thumb)),
    ])
}

fn date(secs: i64) -> Out {
    let t = iso8601(secs);
    match DateTime::parse(&t) {
        Some(d) => Value::DateTime(d),
        None => Value::String(t),
    }
}

/// Seconds since the epoch as XML-RPC's `YYYYMMDDTHH:MM:SS` (UTC).
pub fn iso8601(secs: i64) -> String {
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    format!(
        "{y:04}{m:02}{d:02}T{:02}:{:02}:{:02}",
        t / 3600,
        t % 3600 / 60,
        t % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms").
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_iso8601() {
        assert_eq!(iso8601(0), "19700101T00:00:00");
        assert_eq!(iso8601(951_782_400 + 3661), "20000229T01:01:01");
        assert_eq!(iso8601(1_700_000_000), "20231114T22:13:20");
        assert_eq!(iso8601(-1), "19691231T23:59:59");
        assert!(matches!(date(1_700_000_000), Value::DateTime(_)));
    }

    #[test]
    fn table_is_complete_and_consistent() {
        let m = Methods::new();
        for n in Methods::names() {
            let i = m.get(n).unwrap();
            assert_eq!(i.name, n);
            assert!(!i.help.is_empty() && !i.signature.is_empty());
        }
        assert_eq!(Methods::names().count(), m.by_name.len());
        assert!(m.get("wp.uploadFile").unwrap().is_upload());
        assert!(m.get("metaWeblog.newMediaObject").unwrap().is_upload());
        assert!(!m.get("system.multicall").unwrap().is_upload());
        assert!(!m.get("wp.deletePost").unwrap().is_upload());
    }

    fn rec(ct: &str) -> MediaRecord {
        MediaRecord {
            seq: 1,
            id: "0".repeat(32),
            owner: "admin".into(),
            field: None,
            filename: Some("a.png".into()),
            content_type: ct.into(),
            size: 3,
            sha256: "ab".into(),
            created: 0,
        }
    }

    #[test]
    fn library_filter_mime_and_number() {
        let v: In = Value::Struct(vec![
            ("number".into(), Value::Int(5000)),
            ("mime_type".into(), Value::String("image".into())),
            ("parent_id".into(), Value::String("".into())),
        ]);
        let f = Filter::from(Some(&v), 100);
        assert_eq!((f.number, f.offset, f.other_parent), (100, 0, false));
        assert!(f.matches(&rec("image/png")));
        assert!(!f.matches(&rec("imagex/png")));
        assert!(!f.matches(&rec("text/plain")));
        let v: In = Value::Struct(vec![("parent_id".into(), Value::Int(7))]);
        assert!(Filter::from(Some(&v), 10).other_parent);
        assert_eq!(Filter::from(None, 10).number, 10);
    }

    #[test]
    fn media_struct_has_wordpress_members() {
        let links = crate::links::Links::new(vec![1; 32], None);
        let v = media_struct(&rec("image/png"), "http://h", &links, true);
        let url = format!("http://h{}", links.path(&"0".repeat(32)));
        assert!(url.starts_with("http://h/v1/media/00000000"), "{url}");
        assert_eq!(v.get("url").and_then(Value::as_str), Some(url.as_str()));
        assert_eq!(
            v.get("thumbnail").and_then(Value::as_str),
            Some(url.as_str())
        );
        assert_eq!(v.get("file").and_then(Value::as_str), Some("a.png"));
        assert_eq!(v.get("type").and_then(Value::as_str), Some("image/png"));
        let md = v.get("metadata").unwrap();
        assert_eq!(md.get("filesize").and_then(Value::as_i64), Some(3));
        let big = MediaRecord {
            size: 5 << 30,
            ..rec("x/y")
        };
        let v = media_struct(&big, "", &links, true);
        let md = v.get("metadata").unwrap();
        assert_eq!(md.get("filesize"), Some(&Value::I8(5 << 30)));
        assert_eq!(v.get("thumbnail").and_then(Value::as_str), Some(""));
        // No link for a principal without read: url, link and thumbnail empty.
        let v = media_struct(&rec("image/png"), "http://h", &links, false);
        for k in ["url", "link", "thumbnail"] {
            assert_eq!(v.get(k).and_then(Value::as_str), Some(""), "{k}");
        }
        assert_eq!(v.get("id").and_then(Value::as_str), Some(&*"0".repeat(32)));
    }
}
