//! The answer of a report, per task: the configurations compared item by item on quality, the
//! recommendation — by a declared rule (`slo { quality-drop …; objective … }`) or one pick
//! per objective — and, for every configuration, whether it won, tied, qualified or why it
//! lost. Pure.
//!
//! Rules (docs/report.md says the same):
//! - A configuration is a run label without its repeat (`… #2`) — and, when the runs recorded
//!   more than one machine, with its machine (`… on M2`: runs of two machines are never
//!   pooled); its repeats are pooled (those with a record: repeats with none yet, of a
//!   partial sweep, are counted beside it — "stands on the 1 repeat recorded; 2 not run yet"):
//!   quality per dataset item is the mean over every request that asked it, and any other
//!   figure is the mean over the repeats (with a Student t interval from two repeats on).
//! - Quality is compared **paired**, over the items both configurations scored: the mean
//!   per-item difference with a seeded 95 % bootstrap interval, and McNemar's exact test for
//!   pass/fail metrics. A difference is *detectable* when the interval excludes zero (and
//!   McNemar's p < 0.05 where it applies).
//! - The quality reference is the declared `quality-baseline` (a configuration's label, or a
//!   deployment's label: then all its configurations of the task pooled), else the task's
//!   best configuration by quality.
//! - With an objective declared, a configuration qualifies when it finished, meets every SLO
//!   threshold, is not over-saturated (unless `over-saturated "include"`), and — with
//!   `quality-drop d` — its paired interval against the reference has a lower bound ≥ −d
//!   (non-inferiority). The best qualifying one by the objective is recommended.
//! - Ties: on quality, no detectable paired difference; on another figure, 95 % intervals
//!   that overlap (latency percentiles: bootstrap over requests; per correct answer: from the
//!   correct share's interval; others: across repeats, so one run of each cannot tie or
//!   differ — the answer says "no interval").

use serde::Serialize;

use super::summary::Row;
use crate::record::paired::{self, Paired};
use crate::record::stats::repeat_ci;
use crate::spec::{Objective, Slo};

/// The bootstrap seed of a pair: its two labels in name order, so B against A resamples the
/// same items as A against B and its interval is the exact mirror (a verdict cannot depend on
/// which of the two is read first).
fn seed_of(a: &str, b: &str) -> u64 {
    let (a, b) = if a <= b { (a, b) } else { (b, a) };
    super::summary::seed_of(&format!("{a}\u{0}{b}"))
}

/// B against A, paired over their common items.
fn pair(a: &Group, b: &Group) -> Option<Paired> {
    paired::paired(
        a.items.as_ref()?,
        b.items.as_ref()?,
        seed_of(&a.label, &b.label),
    )
}

/// A row's figure for an objective.
fn row_value(r: &Row, o: Objective) -> Option<f64> {
    let s = r.data.stats.as_ref();
    match o {
        Objective::Quality => r.data.metrics.get("quality").copied(),
        Objective::JPerCorrect => r.j_per_correct,
        Objective::CostPerCorrect => r.cost_per_1k_correct,
        Objective::JPerToken => r.data.telemetry.as_ref()?.j_per_output_token,
        Objective::TtftP95 => s?.ttft_ms.p95,
        // Not from a coarse stream (its TPOT is the delivery's).
        Objective::TpotP50 => r.decode_tpot_p50(),
        Objective::E2eP95 => s?.e2e_ms.p95,
        Objective::Goodput => r.goodput_rps,
        // Over the steady part when the run has one.
        Objective::TokensPerS => Some(
            r.steady()
                .map_or(s?.output_tokens_per_s, |st| st.output_tokens_per_s),
        ),
    }
    .filter(|v| v.is_finite())
}

/// A row's interval for an objective, where one run gives one.
fn row_ci(r: &Row, o: Objective) -> Option<(f64, f64)> {
    match o {
        Objective::Quality => r.quality_ci,
        Objective::JPerCorrect => r.j_per_correct_ci,
        Objective::CostPerCorrect => r.cost_per_1k_correct_ci,
        Objective::TtftP95 => r.ttft_p95_ci,
        Objective::TpotP50 => r.tpot_p50_ci,
        Objective::E2eP95 => r.e2e_p95_ci,
        _ => None,
    }
}

