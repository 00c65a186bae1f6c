//! Regression gates of `compare --fail-on`: parsing `METRIC>+N%`, and judging each matched
//! configuration's change by its interval (`GateRule::Confident`) or its point estimate.

use serde::Serialize;

use super::{shown, Change, CompareError, Matched, METRICS};

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
    let limit: f64 = num
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| CompareError::GateLimit {
            gate: s.into(),
            limit: rest.into(),
        })?
        / 100.0;
    // A gate that can only fire on an improvement never fires on a regression: refused,
    // with the gate that was meant.
    let higher_is_better = HIGHER_IS_BETTER.contains(&metric);
    if above == higher_is_better {
        let (op, meant) = if above { ('>', '<') } else { ('<', '>') };
        return Err(CompareError::GateDirection {
            gate: s.into(),
            metric: metric.into(),
            op,
            meant,
            better: if higher_is_better { "higher" } else { "lower" },
        });
    }
    Ok(Gate {
        metric: metric.to_string(),
        above,
        limit,
        text: s.to_string(),
    })
}

pub(crate) use crate::cli::GateRule;

/// The metrics where more is better: their regression gates are `<`; every other metric's
/// are `>`.
const HIGHER_IS_BETTER: &[&str] = &["tokens_per_s", "quality"];

/// McNemar's p below which a pass/fail quality change counts as more than chance, for the
/// confident rule: the bootstrap of the ratio alone is too narrow when few items changed
/// answer.
const MCNEMAR_ALPHA: f64 = 0.05;

/// What a gate says of one matched configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub(crate) enum Judgement {
    /// Past the limit (with the rule's confidence).
    Fired { change: f64, ci: Option<(f64, f64)> },
    /// The point estimate is past the limit but the interval reaches back over it, or there
    /// is no interval, or (pass/fail quality) McNemar's test cannot tell the items that
    /// changed answer from chance: the data cannot tell. `need`: about how many observations
    /// per side (requests; items for quality) would make the interval narrow enough, when
    /// known.
    Inconclusive {
        change: f64,
        ci: Option<(f64, f64)>,
        n: Option<usize>,
        need: Option<usize>,
        /// What `n` and `need` count: requests, items (quality) or batches (requests sent
        /// together, resampled as one).
        unit: &'static str,
        /// McNemar's p, when it is what held the verdict back.
        #[serde(skip_serializing_if = "Option::is_none")]
        mcnemar_p: Option<f64>,
        /// Without an interval, what each side lacks ([`Change::lacking`]): said side by
        /// side instead of `need` per side.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        lacking: Vec<super::Lack>,
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
        // The bound nearest the limit is past it too — and, for pass/fail quality, McNemar's
        // test says the items that changed answer are more than chance.
        Some((lo, hi)) if past(g, if g.above { lo } else { hi }) => match c.p {
            Some(p) if c.metric == "quality" && p >= MCNEMAR_ALPHA => {
                Some(Judgement::Inconclusive {
                    change,
                    ci,
                    n,
                    need: None,
                    unit,
                    mcnemar_p: Some(p),
                    lacking: Vec::new(),
                })
            }
            _ => Some(Judgement::Fired { change, ci }),
        },
        Some((lo, hi)) => {
            // The interval's side toward the limit shrinks as 1/√n: n · (that side's width
            // / the distance to the limit)².
            let near = if g.above { change - lo } else { hi - change };
            let gap = (change - g.limit).abs();
            let need = n
                .filter(|_| gap > 0.0 && near > 0.0)
                .map(|n| (n as f64 * (near / gap).powi(2)).ceil() as usize);
            Some(Judgement::Inconclusive {
                change,
                ci,
                n,
                need,
                unit,
                mcnemar_p: None,
                lacking: Vec::new(),
            })
        }
        // Too few requests (or batches) for a percentile's interval: what each side lacks,
        // said side by side (a count per side would be one side's). Where neither lacks any,
        // A's percentile reaches 0 (no relative interval): no count would tell.
        None => Some(Judgement::Inconclusive {
            change,
            ci: None,
            n,
            need: None,
            unit,
            mcnemar_p: None,
            lacking: c.lacking.clone(),
        }),
    }
}

impl Matched {
    /// This configuration's change of one metric.
    pub(crate) fn change(&self, metric: &str) -> Option<&Change> {
        self.changes.iter().find(|c| c.metric == metric)
    }
}

