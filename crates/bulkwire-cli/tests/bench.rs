//! Runs the real `bulkwire bench sweep` and `bench latency` end to end: they
//! start `bulkwire serve` themselves (this binary), upload, sample its
//! memory, and write tables, JSON and SVG plots. Small sizes and short runs
//! only; the full sweep is `bench/peers/xmlrpc-sweep`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bulkwire(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkwire"))
        .args(args)
        .output()
        .unwrap()
}

fn out_dir(name: &str) -> PathBuf {
    // The bench creates its output directory itself: hand it a path that does not exist yet.
    let d = bulkwire_testenv::must(bulkwire_testenv::test_dir(name));
    std::fs::remove_dir(&d).unwrap();
    d
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn sweep_runs_end_to_end_with_one_row_per_size_and_format() {
    let dir = out_dir("sweep");
    let out = bulkwire(&[
        "bench",
        "sweep",
        "--sizes",
        "1,2",
        "--formats",
        "xmlrpc,formdata,mtom",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");

    let j = read_json(&dir.join("sweep.json"));
    assert_eq!(j["unit"], "MiB");
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "{rows:#?}");
    let mut pairs = Vec::new();
    for r in rows {
        let size = r["size_mib"].as_f64().unwrap();
        let format = r["format"].as_str().unwrap().to_owned();
        let bytes = r["size_bytes"].as_u64().unwrap();
        assert_eq!(bytes, (size * 1048576.0) as u64);
        assert!(r["ok"].as_bool().unwrap(), "{r}");
        assert!((200..300).contains(&r["status"].as_u64().unwrap()), "{r}");
        assert_eq!(r["server"], "bulkwire");
        let secs = r["seconds"].as_f64().unwrap();
        assert!(secs > 0.0 && secs < 60.0, "{r}");
        // The body carries the file: base64 text for XML-RPC (4/3 of it),
        // raw bytes plus a little framing otherwise.
        let body = r["body_bytes"].as_u64().unwrap();
        let least = if format == "xmlrpc" {
            bytes * 4 / 3
        } else {
            bytes
        };
        assert!(body >= least && body < least + 4096, "{r}");
        // The server's peak RSS was sampled, and is that of a small server,
        // not of one holding the file (nor a wrong number).
        let peak = r["peak_rss_mib"].as_f64().unwrap();
        let before = r["rss_before_mib"].as_f64().unwrap();
        assert!(peak >= before && before > 1.0 && peak < 200.0, "{r}");
        assert!(r["hwm_reset"].is_boolean());
        pairs.push((size as u64, format));
    }
    pairs.sort();
    let want: Vec<(u64, String)> = [1, 2]
        .iter()
        .flat_map(|&s| ["formdata", "mtom", "xmlrpc"].map(|f| (s, f.to_owned())))
        .collect();
    assert_eq!(pairs, want);

    // The printed table: a header and the six rows.
    let table: Vec<&str> = stdout.lines().filter(|l| l.contains("bulkwire ")).collect();
    assert_eq!(table.len(), 6, "{stdout}");
    // The Markdown pivot: one line per size, a column per format, the
    // WordPress columns quoted.
    let md = std::fs::read_to_string(dir.join("sweep.md")).unwrap();
    assert!(
        md.starts_with("| file size (MiB) | bulkwire xmlrpc | bulkwire formdata | bulkwire mtom |")
    );
    assert!(md.contains("WordPress (IXR, before fix)"));
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("| 1 |") || l.starts_with("| 2 |"))
            .count(),
        2
    );
    for svg in ["sweep-memory.svg", "sweep-time.svg"] {
        let s = std::fs::read_to_string(dir.join(svg)).unwrap();
        assert!(s.starts_with("<svg xmlns="), "{svg}");
        assert_eq!(
            s.matches("<polyline").count(),
            3,
            "{svg}: a line per format"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sweep_with_a_server_command_and_a_failing_endpoint_exits_2() {
    // A peer that serves nothing useful: every upload fails, and says so.
    let dir = out_dir("failing");
    let out = bulkwire(&[
        "bench",
        "sweep",
        "--sizes",
        "0.01",
        "--formats",
        "formdata",
        "--server-cmd",
        &format!(
            "{} serve --listen 127.0.0.1:{{port}} --data {{data}} --token other",
            env!("CARGO_BIN_EXE_bulkwire")
        ),
        "--label",
        "wrongtoken",
        "--out",
        dir.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = read_json(&dir.join("sweep.json"));
    let r = &j["rows"][0];
    assert_eq!(r["server"], "wrongtoken");
    assert_eq!(r["ok"], false);
    assert_eq!(r["status"], 401);
    assert!(
        r["error"].as_str().unwrap().starts_with("status 401"),
        "{r}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn latency_runs_open_loop_and_writes_a_box_plot() {
    let dir = out_dir("latency");
    let out = bulkwire(&[
        "bench",
        "latency",
        "--rate",
        "20",
        "--duration",
        "1s",
        "--format",
        "xmlrpc",
        "--size",
        "4KiB",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("latency xmlrpc 4096 B"))
        .unwrap();
    assert!(
        line.contains("p50 ") && line.contains("p90 ") && line.contains("p95 "),
        "{line}"
    );
    let j = read_json(&dir.join("latency.json"));
    assert_eq!(j["mode"], "open");
    assert_eq!(j["rate"], 20.0);
    assert_eq!(j["completed"], 20, "{j}");
    assert_eq!(j["errors"], 0);
    let c = &j["corrected"];
    let (p50, p95) = (c["p50_ms"].as_f64().unwrap(), c["p95_ms"].as_f64().unwrap());
    assert!(p50 > 0.0 && p50 <= p95, "{c}");
    assert!(j["memory"]["peak_bytes"].as_u64().unwrap() > 1 << 20);
    let svg = std::fs::read_to_string(dir.join("latency.svg")).unwrap();
    assert!(svg.starts_with("<svg xmlns="));
    assert_eq!(svg.matches("<rect").count(), 2, "a box per latency view");
    assert!(dir.join("latency.html").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `bench latency` shares the load runner and checks one upload first:
/// pointed at a port nothing listens on, it exits 1 naming the address
/// (not a table of zeros), as `bulkwire load` does.
#[test]
fn bench_latency_with_no_server_listening_exits_non_zero_and_names_the_address() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = out_dir("latency-no-server");
    let url = format!("http://127.0.0.1:{port}");
    let out = bulkwire(&[
        "bench",
        "latency",
        "--url",
        &url,
        "--duration",
        "5s",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let want =
        format!("bulkwire bench: connection refused: is a server listening on 127.0.0.1:{port}?");
    assert!(err.starts_with(&want), "{err}");
    assert!(!dir.join("latency.json").exists());
}

/// The Python peer of the XML-RPC sweep.
#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn python_peer_takes_wp_upload_file() {
    bulkwire_runtimes::need(bulkwire_runtimes::Runtime::Python);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/peers/python/wp_xmlrpc_server.py");
    let dir = out_dir("python");
    let out = bulkwire(&[
        "bench",
        "sweep",
        "--sizes",
        "0.5",
        "--formats",
        "xmlrpc",
        "--peer",
        &format!(
            "python:xmlrpc=python3 {} --port {{port}} --data {{data}}",
            script.display()
        ),
        "--out",
        dir.to_str().unwrap(),
        "-q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = read_json(&dir.join("sweep.json"));
    let rows = j["rows"].as_array().unwrap();
    let servers: Vec<_> = rows.iter().map(|r| r["server"].as_str().unwrap()).collect();
    assert_eq!(servers, ["bulkwire", "python"]);
    assert!(rows.iter().all(|r| r["ok"] == true), "{rows:#?}");
    let md = std::fs::read_to_string(dir.join("sweep.md")).unwrap();
    assert!(
        md.starts_with("| file size (MiB) | bulkwire xmlrpc | python xmlrpc |"),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
