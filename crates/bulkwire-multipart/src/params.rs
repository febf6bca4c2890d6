//! Header parameters: `; name=value` lists as in RFC 2045 §5.1 (Content-Type)
//! and RFC 6266 §4.1 / RFC 7578 §4.2 (Content-Disposition).
//!
//! One left-to-right pass, no backtracking, so parsing is linear in the header
//! length whatever its contents. Values are returned raw (between the quotes);
//! [`decode`] applies quoted-pair and the browsers' percent escapes on demand,
//! allocating only when an escape is present.

use std::borrow::Cow;

/// One `name=value` parameter; `value` is still escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawParam<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    pub quoted: bool,
}

/// Iterator over the parameters after the first `;` of a header value.
/// Yields `Err(index)` at the first syntax error (e.g. an unterminated quote).
pub struct Params<'a> {
    s: &'a [u8],
    pos: usize,
    failed: bool,
}

/// Splits `value` into its leading token (media type or disposition type)
/// and the parameter list that follows it.
pub fn split_value(value: &[u8]) -> (&[u8], Params<'_>) {
    let end = memchr::memchr(b';', value).unwrap_or(value.len());
    let head = trim(&value[..end]);
    (
        head,
        Params {
            s: value,
            pos: end,
            failed: false,
        },
    )
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Trims optional whitespace (RFC 7230 OWS) from both ends.
pub fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !is_ows(*first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !is_ows(*last) {
            break;
        }
        s = rest;
    }
    s
}

impl<'a> Params<'a> {
    fn skip_ows(&mut self) {
        while self.pos < self.s.len() && is_ows(self.s[self.pos]) {
            self.pos += 1;
        }
    }

    /// Reads a quoted string starting after its opening quote. A backslash
    /// escapes only `"` and `\` so that unescaped Windows paths survive.
    fn quoted(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        loop {
            self.pos += memchr::memchr2(b'"', b'\\', &self.s[self.pos..])?;
            if self.s[self.pos] == b'"' {
                let v = &self.s[start..self.pos];
                self.pos += 1;
                return Some(v);
            }
            let escaped = matches!(self.s.get(self.pos + 1), Some(b'"' | b'\\'));
            self.pos += 1 + usize::from(escaped);
        }
    }

    fn token(&mut self) -> &'a [u8] {
        let start = self.pos;
        while self.pos < self.s.len() && !matches!(self.s[self.pos], b';' | b' ' | b'\t') {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    fn param(&mut self) -> Result<RawParam<'a>, usize> {
        self.skip_ows();
        let start = self.pos;
        while self.pos < self.s.len() && !matches!(self.s[self.pos], b'=' | b';') {
            self.pos += 1;
        }
        let name = trim(&self.s[start..self.pos]);
        if name.is_empty() {
            return Err(start);
        }
        if self.s.get(self.pos) != Some(&b'=') {
            // An empty value that still points into the header, so callers
            // can locate it (`ParamAt` works out ranges from addresses).
            let value = &self.s[self.pos..self.pos];
            return Ok(RawParam {
                name,
                value,
                quoted: false,
            });
        }
        self.pos += 1;
        self.skip_ows();
        let (value, quoted) = if self.s.get(self.pos) == Some(&b'"') {
            self.pos += 1;
            (self.quoted().ok_or(start)?, true)
        } else {
            (self.token(), false)
        };
        self.skip_ows();
        match self.s.get(self.pos) {
            None | Some(b';') => Ok(RawParam {
                name,
                value,
                quoted,
            }),
            Some(_) => Err(self.pos),
        }
    }
}

impl<'a> Iterator for Params<'a> {
    type Item = Result<RawParam<'a>, usize>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed || self.pos >= self.s.len() {
                return None;
            }
            // `pos` is at a ';' (or the start of trailing garbage).
            if self.s[self.pos] != b';' {
                self.failed = true;
                return Some(Err(self.pos));
            }
            self.pos += 1;
            self.skip_ows();
            if self.pos >= self.s.len() || self.s[self.pos] == b';' {
                continue; // empty parameter, e.g. a trailing ';'
            }
            let r = self.param();
            self.failed = r.is_err();
            return Some(r);
        }
    }
}

