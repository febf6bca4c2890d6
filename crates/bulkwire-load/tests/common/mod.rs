//! A test server on 127.0.0.1:0 that records what each request carried:
//! the whole body's hash, and for multipart bodies the parts as parsed back
//! with `bulkwire_multipart`. It can pause on a schedule (to show
//! coordinated omission), answer chosen requests with an error status, or
//! answer every request with a canned reply (an XML-RPC or SOAP fault, a
//! metrics page); it counts the connections it accepted.

#![allow(dead_code)]

use bulkwire_multipart::{Event, Limits, Parser};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A file part as the server saw it.
#[derive(Debug, Clone)]
pub struct FileSeen {
    pub field: String,
    pub filename: String,
    pub content_type: Option<String>,
    pub len: u64,
    pub sha256: String,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When its head arrived.
    pub at: Instant,
    pub method: String,
    /// The request target (`/path?query`).
    pub path: String,
    pub content_type: String,
    pub content_length: Option<u64>,
    pub headers: Vec<(String, String)>,
    pub len: u64,
    pub sha256: String,
    pub fields: Vec<(String, String)>,
    pub files: Vec<FileSeen>,
    pub parse_error: Option<String>,
    /// An XML-RPC call or an MTOM message, parsed back with the codecs.
    pub xml: Option<XmlSeen>,
}

impl Seen {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.0 == name)
            .map(|f| f.1.as_str())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.0 == name)
            .map(|h| h.1.as_str())
    }
}

/// How the server behaves.
#[derive(Clone, Default)]
pub struct Behavior {
    /// `(period, pause)`: requests arriving when `elapsed % period >=
    /// period - pause` are held until that pause ends.
    pub pause: Option<(Duration, Duration)>,
    /// Answer request number `n` (by arrival) with 503 when `n % every == every - 1`.
    pub fail_every: Option<u64>,
    /// Answer every request with this (instead of an empty 200).
    pub reply: Option<Reply>,
}

/// A canned answer.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: &'static str,
}

/// What bulkwire's `/xmlrpc` answers a wrong password, with HTTP 200.
pub const XMLRPC_FAULT_403: Reply = Reply {
    status: 200,
    content_type: "text/xml; charset=UTF-8",
    body: "<?xml version=\"1.0\"?>\n<methodResponse><fault><value><struct>\
           <member><name>faultCode</name><value><int>403</int></value></member>\
           <member><name>faultString</name><value><string>Incorrect username or password.\
           </string></value></member></struct></value></fault></methodResponse>\n",
};

/// A SOAP 1.2 `Sender` fault, as bulkwire's `/soap` answers a bad request.
pub const SOAP12_FAULT: Reply = Reply {
    status: 400,
    content_type: "application/soap+xml; charset=utf-8",
    body: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<env:Envelope \
           xmlns:env=\"http://www.w3.org/2003/05/soap-envelope\"><env:Body><env:Fault>\
           <env:Code><env:Value>env:Sender</env:Value></env:Code><env:Reason>\
           <env:Text xml:lang=\"en\">unauthorized</env:Text></env:Reason></env:Fault>\
           </env:Body></env:Envelope>\n",
};

pub struct TestServer {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub start: Instant,
    /// Connections accepted.
    pub accepted: Arc<AtomicU64>,
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Starts the server on its own thread and runtime (the client under
    /// test gets the other runtime to itself).
    pub fn start(behavior: Behavior) -> TestServer {
        let (tx, rx) = std::sync::mpsc::channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicU64::new(0));
        let (seen2, accepted2) = (seen.clone(), accepted.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(serve(behavior, seen2, accepted2, tx));
        });
        let (addr, start) = rx.recv().unwrap();
        TestServer {
            addr,
            seen,
            start,
            accepted,
        }
    }
}

