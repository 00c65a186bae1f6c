//! Intervals for requests that each have their own instant but overlap in time.
//!
//! Under a closed or open loop, a request shares the server's state (its batch, its KV cache,
//! the clock speeds of the moment) with the requests in flight beside it, and a single stream
//! drifts with the machine: neighbours in time move together. Resampling single requests
//! then treats them as independent and gives an interval narrower than the run's own noise.
//! The circular block bootstrap resamples runs of consecutive requests instead, with the
//! block length chosen from the series' own autocorrelation (Politis and White 2004, with
//! Patton, Politis and White's 2009 correction for the circular bootstrap): a series without
//! autocorrelation gets blocks of one request, which is the ordinary bootstrap.

use crate::record::rng::SplitMix64;

/// What the block length and the effective sample size rest on: the series' spectral
/// estimates at frequency 0 over lags |k| ≤ M = 2m̂ (m̂ by Politis' flat-top rule), weighted by
/// the flat-top kernel.
struct Spectrum {
    n: usize,
    /// The largest block: min(3√n, n/3).
    b_max: usize,
    /// No lag's autocorrelation is significant (m̂ = 0).
    flat: bool,
    /// Σ λ(k/M)·|k|·R(k) over |k| ≤ M.
    g: f64,
    /// The long-run variance Σ λ(k/M)·R(k) over |k| ≤ M.
    lrv: f64,
    /// The variance R(0).
    r0: f64,
}

/// None for fewer than 8 values or a constant series.
fn spectrum(series: &[f64]) -> Option<Spectrum> {
    let n = series.len();
    if n < 8 {
        return None;
    }
    let nf = n as f64;
    let mean = series.iter().sum::<f64>() / nf;
    let dev: Vec<f64> = series.iter().map(|x| x - mean).collect();
    let autocov = |k: usize| dev.iter().zip(&dev[k..]).map(|(a, b)| a * b).sum::<f64>() / nf;
    let r0 = autocov(0);
    if r0 <= 0.0 || !r0.is_finite() {
        return None;
    }
    let b_max = (3.0 * nf.sqrt()).min(nf / 3.0).ceil() as usize;
    // The flat-top rule: the first lag m after which k_n lags in a row are insignificant
    // (|ρ| < 2·√(log10 n / n)); searched up to lag b_max.
    let k_n = 5usize.max(nf.log10().sqrt().ceil() as usize);
    let bound = 2.0 * (nf.log10() / nf).sqrt();
    let max_lag = b_max.min(n - 1);
    // The autocorrelations as far as the search and the kernel need them (lag by lag: a
    // series without dependence needs k_n of them, not max_lag).
    let mut rho: Vec<f64> = vec![1.0];
    let upto = |rho: &mut Vec<f64>, k: usize| {
        while rho.len() <= k.min(max_lag) {
            rho.push(autocov(rho.len()) / r0);
        }
    };
    let m = (0..=max_lag)
        .find(|&m| {
            upto(&mut rho, m + k_n);
            (1..=k_n).all(|k| rho.get(m + k).is_none_or(|r| r.abs() < bound))
        })
        .unwrap_or(max_lag);
    let big_m = (2 * m).min(max_lag);
    upto(&mut rho, big_m);
    let flat_top = |k: usize| {
        let t = k as f64 / big_m as f64;
        if t <= 0.5 {
            1.0
        } else {
            2.0 * (1.0 - t)
        }
    };
    let (mut g, mut lrv) = (0.0, r0);
    for (k, r) in rho.iter().enumerate().take(big_m + 1).skip(1) {
        let w = flat_top(k) * r * r0;
        g += 2.0 * k as f64 * w;
        lrv += 2.0 * w;
    }
    Some(Spectrum {
        n,
        b_max,
        flat: m == 0,
        g,
        lrv,
        r0,
    })
}

/// The circular block bootstrap's block length for `series` (in its time order): 1 where
/// no lag's autocorrelation is significant; at most min(3√n, n/3). (The report and compare
/// take it of a percentile's indicator: [`percentile_dependence`].)
#[cfg(test)]
fn block_length(series: &[f64]) -> usize {
    spectrum(series).map_or(1, |sp| length_of(&sp))
}

/// The circular block bootstrap's block length from a series' spectrum: 1 where no lag's
/// autocorrelation is significant; at most min(3√n, n/3).
fn length_of(sp: &Spectrum) -> usize {
    if sp.flat {
        return 1;
    }
    let d_cb = 4.0 / 3.0 * sp.lrv * sp.lrv;
    if d_cb <= 0.0 || !d_cb.is_finite() {
        return sp.b_max.max(1);
    }
    let b = (2.0 * sp.g * sp.g / d_cb).cbrt() * (sp.n as f64).cbrt();
    (b.ceil() as usize).clamp(1, sp.b_max.max(1))
}

/// The fewest values on the rarer side of a percentile whose indicator's autocorrelation is
/// estimated: below that, one or two chance neighbours among a handful of slow requests read
/// as dependence. A thinner tail takes the dependence of the nearest percentile that has them.
const MIN_TAIL: usize = 30;

