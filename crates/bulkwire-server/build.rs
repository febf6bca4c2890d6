//! Marks the tests whose runtimes this machine lacks as ignored (unless `CI` is set): see the
//! bulkwire-runtimes crate.
use bulkwire_runtimes::{declare, Runtime};

fn main() {
    declare(&[
        Runtime::Python,
        Runtime::Node,
        Runtime::Java,
        Runtime::Curl,
        Runtime::Chromium,
        Runtime::Root,
    ]);
}
