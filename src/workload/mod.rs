//! Scenarios: how requests are scheduled against an engine. `single` sends one at a time,
//! `batch` sends b at once and waits for all, `server` runs U users, each an independent
//! Poisson process (open loop) with its own seeded prompt order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::client::{GenRequest, InferenceClient};
use crate::record::rng::SplitMix64;
use crate::record::Sample;
use crate::record::{ChunkRecord, RequestRecord, RunClock};
use crate::spec::expand::ScenarioInstance;

/// Cancellation signal shared by everything a run started.
#[derive(Clone, Debug)]
pub(crate) struct Cancel(watch::Receiver<bool>);

impl Cancel {
    pub fn new() -> (watch::Sender<bool>, Cancel) {
        let (tx, rx) = watch::channel(false);
        (tx, Cancel(rx))
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    pub async fn cancelled(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|c| *c).await;
    }
}

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub requests: Vec<RequestRecord>,
    pub chunks: Vec<ChunkRecord>,
    pub cancelled: bool,
    /// Saturation scenario: the search's probes and its answer.
    pub saturation: Option<Saturation>,
    /// The run ended before its last request because its estimate was tight enough.
    pub stopped_early: bool,
}

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
    let window_s = {
        let start = reqs.iter().map(|r| r.scheduled_ns).min().unwrap_or(0);
        let end = reqs.iter().map(|r| r.end_ns).max().unwrap_or(0);
        (end - start) as f64 / 1e9
    };
    let good = ok
        .iter()
        .filter(|r| {
            ttft_p95_s.is_none_or(|x| stats::ttft_ms(r).is_some_and(|t| t <= x * 1000.0))
                && e2e_p95_s.is_none_or(|x| stats::e2e_ms(r) <= x * 1000.0)
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
fn bracket(probes: &[Probe]) -> (Option<f64>, Option<f64>) {
    let pick = |passed: bool| {
        probes
            .iter()
            .filter(move |p| p.passed == passed)
            .map(|p| p.rate)
    };
    (pick(true).reduce(f64::max), pick(false).reduce(f64::min))
}

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
    let mut t = 0.0;
    loop {
        let now_rate = match ramp_from {
            Some(r0) => r0 + (rate - r0) * (t / duration_s).min(1.0),
            None => rate,
        }
        .max(rate * 1e-3);
        // Gamma(k, 1/(k·λ)) has mean 1/λ and coefficient of variation 1/√k.
        t += r.gamma(burstiness, 1.0 / (burstiness * now_rate));
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

/// One request of a replayed trace.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TraceItem {
    /// Arrival, seconds from the trace's start.
    pub t: f64,
    /// Output length to ask for (the request's max tokens), when the trace gives it.
    pub output_tokens: Option<u32>,
}

/// Reads a trace: JSONL (objects), CSV (header row) or Parquet, each with a `t` field in
/// seconds and an optional `output_tokens`. Errors name the file and line.
pub(crate) fn load_trace(path: &std::path::Path) -> Result<Vec<TraceItem>, String> {
    let name = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut items = Vec::new();
    let item = |t: Option<f64>, out: Option<f64>, line: usize| -> Result<TraceItem, String> {
        let t = t
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| format!("{name}:{line}: `t` must be a number of seconds ≥ 0"))?;
        let output_tokens = match out {
            Some(o) if o.is_finite() && o >= 1.0 => Some(o as u32),
            Some(_) => return Err(format!("{name}:{line}: `output_tokens` must be ≥ 1")),
            None => None,
        };
        Ok(TraceItem { t, output_tokens })
    };
    match ext.as_str() {
        "jsonl" | "json" => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?;
            for (i, line) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                let v: serde_json::Value =
                    serde_json::from_str(line).map_err(|e| format!("{name}:{}: {e}", i + 1))?;
                items.push(item(
                    v.get("t").and_then(|x| x.as_f64()),
                    v.get("output_tokens").and_then(|x| x.as_f64()),
                    i + 1,
                )?);
            }
        }
        "csv" => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?;
            let mut lines = text.lines().enumerate();
            let header: Vec<&str> = lines
                .next()
                .map(|(_, h)| h.split(',').map(str::trim).collect())
                .unwrap_or_default();
            let col = |n: &str| header.iter().position(|h| *h == n);
            let (ti, oi) = (
                col("t").ok_or_else(|| format!("{name}:1: no `t` column"))?,
                col("output_tokens"),
            );
            for (i, line) in lines.filter(|(_, l)| !l.trim().is_empty()) {
                let cells: Vec<&str> = line.split(',').map(str::trim).collect();
                let num = |k: usize| cells.get(k).and_then(|c| c.parse::<f64>().ok());
                items.push(item(num(ti), oi.and_then(num), i + 1)?);
            }
        }
        "parquet" => {
            let cols = crate::trace::read_numeric(path, &["t", "output_tokens"])
                .map_err(|e| format!("cannot read {name}: {e}"))?;
            let out = cols.get("output_tokens").cloned().unwrap_or_default();
            for (i, t) in cols["t"].iter().enumerate() {
                items.push(item(*t, out.get(i).copied().flatten(), i + 1)?);
            }
        }
        other => {
            return Err(format!(
                "{name}: unknown trace format `.{other}` (use .jsonl, .csv or .parquet)"
            ))
        }
    }
    if items.is_empty() {
        return Err(format!("{name}: the trace has no requests"));
    }
    items.sort_by(|a, b| a.t.total_cmp(&b.t));
    Ok(items)
}

