//! From what the cache holds for each run to the report's rows: every aggregate with 95 %
//! confidence intervals (bootstrap over requests; Student t across repeats), goodput under
//! the sweep's SLO, cost per query, and the recommendation per task. Pure.

use std::collections::BTreeMap;

use super::ColdStart;
use crate::record::stats::{self, bootstrap_ci, cluster_bootstrap_mean_ci, mean_of, RunStats};
use crate::record::Columns;
use crate::spec::{Cost, Slo};
use crate::trace::Cell;

mod caveats;
mod memory;
mod prefix;
pub(crate) use caveats::*;
pub(crate) use memory::deployment_memory;
use memory::memory_verdict;
pub(crate) use prefix::{prefix_cache, prefix_cache_note, PrefixCache, CACHED_COUNTERS};

/// Everything the report knows of one run (read from the cache by the caller).
#[derive(Debug, Clone, Default)]
pub(crate) struct RunData {
    pub label: String,
    pub deployment: String,
    /// The deployment without its cold start (`… (start K)` with `cold-repeats`): every
    /// start of one engine on one model with one setting; empty where it is the deployment.
    pub deployment_base: String,
    pub run_key: String,
    pub columns: Option<Columns>,
    /// None when the run finished; else why it has no results.
    pub failure: Option<String>,
    pub stats: Option<RunStats>,
    pub metrics: BTreeMap<String, f64>,
    pub telemetry: Option<crate::telemetry::Summary>,
    pub coldstart: Option<ColdStart>,
    /// Per successful request.
    pub ttft_ms: Vec<f64>,
    pub tpot_ms: Vec<f64>,
    pub e2e_ms: Vec<f64>,
    /// Per successful request, in request order: its TTFT and its E2E (ms), None where it has
    /// none (a request that generated no token has no TTFT) — the pairs goodput judges.
    pub ok_latency: Vec<(Option<f64>, Option<f64>)>,
    /// The scheduled instant (ns) of each value's request above, in the same order: requests
    /// scheduled together (a batch, an offline burst) are one observation of the server's
    /// state, resampled together by the latency intervals. Empty when not read (requests are
    /// then taken as independent).
    pub ttft_group: Vec<i64>,
    pub tpot_group: Vec<i64>,
    pub e2e_group: Vec<i64>,
    pub itl_ms: Vec<f64>,
    /// Per scored request: the task's per-request score (1/0 for pass/fail metrics).
    pub scores: Vec<f64>,
    /// The dataset item of each score (`scores[i]`'s sample id): the clusters of the
    /// quality interval. Empty when not read (the interval then treats requests as
    /// independent).
    pub score_samples: Vec<String>,
    /// Name of the task's primary metric (what `quality` means).
    pub primary: String,
    /// (seconds since window start, requests in flight).
    pub inflight: Vec<(f64, f64)>,
    /// (seconds since window start, W) summed over GPUs; and GPU memory in GB.
    pub power: Vec<(f64, f64)>,
    pub gpu_mem_gb: Vec<(f64, f64)>,
    /// (seconds, %) averaged over GPUs.
    pub gpu_util: Vec<(f64, f64)>,
    pub sentences: usize,
    /// When the run's node started and finished (Unix seconds, from its record).
    pub ran: Option<(f64, f64)>,
    /// What the run ran on (from run.json; None for runs recorded before it was kept).
    pub provenance: Option<crate::record::provenance::Provenance>,
    /// Where `target-margin` stopped the run (from run.json).
    pub stopped: Option<crate::workload::Stopped>,
    /// The engine start it ran on (from run.json; None for runs recorded before it was kept).
    pub engine_start: Option<crate::record::EngineStart>,
    /// Truncation: successful requests that stopped at max-tokens (`finish_reason` `length`),
    /// and the unparsed scored answers split into those cut by the budget and the others.
    pub truncation: Option<Truncation>,
    /// Synthetic runs: prompts whose length as the server counted it missed their target.
    pub prompt_lengths: Option<PromptLengths>,
    /// How many tokens the engine's stream events carried.
    pub stream: Option<StreamGrain>,
    /// Prompt tokens the engine's prefix cache served over the window (its own counter).
    pub prefix_cache: Option<PrefixCache>,
    /// How the task read the model's choice (`logprobs`: one token per request, no
    /// truncation to speak of).
    pub scoring: crate::spec::Scoring,
    /// The highest GPU memory peak (MB) of any run of this deployment in the report (over
    /// all its starts on the same kind of GPUs), and that run's label, when above this run's
    /// own peak ([`deployment_memory`]).
    pub deployment_mem_peak: Option<(f64, String)>,
}

