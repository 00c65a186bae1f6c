//! Energy and power accounting over sample series. Pure.
//!
//! - Energy over a window comes from a cumulative counter when the device has one: the
//!   counter is unwrapped (wrap-around at a known range, e.g. RAPL's `max_energy_range_uj`)
//!   and interpolated linearly at the window's edges.
//! - Else it is the trapezoid integral of timestamped power samples (irregular intervals are
//!   fine), also interpolated at the edges.
//! - Coverage says which part of the window had samples within `max_gap` of each other;
//!   a window not fully covered is reported as such, never silently scaled.

use serde::{Deserialize, Serialize};

/// Result of integrating one series over a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Integral {
    pub joules: f64,
    /// Fraction of the window covered by samples no further apart than the allowed gap.
    pub coverage: f64,
}

/// Unwraps a cumulative counter: each decrease is a wrap by `wrap` (when known) or a reset
/// (the delta across it is dropped). Returns the monotone series.
pub(crate) fn unwrap_counter(values: &[f64], wrap: Option<f64>) -> Vec<f64> {
    let mut out = Vec::with_capacity(values.len());
    let mut offset = 0.0;
    for (i, &v) in values.iter().enumerate() {
        if i > 0 && v < values[i - 1] {
            match wrap {
                Some(w) => offset += w,
                // A reset: continue from the last unwrapped value.
                None => offset = out[i - 1] - v,
            }
        }
        out.push(v + offset);
    }
    out
}

/// Linear interpolation of (t, v) at time `t`; None outside the samples.
fn interpolate(ts: &[i64], vs: &[f64], t: i64) -> Option<f64> {
    if ts.is_empty() || t < ts[0] || t > *ts.last()? {
        return None;
    }
    let i = ts.partition_point(|&x| x < t);
    if ts[i] == t {
        return Some(vs[i]);
    }
    let (t0, t1) = (ts[i - 1], ts[i]);
    let f = (t - t0) as f64 / (t1 - t0) as f64;
    Some(vs[i - 1] + (vs[i] - vs[i - 1]) * f)
}

fn coverage(ts: &[i64], start: i64, end: i64, max_gap: i64) -> f64 {
    if end <= start {
        return 0.0;
    }
    let mut covered = 0i64;
    for w in ts.windows(2) {
        let (a, b) = (w[0].max(start), w[1].min(end));
        if b > a && w[1] - w[0] <= max_gap {
            covered += b - a;
        }
    }
    covered as f64 / (end - start) as f64
}

/// Energy in joules from a cumulative counter in millijoules over [start, end] (ns).
/// Samples must be sorted by time. None when the samples do not bracket the window.
pub(crate) fn counter_energy(
    ts: &[i64],
    mj: &[f64],
    wrap_mj: Option<f64>,
    start: i64,
    end: i64,
    max_gap: i64,
) -> Option<Integral> {
    let unwrapped = unwrap_counter(mj, wrap_mj);
    let a = interpolate(ts, &unwrapped, start)?;
    let b = interpolate(ts, &unwrapped, end)?;
    Some(Integral {
        joules: (b - a) / 1000.0,
        coverage: coverage(ts, start, end, max_gap),
    })
}

/// Energy in joules as the trapezoid integral of power (W) over [start, end] (ns).
pub(crate) fn power_integral(
    ts: &[i64],
    watts: &[f64],
    start: i64,
    end: i64,
    max_gap: i64,
) -> Option<Integral> {
    let pa = interpolate(ts, watts, start)?;
    let pb = interpolate(ts, watts, end)?;
    let mut pts: Vec<(i64, f64)> = vec![(start, pa)];
    pts.extend(
        ts.iter()
            .zip(watts)
            .filter(|(t, _)| **t > start && **t < end)
            .map(|(t, w)| (*t, *w)),
    );
    pts.push((end, pb));
    let joules = pts
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) as f64 / 1e9 * (w[0].1 + w[1].1) / 2.0)
        .sum();
    Some(Integral {
        joules,
        coverage: coverage(ts, start, end, max_gap),
    })
}

/// The values whose time falls in [start, end].
fn inside(ts: &[i64], vs: &[f64], start: i64, end: i64) -> Vec<f64> {
    ts.iter()
        .zip(vs)
        .filter(|(t, _)| **t >= start && **t <= end)
        .map(|(_, v)| *v)
        .collect()
}

/// Mean and peak of the values whose time falls in [start, end].
pub(crate) fn mean_peak(ts: &[i64], vs: &[f64], start: i64, end: i64) -> Option<(f64, f64)> {
    let inside = inside(ts, vs, start, end);
    if inside.is_empty() {
        return None;
    }
    let mean = inside.iter().sum::<f64>() / inside.len() as f64;
    Some((mean, inside.iter().copied().fold(f64::MIN, f64::max)))
}

