//! The parts of report.md and of the terminal summary that explain the answer: the answer
//! itself, quality compared item by item, the steady part of each run, and the percentiles
//! that rest on too few requests. Pure.

use std::fmt::Write;

use super::answer::{describe, fmt_p, sig3, Standing, TaskAnswer};
pub(crate) use super::build::not_run_yet;
use super::build::NOT_RUN_YET;
use super::summary::Row;
use crate::record::paired::percentile_min_n;
use crate::record::stats::Dist;

/// The answer's exclusions, and apart from them the configurations not run yet (a partial
/// sweep's: the rest of its matrix), which the answer lists on one line instead of one each.
pub(crate) fn exclusions(a: &TaskAnswer) -> (Vec<&super::answer::Verdict>, Vec<&str>) {
    let mut excluded = Vec::new();
    let mut not_run = Vec::new();
    for v in a
        .verdicts
        .iter()
        .filter(|v| v.standing == Standing::Excluded)
    {
        // The answer's cause for a configuration with no record yet.
        if v.why == NOT_RUN_YET {
            not_run.push(v.label.as_str());
        } else {
            excluded.push(v);
        }
    }
    (excluded, not_run)
}

/// One line for the configurations not run yet, each as `quote` writes it; None when none.
pub(crate) fn not_run_line(labels: &[&str], quote: impl Fn(&str) -> String) -> Option<String> {
    match labels {
        [] => None,
        [one] => Some(format!("{} excluded: {NOT_RUN_YET}", quote(one))),
        many => Some(format!(
            "{} configurations excluded: {NOT_RUN_YET} (`bench360 apply` runs them): {}",
            many.len(),
            quoted_list(many, quote)
        )),
    }
}

