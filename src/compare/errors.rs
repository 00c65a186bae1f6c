//! The error rate compared: failed requests are left out of every latency, throughput and
//! quality figure, so a B that fails its slowest requests (within its error budget) would
//! look faster. `error_rate` is B's share of failed requests minus A's — an absolute change,
//! in points — with Newcombe's hybrid score interval for a difference of two proportions
//! (Newcombe 1998, method 10: each side's Wilson score interval, combined).

use super::{Change, RunValues};
use crate::record::paired::Z_975;

/// Wilson's 95 % score interval of `x` in `n` (n > 0).
fn wilson(x: usize, n: usize) -> (f64, f64) {
    let (n, p, z2) = (n as f64, x as f64 / n as f64, Z_975 * Z_975);
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z_975 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// A run's share of failed requests; None for a run that recorded no count (older
/// baselines).
fn rate(r: &RunValues) -> Option<f64> {
    (r.requests > 0).then(|| r.failed as f64 / r.requests as f64)
}

/// The error rate's change, B − A, and its 95 % interval.
pub(super) fn change(a: &RunValues, b: &RunValues) -> Change {
    let (ra, rb) = (rate(a), rate(b));
    let both = ra.zip(rb);
    let ci = both.map(|(pa, pb)| {
        let ((la, ua), (lb, ub)) = (wilson(a.failed, a.requests), wilson(b.failed, b.requests));
        let d = pb - pa;
        (
            d - ((pb - lb).powi(2) + (ua - pa).powi(2)).sqrt(),
            d + ((ub - pb).powi(2) + (pa - la).powi(2)).sqrt(),
        )
    });
    Change {
        metric: "error_rate",
        a: ra,
        b: rb,
        change: both.map(|(pa, pb)| pb - pa),
        ci,
        n: both.map(|_| a.requests.min(b.requests)),
        p: None,
        interval_from: None,
        groups: None,
        effective: None,
        lacking: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(requests: usize, failed: usize) -> RunValues {
        RunValues {
            requests,
            failed,
            ..super::super::tests::run("c", 1.0)
        }
    }

    /// Newcombe (1998)'s first example, 56/70 against 48/80: 0.2000, method 10's interval
    /// 0.0524 … 0.3339; and Wilson's for 0/100 and 3/100.
    #[test]
    fn the_interval_is_newcombes_hybrid_score() {
        let c = change(&counts(80, 48), &counts(70, 56));
        assert!((c.change.unwrap() - 0.2).abs() < 1e-12);
        let (lo, hi) = c.ci.unwrap();
        assert!(
            (lo - 0.0524).abs() < 5e-5 && (hi - 0.3339).abs() < 5e-5,
            "{lo} {hi}"
        );
        assert!((wilson(0, 100).1 - 0.0370).abs() < 5e-5);
        let (lo, hi) = wilson(3, 100);
        assert!(
            (lo - 0.0103).abs() < 5e-5 && (hi - 0.0845).abs() < 5e-5,
            "{lo} {hi}"
        );
    }

    /// A gate on it judges points: 3 failures in 100 against none cannot say B fails more
    /// than 1 point more often; 40 in 1,000 can.
    #[test]
    fn more_failures_fire_a_gate_only_beyond_their_noise() {
        use super::super::{judge, parse_gate, GateRule, Judgement};
        let g = parse_gate("error_rate>+1%").unwrap();
        let few = change(&counts(100, 0), &counts(100, 3));
        assert!(matches!(
            judge(&g, &few, GateRule::Confident),
            Some(Judgement::Inconclusive { .. })
        ));
        let many = change(&counts(1000, 0), &counts(1000, 40));
        assert!(matches!(
            judge(&g, &many, GateRule::Confident),
            Some(Judgement::Fired { .. })
        ));
        assert_eq!(super::super::shown("error_rate", many.change), "+4.0 pt");
        // None failed on either side: no change; an older baseline without counts: absent.
        assert_eq!(change(&counts(50, 0), &counts(60, 0)).change, Some(0.0));
        assert_eq!(change(&counts(0, 0), &counts(60, 0)).a, None);
    }
}