/// A figure and its 95 % interval, when one exists.
type Figure = (f64, Option<(f64, f64)>);

/// A configuration's figure and interval: one run's own, or the mean and t-interval over its
/// repeats.
fn value(rows: &[Row], g: &Group, o: Objective) -> Option<Figure> {
    let done: Vec<&Row> = g
        .rows
        .iter()
        .map(|&i| &rows[i])
        .filter(|r| r.finished())
        .collect();
    match done.as_slice() {
        [] => None,
        [one] => Some((row_value(one, o)?, row_ci(one, o))),
        many => {
            let v: Vec<f64> = many.iter().filter_map(|r| row_value(r, o)).collect();
            if v.len() != many.len() {
                return None;
            }
            let (m, h) = repeat_ci(&v)?;
            Some((m, Some((m - h, m + h))))
        }
    }
}

fn better(o: Objective, a: f64, b: f64) -> bool {
    if o.higher_is_better() {
        a > b
    } else {
        a < b
    }
}

/// What an objective is called in the answer.
pub(crate) fn title(o: Objective) -> &'static str {
    match o {
        Objective::Quality => "highest quality",
        Objective::JPerCorrect => "lowest J per correct answer",
        Objective::CostPerCorrect => "lowest cost per 1,000 correct answers",
        Objective::JPerToken => "lowest J/token",
        Objective::TtftP95 => "lowest p95 TTFT",
        Objective::TpotP50 => "lowest p50 TPOT",
        Objective::E2eP95 => "lowest p95 E2E",
        Objective::Goodput => "highest goodput",
        Objective::TokensPerS => "highest steady-state tok/s",
    }
}

/// The objectives picked when the sweep declares none.
const DEFAULT_PICKS: [Objective; 5] = [
    Objective::Quality,
    Objective::JPerCorrect,
    Objective::JPerToken,
    Objective::TtftP95,
    Objective::Goodput,
];

/// A configuration's place in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Standing {
    Recommended,
    /// Within noise of the recommended one on the objective.
    Tied,
    /// Qualifies, and is worse on the objective beyond noise (or no interval tells).
    Qualifies,
    Excluded,
}

impl Standing {
    /// As the report writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Recommended => "recommended",
            Standing::Tied => "tied",
            Standing::Qualifies => "qualifies",
            Standing::Excluded => "excluded",
        }
    }
}

/// One configuration of a task, judged.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Verdict {
    pub label: String,
    pub rows: Vec<usize>,
    pub standing: Standing,
    /// Why, in words (for every standing but Recommended).
    pub why: String,
    /// The objective's figure, shown.
    pub value: Option<f64>,
    pub vs_reference: Option<Paired>,
}

/// One pick when no objective is declared.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Pick {
    pub objective: &'static str,
    pub label: Option<String>,
    pub value: Option<f64>,
    /// Whether the value is a share (quality), shown as a percentage.
    pub share: bool,
    /// The value's unit ("ms", "J", "req/s"…), empty for a share or a cost.
    pub unit: &'static str,
    /// Configurations within noise of it, and how that was judged.
    pub tied: Vec<String>,
    pub tie_rule: &'static str,
}

/// A paired comparison shown in the answer.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PairLine {
    pub a: String,
    pub b: String,
    pub paired: Paired,
}

