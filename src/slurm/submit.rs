//! Submitting deployments and the report as Slurm jobs (see the parent module).

use super::*;

/// Everything a submission needs to know.
pub(crate) struct Submit<'a> {
    pub sweep: &'a Sweep,
    pub plan: &'a Plan,
    pub status: &'a [Status],
    pub settings: &'a SlurmSettings,
    /// This bench360 (the jobs run the same path: shared installation).
    pub exe: PathBuf,
    pub cache: PathBuf,
    pub sweep_file: PathBuf,
    /// The command line's `--set` / `--only`, passed on to every job.
    pub overrides: &'a crate::sweep::Overrides,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Submitted {
    pub what: String,
    pub job_id: String,
    pub nodes: usize,
    pub after: Vec<String>,
    pub log: PathBuf,
}

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub submitted: Vec<Submitted>,
    /// Deployments with work whose job is still queued or running: (label, job id, state,
    /// whether the job was submitted for other keys, i.e. an earlier version of the sweep).
    pub kept: Vec<(String, String, String, bool)>,
    /// The report job that will run after the deployments (new or kept).
    pub report: Option<Submitted>,
    pub report_kept: Option<(String, JobState)>,
    /// Pending report jobs replaced by one that also waits for the new jobs.
    pub superseded: Vec<String>,
    /// Nodes that cannot run, with why.
    pub blocked: Vec<(String, String)>,
}

impl Outcome {
    /// Every job the sweep now waits on (for `--wait`): (id, what).
    pub fn jobs(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .submitted
            .iter()
            .map(|s| (s.job_id.clone(), s.what.clone()))
            .chain(self.kept.iter().map(|k| (k.1.clone(), k.0.clone())))
            .collect();
        if let Some(r) = &self.report {
            v.push((r.job_id.clone(), "report".into()));
        }
        if let Some((id, _)) = &self.report_kept {
            v.push((id.clone(), "report".into()));
        }
        v
    }
}

/// POSIX shell single quoting.
pub(super) fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@,+".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Slurm expands `%` in file names (`%j` = job id): a literal one is `%%`.
pub(super) fn slurm_path(p: &Path) -> String {
    p.display().to_string().replace('%', "%%")
}

/// Set by a job script bench360 wrote to the job's id: what tells a job of a sweep from any
/// other process with `SLURM_JOB_ID` (a shell in `salloc`, an `srun` step).
pub(crate) const JOB_MARK: &str = "BENCH360_SLURM_JOB";

/// How the name of every job bench360 submits begins.
pub(crate) const JOB_NAME_PREFIX: &str = "b360-";

