//! The rule end to end, through a real `cargo test` of a small crate (tests/fixture) whose one
//! test needs Node, with Node hidden (`BULKWIRE_HIDE_RUNTIMES=node`, as if not installed):
//! without `CI` the summary counts it as ignored (not passed); with `CI=true` it fails, saying
//! what the CI machine lacks.

use std::path::Path;
use std::process::{Command, Output};

fn cargo_test_fixture(ci: bool) -> Output {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixture");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.arg("test")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .arg("--offline")
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture"),
        )
        .env("BULKWIRE_HIDE_RUNTIMES", "node")
        .env_remove("CI");
    if ci {
        cmd.env("CI", "true");
    }
    cmd.output().expect("cargo runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn missing_runtime_is_ignored_outside_ci_and_fails_under_ci() {
    let out = cargo_test_fixture(false);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("test needs_node ... ignored, needs node and npm"),
        "{t}"
    );
    assert!(t.contains("0 passed; 0 failed; 1 ignored"), "{t}");

    let out = cargo_test_fixture(true);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("test needs_node ... FAILED"), "{t}");
    assert!(t.contains("CI is set and Node is missing"), "{t}");
}
