//! `bench360 compare A B`: per matched configuration, how B differs from A — p50/p99 of TTFT,
//! TPOT and E2E, output throughput, J per output token and quality — with 95 % bootstrap
//! intervals where per-request values exist, and a regression gate (`--fail-on`).
//!
//! A side is a sweep (its runs read from a cache, as `report` reads them) or a baseline file
//! written by `compare --save` (the same per-request values as JSON, so a baseline outlives
//! the cache it came from). Configurations match on model, quantization, engine, task,
//! scenario, scenario parameters, sampling and repeat.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::record::rng::SplitMix64;
use crate::record::stats::{mean_of, pct_of};
use crate::report::summary::Row;

/// Baseline format version.
const BASELINE_FORMAT: &str = "bench360-baseline/1";
const ROUNDS: usize = 1000;

/// One run of a side: its configuration and the values compared.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct RunValues {
    pub label: String,
    /// The matching key (configuration columns).
    pub config: String,
    pub ttft_ms: Vec<f64>,
    pub tpot_ms: Vec<f64>,
    pub e2e_ms: Vec<f64>,
    /// The scheduled instant of each latency's request (`report::summary::RunData`): requests
    /// scheduled together are resampled together. Empty in older baselines: each request on
    /// its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_group: Vec<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tpot_group: Vec<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub e2e_group: Vec<i64>,
    /// Per scored request, the task's quality.
    pub scores: Vec<f64>,
    /// The dataset item of each score: quality is resampled by item (requests repeating an
    /// item are one observation of it). Empty in older baselines: resampled by request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub score_samples: Vec<String>,
    pub output_tokens_per_s: Option<f64>,
    pub j_per_output_token: Option<f64>,
    /// Energy per correct answer (report's `j_per_correct`); absent in older baselines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub j_per_correct: Option<f64>,
    /// A saturation search (its figures mix every probe's rate); false in older baselines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saturation: bool,
    /// Requests sent and failed (`error_rate`); 0 in older baselines.
    #[serde(default)]
    pub requests: usize,
    #[serde(default)]
    pub failed: usize,
    /// The machine the run was measured on (`machine::of`); absent in older baselines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<machine::Machine>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Baseline {
    pub format: String,
    pub sweep: String,
    pub runs: Vec<RunValues>,
}

/// The values of every finished run of a report's rows.
pub(crate) fn from_rows(rows: &[Row]) -> Vec<RunValues> {
    rows.iter()
        .filter(|r| r.data.failure.is_none() && r.data.stats.is_some())
        .filter_map(|r| {
            let c = r.data.columns.as_ref()?;
            Some(RunValues {
                label: r.data.label.clone(),
                config: format!(
                    "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
                    c.model,
                    c.quantization,
                    c.engine,
                    c.task,
                    c.scenario,
                    c.scenario_params,
                    c.max_tokens,
                    c.temperature,
                    c.top_p,
                    c.repeat
                ),
                ttft_ms: r.data.ttft_ms.clone(),
                tpot_ms: r.data.tpot_ms.clone(),
                e2e_ms: r.data.e2e_ms.clone(),
                ttft_group: r.data.ttft_group.clone(),
                tpot_group: r.data.tpot_group.clone(),
                e2e_group: r.data.e2e_group.clone(),
                scores: r.data.scores.clone(),
                score_samples: r.data.score_samples.clone(),
                output_tokens_per_s: r.data.stats.as_ref().map(|s| s.output_tokens_per_s),
                j_per_output_token: r.data.telemetry.as_ref().and_then(|t| t.j_per_output_token),
                j_per_correct: r.j_per_correct,
                saturation: c.scenario_kind == "saturation",
                requests: r.data.stats.as_ref().map_or(0, |s| s.requests),
                failed: r.data.stats.as_ref().map_or(0, |s| s.failed),
                machine: r.data.provenance.as_ref().map(machine::of),
            })
        })
        .collect()
}

pub(crate) fn save(path: &Path, sweep: &str, runs: Vec<RunValues>) -> std::io::Result<()> {
    let b = Baseline {
        format: BASELINE_FORMAT.into(),
        sweep: sweep.into(),
        runs,
    };
    crate::store::write_atomic(path, &serde_json::to_vec(&b).expect("serializable"))
}

