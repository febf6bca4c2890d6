//! Every `sh` block of the README and of the book (`docs/src`, its pages in `SUMMARY.md` order)
//! runs, as written, against a fresh `bulkwire serve` started the way the README says: zero
//! configuration, in a fresh directory (so its data is `./bulkwire-data`), its printed token in
//! `TOKEN`. Each page gets a server and a directory of its own, so that a page's examples rely
//! on nothing but what that page did before them: a reader can follow any page alone. The
//! blocks of a page run in order in its directory, which also holds `photo.jpg`, `blob.bin` and
//! a copy of the README, with this build's `bulkwire` first on `PATH`; each must exit 0
//! (`bash -euo pipefail`; the examples' `curl`s use `-f`, and their `bulkwire load`s carry error
//! thresholds, so a failed request fails its block).
//!
//! The one liberty taken: the server listens on a free port instead of 8080 (tests run in
//! parallel), and `127.0.0.1:8080` in the blocks is replaced by its address.
//!
//! A block the test cannot run says why in an HTML comment on the line above it
//! (`<!-- not run by tests/docs.rs: … -->`); the reasons are printed, page by page and line by
//! line. `text` blocks are synopses, not commands.
//!
//! A block about the managed services a site scales out to names, on the line above it, the
//! stand-ins it runs against (`<!-- run by tests/docs.rs with: postgres azurite fake-gcs
//! seaweedfs -->`, any of them): `bulkwire-testenv` starts them once, and the block gets what
//! a reader would have in their place. `postgres`: a PostgreSQL with TLS on at 127.0.0.1,
//! its port in `PGPORT`, and in the block's directory the CA that signed its certificate
//! (`ca.pem`), another CA (`other-ca.pem`) and a client certificate for the role `certuser`
//! (`client.pem`, `client.key`). `azurite`: Azure's emulator, its address in
//! `AZURITE_BLOB_STORAGE_URL`, a container `media`. `fake-gcs`: fake-gcs-server, a
//! service-account JSON that points at it in `GOOGLE_SERVICE_ACCOUNT_KEY`, a bucket `media`.
//! `seaweedfs`: an S3 server with a bucket `media`, its keys in `AWS_ACCESS_KEY_ID` and
//! `AWS_SECRET_ACCESS_KEY`, its address in `AWS_ENDPOINT_URL` (with `AWS_REGION`,
//! `AWS_ALLOW_HTTP`). Without any of them, no `AWS_*`, `AZURE_*`, `GOOGLE_*` or `PG*` variable
//! of the test's own environment reaches a block.
//!
//! The other tests here keep the book whole: every page is in `SUMMARY.md` (mdBook builds only
//! those, and only those are run here), and every relative link of the README and the book
//! names a file that exists and, with `#anchor`, a heading in it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NOT_RUN: &str = "<!-- not run by tests/docs.rs:";
const RUN_WITH: &str = "<!-- run by tests/docs.rs with:";
/// Longest a block may run (the load examples take a few seconds each).
const BLOCK_DEADLINE: Duration = Duration::from_secs(180);

/// A fenced `sh` block: its first line number and text, or why it is not run.
struct Block {
    line: usize,
    text: String,
    not_run: Option<String>,
    /// The stand-ins it runs against (`RUN_WITH`).
    with: Vec<String>,
}

fn blocks(md: &str) -> Vec<Block> {
    let lines: Vec<&str> = md.lines().collect();
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
        let with = prev
            .and_then(|l| l.trim().strip_prefix(RUN_WITH))
            .map(|r| {
                r.trim_end_matches("-->")
                    .split_whitespace()
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
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
            with,
        });
        i = end + 1;
    }
    out
}

