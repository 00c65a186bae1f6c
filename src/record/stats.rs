//! Metric math over a run's request records. Pure.
//!
//! Definitions (docs/metrics.md says the same):
//! - TTFT = first generated chunk (content or reasoning) − send.
//! - TPOT = (last generated chunk − first generated chunk) / (completion tokens − 1), with the
//!   completion tokens from the server's `usage`; undefined for fewer than 2 tokens, and where
//!   the whole output arrived at one instant.
//! - ITL = every gap between consecutive generated (content or reasoning) chunks of a request.
//! - ITL per token = each such gap / the tokens its later chunk carried: the server's
//!   per-chunk count when it reports one, else the request's completion tokens / generated
//!   chunks (engines that send several tokens per chunk, like LMDeploy under load, then do not
//!   look slower per token than they are).
//! - E2E = last generated token (or end of stream when none) − scheduled time.
//! - queue (client lag) = send − scheduled.
//! - Percentiles interpolate linearly between closest ranks (numpy's default).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ChunkRecord, RequestRecord};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct Dist {
    pub n: usize,
    pub mean: Option<f64>,
    pub std: Option<f64>,
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    /// When requests were sent in groups scheduled at one instant (batches, an offline
    /// burst), the number of groups: the independent observations behind the percentiles,
    /// fewer than `n` (see [`batches`]). None: one request per instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<usize>,
    /// Where requests each had their own instant and neighbours in time moved together: the
    /// independent requests p50, p90, p95 and p99 are worth
    /// ([`block::percentile_effective_n`]), None where a percentile's are worth their count.
    /// Set by the report from the per-request values in time order ([`Dist::weigh`]); not
    /// recorded.
    #[serde(skip)]
    pub worth: [Option<usize>; 4],
}

/// The percentiles [`Dist::worth`] holds, in its order.
const WORTH_AT: [f64; 4] = [50.0, 90.0, 95.0, 99.0];

/// Linear-interpolation percentile of sorted values, q in [0, 100].
pub(crate) fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64))
}