/// Runs planned arrivals open-loop: each request is sent at its time, whatever the others do.
/// Request ids start at `first_id` (a saturation search numbers its probes' requests on).
#[allow(clippy::too_many_arguments)]
async fn open_loop<C: InferenceClient>(
    client: &Arc<C>,
    first_id: u32,
    plan: Vec<Planned>,
    samples: &[Sample],
    clock: RunClock,
    cancel: &Cancel,
    progress: &ProgressBar,
    out: &mut Outcome,
) {
    progress.set_length(plan.len() as u64);
    let start = Instant::now() + Duration::from_millis(20);
    let mut set = JoinSet::new();
    for (id, p) in plan.into_iter().enumerate() {
        let mut req = request(first_id + id as u32, p.user, p.sample, samples);
        req.max_tokens = p.max_tokens;
        let c = client.clone();
        let at = start + p.at;
        set.spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            c.stream(req, at, clock).await
        });
    }
    loop {
        tokio::select! {
            next = set.join_next() => match next {
                Some(Ok((r, c))) => {
                    progress.inc(1);
                    out.requests.push(r);
                    out.chunks.extend(c);
                }
                Some(Err(e)) => panic!("request task failed: {e}"),
                None => break,
            },
            _ = cancel.cancelled() => { out.cancelled = true; set.abort_all(); break; }
        }
    }
}

/// Number of measured requests a scenario sends (for progress; the server's is its schedule).
pub(crate) fn expected_requests(instance: &ScenarioInstance, n_samples: usize) -> u64 {
    match instance {
        ScenarioInstance::Single { requests, .. } => requests.unwrap_or(n_samples as u64),
        ScenarioInstance::Batch {
            batch_size,
            batches,
        } => batch_size * batches,
        ScenarioInstance::Server {
            users,
            rate,
            duration_s,
        } => (*users as f64 * rate / 60.0 * duration_s).round() as u64,
        ScenarioInstance::Rate {
            rate,
            duration_s,
            ramp_from,
            ..
        } => (ramp_from.map_or(*rate, |r0| (r0 + rate) / 2.0) * duration_s).round() as u64,
        ScenarioInstance::Replay { .. } => n_samples as u64,
        // Unknown in advance: each probe sets its own length.
        ScenarioInstance::Saturation(x) => (x.start * x.step_s).round() as u64,
        ScenarioInstance::Concurrency { requests, .. } | ScenarioInstance::Offline { requests } => {
            requests.unwrap_or(n_samples as u64)
        }
    }
}

fn request(id: u32, user: Option<u32>, sample_index: usize, samples: &[Sample]) -> GenRequest {
    let s = &samples[sample_index];
    GenRequest {
        id,
        user,
        sample: sample_index,
        sample_id: s.id.clone(),
        system: s.system.clone(),
        prompt: s.prompt.clone(),
        max_tokens: None,
    }
}

