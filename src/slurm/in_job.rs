//! Inside a job: the record of what a Slurm job ran (see the parent module).

use super::*;

/// The job's own record of a deployment (or report) job, kept while it runs; `end` completes
/// it. Only inside a Slurm job bench360 submitted: `SLURM_JOB_ID` set, and its script's
/// [`JOB_MARK`] naming the same job (or, for a job submitted before scripts carried it, its
/// name starting with [`JOB_NAME_PREFIX`]) — a shell in `salloc` or an `srun` step has
/// `SLURM_JOB_ID` too, and is no job of the sweep (its `report` would end 0 with runs
/// missing, its `apply` would write job records that `plan` reads as the cluster's).
pub(crate) struct InJob {
    dir: SweepDir,
    run: JobRun,
}

impl InJob {
    pub fn begin(store: &Store, plan: &Plan, deployment: Option<usize>) -> Option<InJob> {
        let job_id = std::env::var("SLURM_JOB_ID").ok()?;
        // A job submitted before its script carried the mark is known by the name bench360
        // gave it.
        let marked = std::env::var(JOB_MARK).ok().as_deref() == Some(job_id.as_str());
        let named = std::env::var("SLURM_JOB_NAME").is_ok_and(|n| n.starts_with(JOB_NAME_PREFIX));
        if !(marked || named) {
            return None;
        }
        let dir = SweepDir::new(store, &plan.sweep);
        let (what, machine, artifacts) = match deployment {
            Some(d) => {
                let dep = &plan.deployments[d];
                let machine: BTreeMap<String, String> = plan.graph[dep.coldstart]
                    .inputs
                    .iter()
                    .filter_map(|(k, v)| Some((k.strip_prefix("machine.")?.to_string(), v.clone())))
                    .collect();
                let engine = plan.graph[dep.pull]
                    .label
                    .trim_start_matches("pull ")
                    .to_string();
                let mut artifacts = BTreeMap::new();
                if plan.graph[dep.pull].blocked_by.is_none() {
                    if let Some(a) = plan.graph[dep.pull].inputs.get("engine.artifact") {
                        if !a.starts_with("image-not-pulled:") {
                            artifacts.insert(engine, a.clone());
                        }
                    }
                }
                (dep.label.clone(), machine, artifacts)
            }
            None => ("report".to_string(), BTreeMap::new(), BTreeMap::new()),
        };
        let run = JobRun {
            job_id,
            sweep: plan.sweep.clone(),
            what,
            host: host::hostname(),
            pid: std::process::id(),
            started_at: now_rfc3339(),
            finished_at: None,
            exit_code: None,
            machine,
            artifacts,
        };
        if let Err(e) = dir.write_run(&run) {
            eprintln!("warning: {e}");
        }
        Some(InJob { dir, run })
    }

    pub fn end(mut self, exit_code: u8) {
        self.run.finished_at = Some(now_rfc3339());
        self.run.exit_code = Some(exit_code);
        if let Err(e) = self.dir.write_run(&self.run) {
            eprintln!("warning: {e}");
        }
    }
}