/// A run's derived figures, as shown and as written to summary.parquet.
#[derive(Debug, Clone, Default)]
pub(crate) struct Row {
    pub data: RunData,
    pub ttft_p50_ci: Option<(f64, f64)>,
    pub ttft_p95_ci: Option<(f64, f64)>,
    pub e2e_p95_ci: Option<(f64, f64)>,
    pub tpot_p50_ci: Option<(f64, f64)>,
    pub quality_ci: Option<(f64, f64)>,
    /// Successful requests per second whose TTFT and E2E met the SLO thresholds.
    pub goodput_rps: Option<f64>,
    pub cost_per_query: Option<f64>,
    /// Meets every SLO constraint the sweep declares (None when one cannot be checked).
    pub meets_slo: Option<bool>,
    pub slo_misses: Vec<String>,
    /// Scored requests whose answer counts as correct (a pass/fail metric's passes; for a
    /// graded metric, scores ≥ [`CORRECT_AT`]), and their share's 95 % interval (by item).
    pub correct: Option<f64>,
    pub correct_share_ci: Option<(f64, f64)>,
    /// Energy (the window's, of the counted devices) per correct answer, with the interval
    /// the correct share's interval gives it (energy's own noise not included).
    pub j_per_correct: Option<f64>,
    pub j_per_correct_ci: Option<(f64, f64)>,
    /// Cost of 1,000 correct answers (the window's cost / correct answers × 1,000).
    pub cost_per_1k_correct: Option<f64>,
    pub cost_per_1k_correct_ci: Option<(f64, f64)>,
    /// Energy per output token over the steady part of the window.
    pub steady_j_per_output_token: Option<f64>,
    /// Set by `answer::annotate`: the paired comparison with the task's quality reference,
    /// that reference's label, and this run's place in the answer.
    pub vs_reference: Option<crate::record::paired::Paired>,
    pub quality_reference: Option<String>,
    pub answer: Option<String>,
    /// The machine the run was measured on (`M1`, `M2`…), when the runs recorded more than
    /// one: its configuration's label and its task's answer are that machine's.
    pub machine: Option<String>,
}

/// A graded metric's per-request score from which an answer counts as correct (per correct
/// answer figures); pass/fail metrics count their passes.
pub(crate) const CORRECT_AT: f64 = 0.5;

impl Row {
    /// Finished: not failed, with its request statistics. A failed run that kept its figures
    /// (over its error budget, its scoring failed) is shown, never counted among these.
    pub fn finished(&self) -> bool {
        self.data.failure.is_none() && self.data.stats.is_some()
    }

    /// The run's steady-state analysis, when recorded.
    pub fn steady(&self) -> Option<&crate::record::steady::Steady> {
        self.data.stats.as_ref()?.steady.as_ref()
    }

    /// "stopped at ±4.8 % (target ±5 %) of e2e-p95 after 212 requests, 31 s".
    pub fn stop_note(&self) -> Option<String> {
        let s = self.data.stopped.as_ref()?;
        Some(format!(
            "stopped at ±{:.1} % (target ±{:.1} %) of {} after {} requests, {:.0} s",
            s.margin * 100.0,
            s.target * 100.0,
            s.metric,
            s.requests,
            s.after_s
        ))
    }

    /// The open-loop slope test found the queue or TTFT growing.
    pub fn over_saturated(&self) -> Option<&str> {
        let s = self.steady()?.saturation.as_ref()?;
        s.why.as_deref().filter(|_| s.over_saturated)
    }
}

const ROUNDS: usize = 1000;