/// The book's pages in reading order, as paths relative to `docs/src`: the target of every
/// chapter link in `SUMMARY.md` (prefix chapters, numbered ones at any depth, suffix ones). A
/// draft chapter (`[Title]()`) has no page and is left out; part titles (`# …`) and separators
/// are not links.
fn summary_pages(summary: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in summary.lines() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("- ")
            .or_else(|| t.strip_prefix("* "))
            .unwrap_or(t);
        if !t.starts_with('[') {
            continue;
        }
        let Some(start) = t.find("](") else { continue };
        let rest = &t[start + 2..];
        let target = &rest[..rest.find(')').expect("an unclosed chapter link")];
        if !target.is_empty() {
            out.push(target.to_string());
        }
    }
    out
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every document whose examples run: the README, then the book's pages in SUMMARY order; each
/// as its name relative to the repository and its path.
fn documents() -> Vec<(String, PathBuf)> {
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    let mut out = vec![("README.md".to_string(), root().join("README.md"))];
    for page in summary_pages(&summary) {
        out.push((
            format!("docs/src/{page}"),
            root().join("docs/src").join(&page),
        ));
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
    let banner = bulkwire_testenv::await_banner(&mut child, Duration::from_secs(30));
    let (addr, banner) = bulkwire_testenv::must(banner);
    // The token is the line after the one announcing it.
    let token = banner
        .windows(2)
        .find(|w| w[0].contains("created an API token"))
        .map(|w| w[1].trim().to_string())
        .unwrap_or_else(|| panic!("no token printed on a first start: {banner:?}"));
    Server {
        child,
        addr: addr.to_string(),
        token,
    }
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

/// A real 320×240 JPEG of noise (about 40 KiB): the examples upload it,
/// and make variants of it.
fn photo() -> Vec<u8> {
    let pixels = bytes(320 * 240 * 3, 7);
    let mut v = Vec::new();
    jpeg_encoder::Encoder::new(&mut v, 90)
        .encode(&pixels, 320, 240, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    v
}

/// A fresh directory with the files the examples name.
fn workdir(name: &str) -> PathBuf {
    let d = bulkwire_testenv::must(bulkwire_testenv::test_dir(name));
    std::fs::write(d.join("photo.jpg"), photo()).unwrap();
    std::fs::write(d.join("blob.bin"), bytes(256 * 1024, 11)).unwrap();
    std::fs::copy(root().join("README.md"), d.join("README.md")).unwrap();
    d
}

/// The variables of the stand-ins a block names (`RUN_WITH`), each started once per test
/// process; their files are copied into `dir`.
fn stand_ins(with: &[String], dir: &Path) -> Vec<(String, String)> {
    use bulkwire_testenv::must;
    static BUCKETS: std::sync::Mutex<BTreeSet<&'static str>> =
        std::sync::Mutex::new(BTreeSet::new());
    let first = |what: &'static str| BUCKETS.lock().unwrap().insert(what);
    let mut vars = Vec::new();
    for w in with {
        match w.as_str() {
            "postgres" => {
                let pg = must(bulkwire_testenv::shared_postgres());
                let c = pg.certs().expect("the test PostgreSQL runs with TLS");
                for (from, to) in [
                    (&c.ca, "ca.pem"),
                    (&c.other_ca, "other-ca.pem"),
                    (&c.client_cert, "client.pem"),
                    (&c.client_key, "client.key"),
                ] {
                    std::fs::copy(from, dir.join(to)).unwrap();
                }
                vars.push(("PGPORT".into(), pg.port().to_string()));
            }
            "azurite" => {
                let e = must(bulkwire_testenv::shared_azurite());
                if first("azurite") {
                    must(e.create_bucket("media"));
                }
                vars.extend(
                    e.vars()
                        .into_iter()
                        .filter(|(k, _)| k == "AZURITE_BLOB_STORAGE_URL"),
                );
            }
            "fake-gcs" => {
                let e = must(bulkwire_testenv::shared_fake_gcs());
                if first("fake-gcs") {
                    must(e.create_bucket("media"));
                }
                vars.extend(e.vars());
            }
            "seaweedfs" => {
                let sw = must(bulkwire_testenv::shared_seaweed());
                if first("seaweedfs") {
                    must(sw.create_bucket("media"));
                }
                vars.extend([
                    ("AWS_ENDPOINT_URL".into(), sw.endpoint()),
                    ("AWS_REGION".into(), sw.region().into()),
                    ("AWS_ALLOW_HTTP".into(), "true".into()),
                    ("AWS_ACCESS_KEY_ID".into(), sw.access_key().into()),
                    ("AWS_SECRET_ACCESS_KEY".into(), sw.secret_key().into()),
                ]);
            }
            other => panic!("{RUN_WITH} {other}: no such stand-in"),
        }
    }
    vars
}

/// Variables of the test's own environment that would point a block's `bulkwire` at some
/// store or credential: a block gets only those its stand-ins set.
fn is_store_var(k: &str) -> bool {
    [
        "AWS_",
        "AZURE_",
        "AZURITE_",
        "GOOGLE_",
        "GCE_",
        "IDENTITY_",
        "PG",
    ]
    .iter()
    .any(|p| k.starts_with(p))
}

/// Runs one block with bash; panics with its output when it fails or outlives the deadline.
fn run(doc: &str, block: &Block, dir: &Path, srv: &Server) {
    let bin = Path::new(env!("CARGO_BIN_EXE_bulkwire")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = block.text.replace("127.0.0.1:8080", &srv.addr);
    let vars = stand_ins(&block.with, dir);
    let t = Instant::now();
    let mut cmd = Command::new("bash");
    for (k, _) in std::env::vars().filter(|(k, _)| is_store_var(k)) {
        cmd.env_remove(k);
    }
    let mut child = cmd
        .args(["-euo", "pipefail", "-c", &script])
        .envs(vars)
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
        "{doc}:{}: ran, exit {:?} in {:.1?}",
        block.line,
        out.status.code(),
        t.elapsed()
    );
    assert!(
        out.status.success(),
        "{doc}: block at line {} failed ({}):\n{}\n--- stdout\n{}\n--- stderr\n{}",
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
#[cfg_attr(
    missing_python,
    ignore = "needs Python 3 (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn every_example_of_the_readme_and_the_book_runs_against_a_fresh_zero_config_server() {
    bulkwire_runtimes::need(bulkwire_runtimes::Runtime::Curl);
    bulkwire_runtimes::need(bulkwire_runtimes::Runtime::Python);
    let t = Instant::now();
    let (mut ran, mut skipped, mut pages) = (Vec::new(), 0, 0);
    for (n, (doc, path)) in documents().iter().enumerate() {
        let md = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let all = blocks(&md);
        // The page's directory and server, started at its first block that runs.
        let mut at: Option<(PathBuf, Server)> = None;
        for b in &all {
            if let Some(why) = &b.not_run {
                eprintln!("{doc}:{}: not run: {why}", b.line);
                skipped += 1;
                continue;
            }
            let (dir, srv) = at.get_or_insert_with(|| {
                let dir = workdir(&format!("docs-{n}"));
                let srv = serve(&dir);
                (dir, srv)
            });
            run(doc, b, dir, srv);
            ran.push((doc.clone(), b.text.clone()));
        }
        match at {
            Some(_) => pages += 1,
            None => eprintln!("{doc}: no block to run"),
        }
    }
    eprintln!(
        "docs: {} blocks ran on {pages} pages, {skipped} not run, in {:.1?}",
        ran.len(),
        t.elapsed()
    );
    // Uploads with curl, tus and XML-RPC, credentials, parse and build, and the load tool on
    // each route: in the README's tour and again in the book's chapters.
    let ran_in = |doc: &str| ran.iter().filter(|(d, _)| d == doc).count();
    assert!(
        ran_in("README.md") >= 5,
        "only {} README blocks ran",
        ran_in("README.md")
    );
    assert!(pages >= 10, "examples ran on only {pages} pages");
    let runs = |what: &str| ran.iter().filter(|(_, b)| b.contains(what)).count();
    assert!(runs("bulkwire load") >= 2, "the load examples did not run");
    assert!(runs("/v1/uploads") >= 2, "the tus examples did not run");
    assert!(runs("xmlrpc") >= 2, "the XML-RPC examples did not run");
}

/// mdBook builds only the pages SUMMARY.md names, and only those run above: a page left out
/// would be neither published nor tested.
#[test]
fn every_page_of_the_book_is_in_the_summary() {
    let src = root().join("docs/src");
    let listed: BTreeSet<PathBuf> = documents().into_iter().skip(1).map(|(_, p)| p).collect();
    for p in &listed {
        assert!(
            p.is_file(),
            "SUMMARY.md names {}, which is missing",
            p.display()
        );
    }
    let mut found = Vec::new();
    markdown_files(&src, &mut found);
    let orphans: Vec<_> = found
        .iter()
        .filter(|p| p.file_name().unwrap() != "SUMMARY.md" && !listed.contains(*p))
        .collect();
    assert!(orphans.is_empty(), "pages not in SUMMARY.md: {orphans:#?}");
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// A heading's anchor as mdBook (and GitHub) make it: lower case, white space to `-`, other
/// punctuation but `-` and `_` dropped (`` `[limits]` `` → `limits`).
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a page's headings, and its links (outside code) that point into the tree.
fn anchors_and_links(md: &str) -> (BTreeSet<String>, Vec<(usize, String)>) {
    let (mut anchors, mut links, mut fence) = (BTreeSet::new(), Vec::new(), false);
    for (i, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        if let Some(h) = line.strip_prefix('#') {
            anchors.insert(anchor(h.trim_start_matches('#').trim()));
            continue;
        }
        // Inline code is not a link: blank it out before looking.
        let mut plain = String::new();
        for (k, part) in line.split('`').enumerate() {
            plain.push_str(if k % 2 == 0 { part } else { "" });
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                links.push((i + 1, target.to_string()));
            }
            rest = &rest[end..];
        }
    }
    (anchors, links)
}

#[test]
fn every_link_of_the_readme_and_the_book_finds_its_page_and_heading() {
    let mut broken = Vec::new();
    for (doc, path) in documents() {
        let md = std::fs::read_to_string(&path).unwrap();
        let (own, links) = anchors_and_links(&md);
        for (line, target) in links {
            let (file, frag) = target.split_once('#').unwrap_or((&target, ""));
            let (to, anchors) = if file.is_empty() {
                (path.clone(), own.clone())
            } else {
                let to = path.parent().unwrap().join(file);
                if !to.exists() {
                    broken.push(format!("{doc}:{line}: {target}: no such file"));
                    continue;
                }
                let anchors = match to.extension().is_some_and(|x| x == "md") {
                    true => anchors_and_links(&std::fs::read_to_string(&to).unwrap()).0,
                    false => BTreeSet::new(),
                };
                (to, anchors)
            };
            if !frag.is_empty() && !anchors.contains(frag) {
                broken.push(format!(
                    "{doc}:{line}: {target}: no heading #{frag} in {}",
                    to.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn not_run_notes_and_blocks_are_read_as_written() {
    let md = "a\n\n```sh\necho 1\n```\n<!-- not run by tests/docs.rs: slow -->\n```sh\necho 2\n```\n```text\nx\n```\n";
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

#[test]
fn pages_are_found_in_summary_order() {
    let summary = "# Summary\n\n[Introduction](introduction.md)\n\n# Using it\n\n\
        - [Getting started](getting-started.md)\n- [Later]()\n\
        - [Performance](performance.md)\n    - [Server](performance/server.md)\n\
        \n---\n\n* [Design](design.md)\n[Appendix](appendix.md)\n";
    assert_eq!(
        summary_pages(summary),
        [
            "introduction.md",
            "getting-started.md",
            "performance.md",
            "performance/server.md",
            "design.md",
            "appendix.md"
        ]
    );
}

#[test]
fn anchors_follow_mdbook_and_links_skip_code() {
    assert_eq!(anchor("`[limits]`: every cap"), "limits-every-cap");
    assert_eq!(
        anchor("Scaling out: PostgreSQL and S3"),
        "scaling-out-postgresql-and-s3"
    );
    let (a, l) = anchors_and_links(
        "# Top\n## `serve` flags\nsee [x](a.md#b), `[no](c.md)`, <https://e.org> [w](https://e.org)\n```sh\n[no](d.md)\n```\n![p](p.png)\n",
    );
    assert_eq!(
        a,
        BTreeSet::from(["top".to_string(), "serve-flags".to_string()])
    );
    assert_eq!(l, [(3, "a.md#b".to_string()), (7, "p.png".to_string())]);
}

/// Rough edges 10 and the first hour's "Must show": a reader of a fresh
/// clone finds how to run the server, upload and get a token within the
/// README's first 60 lines, and how to run a subcommand without installing
/// (`cargo run --release -p bulkwire-cli -- token create`).
#[test]
fn readme_shows_run_upload_and_token_within_60_lines_and_cargo_run_for_token_create() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let head: Vec<&str> = readme.lines().take(60).collect();
    let has = |what: &str| head.iter().any(|l| l.contains(what));
    assert!(has("cargo run --release -p bulkwire-cli -- serve"), "run");
    assert!(has("-F file=@photo.jpg"), "upload");
    assert!(
        has("cargo run --release -p bulkwire-cli -- token create"),
        "token without installing"
    );
    assert!(has("bulkwire token create"), "token");
    assert!(
        readme.lines().count() <= 250,
        "a front door, not a reference"
    );
}
