//! What `plan` and `apply` compare cached runs by, read once for both comparisons: each cached
//! run's recorded provenance (`plan::inherited`: the environment its engine inherited;
//! `plan::machine`: the machine it ran on), and how a difference is tallied and said.

use crate::record::provenance::Provenance;

/// The cached runs of the plan (of one deployment's label, `only`, or all) with the provenance
/// their run.json recorded: (index into `plan.runs`, provenance). Runs recorded before
/// provenance was kept, or whose run.json cannot be read, are left out.
pub(crate) fn cached(
    plan: &super::Plan,
    status: &[super::Status],
    store: &crate::store::Store,
    only: Option<usize>,
) -> Vec<(usize, Provenance)> {
    let label = only.map(|d| plan.deployments[d].label.as_str());
    plan.runs
        .iter()
        .enumerate()
        .filter(|(_, r)| status[r.node.index()] == super::Status::Cached)
        .filter(|(_, r)| label.is_none_or(|l| plan.deployments[r.deployment].label == l))
        .filter_map(|(i, r)| {
            let b =
                std::fs::read(store.object_dir(&plan.graph[r.node].key).join("run.json")).ok()?;
            let mut v = serde_json::from_slice::<serde_json::Value>(&b).ok()?;
            Some((
                i,
                serde_json::from_value(v.get_mut("provenance")?.take()).ok()?,
            ))
        })
        .collect()
}

/// Adds one run's differences (none: nothing) to its deployment's line of a drift: per
/// label, how many runs differ and the union of what differs.
pub(super) fn tally(out: &mut Vec<(String, usize, Vec<String>)>, label: &str, diff: Vec<String>) {
    if diff.is_empty() {
        return;
    }
    match out.iter_mut().find(|(l, ..)| l == label) {
        Some((_, n, lines)) => {
            *n += 1;
            for d in diff {
                if !lines.contains(&d) {
                    lines.push(d);
                }
            }
        }
        None => out.push((label.to_string(), 1, diff)),
    }
}

/// A drift warning: `head` (ending in `:`), then one line per deployment, `  label (N runs):
/// a; b`; empty when nothing differs.
pub(super) fn warning(head: &str, drift: &[(String, usize, Vec<String>)]) -> String {
    if drift.is_empty() {
        return String::new();
    }
    let mut out = format!("{head}\n");
    for (label, n, lines) in drift {
        out.push_str(&format!(
            "  {label} ({n} run{}): {}\n",
            if *n == 1 { "" } else { "s" },
            lines.join("; ")
        ));
    }
    out
}
