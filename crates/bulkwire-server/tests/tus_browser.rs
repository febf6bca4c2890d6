//! The resumable-upload endpoint (`/v1/uploads`, tus 1.0) driven by Uppy in
//! a real browser: Debian's headless Chromium (`/usr/bin/chromium`, package
//! `chromium`) run by npm `playwright-core`, with npm `uppy` (its Dashboard
//! and Tus plugin, i.e. tus-js-client on XMLHttpRequest) loaded from
//! `uppy/dist/uppy.min.mjs`. Both npm packages are installed into
//! target/tmp/node with `npm install --prefix`; nothing comes from a CDN and
//! no browser is downloaded.
//!
//! testsuite/node/uppy_chromium.js starts testsuite/node/uppy_server.js,
//! which serves the test-only page (testsuite/node/uppy_page.html), the
//! Uppy bundle and, by proxy, this server's /v1 on one origin (a page behind
//! the same proxy as its API; tests/uppy_cors.rs covers a page on another
//! origin, through CORS). The driver
//! gives two files to the Dashboard's file input (12 MiB of random bytes in
//! 5 MiB chunks and a small PNG image), clicks Upload and reads what the
//! page recorded. The big file is paused with `uppy.pauseResume()` right
//! after its first chunk and resumed 500 ms later: nothing may move while
//! it is paused, and it must go on into the same upload (HEAD, then PATCH
//! from the server's offset).
//!
//! Every upload is then checked as media under the same id: listed with
//! its size, SHA-256 and Uppy's `name`/`type` (sent as `filename` and
//! `filetype` in Upload-Metadata), and downloaded back byte for byte. A
//! screenshot of the page is left at target/tmp/artifacts/uppy.png.
//!
//! A missing runtime (node, npm, Debian's chromium, or an npm registry
//! that cannot be reached) FAILS the test, with what to install: with `CI`
//! set the message says the CI machine lacks it (.ci/run installs
//! chromium), without it says how to install it locally. A test that
//! returned early would be reported as passed without a browser having
//! uploaded anything. When node or chromium was already missing at build
//! time (and `CI` unset), the test is marked ignored instead.

mod common;

use bulkwire_server::Limits;
use common::clients::*;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

const MIB: usize = 1 << 20;
const CHUNK: usize = 5 * MIB;
/// The driver's own bound for the whole browser run (it then closes the
/// browser and fails).
const DRIVER_MS: u64 = 180_000;
/// Past this the driver is stopped (SIGTERM, which playwright turns into
/// closing the browser, then SIGKILL) and the test fails.
const CLIENT_DEADLINE: Duration = Duration::from_secs(240);

// ---------------------------------------------------------------------------
// Runtimes

/// The npm packages this suite needs (common `npm_modules`), once per
/// test process.
fn node_modules() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| npm_modules(&[PLAYWRIGHT, UPPY]))
}

/// The driver's run, bounded by [`CLIENT_DEADLINE`] (then SIGTERM, which
/// playwright turns into closing the browser, then SIGKILL).
async fn run(cmd: Command) -> (Output, Duration) {
    run_client(cmd, CLIENT_DEADLINE).await
}

// ---------------------------------------------------------------------------
// Test data

struct Upload {
    name: &'static str,
    data: Vec<u8>,
    /// The type Chromium gives the file (from its extension) and Uppy
    /// sends as `type`/`filetype`.
    content_type: &'static str,
}

// ---------------------------------------------------------------------------
// Checks