/// The answer for one task.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TaskAnswer {
    pub task: String,
    /// How many configurations the task has.
    pub configurations: usize,
    /// The declared rule in words; None: one pick per objective.
    pub rule: Option<String>,
    pub reference: Option<String>,
    /// Why there is no reference (a baseline that matches nothing).
    pub reference_problem: Option<String>,
    pub recommended: Option<String>,
    /// What would be recommended were the configurations whose quality is inconclusive
    /// against the limit admitted (`quality-evidence "not-worse"`), when that differs.
    pub alternative: Option<String>,
    pub verdicts: Vec<Verdict>,
    pub picks: Vec<Pick>,
    pub pairs: Vec<PairLine>,
    /// The items a paired test would need to tell the top two apart.
    pub power: Option<String>,
    /// When the task's runs recorded more than one machine: which, and where each
    /// configuration ran.
    pub machines: Option<String>,
    /// Then the task has one answer per machine, among the configurations measured on it
    /// (`M1`, `M2`…; those that finished nowhere are listed under every machine).
    pub machine: Option<String>,
    /// Configurations judged on the repeats that have a record while others have none yet.
    pub partial: Vec<Partial>,
}

/// A configuration whose runs with a record all finished while others have none yet: it stands
/// on those. (One with a failed run is excluded for it, whatever is to come.)
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Partial {
    pub label: String,
    /// Its runs with a record (finished or failed).
    pub recorded: usize,
    /// Its runs with none yet.
    pub not_run: usize,
}

impl Pick {
    /// Its value with its unit: "22.2%", "44.1 ms", "0.805 J".
    pub fn shown(&self) -> String {
        match self.value {
            None => "–".into(),
            Some(v) if self.share => format!("{:.1}%", v * 100.0),
            Some(v) if self.unit.is_empty() => sig3(v),
            Some(v) => format!("{} {}", sig3(v), self.unit),
        }
    }
}

impl TaskAnswer {
    /// The task, and its machine when the task has one answer per machine: `mmlu on M2`.
    pub fn heading(&self) -> String {
        match &self.machine {
            Some(m) => format!("{} on {m}", self.task),
            None => self.task.clone(),
        }
    }

    /// The rows of its configurations, in row order.
    pub fn row_indices(&self) -> Vec<usize> {
        let mut i: Vec<usize> = self.verdicts.iter().flat_map(|v| v.rows.clone()).collect();
        i.sort_unstable();
        i.dedup();
        i
    }
}

/// All pairs of a task are listed up to this many configurations; beyond, only each against
/// the reference.
const ALL_PAIRS_UP_TO: usize = 12;

/// The answer of every task, in task name order — one per machine, in machine order, for a
/// task whose configurations were measured on more than one (a ranking across machines would
/// hold the machines' difference too).
pub(crate) fn answers(rows: &[Row], slo: &Slo) -> Vec<TaskAnswer> {
    let all = groups(rows);
    let mut tasks: Vec<&str> = all.iter().map(|g| g.task.as_str()).collect();
    tasks.sort_unstable();
    tasks.dedup();
    tasks
        .into_iter()
        .flat_map(|t| {
            let gs: Vec<&Group> = all.iter().filter(|g| g.task == t).collect();
            match machines::per_machine(rows, &gs) {
                None => vec![task_answer(rows, slo, t, &gs, &gs)],
                Some(split) => {
                    let line = machines::machines(rows, &gs);
                    split
                        .into_iter()
                        .map(|(at, here)| TaskAnswer {
                            machines: line.clone(),
                            machine: Some(at.name()),
                            ..task_answer(rows, slo, t, &here, &gs)
                        })
                        .collect()
                }
            }
        })
        .collect()
}

