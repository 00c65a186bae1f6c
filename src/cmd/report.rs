//! `bench360 report SWEEP [--json]`: the report rebuilt from the cache alone.

use std::path::Path;

use serde::Serialize;

use super::{Ctx, Outcome, Text};
use crate::app::{load_plan_as, View};
use crate::store::Store;
use crate::{exec, report, slurm};

#[derive(Debug, Serialize)]
pub(crate) struct Reported {
    pub sweep: String,
    pub report: String,
    /// Every run of the plan finished (else some are missing or failed).
    pub complete: bool,
    pub runs: serde_json::Value,
    #[serde(skip)]
    table: String,
    /// Run as a Slurm report job: it did its work whatever is missing.
    #[serde(skip)]
    in_job: bool,
}

pub(crate) fn run(ctx: &Ctx, sweep: &Path) -> anyhow::Result<Reported> {
    let store = Store::open(&ctx.cache)?;
    let (sweep, plan) = load_plan_as(&store, sweep, View::ClusterIfRan, &ctx.overrides)?;
    let job = slurm::InJob::begin(&store, &plan, None);
    let files = exec::build_report(&store, &plan, &sweep);
    let (path, complete) = exec::write_report(&store, &plan, &files)?;
    let in_job = job.is_some();
    if let Some(job) = job {
        job.end(0);
    }
    Ok(Reported {
        sweep: plan.sweep.clone(),
        report: path.display().to_string(),
        complete,
        runs: report::summary_json(&files.summary),
        table: files.table,
        in_job,
    })
}

impl Outcome for Reported {
    /// Missing or failed runs: 1 (a Slurm report job ends 0: its job record and the report
    /// say what is missing, and the job itself did its work).
    fn exit_code(&self) -> u8 {
        u8::from(!self.complete && !self.in_job)
    }

    fn render(&self, t: &mut Text) {
        t.out(&self.table);
        t.err(format!(
            "report: {}{}",
            self.report,
            if self.complete {
                ""
            } else {
                " (some runs are missing or failed)"
            }
        ));
    }
}
