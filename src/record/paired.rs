//! Statistics for deciding between configurations: paired comparisons of quality over the
//! items both answered, McNemar's exact test, how many items a difference needs, how many
//! requests a percentile needs, and a least-squares slope test. Pure; the reference values
//! of the tests come from `tests/fixtures/stats/reference.json` (scipy and a plain Python
//! bootstrap, `tests/python/stats_reference.py`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rng::SplitMix64;
use super::stats::{interval95, t95};

/// Per dataset item, the mean score over the requests that asked it (repeats pooled).
/// None when the scores and item names do not line up.
pub(crate) fn item_means(scores: &[f64], items: &[String]) -> Option<BTreeMap<String, f64>> {
    if scores.len() != items.len() || scores.is_empty() {
        return None;
    }
    let mut by: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (s, i) in scores.iter().zip(items) {
        let e = by.entry(i.clone()).or_default();
        e.0 += s;
        e.1 += 1.0;
    }
    Some(by.into_iter().map(|(k, (s, n))| (k, s / n)).collect())
}

/// McNemar's exact test on the items where exactly one side was right.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct McNemar {
    /// Items A got right and B wrong.
    pub only_a: u64,
    /// Items B got right and A wrong.
    pub only_b: u64,
    /// Two-sided exact p-value: 2 · P(X ≤ min(only_a, only_b)), X ~ Binomial(only_a +
    /// only_b, ½), at most 1.
    pub p: f64,
}

/// B − A over the items both scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Paired {
    /// Items both sides scored (the pairs).
    pub items: usize,
    /// Mean quality of each side over those items.
    pub a: f64,
    pub b: f64,
    /// b − a.
    pub delta: f64,
    /// 95 % percentile-bootstrap interval of the mean per-item difference (items resampled
    /// with replacement, seeded). None with fewer than two items.
    pub ci: Option<(f64, f64)>,
    /// When every pooled item score of both sides is 0 or 1.
    pub mcnemar: Option<McNemar>,
    /// Items a paired test would need to detect this difference (see [`items_needed`]).
    pub items_needed: Option<u64>,
}

impl Paired {
    /// The interval excludes zero (and, for pass/fail scores, McNemar agrees at 5 %).
    pub fn detectable(&self) -> bool {
        let ci = self.ci.is_some_and(|(lo, hi)| lo > 0.0 || hi < 0.0);
        match self.mcnemar {
            Some(m) => ci && m.p < 0.05,
            None => ci,
        }
    }

    /// B is not worse than A by more than `margin`: the interval's lower bound is at least
    /// −margin (non-inferiority on the paired interval).
    pub fn non_inferior(&self, margin: f64) -> bool {
        self.ci.is_some_and(|(lo, _)| lo >= -margin - 1e-12)
    }
}