impl Dist {
    pub fn of(mut v: Vec<f64>) -> Dist {
        v.retain(|x| x.is_finite());
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Dist::default();
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        // Sample standard deviation (n − 1); undefined for one value.
        let std = (n > 1)
            .then(|| (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt());
        Dist {
            n,
            mean: Some(mean),
            std,
            min: v.first().copied(),
            p50: percentile(&v, 50.0),
            p90: percentile(&v, 90.0),
            p95: percentile(&v, 95.0),
            p99: percentile(&v, 99.0),
            max: v.last().copied(),
            groups: None,
            worth: [None; 4],
        }
    }

    /// [`Dist::of`] of values each with its request's scheduled instant, counting the groups
    /// when some requests shared one.
    pub fn of_scheduled(v: Vec<(f64, i64)>) -> Dist {
        let (values, at): (Vec<f64>, Vec<i64>) =
            v.into_iter().filter(|(x, _)| x.is_finite()).unzip();
        Dist {
            groups: batches(&values, &at).map(|g| g.len()),
            ..Dist::of(values)
        }
    }

    /// The independent observations behind the percentiles: the groups, else the values.
    pub fn observations(&self) -> usize {
        self.groups.unwrap_or(self.n)
    }

    /// The independent observations behind the q-th percentile: [`Dist::observations`], or
    /// fewer where requests that moved together in time are worth fewer ([`Dist::worth`]).
    pub fn observations_at(&self, q: f64) -> usize {
        let worth = WORTH_AT
            .iter()
            .position(|w| *w == q)
            .and_then(|i| self.worth[i]);
        worth.map_or(self.observations(), |w| w.min(self.observations()))
    }

    /// Sets [`Dist::worth`] from the distribution's values with their requests' scheduled
    /// instants (`at`, one per value): nothing where requests came in groups (their groups
    /// are the observations), without instants, or where `values` are not as many as the
    /// distribution counted (not its values).
    pub fn weigh(&mut self, values: &[f64], at: &[i64]) {
        // Only the distribution's own values (as many as it counted), one instant each.
        if values.len() != self.n || at.len() != values.len() || batches(values, at).is_some() {
            return;
        }
        let series = block::in_time_order(values, at);
        for (slot, q) in self.worth.iter_mut().zip(WORTH_AT) {
            let e = block::percentile_effective_n(&series, q);
            *slot = (e < series.len()).then_some(e);
        }
    }
}

const MS: f64 = 1e6;

/// The first generated token of any kind: reasoning (`reasoning_content`) or answer.
fn first_output_ns(r: &RequestRecord) -> Option<i64> {
    match (r.first_token_ns, r.first_reasoning_ns) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Time to first token: to the first generated token, reasoning included (what a streaming
/// client sees first).
pub(crate) fn ttft_ms(r: &RequestRecord) -> Option<f64> {
    Some((first_output_ns(r)? - r.sent_ns?) as f64 / MS)
}

/// Time to the first token of the answer (content), after any reasoning; the TTFT of a
/// request that did not reason.
pub(crate) fn ttfa_ms(r: &RequestRecord) -> Option<f64> {
    Some((r.first_token_ns? - r.sent_ns?) as f64 / MS)
}

/// Time per output token over every generated token after the first, reasoning included
/// (`completion_tokens` counts both); None where the whole output arrived at one instant (an
/// engine that sent it in one stream event: its decode time is inside TTFT).
pub(crate) fn tpot_ms(r: &RequestRecord) -> Option<f64> {
    let n = r.completion_tokens?;
    if n < 2 {
        return None;
    }
    let span = r.last_token_ns? - first_output_ns(r)?;
    (span > 0).then(|| span as f64 / MS / (n - 1) as f64)
}

pub(crate) fn e2e_ms(r: &RequestRecord) -> f64 {
    (r.last_token_ns.unwrap_or(r.end_ns) - r.scheduled_ns) as f64 / MS
}

pub(crate) fn queue_ms(r: &RequestRecord) -> Option<f64> {
    Some((r.sent_ns? - r.scheduled_ns) as f64 / MS)
}

/// Aggregates of one run. Failed requests are counted apart and excluded from every
/// latency and throughput figure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct RunStats {
    pub requests: usize,
    pub ok: usize,
    pub failed: usize,
    /// Failure causes (first 120 characters) and how often each occurred.
    pub failures: BTreeMap<String, usize>,
    /// First scheduled time → last end of a successful request ([`window`]), seconds.
    pub window_s: f64,
    pub ttft_ms: Dist,
    pub tpot_ms: Dist,
    pub itl_ms: Dist,
    /// ITL divided by the tokens each chunk carried (see the module docs).
    #[serde(default)]
    pub itl_per_token_ms: Dist,
    pub e2e_ms: Dist,
    pub queue_ms: Dist,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Successful requests whose stream carried no `usage` (their tokens are unknown).
    pub usage_missing: usize,
    pub output_tokens_per_s: f64,
    pub requests_per_s: f64,
    /// True when the client sent late: p99 of send − scheduled above the threshold.
    pub client_behind: bool,
    /// Successful requests that streamed any reasoning (`reasoning_content`) before or beside
    /// their answer; 0 for a model that does not reason.
    #[serde(default)]
    pub reasoning_requests: usize,
    /// Time to the first answer token, after any reasoning (equal to TTFT where none).
    #[serde(default)]
    pub ttfa_ms: Dist,
    /// Of `output_tokens`, those the engine reported as reasoning; None when it reported none
    /// for any request.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
    /// The steady part of the window (`record::steady`); None when the run has none or was
    /// recorded before bench360 measured it.
    #[serde(default)]
    pub steady: Option<super::steady::Steady>,
}

/// The tokens each generated chunk of a request carried on average — its completion tokens
/// over its answer and reasoning chunks — for the requests whose usage says how many; the
/// estimate where a chunk's own count is not reported.
pub(crate) fn tokens_per_generated_chunk(
    requests: &[&RequestRecord],
    chunks: &[ChunkRecord],
) -> std::collections::HashMap<u32, f64> {
    let mut count: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    for c in chunks.iter().filter(|c| c.kind.is_generated()) {
        *count.entry(c.request_id).or_default() += 1;
    }
    requests
        .iter()
        .filter_map(|r| match (r.completion_tokens, count.get(&r.id)) {
            (Some(t), Some(&c)) if c > 0 => Some((r.id, f64::from(t) / f64::from(c))),
            _ => None,
        })
        .collect()
}

/// Client lag (p99 of send − scheduled) above which a run is flagged as client-bound.
pub(crate) const CLIENT_LAG_P99_MS: f64 = 50.0;

/// Whether one successful request is within per-request thresholds (seconds; those given):
/// TTFT ≤ `ttft_s` and E2E ≤ `e2e_s`, latencies in ms. A request that generated no token has
/// no TTFT: its (empty) answer reached the client at its E2E, which the TTFT threshold judges
/// instead. Goodput counts these, a run's and a saturation probe's alike.
pub(crate) fn within_thresholds(
    ttft_ms: Option<f64>,
    e2e_ms: Option<f64>,
    ttft_s: Option<f64>,
    e2e_s: Option<f64>,
) -> bool {
    let within = |v: Option<f64>, limit: Option<f64>| {
        limit.is_none_or(|x| v.is_some_and(|v| v <= x * 1000.0))
    };
    within(ttft_ms.or(e2e_ms), ttft_s) && within(e2e_ms, e2e_s)
}

/// A run's measured window (ns on its clock): from the first scheduled request to the last
/// end of a successful one — a failed request that ends later (one that hung until its
/// timeout) does not stretch the time its throughput and energy are divided by. With no
/// successful request, to the last end of any. None when it has no length.
pub(crate) fn window(requests: &[RequestRecord]) -> Option<(i64, i64)> {
    let start = requests.iter().map(|r| r.scheduled_ns).min()?;
    let end = requests
        .iter()
        .filter(|r| r.ok())
        .map(|r| r.end_ns)
        .max()
        .or_else(|| requests.iter().map(|r| r.end_ns).max())?;
    (end > start).then_some((start, end))
}

pub(crate) fn run_stats(requests: &[RequestRecord], chunks: &[ChunkRecord]) -> RunStats {
    let ok: Vec<&RequestRecord> = requests.iter().filter(|r| r.ok()).collect();
    let mut failures = BTreeMap::new();
    for r in requests.iter().filter(|r| !r.ok()) {
        let cause: String = r.error.as_deref().unwrap_or("").chars().take(120).collect();
        *failures.entry(cause).or_insert(0) += 1;
    }
    let window_ns = window(requests).map_or(0, |(a, b)| b - a);
    let window_s = window_ns as f64 / 1e9;
    let ok_ids: std::collections::HashSet<u32> = ok.iter().map(|r| r.id).collect();
    let mut itl = Vec::new();
    let mut itl_token = Vec::new();
    let generated = |c: &&ChunkRecord| c.kind.is_generated() && ok_ids.contains(&c.request_id);
    let per_chunk = tokens_per_generated_chunk(&ok, chunks);
    let mut last: BTreeMap<u32, i64> = BTreeMap::new();
    for c in chunks.iter().filter(generated) {
        if let Some(prev) = last.insert(c.request_id, c.t_ns) {
            let gap = (c.t_ns - prev) as f64 / MS;
            itl.push(gap);
            let tokens = c
                .tokens
                .map(f64::from)
                .or_else(|| per_chunk.get(&c.request_id).copied());
            if let Some(t) = tokens.filter(|t| *t > 0.0) {
                itl_token.push(gap / t);
            }
        }
    }
    let output_tokens: u64 = ok
        .iter()
        .filter_map(|r| r.completion_tokens)
        .map(u64::from)
        .sum();
    let per_s = |x: f64| if window_s > 0.0 { x / window_s } else { 0.0 };
    let queue = Dist::of(ok.iter().filter_map(|r| queue_ms(r)).collect());
    RunStats {
        requests: requests.len(),
        ok: ok.len(),
        failed: requests.len() - ok.len(),
        failures,
        window_s,
        ttft_ms: Dist::of_scheduled(
            ok.iter()
                .filter_map(|r| Some((ttft_ms(r)?, r.scheduled_ns)))
                .collect(),
        ),
        tpot_ms: Dist::of_scheduled(
            ok.iter()
                .filter_map(|r| Some((tpot_ms(r)?, r.scheduled_ns)))
                .collect(),
        ),
        itl_ms: Dist::of(itl),
        itl_per_token_ms: Dist::of(itl_token),
        e2e_ms: Dist::of_scheduled(ok.iter().map(|r| (e2e_ms(r), r.scheduled_ns)).collect()),
        client_behind: queue.p99.is_some_and(|p| p > CLIENT_LAG_P99_MS),
        queue_ms: queue,
        prompt_tokens: ok
            .iter()
            .filter_map(|r| r.prompt_tokens)
            .map(u64::from)
            .sum(),
        output_tokens,
        usage_missing: ok.iter().filter(|r| r.completion_tokens.is_none()).count(),
        output_tokens_per_s: per_s(output_tokens as f64),
        requests_per_s: per_s(ok.len() as f64),
        reasoning_requests: ok.iter().filter(|r| r.first_reasoning_ns.is_some()).count(),
        ttfa_ms: Dist::of_scheduled(
            ok.iter()
                .filter_map(|r| Some((ttfa_ms(r)?, r.scheduled_ns)))
                .collect(),
        ),
        reasoning_tokens: ok
            .iter()
            .filter_map(|r| r.reasoning_tokens)
            .map(u64::from)
            .reduce(|a, b| a + b),
        steady: None,
    }
}

#[cfg(test)]
mod tests;

pub(crate) mod block;

/// The 2.5th and 97.5th percentiles of bootstrap estimates (sorted here): a 95 %
/// percentile-bootstrap interval. None without estimates.
pub(crate) fn interval95(mut estimates: Vec<f64>) -> Option<(f64, f64)> {
    estimates.sort_by(f64::total_cmp);
    Some((percentile(&estimates, 2.5)?, percentile(&estimates, 97.5)?))
}

/// 95 % percentile-bootstrap interval of `stat` over `values` (resampled with replacement
/// `rounds` times with a seeded generator). None for fewer than 2 values.
pub(crate) fn bootstrap_ci(
    values: &[f64],
    rounds: usize,
    seed: u64,
    stat: impl Fn(&mut [f64]) -> Option<f64>,
) -> Option<(f64, f64)> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len();
    resampled_ci(
        rounds,
        seed,
        |rng, sample| {
            sample.clear();
            sample.extend((0..n).map(|_| values[rng.below(n)]));
        },
        stat,
    )
}

/// The 95 % percentile-bootstrap interval of `stat` over `rounds` resamples, each drawn by
/// `resample` into a buffer with a generator seeded by `seed`: the loop every bootstrap here
/// shares (requests one by one, whole groups, blocks of neighbours).
fn resampled_ci(
    rounds: usize,
    seed: u64,
    mut resample: impl FnMut(&mut crate::record::rng::SplitMix64, &mut Vec<f64>),
    stat: impl Fn(&mut [f64]) -> Option<f64>,
) -> Option<(f64, f64)> {
    let mut rng = crate::record::rng::SplitMix64::new(seed);
    let mut sample = Vec::new();
    let mut estimates = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        resample(&mut rng, &mut sample);
        if let Some(e) = stat(&mut sample) {
            estimates.push(e);
        }
    }
    interval95(estimates)
}

