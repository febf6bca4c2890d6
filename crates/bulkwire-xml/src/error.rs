//! The one error type of the XML crate, shared by the tokenizer and the
//! base64 codec.
//!
//! An error says what went wrong ([`ErrorKind`]), where (absolute byte offset
//! of the offending byte: into the document for the tokenizer, into the
//! pushed text for the base64 decoder) and, for a limit, which one and its
//! configured value. [`Error::http_status`] maps it for servers.

use crate::limits::LimitKind;
use std::fmt;

/// Broad class of an error; decides the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The bytes break XML 1.0 well-formedness, Namespaces in XML 1.0, or
    /// base64 (RFC 4648 §4) syntax.
    Malformed,
    /// A configured [`crate::Limits`] value was exceeded.
    Limit,
    /// The input ended inside a construct (open elements, a tag, an entity
    /// reference, a base64 quantum).
    Truncated,
    /// Well-formed XML this crate refuses on purpose: document type
    /// declarations, entity declarations, encodings other than UTF-8.
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

/// A tokenizer or base64 error with its position. Boxed, so that the
/// `Result`s on the hot paths stay two words wide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(Box<Inner>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    kind: ErrorKind,
    message: &'static str,
    offset: u64,
    limit: Option<(LimitKind, u64)>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: &'static str, offset: u64) -> Self {
        Error(Box::new(Inner {
            kind,
            message,
            offset,
            limit: None,
        }))
    }

    pub(crate) fn malformed(message: &'static str, offset: u64) -> Self {
        Error::new(ErrorKind::Malformed, message, offset)
    }

    pub(crate) fn limit(limit: LimitKind, value: u64, offset: u64) -> Self {
        Error(Box::new(Inner {
            kind: ErrorKind::Limit,
            message: "limit exceeded",
            offset,
            limit: Some((limit, value)),
        }))
    }

    /// What class of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Short description of the cause, without position.
    pub fn message(&self) -> &'static str {
        self.0.message
    }

    /// Absolute byte offset of the offending byte (for truncation: the end of
    /// the input).
    pub fn offset(&self) -> u64 {
        self.0.offset
    }

    /// For [`ErrorKind::Limit`]: which limit and its configured value.
    pub fn limit_exceeded(&self) -> Option<(LimitKind, u64)> {
        self.0.limit
    }

    /// HTTP status a server should answer with: 400 malformed or truncated,
    /// 413 over a limit, 415 unsupported.
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
        write!(f, " at byte {}", self.0.offset)
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_status() {
        let e = Error::limit(LimitKind::Depth, 64, 120);
        assert_eq!(e.to_string(), "limit depth = 64 exceeded at byte 120");
        assert_eq!(e.http_status(), 413);
        let e = Error::new(ErrorKind::Unsupported, "DOCTYPE", 3);
        assert_eq!(e.to_string(), "unsupported: DOCTYPE at byte 3");
        assert_eq!(e.http_status(), 415);
        assert_eq!(Error::malformed("x", 0).http_status(), 400);
    }
}
