//! What `events.rs` needs around `bulkwire serve`: nodes on PostgreSQL +
//! SeaweedFS or on the embedded store, a small HTTP/1.1 client on
//! `TcpStream` (one connection per request, read to its end, so that a
//! killed node is a transport error), uploads in four formats, and the
//! Python webhook receiver (`testsuite/py/webhook_receiver.py`, checking
//! signatures with the Standard Webhooks library). Lean copies of what
//! `cluster.rs` has, kept to what these tests use.

use bulkwire_testenv::{must, Postgres, Seaweed};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

pub const TOKEN: &str = "events-test-token";
pub const AUTH: &str = "Authorization: Bearer events-test-token";
/// The XML-RPC login (`--user`).
pub const WP_USER: &str = "wp";
pub const WP_PASS: &str = "wp-password";
/// Longest wait for one answer: longer than any long poll of the tests.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------
// Stores and nodes
// ---------------------------------------------------------------------

/// One test's directory, database and bucket.
pub struct Setup {
    pub dir: PathBuf,
    pub meta: String,
    bucket: String,
    s3_env: Vec<(&'static str, String)>,
    pub config: PathBuf,
}

impl Setup {
    /// A fresh database `events_NAME` and bucket `events-NAME`; the
    /// configuration is written by [`Setup::configure`].
    pub fn new(name: &str, pg: &Postgres, sw: &Seaweed) -> Setup {
        let dir = must(bulkwire_testenv::test_dir(&format!("events-{name}")));
        let meta = must(pg.create_database(&format!("events_{name}")));
        let bucket = format!("events-{name}");
        must(sw.create_bucket(&bucket));
        let s3_env = vec![
            ("AWS_ENDPOINT_URL", sw.endpoint()),
            ("AWS_ACCESS_KEY_ID", sw.access_key().to_string()),
            ("AWS_SECRET_ACCESS_KEY", sw.secret_key().to_string()),
            ("AWS_REGION", sw.region().to_string()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ];
        let config = dir.join("bulkwire.toml");
        Setup {
            dir,
            meta,
            bucket,
            s3_env,
            config,
        }
    }

    /// Writes the configuration: `[limits]` lines, then `tables` (the
    /// `[events]` and `[[webhooks]]` of [`events_toml`]).
    pub fn configure(&self, limits: &str, tables: &str) {
        let toml = format!("[limits]\n{limits}\n[s3]\npart_size = 5242880\n{tables}");
        std::fs::write(&self.config, toml).unwrap();
    }

    /// The bucket the node's blobs go to (under `media/`); for hooks.rs.
    #[allow(dead_code)]
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn start(&self, name: &str) -> Node {
        let mut c = Command::new(env!("CARGO_BIN_EXE_bulkwire"));
        c.arg("serve")
            .args(["--meta", &self.meta])
            .args(["--blobs", &format!("s3://{}/media", self.bucket)])
            .envs(self.s3_env.iter().map(|(k, v)| (*k, v.as_str())));
        Node::spawn(c, &self.dir, name, &self.config)
    }
}

impl Drop for Setup {
    /// Logs and the receiver's file stay when the test failed.
    fn drop(&mut self) {
        if !thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `[events]` with `webhook_timeout = 2` (a dead node's claims come back
/// after 2 × 2 + 10 s) and one `[[webhooks]]` entry for `url`; every other
/// setting, `webhook_retry_max` included, is the default.
pub fn events_toml(url: &str, secret: &str) -> String {
    format!(
        "[events]\nwebhook_timeout = 2\n\n[[webhooks]]\nurl = \"{url}\"\nsecret = \"{secret}\"\n"
    )
}

/// A `bulkwire serve` child process; killed when dropped.
pub struct Node {
    child: Child,
    pub addr: SocketAddr,
    log: PathBuf,
}

impl Node {
    /// A node on the embedded store under `dir/name` (the same data after
    /// a restart).
    pub fn embedded(dir: &Path, name: &str, config: &Path) -> Node {
        let mut c = Command::new(env!("CARGO_BIN_EXE_bulkwire"));
        c.arg("serve");
        Node::spawn(c, dir, name, config)
    }

    fn spawn(mut c: Command, dir: &Path, name: &str, config: &Path) -> Node {
        let log = dir.join(format!("{name}.log"));
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let mut child = c
            .args(["--listen", "127.0.0.1:0", "--token", TOKEN])
            .args(["--user", &format!("{WP_USER}:{WP_PASS}")])
            .arg("--data")
            .arg(dir.join(name))
            .arg("--config")
            .arg(config)
            .env("BULKWIRE_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("BULKWIRE_TOKEN")
            .env_remove("BULKWIRE_USER")
            .env_remove("BULKWIRE_CONFIG")
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .expect("starting bulkwire serve");
        let banner = bulkwire_testenv::await_banner(&mut child, Duration::from_secs(60));
        let (addr, _) =
            banner.unwrap_or_else(|e| panic!("node {name} did not start ({e}):\n{}", tail(&log)));
        Node { child, addr, log }
    }

    /// SIGKILL, as a crash would.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rest of the first line of `out` starting with `prefix`, within
/// 60 s; a thread keeps draining `out` afterwards (no full pipe blocks
/// the child).
fn first_line(out: ChildStdout, prefix: &'static str) -> Option<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix(prefix) {
                let _ = tx.send(rest.to_string());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60)).ok()
}

/// A log's last 30 lines but the S3 client's retries.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("object_store::client::retry"))
        .collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// `bulkwire ARGS`, which must succeed; its stdout.
pub fn cli(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bulkwire"))
        .args(args)
        .env_remove("BULKWIRE_CONFIG")
        .env_remove("BULKWIRE_META")
        .output()
        .unwrap();
    assert!(out.status.success(), "bulkwire {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

// ---------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------

/// An answer read to the end of its connection.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Resp {
    fn parse(raw: &[u8]) -> Result<Resp, String> {
        let end = find(raw, b"\r\n\r\n")
            .ok_or_else(|| format!("no answer head in {:?}", String::from_utf8_lossy(raw)))?;
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no status in {head:?}"))?;
        let mut r = Resp {
            status,
            head,
            body: Vec::new(),
        };
        let rest = &raw[end + 4..];
        let chunked = r
            .header("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"));
        r.body = if chunked {
            dechunk(rest)?
        } else {
            rest.to_vec()
        };
        match r.header("content-length").map(str::parse::<usize>) {
            Some(Ok(n)) if n != r.body.len() => Err(format!("body cut short: {}", r.head)),
            _ => Ok(r),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }

    pub fn text(&self) -> String {
        format!("{} {}", self.status, String::from_utf8_lossy(&self.body))
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let nl = find(b, b"\r\n").ok_or("chunk size line cut short")?;
        let line = String::from_utf8_lossy(&b[..nl]);
        let hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(hex, 16).map_err(|e| format!("chunk size: {e}"))?;
        b = &b[nl + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("chunk cut short".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// One request on a new connection, read to its end; an error is the
/// transport's (refused, reset, no answer in time).
pub fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> Result<Resp, String> {
    let io = |e: std::io::Error| format!("{method} {path}: {e}");
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(io)?;
    s.set_read_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    s.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: bulkwire\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).map_err(io)?;
    s.write_all(body).map_err(io)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(io)?;
    Resp::parse(&raw).map_err(|e| format!("{method} {path}: {e}"))
}

pub fn must_call(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Resp {
    call(addr, method, path, &[AUTH], body).unwrap_or_else(|e| panic!("{e}"))
}

/// The ids of every listed media item, following `next`.
pub fn listed(node: &Node) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    let mut path = "/v1/media?limit=1000".to_string();
    loop {
        let r = must_call(node.addr, "GET", &path, b"");
        assert_eq!(r.status, 200, "{}", r.text());
        let j = r.json();
        for m in j["media"].as_array().unwrap() {
            all.insert(m["id"].as_str().unwrap().to_string());
        }
        match j["next"].as_str() {
            Some(n) => path = format!("/v1/media?limit=1000&after={n}"),
            None => return all,
        }
    }
}

/// The sum of a metric's lines whose labels contain every one of
/// `labels` (`outcome="retried"`; none for a metric without labels).
pub fn metric_sum(node: &Node, name: &str, labels: &[&str]) -> u64 {
    let r = must_call(node.addr, "GET", "/metrics", b"");
    String::from_utf8_lossy(&r.body)
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(['{', ' ']))
        })
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Waits for `f`, up to `within`; panics naming `what` after.
pub fn wait_until(within: Duration, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < within, "not within {within:?}: {what}");
        thread::sleep(Duration::from_millis(200));
    }
    t0.elapsed()
}

// ---------------------------------------------------------------------
// Uploads
// ---------------------------------------------------------------------

/// Deterministic bytes (xorshift64), one stream per seed.
pub fn payload(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `multipart/form-data` through curl, with a field.
    Form,
    /// `PUT /v1/media/NAME`.
    Raw,
    /// tus creation-with-upload: the whole file in the creating POST.
    Tus,
    /// XML-RPC `wp.uploadFile`.
    XmlRpc,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Form, Format::Raw, Format::Tus, Format::XmlRpc];

    /// `data.format` of its events.
    pub fn name(self) -> &'static str {
        match self {
            Format::Form => "multipart",
            Format::Raw => "raw",
            Format::Tus => "tus",
            Format::XmlRpc => "xmlrpc",
        }
    }
}

/// How one upload ended, as its client saw it.
#[derive(Debug)]
pub enum Outcome {
    /// Answered as stored: the item's id.
    Stored(String),
    /// Answered as not stored (status and text).
    Refused(String),
    /// No answer: stored or not, only the store knows.
    Unknown(String),
}

impl Outcome {
    /// What the client got, for messages.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Stored(id) => format!("stored as {id}"),
            Outcome::Refused(why) => format!("refused: {why}"),
            Outcome::Unknown(why) => format!("no answer: {why}"),
        }
    }
}

/// Upload number `n` in format `f` through `addr`, with `X-Request-Id:
/// req-N`; `dir` holds curl's file.
pub fn upload(addr: SocketAddr, f: Format, n: u64, dir: &Path) -> Outcome {
    let data = payload(n, 1000 + (n as usize * 997) % 30_000);
    let rid = format!("X-Request-Id: req-{n}");
    let name = format!("item-{n}.bin");
    match f {
        Format::Form => form(addr, n, &data, dir, &rid),
        Format::Raw => {
            let path = format!("/v1/media/{name}");
            match call(addr, "PUT", &path, &[AUTH, &rid], &data) {
                Ok(r) if r.status == 201 => Outcome::Stored(first_id(&r)),
                Ok(r) => Outcome::Refused(r.text()),
                Err(e) => Outcome::Unknown(e),
            }
        }
        Format::Tus => tus(addr, &name, &data, &rid),
        Format::XmlRpc => xmlrpc(addr, &name, &data, &rid),
    }
}

fn first_id(r: &Resp) -> String {
    r.json()["media"][0]["id"].as_str().unwrap().to_string()
}

fn form(addr: SocketAddr, n: u64, data: &[u8], dir: &Path, rid: &str) -> Outcome {
    let file = dir.join(format!("form-{n}.bin"));
    std::fs::write(&file, data).unwrap();
    let out = Command::new("curl")
        .args([
            "-sS",
            "--noproxy",
            "*",
            "--max-time",
            "30",
            "-w",
            "\n%{http_code}",
        ])
        .args(["-H", AUTH, "-H", rid, "-F", &format!("n={n}")])
        .arg("-F")
        .arg(format!("file=@{}", file.display()))
        .arg(format!("http://{addr}/v1/media"))
        .output()
        .expect("curl is needed for this test");
    let _ = std::fs::remove_file(&file);
    if !out.status.success() {
        return Outcome::Unknown(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let at = out.stdout.iter().rposition(|&b| b == b'\n').unwrap();
    let status = String::from_utf8_lossy(&out.stdout[at + 1..]).into_owned();
    let body = &out.stdout[..at];
    if status != "201" {
        return Outcome::Refused(format!("{status} {}", String::from_utf8_lossy(body)));
    }
    let j: Value = serde_json::from_slice(body).unwrap();
    Outcome::Stored(j["media"][0]["id"].as_str().unwrap().to_string())
}

fn tus(addr: SocketAddr, name: &str, data: &[u8], rid: &str) -> Outcome {
    use base64::Engine;
    let meta = base64::engine::general_purpose::STANDARD.encode(name);
    let hs = [
        AUTH,
        rid,
        "Tus-Resumable: 1.0.0",
        &format!("Upload-Length: {}", data.len()),
        &format!("Upload-Metadata: filename {meta}"),
        "Content-Type: application/offset+octet-stream",
    ];
    match call(addr, "POST", "/v1/uploads", &hs, data) {
        Ok(r) if r.status == 201 => {
            let at = r.header("upload-offset").and_then(|o| o.parse().ok());
            assert_eq!(at, Some(data.len()), "the whole file went up: {}", r.head);
            let loc = r.header("location").expect("Location");
            Outcome::Stored(loc.rsplit('/').next().unwrap().to_string())
        }
        Ok(r) => Outcome::Refused(r.text()),
        Err(e) => Outcome::Unknown(e),
    }
}

fn xmlrpc(addr: SocketAddr, name: &str, data: &[u8], rid: &str) -> Outcome {
    use base64::Engine;
    let bits = base64::engine::general_purpose::STANDARD.encode(data);
    let s = |v: &str| format!("<param><value><string>{v}</string></value></param>");
    let body = format!(
        "<?xml version=\"1.0\"?><methodCall><methodName>wp.uploadFile</methodName><params>\
         <param><value><int>1</int></value></param>{}{}\
         <param><value><struct>\
         <member><name>name</name><value><string>{name}</string></value></member>\
         <member><name>type</name><value><string>application/octet-stream</string></value></member>\
         <member><name>bits</name><value><base64>{bits}</base64></value></member>\
         </struct></value></param></params></methodCall>",
        s(WP_USER),
        s(WP_PASS)
    );
    let hs = [rid, "Content-Type: text/xml"];
    match call(addr, "POST", "/xmlrpc", &hs, body.as_bytes()) {
        Ok(r) if r.status == 200 => {
            let text = String::from_utf8_lossy(&r.body).into_owned();
            match xml_member(&text, "id") {
                Some(id) if !text.contains("<fault>") => Outcome::Stored(id),
                _ => Outcome::Refused(text),
            }
        }
        Ok(r) => Outcome::Refused(r.text()),
        Err(e) => Outcome::Unknown(e),
    }
}

/// The string value of struct member `name` in an XML-RPC answer.
fn xml_member(xml: &str, name: &str) -> Option<String> {
    let at = xml.find(&format!("<name>{name}</name>"))?;
    let rest = &xml[at..];
    let v = rest.find("<string>")? + "<string>".len();
    let end = rest[v..].find("</string>")?;
    Some(rest[v..v + end].to_string())
}

/// A raw `PUT` of `len` bytes that sends its head and 4 KiB, then nothing
/// more: an upload in flight for as long as the connection is held.
pub fn stalled_upload(addr: SocketAddr, n: u64, len: usize) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    let head = format!(
        "PUT /v1/media/stalled-{n}.bin HTTP/1.1\r\nHost: bulkwire\r\n{AUTH}\r\n\
         Content-Length: {len}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&payload(n, 4096)).unwrap();
    s
}

// ---------------------------------------------------------------------
// The webhook receiver
// ---------------------------------------------------------------------

/// One delivery as the receiver recorded it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub webhook_id: String,
    pub verified: bool,
    pub error: Option<String>,
    pub event: Value,
}

impl Delivery {
    pub fn kind(&self) -> &str {
        self.event["type"].as_str().unwrap_or("")
    }

    pub fn item(&self) -> &str {
        self.event["data"]["id"].as_str().unwrap_or("")
    }
}

/// `testsuite/py/webhook_receiver.py` as a child process: up is running,
/// down is not (connections refused); restarted on its first port.
pub struct Receiver {
    python: PathBuf,
    pub secret: String,
    out: PathBuf,
    port: u16,
    /// Between recording a delivery and answering it.
    delay: Duration,
    child: Option<Child>,
}

impl Receiver {
    /// Starts on a free port, recording into `dir/deliveries.jsonl` and
    /// answering `delay` after, with a secret from `bulkwire events
    /// secret`.
    pub fn start(dir: &Path, delay: Duration) -> Receiver {
        let python = bulkwire_testsuite::python_venv(
            Path::new(env!("CARGO_TARGET_TMPDIR")),
            "standardwebhooks",
        );
        let secret = cli(&["events", "secret"]).trim().to_string();
        assert!(secret.starts_with("whsec_"), "{secret}");
        let mut r = Receiver {
            python,
            secret,
            out: dir.join("deliveries.jsonl"),
            port: 0,
            delay,
            child: None,
        };
        r.up();
        r
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Starts the process (on the port of its first start).
    pub fn up(&mut self) {
        assert!(self.child.is_none(), "the receiver is already up");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testsuite/py/webhook_receiver.py");
        let mut child = Command::new(&self.python)
            .arg(script)
            .arg(&self.secret)
            .arg(&self.out)
            .arg(self.port.to_string())
            .arg(self.delay.as_secs_f64().to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the webhook receiver");
        let port = first_line(child.stdout.take().unwrap(), "listening on ");
        let port = port.and_then(|p| p.trim().parse().ok()).unwrap_or_else(|| {
            let _ = child.kill();
            panic!("the webhook receiver did not start on port {}", self.port)
        });
        self.port = port;
        self.child = Some(child);
    }

    /// Kills the process: connections are refused until [`Receiver::up`].
    pub fn down(&mut self) {
        let mut c = self.child.take().expect("the receiver is up");
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// Every delivery recorded so far, in arrival order (whole lines).
    pub fn deliveries(&self) -> Vec<Delivery> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        whole
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                Delivery {
                    webhook_id: v["webhook_id"].as_str().unwrap_or("").to_string(),
                    verified: v["verified"] == true,
                    error: v["error"].as_str().map(str::to_string),
                    event: v["event"].clone(),
                }
            })
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
