//! The `bulkwire` Python package proven by tests nobody on this project
//! wrote, driven from `cargo test`:
//!
//! - python-multipart's `tests/test_multipart.py` (with its `.http`/`.yaml`
//!   vectors, random splits and byte-by-byte feeding) and Starlette's
//!   `tests/test_formparsers.py` (under its own pytest configuration, which
//!   turns warnings into errors), taken from the pinned sdists that
//!   `pip download --no-deps --no-binary :all:` fetches into the target
//!   dir. Only their `tests/` (and `pyproject.toml`, for the pytest
//!   configuration) are extracted; nothing of theirs is in the repository.
//!   Our plugin `tests/py/bulkwire_swap.py` swaps the parser before
//!   collection; `tests/py/test_bulkwire_sentinel.py` proves the swap in the
//!   same run; the plugin marks each expected difference (strict xfail,
//!   with its reason) and writes a JSON report that the test checks: no
//!   failure or error, the sentinel passed, the expected differences
//!   exactly the listed ones, and at least as many passes as the suite had
//!   when the list was made.
//! - Our own Python tests (`tests/py/test_*.py`): the differential test
//!   against python-multipart over every vector, the adversarial inputs of
//!   the advisories, the iterator API and the README's FastAPI example.
//!
//! The package is built by `pip install` from `crates/bulkwire-py` with
//! maturin as its PEP 517 backend (release build, its own cargo target dir
//! under target/tmp so it never waits on the workspace's lock) into a venv
//! under target/tmp keyed by the pinned versions and reused across runs.
//!
//! A missing runtime (python3 with venv and pip, a reachable PyPI) FAILS
//! the tests: a test that returned early would be counted as passed. When
//! python3 with venv was already missing at build time (and `CI` unset),
//! they are marked ignored instead (build.rs, crate bulkwire-runtimes).

use bulkwire_runtimes::missing;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const PYTHON_MULTIPART: &str = "python-multipart==0.0.34";
const STARLETTE: &str = "starlette==1.10.0";
/// Everything the venv holds, pinned; the venv's name is derived from it.
const PINS: &[&str] = &[
    PYTHON_MULTIPART,
    STARLETTE,
    "maturin==1.16.0",
    "pytest==9.2.0",
    "pyyaml==6.0.3",
    "httpx2==2.16.2",
    "anyio==4.16.0",
    "fastapi==0.163.2",
];
/// A pytest run that takes longer than this is killed and fails the test.
const DEADLINE: Duration = Duration::from_secs(600);

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn work() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("bulkwire-py")
}

/// Runs `cmd` to completion within [`DEADLINE`]; returns success, stdout
/// and stderr. Output goes to files, so a chatty child never blocks.
fn run(mut cmd: Command, label: &str) -> (bool, String) {
    std::fs::create_dir_all(work()).unwrap();
    let log = work().join(format!("{label}.log"));
    let out = std::fs::File::create(&log).unwrap();
    cmd.stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null());
    let began = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if began.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            panic!(
                "{label} ran longer than {DEADLINE:?}: {cmd:?}\n{}",
                tail(&text)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    (status.success(), text)
}

/// The end of a log, for a failure message (a foreign test's id or output
/// can embed a whole 10 MB body).
fn tail(log: &str) -> &str {
    let mut at = log.len().saturating_sub(8000);
    while !log.is_char_boundary(at) {
        at += 1;
    }
    &log[at..]
}

fn pins_key() -> String {
    // FNV-1a of the pins: a new pin makes a new venv.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in PINS.join(" ").bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The venv's python, with the pins installed and bulkwire built from this
/// crate; made once per test process.
fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let venv = work().join(format!("venv-{}", pins_key()));
        let py = venv.join("bin/python");
        let ready = venv.join("pins-installed");
        let how = "Python >= 3.10 with venv and pip (Debian: apt-get install python3 python3-venv)";
        if !ready.exists() {
            let mut c = Command::new("python3");
            c.args(["-m", "venv", "--clear"]).arg(&venv);
            if !run(c, "venv").0 {
                missing("python3 -m venv", how);
            }
            let mut c = Command::new(&py);
            c.args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
                .args(PINS);
            let (ok, log) = run(c, "pip-pins");
            if !ok {
                let what = format!("the pinned packages from PyPI ({})", tail(&log));
                missing(&what, "a reachable PyPI");
            }
            std::fs::write(&ready, PINS.join("\n")).unwrap();
        }
        install_bulkwire(&py);
        py
    })
}

