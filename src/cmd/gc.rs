//! `bench360 gc SWEEP… [--dry-run]`: delete recorded nodes that none of the sweeps' plans use.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;

use super::{Ctx, Outcome, Text};
use crate::app::{load_plan_as, View};
use crate::store::Store;

#[derive(Debug, Serialize)]
pub(crate) struct Collected {
    pub dry_run: bool,
    /// (key, label) of each node deleted (or, with `dry_run`, that would be).
    pub nodes: Vec<(String, String)>,
    /// (key, cause) of each node that could not be deleted.
    pub errors: Vec<(String, String)>,
}

pub(crate) fn run(ctx: &Ctx, sweeps: &[PathBuf], dry_run: bool) -> anyhow::Result<Collected> {
    // What `--only` leaves out of a plan would look unused, and be deleted.
    anyhow::ensure!(
        ctx.overrides.only.is_empty(),
        "gc keeps what each sweep's whole plan uses, and `--only` would leave the rest of the \
         sweep out of it and delete its records (nothing deleted): give gc the sweep files, with \
         the `--set` they were applied with, and no `--only`"
    );
    let store = Store::open(&ctx.cache)?;
    let mut keep = BTreeSet::new();
    for p in sweeps {
        // What this machine would run, and what the sweep's Slurm jobs ran elsewhere.
        let mut blocked = Vec::new();
        for view in [View::Local, View::ClusterIfRan] {
            let (_, plan) = load_plan_as(&store, p, view, &ctx.overrides)?;
            keep.extend(plan.graph.node_weights().map(|n| n.key.clone()));
            blocked.push(
                plan.graph
                    .node_weights()
                    .filter_map(|n| n.blocked_by.as_ref().map(|b| format!("{}: {b}", n.label)))
                    .collect::<Vec<_>>(),
            );
        }
        // Below a blocked node (an engine binary, an engine's version or a dataset this
        // machine cannot read) the keys are provisional, so the records of the real ones
        // would look unused: keep everything.
        if blocked.iter().all(|b| !b.is_empty()) {
            anyhow::bail!(
                "{}: cannot tell which records the sweep uses while inputs are unavailable (nothing deleted): {}",
                p.display(),
                blocked[0].join("; ")
            );
        }
    }
    let mut out = Collected {
        dry_run,
        nodes: Vec::new(),
        errors: Vec::new(),
    };
    for r in store.records() {
        if keep.contains(&r.key) {
            continue;
        }
        if !dry_run {
            if let Err(e) = store.delete_node(&r.key) {
                out.errors.push((r.key.clone(), e.to_string()));
                continue;
            }
        }
        out.nodes.push((r.key, r.label));
    }
    Ok(out)
}

impl Outcome for Collected {
    fn exit_code(&self) -> u8 {
        u8::from(!self.errors.is_empty())
    }

    fn render(&self, t: &mut Text) {
        let verb = if self.dry_run {
            "would delete"
        } else {
            "delete"
        };
        for (key, label) in &self.nodes {
            t.out(format!("{verb} {} {label}", &key[..key.len().min(12)]));
        }
        for (key, why) in &self.errors {
            t.err(format!(
                "cannot delete {}: {why}",
                &key[..key.len().min(12)]
            ));
        }
        t.out(format!(
            "{} node(s) {}",
            self.nodes.len(),
            if self.dry_run { "unused" } else { "deleted" }
        ));
    }
}
