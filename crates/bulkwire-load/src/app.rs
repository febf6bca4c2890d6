//! `bulkwire load` as a library call: options in, report (and files) out.
//! The CLI only maps its arguments to [`Options`] and the result to an exit
//! code, so the `bench` commands and tests can drive the same path.
//!
//! Several nodes of one service ([`Options::extra_targets`]) are loaded at
//! once without a balancer in front: connections are dealt out round-robin,
//! per connection as an L4 balancer does (see [`crate::runner`]), and the
//! report breaks requests, errors and req/s down per target.

use crate::error::{Error, Result};
use crate::limits::{LimitKind, Limits};
use crate::memory::{Source, Start, Watcher};
use crate::output::{progress_line, table};
use crate::pattern::Pattern;
use crate::runner::{self, Mode, Plan, Report};
use crate::scenario::{
    load_file, media_type, FileSpec, FormData, Mtom, Raw, Scenario, SoapUpload, UploadCall, XmlRpc,
};
use crate::stats::Live;
use crate::target::{same_service, Target};
use crate::threshold::{Threshold, ThresholdResult};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Which body template to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScenarioKind {
    FormData,
    Raw,
    /// `wp.uploadFile` with the file as `bits`; `--user` goes in the call.
    Xmlrpc,
    /// SOAP `upload` with the file as an MTOM attachment; `--user` is Basic.
    Mtom,
}

/// Everything `bulkwire load` takes.
#[derive(Debug, Clone)]
pub struct Options {
    /// The (first) target.
    pub url: String,
    /// More nodes of the same service (same path and query as `url`), each
    /// getting every n-th connection; headers and auth go to all of them.
    pub extra_targets: Vec<String>,
    /// The request method (default `POST`; `PUT` for raw uploads to
    /// `/v1/media/{name}`). The URL's path may hold `{seq}`/`{uuid}`.
    pub method: String,
    pub scenario: ScenarioKind,
    /// Payload files: form-data file parts, or the raw body (one file).
    pub files: Vec<PathBuf>,
    /// Form field name of the file parts.
    pub file_field: String,
    /// Filename pattern of the file parts (default: the file's name).
    pub filename: Option<String>,
    /// File part content type (form-data), body content type (raw), the
    /// `type` member (xmlrpc) or the attachment's type (mtom); without it,
    /// each file's own ([`crate::scenario::media_type::guess`]: its magic
    /// bytes, then its extension, else `application/octet-stream`).
    pub content_type: Option<String>,
    /// `name=value` text fields; values may hold `{seq}`/`{uuid}`.
    pub fields: Vec<String>,
    /// `Name: value` extra headers; values may hold variables.
    pub headers: Vec<String>,
    pub token: Option<String>,
    /// `user:password` for Basic auth.
    pub user: Option<String>,
    /// Open loop when set (requests per second); closed loop otherwise.
    pub rate: Option<f64>,
    /// Default 64 open loop, 10 closed loop.
    pub connections: Option<usize>,
    /// Default 10 s when neither this nor `requests` is given.
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    pub timeout: Duration,
    pub late_after: Duration,
    /// Client threads, each with its own runtime (default: available
    /// parallelism).
    pub threads: Option<usize>,
    pub json: Option<PathBuf>,
    pub report: Option<PathBuf>,
    pub thresholds: Vec<String>,
    pub watch_pid: Option<u32>,
    pub watch_metrics: Option<String>,
    pub sample_every: Duration,
    /// Print nothing (no table, no progress).
    pub quiet: bool,
    pub limits: Limits,
}

impl Options {
    /// Defaults for everything but the URL and the scenario.
    pub fn new(url: &str, scenario: ScenarioKind) -> Options {
        Options {
            url: url.into(),
            extra_targets: Vec::new(),
            method: "POST".into(),
            scenario,
            files: Vec::new(),
            file_field: "file".into(),
            filename: None,
            content_type: None,
            fields: Vec::new(),
            headers: Vec::new(),
            token: None,
            user: None,
            rate: None,
            connections: None,
            duration: None,
            requests: None,
            timeout: Duration::from_secs(30),
            late_after: Duration::from_millis(10),
            threads: None,
            json: None,
            report: None,
            thresholds: Vec::new(),
            watch_pid: None,
            watch_metrics: None,
            sample_every: Duration::from_millis(100),
            quiet: false,
            limits: Limits::default(),
        }
    }
}

/// A finished run: the report and the thresholds that failed.
#[derive(Debug)]
pub struct Outcome {
    pub report: Report,
    pub failed: Vec<ThresholdResult>,
}

/// Validates the options, runs on a new runtime, prints the table (unless
/// quiet), writes `--json`/`--report`, and checks thresholds.
pub fn execute(opts: &Options) -> Result<Outcome> {
    let prepared = prepare(opts)?;
    let rt = runner::runtime()?;
    let report = rt.block_on(run_prepared(opts, prepared))?;
    finish(opts, report)
}