/// A baseline that cannot be used, or a gate that does not parse: bad input (exit 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompareError {
    #[error("cannot read baseline {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a bench360 baseline: {source}", path.display())]
    NotABaseline {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: baseline format `{found}`, this bench360 reads `{BASELINE_FORMAT}`", path.display())]
    Format { path: PathBuf, found: String },
    #[error("--fail-on `{gate}`: expected METRIC>+N% or METRIC<-N%")]
    GateShape { gate: String },
    #[error("--fail-on `{gate}`: unknown metric `{metric}` (one of {})", METRICS.join(", "))]
    GateMetric { gate: String, metric: String },
    #[error("--fail-on `{gate}`: `{limit}` is not a percentage")]
    GateLimit { gate: String, limit: String },
    #[error(
        "--fail-on `{gate}`: {better} {metric} is better, so `{op}` fires only on an \
         improvement and never on a regression; a regression gate on it is `{metric}{meant}…`"
    )]
    GateDirection {
        gate: String,
        metric: String,
        op: char,
        meant: char,
        better: &'static str,
    },
}

pub(crate) fn load(path: &Path) -> Result<Baseline, CompareError> {
    let text = std::fs::read_to_string(path).map_err(|source| CompareError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let b: Baseline = serde_json::from_str(&text).map_err(|source| CompareError::NotABaseline {
        path: path.to_path_buf(),
        source,
    })?;
    if b.format != BASELINE_FORMAT {
        return Err(CompareError::Format {
            path: path.to_path_buf(),
            found: b.format,
        });
    }
    Ok(b)
}

/// The metrics compared, by name (the names `--fail-on` takes).
pub(crate) const METRICS: &[&str] = &[
    "ttft_p50",
    "ttft_p99",
    "tpot_p50",
    "tpot_p99",
    "e2e_p50",
    "e2e_p99",
    "tokens_per_s",
    "j_per_token",
    "j_per_correct",
    "quality",
    "error_rate",
];

/// One metric of one matched configuration: A, B, the relative change (B − A) / A and its
/// 95 % bootstrap interval (resampling each side's requests), when per-request values exist.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Change {
    pub metric: &'static str,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub change: Option<f64>,
    pub ci: Option<(f64, f64)>,
    /// Observations behind each side's figure: requests, or for quality the dataset items
    /// (paired: the items both scored).
    pub n: Option<usize>,
    /// Quality of a pass/fail metric, paired: McNemar's exact p-value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// A percentile's interval exists from this many requests per side on (from this many
    /// groups, when `groups` is set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_from: Option<usize>,
    /// Requests came in groups scheduled at one instant (batches, an offline burst), which
    /// move together: the interval resampled whole groups, and this is the smaller side's
    /// number of them — the observations behind the interval (against a side without
    /// groups, where that side's requests are worth fewer than these groups: None, and `n`
    /// and `interval_from` count that side's requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<usize>,
    /// Requests each at their own instant whose neighbours in time moved together (a closed
    /// or open loop's overlap, a stream's drift): each side's requests and the independent
    /// ones they are worth for this percentile, which its interval rests on (absent where
    /// each side's requests are worth their count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective: Option<Effective>,
    /// A percentile without an interval: each side that lacks the observations its side of
    /// the interval asks, and how many it has and needs — runs of unequal length, or one side
    /// in batches or worth fewer than its count, lack unequally (`interval_from` is one count
    /// for both). Empty where there is an interval or neither side lacks them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lacking: Vec<Lack>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Matched {
    pub label: String,
    pub changes: Vec<Change>,
    /// Either side is a saturation search.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub saturation: bool,
    /// Whether A and B ran on one kind of machine.
    pub machine: MachineCheck,
}

/// Which per-request values a metric is computed from, with the group of each (empty: none).
type Values = fn(&RunValues) -> (&[f64], &[i64]);

/// The values and the statistic (a percentile; negative: the mean) of a metric.
fn stat_of(metric: &str) -> Option<(Values, f64)> {
    let ttft: Values = |r| (&r.ttft_ms, &r.ttft_group);
    let tpot: Values = |r| (&r.tpot_ms, &r.tpot_group);
    let e2e: Values = |r| (&r.e2e_ms, &r.e2e_group);
    Some(match metric {
        "ttft_p50" => (ttft, 50.0),
        "ttft_p99" => (ttft, 99.0),
        "tpot_p50" => (tpot, 50.0),
        "tpot_p99" => (tpot, 99.0),
        "e2e_p50" => (e2e, 50.0),
        "e2e_p99" => (e2e, 99.0),
        "quality" => (|r| (&r.scores, &[]), -1.0),
        _ => return None,
    })
}