struct State {
    behavior: Behavior,
    start: Instant,
    count: AtomicU64,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn serve(
    behavior: Behavior,
    seen: Arc<Mutex<Vec<Seen>>>,
    accepted: Arc<AtomicU64>,
    ready: std::sync::mpsc::Sender<(SocketAddr, Instant)>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let start = Instant::now();
    let state = Arc::new(State {
        behavior,
        start,
        count: AtomicU64::new(0),
        seen,
    });
    ready.send((listener.local_addr().unwrap(), start)).unwrap();
    loop {
        let (tcp, _) = listener.accept().await.unwrap();
        accepted.fetch_add(1, Ordering::Relaxed);
        let state = state.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| handle(state.clone(), req));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), svc)
                .await;
        });
    }
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let at = Instant::now();
    let n = state.count.fetch_add(1, Ordering::Relaxed);
    if let Some((period, pause)) = state.behavior.pause {
        let phase = at.duration_since(state.start).as_nanos() % period.as_nanos();
        let paused_from = (period - pause).as_nanos();
        if phase >= paused_from {
            let left = period.as_nanos() - phase;
            tokio::time::sleep(Duration::from_nanos(left as u64)).await;
        }
    }
    let seen = record(at, req).await;
    state.seen.lock().unwrap().push(seen);
    if let Some(r) = &state.behavior.reply {
        let resp = Response::builder()
            .status(r.status)
            .header("content-type", r.content_type)
            .body(Full::new(Bytes::from_static(r.body.as_bytes())))
            .unwrap();
        return Ok(resp);
    }
    let mut resp = Response::new(Full::new(Bytes::new()));
    if state.behavior.fail_every.is_some_and(|k| n % k == k - 1) {
        *resp.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
    }
    Ok(resp)
}

/// Reads the body frame by frame: hashes it whole, and parses it as
/// multipart when its type says so.
async fn record(at: Instant, req: Request<Incoming>) -> Seen {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = header("content-type").unwrap_or_default();
    let content_length = header("content-length").and_then(|v| v.parse().ok());
    let path = req.uri().to_string();
    let method = req.method().to_string();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_owned()))
        .collect();
    let mut parts = PartsSeen::new(&content_type);
    let mut xml = XmlParser::new(&content_type);
    let mut whole = Sha256::new();
    let mut len = 0u64;
    let mut body = req.into_body();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.unwrap().into_data() else {
            continue;
        };
        whole.update(&data);
        len += data.len() as u64;
        parts.feed(&data, false);
        xml.feed(&data, false);
    }
    parts.feed(&[], true);
    xml.feed(&[], true);
    Seen {
        at,
        method,
        path,
        content_type,
        content_length,
        headers,
        len,
        sha256: hex::encode(whole.finalize()),
        fields: parts.fields,
        files: parts.files,
        parse_error: parts.error.or(xml.error.clone()),
        xml: xml.finish(),
    }
}

/// The parts of a multipart body, collected as it streams in.
struct PartsSeen {
    parser: Option<Parser>,
    fields: Vec<(String, String)>,
    files: Vec<FileSeen>,
    error: Option<String>,
    current: Option<Current>,
}

/// The part being read: name, filename, content type, hash, text (fields
/// only) and length.
struct Current {
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    sha: Sha256,
    text: Vec<u8>,
    len: u64,
}

impl PartsSeen {
    fn new(content_type: &str) -> PartsSeen {
        // MTOM is multipart too, but its parts are parsed by `XmlParser`.
        let multipart =
            content_type.starts_with("multipart/") && !content_type.contains("application/xop+xml");
        let parser =
            multipart.then(|| Parser::from_content_type(content_type, Limits::default()).unwrap());
        PartsSeen {
            parser,
            fields: Vec::new(),
            files: Vec::new(),
            error: None,
            current: None,
        }
    }

    fn feed(&mut self, data: &[u8], is_last: bool) {
        let Some(mut parser) = self.parser.take() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let r = parser.feed(data, is_last, |ev| {
            self.event(ev);
            Ok::<_, bulkwire_multipart::Error>(())
        });
        if let Err(e) = r {
            self.error = Some(e.to_string());
        }
        if is_last && !parser.is_done() && self.error.is_none() {
            self.error = Some("not finished".into());
        }
        self.parser = Some(parser);
    }

