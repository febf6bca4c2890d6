//! `bulkwire bench`: measurements that start their own server.
//!
//! - [`sweep`]: one upload per payload size and format, the server's peak
//!   RSS and the response time of each (the WordPress XML-RPC table: 200 MB
//!   took 2,503 MB and 93 s there).
//! - [`latency`]: open-loop latency percentiles at a fixed arrival rate
//!   (MediaWiki's autoloader measurement: p50/p95 at 40 req/s).
//!
//! Both start `bulkwire serve` (given as a program path: the CLI passes its
//! own executable) on a free port with a fresh data directory, or any
//! server command (a peer, measured the same way), or use a running server
//! by URL. This module holds what they share: [`ServerSpec`] and
//! [`Running`] (start, wait until it listens, stop), [`Format`] (which
//! scenario, endpoint and credentials), payloads, and [`upload_once`] (one
//! request whose answer is read and checked, since an XML-RPC fault comes
//! with status 200).

pub mod latency;
pub mod sweep;

use crate::body::Segments;
use crate::error::{Error, Result};
use crate::pattern::{Pattern, Vars};
use crate::scenario::{FileSpec, FormData, Mtom, Scenario, SoapUpload, UploadCall, XmlRpc};
use crate::target::{refused, Target};
use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The token `bulkwire serve` is started with (also sent to other servers).
pub const BENCH_TOKEN: &str = "bulkwire-bench-token";
/// The `NAME:PASSWORD` `bulkwire serve` is started with; XML-RPC sends it
/// in the call, MTOM as HTTP Basic.
pub const BENCH_USER: &str = "bench:bench-secret";
/// Bytes of an answer kept to check it (an XML-RPC fault, a SOAP fault).
pub const ANSWER_BYTES: usize = 64 * 1024;

/// An upload format, with bulkwire's endpoint for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Xmlrpc,
    Formdata,
    Mtom,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Xmlrpc, Format::Formdata, Format::Mtom];

    pub fn name(self) -> &'static str {
        match self {
            Format::Xmlrpc => "xmlrpc",
            Format::Formdata => "formdata",
            Format::Mtom => "mtom",
        }
    }

    /// `xmlrpc`, `formdata` (or `form-data`), `mtom`.
    pub fn parse(s: &str) -> Result<Format> {
        match s.trim() {
            "xmlrpc" => Ok(Format::Xmlrpc),
            "formdata" | "form-data" => Ok(Format::Formdata),
            "mtom" => Ok(Format::Mtom),
            other => Err(Error::config(format!(
                "format {other:?}: expected xmlrpc, formdata or mtom"
            ))),
        }
    }

    /// A comma-separated list.
    pub fn parse_list(s: &str) -> Result<Vec<Format>> {
        s.split(',').map(Format::parse).collect()
    }

    /// bulkwire's endpoint for this format.
    pub fn path(self) -> &'static str {
        match self {
            Format::Xmlrpc => "/xmlrpc",
            Format::Formdata => "/v1/media",
            Format::Mtom => "/soap",
        }
    }

    /// The body template for `data` named `name`.
    pub fn scenario(
        self,
        data: Bytes,
        name: &str,
        creds: &Credentials,
    ) -> Result<Arc<dyn Scenario>> {
        let name = Pattern::parse(name)?;
        let ct = "application/octet-stream";
        Ok(match self {
            Format::Xmlrpc => {
                let (u, p) = creds.user.split_once(':').unwrap_or((&creds.user, ""));
                Arc::new(XmlRpc::new(&UploadCall::new(u, p, name, data))?)
            }
            Format::Formdata => Arc::new(FormData::new(
                &[],
                &[FileSpec {
                    field: "file".into(),
                    filename: name,
                    content_type: Some(ct.into()),
                    data,
                }],
            )?),
            Format::Mtom => Arc::new(Mtom::new(&SoapUpload::new(name, data))?),
        })
    }

    /// Adds this format's credentials to `target`: Bearer for form-data,
    /// Basic for SOAP, none for XML-RPC (they are in the call).
    pub fn authorize(self, target: &mut Target, creds: &Credentials) -> Result<()> {
        match self {
            Format::Xmlrpc => {}
            Format::Formdata => drop(target.bearer(&creds.token)?),
            Format::Mtom => drop(target.basic(&creds.user)?),
        }
        Ok(())
    }

    /// Whether the answer says the upload was stored: a 2xx status and,
    /// for XML-RPC and SOAP, no fault in the body.
    pub fn verdict(self, status: u16, answer: &[u8]) -> std::result::Result<(), String> {
        let text = String::from_utf8_lossy(answer);
        if !(200..300).contains(&status) {
            return Err(format!("status {status}: {}", excerpt(&text)));
        }
        let fault = match self {
            Format::Xmlrpc => text.contains("<fault>"),
            Format::Mtom => text.contains(":Fault>") || text.contains("<Fault>"),
            Format::Formdata => false,
        };
        if fault {
            return Err(format!("fault: {}", excerpt(&text)));
        }
        Ok(())
    }
}