/// Requests sent together — a batch, an offline burst — share the server's state: their
/// latencies move together, so they are one observation of it, not several. `at[i]` is the
/// instant `values[i]`'s request was scheduled; requests scheduled at the same instant form a
/// group. The values split into their groups, in the instants' order — or None when no group
/// holds more than one value (each request on its own), or `at` does not name one instant
/// per value.
pub(crate) fn batches(values: &[f64], at: &[i64]) -> Option<Vec<Vec<f64>>> {
    if at.len() != values.len() {
        return None;
    }
    let mut by: std::collections::BTreeMap<i64, Vec<f64>> = std::collections::BTreeMap::new();
    for (v, g) in values.iter().zip(at) {
        by.entry(*g).or_default().push(*v);
    }
    (by.len() < values.len()).then(|| by.into_values().collect())
}

/// One resample (with replacement) of whole groups, their values pooled into `into`.
pub(crate) fn resample_groups(
    groups: &[Vec<f64>],
    rng: &mut crate::record::rng::SplitMix64,
    into: &mut Vec<f64>,
) {
    into.clear();
    for _ in 0..groups.len() {
        into.extend_from_slice(&groups[rng.below(groups.len())]);
    }
}

/// The 95 % bootstrap interval of the q-th percentile (0–100) of a run's requests. Requests
/// that came in groups (see [`batches`]): whole groups are resampled, and there is no
/// interval with fewer than `min_groups` of them (a percentile's interval needs as many
/// independent observations as its order-statistic rule asks of requests). Requests each at
/// their own instant: [`time_block_bootstrap_ci`], which is exactly [`bootstrap_ci`] where
/// neighbours in time do not move together. No instants: [`bootstrap_ci`].
pub(crate) fn grouped_bootstrap_ci(
    values: &[f64],
    groups: &[i64],
    q: f64,
    min_groups: usize,
    rounds: usize,
    seed: u64,
) -> Option<(f64, f64)> {
    let stat = move |v: &mut [f64]| pct_of(v, q);
    let Some(gs) = batches(values, groups) else {
        return time_block_bootstrap_ci(values, groups, q, rounds, seed);
    };
    if gs.len() < min_groups.max(2) {
        return None;
    }
    resampled_ci(
        rounds,
        seed,
        |rng, sample| resample_groups(&gs, rng, sample),
        stat,
    )
}

