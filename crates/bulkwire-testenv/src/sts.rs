//! A local stand-in for AWS STS's `AssumeRoleWithWebIdentity` (the web identity step of the
//! AWS credential chain: an EKS pod's projected token exchanged for a role's keys), over HTTPS
//! on a loopback port.
//!
//! Why HTTPS: `object_store` refuses a plain `http://` STS endpoint (its web identity client is
//! built with `allow_http` off, whatever the S3 client allows), as a real STS would be. So the
//! stand-in has a certificate for `127.0.0.1` and `localhost`, signed by a CA of its own made
//! with the `openssl` command (as the PostgreSQL certificates are, `crate::postgres`), whose PEM
//! file [`StsServer::ca_file`] names. The client must be told to trust that CA; nothing here
//! weakens its checks.
//!
//! What it answers: `POST /` with `Action=AssumeRoleWithWebIdentity` in the query (how
//! `object_store` sends it) or in a form body (how the SDKs do), the STS XML response with keys
//! from a [`crate::creds`] rotation (minted by a [`Mint`], in the tests SeaweedFS's own STS, so
//! SeaweedFS accepts them) and their `Expiration` at the end of the period. A token other than
//! the one it was started with is refused as STS refuses it (`400`, `InvalidIdentityToken`).
//! Every request is recorded ([`StsRequest`]) so that a test can check what the client sent:
//! the token file's contents and the role.

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use crate::creds::{read_head, rfc3339, Head, Mint, Rotation};
use crate::scratch::Scratch;

/// The largest request body read (a form of a token and a role is far smaller).
const MAX_BODY: usize = 64 << 10;

/// A running STS stand-in; it stops when dropped, and its certificates go with it.
pub struct StsServer {
    port: u16,
    stop: Arc<AtomicBool>,
    state: Arc<State>,
    scratch: Scratch,
}

/// What one `AssumeRoleWithWebIdentity` request asked for (absent parameters are empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsRequest {
    pub action: String,
    pub version: String,
    pub role_arn: String,
    pub session_name: String,
    /// `WebIdentityToken`: what the client read from its token file.
    pub token: String,
}

struct State {
    keys: Rotation,
    /// The one web identity token accepted.
    token: String,
    asked: Mutex<Vec<StsRequest>>,
    refused: AtomicUsize,
}

impl StsServer {
    /// Starts answering on a free loopback port with keys that change every `period`, made by
    /// `mint`, for `token` only.
    pub fn start(period: Duration, mint: Mint, token: &str) -> Result<StsServer, String> {
        let scratch = Scratch::new("sts-")?;
        let tls = tls_config(scratch.path())?;
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("fake STS: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(State {
            keys: Rotation::new(period, mint),
            token: token.to_string(),
            asked: Mutex::new(Vec::new()),
            refused: AtomicUsize::new(0),
        });
        let (s, st) = (stop.clone(), state.clone());
        thread::spawn(move || serve(listener, tls, s, st));
        Ok(StsServer {
            port,
            stop,
            state,
            scratch,
        })
    }

    /// `https://127.0.0.1:PORT`: `AWS_ENDPOINT_URL_STS`.
    pub fn endpoint(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The PEM file of the CA that signed the stand-in's certificate (`SSL_CERT_FILE`).
    pub fn ca_file(&self) -> PathBuf {
        self.scratch.path().join("ca.crt")
    }

    /// Every request so far, in order, refused ones included.
    pub fn asked(&self) -> Vec<StsRequest> {
        self.state.asked.lock().unwrap().clone()
    }

    /// The key ids handed out so far, each once, in order.
    pub fn served(&self) -> Vec<String> {
        self.state.keys.served()
    }

    /// Requests refused for a wrong token.
    pub fn refused(&self) -> usize {
        self.state.refused.load(Ordering::Relaxed)
    }
}

impl Drop for StsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A CA and a server certificate for `localhost` and `127.0.0.1` in `dir`, and the rustls
/// configuration that shows the latter.
fn tls_config(dir: &Path) -> Result<Arc<ServerConfig>, String> {
    make_certs(dir)?;
    let pem = |e: rustls::pki_types::pem::Error| format!("the STS stand-in's certificate: {e}");
    let chain = CertificateDer::pem_file_iter(dir.join("server.crt"))
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)?;
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).map_err(pem)?;
    // The provider is named rather than taken from the process default, which the code under
    // test may or may not have installed by then.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| format!("the STS stand-in's TLS configuration: {e}"))?;
    Ok(Arc::new(config))
}

