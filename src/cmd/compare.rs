//! `bench360 compare A B [--fail-on GATE…] [--format …]` and `compare A --save FILE`.

use std::path::Path;

use serde::Serialize;

use super::Ctx;
use crate::app::{load_plan_as, View};
use crate::cli::Format;
use crate::compare::{self, Matched, RunValues};
use crate::report;
use crate::store::Store;

/// Whether a side names a baseline file written by `--save` (else a sweep file).
fn is_baseline(spec: &str) -> bool {
    Path::new(spec).extension().is_some_and(|x| x == "json")
}

/// One side: a baseline file, or a sweep file in `--cache` (or `CACHE_DIR=SWEEP_FILE`).
fn side(ctx: &Ctx, spec: &str) -> anyhow::Result<(String, Vec<RunValues>)> {
    let p = Path::new(spec);
    if is_baseline(spec) {
        let b = compare::load(p)?;
        return Ok((b.sweep, b.runs));
    }
    let (cache, file) = match spec.split_once('=') {
        Some((c, f)) => (Path::new(c).to_path_buf(), Path::new(f)),
        None => (ctx.cache.clone(), p),
    };
    let store = Store::open(&cache)?;
    let (sw, plan) = load_plan_as(&store, file, View::ClusterIfRan, &ctx.overrides)?;
    let rows = report::summary_rows(&store, &plan, &sw);
    Ok((plan.sweep.clone(), compare::from_rows(&rows)))
}

#[derive(Debug, Serialize)]
struct Compared<'a> {
    matched: &'a [Matched],
    only_a: &'a [String],
    only_b: &'a [String],
    /// The gates that fired (as judged by `rule`).
    broken: Vec<&'a compare::Verdict<'a>>,
    /// The gates whose point estimate is past the limit but whose interval is not.
    inconclusive: Vec<&'a compare::Verdict<'a>>,
    /// What the gates could not judge (a configuration missing or failed in B, a gated metric
    /// absent on one side, a gate that judged nothing): each fails the comparison.
    unjudged: &'a [String],
    rule: compare::GateRule,
}

pub(crate) fn run(
    ctx: &Ctx,
    sides: &[String],
    save: Option<&Path>,
    fail_on: &[String],
    rule: compare::GateRule,
    format: Format,
    across_machines: bool,
) -> anyhow::Result<u8> {
    let gates = fail_on
        .iter()
        .map(|g| compare::parse_gate(g))
        .collect::<Result<Vec<_>, _>>()?;
    let (name_a, a) = side(ctx, &sides[0])?;
    if let Some(out) = save {
        compare::save(out, &name_a, a.clone())?;
        eprintln!(
            "baseline of `{name_a}` ({} runs): {}",
            a.len(),
            out.display()
        );
        if sides.len() == 1 {
            return Ok(0);
        }
    }
    anyhow::ensure!(
        sides.len() == 2,
        "compare needs A and B (or --save FILE with A)"
    );
    let (_, b) = side(ctx, &sides[1])?;
    let (matched, only_a, only_b) = compare::compare(&a, &b);
    // A configuration whose sides ran on other hardware is not judged (it is `unjudged`
    // below), unless --across-machines.
    let judged: Vec<Matched> = matched
        .iter()
        .filter(|m| across_machines || !m.machine.hardware_differs())
        .cloned()
        .collect();
    let verdicts = compare::judge_all(&gates, &judged, rule);
    let fired = |v: &&compare::Verdict| matches!(v.judgement, compare::Judgement::Fired { .. });
    let broken: Vec<&compare::Verdict> = verdicts.iter().filter(fired).collect();
    // `--only` narrows a sweep's plan, not a baseline file: the baseline's configurations
    // it leaves out are not missing from B.
    let narrowed = is_baseline(&sides[0]) && !ctx.overrides.only.is_empty();
    let mut unjudged = compare::unjudged(&gates, &matched, if narrowed { &[] } else { &only_a });
    // A configuration on other hardware is unjudged where a gate would have judged it: a gated
    // metric present on a side. (`unjudged` above counted it among the judged, so "judged no
    // configuration" is not said beside it.)
    let gated = |m: &Matched| {
        gates.iter().any(|g| {
            m.change(&g.metric)
                .is_some_and(|c| c.a.is_some() || c.b.is_some())
        })
    };
    let machines: Vec<(&str, &compare::MachineCheck, bool)> = matched
        .iter()
        .map(|m| (m.label.as_str(), &m.machine, gated(m)))
        .collect();
    let (notes, other_hardware) = compare::machine::lines(&machines, across_machines);
    unjudged.extend(other_hardware);
    if narrowed && !gates.is_empty() && !only_a.is_empty() {
        eprintln!(
            "note: --only narrows B's plan, not the baseline: its {} configuration{} outside \
             B are not judged",
            only_a.len(),
            super::plural(only_a.len())
        );
    }
    match format {
        Format::Json => {
            let v = Compared {
                matched: &matched,
                only_a: &only_a,
                only_b: &only_b,
                broken: broken.clone(),
                inconclusive: verdicts.iter().filter(|v| !fired(v)).collect(),
                unjudged: &unjudged,
                rule,
            };
            println!("{}", serde_json::to_string(&v)?);
        }
        Format::Markdown => print!("{}", compare::markdown(&matched, &only_a, &only_b)),
        Format::Terminal => print!("{}", compare::terminal(&matched, &only_a, &only_b)),
    }
    for v in &verdicts {
        eprintln!("{}", compare::verdict_line(v));
    }
    for line in notes.iter().chain(&unjudged) {
        eprintln!("{line}");
    }
    if matched.is_empty() {
        eprintln!("no configuration ran on both sides");
    }
    Ok(u8::from(!broken.is_empty() || !unjudged.is_empty()))
}
