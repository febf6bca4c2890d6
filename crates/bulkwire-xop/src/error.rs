//! The one error type of the MTOM/XOP codec.
//!
//! An error says what went wrong ([`ErrorKind`]), where (absolute byte offset
//! into the HTTP body, index of the MIME part where there is one) and, for a
//! limit, which one and its configured value. Errors of the multipart and XML
//! layers are wrapped with their kind, offset and limit preserved (the XML
//! offset moved from the root part to the body). [`Error::http_status`] maps
//! it for servers.

use crate::limits::LimitKind;
use std::fmt;
use std::sync::Arc;

/// Broad class of an error; decides the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The bytes break MIME, XML, SOAP or XOP rules (a missing Content-ID,
    /// an `xop:Include` that is not the sole child of its element, …).
    Malformed,
    /// A configured [`crate::Limits`] value was exceeded.
    Limit,
    /// The body ended early (inside the envelope, a part, a base64 value).
    Truncated,
    /// Well-formed, but not something this codec takes on purpose: a media
    /// type other than MTOM or SOAP, a DTD, an `href` that is not `cid:`.
    Unsupported,
    /// The consumer's sink failed; the body may be fine.
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

/// An error with its position. Boxed, so that `Result`s stay two words wide.
#[derive(Debug, Clone)]
pub struct Error(Box<Inner>);

#[derive(Debug, Clone)]
struct Inner {
    kind: ErrorKind,
    message: &'static str,
    offset: u64,
    part: Option<usize>,
    limit: Option<(LimitKind, u64)>,
    /// A sink's own error, shared so that sticky errors can be cloned.
    source: Option<Arc<std::io::Error>>,
}

impl PartialEq for Error {
    /// Equal when kind, message, position and limit agree (a sink's source
    /// error is not compared).
    fn eq(&self, o: &Self) -> bool {
        let (a, b) = (&self.0, &o.0);
        (a.kind, a.message, a.offset, a.part, a.limit)
            == (b.kind, b.message, b.offset, b.part, b.limit)
    }
}

impl Eq for Error {}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: &'static str, offset: u64) -> Self {
        Error(Box::new(Inner {
            kind,
            message,
            offset,
            part: None,
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

    pub(crate) fn sink(e: std::io::Error, offset: u64) -> Self {
        let mut err = Error::new(ErrorKind::Sink, "the sink failed", offset);
        err.0.source = Some(Arc::new(e));
        err
    }

    /// Places an error found in a piece (a header value, an attribute, a
    /// token) at its offset in the body.
    pub(crate) fn with_offset(mut self, offset: u64) -> Self {
        self.0.offset = offset;
        self
    }

    pub(crate) fn in_part(mut self, part: Option<usize>) -> Self {
        if self.0.part.is_none() {
            self.0.part = part;
        }
        self
    }

    /// The XML layer's error, `base` being the body offset of the document.
    pub(crate) fn from_xml(e: &bulkwire_xml::Error, base: u64) -> Self {
        use bulkwire_xml::ErrorKind as K;
        let kind = match e.kind() {
            K::Limit => ErrorKind::Limit,
            K::Truncated => ErrorKind::Truncated,
            K::Unsupported => ErrorKind::Unsupported,
            _ => ErrorKind::Malformed,
        };
        let mut err = Error::new(kind, e.message(), base + e.offset());
        err.0.limit = e.limit_exceeded().map(|(l, v)| (LimitKind::Xml(l), v));
        err
    }

    /// What class of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Short description of the cause, without position.
    pub fn message(&self) -> &'static str {
        self.0.message
    }

    /// Absolute byte offset into the body where the error was detected. It
    /// does not depend on how the body was chunked, except for
    /// [`ErrorKind::Sink`] (where the sink happened to fail).
    pub fn offset(&self) -> u64 {
        self.0.offset
    }

    /// Zero-based index of the MIME part being parsed, if any.
    pub fn part(&self) -> Option<usize> {
        self.0.part
    }

    /// For [`ErrorKind::Limit`]: which limit and its configured value.
    pub fn limit_exceeded(&self) -> Option<(LimitKind, u64)> {
        self.0.limit
    }

    /// HTTP status a server should answer with: 400 malformed or truncated,
    /// 413 over a limit, 415 unsupported, 500 for a failed sink.
    pub fn http_status(&self) -> u16 {
        match self.0.kind {
            ErrorKind::Malformed | ErrorKind::Truncated => 400,
            ErrorKind::Limit => 413,
            ErrorKind::Unsupported => 415,
            ErrorKind::Sink => 500,
        }
    }
}

impl From<bulkwire_multipart::Error> for Error {
    fn from(e: bulkwire_multipart::Error) -> Self {
        use bulkwire_multipart::ErrorKind as K;
        let kind = match e.kind() {
            K::Limit => ErrorKind::Limit,
            K::Truncated => ErrorKind::Truncated,
            K::Unsupported => ErrorKind::Unsupported,
            _ => ErrorKind::Malformed,
        };
        let mut err = Error::new(kind, e.message(), e.offset());
        err.0.part = e.part();
        err.0.limit = e
            .limit_exceeded()
            .map(|(l, v)| (LimitKind::Multipart(l), v));
        err
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
        if let Some(s) = &self.0.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_status_and_wrapping() {
        let e = Error::limit(LimitKind::EnvelopeBytes, 10, 42).in_part(Some(0));
        assert_eq!(
            e.to_string(),
            "limit envelope_bytes = 10 exceeded at byte 42 (part 0)"
        );
        assert_eq!(e.http_status(), 413);
        let e = Error::sink(std::io::Error::other("disk full"), 7);
        assert_eq!(e.http_status(), 500);
        assert!(e.to_string().ends_with("disk full"), "{e}");
        let mp = bulkwire_multipart::ContentType::parse("text/plain").unwrap_err();
        let e = Error::from(mp);
        assert_eq!((e.kind(), e.http_status()), (ErrorKind::Unsupported, 415));
    }
}
