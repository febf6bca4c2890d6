//! The `--report FILE.html` page: self-contained (inline SVG and CSS, no
//! scripts), with latency over time, a percentile plot, box plots of both
//! latency views and, when sampled, server memory over time.

use crate::output::table;
use crate::runner::Report;
use crate::stats::Latency;
use std::fmt::Write;

const W: f64 = 640.0;
const H: f64 = 260.0;
/// Plot area margins: left, right, top, bottom.
const M: (f64, f64, f64, f64) = (60.0, 20.0, 20.0, 40.0);

/// The whole page.
pub fn page(r: &Report) -> String {
    let mut o = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>bulkwire load</title>\
         <style>body{font-family:sans-serif;margin:2em}pre{background:#f4f4f4;padding:1em}\
         svg{border:1px solid #ddd;margin:1em 0;display:block}text{font-size:11px}</style></head><body>\n",
    );
    let _ = writeln!(o, "<h1>bulkwire load: {}</h1>", esc(&r.url));
    let _ = writeln!(o, "<pre>{}</pre>", esc(&table(r)));
    o.push_str("<h2>Latency over time (corrected, by completion second)</h2>\n");
    o.push_str(&timeline(r));
    o.push_str("<h2>Latency by percentile</h2>\n");
    o.push_str(&percentiles(r));
    o.push_str("<h2>Latency distribution</h2>\n");
    o.push_str(&boxes(&[
        ("corrected", &r.corrected),
        ("uncorrected", &r.uncorrected),
    ]));
    if let Some(m) = &r.memory {
        let _ = writeln!(o, "<h2>Server memory ({})</h2>", esc(&m.source));
        let pts: Vec<(f64, f64)> = m.samples.iter().map(|s| (s[0], s[1] / 1e6)).collect();
        o.push_str(&lines(
            "seconds",
            "MB resident",
            &[("rss", "#2a7", &pts)],
            false,
        ));
    }
    o.push_str("</body></html>\n");
    o
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn timeline(r: &Report) -> String {
    let series = |f: fn(&crate::stats::Bucket) -> f64| -> Vec<(f64, f64)> {
        r.timeline
            .iter()
            .filter(|b| b.count > 0)
            .map(|b| (b.t as f64, f(b)))
            .collect()
    };
    let p50 = series(|b| b.p50_ms);
    let p99 = series(|b| b.p99_ms);
    let max = series(|b| b.max_ms);
    lines(
        "seconds",
        "ms",
        &[
            ("p50", "#27c", &p50),
            ("p99", "#c72", &p99),
            ("max", "#c22", &max),
        ],
        false,
    )
}

/// x is `-log10(1 - p)`: 0 at p0, 1 at p90, 2 at p99, 3 at p99.9.
fn percentiles(r: &Report) -> String {
    let pts = |l: &Latency| -> Vec<(f64, f64)> {
        l.spectrum
            .iter()
            .filter(|s| s[0] < 99.9999)
            .map(|s| (-(1.0 - s[0] / 100.0).log10(), s[1]))
            .collect()
    };
    let c = pts(&r.corrected);
    let u = pts(&r.uncorrected);
    lines(
        "percentile (1 = p90, 2 = p99, 3 = p99.9)",
        "ms",
        &[("corrected", "#c22", &c), ("uncorrected", "#27c", &u)],
        true,
    )
}

struct Scale {
    x0: f64,
    x1: f64,
    y1: f64,
}

impl Scale {
    fn x(&self, v: f64) -> f64 {
        let span = (self.x1 - self.x0).max(1e-9);
        M.0 + (v - self.x0) / span * (W - M.0 - M.1)
    }

    fn y(&self, v: f64) -> f64 {
        H - M.3 - v / self.y1.max(1e-9) * (H - M.2 - M.3)
    }
}

fn axes(o: &mut String, s: &Scale, xlabel: &str, ylabel: &str) {
    let _ = write!(
        o,
        "<line x1=\"{l}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#000\"/>\
         <line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{b}\" stroke=\"#000\"/>\
         <text x=\"{cx}\" y=\"{ly}\" text-anchor=\"middle\">{xl}</text>\
         <text x=\"12\" y=\"{cy}\" transform=\"rotate(-90 12 {cy})\" text-anchor=\"middle\">{yl}</text>",
        l = M.0,
        r = W - M.1,
        t = M.2,
        b = H - M.3,
        cx = (W + M.0) / 2.0,
        ly = H - 8.0,
        cy = H / 2.0,
        xl = esc(xlabel),
        yl = esc(ylabel),
    );
    for i in 0..=4 {
        let v = s.y1 * f64::from(i) / 4.0;
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            M.0 - 4.0,
            s.y(v) + 4.0,
            tick(v)
        );
        let xv = s.x0 + (s.x1 - s.x0) * f64::from(i) / 4.0;
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            s.x(xv),
            H - M.3 + 14.0,
            tick(xv)
        );
    }
}

