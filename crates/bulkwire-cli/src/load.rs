//! `bulkwire load`: argument parsing only; the work is in `bulkwire_load`.
//!
//! Exit codes: 0 all thresholds passed, 99 a threshold failed (as k6),
//! 2 the server stopped answering and had not come back when the run ended
//! (the outputs are still written; 2 wins over 99), 1 the run could not be
//! made (bad option, unreadable file, …) or nothing answered: no request
//! of the first second got an answer, and the run was stopped at once
//! (`connection refused: is a server listening on 127.0.0.1:8099?`).
//!
//! An error is a non-2xx answer, an XML-RPC or SOAP fault whatever its
//! status, or a request without an answer; the summary breaks every answer
//! down by status and every fault by code.
//!
//! `--target` adds nodes of the same service beside the positional URL;
//! connections are dealt out over them round-robin, per connection as an
//! L4 balancer (`bulkwire_load::runner`).

use bulkwire_load::units::{parse_duration, parse_rate};
use bulkwire_load::{Options, ScenarioKind};
use clap::ValueEnum;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum)]
enum Scenario {
    /// multipart/form-data (RFC 7578) from --field and --file.
    Formdata,
    /// The --file bytes as the body, sent as --content-type or else as the
    /// file's own type (with --method PUT for `PUT /v1/media/{name}`).
    Raw,
    /// XML-RPC `wp.uploadFile` of --file named --filename; --user goes in
    /// the call.
    Xmlrpc,
    /// SOAP `upload` with --file as an MTOM/XOP attachment; --user is Basic.
    Mtom,
}

#[derive(clap::Args)]
#[command(
    after_help = "Exit codes: 0 done, every threshold passed; 99 a threshold failed; \
2 the server stopped answering and had not come back when the run ended; 1 the run could \
not be made, or nothing answered in its first second (it stops at once)."
)]
pub struct Args {
    /// Where to send, `http://host:port/path` (the first target). The path
    /// and query may use {seq} and {uuid}, rendered per request:
    /// `http://127.0.0.1:8080/v1/media/img-{seq}.jpg` with `--method PUT`.
    url: String,
    /// The request method: POST (default), or PUT for raw uploads to
    /// `PUT /v1/media/{name}`, or any other but HEAD and CONNECT.
    #[arg(long, short = 'X', default_value = "POST")]
    method: String,
    /// Another node of the same service (repeatable), with the same path
    /// and query as URL. Balanced per connection, round-robin, as an L4
    /// balancer: connection i goes to target i mod n (URL first) for the
    /// whole run, so give at least as many connections as targets. Headers
    /// and auth go to every target; the summary and JSON add per-target
    /// requests, errors and req/s.
    #[arg(long = "target", value_name = "URL")]
    targets: Vec<String>,
    /// What each request's body is.
    #[arg(long, value_enum, default_value = "formdata")]
    scenario: Scenario,
    /// Payload file, read once and shared by every request (repeatable for
    /// form-data).
    #[arg(long)]
    file: Vec<PathBuf>,
    /// Form field name of the file parts.
    #[arg(long, default_value = "file")]
    file_field: String,
    /// Filename of the file parts; may use {seq} and {uuid}.
    #[arg(long)]
    filename: Option<String>,
    /// Content type of the file parts (formdata), of the body (raw), the
    /// `type` member (xmlrpc) or the attachment (mtom). Default: each
    /// file's own, from its magic bytes, then its extension, else
    /// application/octet-stream.
    #[arg(long)]
    content_type: Option<String>,
    /// A text field `name=value`; the value may use {seq} and {uuid}.
    #[arg(long = "field", value_name = "NAME=VALUE")]
    fields: Vec<String>,
    /// An extra header `Name: value`; the value may use {seq} and {uuid}.
    #[arg(long = "header", short = 'H')]
    headers: Vec<String>,
    /// Bearer token for `Authorization`.
    #[arg(long, conflicts_with = "user")]
    token: Option<String>,
    /// `user:password` for Basic auth (xmlrpc: username and password params).
    #[arg(long)]
    user: Option<String>,
    /// Open loop at this arrival rate (`2000/s`, `120/m`); closed loop without.
    #[arg(long)]
    rate: Option<String>,
    /// Connections (pool cap): default 64 open loop, 10 closed loop.
    #[arg(long, short = 'c')]
    connections: Option<usize>,
    /// Stop issuing after this long (`10s`, `2m`); default 10s unless
    /// --requests is given.
    #[arg(long, short = 'd')]
    duration: Option<String>,
    /// Stop issuing after this many requests.
    #[arg(long, short = 'n')]
    requests: Option<u64>,
    /// Per-request timeout: connecting, sending and the whole answer; a
    /// request past it counts as an error (`timeout`).
    #[arg(long, default_value = "30s")]
    timeout: String,
    /// Open loop: count a request as late when sent more than this after its
    /// intended time.
    #[arg(long, default_value = "10ms")]
    late_after: String,
    /// Client threads, each with its own event loop and a share of the
    /// connections (default: available parallelism).
    #[arg(long)]
    threads: Option<usize>,
    /// Write the report as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a self-contained HTML report with SVG plots.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Pass/fail criterion, e.g. `p95<50ms`, `errors<0.1%` (repeatable);
    /// exit code 99 when any fails. Errors are non-2xx answers, XML-RPC and
    /// SOAP faults (also over 200) and requests without an answer.
    #[arg(long = "threshold")]
    thresholds: Vec<String>,
    /// Sample this process's resident memory (/proc/PID/status) during the
    /// run.
    #[arg(long, conflicts_with = "watch_metrics")]
    watch_pid: Option<u32>,
    /// Sample the server's resident memory from this Prometheus metrics URL
    /// (`bulkwire_process_resident_memory_bytes`, as `bulkwire serve`
    /// exports it, or `process_resident_memory_bytes`); one URL, also with
    /// --target. Without either gauge the run goes on, with a warning and
    /// no memory figures.
    #[arg(long)]
    watch_metrics: Option<String>,
    /// Memory sampling interval.
    #[arg(long, default_value = "100ms")]
    sample_every: String,
    /// No table, no progress line.
    #[arg(long, short = 'q')]
    quiet: bool,
}