/// Runs one scenario to completion (or cancellation) on the given client. `replay` holds the
/// trace of a replay scenario (read by the caller, so that a bad trace fails before any
/// request), empty otherwise.
// Each argument is a different concern of one run (what, to whom, when, how to stop, how to
// show it); bundling them would only move the list into a struct built once per call.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run<C: InferenceClient>(
    client: Arc<C>,
    instance: &ScenarioInstance,
    samples: Arc<Vec<Sample>>,
    seed: u64,
    clock: RunClock,
    cancel: Cancel,
    progress: ProgressBar,
    replay: &[TraceItem],
) -> Outcome {
    let mut out = Outcome::default();
    let n = samples.len();
    let keep = |out: &mut Outcome, (r, c): (RequestRecord, Vec<ChunkRecord>)| {
        progress.inc(1);
        out.requests.push(r);
        out.chunks.extend(c);
    };
    match instance {
        ScenarioInstance::Single {
            requests,
            early_stop,
        } => {
            let total = requests.unwrap_or(n as u64);
            for i in 0..total {
                let req = request(i as u32, None, i as usize % n, &samples);
                tokio::select! {
                    res = client.stream(req, Instant::now(), clock) => keep(&mut out, res),
                    _ = cancel.cancelled() => { out.cancelled = true; break; }
                }
                if early_stop.is_some_and(|w| tight_enough(&out.requests, w)) {
                    out.stopped_early = true;
                    break;
                }
            }
        }
        ScenarioInstance::Batch {
            batch_size,
            batches,
        } => {
            let mut id = 0u32;
            'batches: for _ in 0..*batches {
                let scheduled = Instant::now();
                let mut set = JoinSet::new();
                for _ in 0..*batch_size {
                    let req = request(id, None, id as usize % n, &samples);
                    id += 1;
                    let c = client.clone();
                    set.spawn(async move { c.stream(req, scheduled, clock).await });
                }
                loop {
                    tokio::select! {
                        next = set.join_next() => match next {
                            Some(Ok(res)) => keep(&mut out, res),
                            Some(Err(e)) => panic!("request task failed: {e}"),
                            None => break,
                        },
                        _ = cancel.cancelled() => { out.cancelled = true; break 'batches; }
                    }
                }
            }
        }
        ScenarioInstance::Server {
            users,
            rate,
            duration_s,
        } => {
            let plan = server_schedule(*users, *rate, *duration_s, n, seed);
            open_loop(
                &client, 0, plan, &samples, clock, &cancel, &progress, &mut out,
            )
            .await;
        }
        ScenarioInstance::Rate {
            rate,
            burstiness,
            duration_s,
            ramp_from,
        } => {
            let plan = rate_schedule(*rate, *burstiness, *duration_s, *ramp_from, n, seed);
            open_loop(
                &client, 0, plan, &samples, clock, &cancel, &progress, &mut out,
            )
            .await;
        }
        ScenarioInstance::Offline { requests } => {
            let plan = (0..requests.unwrap_or(n as u64) as usize)
                .map(|i| Planned {
                    at: Duration::ZERO,
                    user: None,
                    sample: i % n,
                    max_tokens: None,
                })
                .collect();
            open_loop(
                &client, 0, plan, &samples, clock, &cancel, &progress, &mut out,
            )
            .await;
        }
        ScenarioInstance::Replay { speed, .. } => {
            // Arrival times scaled by the speed; prompts from the task, in a seeded order.
            let mut order: Vec<usize> = (0..n).collect();
            SplitMix64::derive(seed, "replay/order").shuffle(&mut order);
            let plan: Vec<Planned> = replay
                .iter()
                .enumerate()
                .map(|(i, it)| Planned {
                    at: Duration::from_secs_f64(it.t / speed),
                    user: None,
                    sample: order[i % n],
                    max_tokens: it.output_tokens,
                })
                .collect();
            open_loop(
                &client, 0, plan, &samples, clock, &cancel, &progress, &mut out,
            )
            .await;
        }
        ScenarioInstance::Saturation(x) => {
            let mut sat = Saturation {
                ttft_p95_s: x.ttft_p95,
                e2e_p95_s: x.e2e_p95,
                max_error_rate: x.max_error_rate,
                ..Saturation::default()
            };
            while let Some(rate) = next_rate(&sat.probes, x) {
                let first = out.requests.len();
                let first_id = first as u32;
                // Each probe its own seeded arrivals; the next starts once this one drained.
                let probe_seed = seed ^ (sat.probes.len() as u64).wrapping_mul(0x9E37_79B9);
                let plan = rate_schedule(rate, x.burstiness, x.step_s, None, n, probe_seed);
                progress.set_message(format!("probe {rate:.3} req/s"));
                open_loop(
                    &client, first_id, plan, &samples, clock, &cancel, &progress, &mut out,
                )
                .await;
                if out.cancelled {
                    break;
                }
                out.requests[first..].sort_by_key(|r| r.id);
                sat.probes.push(judge_probe(
                    rate,
                    first_id,
                    &out.requests[first..],
                    x.ttft_p95,
                    x.e2e_p95,
                    x.max_error_rate,
                ));
            }
            (sat.rate, sat.failed_at) = bracket(&sat.probes);
            out.saturation = Some(sat);
        }
        ScenarioInstance::Concurrency {
            concurrency,
            requests,
            early_stop,
        } => {
            // Closed loop: start N, and start the next one each time one returns.
            let total = requests.unwrap_or(n as u64);
            let mut next = 0u64;
            let mut set = JoinSet::new();
            let launch = |set: &mut JoinSet<_>, next: &mut u64| {
                let req = request(*next as u32, None, *next as usize % n, &samples);
                let c = client.clone();
                *next += 1;
                set.spawn(async move { c.stream(req, Instant::now(), clock).await });
            };
            while next < total.min(*concurrency) {
                launch(&mut set, &mut next);
            }
            loop {
                tokio::select! {
                    done = set.join_next() => match done {
                        Some(Ok(res)) => {
                            keep(&mut out, res);
                            if !out.stopped_early
                                && early_stop.is_some_and(|w| tight_enough(&out.requests, w))
                            {
                                // No new requests; those in flight finish and count.
                                out.stopped_early = true;
                            }
                            if next < total && !out.stopped_early {
                                launch(&mut set, &mut next);
                            }
                        }
                        Some(Err(e)) => panic!("request task failed: {e}"),
                        None => break,
                    },
                    _ = cancel.cancelled() => { out.cancelled = true; set.abort_all(); break; }
                }
            }
        }
    }
    out.requests.sort_by_key(|r| r.id);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_load_from_jsonl_csv_and_parquet_and_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("t.jsonl");
        std::fs::write(&j, "{\"t\": 0.5, \"output_tokens\": 7}\n{\"t\": 0.1}\n").unwrap();
        let items = load_trace(&j).unwrap();
        assert_eq!(
            items,
            vec![
                TraceItem {
                    t: 0.1,
                    output_tokens: None
                },
                TraceItem {
                    t: 0.5,
                    output_tokens: Some(7)
                }
            ]
        );
        let c = dir.path().join("t.csv");
        std::fs::write(&c, "t,prompt_tokens,output_tokens\n0.0,10,3\n1.5,20,4\n").unwrap();
        assert_eq!(
            load_trace(&c).unwrap()[1],
            TraceItem {
                t: 1.5,
                output_tokens: Some(4)
            }
        );
        std::fs::write(&c, "t,output_tokens\n0.0,3\nsoon,4\n").unwrap();
        let e = load_trace(&c).unwrap_err();
        assert!(
            e.ends_with("t.csv:3: `t` must be a number of seconds ≥ 0"),
            "{e}"
        );
        std::fs::write(&j, "{\"t\": 0.5}\n{broken\n").unwrap();
        assert!(load_trace(&j).unwrap_err().contains("t.jsonl:2:"));
        assert!(load_trace(&dir.path().join("t.txt"))
            .unwrap_err()
            .contains("unknown trace format"));
    }

    #[test]
    fn rate_schedule_has_the_asked_rate_burstiness_and_ramp() {
        for k in [0.5, 1.0, 4.0] {
            let p = rate_schedule(50.0, k, 200.0, None, 10, 5);
            let n = p.len() as f64;
            assert!(
                (n - 10_000.0).abs() < 400.0,
                "k={k}: {n} arrivals for 10 000 expected"
            );
            let gaps: Vec<f64> = p
                .windows(2)
                .map(|w| (w[1].at - w[0].at).as_secs_f64())
                .collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let sd =
                (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
            assert!(
                (sd / mean - 1.0 / k.sqrt()).abs() < 0.08 / k.sqrt(),
                "k={k} cv {}",
                sd / mean
            );
        }
        // A linear ramp 0 → 20/s over 100 s: half as many arrivals as a flat 20/s, and the
        // second half of the time holds three quarters of them.
        let p = rate_schedule(20.0, 1.0, 100.0, Some(0.0), 10, 9);
        assert!((p.len() as f64 - 1000.0).abs() < 100.0, "{}", p.len());
        let late = p.iter().filter(|x| x.at >= Duration::from_secs(50)).count() as f64;
        assert!(
            (late / p.len() as f64 - 0.75).abs() < 0.05,
            "{}",
            late / p.len() as f64
        );
        assert_eq!(
            p,
            rate_schedule(20.0, 1.0, 100.0, Some(0.0), 10, 9),
            "seeded"
        );
    }

    /// A test double counting how many requests are in flight at once.
    struct Counting {
        now: std::sync::atomic::AtomicUsize,
        peak: std::sync::atomic::AtomicUsize,
    }

    impl InferenceClient for Counting {
        async fn stream(
            &self,
            req: GenRequest,
            scheduled: Instant,
            clock: RunClock,
        ) -> (RequestRecord, Vec<ChunkRecord>) {
            use std::sync::atomic::Ordering::SeqCst;
            let n = self.now.fetch_add(1, SeqCst) + 1;
            self.peak.fetch_max(n, SeqCst);
            tokio::time::sleep(Duration::from_millis(5 + (req.id as u64 % 3) * 5)).await;
            self.now.fetch_sub(1, SeqCst);
            let t = clock.ns(Instant::now());
            (
                RequestRecord {
                    id: req.id,
                    scheduled_ns: clock.ns(scheduled),
                    sent_ns: Some(clock.ns(scheduled)),
                    end_ns: t,
                    ..Default::default()
                },
                vec![],
            )
        }
    }

    /// Runs a scenario on a test client with a fresh clock and no progress bar.
    async fn run_on<C: InferenceClient>(
        client: Arc<C>,
        inst: &ScenarioInstance,
        n_samples: usize,
        seed: u64,
        cancel: Cancel,
    ) -> Outcome {
        run(
            client,
            inst,
            samples(n_samples),
            seed,
            RunClock::start(),
            cancel,
            ProgressBar::hidden(),
            &[],
        )
        .await
    }

    fn samples(n: usize) -> Arc<Vec<Sample>> {
        Arc::new(
            (0..n)
                .map(|i| Sample {
                    id: format!("s{i}"),
                    system: None,
                    prompt: "p".into(),
                    reference: "A".into(),
                    ..Default::default()
                })
                .collect(),
        )
    }

    /// A server of known capacity: `slots` requests served at once, each taking `service`;
    /// the rest wait for a slot (so TTFT grows with the queue). Capacity = slots / service.
    struct Capacity {
        slots: tokio::sync::Semaphore,
        service: Duration,
    }

    impl InferenceClient for Capacity {
        async fn stream(
            &self,
            req: GenRequest,
            scheduled: Instant,
            clock: RunClock,
        ) -> (RequestRecord, Vec<ChunkRecord>) {
            let sent = clock.ns(Instant::now());
            let _slot = self.slots.acquire().await.expect("open");
            tokio::time::sleep(self.service).await;
            let t = clock.ns(Instant::now());
            (
                RequestRecord {
                    id: req.id,
                    scheduled_ns: clock.ns(scheduled),
                    sent_ns: Some(sent),
                    first_token_ns: Some(t),
                    last_token_ns: Some(t),
                    end_ns: t,
                    completion_tokens: Some(1),
                    content_chunks: 1,
                    chunks: 1,
                    ..Default::default()
                },
                vec![],
            )
        }
    }

    fn probe(rate: f64, passed: bool) -> Probe {
        Probe {
            rate,
            first_request_id: 0,
            requests: 1,
            ok: 1,
            error_rate: 0.0,
            ttft_p95_ms: None,
            e2e_p95_ms: None,
            goodput_rps: 0.0,
            achieved_rps: 0.0,
            passed,
            missed: vec![],
        }
    }

    #[test]
    fn the_p95_interval_covers_the_true_p95_and_narrows() {
        // Exponential latencies with mean 100 ms: true p95 = 100·ln 20 ≈ 299.6 ms.
        let truth = 100.0 * 20f64.ln();
        let mut covered = 0;
        for s in 0..200u64 {
            let mut rng = SplitMix64::new(s);
            let mut v: Vec<f64> = (0..400).map(|_| rng.exponential(1.0 / 100.0)).collect();
            let (lo, _, hi) = p95_interval(&mut v).unwrap();
            covered += usize::from(lo <= truth && truth <= hi);
        }
        assert!((180..=200).contains(&covered), "covered {covered} of 200");
        let mut few: Vec<f64> = (1..=50).map(f64::from).collect();
        assert!(
            p95_interval(&mut few).is_none(),
            "50 samples cannot bound a p95"
        );
    }

    #[tokio::test]
    async fn closed_loop_stops_early_once_tight_and_never_sooner() {
        let (_tx, cancel) = Cancel::new();
        // Constant 10-20 ms latencies: the interval gets tight as soon as it exists.
        let inst = ScenarioInstance::Concurrency {
            concurrency: 4,
            requests: Some(2000),
            early_stop: Some(0.5),
        };
        let client = Arc::new(Counting {
            now: 0.into(),
            peak: 0.into(),
        });
        let out = run_on(client, &inst, 8, 1, cancel).await;
        assert!(out.stopped_early);
        assert!(
            (70..400).contains(&out.requests.len()),
            "{} requests",
            out.requests.len()
        );
    }

    #[test]
    fn saturation_ramps_then_bisects() {
        let spec = crate::spec::SaturationSpec {
            start: 1.0,
            factor: 2.0,
            max_rate: 100.0,
            step_s: 1.0,
            precision: 0.05,
            burstiness: 1.0,
            ttft_p95: Some(1.0),
            e2e_p95: None,
            max_error_rate: 0.0,
        };
        let next = |p: &[Probe]| next_rate(p, &spec);
        assert_eq!(next(&[]), Some(1.0));
        assert_eq!(next(&[probe(1.0, true)]), Some(2.0));
        assert_eq!(next(&[probe(1.0, true), probe(2.0, true)]), Some(4.0));
        let p = [probe(1.0, true), probe(2.0, true), probe(4.0, false)];
        assert_eq!(next(&p), Some(3.0));
        let p = [
            probe(1.0, true),
            probe(2.0, true),
            probe(4.0, false),
            probe(3.0, false),
        ];
        assert_eq!(next(&p), Some(2.5));
        // Within 5 %: done.
        let p = [probe(2.0, true), probe(2.05, false)];
        assert_eq!(next(&p), None);
        // The first probe fails: nothing below is probed.
        assert_eq!(next(&[probe(1.0, false)]), None);
        // Everything passes up to max-rate.
        assert_eq!(next(&[probe(64.0, true)]), Some(100.0));
        assert_eq!(next(&[probe(64.0, true), probe(100.0, true)]), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn saturation_finds_a_known_capacity_within_ten_percent() {
        // 4 slots × 50 ms = 80 requests/s. Regular arrivals (burstiness 100: CV 0.1), so a
        // queue forms only above capacity; the TTFT threshold allows little queueing.
        let client = Arc::new(Capacity {
            slots: tokio::sync::Semaphore::new(4),
            service: Duration::from_millis(50),
        });
        let (_tx, cancel) = Cancel::new();
        let inst = ScenarioInstance::Saturation(crate::spec::SaturationSpec {
            start: 10.0,
            factor: 2.0,
            max_rate: 1000.0,
            step_s: 2.0,
            precision: 0.03,
            burstiness: 100.0,
            ttft_p95: Some(0.09),
            e2e_p95: None,
            max_error_rate: 0.0,
        });
        let out = run_on(client, &inst, 8, 3, cancel).await;
        let sat = out.saturation.expect("a saturation result");
        let found = sat.rate.expect("some rate passed");
        assert!(
            (found - 80.0).abs() / 80.0 <= 0.10,
            "found {found:.1} req/s; probes: {:?}",
            sat.probes
                .iter()
                .map(|p| (p.rate, p.passed, p.ttft_p95_ms))
                .collect::<Vec<_>>()
        );
        // Every request belongs to exactly one probe, ids contiguous.
        let total: usize = sat.probes.iter().map(|p| p.requests).sum();
        assert_eq!(total, out.requests.len());
        assert!(out
            .requests
            .iter()
            .enumerate()
            .all(|(i, r)| r.id as usize == i));
    }

    /// Blocks its executor thread before each send: a client starved of CPU.
    struct Starved;

    impl InferenceClient for Starved {
        async fn stream(
            &self,
            req: GenRequest,
            scheduled: Instant,
            clock: RunClock,
        ) -> (RequestRecord, Vec<ChunkRecord>) {
            std::thread::sleep(Duration::from_millis(40));
            let sent = clock.ns(Instant::now());
            (
                RequestRecord {
                    id: req.id,
                    scheduled_ns: clock.ns(scheduled),
                    sent_ns: Some(sent),
                    first_token_ns: Some(sent),
                    last_token_ns: Some(sent),
                    end_ns: sent,
                    completion_tokens: Some(1),
                    content_chunks: 1,
                    ..Default::default()
                },
                vec![],
            )
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_starved_client_is_flagged_as_behind() {
        let (_tx, cancel) = Cancel::new();
        // 50 requests/s for 1 s on one thread that each send blocks for 40 ms: sends fall
        // further and further behind their schedule.
        let inst = ScenarioInstance::Rate {
            rate: 50.0,
            burstiness: 1.0,
            duration_s: 1.0,
            ramp_from: None,
        };
        let out = run_on(Arc::new(Starved), &inst, 8, 1, cancel).await;
        let stats = crate::record::stats::run_stats(&out.requests, &out.chunks);
        assert!(stats.client_behind, "queue p99 {:?}", stats.queue_ms.p99);
        // The same schedule on a client that does not block is not flagged.
        let (_tx, cancel) = Cancel::new();
        let fine = run(
            Arc::new(Capacity {
                slots: tokio::sync::Semaphore::new(1000),
                service: Duration::from_millis(1),
            }),
            &inst,
            samples(8),
            1,
            RunClock::start(),
            cancel,
            ProgressBar::hidden(),
            &[],
        )
        .await;
        let stats = crate::record::stats::run_stats(&fine.requests, &fine.chunks);
        assert!(!stats.client_behind, "queue p99 {:?}", stats.queue_ms.p99);
    }

    #[tokio::test]
    async fn closed_loop_keeps_exactly_n_in_flight_and_offline_sends_all_at_once() {
        let (_tx, cancel) = Cancel::new();
        let client = Arc::new(Counting {
            now: 0.into(),
            peak: 0.into(),
        });
        let inst = ScenarioInstance::Concurrency {
            concurrency: 4,
            requests: Some(40),
            early_stop: None,
        };
        let out = run(
            client.clone(),
            &inst,
            samples(7),
            1,
            RunClock::start(),
            cancel.clone(),
            ProgressBar::hidden(),
            &[],
        )
        .await;
        assert_eq!(out.requests.len(), 40);
        assert_eq!(client.peak.load(std::sync::atomic::Ordering::SeqCst), 4);
        assert_eq!(
            out.requests.iter().map(|r| r.id).collect::<Vec<_>>(),
            (0..40).collect::<Vec<_>>()
        );

        let client = Arc::new(Counting {
            now: 0.into(),
            peak: 0.into(),
        });
        let out = run(
            client.clone(),
            &ScenarioInstance::Offline { requests: Some(25) },
            samples(7),
            1,
            RunClock::start(),
            cancel,
            ProgressBar::hidden(),
            &[],
        )
        .await;
        assert_eq!(out.requests.len(), 25);
        assert_eq!(client.peak.load(std::sync::atomic::Ordering::SeqCst), 25);
        let first = out.requests.iter().map(|r| r.scheduled_ns).min().unwrap();
        assert!(
            out.requests.iter().all(|r| r.scheduled_ns == first),
            "all scheduled at one instant"
        );
    }

    #[test]
    fn server_schedule_is_seeded_per_user_and_bounded_by_duration() {
        let a = server_schedule(4, 60.0, 100.0, 50, 1);
        let b = server_schedule(4, 60.0, 100.0, 50, 1);
        assert_eq!(a, b);
        assert!(a.iter().all(|p| p.at < Duration::from_secs(100)));
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        // 4 users × 1 request/s × 100 s ≈ 400 (Poisson: within ±4 sd).
        assert!((320..=480).contains(&a.len()), "{}", a.len());
        // Users draw their own prompt orders: their first prompts differ.
        let firsts: Vec<usize> = (0..4u32)
            .map(|u| a.iter().find(|p| p.user == Some(u)).unwrap().sample)
            .collect();
        assert!(firsts.windows(2).any(|w| w[0] != w[1]), "{firsts:?}");
        assert_ne!(a, server_schedule(4, 60.0, 100.0, 50, 2));
    }
}
