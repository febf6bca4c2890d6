//! The open-element stack and the namespace declarations in scope
//! (Namespaces in XML 1.0, Third Edition, §3 declaring, §5 scoping, §6
//! applying to element and attribute names).
//!
//! Both are bounded by [`crate::Limits`] (`depth` × `name_len` for names,
//! `namespace_bytes` for declarations) and both pop an element's entries when
//! its end has been handed out, so a [`Scope`] given with an end tag still
//! resolves the names that element declared.

use crate::ns;

/// Splits a qualified name at its colon: (prefix, local part); the prefix is
/// empty when there is none.
pub(crate) fn split_qname(qname: &[u8]) -> (&[u8], &[u8]) {
    match memchr::memchr(b':', qname) {
        Some(i) => (&qname[..i], &qname[i + 1..]),
        None => (&[], qname),
    }
}

/// Namespaces §4 `QName`: at most one colon, with a non-empty part on each
/// side. Returns the index of the offending colon.
pub(crate) fn check_qname(name: &[u8]) -> Result<(), usize> {
    match memchr::memchr(b':', name) {
        None => Ok(()),
        Some(0) => Err(0),
        Some(i) if i + 1 == name.len() => Err(i),
        Some(i) => match memchr::memchr(b':', &name[i + 1..]) {
            Some(j) => Err(i + 1 + j),
            None => Ok(()),
        },
    }
}

#[derive(Debug, Clone, Copy)]
struct Decl {
    start: u32,
    prefix_end: u32,
    end: u32,
}

/// Declarations in scope, innermost last; prefix and URI bytes in one arena.
#[derive(Debug, Default)]
pub(crate) struct Namespaces {
    buf: Vec<u8>,
    decls: Vec<Decl>,
}

impl Namespaces {
    /// Bytes of declarations in scope.
    pub(crate) fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Number of declarations in scope, a mark for [`Namespaces::truncate`].
    pub(crate) fn mark(&self) -> usize {
        self.decls.len()
    }

    pub(crate) fn truncate(&mut self, mark: usize) {
        if let Some(d) = self.decls.get(mark) {
            self.buf.truncate(d.start as usize);
        }
        self.decls.truncate(mark);
    }

    /// Declares `prefix` (empty: the default namespace) as `uri` (empty for
    /// the default namespace: undeclared).
    pub(crate) fn push(&mut self, prefix: &[u8], uri: &[u8]) {
        let start = self.buf.len() as u32;
        self.buf.extend_from_slice(prefix);
        let prefix_end = self.buf.len() as u32;
        self.buf.extend_from_slice(uri);
        let end = self.buf.len() as u32;
        self.decls.push(Decl {
            start,
            prefix_end,
            end,
        });
    }

    /// The URI bound to `prefix` (empty: the default namespace), if any.
    pub(crate) fn lookup(&self, prefix: &[u8]) -> Option<&[u8]> {
        match prefix {
            b"xml" => return Some(ns::XML),
            b"xmlns" => return Some(ns::XMLNS),
            _ => {}
        }
        let d = self
            .decls
            .iter()
            .rev()
            .find(|d| &self.buf[d.start as usize..d.prefix_end as usize] == prefix)?;
        let uri = &self.buf[d.prefix_end as usize..d.end as usize];
        // `xmlns=""` undeclares the default namespace (§6.2).
        (!uri.is_empty()).then_some(uri)
    }

    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity() + self.decls.capacity() * std::mem::size_of::<Decl>()
    }
}

/// Namespace resolution at one point of the document: for a start tag,
/// including its own declarations; for an end tag, still including the
/// declarations of the element it closes.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    ns: &'a Namespaces,
}

impl<'a> Scope<'a> {
    pub(crate) fn new(ns: &'a Namespaces) -> Self {
        Scope { ns }
    }

    /// Resolves an element name: (namespace URI, local part). An unprefixed
    /// name takes the default namespace. Names of tokens always resolve (an
    /// undeclared prefix is an error while tokenizing); for other qualified
    /// names (say, an `xsi:type` value) an undeclared prefix gives `None`.
    pub fn resolve<'q>(&self, qname: &'q [u8]) -> (Option<&'a [u8]>, &'q [u8]) {
        let (prefix, local) = split_qname(qname);
        (self.ns.lookup(prefix), local)
    }

    /// Resolves an attribute name: like [`Scope::resolve`], except that an
    /// unprefixed attribute is in no namespace (§6.2) and `xmlns` itself is
    /// in [`ns::XMLNS`].
    pub fn resolve_attr<'q>(&self, qname: &'q [u8]) -> (Option<&'a [u8]>, &'q [u8]) {
        match split_qname(qname) {
            (b"", b"xmlns") => (Some(ns::XMLNS), qname),
            (b"", local) => (None, local),
            (prefix, local) => (self.ns.lookup(prefix), local),
        }
    }

    /// The URI bound to `prefix` (empty: the default namespace).
    pub fn lookup(&self, prefix: &[u8]) -> Option<&'a [u8]> {
        self.ns.lookup(prefix)
    }
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    name_start: u32,
    ns_mark: u32,
}

/// Names of the open elements, innermost last, for matching end tags.
#[derive(Debug, Default)]
pub(crate) struct Open {
    names: Vec<u8>,
    frames: Vec<Frame>,
}

impl Open {
    pub(crate) fn depth(&self) -> usize {
        self.frames.len()
    }

    pub(crate) fn push(&mut self, name: &[u8], ns_mark: usize) {
        self.frames.push(Frame {
            name_start: self.names.len() as u32,
            ns_mark: ns_mark as u32,
        });
        self.names.extend_from_slice(name);
    }

    /// Name of the innermost open element.
    pub(crate) fn top(&self) -> Option<&[u8]> {
        let f = self.frames.last()?;
        Some(&self.names[f.name_start as usize..])
    }

    /// Closes the innermost element; returns its namespace mark.
    pub(crate) fn pop(&mut self) -> Option<usize> {
        let f = self.frames.pop()?;
        self.names.truncate(f.name_start as usize);
        Some(f.ns_mark as usize)
    }

    pub(crate) fn capacity(&self) -> usize {
        self.names.capacity() + self.frames.capacity() * std::mem::size_of::<Frame>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qnames() {
        assert_eq!(split_qname(b"a:b"), (&b"a"[..], &b"b"[..]));
        assert_eq!(split_qname(b"b"), (&b""[..], &b"b"[..]));
        assert_eq!(check_qname(b"a:b"), Ok(()));
        assert_eq!(check_qname(b":b"), Err(0));
        assert_eq!(check_qname(b"a:"), Err(1));
        assert_eq!(check_qname(b"a:b:c"), Err(3));
    }

    #[test]
    fn scoping() {
        let mut n = Namespaces::default();
        n.push(b"", b"urn:d");
        let m = n.mark();
        n.push(b"p", b"urn:p");
        n.push(b"", b"");
        let s = Scope::new(&n);
        assert_eq!(s.resolve(b"p:x"), (Some(&b"urn:p"[..]), &b"x"[..]));
        assert_eq!(s.resolve(b"x"), (None, &b"x"[..]));
        assert_eq!(s.resolve(b"q:x"), (None, &b"x"[..]));
        assert_eq!(s.resolve_attr(b"x"), (None, &b"x"[..]));
        assert_eq!(s.resolve(b"xml:lang").0, Some(ns::XML));
        n.truncate(m);
        let s = Scope::new(&n);
        assert_eq!(s.resolve(b"x").0, Some(&b"urn:d"[..]));
        assert_eq!(s.resolve(b"p:x").0, None);
        assert_eq!(n.bytes(), 5);
    }
}
