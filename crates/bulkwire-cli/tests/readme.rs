//! Every `sh` block of the README runs, as written, against a fresh `bulkwire serve` started the
//! way the README says: zero configuration, in a fresh directory (so its data is
//! `./bulkwire-data`), its printed token in `TOKEN`. The blocks run in README order in that
//! directory, which also holds `photo.jpg`, `blob.bin` and a copy of the README, with this
//! build's `bulkwire` first on `PATH`; each must exit 0 (`bash -euo pipefail`; the README's
//! `curl`s use `-f`, and its `bulkwire load`s carry error thresholds, so a failed request fails
//! its block).
//!
//! The one liberty taken: the server listens on a free port instead of 8080 (tests run in
//! parallel), and `127.0.0.1:8080` in the blocks is replaced by its address.
//!
//! A block the test cannot run says why in an HTML comment on the line above it
//! (`<!-- not run by tests/readme.rs: … -->`); the reasons are printed. `text` blocks are
//! synopses, not commands.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NOT_RUN: &str = "<!-- not run by tests/readme.rs:";
/// Longest a block may run (the load examples take a few seconds each).
const BLOCK_DEADLINE: Duration = Duration::from_secs(180);

/// A fenced `sh` block: its first line number and text, or why it is not run.
struct Block {
    line: usize,
    text: String,
    not_run: Option<String>,
}

fn blocks(readme: &str) -> Vec<Block> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() != "```sh" {
            i += 1;
            continue;
        }
        let prev = lines[..i].iter().rev().find(|l| !l.trim().is_empty());
        let not_run = prev
            .and_then(|l| l.trim().strip_prefix(NOT_RUN))
            .map(|r| r.trim_end_matches("-->").trim().to_string());
        let end = i
            + 1
            + lines[i + 1..]
                .iter()
                .position(|l| l.trim_end() == "```")
                .expect("an unclosed ```sh block");
        out.push(Block {
            line: i + 1,
            text: lines[i + 1..end].join("\n"),
            not_run,
        });
        i = end + 1;
    }
    out
}

struct Server {
    child: Child,
    addr: String,
    token: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bulkwire serve` in `dir` with no configuration but a free port; its printed token.
fn serve(dir: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bulkwire"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(dir)
        .env_remove("BULKWIRE_TOKEN")
        .env_remove("BULKWIRE_USER")
        .env_remove("BULKWIRE_CONFIG")
        .env_remove("BULKWIRE_DATA")
        .env_remove("BULKWIRE_META")
        .env_remove("BULKWIRE_BLOBS")
        .env("BULKWIRE_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (mut token, mut banner) = (None, Vec::new());
    let addr = loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "server exited: {banner:?}"
        );
        if banner
            .last()
            .is_some_and(|l: &String| l.contains("created an API token"))
        {
            token = Some(line.trim().to_string());
        }
        if let Some(r) = line.strip_prefix("bulkwire: listening on http://") {
            break r.split(' ').next().unwrap().to_string();
        }
        banner.push(line);
    };
    let token = token.unwrap_or_else(|| panic!("no token printed on a first start: {banner:?}"));
    Server { child, addr, token }
}

/// Pseudo-random bytes (incompressible, so no layer shrinks them).
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The files the examples name.
fn workdir() -> PathBuf {
    let d = bulkwire_testenv::must(bulkwire_testenv::test_dir("readme"));
    let mut photo = vec![0xff, 0xd8, 0xff, 0xe0];
    photo.extend(bytes(48 * 1024, 7));
    std::fs::write(d.join("photo.jpg"), photo).unwrap();
    std::fs::write(d.join("blob.bin"), bytes(256 * 1024, 11)).unwrap();
    std::fs::copy(readme_path(), d.join("README.md")).unwrap();
    d
}

fn readme_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")
}

/// Runs one block with bash; panics with its output when it fails or outlives the deadline.
fn run(block: &Block, dir: &Path, srv: &Server) {
    let bin = Path::new(env!("CARGO_BIN_EXE_bulkwire")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = block.text.replace("127.0.0.1:8080", &srv.addr);
    let t = Instant::now();
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(dir)
        .env("PATH", path)
        .env("TOKEN", &srv.token)
        .env_remove("BULKWIRE_DATA")
        .env_remove("BULKWIRE_META")
        .env_remove("BULKWIRE_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > BLOCK_DEADLINE {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    eprintln!(
        "README line {}: exit {:?} in {:.1?}",
        block.line,
        out.status.code(),
        t.elapsed()
    );
    assert!(
        out.status.success(),
        "README block at line {} failed ({}):\n{}\n--- stdout\n{}\n--- stderr\n{}",
        block.line,
        out.status,
        block.text,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg_attr(
    missing_curl,
    ignore = "needs curl (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn every_readme_example_runs_against_a_fresh_zero_config_server() {
    bulkwire_runtimes::need(bulkwire_runtimes::Runtime::Curl);
    let readme = std::fs::read_to_string(readme_path()).unwrap();
    let all = blocks(&readme);
    let dir = workdir();
    let srv = serve(&dir);
    let mut ran = 0;
    for b in &all {
        match &b.not_run {
            Some(why) => eprintln!("README line {}: not run: {why}", b.line),
            None => {
                run(b, &dir, &srv);
                ran += 1;
            }
        }
    }
    // The README's examples of every command: uploads with curl and tus, credentials, parse
    // and build, and the load tool on each route.
    assert!(ran >= 5, "only {ran} README blocks ran");
    let runs_bulkwire = all
        .iter()
        .filter(|b| b.not_run.is_none())
        .filter(|b| b.text.contains("bulkwire load"))
        .count();
    assert!(runs_bulkwire >= 1, "the load examples did not run");
}

#[test]
fn not_run_notes_and_blocks_are_read_as_written() {
    let md = "a\n\n```sh\necho 1\n```\n<!-- not run by tests/readme.rs: slow -->\n```sh\necho 2\n```\n```text\nx\n```\n";
    let b = blocks(md);
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].line, b[0].text.as_str(), b[0].not_run.as_deref()),
        (3, "echo 1", None)
    );
    assert_eq!(
        (b[1].text.as_str(), b[1].not_run.as_deref()),
        ("echo 2", Some("slow"))
    );
}