fn excerpt(s: &str) -> String {
    let s: String = s.chars().take(300).collect();
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What the bench sends as credentials.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub token: String,
    /// `NAME:PASSWORD`.
    pub user: String,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials {
            token: BENCH_TOKEN.into(),
            user: BENCH_USER.into(),
        }
    }
}

/// Which server to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerKind {
    /// `PROGRAM serve` (the `bulkwire` binary) on a free port and a fresh
    /// data directory, with [`Credentials::default`].
    Bulkwire(PathBuf),
    /// `sh -c 'exec CMD'` with `{port}` and `{data}` replaced and `PORT`,
    /// `DATA`, `BENCH_TOKEN`, `BENCH_USER` in the environment; it must
    /// listen on 127.0.0.1:PORT.
    Command(String),
    /// Already running at this base URL (`http://host:port`).
    Url(String),
}

/// A server to measure, its label in tables, and the formats it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub label: String,
    pub kind: ServerKind,
    /// `None`: every format asked for.
    pub formats: Option<Vec<Format>>,
    /// Endpoint path for every format instead of [`Format::path`].
    pub path: Option<String>,
    /// Process to sample memory of, for [`ServerKind::Url`].
    pub watch_pid: Option<u32>,
}

impl ServerSpec {
    pub fn bulkwire(program: PathBuf) -> ServerSpec {
        ServerSpec {
            label: "bulkwire".into(),
            kind: ServerKind::Bulkwire(program),
            formats: None,
            path: None,
            watch_pid: None,
        }
    }

    /// `NAME[:FORMAT,…]=COMMAND`, as `--peer` takes it.
    pub fn parse_peer(text: &str) -> Result<ServerSpec> {
        let (head, cmd) = text.split_once('=').ok_or_else(|| {
            Error::config(format!("peer {text:?}: expected NAME[:FORMATS]=COMMAND"))
        })?;
        let (label, formats) = match head.split_once(':') {
            Some((l, f)) => (l, Some(Format::parse_list(f)?)),
            None => (head, None),
        };
        if label.is_empty() || cmd.trim().is_empty() {
            return Err(Error::config(format!(
                "peer {text:?}: empty name or command"
            )));
        }
        Ok(ServerSpec {
            label: label.into(),
            kind: ServerKind::Command(cmd.into()),
            formats,
            path: None,
            watch_pid: None,
        })
    }

    /// Whether this server takes `f`.
    pub fn serves(&self, f: Format) -> bool {
        self.formats.as_ref().is_none_or(|fs| fs.contains(&f))
    }
}

/// A started (or found) server: its base URL and the process to watch.
pub struct Running {
    pub label: String,
    pub base: String,
    pub pid: Option<u32>,
    child: Option<Child>,
    data: Option<PathBuf>,
}

