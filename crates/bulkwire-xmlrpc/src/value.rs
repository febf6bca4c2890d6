//! The value tree of an XML-RPC message (<http://xmlrpc.com/spec.md>,
//! "Scalar `<value>`s", "`<struct>`s", "`<array>`s"), plus the `i8` and `nil`
//! extensions (<https://ws.apache.org/xmlrpc/types.html>).
//!
//! A tree is small by construction (every string and every container is
//! capped by [`crate::Limits`]) except for `base64`: a parsed tree holds,
//! in place of the bytes, whatever the [`crate::Base64Sink`] returned for
//! them (a length, a digest, a storage handle), and a tree to encode holds
//! a [`crate::Blob`] that is read in blocks while the body is written.

use std::fmt;

/// One XML-RPC value. `B` is what stands in for a `base64` value: a sink's
/// output when parsing, a [`crate::Blob`] when encoding.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<B> {
    /// `<int>` or `<i4>`: a signed 32-bit integer.
    Int(i32),
    /// `<i8>` / `<ex:i8>`: a signed 64-bit integer (Apache extension).
    I8(i64),
    /// `<boolean>`: `0` or `1`.
    Bool(bool),
    /// `<string>`, or a `<value>` without a type element.
    String(String),
    /// `<double>`.
    Double(f64),
    /// `<dateTime.iso8601>`: the text as sent (white space trimmed), its
    /// shape checked; see [`DateTime`].
    DateTime(DateTime),
    /// `<base64>`: the sink's output (parsing) or the blob (encoding).
    Base64(B),
    /// `<struct>`: members in document order (duplicates kept).
    Struct(Vec<(String, Value<B>)>),
    /// `<array>`.
    Array(Vec<Value<B>>),
    /// `<nil/>` / `<ex:nil/>` (extension; Python's `allow_none`).
    Nil,
}

