//! The answer's rules on made-up runs whose right answer is known.
use super::*;
use crate::record::stats::{Dist, RunStats};
use crate::record::Columns;
use crate::report::summary::{derive, RunData};
use std::collections::BTreeMap;

const ITEMS: usize = 200;

/// A run of `label` that answered item i correctly when `right(i)`, spent `joules`, and
/// had a p95 TTFT of `ttft_p95` ms.
fn run(label: &str, right: impl Fn(usize) -> bool, joules: f64, ttft_p95: f64, slo: &Slo) -> Row {
    let scores: Vec<f64> = (0..ITEMS).map(|i| f64::from(u8::from(right(i)))).collect();
    let data = RunData {
        stats: Some(RunStats {
            requests: ITEMS,
            ok: ITEMS,
            window_s: 100.0,
            ttft_ms: Dist {
                n: ITEMS,
                p95: Some(ttft_p95),
                ..Default::default()
            },
            e2e_ms: Dist {
                n: ITEMS,
                p95: Some(1000.0),
                ..Default::default()
            },
            ..Default::default()
        }),
        metrics: BTreeMap::from([(
            "quality".to_string(),
            scores.iter().sum::<f64>() / ITEMS as f64,
        )]),
        telemetry: Some(crate::telemetry::Summary {
            energy_j: Some(joules),
            ..Default::default()
        }),
        ttft_ms: vec![ttft_p95 * 0.9; ITEMS],
        e2e_ms: vec![900.0; ITEMS],
        score_samples: (0..ITEMS).map(|i| format!("q{i:03}")).collect(),
        scores,
        ..labelled(label)
    };
    derive(data, slo, None)
}

