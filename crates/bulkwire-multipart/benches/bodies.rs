//! Locates (and on first use generates) the four standard benchmark bodies
//! A–D written by `shared/bench/gen_bodies.py`.

use std::path::{Path, PathBuf};

pub const BOUNDARY: &[u8] = b"----WebKitFormBoundary7MA4YWxkTrZu0gW";

/// `$BULKWIRE_BODIES`, else `<workspace>/target/bench-bodies`.
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("BULKWIRE_BODIES") {
        return d.into();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("target/bench-bodies");
    if !dir.join("meta.json").exists() {
        let gen = root.join("../shared/bench/gen_bodies.py");
        let ok = std::process::Command::new("python3")
            .arg(&gen)
            .arg(&dir)
            .status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "could not run {}",
            gen.display()
        );
    }
    dir
}

pub fn load(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(format!("{name}.bin"))).expect("benchmark body")
}
