//! Arrival schedules: server (users, each on its own seeded schedule at a rate per minute: an
//! open loop) and rate (gamma gaps, Poisson at burstiness 1; a linear ramp by time rescaling)
//! (see the parent module).

use super::*;

/// One planned request: when (offset from the run start), who, which sample.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Planned {
    pub at: Duration,
    pub user: Option<u32>,
    pub sample: usize,
    /// Max tokens of this request when it differs from the sampling's (replayed traces).
    pub max_tokens: Option<u32>,
}

/// Arrival schedule of the server scenario: per user, exponential gaps at `rate`/60 per
/// second for `duration_s`, prompts in that user's own seeded order. Sorted by time.
pub(crate) fn server_schedule(
    users: u64,
    rate_per_min: f64,
    duration_s: f64,
    n_samples: usize,
    seed: u64,
) -> Vec<Planned> {
    let mut out = Vec::new();
    for u in 0..users {
        let mut r = SplitMix64::derive(seed, &format!("server/user/{u}/arrivals"));
        let mut order: Vec<usize> = (0..n_samples).collect();
        SplitMix64::derive(seed, &format!("server/user/{u}/order")).shuffle(&mut order);
        let mut t = 0.0;
        let mut i = 0;
        loop {
            t += r.exponential(rate_per_min / 60.0);
            if t >= duration_s {
                break;
            }
            out.push(Planned {
                at: Duration::from_secs_f64(t),
                user: Some(u as u32),
                sample: order[i % n_samples],
                max_tokens: None,
            });
            i += 1;
        }
    }
    out.sort_by(|a, b| a.at.cmp(&b.at).then(a.user.cmp(&b.user)));
    out
}

/// The time t at which a rate rising linearly from `r0` to `r1` over `d` seconds has brought
/// `u` expected arrivals: Λ(t) = r0·t + (r1 − r0)·t²/(2d) = u, solved in its stable form;
/// infinity when it never does.
fn ramp_time(u: f64, r0: f64, r1: f64, d: f64) -> f64 {
    let a = (r1 - r0) / d;
    let disc = r0 * r0 + 2.0 * a * u;
    let den = r0 + disc.max(0.0).sqrt();
    if disc < 0.0 || den <= 0.0 {
        f64::INFINITY
    } else {
        2.0 * u / den
    }
}

/// Arrival schedule of the rate scenario: one stream at `rate` requests/s in total (linearly
/// ramped from `ramp_from` when given), gaps gamma-distributed with shape `burstiness`
/// (1 = Poisson), for `duration_s`; prompts in one seeded order.
pub(crate) fn rate_schedule(
    rate: f64,
    burstiness: f64,
    duration_s: f64,
    ramp_from: Option<f64>,
    n_samples: usize,
    seed: u64,
) -> Vec<Planned> {
    let mut r = SplitMix64::derive(seed, "rate/arrivals");
    let mut order: Vec<usize> = (0..n_samples).collect();
    SplitMix64::derive(seed, "rate/order").shuffle(&mut order);
    let mut out = Vec::new();
    let (mut t, mut u) = (0.0, 0.0);
    loop {
        match ramp_from {
            // Gamma(k, 1/(k·λ)) has mean 1/λ and coefficient of variation 1/√k.
            None => t += r.gamma(burstiness, 1.0 / (burstiness * rate)),
            // A ramp by time rescaling: gaps of mean 1 in expected arrivals (u), mapped to the
            // time by which the ramp's rate has brought that many. (Drawing each gap at the
            // rate of its start left a ramp from 0 waiting ~1000 gaps of the full rate first.)
            Some(r0) => {
                u += r.gamma(burstiness, 1.0 / burstiness);
                t = ramp_time(u, r0, rate, duration_s);
            }
        }
        if t >= duration_s {
            break;
        }
        out.push(Planned {
            at: Duration::from_secs_f64(t),
            user: None,
            sample: order[out.len() % n_samples],
            max_tokens: None,
        });
    }
    out
}
