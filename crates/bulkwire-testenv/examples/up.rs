//! Starts a real PostgreSQL and SeaweedFS (S3) for benchmarks and manual
//! runs, prints their settings as shell assignments, and keeps them up
//! until its standard input closes (or it is killed: both servers die with
//! it, by the parent-death signal `bulkwire-testenv` sets).
//!
//! ```sh
//! cargo run --release -p bulkwire-testenv --example up -- BUCKET > env.sh < fifo &
//! . ./env.sh   # BULKWIRE_META, BULKWIRE_BLOBS, AWS_* ; then bulkwire serve
//! ```

use bulkwire_testenv::{default_cache, must, Postgres, Seaweed};
use std::io::{Read, Write};

fn main() {
    let bucket = std::env::args().nth(1).unwrap_or_else(|| "bulkwire".into());
    let pg = must(Postgres::start());
    let sw = must(Seaweed::start(&default_cache()));
    must(sw.create_bucket(&bucket));
    let mut out = std::io::stdout().lock();
    let lines = [
        format!("BULKWIRE_META={}", pg.url()),
        format!("BULKWIRE_BLOBS=s3://{bucket}/bench"),
        format!("AWS_ENDPOINT_URL={}", sw.endpoint()),
        format!("AWS_ACCESS_KEY_ID={}", sw.access_key()),
        format!("AWS_SECRET_ACCESS_KEY={}", sw.secret_key()),
        format!("AWS_REGION={}", sw.region()),
        "AWS_ALLOW_HTTP=true".to_string(),
        format!("TESTENV_PG_PORT={}", pg.port()),
        "TESTENV_READY=1".to_string(),
    ];
    for l in lines {
        writeln!(out, "export {l}").unwrap();
    }
    out.flush().unwrap();
    drop(out);
    // Up until stdin closes.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(sw);
    drop(pg);
}