/// The finished upload is media under the same id: listed with its size,
/// SHA-256, name and type, and downloaded back byte for byte.
async fn check_media(h: &Harness, listed: &[Value], id: &str, up: &Upload) {
    let Some(m) = listed.iter().find(|m| m["id"] == id) else {
        panic!("{id} ({}) is not listed: {listed:?}", up.name);
    };
    assert_eq!(m["size"], up.data.len() as u64, "{m}");
    assert_eq!(m["sha256"], sha256(&up.data), "{m}");
    assert_eq!(m["filename"], up.name, "{m}");
    assert_eq!(m["content_type"], up.content_type, "{m}");
    let got = h.download(&format!("/v1/media/{id}")).await;
    // Not assert_eq!: a failure would print 12 MiB.
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

/// The tus answers the page saw for one upload URL, as (method, status,
/// Upload-Offset).
fn answers_for(j: &Value, url: &str) -> Vec<(String, u64, Option<u64>)> {
    j["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["url"] == url)
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_string(),
                r["status"].as_u64().unwrap(),
                r["offset"].as_str().map(|o| o.parse().unwrap()),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The test

/// Uppy's Dashboard + Tus in headless Chromium uploads a 12 MiB file (in
/// 5 MiB chunks, paused after the first and resumed) and a PNG image
/// through a same-origin page; both become media intact, under their
/// upload ids, with Uppy's name and type.
#[cfg_attr(
    any(missing_chromium, missing_node),
    ignore = "needs chromium and node (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uppy_tus_in_headless_chromium_with_pause_and_resume() {
    let browser = chromium();
    let modules = node_modules();
    let h = start(Limits::default()).await;

    let dir = tempfile::tempdir().unwrap();
    let big = Upload {
        name: "uppy-big.bin",
        data: payload(12 * MIB + 12_345, 61),
        content_type: "application/octet-stream",
    };
    let image = Upload {
        name: "uppy-image.png",
        data: png(48, 32, 62),
        content_type: "image/png",
    };
    let ups = [&big, &image];
    let paths: Vec<PathBuf> = ups.iter().map(|u| dir.path().join(u.name)).collect();
    for (u, p) in ups.iter().zip(&paths) {
        std::fs::write(p, &u.data).unwrap();
    }
    let shot = tmp().join("artifacts/uppy.png");
    let _ = std::fs::remove_file(&shot);

    let mut cmd = Command::new("node");
    cmd.env("NODE_PATH", modules)
        .arg(repo("testsuite/node/uppy_chromium.js"))
        .arg(
            serde_json::json!({
                "upstream": h.srv.addr.to_string(),
                "token": TOKEN,
                "files": paths,
                "chunkSize": CHUNK,
                "retryDelays": [0, 200, 500, 1000],
                "pauseFile": big.name,
                "pauseMs": 500,
                "screenshot": shot,
                "chromium": browser,
                "timeoutMs": DRIVER_MS,
            })
            .to_string(),
        );
    let (out, took) = run(cmd).await;
    let j = report(&out);
    println!(
        "Uppy {} in Chromium {}: {took:.1?} for the browser run",
        j["uppy"].as_str().unwrap_or("?"),
        j["browser"].as_str().unwrap_or("?")
    );
    assert_eq!(j["uppy"], UPPY.rsplit_once('@').unwrap().1, "{j}");

    // Uppy's view: both files done, nothing failed, no page error.
    let mut done: Vec<&str> = j["complete"]["successful"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    done.sort_unstable();
    assert_eq!(done, [big.name, image.name], "{j}");
    assert_eq!(j["complete"]["failed"], serde_json::json!([]), "{j}");
    assert_eq!(j["errors"], serde_json::json!([]), "{j}");
    assert_eq!(j["console"], serde_json::json!([]), "browser console: {j}");

    let origin = j["origin"].as_str().unwrap();
    let mut ids = Vec::new();
    for u in ups {
        let f = &j["files"][u.name];
        assert!(f["error"].is_null(), "{}: {f}", u.name);
        assert_eq!(f["size"], u.data.len() as u64, "{f}");
        // What Uppy sent as Upload-Metadata `name`/`type`, which its Tus
        // plugin copies to `filename`/`filetype`.
        assert_eq!(f["meta"]["name"], u.name, "{f}");
        assert_eq!(f["meta"]["type"], u.content_type, "{f}");
        let url = f["uploadURL"].as_str().unwrap();
        ids.push(upload_id(url, origin));
        // This file's tus exchange: its PATCHes, in order, each accepted
        // and moving the offset by one chunk to the end.
        let offsets: Vec<u64> = answers_for(&j, url)
            .into_iter()
            .filter(|(m, _, _)| m == "PATCH")
            .map(|(_, status, offset)| {
                assert_eq!(status, 204, "{}: a PATCH answered {status}: {j}", u.name);
                offset.unwrap()
            })
            .collect();
        let len = u.data.len() as u64;
        let want: Vec<u64> = (1..)
            .map(|i| (i * CHUNK as u64).min(len))
            .take(u.data.len().div_ceil(CHUNK))
            .collect();
        assert_eq!(offsets, want, "{}: {j}", u.name);
    }
    assert_ne!(ids[0], ids[1]);

    // The pause: right after the first chunk, in Uppy's state, with no
    // request and no progress for that upload while it lasted.
    let p = &j["pause"];
    assert_eq!(p["file"], big.name, "{p}");
    assert_eq!(p["offset"], CHUNK as u64, "{p}");
    assert_eq!(p["paused"], true, "{p}");
    assert_eq!(p["stillPaused"], true, "{p}");
    assert_eq!(p["requestsWhilePaused"], 0, "{p}");
    assert_eq!(p["progressWhilePaused"], CHUNK as u64, "{p}");
    assert_eq!(p["resumed"], true, "{p}");
    let big_url = j["files"][big.name]["uploadURL"].as_str().unwrap();
    assert_eq!(p["url"], big_url, "{p}");
    // The resume asked the server where the upload stood and went on from
    // there: HEAD at the first chunk's end, then PATCH, same upload.
    let after: Vec<_> = j["requests"].as_array().unwrap()
        [p["resumeIndex"].as_u64().unwrap() as usize..]
        .iter()
        .filter(|r| r["url"] == big_url)
        .map(|r| {
            (
                r["method"].clone(),
                r["status"].clone(),
                r["offset"].clone(),
            )
        })
        .collect();
    assert_eq!(
        after.first(),
        Some(&("HEAD".into(), 200.into(), CHUNK.to_string().into())),
        "the resume did not start with HEAD at {CHUNK}: {j}"
    );

    // One creation per file (the resume made no new upload), no retry:
    // every answer 2xx, and all of it through the page's origin.
    let proxied: Vec<&str> = j["proxied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let posts = proxied.iter().filter(|l| l.starts_with("POST ")).count();
    assert_eq!(posts, 2, "{proxied:?}");
    assert!(
        proxied
            .iter()
            .all(|l| l.ends_with(" 200") || l.ends_with(" 201") || l.ends_with(" 204")),
        "{proxied:?}"
    );
    assert_eq!(
        proxied.len(),
        j["requests"].as_array().unwrap().len(),
        "the page's tus requests and the proxied ones differ: {j}"
    );

    // The server's view: media under the upload ids, intact.
    let listed = h.list_all().await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    for (u, id) in ups.iter().zip(&ids) {
        check_media(&h, &listed, id, u).await;
    }

    let png_sig = b"\x89PNG\r\n\x1a\n";
    let shot_bytes = std::fs::read(&shot).unwrap_or_default();
    assert!(
        shot_bytes.starts_with(png_sig),
        "no screenshot at {}",
        shot.display()
    );
}
