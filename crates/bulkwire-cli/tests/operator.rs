//! What an operator and a new user see of the real `bulkwire serve` binary: the access log
//! (text without colour codes when stderr is a file, JSON with `BULKWIRE_LOG_FORMAT=json`),
//! `X-Request-Id`, `405` with `Allow`, `HEAD /v1/media`, sizes with units in the TOML config,
//! and error messages that name the address, path or limit involved and say what to do.
//!
//! Requests go over a plain `TcpStream` (HTTP/1.1, `Connection: close`), so every header and
//! status is seen exactly as sent.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "operator-test-token";

struct Serve {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Serve {
    /// `bulkwire serve` on a free port, its stderr (the log) in `dir/stderr.log`.
    fn start(dir: &Path, env: &[(&str, &str)], extra: &[&str]) -> Serve {
        let log = dir.join("stderr.log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bulkwire"));
        cmd.args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token",
            TOKEN,
            "--data",
        ])
        .arg(dir.join("data"))
        .args(extra)
        .env_remove("BULKWIRE_LOG")
        .env_remove("BULKWIRE_LOG_FORMAT")
        .env_remove("BULKWIRE_CONFIG")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
        let mut child = cmd.spawn().unwrap();
        let banner = bulkwire_testenv::await_banner(&mut child, Duration::from_secs(30));
        let (addr, _) = banner.unwrap_or_else(|e| {
            let err = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("bulkwire serve did not start ({e}); stderr:\n{err}")
        });
        Serve { child, addr, log }
    }

    /// The log so far, once it holds `want` (lines are written when an answer's body is
    /// dropped, just after the client has read it).
    fn log_with(&self, want: &str) -> String {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap();
            if log.contains(want) || Instant::now() > until {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer: status, headers (lower-case names) and body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// One request on its own connection; `head` are extra header lines.
fn request(addr: SocketAddr, method: &str, path: &str, head: &[&str], body: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in head {
        req.push_str(h);
        req.push_str("\r\n");
    }
    if !body.is_empty() || method == "PUT" || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse_answer(&raw, method == "HEAD")
}

fn parse_answer(raw: &[u8], head: bool) -> Answer {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let text = String::from_utf8_lossy(&raw[..end]);
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = if head {
        Vec::new()
    } else {
        raw[end + 4..].to_vec()
    };
    Answer {
        status,
        headers,
        body,
    }
}

fn auth() -> String {
    format!("Authorization: Bearer {TOKEN}")
}

fn dir(name: &str) -> PathBuf {
    bulkwire_testenv::must(bulkwire_testenv::test_dir(&format!("operator-{name}")))
}

fn bulkwire(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkwire"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn access_log_has_one_line_per_request_without_colour_and_with_its_id() {
    let d = dir("log");
    let s = Serve::start(&d, &[], &[]);
    let a = auth();
    let r = request(
        s.addr,
        "PUT",
        "/v1/media/hello.txt",
        &[&a, "X-Request-Id: client-id-42", "Content-Type: text/plain"],
        b"hello",
    );
    assert_eq!(r.status, 201);
    assert_eq!(r.header("x-request-id"), Some("client-id-42"));
    let url = r.json()["media"][0]["url"].as_str().unwrap().to_string();
    let got = request(s.addr, "GET", &url, &[&a], b"");
    assert_eq!(got.body, b"hello");
    let fresh = got.header("x-request-id").unwrap().to_string();
    assert_eq!(fresh.len(), 16, "a generated id: {fresh}");
    let r = request(s.addr, "GET", "/v1/media?token=s3cr3t&limit=5", &[], b"");
    assert_eq!(r.status, 401);
    let third = r.header("x-request-id").unwrap().to_string();

    let log = s.log_with(&third);
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log file:\n{log}"
    );
    let line = |id: &str| {
        log.lines()
            .find(|l| l.contains(&format!("request_id={id}")))
            .unwrap_or_else(|| panic!("no access line for {id}:\n{log}"))
            .to_string()
    };
    let put = line("client-id-42");
    for want in [
        "bulkwire::access",
        "method=PUT",
        "path=/v1/media/hello.txt",
        "status=201",
        "bytes_in=5",
        "client=127.0.0.1:",
        "outcome=sent",
    ] {
        assert!(put.contains(want), "{want} missing in {put}");
    }
    let get = line(&fresh);
    assert!(
        get.contains("method=GET") && get.contains("status=200"),
        "{get}"
    );
    assert!(get.contains("bytes_out=5"), "{get}");
    let denied = line(&third);
    assert!(denied.contains("status=401"), "{denied}");
    assert!(
        denied.contains("token=REDACTED") && denied.contains("limit=5"),
        "{denied}"
    );
    assert!(!log.contains("s3cr3t"), "a credential in the log:\n{log}");
}

#[test]
fn json_log_format_gives_one_object_per_line() {
    let d = dir("json");
    let s = Serve::start(&d, &[("BULKWIRE_LOG_FORMAT", "json")], &[]);
    let r = request(s.addr, "GET", "/healthz", &["X-Request-Id: json-1"], b"");
    assert_eq!(r.status, 200);
    let log = s.log_with("json-1");
    let objects: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let access = objects
        .iter()
        .find(|o| o["request_id"] == "json-1")
        .unwrap_or_else(|| panic!("no access object:\n{log}"));
    assert_eq!(access["target"], "bulkwire::access");
    assert_eq!(access["level"], "INFO");
    assert_eq!(access["method"], "GET");
    assert_eq!(access["path"], "/healthz");
    assert_eq!(access["status"], 200);
    assert_eq!(access["bytes_out"], 3);
}

#[test]
fn wrong_methods_get_405_with_allow_and_head_lists_media() {
    let d = dir("allow");
    let s = Serve::start(&d, &[], &[]);
    let a = auth();
    let cases = [
        ("DELETE", "/v1/media", "GET, HEAD, POST"),
        ("POST", "/v1/media/x", "GET, HEAD, PUT, DELETE"),
        ("POST", "/healthz", "GET, HEAD"),
        ("DELETE", "/metrics", "GET, HEAD"),
        ("GET", "/xmlrpc", "POST"),
        ("PUT", "/soap", "GET, HEAD, POST"),
        ("GET", "/v1/uploads", "POST, OPTIONS"),
        ("PUT", "/v1/uploads/abc", "HEAD, PATCH, DELETE, OPTIONS"),
    ];
    for (method, path, allow) in cases {
        let r = request(s.addr, method, path, &[&a, "Tus-Resumable: 1.0.0"], b"");
        assert_eq!(r.status, 405, "{method} {path}");
        assert_eq!(r.header("allow"), Some(allow), "{method} {path}");
    }
    let head = request(s.addr, "HEAD", "/v1/media", &[&a], b"");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("application/json"));
}

