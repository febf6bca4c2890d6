//! The owners' migration (schema step 6) under the real `bulkwire serve`,
//! on the stores the release before owners wrote
//! (`crates/bulkwire-store/tests/fixtures/release-1`, made by
//! `make-release-1.sh`; `crates/bulkwire-store/tests/migration.rs` checks
//! the same stores at the store level): its data directory (SQLite and
//! files), and its PostgreSQL dump restored into a fresh database with its
//! blob directory (`--blobs file:…`). Each opens with every item listed as
//! the `admin`'s, downloading to the SHA-256 its row names; `GET /v1/me`
//! counts them; the release's user logs in as an admin; the unfinished
//! resumable upload answers its offset (4 of 10); a second start changes
//! nothing; and the unfinished upload, resumed
//! from the release's saved hash state, completes as an item whose
//! SHA-256 is the whole file's.
//!
//! The server is started with `--token` for an admin credential: the
//! release printed its own token, which nobody kept. The release wrote
//! its uploads' expiry as a date (a day after it ran): each copy's expiry
//! is moved a month past today before the first start, so that what is
//! checked does not depend on the day the test runs (an expired
//! unfinished upload is 410 and its bytes are the janitor's).

use bulkwire_testenv::{await_banner, must, shared_postgres};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const TOKEN: &str = "migration-test-token";
const AUTH: &str = "Authorization: Bearer migration-test-token";
const TUS: &str = "Tus-Resumable: 1.0.0";

/// What the release stored (`make-release-1.sh`): four items, one of them
/// a finished resumable upload, and an unfinished one of which 4 of 10
/// bytes ("half") arrived.
const NAMES: [&str; 4] = ["photo.jpg", "notes.txt", "rpc.bin", "done.txt"];
const BYTES: u64 = 19 + 19 + 9 + 5;
const HALF: &[u8] = b"half";
const REST: &[u8] = b"-done!";

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bulkwire-store/tests/fixtures/release-1")
        .join(p)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// The only upload spool the release left: the unfinished upload's id.
fn unfinished_id(uploads: &Path) -> String {
    let names: Vec<String> = std::fs::read_dir(uploads)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].clone()
}

/// A month from now, in seconds since the epoch.
fn next_month() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    now.as_secs() as i64 + 30 * 24 * 3600
}

// ---------------------------------------------------------------------
// The server and HTTP
// ---------------------------------------------------------------------

/// A `bulkwire serve` child process; killed when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Serve {
    /// `bulkwire serve` with `--token` on `data` and the given store flags.
    fn start(data: &Path, stores: &[&str]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bulkwire"))
            .args(["serve", "--listen", "127.0.0.1:0", "--token", TOKEN])
            .arg("--data")
            .arg(data)
            .args(stores)
            .env_remove("BULKWIRE_TOKEN")
            .env_remove("BULKWIRE_USER")
            .env_remove("BULKWIRE_CONFIG")
            .env_remove("BULKWIRE_META")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting bulkwire serve");
        match await_banner(&mut child, Duration::from_secs(60)) {
            Ok((addr, _)) => Serve { child, addr },
            Err(e) => panic!("bulkwire serve did not start: {e}"),
        }
    }

    /// SIGTERM, and the exit: a clean stop, as an operator's upgrade does.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(killed.unwrap().success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "bulkwire serve exited with {status}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Resp {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("{e}: {} {}", self.head, String::from_utf8_lossy(&self.body))
        })
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One request on its own connection (`Connection: close`), read to the
/// end. Answers with a body here have a `Content-Length`, which is checked.
fn call(s: &Serve, method: &str, path: &str, headers: &[&str], body: &[u8]) -> Resp {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: bulkwire\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    c.write_all(head.as_bytes()).unwrap();
    c.write_all(body).unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let end = find(&raw, b"\r\n\r\n").expect("an answer head");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let r = Resp {
        status,
        head,
        body: raw[end + 4..].to_vec(),
    };
    assert!(
        r.header("transfer-encoding").is_none(),
        "a chunked answer: {}",
        r.head
    );
    if method != "HEAD" {
        if let Some(n) = r.header("content-length") {
            assert_eq!(n.parse::<usize>().unwrap(), r.body.len(), "{}", r.head);
        }
    }
    r
}

fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

// ---------------------------------------------------------------------
// What the server shows
// ---------------------------------------------------------------------