impl Running {
    /// Starts the server with `creds` and waits (up to `wait`) until it
    /// accepts connections. `log` receives its stderr.
    pub fn start(
        spec: &ServerSpec,
        creds: &Credentials,
        log: &Path,
        wait: Duration,
    ) -> Result<Running> {
        let (mut cmd, port, data) = match &spec.kind {
            ServerKind::Url(u) => {
                return Ok(Running {
                    label: spec.label.clone(),
                    base: u.trim_end_matches('/').to_owned(),
                    pid: spec.watch_pid,
                    child: None,
                    data: None,
                })
            }
            ServerKind::Bulkwire(program) => {
                let (port, data) = (free_port()?, temp_dir(&spec.label)?);
                let mut c = Command::new(program);
                c.arg("serve")
                    .arg("--listen")
                    .arg(format!("127.0.0.1:{port}"))
                    .arg("--data")
                    .arg(&data)
                    .arg("--token")
                    .arg(&creds.token)
                    .arg("--user")
                    .arg(&creds.user)
                    .env_remove("BULKWIRE_CONFIG");
                (c, port, data)
            }
            ServerKind::Command(text) => {
                let (port, data) = (free_port()?, temp_dir(&spec.label)?);
                let line = text
                    .replace("{port}", &port.to_string())
                    .replace("{data}", &data.to_string_lossy());
                let mut c = Command::new("sh");
                // `exec`: the pid we watch is the server's, not a shell's.
                c.arg("-c")
                    .arg(format!("exec {line}"))
                    .env("PORT", port.to_string())
                    .env("DATA", &data)
                    .env("BENCH_TOKEN", &creds.token)
                    .env("BENCH_USER", &creds.user);
                (c, port, data)
            }
        };
        let err = std::fs::File::create(log).map_err(|e| Error::io(log.display(), e))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| Error::io(format!("starting {}", spec.label), e))?;
        let mut r = Running {
            label: spec.label.clone(),
            base: format!("http://127.0.0.1:{port}"),
            pid: Some(child.id()),
            child: Some(child),
            data: Some(data),
        };
        r.wait_listening(port, wait, log)?;
        Ok(r)
    }

    fn wait_listening(&mut self, port: u16, wait: Duration, log: &Path) -> Result<()> {
        let deadline = Instant::now() + wait;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            let exited = match &mut self.child {
                Some(c) => c.try_wait().ok().flatten(),
                None => None,
            };
            if let Some(status) = exited {
                let why = std::fs::read_to_string(log).unwrap_or_default();
                return Err(Error::io(
                    format!("server {}", self.label),
                    format!("exited ({status}) before listening: {}", excerpt(&why)),
                ));
            }
            if Instant::now() >= deadline {
                return Err(Error::io(
                    format!("server {}", self.label),
                    format!(
                        "not listening on port {port} after {wait:?} (log: {})",
                        log.display()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The URL of `format`'s endpoint on this server.
    pub fn url(&self, spec: &ServerSpec, format: Format) -> String {
        format!(
            "{}{}",
            self.base,
            spec.path.as_deref().unwrap_or(format.path())
        )
    }
}

impl Drop for Running {
    /// Stops the process this bench started (by its handle) and removes its
    /// data directory.
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(d) = self.data.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A port nobody listens on now (bound, read, released).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("free port", e))?;
    Ok(l.local_addr()
        .map_err(|e| Error::io("free port", e))?
        .port())
}

/// A fresh directory under the system temp dir.
fn temp_dir(label: &str) -> Result<PathBuf> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let safe: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let n = N.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("bulkwire-bench-{}-{n}-{safe}", std::process::id()));
    std::fs::create_dir_all(&d).map_err(|e| Error::io(d.display(), e))?;
    Ok(d)
}

/// `len` pseudo-random bytes (xorshift64; incompressible, so no layer on
/// the way can shrink them).
pub fn payload(len: usize) -> Bytes {
    let mut v = Vec::with_capacity(len + 8);
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ len as u64;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    Bytes::from(v)
}

/// One request and its answer.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub status: u16,
    /// From connecting to the last byte of the answer.
    pub seconds: f64,
    /// Request body bytes.
    pub sent: u64,
    /// The first [`ANSWER_BYTES`] of the answer.
    pub answer: Vec<u8>,
}

