//! Which record the report reads for each node of the plan. The planned key's, when the cache
//! has it. Otherwise the same label's last record may still be this configuration, recorded
//! elsewhere: on the GPU machine whose cache is read here, where the weights and the engine's
//! binary are not (their hashes cannot be taken), under other paths, another machine's facts.
//! It is read only when every input that differs is of that kind — or a node upstream read
//! the same way — and, for a score, the version of its metric (said in the report: the scores
//! are an earlier reading). Any other difference is another configuration (`max-tokens`,
//! `ignore-eos`, an engine flag): its numbers are never shown under this configuration's label;
//! the run is "not run yet", with what changed.

use std::collections::HashMap;

use petgraph::graph::NodeIndex;

use crate::plan::{keys::Change, History, NodeKind, Plan, Why};
use crate::store::Store;

/// How the report reads one node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Read {
    /// The planned key's record (or none at all).
    Planned,
    /// Another record of the label, this configuration recorded elsewhere; `metric`: the
    /// score's metric then and now, when only its version differs.
    Elsewhere {
        key: String,
        metric: Option<(String, String)>,
    },
    /// No record of this configuration; the label's last record differs in `changed`.
    Changed { changed: String },
}

/// How every node of the plan is read (indexed by node index).
pub(crate) fn reads(store: &Store, plan: &Plan) -> Vec<Read> {
    let mut out = vec![Read::Planned; plan.graph.node_count()];
    // Nodes of one key are one node (two engine blocks that start the same binary share their
    // pull's key, under the label of whichever ran): read alike.
    let mut by_key: HashMap<&str, Read> = HashMap::new();
    // Every label a key goes by: the record elsewhere is under whichever of them ran there,
    // or under the label the first repeat had before the sweep declared repeats.
    let mut labels: HashMap<&str, Vec<String>> = HashMap::new();
    for &i in &plan.order {
        let n = &plan.graph[i];
        let e = labels.entry(&n.key).or_default();
        e.push(n.label.clone());
        e.extend(label_before_repeats(&n.label));
    }
    for &i in &plan.order {
        let n = &plan.graph[i];
        if store.record(&n.key).is_some() {
            continue;
        }
        if let Some(r) = by_key.get(n.key.as_str()) {
            out[i.index()] = r.clone();
            continue;
        }
        let Some(prev) = labels[n.key.as_str()]
            .iter()
            .find_map(|l| store.last_key(&plan.sweep, l))
        else {
            continue;
        };
        let Some(past) = History::past(store, &prev) else {
            continue;
        };
        let changes = crate::plan::keys::diff(&past.inputs, &n.inputs);
        let mut metric = None;
        let mut what = Vec::new();
        for c in changes {
            if elsewhere(&by_key, &c) {
                continue;
            }
            if n.kind == NodeKind::Score && c.input == "metric" {
                if let (Some(b), Some(a)) = (&c.before, &c.after) {
                    metric = Some((b.clone(), a.clone()));
                    continue;
                }
            }
            what.push(c);
        }
        out[i.index()] = if what.is_empty() {
            Read::Elsewhere { key: prev, metric }
        } else {
            Read::Changed {
                changed: Why::Changed(what).to_string(),
            }
        };
        by_key.insert(&n.key, out[i.index()].clone());
    }
    out
}

/// The label a node of the first repeat (`… #1`, a deployment's `… (start 1)`) had when its
/// sweep declared no `repeats`: the same key then, so the same configuration.
fn label_before_repeats(label: &str) -> Option<String> {
    label
        .strip_suffix(" #1")
        .or_else(|| label.strip_suffix(" (start 1)"))
        .map(str::to_string)
}

