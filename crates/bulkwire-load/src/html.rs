//! The `--report FILE.html` page: self-contained (inline SVG and CSS, no
//! scripts, nothing fetched), with requests per second over time, every
//! answer by status and fault, latency over time, a percentile plot, box
//! plots of both latency views and, when sampled, server memory over time.
//!
//! Axes are labelled at round values ([`ticks`]: steps of 1, 2 or 5 times a
//! power of ten), and each axis is stretched to a tick at both ends.
//!
//! Every `<svg>` has a `viewBox`, and text must fit in it: with no font
//! metrics at hand, [`text_width`] over-estimates a label's width, and the
//! bar chart makes its margins (and, if need be, itself) wide enough for
//! its widest labels (issue 23: a count of "1000" at the end of the longest
//! bar was cut at the edge).

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
    o.push_str("<h2>Requests per second (by completion second)</h2>\n");
    o.push_str(&rps(r));
    o.push_str("<h2>Answers by status and fault</h2>\n");
    o.push_str(&statuses(r));
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

/// Completed requests and errors per second of the run.
fn rps(r: &Report) -> String {
    let per_s = |f: fn(&crate::stats::Bucket) -> u64| -> Vec<(f64, f64)> {
        r.timeline
            .iter()
            .map(|b| (b.t as f64, f(b) as f64))
            .collect()
    };
    let done = per_s(|b| b.count);
    let errors = per_s(|b| b.errors);
    lines(
        "seconds",
        "requests/s",
        &[("completed", "#27c", &done), ("errors", "#c22", &errors)],
        true,
    )
}

/// One bar per status, per fault code and per reason a request got no
/// answer. A fault is also counted under its status: XML-RPC faults come
/// with 200.
fn statuses(r: &Report) -> String {
    let mut bars = Vec::new();
    for (k, &n) in &r.by_status {
        let color = if k.starts_with('2') { "#2a7" } else { "#c72" };
        bars.push((format!("status {k}"), n, color));
    }
    for (k, &n) in &r.by_fault {
        bars.push((format!("fault {k}"), n, "#c22"));
    }
    for (k, &n) in &r.by_error {
        bars.push((format!("no answer: {k}"), n, "#888"));
    }
    bar_chart(&bars, "requests")
}

/// Horizontal bars `(label, count, colour)` on a count axis from 0, as a
/// standalone `<svg>` (or a `<p>` when there is nothing to show).
pub fn bar_chart(bars: &[(String, u64, &str)], xlabel: &str) -> String {
    let Some(max) = bars.iter().map(|b| b.1).max() else {
        return "<p>no data</p>\n".into();
    };
    let xt = ticks(0.0, max as f64, MAX_TICK_STEPS);
    let top_tick = xt[xt.len() - 1];
    let step = xt.get(1).map_or(1.0, |t| t - xt[0]);
    // The labels take the left, each count the room after its bar (the
    // longest reaches the axis's end) and the last tick half its width;
    // the bars and the axis the rest, at least BAR_MIN_W.
    let widest =
        |texts: &mut dyn Iterator<Item = String>| texts.map(|t| text_width(&t)).fold(0.0, f64::max);
    let left = BAR_LABEL_W.max(widest(&mut bars.iter().map(|b| b.0.clone())) + 12.0);
    let count_w = widest(&mut bars.iter().map(|b| b.1.to_string()));
    let tick_w = text_width(&label(top_tick, step));
    let right = M.1.max(count_w + 8.0).max(tick_w / 2.0 + 4.0);
    let width = W.max(left + BAR_MIN_W + right);
    let x = |v: f64| left + v / top_tick * (width - left - right);
    let row_h = 22.0;
    let height = M.2 + M.3 + row_h * bars.len() as f64;
    let mut o = svg_open(width, height);
    for (i, (label, n, color)) in bars.iter().enumerate() {
        let top = M.2 + row_h * i as f64;
        let _ = write!(
            o,
            "<rect x=\"{left}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <text x=\"{:.1}\" y=\"{:.1}\">{n}</text>",
            top + 3.0,
            (x(*n as f64) - left).max(1.0),
            row_h - 6.0,
            left - 6.0,
            top + row_h / 2.0 + 4.0,
            esc(label),
            x(*n as f64) + 4.0,
            top + row_h / 2.0 + 4.0,
        );
    }
    let bottom = height - M.3;
    let _ = write!(
        o,
        "<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"#000\"/>",
        width - right
    );
    for &v in &xt {
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(v),
            bottom + 14.0,
            label(v, step)
        );
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text></svg>",
        (width - right + left) / 2.0,
        height - 8.0,
        esc(xlabel)
    );
    o
}