/// [`bootstrap_ci`] of the q-th percentile of requests that each have their own instant
/// (`at`, one per value), in their time order with the circular block bootstrap
/// ([`block::percentile_block_length`]): neighbours in time share the server's state, so runs
/// of them are resampled together, as long as the autocorrelation of which requests fall
/// below the percentile asks (blocks of one, the ordinary bootstrap, where it has none).
/// Without instants: the ordinary bootstrap.
fn time_block_bootstrap_ci(
    values: &[f64],
    at: &[i64],
    q: f64,
    rounds: usize,
    seed: u64,
) -> Option<(f64, f64)> {
    let stat = move |v: &mut [f64]| pct_of(v, q);
    if at.len() != values.len() {
        return bootstrap_ci(values, rounds, seed, stat);
    }
    let series = block::in_time_order(values, at);
    let b = block::percentile_block_length(&series, q);
    if b <= 1 {
        return bootstrap_ci(values, rounds, seed, stat);
    }
    resampled_ci(
        rounds,
        seed,
        |rng, sample| block::resample_blocks(&series, b, rng, sample),
        stat,
    )
}

/// The 95 % percentile-bootstrap interval of a mean whose observations come in clusters —
/// requests that repeat the same dataset item at temperature 0 are one observation of that
/// item, not independent ones. Whole clusters are resampled (`clusters[i]` names the cluster
/// of `values[i]`); with one observation per cluster this is the ordinary bootstrap of the
/// mean. None with fewer than two clusters.
pub(crate) fn cluster_bootstrap_mean_ci(
    values: &[f64],
    clusters: &[String],
    rounds: usize,
    seed: u64,
) -> Option<(f64, f64)> {
    let groups = cluster_sums(values, clusters)?;
    if groups.len() < 2 {
        return None;
    }
    let mut rng = crate::record::rng::SplitMix64::new(seed);
    interval95(
        (0..rounds)
            .map(|_| resample_clusters(&groups, &mut rng))
            .collect(),
    )
}