/// What is built before the clock starts.
pub struct Prepared {
    /// `url` then `extra_targets`, each with every header.
    pub targets: Vec<Target>,
    pub plan: Plan,
    pub scenario: Arc<dyn Scenario>,
    pub thresholds: Vec<Threshold>,
    pub memory: Option<Source>,
}

/// Parses and loads everything (files once into memory) up front.
pub fn prepare(opts: &Options) -> Result<Prepared> {
    let targets = targets(opts)?;
    let mut plan = Plan::new(match opts.rate {
        Some(rate) => Mode::Open { rate },
        None => Mode::Closed,
    });
    plan.connections = opts.connections.unwrap_or(plan.connections);
    plan.duration = opts.duration;
    plan.requests = opts.requests;
    if plan.duration.is_none() && plan.requests.is_none() {
        plan.duration = Some(Duration::from_secs(10));
    }
    plan.timeout = opts.timeout;
    if let Some(n) = opts.threads {
        plan.threads = n;
    }
    plan.late_after = opts.late_after;
    plan.method = method(&opts.method)?;
    plan.limits = opts.limits.clone();
    let thresholds = opts
        .thresholds
        .iter()
        .map(|t| Threshold::parse(t))
        .collect::<Result<_>>()?;
    let memory = match (opts.watch_pid, &opts.watch_metrics) {
        (Some(_), Some(_)) => {
            return Err(Error::config(
                "give --watch-pid or --watch-metrics, not both",
            ))
        }
        (Some(p), None) => Some(Source::Pid(p)),
        (None, Some(u)) => Some(Source::Metrics(Box::new(Target::resolve(u)?))),
        (None, None) => None,
    };
    Ok(Prepared {
        targets,
        plan,
        scenario: scenario(opts)?,
        thresholds,
        memory,
    })
}

/// An HTTP method token (RFC 9110 §9.1), upper-cased as methods are by
/// convention (the token itself is case-sensitive; `put` is not `PUT`).
fn method(text: &str) -> Result<http::Method> {
    http::Method::from_bytes(text.trim().to_ascii_uppercase().as_bytes())
        .map_err(|_| Error::config(format!("method {text:?} is not an HTTP method token")))
}

/// `url` then `extra_targets`, resolved, each with the headers and auth.
fn targets(opts: &Options) -> Result<Vec<Target>> {
    let mut first = Target::resolve(&opts.url)?;
    if opts.headers.len() > opts.limits.fields {
        let what = format!("{} headers", opts.headers.len());
        return Err(Error::limit(
            LimitKind::Fields,
            opts.limits.fields as u64,
            what,
        ));
    }
    for h in &opts.headers {
        first.header_line(h)?;
    }
    match (&opts.token, &opts.user) {
        (Some(_), Some(_)) => return Err(Error::config("give --token or --user, not both")),
        (Some(t), None) => drop(first.bearer(t)?),
        // XML-RPC carries the credentials in the call, as WordPress does.
        (None, Some(_)) if opts.scenario == ScenarioKind::Xmlrpc => {}
        (None, Some(u)) => drop(first.basic(u)?),
        (None, None) => {}
    }
    let mut all = vec![first];
    for url in &opts.extra_targets {
        let mut t = Target::resolve(url)?;
        t.headers.clone_from(&all[0].headers);
        all.push(t);
    }
    same_service(&all)?;
    Ok(all)
}

fn scenario(opts: &Options) -> Result<Arc<dyn Scenario>> {
    match opts.scenario {
        ScenarioKind::Raw => {
            let (data, guessed) = match &opts.files[..] {
                [] => (bytes::Bytes::new(), None),
                [one] => {
                    let data = load_file(one, &opts.limits)?;
                    let guessed = media_type::guess(one, &data);
                    (data, Some(guessed))
                }
                _ => return Err(Error::config("the raw scenario takes one --file")),
            };
            if !opts.fields.is_empty() {
                return Err(Error::config(
                    "the raw scenario has no fields; use --header",
                ));
            }
            let content_type = opts.content_type.as_deref().or(guessed);
            Ok(Arc::new(Raw::new(data, content_type)))
        }
        ScenarioKind::FormData => Ok(Arc::new(form(opts)?)),
        ScenarioKind::Xmlrpc => {
            let (name, data, content_type) = one_file(opts, "xmlrpc")?;
            let user = opts.user.as_deref().ok_or_else(|| {
                Error::config("the xmlrpc scenario needs --user NAME:PASSWORD (sent in the call)")
            })?;
            let (u, p) = user.split_once(':').unwrap_or((user, ""));
            let mut call = UploadCall::new(u, p, name, data);
            call.content_type = content_type;
            Ok(Arc::new(XmlRpc::new(&call)?))
        }
        ScenarioKind::Mtom => {
            let (name, data, content_type) = one_file(opts, "mtom")?;
            let mut up = SoapUpload::new(name, data);
            up.content_type = content_type;
            Ok(Arc::new(Mtom::new(&up)?))
        }
    }
}

