//! Runs the real `bulkwire` binary: parse output, error output, --save, and
//! build → parse round trips.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn bulkwire(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bulkwire"));
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let input = stdin.unwrap_or_default().to_vec();
    let mut pipe = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut pipe, &input));
    let out = child.wait_with_output().unwrap();
    // The command may exit before reading stdin (a broken pipe is fine).
    let _ = writer.join().unwrap();
    out
}

fn vector(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testsuite/vectors")
        .join(rel)
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tmp(name: &str) -> PathBuf {
    bulkwire_testenv::must(bulkwire_testenv::test_dir(name))
}

fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

#[test]
fn parse_prints_one_object_per_part() {
    let path = vector("python-multipart/single_field_single_file.http");
    let out = bulkwire(
        &[
            "parse",
            "-c",
            "multipart/form-data; boundary=boundary",
            path.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parts = lines(&out);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0]["index"], 0);
    assert_eq!(parts[0]["name"], "field");
    assert_eq!(parts[0]["filename"], Value::Null);
    assert_eq!(parts[0]["content_type"], Value::Null);
    assert_eq!(parts[0]["size"], 5);
    assert_eq!(parts[0]["sha256"], sha(b"test1"));
    assert_eq!(parts[1]["filename"], "file.txt");
    assert_eq!(parts[1]["content_type"], "text/plain");
    assert_eq!(parts[1]["content_id"], Value::Null);
    assert_eq!(
        parts[1]["headers"][1],
        serde_json::json!(["Content-Type", "text/plain"])
    );
    assert_eq!(parts[1]["sha256"], sha(b"test2"));
}

#[test]
fn parse_reads_stdin() {
    let body = std::fs::read(vector("python-multipart/single_field.http")).unwrap();
    let ct = "multipart/form-data; boundary=----WebKitFormBoundaryTkr3kCBQlBe1nrhc";
    let out = bulkwire(&["parse", "--content-type", ct, "-"], Some(&body));
    assert!(out.status.success());
    assert_eq!(lines(&out)[0]["sha256"], sha(b"This is a test."));
}

#[test]
fn parse_error_is_one_json_object_and_exit_1() {
    let path = vector("python-multipart/CR_in_header.http");
    let ct = "multipart/form-data; boundary=----WebKitFormBoundaryTkr3kCBQlBe1nrhc";
    let out = bulkwire(&["parse", "-c", ct, path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"], "malformed");
    assert_eq!(err["offset"], 50);
    assert_eq!(err["part"], 0);
    assert_eq!(err["limit"], Value::Null);
    assert!(err["message"].as_str().unwrap().contains("byte 50"));
}

#[test]
fn parse_limit_error_names_the_limit() {
    let path = vector("python-multipart/multiple_fields.http");
    let ct = "multipart/form-data; boundary=----WebKitFormBoundaryTkr3kCBQlBe1nrhc";
    let out = bulkwire(
        &[
            "parse",
            "-c",
            ct,
            "--max-parts",
            "1",
            path.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"], "limit");
    assert_eq!(
        err["limit"],
        serde_json::json!({"name": "parts", "value": 1})
    );
    // The first part was complete and is reported before the error.
    assert_eq!(lines(&out).len(), 1);
}

#[test]
fn unsupported_media_type() {
    let out = bulkwire(&["parse", "-c", "application/json", "-"], Some(b"{}"));
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"], "unsupported");
}

#[test]
fn build_then_parse_with_save() {
    let dir = tmp("roundtrip");
    let file = dir.join("input.bin");
    let data: Vec<u8> = (0..300_000u32).flat_map(|i| i.to_le_bytes()).collect();
    std::fs::write(&file, &data).unwrap();
    let body = dir.join("body");
    let file_arg = format!(
        "upload=@{};type=image/png;filename=../../evil.png",
        file.display()
    );
    let out = bulkwire(
        &[
            "build",
            "--field",
            "title=héllo",
            "--file",
            &file_arg,
            "-o",
            body.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header = String::from_utf8(out.stdout).unwrap();
    let ct = header
        .trim()
        .strip_prefix("Content-Type: ")
        .unwrap()
        .to_owned();
    assert!(ct.starts_with("multipart/form-data; boundary="));
    let saved = dir.join("saved");
    let out = bulkwire(
        &[
            "parse",
            "-c",
            &ct,
            "--save",
            saved.to_str().unwrap(),
            body.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parts = lines(&out);
    assert_eq!(parts[0]["name"], "title");
    assert_eq!(parts[0]["sha256"], sha("héllo".as_bytes()));
    assert_eq!(parts[1]["filename"], "../../evil.png");
    assert_eq!(parts[1]["content_type"], "image/png");
    assert_eq!(parts[1]["size"], data.len());
    assert_eq!(parts[1]["sha256"], sha(&data));
    // Saved by index, never by the client's filename.
    assert_eq!(std::fs::read(saved.join("1")).unwrap(), data);
    assert_eq!(std::fs::read(saved.join("0")).unwrap(), "héllo".as_bytes());
    assert!(!dir.join("evil.png").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn build_to_stdout_puts_the_header_on_stderr() {
    let out = bulkwire(&["build", "--field", "a=1", "--boundary", "xyz"], None);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Content-Type: multipart/form-data; boundary=xyz"
    );
    assert_eq!(
        out.stdout,
        b"--xyz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--xyz--\r\n"
    );
}
