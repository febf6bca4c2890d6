//! Which third-party runtimes a test needs (Python, Node, Java, curl, Chromium, root), decided
//! when the tests are built, so that `cargo test` never counts a test that did not run as passed.
//!
//! Why at build time: libtest knows "ignored" only from the `#[ignore]` attribute. A test that
//! finds its runtime missing when it runs can only pass (a lie: `cargo test` hides the test's
//! stderr) or fail. So each crate's build script calls [`declare`] with the runtimes its tests
//! use. Unless `CI` is set, a missing runtime sets `cfg(missing_<name>)`, and tests carry
//! `#[cfg_attr(missing_node, ignore = "needs node and npm")]`: `cargo test`'s summary counts
//! them as ignored and `cargo test -- --ignored` lists them. With `CI` set no such cfg is ever
//! set: the test runs, and [`need`] (or the test's own setup) fails it, naming what the CI
//! machine lacks. `.ci/run` installs what its machine lacks first.
//!
//! `BULKWIRE_HIDE_RUNTIMES=node,java` makes the runtimes named there count as missing, at build
//! time and in [`need`]: to leave slow suites out locally, and for this crate's own test of the
//! rule. The build script reruns when `CI`, `PATH`, `TMPDIR` or that variable changes; a runtime
//! installed without changing any of them needs a `cargo clean -p <crate>` to be seen.

use std::path::Path;
use std::process::{Command, Stdio};

/// A runtime some test needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// `python3` with its `venv` module (the tests install their packages from PyPI).
    Python,
    /// `node` and `npm` (the tests install their packages from the npm registry).
    Node,
    /// `java`, `javac` and `mvn` (the tests fetch their jars from Maven Central).
    Java,
    /// `curl`.
    Curl,
    /// Debian's Chromium at `/usr/bin/chromium`.
    Chromium,
    /// Root, for `mount -t tmpfs` (a full disk on demand).
    Root,
    /// A temp dir whose file system takes `O_DIRECT`.
    ODirect,
}

impl Runtime {
    /// The cfg a build script sets when this runtime is missing (outside CI).
    pub fn cfg(self) -> &'static str {
        match self {
            Runtime::Python => "missing_python",
            Runtime::Node => "missing_node",
            Runtime::Java => "missing_java",
            Runtime::Curl => "missing_curl",
            Runtime::Chromium => "missing_chromium",
            Runtime::Root => "missing_root",
            Runtime::ODirect => "missing_odirect",
        }
    }

    /// What to install (or change) to have it.
    pub fn install(self) -> &'static str {
        match self {
            Runtime::Python => {
                "Python 3 with its venv module (Debian: apt-get install python3 python3-venv)"
            }
            Runtime::Node => "Node.js >= 18 with npm (Debian: apt-get install nodejs npm)",
            Runtime::Java => "a JDK 17 and Maven (Debian: apt-get install openjdk-17-jdk maven)",
            Runtime::Curl => "curl (Debian: apt-get install curl)",
            Runtime::Chromium => "Debian's chromium (apt-get install chromium)",
            Runtime::Root => "run the tests as root (they mount an 8 MiB tmpfs)",
            Runtime::ODirect => "a temp dir (TMPDIR) on a file system with O_DIRECT (not tmpfs)",
        }
    }

    /// Whether this machine has it now (and `BULKWIRE_HIDE_RUNTIMES` does not hide it).
    pub fn present(self) -> bool {
        if hidden(self) {
            return false;
        }
        match self {
            Runtime::Python => runs("python3", &["-m", "venv", "--help"]),
            Runtime::Node => runs("node", &["--version"]) && runs("npm", &["--version"]),
            Runtime::Java => {
                runs("java", &["-version"])
                    && runs("javac", &["-version"])
                    && runs("mvn", &["--version"])
            }
            Runtime::Curl => runs("curl", &["--version"]),
            Runtime::Chromium => Path::new("/usr/bin/chromium").exists(),
            Runtime::Root => is_root(),
            Runtime::ODirect => o_direct(),
        }
    }
}

/// For a build script: declares every cfg (so rustc's `unexpected_cfgs` check knows them) and
/// sets the cfg of each missing runtime in `needed`, unless `CI` is set.
pub fn declare(needed: &[Runtime]) {
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=TMPDIR");
    println!("cargo::rerun-if-env-changed={HIDE}");
    for r in ALL {
        println!("cargo::rustc-check-cfg=cfg({})", r.cfg());
    }
    if std::env::var_os("CI").is_some() {
        return;
    }
    for r in needed.iter().filter(|r| !r.present()) {
        println!("cargo::rustc-cfg={}", r.cfg());
        println!(
            "cargo::warning=tests needing {r:?} are ignored: {} is missing",
            r.install()
        );
    }
}

/// For a test: fails it when `runtime` is missing, saying what to install (and, with `CI` set,
/// that the CI machine must provide it). Only reached when the build saw the runtime, or under
/// CI; the runtime went missing since, or CI lacks it.
#[track_caller]
pub fn need(runtime: Runtime) {
    if !runtime.present() {
        missing(&format!("{runtime:?}"), runtime.install());
    }
}

/// Fails the test for something missing (a runtime, a package a registry would not give).
#[track_caller]
pub fn missing(what: &str, install: &str) -> ! {
    if std::env::var_os("CI").is_some() {
        panic!("CI is set and {what} is missing: the CI machine must provide it ({install})");
    }
    panic!("{what} is missing; install it to run this test: {install}");
}

const ALL: [Runtime; 7] = [
    Runtime::Python,
    Runtime::Node,
    Runtime::Java,
    Runtime::Curl,
    Runtime::Chromium,
    Runtime::Root,
    Runtime::ODirect,
];

const HIDE: &str = "BULKWIRE_HIDE_RUNTIMES";

/// Whether `BULKWIRE_HIDE_RUNTIMES` names `r` (by its cfg name without `missing_`).
fn hidden(r: Runtime) -> bool {
    let name = &r.cfg()["missing_".len()..];
    std::env::var(HIDE)
        .unwrap_or_default()
        .split(',')
        .any(|n| n.trim().eq_ignore_ascii_case(name))
}

fn runs(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Reads the effective uid from /proc (no libc dependency for one number).
fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        == Some("0")
}

/// Opens a scratch file in the temp dir with O_DIRECT (Linux; elsewhere: never).
fn o_direct() -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_DIRECT on the Linux architectures we build for (x86_64 and aarch64 differ).
        #[cfg(target_arch = "aarch64")]
        const O_DIRECT: i32 = 0o200000;
        #[cfg(not(target_arch = "aarch64"))]
        const O_DIRECT: i32 = 0o40000;
        let path = std::env::temp_dir().join(format!("bulkwire-odirect-{}", std::process::id()));
        let ok = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(O_DIRECT)
            .open(&path)
            .is_ok();
        let _ = std::fs::remove_file(&path);
        ok
    }
    #[cfg(not(target_os = "linux"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_names_are_distinct_and_prefixed() {
        let mut names: Vec<_> = ALL.iter().map(|r| r.cfg()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        assert!(names.iter().all(|n| n.starts_with("missing_")));
    }

    #[test]
    fn a_command_that_does_not_exist_is_not_present() {
        assert!(!runs("bulkwire-no-such-command", &[]));
        assert!(runs("true", &[]));
        assert!(!runs("false", &[]));
    }

    #[test]
    #[should_panic(expected = "is missing")]
    fn missing_fails_the_test() {
        missing("a runtime", "something");
    }
}
