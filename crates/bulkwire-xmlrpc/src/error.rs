//! The one error type of the XML-RPC codec.
//!
//! An error says what went wrong ([`ErrorKind`]), where (absolute byte offset
//! into the body) and, for a limit, which one and its configured value.
//! Tokenizer and base64 errors from `bulkwire-xml` are mapped in with their
//! offsets; a sink's own error is kept as the [`std::error::Error::source`].
//! [`Error::http_status`] maps it for servers and [`Error::fault`] gives the
//! XML-RPC fault a client should receive.

use crate::limits::LimitKind;
use crate::value::Fault;
use std::fmt;
use std::sync::Arc;

/// Broad class of an error; decides the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The bytes break XML 1.0 or the XML-RPC grammar, or a scalar's text is
    /// not valid for its type (an `i4` out of range, a bad boolean, …).
    Malformed,
    /// A configured [`crate::Limits`] value was exceeded.
    Limit,
    /// The body ended before the message did.
    Truncated,
    /// Well-formed XML this codec refuses on purpose (a DTD, an encoding
    /// other than UTF-8), or a value the encoder cannot represent.
    Unsupported,
    /// The [`crate::Base64Sink`] failed (storage full, quota, I/O).
    Sink,
}

impl ErrorKind {
    /// Stable lower-case name, used in JSON error output.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Malformed => "malformed",
            ErrorKind::Limit => "limit",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Sink => "sink",
        }
    }
}

/// A parse or encode error with its position. Boxed, so that the `Result`s
/// on the parser's hot path stay two words wide.
#[derive(Debug, Clone)]
pub struct Error(Box<Inner>);

#[derive(Debug, Clone)]
struct Inner {
    kind: ErrorKind,
    message: &'static str,
    offset: u64,
    limit: Option<(LimitKind, u64)>,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: &'static str, offset: u64) -> Self {
        Error(Box::new(Inner {
            kind,
            message,
            offset,
            limit: None,
            source: None,
        }))
    }

    pub(crate) fn malformed(message: &'static str, offset: u64) -> Self {
        Error::new(ErrorKind::Malformed, message, offset)
    }

    pub(crate) fn limit(limit: LimitKind, value: u64, offset: u64) -> Self {
        let mut e = Error::new(ErrorKind::Limit, "limit exceeded", offset);
        e.0.limit = Some((limit, value));
        e
    }

    pub(crate) fn sink(source: Box<dyn std::error::Error + Send + Sync>, offset: u64) -> Self {
        let mut e = Error::new(ErrorKind::Sink, "the base64 sink failed", offset);
        e.0.source = Some(Arc::from(source));
        e
    }

    /// A `bulkwire-xml` error, its offset moved to `offset`.
    pub(crate) fn from_xml(e: &bulkwire_xml::Error, offset: u64) -> Self {
        use bulkwire_xml::ErrorKind as X;
        if let Some((k, v)) = e.limit_exceeded() {
            return Error::limit(LimitKind::from_xml(k), v, offset);
        }
        let kind = match e.kind() {
            X::Limit => ErrorKind::Limit,
            X::Truncated => ErrorKind::Truncated,
            X::Unsupported => ErrorKind::Unsupported,
            _ => ErrorKind::Malformed,
        };
        Error::new(kind, e.message(), offset)
    }

    /// What class of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Short description of the cause, without position.
    pub fn message(&self) -> &'static str {
        self.0.message
    }

    /// Absolute byte offset into the body: of the offending byte, of the
    /// token holding it for errors about a whole value, of the `<base64>`
    /// tag for sink errors, of the end for truncation.
    pub fn offset(&self) -> u64 {
        self.0.offset
    }

    /// For [`ErrorKind::Limit`]: which limit and its configured value.
    pub fn limit_exceeded(&self) -> Option<(LimitKind, u64)> {
        self.0.limit
    }

    /// HTTP status a server should answer with: 400 malformed or truncated,
    /// 413 over a limit, 415 unsupported, 500 when the sink failed.
    pub fn http_status(&self) -> u16 {
        match self.0.kind {
            ErrorKind::Malformed | ErrorKind::Truncated => 400,
            ErrorKind::Limit => 413,
            ErrorKind::Unsupported => 415,
            ErrorKind::Sink => 500,
        }
    }

    /// The fault an XML-RPC client should get for this error: -32700 (parse
    /// error) for bad or refused XML, 500 otherwise, with this error's text.
    pub fn fault(&self) -> Fault {
        let code = match self.0.kind {
            ErrorKind::Sink | ErrorKind::Limit => 500,
            _ => Fault::PARSE_ERROR,
        };
        Fault::new(code, self.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.limit {
            Some((l, v)) => write!(f, "limit {} = {} exceeded", l.name(), v)?,
            None => write!(f, "{}: {}", self.0.kind.as_str(), self.0.message)?,
        }
        write!(f, " at byte {}", self.0.offset)?;
        if let Some(s) = &self.0.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.source {
            Some(s) => Some(&**s),
            None => None,
        }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

/// Either the body was bad or its source (a reader, a stream) failed.
#[derive(Debug)]
pub enum StreamError<E> {
    Parse(Error),
    Source(E),
}

impl<E: fmt::Display> fmt::Display for StreamError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Parse(e) => e.fmt(f),
            StreamError::Source(e) => write!(f, "body source failed: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for StreamError<E> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_status_and_fault() {
        let e = Error::limit(LimitKind::StringBytes, 1024, 77);
        assert_eq!(
            e.to_string(),
            "limit string_bytes = 1024 exceeded at byte 77"
        );
        assert_eq!(e.http_status(), 413);
        assert_eq!(e.fault().code, 500);
        let e = Error::malformed("bad boolean", 5);
        assert_eq!(e.to_string(), "malformed: bad boolean at byte 5");
        assert_eq!((e.http_status(), e.fault().code), (400, -32700));
        let io = std::io::Error::other("disk full");
        let e = Error::sink(Box::new(io), 9);
        assert_eq!(
            e.to_string(),
            "sink: the base64 sink failed at byte 9: disk full"
        );
        assert_eq!(e.http_status(), 500);
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn xml_errors_keep_kind_and_limit() {
        let mut tk = bulkwire_xml::Tokenizer::new(bulkwire_xml::Limits {
            depth: 1,
            ..Default::default()
        });
        let x = tk
            .step(b"<a><b>", true)
            .err()
            .or_else(|| tk.step(b"<b>", true).err());
        let x = x.expect("depth error");
        let e = Error::from_xml(&x, 3);
        assert_eq!(e.limit_exceeded(), Some((LimitKind::Depth, 1)));
        assert_eq!(e.offset(), 3);
    }
}