/// Why a configuration cannot be recommended, before the objective is looked at.
fn exclusion(rows: &[Row], slo: &Slo, g: &Group, vs: Option<&Paired>) -> Option<String> {
    let rs: Vec<&Row> = g.rows.iter().map(|&i| &rows[i]).collect();
    if let Some(r) = rs.iter().find(|r| !r.finished()) {
        let cause = r.data.failure.as_deref().unwrap_or("no results");
        let headline = crate::engine::failure_headline(cause);
        // Not run yet (or changed since it ran) is no failure.
        return Some(if super::build::no_record(r) {
            headline
        } else {
            format!("failed: {headline}")
        });
    }
    if let Some(r) = rs.iter().find(|r| r.meets_slo == Some(false)) {
        return Some(format!("misses the SLO: {}", r.slo_misses.join(", ")));
    }
    if !slo.include_over_saturated {
        if let Some(why) = rs.iter().find_map(|r| r.over_saturated()) {
            return Some(format!("over-saturated: {why}"));
        }
    }
    if let Some(drop) = slo.quality_drop {
        return match vs {
            None => Some("no dataset items in common with the quality reference".into()),
            Some(p) => match evidence(p, drop) {
                Evidence::Within => None,
                Evidence::Beyond => Some(format!(
                    "quality worse than allowed: more than {} below the reference ({})",
                    fmt_delta(drop),
                    describe(p)
                )),
                Evidence::Inconclusive if slo.quality_not_worse => None,
                // The interval is past the limit, but McNemar's test does not find the
                // difference on the items only one side got right.
                Evidence::Inconclusive
                    if p.ci.is_some_and(|(_, hi)| hi < -drop) && p.mcnemar.is_some() =>
                {
                    Some(format!(
                        "{INCONCLUSIVE}: its interval is more than {} below the reference ({}), but McNemar's exact test does not find the difference (p = {})",
                        fmt_delta(drop),
                        describe(p),
                        p.mcnemar.map_or("–".into(), |m| fmt_p(m.p))
                    ))
                }
                Evidence::Inconclusive => Some(format!(
                    "{INCONCLUSIVE}: these items cannot show its quality within {} of the reference ({}){}",
                    fmt_delta(drop),
                    describe(p),
                    items_to_show(p, drop)
                        .map(|n| format!("; about {n} items would"))
                        .unwrap_or_default()
                )),
            },
        };
    }
    None
}

/// How an inconclusive exclusion begins (the answer looks for it).
const INCONCLUSIVE: &str = "inconclusive";

/// What a paired interval says of a drop against its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evidence {
    /// The whole interval is above −limit: shown within (non-inferior).
    Within,
    /// The whole interval is below −limit: shown beyond.
    Beyond,
    /// It straddles −limit (or there is no interval).
    Inconclusive,
}

pub(crate) fn evidence(p: &Paired, limit: f64) -> Evidence {
    // Beyond, as a detectable difference: for pass/fail scores McNemar agrees at 5 % too (so
    // the answer never calls worse what the pairs table calls no detectable difference).
    let mcnemar_agrees = p.mcnemar.is_none_or(|m| m.p < 0.05);
    match p.ci {
        Some(_) if p.non_inferior(limit) => Evidence::Within,
        Some((_, hi)) if hi < -limit && mcnemar_agrees => Evidence::Beyond,
        _ => Evidence::Inconclusive,
    }
}

/// About how many items the interval would need to show the drop within `limit` (its
/// half-width shrinks as 1/√n), when the observed difference is above −limit.
fn items_to_show(p: &Paired, limit: f64) -> Option<u64> {
    let (lo, hi) = p.ci?;
    let room = p.delta + limit;
    (room > 0.0).then(|| ((p.items as f64) * ((hi - lo) / 2.0 / room).powi(2)).ceil() as u64)
}

fn tie_rule(o: Objective) -> &'static str {
    match o {
        Objective::Quality => "no detectable paired difference",
        Objective::TtftP95 | Objective::TpotP50 | Objective::E2eP95 => {
            "95 % intervals overlap: a bootstrap over requests for one run, Student t across repeats"
        }
        Objective::JPerCorrect | Objective::CostPerCorrect => {
            "the ratio's paired interval over the common items includes 1, or with repeats their intervals overlap"
        }
        _ => "intervals across repeats overlap (one run each: no interval)",
    }
}

