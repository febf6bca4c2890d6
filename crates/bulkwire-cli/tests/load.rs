//! Runs the real `bulkwire load` binary against a small keep-alive HTTP/1.1
//! server (std only, 127.0.0.1) that answers every 4th request with 503:
//! thresholds set the exit code and say which failed; JSON and HTML reports
//! are written; two such servers stand for two nodes with `--target`.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Serves forever on a background thread; returns the base URL.
fn server() -> String {
    server_counting().0
}

/// [`server`], and the count of requests it answered.
fn server_counting() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/up", listener.local_addr().unwrap());
    let count = Arc::new(AtomicU64::new(0));
    let answered = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let count = count.clone();
            std::thread::spawn(move || serve(conn.unwrap(), &count));
        }
    });
    (url, answered)
}

/// One connection: read a head, skip Content-Length bytes, answer; repeat.
fn serve(tcp: TcpStream, count: &AtomicU64) {
    let mut w = tcp.try_clone().unwrap();
    let mut r = BufReader::new(tcp);
    loop {
        let mut len = 0u64;
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.to_ascii_lowercase();
            if let Some(v) = l.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        std::io::copy(&mut (&mut r).take(len), &mut std::io::sink()).unwrap();
        let n = count.fetch_add(1, Ordering::Relaxed);
        let status = if n % 4 == 3 {
            "503 Service Unavailable"
        } else {
            "200 OK"
        };
        let resp = format!("HTTP/1.1 {status}\r\ncontent-length: 2\r\n\r\nok");
        if w.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

fn bulkwire(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkwire"))
        .args(args)
        .output()
        .unwrap()
}

fn tmp(name: &str) -> PathBuf {
    bulkwire_testenv::must(bulkwire_testenv::test_dir(name))
}

#[test]
fn failed_threshold_sets_exit_code_99_and_names_it() {
    let url = server();
    let args = [
        "load",
        &url,
        "--scenario",
        "formdata",
        "--field",
        "n={seq}",
        "--requests",
        "40",
        "--connections",
        "1",
        "--threshold",
        "errors<1%",
        "--threshold",
        "p99<10s",
    ];
    let out = bulkwire(&args);
    assert_eq!(
        out.status.code(),
        Some(99),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("threshold errors<1% failed (actual 25.000)"),
        "{err}"
    );
    assert!(!err.contains("p99<10s"), "{err}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("FAIL      errors<1%"), "{table}");
    assert!(table.contains("503: 10"), "{table}");
}

#[test]
fn passing_thresholds_exit_0_and_reports_are_written() {
    let url = server();
    let dir = tmp("ok");
    let file = dir.join("payload.bin");
    std::fs::write(&file, vec![7u8; 10_000]).unwrap();
    let (json, html) = (dir.join("r.json"), dir.join("r.html"));
    let args = [
        "load",
        &url,
        "--scenario",
        "raw",
        "--file",
        file.to_str().unwrap(),
        "--rate",
        "100/s",
        "--duration",
        "1s",
        "--threshold",
        "errors<30%",
        "--threshold",
        "rps>10",
        "--json",
        json.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
        "-q",
    ];
    let out = bulkwire(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "quiet");
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["sent"], 100);
    assert_eq!(j["by_status"]["200"], 75);
    assert_eq!(j["by_status"]["503"], 25);
    assert_eq!(j["bytes_sent"], 100 * 10_000);
    assert_eq!(j["thresholds"].as_array().unwrap().len(), 2);
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
}

#[test]
fn bad_arguments_exit_1_with_a_message() {
    let out = bulkwire(&[
        "load",
        "http://127.0.0.1:1/",
        "--field",
        "a=b",
        "--rate",
        "fast",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rate \"fast\""));
    let out = bulkwire(&["load", "http://127.0.0.1:1/", "--scenario", "mtom"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the mtom scenario takes one --file"));
    let file = tmp("args").join("f.bin");
    std::fs::write(&file, b"abc").unwrap();
    let f = file.to_str().unwrap();
    let out = bulkwire(&[
        "load",
        "http://127.0.0.1:1/",
        "--scenario",
        "xmlrpc",
        "--file",
        f,
    ]);
    std::fs::remove_file(&file).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --user"));
}

/// `--target` adds a node: two connections, one each, taking the tickets
/// of the fixed rate in turn, so about half the requests each; the summary
/// and JSON break the totals down per node, matching what each server
/// answered (each fails its own every 4th request).
#[test]
fn targets_share_the_load_and_are_reported_each() {
    let (a, count_a) = server_counting();
    let (b, count_b) = server_counting();
    let json = tmp("targets").join("r.json");
    let args = [
        "load",
        &a,
        "--target",
        &b,
        "--scenario",
        "raw",
        "--rate",
        "400/s",
        "--requests",
        "80",
        "--connections",
        "2",
        "--json",
        json.to_str().unwrap(),
    ];
    let out = bulkwire(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (na, nb) = (
        count_a.load(Ordering::Relaxed),
        count_b.load(Ordering::Relaxed),
    );
    assert_eq!(na + nb, 80);
    assert!((30..=50).contains(&na), "half each: {na} and {nb}");

    let j: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["completed"], 80);
    assert_eq!(j["url"], a.as_str());
    let t = j["targets"].as_array().unwrap();
    assert_eq!(t.len(), 2);
    let table = String::from_utf8_lossy(&out.stdout);
    for (t, url, n) in [(&t[0], &a, na), (&t[1], &b, nb)] {
        assert_eq!(t["url"], url.as_str());
        assert_eq!(t["connections"], 1);
        assert_eq!(t["requests"], n);
        assert_eq!(t["errors"], n / 4, "requests 3, 7, 11 … of {n}");
        let line = format!(
            "  target    {url}: 1 connection, {n} requests, {:.1} req/s, {} errors",
            t["rps"].as_f64().unwrap(),
            n / 4
        );
        assert!(table.contains(&line), "{line}\n{table}");
    }
    assert_eq!(j["errors"], na / 4 + nb / 4, "totals stay");
}

#[test]
fn targets_of_different_paths_are_refused_naming_both() {
    let (a, count_a) = server_counting();
    let b = server().replace("/up", "/other");
    let out = bulkwire(&["load", &a, "--target", &b, "--scenario", "raw", "-n", "5"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&a) && err.contains(&b), "{err}");
    assert!(err.contains("differ in path and query"), "{err}");
    assert_eq!(count_a.load(Ordering::Relaxed), 0);
}

#[test]
fn help_explains_per_connection_round_robin() {
    let out = bulkwire(&["load", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--target <URL>"), "{help}");
    assert!(help.contains("round-robin"), "{help}");
}