/// A seed from a key (blake3's first 8 bytes).
pub(crate) fn seed_of(key: &str) -> u64 {
    u64::from_le_bytes(
        blake3::hash(key.as_bytes()).as_bytes()[..8]
            .try_into()
            .expect("8 bytes"),
    )
}

/// The successful requests within the SLO's per-request thresholds
/// ([`stats::within_thresholds`]).
fn good_requests(latency: &[(Option<f64>, Option<f64>)], slo: &Slo) -> usize {
    latency
        .iter()
        .filter(|(t, e)| stats::within_thresholds(*t, *e, slo.ttft_p95, slo.e2e_p95))
        .count()
}

/// Cost per successful query: energy × price per kWh + hardware price per hour × window,
/// divided by the successful requests.
pub(crate) fn cost_per_query(
    cost: &Cost,
    energy_j: Option<f64>,
    window_s: f64,
    ok: usize,
) -> Option<f64> {
    if ok == 0 {
        return None;
    }
    let energy = energy_j.map(|j| j / 3.6e6 * cost.energy_per_kwh);
    if energy.is_none() && cost.energy_per_kwh > 0.0 {
        // The energy part cannot be priced without energy figures.
        return None;
    }
    Some((energy.unwrap_or(0.0) + cost.hardware_per_hour * window_s / 3600.0) / ok as f64)
}

/// The 95 % bootstrap interval of a latency percentile: by request, or by group of requests
/// sent together, which needs as many groups as the percentile's order-statistic rule asks of
/// independent requests ([`crate::record::paired::percentile_min_n`]).
fn latency_ci(values: &[f64], groups: &[i64], q: f64, seed: u64) -> Option<(f64, f64)> {
    crate::record::stats::grouped_bootstrap_ci(
        values,
        groups,
        q,
        crate::record::paired::percentile_min_n(q),
        ROUNDS,
        seed,
    )
}

pub(crate) fn derive(mut data: RunData, slo: &Slo, cost: Option<&Cost>) -> Row {
    let seed = seed_of(&data.run_key);
    // What each recorded percentile rests on, where neighbours in time moved together.
    if let Some(s) = data.stats.as_mut() {
        s.ttft_ms.weigh(&data.ttft_ms, &data.ttft_group);
        s.tpot_ms.weigh(&data.tpot_ms, &data.tpot_group);
        s.e2e_ms.weigh(&data.e2e_ms, &data.e2e_group);
    }
    let mut row = Row {
        // Requests sent together are resampled together (see `RunData::ttft_group`).
        ttft_p50_ci: latency_ci(&data.ttft_ms, &data.ttft_group, 50.0, seed),
        ttft_p95_ci: latency_ci(&data.ttft_ms, &data.ttft_group, 95.0, seed ^ 1),
        e2e_p95_ci: latency_ci(&data.e2e_ms, &data.e2e_group, 95.0, seed ^ 2),
        tpot_p50_ci: latency_ci(&data.tpot_ms, &data.tpot_group, 50.0, seed ^ 3),
        // Requests repeating a dataset item are resampled together (a run of 4,000 requests
        // over 200 questions has 200 observations of quality, not 4,000).
        quality_ci: if data.score_samples.len() == data.scores.len() {
            cluster_bootstrap_mean_ci(&data.scores, &data.score_samples, ROUNDS, seed ^ 4)
        } else {
            bootstrap_ci(&data.scores, ROUNDS, seed ^ 4, mean_of)
        },
        ..Default::default()
    };
    if let Some(s) = &data.stats {
        // Goodput counts only requests within the per-request thresholds, each judged on its
        // own TTFT and E2E; all successful requests when none is declared.
        let good = if slo.ttft_p95.is_none() && slo.e2e_p95.is_none() {
            Some(s.ok)
        } else {
            // Unknown, not 0, when the requests' latencies could not be read.
            (data.ok_latency.len() == s.ok).then(|| good_requests(&data.ok_latency, slo))
        };
        row.goodput_rps = good
            .filter(|_| s.window_s > 0.0)
            .map(|g| g as f64 / s.window_s);
        row.cost_per_query = cost.and_then(|c| {
            cost_per_query(
                c,
                data.telemetry.as_ref().and_then(|t| t.energy_j),
                s.window_s,
                s.ok,
            )
        });
        let mut verdicts = Vec::new();
        if let Some(limit) = slo.ttft_p95 {
            verdicts.push(s.ttft_ms.p95.map(|v| {
                (
                    v <= limit * 1000.0,
                    format!("TTFT p95 {:.0} ms > {:.0} ms", v, limit * 1000.0),
                )
            }));
        }
        if let Some(limit) = slo.e2e_p95 {
            verdicts.push(s.e2e_ms.p95.map(|v| {
                (
                    v <= limit * 1000.0,
                    format!("E2E p95 {:.0} ms > {:.0} ms", v, limit * 1000.0),
                )
            }));
        }
        if let Some(limit) = slo.gpu_memory_gib {
            verdicts.push(memory_verdict(&data, limit));
        }
        if s.ok == 0 {
            verdicts.push(Some((false, "no successful request".into())));
        }
        row.slo_misses = verdicts
            .iter()
            .flatten()
            .filter(|(ok, _)| !ok)
            .map(|(_, why)| why.clone())
            .collect();
        row.meets_slo = if verdicts.iter().any(Option::is_none) {
            None
        } else {
            Some(row.slo_misses.is_empty())
        };
    }
    per_correct(&mut row, &data, cost, seed ^ 5);
    row.steady_j_per_output_token = data
        .stats
        .as_ref()
        .and_then(|s| s.steady.as_ref())
        .zip(data.telemetry.as_ref().and_then(|t| t.steady_energy_j))
        .and_then(|(s, j)| (s.output_tokens > 0.0).then(|| j / s.output_tokens));
    row.data = data;
    row
}

