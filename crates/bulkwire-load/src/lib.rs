//! The bulkwire load generator: `bulkwire load`, and the runner the
//! `bench` commands build on.
//!
//! - Bodies come from [`scenario`] templates: every static byte encoded once,
//!   the file bytes read once and shared (`Bytes`), per-request `{seq}` and
//!   `{uuid}` values ([`pattern`]) in small separate pieces, written with
//!   the request head in one vectored write (`writev`).
//! - [`runner`]: open loop at a fixed arrival rate (latency measured from
//!   each request's intended send time, so no coordinated omission, with the
//!   uncorrected view beside it and a count of late sends) or closed loop,
//!   over a pool of HTTP/1.1 keep-alive connections on per-thread runtimes,
//!   with a minimal HTTP/1.1 client of its own (`wire`: hyper's client
//!   dispatch cost more CPU per request than the rest of the loop). Several
//!   nodes of one service are loaded at once by dealing the connections out
//!   round-robin, per connection as an L4 balancer, with counts per node.
//! - What counts as an error: a non-2xx answer, an XML-RPC or SOAP fault
//!   whatever its status (found in the first bytes of an XML answer,
//!   [`fault`]), and a request without an answer; the report breaks every
//!   answer down by status and every fault by code. Only answers are
//!   *completed* (with a latency, in req/s); a request without one is an
//!   error by reason.
//! - [`verdict`]: a run none of whose first second's requests got an
//!   answer stops at once with an error naming the address (`connection
//!   refused: is a server listening on 127.0.0.1:8099?`); a run that ends
//!   with the server no longer answering says so in its report.
//! - [`stats`]: HdrHistogram percentiles and a per-second timeline;
//!   [`memory`]: the server's RSS from `/proc` or `/metrics`;
//!   [`threshold`]: pass/fail criteria; [`output`] and [`html`]: table,
//!   progress line, HTML report with SVG plots.
//!
//! - [`bench`]: `bulkwire bench sweep` (server memory and time against
//!   payload size, per format) and `bulkwire bench latency` (percentiles at
//!   a fixed rate), starting `bulkwire serve` or a peer server themselves.
//!
//! Everything kept is bounded by [`Limits`].
#![forbid(unsafe_code)]

pub mod app;
pub mod bench;
pub mod body;
mod error;
pub mod fault;
pub mod html;
mod limits;
pub mod memory;
pub mod output;
pub mod pattern;
pub mod runner;
pub mod scenario;
pub mod stats;
pub mod target;
pub mod threshold;
pub mod units;
pub mod verdict;
mod wire;

pub use app::{execute, Options, Outcome, ScenarioKind};
pub use error::{Error, ErrorKind, Result};
pub use limits::{LimitKind, Limits};
pub use pattern::{Pattern, Vars};
pub use runner::{run, run_blocking, Mode, Plan, Report};
pub use scenario::{Payload, Scenario};
pub use stats::{Latency, Live};
pub use target::Target;
pub use threshold::{Threshold, ThresholdResult};