/// The values summed per cluster, as (sum, count), in the clusters' name order (so the same
/// data and seed resample the same way). None without values or without one cluster name
/// per value.
fn cluster_sums(values: &[f64], clusters: &[String]) -> Option<Vec<(f64, f64)>> {
    if clusters.len() != values.len() || values.is_empty() {
        return None;
    }
    let mut by: std::collections::BTreeMap<&str, (f64, f64)> = std::collections::BTreeMap::new();
    for (v, c) in values.iter().zip(clusters) {
        let e = by.entry(c.as_str()).or_default();
        e.0 += v;
        e.1 += 1.0;
    }
    Some(by.into_values().collect())
}

/// The mean over a resample (with replacement) of whole clusters from [`cluster_sums`].
fn resample_clusters(groups: &[(f64, f64)], rng: &mut crate::record::rng::SplitMix64) -> f64 {
    let (mut sum, mut n) = (0.0, 0.0);
    for _ in 0..groups.len() {
        let g = groups[rng.below(groups.len())];
        sum += g.0;
        n += g.1;
    }
    sum / n
}

/// The q-th percentile of unsorted values (sorts in place).
pub(crate) fn pct_of(v: &mut [f64], q: f64) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    percentile(v, q)
}

pub(crate) fn mean_of(v: &mut [f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Two-sided 95 % Student t critical value for `df` degrees of freedom.
pub(crate) fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => T[df - 1],
        // Cornish–Fisher expansion of the t quantile around the normal one (error < 1e-5
        // from 31 degrees of freedom on), so the value falls smoothly towards 1.96.
        _ => {
            let z = super::paired::Z_975;
            let v = df as f64;
            let (z3, z5, z7, z9) = (z.powi(3), z.powi(5), z.powi(7), z.powi(9));
            z + (z3 + z) / (4.0 * v)
                + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * v * v)
                + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * v.powi(3))
                + (79.0 * z9 + 776.0 * z7 + 1482.0 * z5 - 1920.0 * z3 - 945.0 * z)
                    / (92160.0 * v.powi(4))
        }
    }
}

/// Mean and 95 % half-width across repeats (Student t). None for fewer than 2 values.
pub(crate) fn repeat_ci(values: &[f64]) -> Option<(f64, f64)> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let sd = (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    Some((mean, t95(n - 1) * sd / (n as f64).sqrt()))
}