/// The answer among `gs`, the configurations of `task` (all of them: `all`) measured on one
/// machine.
fn task_answer(rows: &[Row], slo: &Slo, task: &str, gs: &[&Group], all: &[&Group]) -> TaskAnswer {
    let (reference, reference_problem) = match reference(rows, slo, gs, all) {
        Ok(r) => (r, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let vs: Vec<Option<Paired>> = gs
        .iter()
        .map(|g| reference.as_ref().and_then(|r| pair(r, g)))
        .collect();
    let excluded: Vec<Option<String>> = gs
        .iter()
        .zip(&vs)
        .map(|(g, p)| match &reference_problem {
            Some(e) if slo.quality_drop.is_some() => Some(e.clone()),
            _ => exclusion(rows, slo, g, p.as_ref()),
        })
        .collect();
    let mut answer = TaskAnswer {
        task: task.to_string(),
        configurations: gs.len(),
        rule: slo.objective.map(|o| rule_text(slo, o)),
        reference: reference.as_ref().map(|r| r.label.clone()),
        reference_problem,
        recommended: None,
        alternative: None,
        verdicts: Vec::new(),
        picks: Vec::new(),
        pairs: pairs(gs, reference.as_ref()),
        power: None,
        machines: None,
        machine: None,
        partial: gs
            .iter()
            .filter(|g| g.not_run > 0 && g.rows.iter().all(|&i| rows[i].finished()))
            .map(|g| Partial {
                label: g.label.clone(),
                recorded: g.rows.len(),
                not_run: g.not_run,
            })
            .collect(),
    };
    // Tell apart the top two that could be recommended (all, when fewer than two could).
    let candidates: Vec<&Group> = gs
        .iter()
        .zip(&excluded)
        .filter(|(_, e)| e.is_none())
        .map(|(g, _)| *g)
        .collect();
    answer.power = power(
        rows,
        if candidates.len() >= 2 {
            &candidates
        } else {
            gs
        },
    );
    match slo.objective {
        Some(o) => {
            declared(rows, o, gs, &vs, &excluded, &mut answer);
            answer.alternative = alternative(rows, o, gs, &excluded, answer.recommended.as_deref());
        }
        None => {
            // Failed, missing the SLO or over-saturated: out of every pick.
            let eligible: Vec<&Group> = gs
                .iter()
                .zip(&excluded)
                .filter(|(_, e)| e.is_none())
                .map(|(g, _)| *g)
                .collect();
            answer.picks = DEFAULT_PICKS
                .iter()
                .map(|&o| pick(rows, o, &eligible))
                .collect();
            answer.verdicts = gs
                .iter()
                .zip(&vs)
                .zip(&excluded)
                .map(|((g, p), e)| Verdict {
                    label: g.label.clone(),
                    rows: g.rows.clone(),
                    standing: if e.is_some() {
                        Standing::Excluded
                    } else {
                        Standing::Qualifies
                    },
                    why: e.clone().unwrap_or_default(),
                    value: None,
                    vs_reference: p.clone(),
                })
                .collect();
        }
    }
    answer
}

/// The declared rule in words.
fn rule_text(slo: &Slo, o: Objective) -> String {
    let mut parts = vec![format!(
        "{} among the configurations that qualify",
        title(o)
    )];
    if let Some(d) = slo.quality_drop {
        parts.push(format!(
            "qualify: quality at most {} below {} (lower bound of the paired 95 % interval ≥ −{})",
            fmt_delta(d),
            slo.quality_baseline
                .as_deref()
                .map_or("the task's best configuration".to_string(), |b| format!(
                    "`{b}`"
                )),
            fmt_delta(d)
        ));
    }
    parts.push("every SLO threshold met".into());
    if !slo.include_over_saturated {
        parts.push("not over-saturated".into());
    }
    parts.join("; ")
}

fn declared(
    rows: &[Row],
    o: Objective,
    gs: &[&Group],
    vs: &[Option<Paired>],
    excluded: &[Option<String>],
    answer: &mut TaskAnswer,
) {
    let values: Vec<Option<Figure>> = gs.iter().map(|g| value(rows, g, o)).collect();
    let winner = (0..gs.len())
        .filter(|&i| excluded[i].is_none())
        .filter_map(|i| values[i].map(|v| (i, v.0)))
        .reduce(|a, b| if better(o, b.1, a.1) { b } else { a })
        .map(|(i, _)| i);
    answer.recommended = winner.map(|w| gs[w].label.clone());
    answer.verdicts = (0..gs.len())
        .map(|i| {
            let (standing, why) = match (&excluded[i], winner, values[i]) {
                (Some(e), _, _) => (Standing::Excluded, e.clone()),
                (None, _, None) => (
                    Standing::Excluded,
                    format!("no figure for {} (not measured)", o.name()),
                ),
                (None, Some(w), _) if w == i => (Standing::Recommended, String::new()),
                (None, Some(w), Some(v)) => {
                    let shown = sig3;
                    let wv = values[w].map(|x| x.0).unwrap_or(f64::NAN);
                    match tied(rows, o, gs[w], gs[i]) {
                        Some(true) => (
                            Standing::Tied,
                            format!(
                                "{} {} vs {}: within noise ({})",
                                o.name(),
                                shown(v.0),
                                shown(wv),
                                tie_rule(o)
                            ),
                        ),
                        Some(false) => (
                            Standing::Qualifies,
                            format!(
                                "{} {} vs {}: worse beyond noise",
                                o.name(),
                                shown(v.0),
                                shown(wv)
                            ),
                        ),
                        None => (
                            Standing::Qualifies,
                            format!(
                                "{} {} vs {}: worse, no interval to tell whether beyond noise",
                                o.name(),
                                shown(v.0),
                                shown(wv)
                            ),
                        ),
                    }
                }
                (None, None, Some(_)) => (Standing::Qualifies, String::new()),
            };
            Verdict {
                label: gs[i].label.clone(),
                rows: gs[i].rows.clone(),
                standing,
                why,
                value: values[i].map(|v| v.0),
                vs_reference: vs[i].clone(),
            }
        })
        .collect();
}

/// The recommendation were the inconclusive exclusions admitted, in words, when it differs.
fn alternative(
    rows: &[Row],
    o: Objective,
    gs: &[&Group],
    excluded: &[Option<String>],
    recommended: Option<&str>,
) -> Option<String> {
    let admitted = |e: &Option<String>| e.as_ref().is_none_or(|e| e.starts_with(INCONCLUSIVE));
    if excluded
        .iter()
        .all(|e| e.as_ref().is_none_or(|e| !e.starts_with(INCONCLUSIVE)))
    {
        return None;
    }
    let (i, v) = (0..gs.len())
        .filter(|&i| admitted(&excluded[i]))
        .filter_map(|i| value(rows, gs[i], o).map(|v| (i, v.0)))
        .reduce(|a, b| if better(o, b.1, a.1) { b } else { a })?;
    if Some(gs[i].label.as_str()) == recommended {
        return None;
    }
    Some(format!(
        "were the configurations whose quality is inconclusive admitted (`quality-evidence \"not-worse\"`), `{}` would be ({} {}): {}",
        gs[i].label,
        o.name(),
        sig3(v),
        excluded[i].as_deref().unwrap_or("it qualifies")
    ))
}

/// The best of the eligible configurations by one objective, and those tied with it.
fn pick(rows: &[Row], o: Objective, eligible: &[&Group]) -> Pick {
    let best = eligible
        .iter()
        .filter_map(|g| value(rows, g, o).map(|v| (*g, v.0)))
        .reduce(|a, b| if better(o, b.1, a.1) { b } else { a });
    let tied_with = best
        .map(|(w, _)| {
            eligible
                .iter()
                .filter(|g| g.label != w.label && value(rows, g, o).is_some())
                .filter(|g| tied(rows, o, w, g) == Some(true))
                .map(|g| g.label.clone())
                .collect()
        })
        .unwrap_or_default();
    Pick {
        objective: title(o),
        label: best.map(|b| b.0.label.clone()),
        value: best.map(|b| b.1),
        share: o == Objective::Quality,
        unit: match o {
            Objective::Quality | Objective::CostPerCorrect => "",
            Objective::JPerCorrect | Objective::JPerToken => "J",
            Objective::TtftP95 | Objective::TpotP50 | Objective::E2eP95 => "ms",
            Objective::Goodput => "req/s",
            Objective::TokensPerS => "tok/s",
        },
        tied: tied_with,
        tie_rule: tie_rule(o),
    }
}

/// Paired comparisons to show: each against the reference first (the reference as A, so a
/// Δ reads the same whatever the task's size), then, for a small task, every other pair in
/// configuration order.
fn pairs(gs: &[&Group], reference: Option<&Group>) -> Vec<PairLine> {
    let line = |a: &Group, b: &Group| {
        pair(a, b).map(|p| PairLine {
            a: a.label.clone(),
            b: b.label.clone(),
            paired: p,
        })
    };
    let is_ref = |g: &Group| reference.is_some_and(|r| r.label == g.label);
    let mut out: Vec<PairLine> = reference
        .map(|r| {
            gs.iter()
                .filter(|g| !is_ref(g))
                .filter_map(|g| line(r, g))
                .collect()
        })
        .unwrap_or_default();
    if gs.len() <= ALL_PAIRS_UP_TO {
        let others: Vec<&Group> = gs.iter().copied().filter(|g| !is_ref(g)).collect();
        for (i, a) in others.iter().enumerate() {
            out.extend(others[i + 1..].iter().filter_map(|b| line(a, b)));
        }
    }
    out
}

/// The items a paired test would need to tell the top two of `gs` by quality apart.
fn power(rows: &[Row], gs: &[&Group]) -> Option<String> {
    let mut by: Vec<(&Group, f64)> = gs
        .iter()
        .filter_map(|g| value(rows, g, Objective::Quality).map(|v| (*g, v.0)))
        .collect();
    by.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (a, b) = (by.first()?.0, by.get(1)?.0);
    let p = pair(a, b)?;
    Some(match p.items_needed {
        None => format!(
            "`{}` and `{}` show no mean difference over their {} common items: nothing to detect",
            a.label, b.label, p.items
        ),
        Some(n) => format!(
            "telling `{}` from `{}` ({}) at 5 % with 80 % power needs about {n} paired items; this sweep has {}{}",
            a.label,
            b.label,
            describe(&p),
            p.items,
            if n as usize <= p.items { "" } else { " — add items (the task's `samples`) to settle it" }
        ),
    })
}

/// Writes each row's place in the answer and its comparison with the quality reference, for
/// summary.parquet.
pub(crate) fn annotate(rows: &mut [Row], answers: &[TaskAnswer]) {
    let labels = machines::machine_labels(rows);
    for (r, m) in rows.iter_mut().zip(labels) {
        r.machine = m;
    }
    // A failed repeat with no machine belongs to its configuration on every machine: no one
    // machine's comparison is its own.
    let mut shared = vec![0usize; rows.len()];
    for i in answers
        .iter()
        .flat_map(|a| a.verdicts.iter().flat_map(|v| v.rows.iter()))
    {
        shared[*i] += 1;
    }
    for a in answers {
        for v in &a.verdicts {
            for &i in &v.rows {
                if shared[i] > 1 {
                    // (Its configurations are all excluded by it, for its failure.)
                    rows[i].answer = Some(format!("excluded: {}", v.why));
                    continue;
                }
                rows[i].vs_reference = v.vs_reference.clone();
                rows[i].quality_reference = a.reference.clone();
                rows[i].answer = Some(match v.standing {
                    Standing::Recommended => "recommended".to_string(),
                    Standing::Tied => format!("tied: {}", v.why),
                    Standing::Qualifies if v.why.is_empty() => "qualifies".to_string(),
                    Standing::Qualifies => format!("qualifies: {}", v.why),
                    Standing::Excluded => format!("excluded: {}", v.why),
                });
            }
        }
    }
    // A later repeat with no record yet, apart from its configuration (judged on the others).
    for r in rows
        .iter_mut()
        .filter(|r| r.answer.is_none() && super::build::no_record(r))
    {
        r.answer = Some(super::build::NOT_RUN_YET.into());
    }
}

mod group;
mod machines;
mod reference;
use group::pooled_items;
pub(crate) use group::{base_label, groups, Group};
pub(crate) use machines::machine_labels;
use reference::reference;
mod noise;
pub(crate) use noise::{describe, fmt_p, sig3};
use noise::{fmt_delta, tied};

#[cfg(test)]
mod tests;
