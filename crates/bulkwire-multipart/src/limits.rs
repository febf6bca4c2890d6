//! Parser limits (DESIGN.md "Bounded memory is a contract").
//!
//! Every buffer the parser owns is capped by a value here, each with a finite
//! default. Hitting a limit yields [`crate::ErrorKind::Limit`] with the limit's
//! name and configured value, so an operator can tell which knob to turn.

/// Caps applied while parsing one multipart body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest accepted boundary parameter (RFC 2046 §5.1.1 allows 70).
    pub boundary_len: usize,
    /// Most parts in one body.
    pub parts: usize,
    /// Bytes in one part's header block, including line ends.
    pub header_bytes: usize,
    /// Header fields in one part.
    pub headers: usize,
    /// Bytes before the first delimiter (RFC 2046 preamble).
    pub preamble: usize,
    /// Bytes after the close delimiter (RFC 2046 epilogue); they are discarded,
    /// this only stops a client streaming an endless tail.
    pub epilogue: usize,
    /// Data bytes of a form-data part without a `filename` (a text field).
    pub field_bytes: u64,
    /// Whole body; `u64::MAX` means unlimited (the server sets its own).
    pub body_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            boundary_len: 70,
            parts: 1_000,
            header_bytes: 16 * 1024,
            headers: 64,
            preamble: 64 * 1024,
            epilogue: 64 * 1024,
            field_bytes: 1024 * 1024,
            body_bytes: u64::MAX,
        }
    }
}

/// Identifies one limit in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    BoundaryLen,
    Parts,
    HeaderBytes,
    Headers,
    Preamble,
    Epilogue,
    FieldBytes,
    BodyBytes,
}

impl LimitKind {
    /// The field name in [`Limits`], used in error messages and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::BoundaryLen => "boundary_len",
            LimitKind::Parts => "parts",
            LimitKind::HeaderBytes => "header_bytes",
            LimitKind::Headers => "headers",
            LimitKind::Preamble => "preamble",
            LimitKind::Epilogue => "epilogue",
            LimitKind::FieldBytes => "field_bytes",
            LimitKind::BodyBytes => "body_bytes",
        }
    }

    /// The configured value of this limit in `limits`.
    pub fn value(self, limits: &Limits) -> u64 {
        match self {
            LimitKind::BoundaryLen => limits.boundary_len as u64,
            LimitKind::Parts => limits.parts as u64,
            LimitKind::HeaderBytes => limits.header_bytes as u64,
            LimitKind::Headers => limits.headers as u64,
            LimitKind::Preamble => limits.preamble as u64,
            LimitKind::Epilogue => limits.epilogue as u64,
            LimitKind::FieldBytes => limits.field_bytes,
            LimitKind::BodyBytes => limits.body_bytes,
        }
    }
}