/// A saturation search's figure that mixes its probes: every one but quality (the same
/// items' answers whatever the rate).
fn mixes_probes(m: &Matched, metric: &str) -> bool {
    m.saturation && metric != "quality"
}

/// What the gates could not judge, one line each: a configuration of A without a finished
/// run in B (not run there, failed, or configured otherwise: its match key differs), a gated
/// metric that one side has and the other lacks, a gate that judged no configuration at
/// all. A gate holds only over what it saw, so each of these fails the comparison as a
/// regression does. Empty without gates.
///
/// `only_a` holds the configurations of A whose absence in B counts (not those that a
/// `--only` narrowing B's plan left out of a baseline's).
pub(crate) fn unjudged(gates: &[Gate], matched: &[Matched], only_a: &[String]) -> Vec<String> {
    if gates.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = only_a
        .iter()
        .map(|l| {
            format!(
                "unjudged: {l}: no finished run of this configuration in B (not run, failed, \
                 or configured otherwise there): no gate saw it"
            )
        })
        .collect();
    for g in gates {
        let (mut judged, mut absent) = (0, 0);
        for m in matched {
            let Some(c) = m.change(&g.metric) else {
                continue;
            };
            if mixes_probes(m, &g.metric) {
                absent += 1;
                out.push(format!(
                    "unjudged: {}: a saturation search's {} mixes every probe's rate (gate {}); \
                     its answer is the rate it found (saturation.json, the report)",
                    m.label, g.metric, g.text
                ));
                continue;
            }
            match (c.a, c.b) {
                // A change with no relative size (A is 0) toward the gate's side is unseen.
                (Some(a), Some(b)) if c.change.is_none() && (b > a) == g.above && a != b => {
                    absent += 1;
                    out.push(format!(
                        "unjudged: {}: {} went from {a} to {b}, a change with no relative size \
                         (gate {})",
                        m.label, g.metric, g.text
                    ));
                }
                (Some(_), Some(_)) => judged += 1,
                (None, None) => {}
                (a, _) => {
                    absent += 1;
                    out.push(format!(
                        "unjudged: {}: {} is absent in {} (gate {}){}",
                        m.label,
                        g.metric,
                        if a.is_none() { "A" } else { "B" },
                        g.text,
                        if a.is_none() {
                            "; a baseline saved before bench360 kept it lacks it: save it again"
                        } else {
                            ""
                        }
                    ))
                }
            }
        }
        if judged == 0 && absent == 0 {
            out.push(format!(
                "unjudged: gate {} judged no configuration: none that both sides ran has {} on \
                 both sides",
                g.text, g.metric
            ));
        }
    }
    out
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
        for m in matched.iter().filter(|m| !mixes_probes(m, &g.metric)) {
            let Some(c) = m.change(&g.metric) else {
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

/// A percentile metric (`ttft_p99`…), as against a mean or a rate.
fn percentile(metric: &str) -> bool {
    super::stat_of(metric).is_some_and(|(_, q)| q >= 0.0)
}

/// One of a unit: `1 more batch`.
fn one(unit: &str) -> &str {
    unit.strip_suffix("es")
        .filter(|u| u.ends_with("ch"))
        .or_else(|| unit.strip_suffix('s'))
        .unwrap_or(unit)
}

/// A verdict as one line of text.
pub(crate) fn verdict_line(v: &Verdict) -> String {
    let ci = |c: Option<(f64, f64)>| {
        c.map(|(lo, hi)| {
            format!(
                ", 95 % interval {} … {}",
                shown(v.metric, Some(lo)),
                shown(v.metric, Some(hi))
            )
        })
        .unwrap_or_default()
    };
    match &v.judgement {
        Judgement::Fired { change, ci: c } => format!(
            "regression: {}: {} changed {}{} (gate {})",
            v.run,
            v.metric,
            shown(v.metric, Some(*change)),
            ci(*c),
            v.gate
        ),
        Judgement::Inconclusive {
            change,
            ci: c,
            n,
            need,
            unit: what,
            mcnemar_p,
            lacking,
        } => {
            let more = match (mcnemar_p, need, n) {
                (Some(p), ..) => {
                    format!("McNemar's p = {p:.3}: the items that changed answer could be chance")
                }
                (None, ..) if !lacking.is_empty() => {
                    let more = |l: &super::Lack| {
                        let k = l.need - l.have;
                        format!("~{k} more {}", if k == 1 { one(l.unit) } else { l.unit })
                    };
                    match lacking.as_slice() {
                        [a, b] if (a.have, a.need, a.unit) == (b.have, b.need, b.unit) => {
                            format!("need {} per side", more(a))
                        }
                        _ => {
                            let each: Vec<String> =
                                lacking.iter().map(|l| format!("{} in {}", more(l), l.side)).collect();
                            format!("need {}", each.join(" and "))
                        }
                    }
                }
                (None, Some(need), Some(n)) if need > n => {
                    format!("need ~{} more {what} per side", need - n)
                }
                (None, Some(_), _) => format!("need more {what}"),
                (None, None, _) if c.is_none() && percentile(v.metric) => {
                    "no relative interval: A's percentile reaches 0".to_string()
                }
                (None, None, _) if c.is_none() => {
                    "no interval for this metric from one run (`--gate-rule point` judges the point estimate)".to_string()
                }
                (None, None, _) => format!("need more {what}"),
            };
            format!(
                "inconclusive: {}: {} changed {}{}, which does not clear the limit (gate {}): {more}",
                v.run,
                v.metric,
                shown(v.metric, Some(*change)),
                ci(*c),
                v.gate
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_of_a_unit_is_singular() {
        assert_eq!(
            ["batches", "requests", "items"].map(one),
            ["batch", "request", "item"]
        );
    }

    fn change(metric: &'static str, a: Option<f64>, b: Option<f64>) -> Change {
        Change {
            metric,
            a,
            b,
            change: a
                .zip(b)
                .filter(|(a, _)| *a != 0.0)
                .map(|(a, b)| (b - a) / a),
            ci: None,
            n: Some(100),
            p: None,
            interval_from: None,
            groups: None,
            effective: None,
            lacking: Vec::new(),
        }
    }

    fn matched(label: &str, changes: Vec<Change>) -> Matched {
        Matched {
            label: label.into(),
            changes,
            saturation: false,
            machine: crate::compare::MachineCheck::Same,
        }
    }

    /// A gate holds only over what it saw: a configuration B lacks, a gated metric one side
    /// lacks and a gate that judged nothing are each said, and each fails the comparison.
    #[test]
    fn what_a_gate_could_not_see_is_said_never_passed() {
        let gates = vec![
            parse_gate("ttft_p50>+5%").unwrap(),
            parse_gate("j_per_token>+5%").unwrap(),
            parse_gate("quality<-2%").unwrap(),
        ];
        let m = vec![
            matched(
                "mmlu single",
                vec![
                    change("ttft_p50", Some(10.0), Some(10.0)),
                    change("j_per_token", None, None),
                    change("quality", Some(0.5), None),
                ],
            ),
            matched(
                "synth single",
                vec![
                    change("ttft_p50", Some(10.0), Some(10.0)),
                    change("j_per_token", None, None),
                    change("quality", None, None),
                ],
            ),
        ];
        let u = unjudged(&gates, &m, &["spider single".to_string()]);
        assert_eq!(u.len(), 3, "{u:#?}");
        assert!(
            u[0].starts_with("unjudged: spider single: no finished run"),
            "{u:#?}"
        );
        // Quality absent on both sides of a synthetic run is no gap: the task has none.
        assert_eq!(
            u[1],
            "unjudged: gate j_per_token>+5% judged no configuration: none that both sides ran \
             has j_per_token on both sides"
        );
        assert_eq!(
            u[2],
            "unjudged: mmlu single: quality is absent in B (gate quality<-2%)"
        );
        // A saturation search's latencies mix its probes' rates: said, never judged.
        let mut sat = m[0].clone();
        sat.saturation = true;
        sat.changes[0].b = Some(50.0);
        sat.changes[0].change = Some(4.0);
        sat.changes[0].ci = Some((3.0, 5.0));
        let sat = [sat];
        assert!(judge_all(&gates[..1], &sat, GateRule::Confident).is_empty());
        let u = unjudged(&gates[..1], &sat, &[]);
        assert!(
            u[0].contains("a saturation search's ttft_p50 mixes every probe's rate"),
            "{u:#?}"
        );
        // From 0 toward the gate's side: no relative size, said; away from it: holds.
        let g = parse_gate("quality<-2%").unwrap();
        let mut q = m[0].clone();
        q.changes[2] = change("quality", Some(0.0), Some(0.5));
        assert_eq!(q.changes[2].change, None);
        assert!(unjudged(std::slice::from_ref(&g), &[q.clone()], &[]).is_empty());
        let up = parse_gate("ttft_p50>+5%").unwrap();
        q.changes[0] = change("ttft_p50", Some(0.0), Some(3.0));
        let u = unjudged(&[up], &[q], &[]);
        assert!(u[0].contains("went from 0 to 3"), "{u:#?}");
        // Absent in B: said; absent in A (a baseline saved before the metric was kept): said,
        // with what to do.
        assert!(
            unjudged(&gates[2..], &m[..1], &[])[0].contains("absent in B"),
            "{m:#?}"
        );
        let mut old = m[0].clone();
        old.changes[2] = change("quality", None, Some(0.5));
        let u = unjudged(&gates[2..], &[old], &[]);
        assert!(
            u[0].contains("quality is absent in A") && u[0].contains("save it again"),
            "{u:#?}"
        );
        // Nothing matched: every gate judged nothing. No gates: nothing to say.
        assert_eq!(unjudged(&gates[..1], &[], &[]).len(), 1);
        assert!(unjudged(&[], &[], &["x".to_string()]).is_empty());
    }

    /// Pass/fail quality: an interval past the limit fires only where McNemar's test says the
    /// items that changed answer are more than chance (40 items, 4 lost and none gained: the
    /// bootstrap's interval can clear −2 % while p = 0.125).
    #[test]
    fn a_quality_drop_that_mcnemar_cannot_tell_from_chance_does_not_fire() {
        let g = parse_gate("quality<-2%").unwrap();
        let mut c = change("quality", Some(0.75), Some(0.65));
        c.ci = Some((-0.25, -0.03));
        c.n = Some(40);
        c.p = Some(0.125);
        let j = judge(&g, &c, GateRule::Confident).unwrap();
        let Judgement::Inconclusive { mcnemar_p, .. } = j else {
            panic!("{j:?}")
        };
        assert_eq!(mcnemar_p, Some(0.125));
        let v = Verdict {
            gate: &g.text,
            metric: "quality",
            run: "r".into(),
            judgement: j,
        };
        assert!(
            verdict_line(&v).contains("McNemar's p = 0.125"),
            "{}",
            verdict_line(&v)
        );
        c.p = Some(0.01);
        assert!(matches!(
            judge(&g, &c, GateRule::Confident),
            Some(Judgement::Fired { .. })
        ));
        // A mean score (no McNemar) fires on its interval alone; the point rule ignores p.
        c.p = Some(0.5);
        assert!(matches!(
            judge(&g, &c, GateRule::Point),
            Some(Judgement::Fired { .. })
        ));
    }

    /// How many more requests a change needs is read from the interval's side toward the
    /// limit: a ratio's interval is skewed, and only that side has to clear it.
    #[test]
    fn the_requests_needed_come_from_the_side_toward_the_limit() {
        let g = parse_gate("tpot_p50>+5%").unwrap();
        let mut c = change("tpot_p50", Some(10.0), Some(11.0));
        c.ci = Some((0.02, 0.6));
        // Toward the limit: 0.10 − 0.02 = 0.08 over a distance of 0.05: 100 · 1.6² = 256.
        match judge(&g, &c, GateRule::Confident).unwrap() {
            Judgement::Inconclusive { need, .. } => assert_eq!(need, Some(256)),
            j => panic!("{j:?}"),
        }
    }

    #[test]
    fn a_gate_that_could_only_fire_on_an_improvement_is_refused() {
        for (gate, meant) in [
            ("tokens_per_s>+5%", "tokens_per_s<…"),
            ("quality>-2%", "quality<…"),
            ("ttft_p99<-5%", "ttft_p99>…"),
            ("j_per_token<+5%", "j_per_token>…"),
        ] {
            let e = parse_gate(gate).unwrap_err().to_string();
            assert!(e.contains(meant), "{gate}: {e}");
        }
        assert!(parse_gate("tokens_per_s<-5%").is_ok());
        // A limit of either sign is the user's: `>-100%` fires on any change.
        assert!(parse_gate("ttft_p50>-100%").is_ok());
        for bad in ["ttft_p99>NaN%", "ttft_p99>inf%"] {
            assert!(
                matches!(parse_gate(bad), Err(CompareError::GateLimit { .. })),
                "{bad}"
            );
        }
    }
}
