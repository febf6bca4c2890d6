//! Runs the real `bulkwire serve` binary on 127.0.0.1 and drives it with
//! third-party clients: curl (`-F`, `-T`) and python-requests (installed
//! into a venv under target/ from testsuite/py/requirements.txt). Also the
//! first-start token, SIGTERM, and `kill -9` mid-upload then restart.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Serve {
    child: Child,
    addr: SocketAddr,
    /// stdout lines before the "listening on" line.
    banner: Vec<String>,
}

impl Serve {
    fn start(data: &Path, extra: &[&str]) -> Serve {
        Serve::spawn(Command::new(env!("CARGO_BIN_EXE_bulkwire")), data, extra)
    }

    /// As `start`, under `prlimit --nofile=N:N` (util-linux): a descriptor
    /// limit the server cannot raise.
    fn start_with_nofile(nofile: u64, data: &Path, extra: &[&str]) -> Serve {
        let mut cmd = Command::new("prlimit");
        cmd.arg(format!("--nofile={nofile}:{nofile}"))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_bulkwire"));
        Serve::spawn(cmd, data, extra)
    }

    fn spawn(mut cmd: Command, data: &Path, extra: &[&str]) -> Serve {
        let mut child = cmd
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(extra)
            .env_remove("BULKWIRE_TOKEN")
            .env_remove("BULKWIRE_USER")
            .env_remove("BULKWIRE_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the server (prlimit, from util-linux, for the descriptor test)");
        let banner = bulkwire_testenv::await_banner(&mut child, Duration::from_secs(30));
        let (addr, banner) = bulkwire_testenv::must(banner);
        Serve {
            child,
            addr,
            banner,
        }
    }

    fn url(&self, p: &str) -> String {
        format!("http://{}{p}", self.addr)
    }

    /// SIGTERM, then the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        self.child.wait().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tmp(name: &str) -> PathBuf {
    bulkwire_testenv::must(bulkwire_testenv::test_dir(name))
}

fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn payload(n: usize) -> Vec<u8> {
    let mut x = 0x9e3779b97f4a7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Runs `bulkwire ARGS` with `stdin` as its standard input.
fn bulkwire(args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut c = Command::new(env!("CARGO_BIN_EXE_bulkwire"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    c.wait_with_output().unwrap()
}

#[cfg_attr(
    missing_curl,
    ignore = "needs curl (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn tokens_and_users_from_the_cli_work_on_a_running_server() {
    let data = tmp("creds");
    let d = data.to_str().unwrap();
    let s = Serve::start(&data, &["--token", TOKEN]);
    let made = bulkwire(&["token", "create", "--label", "ci", "--data", d], "");
    assert!(made.status.success(), "{made:?}");
    let tok = String::from_utf8(made.stdout).unwrap();
    let tok = tok.trim_end();
    assert_eq!(tok.len(), 64, "the token alone on stdout: {tok:?}");
    let added = bulkwire(&["user", "add", "bob", "--data", d], "pa ss:word\n");
    assert!(added.status.success(), "{added:?}");
    let again = bulkwire(&["user", "add", "bob", "--data", d], "x\n");
    assert!(!again.status.success(), "a second add of bob");
    let code = |args: &[&str]| {
        let mut a = vec!["-o", "/dev/null", "-w", "%{http_code}"];
        a.extend_from_slice(args);
        String::from_utf8(curl(&a).stdout).unwrap()
    };
    let url = s.url("/v1/media");
    assert_eq!(
        code(&["-H", &format!("Authorization: Bearer {tok}"), &url]),
        "200"
    );
    assert_eq!(code(&["-u", "bob:pa ss:word", &url]), "200");
    assert_eq!(code(&["-u", "bob:wrong", &url]), "401");
    let users = bulkwire(&["user", "list", "--data", d], "");
    assert!(String::from_utf8(users.stdout).unwrap().starts_with("bob "));
    // Revoked by the token itself; a restart forgets every cached login.
    assert!(bulkwire(&["token", "revoke", tok, "--data", d], "")
        .status
        .success());
    assert!(bulkwire(&["user", "remove", "bob", "--data", d], "")
        .status
        .success());
    assert!(s.terminate().success());
    let s = Serve::start(&data, &["--token", TOKEN]);
    let url = s.url("/v1/media");
    assert_eq!(
        code(&["-H", &format!("Authorization: Bearer {tok}"), &url]),
        "401"
    );
    assert_eq!(code(&["-u", "bob:pa ss:word", &url]), "401");
}

fn curl(args: &[&str]) -> Output {
    let out = Command::new("curl")
        .args(["-sS", "--noproxy", "*", "--max-time", "60"])
        .args(args)
        .output()
        .expect("curl is needed for these tests");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn curl_json(args: &[&str]) -> Value {
    serde_json::from_slice(&curl(args).stdout).unwrap()
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

const TOKEN: &str = "cli-test-token";
const AUTH: &str = "Authorization: Bearer cli-test-token";

#[cfg_attr(
    missing_curl,
    ignore = "needs curl (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn first_start_prints_a_token_once_and_stores_it_hashed() {
    let data = tmp("token");
    let s = Serve::start(&data, &[]);
    let i = s
        .banner
        .iter()
        .position(|l| l.contains("shown this once"))
        .expect("token banner");
    let token = s.banner[i + 1].trim().to_string();
    assert_eq!(token.len(), 64);
    // Stored as its digest only: `token list` shows the digest's first 16
    // hex digits, and the database file never holds the token itself.
    let list = bulkwire(&["token", "list", "--data", data.to_str().unwrap()], "");
    assert!(list.status.success());
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(list.starts_with(&sha256(token.as_bytes())[..16]), "{list}");
    let db = std::fs::read(data.join("meta.sqlite")).unwrap();
    assert!(!db.windows(64).any(|w| w == token.as_bytes()));
    let auth = format!("Authorization: Bearer {token}");
    let j = curl_json(&["-H", &auth, &s.url("/v1/media")]);
    assert_eq!(j["media"], serde_json::json!([]));
    let code = curl(&["-o", "/dev/null", "-w", "%{http_code}", &s.url("/v1/media")]);
    assert_eq!(code.stdout, b"401");
    // SIGTERM is a clean exit.
    assert!(s.terminate().success());

    let s = Serve::start(&data, &[]);
    assert!(
        !s.banner
            .iter()
            .any(|l| l.contains(&token) || l.contains("shown this once")),
        "{:?}",
        s.banner
    );
    let j = curl_json(&["-H", &auth, &s.url("/v1/media")]);
    assert!(j["media"].is_array());
}

#[cfg_attr(
    missing_curl,
    ignore = "needs curl (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn curl_form_and_put_round_trip_by_sha256() {
    let dir = tmp("curl");
    let s = Serve::start(&dir.join("data"), &["--token", TOKEN]);
    let file = dir.join("photo.jpg");
    let data = payload(5 * 1024 * 1024 + 3);
    std::fs::write(&file, &data).unwrap();
    let f = format!("upload=@{};type=image/jpeg", file.display());
    let j = curl_json(&[
        "-H",
        AUTH,
        "-F",
        &f,
        "-F",
        "title=from curl",
        &s.url("/v1/media"),
    ]);
    assert_eq!(j["fields"]["title"], "from curl");
    let m = &j["media"][0];
    assert_eq!(
        (m["filename"].as_str(), m["field"].as_str()),
        (Some("photo.jpg"), Some("upload"))
    );
    assert_eq!(m["sha256"], sha256(&data));
    // The url is the item's link: curl fetches it without credentials.
    let back = dir.join("back.jpg");
    curl(&["-o", back.to_str().unwrap(), m["url"].as_str().unwrap()]);
    assert_eq!(sha256(&std::fs::read(&back).unwrap()), sha256(&data));

    let j = curl_json(&[
        "-H",
        AUTH,
        "-T",
        file.to_str().unwrap(),
        &s.url("/v1/media/raw.bin"),
    ]);
    let m = &j["media"][0];
    assert_eq!(m["sha256"], sha256(&data));
    let r = curl(&["-r", "100-199", m["url"].as_str().unwrap()]);
    assert_eq!(r.stdout, data[100..200]);
}

fn python_with_requests() -> PathBuf {
    bulkwire_testsuite::python_venv(Path::new(env!("CARGO_TARGET_TMPDIR")), "requests")
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn python_requests_round_trip_by_sha256() {
    let py = python_with_requests();
    let dir = tmp("python");
    let s = Serve::start(&dir.join("data"), &["--token", TOKEN]);
    let file = dir.join("in.bin");
    let data = payload(3 * 1024 * 1024 + 5);
    std::fs::write(&file, &data).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testsuite/py/roundtrip.py");
    let out = Command::new(py)
        .arg(script)
        .arg(s.url(""))
        .arg(TOKEN)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = sha256(&data);
    assert_eq!(j["want"], want);
    assert_eq!(j["form_status"], 201);
    assert_eq!(j["form_fields"]["title"], "from python");
    assert_eq!(j["form_sha256"], want);
    assert_eq!(j["form_download_sha256"], want);
    assert_eq!(j["put_status"], 201);
    assert_eq!(j["put_filename"], "stream ed.bin");
    assert_eq!(j["put_download_sha256"], want);
    // Each `url` is the item's link: python-requests fetched it again with
    // no credentials at all and got the same bytes.
    for kind in ["form", "put"] {
        let url = j[format!("{kind}_url")].as_str().unwrap();
        assert!(url.starts_with(&s.url("/v1/media/")), "{kind}: {url}");
        assert!(
            url.contains("?sig=") || url.contains("&sig="),
            "{kind}: {url}"
        );
        assert_eq!(j[format!("{kind}_fetched_status")], 200, "{kind}: {j}");
        assert_eq!(j[format!("{kind}_fetched_sha256")], want, "{kind}");
    }
}

#[cfg_attr(
    missing_curl,
    ignore = "needs curl (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn kill_9_mid_upload_then_restart_leaves_nothing() {
    let data = tmp("kill9");
    let s = Serve::start(&data, &["--token", TOKEN]);
    let mut c = TcpStream::connect(s.addr).unwrap();
    let head = format!(
        "POST /v1/media HTTP/1.1\r\nHost: x\r\n{AUTH}\r\nContent-Type: multipart/form-data; boundary=b\r\n\
         Content-Length: 100000000\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"k.bin\"\r\n\r\n"
    );
    c.write_all(head.as_bytes()).unwrap();
    c.write_all(&payload(2 * 1024 * 1024)).unwrap();
    wait_until("temp file being written", || {
        count_files(&data.join("tmp")) == 1
    });
    let mut s = s;
    s.child.kill().unwrap(); // SIGKILL
    s.child.wait().unwrap();
    drop(c);
    assert_eq!(
        count_files(&data.join("tmp")),
        1,
        "the crash left its temp file"
    );

    let s = Serve::start(&data, &["--token", TOKEN]);
    assert!(
        s.banner
            .iter()
            .any(|l| l.contains("removed 1 temp file(s) and 0 orphan blob(s)")),
        "{:?}",
        s.banner
    );
    assert_eq!(count_files(&data.join("tmp")), 0);
    assert_eq!(count_files(&data.join("blobs")), 0);
    let j = curl_json(&["-H", AUTH, &s.url("/v1/media")]);
    assert_eq!(j["media"], serde_json::json!([]));
}

/// Sends a request on a new connection and reads the answer to its end
/// (the server closes: `Connection: close`); `None` when it took longer
/// than `within`.
fn answer_within(addr: SocketAddr, req: &[u8], within: Duration) -> Option<String> {
    use std::io::Read;
    let t0 = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, within).ok()?;
    s.set_read_timeout(Some(within)).unwrap();
    s.write_all(req).ok()?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    (t0.elapsed() < within && !text.is_empty()).then_some(text)
}

#[cfg_attr(
    missing_curl,
    ignore = "needs curl (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn idle_connections_beyond_the_descriptor_limit_do_not_stop_service() {
    // The test itself holds 1,100 sockets.
    let own = bulkwire_server::conns::raise_descriptor_limit();
    assert!(own >= 1300, "the test needs 1,300 descriptors, has {own}");
    let data = tmp("nofile");
    let srv = Serve::start_with_nofile(1024, &data, &["--token", TOKEN]);
    let idle: Vec<TcpStream> = (0..1100)
        .map(|i| TcpStream::connect(srv.addr).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    let five = Duration::from_secs(5);
    let health = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let got = answer_within(srv.addr, health, five).expect("/healthz within 5 s");
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    let body = payload(1 << 20);
    let mut req = format!(
        "PUT /v1/media/one.bin HTTP/1.1\r\nHost: x\r\n{AUTH}\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let got = answer_within(srv.addr, &req, five).expect("a 1 MiB upload within 5 s");
    assert!(got.starts_with("HTTP/1.1 201"), "{got}");
    assert!(got.contains(&sha256(&body)), "{got}");
    // The cap was derived from the limit, and idle connections were shed
    // to stay under it.
    let metrics = curl(&["-H", AUTH, &srv.url("/metrics")]).stdout;
    let metrics = String::from_utf8_lossy(&metrics);
    let value = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap();
        line[name.len()..].trim().parse().unwrap()
    };
    let max = value("bulkwire_max_connections ");
    assert!(max > 100 && max < 1024, "{max}");
    assert!(value("bulkwire_connections_shed_total ") >= 1100 - max);
    drop(idle);
}