fn make_certs(dir: &Path) -> Result<(), String> {
    let openssl = |args: &[&str]| crate::proc::openssl(dir, args);
    let key = crate::proc::EC_KEY;
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        "2",
        "-subj",
        "/CN=bulkwire test STS CA",
    ];
    ca.extend(["-keyout", "ca.key", "-out", "ca.crt"]);
    ca.extend(key);
    ca.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
    ca.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    openssl(&ca)?;
    let ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n";
    fs::write(dir.join("server.ext"), ext).map_err(|e| e.to_string())?;
    let mut csr = vec!["req", "-subj", "/CN=localhost"];
    csr.extend(["-keyout", "server.key", "-out", "server.csr"]);
    csr.extend(key);
    openssl(&csr)?;
    let mut sign = vec!["x509", "-req", "-in", "server.csr", "-days", "2"];
    sign.extend(["-CA", "ca.crt", "-CAkey", "ca.key"]);
    sign.extend(["-CAcreateserial", "-extfile", "server.ext"]);
    sign.extend(["-out", "server.crt"]);
    openssl(&sign)
}

fn serve(listener: TcpListener, tls: Arc<ServerConfig>, stop: Arc<AtomicBool>, state: Arc<State>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                let (tls, st) = (tls.clone(), state.clone());
                thread::spawn(move || {
                    // A client that does not trust the CA ends the handshake: nothing to do.
                    let _ = answer(conn, tls, &st);
                });
            }
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// One request per connection (`Connection: close`), over TLS.
fn answer(tcp: TcpStream, tls: Arc<ServerConfig>, state: &State) -> io::Result<()> {
    tcp.set_nonblocking(false)?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    let conn = ServerConnection::new(tls).map_err(io::Error::other)?;
    let mut stream = StreamOwned::new(conn, tcp);
    let (status, body) = {
        let mut reader = BufReader::new(&mut stream);
        let head = read_head(&mut reader)?;
        let len = head
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0usize);
        let mut body = vec![0; len.min(MAX_BODY)];
        reader.read_exact(&mut body)?;
        route(&head, &body, state)
    };
    write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nContent-Type: text/xml\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.conn.send_close_notify();
    stream.flush()
}

fn route(head: &Head, body: &[u8], state: &State) -> (u16, String) {
    let path = head
        .target
        .split_once('?')
        .map_or(&*head.target, |(p, _)| p);
    if head.method != "POST" || path != "/" {
        return (404, String::new());
    }
    let p = params(&head.target, body);
    let get = |k: &str| p.get(k).cloned().unwrap_or_default();
    let asked = StsRequest {
        action: get("Action"),
        version: get("Version"),
        role_arn: get("RoleArn"),
        session_name: get("RoleSessionName"),
        token: get("WebIdentityToken"),
    };
    state.asked.lock().unwrap().push(asked.clone());
    if asked.action != "AssumeRoleWithWebIdentity" {
        return (
            400,
            error("InvalidAction", "only AssumeRoleWithWebIdentity"),
        );
    }
    if asked.token != state.token {
        state.refused.fetch_add(1, Ordering::Relaxed);
        return (
            400,
            error("InvalidIdentityToken", "the token is not the one expected"),
        );
    }
    match state.keys.current() {
        Ok((k, expires)) => (200, credentials(&k, expires, &asked)),
        Err(e) => (500, error("InternalFailure", &e)),
    }
}

/// The parameters of the query and of a form body, decoded.
fn params(target: &str, body: &[u8]) -> HashMap<String, String> {
    let query = target.split_once('?').map_or("", |(_, q)| q);
    let form = std::str::from_utf8(body).unwrap_or("");
    query
        .split('&')
        .chain(form.split('&'))
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (c, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn credentials(k: &crate::TempKeys, expires: SystemTime, asked: &StsRequest) -> String {
    format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
         <AssumeRoleWithWebIdentityResult>\
         <Credentials><AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey>\
         <SessionToken>{}</SessionToken><Expiration>{}</Expiration></Credentials>\
         <AssumedRoleUser><Arn>{}/{}</Arn></AssumedRoleUser>\
         </AssumeRoleWithWebIdentityResult>\
         <ResponseMetadata><RequestId>bulkwire-test</RequestId></ResponseMetadata>\
         </AssumeRoleWithWebIdentityResponse>",
        escape(&k.key_id),
        escape(&k.secret),
        escape(&k.token),
        rfc3339(expires),
        escape(&asked.role_arn),
        escape(&asked.session_name),
    )
}

fn error(code: &str, message: &str) -> String {
    format!(
        "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error>\
         <Type>Sender</Type><Code>{code}</Code><Message>{}</Message></Error>\
         <RequestId>bulkwire-test</RequestId></ErrorResponse>",
        escape(message)
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_form_are_decoded() {
        let p = params(
            "/?Action=AssumeRoleWithWebIdentity&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr",
            b"WebIdentityToken=a+b%2Bc&Bad=%zz",
        );
        assert_eq!(p["Action"], "AssumeRoleWithWebIdentity");
        assert_eq!(p["RoleArn"], "arn:aws:iam::1:role/r");
        assert_eq!(p["WebIdentityToken"], "a b+c");
        assert_eq!(p["Bad"], "%zz");
    }
}
