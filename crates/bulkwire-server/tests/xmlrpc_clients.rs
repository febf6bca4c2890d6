//! `POST /xmlrpc` driven by real third-party clients, run by
//! testsuite/py/xmlrpc_clients.py: Python's stdlib `xmlrpc.client`
//! (always present) and python-wordpress-xmlrpc (installed from PyPI into
//! the venv under target/ that the phase-1 tests use, from
//! testsuite/py/requirements.txt; its test skips, saying so, only when pip
//! cannot install it). Every upload is downloaded back from the URL the
//! client was given and compared by SHA-256: by this test with the user's
//! Basic auth, and by the script itself (urllib.request) with no
//! credentials at all, since that URL is the item's capability link. Two
//! authors with python-wordpress-xmlrpc see only their own items, as in
//! WordPress.

mod common;

use bulkwire_server::Limits;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const USER: &str = "alice";
const PASS: &str = "wonder:land";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testsuite/py/xmlrpc_clients.py")
}

fn venv_python(module: &str) -> PathBuf {
    bulkwire_testsuite::python_venv(Path::new(env!("CARGO_TARGET_TMPDIR")), module)
}

/// Runs the script in `mode` against a fresh server; returns the server
/// (to download from) and the script's JSON.
async fn run(py: &Path, mode: &str, data: &[u8]) -> (Harness, Value) {
    let h = start(Limits::default()).await;
    let file = h.data().join("in.bin");
    std::fs::write(&file, data).unwrap();
    let mut cmd = Command::new(py);
    cmd.arg(script())
        .arg(mode)
        .arg(h.url("/xmlrpc"))
        .args([USER, PASS])
        .arg(&file)
        .env("NO_PROXY", "127.0.0.1");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    std::fs::remove_file(&file).unwrap();
    (h, j)
}

/// Downloads a returned absolute URL with the same user's Basic auth.
async fn fetch(h: &Harness, url: &str) -> Vec<u8> {
    assert!(url.starts_with(&h.url("/v1/media/")), "{url}");
    let r = h.http.get(url).basic_auth(USER, Some(PASS));
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap().to_vec()
}

