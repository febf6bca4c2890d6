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

/// The report of a client run that was to fail (a refused upload): its
/// last JSON line, with `"ok": false`, and a failed exit; fails with both
/// outputs otherwise.
pub fn failure_report(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    let j: Option<Value> = line.and_then(|l| serde_json::from_str(l).ok());
    match j {
        Some(j) if !out.status.success() && j["ok"] == false => j,
        _ => panic!(
            "the client did not fail as expected (status {:?})\nstdout: {stdout}\nstderr: {}",
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

// ---------------------------------------------------------------------------
// Browsers and npm packages (tus_browser.rs, web_browser.rs, uppy_cors.rs)

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const PLAYWRIGHT: &str = "playwright-core@1.65.1";
pub const UPPY: &str = "uppy@6.0.1";

/// Debian's Chromium, which playwright-core drives (it downloads none).
pub fn chromium() -> &'static str {
    bulkwire_runtimes::need(bulkwire_runtimes::Runtime::Chromium);
    if !runs(Command::new(CHROMIUM).arg("--version")) {
        missing(
            &format!("Chromium at {CHROMIUM}"),
            "Debian's chromium package: apt-get install chromium",
        );
    }
    CHROMIUM
}

/// The npm packages `specs` (`name@version`) under target/tmp/node, pinned
/// exactly (also in the prefix's package.json, so that another suite's
/// install into the same prefix keeps them): the node_modules dir for
/// NODE_PATH. Callers keep it in a `OnceLock` (tests run in parallel and
/// would race on the prefix).
pub fn npm_modules(specs: &[&str]) -> PathBuf {
    bulkwire_runtimes::need(bulkwire_runtimes::Runtime::Node);
    let prefix = tmp().join("node");
    let modules = prefix.join("node_modules");
    let version = |pkg: &str| -> Option<String> {
        let text = std::fs::read_to_string(modules.join(pkg).join("package.json")).ok()?;
        let j: Value = serde_json::from_str(&text).ok()?;
        j["version"].as_str().map(str::to_string)
    };
    let installed = || {
        specs.iter().all(|spec| {
            let (pkg, v) = spec.rsplit_once('@').unwrap();
            version(pkg).as_deref() == Some(v)
        })
    };
    if !installed() {
        let ok = runs(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--silent"])
                .args(["--save-exact", "--prefix"])
                .arg(&prefix)
                .args(specs),
        );
        if !ok || !installed() {
            missing(
                &format!("{} from the npm registry", specs.join(" and ")),
                "a reachable npm registry",
            );
        }
    }
    modules
}

/// A `w`×`h` RGB PNG of deterministic noise: zlib with stored (not compressed) deflate
/// blocks, so no encoder is needed; the browser decodes it.
pub fn png(w: u32, h: u32, seed: u64) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in bytes {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend(kind);
        out.extend(data);
        let crc = crc32(&out[start..]);
        out.extend(crc.to_be_bytes());
    }
    let row = 3 * w as usize;
    let pixels = super::payload(row * h as usize, seed);
    let mut raw = Vec::new();
    for line in pixels.chunks(row) {
        raw.push(0); // filter: none
        raw.extend(line);
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(0xffff).collect();
    for (i, b) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        z.extend((b.len() as u16).to_le_bytes());
        z.extend((!(b.len() as u16)).to_le_bytes());
        z.extend(*b);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &raw {
        a = (a + x as u32) % 65521;
        b = (b + a) % 65521;
    }
    z.extend(((b << 16) | a).to_be_bytes());
    let mut ihdr = Vec::new();
    ihdr.extend(w.to_be_bytes());
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]); // 8-bit RGB, deflate, no filter, no interlace
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}
