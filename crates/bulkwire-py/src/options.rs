//! `parse_options_header`: a header value such as
//! `form-data; name="f"; filename="a.txt"` split into its lower-cased type
//! and its parameters, as python-multipart's function of the same name
//! returns them, in one left-to-right pass (no regular expression, so no
//! backtracking: CVE-2024-24762 was a regex on this very input).
//!
//! Rules, and why:
//! - RFC 7578 §4.2: form-data parameters are plain `name=value`; the
//!   RFC 2231/5987 extended forms (`filename*=`, `name*0=`) are not used, so
//!   any parameter whose name holds a `*` is dropped and never replaces the
//!   plain one.
//! - The first occurrence of a parameter wins: two parsers that pick
//!   different copies of a repeated `name` disagree about what was sent.
//! - Inside a quoted string a backslash escapes only `"` and `\` (RFC 7230
//!   quoted-pair, narrowed as browsers and python-multipart do), so an
//!   unescaped Windows path keeps its backslashes; a filename that is a
//!   Windows path (`C:\dir\f.txt`, `\\host\f.txt`, as Internet Explorer 6
//!   sent) is cut to its last component, as python-multipart does.
//! - A value that does not close its quote, or has text after the closing
//!   quote, is kept raw up to the next `;` (python-multipart's result too).

/// The type (lower case, OWS trimmed) and the parameters in order, each
/// name lower-cased when it had a value.
pub type Parsed = (Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [f, rest @ ..] = s {
        if !is_ows(*f) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., l] = s {
        if !is_ows(*l) {
            break;
        }
        s = rest;
    }
    s
}

/// Parses a whole header value.
pub fn parse(value: &[u8]) -> Parsed {
    let head_end = memchr::memchr(b';', value).unwrap_or(value.len());
    let ctype = trim(&value[..head_end]).to_ascii_lowercase();
    let mut params: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut pos = head_end;
    while pos < value.len() {
        let (name, val, next) = param(value, pos + 1);
        pos = next;
        let Some((name, val)) = name.zip(val) else {
            continue;
        };
        if name.contains(&b'*') || params.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let val = if name == b"filename" {
            strip_windows_path(val)
        } else {
            val
        };
        params.push((name, val));
    }
    (ctype, params)
}

/// One parameter starting at `start` (just after a `;`): its name, value and
/// the position of the `;` that ends it (or the end). An empty segment has
/// no name.
fn param(s: &[u8], start: usize) -> (Option<Vec<u8>>, Option<Vec<u8>>, usize) {
    let seg_end = |from: usize| memchr::memchr(b';', &s[from..]).map_or(s.len(), |i| from + i);
    let name_end = memchr::memchr2(b'=', b';', &s[start..]).map_or(s.len(), |i| start + i);
    if name_end == s.len() || s[name_end] == b';' {
        // `; flag` without a value: kept as sent, with an empty value.
        let name = trim(&s[start..name_end]);
        let name = (!name.is_empty()).then(|| name.to_vec());
        return (name, Some(Vec::new()), name_end);
    }
    let name = trim(&s[start..name_end]).to_ascii_lowercase();
    let mut v = name_end + 1;
    while v < s.len() && is_ows(s[v]) {
        v += 1;
    }
    if s.get(v) == Some(&b'"') {
        if let Some((val, after)) = quoted(s, v + 1) {
            let end = seg_end(after);
            if trim(&s[after..end]).is_empty() {
                return (Some(name), Some(val), end);
            }
        }
        // Unterminated, or text after the closing quote: the raw value up
        // to the next `;` outside the quotes.
        let end = raw_end(s, v);
        return (Some(name), Some(trim(&s[v..end]).to_vec()), end);
    }
    let end = seg_end(v);
    (Some(name), Some(trim(&s[v..end]).to_vec()), end)
}

/// Unescapes a quoted string whose first byte is at `from`; returns it and
/// the position after the closing quote, or `None` when it never closes.
fn quoted(s: &[u8], from: usize) -> Option<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let mut i = from;
    loop {
        let j = i + memchr::memchr2(b'"', b'\\', &s[i..])?;
        out.extend_from_slice(&s[i..j]);
        if s[j] == b'"' {
            return Some((out, j + 1));
        }
        match s.get(j + 1) {
            Some(&c @ (b'"' | b'\\')) => {
                out.push(c);
                i = j + 2;
            }
            _ => {
                out.push(b'\\');
                i = j + 1;
            }
        }
    }
}

