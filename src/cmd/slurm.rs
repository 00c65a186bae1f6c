//! `bench360 apply --executor slurm [--wait]` and `bench360 cancel`: the sweep handed to
//! Slurm, one job per deployment with work and a report job after them.

use std::path::Path;

use serde::Serialize;

use super::{first_line, Ctx, Outcome, Text};
use crate::app::{load_datasets, load_plan_as, View};
use crate::cli::SlurmArgs;
use crate::store::Store;
use crate::{engine, exec, plan, slurm, sweep};

/// Submits what must run, then (with `--wait`) follows the jobs and ends like a local apply.
pub(crate) fn apply(ctx: &Ctx, path: &Path, args: &SlurmArgs, wait: bool) -> anyhow::Result<u8> {
    // Jobs run elsewhere: every path they get is absolute (and must be the same there).
    let cache = std::path::absolute(&ctx.cache)?;
    let store = Store::open(&cache)?;
    let sweep_file = std::path::absolute(path)?;
    let (sweep, plan) = load_plan_as(&store, path, View::Cluster, &ctx.overrides)?;
    if load_datasets(&sweep, &plan).is_none() {
        return Ok(2);
    }
    let status = plan::statuses(&plan, &store);
    let settings = slurm::merge(&sweep.slurm, args);
    for w in slurm::gpu_warnings(&sweep, &plan, &settings) {
        eprintln!("warning: {w}");
    }
    // The jobs inherit this environment (`--export=ALL`): compared as `apply` compares it.
    eprint!(
        "{}",
        plan::inherited::drift_warning(&plan::inherited::drift(
            &sweep,
            &plan,
            &plan::drift::cached(&plan, &status, &store, None)
        ))
    );
    let sched = slurm::SlurmCommands;
    let submit = slurm::Submit {
        sweep: &sweep,
        plan: &plan,
        status: &status,
        settings: &settings,
        exe: std::env::current_exe()?,
        cache: cache.clone(),
        sweep_file: sweep_file.clone(),
        overrides: &ctx.overrides,
    };
    let out = submit.run(&sched, &mut |l| eprintln!("{l}"))?;
    say_submitted(&out);
    let jobs = out.jobs();
    let dir = slurm::SweepDir::at(&cache, &sweep.name);
    if jobs.is_empty() {
        if out.blocked.is_empty() {
            eprintln!(
                "nothing to submit: every node of sweep {} is cached (report: {})",
                sweep.name,
                store.report_dir(&sweep.name).join("report.html").display()
            );
        } else {
            eprintln!("nothing to submit: every node that could run is cached; the blocked ones above cannot run");
        }
    } else {
        let again = |cmd: &str| {
            format!(
                "bench360 --cache {} {cmd} {}",
                cache.display(),
                sweep_file.display()
            )
        };
        eprintln!(
            "job logs: {}/<job id>.out\nwatch: {}\ncancel: {}",
            dir.root().join("logs").display(),
            again("status"),
            again("cancel"),
        );
    }
    if !wait {
        return Ok(u8::from(!out.blocked.is_empty()));
    }
    if !jobs.is_empty() {
        eprintln!(
            "waiting for {} job{} to leave the queue (Ctrl-C stops waiting; the jobs go on)",
            jobs.len(),
            super::plural(jobs.len())
        );
    }
    let ended = slurm::wait(&sched, &jobs, std::time::Duration::from_secs(2), &mut |l| {
        eprintln!("{l}")
    });
    for (id, what) in &jobs {
        let info = ended.get(id);
        if info.is_some_and(|i| i.state == slurm::JobState::Completed) {
            continue;
        }
        let log = dir.log_path(id);
        eprintln!(
            "job {id} ({what}) {}: log {}",
            info.map(slurm::describe)
                .unwrap_or_else(|| "is unknown to Slurm".into()),
            log.display()
        );
        let tail = engine::tail_of(&log, 5);
        if !tail.trim().is_empty() {
            eprintln!("{tail}");
        }
    }
    after_jobs(ctx, &store, path)
}

