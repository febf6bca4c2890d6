//! Real third-party SOAP clients against `POST /soap`, each building itself
//! from `GET /soap?wsdl` and authenticating with HTTP Basic:
//!
//! - zeep (PyPI, into the venv under target/ that the CLI tests share, from
//!   testsuite/py/requirements.txt): inline base64, SOAP 1.1 and 1.2, a
//!   fault for a wrong password, and two authors whose uploads are each
//!   their own;
//! - node-soap (npm `soap`, into target/tmp/node): MTOM with an attachment
//!   and inline base64;
//! - Apache CXF's JAX-WS client (Maven Central, resolved by
//!   testsuite/java/cxf/pom.xml, compiled with javac) with MTOM, SOAP 1.1
//!   and 1.2.
//!
//! Every upload is read back through `GET /v1/media/{id}` and compared by
//! SHA-256, and the client itself GETs the `url` it was given (the item's
//! link) with no credentials, in its own language and HTTP stack
//! (urllib.request, Node's fetch(), java.net.http.HttpClient), and reports
//! the status and SHA-256 it got. Whether a client really sent MTOM or
//! inline base64 is checked from the bytes the server received (base64 is
//! a third larger). zeep and CXF are also refused by the application's
//! `pre_create` hook (tests/common/hook.rs): the fault they raise carries
//! its message, and nothing is stored. A test
//! skips, saying why, only when its runtime is missing or its registry
//! cannot be reached; once installed, any failure fails it.

mod common;
mod soap_util;

use bulkwire_runtimes::{missing, need, Runtime};
use bulkwire_server::metrics::Outcome;
use bulkwire_server::Limits;
use common::hook::*;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::Ordering::Relaxed;

const USER: &str = "alice";
const PASSWORD: &str = "wonder:land";

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p)
}

