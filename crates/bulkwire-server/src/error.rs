//! The server's one error type and its HTTP mapping (DESIGN.md "Errors").
//!
//! Every failure a client can cause or see becomes an [`ApiError`]: a stable
//! kind (the JSON `error` field), a message, for a limit its name and value,
//! and the HTTP status — malformed 400, over a limit 413, stalled body 408,
//! unsupported media type 415, credentials 401, saturated 503 with
//! `Retry-After`. The body is
//! `{"error": kind, "message": …, "limit": {"name", "value"} | null}`.

use bulkwire_multipart::{Error as MpError, ErrorKind as MpKind, LimitKind};
use http::StatusCode;
use std::fmt;

/// Broad class of an error; decides status and metrics label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    Malformed,
    Truncated,
    Limit,
    Unsupported,
    Unauthorized,
    Timeout,
    /// A concurrency or memory cap is reached; retry later.
    Busy,
    NotFound,
    MethodNotAllowed,
    /// A body without a length where one is needed (411).
    LengthRequired,
    /// The client went away mid-body; nobody will read the response.
    Aborted,
    /// Storage failed (I/O or database error).
    Storage,
    /// The disk (or quota) is full.
    StorageFull,
    /// A store cannot be reached (503 with `Retry-After`).
    Unavailable,
    /// The request may not change this resource (a finished upload).
    Forbidden,
    /// The request does not fit the resource's state (a resumable
    /// upload's offset, 409).
    Conflict,
    /// The resource existed and is gone for good (an expired upload, 410).
    Gone,
    /// A protocol version the server does not speak (412).
    Precondition,
    /// The body does not match its checksum (tus: 460).
    Checksum,
    /// A per-client count is reached (429).
    TooMany,
    /// A request the server understood about content it cannot process:
    /// an image that does not decode (422).
    Unprocessable,
    /// The application's hook said no (`crate::hooks`): its status, 403
    /// unless it named another.
    Refused,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Malformed => "malformed",
            Kind::Truncated => "truncated",
            Kind::Limit => "limit",
            Kind::Unsupported => "unsupported",
            Kind::Unauthorized => "unauthorized",
            Kind::Timeout => "timeout",
            Kind::Busy => "busy",
            Kind::NotFound => "not_found",
            Kind::MethodNotAllowed => "method_not_allowed",
            Kind::LengthRequired => "length_required",
            Kind::Aborted => "aborted",
            Kind::Storage => "storage",
            Kind::StorageFull => "storage_full",
            Kind::Unavailable => "unavailable",
            Kind::Forbidden => "forbidden",
            Kind::Conflict => "conflict",
            Kind::Gone => "gone",
            Kind::Precondition => "precondition_failed",
            Kind::Checksum => "checksum_mismatch",
            Kind::TooMany => "too_many",
            Kind::Unprocessable => "unprocessable",
            Kind::Refused => "refused",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Kind::Malformed | Kind::Truncated | Kind::Aborted => StatusCode::BAD_REQUEST,
            Kind::Limit => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::Unsupported => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Kind::Unauthorized => StatusCode::UNAUTHORIZED,
            Kind::Timeout => StatusCode::REQUEST_TIMEOUT,
            Kind::Busy => StatusCode::SERVICE_UNAVAILABLE,
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Kind::LengthRequired => StatusCode::LENGTH_REQUIRED,
            Kind::Storage => StatusCode::INTERNAL_SERVER_ERROR,
            Kind::StorageFull => StatusCode::INSUFFICIENT_STORAGE,
            Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Kind::Forbidden => StatusCode::FORBIDDEN,
            Kind::Conflict => StatusCode::CONFLICT,
            Kind::Gone => StatusCode::GONE,
            Kind::Precondition => StatusCode::PRECONDITION_FAILED,
            // tus 1.0 checksum extension: "460 Checksum Mismatch".
            Kind::Checksum => StatusCode::from_u16(460).unwrap_or(StatusCode::BAD_REQUEST),
            Kind::TooMany => StatusCode::TOO_MANY_REQUESTS,
            Kind::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
            Kind::Refused => StatusCode::FORBIDDEN,
        }
    }
}

/// An error answered to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub kind: Kind,
    pub message: String,
    /// For [`Kind::Limit`] and [`Kind::Busy`]: which cap and its value.
    pub limit: Option<(&'static str, u64)>,
    /// For [`Kind::MethodNotAllowed`]: the methods the resource takes, sent
    /// as `Allow` (RFC 9110 section 15.5.6 requires it on a 405).
    pub allow: Option<&'static str>,
    /// Seconds for `Retry-After`, where the kind's default does not fit (a
    /// throttled login's wait).
    pub retry_after: Option<u64>,
    /// The status a hook's refusal named, over the kind's.
    pub refused_with: Option<StatusCode>,
}