/// The end of a raw value starting at `from`: the first `;` not inside a
/// quoted string, or the end of the header.
fn raw_end(s: &[u8], from: usize) -> usize {
    let mut in_quotes = false;
    let mut i = from;
    while i < s.len() {
        match s[i] {
            b'\\' if in_quotes => i += 1,
            b'"' => in_quotes = !in_quotes,
            b';' if !in_quotes => return i,
            _ => {}
        }
        i += 1;
    }
    s.len()
}

/// `C:\dir\f.txt` or `\\host\dir\f.txt` to `f.txt`; any other value as is.
fn strip_windows_path(v: Vec<u8>) -> Vec<u8> {
    let drive = v.get(1..3) == Some(b":\\");
    if !drive && !v.starts_with(b"\\\\") {
        return v;
    }
    match memchr::memrchr(b'\\', &v) {
        Some(i) => v[i + 1..].to_vec(),
        None => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: &str) -> (String, Vec<(String, String)>) {
        let (t, ps) = parse(v.as_bytes());
        let s = |b: Vec<u8>| String::from_utf8(b).unwrap();
        (s(t), ps.into_iter().map(|(n, v)| (s(n), s(v))).collect())
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn type_is_lower_cased_and_trimmed() {
        assert_eq!(
            p(" Multipart/Form-Data ; boundary=abc").0,
            "multipart/form-data"
        );
        assert_eq!(p("\tText/Plain ").0, "text/plain");
        assert_eq!(p(""), (String::new(), vec![]));
    }

    #[test]
    fn plain_quoted_and_escaped_values() {
        let got = p(r#"form-data; name="a;b"; x = y ;q="c\"d\\e\f""#).1;
        assert_eq!(got, kv(&[("name", "a;b"), ("x", "y"), ("q", r#"c"d\e\f"#)]));
    }

    #[test]
    fn extended_parameters_never_replace_plain_ones() {
        let got = p("form-data; name*=utf-8''x; name=\"n\"; filename*0=\"a\"; FILENAME*=y").1;
        assert_eq!(got, kv(&[("name", "n")]));
    }

    #[test]
    fn first_occurrence_wins_and_names_are_lower_cased() {
        let got = p(r#"form-data; NAME="a"; name="b""#).1;
        assert_eq!(got, kv(&[("name", "a")]));
    }

    #[test]
    fn windows_paths_are_cut_to_the_file_name() {
        let got = p(r#"form-data; filename="C:\dir\f.txt""#).1;
        assert_eq!(got, kv(&[("filename", "f.txt")]));
        // `\\` is a quoted-pair: the value starts with two backslashes.
        let got = p(r#"form-data; filename="\\\\host\share\g.txt""#).1;
        assert_eq!(got, kv(&[("filename", "g.txt")]));
        let got = p(r#"form-data; name="C:\dir""#).1;
        assert_eq!(got, kv(&[("name", r"C:\dir")]));
    }

    #[test]
    fn unterminated_or_trailing_text_keeps_the_raw_value() {
        assert_eq!(p(r#"a; b="open"#).1, kv(&[("b", "\"open")]));
        assert_eq!(p(r#"a; b="x"y; c=d"#).1, kv(&[("b", "\"x\"y"), ("c", "d")]));
    }

    #[test]
    fn empty_segments_and_flags() {
        assert_eq!(p("a;; flag; ;").1, kv(&[("flag", "")]));
    }

    #[test]
    fn linear_on_pathological_input() {
        // The CVE-2024-24762 shape, scaled up: a quote then backslashes.
        let s = format!("a; !=\"{}", "\\".repeat(1 << 20));
        let (_, ps) = parse(s.as_bytes());
        assert_eq!(ps.len(), 1);
        let s = ";\"".repeat(1 << 18);
        assert!(parse(s.as_bytes()).1.len() <= 1);
    }
}
