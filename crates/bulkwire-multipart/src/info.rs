//! Owned copies of a part's headers, for adapters whose events outlive the
//! parser's borrow (one small allocation per part, never per data chunk).

use crate::headers::Part;

/// A part's headers, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartInfo {
    pub index: usize,
    /// Decoded form-data `name` (see [`Part::name`]).
    pub name: Option<String>,
    /// Decoded `filename` (see [`Part::filename`]).
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub content_id: Option<String>,
    pub content_transfer_encoding: Option<String>,
    /// Every header field in order, names as sent, values trimmed.
    pub headers: Vec<(String, String)>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl From<&Part<'_>> for PartInfo {
    fn from(p: &Part<'_>) -> Self {
        PartInfo {
            index: p.index(),
            name: p.name_str(),
            filename: p.filename_str(),
            content_type: p.content_type().map(text),
            content_id: p.content_id().map(text),
            content_transfer_encoding: p.content_transfer_encoding().map(text),
            headers: p.headers().map(|(n, v)| (text(n), text(v))).collect(),
        }
    }
}

impl PartInfo {
    /// True when the part carried a `filename` (a file field).
    pub fn is_file(&self) -> bool {
        self.filename.is_some()
    }
}
