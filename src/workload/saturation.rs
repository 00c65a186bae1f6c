//! The saturation search: judging a probe, choosing the next rate (see the parent module).

use super::*;

/// Early stop: true once the distribution-free 95 % confidence interval of the p95 E2E
/// latency of the successful requests — order statistics x(j)..x(k) with
/// j = ⌊nq − 1.96·√(nq(1−q))⌋, k = ⌈nq + 1.96·√(nq(1−q))⌉, q = 0.95 — exists (k ≤ n,
/// which takes about 80 requests) and is at most `width` × the p95 estimate wide.
pub(crate) fn tight_enough(requests: &[RequestRecord], width: f64) -> bool {
    let mut v: Vec<f64> = requests
        .iter()
        .filter(|r| r.ok())
        .map(crate::record::stats::e2e_ms)
        .collect();
    p95_interval(&mut v).is_some_and(|(lo, est, hi)| est > 0.0 && (hi - lo) / est <= width)
}

/// (lower bound, estimate, upper bound) of the p95 of `v`, as in [`tight_enough`].
pub(crate) fn p95_interval(v: &mut [f64]) -> Option<(f64, f64, f64)> {
    let n = v.len();
    if n < 20 {
        return None;
    }
    let q = 0.95;
    let nf = n as f64;
    let half = 1.96 * (nf * q * (1.0 - q)).sqrt();
    let j = (nf * q - half).floor() as usize;
    let k = (nf * q + half).ceil() as usize;
    if j < 1 || k > n {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let est = crate::record::stats::pct_of(v, 95.0)?;
    Some((v[j - 1], est, v[k - 1]))
}

/// One probe of a saturation search: an open-loop load at `rate` for the step's duration.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub(crate) struct Probe {
    pub rate: f64,
    /// Request ids `first_request_id ..< first_request_id + requests` belong to this probe.
    pub first_request_id: u32,
    pub requests: usize,
    pub ok: usize,
    pub error_rate: f64,
    pub ttft_p95_ms: Option<f64>,
    pub e2e_p95_ms: Option<f64>,
    /// Successful requests per second whose own TTFT and E2E met the thresholds.
    pub goodput_rps: f64,
    /// Successful requests per second actually completed over the probe's window.
    pub achieved_rps: f64,
    pub passed: bool,
    /// Why it failed, when it did.
    pub missed: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Default)]
pub(crate) struct Saturation {
    /// The highest rate that passed (None: even the first probe failed).
    pub rate: Option<f64>,
    /// The lowest rate that failed (None: every probe up to `max-rate` passed).
    pub failed_at: Option<f64>,
    pub ttft_p95_s: Option<f64>,
    pub e2e_p95_s: Option<f64>,
    pub max_error_rate: f64,
    pub probes: Vec<Probe>,
}

/// Judges one probe's requests against the thresholds (seconds).
pub(crate) fn judge_probe(
    rate: f64,
    first_request_id: u32,
    reqs: &[RequestRecord],
    ttft_p95_s: Option<f64>,
    e2e_p95_s: Option<f64>,
    max_error_rate: f64,
) -> Probe {
    use crate::record::stats;
    let ok: Vec<&RequestRecord> = reqs.iter().filter(|r| r.ok()).collect();
    let mut ttft: Vec<f64> = ok.iter().filter_map(|r| stats::ttft_ms(r)).collect();
    let mut e2e: Vec<f64> = ok.iter().map(|r| stats::e2e_ms(r)).collect();
    let ttft_p95 = stats::pct_of(&mut ttft, 95.0);
    let e2e_p95 = stats::pct_of(&mut e2e, 95.0);
    let error_rate = if reqs.is_empty() {
        0.0
    } else {
        (reqs.len() - ok.len()) as f64 / reqs.len() as f64
    };
    // As a run's window and goodput.
    let window_s = stats::window(reqs).map_or(0.0, |(a, b)| (b - a) as f64 / 1e9);
    let good = ok
        .iter()
        .filter(|r| {
            stats::within_thresholds(
                stats::ttft_ms(r),
                Some(stats::e2e_ms(r)),
                ttft_p95_s,
                e2e_p95_s,
            )
        })
        .count();
    let mut missed = Vec::new();
    if reqs.is_empty() {
        missed.push("no requests".to_string());
    }
    if error_rate > max_error_rate {
        missed.push(format!(
            "errors {:.1} % > {:.1} %",
            error_rate * 100.0,
            max_error_rate * 100.0
        ));
    }
    if let Some(x) = ttft_p95_s {
        match ttft_p95 {
            Some(v) if v <= x * 1000.0 => {}
            Some(v) => missed.push(format!("TTFT p95 {v:.0} ms > {:.0} ms", x * 1000.0)),
            None => missed.push("no TTFT measured".into()),
        }
    }
    if let Some(x) = e2e_p95_s {
        match e2e_p95 {
            Some(v) if v <= x * 1000.0 => {}
            Some(v) => missed.push(format!("E2E p95 {v:.0} ms > {:.0} ms", x * 1000.0)),
            None => missed.push("no E2E measured".into()),
        }
    }
    Probe {
        rate,
        first_request_id,
        requests: reqs.len(),
        ok: ok.len(),
        error_rate,
        ttft_p95_ms: ttft_p95,
        e2e_p95_ms: e2e_p95,
        goodput_rps: if window_s > 0.0 {
            good as f64 / window_s
        } else {
            0.0
        },
        achieved_rps: if window_s > 0.0 {
            ok.len() as f64 / window_s
        } else {
            0.0
        },
        passed: missed.is_empty(),
        missed,
    }
}

/// The next rate of a saturation search, or None when it is done: ramp by `factor` while
/// probes pass (up to `max_rate`); after the first failure, bisect between the highest
/// passing and the lowest failing rate until they are within `precision` of each other.
pub(crate) fn next_rate(probes: &[Probe], x: &crate::spec::SaturationSpec) -> Option<f64> {
    let Some(last) = probes.last() else {
        return Some(x.start);
    };
    match bracket(probes) {
        // Even the first rate fails: nothing below it is probed (the answer is "< start").
        (None, _) => None,
        (Some(_), None) if last.rate >= x.max_rate => None,
        (Some(l), None) => Some((l * x.factor).min(x.max_rate)),
        (Some(l), Some(h)) if (h - l) / l <= x.precision => None,
        (Some(l), Some(h)) => Some((l + h) / 2.0),
    }
}

/// (highest passing rate, lowest failing rate) of the probes so far.
pub(super) fn bracket(probes: &[Probe]) -> (Option<f64>, Option<f64>) {
    let pick = |passed: bool| {
        probes
            .iter()
            .filter(move |p| p.passed == passed)
            .map(|p| p.rate)
    };
    (pick(true).reduce(f64::max), pick(false).reduce(f64::min))
}
