//! Real servers for bulkwire's tests: PostgreSQL and SeaweedFS (an S3-compatible object store),
//! Azurite (Azure Blob Storage) and fake-gcs-server (Google Cloud Storage), and local stand-ins
//! for the cloud's credential endpoints (EC2's and ECS's metadata services, STS over HTTPS).
//!
//! Why real servers: the store writes through a database and an object store, and the failures
//! that matter (a part below S3's 5 MiB minimum, an abandoned multipart upload, a database that
//! goes away for a few seconds) only show against the real thing. A mock would agree with
//! whatever we believed when writing it.
//!
//! Why `Err(String)` and never a skip: a test that silently passes because PostgreSQL was not
//! installed is worse than no test. Every start function says exactly what was missing or what
//! failed (with the tail of the server's log); callers turn that into a panic with [`must`].
//!
//! How servers are cleaned up:
//! - a server is a child of one long-lived "spawner" thread and carries a parent-death signal
//!   (SIGKILL), so it dies with the test process even when its handle sits in a `static` that is
//!   never dropped (module `spawn`);
//! - its files live in a scratch directory locked by the test process; directories, PostgreSQL
//!   shared memory and SeaweedFS sockets left behind by earlier, killed test processes are swept
//!   on the next start (module `scratch`).
//!
//! Nothing here is async: tests call these functions from plain `#[test]`s, outside any runtime.
#![deny(clippy::undocumented_unsafe_blocks)]

mod banner;
mod creds;
mod emulators;
mod postgres;
mod proc;
mod scratch;
mod seaweed;
mod spawn;
mod sts;

pub use banner::{await_banner, listening_addr};
pub use creds::{CredsServer, Mint, CONTAINER_TOKEN};
pub use emulators::{shared_azurite, shared_fake_gcs, Emulator, AZURITE_ACCOUNT, AZURITE_KEY};
pub use postgres::{shared_postgres, Certs, Postgres, CERT_USER};
pub use scratch::test_dir;
pub use seaweed::{default_cache, shared_seaweed, weed_binary, Seaweed, TempKeys};
pub use sts::{StsRequest, StsServer};

/// Unwraps a start result, panicking with its reason: a test needing a server that could not be
/// started must fail, not skip.
#[track_caller]
pub fn must<T>(r: Result<T, String>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("test environment: {e}"),
    }
}