impl ApiError {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            message: message.into(),
            limit: None,
            allow: None,
            retry_after: None,
            refused_with: None,
        }
    }

    /// 405: the resource exists but takes only the methods in `allow`
    /// (e.g. `"GET, HEAD"`).
    pub fn method_not_allowed(method: &http::Method, allow: &'static str) -> Self {
        ApiError {
            allow: Some(allow),
            ..ApiError::new(
                Kind::MethodNotAllowed,
                format!("{method} is not allowed here; this resource takes {allow}"),
            )
        }
    }

    /// Over the limit `name` whose configured value is `value`. The message
    /// says where to change it and gives the value in its unit
    /// (`over the limit [limits] body_bytes = 8 GiB`); the JSON's `limit`
    /// keeps the number.
    pub fn limit(name: &'static str, value: u64) -> Self {
        ApiError {
            kind: Kind::Limit,
            message: format!("over the limit {}", limit_text(name, value)),
            limit: Some((name, value)),
            allow: None,
            retry_after: None,
            refused_with: None,
        }
    }

    /// A cap on concurrent work is reached (503 with `Retry-After`).
    pub fn busy(name: &'static str, value: u64) -> Self {
        ApiError {
            kind: Kind::Busy,
            message: format!(
                "server busy: {} reached, retry later",
                limit_text(name, value)
            ),
            limit: Some((name, value)),
            allow: None,
            retry_after: None,
            refused_with: None,
        }
    }

    /// 413 for an owner's quota: the limit, the owner's usage and what the
    /// upload would add.
    pub fn over_quota(o: &crate::store::OverQuota) -> Self {
        let show = |v: u64| match o.limit {
            "quota_bytes" => bulkwire_units::format_size(v),
            _ => v.to_string(),
        };
        ApiError {
            kind: Kind::Limit,
            message: format!(
                "over quota: {} = {}; the owner holds {} and this upload adds {}",
                o.limit,
                show(o.value),
                show(o.usage),
                show(o.adding)
            ),
            limit: Some((o.limit, o.value)),
            allow: None,
            retry_after: None,
            refused_with: None,
        }
    }

    pub fn storage(e: impl fmt::Display) -> Self {
        ApiError::new(Kind::Storage, format!("storage error: {e}"))
    }

    pub fn status(&self) -> StatusCode {
        self.refused_with.unwrap_or(self.kind.status())
    }

    /// A hook's refusal: its status (a 4xx or 5xx; anything else is 403)
    /// and its message, as the client is to see them.
    pub fn refused(status: u16, message: impl Into<String>) -> Self {
        let s = StatusCode::from_u16(status)
            .ok()
            .filter(|s| s.is_client_error() || s.is_server_error());
        ApiError {
            refused_with: Some(s.unwrap_or(StatusCode::FORBIDDEN)),
            ..ApiError::new(Kind::Refused, message)
        }
    }

    /// Label for the `rejected` metric: the kind, and for a limit its name.
    pub fn reason(&self) -> String {
        match self.limit {
            Some((name, _)) => format!("{}:{name}", self.kind.as_str()),
            None => self.kind.as_str().to_string(),
        }
    }

    /// The JSON body.
    pub fn to_json(&self) -> serde_json::Value {
        let limit = self
            .limit
            .map(|(name, value)| serde_json::json!({"name": name, "value": value}));
        serde_json::json!({
            "error": self.kind.as_str(),
            "message": self.message,
            "limit": limit,
        })
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl std::error::Error for ApiError {}

/// Size limits whose names do not end in `_bytes`.
const SIZE_LIMITS: [&str; 5] = [
    "preamble",
    "epilogue",
    "read_buffer",
    "write_batch",
    "memory_budget",
];

/// A limit as a person finds it: `[limits] body_bytes = 8 GiB` for a key
/// of [`crate::Limits`] (the TOML table it is set in), the value in the
/// unit its name gives (`_bytes` and the other sizes in binary units,
/// `_ms`/`_s` as durations, `min_body_rate` per second); any other cap
/// (a codec's fixed one) as `name = value`.
pub fn limit_text(name: &str, value: u64) -> String {
    use bulkwire_units::{format_duration, format_size};
    use std::time::Duration;
    let v = if name.ends_with("_ms") || name == "variant_timeout" {
        format_duration(Duration::from_millis(value))
    } else if name.ends_with("_s") || name == "login_window" {
        format_duration(Duration::from_secs(value))
    } else if name == "min_body_rate" {
        format!("{}/s", format_size(value))
    } else if name.ends_with("_bytes") || SIZE_LIMITS.contains(&name) {
        format_size(value)
    } else {
        value.to_string()
    };
    if crate::config::Limits::has_key(name) {
        format!("[limits] {name} = {v}")
    } else {
        format!("{name} = {v}")
    }
}

/// A metadata error: 507 when the store is out of room, 503 when it cannot
/// be reached, else 500.
impl From<crate::store::MetaError> for ApiError {
    fn from(e: crate::store::MetaError) -> Self {
        if let Some(o) = e.over_quota {
            return ApiError::over_quota(&o);
        }
        if e.full {
            return ApiError::new(Kind::StorageFull, format!("storage full: {e}"));
        }
        if e.unavailable {
            return ApiError::new(Kind::Unavailable, format!("{e}; retry later"));
        }
        ApiError::storage(e)
    }
}

/// The server's name for a codec limit: the codec's own name, except where
/// the server's [`crate::Limits`] field is called differently.
fn limit_name(l: LimitKind) -> &'static str {
    match l {
        LimitKind::HeaderBytes => "part_header_bytes",
        LimitKind::Headers => "part_headers",
        other => other.name(),
    }
}