/// One line for the configurations that stand on the repeats recorded while others are not
/// run yet, each label as `quote` writes it; None when none.
pub(crate) fn partial_line(a: &TaskAnswer, quote: impl Fn(&str) -> String) -> Option<String> {
    let repeats = |n: usize| format!("{n} repeat{}", if n == 1 { "" } else { "s" });
    match a.partial.as_slice() {
        [] => None,
        [p] => Some(format!(
            "{} stands on the {} recorded; {} not run yet (`bench360 apply` runs {})",
            quote(&p.label),
            repeats(p.recorded),
            p.not_run,
            if p.not_run == 1 { "it" } else { "them" }
        )),
        many => Some(format!(
            "{} configurations stand on the repeats recorded, others not run yet (`bench360 apply` runs them): {}",
            many.len(),
            many.iter()
                .map(|p| format!(
                    "{} ({} recorded, {} not yet)",
                    quote(&p.label),
                    p.recorded,
                    p.not_run
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// How many runs have no record yet, in one line under a runs table (which lists the others);
/// `listed` says where they are named. None when none.
pub(crate) fn not_run_count(rows: &[Row], listed: &str) -> Option<String> {
    let n = rows.iter().filter(|r| not_run_yet(r)).count();
    let (s, them) = if n == 1 { ("", "it") } else { ("s", "them") };
    (n > 0)
        .then(|| format!("{n} run{s} not run yet (`bench360 apply` runs {them}; {listed} {them})"))
}

/// A runs table's cell for a run with no figures: `FAILED: <cause>`, or — for a run whose
/// configuration changed since it ran — what changed, which is no failure.
pub(crate) fn no_figures(failure: &str) -> String {
    if failure.starts_with(NOT_RUN_YET) {
        failure.to_string()
    } else {
        format!("FAILED: {failure}")
    }
}

/// Labels as `quote` writes each, joined by commas.
fn quoted_list(labels: &[&str], quote: impl Fn(&str) -> String) -> String {
    labels
        .iter()
        .map(|l| quote(l))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The failures' entry for the runs not run yet, as (what, cause), each label as `quote`
/// writes it; None when every run has a record.
pub(crate) fn not_run_failure(
    rows: &[Row],
    quote: impl Fn(&str) -> String,
) -> Option<(String, String)> {
    let labels: Vec<&str> = rows
        .iter()
        .filter(|r| not_run_yet(r))
        .map(|r| r.data.label.as_str())
        .collect();
    match labels.as_slice() {
        [] => None,
        [one] => Some((quote(one), NOT_RUN_YET.into())),
        many => Some((
            format!("{} runs", many.len()),
            format!(
                "{NOT_RUN_YET} (`bench360 apply` runs them): {}",
                quoted_list(many, quote)
            ),
        )),
    }
}

/// One entry of a report's Failures section: whose (as the renderer's `quote` writes it),
/// the cause's first line, and the rest of it (an engine's last log lines), if any.
#[derive(Debug, PartialEq, serde::Serialize)]
pub(crate) struct Failure {
    pub(crate) label: String,
    pub(crate) cause: String,
    /// The rest of an engine's failure (its last log lines), in full.
    pub(crate) log: Option<String>,
}

/// Every failure of `rows`, in their order, for report.md and report.html alike: a run's own
/// failure, its failed requests (one entry per cause), then the runs not run yet on one
/// entry ([`not_run_failure`]).
pub(crate) fn failures(rows: &[Row], quote: impl Fn(&str) -> String) -> Vec<Failure> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| !not_run_yet(r)) {
        if let Some(f) = &r.data.failure {
            let (first, rest) = f.split_once('\n').unwrap_or((f, ""));
            out.push(Failure {
                label: quote(&r.data.label),
                cause: first.to_string(),
                log: (!rest.trim().is_empty()).then(|| rest.trim_end().to_string()),
            });
        }
        for (cause, k) in r.data.stats.iter().flat_map(|s| &s.failures) {
            out.push(Failure {
                label: quote(&r.data.label),
                cause: format!("{k} request(s) failed: {cause}"),
                log: None,
            });
        }
    }
    out.extend(not_run_failure(rows, &quote).map(|(label, cause)| Failure {
        label,
        cause,
        log: None,
    }));
    out
}

/// The mark of a percentile computed from fewer requests than its interval needs.
pub(crate) const THIN: &str = "†";

/// `†` when the q-th percentile of `d` rests on fewer values than [`percentile_min_n`].
pub(crate) fn thin(d: &Dist, q: f64) -> &'static str {
    // Requests sent together count once (`Dist::groups`); requests that moved together in
    // time count as what they are worth (`Dist::worth`).
    if d.n > 0 && d.observations_at(q) < percentile_min_n(q) {
        THIN
    } else {
        ""
    }
}

/// Whether any shown tail percentile of the rows is thin (p90, p95 or p99: each has its own
/// worth where requests moved together in time, so p99's mark no longer implies the others').
pub(crate) fn any_thin(rows: &[Row]) -> bool {
    rows.iter().filter_map(|r| r.data.stats.as_ref()).any(|s| {
        [&s.ttft_ms, &s.tpot_ms, &s.itl_ms, &s.e2e_ms]
            .iter()
            .any(|d| [90.0, 95.0, 99.0].iter().any(|q| !thin(d, *q).is_empty()))
    })
}

/// The rule behind [`THIN`], in words.
pub(crate) fn thin_legend() -> String {
    format!(
        "{THIN}: fewer requests (batches, where requests were sent together; the independent requests they are worth, where neighbours in time moved together) than a distribution-free 95 % interval of that percentile needs (the order-statistic rule: n ≥ ln 0.025 / ln q, i.e. p90 {}, p95 {}, p99 {}); read it as a rough estimate.",
        percentile_min_n(90.0),
        percentile_min_n(95.0),
        percentile_min_n(99.0)
    )
}

/// `## The answer` of report.md.
pub(crate) fn answer_markdown(answers: &[TaskAnswer]) -> String {
    let mut out = String::from("## The answer\n\n");
    if answers.is_empty() {
        out.push_str("No runs.\n");
    }
    for a in answers {
        let _ = writeln!(out, "### Task {}\n", a.heading());
        if let Some(p) = &a.reference_problem {
            let _ = writeln!(out, "**No quality reference**: {p}.\n");
        }
        match &a.rule {
            Some(rule) => {
                let _ = writeln!(out, "Rule: {rule}.\n");
                match &a.recommended {
                    Some(r) => {
                        let _ = writeln!(out, "**Recommended: `{r}`**\n");
                    }
                    None => out.push_str("**No configuration qualifies.**\n\n"),
                }
                if let Some(alt) = &a.alternative {
                    let _ = writeln!(out, "Note: {alt}.\n");
                }
                out.push_str("| configuration | standing | objective | quality vs reference | why |\n|---|---|---|---|---|\n");
                for v in &a.verdicts {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} | {} |",
                        v.label,
                        v.standing.as_str(),
                        v.value.map_or("–".into(), sig3),
                        v.vs_reference.as_ref().map_or("–".into(), describe),
                        v.why.replace('|', "\\|")
                    );
                }
                out.push('\n');
            }
            None => {
                out.push_str("No `objective` declared: the best configuration for each objective among those that finished, meet the SLO and are not over-saturated; ties are within noise by the stated rule.\n\n| objective | best configuration | value | tied (within noise) |\n|---|---|---|---|\n");
                for p in &a.picks {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} |",
                        p.objective,
                        p.label
                            .as_deref()
                            .unwrap_or("none meets the constraints or has this figure"),
                        p.shown(),
                        if p.tied.is_empty() {
                            "–".to_string()
                        } else {
                            format!("{} ({})", p.tied.join(", "), p.tie_rule)
                        }
                    );
                }
                out.push('\n');
                let (excluded, not_run) = exclusions(a);
                for v in excluded {
                    let _ = writeln!(out, "- `{}` excluded: {}", v.label, v.why);
                }
                if let Some(line) = not_run_line(&not_run, |l| format!("`{l}`")) {
                    let _ = writeln!(out, "- {line}");
                }
            }
        }
        if let Some(line) = partial_line(a, |l| format!("`{l}`")) {
            let _ = writeln!(out, "\n{line}.");
        }
        if let Some(r) = a.reference.as_ref().filter(|_| a.configurations > 1) {
            let _ = writeln!(
                out,
                "\nQuality reference (summary.parquet's `quality_vs_reference`): `{r}`."
            );
        }
        if !a.pairs.is_empty() {
            out.push_str("\nQuality compared item by item (B − A over the items both scored; 95 % paired bootstrap interval; McNemar's exact test for pass/fail metrics):\n\n| A | B | items | Δ (points) | 95 % interval | McNemar p | verdict |\n|---|---|---|---|---|---|---|\n");
            for l in &a.pairs {
                let p = &l.paired;
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {:+.1} | {} | {} | {} |",
                    l.a,
                    l.b,
                    p.items,
                    p.delta * 100.0,
                    p.ci.map_or("–".into(), |(lo, hi)| format!(
                        "{:+.1} … {:+.1}",
                        lo * 100.0,
                        hi * 100.0
                    )),
                    p.mcnemar.map_or("–".into(), |m| fmt_p(m.p)),
                    if p.detectable() {
                        "different"
                    } else {
                        "no detectable difference"
                    }
                );
            }
        }
        if let Some(p) = &a.power {
            let _ = writeln!(out, "\nSample size: {p}.");
        }
        if let Some(m) = &a.machines {
            let _ = writeln!(out, "\nMachines: {m}.");
        }
        out.push('\n');
    }
    out
}

