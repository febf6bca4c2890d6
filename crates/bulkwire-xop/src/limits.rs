//! Codec limits (DESIGN.md "Bounded memory is a contract").
//!
//! The MTOM/XOP layer's own caps, each with a finite default, plus the
//! multipart and XML layers' limits it passes on. Hitting one yields
//! [`crate::ErrorKind::Limit`] with the limit's name and configured value.

/// Caps applied while parsing one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the root envelope outside binary (base64) element content:
    /// tags, text fields, white space. Inline base64 of a selected binary
    /// element does not count, since it streams to the sink.
    pub envelope_bytes: u64,
    /// MIME parts other than the root (attachments).
    pub attachments: usize,
    /// `xop:Include` elements in the envelope.
    pub includes: usize,
    /// Inline base64 values streamed from selected binary elements.
    pub inline_binaries: usize,
    /// Longest Content-ID (after removing `<>` and percent-decoding).
    pub content_id_len: usize,
    /// Bytes of one selected text field (decoded).
    pub text_bytes: usize,
    /// Selected text fields in one envelope.
    pub fields: usize,
    /// The multipart layer (boundary scan, part headers, part count).
    pub multipart: bulkwire_multipart::Limits,
    /// The XML layer (depth, tag size, names, namespaces).
    pub xml: bulkwire_xml::Limits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            envelope_bytes: 1024 * 1024,
            attachments: 1_000,
            includes: 1_000,
            inline_binaries: 1_000,
            content_id_len: 512,
            text_bytes: 64 * 1024,
            fields: 256,
            multipart: bulkwire_multipart::Limits::default(),
            xml: bulkwire_xml::Limits::default(),
        }
    }
}

/// Identifies one limit in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    EnvelopeBytes,
    Attachments,
    Includes,
    InlineBinaries,
    ContentIdLen,
    TextBytes,
    Fields,
    /// A limit of the multipart layer.
    Multipart(bulkwire_multipart::LimitKind),
    /// A limit of the XML layer.
    Xml(bulkwire_xml::LimitKind),
}

impl LimitKind {
    /// The field name in [`Limits`] (for wrapped limits, the inner name).
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::EnvelopeBytes => "envelope_bytes",
            LimitKind::Attachments => "attachments",
            LimitKind::Includes => "includes",
            LimitKind::InlineBinaries => "inline_binaries",
            LimitKind::ContentIdLen => "content_id_len",
            LimitKind::TextBytes => "text_bytes",
            LimitKind::Fields => "fields",
            LimitKind::Multipart(l) => l.name(),
            LimitKind::Xml(l) => l.name(),
        }
    }

    /// The configured value of this limit in `limits`.
    pub fn value(self, limits: &Limits) -> u64 {
        match self {
            LimitKind::EnvelopeBytes => limits.envelope_bytes,
            LimitKind::Attachments => limits.attachments as u64,
            LimitKind::Includes => limits.includes as u64,
            LimitKind::InlineBinaries => limits.inline_binaries as u64,
            LimitKind::ContentIdLen => limits.content_id_len as u64,
            LimitKind::TextBytes => limits.text_bytes as u64,
            LimitKind::Fields => limits.fields as u64,
            LimitKind::Multipart(l) => l.value(&limits.multipart),
            LimitKind::Xml(l) => l.value(&limits.xml),
        }
    }
}