fn estimate(v: &[f64], q: f64) -> Option<f64> {
    let mut v = v.to_vec();
    if q < 0.0 {
        mean_of(&mut v)
    } else {
        pct_of(&mut v, q)
    }
}

fn resample(v: &[f64], rng: &mut SplitMix64) -> Vec<f64> {
    (0..v.len()).map(|_| v[rng.below(v.len())]).collect()
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 && a.is_finite() && b.is_finite() => Some((b - a) / a),
        _ => None,
    }
}

fn change(metric: &'static str, a: &RunValues, b: &RunValues, seed: u64) -> Change {
    if metric == "error_rate" {
        return errors::change(a, b);
    }
    if metric == "quality" {
        if let Some(c) = paired_quality(a, b, seed) {
            return c;
        }
    }
    match stat_of(metric) {
        Some((values, q)) => {
            let ((va, ga), (vb, gb)) = (values(a), values(b));
            let (ea, eb) = (estimate(va, q), estimate(vb, q));
            let n = va.len().min(vb.len());
            use crate::record::stats::batches;
            let (ka, kb) = (batches(va, ga), batches(vb, gb));
            // What each side's requests are worth at this percentile: those of a side in
            // groups, by its groups where the other side is not (their unit then differs);
            // those each at their own instant, by their neighbours' dependence.
            let mixed = ka.is_some() != kb.is_some();
            let loose = |v: &[f64], g: &[i64], k: &Option<Vec<Vec<f64>>>| {
                (k.is_none() && q >= 0.0).then(|| Loose::of(v, g, q))
            };
            let (la, lb) = (loose(va, ga, &ka), loose(vb, gb, &kb));
            let worth = |v: &[f64], k: &Option<Vec<Vec<f64>>>, l: &Option<Loose>| match (k, l) {
                (Some(k), _) if mixed && q >= 0.0 => k.len(),
                (_, Some(l)) => l.dependence.worth,
                _ => v.len(),
            };
            let eff = (worth(va, &ka, &la), worth(vb, &kb, &lb));
            let effective = (eff.0 < va.len() || eff.1 < vb.len()).then_some(Effective {
                a: Worth {
                    n: va.len(),
                    worth: eff.0,
                },
                b: Worth {
                    n: vb.len(),
                    worth: eff.1,
                },
            });
            let inflation = |e: usize, n: usize| n as f64 / e.max(1) as f64;
            // The side with the fewest independent observations rules how many an interval
            // needs, in its own unit (the factor on the rule's count): batches, where both
            // came in groups or the side in groups has the fewer (`192 in 12 batches`, that
            // side's requests); else requests, those of the side without groups inflated by
            // its dependence.
            let beside = |g: usize, batched: usize, loose: usize, w: usize| {
                if w < g {
                    (None, loose, inflation(w, loose))
                } else {
                    (Some(g), batched, 1.0)
                }
            };
            let (na, nb) = (ka.as_ref().map(Vec::len), kb.as_ref().map(Vec::len));
            let (groups, n, f) = match (na, nb) {
                (Some(x), Some(y)) => (Some(x.min(y)), n, 1.0),
                (Some(g), None) => beside(g, va.len(), vb.len(), eff.1),
                (None, Some(g)) => beside(g, vb.len(), va.len(), eff.0),
                (None, None) => (
                    None,
                    n,
                    inflation(eff.0, va.len()).max(inflation(eff.1, vb.len())),
                ),
            };
            let ci = if q < 0.0 {
                mean_ratio_ci(va, vb, seed, metric)
            } else if ka.is_some() || kb.is_some() {
                Resample::of(ka, la)
                    .zip(Resample::of(kb, lb))
                    .and_then(|(ra, rb)| grouped_ratio_ci(&ra, &rb, q, seed, metric))
            } else {
                percentile_ratio_ci(va, vb, q, eff)
            };
            // Where requests moved together, an interval needs more of them: as many more as
            // the side worth the least independent ones asks.
            let min_n = crate::record::paired::percentile_min_n_at(q, SIDE_ALPHA);
            let interval_from = (q >= 0.0).then(|| (min_n as f64 * f.max(1.0)).ceil() as usize);
            // Without an interval, what each side lacks, in its own unit.
            let lacking = if ci.is_none() && q >= 0.0 {
                [("A", va.len(), na, eff.0), ("B", vb.len(), nb, eff.1)]
                    .into_iter()
                    .filter_map(|(side, len, g, w)| Lack::of(side, len, g, w, min_n))
                    .collect()
            } else {
                Vec::new()
            };
            Change {
                metric,
                a: ea,
                b: eb,
                change: ratio(ea, eb),
                ci,
                n: Some(n),
                p: None,
                interval_from,
                groups,
                effective,
                lacking,
            }
        }
        None => {
            let f = |r: &RunValues| match metric {
                "tokens_per_s" => r.output_tokens_per_s,
                "j_per_correct" => r.j_per_correct,
                _ => r.j_per_output_token,
            };
            Change {
                metric,
                a: f(a),
                b: f(b),
                change: ratio(f(a), f(b)),
                ci: None,
                n: None,
                p: None,
                interval_from: None,
                groups: None,
                effective: None,
                lacking: Vec::new(),
            }
        }
    }
}