/// `pip install ./crates/bulkwire-py`: maturin (pinned in the venv, so no
/// build isolation) builds the release wheel. Its cargo target dir is our
/// own, so the build is incremental across runs. The backend runs the
/// `maturin` command, so the venv's bin goes first on PATH.
fn install_bulkwire(py: &Path) {
    let bin = py.parent().unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    let mut c = Command::new(py);
    c.env("PATH", std::env::join_paths(dirs).unwrap());
    c.args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(["--no-build-isolation", "--no-deps", "--force-reinstall"])
        .arg(crate_dir())
        .env("CARGO_TARGET_DIR", work().join("cargo-target"));
    let (ok, log) = run(c, "pip-bulkwire");
    assert!(
        ok,
        "building and installing bulkwire failed:\n{}",
        tail(&log)
    );
}

/// The foreign sdist's `tests/` and `pyproject.toml`, extracted once under
/// the target dir; returns the directory that holds them. One test at a
/// time (two tests read python-multipart's), and into a scratch directory
/// renamed into place, so that a directory that exists is whole even after
/// a run killed mid-extraction.
fn foreign(spec: &str) -> PathBuf {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (name, version) = spec.split_once("==").unwrap();
    let dist = name.replace('-', "_");
    let root = work().join("sdists");
    let dir = root.join(format!("{dist}-{version}"));
    if dir.join("tests").is_dir() {
        return dir;
    }
    let mut c = Command::new(python());
    c.args(["-m", "pip", "download", "-q", "--disable-pip-version-check"])
        .args(["--no-deps", "--no-binary", ":all:", spec, "-d"])
        .arg(&root);
    let (ok, log) = run(c, &format!("download-{dist}"));
    if !ok {
        missing(
            &format!("the sdist {spec} from PyPI ({})", tail(&log)),
            "a reachable PyPI",
        );
    }
    let tarball = root.join(format!("{dist}-{version}.tar.gz"));
    let scratch = root.join(format!(".extracting-{dist}-{version}"));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let mut c = Command::new("tar");
    c.arg("-xzf").arg(&tarball).arg("-C").arg(&scratch).args([
        "--wildcards",
        &format!("{dist}-{version}/tests/*"),
        &format!("{dist}-{version}/pyproject.toml"),
    ]);
    let (ok, log) = run(c, &format!("extract-{dist}"));
    assert!(ok, "extracting {tarball:?} failed: {log}");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(scratch.join(format!("{dist}-{version}")), &dir).unwrap();
    let _ = std::fs::remove_dir_all(&scratch);
    dir
}

/// Per-test outcomes and the listed expected differences of one run.
struct Report {
    results: BTreeMap<String, String>,
    differences: BTreeMap<String, String>,
}

impl Report {
    fn count(&self, state: &str) -> usize {
        self.results.values().filter(|s| *s == state).count()
    }
}

