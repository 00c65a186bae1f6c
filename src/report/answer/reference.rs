//! The quality reference of a task's answer: the declared `quality-baseline` (a
//! configuration's label, or a deployment's or configuration's name: its finished runs
//! pooled), else the best configuration by quality. Pure.

use super::*;

/// A `quality-baseline` that names nothing the task ran.
#[derive(Debug, thiserror::Error)]
#[error("quality-baseline `{baseline}` names no configuration or deployment of this task (configurations: {labels})")]
pub(crate) struct UnknownBaseline {
    baseline: String,
    labels: String,
}

/// The reference configuration of a task's quality, or why there is none: among `gs` (the
/// configurations answered on), else — a declared baseline measured on another machine only —
/// among `task` (all the task's: quality is compared over items, whatever the machine).
pub(super) fn reference(
    rows: &[Row],
    slo: &Slo,
    gs: &[&Group],
    task: &[&Group],
) -> Result<Option<Group>, UnknownBaseline> {
    if let Some(b) = &slo.quality_baseline {
        let found = |gs: &[&Group]| -> (Option<Group>, Vec<usize>) {
            // A configuration none of whose runs finished (so with no machine in its label)
            // is no reference: the pooled match below reads the finished ones of its name.
            let exact = gs
                .iter()
                .find(|g| &g.label == b && g.rows.iter().any(|&i| rows[i].finished()))
                .map(|g| (*g).clone());
            let of = gs
                .iter()
                .filter(|g| &g.deployment == b || &g.base == b)
                .flat_map(|g| g.rows.iter().copied().filter(|&i| rows[i].finished()))
                .collect();
            (exact, of)
        };
        let (mut exact, mut of) = found(gs);
        if exact.is_none() && of.is_empty() {
            (exact, of) = found(task);
        }
        if let Some(g) = exact {
            return Ok(Some(g));
        }
        if of.is_empty() {
            let labels: Vec<&str> = task.iter().map(|g| g.label.as_str()).collect();
            return Err(UnknownBaseline {
                baseline: b.clone(),
                labels: labels.join(", "),
            });
        }
        return Ok(Some(Group {
            label: b.clone(),
            base: b.clone(),
            machine: None,
            deployment: b.clone(),
            task: gs[0].task.clone(),
            items: pooled_items(rows, &of, false),
            hits: pooled_items(rows, &of, true),
            rows: of,
            not_run: 0,
        }));
    }
    Ok(gs
        .iter()
        .filter_map(|g| value(rows, g, Objective::Quality).map(|v| (*g, v.0)))
        .reduce(|a, b| if b.1 > a.1 { b } else { a })
        .map(|(g, _)| g.clone()))
}