/// How a parameter value is unescaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escapes {
    /// RFC 2045 quoted-pair only (`\"`, `\\`).
    QuotedPair,
    /// Also the `%22`, `%0D`, `%0A` escapes that browsers apply to form-data
    /// names and filenames (WHATWG HTML "multipart/form-data encoding").
    Browser,
}

/// Unescapes a raw parameter value, borrowing when nothing needs changing.
pub fn decode<'a>(p: &RawParam<'a>, escapes: Escapes) -> Cow<'a, [u8]> {
    let v = p.value;
    let has_bs = p.quoted && memchr::memchr(b'\\', v).is_some();
    let has_pct = escapes == Escapes::Browser && memchr::memchr(b'%', v).is_some();
    if !has_bs && !has_pct {
        return Cow::Borrowed(v);
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        let (byte, used) = match v[i] {
            b'\\' if has_bs && matches!(v.get(i + 1), Some(b'"' | b'\\')) => (v[i + 1], 2),
            b'%' if has_pct => match browser_escape(&v[i..]) {
                Some(b) => (b, 3),
                None => (b'%', 1),
            },
            b => (b, 1),
        };
        out.push(byte);
        i += used;
    }
    Cow::Owned(out)
}

fn browser_escape(s: &[u8]) -> Option<u8> {
    let hex = s.get(1..3)?;
    match [hex[0].to_ascii_uppercase(), hex[1].to_ascii_uppercase()] {
        [b'2', b'2'] => Some(b'"'),
        [b'0', b'D'] => Some(b'\r'),
        [b'0', b'A'] => Some(b'\n'),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Decoded = Result<Vec<(String, String, bool)>, usize>;

    fn all(v: &str) -> (Vec<u8>, Decoded) {
        let (head, params) = split_value(v.as_bytes());
        let ps: Result<Vec<_>, usize> = params
            .map(|r| {
                r.map(|p| {
                    let n = String::from_utf8(p.name.to_vec()).unwrap();
                    let val = decode(&p, Escapes::QuotedPair);
                    (n, String::from_utf8(val.into_owned()).unwrap(), p.quoted)
                })
            })
            .collect();
        (head.to_vec(), ps)
    }

    #[test]
    fn quoted_and_unquoted() {
        let (h, p) = all(r#"multipart/related; boundary="a b;c"; start=<x@y> ; type="text/xml""#);
        assert_eq!(h, b"multipart/related");
        let p = p.unwrap();
        assert_eq!(p[0], ("boundary".into(), "a b;c".into(), true));
        assert_eq!(p[1], ("start".into(), "<x@y>".into(), false));
        assert_eq!(p[2], ("type".into(), "text/xml".into(), true));
    }

    #[test]
    fn quoted_pair_only_for_quote_and_backslash() {
        let (_, p) = all(r#"form-data; filename="C:\dir\a\"b\\c""#);
        assert_eq!(p.unwrap()[0].1, r#"C:\dir\a"b\c"#);
    }

    #[test]
    fn browser_escapes() {
        let (_, mut ps) = split_value(br#"form-data; name="a%22b%0D%0Ac%41%0a""#);
        let p = ps.next().unwrap().unwrap();
        assert_eq!(&*decode(&p, Escapes::Browser), b"a\"b\r\nc%41\n");
        assert_eq!(&*decode(&p, Escapes::QuotedPair), br#"a%22b%0D%0Ac%41%0a"#);
        assert!(matches!(decode(&p, Escapes::QuotedPair), Cow::Borrowed(_)));
    }

    #[test]
    fn errors_point_at_the_fault() {
        assert_eq!(all(r#"a; b="unterminated"#).1, Err(3));
        assert_eq!(all("a; b=c d").1, Err(7));
        assert_eq!(all("a; =c").1, Err(3));
    }

    #[test]
    fn empty_and_valueless_params() {
        let (h, p) = all("form-data;; name=x; flag;");
        assert_eq!(h, b"form-data");
        let p = p.unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1], ("flag".into(), "".into(), false));
    }

    #[test]
    fn linear_on_pathological_input() {
        // Many unterminated quotes or semicolons must not blow up.
        let s = format!("x{}", ";a=\"\\\"".repeat(50_000));
        let (_, ps) = split_value(s.as_bytes());
        assert!(ps.take(3).any(|r| r.is_err()));
        let s = ";".repeat(200_000);
        assert_eq!(split_value(s.as_bytes()).1.count(), 0);
    }
}
