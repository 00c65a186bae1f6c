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
    /// groups, what that side's requests are worth, where it is fewer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<usize>,
    /// Requests each at their own instant whose neighbours in time moved together (a closed
    /// or open loop's overlap, a stream's drift): each side's requests and the independent
    /// ones they are worth for this percentile, which its interval rests on (absent where
    /// each side's requests are worth their count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective: Option<Effective>,
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
            let (groups, n, f) = match (ka.as_ref().map(Vec::len), kb.as_ref().map(Vec::len)) {
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
mod tests {
    use super::*;

    pub(super) fn run(config: &str, scale: f64) -> RunValues {
        RunValues {
            label: format!("run {config}"),
            config: config.into(),
            ttft_ms: (1..=200).map(|i| i as f64 * scale).collect(),
            tpot_ms: (1..=200).map(|i| 10.0 + i as f64 * 0.01).collect(),
            e2e_ms: (1..=200).map(|i| 100.0 + i as f64).collect(),
            ttft_group: Vec::new(),
            tpot_group: Vec::new(),
            e2e_group: Vec::new(),
            scores: (0..200).map(|i| f64::from(u8::from(i % 2 == 0))).collect(),
            // 20 questions, each asked 10 times.
            score_samples: (0..200).map(|i| format!("q{}", i % 20)).collect(),
            output_tokens_per_s: Some(100.0 * scale),
            j_per_output_token: None,
            j_per_correct: None,
            saturation: false,
            requests: 200,
            failed: 0,
            machine: None,
        }
    }

    /// Requests at their own instants whose neighbours moved together (AR(1), φ = 0.8) are
    /// worth fewer independent ones: the percentile's interval widens and `effective` says
    /// by how much; the same values in a scrambled order are worth their count.
    #[test]
    fn a_percentile_of_requests_that_moved_together_rests_on_fewer() {
        let mut rng = SplitMix64::new(5);
        let series: Vec<f64> = crate::record::stats::block::ar1_from(0.8, 0.0, 1000, &mut rng)
            .into_iter()
            .map(|x| 100.0 + 10.0 * x)
            .collect();
        let (mut a, mut b) = (run("x", 1.0), run("x", 1.0));
        a.ttft_ms = series.clone();
        b.ttft_ms = series.iter().map(|v| v * 1.02).collect();
        let (mut sa, mut sb) = (a.clone(), b.clone());
        a.ttft_group = (0..1000).collect();
        b.ttft_group = a.ttft_group.clone();
        let dependent = change("ttft_p50", &a, &b, 3);
        let e = dependent.effective.unwrap();
        assert_eq!((e.a.n, e.b.n), (1000, 1000));
        // B is A's series scaled: the same indicator, worth the same.
        assert_eq!(e.a.worth, e.b.worth);
        assert!((100..600).contains(&e.a.worth), "{e:?}");
        // p50's rule asks 7 independent requests per side (at 97.5 %): 1000 / worth times 7.
        let need = (7.0 * 1000.0 / e.a.worth as f64).ceil() as usize;
        assert_eq!(dependent.interval_from, Some(need), "{dependent:?}");
        let mut order: Vec<i64> = (0..1000).collect();
        rng.shuffle(&mut order);
        sa.ttft_group = order.clone();
        sb.ttft_group = order;
        let scrambled = change("ttft_p50", &sa, &sb, 3);
        assert_eq!(scrambled.effective, None, "{scrambled:?}");
        let w = |c: &Change| c.ci.map(|(l, h)| h - l).unwrap();
        assert!(
            w(&dependent) > 1.5 * w(&scrambled),
            "{dependent:?} {scrambled:?}"
        );
    }

    /// Quality's interval resamples questions: 20 questions asked 10 times each give about
    /// √10 the interval of 200 independent requests.
    #[test]
    fn the_quality_interval_resamples_questions() {
        let mut b = run("x", 1.0);
        b.scores = (0..200).map(|i| f64::from(u8::from(i % 20 < 12))).collect();
        let clustered = change("quality", &run("x", 1.0), &b, 3).ci.unwrap();
        let (mut a2, mut b2) = (run("x", 1.0), b.clone());
        a2.score_samples.clear();
        b2.score_samples.clear();
        let flat = change("quality", &a2, &b2, 3).ci.unwrap();
        let w = |c: (f64, f64)| c.1 - c.0;
        assert!(w(clustered) > 2.0 * w(flat), "{clustered:?} vs {flat:?}");
    }

    #[test]
    fn a_slower_ttft_is_a_change_with_an_interval_and_breaks_a_gate() {
        let a = vec![run("x", 1.0), run("only-a", 1.0)];
        let b = vec![run("x", 1.5)];
        let (m, only_a, only_b) = compare(&a, &b);
        assert_eq!((m.len(), only_a.len(), only_b.len()), (1, 1, 0));
        let ttft = m[0].change("ttft_p50").unwrap();
        assert!((ttft.change.unwrap() - 0.5).abs() < 1e-9, "{ttft:?}");
        let (lo, hi) = ttft.ci.unwrap();
        assert!(lo <= 0.5 && 0.5 <= hi && lo > 0.0, "{lo} {hi}");
        let same = m[0].change("quality").unwrap();
        assert_eq!(same.change, Some(0.0));
        let gates = vec![
            parse_gate("ttft_p50>+5%").unwrap(),
            parse_gate("ttft_p99>+5%").unwrap(),
            parse_gate("quality<-1%").unwrap(),
        ];
        let b = judge_all(&gates, &m, GateRule::Confident);
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!(b[0].metric, "ttft_p50");
        assert!(matches!(b[0].judgement, Judgement::Fired { .. }), "{b:?}");
        // 200 requests are too few for a 97.5 % interval of p99 on each side (437).
        assert_eq!(
            b[1].judgement,
            Judgement::Inconclusive {
                change: 0.5,
                ci: None,
                n: Some(200),
                need: Some(437),
                unit: "requests",
                mcnemar_p: None,
            }
        );
        assert!(parse_gate("ttft>5%").is_err());
        assert!(parse_gate("ttft_p99=5%").is_err());
    }

    #[test]
    fn a_change_inside_its_noise_is_inconclusive_and_says_how_many_requests_would_tell() {
        let gate = parse_gate("ttft_p99>+5%").unwrap();
        let c = |change: f64, ci: Option<(f64, f64)>| Change {
            metric: "ttft_p99",
            a: Some(100.0),
            b: Some(100.0 * (1.0 + change)),
            change: Some(change),
            ci,
            n: Some(100),
            p: None,
            interval_from: None,
            groups: None,
            effective: None,
        };
        // The quickstart's case: +5.3 % with an interval of −90 % … +1132 %.
        let noisy = c(0.053, Some((-0.9, 11.32)));
        match judge(&gate, &noisy, GateRule::Confident).unwrap() {
            Judgement::Inconclusive { need, .. } => {
                // The side toward the limit, 0.953, over a distance of 0.003 to it: ~10
                // million per side.
                assert!(need.unwrap() > 1_000_000, "{need:?}");
            }
            j => panic!("{j:?}"),
        }
        assert!(matches!(
            judge(&gate, &noisy, GateRule::Point),
            Some(Judgement::Fired { .. })
        ));
        // Past the limit with the whole interval: fires. Within the limit: holds.
        assert!(matches!(
            judge(&gate, &c(0.5, Some((0.3, 0.7))), GateRule::Confident),
            Some(Judgement::Fired { .. })
        ));
        assert_eq!(
            judge(&gate, &c(0.02, Some((-0.5, 0.6))), GateRule::Confident),
            None
        );
        // No interval (throughput from one run): inconclusive, never fired by default.
        let mut flat = c(0.5, None);
        flat.n = None;
        let v = Verdict {
            gate: &gate.text,
            metric: "tokens_per_s",
            run: "r".into(),
            judgement: judge(&gate, &flat, GateRule::Confident).unwrap(),
        };
        assert!(
            verdict_line(&v).contains("no interval"),
            "{}",
            verdict_line(&v)
        );
        // A lower gate judges the upper bound.
        let down = parse_gate("quality<-2%").unwrap();
        assert!(matches!(
            judge(&down, &c(-0.1, Some((-0.15, -0.05))), GateRule::Confident),
            Some(Judgement::Fired { .. })
        ));
        assert!(matches!(
            judge(&down, &c(-0.1, Some((-0.15, 0.01))), GateRule::Confident),
            Some(Judgement::Inconclusive { .. })
        ));
    }

    /// One run of `batches` batches of `size` requests whose TPOT moves with its batch: each
    /// batch's server state (a lognormal factor, sd 10 %) times a small per-request noise.
    fn batched(rng: &mut SplitMix64, batches: usize, size: usize) -> RunValues {
        let mut r = run("x", 1.0);
        r.tpot_ms.clear();
        r.tpot_group.clear();
        for b in 0..batches {
            let state = (0.1 * rng.normal()).exp();
            for _ in 0..size {
                r.tpot_ms.push(20.0 * state * (0.01 * rng.normal()).exp());
                r.tpot_group.push(b as i64 * 1_000_000);
            }
        }
        r
    }

    /// Two runs of one configuration (the same distribution): a batch's requests resampled
    /// one by one make an interval that misses "no change" most of the time; resampled by
    /// batch, about as often as a 95 % interval should. Seeded: the same verdict every time.
    #[test]
    fn batched_requests_are_resampled_by_batch_and_keep_the_false_alarm_rate() {
        let mut rng = SplitMix64::new(7);
        let (trials, mut grouped_misses, mut flat_misses) = (100u64, 0, 0);
        for t in 0..trials {
            let (a, b) = (batched(&mut rng, 12, 16), batched(&mut rng, 12, 16));
            let c = change("tpot_p50", &a, &b, t);
            assert_eq!(c.groups, Some(12));
            let (lo, hi) = c.ci.expect("12 batches per side are enough for p50");
            grouped_misses += u64::from(lo > 0.0 || hi < 0.0);
            let (lo, hi) = percentile_ratio_ci(
                &a.tpot_ms,
                &b.tpot_ms,
                50.0,
                (a.tpot_ms.len(), b.tpot_ms.len()),
            )
            .unwrap();
            flat_misses += u64::from(lo > 0.0 || hi < 0.0);
        }
        assert!(
            grouped_misses <= trials / 10,
            "{grouped_misses} of {trials}"
        );
        assert!(flat_misses >= trials / 4, "{flat_misses} of {trials}");
        // Three batches are three observations: no interval, and a gate cannot fire.
        let (a, mut b) = (batched(&mut rng, 3, 4), batched(&mut rng, 3, 4));
        b.tpot_ms.iter_mut().for_each(|x| *x *= 2.0);
        let c = change("tpot_p50", &a, &b, 1);
        assert_eq!((c.ci, c.groups, c.interval_from), (None, Some(3), Some(7)));
        let g = parse_gate("tpot_p50>+5%").unwrap();
        match judge(&g, &c, GateRule::Confident).unwrap() {
            Judgement::Inconclusive { n, need, unit, .. } => {
                assert_eq!((n, need, unit), (Some(3), Some(7), "batches"))
            }
            j => panic!("{j:?}"),
        }
        assert_eq!(show::cells(&c)[5], "12 in 3 batches");
    }

    /// A side in batches against one whose requests each had their own instant: the latter
    /// is resampled in blocks of neighbours where they moved together (AR(1), φ = 0.8), so
    /// its dependence widens the interval as it does between two such sides.
    #[test]
    fn beside_a_batched_side_requests_that_moved_together_are_resampled_in_blocks() {
        let mut rng = SplitMix64::new(11);
        let a = batched(&mut rng, 12, 16);
        let mut b = run("x", 1.0);
        b.tpot_ms = crate::record::stats::block::ar1_from(0.8, 0.0, 600, &mut rng)
            .into_iter()
            .map(|x| 20.0 * (0.3 * x).exp())
            .collect();
        b.tpot_group = (0..600).collect();
        let dependent = change("tpot_p50", &a, &b, 3);
        let e = dependent.effective.expect("B's requests moved together");
        // A's 192 requests are worth its 12 batches.
        assert_eq!((e.a.n, e.a.worth, e.b.n), (192, 12, 600));
        assert!((12..400).contains(&e.b.worth), "{e:?}");
        // The observations behind the interval: A's 12 batches, fewer than B's worth; an
        // interval needs 7 of them (p50's rule).
        assert_eq!(
            (dependent.groups, dependent.interval_from),
            (Some(12), Some(7))
        );
        assert_eq!(show::cells(&dependent)[5], "192 in 12 batches");
        // The requests counted are the batched side's, whichever side has fewer.
        let mut fewer = b.clone();
        fewer.tpot_ms.truncate(100);
        fewer.tpot_group.truncate(100);
        let c = change("tpot_p50", &fewer, &a, 3);
        assert_eq!(show::cells(&c)[5], "192 in 12 batches", "{c:?}");
        let mut order: Vec<i64> = (0..600).collect();
        rng.shuffle(&mut order);
        let mut scrambled = b.clone();
        scrambled.tpot_group = order;
        let independent = change("tpot_p50", &a, &scrambled, 3);
        let e = independent.effective.unwrap();
        assert_eq!((e.a.worth, e.b.worth), (12, 600), "{independent:?}");
        // Same values either way: only B's order, and so its blocks, differ.
        assert_eq!(dependent.b, independent.b);
        let w = |c: &Change| c.ci.map(|(l, h)| h - l).unwrap();
        assert!(
            w(&dependent) > 1.25 * w(&independent),
            "{dependent:?} {independent:?}"
        );
        // At p99 B is worth fewer than A's batches and rules: no interval (p99 asks 437
        // independent observations per side), and what it lacks is said in B's requests, not
        // in batches.
        let mut b99 = b.clone();
        b99.ttft_ms = b.tpot_ms.iter().map(|x| 1.5 * x).collect();
        b99.ttft_group = b.tpot_group.clone();
        let mut a99 = a.clone();
        a99.ttft_ms = (0..600).map(|i| 20.0 + (i % 40) as f64).collect();
        a99.ttft_group = (0..600).map(|i| i / 2).collect();
        let p99 = change("ttft_p99", &a99, &b99, 3);
        let e = p99.effective.unwrap();
        assert_eq!((e.a.worth, e.b.n), (300, 600));
        assert!(e.b.worth < 300, "{e:?}");
        assert_eq!((p99.ci, p99.groups, p99.n), (None, None, Some(600)));
        let need = (437.0 * 600.0 / e.b.worth as f64).ceil() as usize;
        assert_eq!(p99.interval_from, Some(need));
        let g = parse_gate("ttft_p99>+1%").unwrap();
        match judge(&g, &p99, GateRule::Confident) {
            Some(Judgement::Inconclusive { unit, need: n, .. }) => {
                assert_eq!((unit, n), ("requests", Some(need)))
            }
            j => panic!("{j:?} {p99:?}"),
        }
    }

    #[test]
    fn quality_is_compared_item_by_item_with_mcnemar() {
        let mut a = run("x", 1.0);
        let mut b = run("x", 1.0);
        // 100 items once each: A right on the first 60, B on the first 50.
        a.scores = (0..100).map(|i| f64::from(u8::from(i < 60))).collect();
        b.scores = (0..100).map(|i| f64::from(u8::from(i < 50))).collect();
        a.score_samples = (0..100).map(|i| format!("q{i}")).collect();
        b.score_samples = a.score_samples.clone();
        let q = change("quality", &a, &b, 1);
        assert_eq!(q.n, Some(100));
        // 10 discordant items, all one way: p = 2 · 0.5^10.
        assert!((q.p.unwrap() - 2.0 * 0.5f64.powi(10)).abs() < 1e-15);
        let (lo, hi) = q.ci.unwrap();
        assert!(hi < 0.0 && lo < q.change.unwrap(), "{lo} {hi}");
    }
}
