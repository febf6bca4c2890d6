//! Scalar values from their text (<http://xmlrpc.com/spec.md>, "Scalar
//! `<value>`s"). Pure functions, each returning the value or the message of
//! a [`crate::ErrorKind::Malformed`] error.
//!
//! Numbers, booleans and date-times may be surrounded by white space (as
//! Python's `int()` and `float()` allow); strings are kept exactly.

use crate::value::DateTime;

/// The elements a message may contain, by local name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    MethodCall,
    MethodResponse,
    MethodName,
    Params,
    Param,
    Fault,
    Value,
    Struct,
    Member,
    Name,
    Array,
    Data,
    Scalar(Scalar),
    Base64,
}

/// The types whose value is built from their text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scalar {
    Int,
    I8,
    Bool,
    String,
    Double,
    DateTime,
    Nil,
}

/// Namespace of the Apache XML-RPC extensions (`ex:i8`, `ex:nil`).
pub const EXTENSIONS_NS: &[u8] = b"http://ws.apache.org/xmlrpc/namespaces/extensions";

impl Elem {
    /// The element for a resolved name: XML-RPC elements are in no
    /// namespace; `i8` and `nil` may also be in the extensions namespace.
    pub(crate) fn from_name(ns: Option<&[u8]>, local: &[u8]) -> Option<Elem> {
        let ext = match ns {
            None => false,
            Some(EXTENSIONS_NS) => true,
            Some(_) => return None,
        };
        let e = match local {
            b"i8" => Elem::Scalar(Scalar::I8),
            b"nil" => Elem::Scalar(Scalar::Nil),
            _ if ext => return None,
            b"methodCall" => Elem::MethodCall,
            b"methodResponse" => Elem::MethodResponse,
            b"methodName" => Elem::MethodName,
            b"params" => Elem::Params,
            b"param" => Elem::Param,
            b"fault" => Elem::Fault,
            b"value" => Elem::Value,
            b"struct" => Elem::Struct,
            b"member" => Elem::Member,
            b"name" => Elem::Name,
            b"array" => Elem::Array,
            b"data" => Elem::Data,
            b"int" | b"i4" => Elem::Scalar(Scalar::Int),
            b"boolean" => Elem::Scalar(Scalar::Bool),
            b"string" => Elem::Scalar(Scalar::String),
            b"double" => Elem::Scalar(Scalar::Double),
            b"dateTime.iso8601" => Elem::Scalar(Scalar::DateTime),
            b"base64" => Elem::Base64,
            _ => return None,
        };
        Some(e)
    }

    /// Whether this element is a type inside `<value>`.
    pub(crate) fn is_type(self) -> bool {
        matches!(
            self,
            Elem::Scalar(_) | Elem::Base64 | Elem::Struct | Elem::Array
        )
    }
}

pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

pub(crate) fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&c| !is_ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|&c| !is_ws(c)).map_or(start, |e| e + 1);
    &b[start..end]
}

/// Text kept as a string: UTF-8 of XML 1.0 §2.2 `Char`s only (the
/// tokenizer passes control characters through; a string holding one could
/// not be sent back).
pub(crate) fn utf8(b: &[u8]) -> Result<&str, &'static str> {
    let s = std::str::from_utf8(b).map_err(|_| "text is not valid UTF-8")?;
    match s.chars().all(xml_char) {
        true => Ok(s),
        false => Err("text holds a character XML 1.0 does not allow"),
    }
}

/// Whether XML 1.0 §2.2 `Char` allows `c`.
pub(crate) fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Optional sign then ASCII digits.
fn integer_shape(t: &[u8]) -> bool {
    let digits = t
        .strip_prefix(b"-")
        .or_else(|| t.strip_prefix(b"+"))
        .unwrap_or(t);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

pub(crate) fn int(text: &[u8]) -> Result<i32, &'static str> {
    let t = trim(text);
    if !integer_shape(t) {
        return Err("invalid integer");
    }
    utf8(t)?
        .parse()
        .map_err(|_| "integer out of range for i4 (-2^31 to 2^31-1)")
}

pub(crate) fn i8(text: &[u8]) -> Result<i64, &'static str> {
    let t = trim(text);
    if !integer_shape(t) {
        return Err("invalid integer");
    }
    utf8(t)?
        .parse()
        .map_err(|_| "integer out of range for i8 (-2^63 to 2^63-1)")
}

pub(crate) fn boolean(text: &[u8]) -> Result<bool, &'static str> {
    match trim(text) {
        b"1" | b"true" => Ok(true),
        b"0" | b"false" => Ok(false),
        _ => Err("invalid boolean (expected 0 or 1)"),
    }
}

pub(crate) fn double(text: &[u8]) -> Result<f64, &'static str> {
    let t = trim(text);
    let ok = !t.is_empty()
        && t.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'));
    let parsed = ok.then(|| utf8(t).ok()?.parse().ok()).flatten();
    parsed.ok_or("invalid double")
}

pub(crate) fn date_time(text: &[u8]) -> Result<DateTime, &'static str> {
    let t = utf8(trim(text))?;
    DateTime::parse(t).ok_or("invalid dateTime.iso8601 (expected e.g. 19980717T14:08:55)")
}

pub(crate) fn nil(text: &[u8]) -> Result<(), &'static str> {
    match trim(text) {
        b"" => Ok(()),
        _ => Err("text inside nil"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(int(b" 42\n"), Ok(42));
        assert_eq!(int(b"-2147483648"), Ok(i32::MIN));
        assert_eq!(int(b"+7"), Ok(7));
        assert!(int(b"2147483648").unwrap_err().contains("out of range"));
        assert!(int(b"99999999999999999999999999999999999999999").is_err());
        assert_eq!(int(b"1 2"), Err("invalid integer"));
        assert_eq!(int(b""), Err("invalid integer"));
        assert_eq!(int(b"0x10"), Err("invalid integer"));
        assert_eq!(i8(b"9223372036854775807"), Ok(i64::MAX));
        assert!(i8(b"9223372036854775808").unwrap_err().contains("i8"));
    }

    #[test]
    fn other_scalars() {
        assert_eq!(boolean(b"1"), Ok(true));
        assert_eq!(boolean(b" 0 "), Ok(false));
        assert!(boolean(b"yes").is_err());
        assert_eq!(double(b"-1.5"), Ok(-1.5));
        assert_eq!(double(b"1e300"), Ok(1e300));
        assert!(double(b"inf").unwrap().is_infinite());
        assert!(double(b"1,5").is_err());
        assert!(double(b"").is_err());
        assert_eq!(
            date_time(b" 19980717T14:08:55 ").unwrap().as_str(),
            "19980717T14:08:55"
        );
        assert!(date_time(b"yesterday").is_err());
        assert!(nil(b" \n").is_ok() && nil(b"x").is_err());
        assert_eq!(trim(b" \t a b \r\n"), b"a b");
        assert_eq!(trim(b"   "), b"");
    }

    #[test]
    fn element_names() {
        let ext = Some(EXTENSIONS_NS);
        assert_eq!(Elem::from_name(ext, b"i8"), Some(Elem::Scalar(Scalar::I8)));
        assert_eq!(
            Elem::from_name(ext, b"nil"),
            Some(Elem::Scalar(Scalar::Nil))
        );
        assert_eq!(Elem::from_name(ext, b"string"), None);
        assert_eq!(Elem::from_name(Some(b"urn:x"), b"value"), None);
        assert_eq!(
            Elem::from_name(None, b"i4"),
            Some(Elem::Scalar(Scalar::Int))
        );
        assert_eq!(Elem::from_name(None, b"Value"), None);
    }
}
