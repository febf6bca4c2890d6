//! When a run has nothing to measure, or stops having anything (issue 23:
//! 84,124 refused connections reported as 84,124 completions at 0.00 ms and
//! an exit code of 0).
//!
//! - **Nothing answers.** Once every request sent in the run's first second
//!   has ended, and none of the run's requests has been answered, the run is
//!   stopped at once: the load is not measuring a server but a closed port,
//!   a wrong host or a proxy that resets. The error names the address and
//!   the likely cause (`connection refused: is a server listening on
//!   127.0.0.1:8099?`). A slow server is not mistaken for an absent one: the
//!   verdict waits for the first second's requests to end, answered or timed
//!   out; and a server that comes up during the first second has answered
//!   by then. A run shorter than a second that got no answer at all ends
//!   with the same error.
//! - **The server stopped answering.** A server that goes away later in the
//!   run does not stop it: its errors are counted by reason and the run goes
//!   on to its end, because a restart in the middle of a load is part of
//!   what users feel, and one that comes back shows in the timeline. But a
//!   run whose requests all got no answer for its last [`QUIET`] or more
//!   (from the last answer to the last request that ended) did not see the
//!   server come back: the report says so ([`StoppedAnswering`]) and
//!   `bulkwire load` exits non-zero without any threshold, so a crash in a
//!   CI load test cannot pass silently. Thresholds (`errors<1%`) judge
//!   everything short of that.

use crate::error::Error;
use crate::stats::Live;
use crate::target::refused;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How long the first second is, and how long a run must have seen no
/// answer at its end to say the server stopped answering.
pub const QUIET: Duration = Duration::from_secs(1);

/// How often the first second's verdict is looked at once that second is
/// over (until its requests have ended: at most the request timeout).
const POLL: Duration = Duration::from_millis(10);

/// The requests sent in a run's first second, and how many have ended.
pub(crate) struct FirstSecond {
    end: Instant,
    sent: AtomicU64,
    ended: AtomicU64,
}

impl FirstSecond {
    pub(crate) fn new(start: Instant) -> FirstSecond {
        FirstSecond {
            end: start + QUIET,
            sent: AtomicU64::new(0),
            ended: AtomicU64::new(0),
        }
    }

    /// Notes a request sent at `at`; true if it is one of the first
    /// second's, to be passed to [`Self::ended`] when it ends.
    pub(crate) fn sent(&self, at: Instant) -> bool {
        let first = at < self.end;
        if first {
            self.sent.fetch_add(1, Ordering::AcqRel);
        }
        first
    }

    /// Notes that a request of the first second ended, answered or not
    /// (after it was recorded, so that its answer is in [`Live`] first).
    pub(crate) fn ended(&self) {
        self.ended.fetch_add(1, Ordering::AcqRel);
    }

    /// After the first second: whether every request sent in it has ended.
    fn all_ended(&self) -> bool {
        let sent = self.sent.load(Ordering::Acquire);
        sent > 0 && self.ended.load(Ordering::Acquire) == sent
    }
}

/// Resolves when the run must stop because nothing answered (see the
/// module docs); pending forever once an answer came.
pub(crate) async fn nothing_answered(first: &FirstSecond, live: &Live) {
    tokio::time::sleep_until(first.end).await;
    let mut tick = tokio::time::interval(POLL);
    loop {
        tick.tick().await;
        // Ended first: a request counts its answer in `live` before it
        // counts as ended, so an ended answer is seen below.
        let all_ended = first.all_ended();
        if live.completed.load(Ordering::Acquire) > 0 {
            return std::future::pending().await;
        }
        if all_ended {
            return;
        }
    }
}

/// What was tried, for [`unreachable`].
pub(crate) struct Tried<'a> {
    /// Each target's [`crate::Target::place`].
    pub places: Vec<String>,
    /// The first failed connect's error, if a connect failed.
    pub connect_error: Option<&'a std::io::Error>,
    /// Requests without an answer so far, by reason.
    pub by_error: BTreeMap<&'static str, u64>,
    pub timeout: Duration,
}

