//! The AWS credential chain's web identity step (`AWS_WEB_IDENTITY_TOKEN_FILE`, `AWS_ROLE_ARN`,
//! `AWS_ENDPOINT_URL_STS`: an EKS pod's IAM role) through the real `bulkwire` binary, against
//! bulkwire-testenv's HTTPS stand-in for STS (`StsServer`) and a real SeaweedFS that accepts
//! the keys the stand-in hands out (minted by SeaweedFS's own STS `AssumeRole`).
//!
//! How the stand-in's CA is trusted: the way an operator trusts a private STS or a TLS proxy,
//! `SSL_CERT_FILE`. `object_store`'s client verifies with rustls-platform-verifier, which on
//! Linux takes its roots from rustls-native-certs, and that reads `SSL_CERT_FILE` (instead of
//! the system's store) when it is set. The variable is set on the child process only: setting
//! it in this process would race the other tests' threads. Without it the same run fails,
//! which shows the certificate is checked, not waved through.
//!
//! Every child gets only the variables it needs (`env_clear`): the S3 address, region and
//! `AWS_ALLOW_HTTP` for SeaweedFS, the web identity three, no keys, no profile (`HOME` points
//! nowhere) and the instance metadata address on a closed local port, so nothing but STS could
//! have handed out the keys that signed.

use bulkwire_testenv::{must, shared_seaweed, Mint, Seaweed, StsServer};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "arn:aws:iam::000000000000:role/bulkwire-web";
/// What an EKS pod's projected service account token file holds (a JWT; the stand-in only
/// compares it).
const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6bWVkaWEifQ.c2ln";
const API_TOKEN: &str = "web-identity-test-token";
const MIB: usize = 1 << 20;

/// SeaweedFS's own STS makes each set of keys the stand-in hands out.
fn mint(sw: &'static Seaweed) -> Mint {
    Box::new(move || sw.assume_role(900))
}

