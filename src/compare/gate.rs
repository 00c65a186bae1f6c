//! Regression gates of `compare --fail-on`: parsing `METRIC>+N%`, and judging each matched
//! configuration's change by its interval (`GateRule::Confident`) or its point estimate.

use serde::Serialize;

use super::{pct, Change, CompareError, Matched, METRICS};

/// A regression gate: `METRIC>+5%` fails when B's change exceeds +5 %, `METRIC<-2%` when it
/// falls below −2 % — by default only when the change's 95 % interval is past the limit
/// ([`GateRule`]).
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

pub(crate) use crate::cli::GateRule;

/// What a gate says of one matched configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub(crate) enum Judgement {
    /// Past the limit (with the rule's confidence).
    Fired { change: f64, ci: Option<(f64, f64)> },
    /// The point estimate is past the limit but the interval reaches back over it, or there
    /// is no interval: the data cannot tell. `need`: about how many observations per side
    /// (requests; items for quality) would make the interval narrow enough, when known.
    Inconclusive {
        change: f64,
        ci: Option<(f64, f64)>,
        n: Option<usize>,
        need: Option<usize>,
        /// What `n` and `need` count: requests, items (quality) or batches (requests sent
        /// together, resampled as one).
        unit: &'static str,
    },
}

/// One gate's verdict on one configuration.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Verdict<'a> {
    pub gate: &'a str,
    pub metric: &'a str,
    pub run: String,
    #[serde(flatten)]
    pub judgement: Judgement,
}

/// A change past `limit` in the gate's direction.
fn past(g: &Gate, x: f64) -> bool {
    if g.above {
        x > g.limit
    } else {
        x < g.limit
    }
}

/// One gate on one change; None when the change holds (its point estimate is within the limit).
pub(crate) fn judge(g: &Gate, c: &Change, rule: GateRule) -> Option<Judgement> {
    let change = c.change?;
    if !past(g, change) {
        return None;
    }
    let ci = c.ci;
    // Requests sent in groups are judged by their groups.
    let (n, unit) = match (c.groups, c.metric) {
        (Some(g), _) => (Some(g), "batches"),
        (None, "quality") => (c.n, "items"),
        (None, _) => (c.n, "requests"),
    };
    if rule == GateRule::Point {
        return Some(Judgement::Fired { change, ci });
    }
    match ci {
        // The bound nearest the limit is past it too.
        Some((lo, hi)) if past(g, if g.above { lo } else { hi }) => {
            Some(Judgement::Fired { change, ci })
        }
        Some((lo, hi)) => {
            // The half-width shrinks as 1/√n: n · (half-width / distance to the limit)².
            let half = (hi - lo) / 2.0;
            let gap = (change - g.limit).abs();
            let need = n
                .filter(|_| gap > 0.0)
                .map(|n| (n as f64 * (half / gap).powi(2)).ceil() as usize);
            Some(Judgement::Inconclusive {
                change,
                ci,
                n,
                need,
                unit,
            })
        }
        // Too few requests (or batches) for a percentile's interval: it exists from
        // `interval_from` on.
        None => Some(Judgement::Inconclusive {
            change,
            ci: None,
            n,
            need: c.interval_from,
            unit,
        }),
    }
}

/// Every gate's verdict on every matched configuration where its point estimate is past the
/// limit.
pub(crate) fn judge_all<'a>(
    gates: &'a [Gate],
    matched: &[Matched],
    rule: GateRule,
) -> Vec<Verdict<'a>> {
    let mut out = Vec::new();
    for g in gates {
        for m in matched {
            let Some(c) = m.changes.iter().find(|c| c.metric == g.metric) else {
                continue;
            };
            if let Some(judgement) = judge(g, c, rule) {
                out.push(Verdict {
                    gate: &g.text,
                    metric: &g.metric,
                    run: m.label.clone(),
                    judgement,
                });
            }
        }
    }
    out
}

/// A verdict as one line of text.
pub(crate) fn verdict_line(v: &Verdict) -> String {
    let ci = |c: Option<(f64, f64)>| {
        c.map(|(lo, hi)| format!(", 95 % interval {} … {}", pct(Some(lo)), pct(Some(hi))))
            .unwrap_or_default()
    };
    match &v.judgement {
        Judgement::Fired { change, ci: c } => format!(
            "regression: {}: {} changed {}{} (gate {})",
            v.run,
            v.metric,
            pct(Some(*change)),
            ci(*c),
            v.gate
        ),
        Judgement::Inconclusive {
            change,
            ci: c,
            n,
            need,
            unit: what,
        } => {
            let more = match (need, n) {
                (Some(need), Some(n)) if need > n => {
                    format!("need ~{} more {what} per side", need - n)
                }
                (Some(_), _) => format!("need more {what}"),
                (None, _) if c.is_none() => {
                    "no interval for this metric from one run (`--gate-rule point` judges the point estimate)".to_string()
                }
                (None, _) => format!("need more {what}"),
            };
            format!(
                "inconclusive: {}: {} changed {}{}, which does not clear the limit (gate {}): {more}",
                v.run,
                v.metric,
                pct(Some(*change)),
                ci(*c),
                v.gate
            )
        }
    }
}
