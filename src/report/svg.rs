//! Small, dependency-free SVG charts for the HTML report: scatter/line charts with optional
//! threshold lines and point labels, and grouped bar charts. Pure: they return strings.

use std::fmt::Write;

const W: f64 = 640.0;
const H: f64 = 360.0;
const L: f64 = 64.0;
const R: f64 = 170.0;
const T: f64 = 36.0;
const B: f64 = 48.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Joined by lines (else markers only).
    pub line: bool,
    /// Per-point labels drawn beside the markers.
    pub labels: Vec<String>,
    /// Optional vertical error bars (low, high), one per point.
    pub errors: Vec<Option<(f64, f64)>>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>, line: bool) -> Self {
        Series {
            name: name.into(),
            points,
            line,
            labels: Vec::new(),
            errors: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Horizontal threshold lines (label, y).
    pub hlines: Vec<(String, f64)>,
}

/// "Nice" tick step for a range.
fn step(span: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    mag * if n < 1.5 {
        1.0
    } else if n < 3.0 {
        2.0
    } else if n < 7.0 {
        5.0
    } else {
        10.0
    }
}

fn fmt_tick(v: f64) -> String {
    if v.abs() >= 1000.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn range(vals: impl Iterator<Item = f64>, include_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if include_zero {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-12 {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.05;
    (
        if include_zero && lo >= 0.0 {
            lo
        } else {
            lo - pad
        },
        hi + pad,
    )
}

/// A generous width of `chars` characters of sans-serif text at `size` px (0.62 em each), so
/// that labels are never cut.
fn text_px(chars: usize, size: f64) -> f64 {
    chars as f64 * size * 0.62
}

impl Chart {
    /// The chart as inline SVG: axes and ticks, series with error bars and labels, legend,
    /// horizontal threshold lines.
    ///
    /// Long on purpose: one drawing pass whose parts share the scales and the plot area.
    pub fn svg(&self) -> String {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = self.series.iter().flat_map(|s| {
            s.points.iter().enumerate().flat_map(|(j, p)| {
                let (lo, hi) = s.errors.get(j).copied().flatten().unwrap_or((p.1, p.1));
                [lo.min(p.1), hi.max(p.1)]
            })
        });
        let (x0, x1) = range(xs, false);
        let (y0, y1) = range(ys.chain(self.hlines.iter().map(|h| h.1)), true);
        let px = |x: f64| L + (x - x0) / (x1 - x0) * (W - L - R);
        let py = |y: f64| H - B - (y - y0) / (y1 - y0) * (H - T - B);
        // The legend right of the plot is as wide as its longest name: never cut.
        let longest = self
            .series
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0);
        let width = W.max(W - R + 24.0 + text_px(longest, 10.0) + 10.0);
        let mut s = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {H}" width="{width}" height="{H}" role="img"><title>{}</title>"#,
            esc(&self.title)
        );
        let _ = write!(
            s,
            r#"<text x="{L}" y="20" font-size="14" font-weight="bold">{}</text>"#,
            esc(&self.title)
        );
        // Axes and ticks.
        let _ = write!(
            s,
            r##"<g stroke="#888" font-size="10" fill="#333"><line x1="{L}" y1="{}" x2="{}" y2="{}"/><line x1="{L}" y1="{T}" x2="{L}" y2="{}"/>"##,
            H - B,
            W - R,
            H - B,
            H - B
        );
        let xs_step = step(x1 - x0);
        let mut v = (x0 / xs_step).ceil() * xs_step;
        while v <= x1 + 1e-9 {
            let _ = write!(
                s,
                r#"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}"/><text x="{0}" y="{3}" text-anchor="middle" stroke="none">{4}</text>"#,
                px(v),
                H - B,
                H - B + 4.0,
                H - B + 16.0,
                fmt_tick(v)
            );
            v += xs_step;
        }
        let ys_step = step(y1 - y0);
        let mut v = (y0 / ys_step).ceil() * ys_step;
        while v <= y1 + 1e-9 {
            let _ = write!(
                s,
                r##"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#eee"/><text x="{3}" y="{4}" text-anchor="end" stroke="none">{5}</text>"##,
                L,
                py(v),
                W - R,
                L - 4.0,
                py(v) + 3.0,
                fmt_tick(v)
            );
            v += ys_step;
        }
        s.push_str("</g>");
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" font-size="11" text-anchor="middle">{}</text>"#,
            (L + W - R) / 2.0,
            H - 10.0,
            esc(&self.x_label)
        );
        let _ = write!(
            s,
            r#"<text x="14" y="{}" font-size="11" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>"#,
            (T + H - B) / 2.0,
            (T + H - B) / 2.0,
            esc(&self.y_label)
        );
        for (label, y) in &self.hlines {
            let _ = write!(
                s,
                r##"<g class="slo"><line x1="{L}" y1="{0}" x2="{1}" y2="{0}" stroke="#d62728" stroke-dasharray="6 4"/><text x="{1}" y="{2}" font-size="10" fill="#d62728" text-anchor="end">{3}</text></g>"##,
                py(*y),
                W - R,
                py(*y) - 3.0,
                esc(label)
            );
        }
        for (i, ser) in self.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let _ = write!(s, r#"<g class="series" data-name="{}">"#, esc(&ser.name));
            if ser.line && ser.points.len() > 1 {
                let pts: Vec<String> = ser
                    .points
                    .iter()
                    .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1)))
                    .collect();
                let _ = write!(
                    s,
                    r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
                    pts.join(" ")
                );
            }
            for (j, p) in ser.points.iter().enumerate() {
                if let Some(Some((lo, hi))) = ser.errors.get(j) {
                    let _ = write!(
                        s,
                        r#"<line class="errorbar" x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="{c}"/>"#,
                        px(p.0),
                        py(*lo),
                        py(*hi)
                    );
                }
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{c}"><title>{}: ({}, {})</title></circle>"#,
                    px(p.0),
                    py(p.1),
                    esc(&ser.name),
                    fmt_tick(p.0),
                    fmt_tick(p.1)
                );
                if let Some(l) = ser.labels.get(j).filter(|l| !l.is_empty()) {
                    let _ = write!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" font-size="9" fill="{c}">{}</text>"#,
                        px(p.0) + 6.0,
                        py(p.1) - 6.0,
                        esc(l)
                    );
                }
            }
            s.push_str("</g>");
            let ly = T + 14.0 * i as f64;
            let _ = write!(
                s,
                r#"<rect x="{}" y="{}" width="10" height="10" fill="{c}"/><text x="{}" y="{}" font-size="10">{}</text>"#,
                W - R + 10.0,
                ly,
                W - R + 24.0,
                ly + 9.0,
                esc(&ser.name)
            );
        }
        s.push_str("</svg>");
        s
    }
}