/// Every item as the admin lists it (oldest first), each downloaded and
/// checked against its row; `GET /v1/me`'s usage; the unfinished upload's
/// offset and length. As text, to compare two starts.
fn everything_intact(s: &Serve, unfinished: &str) -> String {
    let r = call(s, "GET", "/v1/media?limit=100&order=asc", &[AUTH], b"");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let listing = r.json();
    let media = listing["media"].as_array().unwrap();
    assert!(listing["next"].is_null(), "{listing}");
    let mut names: Vec<&str> = media
        .iter()
        .map(|m| m["filename"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    let mut want = NAMES;
    want.sort_unstable();
    assert_eq!(names, want, "every item of the release is listed");
    let mut shown = Vec::new();
    for m in media {
        assert_eq!(m["owner"], "admin", "{m}");
        let id = m["id"].as_str().unwrap();
        let got = call(s, "GET", &format!("/v1/media/{id}"), &[AUTH], b"");
        assert_eq!(got.status, 200, "{id}: {}", got.head);
        assert_eq!(got.body.len() as u64, m["size"].as_u64().unwrap(), "{m}");
        assert_eq!(sha256(&got.body), m["sha256"].as_str().unwrap(), "{m}");
        // The fields a restart must keep (not `url`, a link signed now).
        let keep = [
            "id",
            "owner",
            "filename",
            "content_type",
            "size",
            "sha256",
            "created",
        ];
        let row: Vec<String> = keep.iter().map(|k| m[*k].to_string()).collect();
        shown.push(row.join(" "));
    }
    let me = call(s, "GET", "/v1/me", &[AUTH], b"").json();
    assert_eq!(me["name"], "admin", "{me}");
    assert_eq!(me["usage"]["bytes"], BYTES, "{me}");
    assert_eq!(me["usage"]["items"], NAMES.len(), "{me}");
    // The release's user (its password is in make-release-1.sh) logs in,
    // an admin now as every credential of before.
    let old = "Authorization: Basic b2xkdXNlcjpzZWNyZXQgcHc="; // olduser:secret pw
    let r = call(s, "GET", "/v1/me", &[old], b"");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let them = r.json();
    assert_eq!(
        (&them["name"], &them["role"], &them["everyone"]),
        (
            &Value::from("olduser"),
            &Value::from("admin"),
            &Value::from(true)
        ),
        "{them}"
    );
    let (offset, length) = tus_offset(s, unfinished);
    assert_eq!((offset, length.as_str()), (HALF.len(), "10"));
    shown.push(format!("usage {}", me["usage"]));
    shown.push(format!("unfinished {unfinished} at {offset} of {length}"));
    shown.join("\n")
}

/// A resumable upload's `Upload-Offset` and `Upload-Length`.
fn tus_offset(s: &Serve, id: &str) -> (usize, String) {
    let r = call(s, "HEAD", &format!("/v1/uploads/{id}"), &[AUTH, TUS], b"");
    assert_eq!(r.status, 200, "HEAD of the unfinished upload: {}", r.head);
    let offset = r.header("upload-offset").expect("Upload-Offset");
    let length = r.header("upload-length").expect("Upload-Length");
    (offset.parse().unwrap(), length.to_string())
}

/// Sends the unfinished upload's last 6 bytes from where the release left
/// it: the item is the whole file, hashed from the release's saved state
/// on, and counted in the admin's usage.
fn the_unfinished_upload_completes(s: &Serve, id: &str) {
    let at = format!("Upload-Offset: {}", HALF.len());
    let ct = "Content-Type: application/offset+octet-stream";
    let path = format!("/v1/uploads/{id}");
    let r = call(s, "PATCH", &path, &[AUTH, TUS, &at, ct], REST);
    assert_eq!(
        r.status,
        204,
        "{} {}",
        r.head,
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(r.header("upload-offset"), Some("10"));
    let whole = [HALF, REST].concat();
    let got = call(s, "GET", &format!("/v1/media/{id}"), &[AUTH], b"");
    assert_eq!((got.status, got.body.as_slice()), (200, whole.as_slice()));
    let r = call(s, "GET", "/v1/media?limit=100", &[AUTH], b"");
    let listing = r.json();
    let m = listing["media"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .expect("the completed upload is listed")
        .clone();
    assert_eq!(m["sha256"], sha256(&whole), "{m}");
    assert_eq!(m["owner"], "admin", "{m}");
    let me = call(s, "GET", "/v1/me", &[AUTH], b"").json();
    assert_eq!(me["usage"]["bytes"], BYTES + whole.len() as u64, "{me}");
    assert_eq!(me["usage"]["items"], NAMES.len() + 1, "{me}");
}

/// Two starts on the same stores show the same; then the unfinished
/// upload completes.
fn two_starts_agree(data: &Path, stores: &[&str], unfinished: &str) {
    let s = Serve::start(data, stores);
    let first = everything_intact(&s, unfinished);
    s.stop();
    let s = Serve::start(data, stores);
    assert_eq!(
        everything_intact(&s, unfinished),
        first,
        "a second start changes nothing"
    );
    the_unfinished_upload_completes(&s, unfinished);
    s.stop();
}

// ---------------------------------------------------------------------
// The two kinds of stores
// ---------------------------------------------------------------------

#[test]
fn a_data_directory_of_the_release_serves_every_item_as_the_admins() {
    let dir = must(bulkwire_testenv::test_dir("migration-data"));
    let data = dir.join("data");
    copy_dir(&fixture("data"), &data);
    let db = rusqlite::Connection::open(data.join("meta.sqlite")).unwrap();
    let moved = db
        .execute("UPDATE uploads SET expires = ?1", [next_month()])
        .unwrap();
    assert_eq!(moved, 2, "the release's two resumable uploads");
    drop(db);
    let unfinished = unfinished_id(&data.join("uploads"));
    two_starts_agree(&data, &[], &unfinished);
}

#[test]
fn a_postgresql_database_of_the_release_serves_every_item_as_the_admins() {
    let pg = must(shared_postgres());
    let url = must(pg.create_database("release1_server"));
    must(pg.psql_file("release1_server", &fixture("postgres.sql")));
    let moved = format!("UPDATE uploads SET expires = {}", next_month());
    must(pg.psql("release1_server", &moved));
    let dir = must(bulkwire_testenv::test_dir("migration-pg"));
    let blobs = dir.join("pgblobs");
    copy_dir(&fixture("pgblobs"), &blobs);
    let unfinished = unfinished_id(&blobs.join("uploads"));
    let blobs_flag = format!("file:{}", blobs.display());
    let stores = ["--meta", url.as_str(), "--blobs", blobs_flag.as_str()];
    two_starts_agree(&dir.join("data"), &stores, &unfinished);
}
