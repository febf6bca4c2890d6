//! The one error type of the load tool.
//!
//! Errors here stop a run before or while it starts (bad options, unreadable
//! file, a limit); failures of single requests are not errors but outcomes,
//! counted in the [`crate::Report`].

use crate::limits::LimitKind;
use std::fmt;

/// Broad class of an error; decides the exit code of `bulkwire load`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An option or argument is invalid (URL, rate, threshold, pattern …).
    Config,
    /// Reading a file, resolving the host, starting the runtime.
    Io,
    /// A configured [`crate::Limits`] value was exceeded.
    Limit,
    /// Nothing answered: no request of a run's first second got an answer
    /// (refused, reset, timed out), so the run was stopped. The message
    /// names the address and asks the likely question (`connection
    /// refused: is a server listening on 127.0.0.1:8099?`).
    Unreachable,
}

impl ErrorKind {
    /// Stable lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Config => "config",
            ErrorKind::Io => "io",
            ErrorKind::Limit => "limit",
            ErrorKind::Unreachable => "unreachable",
        }
    }
}

/// A load-tool error. Boxed so that `Result`s stay small.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(Box<Inner>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    kind: ErrorKind,
    message: String,
    limit: Option<(LimitKind, u64)>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error(Box::new(Inner {
            kind,
            message: message.into(),
            limit: None,
        }))
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Config, message)
    }

    pub(crate) fn io(context: impl fmt::Display, e: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Io, format!("{context}: {e}"))
    }

    pub(crate) fn unreachable(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unreachable, message)
    }

    pub(crate) fn limit(limit: LimitKind, value: u64, what: impl Into<String>) -> Self {
        Error(Box::new(Inner {
            kind: ErrorKind::Limit,
            message: what.into(),
            limit: Some((limit, value)),
        }))
    }

    /// What class of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The description, without the limit.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// For [`ErrorKind::Limit`]: which limit and its configured value.
    pub fn limit_exceeded(&self) -> Option<(LimitKind, u64)> {
        self.0.limit
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.limit {
            Some((l, v)) => write!(f, "limit {} = {} exceeded: {}", l.name(), v, self.0.message),
            // The message starts with what happened (`connection refused: …`).
            None if self.0.kind == ErrorKind::Unreachable => f.write_str(&self.0.message),
            None => write!(f, "{}: {}", self.0.kind.as_str(), self.0.message),
        }
    }
}

impl std::error::Error for Error {}

/// Shorthand used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