impl From<MpError> for ApiError {
    fn from(e: MpError) -> Self {
        if let Some((l, v)) = e.limit_exceeded() {
            let mut a = ApiError::limit(limit_name(l), v);
            a.message = format!("{a}: {e}", a = a.message);
            return a;
        }
        let kind = match e.kind() {
            MpKind::Truncated => Kind::Truncated,
            MpKind::Unsupported => Kind::Unsupported,
            _ => Kind::Malformed,
        };
        ApiError::new(kind, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkwire_multipart::{Limits, Parser};

    #[test]
    fn json_shape_for_limit_and_plain_errors() {
        let j = ApiError::limit("file_bytes", 10).to_json();
        assert_eq!(j["error"], "limit");
        assert_eq!(j["limit"]["name"], "file_bytes");
        assert_eq!(j["limit"]["value"], 10);
        let j = ApiError::new(Kind::Malformed, "x").to_json();
        assert!(j["limit"].is_null());
        assert_eq!(j["message"], "x");
    }

    /// Rough edge 9 of the first hour: a 413 said `limit body_bytes =
    /// 8589934592 exceeded`, raw bytes and nothing about where to change it.
    #[test]
    fn limit_messages_give_human_sizes_and_the_config_key() {
        let e = ApiError::limit("body_bytes", 8 << 30);
        assert_eq!(e.message, "over the limit [limits] body_bytes = 8 GiB");
        assert_eq!(e.limit, Some(("body_bytes", 8 << 30)), "the number stays");
        let e = ApiError::busy("memory_budget", 256 << 20);
        assert!(
            e.message.contains("[limits] memory_budget = 256 MiB"),
            "{e}"
        );
        assert!(ApiError::limit("parts", 256)
            .message
            .ends_with("[limits] parts = 256"));
        let t = limit_text("idle_timeout_ms", 30_000);
        assert_eq!(t, "[limits] idle_timeout_ms = 30s");
        assert_eq!(
            limit_text("upload_expiry_s", 86_400),
            "[limits] upload_expiry_s = 1d"
        );
        assert_eq!(
            limit_text("min_body_rate", 500),
            "[limits] min_body_rate = 500 B/s"
        );
        assert_eq!(
            limit_text("write_batch", 1 << 20),
            "[limits] write_batch = 1 MiB"
        );
        // Not a key of the config file: no table to point at.
        assert_eq!(limit_text("xmlrpc_staging", 16), "xmlrpc_staging = 16");
    }

    /// Every key of `[limits]` reads in a unit: sizes, durations and counts
    /// are told apart by name, so a new size key must end in `_bytes` or be
    /// listed in `SIZE_LIMITS`; this catches one that reads as a count.
    #[test]
    fn every_size_limit_is_shown_as_a_size() {
        let d = serde_json::to_value(crate::Limits::default()).unwrap();
        for (k, v) in d.as_object().unwrap() {
            let Some(n) = v.as_u64() else { continue };
            let t = limit_text(k, n);
            let counts = [
                "parts",
                "fields",
                "xmlrpc_multicall",
                "part_headers",
                "max_uploads",
                "soap_early_attachments",
                "list_limit",
                "auth_cache_entries",
                "media_cache_entries",
                "password_checks",
                "meta_connections",
                "open_uploads",
                "concat_uploads",
                "login_failures",
                "login_table_entries",
                "variant_max_pixels",
                "variant_queue",
                "connection_threads",
            ];
            let unitless = t.ends_with(&format!("= {n}"));
            assert_eq!(unitless, counts.contains(&k.as_str()), "{k}: {t}");
        }
    }

    #[test]
    fn a_full_metadata_store_is_507_any_other_error_500() {
        use crate::store::MetaError;
        let e = ApiError::from(MetaError::full("database or disk is full"));
        assert_eq!((e.status().as_u16(), e.kind), (507, Kind::StorageFull));
        assert_eq!(ApiError::from(MetaError::new("x")).status(), 500);
    }

    #[test]
    fn codec_errors_map_to_statuses_and_server_limit_names() {
        let e: ApiError = Parser::from_content_type("text/plain", Limits::default())
            .unwrap_err()
            .into();
        assert_eq!(e.status(), 415);
        let mut p = Parser::from_content_type(
            "multipart/form-data; boundary=b",
            Limits {
                header_bytes: 8,
                ..Limits::default()
            },
        )
        .unwrap();
        let body = b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--b--";
        let mut off = 0;
        let e: ApiError = loop {
            match p.step(&body[off..], true) {
                Err(e) => break e.into(),
                Ok(s) if s.consumed == 0 => panic!("no error"),
                Ok(s) => off += s.consumed,
            }
        };
        assert_eq!(e.status(), 413);
        assert_eq!(e.limit, Some(("part_header_bytes", 8)));
    }
}