/// An `<svg>` start tag of this size, with the `viewBox` its text is laid
/// out in.
fn svg_open(width: f64, height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\">"
    )
}

/// The font size of every `<text>` (the page's CSS says so too).
const FONT_PX: f64 = 11.0;

/// An upper bound on `text`'s width at `FONT_PX` (11 px) in a sans-serif font:
/// 0.9 em for capitals and the wide `m` and `w`, 0.65 em for the rest.
/// DejaVu Sans, the widest common default, has digits of 0.64 em, most
/// lower-case letters below 0.65 em and capitals up to 0.86 em (`W`, at
/// 0.99, is the one wider, rare enough in a label to be made up for by the
/// rest).
pub fn text_width(text: &str) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'A'..='Z' | 'm' | 'w' => 0.9,
            _ => 0.65,
        })
        .sum();
    em * FONT_PX
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

/// Room for the bar labels of [`bar_chart`], at least.
const BAR_LABEL_W: f64 = 180.0;
/// The bars' and axis's width in [`bar_chart`], at least.
const BAR_MIN_W: f64 = 240.0;

/// Most intervals between ticks on an axis.
const MAX_TICK_STEPS: usize = 6;

/// Round tick values covering `lo..=hi`: a step of 1, 2 or 5 times a power
/// of ten, the smallest that spans the range in at most `max_steps` steps
/// (but at least one); the first tick is at or below `lo`, the last at or
/// above `hi`. An empty or reversed range gets one step above `lo`.
pub fn ticks(lo: f64, hi: f64, max_steps: usize) -> Vec<f64> {
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let hi = if hi.is_finite() && hi > lo {
        hi
    } else {
        lo + 1.0
    };
    let raw = (hi - lo) / max_steps.max(1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * power);
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    // Multiples of the step, computed each from its index, rounded to the
    // step's decimals so that 3 * 0.1 prints as 0.3.
    let scale = 10f64.powi(decimals(step) as i32);
    (first..=last.max(first + 1))
        .map(|k| (k as f64 * step * scale).round() / scale)
        .collect()
}

/// Decimals needed to print multiples of `step` exactly (0 for steps ≥ 1).
fn decimals(step: f64) -> usize {
    (-(step.log10().floor())).max(0.0) as usize
}

/// A tick's text, with as many decimals as its axis's step needs.
fn label(v: f64, step: f64) -> String {
    format!("{v:.*}", decimals(step))
}

struct Scale {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Scale {
    fn x(&self, v: f64) -> f64 {
        let span = (self.x1 - self.x0).max(1e-9);
        M.0 + (v - self.x0) / span * (W - M.0 - M.1)
    }

