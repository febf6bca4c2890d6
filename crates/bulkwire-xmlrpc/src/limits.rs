//! Parser limits (DESIGN.md "Bounded memory is a contract").
//!
//! Every buffer the parser owns and every part of the value tree it builds
//! is capped by a value here, each with a finite default, so the memory of
//! one parse is bounded whatever the body. `<base64>` values are the one
//! exception by design: they are never held, they stream into the caller's
//! [`crate::Base64Sink`], which enforces its own quota. Hitting a limit
//! yields [`crate::ErrorKind::Limit`] with the limit's name and configured
//! value.

/// Caps applied while parsing one XML-RPC message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most XML elements open at once. Each nested `struct` or `array`
    /// value costs three levels (`value`, `struct`, `member`), so the
    /// default allows about 20 levels of nested values.
    pub depth: usize,
    /// Longest element or attribute name, in bytes.
    pub name_len: usize,
    /// Longest tag, attributes included (bounds the tokenizer's buffer for
    /// a tag split across inputs).
    pub tag_bytes: usize,
    /// Most attributes on one element (XML-RPC uses none; namespace
    /// declarations count).
    pub attrs: usize,
    /// Bytes of namespace declarations in scope at once.
    pub namespace_bytes: usize,
    /// Most elements in the whole message.
    pub elements: u64,
    /// Longest text of one scalar: a string, a member name, or the text of
    /// an `int`, `double`, `dateTime.iso8601` or `boolean`.
    pub string_bytes: usize,
    /// Bytes of text kept in the value tree in total (all strings, member
    /// names and date-times together).
    pub tree_bytes: u64,
    /// Most members in one `struct`.
    pub members: usize,
    /// Most values in one `array`.
    pub items: usize,
    /// Most `param`s in a call or response.
    pub params: usize,
    /// Longest method name, in bytes.
    pub method_name_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            depth: 64,
            name_len: 64,
            tag_bytes: 4 * 1024,
            attrs: 16,
            namespace_bytes: 4 * 1024,
            elements: 200_000,
            string_bytes: 1024 * 1024,
            tree_bytes: 16 * 1024 * 1024,
            members: 10_000,
            items: 100_000,
            params: 64,
            method_name_len: 256,
        }
    }
}

impl Limits {
    /// The tokenizer's share of these limits.
    pub(crate) fn xml(&self) -> bulkwire_xml::Limits {
        bulkwire_xml::Limits {
            depth: self.depth,
            name_len: self.name_len,
            tag_bytes: self.tag_bytes,
            attrs: self.attrs,
            elements: self.elements,
            namespace_bytes: self.namespace_bytes,
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
    NamespaceBytes,
    Elements,
    StringBytes,
    TreeBytes,
    Members,
    Items,
    Params,
    MethodNameLen,
}

impl LimitKind {
    /// The field name in [`Limits`], used in error messages and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::Depth => "depth",
            LimitKind::NameLen => "name_len",
            LimitKind::TagBytes => "tag_bytes",
            LimitKind::Attrs => "attrs",
            LimitKind::NamespaceBytes => "namespace_bytes",
            LimitKind::Elements => "elements",
            LimitKind::StringBytes => "string_bytes",
            LimitKind::TreeBytes => "tree_bytes",
            LimitKind::Members => "members",
            LimitKind::Items => "items",
            LimitKind::Params => "params",
            LimitKind::MethodNameLen => "method_name_len",
        }
    }

    /// The configured value of this limit in `limits`.
    pub fn value(self, limits: &Limits) -> u64 {
        match self {
            LimitKind::Depth => limits.depth as u64,
            LimitKind::NameLen => limits.name_len as u64,
            LimitKind::TagBytes => limits.tag_bytes as u64,
            LimitKind::Attrs => limits.attrs as u64,
            LimitKind::NamespaceBytes => limits.namespace_bytes as u64,
            LimitKind::Elements => limits.elements,
            LimitKind::StringBytes => limits.string_bytes as u64,
            LimitKind::TreeBytes => limits.tree_bytes,
            LimitKind::Members => limits.members as u64,
            LimitKind::Items => limits.items as u64,
            LimitKind::Params => limits.params as u64,
            LimitKind::MethodNameLen => limits.method_name_len as u64,
        }
    }

    /// The tokenizer's limit of the same name.
    pub(crate) fn from_xml(k: bulkwire_xml::LimitKind) -> LimitKind {
        use bulkwire_xml::LimitKind as X;
        match k {
            X::Depth => LimitKind::Depth,
            X::NameLen => LimitKind::NameLen,
            X::TagBytes => LimitKind::TagBytes,
            X::Attrs => LimitKind::Attrs,
            X::Elements => LimitKind::Elements,
            _ => LimitKind::NamespaceBytes,
        }
    }
}
