//! The rough edges a new user hit with the `bulkwire` command in their
//! first hour (issue "The first hour"), one test each, named after the
//! edge, on the real binary: credentials made for a store no server reads,
//! `--listen localhost:PORT` and `--port`, a silent shutdown, `token list`'s
//! dates. The server's own edges are in `bulkwire-server/tests/first_hour.rs`,
//! the load tool's in `tests/load.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const TOKEN: &str = "first-hour-token";

fn tmp(name: &str) -> PathBuf {
    bulkwire_testenv::must(bulkwire_testenv::test_dir(name))
}

fn bulkwire(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkwire"))
        .args(args)
        .current_dir(dir)
        .env_remove("BULKWIRE_DATA")
        .env_remove("BULKWIRE_META")
        .env_remove("BULKWIRE_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A `bulkwire serve` whose stderr (the log) is read line by line.
struct Serve {
    child: Child,
    addr: SocketAddr,
    log: mpsc::Receiver<String>,
}

impl Serve {
    fn start(data: &Path, listen: &str) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bulkwire"))
            .args(["serve", "--listen", listen, "--token", TOKEN, "--data"])
            .arg(data)
            .env_remove("BULKWIRE_CONFIG")
            .env("BULKWIRE_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, log) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let banner = bulkwire_testenv::await_banner(&mut child, Duration::from_secs(30));
        let (addr, _) = bulkwire_testenv::must(banner);
        Serve { child, addr, log }
    }

    /// Waits for a log line containing `what`; the line.
    fn wait_log(&self, what: &str) -> String {
        let end = Instant::now() + Duration::from_secs(20);
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.log.recv_timeout(left) {
                Ok(l) if l.contains(what) => return l,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!("no log line with {what:?}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request on a new connection; (status, body).
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

/// Rough edge 2: `bulkwire token create` run from another directory
/// silently made a new empty `./bulkwire-data` and printed a token that the
/// running server refused with 401; nothing said which store it used.
#[test]
fn token_create_where_no_store_is_refused_unless_init_and_says_which_store() {
    let dir = tmp("first-hour-init");
    let out = bulkwire(&dir, &["token", "create"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no token printed");
    let err = text(&out.stderr);
    assert!(err.contains("no metadata store at"), "{err}");
    assert!(
        err.contains("--data DIR") && err.contains("--init"),
        "{err}"
    );
    assert!(!dir.join("bulkwire-data").exists(), "nothing created");
    let out = bulkwire(&dir, &["user", "list"]);
    assert!(!out.status.success(), "every store command refuses");
    let out = bulkwire(&dir, &["token", "create", "--init"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim().len(), 64);
    let store = dir.join("bulkwire-data/meta.sqlite");
    let err = text(&out.stderr);
    let named = format!("metadata store: SQLite {}", store.display());
    assert!(err.contains(&named), "{err}");
    // Once it exists, no --init is needed, and the store is named again.
    let out = bulkwire(&dir, &["token", "list"]);
    assert!(out.status.success());
    assert!(text(&out.stderr).contains(&named));
}

/// Rough edge 11: `token list` showed dates as `20261128T00:40:15`.
#[test]
fn token_list_shows_rfc_3339_times() {
    let dir = tmp("first-hour-list");
    assert!(
        bulkwire(&dir, &["token", "create", "--init", "--label", "cam"])
            .status
            .success()
    );
    let out = text(&bulkwire(&dir, &["token", "list"]).stdout);
    let line = out.lines().next().unwrap();
    let when = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("created="))
        .unwrap();
    // 2026-11-28T00:40:15Z
    let b = when.as_bytes();
    let shape = b.len() == 20
        && [4, 7].iter().all(|&i| b[i] == b'-')
        && b[10] == b'T'
        && [13, 16].iter().all(|&i| b[i] == b':')
        && b[19] == b'Z';
    assert!(shape, "{line}");
}

/// Rough edge 7: `--listen localhost:8092` failed with `invalid socket
/// address syntax`; a bare port did too.
#[test]
fn listen_takes_a_host_name_with_its_port_and_a_bare_port() {
    let data = tmp("first-hour-listen");
    let s = Serve::start(&data, "localhost:0");
    assert!(s.addr.ip().is_loopback(), "{}", s.addr);
    assert_eq!(get(s.addr, "/healthz").0, 200);
    drop(s);
    // A free port, then `--listen PORT`: on 127.0.0.1.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = Serve::start(&data, &port.to_string());
    assert_eq!(s.addr, SocketAddr::from(([127, 0, 0, 1], port)));
    assert_eq!(get(s.addr, "/healthz").0, 200);
}

/// Rough edge 7: `--port 9000` got `unexpected argument '--port'` with no
/// hint.
#[test]
fn port_gets_clap_s_error_with_a_tip_to_use_listen() {
    let dir = tmp("first-hour-port");
    let out = bulkwire(&dir, &["serve", "--port", "9000"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    let err = text(&out.stderr);
    assert!(err.contains("unexpected argument '--port'"), "{err}");
    assert!(err.contains("--listen 9000"), "{err}");
    assert!(!dir.join("bulkwire-data").exists(), "no server started");
}

/// Rough edge 8: a SIGINT during an upload waited silently until `all
/// connections closed`, and `/readyz` stayed 200 during the drain, so a load
/// balancer kept sending new requests.
#[test]
fn sigint_during_an_upload_logs_the_drain_and_readyz_answers_503_draining() {
    let data = tmp("first-hour-drain");
    let s = Serve::start(&data, "127.0.0.1:0");
    // An upload that has sent half its body.
    let mut up = TcpStream::connect(s.addr).unwrap();
    up.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "PUT /v1/media/slow.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Length: 2000\r\n\r\n"
    );
    up.write_all(head.as_bytes()).unwrap();
    up.write_all(&[7u8; 1000]).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while !get(s.addr, "/metrics")
        .1
        .contains("bulkwire_active_uploads 1")
    {
        assert!(Instant::now() < end, "the upload never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = s.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let line = s.wait_log("draining:");
    assert!(
        line.contains("draining: 1 request in flight, up to 30 s"),
        "{line}"
    );
    let (status, body) = get(s.addr, "/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("draining"), "{body}");
    let (status, body) = get(s.addr, "/v1/media");
    assert_eq!((status, body.contains("draining")), (503, true), "{body}");
    // The upload in flight finishes, then the server stops by itself.
    up.write_all(&[7u8; 1000]).unwrap();
    let mut answer = String::new();
    let _ = up.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    s.wait_log("drained");
    let mut s = s;
    let end = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < end, "still running after the drain");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}
