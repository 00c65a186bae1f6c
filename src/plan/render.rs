//! Renders a plan with statuses: a table grouped by deployment, JSON, Graphviz DOT, and the
//! full key inputs of one node (`explain`). Returns strings.

use std::fmt::Write;

use petgraph::visit::EdgeRef;
use serde_json::json;

use super::{NodeKind, Plan, PlanError, Status};

fn status_cell(s: &Status) -> (String, String) {
    match s {
        Status::Cached => ("cached".into(), String::new()),
        Status::WillRun { why } => ("will run".into(), why.to_string()),
        Status::Skipped => ("not needed".into(), "nothing below it runs".into()),
        Status::Blocked { why } => (
            "blocked".into(),
            why.lines().next().unwrap_or("").to_string(),
        ),
    }
}

pub(crate) fn counts(plan: &Plan, st: &[Status]) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for i in &plan.order {
        if plan.graph[*i].kind == NodeKind::Warmup {
            continue;
        }
        match st[i.index()] {
            Status::Cached => c.0 += 1,
            Status::WillRun { .. } => c.1 += 1,
            Status::Blocked { .. } => c.2 += 1,
            Status::Skipped => {}
        }
    }
    c
}

pub(crate) fn table(plan: &Plan, st: &[Status]) -> String {
    let g = &plan.graph;
    let mut out = String::new();
    let label_width = g
        .node_weights()
        .map(|n| n.label.chars().count())
        .max()
        .unwrap_or(10)
        .min(90);
    let row = |out: &mut String, i: petgraph::graph::NodeIndex| {
        let n = &g[i];
        let (s, why) = status_cell(&st[i.index()]);
        let _ = writeln!(
            out,
            "  {:<12} {:<lw$}  {:<10} {}",
            &n.key[..12],
            n.label,
            s,
            why,
            lw = label_width
        );
    };
    let mut pulls_shown = Vec::new();
    for d in &plan.deployments {
        let _ = writeln!(out, "deployment {}", d.label);
        if !pulls_shown.contains(&d.pull) {
            row(&mut out, d.pull);
            pulls_shown.push(d.pull);
        }
        row(&mut out, d.coldstart);
        row(&mut out, d.warmup);
        for &r in &d.runs {
            row(&mut out, plan.runs[r].node);
            row(&mut out, plan.runs[r].score);
        }
        out.push('\n');
    }
    let _ = writeln!(out, "sweep {}", plan.sweep);
    row(&mut out, plan.report);
    let (cached, run, blocked) = counts(plan, st);
    let _ = writeln!(
        out,
        "\n{cached} cached, {run} to run, {blocked} blocked (warmups not counted)"
    );
    out
}

pub(crate) fn json(plan: &Plan, st: &[Status]) -> String {
    let g = &plan.graph;
    let nodes: Vec<_> = plan
        .order
        .iter()
        .map(|&i| {
            let n = &g[i];
            let deps: Vec<&str> = g
                .edges_directed(i, petgraph::Direction::Incoming)
                .map(|e| g[e.source()].key.as_str())
                .collect();
            json!({
                "key": n.key,
                "kind": n.kind,
                "label": n.label,
                "deployment": n.deployment.map(|d| plan.deployments[d].label.clone()),
                "status": st[i.index()],
                "depends_on": deps,
                "inputs": n.inputs,
            })
        })
        .collect();
    serde_json::to_string_pretty(&json!({"sweep": plan.sweep, "nodes": nodes}))
        .expect("serializable")
}

pub(crate) fn dot(plan: &Plan, st: &[Status]) -> String {
    let g = &plan.graph;
    let mut out = String::from(
        "digraph bench360 {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    for &i in &plan.order {
        let n = &g[i];
        let (color, style) = match st[i.index()] {
            Status::Cached => ("gray50", "solid"),
            Status::WillRun { .. } => ("blue", "bold"),
            Status::Skipped => ("gray80", "dashed"),
            Status::Blocked { .. } => ("red", "bold"),
        };
        let label = n.label.replace('\\', "\\\\").replace('"', "\\\"");
        let _ = writeln!(
            out,
            "  \"{}\" [label=\"{label}\", color={color}, style={style}];",
            n.key
        );
    }
    for e in g.edge_references() {
        let _ = writeln!(
            out,
            "  \"{}\" -> \"{}\";",
            g[e.source()].key,
            g[e.target()].key
        );
    }
    out.push_str("}\n");
    out
}

/// Every key input of the node whose key starts with `prefix` (or whose label equals it).
pub(crate) fn explain(plan: &Plan, st: &[Status], query: &str) -> Result<String, PlanError> {
    let g = &plan.graph;
    let matches: Vec<_> = plan
        .order
        .iter()
        .filter(|&&i| g[i].key.starts_with(query) || g[i].label == query)
        .copied()
        .collect();
    let i = match matches.as_slice() {
        [i] => *i,
        [] => {
            return Err(PlanError::NoNode {
                query: query.to_string(),
            })
        }
        many => {
            return Err(PlanError::AmbiguousNode {
                query: query.to_string(),
                count: many.len(),
                keys: many
                    .iter()
                    .map(|i| g[*i].key[..12].to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    };
    let n = &g[i];
    let (s, why) = status_cell(&st[i.index()]);
    let mut out = format!(
        "{}\n  key     {}\n  kind    {}\n  status  {s}{}{why}\n",
        n.label,
        n.key,
        n.kind.as_str(),
        if why.is_empty() { "" } else { ": " }
    );
    if let Some(b) = &n.blocked_by {
        let _ = writeln!(out, "  blocked {b}");
    }
    out.push_str(&format!(
        "\nkey inputs (blake3 over these, format {}):\n",
        super::keys::KEY_FORMAT
    ));
    let w = n.inputs.keys().map(|k| k.len()).max().unwrap_or(0);
    for (k, v) in &n.inputs {
        let _ = writeln!(out, "  {k:<w$}  {v}");
    }
    let deps: Vec<String> = g
        .edges_directed(i, petgraph::Direction::Incoming)
        .map(|e| format!("  {}  {}", &g[e.source()].key[..12], g[e.source()].label))
        .collect();
    if !deps.is_empty() {
        out.push_str("\ndepends on:\n");
        out.push_str(&deps.join("\n"));
        out.push('\n');
    }
    Ok(out)
}
