//! `bulkwire bench sweep`: server memory and time against payload size.
//!
//! For each size (in MiB, 2^20 bytes: a "200" row sends 209,715,200 bytes
//! of file, 5% more than a decimal 200 MB, so the comparison with
//! WordPress's published "200 MB" errs against bulkwire) and each format,
//! one upload to each server, sequentially, on a fresh connection. Around
//! each upload the server's RSS is sampled from `/proc/PID/status` and its
//! peak mark `VmHWM` is reset first through `/proc/PID/clear_refs` where
//! allowed (see [`crate::memory`]), so the peak is that upload's. The
//! answer is read and checked ([`Format::verdict`]): an XML-RPC fault
//! over status 200 is a failed row, not a fast one.
//!
//! The payload of a size is generated once and shared by the formats; the
//! XML-RPC base64 text is encoded once per size, outside the timing.
//! Outputs: a table on stdout, `sweep.json`, `sweep.md` (the table and a
//! README-style pivot with WordPress's published numbers beside),
//! `sweep-memory.svg` and `sweep-time.svg`.

use super::{payload, upload_once, Credentials, Format, Running, ServerKind, ServerSpec};
use crate::error::{Error, Result};
use crate::html::{lines, Series};
use crate::limits::{LimitKind, Limits};
use crate::memory::{MemoryReport, Source, Watcher};
use crate::pattern::Vars;
use crate::target::Target;
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

const MIB: f64 = 1024.0 * 1024.0;

/// What a sweep does.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Payload sizes in MiB.
    pub sizes_mib: Vec<f64>,
    pub formats: Vec<Format>,
    /// Measured in this order for each size and format.
    pub servers: Vec<ServerSpec>,
    pub credentials: Credentials,
    /// Directory for the outputs (created).
    pub out: PathBuf,
    /// Per upload.
    pub timeout: Duration,
    /// How long a started server may take to listen.
    pub start_wait: Duration,
    /// RSS sampling interval during an upload.
    pub sample_every: Duration,
    /// No progress lines on stderr, no table on stdout.
    pub quiet: bool,
    pub limits: Limits,
}

impl SweepOptions {
    pub fn new(servers: Vec<ServerSpec>, out: PathBuf) -> SweepOptions {
        SweepOptions {
            sizes_mib: vec![1.0, 2.0, 5.0, 10.0, 50.0, 100.0, 200.0],
            formats: Format::ALL.to_vec(),
            servers,
            credentials: Credentials::default(),
            out,
            timeout: Duration::from_secs(600),
            start_wait: Duration::from_secs(30),
            sample_every: Duration::from_millis(20),
            quiet: false,
            limits: Limits::default(),
        }
    }
}

/// One upload.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub size_mib: f64,
    /// File bytes.
    pub size_bytes: u64,
    pub format: Format,
    pub server: String,
    /// Request body bytes (envelope, base64, boundaries included).
    pub body_bytes: u64,
    /// HTTP status (0 when no answer came).
    pub status: u16,
    /// 2xx and no fault in the answer.
    pub ok: bool,
    pub error: Option<String>,
    /// From connecting to the last byte of the answer.
    pub seconds: f64,
    /// File MiB per second.
    pub mib_per_s: f64,
    /// Server RSS before the upload, at its peak during it, and the
    /// difference (`None` without a process to watch).
    pub rss_before_mib: Option<f64>,
    pub peak_rss_mib: Option<f64>,
    pub growth_mib: Option<f64>,
    /// Whether `VmHWM` was reset before the upload (the peak includes
    /// spikes between samples).
    pub hwm_reset: Option<bool>,
}

/// A server as measured.
#[derive(Debug, Clone, Serialize)]
pub struct ServerInfo {
    pub label: String,
    pub command: String,
}

/// Numbers published elsewhere, quoted beside ours (not measured here).
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    pub label: &'static str,
    pub size: &'static str,
    pub peak_memory: &'static str,
    pub seconds: f64,
    pub source: &'static str,
}

