//! Helpers for the conformance tests: locating vectors, reading the
//! python-multipart `.yaml` expectations and splitting captured HTTP requests
//! into head and (de-chunked) body.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `testsuite/vectors/<rel>`.
pub fn vector_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("vectors")
        .join(rel)
}

/// One expected part of a python-multipart vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedPart {
    pub name: String,
    pub is_file: bool,
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    pub data: Vec<u8>,
}

/// A python-multipart `.yaml`: the boundary and either parts or an error
/// offset.
#[derive(Debug, Clone)]
pub struct Expectation {
    pub boundary: String,
    pub result: Result<Vec<ExpectedPart>, u64>,
}

fn binary(v: &serde_yaml::Value) -> Vec<u8> {
    use base64::Engine;
    // serde_yaml resolves the core `!!binary` tag to its plain text.
    let v = match v {
        serde_yaml::Value::Tagged(t) => &t.value,
        v => v,
    };
    let text: String = v
        .as_str()
        .expect("!!binary text")
        .split_whitespace()
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("valid base64")
}

fn text(v: &serde_yaml::Value, key: &str) -> Option<String> {
    v.get(key).and_then(|s| s.as_str()).map(str::to_owned)
}

/// Reads `python-multipart/<name>.yaml`.
pub fn expectation(name: &str) -> Expectation {
    let path = vector_path(&format!("python-multipart/{name}.yaml"));
    let y: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let boundary = text(&y, "boundary").expect("boundary");
    let exp = &y["expected"];
    let result = match exp.get("error") {
        Some(off) => Err(off.as_u64().expect("error offset")),
        None => Ok(exp
            .as_sequence()
            .expect("list of parts")
            .iter()
            .map(|p| ExpectedPart {
                name: text(p, "name").expect("name"),
                is_file: text(p, "type").as_deref() == Some("file"),
                file_name: text(p, "file_name"),
                content_type: text(p, "content_type"),
                data: binary(&p["data"]),
            })
            .collect()),
    };
    Expectation { boundary, result }
}

/// Names of the python-multipart vectors, sorted.
pub fn python_multipart_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(vector_path("python-multipart"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".http").map(str::to_owned)
        })
        .collect();
    v.sort();
    v
}

/// A captured request: header fields and the body with any chunked
/// transfer coding removed (RFC 9112 §7.1).
#[derive(Debug, Clone)]
pub struct Capture {
    pub request_line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Capture {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads `clients/<file>`.
pub fn capture(file: &str) -> Capture {
    let raw = std::fs::read(vector_path(&format!("clients/{file}"))).unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of head");
    let head = String::from_utf8(raw[..end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap().to_owned();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').expect("header line");
            (n.to_owned(), v.trim().to_owned())
        })
        .collect();
    let mut c = Capture {
        request_line,
        headers,
        body: raw[end + 4..].to_vec(),
    };
    if c.header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        c.body = dechunk(&c.body);
    } else if let Some(len) = c.header("content-length") {
        assert_eq!(
            len.parse::<usize>().unwrap(),
            c.body.len(),
            "Content-Length matches the capture"
        );
    }
    c
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size_text = std::str::from_utf8(&b[..eol]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        b = &b[eol + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[..size]);
        assert_eq!(&b[size..size + 2], b"\r\n", "chunk ends in CRLF");
        b = &b[size + 2..];
    }
}

/// All capture file names in `clients/`, sorted.
pub fn capture_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(vector_path("clients"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// The Python of one venv shared by every client test of the workspace:
/// `tmp/py-venv` (pass the test's `CARGO_TARGET_TMPDIR`) with the packages
/// of `testsuite/py/requirements.txt`, made or completed on first use.
/// Fails the calling test when `python3` (with venv) is missing or pip cannot
/// install from PyPI: a test that returned early would count as passed.
/// `imports` (e.g. `"requests, zeep"`) must import afterwards.
pub fn python_venv(tmp: &Path, imports: &str) -> PathBuf {
    use bulkwire_runtimes::{missing, need, Runtime};
    let runs = |c: &mut Command| c.stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    need(Runtime::Python);
    let venv = tmp.join("py-venv");
    let py = venv.join("bin/python");
    let has = |py: &Path| runs(Command::new(py).args(["-c", &format!("import {imports}")]));
    if py.exists() && has(&py) {
        return py;
    }
    if !py.exists() {
        let made = runs(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        assert!(made, "python3 -m venv failed");
    }
    let req = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("py/requirements.txt");
    // `python -m pip`, not `bin/pip`: the script's first line names the
    // interpreter of the directory the venv was made in, so a venv copied
    // with its target directory would install into the original.
    let pip = runs(
        Command::new(&py)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&req),
    );
    if !pip || !has(&py) {
        missing(
            &format!("{imports} from PyPI (testsuite/py/requirements.txt)"),
            "a reachable PyPI",
        );
    }
    py
}