/// Horizontal stacked bars: one bar per category, one segment per part.
pub(crate) fn stacked_bars(
    title: &str,
    unit: &str,
    parts: &[&str],
    rows: &[(String, Vec<f64>)],
) -> String {
    let bar_h = 22.0;
    let h = T + 30.0 + bar_h * 1.5 * rows.len() as f64;
    let max = rows
        .iter()
        .map(|r| r.1.iter().sum::<f64>())
        .fold(0.0, f64::max)
        .max(1e-9);
    // Row names left of the bars and the parts' legend are as wide as their text.
    let longest = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let left = 220f64.max(text_px(longest, 10.0) + 16.0);
    let scale = (W - 220.0 - 40.0) / max;
    let width = left + (W - 220.0);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {h}" width="{width}" height="{h}" role="img"><title>{}</title><text x="10" y="20" font-size="14" font-weight="bold">{}</text>"#,
        esc(title),
        esc(title)
    );
    let mut lx = left;
    for (k, p) in parts.iter().enumerate() {
        let _ = write!(
            s,
            r#"<rect x="{}" y="28" width="10" height="10" fill="{}"/><text x="{}" y="37" font-size="10">{}</text>"#,
            lx,
            COLORS[k % COLORS.len()],
            lx + 14.0,
            esc(p)
        );
        lx += 14.0 + text_px(p.chars().count(), 10.0) + 16.0;
    }
    for (i, (name, vals)) in rows.iter().enumerate() {
        let y = T + 20.0 + bar_h * 1.5 * i as f64;
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" font-size="10" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + 15.0,
            esc(name)
        );
        let mut x = left;
        for (k, v) in vals.iter().enumerate() {
            let w = v.max(0.0) * scale;
            let _ = write!(
                s,
                r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{bar_h}" fill="{}"><title>{}: {} {unit}</title></rect>"#,
                COLORS[k % COLORS.len()],
                esc(parts.get(k).unwrap_or(&"")),
                fmt_tick(*v)
            );
            x += w;
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" font-size="10">{} {unit}</text>"#,
            x + 4.0,
            y + 15.0,
            fmt_tick(vals.iter().sum())
        );
    }
    s.push_str("</svg>");
    s
}

/// Histogram of values as a step series (count per bin).
pub(crate) fn histogram_series(name: &str, values: &[f64], bins: usize) -> Series {
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    if !lo.is_finite() || bins == 0 {
        return Series::new(name, Vec::new(), true);
    }
    let width = ((hi - lo) / bins as f64).max(1e-9);
    let mut counts = vec![0usize; bins];
    for v in values {
        counts[(((v - lo) / width) as usize).min(bins - 1)] += 1;
    }
    let pts = counts
        .iter()
        .enumerate()
        .map(|(i, c)| (lo + width * (i as f64 + 0.5), *c as f64))
        .collect();
    Series::new(name, pts, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legends_are_never_cut() {
        let name = "qwen2.5-coder-1.5b:q4_k_m@llama-cuda mmlu"; // 41 characters
        let chart = Chart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series::new(name, vec![(1.0, 1.0), (2.0, 2.0)], true)],
            ..Default::default()
        };
        let svg = chart.svg();
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap();
        assert!(width >= W - R + 24.0 + text_px(41, 10.0), "{width}");
        let bars = stacked_bars(
            "b",
            "J",
            &["a-very-long-part-name"],
            &[(name.to_string(), vec![1.0])],
        );
        let left_needed = text_px(41, 10.0);
        assert!(
            bars.contains(&format!("x=\"{}\"", 220f64.max(left_needed + 16.0) - 6.0)),
            "{bars}"
        );
    }

    #[test]
    fn charts_contain_their_series_thresholds_and_labels() {
        let mut s = Series::new("p99 <TTFT>", vec![(1.0, 100.0), (4.0, 900.0)], true);
        s.labels = vec!["a".into(), "b".into()];
        let chart = Chart {
            title: "t".into(),
            x_label: "users".into(),
            y_label: "ms".into(),
            series: vec![s],
            hlines: vec![("SLO 2 s".into(), 2000.0)],
        };
        let svg = chart.svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains(r#"data-name="p99 &lt;TTFT&gt;""#));
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("SLO 2 s") && svg.contains("<polyline"));
        let bars = stacked_bars(
            "cold start",
            "s",
            &["start", "load"],
            &[("d1".into(), vec![1.0, 2.0])],
        );
        assert_eq!(bars.matches(r#"class="bar""#).count(), 2);
        let h = histogram_series("x", &[1.0, 1.0, 2.0, 3.0], 2);
        assert_eq!(h.points.iter().map(|p| p.1).sum::<f64>(), 4.0);
    }
}
