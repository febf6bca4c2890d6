//! Running real third-party clients from tests (tus_clients.rs,
//! tus_browser.rs): where they are installed, what a missing runtime does,
//! and a bounded run of one client process whose last stdout line is its
//! JSON report.
//!
//! A missing runtime FAILS the test that needs it: Cargo has no "ignored
//! at run time", and a test that returns early would be counted as passed.
//! Such tests also carry `#[cfg_attr(missing_node, ignore = …)]`: when the
//! runtime was missing at build time (and `CI` unset) they show as ignored
//! instead (build.rs, crate bulkwire-runtimes).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

pub fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p)
}

// Not every test binary that includes this module calls it.
#[allow(unused_imports)]
pub use bulkwire_runtimes::missing;

/// True when `cmd args…` runs and succeeds.
pub fn runs(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// SIGTERM (a browser driver closes its browser on it), then SIGKILL
/// after 10 s.
fn stop(child: &mut Child) {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{kill_process, Pid, Signal};
        let _ = kill_process(Pid::from_child(child), Signal::TERM);
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if child.try_wait().is_ok_and(|s| s.is_some()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs a client off the server's runtime, stopping it after `deadline`
/// so that a client stuck on a broken server fails the test instead of
/// hanging it. Returns its output and run time.
pub async fn run_client(mut cmd: Command, deadline: Duration) -> (Output, Duration) {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("NO_PROXY", "127.0.0.1");
    tokio::task::spawn_blocking(move || {
        let began = Instant::now();
        let mut child = cmd.spawn().unwrap();
        // Drain both pipes while waiting: a full pipe would stall the client.
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let read = |r: &mut dyn std::io::Read| {
            let mut v = Vec::new();
            r.read_to_end(&mut v).map(|_| v)
        };
        let out = std::thread::spawn(move || read(&mut out).unwrap());
        let err = std::thread::spawn(move || read(&mut err).unwrap());
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if began.elapsed() > deadline {
                stop(&mut child);
                let out = String::from_utf8_lossy(&out.join().unwrap()).into_owned();
                let err = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
                panic!(
                    "the client ran longer than {deadline:?}: {cmd:?}\n\
                     stdout: {out}\nstderr: {err}"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let output = Output {
            status,
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        };
        (output, began.elapsed())
    })
    .await
    .unwrap()
}

/// The client's report: its last JSON line, with `"ok": true`; fails with
/// both outputs when the client failed or printed none.
pub fn report(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    let j: Option<Value> = line.and_then(|l| serde_json::from_str(l).ok());
    match j {
        Some(j) if out.status.success() && j["ok"] == true => j,
        _ => panic!(
            "the client failed (status {:?})\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// The upload id at the end of an upload URL, which must be under
/// `origin` (the address the client was given: the Location follows the
/// Host header).
pub fn upload_id(url: &str, origin: &str) -> String {
    let prefix = format!("{origin}/v1/uploads/");
    let id = url.strip_prefix(&prefix).unwrap_or_else(|| {
        panic!("upload URL {url} is not under {prefix} (the Location must follow the Host header)")
    });
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    assert!(id.len() == 32 && id.chars().all(hex), "upload id {id:?}");
    id.to_string()
}