/// How many values fall in [start, end] and their sample standard deviation (n − 1): the
/// spread that bounds how precisely instant power readings integrate over the window.
/// None below two values.
pub(crate) fn spread(ts: &[i64], vs: &[f64], start: i64, end: i64) -> Option<(u64, f64)> {
    let inside = inside(ts, vs, start, end);
    let n = inside.len();
    if n < 2 {
        return None;
    }
    let mean = inside.iter().sum::<f64>() / n as f64;
    let var = inside.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((n as u64, var.sqrt()))
}

/// Sentences in generated text: split at runs of `.`, `!` or `?` followed by whitespace or
/// the end, and at line breaks; non-empty trimmed pieces count.
pub(crate) fn sentences(text: &str) -> usize {
    let mut n = 0;
    for line in text.lines() {
        let chars: Vec<char> = line.chars().collect();
        let mut piece = String::new();
        let mut i = 0;
        while i < chars.len() {
            piece.push(chars[i]);
            if matches!(chars[i], '.' | '!' | '?') {
                while i + 1 < chars.len() && matches!(chars[i + 1], '.' | '!' | '?') {
                    i += 1;
                }
                if i + 1 == chars.len() || chars[i + 1].is_whitespace() {
                    if piece.chars().any(char::is_alphanumeric) {
                        n += 1;
                    }
                    piece.clear();
                }
            }
            i += 1;
        }
        if piece.chars().any(char::is_alphanumeric) {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn counter_deltas_interpolate_at_the_window_edges() {
        // 100 W constant: 100 J per second = 100_000 mJ per second.
        let ts: Vec<i64> = (0..=10).map(|i| i * S).collect();
        let mj: Vec<f64> = (0..=10).map(|i| 5_000.0 + i as f64 * 100_000.0).collect();
        let e = counter_energy(&ts, &mj, None, S / 2, 9 * S + S / 2, S).unwrap();
        assert!((e.joules - 900.0).abs() < 1e-9, "{e:?}");
        assert_eq!(e.coverage, 1.0);
        assert!(
            counter_energy(&ts, &mj, None, -1, 5 * S, S).is_none(),
            "window outside samples"
        );
    }

    #[test]
    fn counter_wrap_around_is_unwrapped() {
        // RAPL-style counter wrapping at 1_000_000 mJ.
        let ts: Vec<i64> = (0..5).map(|i| i * S).collect();
        let mj = [900_000.0, 950_000.0, 0.0, 50_000.0, 100_000.0];
        let e = counter_energy(&ts, &mj, Some(1_000_000.0), 0, 4 * S, S).unwrap();
        assert!((e.joules - 200.0).abs() < 1e-9, "{e:?}");
        // Unknown range: a decrease is a reset, its delta dropped.
        assert_eq!(
            unwrap_counter(&[10.0, 20.0, 5.0, 15.0], None),
            vec![10.0, 20.0, 20.0, 30.0]
        );
    }

    #[test]
    fn trapezoids_over_irregular_intervals() {
        // Power ramps 0 → 100 W over 10 s with irregular sampling: 500 J exactly.
        let ts = [0, S, 3 * S, 3 * S + S / 2, 7 * S, 10 * S];
        let w: Vec<f64> = ts.iter().map(|t| *t as f64 / S as f64 * 10.0).collect();
        let e = power_integral(&ts, &w, 0, 10 * S, 5 * S).unwrap();
        assert!((e.joules - 500.0).abs() < 1e-9, "{e:?}");
        let e = power_integral(&ts, &w, 2 * S, 8 * S, 5 * S).unwrap();
        assert!((e.joules - 300.0).abs() < 1e-9, "{e:?}");
    }

    #[test]
    fn missing_samples_lower_the_coverage_not_the_energy_silently() {
        let ts = [0, S, 2 * S, 8 * S, 9 * S, 10 * S];
        let w = [100.0; 6];
        let e = power_integral(&ts, &w, 0, 10 * S, S + S / 10).unwrap();
        assert!((e.joules - 1000.0).abs() < 1e-9);
        assert!((e.coverage - 0.4).abs() < 1e-12, "{e:?}");
    }

    #[test]
    fn idle_subtraction_is_plain_arithmetic_on_these() {
        let ts: Vec<i64> = (0..=20).map(|i| i * S).collect();
        let w: Vec<f64> = (0..=20)
            .map(|i| if i < 10 { 80.0 } else { 200.0 })
            .collect();
        let idle = power_integral(&ts, &w, 0, 9 * S, S).unwrap().joules / 9.0;
        let run = power_integral(&ts, &w, 10 * S, 20 * S, S).unwrap().joules;
        assert_eq!(idle, 80.0);
        assert_eq!(run - idle * 10.0, 1200.0);
        assert_eq!(mean_peak(&ts, &w, 10 * S, 20 * S), Some((200.0, 200.0)));
    }

    #[test]
    fn sentence_splitter() {
        assert_eq!(sentences("Hello there. How are you? Fine!"), 3);
        assert_eq!(sentences("Version 2.5 is out"), 1);
        assert_eq!(sentences("Wait... what?!"), 2);
        assert_eq!(sentences("line one\nline two\n\n"), 2);
        assert_eq!(sentences("  "), 0);
        assert_eq!(sentences("B"), 1);
    }
}