/// Each common item's (A, B) values, in the items' name order.
pub(crate) fn common(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> Vec<(f64, f64)> {
    a.iter()
        .filter_map(|(k, va)| b.get(k).map(|vb| (*va, *vb)))
        .collect()
}

/// The 95 % percentile-bootstrap interval of `stat(Σ A, Σ B)` over `rounds` resamples of the
/// pairs (whole pairs drawn together, from `rng`); rounds where `stat` is None are left out.
/// None for fewer than two pairs.
pub(crate) fn paired_sums_ci(
    pairs: &[(f64, f64)],
    rounds: usize,
    rng: &mut SplitMix64,
    stat: impl Fn(f64, f64) -> Option<f64>,
) -> Option<(f64, f64)> {
    let n = pairs.len();
    if n < 2 {
        return None;
    }
    interval95(
        (0..rounds)
            .filter_map(|_| {
                let (mut sa, mut sb) = (0.0, 0.0);
                for _ in 0..n {
                    let (x, y) = pairs[rng.below(n)];
                    sa += x;
                    sb += y;
                }
                stat(sa, sb)
            })
            .collect(),
    )
}

/// Bootstrap rounds of the paired interval.
pub(crate) const ROUNDS: usize = 2000;

/// Paired comparison of B against A over the items both scored (their names' order, so the
/// same data and seed give the same interval). None without a common item.
pub(crate) fn paired(
    a: &BTreeMap<String, f64>,
    b: &BTreeMap<String, f64>,
    seed: u64,
) -> Option<Paired> {
    let pairs = common(a, b);
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len();
    let diffs: Vec<f64> = pairs.iter().map(|(x, y)| y - x).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (ma, mb) = (
        pairs.iter().map(|p| p.0).sum::<f64>() / n as f64,
        pairs.iter().map(|p| p.1).sum::<f64>() / n as f64,
    );
    let binary = pairs
        .iter()
        .all(|(x, y)| (*x == 0.0 || *x == 1.0) && (*y == 0.0 || *y == 1.0));
    let mcnemar = binary.then(|| {
        let only_a = pairs.iter().filter(|(x, y)| *x == 1.0 && *y == 0.0).count() as u64;
        let only_b = pairs.iter().filter(|(x, y)| *x == 0.0 && *y == 1.0).count() as u64;
        McNemar {
            only_a,
            only_b,
            p: mcnemar_exact(only_a, only_b),
        }
    });
    let delta = mean(&diffs);
    Some(Paired {
        items: n,
        a: ma,
        b: mb,
        delta,
        ci: paired_bootstrap(&diffs, ROUNDS, seed),
        mcnemar,
        items_needed: items_needed(&diffs),
    })
}

/// The 95 % percentile-bootstrap interval of the mean of per-item differences: `rounds`
/// resamples of n items with replacement (SplitMix64 from `seed`, index = ⌊u · n⌋ by
/// multiply-shift), the 2.5th and 97.5th percentiles of the resampled means (linear
/// interpolation between closest ranks). None for fewer than two items.
pub(crate) fn paired_bootstrap(diffs: &[f64], rounds: usize, seed: u64) -> Option<(f64, f64)> {
    let n = diffs.len();
    if n < 2 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    interval95(
        (0..rounds)
            .map(|_| (0..n).map(|_| diffs[rng.below(n)]).sum::<f64>() / n as f64)
            .collect(),
    )
}

/// Two-sided exact McNemar p-value from the discordant counts.
pub(crate) fn mcnemar_exact(only_a: u64, only_b: u64) -> f64 {
    let n = only_a + only_b;
    if n == 0 {
        return 1.0;
    }
    (2.0 * binomial_cdf_half(only_a.min(only_b), n)).min(1.0)
}

/// P(X ≤ k) for X ~ Binomial(n, ½).
fn binomial_cdf_half(k: u64, n: u64) -> f64 {
    binomial_cdf(k, n, 0.5)
}

/// P(X ≤ k) for X ~ Binomial(n, p), 0 < p < 1, summed in log space (exact to rounding for
/// any n).
pub(crate) fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut ln_pmf = n as f64 * lq; // k = 0
    let mut terms = vec![ln_pmf];
    for i in 0..k {
        ln_pmf += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + lp - lq;
        terms.push(ln_pmf);
    }
    let max = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (max + terms.iter().map(|t| (t - max).exp()).sum::<f64>().ln())
        .min(0.0)
        .exp()
}

/// The distribution-free interval of the q-th percentile (0–100) of `sorted` values between
/// two order statistics, with coverage at least `1 − alpha`: the lower one X₍ₗ₎ with the
/// largest l such that P(B ≤ l − 1) ≤ α/2 and the upper one X₍ᵤ₎ with the smallest u such
/// that P(B ≤ u − 1) ≥ 1 − α/2, B ~ Binomial(n, q). None when either end does not exist (too
/// few values: see [`percentile_min_n_at`]).
pub(crate) fn order_statistic_ci(sorted: &[f64], q: f64, alpha: f64) -> Option<(f64, f64)> {
    let (l, u) = order_statistic_ranks(sorted.len(), q, alpha)?;
    Some((sorted[l - 1], sorted[u - 1]))
}

/// [`order_statistic_ci`] of values that move together in time, worth `effective` independent
/// ones for this percentile (`record::stats::block::percentile_effective_n`): the ranks
/// Binomial(effective, q) gives, carried over to the whole sample at the same fractions of it
/// (the lower rounded down, the upper up), so the interval is as wide as `effective`
/// independent values would leave it. None when `effective` values are too few for an
/// interval.
pub(crate) fn order_statistic_ci_effective(
    sorted: &[f64],
    q: f64,
    alpha: f64,
    effective: usize,
) -> Option<(f64, f64)> {
    let n = sorted.len();
    if effective >= n {
        return order_statistic_ci(sorted, q, alpha);
    }
    let (l, u) = order_statistic_ranks(effective, q, alpha)?;
    let scale = n as f64 / effective as f64;
    let lo = ((l as f64 * scale).floor() as usize).clamp(1, n);
    let hi = ((u as f64 * scale).ceil() as usize).clamp(1, n);
    Some((sorted[lo - 1], sorted[hi - 1]))
}