    fn y(&self, v: f64) -> f64 {
        let span = (self.y1 - self.y0).max(1e-9);
        H - M.3 - (v - self.y0) / span * (H - M.2 - M.3)
    }
}

fn axes(o: &mut String, s: &Scale, xt: &[f64], yt: &[f64], xlabel: &str, ylabel: &str) {
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
    let step = |t: &[f64]| t.get(1).map_or(1.0, |b| b - t[0]);
    let (ys, xs) = (step(yt), step(xt));
    for &v in yt {
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            M.0 - 4.0,
            s.y(v) + 4.0,
            label(v, ys)
        );
    }
    for &v in xt {
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            s.x(v),
            H - M.3 + 14.0,
            label(v, xs)
        );
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
        x0 = x0.min(0.0);
    }
    let xt = ticks(x0, x1, MAX_TICK_STEPS);
    let yt = ticks(0.0, y1, MAX_TICK_STEPS);
    let s = Scale {
        x0: xt[0],
        x1: xt[xt.len() - 1],
        y0: yt[0],
        y1: yt[yt.len() - 1],
    };
    let mut o = svg_open(W, H);
    axes(&mut o, &s, &xt, &yt, xlabel, ylabel);
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
    let top = views
        .iter()
        .map(|v| v.1.max_ms)
        .fold(0.0, f64::max)
        .max(1e-3);
    let xt = ticks(0.0, top, MAX_TICK_STEPS);
    let mut o = svg_open(W, H);
    let s = Scale {
        x0: 0.0,
        x1: xt[xt.len() - 1],
        y0: 0.0,
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
    let step = xt.get(1).map_or(1.0, |b| b - xt[0]);
    for &v in &xt {
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            s.x(v),
            H - M.3 + 14.0,
            label(v, step)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `step` is 1, 2 or 5 times a power of ten.
    fn round_step(step: f64) -> bool {
        let m = step / 10f64.powf(step.log10().floor());
        [1.0, 2.0, 5.0, 10.0].iter().any(|r| (m - r).abs() < 1e-6)
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 97.0, 5), [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(0.0, 0.37, 5), [0.0, 0.1, 0.2, 0.3, 0.4]);
        assert_eq!(ticks(0.0, 1234.0, 6), [0.0, 500.0, 1000.0, 1500.0]);
        assert_eq!(ticks(3.0, 17.0, 6), [0.0, 5.0, 10.0, 15.0, 20.0]);
        assert_eq!(ticks(0.0, 10.0, 5), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        // Nothing to span: one step up from the value.
        assert_eq!(ticks(0.0, 0.0, 5), [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(ticks(5.0, 5.0, 1), [5.0, 6.0]);
        for (lo, hi) in [
            (0.0, 0.0123),
            (1.5, 1.51),
            (0.0, 9.99e6),
            (-3.0, 41.0),
            (0.0, 1.0),
        ] {
            for max in 1..=8 {
                let t = ticks(lo, hi, max);
                let step = t[1] - t[0];
                assert!(round_step(step), "{lo}..{hi} step {step}");
                assert!(
                    t.len() >= 2 && t.len() - 1 <= max + 1,
                    "{lo}..{hi}/{max}: {t:?}"
                );
                assert!(t[0] <= lo && t[t.len() - 1] >= hi, "{lo}..{hi}: {t:?}");
                assert!(t
                    .windows(2)
                    .all(|w| ((w[1] - w[0]) - step).abs() < step * 1e-6));
            }
        }
    }

    #[test]
    fn labels_have_the_steps_decimals() {
        let t = ticks(0.0, 0.37, 5);
        let labels: Vec<_> = t.iter().map(|v| label(*v, t[1] - t[0])).collect();
        assert_eq!(labels, ["0.0", "0.1", "0.2", "0.3", "0.4"]);
        assert_eq!(label(1500.0, 500.0), "1500");
        assert_eq!(label(0.05, 0.05), "0.05");
    }

    /// `(viewBox width, height)` of an `<svg>`.
    fn view_box(svg: &str) -> (f64, f64) {
        let v = svg.split("viewBox=\"").nth(1).expect("a viewBox");
        let n: Vec<f64> = v[..v.find('"').unwrap()]
            .split(' ')
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(&n[..2], [0.0, 0.0]);
        (n[2], n[3])
    }

    /// Every `<text>`'s text and its horizontal extent, from its `x`, its
    /// anchor and [`text_width`] (rotated text aside).
    fn text_extents(svg: &str) -> Vec<(String, f64, f64)> {
        let mut out = Vec::new();
        for piece in svg.split("<text ").skip(1) {
            let (attrs, rest) = piece.split_once('>').unwrap();
            if attrs.contains("rotate(") {
                continue;
            }
            let text = rest[..rest.find("</text>").unwrap()]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&");
            let attr = |name: &str| {
                let v = attrs.split(&format!("{name}=\"")).nth(1)?;
                Some(v[..v.find('"').unwrap()].to_owned())
            };
            let x: f64 = attr("x").unwrap().parse().unwrap();
            let w = text_width(&text);
            let (from, to) = match attr("text-anchor").as_deref() {
                Some("end") => (x - w, x),
                Some("middle") => (x - w / 2.0, x + w / 2.0),
                _ => (x, x + w),
            };
            out.push((text, from, to));
        }
        out
    }

    fn assert_text_fits(svg: &str) {
        let (width, _) = view_box(svg);
        let texts = text_extents(svg);
        assert!(!texts.is_empty(), "{svg}");
        for (text, from, to) in texts {
            assert!(
                from >= 0.0 && to <= width,
                "{text:?} spans {from:.1}..{to:.1} of 0..{width}:\n{svg}"
            );
        }
    }

    /// Issue 23: with 1,000 answers of one status, the axis ends at 1000
    /// and so does the longest bar; its count "1000" was drawn after it,
    /// past the SVG's right edge.
    #[test]
    fn a_wide_status_label_fits_in_the_bar_charts_view_box() {
        let bars = vec![("status 200".to_string(), 1000, "#2a7")];
        let svg = bar_chart(&bars, "requests");
        assert!(svg.contains(">1000</text>"), "{svg}");
        assert_text_fits(&svg);
        assert_eq!(view_box(&svg).0, W, "room enough without widening");
        // Wider still: a long fault code on the left, an eight-digit count.
        let bars = vec![
            ("status 200".to_string(), 12_345_678, "#2a7"),
            (
                "fault soap:Client.Authentication.FailedCheckFAILED".to_string(),
                3,
                "#c22",
            ),
            ("no answer: connect-timeout".to_string(), 10_000_000, "#888"),
        ];
        let svg = bar_chart(&bars, "requests");
        assert_text_fits(&svg);
    }

    #[test]
    fn text_width_is_not_under_dejavu_sans() {
        // DejaVu Sans advance widths (em): digits 0.636, `s` 0.521, `M`
        // 0.863, `W` 0.989 (the one glyph past 0.9, said so).
        let em = |t: &str| text_width(t) / FONT_PX;
        assert!(em("1000") >= 4.0 * 0.636);
        assert!(em("status") >= 6.0 * 0.6);
        assert!(em("MMM") >= 3.0 * 0.863);
    }

    #[test]
    fn plots_and_boxes_keep_their_text_in_their_view_box() {
        let pts: Vec<(f64, f64)> = (0..30).map(|i| (i as f64, 99_999.0 * i as f64)).collect();
        assert_text_fits(&lines(
            "seconds",
            "requests/s",
            &[("uncorrected", "#27c", &pts)],
            true,
        ));
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for v in [900_000u64, 1_000_000, 2_000_000] {
            h.record(v).unwrap();
        }
        let l = crate::stats::latency(&h);
        assert_text_fits(&boxes(&[("corrected", &l), ("uncorrected", &l)]));
    }

    #[test]
    fn bars_are_drawn_to_a_round_axis() {
        let bars = vec![
            ("status 200".to_string(), 70, "#2a7"),
            ("fault xmlrpc:403".to_string(), 70, "#c22"),
            ("no answer: io".to_string(), 3, "#888"),
        ];
        let svg = bar_chart(&bars, "requests");
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains(">fault xmlrpc:403</text>"), "{svg}");
        for tick in [">0</text>", ">20</text>", ">80</text>"] {
            assert!(svg.contains(tick), "{tick} in {svg}");
        }
        assert_eq!(bar_chart(&[], "requests"), "<p>no data</p>\n");
    }
}
