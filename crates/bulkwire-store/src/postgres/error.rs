//! PostgreSQL's errors, classified once: out of room (507), unreachable
//! (503 with `Retry-After`), or any other failure.

use super::PgError;
use crate::MetaError;
use deadpool_postgres::{PoolError, TimeoutType};
use std::time::Duration;
use tokio_postgres::error::SqlState;

/// An error and its causes, "kind: cause: ...": tokio-postgres puts the
/// server's message in the cause.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Out of disk space (SQLSTATE 53100, `disk_full`): the store is full
/// (507), not broken. The other "insufficient resources" codes (memory,
/// connections, configuration limits) are not out of room.
pub(super) fn disk_full(e: &PgError) -> bool {
    e.code() == Some(&SqlState::DISK_FULL)
}

pub(super) fn error(message: String, full: bool) -> MetaError {
    match full {
        true => MetaError::full(message),
        false => MetaError::new(message),
    }
}

/// The database could not be reached or went away (a closed connection, a
/// connection exception, SQLSTATE class 08, or a server shutting down or
/// starting, 57P01–57P03): the request may succeed once it is back, so
/// the client gets 503 with `Retry-After`, not 500.
fn unreachable(e: &PgError) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(c) => {
            let c = c.code();
            c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03")
        }
        // No SQLSTATE: the failure was on the wire, not in a statement.
        None => e.as_db_error().is_none(),
    }
}

/// A statement's failure, as the request path reports it.
pub(super) fn db(e: PgError) -> MetaError {
    let mut m = error(format!("PostgreSQL: {}", chain(&e)), disk_full(&e));
    m.unavailable = unreachable(&e);
    m
}

/// Why the pool handed out no connection, and whether for want of space.
pub(super) fn no_connection(e: &PoolError, size: usize, timeout: Duration) -> (String, bool) {
    match e {
        PoolError::Backend(e) => (chain(e), disk_full(e)),
        PoolError::Timeout(TimeoutType::Wait) => (
            format!("all {size} connections stayed busy for {timeout:?}"),
            false,
        ),
        PoolError::Timeout(TimeoutType::Create) => {
            (format!("no connection within {timeout:?}"), false)
        }
        PoolError::Timeout(TimeoutType::Recycle) => (
            format!("checking a pooled connection took over {timeout:?}"),
            false,
        ),
        e => (e.to_string(), false),
    }
}
