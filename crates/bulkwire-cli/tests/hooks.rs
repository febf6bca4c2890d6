//! A `pre_finish` refusal against real stores (PostgreSQL + SeaweedFS):
//! for a form, a raw `PUT` and a tus upload, each large enough to go to
//! S3 as a multipart upload, the hook says no once the bytes are stored;
//! the client gets the hook's status and message, and nothing is left —
//! no media row, no upload row, no object and no incomplete multipart
//! upload in the bucket (listed through the S3 API).

// events.rs's helpers, of which this test uses a few.
#[allow(dead_code)]
mod events_util;

use bulkwire_testenv::{must, shared_postgres, shared_seaweed, Postgres, Seaweed};
use events_util::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const STATUS: u16 = 422;
const MESSAGE: &str = "the application keeps no such file (hook 8123)";
/// Above the 5 MiB part size of [`Setup::configure`]: three parts.
const LEN: usize = 11 << 20;
/// `[hooks] secret` (the endpoint here does not check signatures:
/// bulkwire-server's tests/hooks.rs does).
const SECRET: &str = "whsec_YnVsa3dpcmUgaG9vayB0ZXN0cyBzZWNyZXQsIDMyIEI=";

/// A hook endpoint on 127.0.0.1 refusing every call with [`STATUS`] and
/// [`MESSAGE`]; counts the calls.
fn refusing_hook() -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/pre_finish", l.local_addr().unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut len = 0;
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                line.clear();
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            seen.fetch_add(1, SeqCst);
            let answer = serde_json::json!({"reject": {"status": STATUS, "message": MESSAGE}});
            let answer = answer.to_string();
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, calls)
}

/// Keys under `media/` in the bucket: objects, and incomplete multipart
/// uploads.
fn s3_left(sw: &Seaweed, bucket: &str) -> (Vec<String>, Vec<String>) {
    let keys = |q: String| {
        let (status, body) = must(sw.s3_curl("GET", &q, &[]));
        assert_eq!(status, 200, "{body}");
        body.split("<Key>")
            .skip(1)
            .filter_map(|s| s.split_once("</Key>").map(|(k, _)| k.to_string()))
            .collect::<Vec<_>>()
    };
    (
        keys(format!("/{bucket}?list-type=2&prefix=media/")),
        keys(format!("/{bucket}?uploads&prefix=media/")),
    )
}

fn rows(pg: &Postgres, db: &str, table: &str) -> usize {
    let out = must(pg.psql(db, &format!("SELECT count(*) FROM {table}")));
    out.trim().parse().unwrap_or_else(|_| panic!("{out:?}"))
}

/// The refusal as the client got it: the hook's status, its message.
fn assert_refused(what: &str, status: u16, body: &str) {
    assert_eq!(status, STATUS, "{what}: {body}");
    assert!(body.contains(MESSAGE), "{what}: {body}");
}

#[cfg_attr(
    missing_curl,
    ignore = "needs curl (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn pre_finish_refusal_leaves_no_row_object_or_multipart_upload() {
    let (pg, sw) = (must(shared_postgres()), must(shared_seaweed()));
    let s = Setup::new("hooks", pg, sw);
    let (hook, calls) = refusing_hook();
    let hooks = format!("[hooks]\npre_finish = \"{hook}\"\nsecret = \"{SECRET}\"\n");
    s.configure("", &hooks);
    let node = s.start("a");
    let data = payload(7, LEN);

    // A form, through curl.
    let file = s.dir.join("form.bin");
    std::fs::write(&file, &data).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "--noproxy", "*", "--max-time", "60"])
        .args(["-w", "\n%{http_code}", "-H", AUTH, "-F", "n=1"])
        .arg("-F")
        .arg(format!("file=@{}", file.display()))
        .arg(format!("http://{}/v1/media", node.addr))
        .output()
        .expect("curl is needed for this test");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap();
    assert_refused("form", status.parse().unwrap(), body);

    // A raw PUT.
    let r = call(node.addr, "PUT", "/v1/media/raw.bin", &[AUTH], &data).unwrap();
    assert_refused("raw", r.status, &r.text());

    // tus: created empty, then the whole file in one PATCH.
    let hs = [
        AUTH,
        "Tus-Resumable: 1.0.0",
        &format!("Upload-Length: {LEN}"),
        "Upload-Metadata: filename dHVzLmJpbg==",
    ];
    let r = call(node.addr, "POST", "/v1/uploads", &hs, b"").unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let at = r.header("location").unwrap();
    let path = &at[at.find("/v1/uploads/").expect("an upload URL")..];
    let hs = [
        AUTH,
        "Tus-Resumable: 1.0.0",
        "Upload-Offset: 0",
        "Content-Type: application/offset+octet-stream",
    ];
    let r = call(node.addr, "PATCH", path, &hs, &data).unwrap();
    assert_refused("tus", r.status, &r.text());

    assert_eq!(calls.load(SeqCst), 3, "the hook was asked once per upload");
    let db = "events_hooks";
    wait_until(Duration::from_secs(20), "nothing left", || {
        rows(pg, db, "media") == 0
            && rows(pg, db, "uploads") == 0
            && s3_left(sw, s.bucket()) == (vec![], vec![])
    });
    assert!(listed(&node).is_empty());
}