/// The answer in a few terminal lines per task that has a choice (two configurations or more).
pub(crate) fn answer_terminal(answers: &[TaskAnswer]) -> String {
    let mut out = String::new();
    for a in answers
        .iter()
        .filter(|a| a.configurations > 1 || a.machine.is_some())
    {
        match (&a.rule, &a.recommended) {
            (Some(_), Some(r)) => {
                let tied: Vec<&str> = a
                    .verdicts
                    .iter()
                    .filter(|v| v.standing == Standing::Tied)
                    .map(|v| v.label.as_str())
                    .collect();
                let excluded = a
                    .verdicts
                    .iter()
                    .filter(|v| v.standing == Standing::Excluded)
                    .count();
                let _ = writeln!(
                    out,
                    "answer ({}): {r}{}; {excluded} excluded (report.md says why)",
                    a.heading(),
                    if tied.is_empty() {
                        String::new()
                    } else {
                        format!(", tied with {}", tied.join(", "))
                    }
                );
                if let Some(alt) = &a.alternative {
                    let _ = writeln!(out, "  note: {alt}");
                }
            }
            (Some(_), None) => {
                let _ = writeln!(
                    out,
                    "answer ({}): no configuration qualifies (report.md says why)",
                    a.heading()
                );
            }
            (None, _) => {
                for p in a.picks.iter().filter(|p| p.label.is_some()) {
                    let _ = writeln!(
                        out,
                        "{} ({}): {} {}{}",
                        p.objective,
                        a.heading(),
                        p.label.as_deref().unwrap_or(""),
                        p.shown(),
                        if p.tied.is_empty() {
                            String::new()
                        } else {
                            format!(" (tied: {})", p.tied.join(", "))
                        }
                    );
                }
            }
        }
        if a.machines.is_some() {
            let _ = writeln!(
                out,
                "  note ({}): its configurations were measured on more than one machine (report.md's answer says which ran where)",
                a.heading()
            );
        }
        if let Some(line) = partial_line(a, str::to_string) {
            let _ = writeln!(out, "  note ({}): {line}", a.heading());
        }
    }
    out
}

