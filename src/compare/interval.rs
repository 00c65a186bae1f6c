//! The intervals of a change between A and B: a percentile's from each side's order-statistic
//! interval (or, where requests came in groups, a bootstrap over whole groups), a mean's from
//! a bootstrap of each side.

use serde::Serialize;

use super::{ratio, resample, ROUNDS};
use crate::record::rng::SplitMix64;
use crate::record::stats::{mean_of, pct_of};

/// Each side's requests and what they are worth (see [`Change::effective`]).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub(crate) struct Effective {
    pub a: Worth,
    pub b: Worth,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub(crate) struct Worth {
    pub n: usize,
    pub worth: usize,
}

/// Each side's percentile interval has coverage 1 − SIDE_ALPHA (97.5 %), so that the ratio's
/// interval built from both covers at least 95 %.
pub(super) const SIDE_ALPHA: f64 = 0.025;

/// The interval of B's percentile over A's, minus 1, from each side's distribution-free
/// order-statistic interval (`record::paired::order_statistic_ci`, 97.5 % each): when both
/// hold their true percentile — at least 95 % of the time — the true ratio lies within
/// [B_low / A_high, B_high / A_low] − 1. A side whose requests moved together in time is
/// worth fewer independent requests (`effective`, per side), and its interval is as wide as
/// that many would leave it. None when either side has too few for its interval, or A's may
/// be zero.
pub(super) fn percentile_ratio_ci(
    a: &[f64],
    b: &[f64],
    q: f64,
    effective: (usize, usize),
) -> Option<(f64, f64)> {
    let sorted = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v
    };
    use crate::record::paired::order_statistic_ci_effective as ci;
    let (al, ah) = ci(&sorted(a), q, SIDE_ALPHA, effective.0)?;
    let (bl, bh) = ci(&sorted(b), q, SIDE_ALPHA, effective.1)?;
    (al > 0.0).then(|| (bl / ah - 1.0, bh / al - 1.0))
}

/// How many independent requests a side's values are worth for the q-th percentile: their
/// count, unless they have their instants (`at`) and neighbours in time moved together
/// (`record::stats::block::percentile_effective_n`).
pub(super) fn effective_n(values: &[f64], at: &[i64], q: f64) -> usize {
    if at.len() != values.len() {
        return values.len();
    }
    use crate::record::stats::block;
    block::percentile_effective_n(&block::in_time_order(values, at), q)
}

/// The interval of B's percentile over A's, minus 1, when either side's requests came in
/// groups (see [`crate::record::stats::batches`]; a side without groups is one group per
/// request): whole groups of each side resampled on their own, 95 % percentile-bootstrap
/// interval of the ratio. None when either side has fewer groups than its percentile's
/// order-statistic rule asks of independent requests.
pub(super) fn grouped_ratio_ci(
    ga: &[Vec<f64>],
    gb: &[Vec<f64>],
    q: f64,
    seed: u64,
    metric: &str,
) -> Option<(f64, f64)> {
    use crate::record::stats::resample_groups;
    let min = crate::record::paired::percentile_min_n_at(q, SIDE_ALPHA);
    if ga.len() < min || gb.len() < min {
        return None;
    }
    let mut rng = SplitMix64::derive(seed, &format!("{metric}/groups"));
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    crate::record::stats::interval95(
        (0..ROUNDS)
            .filter_map(|_| {
                resample_groups(ga, &mut rng, &mut sa);
                resample_groups(gb, &mut rng, &mut sb);
                ratio(pct_of(&mut sa, q), pct_of(&mut sb, q))
            })
            .collect(),
    )
}

/// The 95 % percentile-bootstrap interval of the relative change of a mean (each side's
/// values resampled on their own).
pub(super) fn mean_ratio_ci(a: &[f64], b: &[f64], seed: u64, metric: &str) -> Option<(f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let mut rng = SplitMix64::derive(seed, metric);
    crate::record::stats::interval95(
        (0..ROUNDS)
            .filter_map(|_| {
                ratio(
                    mean_of(&mut resample(a, &mut rng)),
                    mean_of(&mut resample(b, &mut rng)),
                )
            })
            .collect(),
    )
}
