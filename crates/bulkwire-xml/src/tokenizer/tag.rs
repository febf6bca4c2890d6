//! Parsing one complete tag, already delimited by the markup scan: start and
//! empty-element tags with attributes (XML 1.0 §3.1), end tags, processing
//! instructions (§2.6) and the XML declaration (§2.8, §4.3.3).
//!
//! A tag is parsed only once all of it is at hand (in the caller's slice or
//! in the tag buffer), so every error is found at the same byte whatever the
//! chunking. Attribute values are normalized per §3.3.3 (references
//! replaced, each literal TAB, LF, CR or CRLF becomes one space) into a small
//! buffer bounded by the tag size; values without any of those borrow the
//! tag.

use super::chars::{decode_ref, is_name_char, is_name_start, is_ws, scan_ref, RefScan};
use super::scope::{check_qname, split_qname, Namespaces};
use crate::error::{Error, ErrorKind};
use crate::limits::{LimitKind, Limits};
use crate::ns;

/// Where an attribute value lives.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ValueLoc {
    /// A range of the tag, unchanged.
    Tag(u32, u32),
    /// A range of the decoded-values buffer.
    Decoded(u32, u32),
}

/// One attribute: its name's range in the tag, and its value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttrLoc {
    pub(crate) name: (u32, u32),
    pub(crate) value: ValueLoc,
}

/// What parsing the current tag found; ranges index the tag's bytes.
#[derive(Debug, Default)]
pub(crate) struct ParsedTag {
    pub(crate) name: (usize, usize),
    pub(crate) empty: bool,
    pub(crate) attrs: Vec<AttrLoc>,
    pub(crate) decoded: Vec<u8>,
    pub(crate) version: (usize, usize),
    pub(crate) encoding: Option<(usize, usize)>,
}

/// A cursor over a complete tag. Every tag ends with `>`, which no name or
/// white space includes, so the loops below stop without bounds checks of
/// their own.
struct Cur<'t> {
    tag: &'t [u8],
    i: usize,
    base: u64,
}

impl Cur<'_> {
    fn peek(&self) -> u8 {
        self.tag[self.i]
    }

    fn at(&self, i: usize) -> u64 {
        self.base + i as u64
    }

    fn err(&self, msg: &'static str) -> Error {
        Error::malformed(msg, self.at(self.i))
    }

    fn skip_ws(&mut self) -> bool {
        let start = self.i;
        while is_ws(self.tag[self.i]) {
            self.i += 1;
        }
        self.i > start
    }

    /// A `Name` (§2.3) of at most `name_len` bytes.
    fn name(&mut self, limits: &Limits) -> Result<(usize, usize), Error> {
        let start = self.i;
        if !is_name_start(self.peek()) {
            return Err(self.err("expected a name"));
        }
        let max = start + limits.name_len;
        self.i += 1;
        while is_name_char(self.tag[self.i]) {
            if self.i == max {
                let lim = limits.name_len as u64;
                return Err(Error::limit(LimitKind::NameLen, lim, self.at(max)));
            }
            self.i += 1;
        }
        Ok((start, self.i))
    }

    /// A name that must also be a `QName` (Namespaces §4).
    fn qname(&mut self, limits: &Limits) -> Result<(usize, usize), Error> {
        let (a, b) = self.name(limits)?;
        check_qname(&self.tag[a..b]).map_err(|i| {
            Error::malformed(
                "a qualified name has one colon between two parts",
                self.at(a + i),
            )
        })?;
        Ok((a, b))
    }

    /// `Eq` then the opening quote (§2.3 `Eq`, §3.1 `AttValue`); returns the
    /// quote.
    fn eq_quote(&mut self) -> Result<u8, Error> {
        self.skip_ws();
        if self.peek() != b'=' {
            return Err(self.err("expected '='"));
        }
        self.i += 1;
        self.skip_ws();
        match self.peek() {
            q @ (b'"' | b'\'') => {
                self.i += 1;
                Ok(q)
            }
            _ => Err(self.err("expected a quoted value")),
        }
    }

    /// The value up to the closing quote `q` before `end`; leaves the cursor
    /// after the quote.
    fn quoted(&mut self, q: u8, end: usize) -> Result<(usize, usize), Error> {
        let start = self.i;
        match memchr::memchr(q, &self.tag[start..end]) {
            Some(n) => {
                self.i = start + n + 1;
                Ok((start, start + n))
            }
            None => {
                self.i = end;
                Err(self.err("unterminated quoted value"))
            }
        }
    }
}

impl ParsedTag {
    fn clear(&mut self) {
        self.empty = false;
        self.attrs.clear();
        self.decoded.clear();
        self.encoding = None;
    }