/// Quality compared item by item: both sides' mean over the items both scored (repeats
/// pooled per item), the relative change's 95 % interval from resampling those items
/// together, and McNemar's exact test for pass/fail scores. None when either side lacks its
/// items or they share none.
fn paired_quality(a: &RunValues, b: &RunValues, seed: u64) -> Option<Change> {
    use crate::record::paired;
    let (ia, ib) = (
        paired::item_means(&a.scores, &a.score_samples)?,
        paired::item_means(&b.scores, &b.score_samples)?,
    );
    let p = paired::paired(&ia, &ib, seed)?;
    let pairs = paired::common(&ia, &ib);
    let n = pairs.len();
    let mut rng = SplitMix64::derive(seed, "quality");
    let ci = paired::paired_sums_ci(&pairs, ROUNDS, &mut rng, |sa, sb| {
        ratio(Some(sa / n as f64), Some(sb / n as f64))
    });
    Some(Change {
        metric: "quality",
        a: Some(p.a),
        b: Some(p.b),
        change: ratio(Some(p.a), Some(p.b)),
        ci,
        n: Some(n),
        p: p.mcnemar.map(|m| m.p),
        interval_from: None,
        groups: None,
        effective: None,
        lacking: Vec::new(),
    })
}

/// Every configuration both sides ran, compared; and the labels only one side has.
pub(crate) fn compare(
    a: &[RunValues],
    b: &[RunValues],
) -> (Vec<Matched>, Vec<String>, Vec<String>) {
    let bm: BTreeMap<&str, &RunValues> = b.iter().map(|r| (r.config.as_str(), r)).collect();
    let am: BTreeMap<&str, &RunValues> = a.iter().map(|r| (r.config.as_str(), r)).collect();
    let mut matched = Vec::new();
    for ra in a {
        if let Some(rb) = bm.get(ra.config.as_str()) {
            let seed = u64::from_le_bytes(
                blake3::hash(ra.config.as_bytes()).as_bytes()[..8]
                    .try_into()
                    .expect("8 bytes"),
            );
            matched.push(Matched {
                label: ra.label.clone(),
                changes: METRICS.iter().map(|m| change(m, ra, rb, seed)).collect(),
                saturation: ra.saturation || rb.saturation,
                machine: machine::check(ra.machine.as_ref(), rb.machine.as_ref()),
            });
        }
    }
    let only_a = a
        .iter()
        .filter(|r| !bm.contains_key(r.config.as_str()))
        .map(|r| r.label.clone())
        .collect();
    let only_b = b
        .iter()
        .filter(|r| !am.contains_key(r.config.as_str()))
        .map(|r| r.label.clone())
        .collect();
    (matched, only_a, only_b)
}

mod errors;
mod gate;
mod interval;
use interval::*;
pub(crate) mod machine;
mod show;
pub(crate) use gate::*;
pub(crate) use machine::MachineCheck;
pub(crate) use show::{markdown, shown, terminal};

#[cfg(test)]
mod tests;