pub(super) fn batch_script(argv: &[String], what: &str, sweep: &str) -> String {
    let clean = |s: &str| s.replace(|c: char| c.is_control(), " ");
    format!(
        "#!/bin/sh\n# bench360: {} of sweep {}\n{JOB_MARK}=\"$SLURM_JOB_ID\"\nexport {JOB_MARK}\nexec {}\n",
        clean(what),
        clean(sweep),
        argv.iter()
            .map(|a| sh_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Engines whose servers want a GPU; without `gpus` or `--gres`, their job gets none.
pub(super) const GPU_ENGINES: &[&str] = &["vllm", "sglang", "tgi", "lmdeploy"];

impl Submit<'_> {
    fn common_args(&self, job_name: &str, after: &[String]) -> Vec<String> {
        let dir = SweepDir::at(&self.cache, &self.plan.sweep);
        let mut a = vec![
            format!("--job-name={job_name}"),
            format!("--output={}/%j.out", slurm_path(&dir.root().join("logs"))),
            format!(
                "--chdir={}",
                slurm_path(self.sweep_file.parent().unwrap_or(Path::new("/")))
            ),
            // The sweep's `${VAR}`s (engine and model paths) are read in the job.
            "--export=ALL".to_string(),
        ];
        let s = self.settings;
        for (flag, v) in [
            ("partition", &s.partition),
            ("account", &s.account),
            ("qos", &s.qos),
            ("time", &s.time),
            ("mem", &s.mem),
        ] {
            if let Some(v) = v {
                a.push(format!("--{flag}={v}"));
            }
        }
        if !after.is_empty() {
            a.push(format!("--dependency=afterany:{}", after.join(":")));
        }
        a
    }

    fn deployment_args(&self, d: usize, job_name: &str, after: &[String]) -> Vec<String> {
        let mut a = self.common_args(job_name, after);
        let engine = &self.sweep.engines[self.plan.deployments[d].at.engine];
        let gres = match &self.settings.gres {
            Some(g) if g == "none" => None,
            Some(g) => Some(g.clone()),
            None => engine
                .gpus
                .as_ref()
                .filter(|g| !g.is_empty())
                .map(|g| format!("gpu:{}", g.len())),
        };
        if let Some(g) = gres {
            a.push(format!("--gres={g}"));
        }
        if let Some(c) = self.settings.cpus {
            a.push(format!("--cpus-per-task={c}"));
        }
        a.extend(self.settings.sbatch_args.iter().cloned());
        a
    }

    fn report_args(&self, job_name: &str, after: &[String]) -> Vec<String> {
        let mut a = self.common_args(job_name, after);
        a.extend(self.settings.sbatch_args.iter().cloned());
        a
    }

    fn base_argv(&self) -> Vec<String> {
        let mut v = vec![
            self.exe.display().to_string(),
            "--cache".into(),
            self.cache.display().to_string(),
        ];
        // The jobs see the sweep as this apply did.
        v.extend(self.overrides.as_args());
        v
    }

    /// Decides what must run, submits it, records it. Jobs submitted before an error stay
    /// recorded (the next apply keeps them).
    pub fn run(
        &self,
        sched: &dyn Scheduler,
        say: &mut dyn FnMut(&str),
    ) -> Result<Outcome, SlurmError> {
        let plan = self.plan;
        // The cache by its absolute path: the recorded log paths are the jobs'.
        let dir = SweepDir::at(&self.cache, &plan.sweep);
        let _lock = dir.lock(say)?;
        let records = dir.records();
        let ids: Vec<String> = records.iter().map(|r| r.job_id.clone()).collect();
        let states = sched.query(&ids).map_err(|e| SlurmError::Step {
            step: "cannot ask Slurm about the sweep's jobs; nothing submitted".into(),
            source: Box::new(e),
            so_far: String::new(),
        })?;
        let mut out = Outcome::default();
        self.deployments(sched, &dir, &states, &mut out)?;
        self.report(sched, &dir, &states, &mut out)?;
        Ok(out)
    }

    /// One job per deployment with work, unless its recorded job is still active (kept).
    /// Deployments with the same key share the deployment lock: the second waits for the first.
    fn deployments(
        &self,
        sched: &dyn Scheduler,
        dir: &SweepDir,
        states: &BTreeMap<String, JobInfo>,
        out: &mut Outcome,
    ) -> Result<(), SlurmError> {
        let plan = self.plan;
        let active = |id: &str| states.get(id).filter(|i| i.is_active());
        let mut by_key: BTreeMap<String, String> = BTreeMap::new();
        for (d, dep) in plan.deployments.iter().enumerate() {
            let nodes: Vec<_> = plan
                .deployment_nodes(d)
                .into_iter()
                .filter(|&i| plan.graph[i].kind != NodeKind::Warmup)
                .collect();
            for &i in &nodes {
                if let Status::Blocked { why } = &self.status[i.index()] {
                    out.blocked.push((plan.graph[i].label.clone(), why.clone()));
                }
            }
            let to_run = nodes
                .iter()
                .filter(|&&i| self.status[i.index()].will_run())
                .count();
            if to_run == 0 {
                continue;
            }
            let key = plan.graph[dep.coldstart].key.clone();
            let previous = dir.deployment(&dep.label);
            if let Some((p, info)) = previous
                .as_ref()
                .and_then(|p| Some((p, active(&p.job_id)?)))
            {
                out.kept.push((
                    dep.label.clone(),
                    p.job_id.clone(),
                    info.state.to_string(),
                    p.key.as_deref() != Some(key.as_str()),
                ));
                continue;
            }
            let after: Vec<String> = by_key.get(&key).cloned().into_iter().collect();
            let job_name = format!("{JOB_NAME_PREFIX}{}-{}", dir_name(&plan.sweep), &key[..8]);
            let args = self.deployment_args(d, &job_name, &after);
            let mut argv = self.base_argv();
            argv.extend([
                "apply".into(),
                self.sweep_file.display().to_string(),
                "--deployment".into(),
                dep.label.clone(),
            ]);
            let script = batch_script(&argv, &format!("deployment {}", dep.label), &plan.sweep);
            let job_id = sched
                .submit(&args, &script)
                .map_err(step(format!("cannot submit deployment {}", dep.label), out))?;
            by_key.insert(key.clone(), job_id.clone());
            let rec = JobRecord {
                what: dep.label.clone(),
                key: Some(key),
                nodes_to_run: to_run,
                ..self.record(dir, &job_id, job_name, argv, args, after.clone(), previous)
            };
            dir.write(&rec)
                .map_err(step(format!("deployment {}", dep.label), out))?;
            out.submitted.push(Submitted {
                what: dep.label.clone(),
                job_id,
                nodes: to_run,
                after,
                log: rec.log,
            });
        }
        Ok(())
    }

    /// The report job: after every job that may still change the cache. A pending report
    /// job is replaced by one that also waits for the new jobs; a running one is kept.
    fn report(
        &self,
        sched: &dyn Scheduler,
        dir: &SweepDir,
        states: &BTreeMap<String, JobInfo>,
        out: &mut Outcome,
    ) -> Result<(), SlurmError> {
        let plan = self.plan;
        let active = |id: &str| states.get(id).filter(|i| i.is_active());
        let old_report = dir.report();
        let old_active = old_report
            .as_ref()
            .and_then(|r| active(&r.job_id).map(|i| (r.job_id.clone(), i.state.clone())));
        let report_needed = self.status[plan.report.index()].will_run();
        let nothing_runnable = out.submitted.is_empty() && out.kept.is_empty();
        let submit_report = if !out.submitted.is_empty() {
            true
        } else if nothing_runnable {
            // Everything is cached (or blocked, which no job can change).
            report_needed && out.blocked.is_empty() && old_active.is_none()
        } else {
            old_active.is_none()
        };
        if !submit_report {
            out.report_kept = old_active;
            return Ok(());
        }
        if let Some((id, state)) = &old_active {
            // A pending report job would report before the new jobs end: replace it. A running
            // one finishes; the new one reports again afterwards.
            if *state == super::JobState::Pending {
                sched.cancel(std::slice::from_ref(id)).map_err(step(
                    format!("cannot cancel the superseded report job {id}"),
                    out,
                ))?;
                out.superseded.push(id.clone());
            }
        }
        let after: Vec<String> = out
            .submitted
            .iter()
            .map(|s| s.job_id.clone())
            .chain(out.kept.iter().map(|k| k.1.clone()))
            .collect();
        let job_name = format!("{JOB_NAME_PREFIX}{}-report", dir_name(&plan.sweep));
        let args = self.report_args(&job_name, &after);
        let mut argv = self.base_argv();
        argv.extend(["report".into(), self.sweep_file.display().to_string()]);
        let script = batch_script(&argv, "report", &plan.sweep);
        let job_id = sched
            .submit(&args, &script)
            .map_err(step("cannot submit the report job", out))?;
        let rec = JobRecord {
            what: "report".into(),
            key: Some(plan.graph[plan.report].key.clone()),
            nodes_to_run: 0,
            ..self.record(
                dir,
                &job_id,
                job_name,
                argv,
                args,
                after.clone(),
                old_report,
            )
        };
        dir.write(&rec)?;
        out.report = Some(Submitted {
            what: "report".into(),
            job_id,
            nodes: 0,
            after,
            log: rec.log,
        });
        Ok(())
    }

    /// The record of a job just submitted (its `what`, `key` and node count set by the
    /// caller), carrying the earlier jobs of the same deployment.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        dir: &SweepDir,
        job_id: &str,
        job_name: String,
        command: Vec<String>,
        sbatch_args: Vec<String>,
        after: Vec<String>,
        previous: Option<JobRecord>,
    ) -> JobRecord {
        let mut previous_jobs = previous
            .map(|p| {
                let mut v = p.previous_jobs;
                v.push(p.job_id);
                v
            })
            .unwrap_or_default();
        previous_jobs.dedup();
        JobRecord {
            sweep: self.plan.sweep.clone(),
            what: String::new(),
            key: None,
            job_id: job_id.to_string(),
            job_name,
            submitted_at: now_rfc3339(),
            submitted_by: format!("pid {} on {}", std::process::id(), host::hostname()),
            command,
            sbatch_args,
            log: dir.log_path(job_id),
            nodes_to_run: 0,
            after,
            previous_jobs,
        }
    }
}

/// A failed step of a submission, saying what had been submitted before it (those jobs stay
/// recorded).
fn step<'o>(
    what: impl Into<String> + 'o,
    out: &'o Outcome,
) -> impl FnOnce(SlurmError) -> SlurmError + 'o {
    move |e| SlurmError::Step {
        step: what.into(),
        source: Box::new(e),
        so_far: submitted_so_far(out),
    }
}

pub(super) fn submitted_so_far(out: &Outcome) -> String {
    if out.submitted.is_empty() {
        String::new()
    } else {
        format!(
            " (submitted before this: {}; they are recorded)",
            out.submitted
                .iter()
                .map(|s| format!("job {} for {}", s.job_id, s.what))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// A warning for deployments of GPU engines that get no GPU.
pub(crate) fn gpu_warnings(sweep: &Sweep, plan: &Plan, settings: &SlurmSettings) -> Vec<String> {
    if settings.gres.is_some() {
        return Vec::new();
    }
    plan.deployments
        .iter()
        .filter(|d| {
            let e = &sweep.engines[d.at.engine];
            e.gpus.is_none() && GPU_ENGINES.contains(&e.kind.value.as_str())
                && !matches!(e.launch, Launch::Endpoint { .. })
        })
        .map(|d| {
            format!(
                "deployment {} ({} engine) declares no `gpus` and no --gres is given: its job gets no GPU",
                d.label, sweep.engines[d.at.engine].kind.value
            )
        })
        .collect()
}