/// The indicator I_t = [x_t ≤ the p-th percentile] of `series`, p the q-th percentile (0–100)
/// moved in from the tail until MIN_TAIL values lie beyond it: the series whose long-run
/// variance a sample percentile's variance rests on. None with fewer than 2·MIN_TAIL values.
fn indicator(series: &[f64], q: f64) -> Option<Vec<f64>> {
    let n = series.len();
    if n < 2 * MIN_TAIL {
        return None;
    }
    let edge = 100.0 * MIN_TAIL as f64 / n as f64;
    let q = q.clamp(edge, 100.0 - edge);
    let mut sorted = series.to_vec();
    let cut = crate::record::stats::pct_of(&mut sorted, q)?;
    Some(
        series
            .iter()
            .map(|x| f64::from(u8::from(*x <= cut)))
            .collect(),
    )
}

/// What a percentile of a series in time order rests on when neighbours move together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Dependence {
    /// The independent values the series is worth for the percentile
    /// ([`percentile_effective_n`]).
    pub worth: usize,
    /// The circular block bootstrap's block length for it ([`percentile_block_length`]).
    pub block: usize,
}

/// Both of a percentile's [`Dependence`] figures from one [`indicator`] and its spectrum.
pub(crate) fn percentile_dependence(series: &[f64], q: f64) -> Dependence {
    let n = series.len();
    let Some(ind) = indicator(series, q) else {
        return Dependence { worth: n, block: 1 };
    };
    let sp = spectrum(&ind);
    let worth = match &sp {
        Some(sp) if !sp.flat && sp.lrv > sp.r0 => ((n as f64) * sp.r0 / sp.lrv).floor() as usize,
        _ => n,
    }
    .clamp(1, n);
    Dependence {
        worth,
        block: sp.as_ref().map_or(1, length_of),
    }
}

/// How many independent values `series` (in its time order) is worth for its q-th percentile
/// (0–100): n · Var(I) / LRV(I) of its [`indicator`]. n where neighbours do not move together,
/// where fewer than 2·MIN_TAIL values leave dependence unmeasured, and never more than n (a
/// negative correlation is not counted as information).
pub(crate) fn percentile_effective_n(series: &[f64], q: f64) -> usize {
    percentile_dependence(series, q).worth
}

/// The circular block bootstrap's block length for the q-th percentile of `series` (in its
/// time order): the block length of its [`indicator`], since a percentile moves with which
/// requests fall below it — the raw values' autocorrelation is ruled by a few outliers. 1
/// with fewer than 2·MIN_TAIL values.
pub(crate) fn percentile_block_length(series: &[f64], q: f64) -> usize {
    percentile_dependence(series, q).block
}

/// One circular block-bootstrap resample of `series` into `into`: blocks of `b` consecutive
/// values (wrapping at the end), each starting at a uniformly drawn position, until `into`
/// holds as many values as `series`.
pub(crate) fn resample_blocks(series: &[f64], b: usize, rng: &mut SplitMix64, into: &mut Vec<f64>) {
    let (n, b) = (series.len(), b.max(1));
    into.clear();
    while into.len() < n {
        let start = rng.below(n);
        let take = b.min(n - into.len());
        into.extend((0..take).map(|j| series[(start + j) % n]));
    }
}

/// The values in their requests' time order (`at`: each value's scheduled instant; ties keep
/// their order).
pub(crate) fn in_time_order(values: &[f64], at: &[i64]) -> Vec<f64> {
    debug_assert_eq!(values.len(), at.len());
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by_key(|&i| at[i]);
    idx.into_iter().map(|i| values[i]).collect()
}