/// Indices of the Pareto-optimal points when `x` is better lower and `y` better higher
/// (ties on x keep the higher y), sorted by x.
pub(crate) fn pareto_front(points: &[(f64, f64)]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].0.is_finite() && points[i].1.is_finite())
        .collect();
    idx.sort_by(|&a, &b| {
        points[a]
            .0
            .total_cmp(&points[b].0)
            .then(points[b].1.total_cmp(&points[a].1))
    });
    let mut out = Vec::new();
    let mut best = f64::NEG_INFINITY;
    for i in idx {
        if points[i].1 > best {
            best = points[i].1;
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
mod ci_tests {

    /// 20 questions asked 10 times each carry the information of 20 answers, not 200: the
    /// interval over clusters is about √10 wider than over requests, and with one request
    /// per question it is the ordinary bootstrap's width.
    #[test]
    fn clustered_quality_interval_counts_questions_not_requests() {
        let mut values = Vec::new();
        let mut clusters = Vec::new();
        for q in 0..20 {
            for _ in 0..10 {
                values.push(if q % 2 == 0 { 1.0 } else { 0.0 });
                clusters.push(format!("q{q}"));
            }
        }
        let (lo, hi) = super::cluster_bootstrap_mean_ci(&values, &clusters, 2000, 7).unwrap();
        let (nlo, nhi) = super::bootstrap_ci(&values, 2000, 7, super::mean_of).unwrap();
        let ratio = (hi - lo) / (nhi - nlo);
        assert!(
            (2.5..4.0).contains(&ratio),
            "{ratio}: {lo}-{hi} vs {nlo}-{nhi}"
        );
        // Half right: the interval is centred on 0.5 and about ±1.96·√(0.25/20) ≈ ±0.22 wide.
        assert!(
            (hi - lo - 0.44).abs() < 0.1 && lo < 0.5 && hi > 0.5,
            "{lo}-{hi}"
        );
        let single: Vec<String> = (0..200).map(|i| format!("r{i}")).collect();
        let (slo, shi) = super::cluster_bootstrap_mean_ci(&values, &single, 2000, 7).unwrap();
        assert!(
            ((shi - slo) / (nhi - nlo) - 1.0).abs() < 0.15,
            "{slo}-{shi}"
        );
        assert!(
            super::cluster_bootstrap_mean_ci(&[1.0, 0.0], &["a".into(), "a".into()], 100, 1)
                .is_none()
        );
    }

    #[test]
    fn the_t_quantile_is_right_past_thirty_degrees_of_freedom() {
        // scipy.stats.t.ppf(0.975, df)
        for (df, want) in [
            (30, 2.042272),
            (31, 2.039513),
            (40, 2.021075),
            (60, 2.000298),
            (120, 1.979930),
            (1000, 1.962339),
        ] {
            assert!(
                (super::t95(df) - want).abs() < 1e-3,
                "df {df}: {}",
                super::t95(df)
            );
        }
        assert!((super::t95(31) - 2.039513).abs() < 1e-4);
    }
    use super::*;
    use crate::record::rng::SplitMix64;

    #[test]
    fn bootstrap_intervals_cover_the_true_mean_about_95_percent_of_the_time() {
        // Exponential data with mean 1: count how often the 95 % interval of the mean
        // contains 1 over 200 independent data sets of 50 values.
        let mut rng = SplitMix64::new(99);
        let mut covered = 0;
        for k in 0..200 {
            let data: Vec<f64> = (0..50).map(|_| rng.exponential(1.0)).collect();
            let (lo, hi) = bootstrap_ci(&data, 400, k, mean_of).unwrap();
            if lo <= 1.0 && 1.0 <= hi {
                covered += 1;
            }
        }
        // Percentile bootstrap under-covers slightly for skewed data at n = 50.
        assert!((170..=199).contains(&covered), "covered {covered} of 200");
        assert_eq!(bootstrap_ci(&[1.0], 100, 0, mean_of), None);
    }

    #[test]
    fn repeat_intervals_use_student_t() {
        let (m, h) = repeat_ci(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(m, 12.0);
        assert!((h - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(repeat_ci(&[1.0]), None);
    }

    #[test]
    fn pareto_front_of_hand_made_points() {
        // (latency, quality): lower latency and higher quality are better.
        let pts = [
            (10.0, 0.5),
            (20.0, 0.7),
            (15.0, 0.4),
            (30.0, 0.7),
            (5.0, 0.2),
            (25.0, 0.9),
            (5.0, 0.3),
        ];
        assert_eq!(pareto_front(&pts), vec![6, 0, 1, 5]);
        assert!(pareto_front(&[]).is_empty());
    }
}