/// Whether a differing input says where the node ran rather than what it ran: the machine's
/// facts, a path, what cannot be read here, or the key of a node upstream (a deployment's cold
/// start, a run) that is read from elsewhere as that record (`upstream`: the nodes read so far
/// without their planned record, by planned key).
fn elsewhere(upstream: &HashMap<&str, Read>, c: &Change) -> bool {
    let after = c.after.as_deref().unwrap_or("");
    let before = c.before.as_deref().unwrap_or("");
    let process_binary = |v: &str| {
        serde_json::from_str::<serde_json::Value>(v)
            .ok()
            .and_then(|j| {
                j.as_object()
                    .map(|o| o.len() == 1 && o.contains_key("process"))
            })
            .unwrap_or(false)
    };
    match c.input.as_str() {
        s if s.starts_with("machine.") => true,
        "model.path" => true,
        "model.weights" => after == "unreadable",
        "engine.artifact" => after == "unresolved",
        "engine.launch" => process_binary(before) && process_binary(after),
        _ => matches!(upstream.get(after), Some(Read::Elsewhere { key, .. }) if key == before),
    }
}

/// The report's note on what it read from elsewhere, or nothing.
pub(crate) fn note(plan: &Plan, read: &[Read]) -> Option<String> {
    let mut runs = 0;
    let mut metrics: Vec<(String, String)> = Vec::new();
    for (i, r) in read.iter().enumerate() {
        if let Read::Elsewhere { metric, .. } = r {
            if plan.graph[NodeIndex::new(i)].kind == NodeKind::Run {
                runs += 1;
            }
            if let Some(m) = metric {
                if !metrics.contains(m) {
                    metrics.push(m.clone());
                }
            }
        }
    }
    if runs == 0 && metrics.is_empty() {
        return None;
    }
    let mut s = format!(
        "{runs} run(s) read from records of the same configuration made elsewhere (another machine, other paths, weights or engine binary not readable here)."
    );
    for (then, now) in metrics {
        s.push_str(&format!(
            " Scores read as recorded with `{then}`; this bench360 scores with `{now}`: `bench360 apply` where the runs are rescores them."
        ));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(input: &str, before: &str, after: &str) -> Change {
        Change {
            input: input.into(),
            before: Some(before.into()),
            after: Some(after.into()),
        }
    }

    #[test]
    fn the_first_repeat_was_labelled_without_its_index() {
        assert_eq!(
            label_before_repeats("run m:q@e mmlu single #1").as_deref(),
            Some("run m:q@e mmlu single")
        );
        assert_eq!(
            label_before_repeats("coldstart m:q@e (start 1)").as_deref(),
            Some("coldstart m:q@e")
        );
        assert_eq!(label_before_repeats("run m:q@e mmlu single #2"), None);
        assert_eq!(label_before_repeats("coldstart m:q@e (start 2)"), None);
        assert_eq!(label_before_repeats("run m:q@e mmlu single"), None);
    }

    #[test]
    fn where_it_ran_is_not_what_it_ran() {
        let mut upstream = HashMap::new();
        upstream.insert(
            "0979",
            Read::Elsewhere {
                key: "976a".into(),
                metric: None,
            },
        );
        let at = |c: Change| elsewhere(&upstream, &c);
        assert!(at(change("machine.gpu", "NVIDIA H200", "none")));
        assert!(at(change("model.path", "/root/a.gguf", "/here/a.gguf")));
        assert!(at(change("model.weights", "e910", "unreadable")));
        assert!(!at(change("model.weights", "e910", "77aa")));
        assert!(at(change("engine.artifact", "binary:21dd", "unresolved")));
        assert!(at(change(
            "engine.launch",
            r#"{"process":{"binary":"/root/llama-server"}}"#,
            r#"{"process":{"binary":"/opt/llama-server"}}"#
        )));
        assert!(!at(change(
            "engine.launch",
            r#"{"docker":{"image":"a:1"}}"#,
            r#"{"docker":{"image":"a:2"}}"#
        )));
        assert!(!at(change("sampling.ignore-eos", "false", "true")));
        // An upstream key that changed is where only if that node is read from elsewhere, as
        // the very record this one names.
        assert!(at(change("deployment", "976a", "0979")));
        assert!(!at(change("deployment", "5555", "0979")));
        assert!(!at(change("deployment", "976a", "1234")));
    }
}