#[test]
fn a_raw_body_posted_to_the_form_endpoint_is_told_what_to_send() {
    let d = dir("415");
    let s = Serve::start(&d, &[], &[]);
    let a = auth();
    let ct = "Content-Type: application/x-www-form-urlencoded";
    let r = request(s.addr, "POST", "/v1/media", &[&a, ct], b"raw bytes");
    assert_eq!(r.status, 415);
    let m = r.json()["message"].as_str().unwrap().to_string();
    for want in [
        "multipart/form-data",
        "curl -F",
        "PUT /v1/media/NAME",
        "x-www-form-urlencoded",
    ] {
        assert!(m.contains(want), "{want} missing in {m}");
    }
}

#[test]
fn toml_limits_take_sizes_and_durations_with_units() {
    let d = dir("units");
    let config = d.join("bulkwire.toml");
    let toml =
        "[limits]\nfile_bytes = \"1 KiB\"\nidle_timeout_ms = \"10s\"\nupload_expiry_s = \"2h\"\n";
    std::fs::write(&config, toml).unwrap();
    let s = Serve::start(&d, &[], &["--config", config.to_str().unwrap()]);
    let a = auth();
    let small = request(s.addr, "PUT", "/v1/media/s.bin", &[&a], &[7u8; 1024]);
    assert_eq!(small.status, 201);
    let big = request(s.addr, "PUT", "/v1/media/b.bin", &[&a], &[7u8; 1025]);
    assert_eq!(big.status, 413);
    let j = big.json();
    assert_eq!(j["limit"]["name"], "file_bytes");
    assert_eq!(j["limit"]["value"], 1024);

    std::fs::write(&config, "[limits]\nfile_bytes = \"1 KB s\"\n").unwrap();
    let out = bulkwire(&["serve", "--check", "--config", config.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("file_bytes") && err.contains("unknown unit"),
        "{err}"
    );
}

#[test]
fn a_port_in_use_is_named_with_a_way_out() {
    let d = dir("port");
    let first = Serve::start(&d, &[], &[]);
    let addr = first.addr.to_string();
    let data = d.join("other");
    let out = bulkwire(&["serve", "--listen", &addr, "--data", data.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert!(err.contains("--listen 127.0.0.1:"), "{err}");
}

#[test]
fn build_names_the_missing_file() {
    let d = dir("build");
    let missing = d.join("no-such.bin");
    let spec = format!("f=@{}", missing.display());
    let out = bulkwire(&[
        "build",
        "--file",
        &spec,
        "-o",
        d.join("out").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(!d.join("out").exists(), "output written before the error");
}