/// The one `--file` of an upload call: its filename pattern (default: the
/// file's own name), its bytes and its type (default: its own).
fn one_file(opts: &Options, scenario: &str) -> Result<(Pattern, bytes::Bytes, String)> {
    let [path] = &opts.files[..] else {
        return Err(Error::config(format!(
            "the {scenario} scenario takes one --file"
        )));
    };
    if !opts.fields.is_empty() {
        return Err(Error::config(format!(
            "the {scenario} scenario has no fields; the name comes from --filename"
        )));
    }
    let name = match &opts.filename {
        Some(f) => Pattern::parse(f)?,
        None => Pattern::parse(&default_name(path))?,
    };
    let data = load_file(path, &opts.limits)?;
    let content_type = type_of(opts, path, &data);
    Ok((name, data, content_type))
}

/// `--content-type` if given, else the file's own type.
fn type_of(opts: &Options, path: &std::path::Path, data: &[u8]) -> String {
    match &opts.content_type {
        Some(ct) => ct.clone(),
        None => media_type::guess(path, data).into(),
    }
}

/// A file's own name, braces escaped so it is taken literally.
fn default_name(path: &std::path::Path) -> String {
    let name = path
        .file_name()
        .map_or("file".into(), |n| n.to_string_lossy());
    name.replace('{', "{{").replace('}', "}}")
}

fn form(opts: &Options) -> Result<FormData> {
    if opts.fields.len() + opts.files.len() > opts.limits.fields {
        let what = format!("{} fields and files", opts.fields.len() + opts.files.len());
        return Err(Error::limit(
            LimitKind::Fields,
            opts.limits.fields as u64,
            what,
        ));
    }
    if opts.fields.is_empty() && opts.files.is_empty() {
        return Err(Error::config("formdata needs a --file or a --field"));
    }
    let mut fields = Vec::new();
    for f in &opts.fields {
        let (k, v) = f
            .split_once('=')
            .ok_or_else(|| Error::config(format!("field {f:?}: expected name=value")))?;
        fields.push((k.to_owned(), Pattern::parse(v)?));
    }
    let mut files = Vec::new();
    for path in &opts.files {
        let filename = opts.filename.clone().unwrap_or_else(|| default_name(path));
        let data = load_file(path, &opts.limits)?;
        files.push(FileSpec {
            field: opts.file_field.clone(),
            filename: Pattern::parse(&filename)?,
            content_type: Some(type_of(opts, path, &data)),
            data,
        });
    }
    FormData::new(&fields, &files)
}

/// Runs a prepared load on the current runtime, with memory sampling and
/// the progress line; thresholds are checked in [`finish`].
pub async fn run_prepared(opts: &Options, p: Prepared) -> Result<Report> {
    let mut warnings = Vec::new();
    let watcher = match p.memory {
        Some(src) => match Watcher::start_or_skip(src, opts.sample_every, &opts.limits).await? {
            Start::Watching(w) => Some(w),
            Start::NoGauge(why) => {
                // Said once, now, rather than in the table at the end: the
                // run goes on, without the memory figures.
                eprintln!("bulkwire load: warning: {why}");
                warnings.push(why);
                None
            }
        },
        None => None,
    };
    let live = Arc::new(Live::default());
    let progress = (!opts.quiet && std::io::stderr().is_terminal())
        .then(|| tokio::spawn(progress(live.clone())));
    let result = runner::run_targets(p.targets, p.plan, p.scenario, live).await;
    if let Some(h) = progress {
        h.abort();
        eprint!("\r{:70}\r", "");
    }
    let mut report = result?;
    report.warnings = warnings;
    if let Some(w) = watcher {
        report.memory = Some(w.stop().await?);
    }
    report.thresholds = p.thresholds.iter().map(|t| t.check(&report)).collect();
    Ok(report)
}

async fn progress(live: Arc<Live>) {
    let tick = Duration::from_secs(1);
    let start = tokio::time::Instant::now();
    let mut last = 0;
    let mut iv = tokio::time::interval(tick);
    iv.tick().await;
    loop {
        iv.tick().await;
        eprint!("{}", progress_line(&live, start.elapsed(), last, tick));
        last = live.completed.load(Ordering::Relaxed);
    }
}

/// Prints and writes the outputs; returns the failed thresholds.
pub fn finish(opts: &Options, report: Report) -> Result<Outcome> {
    if !opts.quiet {
        print!("{}", table(&report));
    }
    if let Some(path) = &opts.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| Error::io("json", e))?;
        std::fs::write(path, json + "\n").map_err(|e| Error::io(path.display(), e))?;
    }
    if let Some(path) = &opts.report {
        std::fs::write(path, crate::html::page(&report))
            .map_err(|e| Error::io(path.display(), e))?;
    }
    let failed = report
        .thresholds
        .iter()
        .filter(|t| !t.passed)
        .cloned()
        .collect();
    Ok(Outcome { report, failed })
}
