//! Tokenizer limits (DESIGN.md "Bounded memory is a contract").
//!
//! Every buffer the tokenizer owns is capped by a value here, each with a
//! finite default, so its memory is bounded whatever the document. Hitting a
//! limit yields [`crate::ErrorKind::Limit`] with the limit's name and
//! configured value. Character data is never buffered, so its size is the
//! consumer's business: the tokenizer only counts it
//! ([`crate::Tokenizer::text_bytes`]).

/// Caps applied while tokenizing one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most elements open at once.
    pub depth: usize,
    /// Longest element, attribute or processing-instruction name, in bytes
    /// (qualified, prefix included).
    pub name_len: usize,
    /// Longest tag (`<` to `>`, attributes included) or processing
    /// instruction; this bounds the buffer for a tag split across inputs.
    pub tag_bytes: usize,
    /// Most attributes on one element, namespace declarations included.
    pub attrs: usize,
    /// Most elements in one document.
    pub elements: u64,
    /// Bytes of namespace declarations (prefixes plus URIs) in scope at once.
    pub namespace_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            depth: 64,
            name_len: 256,
            tag_bytes: 8 * 1024,
            attrs: 32,
            elements: 1_000_000,
            namespace_bytes: 16 * 1024,
        }
    }
}

/// Identifies one limit in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    Depth,
    NameLen,
    TagBytes,
    Attrs,
    Elements,
    NamespaceBytes,
}

impl LimitKind {
    /// The field name in [`Limits`], used in error messages and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::Depth => "depth",
            LimitKind::NameLen => "name_len",
            LimitKind::TagBytes => "tag_bytes",
            LimitKind::Attrs => "attrs",
            LimitKind::Elements => "elements",
            LimitKind::NamespaceBytes => "namespace_bytes",
        }
    }

    /// The configured value of this limit in `limits`.
    pub fn value(self, limits: &Limits) -> u64 {
        match self {
            LimitKind::Depth => limits.depth as u64,
            LimitKind::NameLen => limits.name_len as u64,
            LimitKind::TagBytes => limits.tag_bytes as u64,
            LimitKind::Attrs => limits.attrs as u64,
            LimitKind::Elements => limits.elements,
            LimitKind::NamespaceBytes => limits.namespace_bytes as u64,
        }
    }
}