/// 1 for each correct answer among per-request scores, else 0: a pass when every score is 0
/// or 1, else a score ≥ [`CORRECT_AT`].
pub(crate) fn hits_of(scores: &[f64]) -> Vec<f64> {
    let binary = scores.iter().all(|s| *s == 0.0 || *s == 1.0);
    scores
        .iter()
        .map(|s| f64::from(u8::from(if binary { *s == 1.0 } else { *s >= CORRECT_AT })))
        .collect()
}

/// Correct answers, energy and cost per correct answer, with intervals from the correct
/// share's (resampled by item when items are known).
fn per_correct(row: &mut Row, data: &RunData, cost: Option<&Cost>, seed: u64) {
    if data.scores.is_empty() || data.failure.is_some() {
        return;
    }
    let hits = hits_of(&data.scores);
    let correct: f64 = hits.iter().sum();
    let scored = hits.len() as f64;
    row.correct = Some(correct);
    row.correct_share_ci = if data.score_samples.len() == hits.len() {
        cluster_bootstrap_mean_ci(&hits, &data.score_samples, ROUNDS, seed)
    } else {
        bootstrap_ci(&hits, ROUNDS, seed, mean_of)
    };
    // Per correct: a total over the correct count; the interval inverts the share's.
    let per = |total: Option<f64>| -> (Option<f64>, Option<(f64, f64)>) {
        let Some(total) = total.filter(|_| correct > 0.0) else {
            return (None, None);
        };
        let ci = row
            .correct_share_ci
            .filter(|(lo, _)| *lo > 0.0)
            .map(|(lo, hi)| (total / (scored * hi), total / (scored * lo)));
        (Some(total / correct), ci)
    };
    (row.j_per_correct, row.j_per_correct_ci) =
        per(data.telemetry.as_ref().and_then(|t| t.energy_j));
    let ok = data.stats.as_ref().map_or(0, |s| s.ok) as f64;
    let cost_total = row
        .cost_per_query
        .filter(|_| cost.is_some())
        .map(|c| c * ok);
    let (c, ci) = per(cost_total);
    row.cost_per_1k_correct = c.map(|x| x * 1000.0);
    row.cost_per_1k_correct_ci = ci.map(|(a, b)| (a * 1000.0, b * 1000.0));
}

