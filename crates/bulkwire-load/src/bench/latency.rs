//! `bulkwire bench latency`: latency percentiles of small uploads at a fixed
//! arrival rate, the way MediaWiki measured its autoloader change (p50 and
//! p95 at 40 req/s; DESIGN.md).
//!
//! Starts the server (see [`super::Running`]), checks one upload end to end
//! (an XML-RPC fault comes with status 200, which the load runner would
//! count as a success, so a misconfigured run fails here instead), then
//! runs the open-loop [`crate::runner`] for the duration, sampling the
//! server's memory. Prints p50/p90/p95 (corrected: from each request's
//! intended send time) and writes `latency.json` (the run's report),
//! `latency.svg` (box plots of both latency views) and `latency.html`.

use super::{payload, upload_once, Credentials, Format, Running, ServerSpec};
use crate::error::{Error, Result};
use crate::html::{boxes, page};
use crate::limits::{LimitKind, Limits};
use crate::memory::{Source, Watcher};
use crate::pattern::Vars;
use crate::runner::{self, Mode, Plan, Report};
use crate::stats::Live;
use crate::target::Target;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a latency run does.
#[derive(Debug, Clone)]
pub struct LatencyOptions {
    pub server: ServerSpec,
    pub format: Format,
    /// File bytes per request.
    pub size: u64,
    /// Requests per second.
    pub rate: f64,
    pub duration: Duration,
    /// Connection pool cap (enough that none is late at the rate).
    pub connections: usize,
    pub credentials: Credentials,
    pub out: PathBuf,
    pub timeout: Duration,
    pub start_wait: Duration,
    /// Client runtime threads (default 1: the server gets the other core).
    pub threads: Option<usize>,
    pub quiet: bool,
    pub limits: Limits,
}

impl LatencyOptions {
    /// 40 req/s for 30 s of 64 KiB form-data uploads, 32 connections.
    pub fn new(server: ServerSpec, out: PathBuf) -> LatencyOptions {
        LatencyOptions {
            server,
            format: Format::Formdata,
            size: 64 * 1024,
            rate: 40.0,
            duration: Duration::from_secs(30),
            connections: 32,
            credentials: Credentials::default(),
            out,
            timeout: Duration::from_secs(30),
            start_wait: Duration::from_secs(30),
            threads: Some(1),
            quiet: false,
            limits: Limits::default(),
        }
    }
}

/// Runs the measurement; writes the outputs into `out`.
pub fn run(opts: &LatencyOptions) -> Result<(Report, Vec<PathBuf>)> {
    if opts.size > opts.limits.file_bytes {
        let what = format!("payload of {} bytes", opts.size);
        return Err(Error::limit(
            LimitKind::FileBytes,
            opts.limits.file_bytes,
            what,
        ));
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| Error::io(opts.out.display(), e))?;
    let log = opts.out.join("server-latency.log");
    let server = Running::start(&opts.server, &opts.credentials, &log, opts.start_wait)?;
    let data = payload(opts.size as usize);
    let scenario = opts
        .format
        .scenario(data, "lat-{seq}-{uuid}.bin", &opts.credentials)?;
    let mut target = Target::resolve(&server.url(&opts.server, opts.format))?;
    opts.format.authorize(&mut target, &opts.credentials)?;
    let mut plan = Plan::new(Mode::Open { rate: opts.rate });
    plan.connections = opts.connections;
    plan.duration = Some(opts.duration);
    plan.timeout = opts.timeout;
    plan.limits = opts.limits.clone();
    plan.threads = opts.threads.unwrap_or(1);

    let rt = runner::runtime()?;
    let report = rt.block_on(async {
        preflight(opts, &target, &*scenario).await?;
        let watcher = match server.pid {
            Some(pid) => {
                let every = Duration::from_millis(100);
                Some(Watcher::start(Source::Pid(pid), every, &opts.limits).await?)
            }
            None => None,
        };
        let live = Arc::new(Live::default());
        let mut report = runner::run(target.clone(), plan, scenario.clone(), live).await?;
        if let Some(w) = watcher {
            report.memory = Some(w.stop().await?);
        }
        Ok::<_, Error>(report)
    })?;
    drop(server);
    let files = write_outputs(opts, &report)?;
    if !opts.quiet {
        println!("{}", summary(opts, &report));
        print!("{}", crate::output::table(&report));
    }
    Ok((report, files))
}

/// One checked upload before the clock starts.
async fn preflight(
    opts: &LatencyOptions,
    target: &Target,
    scenario: &dyn crate::scenario::Scenario,
) -> Result<()> {
    let vars = Vars::new(u64::MAX, &mut rand::thread_rng());
    let x = upload_once(target, scenario, &vars, opts.timeout).await?;
    opts.format
        .verdict(x.status, &x.answer)
        .map_err(|why| Error::config(format!("the check upload to {} failed: {why}", target.url)))
}

/// `p50 … p90 … p95 …` on one line.
pub fn summary(opts: &LatencyOptions, r: &Report) -> String {
    let l = &r.corrected;
    format!(
        "latency {} {} B at {:.1} req/s for {:.0} s: p50 {:.2} ms  p90 {:.2} ms  p95 {:.2} ms  \
         ({} answered, {} errors, {} late)",
        opts.format.name(),
        opts.size,
        opts.rate,
        opts.duration.as_secs_f64(),
        l.p50_ms,
        l.p90_ms,
        l.p95_ms,
        r.completed,
        r.errors,
        r.late.count
    )
}

fn write_outputs(opts: &LatencyOptions, r: &Report) -> Result<Vec<PathBuf>> {
    let json = serde_json::to_string_pretty(r).map_err(|e| Error::io("json", e))? + "\n";
    let svg = boxes(&[("corrected", &r.corrected), ("uncorrected", &r.uncorrected)]);
    let files = [
        ("latency.json", json),
        ("latency.svg", svg),
        ("latency.html", page(r)),
    ];
    let mut out = Vec::new();
    for (name, text) in files {
        let p = opts.out.join(name);
        std::fs::write(&p, text).map_err(|e| Error::io(p.display(), e))?;
        out.push(p);
    }
    Ok(out)
}
