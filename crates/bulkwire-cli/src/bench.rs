//! `bulkwire bench sweep|latency`: argument parsing only; the work is in
//! `bulkwire_load::bench`. Both start this very binary's `serve` (from
//! `std::env::current_exe`) unless given `--server-cmd` or `--url`.
//!
//! Exit codes: 0 done (sweep: every upload succeeded), 1 the run could not
//! be made (latency: also when no request of its first second got an
//! answer), 2 (sweep) some uploads failed or (latency) the server stopped
//! answering before the run ended (the outputs are still written).

use bulkwire_load::bench::latency::{self, LatencyOptions};
use bulkwire_load::bench::sweep::{self, parse_sizes, SweepOptions};
use bulkwire_load::bench::{Credentials, Format, ServerKind, ServerSpec};
use bulkwire_load::units::{parse_duration, parse_rate, parse_size};
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum Command {
    /// Server peak RSS and response time against upload size, per format.
    Sweep(SweepArgs),
    /// Latency percentiles of uploads at a fixed arrival rate (open loop).
    Latency(LatencyArgs),
}

/// Which server: this binary's `serve`, a command, or a running one.
#[derive(clap::Args)]
pub struct ServerArgs {
    /// Run this server instead of `bulkwire serve`: `{port}`/`$PORT` is the
    /// port to listen on (127.0.0.1), `{data}`/`$DATA` a fresh directory.
    #[arg(long, conflicts_with = "url")]
    server_cmd: Option<String>,
    /// Measure a server already running at this base URL (no memory unless
    /// --watch-pid).
    #[arg(long)]
    url: Option<String>,
    /// With --url: sample this process's memory.
    #[arg(long, requires = "url")]
    watch_pid: Option<u32>,
    /// Endpoint path for every format [default: /xmlrpc, /v1/media, /soap].
    #[arg(long)]
    path: Option<String>,
    /// Name of the server in tables [default: bulkwire, or custom].
    #[arg(long)]
    label: Option<String>,
    /// Bearer token sent with form-data uploads.
    #[arg(long, default_value = bulkwire_load::bench::BENCH_TOKEN)]
    token: String,
    /// NAME:PASSWORD, in the XML-RPC call and as Basic auth for SOAP.
    #[arg(long, default_value = bulkwire_load::bench::BENCH_USER)]
    user: String,
    /// Seconds a started server may take to listen.
    #[arg(long, default_value = "30s")]
    start_wait: String,
}

impl ServerArgs {
    fn spec(&self) -> Result<ServerSpec, String> {
        let (kind, label) = match (&self.server_cmd, &self.url) {
            (Some(c), _) => (ServerKind::Command(c.clone()), "custom"),
            (None, Some(u)) => (ServerKind::Url(u.clone()), "custom"),
            (None, None) => {
                let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
                (ServerKind::Bulkwire(exe), "bulkwire")
            }
        };
        Ok(ServerSpec {
            label: self.label.clone().unwrap_or_else(|| label.into()),
            kind,
            formats: None,
            path: self.path.clone(),
            watch_pid: self.watch_pid,
        })
    }

    fn credentials(&self) -> Credentials {
        Credentials {
            token: self.token.clone(),
            user: self.user.clone(),
        }
    }
}

#[derive(clap::Args)]
pub struct SweepArgs {
    /// File sizes in MiB (2^20 bytes), comma-separated.
    #[arg(long, default_value = "1,2,5,10,50,100,200")]
    sizes: String,
    /// Formats, comma-separated: xmlrpc, formdata, mtom.
    #[arg(long, default_value = "xmlrpc,formdata,mtom")]
    formats: String,
    #[command(flatten)]
    server: ServerArgs,
    /// Another server measured in the same run, in its own columns:
    /// NAME[:FORMAT,…]=COMMAND (the command as for --server-cmd; the
    /// formats it serves, default all). Repeatable.
    #[arg(long = "peer", value_name = "NAME[:FORMATS]=CMD")]
    peers: Vec<String>,
    /// Directory for sweep.json, sweep.md, sweep-memory.svg, sweep-time.svg.
    #[arg(long, default_value = "bulkwire-sweep")]
    out: PathBuf,
    /// Per-upload timeout.
    #[arg(long, default_value = "600s")]
    timeout: String,
    /// No progress lines, no table.
    #[arg(long, short = 'q')]
    quiet: bool,
}