    fn event(&mut self, ev: Event<'_>) {
        match ev {
            Event::PartStart(p) => {
                self.current = Some(Current {
                    name: p.name_str().unwrap_or_default(),
                    filename: p.filename_str(),
                    content_type: p
                        .content_type()
                        .map(|c| String::from_utf8_lossy(c).into_owned()),
                    sha: Sha256::new(),
                    text: Vec::new(),
                    len: 0,
                });
            }
            Event::Data(d) => {
                let c = self.current.as_mut().unwrap();
                c.sha.update(d);
                c.len += d.len() as u64;
                if c.filename.is_none() {
                    c.text.extend_from_slice(d);
                }
            }
            Event::PartEnd => {
                let c = self.current.take().unwrap();
                match c.filename {
                    Some(filename) => self.files.push(FileSeen {
                        field: c.name,
                        filename,
                        content_type: c.content_type,
                        len: c.len,
                        sha256: hex::encode(c.sha.finalize()),
                    }),
                    None => self
                        .fields
                        .push((c.name, String::from_utf8(c.text).unwrap())),
                }
            }
            Event::End | Event::NeedMore => {}
        }
    }
}

/// A file of `len` pseudo-random bytes in a fresh temp dir.
pub fn payload_file(name: &str, len: usize) -> (std::path::PathBuf, Vec<u8>) {
    let dir = bulkwire_testenv::must(bulkwire_testenv::test_dir(name));
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let data: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, &data).unwrap();
    (path, data)
}

pub fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// What an XML-RPC call or an MTOM upload carried, as the codecs parse it.
#[derive(Debug, Clone, Default)]
pub struct XmlSeen {
    /// `wp.uploadFile`, or `soap` for an MTOM message.
    pub method: String,
    /// XML-RPC: blog_id, username, password.
    pub blog_id: Option<i64>,
    pub username: Option<String>,
    pub password: Option<String>,
    /// `name` and `type` members, or `name` and `contentType` elements.
    pub name: Option<String>,
    pub content_type: Option<String>,
    /// The file: decoded length and SHA-256 (hashed as it streams).
    pub len: u64,
    pub sha256: String,
    /// MTOM: the file came as an attachment, not inline.
    pub attachment: bool,
}

/// Hashes each MTOM binary as the parser streams it.
#[derive(Default)]
struct XopSha {
    sha: Sha256,
    len: u64,
}

impl bulkwire_xop::Sink for XopSha {
    type Output = (u64, String);
    fn begin(&mut self, _: &bulkwire_xop::BinaryInfo<'_>) -> std::io::Result<()> {
        *self = XopSha::default();
        Ok(())
    }
    fn write(&mut self, d: &[u8]) -> std::io::Result<()> {
        self.sha.update(d);
        self.len += d.len() as u64;
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<(u64, String)> {
        let sha = std::mem::take(&mut self.sha);
        Ok((self.len, hex::encode(sha.finalize())))
    }
}

enum XmlCodec {
    None,
    Rpc(Box<bulkwire_xmlrpc::Parser<bulkwire_xmlrpc::Sha256Sink>>),
    Xop(Box<bulkwire_xop::Parser<XopSha>>),
}

/// Streams a `text/xml` body through `bulkwire_xmlrpc` and an MTOM body
/// through `bulkwire_xop`.
struct XmlParser {
    codec: XmlCodec,
    error: Option<String>,
}

impl XmlParser {
    fn new(content_type: &str) -> XmlParser {
        let codec = if content_type.starts_with("text/xml") {
            let limits = bulkwire_xmlrpc::Limits::default();
            XmlCodec::Rpc(Box::new(bulkwire_xmlrpc::Parser::new(
                limits,
                Default::default(),
            )))
        } else if content_type.contains("application/xop+xml") {
            let ns = "urn:bulkwire:media";
            let select = bulkwire_xop::Select::new()
                .binary(&format!("/Envelope/Body/{{{ns}}}upload/data"))
                .and_then(|s| s.text(&format!("/Envelope/Body/{{{ns}}}upload/name")))
                .and_then(|s| s.text(&format!("/Envelope/Body/{{{ns}}}upload/contentType")))
                .unwrap();
            let limits = bulkwire_xop::Limits::default();
            XmlCodec::Xop(Box::new(
                bulkwire_xop::Parser::new(content_type, select, limits, XopSha::default()).unwrap(),
            ))
        } else {
            XmlCodec::None
        };
        XmlParser { codec, error: None }
    }

