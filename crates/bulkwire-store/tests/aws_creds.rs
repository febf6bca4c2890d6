//! The AWS credential chain against local stand-ins (bulkwire-testenv's
//! `CredsServer`: IMDSv2 and the container credentials endpoint on a
//! loopback port) and a real SeaweedFS that accepts the short-lived keys
//! they hand out. Nothing here reaches 169.254.169.254.
//!
//! Web identity is tested through the binary (`crates/bulkwire-cli/tests/web_identity.rs`):
//! its STS stand-in is HTTPS, and the client trusts that stand-in's CA through `SSL_CERT_FILE`,
//! which only a child process can be given without racing this process's other tests.

use bulkwire_store::{new_id, BlobStore, Lease, S3BlobStore, S3Config};
use bulkwire_testenv::{must, shared_seaweed, CredsServer, Seaweed, CONTAINER_TOKEN};
use bytes::Bytes;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn new_bucket(sw: &Seaweed) -> String {
    let name = format!("bw-{}", &new_id()[..16]);
    must(sw.create_bucket(&name));
    name
}

/// A configuration that takes everything from `vars`, as `with_env`
/// would from the process's environment.
fn config(url: &str, vars: &[(&str, String)]) -> S3Config {
    let m: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let mut c = S3Config::from_url(url).unwrap();
    c.part_size = S3Config::MIN_PART_SIZE;
    c.with_vars(|k| m.get(k).cloned())
}

/// SeaweedFS's own STS makes each set: keys it checks, session token
/// and expiry included.
fn mint(sw: &'static Seaweed) -> bulkwire_testenv::Mint {
    Box::new(move || sw.assume_role(900))
}

fn seaweed_vars(sw: &Seaweed) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", sw.endpoint()),
        ("AWS_REGION", sw.region().into()),
        ("AWS_ALLOW_HTTP", "true".into()),
    ]
}

/// A stand-in S3 that answers every request with an empty listing and
/// keeps each request's headers.
type Seen = Arc<Mutex<Vec<HashMap<String, String>>>>;

fn recording_s3() -> (String, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut headers = HashMap::new();
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                }
            }
            s.lock().unwrap().push(headers);
            let body = "<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount></ListBucketResult>";
            let mut conn = conn;
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/xml\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, seen)
}

#[test]
fn the_session_token_reaches_s3() {
    let (url, seen) = recording_s3();
    let c = config(
        "s3://b/p",
        &[
            ("AWS_ENDPOINT_URL", url),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "ASIATEMP".into()),
            ("AWS_SECRET_ACCESS_KEY", "secret".into()),
            ("AWS_SESSION_TOKEN", "the-session-token".into()),
        ],
    );
    let s = S3BlobStore::new(c).unwrap();
    rt().block_on(s.ready()).unwrap();
    let seen = seen.lock().unwrap();
    let h = seen.first().expect("one request");
    assert_eq!(
        h.get("x-amz-security-token").map(String::as_str),
        Some("the-session-token")
    );
    assert!(h["authorization"].contains("Credential=ASIATEMP/"), "{h:?}");
    assert!(
        h["authorization"].contains("x-amz-security-token"),
        "signed: {h:?}"
    );
}

#[test]
fn no_credential_source_says_so_at_once() {
    // Something listens but never answers, as a firewalled 169.254.169.254
    // would: the probe gives up after metadata_timeout.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let c = config(
        "s3://b/p",
        &[
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint.clone()),
            ("HOME", "/nonexistent".into()),
        ],
    );
    let s = S3BlobStore::new(c).unwrap();
    let t = Instant::now();
    let e = rt().block_on(s.ready()).unwrap_err().to_string();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(e.starts_with("no AWS credentials: "), "{e}");
    assert!(
        e.contains(&format!(
            "no instance metadata service answered at {endpoint} within 1s"
        )),
        "{e}"
    );
    assert!(
        e.contains("metadata_timeout_ms") && !e.contains('\n'),
        "{e}"
    );
    drop(silent);
}