/// `## Steady state` of report.md: the steady part of each run and its figures.
pub(crate) fn steady_markdown(rows: &[Row]) -> String {
    let with: Vec<&Row> = rows.iter().filter(|r| r.steady().is_some()).collect();
    let mut out = String::from("\n## Steady state\n\n");
    if with.is_empty() {
        out.push_str("No run has a steady part (every request sent at once, or recorded before bench360 measured it).\n");
        return out;
    }
    out.push_str("Throughput and energy over the steady part of each window (closed loop: from the first time the target was in flight to the last send; open loop: from the first successful response to the last send), beside the whole window's. Open loops are tested for over-saturation: TTFT or requests in flight rising through the steady part (least-squares slope positive at 95 % and a fitted rise above half the median).\n\n| run | rule | window excluded | tokens excluded | steady tok/s | whole tok/s | steady J/token | whole J/token | open loop |\n|---|---|---|---|---|---|---|---|---|\n");
    for r in with {
        let st = r.steady().expect("filtered");
        let whole = r.data.stats.as_ref().map(|s| s.output_tokens_per_s);
        let sat = match &st.saturation {
            None => "–".to_string(),
            Some(s) if s.over_saturated => {
                format!("**over-saturated**: {}", s.why.as_deref().unwrap_or(""))
            }
            Some(_) => "keeps up".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.0}% | {:.0}% | {:.1} | {} | {} | {} | {} |",
            r.data.label,
            st.rule,
            st.excluded_share * 100.0,
            st.excluded_token_share * 100.0,
            st.output_tokens_per_s,
            whole.map_or("–".into(), |w| format!("{w:.1}")),
            r.steady_j_per_output_token
                .map_or("–".into(), |j| format!("{j:.3}")),
            r.data
                .telemetry
                .as_ref()
                .and_then(|t| t.j_per_output_token)
                .map_or("–".into(), |j| format!("{j:.3}")),
            sat
        );
    }
    out
}