    fn feed(&mut self, data: &[u8], is_last: bool) {
        if self.error.is_some() {
            return;
        }
        let r = match &mut self.codec {
            XmlCodec::None => Ok(()),
            XmlCodec::Rpc(p) => p.feed(data, is_last).map_err(|e| e.to_string()),
            XmlCodec::Xop(p) => p.feed(data, is_last).map_err(|e| e.to_string()),
        };
        if let Err(e) = r {
            self.error = Some(e);
        }
    }

    fn finish(self) -> Option<XmlSeen> {
        if self.error.is_some() {
            return None;
        }
        match self.codec {
            XmlCodec::None => None,
            XmlCodec::Rpc(p) => Some(rpc_seen(p.finish().unwrap().0)),
            XmlCodec::Xop(p) => Some(xop_seen(p.finish().unwrap())),
        }
    }
}

fn rpc_seen(m: bulkwire_xmlrpc::Message<bulkwire_xmlrpc::Digested>) -> XmlSeen {
    use bulkwire_xmlrpc::Value;
    let call = m.into_call().expect("a methodCall");
    let p = &call.params;
    let s = |v: Option<&Value<_>>| v.and_then(Value::as_str).map(str::to_owned);
    let st = p.get(3);
    let bits = st
        .and_then(|v| v.get("bits"))
        .and_then(Value::as_base64)
        .expect("bits");
    XmlSeen {
        method: call.method.clone(),
        blog_id: p.first().and_then(Value::as_i64),
        username: s(p.get(1)),
        password: s(p.get(2)),
        name: s(st.and_then(|v| v.get("name"))),
        content_type: s(st.and_then(|v| v.get("type"))),
        len: bits.len,
        sha256: hex::encode(bits.sha256),
        attachment: false,
    }
}

fn xop_seen(m: bulkwire_xop::Message<(u64, String)>) -> XmlSeen {
    let data = m.binary("/Envelope/Body/upload/data").expect("data");
    XmlSeen {
        method: "soap".into(),
        name: m.field("/Envelope/Body/upload/name").map(str::to_owned),
        content_type: m
            .field("/Envelope/Body/upload/contentType")
            .map(str::to_owned),
        len: data.output.0,
        sha256: data.output.1.clone(),
        attachment: data.cid.is_some(),
        ..XmlSeen::default()
    }
}

/// A server on one connection that answers `answers` requests with an
/// empty 200, then closes the connection and its listener: later connects
/// are refused. Its URL and the count of answers it gave.
pub fn server_that_goes_away(answers: u64) -> (String, Arc<AtomicU64>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/up", listener.local_addr().unwrap());
    let count = Arc::new(AtomicU64::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        drop(listener);
        let mut w = tcp.try_clone().unwrap();
        let mut r = BufReader::new(tcp);
        while counted.load(Ordering::Relaxed) < answers {
            let mut len = 0u64;
            let mut line = String::new();
            loop {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let l = line.to_ascii_lowercase();
                if let Some(v) = l.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
            }
            std::io::copy(&mut (&mut r).take(len), &mut std::io::sink()).unwrap();
            w.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                .unwrap();
            counted.fetch_add(1, Ordering::Relaxed);
        }
    });
    (url, count)
}