/// The error that stops a run nothing answered: the most common reason's
/// likely cause first, then the counts.
pub(crate) fn unreachable(t: &Tried<'_>) -> Error {
    let place = t.places.join(", ");
    let top = t.by_error.iter().max_by_key(|(_, n)| **n).map(|(k, _)| *k);
    let cause = match (top, t.connect_error) {
        (Some("connect"), Some(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            refused(&place)
        }
        (Some("connect"), Some(e)) => format!("cannot connect to {place}: {e}"),
        (Some("connect-timeout"), _) => format!(
            "connecting to {place} timed out ({:?}): is the host up and the port open?",
            t.timeout
        ),
        (Some("io"), _) => format!(
            "{place} closed or reset the connection before answering: is it an HTTP/1.1 \
             server (https:// is not supported)?"
        ),
        (Some("timeout"), _) => format!("no answer from {place} within {:?}", t.timeout),
        (Some("render"), _) => "no request could be made: its head or body failed to render".into(),
        _ => format!("no answer from {place}"),
    };
    let counts: Vec<String> = t
        .by_error
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect();
    Error::unreachable(format!(
        "{cause} (no request of the first second got an answer; without an answer: {})",
        counts.join(", ")
    ))
}

/// The server stopped answering before the run ended (see the module docs).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StoppedAnswering {
    /// When the last answer came, in seconds since the start.
    pub last_answer_s: f64,
    /// When the last request ended, in seconds since the start.
    pub last_ended_s: f64,
    /// Requests that ended after the last answer, none of them answered.
    pub no_answer: u64,
}

impl std::fmt::Display for StoppedAnswering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server stopped answering: its last answer came {:.2} s into the run, and \
             the {} requests that ended after it (until {:.2} s) got none",
            self.last_answer_s, self.no_answer, self.last_ended_s
        )
    }
}

/// Whether the run ended on [`QUIET`] or more of requests without an
/// answer: `last_answer` and `last_ended` since the start, `after` the
/// requests that ended without an answer after the last answer.
pub fn stopped_answering(
    last_answer: Option<Duration>,
    last_ended: Option<Duration>,
    after: u64,
) -> Option<StoppedAnswering> {
    let (answer, ended) = (last_answer?, last_ended?);
    (after > 0 && ended.saturating_sub(answer) >= QUIET).then_some(StoppedAnswering {
        last_answer_s: answer.as_secs_f64(),
        last_ended_s: ended.as_secs_f64(),
        no_answer: after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tried(by_error: &[(&'static str, u64)], e: Option<&std::io::Error>) -> String {
        unreachable(&Tried {
            places: vec!["127.0.0.1:8099".into()],
            connect_error: e,
            by_error: by_error.iter().copied().collect(),
            timeout: Duration::from_secs(30),
        })
        .to_string()
    }

    #[test]
    fn a_refused_connection_asks_whether_a_server_is_listening_there() {
        let e = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let msg = tried(&[("connect", 84_124)], Some(&e));
        assert!(
            msg.starts_with("connection refused: is a server listening on 127.0.0.1:8099? ("),
            "{msg}"
        );
        assert!(msg.ends_with("without an answer: connect: 84124)"), "{msg}");
    }

    #[test]
    fn other_reasons_name_their_likely_cause() {
        let e = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let msg = tried(&[("connect", 3)], Some(&e));
        assert!(
            msg.starts_with("cannot connect to 127.0.0.1:8099: "),
            "{msg}"
        );
        let msg = tried(&[("io", 5), ("connect", 1)], Some(&e));
        assert!(msg.starts_with("127.0.0.1:8099 closed or reset"), "{msg}");
        assert!(msg.contains("connect: 1, io: 5"), "{msg}");
        let msg = tried(&[("timeout", 2)], None);
        assert!(
            msg.starts_with("no answer from 127.0.0.1:8099 within 30s"),
            "{msg}"
        );
        let msg = tried(&[("connect-timeout", 2)], None);
        assert!(msg.contains("timed out (30s)"), "{msg}");
    }

    #[test]
    fn a_server_that_went_away_for_the_runs_last_second_stopped_answering() {
        let s = |a: u64, e: u64, n| {
            stopped_answering(
                Some(Duration::from_millis(a)),
                Some(Duration::from_millis(e)),
                n,
            )
        };
        let gone = s(4_000, 10_000, 250).expect("six seconds without an answer");
        assert_eq!(
            (gone.last_answer_s, gone.last_ended_s, gone.no_answer),
            (4.0, 10.0, 250)
        );
        assert_eq!(s(9_500, 10_000, 30), None, "half a second is a blip");
        assert_eq!(s(4_000, 10_000, 0), None, "nothing failed after it");
        assert_eq!(stopped_answering(None, Some(QUIET * 3), 5), None);
    }
}