/// A run of the task `mmlu` named `label`, its deployment the label's first word; nothing
/// recorded.
fn labelled(label: &str) -> RunData {
    RunData {
        label: label.into(),
        deployment: label.split(' ').next().unwrap().into(),
        run_key: label.into(),
        columns: Some(Columns {
            task: "mmlu".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn slo(objective: Option<Objective>, drop: Option<f64>) -> Slo {
    Slo {
        ttft_p95: Some(2.0),
        quality_drop: drop,
        objective,
        ..Default::default()
    }
}

/// big: 160 right; small: the same answers but two swapped (no detectable difference);
/// tiny: 120 right; slow: big's answers, TTFT p95 over the SLO.
fn sweep(slo: &Slo) -> Vec<Row> {
    vec![
        run("big q8", |i| i < 160, 1000.0, 500.0, slo),
        run(
            "small q4",
            |i| (i < 160 && i != 3) || i == 199,
            400.0,
            400.0,
            slo,
        ),
        run("tiny q4", |i| i < 120, 100.0, 300.0, slo),
        run("slow q8", |i| i < 160, 50.0, 2500.0, slo),
    ]
}

#[test]
fn the_declared_rule_recommends_the_cheapest_non_inferior_configuration_and_says_why_the_others_lost(
) {
    let slo = slo(Some(Objective::JPerCorrect), Some(0.02));
    let rows = sweep(&slo);
    let a = &answers(&rows, &slo)[0];
    assert_eq!(
        a.reference.as_deref(),
        Some("big q8"),
        "best quality (slow ties it but comes later)"
    );
    assert_eq!(a.recommended.as_deref(), Some("small q4"));
    let by: BTreeMap<&str, &Verdict> = a.verdicts.iter().map(|v| (v.label.as_str(), v)).collect();
    assert_eq!(by["big q8"].standing, Standing::Qualifies);
    // One run each: the answers' noise cannot explain 2.5× the energy per correct answer,
    // but without repeats there is no measure of the energy's own noise.
    assert!(
        by["big q8"].why.contains("no interval to tell"),
        "{}",
        by["big q8"].why
    );
    assert_eq!(by["tiny q4"].standing, Standing::Excluded);
    assert!(
        by["tiny q4"]
            .why
            .starts_with("quality worse than allowed: more than 2.0 pt below"),
        "{}",
        by["tiny q4"].why
    );
    assert!(
        by["tiny q4"].why.contains("Δ -20.0 pt"),
        "{}",
        by["tiny q4"].why
    );
    assert_eq!(by["slow q8"].standing, Standing::Excluded);
    assert!(by["slow q8"].why.starts_with("misses the SLO"));
    let small = by["small q4"].vs_reference.as_ref().unwrap();
    assert_eq!(small.items, ITEMS);
    assert_eq!(small.mcnemar.unwrap().only_a, 1);
    assert!(small.non_inferior(0.02) && !small.detectable());
    // A baseline by label; one that names nothing is said so, and nothing qualifies.
    let mut named = slo.clone();
    named.quality_baseline = Some("small q4".into());
    let a = &answers(&rows, &named)[0];
    assert_eq!(a.reference.as_deref(), Some("small q4"));
    // The pairs: the reference as A against each first, then every other pair, each once.
    let ab: Vec<(&str, &str)> = a
        .pairs
        .iter()
        .map(|l| (l.a.as_str(), l.b.as_str()))
        .collect();
    assert_eq!(
        ab,
        [
            ("small q4", "big q8"),
            ("small q4", "tiny q4"),
            ("small q4", "slow q8"),
            ("big q8", "tiny q4"),
            ("big q8", "slow q8"),
            ("tiny q4", "slow q8"),
        ]
    );
    assert!(a.pairs[1].paired.delta < 0.0, "tiny q4 − small q4");
    // Read the other way, a pair's interval is the exact mirror: the verdict cannot depend on
    // which side is A.
    let gs = groups(&rows);
    for (x, y) in [(0, 1), (1, 2), (0, 2), (2, 3)] {
        let (ab, ba) = (pair(&gs[x], &gs[y]).unwrap(), pair(&gs[y], &gs[x]).unwrap());
        let ((lo, hi), (lo2, hi2)) = (ab.ci.unwrap(), ba.ci.unwrap());
        assert_eq!((ab.delta, lo, hi), (-ba.delta, -hi2, -lo2), "{x} {y}");
        assert_eq!(ab.detectable(), ba.detectable());
    }
    named.quality_baseline = Some("nope".into());
    let a = &answers(&rows, &named)[0];
    assert!(a
        .reference_problem
        .as_ref()
        .unwrap()
        .contains("names no configuration"));
    assert_eq!(a.recommended, None);
}

#[test]
fn without_an_objective_each_pick_names_its_ties() {
    let slo = slo(None, None);
    let rows = sweep(&slo);
    let a = &answers(&rows, &slo)[0];
    let q = &a.picks[0];
    assert_eq!(q.label.as_deref(), Some("big q8"));
    assert_eq!(
        q.tied,
        vec!["small q4".to_string()],
        "slow misses the SLO; tiny differs"
    );
    // The pairs: every pair of configurations, paired over 200 items.
    assert_eq!(a.pairs.len(), 6);
    let bt = a
        .pairs
        .iter()
        .find(|l| l.a == "big q8" && l.b == "tiny q4")
        .unwrap();
    assert!(bt.paired.detectable());
    assert!(
        a.power.as_ref().unwrap().contains("nothing to detect"),
        "{:?}",
        a.power
    );
    // Top two apart by 1 point over 200 items: far more items needed than there are.
    let mut rows = rows;
    rows[1] = run("small q4", |i| i < 158, 400.0, 400.0, &slo);
    let a = &answers(&rows, &slo)[0];
    let power = a.power.as_ref().unwrap();
    assert!(
        power.contains("needs about") && power.contains("add items"),
        "{power}"
    );
}

#[test]
fn an_over_saturated_run_is_excluded_unless_included() {
    let mut slo = slo(Some(Objective::TtftP95), None);
    let mut rows = sweep(&slo);
    rows[2].data.stats.as_mut().unwrap().steady = Some(crate::record::steady::Steady {
        saturation: Some(crate::record::steady::Saturation {
            ttft: None,
            ttft_median_ms: None,
            inflight: None,
            inflight_median: None,
            over_saturated: true,
            why: Some("TTFT rose by 900 ms".into()),
        }),
        ..Default::default()
    });
    let a = &answers(&rows, &slo)[0];
    assert_eq!(a.recommended.as_deref(), Some("small q4"));
    let tiny = a.verdicts.iter().find(|v| v.label == "tiny q4").unwrap();
    assert_eq!(tiny.why, "over-saturated: TTFT rose by 900 ms");
    slo.include_over_saturated = true;
    assert_eq!(
        answers(&rows, &slo)[0].recommended.as_deref(),
        Some("tiny q4")
    );
}

#[test]
fn per_correct_ties_within_the_answers_noise_and_needs_repeats_beyond_it() {
    let slo = slo(Some(Objective::JPerCorrect), None);
    // Same answers but for 4 items (2 each way), 2 % more energy: within the answers' noise.
    let rows = vec![
        run("a", |i| i < 100, 1000.0, 400.0, &slo),
        run(
            "b",
            |i| (i < 100 && i != 1 && i != 2) || i == 150 || i == 151,
            1020.0,
            400.0,
            &slo,
        ),
    ];
    let a = &answers(&rows, &slo)[0];
    assert_eq!(a.recommended.as_deref(), Some("a"));
    assert_eq!(
        a.verdicts[1].standing,
        Standing::Tied,
        "{:?}",
        a.verdicts[1]
    );
    // The same answers, 30 % more energy, two repeats each with their spread: beyond noise.
    let rows = vec![
        run("a #1", |i| i < 100, 1000.0, 400.0, &slo),
        run("a #2", |i| i < 100, 1010.0, 400.0, &slo),
        run("b #1", |i| i < 100, 1300.0, 400.0, &slo),
        run("b #2", |i| i < 100, 1310.0, 400.0, &slo),
    ];
    let a = &answers(&rows, &slo)[0];
    assert_eq!(a.recommended.as_deref(), Some("a"));
    let b = &a.verdicts[1];
    assert_eq!(b.standing, Standing::Qualifies, "{b:?}");
    assert!(b.why.contains("worse beyond noise"), "{}", b.why);
}

#[test]
fn an_inconclusive_quality_is_excluded_by_default_and_the_answer_says_what_admitting_it_would_pick()
{
    // big: 160 of 200 right. cheap: the same answers but 3 more wrong (−1.5 pt), less energy:
    // its interval straddles −2 pt — the GPU slice's case of 32 slots against 8.
    let mut slo = slo(Some(Objective::JPerCorrect), Some(0.02));
    let rows = vec![
        run("big q8", |i| i < 160, 1000.0, 400.0, &slo),
        run("cheap q8", |i| i < 157, 600.0, 400.0, &slo),
    ];
    let a = &answers(&rows, &slo)[0];
    assert_eq!(a.recommended.as_deref(), Some("big q8"));
    let cheap = &a.verdicts[1];
    assert_eq!(cheap.standing, Standing::Excluded);
    assert!(
        cheap
            .why
            .starts_with("inconclusive: these items cannot show"),
        "{}",
        cheap.why
    );
    assert!(cheap.why.contains("items would"), "{}", cheap.why);
    let alt = a.alternative.as_ref().unwrap();
    assert!(alt.contains("`cheap q8` would be"), "{alt}");
    slo.quality_not_worse = true;
    let a = &answers(&rows, &slo)[0];
    assert_eq!(a.recommended.as_deref(), Some("cheap q8"));
    assert_eq!(a.alternative, None);
}

/// `label`'s run recorded on a host whose kernel is `kernel`.
fn on_kernel(mut r: Row, kernel: &str) -> Row {
    let mut p = crate::record::provenance::Provenance::default();
    p.host.hostname = "vm".into();
    p.host.cpu_model = "Intel(R) Xeon(R) Processor".into();
    p.host.cores = 16;
    p.host.kernel = kernel.into();
    r.data.provenance = Some(p);
    r
}

#[test]
fn configurations_measured_on_different_machines_are_said_to_be() {
    let s = slo(None, None);
    let rows = vec![
        on_kernel(
            run("big q8 #1", |i| i < 160, 1000.0, 500.0, &s),
            "6.18-v973",
        ),
        on_kernel(
            run("big q8 #2", |i| i < 160, 1000.0, 500.0, &s),
            "6.18-v1147",
        ),
        on_kernel(run("small q4", |i| i < 150, 400.0, 400.0, &s), "6.18-v973"),
        on_kernel(run("tiny q4", |i| i < 120, 100.0, 300.0, &s), "6.18-v1147"),
    ];
    let both = answers(&rows, &s);
    // One answer per machine, among the configurations measured on it.
    let on: Vec<(String, Vec<&str>)> = both
        .iter()
        .map(|a| {
            let labels = a.verdicts.iter().map(|v| v.label.as_str()).collect();
            (a.heading(), labels)
        })
        .collect();
    assert_eq!(
        on,
        [
            (
                "mmlu on M1".to_string(),
                vec!["big q8 on M1", "small q4 on M1"]
            ),
            (
                "mmlu on M2".to_string(),
                vec!["big q8 on M2", "tiny q4 on M2"]
            ),
        ]
    );
    let a = &both[0];
    let m = a.machines.as_deref().expect("two kernels: two machines");
    assert!(
        m.starts_with(
            "measured on 2 machines, which differ in kernel: M1 (kernel 6.18-v973); M2 (kernel 6.18-v1147). On M1: `big q8 on M1`, `small q4 on M1`; on M2: `big q8 on M2`, `tiny q4 on M2`."
        ),
        "{m}"
    );
    assert!(m.contains("answered once per machine"), "{m}");
    assert_eq!(both[1].machines.as_deref(), Some(m));
    // Each machine's picks are its own configurations: the two repeats of `big q8` are not
    // pooled, and `tiny q4` (M2) is never weighed against `small q4` (M1).
    for a in &both {
        let mine: Vec<&str> = a.verdicts.iter().map(|v| v.label.as_str()).collect();
        let picked: Vec<&str> = a.picks.iter().filter_map(|p| p.label.as_deref()).collect();
        assert!(!picked.is_empty(), "{}: nothing picked", a.heading());
        for who in picked {
            assert!(mine.contains(&who), "{who} picked on {}", a.heading());
        }
    }
    // A baseline named without the machine names the configuration on each machine; one
    // measured on another machine only is still the quality reference (quality is compared
    // over items, whatever the machine).
    for baseline in ["big q8", "small q4"] {
        let with_base = Slo {
            quality_baseline: Some(baseline.into()),
            ..slo(None, None)
        };
        let refs: Vec<Option<String>> = answers(&rows, &with_base)
            .into_iter()
            .map(|a| a.reference)
            .collect();
        assert_eq!(
            refs,
            [Some(baseline.to_string()), Some(baseline.to_string())]
        );
    }
    let md = crate::report::text::answer_markdown(&both);
    assert!(md.contains("### Task mmlu on M1\n"), "{md}");
    assert!(md.contains("### Task mmlu on M2\n"), "{md}");
    assert!(md.contains("\nMachines: measured on 2 machines"), "{md}");
    let term = crate::report::text::answer_terminal(&both);
    assert!(
        term.contains(
            "note (mmlu on M2): its configurations were measured on more than one machine"
        ),
        "{term}"
    );

    // One machine throughout (or runs from before provenance was kept): nothing to say.
    let one: Vec<Row> = rows
        .into_iter()
        .map(|r| on_kernel(r, "6.18-v973"))
        .collect();
    assert!(answers(&one, &s)[0].machines.is_none());
    let none = sweep(&s);
    assert!(answers(&none, &s)[0].machines.is_none());
}

/// Runs of two machines beside a repeat that failed (no machine recorded) and a run recorded
/// before bench360 kept provenance: each machine gets its answer, the unrecorded run one of
/// its own, the failed repeat excludes its configuration on both machines but is no quality
/// reference (its finished namesakes are), and summary.parquet's rows say their machine.
#[test]
fn a_split_by_machine_survives_a_failed_repeat_and_an_unrecorded_run() {
    let s = Slo {
        quality_baseline: Some("big q8".into()),
        ..slo(Some(Objective::Quality), Some(0.05))
    };
    let mut failed = run("big q8 #3", |i| i < 160, 1000.0, 500.0, &s);
    failed.data.failure = Some("engine failed to start: out of memory".into());
    failed.data.stats = None;
    let mut rows = vec![
        on_kernel(run("big q8 #1", |i| i < 160, 1000.0, 500.0, &s), "v973"),
        on_kernel(run("big q8 #2", |i| i < 160, 1000.0, 500.0, &s), "v1147"),
        on_kernel(run("small q4", |i| i < 158, 400.0, 400.0, &s), "v973"),
        on_kernel(run("tiny q4", |i| i < 150, 100.0, 300.0, &s), "v1147"),
        failed,
        run("old q4", |i| i < 159, 300.0, 300.0, &s),
    ];
    let all = answers(&rows, &s);
    let headings: Vec<String> = all.iter().map(TaskAnswer::heading).collect();
    assert_eq!(
        headings,
        ["mmlu on M1", "mmlu on M2", "mmlu on an unrecorded machine"]
    );
    for a in &all {
        // The reference is the finished runs of `big q8` (on this machine, else all of them),
        // never the failed repeat, so nothing is excluded for want of common items.
        assert_eq!(a.reference.as_deref(), Some("big q8"), "{}", a.heading());
        assert!(a.reference_problem.is_none());
        for v in a.verdicts.iter().filter(|v| v.label.starts_with("big q8")) {
            assert_eq!(v.standing, Standing::Excluded, "{}", a.heading());
            assert_eq!(v.why, "failed: engine failed to start: out of memory");
        }
        for v in a.verdicts.iter().filter(|v| !v.label.starts_with("big q8")) {
            assert!(
                !v.why.contains("common"),
                "{}: {} {}",
                a.heading(),
                v.label,
                v.why
            );
            assert!(v.vs_reference.is_some(), "{}: {}", a.heading(), v.label);
        }
    }
    let labels =
        |a: &TaskAnswer| -> Vec<String> { a.verdicts.iter().map(|v| v.label.clone()).collect() };
    assert_eq!(labels(&all[0]), ["big q8 on M1", "small q4 on M1"]);
    assert_eq!(labels(&all[1]), ["big q8 on M2", "tiny q4 on M2"]);
    assert_eq!(labels(&all[2]), ["old q4"]);
    assert_eq!(all[2].recommended.as_deref(), Some("old q4"));
    // summary.parquet: each row's machine beside its answer.
    annotate(&mut rows, &all);
    let machines: Vec<Option<&str>> = rows.iter().map(|r| r.machine.as_deref()).collect();
    assert_eq!(
        machines,
        [Some("M1"), Some("M2"), Some("M1"), Some("M2"), None, None]
    );
    // `tiny q4` (150 of 200) against M2's `big q8` (160): 5 points below, not shown within 5.
    assert!(
        rows[3]
            .answer
            .as_deref()
            .is_some_and(|a| a.starts_with("excluded: inconclusive")),
        "{:?}",
        rows[3].answer
    );
    assert_eq!(rows[3].quality_reference.as_deref(), Some("big q8"));
}

/// Machines are numbered by when they were first used, not by where the plan lists their
/// runs: the later machine's runs listed first are still M2.
#[test]
fn machines_are_numbered_in_the_order_they_were_used() {
    let s = slo(None, None);
    let at = |mut r: Row, start: f64| {
        r.data.ran = Some((start, start + 60.0));
        r
    };
    let rows = vec![
        at(
            on_kernel(run("big q8 #2", |i| i < 160, 1000.0, 500.0, &s), "v1147"),
            2000.0,
        ),
        at(
            on_kernel(run("big q8 #1", |i| i < 160, 1000.0, 500.0, &s), "v973"),
            1000.0,
        ),
    ];
    let labels: Vec<String> = answers(&rows, &s)
        .iter()
        .flat_map(|a| a.verdicts.iter().map(|v| v.label.clone()))
        .collect();
    assert_eq!(labels, ["big q8 on M1", "big q8 on M2"]);
    assert_eq!(
        machine_labels(&rows),
        [Some("M2".to_string()), Some("M1".to_string())]
    );
}

/// `label`'s run with no record yet, as the report reads a partial sweep's rest.
fn not_run(label: &str, s: &Slo) -> Row {
    failed_with(label, crate::report::build::NOT_RUN_YET, s)
}

/// `label`'s run with no figures and `failure` for its cause.
fn failed_with(label: &str, failure: &str, s: &Slo) -> Row {
    let data = RunData {
        failure: Some(failure.into()),
        ..labelled(label)
    };
    derive(data, s, None)
}

/// A configuration whose later repeats have no record yet (a partial sweep, or repeats run
/// over several sessions) is judged on the repeats that have one, and the answer says how many
/// are to come (a repeat run as configured before counts as not run: it has no record under
/// its planned key); one with no record at all is excluded as not run yet, one with a failed
/// repeat as failed, and neither stands on anything. With two machines, its later repeats do
/// not make a configuration of their own.
#[test]
fn a_configuration_stands_on_its_recorded_repeats_while_others_are_not_run_yet() {
    let s = slo(None, None);
    let mut rows = vec![
        run("big q8 #1", |i| i < 160, 1000.0, 500.0, &s),
        not_run("big q8 #2", &s),
        not_run("big q8 #3", &s),
        run("small q4 #1", |i| i < 150, 400.0, 400.0, &s),
        run("small q4 #2", |i| i < 150, 400.0, 400.0, &s),
        not_run("small q4 #3", &s),
        not_run("tiny q4 #1", &s),
        not_run("tiny q4 #2", &s),
        run("odd q2 #1", |i| i < 100, 100.0, 300.0, &s),
        failed_with("odd q2 #2", "engine exited during startup", &s),
        not_run("odd q2 #3", &s),
        failed_with(
            "small q4 #4",
            "not run yet as the sweep now says; … (changed: seed: 1 → 2)",
            &s,
        ),
    ];
    let all = answers(&rows, &s);
    let a = &all[0];
    let by: BTreeMap<&str, &Verdict> = a.verdicts.iter().map(|v| (v.label.as_str(), v)).collect();
    assert_eq!(by["big q8"].rows, [0]);
    assert_eq!(by["big q8"].standing, Standing::Qualifies);
    assert_eq!(by["small q4"].rows, [3, 4]);
    assert_eq!(by["tiny q4"].rows, [6, 7]);
    assert_eq!(by["tiny q4"].why, "not run yet");
    assert_eq!(by["odd q2"].rows, [8, 9]);
    assert_eq!(by["odd q2"].why, "failed: engine exited during startup");
    assert_eq!(a.picks[0].label.as_deref(), Some("big q8"));
    assert_eq!(
        a.partial,
        [
            Partial {
                label: "big q8".into(),
                recorded: 1,
                not_run: 2
            },
            Partial {
                label: "small q4".into(),
                recorded: 2,
                not_run: 2
            }
        ]
    );
    let md = crate::report::text::answer_markdown(&all);
    assert!(
        md.contains("\n2 configurations stand on the repeats recorded, others not run yet (`bench360 apply` runs them): `big q8` (1 recorded, 2 not yet), `small q4` (2 recorded, 2 not yet).\n"),
        "{md}"
    );
    assert!(md.contains("- `tiny q4` excluded: not run yet\n"), "{md}");
    annotate(&mut rows, &all);
    let said: Vec<&str> = rows.iter().map(|r| r.answer.as_deref().unwrap()).collect();
    assert_eq!(said[1], "not run yet");
    assert_eq!(said[5], "not run yet");
    assert_eq!(said[6], "excluded: not run yet");
    assert_eq!(said[11], "not run yet");
    // The terminal's answer lines say it too.
    assert!(
        crate::report::text::answer_terminal(&all).contains("\n  note (mmlu): 2 configurations stand on the repeats recorded, others not run yet (`bench360 apply` runs them): big q8 (1 recorded, 2 not yet), small q4 (2 recorded, 2 not yet)\n"),
        "{}",
        crate::report::text::answer_terminal(&all)
    );
    assert!(said[0].starts_with("qualifies"), "{}", said[0]);

    // Two machines: `big q8`'s third repeat is neither machine's, and no configuration.
    let mut rows = vec![
        on_kernel(run("big q8 #1", |i| i < 160, 1000.0, 500.0, &s), "v973"),
        on_kernel(run("big q8 #2", |i| i < 160, 1000.0, 500.0, &s), "v1147"),
        not_run("big q8 #3", &s),
        on_kernel(run("small q4", |i| i < 150, 400.0, 400.0, &s), "v973"),
    ];
    let all = answers(&rows, &s);
    let labels = |all: &[TaskAnswer]| -> Vec<Vec<(String, Standing)>> {
        all.iter()
            .map(|a| {
                a.verdicts
                    .iter()
                    .map(|v| (v.label.clone(), v.standing))
                    .collect()
            })
            .collect()
    };
    let (m1, m2) = ("big q8 on M1".to_string(), "big q8 on M2".to_string());
    let small = ("small q4 on M1".to_string(), Standing::Qualifies);
    assert_eq!(
        labels(&all),
        [
            vec![(m1.clone(), Standing::Qualifies), small.clone()],
            vec![(m2.clone(), Standing::Qualifies)]
        ]
    );
    let partial: Vec<Vec<&str>> = all
        .iter()
        .map(|a| a.partial.iter().map(|p| p.label.as_str()).collect())
        .collect();
    assert_eq!(partial, [["big q8 on M1"], ["big q8 on M2"]]);
    let md = crate::report::text::answer_markdown(&all[..1]);
    assert!(
        md.contains("\n`big q8 on M1` stands on the 1 repeat recorded; 1 not run yet (`bench360 apply` runs it).\n"),
        "{md}"
    );

    // A failed fourth repeat that kept no trace (its machine unknown) excludes the
    // configuration on both machines, as one failed repeat does on one: it is no
    // configuration of its own, and nothing stands on the other repeats.
    let mut failed = run("big q8 #4", |i| i < 160, 1000.0, 500.0, &s);
    failed.data.failure = Some("engine failed to start: out of memory".into());
    failed.data.stats = None;
    rows.push(failed.clone());
    let all = answers(&rows, &s);
    assert_eq!(
        labels(&all),
        [
            vec![(m1.clone(), Standing::Excluded), small.clone()],
            vec![(m2.clone(), Standing::Excluded)]
        ]
    );
    for a in &all {
        assert!(a.partial.is_empty());
        assert_eq!(
            a.verdicts[0].why,
            "failed: engine failed to start: out of memory"
        );
    }
    let mut summary = rows.clone();
    annotate(&mut summary, &all);
    assert_eq!(
        summary[4].answer.as_deref(),
        Some("excluded: failed: engine failed to start: out of memory")
    );
    // It is no one machine's: no machine's comparison is its own.
    assert!(summary[4].vs_reference.is_none() && summary[4].quality_reference.is_none());
    // One that recorded a machine where nothing finished (a smaller GPU, say) is that
    // machine's failure: a configuration of its own, excluding neither M1's nor M2's.
    rows[4] = on_kernel(failed.clone(), "v2000");
    let all = answers(&rows, &s);
    assert_eq!(
        labels(&all),
        [
            vec![
                (m1.clone(), Standing::Qualifies),
                small.clone(),
                ("big q8".to_string(), Standing::Excluded)
            ],
            vec![
                (m2.clone(), Standing::Qualifies),
                ("big q8".to_string(), Standing::Excluded)
            ]
        ]
    );
    // One that kept its trace (failed over its error budget) recorded its machine: it
    // excludes the configuration there only.
    rows[4] = on_kernel(failed, "v1147");
    let all = answers(&rows, &s);
    assert_eq!(
        labels(&all),
        [
            vec![(m1, Standing::Qualifies), small],
            vec![(m2, Standing::Excluded)]
        ]
    );
    assert_eq!(all[0].partial.len(), 1);
    assert!(all[1].partial.is_empty());
}

/// "Worse than allowed" is a detectable difference: with `quality-drop 0`, 5 items only the
/// reference got right give an interval below zero, but McNemar's p = 0.0625 — inconclusive,
/// as the pairs table's "no detectable difference"; at 8 of 8 (p = 0.008), beyond.
#[test]
fn worse_than_allowed_needs_mcnemar_where_it_applies() {
    let p = |only_a: u64| Paired {
        items: 200,
        a: 0.6,
        b: 0.6 - only_a as f64 / 200.0,
        delta: -(only_a as f64) / 200.0,
        ci: Some((-(only_a as f64) / 100.0, -0.005)),
        mcnemar: Some(paired::McNemar {
            only_a,
            only_b: 0,
            p: paired::mcnemar_exact(only_a, 0),
        }),
        items_needed: None,
    };
    assert!(!p(5).detectable());
    assert_eq!(evidence(&p(5), 0.0), Evidence::Inconclusive);
    assert!(p(8).detectable());
    assert_eq!(evidence(&p(8), 0.0), Evidence::Beyond);
    // A graded metric has no McNemar test: the interval alone decides.
    let graded = Paired {
        mcnemar: None,
        ..p(5)
    };
    assert_eq!(evidence(&graded, 0.0), Evidence::Beyond);
}