/// Runs a client without blocking the server's runtime.
async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// The client's JSON line: the `uploadResponse` or `{"fault": …}`.
fn json_of(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    let Some(line) = line else {
        panic!(
            "no JSON from the client (status {:?})\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    serde_json::from_str(line).unwrap()
}

/// A server, a file of `len` bytes to upload, and the WSDL URL.
async fn setup(name: &str, len: usize, seed: u64) -> (Harness, PathBuf, Vec<u8>, String) {
    setup_on(start(Limits::default()).await, name, len, seed)
}

/// [`setup`] on a given server.
fn setup_on(h: Harness, name: &str, len: usize, seed: u64) -> (Harness, PathBuf, Vec<u8>, String) {
    let data = payload(len, seed);
    let file = h.data().join(name);
    std::fs::write(&file, &data).unwrap();
    let wsdl = h.url("/soap?wsdl");
    (h, file, data, wsdl)
}

/// Checks a client's answer against the server: 200 answer, stored bytes
/// equal by SHA-256, name and type kept; returns the request body bytes
/// the server received for it.
async fn check_upload(
    h: &Harness,
    out: &Output,
    data: &[u8],
    name: &str,
    ct: &str,
    before: u64,
) -> u64 {
    let j = json_of(out);
    assert!(
        out.status.success(),
        "{j}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(j["size"], data.len() as u64, "{j}");
    assert_eq!(j["sha256"], sha256(data), "{j}");
    let url = j["url"].as_str().unwrap();
    assert_eq!(sha256(&h.download(url).await), sha256(data));
    // The url is the item's link: the client fetched it itself, with its
    // own HTTP stack and no credentials, and got the bytes it uploaded.
    assert!(url.starts_with(&h.url("/v1/media/")), "{url}");
    assert!(url.contains("?sig=") || url.contains("&sig="), "{url}");
    assert_eq!(j["fetched_status"], 200, "{j}");
    assert_eq!(j["fetched_sha256"], sha256(data), "{j}");
    let id = j["id"].as_str().unwrap();
    let listed = h.list_all().await;
    let m = listed.iter().find(|m| m["id"] == id).expect("listed");
    assert_eq!(
        (m["filename"].as_str(), m["content_type"].as_str()),
        (Some(name), Some(ct))
    );
    h.srv.state.metrics.bytes_received.load(Relaxed) - before
}

fn received(h: &Harness) -> u64 {
    h.srv.state.metrics.bytes_received.load(Relaxed)
}

/// Inline base64 is 4/3 of the data; MTOM is the data plus small headers.
fn assert_inline(sent: u64, len: usize) {
    assert!(
        sent >= len as u64 * 4 / 3,
        "{sent} bytes for {len}: not base64"
    );
}

fn assert_mtom(sent: u64, len: usize) {
    assert!(
        sent < len as u64 + 16 * 1024,
        "{sent} bytes for {len}: not MTOM"
    );
}

fn python_with_zeep() -> PathBuf {
    bulkwire_testsuite::python_venv(tmp(), "requests, zeep")
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zeep_inline_base64_soap11_and_soap12() {
    let py = python_with_zeep();
    let (h, file, data, wsdl) = setup("zeep.bin", 1_500_007, 21).await;
    let zeep = |pass: &str, version: &str| {
        let mut c = Command::new(&py);
        c.arg(repo("testsuite/py/soap_zeep.py"))
            .args([wsdl.as_str(), USER, pass])
            .arg(&file)
            .arg(version);
        c
    };
    for version in ["11", "12"] {
        let before = received(&h);
        let out = run(zeep(PASSWORD, version)).await;
        let sent = check_upload(&h, &out, &data, "zeep.bin", "application/x-test", before).await;
        assert_inline(sent, data.len());
    }
    assert_eq!(h.srv.state.metrics.uploads("soap", Outcome::Ok), 2);
    // A wrong password: zeep raises the server's fault.
    let out = run(zeep("wrong", "11")).await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = json_of(&out);
    assert!(j["fault"].as_str().unwrap().ends_with("Client"), "{j}");
    assert_eq!(h.list_all().await.len(), 2);
}

/// `soap` from npm under target/tmp/node; fails the test when node or npm
/// is missing or the registry unreachable.
fn node_soap() -> PathBuf {
    need(Runtime::Node);
    let prefix = tmp().join("node");
    let modules = prefix.join("node_modules");
    if modules.join("soap/package.json").exists() {
        return modules;
    }
    let npm = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&prefix)
        .arg("soap@1.13.0")
        .status();
    if !npm.is_ok_and(|s| s.success()) || !modules.join("soap/package.json").exists() {
        missing(
            "soap@1.13.0 from the npm registry",
            "a reachable npm registry",
        );
    }
    modules
}

#[cfg_attr(
    missing_node,
    ignore = "needs node and npm (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_soap_mtom_and_inline_base64() {
    let modules = node_soap();
    let (h, file, data, wsdl) = setup("node.bin", 1_200_003, 22).await;
    for mode in ["mtom", "inline"] {
        let mut c = Command::new("node");
        c.env("NODE_PATH", &modules)
            .arg(repo("testsuite/node/soap_upload.js"))
            .args([wsdl.as_str(), USER, PASSWORD])
            .arg(&file)
            .arg(mode);
        let before = received(&h);
        let out = run(c).await;
        let sent = check_upload(
            &h,
            &out,
            &data,
            "node.bin",
            "application/octet-stream",
            before,
        )
        .await;
        match mode {
            "mtom" => assert_mtom(sent, data.len()),
            _ => assert_inline(sent, data.len()),
        }
    }
    assert_eq!(h.srv.state.metrics.uploads("soap", Outcome::Ok), 2);
}

/// CXF's jars (Maven Central, via testsuite/java/cxf/pom.xml) and the
/// compiled client under target/tmp/cxf, as a class path; fails the test
/// when Java or Maven is missing or Maven Central unreachable. Made once
/// per test process: two tests fetching into the same directory at once
/// (a fresh clone) had Maven copy over its own copies and fail.
fn cxf_classpath() -> String {
    static CLASSPATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CLASSPATH.get_or_init(make_cxf_classpath).clone()
}

fn make_cxf_classpath() -> String {
    need(Runtime::Java);
    let dir = tmp().join("cxf");
    let lib = dir.join("lib");
    let have = |jar: &str| lib.join(jar).exists();
    if !have("cxf-rt-frontend-jaxws-4.2.3.jar") || !have("saaj-impl-3.0.4.jar") {
        // Afresh: jars of an older pom.xml would stay on the class path.
        let _ = std::fs::remove_dir_all(&lib);
        let mvn = Command::new("mvn")
            .args(["-B", "-q", "-f"])
            .arg(repo("testsuite/java/cxf/pom.xml"))
            .arg("dependency:copy-dependencies")
            .arg(format!("-DoutputDirectory={}", lib.display()))
            .status();
        if !mvn.is_ok_and(|s| s.success()) {
            missing("Apache CXF from Maven Central", "a reachable Maven Central");
        }
    }
    let classes = dir.join("classes");
    let jars = format!("{}/*", lib.display());
    let sources: Vec<PathBuf> = std::fs::read_dir(repo("testsuite/java/cxf/src/bulkwire/cxf"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let javac = Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .args(["-cp", &jars])
        .args(&sources)
        .status();
    assert!(
        javac.is_ok_and(|s| s.success()),
        "javac failed on the CXF client"
    );
    format!("{}:{jars}", classes.display())
}

#[cfg_attr(
    missing_java,
    ignore = "needs java, javac and mvn (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cxf_jaxws_mtom_soap11_and_soap12() {
    let cp = cxf_classpath();
    let (h, file, data, wsdl) = setup("cxf.bin", 2_000_011, 23).await;
    for version in ["11", "12"] {
        let mut c = Command::new("java");
        c.args(["-cp", &cp, "bulkwire.cxf.CxfUpload", &wsdl, USER, PASSWORD])
            .arg(&file)
            .arg(version);
        let before = received(&h);
        let out = run(c).await;
        let sent = check_upload(&h, &out, &data, "cxf.bin", "application/x-cxf", before).await;
        assert_mtom(sent, data.len());
    }
    assert_eq!(h.srv.state.metrics.uploads("soap", Outcome::Ok), 2);
}

/// Two authors upload with zeep (HTTP Basic, their own names): each upload is its author's,
/// each author's listing holds only their own, and the other's item is 404 to them (its link
/// still works for whoever holds it).
#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zeep_authors_see_only_their_own() {
    let py = python_with_zeep();
    let h = start(Limits::default()).await;
    let authors = [("ann", "ann-pass:word"), ("bob", "bob-pass:word")];
    let mut ids = Vec::new();
    for (i, (u, pw)) in authors.into_iter().enumerate() {
        add_user(&h, u, pw, bulkwire_server::principal::Role::Author).await;
        let data = payload(50_000 + i, 24 + i as u64);
        let file = h.data().join(format!("zeep-{u}.bin"));
        std::fs::write(&file, &data).unwrap();
        let mut c = Command::new(&py);
        c.arg(repo("testsuite/py/soap_zeep.py"))
            .args([h.url("/soap?wsdl").as_str(), u, pw])
            .arg(&file)
            .arg("11");
        let out = run(c).await;
        let j = json_of(&out);
        assert!(out.status.success(), "{u}: {j}");
        assert_eq!(j["sha256"], sha256(&data), "{j}");
        assert_eq!(j["fetched_status"], 200, "{j}");
        ids.push((
            u,
            pw,
            j["id"].as_str().unwrap().to_string(),
            j["url"].clone(),
        ));
    }
    let all = h.list_all().await;
    assert_eq!(all.len(), 2);
    for (u, pw, id, _) in &ids {
        let m = all.iter().find(|m| m["id"] == id.as_str()).unwrap();
        assert_eq!(m["owner"], *u, "{m}");
        let r = h.http.get(h.url("/v1/media")).basic_auth(u, Some(pw));
        let j: Value = r.send().await.unwrap().json().await.unwrap();
        let listed: Vec<&str> = j["media"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(listed, [id.as_str()], "{u}: {j}");
    }
    let ((ann, ann_pw, _, _), (_, _, bobs, bobs_url)) = (&ids[0], &ids[1]);
    let r = h
        .http
        .get(h.url(&format!("/v1/media/{bobs}")))
        .basic_auth(ann, Some(ann_pw))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = h
        .http
        .get(bobs_url.as_str().unwrap())
        .basic_auth(ann, Some(ann_pw));
    assert_eq!(
        r.send().await.unwrap().status(),
        200,
        "a link is a capability"
    );
}

// ---------------------------------------------------------------------------
// Refused by the application's pre_create hook

const REFUSAL: &str = "the application refuses this SOAP upload (hook 5521)";

/// A server whose `pre_create` hook refuses every upload with 403 and
/// [`REFUSAL`]; a file to upload; the WSDL URL.
async fn refusing(name: &str) -> (HookServer, Harness, PathBuf, String) {
    let hook = HookServer::answering(|_| reject(403, REFUSAL)).await;
    let h = start_hooked(&hook, pre_create_only).await;
    let (h, file, _, wsdl) = setup_on(h, name, 700_001, 24);
    (hook, h, file, wsdl)
}

/// The client's fault (exit 3): its code ends with `code`, its message is
/// the hook's.
fn assert_refused(out: &Output, code: &str) {
    let j = json_of(out);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{j}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(j["fault"].as_str().unwrap().ends_with(code), "{j}");
    assert_eq!(j["message"], REFUSAL, "{j}");
}

/// The hook was asked once per upload, about alice's SOAP upload; the
/// message names its file only after the hook (so it is not told).
fn assert_asked(hook: &HookServer, n: usize) {
    let calls = hook.calls_to("pre_create");
    assert_eq!(calls.len(), n);
    for c in &calls {
        assert_eq!(c["format"], "soap", "{c}");
        assert_eq!(c["principal"]["name"], USER, "{c}");
        assert_eq!(c["filename"], Value::Null, "{c}");
    }
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zeep_shows_the_pre_create_refusal() {
    let py = python_with_zeep();
    let (hook, h, file, wsdl) = refusing("zeep-refused.bin").await;
    for (version, code) in [("11", "Client"), ("12", "Sender")] {
        let mut c = Command::new(&py);
        c.arg(repo("testsuite/py/soap_zeep.py"))
            .args([wsdl.as_str(), USER, PASSWORD])
            .arg(&file)
            .arg(version);
        assert_refused(&run(c).await, code);
    }
    std::fs::remove_file(&file).unwrap();
    assert_nothing_stored(&h).await;
    assert_asked(&hook, 2);
}

/// CXF as configured by default reads a fault only from a 500 answer (WS-I
/// Basic Profile R1126): the hook's 403 comes out as an HTTPException with
/// that status, at once (the answer is sent before the body is read, and
/// the lingering close lets CXF finish sending it: without it CXF hung for
/// a minute and failed writing its attachment). Set to read faults at any
/// status (`org.apache.cxf.transport.no_io_exceptions`, as CXF users do),
/// it raises the SOAPFaultException with the hook's message.
#[cfg_attr(
    missing_java,
    ignore = "needs java, javac and mvn (missing when this test was built; with CI set it fails instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cxf_shows_the_pre_create_refusal() {
    let cp = cxf_classpath();
    let (hook, h, file, wsdl) = refusing("cxf-refused.bin").await;
    let cxf = |version: &str| {
        let mut c = Command::new("java");
        c.args(["-cp", &cp, "bulkwire.cxf.CxfUpload", &wsdl, USER, PASSWORD])
            .arg(&file)
            .arg(version);
        c
    };
    for (version, code) in [("11", "Client"), ("12", "Sender")] {
        let out = run(cxf(version)).await;
        let j = json_of(&out);
        assert_eq!(out.status.code(), Some(4), "{j}");
        assert_eq!(j["http_status"], 403, "{j}");
        let mut c = cxf(version);
        c.arg("faults-at-any-status");
        assert_refused(&run(c).await, code);
    }
    std::fs::remove_file(&file).unwrap();
    assert_nothing_stored(&h).await;
    assert_asked(&hook, 4);
}