fn tick(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A named, coloured series of points.
pub type Series<'a> = (&'a str, &'a str, &'a [(f64, f64)]);

/// A line plot of several series sharing axes, as a standalone `<svg>`
/// (or a `<p>` saying there is no data). `from_zero`: the x axis starts at 0.
pub fn lines(xlabel: &str, ylabel: &str, series: &[Series<'_>], from_zero: bool) -> String {
    let all = series.iter().flat_map(|s| s.2.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        return "<p>no data</p>\n".into();
    }
    if from_zero {
        x0 = 0.0;
    }
    let s = Scale {
        x0,
        x1,
        y1: y1 * 1.05,
    };
    let mut o = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\">");
    axes(&mut o, &s, xlabel, ylabel);
    for (i, (name, color, pts)) in series.iter().enumerate() {
        let path: Vec<String> = pts
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", s.x(x), s.y(y)))
            .collect();
        let _ = write!(
            o,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"{color}\">{}</text>",
            path.join(" "),
            W - M.1 - 90.0,
            M.2 + 12.0 + 14.0 * i as f64,
            esc(name)
        );
    }
    o.push_str("</svg>\n");
    o
}

/// Horizontal box plots as a standalone `<svg>`: whiskers min..p99, box
/// p25..p75, median line, max as a dot.
pub fn boxes(views: &[(&str, &Latency)]) -> String {
    let y1 = views
        .iter()
        .map(|v| v.1.max_ms)
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.05;
    let mut o = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\">");
    let s = Scale {
        x0: 0.0,
        x1: y1,
        y1: 1.0,
    };
    let row_h = (H - M.2 - M.3) / views.len() as f64;
    for (i, (name, l)) in views.iter().enumerate() {
        let cy = M.2 + row_h * (i as f64 + 0.5);
        let (bt, bh) = (cy - row_h * 0.25, row_h * 0.5);
        let _ = write!(
            o,
            "<line x1=\"{:.1}\" y1=\"{cy:.1}\" x2=\"{:.1}\" y2=\"{cy:.1}\" stroke=\"#000\"/>\
             <rect x=\"{:.1}\" y=\"{bt:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#9cf\" stroke=\"#000\"/>\
             <line x1=\"{m:.1}\" y1=\"{bt:.1}\" x2=\"{m:.1}\" y2=\"{:.1}\" stroke=\"#c22\" stroke-width=\"2\"/>\
             <circle cx=\"{:.1}\" cy=\"{cy:.1}\" r=\"3\"/>\
             <text x=\"4\" y=\"{:.1}\">{}</text>",
            s.x(l.min_ms),
            s.x(l.p99_ms),
            s.x(l.p25_ms),
            (s.x(l.p75_ms) - s.x(l.p25_ms)).max(1.0),
            bt + bh,
            s.x(l.max_ms),
            cy + 4.0,
            esc(name),
            m = s.x(l.p50_ms),
        );
    }
    for i in 0..=4 {
        let v = y1 * f64::from(i) / 4.0;
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            s.x(v),
            H - M.3 + 14.0,
            tick(v)
        );
    }
    let _ = write!(
        o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">ms (whiskers min–p99, box p25–p75, red p50, dot max)</text></svg>",
        (W + M.0) / 2.0,
        H - 8.0
    );
    o.push('\n');
    o
}