/// What `apply --executor slurm` submitted, kept and replaced, one line each.
fn say_submitted(out: &slurm::Outcome) {
    let after = |a: &[String]| {
        if a.is_empty() {
            String::new()
        } else {
            format!(", after job {}", a.join(", "))
        }
    };
    for s in &out.submitted {
        println!(
            "submitted job {} for deployment {} ({} node{} to run{})",
            s.job_id,
            s.what,
            s.nodes,
            super::plural(s.nodes),
            after(&s.after)
        );
    }
    for (label, id, state, stale) in &out.kept {
        println!(
            "kept job {id} for deployment {label} ({state}){}",
            if *stale {
                "; it was submitted for an earlier version of the sweep: apply again once it ends"
            } else {
                ""
            }
        );
    }
    for id in &out.superseded {
        println!(
            "cancelled pending report job {id} (replaced by one that also waits for the new jobs)"
        );
    }
    if let Some(r) = &out.report {
        let after = if r.after.is_empty() {
            String::new()
        } else {
            format!(
                " (after job {}, whatever their outcome)",
                r.after.join(", ")
            )
        };
        println!("submitted job {} for the report{after}", r.job_id);
    }
    if let Some((id, state)) = &out.report_kept {
        println!("kept job {id} for the report ({state})");
    }
    for (label, why) in &out.blocked {
        eprintln!("  blocked {label}: {}", first_line(why));
    }
}

/// Once the jobs have left the queue: the report table, what failed, the exit code — as a
/// local apply ends, read from the cache the jobs wrote.
fn after_jobs(ctx: &Ctx, store: &Store, path: &Path) -> anyhow::Result<u8> {
    let (sweep, plan) = load_plan_as(store, path, View::Cluster, &ctx.overrides)?;
    let st = plan::statuses(&plan, store);
    println!("{}", exec::build_report(store, &plan, &sweep).table);
    let (mut cached, mut failed, mut blocked, mut missing) = (0, Vec::new(), 0, 0);
    for &i in &plan.order {
        let n = &plan.graph[i];
        if n.kind == plan::NodeKind::Warmup {
            continue;
        }
        match &st[i.index()] {
            plan::Status::Cached => cached += 1,
            plan::Status::Blocked { .. } => blocked += 1,
            plan::Status::WillRun { why } if why.is_failure() => {
                failed.push((n.label.clone(), why.to_string()))
            }
            _ => missing += 1,
        }
    }
    eprintln!(
        "{cached} cached, {} failed, {blocked} blocked, {missing} not done",
        failed.len()
    );
    for (label, why) in &failed {
        eprintln!("  failed  {label}: {}", first_line(why));
    }
    let report = store.report_dir(&sweep.name).join("report.html");
    if report.exists() {
        eprintln!("report: {}", report.display());
    }
    Ok(u8::from(!failed.is_empty() || blocked > 0 || missing > 0))
}

/// What `cancel` did.
#[derive(Debug, Serialize)]
pub(crate) struct Cancelled {
    pub sweep: String,
    pub jobs: Vec<CancelledJob>,
}

#[derive(Debug, Serialize)]
pub(crate) struct CancelledJob {
    pub id: String,
    /// A deployment's label, or `report`.
    pub what: String,
    /// Its Slurm state before the cancel.
    pub was: String,
}

pub(crate) fn cancel(ctx: &Ctx, path: &Path) -> anyhow::Result<Cancelled> {
    let store = Store::open(&ctx.cache)?;
    let (sweep, _) = sweep::load(path, &ctx.overrides)?;
    let jobs = slurm::cancel(&store, &sweep.name, &slurm::SlurmCommands, &mut |l| {
        eprintln!("{l}")
    })?;
    Ok(Cancelled {
        sweep: sweep.name,
        jobs: jobs
            .into_iter()
            .map(|(id, what, was)| CancelledJob { id, what, was })
            .collect(),
    })
}

impl Outcome for Cancelled {
    fn exit_code(&self) -> u8 {
        0
    }

    fn render(&self, t: &mut Text) {
        if self.jobs.is_empty() {
            t.out(format!(
                "no job of sweep {} is queued or running",
                self.sweep
            ));
        }
        for j in &self.jobs {
            let what = if j.what == "report" {
                "the report".to_string()
            } else {
                format!("deployment {}", j.what)
            };
            t.out(format!("cancelled job {} for {what} (was {})", j.id, j.was));
        }
    }
}
