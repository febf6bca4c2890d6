//! The one error type of the multipart codec.
//!
//! An error says what went wrong ([`ErrorKind`]), where (absolute byte offset
//! into the body, index of the part being parsed) and, for a limit, which one
//! and its configured value. [`Error::http_status`] maps it for servers.

use crate::limits::LimitKind;
use std::fmt;

/// Broad class of an error; decides the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The bytes break RFC 2046 / RFC 7578 syntax.
    Malformed,
    /// A configured [`crate::Limits`] value was exceeded.
    Limit,
    /// The body ended before the close delimiter.
    Truncated,
    /// Not a multipart media type this codec handles.
    Unsupported,
}

impl ErrorKind {
    /// Stable lower-case name, used in JSON error output.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Malformed => "malformed",
            ErrorKind::Limit => "limit",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Unsupported => "unsupported",
        }
    }
}

/// A parse or build error with its position. Boxed, so that the `Result`s
/// on the parser's hot path stay two words wide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(Box<Inner>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    kind: ErrorKind,
    message: &'static str,
    offset: u64,
    part: Option<usize>,
    limit: Option<(LimitKind, u64)>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: &'static str, offset: u64) -> Self {
        Error(Box::new(Inner {
            kind,
            message,
            offset,
            part: None,
            limit: None,
        }))
    }

    pub(crate) fn limit(limit: LimitKind, value: u64, offset: u64) -> Self {
        Error(Box::new(Inner {
            kind: ErrorKind::Limit,
            message: "limit exceeded",
            offset,
            part: None,
            limit: Some((limit, value)),
        }))
    }

    pub(crate) fn in_part(mut self, part: Option<usize>) -> Self {
        self.0.part = part;
        self
    }

    /// What class of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Short description of the cause, without position.
    pub fn message(&self) -> &'static str {
        self.0.message
    }

    /// Absolute byte offset into the body where the error was detected.
    pub fn offset(&self) -> u64 {
        self.0.offset
    }

    /// Zero-based index of the part being parsed, if any.
    pub fn part(&self) -> Option<usize> {
        self.0.part
    }

    /// For [`ErrorKind::Limit`]: which limit and its configured value.
    pub fn limit_exceeded(&self) -> Option<(LimitKind, u64)> {
        self.0.limit
    }

    /// HTTP status a server should answer with: 400 malformed or truncated,
    /// 413 over a limit, 415 unsupported media type.
    pub fn http_status(&self) -> u16 {
        match self.0.kind {
            ErrorKind::Malformed | ErrorKind::Truncated => 400,
            ErrorKind::Limit => 413,
            ErrorKind::Unsupported => 415,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.limit {
            Some((l, v)) => write!(f, "limit {} = {} exceeded", l.name(), v)?,
            None => write!(f, "{}: {}", self.0.kind.as_str(), self.0.message)?,
        }
        write!(f, " at byte {}", self.0.offset)?;
        if let Some(p) = self.0.part {
            write!(f, " (part {p})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}
