//! Runs the real `bulkwire load` binary against a small keep-alive HTTP/1.1
//! server (std only, 127.0.0.1) that answers every 4th request with 503:
//! thresholds set the exit code and say which failed; JSON and HTML reports
//! are written.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Serves forever on a background thread; returns the base URL.
fn server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/up", listener.local_addr().unwrap());
    let count = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let count = count.clone();
            std::thread::spawn(move || serve(conn.unwrap(), &count));
        }
    });
    url
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
    let d = std::env::temp_dir().join(format!("bulkwire-cli-load-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
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
    let file = std::env::temp_dir().join(format!("bulkwire-cli-load-{}.bin", std::process::id()));
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
