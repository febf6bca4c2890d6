//! Uppy in a real browser, uploading to bulkwire from a page on ANOTHER origin, through CORS:
//! Debian's headless Chromium (`/usr/bin/chromium`) run by npm `playwright-core`, with npm
//! `uppy` (`uppy/dist/uppy.min.mjs`: Dashboard, `@uppy/xhr-upload`, `@uppy/tus`), both npm
//! packages installed into target/tmp/node as tus_browser.rs does (pinned; nothing from a CDN).
//!
//! testsuite/node/uppy_cors_server.js serves only the test page
//! (testsuite/node/uppy_cors_page.html) and the Uppy bundle, on `http://127.0.0.1:PAGEPORT`. It
//! listens first, so that bulkwire can start with `cors_origins` = [that origin]; bulkwire is
//! `http://127.0.0.1:OTHERPORT`, another origin. There is no proxy: the page's Uppy calls
//! bulkwire's origin directly with `Authorization: Bearer …`, so every request needs a
//! preflight and every answer must allow the page's origin. testsuite/node/uppy_cors_chromium.js
//! gives the files to the two Dashboards, clicks Upload on each and reads what the page recorded.
//!
//! 1. Origin listed: XHRUpload (form-data POST to /v1/media, field `file`) uploads 3 MiB of
//!    random bytes and a PNG, Tus (/v1/uploads, 5 MiB chunks: several PATCHes) 12 MiB and a
//!    PNG. The browser must have read the answers CORS hides from a script unless exposed
//!    (XHRUpload's `Location`, tus's `Location` and `Upload-Offset`: tus cannot work without
//!    them). Each upload is then listed through the API with its size and SHA-256 and
//!    downloaded back byte for byte; one returned `url` (a media link) is fetched by the page's
//!    script with fetch(), cross-origin and without credentials, and hashed in the page. A
//!    screenshot is left at target/tmp/artifacts/uppy-cors.png.
//! 2. Origin not listed (bulkwire lists near misses: the same port on `localhost`, and https):
//!    the same page's uploads all fail in the browser (Uppy reports each file failed, Chromium
//!    says the CORS policy blocked them), a link's fetch() is refused too, and nothing is
//!    stored.
//!
//! A missing runtime (node, npm, Debian's chromium, or an npm registry that cannot be reached)
//! FAILS the test, with what to install; when node or chromium was already missing at build time
//! (and `CI` unset) the tests are marked ignored instead (see tests/common/clients.rs).

mod common;

use common::clients::*;
use common::*;
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Duration;

const MIB: usize = 1 << 20;
const CHUNK: usize = 5 * MIB;
/// The driver's own bound for the whole browser run (it then closes the browser and fails).
const DRIVER_MS: u64 = 180_000;
/// Past this the driver is stopped (SIGTERM, then SIGKILL) and the test fails.
const CLIENT_DEADLINE: Duration = Duration::from_secs(240);
/// How long the page server may take to say where it listens.
const PAGE_SERVER_START: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Runtimes (as tus_browser.rs)

/// The npm packages this suite needs (common `npm_modules`), once per
/// test process.
fn node_modules() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| npm_modules(&[PLAYWRIGHT, UPPY]))
}

// ---------------------------------------------------------------------------
// The page's server and bulkwire

