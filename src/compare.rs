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
    /// Per scored request, the task's quality.
    pub scores: Vec<f64>,
    /// The dataset item of each score: quality is resampled by item (requests repeating an
    /// item are one observation of it). Empty in older baselines: resampled by request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub score_samples: Vec<String>,
    pub output_tokens_per_s: Option<f64>,
    pub j_per_output_token: Option<f64>,
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
                scores: r.data.scores.clone(),
                score_samples: r.data.score_samples.clone(),
                output_tokens_per_s: r.data.stats.as_ref().map(|s| s.output_tokens_per_s),
                j_per_output_token: r.data.telemetry.as_ref().and_then(|t| t.j_per_output_token),
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
    "quality",
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
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Matched {
    pub label: String,
    pub changes: Vec<Change>,
}

/// Which per-request values a metric is computed from.
type Values = fn(&RunValues) -> &Vec<f64>;

/// The values and the statistic (a percentile; negative: the mean) of a metric.
fn stat_of(metric: &str) -> Option<(Values, f64)> {
    Some(match metric {
        "ttft_p50" => (|r: &RunValues| &r.ttft_ms, 50.0),
        "ttft_p99" => (|r: &RunValues| &r.ttft_ms, 99.0),
        "tpot_p50" => (|r: &RunValues| &r.tpot_ms, 50.0),
        "tpot_p99" => (|r: &RunValues| &r.tpot_ms, 99.0),
        "e2e_p50" => (|r: &RunValues| &r.e2e_ms, 50.0),
        "e2e_p99" => (|r: &RunValues| &r.e2e_ms, 99.0),
        "quality" => (|r: &RunValues| &r.scores, -1.0),
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
    match stat_of(metric) {
        Some((values, q)) => {
            let (va, vb) = (values(a), values(b));
            let (ea, eb) = (estimate(va, q), estimate(vb, q));
            // Quality: by dataset item when both sides know their items.
            let items =
                |r: &RunValues| crate::record::stats::cluster_sums(&r.scores, &r.score_samples);
            let by_item = match (metric, items(a), items(b)) {
                ("quality", Some(ga), Some(gb)) => Some((ga, gb)),
                _ => None,
            };
            let ci = (va.len() >= 2 && vb.len() >= 2)
                .then(|| {
                    let mut rng = SplitMix64::derive(seed, metric);
                    let mut est: Vec<f64> = (0..ROUNDS)
                        .filter_map(|_| match &by_item {
                            Some((ga, gb)) => ratio(
                                Some(crate::record::stats::resample_clusters(ga, &mut rng)),
                                Some(crate::record::stats::resample_clusters(gb, &mut rng)),
                            ),
                            None => ratio(
                                estimate(&resample(va, &mut rng), q),
                                estimate(&resample(vb, &mut rng), q),
                            ),
                        })
                        .collect();
                    est.sort_by(f64::total_cmp);
                    Some((
                        crate::record::stats::percentile(&est, 2.5)?,
                        crate::record::stats::percentile(&est, 97.5)?,
                    ))
                })
                .flatten();
            Change {
                metric,
                a: ea,
                b: eb,
                change: ratio(ea, eb),
                ci,
            }
        }
        None => {
            let f = |r: &RunValues| match metric {
                "tokens_per_s" => r.output_tokens_per_s,
                _ => r.j_per_output_token,
            };
            Change {
                metric,
                a: f(a),
                b: f(b),
                change: ratio(f(a), f(b)),
                ci: None,
            }
        }
    }
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

/// A regression gate: `METRIC>+5%` fails when B's change exceeds +5 %, `METRIC<-2%` when it
/// falls below −2 % (on the point estimate).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Gate {
    pub metric: String,
    pub above: bool,
    pub limit: f64,
    pub text: String,
}

pub(crate) fn parse_gate(s: &str) -> Result<Gate, CompareError> {
    let (metric, rest, above) = match (s.find('>'), s.find('<')) {
        (Some(i), _) => (&s[..i], &s[i + 1..], true),
        (None, Some(i)) => (&s[..i], &s[i + 1..], false),
        _ => return Err(CompareError::GateShape { gate: s.into() }),
    };
    let metric = metric.trim();
    if !METRICS.contains(&metric) {
        return Err(CompareError::GateMetric {
            gate: s.into(),
            metric: metric.into(),
        });
    }
    let num = rest.trim().trim_end_matches('%');
    let limit: f64 = num.parse::<f64>().map_err(|_| CompareError::GateLimit {
        gate: s.into(),
        limit: rest.into(),
    })? / 100.0;
    Ok(Gate {
        metric: metric.to_string(),
        above,
        limit,
        text: s.to_string(),
    })
}

/// The gates a comparison breaks: (gate, run label, change).
pub(crate) fn broken<'a>(gates: &'a [Gate], matched: &[Matched]) -> Vec<(&'a Gate, String, f64)> {
    let mut out = Vec::new();
    for g in gates {
        for m in matched {
            if let Some(c) = m
                .changes
                .iter()
                .find(|c| c.metric == g.metric)
                .and_then(|c| c.change)
            {
                if (g.above && c > g.limit) || (!g.above && c < g.limit) {
                    out.push((g, m.label.clone(), c));
                }
            }
        }
    }
    out
}

fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{:+.1}%", x * 100.0))
        .unwrap_or_else(|| "–".into())
}

