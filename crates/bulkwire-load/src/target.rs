//! The server under load: an `http://` URL resolved once at start-up (no
//! name lookup on the request path), and the headers every request carries.

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
    /// Origin-form request target (`/path?query`).
    pub path: Uri,
    /// Extra headers; values may hold `{seq}`/`{uuid}`.
    pub headers: Vec<(HeaderName, Pattern)>,
}

impl Target {
    /// Parses and resolves `url` (HTTP/1.1 over TCP; `https` is not
    /// supported).
    pub fn resolve(url: &str) -> Result<Target> {
        let uri: Uri = url
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
            headers: Vec::new(),
        })
    }

    /// Adds a header `Name: value` (value may hold variables).
    pub fn header(&mut self, name: &str, value: &str) -> Result<&mut Self> {
        let n = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|e| Error::config(format!("header name {name:?}: {e}")))?;
        let p = Pattern::parse(value.trim())?;
        // Check a sample value now rather than fail every request later.
        let sample = p.to_string(&Vars {
            seq: 0,
            uuid: [b'0'; 36],
        });
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
    fn basic_auth_is_base64() {
        let mut t = Target::resolve("http://127.0.0.1/").unwrap();
        t.basic("Aladdin:open sesame").unwrap();
        t.bearer("a{b}").unwrap();
        let v = |i: usize| t.headers[i].1.literal().unwrap();
        assert_eq!(v(0), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert_eq!(v(1), "Bearer a{b}");
    }
}
