//! `bench360 plan SWEEP [--json | --dot]`: every node, cached / will run (why) / blocked; then
//! what `apply` would refuse.

use std::collections::BTreeSet;
use std::path::Path;

use super::Ctx;
use crate::app::load_plan;
use crate::store::Store;
use crate::{exec, plan};

pub(crate) fn run(ctx: &Ctx, sweep: &Path, json: bool, dot: bool) -> anyhow::Result<u8> {
    let store = Store::open(&ctx.cache)?;
    let (s, plan) = load_plan(&store, sweep, &ctx.overrides)?;
    let st = plan::statuses(&plan, &store);
    if json {
        println!("{}", plan::render::json(&plan, &st));
    } else if dot {
        print!("{}", plan::render::dot(&plan, &st));
    } else {
        print!("{}", plan::render::table(&plan, &st));
    }
    // Cached runs made under another inherited environment: said on stderr, beside any form.
    let cached = plan::drift::cached(&plan, &st, &store, None);
    eprint!(
        "{}",
        plan::inherited::drift_warning(&plan::inherited::drift(&s, &plan, &cached))
    );
    // And runs measured on a machine that differs from this one — unless the sweep's runs
    // have been Slurm jobs, whose nodes are not this (login) machine: each job's `apply
    // --deployment` says it there.
    if crate::slurm::SweepDir::new(&store, &s.name)
        .cluster_facts()
        .is_none()
    {
        eprint!(
            "{}",
            plan::machine::drift_warning(&plan::machine::drift(&s, &plan, &cached))
        );
    }
    // What apply would refuse, said now (after the plan, which is still shown).
    let used: BTreeSet<usize> = plan.runs.iter().map(|r| r.config.task).collect();
    if let Err(e) = exec::preflight::check(&s, Some(&used)) {
        eprint!("{}", crate::sweep::diag::render_for_stderr(&e));
        eprintln!("apply would run nothing: fix the input(s) above");
        return Ok(2);
    }
    Ok(0)
}