pub fn run(a: Args) -> ExitCode {
    let opts = match options(a) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bulkwire load: {e}");
            return ExitCode::FAILURE;
        }
    };
    match bulkwire_load::execute(&opts) {
        Ok(out) => {
            for t in &out.failed {
                eprintln!(
                    "bulkwire load: threshold {} failed (actual {:.3} {})",
                    t.threshold, t.actual, t.unit
                );
            }
            if let Some(s) = &out.report.stopped_answering {
                eprintln!("bulkwire load: {s}");
                ExitCode::from(2)
            } else if out.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(99)
            }
        }
        Err(e) => {
            eprintln!("bulkwire load: {e}");
            ExitCode::FAILURE
        }
    }
}

fn options(a: Args) -> Result<Options, String> {
    let kind = match a.scenario {
        Scenario::Formdata => ScenarioKind::FormData,
        Scenario::Raw => ScenarioKind::Raw,
        Scenario::Xmlrpc => ScenarioKind::Xmlrpc,
        Scenario::Mtom => ScenarioKind::Mtom,
    };
    let dur = |s: &str| parse_duration(s).map_err(|e| e.to_string());
    let mut o = Options::new(&a.url, kind);
    o.extra_targets = a.targets;
    o.method = a.method;
    o.files = a.file;
    o.file_field = a.file_field;
    o.filename = a.filename;
    o.content_type = a.content_type;
    o.fields = a.fields;
    o.headers = a.headers;
    o.token = a.token;
    o.user = a.user;
    o.rate = a
        .rate
        .as_deref()
        .map(parse_rate)
        .transpose()
        .map_err(|e| e.to_string())?;
    o.connections = a.connections;
    o.duration = a.duration.as_deref().map(dur).transpose()?;
    o.requests = a.requests;
    o.timeout = dur(&a.timeout)?;
    o.late_after = dur(&a.late_after)?;
    o.threads = a.threads;
    o.json = a.json;
    o.report = a.report;
    o.thresholds = a.thresholds;
    o.watch_pid = a.watch_pid;
    o.watch_metrics = a.watch_metrics;
    o.sample_every = dur(&a.sample_every)?.max(Duration::from_millis(1));
    o.quiet = a.quiet;
    Ok(o)
}