    pub(crate) fn name<'t>(&self, tag: &'t [u8]) -> &'t [u8] {
        &tag[self.name.0..self.name.1]
    }

    /// A start or empty-element tag `<name attr="v" ...>` or `.../>`.
    pub(crate) fn parse_start(&mut self, tag: &[u8], base: u64, lim: &Limits) -> Result<(), Error> {
        self.clear();
        let mut c = Cur { tag, i: 1, base };
        self.name = c.qname(lim)?;
        loop {
            let had_ws = c.skip_ws();
            match c.peek() {
                b'>' => return Ok(()),
                b'/' => {
                    c.i += 1;
                    if c.peek() != b'>' {
                        return Err(c.err("expected '>' after '/'"));
                    }
                    self.empty = true;
                    return Ok(());
                }
                _ if !had_ws => return Err(c.err("expected white space before an attribute")),
                _ => self.attribute(&mut c, lim)?,
            }
        }
    }

    fn attribute(&mut self, c: &mut Cur<'_>, lim: &Limits) -> Result<(), Error> {
        let at = c.i;
        if self.attrs.len() >= lim.attrs {
            return Err(Error::limit(LimitKind::Attrs, lim.attrs as u64, c.at(at)));
        }
        let (a, b) = c.qname(lim)?;
        let name = &c.tag[a..b];
        let dup = self.attrs.iter().any(|x| {
            let (s, e) = x.name;
            &c.tag[s as usize..e as usize] == name
        });
        if dup {
            return Err(Error::malformed("attribute given twice", c.at(a)));
        }
        let q = c.eq_quote()?;
        let (vs, ve) = c.quoted(q, c.tag.len() - 1)?;
        let value = self.value(&c.tag[vs..ve], c.at(vs))?;
        let value = value.unwrap_or(ValueLoc::Tag(vs as u32, ve as u32));
        self.attrs.push(AttrLoc {
            name: (a as u32, b as u32),
            value,
        });
        Ok(())
    }

    /// Normalizes an attribute value (§3.3.3) into the decoded buffer when
    /// it needs it; `None` when the raw value is the value.
    fn value(&mut self, raw: &[u8], base: u64) -> Result<Option<ValueLoc>, Error> {
        let special = |b: &u8| matches!(b, b'<' | b'&' | b'\t' | b'\n' | b'\r');
        let Some(first) = raw.iter().position(special) else {
            return Ok(None);
        };
        let start = self.decoded.len();
        self.decoded.extend_from_slice(&raw[..first]);
        let mut i = first;
        while i < raw.len() {
            i += match raw[i] {
                b'<' => {
                    return Err(Error::malformed(
                        "'<' in an attribute value",
                        base + i as u64,
                    ))
                }
                b'&' => self.reference(&raw[i..], base + i as u64)?,
                b'\r' if raw.get(i + 1) == Some(&b'\n') => {
                    self.decoded.push(b' ');
                    2
                }
                b'\t' | b'\n' | b'\r' => {
                    self.decoded.push(b' ');
                    1
                }
                b => {
                    self.decoded.push(b);
                    1
                }
            };
        }
        Ok(Some(ValueLoc::Decoded(
            start as u32,
            self.decoded.len() as u32,
        )))
    }

    /// Decodes the reference at the start of `rest`; returns its length.
    fn reference(&mut self, rest: &[u8], at: u64) -> Result<usize, Error> {
        match scan_ref(rest) {
            RefScan::Done(n) => {
                let r = decode_ref(&rest[..n]).map_err(|m| Error::malformed(m, at))?;
                self.decoded.extend_from_slice(r.bytes());
                Ok(n)
            }
            RefScan::More => {
                let msg = "reference not closed by ';' in an attribute value";
                Err(Error::malformed(msg, at + rest.len() as u64))
            }
            RefScan::Bad(i, msg) => Err(Error::malformed(msg, at + i as u64)),
        }
    }

    /// An end tag `</name S?>`.
    pub(crate) fn parse_end(&mut self, tag: &[u8], base: u64, lim: &Limits) -> Result<(), Error> {
        self.clear();
        let mut c = Cur { tag, i: 2, base };
        self.name = c.name(lim)?;
        c.skip_ws();
        if c.peek() != b'>' {
            return Err(c.err("expected '>' to close the end tag"));
        }
        Ok(())
    }

    /// A processing instruction `<?target ...?>`; true if its target is
    /// `xml` in any case (the declaration, or a reserved target).
    pub(crate) fn parse_pi(&mut self, tag: &[u8], base: u64, lim: &Limits) -> Result<bool, Error> {
        self.clear();
        let mut c = Cur { tag, i: 2, base };
        self.name = c.name(lim)?;
        let end = tag.len() - 2;
        if c.i < end && !is_ws(c.peek()) {
            return Err(c.err("expected white space after the processing-instruction target"));
        }
        Ok(self.name(tag).eq_ignore_ascii_case(b"xml"))
    }

    /// The XML declaration (§2.8 `XMLDecl`, §4.3.3 `EncodingDecl`), after
    /// [`ParsedTag::parse_pi`] found the `xml` target.
    pub(crate) fn parse_decl(&mut self, tag: &[u8], base: u64, lim: &Limits) -> Result<(), Error> {
        if self.name(tag) != b"xml" {
            return Err(Error::malformed(
                "the XML declaration is spelled '<?xml'",
                base + 2,
            ));
        }
        let end = tag.len() - 2;
        let mut c = Cur {
            tag,
            i: self.name.1,
            base,
        };
        let order: [&[u8]; 3] = [b"version", b"encoding", b"standalone"];
        let mut next = 0;
        loop {
            let had_ws = c.skip_ws();
            if c.i >= end {
                break;
            }
            if !had_ws {
                return Err(c.err("expected white space in the XML declaration"));
            }
            let (a, b) = c.name(lim)?;
            let Some(k) = (next..3).find(|&k| order[k] == &tag[a..b]) else {
                return Err(Error::malformed(
                    "unexpected name in the XML declaration",
                    c.at(a),
                ));
            };
            if next == 0 && k != 0 {
                return Err(Error::malformed(
                    "the XML declaration starts with version",
                    c.at(a),
                ));
            }
            let q = c.eq_quote()?;
            let v = c.quoted(q, end)?;
            self.decl_value(k, v, &c)?;
            next = k + 1;
        }
        if next == 0 {
            return Err(c.err("the XML declaration lacks version"));
        }
        Ok(())
    }

    fn decl_value(&mut self, k: usize, (a, b): (usize, usize), c: &Cur<'_>) -> Result<(), Error> {
        let v = &c.tag[a..b];
        let bad = |msg| Err(Error::malformed(msg, c.at(a)));
        match k {
            0 => {
                let ok =
                    v.len() > 2 && v.starts_with(b"1.") && v[2..].iter().all(u8::is_ascii_digit);
                if !ok {
                    return bad("XML version is not 1.x");
                }
                self.version = (a, b);
            }
            1 => {
                let name_ok = v.first().is_some_and(u8::is_ascii_alphabetic)
                    && v.iter()
                        .all(|&x| x.is_ascii_alphanumeric() || b"._-".contains(&x));
                if !name_ok {
                    return bad("malformed encoding name");
                }
                let known = [&b"utf-8"[..], b"utf8", b"us-ascii", b"ascii"];
                if !known.iter().any(|k| v.eq_ignore_ascii_case(k)) {
                    let msg = "encoding other than UTF-8 or US-ASCII";
                    return Err(Error::new(ErrorKind::Unsupported, msg, c.at(a)));
                }
                self.encoding = Some((a, b));
            }
            _ => {
                if v != b"yes" && v != b"no" {
                    return bad("standalone is 'yes' or 'no'");
                }
            }
        }
        Ok(())
    }

    /// Applies the tag's namespace declarations to `ns` and checks that every
    /// prefix it uses is declared (Namespaces §3, §5, §6).
    pub(crate) fn declare(
        &self,
        tag: &[u8],
        base: u64,
        ns: &mut Namespaces,
        lim: &Limits,
    ) -> Result<(), Error> {
        for a in &self.attrs {
            let name = &tag[a.name.0 as usize..a.name.1 as usize];
            let prefix = match split_qname(name) {
                (b"", b"xmlns") => &[][..],
                (b"xmlns", p) => p,
                _ => continue,
            };
            let at = base + a.name.0 as u64;
            let uri = self.value_of(tag, a.value);
            check_declaration(prefix, uri, at)?;
            if ns.bytes() + prefix.len() + uri.len() > lim.namespace_bytes {
                let v = lim.namespace_bytes as u64;
                return Err(Error::limit(LimitKind::NamespaceBytes, v, at));
            }
            ns.push(prefix, uri);
        }
        self.check_prefixes(tag, base, ns)
    }

    fn check_prefixes(&self, tag: &[u8], base: u64, ns: &Namespaces) -> Result<(), Error> {
        let msg = "undeclared namespace prefix";
        let (prefix, _) = split_qname(self.name(tag));
        if !prefix.is_empty() && ns.lookup(prefix).is_none() {
            return Err(Error::malformed(msg, base + self.name.0 as u64));
        }
        for a in &self.attrs {
            let name = &tag[a.name.0 as usize..a.name.1 as usize];
            let (prefix, _) = split_qname(name);
            if !prefix.is_empty() && ns.lookup(prefix).is_none() {
                return Err(Error::malformed(msg, base + a.name.0 as u64));
            }
        }
        Ok(())
    }

    pub(crate) fn value_of<'t>(&'t self, tag: &'t [u8], v: ValueLoc) -> &'t [u8] {
        match v {
            ValueLoc::Tag(a, b) => &tag[a as usize..b as usize],
            ValueLoc::Decoded(a, b) => &self.decoded[a as usize..b as usize],
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.decoded.capacity() + self.attrs.capacity() * std::mem::size_of::<AttrLoc>()
    }
}

/// Namespaces §3 constraints on one declaration.
fn check_declaration(prefix: &[u8], uri: &[u8], at: u64) -> Result<(), Error> {
    let msg = if prefix == b"xmlns" {
        "the xmlns prefix cannot be declared"
    } else if (prefix == b"xml") != (uri == ns::XML) {
        "the xml prefix and only it is bound to the XML namespace"
    } else if uri == ns::XMLNS {
        "the xmlns namespace cannot be declared"
    } else if !prefix.is_empty() && uri.is_empty() {
        "a prefix cannot be undeclared in XML 1.0"
    } else {
        return Ok(());
    };
    Err(Error::malformed(msg, at))
}