/// WordPress's XML-RPC media upload of 200 MB (DESIGN.md), before and
/// after it stopped building strings of the whole body.
pub const WORDPRESS: [Published; 2] = [
    Published {
        label: "WordPress (IXR, before fix)",
        size: "200 MB",
        peak_memory: "2,503 MB",
        seconds: 93.0,
        source: "WordPress XML-RPC media upload report",
    },
    Published {
        label: "WordPress (after fix)",
        size: "200 MB",
        peak_memory: "2,228 MB",
        seconds: 5.4,
        source: "WordPress XML-RPC media upload report",
    },
];

/// The whole sweep (`sweep.json` is this, serialized).
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    /// Size unit: `MiB` (2^20 bytes).
    pub unit: &'static str,
    pub sizes_mib: Vec<f64>,
    pub formats: Vec<Format>,
    pub servers: Vec<ServerInfo>,
    pub rows: Vec<SweepRow>,
    pub published: Vec<Published>,
    /// CPUs of the machine it ran on.
    pub cpus: usize,
}

/// Runs the sweep: starts the servers, uploads, stops them.
pub fn run(opts: &SweepOptions) -> Result<SweepReport> {
    check(opts)?;
    std::fs::create_dir_all(&opts.out).map_err(|e| Error::io(opts.out.display(), e))?;
    let mut running = Vec::new();
    for s in &opts.servers {
        let log = opts.out.join(format!("server-{}.log", file_safe(&s.label)));
        running.push(Running::start(s, &opts.credentials, &log, opts.start_wait)?);
    }
    let rt = crate::runner::multi_thread_runtime(Some(1))?;
    let mut rows = Vec::new();
    for &size in &opts.sizes_mib {
        let bytes = (size * MIB).round() as usize;
        let data = payload(bytes);
        for &format in &opts.formats {
            let name = format!("sweep-{size}MiB-{{seq}}.bin");
            let scenario = format.scenario(data.clone(), &name, &opts.credentials)?;
            for (spec, server) in opts.servers.iter().zip(&running) {
                if !spec.serves(format) {
                    continue;
                }
                let row = rt.block_on(one(
                    opts,
                    spec,
                    server,
                    format,
                    size,
                    &*scenario,
                    rows.len(),
                ))?;
                if !opts.quiet {
                    eprintln!("{}", progress(&row));
                }
                rows.push(row);
            }
        }
    }
    drop(running);
    Ok(SweepReport {
        unit: "MiB",
        sizes_mib: opts.sizes_mib.clone(),
        formats: opts.formats.clone(),
        servers: opts.servers.iter().map(info).collect(),
        rows,
        published: WORDPRESS.to_vec(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

fn check(opts: &SweepOptions) -> Result<()> {
    if opts.sizes_mib.is_empty() || opts.formats.is_empty() || opts.servers.is_empty() {
        return Err(Error::config("a sweep needs sizes, formats and a server"));
    }
    for &s in &opts.sizes_mib {
        if !(s.is_finite() && s > 0.0) {
            return Err(Error::config(format!("size {s} MiB: must be positive")));
        }
        if s * MIB > opts.limits.file_bytes as f64 {
            let what = format!("payload of {s} MiB");
            return Err(Error::limit(
                LimitKind::FileBytes,
                opts.limits.file_bytes,
                what,
            ));
        }
    }
    Ok(())
}

fn info(s: &ServerSpec) -> ServerInfo {
    let command = match &s.kind {
        ServerKind::Bulkwire(p) => format!("{} serve", p.display()),
        ServerKind::Command(c) => c.clone(),
        ServerKind::Url(u) => u.clone(),
    };
    ServerInfo {
        label: s.label.clone(),
        command,
    }
}

/// One upload with memory sampling around it.
async fn one(
    opts: &SweepOptions,
    spec: &ServerSpec,
    server: &Running,
    format: Format,
    size: f64,
    scenario: &dyn crate::scenario::Scenario,
    seq: usize,
) -> Result<SweepRow> {
    let mut target = Target::resolve(&server.url(spec, format))?;
    format.authorize(&mut target, &opts.credentials)?;
    let watcher = match server.pid {
        Some(pid) => Some(Watcher::start(Source::Pid(pid), opts.sample_every, &opts.limits).await?),
        None => None,
    };
    let vars = Vars::new(seq as u64, &mut rand::thread_rng());
    let result = upload_once(&target, scenario, &vars, opts.timeout).await;
    let memory = match watcher {
        Some(w) => Some(w.stop().await?),
        None => None,
    };
    let size_bytes = (size * MIB).round() as u64;
    let mut row = SweepRow {
        size_mib: size,
        size_bytes,
        format,
        server: spec.label.clone(),
        body_bytes: 0,
        status: 0,
        ok: false,
        error: None,
        seconds: 0.0,
        mib_per_s: 0.0,
        rss_before_mib: None,
        peak_rss_mib: None,
        growth_mib: None,
        hwm_reset: None,
    };
    match result {
        Ok(x) => {
            row.body_bytes = x.sent;
            row.status = x.status;
            row.seconds = x.seconds;
            row.mib_per_s = size_bytes as f64 / MIB / x.seconds.max(1e-9);
            row.error = format.verdict(x.status, &x.answer).err();
            row.ok = row.error.is_none();
        }
        Err(e) => row.error = Some(e.to_string()),
    }
    if let Some(m) = memory {
        fill_memory(&mut row, &m);
    }
    Ok(row)
}

fn fill_memory(row: &mut SweepRow, m: &MemoryReport) {
    let before = m.start_bytes as f64 / MIB;
    let peak = m.peak_bytes as f64 / MIB;
    row.rss_before_mib = Some(before);
    row.peak_rss_mib = Some(peak);
    row.growth_mib = Some(peak - before);
    row.hwm_reset = Some(m.hwm_reset);
}

fn progress(r: &SweepRow) -> String {
    let mem = match r.peak_rss_mib {
        Some(p) => format!(", peak RSS {p:.1} MiB"),
        None => String::new(),
    };
    let verdict = match &r.error {
        None => "ok".to_owned(),
        Some(e) => format!("FAILED ({e})"),
    };
    format!(
        "sweep: {} MiB {} to {}: {:.3} s{mem}, {verdict}",
        r.size_mib,
        r.format.name(),
        r.server,
        r.seconds
    )
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// The human table: one row per size, format and server.
pub fn table(r: &SweepReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>8}  {:<9} {:<12} {:>6} {:>13} {:>11} {:>9} {:>9}",
        "size MiB", "format", "server", "status", "peak RSS MiB", "growth MiB", "seconds", "MiB/s"
    );
    for x in &r.rows {
        let status = if x.ok {
            x.status.to_string()
        } else {
            format!("{}!", x.status)
        };
        let _ = writeln!(
            o,
            "{:>8}  {:<9} {:<12} {:>6} {:>13} {:>11} {:>9.3} {:>9.1}",
            x.size_mib,
            x.format.name(),
            x.server,
            status,
            opt(x.peak_rss_mib),
            opt(x.growth_mib),
            x.seconds,
            x.mib_per_s
        );
    }
    let failed: Vec<_> = r.rows.iter().filter(|x| !x.ok).collect();
    for x in &failed {
        let _ = writeln!(
            o,
            "  ! {} MiB {} to {}: {}",
            x.size_mib,
            x.format.name(),
            x.server,
            x.error.as_deref().unwrap_or("")
        );
    }
    o
}

/// `sweep.md`: the table in Markdown, and a pivot (rows: size; columns:
/// server × format, "peak RSS MiB / seconds") with WordPress's published
/// numbers beside the 200 row.
pub fn markdown(r: &SweepReport) -> String {
    let mut o = String::new();
    let cols: Vec<(String, Format)> = r
        .servers
        .iter()
        .flat_map(|s| r.formats.iter().map(move |&f| (s.label.clone(), f)))
        .filter(|(s, f)| r.rows.iter().any(|x| &x.server == s && x.format == *f))
        .collect();
    o.push_str("| file size (MiB) |");
    for (s, f) in &cols {
        let _ = write!(o, " {s} {} |", f.name());
    }
    for p in &r.published {
        let _ = write!(o, " {} |", p.label);
    }
    o.push_str("\n|---:|");
    for _ in cols
        .iter()
        .map(|_| ())
        .chain(r.published.iter().map(|_| ()))
    {
        o.push_str("---:|");
    }
    o.push('\n');
    for &size in &r.sizes_mib {
        let _ = write!(o, "| {size} |");
        for (s, f) in &cols {
            let cell = r
                .rows
                .iter()
                .find(|x| x.size_mib == size && &x.server == s && x.format == *f);
            let _ = write!(o, " {} |", cell.map_or("".into(), pivot_cell));
        }
        for p in &r.published {
            if size == 200.0 {
                let _ = write!(o, " {} / {} s |", p.peak_memory, p.seconds);
            } else {
                o.push_str(" |");
            }
        }
        o.push('\n');
    }
    o.push_str(
        "\nCells: server peak RSS during the upload (MiB) / response time (s). \
         WordPress columns: published numbers for a 200 MB upload on other hardware, quoted, not measured here.\n\n",
    );
    o.push_str("```\n");
    o.push_str(&table(r));
    o.push_str("```\n");
    o
}

fn pivot_cell(x: &SweepRow) -> String {
    if !x.ok {
        return "failed".into();
    }
    match x.peak_rss_mib {
        Some(p) => format!("{p:.1} MiB / {:.2} s", x.seconds),
        None => format!("{:.2} s", x.seconds),
    }
}

const COLORS: [&str; 8] = [
    "#27c", "#c72", "#2a7", "#c22", "#82c", "#777", "#0aa", "#a80",
];

/// One series per server and format: (size, value).
fn plot(r: &SweepReport, ylabel: &str, value: fn(&SweepRow) -> Option<f64>) -> String {
    let mut names = Vec::new();
    let mut points: Vec<Vec<(f64, f64)>> = Vec::new();
    for s in &r.servers {
        for &f in &r.formats {
            let pts: Vec<(f64, f64)> = r
                .rows
                .iter()
                .filter(|x| x.server == s.label && x.format == f && x.ok)
                .filter_map(|x| Some((x.size_mib, value(x)?)))
                .collect();
            if !pts.is_empty() {
                names.push(format!("{} {}", s.label, f.name()));
                points.push(pts);
            }
        }
    }
    let series: Vec<Series<'_>> = names
        .iter()
        .zip(&points)
        .enumerate()
        .map(|(i, (n, p))| (n.as_str(), COLORS[i % COLORS.len()], &p[..]))
        .collect();
    let svg = lines("file size (MiB)", ylabel, &series, true);
    if svg.starts_with("<svg") {
        svg
    } else {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"40\"><text x=\"10\" y=\"20\">no data</text></svg>\n".into()
    }
}

/// Writes `sweep.json`, `sweep.md`, `sweep-memory.svg`, `sweep-time.svg`
/// into `dir`; returns their paths.
pub fn write_outputs(r: &SweepReport, dir: &Path) -> Result<Vec<PathBuf>> {
    let json = serde_json::to_string_pretty(r).map_err(|e| Error::io("json", e))? + "\n";
    let files = [
        ("sweep.json", json),
        ("sweep.md", markdown(r)),
        (
            "sweep-memory.svg",
            plot(r, "server peak RSS (MiB)", |x| x.peak_rss_mib),
        ),
        (
            "sweep-time.svg",
            plot(r, "response time (s)", |x| Some(x.seconds)),
        ),
    ];
    let mut out = Vec::new();
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| Error::io(p.display(), e))?;
        out.push(p);
    }
    Ok(out)
}

fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Sizes as `--sizes` takes them: comma-separated MiB.
pub fn parse_sizes(s: &str) -> Result<Vec<f64>> {
    s.split(',')
        .map(|t| {
            t.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| {
                    Error::config(format!("size {t:?}: expected a positive number of MiB"))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(size: f64, format: Format, server: &str, ok: bool) -> SweepRow {
        SweepRow {
            size_mib: size,
            size_bytes: (size * MIB) as u64,
            format,
            server: server.into(),
            body_bytes: 0,
            status: if ok { 200 } else { 500 },
            ok,
            error: (!ok).then(|| "status 500".into()),
            seconds: size / 100.0,
            mib_per_s: 100.0,
            rss_before_mib: Some(10.0),
            peak_rss_mib: Some(12.0 + size / 100.0),
            growth_mib: Some(2.0),
            hwm_reset: Some(true),
        }
    }

    fn report() -> SweepReport {
        SweepReport {
            unit: "MiB",
            sizes_mib: vec![1.0, 200.0],
            formats: vec![Format::Xmlrpc, Format::Formdata],
            servers: vec![
                ServerInfo {
                    label: "bulkwire".into(),
                    command: "x".into(),
                },
                ServerInfo {
                    label: "python".into(),
                    command: "y".into(),
                },
            ],
            rows: vec![
                row(1.0, Format::Xmlrpc, "bulkwire", true),
                row(1.0, Format::Formdata, "bulkwire", true),
                row(1.0, Format::Xmlrpc, "python", true),
                row(200.0, Format::Xmlrpc, "bulkwire", true),
                row(200.0, Format::Formdata, "bulkwire", true),
                row(200.0, Format::Xmlrpc, "python", false),
            ],
            published: WORDPRESS.to_vec(),
            cpus: 2,
        }
    }

    #[test]
    fn pivot_has_a_column_per_measured_pair_and_quotes_wordpress_at_200() {
        let md = markdown(&report());
        let head = md.lines().next().unwrap();
        assert_eq!(
            head,
            "| file size (MiB) | bulkwire xmlrpc | bulkwire formdata | python xmlrpc | \
             WordPress (IXR, before fix) | WordPress (after fix) |"
        );
        let row200 = md.lines().find(|l| l.starts_with("| 200 |")).unwrap();
        assert!(row200.contains("2,503 MB / 93 s"), "{row200}");
        assert!(row200.contains("2,228 MB / 5.4 s"), "{row200}");
        assert!(row200.contains("failed"), "{row200}");
        let row1 = md.lines().find(|l| l.starts_with("| 1 |")).unwrap();
        assert!(row1.contains("12.0 MiB / 0.01 s"), "{row1}");
        assert!(!row1.contains("2,503"));
    }

    #[test]
    fn table_marks_failures_and_plots_skip_them() {
        let r = report();
        let t = table(&r);
        assert_eq!(t.lines().filter(|l| l.contains("!")).count(), 2, "{t}");
        let svg = plot(&r, "MiB", |x| x.peak_rss_mib);
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<polyline").count(), 3, "{svg}");
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_sizes("1,2, 0.5").unwrap(), vec![1.0, 2.0, 0.5]);
        for bad in ["", "1,,2", "0", "-1", "x"] {
            assert!(parse_sizes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn oversized_payload_names_the_limit() {
        let mut o = SweepOptions::new(vec![ServerSpec::bulkwire("x".into())], "out".into());
        o.sizes_mib = vec![2048.0];
        let e = check(&o).unwrap_err();
        assert_eq!(e.limit_exceeded().map(|l| l.0.name()), Some("file_bytes"));
    }
}