/// What the script itself got when it fetched upload `key`'s `url` with
/// urllib.request and no credentials: 200 and the uploaded bytes, by a link
/// on this server that carries its signature.
fn assert_fetched(h: &Harness, j: &Value, key: &str, want: &str) {
    let url = j[key]["url"].as_str().unwrap();
    let f = &j["fetched"][key];
    assert_eq!(f["url"], url, "{key}");
    assert!(url.starts_with(&h.url("/v1/media/")), "{key}: {url}");
    assert!(
        url.contains("?sig=") || url.contains("&sig="),
        "{key}: {url}"
    );
    assert_eq!(f["fetched_status"], 200, "{key}: {f}");
    assert_eq!(f["fetched_sha256"], want, "{key}");
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_stdlib_xmlrpc_client() {
    let data = payload(3 * 1024 * 1024 + 7, 21);
    let want = sha256(&data);
    let (h, j) = run(Path::new("python3"), "stdlib", &data).await;
    for key in ["upload", "mw"] {
        let m = &j[key];
        assert_eq!(m["id"], m["attachment_id"], "{key}");
        assert_eq!(m["metadata"]["sha256"], want.as_str(), "{key}");
        let got = fetch(&h, m["url"].as_str().unwrap()).await;
        assert_eq!(sha256(&got), want, "{key}");
        assert_fetched(&h, &j, key, &want);
    }
    assert_eq!(j["upload"]["file"], "stdlib.bin");
    assert_eq!(j["upload"]["type"], "application/octet-stream");
    assert_eq!(j["mw"]["type"], "image/jpeg");
    let methods: Vec<&str> = j["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(methods.contains(&"wp.uploadFile") && methods.contains(&"system.multicall"));
    assert_eq!(
        j["bad_login"],
        serde_json::json!([403, "Incorrect username or password."])
    );
    assert_eq!(j["unknown"][0], -32601);
    assert!(j["multicall"][0]
        .as_str()
        .unwrap()
        .contains("attachment_id"));
    assert_eq!(j["multicall"][1]["attachment_id"], j["upload"]["id"]);
    // The rejected call left nothing: the two uploads only.
    assert_eq!(h.list_all().await.len(), 2);
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_wordpress_xmlrpc_client() {
    let py = venv_python("wordpress_xmlrpc");
    let data = payload(2 * 1024 * 1024 + 1, 22);
    let want = sha256(&data);
    let (h, j) = run(&py, "wordpress", &data).await;
    let up = &j["upload"];
    assert_eq!(up["file"], "wordpress.jpg");
    assert_eq!(up["type"], "image/jpeg");
    let got = fetch(&h, up["url"].as_str().unwrap()).await;
    assert_eq!(sha256(&got), want);
    assert_fetched(&h, &j, "upload", &want);
    let item = &j["item"];
    assert_eq!(item["id"], up["id"]);
    assert_eq!(item["link"], up["url"]);
    assert_eq!(item["title"], "wordpress.jpg");
    assert_eq!(item["parent"], 0);
    assert_eq!(item["metadata"]["sha256"], want.as_str());
    assert!(item["date_created"].as_str().unwrap().starts_with("20"));
    assert_eq!(j["library"], serde_json::json!([up["id"]]));
    assert_eq!(j["bad_login"], "Incorrect username or password.");
    assert_eq!(h.list_all().await.len(), 1);
}

/// Two authors with python-wordpress-xmlrpc, as in WordPress: each one's media library holds
/// their own uploads only; the other's item is fault 404 to `wp.getMediaItem` and to
/// `wp.deletePost` (and stays); each deletes their own.
#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_wordpress_xmlrpc_authors_see_only_their_own() {
    let py = venv_python("wordpress_xmlrpc");
    let h = start(Limits::default()).await;
    let users = [("ann", "ann-pass:word"), ("bob", "bob-pass:word")];
    for (u, pw) in users {
        add_user(&h, u, pw, bulkwire_server::principal::Role::Author).await;
    }
    let file = h.data().join("in.bin");
    std::fs::write(&file, payload(100_000, 23)).unwrap();
    let mut cmd = Command::new(&py);
    cmd.arg(script())
        .arg("authors")
        .arg(h.url("/xmlrpc"))
        .args([users[0].0, users[0].1])
        .arg(&file)
        .args([users[1].0, users[1].1])
        .env("NO_PROXY", "127.0.0.1");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let owners: std::collections::HashMap<String, String> = h
        .list_all()
        .await
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap().to_string();
            (s("id"), s("owner"))
        })
        .collect();
    for (u, _) in users {
        let a = &j[u];
        let ups: Vec<String> = a["uploads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(ups.len(), 2, "{j}");
        let mut both = ups.clone();
        both.sort();
        assert_eq!(a["library"], serde_json::json!(both), "{u}: {j}");
        assert_eq!(
            a["other_item"],
            serde_json::json!([404, "Invalid attachment ID."]),
            "{u}: {j}"
        );
        assert_eq!(
            a["delete_other"],
            serde_json::json!([404, "Invalid post ID."]),
            "{u}: {j}"
        );
        assert_eq!(a["delete_own"], true, "{u}: {j}");
        assert_eq!(a["library_after"], serde_json::json!([ups[0]]), "{u}: {j}");
        // The server's view: the kept one is theirs (the other's delete removed nothing),
        // the deleted one is gone.
        assert_eq!(
            owners.get(&ups[0]).map(String::as_str),
            Some(u),
            "{owners:?}"
        );
        assert!(!owners.contains_key(&ups[1]), "{owners:?}");
    }
    assert_eq!(owners.len(), 2, "{owners:?}");
}