/// Writes `len` bytes of a counter pattern in 1 MiB chunks, at most
/// `rate` bytes a second, and returns their sha256.
async fn upload(s: &S3BlobStore, id: &str, lease: Arc<Lease>, len: usize, rate: f64) -> String {
    let mut w = s.begin(id, lease).await.unwrap();
    let mut h = Sha256::new();
    let start = Instant::now();
    let chunk = 1 << 20;
    for i in 0..len / chunk {
        let mut b = vec![0u8; chunk];
        for (j, x) in b.chunks_mut(8).enumerate() {
            x.copy_from_slice(&((i * chunk / 8 + j) as u64).to_le_bytes());
        }
        h.update(&b);
        w.write(vec![Bytes::from(b)]).await.unwrap();
        let due = Duration::from_secs_f64(((i + 1) * chunk) as f64 / rate);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
    w.commit().await.unwrap();
    hex(&h.finalize())
}

async fn read_sha256(s: &S3BlobStore, id: &str, len: u64) -> String {
    let mut st = s.open(id, 0, len).await.unwrap();
    let mut h = Sha256::new();
    while let Some(c) = st.next().await {
        h.update(c.unwrap());
    }
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// IMDSv2 keys that change every 60 s while a 2 GiB multipart upload runs
/// for longer than that: the client fetches each new set before the old
/// one expires, every part is accepted, and the blob reads back whole.
#[test]
fn instance_keys_rotate_under_a_2_gib_upload() {
    let sw = must(shared_seaweed());
    let bucket = new_bucket(sw);
    let imds = must(CredsServer::start(Duration::from_secs(60), mint(sw)));
    let mut vars = seaweed_vars(sw);
    vars.push(("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()));
    vars.push(("HOME", "/nonexistent".into()));
    let c = config(&format!("s3://{bucket}/rot"), &vars);
    let s = S3BlobStore::new(c).unwrap();
    rt().block_on(async {
        let about = s.describe().await.unwrap();
        assert!(
            about.contains(&format!(
                "credentials: EC2 instance metadata (IMDSv2) at {}",
                imds.endpoint()
            )),
            "{about}"
        );
        let id = new_id();
        let lease = Lease::detached(&id);
        let len = 2usize << 30;
        // Paced to outlast one set of keys: about 75 s for the 2 GiB.
        let sent = upload(&s, &id, lease, len, len as f64 / 75.0).await;
        assert_eq!(read_sha256(&s, &id, len as u64).await, sent);
    });
    let served = imds.served();
    assert!(served.len() >= 2, "keys served: {served:?}");
    assert_eq!(imds.refused(), 0, "every read carried the IMDSv2 token");
}

/// The container endpoint (EKS Pod Identity / ECS full URI) with its
/// authorization token from a file, keys rotating every 2 s.
#[test]
fn container_keys_rotate_under_an_upload() {
    let sw = must(shared_seaweed());
    let bucket = new_bucket(sw);
    let ecs = must(CredsServer::start(Duration::from_secs(2), mint(sw)));
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, CONTAINER_TOKEN).unwrap();
    let mut vars = seaweed_vars(sw);
    vars.push(("AWS_CONTAINER_CREDENTIALS_FULL_URI", ecs.container_uri()));
    vars.push((
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        token.display().to_string(),
    ));
    let s = S3BlobStore::new(config(&format!("s3://{bucket}/ecs"), &vars)).unwrap();
    rt().block_on(async {
        let about = s.describe().await.unwrap();
        assert!(
            about.contains(&format!(
                "credentials: container credentials at {}",
                ecs.container_uri()
            )),
            "{about}"
        );
        let id = new_id();
        let lease = Lease::detached(&id);
        let len = 64 << 20;
        let sent = upload(&s, &id, lease, len, len as f64 / 6.0).await;
        assert_eq!(read_sha256(&s, &id, len as u64).await, sent);
    });
    assert!(ecs.served().len() >= 2, "keys served: {:?}", ecs.served());
    assert_eq!(ecs.refused(), 0);
}