/// The 1-based ranks (l, u) of [`order_statistic_ci`] for n values.
fn order_statistic_ranks(n: usize, q: f64, alpha: f64) -> Option<(usize, usize)> {
    let p = q / 100.0;
    if n == 0 || p <= 0.0 || p >= 1.0 {
        return None;
    }
    // The whole CDF of B at once, O(n): log pmf terms, then normalized running sums.
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut t = Vec::with_capacity(n + 1);
    let mut ln_pmf = n as f64 * lq;
    t.push(ln_pmf);
    for i in 0..n {
        ln_pmf += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + lp - lq;
        t.push(ln_pmf);
    }
    let max = t.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = t.iter().map(|x| (x - max).exp()).sum();
    let mut cdf = Vec::with_capacity(n + 1);
    let mut run = 0.0;
    for x in &t {
        run += (x - max).exp();
        cdf.push(run / total);
    }
    // Lower: the largest l ≥ 1 with P(B ≤ l − 1) ≤ α/2; upper: the smallest u with
    // P(B ≤ u − 1) ≥ 1 − α/2.
    let l = cdf
        .iter()
        .take(n)
        .take_while(|c| **c <= alpha / 2.0)
        .count();
    let u = 1 + cdf
        .iter()
        .take(n)
        .take_while(|c| **c < 1.0 - alpha / 2.0)
        .count();
    (l >= 1 && u <= n).then_some((l, u))
}

/// The smallest sample with a two-sided distribution-free interval of the q-th percentile at
/// coverage 1 − alpha: ⌈ln(α/2) / ln max(q, 1 − q)⌉.
pub(crate) fn percentile_min_n_at(q: f64, alpha: f64) -> usize {
    let p = (q / 100.0).max(1.0 - q / 100.0);
    if p >= 1.0 {
        return usize::MAX;
    }
    ((alpha / 2.0).ln() / p.ln() - 1e-9).ceil() as usize
}

/// z of the two-sided 5 % test and of 80 % power.
pub(crate) const Z_975: f64 = 1.959_963_984_540_054;
const Z_80: f64 = 0.841_621_233_572_914_3;

/// Items a paired test at 5 % (two-sided) with 80 % power would need to detect a mean
/// difference of the size observed, by the normal approximation:
/// n = ⌈((z₀.₉₇₅ + z₀.₈) · s / |d̄|)²⌉ with s the standard deviation of the per-item
/// differences (n − 1). None when no difference was observed or for fewer than two items.
pub(crate) fn items_needed(diffs: &[f64]) -> Option<u64> {
    let n = diffs.len();
    if n < 2 {
        return None;
    }
    let mean = diffs.iter().sum::<f64>() / n as f64;
    let sd = (diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    if mean.abs() < 1e-12 || sd == 0.0 {
        return None;
    }
    Some((((Z_975 + Z_80) * sd / mean.abs()).powi(2)).ceil() as u64)
}

/// The smallest sample whose q-th percentile (0–100) has a distribution-free two-sided 95 %
/// interval between order statistics: both q^n and (1 − q)^n must be at most 2.5 %, so
/// n ≥ ⌈ln 0.025 / ln max(q, 1 − q)⌉. p50: 6, p90: 36, p95: 72, p99: 368.
pub(crate) fn percentile_min_n(q: f64) -> usize {
    percentile_min_n_at(q, 0.05)
}

/// A least-squares line y = a + b·x with the 95 % t-interval of its slope.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Slope {
    pub n: usize,
    pub slope: f64,
    pub ci: (f64, f64),
    /// The fitted rise over the x range: slope × (max x − min x).
    pub rise: f64,
}

