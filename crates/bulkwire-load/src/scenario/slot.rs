//! A body with one per-request text slot in XML character data: the
//! XML-RPC and MTOM scenarios are both "static bytes, the filename, static
//! bytes, the shared file (or its base64 text), static bytes".
//!
//! The body is encoded once by the codec crate with a sentinel in place of
//! the filename and cut around it, so the static pieces are exactly what the
//! codec writes; per request only the filename is rendered and escaped
//! (XML 1.0 §2.4: `&`, `<`, `>`, and CR, which a parser would turn into LF
//! by §2.11).

use super::Payload;
use crate::error::{Error, Result};
use crate::pattern::{Pattern, Vars};
use bytes::Bytes;
use std::io;

/// Stands for the filename while the body is encoded once. Checked to occur
/// exactly once, so a user name that happens to hold it is an error, not a
/// wrong body.
pub(crate) const SENTINEL: &str = "bulkwire-name-slot-3f9c1e7a";

/// Segments before the name, the name pattern, segments after it.
#[derive(Debug, Clone)]
pub(crate) struct NameSlot {
    before: Vec<Bytes>,
    name: Pattern,
    after: Vec<Bytes>,
    /// Text the rendered name must not contain (an MTOM boundary).
    forbidden: Option<String>,
}

impl NameSlot {
    /// Cuts `segments` at the one occurrence of [`SENTINEL`].
    pub(crate) fn cut(segments: Vec<Bytes>, name: Pattern) -> Result<NameSlot> {
        let needle = SENTINEL.as_bytes();
        let mut hits = segments.iter().enumerate().flat_map(|(i, s)| {
            memchr::memmem::find_iter(s, needle)
                .map(move |at| (i, at))
                .collect::<Vec<_>>()
        });
        let (Some((seg, at)), None) = (hits.next(), hits.next()) else {
            return Err(Error::config(format!(
                "the filename slot must occur once in the body (does a value hold {SENTINEL:?}?)"
            )));
        };
        let mut before: Vec<Bytes> = segments[..seg].to_vec();
        let mut after = vec![segments[seg].slice(at + needle.len()..)];
        before.push(segments[seg].slice(..at));
        after.extend_from_slice(&segments[seg + 1..]);
        before.retain(|b| !b.is_empty());
        after.retain(|b| !b.is_empty());
        Ok(NameSlot {
            before,
            name,
            after,
            forbidden: None,
        })
    }

    /// Refuses (per request) a rendered name that contains `text`.
    pub(crate) fn forbid(mut self, text: String) -> NameSlot {
        self.forbidden = Some(text);
        self
    }

    /// This request's body: refcount clones of the static pieces and one
    /// small buffer for the escaped name.
    pub(crate) fn render(&self, vars: &Vars) -> io::Result<Payload> {
        let mut name = String::new();
        self.name.render(vars, &mut name);
        if let Some(f) = &self.forbidden {
            if name.contains(f.as_str()) {
                return Err(io::Error::other("the filename contains the boundary"));
            }
        }
        let mut segments = Vec::with_capacity(self.before.len() + self.after.len() + 1);
        segments.extend(self.before.iter().cloned());
        segments.push(Bytes::from(escape(&name)));
        segments.extend(self.after.iter().cloned());
        Ok(Payload::new(segments))
    }
}

/// XML character data escaping, as `bulkwire-xmlrpc`'s encoder does it.
pub(crate) fn escape(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 8);
    for b in s.bytes() {
        match b {
            b'&' => out.extend_from_slice(b"&amp;"),
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'\r' => out.extend_from_slice(b"&#13;"),
            _ => out.push(b),
        }
    }
    out
}

/// A sample rendering of `p` (seq 0, a fixed UUID), to validate a pattern's
/// literal text once through the codec.
pub(crate) fn sample(p: &Pattern) -> String {
    let vars = Vars {
        seq: 0,
        uuid: *b"00000000-0000-4000-8000-000000000000",
    };
    p.to_string(&vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(seq: u64) -> Vars {
        Vars {
            seq,
            uuid: *b"12345678-1234-4234-8234-123456789abc",
        }
    }

    #[test]
    fn cuts_once_and_renders_escaped() {
        let segs = vec![
            Bytes::from_static(b"<a>"),
            Bytes::from(format!("<n>{SENTINEL}</n>")),
            Bytes::from_static(b"FILE"),
        ];
        let slot = NameSlot::cut(segs, Pattern::parse("a&b<{seq}>").unwrap()).unwrap();
        let p = slot.render(&vars(7)).unwrap();
        assert_eq!(p.to_vec(), b"<a><n>a&amp;b&lt;7&gt;</n>FILE");
        assert_eq!(p.len, p.to_vec().len() as u64);
    }

    #[test]
    fn missing_or_repeated_sentinel_is_an_error() {
        let p = Pattern::parse("x").unwrap();
        assert!(NameSlot::cut(vec![Bytes::from_static(b"none")], p.clone()).is_err());
        let twice = Bytes::from(format!("{SENTINEL}{SENTINEL}"));
        assert!(NameSlot::cut(vec![twice], p).is_err());
    }

    #[test]
    fn forbidden_text_fails_the_render() {
        let segs = vec![Bytes::from(SENTINEL)];
        let slot = NameSlot::cut(segs, Pattern::parse("x-{seq}").unwrap())
            .unwrap()
            .forbid("-1".into());
        assert!(slot.render(&vars(2)).is_ok());
        assert!(slot.render(&vars(12)).is_err());
    }
}
