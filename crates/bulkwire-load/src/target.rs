//! The server under load: an `http://` URL resolved once at start-up (no
//! name lookup on the request path), and the headers every request carries.
//!
//! A service scaled out to several nodes is several targets with the same
//! path and query ([`same_service`]); [`crate::runner`] deals its
//! connections out over them round-robin.
//!
//! The path and query may hold `{seq}` and `{uuid}` ([`crate::pattern`]),
//! rendered per request (`PUT /v1/media/img-{seq}.jpg`); the host and port
//! may not (they are resolved once).

use crate::error::{Error, Result};
use crate::pattern::{Pattern, Vars};
use http::header::{HeaderName, HeaderValue};
use http::Uri;
use std::net::SocketAddr;

/// Where requests go and how they are addressed.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// Resolved socket address (the first the resolver returned).
    pub addr: SocketAddr,
    /// `Host` header value.
    pub host: HeaderValue,
    /// Origin-form request target (`/path?query`); with variables in the
    /// path, as rendered for `{seq}` 0 and an all-zero `{uuid}`.
    pub path: Uri,
    /// The path and query as given (`/` when empty), variables and all.
    pub path_text: String,
    /// [`Self::path_text`] parsed: literal unless it holds variables.
    pub path_pattern: Pattern,
    /// Extra headers; values may hold `{seq}`/`{uuid}`.
    pub headers: Vec<(HeaderName, Pattern)>,
}

impl Target {
    /// Parses and resolves `url` (HTTP/1.1 over TCP; `https` is not
    /// supported).
    pub fn resolve(url: &str) -> Result<Target> {
        let (path_text, path_pattern, sample) = path_of(url)?;
        let uri: Uri = sample
            .parse()
            .map_err(|e| Error::config(format!("URL {url:?}: {e}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(Error::config(format!(
                "URL {url:?}: only http:// is supported"
            )));
        }
        let host = uri
            .host()
            .ok_or_else(|| Error::config(format!("URL {url:?} has no host")))?;
        let port = uri.port_u16().unwrap_or(80);
        let addr = resolve(host, port)?;
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
        let host = HeaderValue::from_str(authority)
            .map_err(|e| Error::config(format!("URL {url:?}: host: {e}")))?;
        let pq = uri.path_and_query().map_or("/", |p| p.as_str());
        let path = pq
            .parse()
            .map_err(|e| Error::config(format!("URL {url:?}: path: {e}")))?;
        Ok(Target {
            url: url.into(),
            addr,
            host,
            path,
            path_text,
            path_pattern,
            headers: Vec::new(),
        })
    }

    /// Adds a header `Name: value` (value may hold variables).
    pub fn header(&mut self, name: &str, value: &str) -> Result<&mut Self> {
        let n = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|e| Error::config(format!("header name {name:?}: {e}")))?;
        let p = Pattern::parse(value.trim())?;
        // Check a sample value now rather than fail every request later.
        let sample = p.to_string(&SAMPLE);
        HeaderValue::from_str(&sample).map_err(|e| Error::config(format!("header {name}: {e}")))?;
        self.headers.push((n, p));
        Ok(self)
    }

    /// Parses `Name: value` and adds it.
    pub fn header_line(&mut self, line: &str) -> Result<&mut Self> {
        let (n, v) = line
            .split_once(':')
            .ok_or_else(|| Error::config(format!("header {line:?}: expected 'Name: value'")))?;
        self.header(n, v)
    }

    /// Where requests go, for messages: the URL's `host:port`, and the
    /// address it resolved to when that differs (`localhost:8099
    /// (127.0.0.1:8099)`).
    pub fn place(&self) -> String {
        let host = self.host.to_str().unwrap_or_default();
        let addr = self.addr.to_string();
        // The host as given, with the port it implies.
        let given = match host.rsplit_once(':') {
            Some((_, port)) if !port.contains(']') => host.to_owned(),
            _ => format!("{host}:{}", self.addr.port()),
        };
        if given == addr {
            addr
        } else {
            format!("{given} ({addr})")
        }
    }

    /// `Authorization: Bearer T`.
    pub fn bearer(&mut self, token: &str) -> Result<&mut Self> {
        self.header("authorization", &escape(&format!("Bearer {token}")))
    }

    /// `Authorization: Basic base64(user:password)` (RFC 7617).
    pub fn basic(&mut self, user_pass: &str) -> Result<&mut Self> {
        use base64::Engine;
        let enc = base64::engine::general_purpose::STANDARD.encode(user_pass);
        self.header("authorization", &format!("Basic {enc}"))
    }
}

/// Checks that `targets` are nodes of one service: the same path and query
/// on each (they differ only in host and port). The error names the first
/// target and the one that differs.
pub fn same_service(targets: &[Target]) -> Result<()> {
    let Some((first, rest)) = targets.split_first() else {
        return Err(Error::config("no target URL"));
    };
    match rest.iter().find(|t| t.path_pattern != first.path_pattern) {
        Some(other) => Err(Error::config(format!(
            "targets {:?} and {:?} differ in path and query (\"{}\" vs \"{}\"): \
             every target must be a node of the same service",
            first.url, other.url, first.path_text, other.path_text
        ))),
        None => Ok(()),
    }
}

