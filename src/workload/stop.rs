//! Precision-based stopping (`target-margin`): a run ends once a latency percentile is known
//! to the stated margin. Pure but for the clock the caller passes.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::record::paired::order_statistic_ci;
use crate::record::stats::{e2e_ms, percentile, tpot_ms, ttft_ms};
use crate::record::RequestRecord;
use crate::spec::StopRule;

/// Where a run stopped on its margin, recorded in run.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Stopped {
    pub metric: String,
    /// The margin asked for and the one reached (relative half-width of the interval).
    pub target: f64,
    pub margin: f64,
    pub estimate_ms: f64,
    pub low_ms: f64,
    pub high_ms: f64,
    /// Successful requests behind it, and seconds since the run's start.
    pub requests: usize,
    pub after_s: f64,
}

/// Checks a run's requests against its stop rule, now and then.
pub(crate) struct Stopper<'a> {
    rule: &'a StopRule,
    started: Instant,
    checked_at: usize,
}

impl<'a> Stopper<'a> {
    pub fn new(rule: &'a StopRule) -> Self {
        Stopper {
            rule,
            started: Instant::now(),
            checked_at: 0,
        }
    }

    /// Some when the rule is met. Checks at most every 1 % more requests (each check sorts
    /// the values), never before the minimum request count and duration.
    pub fn check(&mut self, requests: &[RequestRecord]) -> Option<Stopped> {
        let n = requests.len();
        if (n as u64) < self.rule.min_requests
            || n < self.checked_at + (self.checked_at / 100).max(1)
        {
            return None;
        }
        let after_s = self.started.elapsed().as_secs_f64();
        if after_s < self.rule.min_duration_s {
            return None;
        }
        self.checked_at = n;
        reached(self.rule, requests, after_s)
    }
}

/// The rule's test on these requests: the percentile's distribution-free 95 % interval within
/// ±margin of the estimate.
pub(crate) fn reached(
    rule: &StopRule,
    requests: &[RequestRecord],
    after_s: f64,
) -> Option<Stopped> {
    let of: fn(&RequestRecord) -> Option<f64> = match rule.latency.as_str() {
        "ttft" => ttft_ms,
        "tpot" => tpot_ms,
        _ => |r| Some(e2e_ms(r)),
    };
    let mut v: Vec<f64> = requests.iter().filter(|r| r.ok()).filter_map(of).collect();
    if (v.len() as u64) < rule.min_requests {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let est = percentile(&v, rule.q)?;
    let (lo, hi) = order_statistic_ci(&v, rule.q, 0.05)?;
    if est <= 0.0 {
        return None;
    }
    let margin = (est - lo).max(hi - est) / est;
    (margin <= rule.margin).then(|| Stopped {
        metric: rule.metric(),
        target: rule.margin,
        margin,
        estimate_ms: est,
        low_ms: lo,
        high_ms: hi,
        requests: v.len(),
        after_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(e2e_ms: i64) -> RequestRecord {
        RequestRecord {
            scheduled_ns: 0,
            sent_ns: Some(0),
            first_token_ns: Some(1_000_000),
            last_token_ns: Some(e2e_ms * 1_000_000),
            end_ns: e2e_ms * 1_000_000,
            completion_tokens: Some(10),
            ..Default::default()
        }
    }

    fn rule(margin: f64, min_requests: u64) -> StopRule {
        StopRule {
            latency: "e2e".into(),
            q: 50.0,
            margin,
            min_requests,
            min_duration_s: 0.0,
        }
    }

    #[test]
    fn stops_once_the_interval_is_within_the_margin() {
        // E2E spread evenly over 95–105 ms: the median's interval narrows as n grows.
        let reqs: Vec<RequestRecord> = (0..400).map(|i| req(95 + (i * 7) % 11)).collect();
        let r = rule(0.02, 6);
        assert!(
            reached(&r, &reqs[..10], 0.0).is_none(),
            "10 requests: too wide"
        );
        let s = reached(&r, &reqs, 1.0).unwrap();
        assert!(
            s.margin <= 0.02 && s.low_ms <= s.estimate_ms && s.estimate_ms <= s.high_ms,
            "{s:?}"
        );
        assert_eq!(s.requests, 400);
        // The minimum request count holds even when the interval is narrow.
        assert!(reached(&rule(0.5, 1000), &reqs, 1.0).is_none());
        // The stopper checks at most every 1 % more requests.
        let rr = rule(0.02, 6);
        let mut st = Stopper::new(&rr);
        assert!(st.check(&reqs[..300]).is_some() || st.check(&reqs).is_some());
    }
}