/// Sends one request on a new connection and reads the whole answer
/// (keeping its first [`ANSWER_BYTES`]).
pub async fn upload_once(
    target: &Target,
    scenario: &dyn Scenario,
    vars: &Vars,
    timeout: Duration,
) -> Result<Exchange> {
    let payload = scenario
        .render(vars)
        .map_err(|e| Error::io("rendering the body", e))?;
    let sent = payload.len;
    let mut b = http::Request::post(target.path.clone())
        .header(HOST, target.host.clone())
        .header(CONTENT_TYPE, scenario.content_type())
        .header(CONTENT_LENGTH, sent);
    for (name, value) in &target.headers {
        b = b.header(name, value.to_string(vars));
    }
    let req = b
        .body(Segments::from(payload))
        .map_err(|e| Error::config(format!("request: {e}")))?;
    let start = Instant::now();
    let go = async {
        let tcp = tokio::net::TcpStream::connect(target.addr).await?;
        tcp.set_nodelay(true)?;
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            .writev(true)
            .handshake::<_, Segments>(TokioIo::new(tcp))
            .await
            .map_err(std::io::Error::other)?;
        let driver = tokio::spawn(conn);
        let resp = sender
            .send_request(req)
            .await
            .map_err(std::io::Error::other)?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut answer = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(std::io::Error::other)?;
            if let Ok(d) = frame.into_data() {
                let room = ANSWER_BYTES.saturating_sub(answer.len());
                answer.extend_from_slice(&d[..d.len().min(room)]);
            }
        }
        drop(sender);
        driver.abort();
        Ok::<_, std::io::Error>((status, answer))
    };
    let (status, answer) = tokio::time::timeout(timeout, go)
        .await
        .map_err(|_| Error::io(&target.url, format!("no answer within {timeout:?}")))?
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => Error::unreachable(refused(&target.place())),
            _ => Error::io(&target.url, e),
        })?;
    Ok(Exchange {
        status,
        seconds: start.elapsed().as_secs_f64(),
        sent,
        answer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_sees_faults_behind_status_200() {
        let fault = b"<?xml version=\"1.0\"?><methodResponse><fault><value><struct>\
            <member><name>faultCode</name><value><int>403</int></value></member>\
            </struct></value></fault></methodResponse>";
        assert!(Format::Xmlrpc
            .verdict(200, fault)
            .unwrap_err()
            .contains("403"));
        let ok =
            b"<methodResponse><params><param><value>x</value></param></params></methodResponse>";
        assert!(Format::Xmlrpc.verdict(200, ok).is_ok());
        let soap = b"<s:Envelope><s:Body><s:Fault><faultcode>s:Client</faultcode></s:Fault></s:Body></s:Envelope>";
        assert!(Format::Mtom.verdict(200, soap).is_err());
        assert!(Format::Formdata.verdict(201, b"{}").is_ok());
        assert!(Format::Formdata
            .verdict(413, b"{}")
            .unwrap_err()
            .starts_with("status 413"));
    }

    #[test]
    fn peers_parse() {
        let p = ServerSpec::parse_peer("python:xmlrpc=python3 x.py --port {port}").unwrap();
        assert_eq!(p.label, "python");
        assert_eq!(p.formats, Some(vec![Format::Xmlrpc]));
        assert!(p.serves(Format::Xmlrpc) && !p.serves(Format::Mtom));
        assert_eq!(
            p.kind,
            ServerKind::Command("python3 x.py --port {port}".into())
        );
        let all = ServerSpec::parse_peer("go=./server").unwrap();
        assert!(Format::ALL.iter().all(|&f| all.serves(f)));
        for bad in ["nocommand", "=cmd", "x=", "x:soap=cmd"] {
            assert!(ServerSpec::parse_peer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn payload_is_deterministic_and_exact() {
        assert_eq!(payload(1001).len(), 1001);
        assert_eq!(payload(1001), payload(1001));
        assert_ne!(payload(64)[..32], payload(64)[32..]);
    }

    #[test]
    fn a_command_that_exits_is_reported_with_its_log() {
        let dir = temp_dir("exit-test").unwrap();
        let log = dir.join("log");
        let spec = ServerSpec {
            label: "broken".into(),
            kind: ServerKind::Command("echo no such thing >&2; exit 3".into()),
            formats: None,
            path: None,
            watch_pid: None,
        };
        let e = Running::start(
            &spec,
            &Credentials::default(),
            &log,
            Duration::from_secs(10),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("no such thing"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