/// testsuite/node/uppy_cors_server.js, running: the page's origin and the requests it served
/// ("METHOD /path STATUS"). Killed (it is this test's child) when dropped.
struct PageServer {
    child: Child,
    origin: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl PageServer {
    fn start(modules: &Path) -> PageServer {
        let mut child = Command::new("node")
            .env("NODE_PATH", modules)
            .arg(repo("testsuite/node/uppy_cors_server.js"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (first_tx, first_rx) = mpsc::channel();
        let lines = log.clone();
        std::thread::spawn(move || {
            let mut first = Some(first_tx);
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match first.take() {
                    Some(tx) => {
                        let _ = tx.send(line);
                    }
                    None => lines.lock().unwrap().push(line),
                }
            }
        });
        let mut server = PageServer {
            child,
            origin: String::new(),
            log,
        };
        let first = first_rx
            .recv_timeout(PAGE_SERVER_START)
            .unwrap_or_else(|e| panic!("uppy_cors_server.js said nothing in time: {e}"));
        let j: Value = serde_json::from_str(&first)
            .unwrap_or_else(|e| panic!("uppy_cors_server.js: {first:?}: {e}"));
        server.origin = j["origin"].as_str().unwrap().to_string();
        server
    }

    fn port(&self) -> u16 {
        self.origin.rsplit_once(':').unwrap().1.parse().unwrap()
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------
// Test data

struct Upload {
    name: &'static str,
    data: Vec<u8>,
    /// The type Chromium gives the file (from its extension) and Uppy sends.
    content_type: &'static str,
}

/// Two files for XHRUpload and two for Tus, written under `dir`.
struct Files {
    xhr: [Upload; 2],
    tus: [Upload; 2],
}

impl Files {
    fn new() -> Files {
        let bin = "application/octet-stream";
        Files {
            xhr: [
                Upload {
                    name: "cors-form.bin",
                    data: payload(3 * MIB + 4_321, 71),
                    content_type: bin,
                },
                Upload {
                    name: "cors-form.png",
                    data: png(40, 30, 72),
                    content_type: "image/png",
                },
            ],
            tus: [
                Upload {
                    name: "cors-tus.bin",
                    data: payload(12 * MIB + 777, 73),
                    content_type: bin,
                },
                Upload {
                    name: "cors-tus.png",
                    data: png(36, 24, 74),
                    content_type: "image/png",
                },
            ],
        }
    }

    /// Writes every file under `dir`; their paths, XHRUpload's then Tus's.
    fn write(&self, dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let write = |ups: &[Upload]| -> Vec<PathBuf> {
            ups.iter()
                .map(|u| {
                    let p = dir.join(u.name);
                    std::fs::write(&p, &u.data).unwrap();
                    p
                })
                .collect()
        };
        (write(&self.xhr), write(&self.tus))
    }
}

/// Runs the driver against `api` from the page on `page.origin`, bounded by
/// [`CLIENT_DEADLINE`]; its JSON report.
async fn drive(
    page: &PageServer,
    api: &str,
    files: &Files,
    dir: &Path,
    link: Option<&str>,
    shot: &Path,
) -> Value {
    let (xhr, tus) = files.write(dir);
    let _ = std::fs::remove_file(shot);
    let mut cmd = Command::new("node");
    cmd.env("NODE_PATH", node_modules())
        .arg(repo("testsuite/node/uppy_cors_chromium.js"))
        .arg(
            serde_json::json!({
                "page": page.origin,
                "api": api,
                "token": TOKEN,
                "xhrFiles": xhr,
                "tusFiles": tus,
                "chunkSize": CHUNK,
                "retryDelays": [0, 200, 500, 1000],
                "link": link,
                "screenshot": shot,
                "chromium": chromium(),
                "timeoutMs": DRIVER_MS,
            })
            .to_string(),
        );
    let (out, took): (Output, Duration) = run_client(cmd, CLIENT_DEADLINE).await;
    let j = report(&out);
    println!(
        "Uppy {} in Chromium {}: {took:.1?} for the browser run",
        j["uppy"].as_str().unwrap_or("?"),
        j["browser"].as_str().unwrap_or("?")
    );
    assert_eq!(j["uppy"], UPPY.rsplit_once('@').unwrap().1, "{j}");
    assert_eq!(j["page"], page.origin.as_str(), "{j}");
    j
}

// ---------------------------------------------------------------------------
// Checks

fn names(v: &Value) -> Vec<String> {
    let mut n: Vec<String> = v
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    n.sort_unstable();
    n
}

fn sorted_names(ups: &[Upload]) -> Vec<String> {
    let mut n: Vec<String> = ups.iter().map(|u| u.name.to_string()).collect();
    n.sort_unstable();
    n
}

/// Listed with its size, SHA-256, name and type, and downloaded back byte for byte.
async fn check_media(h: &Harness, listed: &[Value], id: &str, up: &Upload) {
    let Some(m) = listed.iter().find(|m| m["id"] == id) else {
        panic!("{id} ({}) is not listed: {listed:?}", up.name);
    };
    assert_eq!(m["size"], up.data.len() as u64, "{m}");
    assert_eq!(m["sha256"], sha256(&up.data), "{m}");
    assert_eq!(m["filename"], up.name, "{m}");
    assert_eq!(m["content_type"], up.content_type, "{m}");
    let got = h.download(&format!("/v1/media/{id}")).await;
    // Not assert_eq!: a failure would print megabytes.
    assert!(
        got == up.data,
        "{}: downloaded {} bytes (sha256 {}), uploaded {} (sha256 {})",
        up.name,
        got.len(),
        sha256(&got),
        up.data.len(),
        sha256(&up.data)
    );
}

/// The page's own requests only: no API request reached the page's server (there is no proxy).
fn page_served_only_itself(page: &PageServer) {
    let log = page.requests();
    assert!(log.contains(&"GET / 200".to_string()), "{log:?}");
    assert!(
        log.contains(&"GET /uppy/uppy.min.mjs 200".to_string()),
        "{log:?}"
    );
    assert!(!log.iter().any(|l| l.contains("/v1")), "{log:?}");
}

// ---------------------------------------------------------------------------
// The tests

/// From a page on another origin listed in `cors_origins`, Uppy's XHRUpload and Tus upload two
/// files each straight to bulkwire's origin; the browser reads `Location` and `Upload-Offset`;
/// everything is stored intact; the page's script fetches a media link without credentials.
#[cfg_attr(
    any(missing_chromium, missing_node),
    ignore = "needs chromium and node (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uppy_xhr_upload_and_tus_from_another_origin_through_cors() {
    chromium();
    let page = PageServer::start(node_modules());
    let h = start_configured(|c| c.cors_origins = vec![page.origin.clone()]).await;
    let api = format!("http://{}", h.srv.addr);
    assert_ne!(api, page.origin, "the page and the API must be two origins");

    let files = Files::new();
    let dir = tempfile::tempdir().unwrap();
    let shot = tmp().join("artifacts/uppy-cors.png");
    let j = drive(&page, &api, &files, dir.path(), None, &shot).await;

    // Uppy's view: every file done, nothing failed, nothing blocked, no page error.
    assert_eq!(
        names(&j["complete"]["xhr"]["successful"]),
        sorted_names(&files.xhr),
        "{j}"
    );
    assert_eq!(j["complete"]["xhr"]["failed"], serde_json::json!([]), "{j}");
    assert_eq!(
        names(&j["complete"]["tus"]["successful"]),
        sorted_names(&files.tus),
        "{j}"
    );
    assert_eq!(j["complete"]["tus"]["failed"], serde_json::json!([]), "{j}");
    assert_eq!(j["errors"], serde_json::json!([]), "{j}");
    assert_eq!(j["console"], serde_json::json!([]), "browser console: {j}");
    assert_eq!(
        j["failed"],
        serde_json::json!([]),
        "requests the browser failed: {j}"
    );

    // Every answer of bulkwire that Chromium saw allowed the page's origin.
    let responses = j["responses"].as_array().unwrap();
    let count = |method: &str, path: &str| {
        responses
            .iter()
            .filter(|r| r["method"] == method && r["path"] == path)
            .count()
    };
    assert_eq!(count("POST", "/v1/media"), 2, "{j}");
    assert_eq!(count("POST", "/v1/uploads"), 2, "{j}");
    for r in responses {
        assert_eq!(r["allowOrigin"], page.origin.as_str(), "{r}: {j}");
    }

    // XHRUpload: one form-data POST per file (no retry), each 201 with the media JSON, its
    // `Location` readable by the script (exposed), the media on bulkwire's origin.
    assert_eq!(j["attempts"], 2, "{j}");
    let answers = j["xhr"].as_array().unwrap();
    assert_eq!(answers.len(), 2, "{j}");
    let mut xhr_ids = Vec::new();
    for u in &files.xhr {
        let f = &j["files"]["xhr"][u.name];
        assert!(f["error"].is_null(), "{}: {f}", u.name);
        assert_eq!(f["status"], 201, "{f}");
        assert_eq!(f["size"], u.data.len() as u64, "{f}");
        assert_eq!(f["type"], u.content_type, "{f}");
        let media = f["body"]["media"].as_array().unwrap();
        assert_eq!(media.len(), 1, "{f}");
        let m = &media[0];
        assert_eq!(m["field"], "file", "{m}");
        assert_eq!(m["filename"], u.name, "{m}");
        assert_eq!(m["size"], u.data.len() as u64, "{m}");
        assert_eq!(m["sha256"], sha256(&u.data), "{m}");
        let id = m["id"].as_str().unwrap().to_string();
        let link = m["url"].as_str().unwrap();
        assert!(link.starts_with(&format!("{api}/v1/media/{id}?")), "{link}");
        // Uppy reads the top-level `url` as the file's uploadURL.
        assert_eq!(f["uploadURL"], link, "{f}");
        let location = format!("{api}/v1/media/{id}");
        assert!(
            answers
                .iter()
                .any(|a| a["status"] == 201 && a["location"] == location.as_str()),
            "{}: no answer with Location {location} readable by the page: {answers:?}",
            u.name
        );
        xhr_ids.push(id);
    }
    assert_ne!(xhr_ids[0], xhr_ids[1]);

    // Tus: creation answered 201 with a `Location` the browser read (tus-js-client needs it),
    // then PATCHes, each 204 with the `Upload-Offset` one chunk further, to the end.
    let requests = j["requests"].as_array().unwrap();
    let mut tus_ids = Vec::new();
    for u in &files.tus {
        let f = &j["files"]["tus"][u.name];
        assert!(f["error"].is_null(), "{}: {f}", u.name);
        assert_eq!(f["size"], u.data.len() as u64, "{f}");
        let url = f["uploadURL"].as_str().unwrap();
        tus_ids.push(upload_id(url, &api));
        let created: Vec<&Value> = requests
            .iter()
            .filter(|r| r["method"] == "POST" && r["location"] == url)
            .collect();
        assert_eq!(created.len(), 1, "{}: {j}", u.name);
        assert_eq!(created[0]["status"], 201, "{}: {j}", u.name);
        assert_eq!(created[0]["url"], format!("{api}/v1/uploads"), "{j}");
        let offsets: Vec<u64> = requests
            .iter()
            .filter(|r| r["url"] == url)
            .map(|r| {
                assert_eq!(r["method"], "PATCH", "{}: {j}", u.name);
                assert_eq!(r["status"], 204, "{}: {r}", u.name);
                let o = r["offset"].as_str();
                o.unwrap_or_else(|| panic!("Upload-Offset not readable: {r}"))
                    .parse()
                    .unwrap()
            })
            .collect();
        let len = u.data.len() as u64;
        let want: Vec<u64> = (1..)
            .map(|i| (i * CHUNK as u64).min(len))
            .take(u.data.len().div_ceil(CHUNK))
            .collect();
        assert_eq!(offsets, want, "{}: {j}", u.name);
    }
    assert!(
        count_patches(responses) >= 4,
        "several PATCHes expected: {j}"
    );

    // The link, fetched by the page's script across origins without credentials: readable, and
    // the bytes it hashed are the uploaded file's (and what the server said it stored).
    let l = &j["link"];
    let link = l["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no link fetched: {j}"));
    let (u, m) = files
        .xhr
        .iter()
        .map(|u| (u, &j["files"]["xhr"][u.name]["body"]["media"][0]))
        .find(|(_, m)| m["url"] == link)
        .unwrap_or_else(|| panic!("{link} is none of the uploads' url: {j}"));
    assert!(l["error"].is_null(), "the page could not fetch {link}: {l}");
    assert_eq!(l["status"], 200, "{l}");
    assert_eq!(l["size"], u.data.len() as u64, "{l}");
    assert_eq!(l["sha256"], sha256(&u.data), "{l}");
    assert_eq!(l["sha256"], m["sha256"], "{l} {m}");
    assert_eq!(l["type"], u.content_type, "{l}");

    // The server's view: four media, intact.
    let listed = h.list_all().await;
    assert_eq!(listed.len(), 4, "{listed:?}");
    for (u, id) in files.xhr.iter().zip(&xhr_ids) {
        check_media(&h, &listed, id, u).await;
    }
    for (u, id) in files.tus.iter().zip(&tus_ids) {
        check_media(&h, &listed, id, u).await;
    }
    page_served_only_itself(&page);

    let png_sig = b"\x89PNG\r\n\x1a\n";
    let shot_bytes = std::fs::read(&shot).unwrap_or_default();
    assert!(
        shot_bytes.starts_with(png_sig),
        "no screenshot at {}",
        shot.display()
    );
}

fn count_patches(responses: &[Value]) -> usize {
    responses.iter().filter(|r| r["method"] == "PATCH").count()
}

/// The same page against a bulkwire whose `cors_origins` lists only near misses of the page's
/// origin: every upload fails in the browser, blocked by the CORS policy; the page's script
/// cannot read a media link either; nothing is stored.
#[cfg_attr(
    any(missing_chromium, missing_node),
    ignore = "needs chromium and node (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uppy_from_an_origin_not_listed_is_refused_and_nothing_is_stored() {
    chromium();
    let page = PageServer::start(node_modules());
    let port = page.port();
    let near = vec![
        format!("http://localhost:{port}"),
        format!("https://127.0.0.1:{port}"),
    ];
    assert!(!near.contains(&page.origin));
    let h = start_configured(|c| c.cors_origins = near).await;
    let api = format!("http://{}", h.srv.addr);

    // One item stored beforehand (through the API, not the browser), for its link.
    let before = payload(1000, 75);
    let r = h
        .put("before.bin", "application/octet-stream", before)
        .await;
    assert_eq!(r.status(), 201);
    let stored: Value = r.json().await.unwrap();
    let before_id = stored["media"][0]["id"].as_str().unwrap().to_string();
    let link = stored["media"][0]["url"].as_str().unwrap().to_string();

    let files = Files::new();
    let dir = tempfile::tempdir().unwrap();
    let shot = tmp().join("artifacts/uppy-cors-refused.png");
    let j = drive(&page, &api, &files, dir.path(), Some(&link), &shot).await;

    // Uppy's view: every file failed, with an error.
    assert_eq!(
        j["complete"]["xhr"]["successful"],
        serde_json::json!([]),
        "{j}"
    );
    assert_eq!(
        names(&j["complete"]["xhr"]["failed"]),
        sorted_names(&files.xhr),
        "{j}"
    );
    assert_eq!(
        j["complete"]["tus"]["successful"],
        serde_json::json!([]),
        "{j}"
    );
    assert_eq!(
        names(&j["complete"]["tus"]["failed"]),
        sorted_names(&files.tus),
        "{j}"
    );
    for (kind, ups) in [("xhr", &files.xhr), ("tus", &files.tus)] {
        for u in ups {
            let f = &j["files"][kind][u.name];
            assert!(f["error"].is_string(), "{kind} {}: no error: {f}", u.name);
            assert!(f["uploadURL"].is_null(), "{kind} {}: {f}", u.name);
        }
    }
    // No answer reached either plugin's script, and none Chromium saw allowed the page.
    assert_eq!(j["xhr"], serde_json::json!([]), "{j}");
    assert_eq!(j["requests"], serde_json::json!([]), "{j}");
    for r in j["responses"].as_array().unwrap() {
        assert!(r["allowOrigin"].is_null(), "{r}: {j}");
    }
    // Why: Chromium's CORS check, for both endpoints and for the link.
    let console: Vec<&str> = j["console"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for url in [
        format!("{api}/v1/media"),
        format!("{api}/v1/uploads"),
        link.clone(),
    ] {
        let blocked = format!(
            "Access to {} at '{url}' from origin '{}' has been blocked by CORS policy",
            if url == link {
                "fetch"
            } else {
                "XMLHttpRequest"
            },
            page.origin
        );
        assert!(
            console.iter().any(|c| c.starts_with(&blocked)),
            "no console message {blocked:?}: {console:?}"
        );
    }
    let failed = j["failed"].as_array().unwrap();
    assert!(
        failed.iter().any(|f| f["path"] == "/v1/media")
            && failed.iter().any(|f| f["path"] == "/v1/uploads"),
        "{j}"
    );

    // The link's bytes were not handed to the page's script.
    let l = &j["link"];
    assert_eq!(l["url"], link.as_str(), "{j}");
    assert!(l["error"].is_string(), "the page read {link}: {l}");
    assert!(l["sha256"].is_null(), "{l}");

    // Nothing stored: only the item from before, no other blob, no temporary object.
    let listed = h.list_all().await;
    let ids: Vec<&str> = listed.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [before_id.as_str()], "{listed:?}");
    let probe = h.probe();
    assert_eq!(probe.blob_count(), 1);
    assert_eq!(probe.temp_count(), 0);
    page_served_only_itself(&page);
}
