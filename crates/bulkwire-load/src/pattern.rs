//! Per-request variation: `{seq}` and `{uuid}` in field values, filenames
//! and headers.
//!
//! A [`Pattern`] is parsed once at start-up into literal runs and variables,
//! so a render is a few small appends into a caller's buffer. `{{` and `}}`
//! stand for literal braces; any other `{name}` is an error (a typo would
//! otherwise send the same value on every request).

use crate::error::{Error, Result};
use rand::RngCore;

/// The values of one request's variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vars {
    /// Zero-based index of the request in the run, unique and consecutive.
    pub seq: u64,
    /// A random (version 4, RFC 9562 §5.4) UUID in its 36-character form.
    pub uuid: [u8; 36],
}

impl Vars {
    /// Variables for request `seq`, with a fresh UUID from `rng`.
    pub fn new(seq: u64, rng: &mut impl RngCore) -> Vars {
        Vars {
            seq,
            uuid: uuid_v4(rng),
        }
    }

    /// The UUID as text.
    pub fn uuid_str(&self) -> &str {
        // Only ASCII hex digits and dashes are ever written to it.
        std::str::from_utf8(&self.uuid).unwrap_or_default()
    }
}

/// A version 4 UUID (RFC 9562 §5.4): 122 random bits, version and variant
/// bits set, formatted 8-4-4-4-12.
pub fn uuid_v4(rng: &mut impl RngCore) -> [u8; 36] {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'-'; 36];
    let mut o = 0;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            o += 1;
        }
        out[o] = HEX[usize::from(byte >> 4)];
        out[o + 1] = HEX[usize::from(byte & 0xf)];
        o += 2;
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Lit(String),
    Seq,
    Uuid,
}

/// A string with `{seq}` / `{uuid}` variables, parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    pieces: Vec<Piece>,
}

impl Pattern {
    /// Parses `text`; errors on an unknown `{name}` or an unmatched brace.
    pub fn parse(text: &str) -> Result<Pattern> {
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(i) = rest.find(['{', '}']) {
            lit.push_str(&rest[..i]);
            let tail = &rest[i..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                lit.push_str(&tail[..1]);
                rest = &tail[2..];
                continue;
            }
            let (var, after) = variable(text, tail)?;
            if !lit.is_empty() {
                pieces.push(Piece::Lit(std::mem::take(&mut lit)));
            }
            pieces.push(var);
            rest = after;
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            pieces.push(Piece::Lit(lit));
        }
        Ok(Pattern { pieces })
    }

    /// Whether the pattern has no variables (the same on every request).
    pub fn is_static(&self) -> bool {
        self.pieces.iter().all(|p| matches!(p, Piece::Lit(_)))
    }

    /// The text of a static pattern (braces unescaped).
    pub fn literal(&self) -> Option<String> {
        let mut s = String::new();
        for p in &self.pieces {
            match p {
                Piece::Lit(l) => s.push_str(l),
                _ => return None,
            }
        }
        Some(s)
    }

    /// Appends this request's value to `out`.
    pub fn render(&self, vars: &Vars, out: &mut String) {
        use std::fmt::Write;
        for p in &self.pieces {
            match p {
                Piece::Lit(l) => out.push_str(l),
                // Writing to a String cannot fail.
                Piece::Seq => {
                    let _ = write!(out, "{}", vars.seq);
                }
                Piece::Uuid => out.push_str(vars.uuid_str()),
            }
        }
    }

    /// This request's value as a new string.
    pub fn to_string(&self, vars: &Vars) -> String {
        let mut s = String::new();
        self.render(vars, &mut s);
        s
    }
}

/// `tail` starts with `{` or a lone `}`: the variable and what follows it.
fn variable<'a>(text: &str, tail: &'a str) -> Result<(Piece, &'a str)> {
    let bad = |why: &str| {
        Error::config(format!(
            "pattern {text:?}: {why} (use {{{{ and }}}} for literal braces)"
        ))
    };
    if tail.starts_with('}') {
        return Err(bad("unmatched }"));
    }
    let end = tail.find('}').ok_or_else(|| bad("unclosed {"))?;
    let piece = match &tail[1..end] {
        "seq" => Piece::Seq,
        "uuid" => Piece::Uuid,
        other => {
            return Err(bad(&format!(
                "unknown variable {{{other}}}; known: {{seq}}, {{uuid}}"
            )))
        }
    };
    Ok((piece, &tail[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn vars(seq: u64) -> Vars {
        Vars::new(seq, &mut rand::rngs::StdRng::seed_from_u64(seq))
    }

    #[test]
    fn renders_variables_and_literals() {
        let p = Pattern::parse("img-{seq}-{uuid}.jpg").unwrap();
        assert!(!p.is_static());
        let v = vars(42);
        assert_eq!(p.to_string(&v), format!("img-42-{}.jpg", v.uuid_str()));
    }

    #[test]
    fn escaped_braces_are_literal() {
        let p = Pattern::parse("{{seq}} }}").unwrap();
        assert!(p.is_static());
        assert_eq!(p.literal().as_deref(), Some("{seq} }"));
    }

    #[test]
    fn unknown_or_unbalanced_is_an_error() {
        for bad in ["{sec}", "{seq", "a}b", "{}"] {
            let e = Pattern::parse(bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Config, "{bad}");
        }
        assert!(Pattern::parse("{sec}")
            .unwrap_err()
            .to_string()
            .contains("unknown variable {sec}"));
    }

    #[test]
    fn uuid_is_version_4_and_well_formed() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let u = uuid_v4(&mut rng);
            let s = std::str::from_utf8(&u).unwrap();
            let groups: Vec<_> = s.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{s}");
            assert_eq!(&s[14..15], "4", "{s}");
            assert!(matches!(&s[19..20], "8" | "9" | "a" | "b"), "{s}");
            assert!(s.bytes().all(|c| c == b'-' || c.is_ascii_hexdigit()));
            assert!(seen.insert(u));
        }
    }
}