impl<B> Value<B> {
    /// Member `name` of a struct (the first, if repeated).
    pub fn get(&self, name: &str) -> Option<&Value<B>> {
        match self {
            Value::Struct(m) => m.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// An `int` or an `i8`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(i) => Some(i64::from(i)),
            Value::I8(i) => Some(i),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_base64(&self) -> Option<&B> {
        match self {
            Value::Base64(b) => Some(b),
            _ => None,
        }
    }

    /// The same tree with every `base64` value mapped by `f`.
    pub fn map_base64<C>(self, f: &mut impl FnMut(B) -> C) -> Value<C> {
        match self {
            Value::Int(i) => Value::Int(i),
            Value::I8(i) => Value::I8(i),
            Value::Bool(b) => Value::Bool(b),
            Value::String(s) => Value::String(s),
            Value::Double(d) => Value::Double(d),
            Value::DateTime(d) => Value::DateTime(d),
            Value::Base64(b) => Value::Base64(f(b)),
            Value::Struct(m) => {
                Value::Struct(m.into_iter().map(|(k, v)| (k, v.map_base64(f))).collect())
            }
            Value::Array(a) => Value::Array(a.into_iter().map(|v| v.map_base64(f)).collect()),
            Value::Nil => Value::Nil,
        }
    }
}

/// An ISO 8601 date-time as XML-RPC sends it, kept as text: the spec's
/// `19980717T14:08:55` (Python, PHP), or the extended forms other clients
/// send (`1998-07-17T14:08:55Z`, fractions, offsets). No time zone is
/// implied; converting is the application's business.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DateTime(String);

impl DateTime {
    /// Checks the shape: date `YYYYMMDD` or `YYYY-MM-DD`, `T`, time
    /// `HH:MM:SS` or `HHMMSS`, optional `.fraction`, optional `Z` or
    /// `±HH[:]MM`.
    pub fn parse(text: &str) -> Option<DateTime> {
        let b = text.as_bytes();
        let rest = date(b)?;
        let rest = rest.strip_prefix(b"T")?;
        let rest = time(rest)?;
        let rest = fraction(rest);
        zone(rest).then(|| DateTime(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn digits(b: &[u8], n: usize) -> Option<&[u8]> {
    (b.len() >= n && b[..n].iter().all(u8::is_ascii_digit)).then(|| &b[n..])
}

/// `n` digit pairs, with `sep` between them in the extended form.
fn fields(b: &[u8], first: usize, sep: u8) -> Option<&[u8]> {
    let rest = digits(b, first)?;
    if rest.first() == Some(&sep) {
        let rest = digits(&rest[1..], 2)?;
        rest.strip_prefix(&[sep]).and_then(|r| digits(r, 2))
    } else {
        digits(rest, 4)
    }
}

fn date(b: &[u8]) -> Option<&[u8]> {
    fields(b, 4, b'-')
}

fn time(b: &[u8]) -> Option<&[u8]> {
    fields(b, 2, b':')
}

fn fraction(b: &[u8]) -> &[u8] {
    match b.strip_prefix(b".") {
        Some(r) if r.first().is_some_and(u8::is_ascii_digit) => {
            let n = r.iter().take_while(|c| c.is_ascii_digit()).count();
            &r[n..]
        }
        _ => b,
    }
}

fn zone(b: &[u8]) -> bool {
    match b {
        [] | [b'Z'] => true,
        [b'+' | b'-', rest @ ..] => match digits(rest, 2) {
            Some([]) => true,
            Some(r) => {
                let r = r.strip_prefix(b":").unwrap_or(r);
                digits(r, 2).is_some_and(<[u8]>::is_empty)
            }
            None => false,
        },
        _ => false,
    }
}

/// An XML-RPC fault (spec "Fault example"): what a server returns instead
/// of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub code: i32,
    pub string: String,
}

impl Fault {
    /// Bad login (WordPress `wp_xmlrpc_server::login`).
    pub const FORBIDDEN: i32 = 403;
    /// Authentication required.
    pub const UNAUTHORIZED: i32 = 401;
    /// Server error (storage failure, a limit).
    pub const SERVER_ERROR: i32 = 500;
    /// Not well-formed (the specification for fault code interoperability).
    pub const PARSE_ERROR: i32 = -32700;
    /// Requested method not found.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i32 = -32602;

    pub fn new(code: i32, string: impl Into<String>) -> Fault {
        Fault {
            code,
            string: string.into(),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fault {}: {}", self.code, self.string)
    }
}

impl std::error::Error for Fault {}

/// A `<methodCall>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Call<B> {
    pub method: String,
    pub params: Vec<Value<B>>,
}

/// A `<methodResponse>`: parameters (the spec says exactly one; more or
/// none are accepted as Python does) or a fault.
#[derive(Debug, Clone, PartialEq)]
pub enum Response<B> {
    Params(Vec<Value<B>>),
    Fault(Fault),
}

/// A parsed message: a call (what a server receives) or a response (what a
/// client receives).
#[derive(Debug, Clone, PartialEq)]
pub enum Message<B> {
    Call(Call<B>),
    Response(Response<B>),
}

impl<B> Message<B> {
    pub fn into_call(self) -> Option<Call<B>> {
        match self {
            Message::Call(c) => Some(c),
            Message::Response(_) => None,
        }
    }

    pub fn into_response(self) -> Option<Response<B>> {
        match self {
            Message::Response(r) => Some(r),
            Message::Call(_) => None,
        }
    }
}

/// One step from the message down to a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    /// The n-th `<param>` (zero-based).
    Param(usize),
    /// The value of the `<fault>`.
    Fault,
    /// A struct member, by name.
    Member(String),
    /// The n-th value of an array (zero-based).
    Item(usize),
}

/// Where a value sits in the message, e.g. `params[3].bits`: handed to
/// [`crate::Base64Sink::begin`] so a server can tell an upload's `bits`
/// from any other `base64` value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ValuePath(pub Vec<PathSeg>);

impl ValuePath {
    pub fn segments(&self) -> &[PathSeg] {
        &self.0
    }

    /// The index of the param this value is in, if any.
    pub fn param(&self) -> Option<usize> {
        match self.0.first() {
            Some(PathSeg::Param(i)) => Some(*i),
            _ => None,
        }
    }

    /// The name of the innermost struct member, if the value is one.
    pub fn member(&self) -> Option<&str> {
        match self.0.last() {
            Some(PathSeg::Member(m)) => Some(m),
            _ => None,
        }
    }
}

impl fmt::Display for ValuePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for seg in &self.0 {
            match seg {
                PathSeg::Param(i) => write!(f, "params[{i}]")?,
                PathSeg::Fault => f.write_str("fault")?,
                PathSeg::Member(m) => write!(f, ".{m}")?,
                PathSeg::Item(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_time_shapes() {
        for ok in [
            "19980717T14:08:55",
            "19980717T140855",
            "1998-07-17T14:08:55",
            "1998-07-17T14:08:55Z",
            "1998-07-17T14:08:55.123+02:00",
            "19980717T14:08:55-0500",
        ] {
            assert_eq!(DateTime::parse(ok).map(|d| d.to_string()), Some(ok.into()));
        }
        for bad in [
            "",
            "1998071714:08:55",
            "19980717T14:08",
            "1998-0717T14:08:55",
            "19980717T14:08:55 ",
            "19980717T14:08:55+5",
            "19980717T14:08:55+05:",
            "19980717T14:08:55.",
            "19980717T14:08:55Zx",
            "x9980717T14:08:55",
        ] {
            assert_eq!(DateTime::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn path_display_and_access() {
        let p = ValuePath(vec![
            PathSeg::Param(3),
            PathSeg::Member("files".into()),
            PathSeg::Item(2),
            PathSeg::Member("bits".into()),
        ]);
        assert_eq!(p.to_string(), "params[3].files[2].bits");
        assert_eq!((p.param(), p.member()), (Some(3), Some("bits")));
        let v: Value<u64> = Value::Struct(vec![("a".into(), Value::Base64(7))]);
        assert_eq!(v.get("a").and_then(Value::as_base64), Some(&7));
        let m = v.map_base64(&mut |n| n * 2);
        assert_eq!(m.get("a"), Some(&Value::Base64(14)));
    }
}