/// Runs pytest in `dir` on `args` with our plugin and sentinel.
fn pytest(dir: &Path, args: &[&str], label: &str) -> Report {
    let report = work().join(format!("{label}.json"));
    let _ = std::fs::remove_file(&report);
    let py_tests = crate_dir().join("tests/py");
    // The sentinel runs from inside the foreign root (a copy in the target
    // dir), so that its node id is a path like the suite's own.
    let sentinel_dir = dir.join("bulkwire_sentinel");
    std::fs::create_dir_all(&sentinel_dir).unwrap();
    let sentinel_file = sentinel_dir.join("test_bulkwire_sentinel.py");
    std::fs::copy(py_tests.join("test_bulkwire_sentinel.py"), &sentinel_file).unwrap();
    let mut c = Command::new(python());
    c.current_dir(dir)
        .args([
            "-m",
            "pytest",
            "-p",
            "bulkwire_swap",
            "-q",
            "-p",
            "no:cacheprovider",
        ])
        .arg(format!("--rootdir={}", dir.display()))
        .args(args)
        .arg(&sentinel_file)
        .env("PYTHONPATH", &py_tests)
        .env("BULKWIRE_REPORT", &report)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let (_, log) = run(c, label);
    let j: Value = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| panic!("{label}: pytest wrote no report:\n{}", tail(&log)));
    let map = |v: &Value| -> BTreeMap<String, String> {
        v.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    };
    let r = Report {
        results: map(&j["results"]),
        differences: map(&j["expected_differences"]),
    };
    let bad: Vec<_> = r
        .results
        .iter()
        .filter(|(_, s)| !matches!(s.as_str(), "passed" | "xfailed"))
        .collect();
    assert!(
        bad.is_empty(),
        "{label}: unexpected outcomes {bad:?}\n{}",
        tail(&log)
    );
    assert_eq!(j["exitstatus"], 0, "{label}: pytest failed\n{}", tail(&log));
    let sentinel = |name: &str| {
        r.results.iter().any(|(k, s)| {
            k.ends_with(&format!("test_bulkwire_sentinel.py::{name}")) && s == "passed"
        })
    };
    for name in ["test_parser_is_swapped", "test_starlette_is_swapped"] {
        assert!(
            sentinel(name),
            "{label}: sentinel {name} did not pass\n{}",
            tail(&log)
        );
    }
    // Every xfail is a listed difference, and every listed one xfailed.
    let xfailed: Vec<_> = r
        .results
        .iter()
        .filter(|(_, s)| *s == "xfailed")
        .map(|(k, _)| k.clone())
        .collect();
    let listed: Vec<_> = r.differences.keys().cloned().collect();
    assert_eq!(
        xfailed, listed,
        "{label}: xfails vs the expected-difference list"
    );
    eprintln!(
        "{label}: {} passed, {} expected differences, 0 failed",
        r.count("passed"),
        r.count("xfailed")
    );
    r
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn own_python_tests_pass() {
    // The differential test reads python-multipart's vectors (from its
    // sdist) and the project's own (testsuite/vectors).
    let pm = foreign(PYTHON_MULTIPART).join("tests/test_data/http");
    let ours = crate_dir().join("../../testsuite/vectors");
    let dirs =
        std::env::join_paths([pm, ours.join("python-multipart"), ours.join("clients")]).unwrap();
    let py_tests = crate_dir().join("tests/py");
    let report = work().join("own.json");
    let mut c = Command::new(python());
    c.current_dir(&py_tests)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "error",
        ])
        .args(["test_bulkwire.py", "test_differential.py"])
        .args(["-p", "bulkwire_swap"])
        .env("PYTHONPATH", &py_tests)
        .env("BULKWIRE_VECTOR_DIRS", dirs)
        .env("BULKWIRE_REPORT", &report)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let (ok, log) = run(c, "own");
    assert!(ok, "our Python tests failed:\n{}", tail(&log));
    let j: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let results = j["results"].as_object().unwrap();
    let passed = results.values().filter(|v| *v == "passed").count();
    assert_eq!(passed, results.len(), "every test of ours passes");
    assert!(passed >= 60, "too few tests ran: {passed}");
    eprintln!("own: {passed} passed");
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn python_multipart_own_suite_passes_on_bulkwire() {
    let dir = foreign(PYTHON_MULTIPART);
    let r = pytest(&dir, &["tests/test_multipart.py"], "suite-python-multipart");
    assert!(
        r.count("passed") >= 150,
        "too few tests ran: {}",
        r.count("passed")
    );
}

#[cfg_attr(
    missing_python,
    ignore = "needs python3 with venv (missing when this test was built; with CI set it fails instead)"
)]
#[test]
fn starlette_formparsers_suite_passes_on_bulkwire() {
    let dir = foreign(STARLETTE);
    let r = pytest(&dir, &["tests/test_formparsers.py"], "suite-starlette");
    assert!(
        r.count("passed") >= 40,
        "too few tests ran: {}",
        r.count("passed")
    );
}
