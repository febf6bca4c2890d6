//! Media type values (RFC 2045 §5.1, RFC 9110 §8.3.1) of the non-multipart
//! kind: the root part's `application/xop+xml; type="text/xml"` (XOP 1.0
//! §4.1, MTOM §3) and a bare envelope's `text/xml` or
//! `application/soap+xml`. One left-to-right pass; a quoted string may hold
//! `;` and quoted pairs.

/// A media type: lower-cased essence and parameters (names lower-cased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MediaType {
    pub essence: String,
    pub params: Vec<(String, String)>,
}

impl MediaType {
    /// `None` if a parameter is malformed (no `=`, an unclosed quote).
    pub(crate) fn parse(value: &str) -> Option<MediaType> {
        let (essence, mut rest) = value.split_once(';').unwrap_or((value, ""));
        let mut params = Vec::new();
        loop {
            rest = rest.trim_start_matches([' ', '\t', ';']);
            if rest.is_empty() {
                break;
            }
            let (name, after) = rest.split_once('=')?;
            let (v, after) = param_value(after.trim_start())?;
            params.push((name.trim().to_ascii_lowercase(), v));
            rest = after;
        }
        Some(MediaType {
            essence: essence.trim().to_ascii_lowercase(),
            params,
        })
    }

    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        let p = self.params.iter().find(|(n, _)| n == name)?;
        Some(&p.1)
    }
}

/// A token or quoted string, and the rest after it (at its `;` or end).
fn param_value(s: &str) -> Option<(String, &str)> {
    let Some(q) = s.strip_prefix('"') else {
        let end = s.find(';').unwrap_or(s.len());
        return Some((s[..end].trim().to_owned(), &s[end..]));
    };
    let mut out = String::new();
    let mut chars = q.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                let rest = &q[i + 1..];
                let end = rest.find(';').unwrap_or(rest.len());
                if !rest[..end].trim().is_empty() {
                    return None;
                }
                return Some((out, &rest[end..]));
            }
            '\\' => out.push(chars.next()?.1),
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xop_root_type() {
        let m = MediaType::parse(r#"Application/XOP+xml; charset=UTF-8; type="text/xml""#).unwrap();
        assert_eq!(m.essence, "application/xop+xml");
        assert_eq!(m.param("charset"), Some("UTF-8"));
        assert_eq!(m.param("type"), Some("text/xml"));
        let m = MediaType::parse(r#"a/b; x="p;q\"r"; y=z"#).unwrap();
        assert_eq!(m.param("x"), Some("p;q\"r"));
        assert_eq!(m.param("y"), Some("z"));
        assert_eq!(MediaType::parse("text/xml").unwrap().params, vec![]);
        assert!(MediaType::parse(r#"a/b; x="open"#).is_none());
        assert!(MediaType::parse("a/b; novalue").is_none());
        assert!(MediaType::parse(r#"a/b; x="q" junk"#).is_none());
    }
}