fn num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 1.0 => format!("{x:.2}"),
        Some(x) => format!("{x:.4}"),
        None => "–".into(),
    }
}

/// The comparison for a terminal: per configuration, the metrics in aligned columns.
pub(crate) fn terminal(matched: &[Matched], only_a: &[String], only_b: &[String]) -> String {
    let mut out = String::new();
    for m in matched {
        let rows: Vec<[String; 5]> = m.changes.iter().map(cells).collect();
        let head = HEADER.map(String::from);
        let mut w = [0usize; 5];
        for r in rows.iter().chain(std::iter::once(&head)) {
            for (i, cell) in r.iter().enumerate() {
                w[i] = w[i].max(cell.chars().count());
            }
        }
        out.push_str(&format!("{}\n", m.label));
        for r in std::iter::once(&head).chain(rows.iter()) {
            let pad = |i: usize| {
                let fill = " ".repeat(w[i] - r[i].chars().count());
                if i == 0 {
                    format!("{}{fill}", r[i])
                } else {
                    format!("{fill}{}", r[i])
                }
            };
            out.push_str(&format!(
                "  {}  {}  {}  {}  {}\n",
                pad(0),
                pad(1),
                pad(2),
                pad(3),
                pad(4)
            ));
        }
        out.push('\n');
    }
    out.push_str(&unmatched(only_a, only_b));
    out
}

const HEADER: [&str; 5] = ["metric", "A", "B", "change", "95 % CI"];

/// One change as shown, in [`HEADER`]'s order.
fn cells(c: &Change) -> [String; 5] {
    [
        c.metric.to_string(),
        num(c.a),
        num(c.b),
        pct(c.change),
        c.ci.map(|(lo, hi)| format!("{} … {}", pct(Some(lo)), pct(Some(hi))))
            .unwrap_or_else(|| "–".into()),
    ]
}

/// The configurations only one side ran.
fn unmatched(only_a: &[String], only_b: &[String]) -> String {
    let mut out = String::new();
    if !only_a.is_empty() {
        out.push_str(&format!("Only in A: {}\n", only_a.join(", ")));
    }
    if !only_b.is_empty() {
        out.push_str(&format!("Only in B: {}\n", only_b.join(", ")));
    }
    out
}

/// The comparison as Markdown: one table per configuration.
pub(crate) fn markdown(matched: &[Matched], only_a: &[String], only_b: &[String]) -> String {
    let mut out = String::new();
    for m in matched {
        out.push_str(&format!(
            "### {}\n\n| {} |\n|---|---|---|---|---|\n",
            m.label,
            HEADER.join(" | ")
        ));
        for c in &m.changes {
            out.push_str(&format!("| {} |\n", cells(c).join(" | ")));
        }
        out.push('\n');
    }
    out.push_str(&unmatched(only_a, only_b));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: &str, scale: f64) -> RunValues {
        RunValues {
            label: format!("run {config}"),
            config: config.into(),
            ttft_ms: (1..=200).map(|i| i as f64 * scale).collect(),
            tpot_ms: (1..=200).map(|i| 10.0 + i as f64 * 0.01).collect(),
            e2e_ms: (1..=200).map(|i| 100.0 + i as f64).collect(),
            scores: (0..200).map(|i| f64::from(u8::from(i % 2 == 0))).collect(),
            // 20 questions, each asked 10 times.
            score_samples: (0..200).map(|i| format!("q{}", i % 20)).collect(),
            output_tokens_per_s: Some(100.0 * scale),
            j_per_output_token: None,
        }
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
        let ttft = m[0]
            .changes
            .iter()
            .find(|c| c.metric == "ttft_p50")
            .unwrap();
        assert!((ttft.change.unwrap() - 0.5).abs() < 1e-9, "{ttft:?}");
        let (lo, hi) = ttft.ci.unwrap();
        assert!(lo <= 0.5 && 0.5 <= hi && lo > 0.0, "{lo} {hi}");
        let same = m[0].changes.iter().find(|c| c.metric == "quality").unwrap();
        assert_eq!(same.change, Some(0.0));
        let gates = vec![
            parse_gate("ttft_p99>+5%").unwrap(),
            parse_gate("quality<-1%").unwrap(),
        ];
        let b = broken(&gates, &m);
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].0.metric, "ttft_p99");
        assert!(parse_gate("ttft>5%").is_err());
        assert!(parse_gate("ttft_p99=5%").is_err());
    }
}
