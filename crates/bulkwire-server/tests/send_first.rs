//! Clients that send the whole request before reading the answer, driven by
//! tests/py/send_first.py (Python 3 stdlib only; `python3` must be on PATH,
//! and these tests fail, saying so, when it is not).
//!
//! What it proves (the lingering close): Python's `http.client` sending
//! 2/8/32 MiB before reading gets the 401, 413 and 503 every time (20 tries
//! each, a new connection each), never a `BrokenPipeError` or
//! `ConnectionResetError`; `xmlrpc.client` over a limit (`body_bytes`,
//! `field_bytes`) or with a bad password gets the fault. After each run the
//! server has lingered (`bulkwire_lingered_bytes_total` > 0) and nothing
//! is stored.

mod common;

use bulkwire_server::Limits;
use common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const USER: &str = "alice";
const PASS: &str = "wonder:land";
const TRIES: usize = 20;
const SIZES: [&str; 3] = ["2", "8", "32"];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/send_first.py")
}

/// Runs the script with `args` off the runtime (the server runs on it) and
/// returns its JSON. Fails the test when `python3` cannot be run.
async fn run_script(args: Vec<String>) -> Value {
    let mut cmd = Command::new("python3");
    cmd.arg(script()).args(&args).env("NO_PROXY", "127.0.0.1");
    let t = Instant::now();
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot run python3 (Python 3 is required by this test): {e}"));
    eprintln!(
        "send_first.py {args:?}: {:.1?}\n  {}",
        t.elapsed(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    assert!(
        out.status.success(),
        "send_first.py {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "send_first.py printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// `put` mode against `h`: every size, `TRIES` new connections each.
async fn put_all(h: &Harness, token: bool) -> Value {
    let mut args = vec!["put".to_string(), h.url("")];
    if token {
        args.extend(["--token".into(), TOKEN.into()]);
    } else {
        args.push("--no-token".into());
    }
    args.extend([
        "--name".into(),
        "sent-first.bin".into(),
        "--sizes".into(),
        SIZES.join(","),
        "--tries".into(),
        TRIES.to_string(),
    ]);
    run_script(args).await
}

/// Every try of every size got `status`, and each answer named `limit`.
fn assert_every_time(j: &Value, status: &str, limit: Option<&str>) {
    let want: serde_json::Map<String, Value> = SIZES
        .iter()
        .map(|s| (s.to_string(), json!({ status: TRIES })))
        .collect();
    assert_eq!(j["results"], Value::Object(want), "{j}");
    let names = j["limit_names"].as_array().unwrap();
    assert_eq!(names.len(), SIZES.len() * TRIES, "{j}");
    assert!(
        names.iter().all(|n| n.as_str() == limit),
        "every answer must name {limit:?}: {j}"
    );
}

/// `xmlrpc` mode: `wp.uploadFile` of `mib` MiB, `tries` times.
async fn xmlrpc_all(h: &Harness, pass: &str, mib: u64, name_bytes: usize, tries: usize) -> Value {
    let args = vec![
        "xmlrpc".to_string(),
        h.url("/xmlrpc"),
        "--user".into(),
        USER.into(),
        "--password".into(),
        pass.into(),
        "--size-mib".into(),
        mib.to_string(),
        "--name-bytes".into(),
        name_bytes.to_string(),
        "--tries".into(),
        tries.to_string(),
    ];
    let j = run_script(args).await;
    assert_eq!(j["outcomes"].as_array().unwrap().len(), tries, "{j}");
    j
}

/// Every outcome is a fault starting with `prefix` and containing `text`.
fn assert_faults(j: &Value, prefix: &str, text: &str) {
    for o in j["outcomes"].as_array().unwrap() {
        let o = o.as_str().unwrap();
        assert!(
            o.starts_with(prefix) && o.contains(text),
            "want {prefix}…{text}…, got {o:?}: {j}"
        );
    }
}

fn metric_value(h: &Harness, name: &str) -> f64 {
    let line = h.metric(name);
    line.strip_prefix(name)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {name}: {line:?}"))
}

/// The server read and discarded what the clients sent after its early
/// answers, and every lingering close has ended.
async fn assert_lingered(h: &Harness) {
    wait_until("bytes lingered", || {
        metric_value(h, "bulkwire_lingered_bytes_total") > 0.0
    })
    .await;
    wait_until("lingering closes over", || {
        metric_value(h, "bulkwire_lingering_connections") == 0.0
    })
    .await;
    eprintln!("  {}", h.metric("bulkwire_lingered_bytes_total"));
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_without_credentials_gets_401_every_time() {
    let h = start(Limits::default()).await;
    let j = put_all(&h, false).await;
    assert_every_time(&j, "401", None);
    assert_lingered(&h).await;
    h.assert_empty().await;
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_over_file_bytes_gets_413_every_time() {
    let h = start(Limits {
        file_bytes: 1 << 20,
        ..Limits::default()
    })
    .await;
    let j = put_all(&h, true).await;
    assert_every_time(&j, "413", Some("file_bytes"));
    assert_lingered(&h).await;
    h.assert_empty().await;
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_when_busy_gets_503_every_time() {
    let h = start(Limits {
        max_uploads: 1,
        // The held upload below must keep its slot for the whole run: no
        // 408 for it from the body-rate or idle timers meanwhile.
        min_body_rate: 0,
        idle_timeout_ms: 600_000,
        ..Limits::default()
    })
    .await;
    let head = format!(
        "PUT /v1/media/held HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n"
    );
    let held = raw_start(h.srv.addr, &head, &[7u8; 10]).await;
    wait_until("the only upload slot held", || {
        h.metric("bulkwire_active_uploads") == "bulkwire_active_uploads 1"
    })
    .await;
    let j = put_all(&h, true).await;
    assert_every_time(&j, "503", Some("max_uploads"));
    assert_eq!(
        h.metric("bulkwire_active_uploads"),
        "bulkwire_active_uploads 1",
        "the held upload kept its slot throughout"
    );
    assert_lingered(&h).await;
    assert_eq!(h.list_all().await, Vec::<Value>::new());
    drop(held);
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xmlrpc_client_over_body_bytes_gets_the_fault() {
    let h = start(Limits {
        body_bytes: 1 << 20,
        ..Limits::default()
    })
    .await;
    let j = xmlrpc_all(&h, PASS, 8, 0, 5).await;
    assert_faults(&j, "fault:", "body_bytes");
    assert_lingered(&h).await;
    h.assert_empty().await;
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xmlrpc_client_over_field_bytes_gets_the_fault() {
    let h = start(Limits::default()).await;
    assert_eq!(Limits::default().field_bytes, 64 << 10);
    let j = xmlrpc_all(&h, PASS, 8, 100_000, 5).await;
    assert_faults(&j, "fault:", "field_bytes");
    assert_lingered(&h).await;
    h.assert_empty().await;
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xmlrpc_client_with_a_bad_password_gets_403_fault() {
    let h = start(Limits::default()).await;
    let j = xmlrpc_all(&h, "not-the-password", 32, 0, 5).await;
    assert_faults(&j, "fault:403:", "");
    assert_lingered(&h).await;
    h.assert_empty().await;
}