/// Ordinary least squares of `ys` on `xs`; None for fewer than three points or no spread in x.
pub(crate) fn slope(xs: &[f64], ys: &[f64]) -> Option<Slope> {
    let n = xs.len().min(ys.len());
    if n < 3 {
        return None;
    }
    let (mx, my) = (
        xs[..n].iter().sum::<f64>() / n as f64,
        ys[..n].iter().sum::<f64>() / n as f64,
    );
    let sxx: f64 = xs[..n].iter().map(|x| (x - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = xs[..n]
        .iter()
        .zip(&ys[..n])
        .map(|(x, y)| (x - mx) * (y - my))
        .sum();
    let b = sxy / sxx;
    let a = my - b * mx;
    let ssr: f64 = xs[..n]
        .iter()
        .zip(&ys[..n])
        .map(|(x, y)| (y - a - b * x).powi(2))
        .sum();
    let se = (ssr / (n - 2) as f64 / sxx).sqrt();
    let h = t95(n - 2) * se;
    let (lo, hi) = xs[..n]
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
            (l.min(*x), h.max(*x))
        });
    Some(Slope {
        n,
        slope: b,
        ci: (b - h, b + h),
        rise: b * (hi - lo),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference values: scipy for McNemar (`binomtest(...).pvalue`, the exact test) and
    /// the slope's interval (`linregress` + `t.ppf`), a plain Python bootstrap with the same
    /// generator for the paired interval. `tests/python/stats_reference.py` wrote them.
    fn reference() -> serde_json::Value {
        serde_json::from_str(include_str!("../../tests/fixtures/stats/reference.json"))
            .expect("reference.json parses")
    }

    fn floats(v: &serde_json::Value) -> Vec<f64> {
        v.as_array()
            .expect("an array")
            .iter()
            .map(|x| x.as_f64().expect("a number"))
            .collect()
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300)
    }

    #[test]
    fn mcnemar_matches_scipy() {
        let r = reference();
        for case in r["mcnemar"].as_array().unwrap() {
            let (b, c) = (case["b"].as_u64().unwrap(), case["c"].as_u64().unwrap());
            let want = case["p"].as_f64().unwrap();
            let got = mcnemar_exact(b, c);
            assert!(close(got, want, 1e-9), "b={b} c={c}: {got} vs scipy {want}");
        }
    }

    #[test]
    fn fewer_effective_values_widen_the_order_statistic_interval() {
        let sorted: Vec<f64> = (0..1000).map(f64::from).collect();
        let full = order_statistic_ci(&sorted, 50.0, 0.05).unwrap();
        assert_eq!(
            order_statistic_ci_effective(&sorted, 50.0, 0.05, 1000),
            Some(full)
        );
        assert_eq!(
            order_statistic_ci_effective(&sorted, 50.0, 0.05, 5000),
            Some(full)
        );
        // Worth 100: the ranks of Binomial(100, ½) (40 and 61) at the same fractions of 1000.
        let (l100, u100) = order_statistic_ranks(100, 50.0, 0.05).unwrap();
        let (lo, hi) = order_statistic_ci_effective(&sorted, 50.0, 0.05, 100).unwrap();
        assert_eq!((lo, hi), ((l100 * 10 - 1) as f64, (u100 * 10 - 1) as f64));
        assert!(lo < full.0 && hi > full.1);
        // Worth fewer than p99's rule asks: no interval.
        assert_eq!(order_statistic_ci_effective(&sorted, 99.0, 0.05, 100), None);
    }

    #[test]
    fn the_paired_bootstrap_matches_the_reference_implementation() {
        let r = reference();
        for case in r["paired_bootstrap"].as_array().unwrap() {
            let diffs = floats(&case["diffs"]);
            let seed = case["seed"].as_u64().unwrap();
            let rounds = case["rounds"].as_u64().unwrap() as usize;
            let (lo, hi) = paired_bootstrap(&diffs, rounds, seed).unwrap();
            let (wl, wh) = (
                case["low"].as_f64().unwrap(),
                case["high"].as_f64().unwrap(),
            );
            assert!(
                (lo - wl).abs() < 1e-12 && (hi - wh).abs() < 1e-12,
                "{lo} {hi} vs {wl} {wh}"
            );
        }
    }

    #[test]
    fn the_slope_interval_matches_scipy() {
        let r = reference();
        let case = &r["slope"];
        let xs = floats(&case["x"]);
        let ys = floats(&case["y"]);
        let s = slope(&xs, &ys).unwrap();
        assert!(close(s.slope, case["slope"].as_f64().unwrap(), 1e-9));
        // t95 is tabulated to 3 decimals: the interval agrees to 1e-3 relative.
        assert!(close(s.ci.0, case["low"].as_f64().unwrap(), 1e-3), "{s:?}");
        assert!(close(s.ci.1, case["high"].as_f64().unwrap(), 1e-3), "{s:?}");
    }

    #[test]
    fn items_needed_matches_the_normal_approximation() {
        let r = reference();
        let case = &r["items_needed"];
        let diffs = floats(&case["diffs"]);
        assert_eq!(items_needed(&diffs), case["n"].as_u64());
        assert_eq!(items_needed(&[0.0, 0.0, 1.0, -1.0]), None, "no difference");
    }

    #[test]
    fn percentile_sample_rule() {
        assert_eq!(percentile_min_n(50.0), 6);
        assert_eq!(percentile_min_n(90.0), 36);
        assert_eq!(percentile_min_n(95.0), 72);
        assert_eq!(percentile_min_n(99.0), 368);
        // The rule itself: at n, both tails are at most 2.5 %; at n − 1 one is not.
        for q in [50.0, 90.0, 95.0, 99.0] {
            let n = percentile_min_n(q) as i32;
            let p = q / 100.0;
            assert!(p.powi(n) <= 0.025 && (1.0 - p).powi(n) <= 0.025);
            assert!(p.powi(n - 1) > 0.025 || (1.0 - p).powi(n - 1) > 0.025);
        }
    }

    #[test]
    fn order_statistic_intervals_match_scipy() {
        let r = reference();
        for case in r["order_statistic"].as_array().unwrap() {
            let n = case["n"].as_u64().unwrap() as usize;
            let q = case["q"].as_f64().unwrap();
            let alpha = case["alpha"].as_f64().unwrap();
            let sorted: Vec<f64> = (1..=n).map(|i| i as f64).collect();
            let got = order_statistic_ci(&sorted, q, alpha);
            let want = case["ranks"]
                .as_array()
                .map(|a| (a[0].as_f64().unwrap(), a[1].as_f64().unwrap()));
            assert_eq!(got, want, "n={n} q={q} alpha={alpha}");
        }
        for case in r["binomial_cdf"].as_array().unwrap() {
            let (k, n, p) = (
                case["k"].as_u64().unwrap(),
                case["n"].as_u64().unwrap(),
                case["p"].as_f64().unwrap(),
            );
            let want = case["cdf"].as_f64().unwrap();
            assert!(close(binomial_cdf(k, n, p), want, 1e-9), "{k} {n} {p}");
        }
        assert_eq!(percentile_min_n_at(99.0, 0.025), 437);
    }

    #[test]
    fn paired_pools_repeats_and_pairs_common_items() {
        let a = item_means(
            &[1.0, 1.0, 0.0, 1.0, 0.0],
            &["q1", "q1", "q2", "q3", "q4"].map(String::from),
        )
        .unwrap();
        let b = item_means(&[1.0, 1.0, 0.0], &["q1", "q2", "q3"].map(String::from)).unwrap();
        let p = paired(&a, &b, 7).unwrap();
        assert_eq!(p.items, 3, "q4 is only in A");
        assert_eq!((p.a, p.b), (2.0 / 3.0, 2.0 / 3.0));
        let m = p.mcnemar.unwrap();
        assert_eq!((m.only_a, m.only_b), (1, 1));
        assert_eq!(m.p, 1.0);
        assert!(!p.detectable());
        // Identical answers: a degenerate interval [0, 0], non-inferior at any margin.
        let same = paired(&a, &a, 7).unwrap();
        assert_eq!(same.ci, Some((0.0, 0.0)));
        assert!(same.non_inferior(0.0));
        // Graded scores: no McNemar.
        let g = item_means(&[0.5, 0.25], &["q1", "q2"].map(String::from)).unwrap();
        assert!(paired(&g, &g, 1).unwrap().mcnemar.is_none());
    }

    #[test]
    fn a_clear_difference_is_detectable_and_not_non_inferior() {
        let names: Vec<String> = (0..200).map(|i| format!("q{i}")).collect();
        let a = item_means(&vec![1.0; 200], &names).unwrap();
        let b = item_means(
            &(0..200)
                .map(|i| f64::from(u8::from(i % 4 != 0)))
                .collect::<Vec<_>>(),
            &names,
        )
        .unwrap();
        let p = paired(&a, &b, 3).unwrap();
        assert!((p.delta + 0.25).abs() < 1e-12);
        assert!(p.detectable(), "{p:?}");
        assert!(!p.non_inferior(0.02));
        assert!(p.non_inferior(0.5));
        assert_eq!(p.mcnemar.unwrap().only_a, 50);
    }
}
