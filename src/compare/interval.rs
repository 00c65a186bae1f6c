//! The intervals of a change between A and B: a percentile's from each side's order-statistic
//! interval (or, where requests came in groups, a bootstrap over whole groups), a mean's from
//! a bootstrap of each side.

use serde::Serialize;

use super::{ratio, resample, ROUNDS};
use crate::record::rng::SplitMix64;
use crate::record::stats::block::Dependence;
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

/// What one side lacks for a percentile's interval: `have` of the `need` observations its
/// side of the interval asks, in `unit` — batches (a side in batches: as many as the
/// order-statistic rule asks of requests) or requests (as many as that rule's count asks once
/// their neighbours' dependence is counted: `need` = ⌈rule · n / worth⌉).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub(crate) struct Lack {
    pub side: &'static str,
    pub have: usize,
    pub need: usize,
    pub unit: &'static str,
}

impl Lack {
    /// A side's lack at a rule of `min` independent observations: `batches` where it came in
    /// batches, else its `n` requests worth `worth`. None where it has enough.
    pub(super) fn of(
        side: &'static str,
        n: usize,
        batches: Option<usize>,
        worth: usize,
        min: usize,
    ) -> Option<Lack> {
        let (have, need, unit) = match batches {
            Some(g) => (g, min, "batches"),
            None => (
                n,
                (min as f64 * n as f64 / worth.max(1) as f64).ceil() as usize,
                "requests",
            ),
        };
        (have < need).then_some(Lack {
            side,
            have,
            need,
            unit,
        })
    }
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

/// A side's requests, each at its own instant, for the q-th percentile: in time order (where
/// each has its instant) with what their neighbours' dependence makes them worth and the
/// block length it asks (`record::stats::block::percentile_dependence`); in their given
/// order, worth their count in blocks of 1, without instants.
pub(super) struct Loose {
    series: Vec<f64>,
    pub dependence: Dependence,
}

impl Loose {
    pub(super) fn of(values: &[f64], at: &[i64], q: f64) -> Self {
        use crate::record::stats::block;
        if at.len() != values.len() {
            return Loose {
                series: values.to_vec(),
                dependence: Dependence {
                    worth: values.len(),
                    block: 1,
                },
            };
        }
        let series = block::in_time_order(values, at);
        let dependence = block::percentile_dependence(&series, q);
        Loose { series, dependence }
    }
}

/// How one side is resampled when either side's requests came in groups: whole groups
/// (see [`crate::record::stats::batches`]), or, for a side whose requests each had their own
/// instant, circular blocks of neighbours in time order (a block of 1 where they do not move
/// together: each request on its own).
pub(super) enum Resample {
    Groups(Vec<Vec<f64>>),
    /// `loose.dependence.worth`: the independent requests they are worth at the percentile
    /// (their count where neighbours do not move together or their instants are unknown).
    Blocks(Loose),
}

impl Resample {
    /// A side's resampling: its groups where it has them, else its requests in blocks.
    pub(super) fn of(groups: Option<Vec<Vec<f64>>>, loose: Option<Loose>) -> Option<Self> {
        groups
            .map(Resample::Groups)
            .or_else(|| loose.map(Resample::Blocks))
    }

    /// Independent observations it holds: its groups, or what its requests are worth.
    fn observations(&self) -> usize {
        match self {
            Resample::Groups(g) => g.len(),
            Resample::Blocks(l) => l.dependence.worth,
        }
    }

    fn draw(&self, rng: &mut SplitMix64, into: &mut Vec<f64>) {
        match self {
            Resample::Groups(g) => crate::record::stats::resample_groups(g, rng, into),
            Resample::Blocks(l) => crate::record::stats::block::resample_blocks(
                &l.series,
                l.dependence.block,
                rng,
                into,
            ),
        }
    }
}

/// The interval of B's percentile over A's, minus 1, when either side's requests came in
/// groups: each side resampled on its own ([`Resample`]: whole groups, or blocks of
/// neighbours for a side without groups), 95 % percentile-bootstrap interval of the ratio.
/// None when either side has fewer independent observations than its percentile's
/// order-statistic rule asks of requests.
pub(super) fn grouped_ratio_ci(
    a: &Resample,
    b: &Resample,
    q: f64,
    seed: u64,
    metric: &str,
) -> Option<(f64, f64)> {
    let min = crate::record::paired::percentile_min_n_at(q, SIDE_ALPHA);
    if a.observations() < min || b.observations() < min {
        return None;
    }
    let mut rng = SplitMix64::derive(seed, &format!("{metric}/groups"));
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    crate::record::stats::interval95(
        (0..ROUNDS)
            .filter_map(|_| {
                a.draw(&mut rng, &mut sa);
                b.draw(&mut rng, &mut sb);
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