/// What a refused connection most likely means, naming where it went.
pub fn refused(place: &str) -> String {
    format!("connection refused: is a server listening on {place}?")
}

/// The variables' values a pattern is checked with at start-up.
const SAMPLE: Vars = Vars {
    seq: 0,
    uuid: [b'0'; 36],
};

/// `url`'s path and query as given (`/` if none), parsed as a pattern, and
/// `url` with the pattern rendered for [`SAMPLE`] (to parse and check).
/// Variables before the path (in the host or port) are an error.
fn path_of(url: &str) -> Result<(String, Pattern, String)> {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let start = url[after_scheme..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| after_scheme + i);
    let (origin, path) = url.split_at(start);
    if origin.contains(['{', '}']) {
        return Err(Error::config(format!(
            "URL {url:?}: {{seq}} and {{uuid}} may only appear in the path and query"
        )));
    }
    let text = if path.is_empty() || path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let pattern = Pattern::parse(&text).map_err(|e| Error::config(format!("URL {url:?}: {e}")))?;
    let sample = format!("{origin}{}", pattern.to_string(&SAMPLE));
    Ok((text, pattern, sample))
}

/// A literal for [`Pattern::parse`].
fn escape(s: &str) -> String {
    s.replace('{', "{{").replace('}', "}}")
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()
        .map_err(|e| Error::io(format!("resolving {host}"), e))?
        .next()
        .ok_or_else(|| Error::io(format!("resolving {host}"), "no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_loopback_url() {
        let t = Target::resolve("http://127.0.0.1:8080/upload?x=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:8080");
        assert_eq!(t.path, "/upload?x=1");
        let t = Target::resolve("http://127.0.0.1").unwrap();
        assert_eq!(t.addr.port(), 80);
        assert_eq!(t.path, "/");
        assert_eq!(t.place(), "127.0.0.1:80");
    }

    #[test]
    fn a_place_names_the_host_as_given_and_the_address_tried() {
        let t = Target::resolve("http://127.0.0.1:8099/v1/media").unwrap();
        assert_eq!(t.place(), "127.0.0.1:8099");
        let t = Target::resolve("http://localhost:8099/v1/media").unwrap();
        let place = t.place();
        assert!(place.starts_with("localhost:8099 ("), "{place}");
        assert!(place.ends_with(&format!("{})", t.addr)), "{place}");
    }

    #[test]
    fn rejects_https_and_garbage() {
        assert!(Target::resolve("https://127.0.0.1/").is_err());
        assert!(Target::resolve("not a url").is_err());
        let mut t = Target::resolve("http://127.0.0.1/").unwrap();
        assert!(t.header_line("no colon").is_err());
        assert!(t.header_line("X-Bad: a\nb").is_err());
    }

    #[test]
    fn nodes_of_one_service_share_path_and_query() {
        let t = |u: &str| Target::resolve(u).unwrap();
        let a = t("http://127.0.0.1:8080/upload?x=1");
        let b = t("http://127.0.0.1:8081/upload?x=1");
        same_service(&[a.clone(), b.clone()]).unwrap();
        same_service(std::slice::from_ref(&a)).unwrap();
        // No path and `/` are the same request target.
        same_service(&[t("http://127.0.0.1:1"), t("http://127.0.0.1:2/")]).unwrap();

        for other in [
            "http://127.0.0.1:8082/up?x=1",
            "http://127.0.0.1:8082/upload?x=2",
        ] {
            let e = same_service(&[a.clone(), b.clone(), t(other)]).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Config);
            let msg = e.to_string();
            assert!(msg.contains("http://127.0.0.1:8080/upload?x=1"), "{msg}");
            assert!(msg.contains(other), "{msg}");
            assert!(!msg.contains(":8081"), "names the one that differs: {msg}");
        }
        assert!(same_service(&[]).is_err());
    }

    #[test]
    fn variables_in_the_path_are_patterns() {
        let t = Target::resolve("http://127.0.0.1:8080/v1/media/img-{seq}.bin?u={uuid}").unwrap();
        assert!(!t.path_pattern.is_static());
        assert_eq!(t.path_text, "/v1/media/img-{seq}.bin?u={uuid}");
        assert_eq!(
            t.path,
            format!("/v1/media/img-0.bin?u={}", "0".repeat(36)).as_str()
        );
        let v = Vars {
            seq: 7,
            uuid: [b'a'; 36],
        };
        assert_eq!(
            t.path_pattern.to_string(&v),
            format!("/v1/media/img-7.bin?u={}", "a".repeat(36))
        );
        let plain = Target::resolve("http://127.0.0.1:8080?x=1").unwrap();
        assert_eq!(plain.path_text, "/?x=1");
        assert!(plain.path_pattern.is_static());

        for bad in [
            "http://127.0.0.1:{seq}/",
            "http://{uuid}.example/",
            "http://127.0.0.1/{nope}",
        ] {
            let e = Target::resolve(bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Config, "{bad}");
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn basic_auth_is_base64() {
        let mut t = Target::resolve("http://127.0.0.1/").unwrap();
        t.basic("Aladdin:open sesame").unwrap();
        t.bearer("a{b}").unwrap();
        let v = |i: usize| t.headers[i].1.literal().unwrap();
        assert_eq!(v(0), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert_eq!(v(1), "Bearer a{b}");
    }
}
