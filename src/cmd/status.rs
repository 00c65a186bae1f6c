//! `bench360 status [SWEEP] [--json]`: what the cache holds; for one sweep, its plan's counts
//! and each deployment's cache state beside its Slurm job.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{Ctx, Outcome, Text};
use crate::app::{load_plan_as, View};
use crate::store::{RecordStatus, Store};
use crate::{plan, slurm};

#[derive(Debug, Serialize)]
pub(crate) struct CacheStatus {
    pub cache: String,
    pub records: usize,
    pub finished: usize,
    pub failed: usize,
    pub interrupted: usize,
    pub by_sweep: Vec<NodeCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanCounts>,
    /// The sweep's deployments beside their Slurm jobs, as a table (terminal only).
    #[serde(skip)]
    table: Option<String>,
    /// The machines the sweep's Slurm jobs ran on, when they key its plan (terminal only).
    #[serde(skip)]
    cluster_note: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct NodeCounts {
    pub sweep: String,
    pub node: String,
    pub finished: usize,
    pub failed: usize,
    pub interrupted: usize,
}

#[derive(Debug, Serialize)]
pub(crate) struct PlanCounts {
    pub sweep: String,
    pub cached: usize,
    pub to_run: usize,
    pub blocked: usize,
}

/// `with_table`: also ask Slurm about the sweep's jobs, for the terminal's table.
pub(crate) fn run(
    ctx: &Ctx,
    sweep: Option<&Path>,
    with_table: bool,
) -> anyhow::Result<CacheStatus> {
    let store = Store::open(&ctx.cache)?;
    let records = store.records();
    let mut by: BTreeMap<(String, String), [usize; 3]> = BTreeMap::new();
    for r in &records {
        let e = by.entry((r.sweep.clone(), r.kind.clone())).or_default();
        e[match r.status {
            RecordStatus::Finished => 0,
            RecordStatus::Failed => 1,
            RecordStatus::Started => 2,
        }] += 1;
    }
    let total = |i: usize| by.values().map(|c| c[i]).sum();
    let mut out = CacheStatus {
        cache: store.root().display().to_string(),
        records: records.len(),
        finished: total(0),
        failed: total(1),
        interrupted: total(2),
        by_sweep: by
            .iter()
            .map(|((s, k), [f, x, i])| NodeCounts {
                sweep: s.clone(),
                node: k.clone(),
                finished: *f,
                failed: *x,
                interrupted: *i,
            })
            .collect(),
        plan: None,
        table: None,
        cluster_note: None,
    };
    if let Some(path) = sweep {
        let (_, plan) = load_plan_as(&store, path, View::ClusterIfRan, &ctx.overrides)?;
        let st = plan::statuses(&plan, &store);
        let (cached, to_run, blocked) = plan::render::counts(&plan, &st);
        out.plan = Some(PlanCounts {
            sweep: plan.sweep.clone(),
            cached,
            to_run,
            blocked,
        });
        if let Some(cf) = slurm::SweepDir::new(&store, &plan.sweep).cluster_facts() {
            if cf.machine != plan::facts::machine_fingerprint() {
                let machine: Vec<String> =
                    cf.machine.iter().map(|(k, v)| format!("{k} {v}")).collect();
                out.cluster_note = Some(format!(
                    "(keyed by the machines its Slurm jobs ran on, last {}: {})",
                    cf.host,
                    machine.join(", ")
                ));
            }
        }
        if with_table {
            out.table = Some(slurm::status_table(
                &store,
                &plan,
                &st,
                &slurm::SlurmCommands,
            ));
        }
    }
    Ok(out)
}

impl Outcome for CacheStatus {
    /// With SWEEP: 1 while some node of its plan is not cached (to run or blocked).
    fn exit_code(&self) -> u8 {
        self.plan
            .as_ref()
            .map_or(0, |p| u8::from(p.to_run + p.blocked > 0))
    }

    fn render(&self, t: &mut Text) {
        t.out(format!("cache {} ({} records)", self.cache, self.records));
        t.out(format!(
            "{:<24} {:<10} {:>9} {:>7} {:>12}",
            "sweep", "node", "finished", "failed", "interrupted"
        ));
        for n in &self.by_sweep {
            t.out(format!(
                "{:<24} {:<10} {:>9} {:>7} {:>12}",
                n.sweep, n.node, n.finished, n.failed, n.interrupted
            ));
        }
        if let Some(p) = &self.plan {
            t.out(format!(
                "\n{}: {} cached, {} to run, {} blocked",
                p.sweep, p.cached, p.to_run, p.blocked
            ));
            if let Some(note) = &self.cluster_note {
                t.out(note);
            }
        }
        if let Some(table) = &self.table {
            t.out.push('\n');
            t.out.push_str(table);
        }
    }
}