/// `## Per correct answer` of report.md.
pub(crate) fn per_correct_markdown(rows: &[Row], currency: Option<&str>) -> String {
    let with: Vec<&Row> = rows.iter().filter(|r| r.correct.is_some()).collect();
    if with.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n## Per correct answer\n\nA correct answer is a pass of a pass/fail metric, or a graded score ≥ {} (SQuAD F1, ROUGE-L). J per correct = the window's energy / correct answers; its interval comes from the correct share's (by item), energy's own noise not included.\n\n| run | scored | correct | J/correct | cost / 1,000 correct{} |\n|---|---|---|---|---|\n",
        super::summary::CORRECT_AT,
        currency.map(|c| format!(" ({c})")).unwrap_or_default()
    );
    for r in with {
        let ci = |v: Option<f64>, c: Option<(f64, f64)>| match (v, c) {
            (Some(v), Some((lo, hi))) => format!("{} [{}, {}]", sig3(v), sig3(lo), sig3(hi)),
            (Some(v), None) => sig3(v),
            _ => "–".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {} | {} |",
            r.data.label,
            r.data.scores.len(),
            r.correct.unwrap_or(0.0),
            ci(r.j_per_correct, r.j_per_correct_ci),
            ci(r.cost_per_1k_correct, r.cost_per_1k_correct_ci)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percentile_is_thin_below_what_its_requests_are_worth() {
        let d = Dist {
            n: 1000,
            ..Default::default()
        };
        assert_eq!((thin(&d, 99.0), thin(&d, 50.0)), ("", ""));
        // Requests that moved together in time, worth 200 for p99 and 400 for p50.
        let weighed = Dist {
            worth: [Some(400), None, None, Some(200)],
            ..d
        };
        assert_eq!((thin(&weighed, 99.0), thin(&weighed, 50.0)), (THIN, ""));
        assert!(thin_legend().contains("worth"));
        // p95 thin while p99 is not (p99's worth measured further in): the legend is still due.
        let p95_only = Dist {
            worth: [None, None, Some(50), None],
            ..d
        };
        assert_eq!((thin(&p95_only, 95.0), thin(&p95_only, 99.0)), (THIN, ""));
        let row = Row {
            data: super::super::summary::RunData {
                stats: Some(crate::record::stats::RunStats {
                    ttft_ms: p95_only,
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(any_thin(&[row]));
    }

    #[test]
    fn configurations_not_run_yet_share_one_line() {
        let q = |l: &str| format!("`{l}`");
        assert_eq!(not_run_line(&[], q), None);
        assert_eq!(
            not_run_line(&["a synth single"], q).unwrap(),
            "`a synth single` excluded: not run yet"
        );
        assert_eq!(
            not_run_line(&["a synth single", "b synth single"], q).unwrap(),
            "2 configurations excluded: not run yet (`bench360 apply` runs them): `a synth single`, `b synth single`"
        );
    }

    #[test]
    fn runs_not_run_yet_share_one_failure() {
        let run = |label: &str, failure: Option<&str>| Row {
            data: super::super::summary::RunData {
                label: label.into(),
                failure: failure.map(str::to_string),
                ..Default::default()
            },
            ..Default::default()
        };
        let q = |l: &str| format!("`{l}`");
        let ran = run("a synth single", None);
        let failed = run("b synth single", Some("engine exited"));
        assert!(!not_run_yet(&ran) && !not_run_yet(&failed));
        assert_eq!(not_run_failure(&[ran.clone(), failed.clone()], q), None);
        let one = [failed.clone(), run("c synth single", Some(NOT_RUN_YET))];
        assert_eq!(
            not_run_failure(&one, q),
            Some(("`c synth single`".into(), "not run yet".into()))
        );
        let two = [
            run("c synth single", Some(NOT_RUN_YET)),
            failed,
            run("d synth single", Some(NOT_RUN_YET)),
        ];
        assert_eq!(
            not_run_failure(&two, q),
            Some((
                "2 runs".into(),
                "not run yet (`bench360 apply` runs them): `c synth single`, `d synth single`"
                    .into()
            ))
        );
    }
}