#[derive(clap::Args)]
pub struct LatencyArgs {
    /// Arrival rate (`40/s`, `40`).
    #[arg(long, default_value = "40")]
    rate: String,
    /// How long to send (`30s`, `2m`).
    #[arg(long, short = 'd', default_value = "30s")]
    duration: String,
    /// xmlrpc, formdata or mtom.
    #[arg(long, default_value = "formdata")]
    format: String,
    /// File size per request (`64KiB`, `1MB`).
    #[arg(long, default_value = "64KiB")]
    size: String,
    /// Connection pool cap.
    #[arg(long, short = 'c', default_value_t = 32)]
    connections: usize,
    #[command(flatten)]
    server: ServerArgs,
    /// Directory for latency.json, latency.svg, latency.html.
    #[arg(long, default_value = "bulkwire-latency")]
    out: PathBuf,
    /// Per-request timeout.
    #[arg(long, default_value = "30s")]
    timeout: String,
    /// Client runtime threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// No progress lines, no table.
    #[arg(long, short = 'q')]
    quiet: bool,
}

pub fn run(c: Command) -> ExitCode {
    let r = match c {
        Command::Sweep(a) => run_sweep(a),
        Command::Latency(a) => run_latency(a),
    };
    r.unwrap_or_else(|e| {
        eprintln!("bulkwire bench: {e}");
        ExitCode::FAILURE
    })
}

fn dur(s: &str) -> Result<std::time::Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn run_sweep(a: SweepArgs) -> Result<ExitCode, String> {
    let mut servers = vec![a.server.spec()?];
    for p in &a.peers {
        servers.push(ServerSpec::parse_peer(p).map_err(|e| e.to_string())?);
    }
    let mut o = SweepOptions::new(servers, a.out.clone());
    o.sizes_mib = parse_sizes(&a.sizes).map_err(|e| e.to_string())?;
    o.formats = Format::parse_list(&a.formats).map_err(|e| e.to_string())?;
    o.credentials = a.server.credentials();
    o.timeout = dur(&a.timeout)?;
    o.start_wait = dur(&a.server.start_wait)?;
    o.quiet = a.quiet;
    let report = sweep::run(&o).map_err(|e| e.to_string())?;
    let files = sweep::write_outputs(&report, &a.out).map_err(|e| e.to_string())?;
    if !a.quiet {
        print!("{}", sweep::table(&report));
        for f in files {
            println!("wrote {}", f.display());
        }
    }
    Ok(if report.rows.iter().all(|r| r.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn run_latency(a: LatencyArgs) -> Result<ExitCode, String> {
    let mut o = LatencyOptions::new(a.server.spec()?, a.out.clone());
    o.format = Format::parse(&a.format).map_err(|e| e.to_string())?;
    o.size = parse_size(&a.size).map_err(|e| e.to_string())?;
    o.rate = parse_rate(&a.rate).map_err(|e| e.to_string())?;
    o.duration = dur(&a.duration)?;
    o.connections = a.connections;
    o.credentials = a.server.credentials();
    o.timeout = dur(&a.timeout)?;
    o.start_wait = dur(&a.server.start_wait)?;
    o.threads = Some(a.threads.max(1));
    o.quiet = a.quiet;
    let (report, files) = latency::run(&o).map_err(|e| e.to_string())?;
    if !a.quiet {
        for f in files {
            println!("wrote {}", f.display());
        }
    }
    Ok(match &report.stopped_answering {
        Some(s) => {
            eprintln!("bulkwire bench: {s}");
            ExitCode::from(2)
        }
        None => ExitCode::SUCCESS,
    })
}