/// A test's directory, with the token file in it holding `token`.
fn setup(name: &str, token: &str) -> (PathBuf, PathBuf) {
    let dir = must(bulkwire_testenv::test_dir(&format!("webid-{name}")));
    let file = dir.join("token");
    std::fs::write(&file, token).unwrap();
    (dir, file)
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The whole environment of a child: web identity at `sts`, and the CA in `ca` if any.
fn env(
    sw: &Seaweed,
    sts: &StsServer,
    token_file: &Path,
    ca: Option<&Path>,
) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", "/nonexistent".into()),
        ("AWS_ENDPOINT_URL", sw.endpoint()),
        ("AWS_REGION", sw.region().into()),
        ("AWS_ALLOW_HTTP", "true".into()),
        (
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            token_file.display().to_string(),
        ),
        ("AWS_ROLE_ARN", ROLE.into()),
        ("AWS_ENDPOINT_URL_STS", sts.endpoint()),
        (
            "AWS_EC2_METADATA_SERVICE_ENDPOINT",
            format!("http://127.0.0.1:{}", closed_port()),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(ca) = ca {
        v.push(("SSL_CERT_FILE".into(), ca.display().to_string()));
    }
    v
}

fn check(dir: &Path, bucket: &str, env: &[(String, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkwire"))
        .args(["serve", "--check", "--data"])
        .arg(dir.join("data"))
        .args(["--blobs", &format!("s3://{bucket}/webid")])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap()
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every request the stand-in saw carried the token file's contents and the role.
fn assert_asked_as_configured(sts: &StsServer, token: &str) {
    let asked = sts.asked();
    assert!(!asked.is_empty(), "STS was never asked");
    for a in asked {
        assert_eq!(a.action, "AssumeRoleWithWebIdentity", "{a:?}");
        assert_eq!(a.version, "2011-06-15", "{a:?}");
        assert_eq!(a.role_arn, ROLE, "{a:?}");
        assert_eq!(a.token, token, "{a:?}");
        assert!(!a.session_name.is_empty(), "{a:?}");
    }
}

#[test]
fn check_signs_with_keys_from_the_sts_stand_in() {
    let sw = must(shared_seaweed());
    // SeaweedFS is this process's own: a fixed name is free.
    let bucket = "webid-check";
    must(sw.create_bucket(bucket));
    let sts = must(StsServer::start(Duration::from_secs(600), mint(sw), TOKEN));
    let (dir, token_file) = setup("check", TOKEN);
    let out = check(
        &dir,
        bucket,
        &env(sw, &sts, &token_file, Some(&sts.ca_file())),
    );
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    let want = format!(
        "credentials: web identity for {ROLE} (STS {}), read/write probe ok",
        sts.endpoint()
    );
    assert!(text.contains(&want), "{want} missing in {text}");
    assert_asked_as_configured(&sts, TOKEN);
    assert_eq!(sts.served().len(), 1, "one set of keys for a short run");
    assert_eq!(sts.refused(), 0);
}

/// A token STS refuses, and an STS whose certificate the process does not trust: `--check`
/// fails on the blob store, naming why.
#[test]
fn a_refused_token_or_an_untrusted_sts_fails_the_check() {
    let sw = must(shared_seaweed());
    // SeaweedFS is this process's own: a fixed name is free.
    let bucket = "webid-refused";
    must(sw.create_bucket(bucket));
    let sts = must(StsServer::start(Duration::from_secs(600), mint(sw), TOKEN));
    let (dir, token_file) = setup("refused", "a-token-of-another-cluster");
    let out = check(
        &dir,
        bucket,
        &env(sw, &sts, &token_file, Some(&sts.ca_file())),
    );
    let text = said(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("blobs: FAILED"), "{text}");
    assert!(text.contains("InvalidIdentityToken"), "{text}");
    assert!(sts.refused() >= 1, "{:?}", sts.asked());
    assert!(sts.served().is_empty(), "{:?}", sts.served());

    // The right token, but no SSL_CERT_FILE: the system's roots do not know the stand-in's
    // CA, so the handshake fails and STS never sees a request.
    std::fs::write(&token_file, TOKEN).unwrap();
    let before = sts.asked().len();
    let out = check(&dir, bucket, &env(sw, &sts, &token_file, None));
    let text = said(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("blobs: FAILED"), "{text}");
    assert_eq!(sts.asked().len(), before, "no request got through TLS");
}

/// Keys that expire every 2 s while a 16 MiB upload (four 5 MiB parts' worth) runs for about
/// 6 s through `bulkwire serve`: the client asks STS again before each set runs out, every
/// part is accepted, and the download has the same sha256.
#[test]
fn keys_from_sts_rotate_under_an_upload() {
    let sw = must(shared_seaweed());
    // SeaweedFS is this process's own: a fixed name is free.
    let bucket = "webid-rotate";
    must(sw.create_bucket(bucket));
    let sts = must(StsServer::start(Duration::from_secs(2), mint(sw), TOKEN));
    let (dir, token_file) = setup("rotate", TOKEN);
    let config = dir.join("bulkwire.toml");
    std::fs::write(&config, format!("[s3]\npart_size = {}\n", 5 * MIB)).unwrap();
    let env = env(sw, &sts, &token_file, Some(&sts.ca_file()));
    let mut serve = Serve::start(&dir, bucket, &config, &env);
    let body: Vec<u8> = (0..16 * MIB).map(|i| (i % 251) as u8).collect();
    let (status, answer) = put_paced(serve.addr, "/v1/media/big.bin", &body, 6.0);
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));
    let j: Value = serde_json::from_slice(&answer).unwrap();
    let id = j["media"][0]["id"].as_str().unwrap().to_string();
    let (status, got) = get(serve.addr, &format!("/v1/media/{id}"));
    assert_eq!(status, 200);
    assert_eq!(hex(&Sha256::digest(&got)), hex(&Sha256::digest(&body)));
    serve.stop();
    assert!(sts.served().len() >= 2, "keys served: {:?}", sts.served());
    assert_asked_as_configured(&sts, TOKEN);
    assert_eq!(sts.refused(), 0);
}

/// `bulkwire serve` on a free port; killed when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Serve {
    fn start(dir: &Path, bucket: &str, config: &Path, env: &[(String, String)]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bulkwire"))
            .args(["serve", "--listen", "127.0.0.1:0", "--token", API_TOKEN])
            .arg("--config")
            .arg(config)
            .arg("--data")
            .arg(dir.join("data"))
            .args(["--blobs", &format!("s3://{bucket}/webid")])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let banner = bulkwire_testenv::await_banner(&mut child, Duration::from_secs(30));
        let (addr, _) = banner.unwrap_or_else(|e| {
            let err = std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
            panic!("bulkwire serve did not start ({e}); stderr:\n{err}")
        });
        Serve { child, addr }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `PUT`s `body` in 1 MiB writes spread over `secs`, and returns the answer's status and body.
fn put_paced(addr: SocketAddr, path: &str, body: &[u8], secs: f64) -> (u16, Vec<u8>) {
    let mut c = connect(addr);
    write!(
        c,
        "PUT {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {API_TOKEN}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    let start = Instant::now();
    let chunks = body.chunks(MIB);
    let per = secs / chunks.len() as f64;
    for (i, chunk) in chunks.enumerate() {
        c.write_all(chunk).unwrap();
        let due = Duration::from_secs_f64(per * (i + 1) as f64);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    answer(c)
}

fn get(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut c = connect(addr);
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {API_TOKEN}\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    answer(c)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c
}

/// The status and the body of an answer read to its end (`Connection: close`; bodies here
/// have a `Content-Length`).
fn answer(mut c: TcpStream) -> (u16, Vec<u8>) {
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an answer's head");
    let head = String::from_utf8_lossy(&raw[..end]);
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    (status, raw[end + 4..].to_vec())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
