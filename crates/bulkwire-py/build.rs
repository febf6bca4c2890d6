//! Marks the Python suites ignored when python3 (with venv) is missing at build time, unless
//! `CI` is set (crate bulkwire-runtimes).
use bulkwire_runtimes::{declare, Runtime};

fn main() {
    declare(&[Runtime::Python]);
}