/// Tests' dependent series: n values of the AR(1) x_t = φ·x_{t−1} + ε_t from x_0 = `x0`, with
/// standard normal innovations drawn from `rng` — requests whose neighbours move together.
#[cfg(test)]
pub(crate) fn ar1_from(phi: f64, x0: f64, n: usize, rng: &mut SplitMix64) -> Vec<f64> {
    let mut x = x0;
    (0..n)
        .map(|_| {
            x = phi * x + rng.normal();
            x
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::stats::{bootstrap_ci, grouped_bootstrap_ci, pct_of};

    /// A stationary AR(1) series: [`ar1_from`] a start drawn from its stationary law.
    fn ar1(phi: f64, n: usize, rng: &mut SplitMix64) -> Vec<f64> {
        let x0 = rng.normal() / (1.0 - phi * phi).sqrt();
        ar1_from(phi, x0, n, rng)
    }

    #[test]
    fn independent_requests_get_blocks_of_one_and_dependent_ones_longer_blocks() {
        let mut rng = SplitMix64::new(7);
        let iid = ar1(0.0, 1000, &mut rng);
        assert_eq!(block_length(&iid), 1);
        let ar = ar1(0.8, 1000, &mut rng);
        let b = block_length(&ar);
        // The optimal circular block for φ = 0.8 at n = 1000 is (2G²/D)^⅓·n^⅓ with
        // G = 2φ/(1−φ)², D = 4/3·((1+φ)/(1−φ))²: about 31. The estimate squares a noisy
        // sum, so it is only near that; it is well above one and below the cap (95).
        assert!((12..=95).contains(&b), "{b}");
        // A trend (a machine warming up) is dependence too; the cap is min(3√n, n/3).
        let trend: Vec<f64> = (0..300).map(f64::from).collect();
        assert_eq!(block_length(&trend), (3.0 * 300f64.sqrt()).ceil() as usize);
        assert_eq!(block_length(&[5.0; 100]), 1);
        assert_eq!(block_length(&[1.0, 2.0, 3.0]), 1);
    }

    #[test]
    fn a_dependent_series_is_worth_fewer_values_for_its_percentiles() {
        let mut rng = SplitMix64::new(11);
        let iid = ar1(0.0, 2000, &mut rng);
        for q in [50.0, 95.0] {
            let e = percentile_effective_n(&iid, q);
            assert!(e >= 1800, "iid q{q}: {e}");
        }
        // φ = 0.8: the median's indicator has a long-run variance several times its variance
        // (for a Gaussian AR(1), Σ (2/π)·arcsin(φ^|k|) over k ≈ 5.6).
        let ar = ar1(0.8, 2000, &mut rng);
        let e = percentile_effective_n(&ar, 50.0);
        assert!((150..=800).contains(&e), "{e}");
        assert_eq!(percentile_effective_n(&[1.0; 50], 50.0), 50);
        assert_eq!(percentile_effective_n(&[], 50.0), 0);
    }

    #[test]
    fn a_thin_tail_of_independent_requests_does_not_read_as_dependence() {
        // p99 of 500 requests has five beyond it: two of them side by side by chance must not
        // cost the percentile its interval (437 are needed for one at p99).
        let mut rng = SplitMix64::new(3);
        let reps = 200;
        let whole = (0..reps)
            .filter(|_| percentile_effective_n(&ar1(0.0, 500, &mut rng), 99.0) == 500)
            .count();
        assert!(whole >= reps * 95 / 100, "{whole} of {reps}");
    }

    #[test]
    fn a_few_stalls_do_not_hide_the_dependence_of_the_rest() {
        // AR(1) requests with 2 % independent stalls a hundred times as slow: the raw values'
        // autocorrelation is the stalls', the median's indicator still sees the dependence.
        let mut rng = SplitMix64::new(8);
        let x: Vec<f64> = ar1(0.7, 1000, &mut rng)
            .into_iter()
            .map(|v| if rng.next_f64() < 0.02 { 100.0 + v } else { v })
            .collect();
        // The raw values' autocorrelation is the stalls': no dependence seen there.
        assert_eq!(block_length(&x), 1);
        assert!(
            percentile_block_length(&x, 50.0) > 3,
            "{}",
            percentile_block_length(&x, 50.0)
        );
        assert!(percentile_effective_n(&x, 50.0) < 600);
    }

    #[test]
    fn a_resample_keeps_the_length_and_runs_of_neighbours() {
        let series: Vec<f64> = (0..10).map(f64::from).collect();
        let mut rng = SplitMix64::new(1);
        let mut out = Vec::new();
        resample_blocks(&series, 4, &mut rng, &mut out);
        assert_eq!(out.len(), 10);
        // Within each block of four, each value follows its predecessor (mod 10).
        for block in out.chunks(4) {
            for w in block.windows(2) {
                assert_eq!(w[1], (w[0] + 1.0) % 10.0, "{out:?}");
            }
        }
        assert_eq!(
            in_time_order(&[1.0, 2.0, 3.0], &[30, 10, 20]),
            vec![2.0, 3.0, 1.0]
        );
    }

    #[test]
    fn block_intervals_cover_the_median_of_a_dependent_series_where_request_ones_do_not() {
        // 120 series of 300 requests, each an AR(1) with φ = 0.7 around a true median of 0:
        // the ordinary bootstrap treats neighbours as independent and misses the median far
        // more often than 5 %; the block bootstrap comes near its nominal 95 %.
        let p50 = |x: &mut [f64]| pct_of(x, 50.0);
        let mut rng = SplitMix64::new(42);
        let (mut block_hits, mut plain_hits, reps) = (0, 0, 120);
        for rep in 0..reps {
            let x = ar1(0.7, 300, &mut rng);
            let at: Vec<i64> = (0..300).collect();
            let covers = |c: Option<(f64, f64)>| c.is_some_and(|(lo, hi)| lo <= 0.0 && 0.0 <= hi);
            block_hits += usize::from(covers(grouped_bootstrap_ci(&x, &at, 50.0, 6, 400, rep)));
            plain_hits += usize::from(covers(bootstrap_ci(&x, 400, rep, p50)));
        }
        let (block, plain) = (
            block_hits as f64 / reps as f64,
            plain_hits as f64 / reps as f64,
        );
        assert!(block >= 0.85, "block {block}, plain {plain}");
        assert!(plain <= 0.75, "block {block}, plain {plain}");
    }
}