/// The counted devices' ∫power and its difference from their energy counters, (∫power −
/// counter) / counter, when every counted device's energy came from its counter.
fn counter_integral(t: &crate::telemetry::Summary) -> Option<(f64, f64)> {
    let counted: Vec<_> = t.counted_devices().collect();
    let pi: f64 = counted
        .iter()
        .map(|d| d.power_integral_j)
        .sum::<Option<f64>>()?;
    let counter: f64 = counted.iter().map(|d| d.energy_j).sum();
    (!counted.is_empty() && counter > 0.0).then(|| (pi, (pi - counter) / counter))
}

/// summary.parquet / summary.csv rows: configuration columns and every aggregate.
///
/// Long on purpose: one line per column, in the file's column order — the schema of
/// summary.parquet (docs/report.md lists the same) in one place.
pub(crate) fn table(rows: &[Row]) -> Vec<Vec<(&'static str, Cell)>> {
    rows.iter()
        .map(|r| {
            let d = &r.data;
            let c = d.columns.clone();
            let s = d.stats.as_ref();
            let t = d.telemetry.as_ref();
            let pi = t.and_then(counter_integral);
            let cs = d.coldstart.as_ref();
            let str_ = |v: Option<String>| Cell::Str(v);
            // A configuration column (empty for a run the plan did not describe).
            let col = |f: &dyn Fn(&Columns) -> String| Cell::Str(c.as_ref().map(f));
            let f = Cell::F64;
            let mut v: Vec<(&'static str, Cell)> = vec![
                ("schema_version", Cell::I64(Some(1))),
                ("node_key", str_(Some(d.run_key.clone()))),
                ("label", str_(Some(d.label.clone()))),
                ("deployment", str_(Some(d.deployment.clone()))),
                ("sweep", col(&|c| c.sweep.clone())),
                ("model", col(&|c| c.model.clone())),
                ("quantization", col(&|c| c.quantization.clone())),
                ("engine", col(&|c| c.engine.clone())),
                ("engine_kind", col(&|c| c.engine_kind.clone())),
                ("engine_block", col(&|c| c.engine_block.clone())),
                (
                    "engine_settings",
                    col(&|c| super::settings::json(&c.engine_settings)),
                ),
                ("task", col(&|c| c.task.clone())),
                ("scenario", col(&|c| c.scenario.clone())),
                ("scenario_kind", col(&|c| c.scenario_kind.clone())),
                ("scenario_params", col(&|c| c.scenario_params.clone())),
                (
                    "max_tokens",
                    Cell::I64(c.as_ref().map(|c| c.max_tokens as i64)),
                ),
                ("temperature", f(c.as_ref().map(|c| c.temperature))),
                ("top_p", f(c.as_ref().map(|c| c.top_p))),
                ("seed", Cell::I64(c.as_ref().map(|c| c.seed as i64))),
                ("repeat", Cell::I64(c.as_ref().map(|c| c.repeat as i64))),
                (
                    "status",
                    str_(Some(if d.failure.is_none() {
                        "ok".into()
                    } else if super::build::no_record(r) {
                        "not run".into()
                    } else {
                        "failed".into()
                    })),
                ),
                ("failure", str_(d.failure.clone())),
                ("requests", Cell::I64(s.map(|s| s.requests as i64))),
                ("ok", Cell::I64(s.map(|s| s.ok as i64))),
                ("failed", Cell::I64(s.map(|s| s.failed as i64))),
                ("window_s", f(s.map(|s| s.window_s))),
            ];
            for (name, dist) in [
                ("ttft", s.map(|s| &s.ttft_ms)),
                ("tpot", s.map(|s| &s.tpot_ms)),
                ("itl", s.map(|s| &s.itl_ms)),
                ("e2e", s.map(|s| &s.e2e_ms)),
                ("queue", s.map(|s| &s.queue_ms)),
            ] {
                let names: [&'static str; 6] = match name {
                    "ttft" => [
                        "ttft_p50_ms",
                        "ttft_p90_ms",
                        "ttft_p95_ms",
                        "ttft_p99_ms",
                        "ttft_mean_ms",
                        "ttft_std_ms",
                    ],
                    "tpot" => [
                        "tpot_p50_ms",
                        "tpot_p90_ms",
                        "tpot_p95_ms",
                        "tpot_p99_ms",
                        "tpot_mean_ms",
                        "tpot_std_ms",
                    ],
                    "itl" => [
                        "itl_p50_ms",
                        "itl_p90_ms",
                        "itl_p95_ms",
                        "itl_p99_ms",
                        "itl_mean_ms",
                        "itl_std_ms",
                    ],
                    "e2e" => [
                        "e2e_p50_ms",
                        "e2e_p90_ms",
                        "e2e_p95_ms",
                        "e2e_p99_ms",
                        "e2e_mean_ms",
                        "e2e_std_ms",
                    ],
                    _ => [
                        "queue_p50_ms",
                        "queue_p90_ms",
                        "queue_p95_ms",
                        "queue_p99_ms",
                        "queue_mean_ms",
                        "queue_std_ms",
                    ],
                };
                let vals = [
                    dist.and_then(|d| d.p50),
                    dist.and_then(|d| d.p90),
                    dist.and_then(|d| d.p95),
                    dist.and_then(|d| d.p99),
                    dist.and_then(|d| d.mean),
                    dist.and_then(|d| d.std),
                ];
                v.extend(names.into_iter().zip(vals.map(f)));
            }
            v.extend([
                (
                    "itl_per_token_p50_ms",
                    f(s.and_then(|s| s.itl_per_token_ms.p50)),
                ),
                (
                    "itl_per_token_p99_ms",
                    f(s.and_then(|s| s.itl_per_token_ms.p99)),
                ),
                // Reasoning models: the answer's first token after the reasoning, and how
                // much of the output was reasoning.
                (
                    "reasoning_requests",
                    Cell::I64(s.map(|s| s.reasoning_requests as i64)),
                ),
                ("ttfa_p50_ms", f(s.and_then(|s| s.ttfa_ms.p50))),
                ("ttfa_p95_ms", f(s.and_then(|s| s.ttfa_ms.p95))),
                (
                    "reasoning_tokens",
                    Cell::I64(s.and_then(|s| s.reasoning_tokens.map(|t| t as i64))),
                ),
            ]);
            let lo = |ci: Option<(f64, f64)>| f(ci.map(|c| c.0));
            let hi = |ci: Option<(f64, f64)>| f(ci.map(|c| c.1));
            v.extend([
                ("ttft_p50_ci_low_ms", lo(r.ttft_p50_ci)),
                ("ttft_p50_ci_high_ms", hi(r.ttft_p50_ci)),
                ("ttft_p95_ci_low_ms", lo(r.ttft_p95_ci)),
                ("ttft_p95_ci_high_ms", hi(r.ttft_p95_ci)),
                ("tpot_p50_ci_low_ms", lo(r.tpot_p50_ci)),
                ("tpot_p50_ci_high_ms", hi(r.tpot_p50_ci)),
                ("e2e_p95_ci_low_ms", lo(r.e2e_p95_ci)),
                ("e2e_p95_ci_high_ms", hi(r.e2e_p95_ci)),
                ("output_tokens_per_s", f(s.map(|s| s.output_tokens_per_s))),
                ("requests_per_s", f(s.map(|s| s.requests_per_s))),
                (
                    "sentences_per_s",
                    f(s.filter(|s| s.window_s > 0.0)
                        .map(|s| d.sentences as f64 / s.window_s)),
                ),
                ("goodput_rps", f(r.goodput_rps)),
                ("client_behind", Cell::Bool(s.map(|s| s.client_behind))),
                (
                    "client_cpu_saturated",
                    Cell::Bool(t.map(|t| t.client_cpu_saturated)),
                ),
                (
                    "quality_metric",
                    str_(Some(d.primary.clone()).filter(|p| !p.is_empty())),
                ),
                (
                    "quality_scoring",
                    str_(Some(d.scoring.as_str().to_string())),
                ),
                ("quality", f(d.metrics.get("quality").copied())),
                ("accuracy", f(d.metrics.get("accuracy").copied())),
                ("quality_ci_low", lo(r.quality_ci)),
                ("quality_ci_high", hi(r.quality_ci)),
                ("unparsed_rate", f(d.metrics.get("unparsed_rate").copied())),
                ("energy_source", str_(t.map(|t| t.energy_source.clone()))),
                ("energy_j", f(t.and_then(|t| t.energy_j))),
                ("power_integral_j", f(pi.map(|c| c.0))),
                ("power_integral_vs_counter", f(pi.map(|c| c.1))),
                (
                    "energy_above_idle_j",
                    f(t.and_then(|t| t.energy_above_idle_j)),
                ),
                (
                    "j_per_output_token",
                    f(t.and_then(|t| t.j_per_output_token)),
                ),
                (
                    "output_tokens_per_j",
                    f(t.and_then(|t| t.output_tokens_per_j)),
                ),
                ("j_per_request", f(t.and_then(|t| t.j_per_request))),
                ("j_per_sentence", f(t.and_then(|t| t.j_per_sentence))),
                ("gpu_mem_mean_mb", f(t.and_then(|t| t.gpu_mem_mean_mb))),
                ("gpu_mem_peak_mb", f(t.and_then(|t| t.gpu_mem_peak_mb))),
                (
                    "gpu_mem_overhead_mb",
                    f(t.and_then(|t| t.gpu_mem_overhead_mb)),
                ),
                ("gpu_util_mean_pct", f(t.and_then(|t| t.gpu_util_mean_pct))),
                (
                    "gpu_other_procs_peak",
                    f(t.and_then(|t| t.gpu_other_procs_peak)),
                ),
                (
                    "gpu_other_mem_peak_mb",
                    f(t.and_then(|t| t.gpu_other_mem_peak_mb)),
                ),
                (
                    "engine_cpu_mean_pct",
                    f(t.and_then(|t| t.engine_cpu_mean_pct)),
                ),
                (
                    "engine_rss_peak_mb",
                    f(t.and_then(|t| t.engine_rss_peak_mb)),
                ),
                (
                    "bench360_cpu_mean_pct",
                    f(t.and_then(|t| t.bench360_cpu_mean_pct)),
                ),
                ("cold_start_s", f(cs.map(|c| c.phases.start_s))),
                ("cold_healthy_s", f(cs.map(|c| c.phases.healthy_s))),
                ("cold_first_token_s", f(cs.and_then(|c| c.first_token_s))),
                (
                    "model_mb",
                    f(cs.and_then(|c| c.model_bytes).map(|b| b as f64 / 1e6)),
                ),
                (
                    "cold_gpu_mem_after_load_mb",
                    f(cs.and_then(|c| c.gpu_mem_after_load_mb)),
                ),
                (
                    "weights_cached",
                    Cell::Bool(cs.and_then(|c| c.weights_cached)),
                ),
                (
                    "compile_caches_mb",
                    f(cs.and_then(|c| c.compile_caches.as_deref())
                        .map(crate::engine::caches::megabytes)),
                ),
                ("cost_per_query", f(r.cost_per_query)),
                (
                    "cost_per_1k_queries",
                    f(r.cost_per_query.map(|c| c * 1000.0)),
                ),
                ("meets_slo", Cell::Bool(r.meets_slo)),
                (
                    "quality_items",
                    Cell::I64(
                        crate::record::paired::item_means(&d.scores, &d.score_samples)
                            .map(|m| m.len() as i64),
                    ),
                ),
                ("correct", f(r.correct)),
                ("j_per_correct", f(r.j_per_correct)),
                ("j_per_correct_ci_low", lo(r.j_per_correct_ci)),
                ("j_per_correct_ci_high", hi(r.j_per_correct_ci)),
                ("cost_per_1k_correct", f(r.cost_per_1k_correct)),
                ("quality_reference", str_(r.quality_reference.clone())),
                (
                    "quality_vs_reference",
                    f(r.vs_reference.as_ref().map(|p| p.delta)),
                ),
                (
                    "quality_vs_reference_ci_low",
                    lo(r.vs_reference.as_ref().and_then(|p| p.ci)),
                ),
                (
                    "quality_vs_reference_ci_high",
                    hi(r.vs_reference.as_ref().and_then(|p| p.ci)),
                ),
                (
                    "quality_vs_reference_mcnemar_p",
                    f(r.vs_reference.as_ref().and_then(|p| p.mcnemar).map(|m| m.p)),
                ),
                (
                    "quality_vs_reference_items",
                    Cell::I64(r.vs_reference.as_ref().map(|p| p.items as i64)),
                ),
                ("answer", str_(r.answer.clone())),
                ("machine", str_(r.machine.clone())),
                (
                    "ttft_p99_thin",
                    Cell::Bool(s.map(|s| !crate::report::text::thin(&s.ttft_ms, 99.0).is_empty())),
                ),
                (
                    "tpot_p99_thin",
                    Cell::Bool(s.map(|s| !crate::report::text::thin(&s.tpot_ms, 99.0).is_empty())),
                ),
                (
                    "e2e_p99_thin",
                    Cell::Bool(s.map(|s| !crate::report::text::thin(&s.e2e_ms, 99.0).is_empty())),
                ),
                ("steady_rule", str_(r.steady().map(|st| st.rule.clone()))),
                (
                    "steady_start_s",
                    f(r.steady().map(|st| st.start_ns as f64 / 1e9)),
                ),
                (
                    "steady_end_s",
                    f(r.steady().map(|st| st.end_ns as f64 / 1e9)),
                ),
                (
                    "steady_excluded_share",
                    f(r.steady().map(|st| st.excluded_share)),
                ),
                (
                    "steady_excluded_token_share",
                    f(r.steady().map(|st| st.excluded_token_share)),
                ),
                (
                    "steady_output_tokens_per_s",
                    f(r.steady().map(|st| st.output_tokens_per_s)),
                ),
                (
                    "steady_requests_per_s",
                    f(r.steady().map(|st| st.requests_per_s)),
                ),
                ("steady_energy_j", f(t.and_then(|t| t.steady_energy_j))),
                ("steady_j_per_output_token", f(r.steady_j_per_output_token)),
                (
                    "over_saturated",
                    Cell::Bool(
                        r.steady()
                            .and_then(|st| st.saturation.as_ref())
                            .map(|x| x.over_saturated),
                    ),
                ),
                (
                    "over_saturated_why",
                    str_(r.over_saturated().map(str::to_string)),
                ),
                ("stopped_at_margin", str_(r.stop_note())),
                ("cut_share", f(d.truncation.and_then(|t| t.cut_share()))),
                (
                    "scored_cut_rate",
                    f(d.truncation.and_then(|t| t.of_scored(t.scored_cut))),
                ),
                (
                    "unparsed_cut_rate",
                    f(d.truncation.and_then(|t| t.of_scored(t.unparsed_cut))),
                ),
                (
                    "unparsed_other_rate",
                    f(d.truncation.and_then(|t| t.of_scored(t.unparsed_other))),
                ),
                (
                    "tokens_per_event_p50",
                    f(d.stream.map(|g| g.tokens_per_event_p50)),
                ),
                ("prefix_cache_share", f(d.prefix_cache.map(|p| p.share()))),
                ("prefix_cache_tokens", f(d.prefix_cache.map(|p| p.cached))),
                (
                    "prefix_cache_counter",
                    str_(d.prefix_cache.map(|p| p.counter.to_string())),
                ),
                (
                    "sends_per_prompt",
                    f(d.prefix_cache.and_then(|p| p.sends_per_prompt())),
                ),
            ]);
            v.extend(super::provenance::columns(d.provenance.as_ref()));
            v
        })
        .collect()
}

/// Across repeats: (config label without the repeat, metric) → mean ± 95 % half-width.
pub(crate) fn across_repeats(
    rows: &[Row],
    metric: fn(&Row) -> Option<f64>,
) -> BTreeMap<String, (f64, f64, usize)> {
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    // A failed repeat (one that kept its figures) is no repeat of the mean: the answer
    // excludes its configuration.
    for r in rows.iter().filter(|r| r.finished()) {
        let base = r
            .data
            .label
            .rsplit_once(" #")
            .map(|(b, _)| b.to_string())
            .unwrap_or_else(|| r.data.label.clone());
        if let Some(v) = metric(r) {
            groups.entry(base).or_default().push(v);
        }
    }
    groups
        .into_iter()
        .filter_map(|(k, v)| stats::repeat_ci(&v).map(|(m, h)| (k, (m, h, v.len()))))
        .collect()
}

#[cfg(test)]
mod tests;
