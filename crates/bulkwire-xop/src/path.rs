//! Element paths that select what the consumer wants from an envelope:
//! *binary* elements (an `xs:base64Binary` value inline, or an
//! `xop:Include` of an attachment; both stream to the sink) and small
//! *text* fields (returned as strings).
//!
//! Syntax: `/step/step/…`, a step being `local`, `{uri}local`, `{}local` or
//! `{*}local`:
//! - `{uri}local` matches that namespace, `{}local` no namespace, `{*}local`
//!   any namespace.
//! - A bare `local` matches no namespace (the unqualified children of a
//!   document/literal wrapper, as WSDL's default `elementFormDefault`
//!   gives), except `Envelope` as the first step and `Header`/`Body` as the
//!   second, which match the SOAP envelope namespace of either version.
//!
//! So `/Envelope/Body/{urn:bulkwire:media}upload/data` selects the `data`
//! child of the `upload` wrapper. Paths are rendered back for people with
//! local names only (`/Envelope/Body/upload/data`).
//!
//! Matching is incremental: each open element keeps a bit mask of the
//! selectors that match the path so far, so a start tag costs one pass over
//! the selectors of that depth, and nothing is searched per text byte.

use bulkwire_xml::ns;

/// Most selectors in one [`crate::Select`] (one bit each in a `u64`).
pub const MAX_SELECTORS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
enum NsMatch {
    Any,
    None,
    Soap,
    Uri(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct StepMatch {
    ns: NsMatch,
    local: Vec<u8>,
}

/// A parsed element path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementPath {
    steps: Vec<StepMatch>,
    text: String,
}

impl ElementPath {
    /// Parses the syntax in the module docs.
    pub fn parse(path: &str) -> Result<ElementPath, String> {
        let rest = path
            .strip_prefix('/')
            .ok_or_else(|| format!("path {path:?} does not start with '/'"))?;
        let steps = split_steps(rest)
            .into_iter()
            .enumerate()
            .map(|(i, s)| step(i, s).map_err(|m| format!("path {path:?}: {m}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ElementPath {
            steps,
            text: path.to_owned(),
        })
    }

    /// Number of steps (the depth of the selected elements).
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Never true: a path has at least one step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The path as it was written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether step `depth` (0 for the root element) matches an element.
    pub(crate) fn step_matches(&self, depth: usize, uri: Option<&[u8]>, local: &[u8]) -> bool {
        let Some(s) = self.steps.get(depth) else {
            return false;
        };
        s.local == local
            && match (&s.ns, uri) {
                (NsMatch::Any, _) => true,
                (NsMatch::None, u) => u.is_none(),
                (NsMatch::Soap, Some(u)) => u == ns::SOAP11_ENV || u == ns::SOAP12_ENV,
                (NsMatch::Uri(want), Some(u)) => want == u,
                _ => false,
            }
    }
}

/// Splits at `/` outside `{…}`, since namespace URIs hold slashes.
fn split_steps(s: &str) -> Vec<&str> {
    let (mut out, mut start, mut braced) = (Vec::new(), 0, false);
    for (i, c) in s.char_indices() {
        match c {
            '{' => braced = true,
            '}' => braced = false,
            '/' if !braced => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn step(i: usize, s: &str) -> Result<StepMatch, String> {
    let (ns, local) = match s.strip_prefix('{') {
        Some(r) => {
            let (uri, local) = r.split_once('}').ok_or("unclosed '{'")?;
            let ns = match uri {
                "*" => NsMatch::Any,
                "" => NsMatch::None,
                u => NsMatch::Uri(u.as_bytes().to_vec()),
            };
            (ns, local)
        }
        None => {
            let soap = matches!((i, s), (0, "Envelope") | (1, "Header" | "Body"));
            (if soap { NsMatch::Soap } else { NsMatch::None }, s)
        }
    };
    if local.is_empty() || local.contains(['{', '}', ':']) {
        return Err(format!("bad step {s:?}"));
    }
    Ok(StepMatch {
        ns,
        local: local.as_bytes().to_vec(),
    })
}

/// What the consumer wants from the envelope.
#[derive(Debug, Clone, Default)]
pub struct Select {
    pub(crate) binary: Vec<ElementPath>,
    pub(crate) text: Vec<ElementPath>,
}

impl Select {
    pub fn new() -> Select {
        Select::default()
    }

    /// Selects elements whose content is binary: inline base64 goes through
    /// the decoder to the sink, an `xop:Include` names an attachment.
    pub fn binary(mut self, path: &str) -> Result<Select, String> {
        self.binary.push(ElementPath::parse(path)?);
        self.check()
    }

    /// Selects small text fields, returned in [`crate::Message::fields`]
    /// (each capped by [`crate::Limits::text_bytes`]).
    pub fn text(mut self, path: &str) -> Result<Select, String> {
        self.text.push(ElementPath::parse(path)?);
        self.check()
    }

    fn check(self) -> Result<Select, String> {
        if self.binary.len() + self.text.len() > MAX_SELECTORS {
            return Err(format!("more than {MAX_SELECTORS} selected paths"));
        }
        Ok(self)
    }

    /// Selectors in mask-bit order: binary ones first, then text.
    pub(crate) fn all(&self) -> impl Iterator<Item = &ElementPath> {
        self.binary.iter().chain(&self.text)
    }

    pub(crate) fn is_binary_bit(&self, bit: usize) -> bool {
        bit < self.binary.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps() {
        let p = ElementPath::parse("/Envelope/Body/{urn:m}upload/data").unwrap();
        assert_eq!(p.len(), 4);
        assert!(p.step_matches(0, Some(ns::SOAP11_ENV), b"Envelope"));
        assert!(p.step_matches(1, Some(ns::SOAP12_ENV), b"Body"));
        assert!(!p.step_matches(1, None, b"Body"));
        assert!(p.step_matches(2, Some(b"urn:m"), b"upload"));
        assert!(!p.step_matches(2, Some(b"urn:x"), b"upload"));
        assert!(p.step_matches(3, None, b"data"));
        assert!(!p.step_matches(3, Some(b"urn:m"), b"data"));
        assert!(!p.step_matches(4, None, b"data"));
        let p = ElementPath::parse("/Envelope/Body/{http://x.org/a/b}up/d").unwrap();
        assert!(p.step_matches(2, Some(b"http://x.org/a/b"), b"up"));
        assert_eq!(p.len(), 4);
        let any = ElementPath::parse("/{*}a/{}b/c").unwrap();
        assert!(any.step_matches(0, Some(b"u"), b"a") && any.step_matches(0, None, b"a"));
        assert!(any.step_matches(1, None, b"b") && !any.step_matches(1, Some(b"u"), b"b"));
    }

    #[test]
    fn bad_paths() {
        for p in ["Envelope", "/a//b", "/{u", "/{u}", "/a:b", "/"] {
            assert!(ElementPath::parse(p).is_err(), "{p}");
        }
        let mut s = Select::new();
        for i in 0..MAX_SELECTORS {
            s = s.text(&format!("/a{i}")).unwrap();
        }
        assert!(s.binary("/x").is_err());
    }
}
