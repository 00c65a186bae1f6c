//! `bench360 apply SWEEP` (here, or `--executor slurm`) and `bench360 run` (an implicit sweep,
//! applied the same way).

use std::path::Path;

use serde::Serialize;

use super::{emit, first_line, Ctx, Outcome, Text};
use crate::app::{load_datasets, plan_for, prepare_containers, View};
use crate::cli::{Executor, RunArgs, SlurmArgs};
use crate::store::Store;
use crate::{exec, plan, slurm, sweep};

/// How to apply: the flags of `apply` besides the sweep.
pub(crate) struct How {
    pub reuse_connections: bool,
    pub executor: Executor,
    pub deployment: Option<String>,
    pub wait: bool,
    pub max_parallel: Option<u32>,
    pub slurm: SlurmArgs,
}

impl How {
    fn here() -> How {
        How {
            reuse_connections: false,
            executor: Executor::Local,
            deployment: None,
            wait: false,
            max_parallel: None,
            slurm: SlurmArgs::default(),
        }
    }
}

/// What a local apply did: its `--json` output.
#[derive(Debug, Serialize)]
pub(crate) struct Applied {
    pub sweep: String,
    pub exit_code: u8,
    pub ran: Vec<String>,
    pub cached: usize,
    pub failed: Vec<Failed>,
    pub blocked: Vec<Blocked>,
    pub interrupted: bool,
    pub elapsed_s: f64,
    pub report: Option<String>,
    #[serde(skip)]
    pub report_table: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Failed {
    pub label: String,
    pub cause: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct Blocked {
    pub label: String,
    pub why: String,
}

impl Applied {
    fn of(sweep: &str, s: exec::Summary) -> Applied {
        Applied {
            sweep: sweep.to_string(),
            exit_code: s.exit_code() as u8,
            failed: s
                .failed
                .into_iter()
                .map(|(label, cause)| Failed { label, cause })
                .collect(),
            blocked: s
                .blocked
                .into_iter()
                .map(|(label, why)| Blocked { label, why })
                .collect(),
            ran: s.ran,
            cached: s.cached,
            interrupted: s.interrupted,
            elapsed_s: s.elapsed_s,
            report: s.report.map(|p| p.display().to_string()),
            report_table: s.report_table,
        }
    }
}

impl Outcome for Applied {
    fn exit_code(&self) -> u8 {
        self.exit_code
    }

    fn render(&self, t: &mut Text) {
        if let Some(table) = &self.report_table {
            t.out(table);
        }
        t.err(format!(
            "{} ran, {} cached, {} failed, {} blocked in {:.1} s{}",
            self.ran.len(),
            self.cached,
            self.failed.len(),
            self.blocked.len(),
            self.elapsed_s,
            if self.interrupted {
                " (interrupted; run apply again to resume)"
            } else {
                ""
            }
        ));
        for f in &self.failed {
            t.err(format!("  failed  {}: {}", f.label, first_line(&f.cause)));
        }
        for b in &self.blocked {
            t.err(format!("  blocked {}: {}", b.label, first_line(&b.why)));
        }
        if let Some(p) = &self.report {
            t.err(format!("report: {p}"));
        }
    }
}

pub(crate) fn run(ctx: &Ctx, path: &Path, json: bool, how: How) -> anyhow::Result<u8> {
    let moved = "--reuse-connections is now a sweep field: `defaults { connections \"reuse\" }`";
    if how.executor == Executor::Slurm {
        anyhow::ensure!(
            how.deployment.is_none(),
            "--deployment runs one deployment on this machine; it does not combine with --executor slurm (each Slurm job runs `apply --deployment`)"
        );
        anyhow::ensure!(!how.reuse_connections, "{moved}");
        return super::slurm::apply(ctx, path, &how.slurm, how.wait);
    }
    anyhow::ensure!(
        !how.reuse_connections,
        "{moved} (it changes what is measured, so it keys the runs)"
    );
    let given = how.slurm.given();
    anyhow::ensure!(
        given.is_empty(),
        "{} only appl{} with --executor slurm",
        given.join(", "),
        if given.len() == 1 { "ies" } else { "y" }
    );
    anyhow::ensure!(!how.wait, "--wait only applies with --executor slurm");
    anyhow::ensure!(
        how.deployment.is_none() || how.max_parallel.is_none(),
        "--max-parallel schedules a sweep's deployments; --deployment runs one"
    );
    local(ctx, path, json, how.deployment.as_deref(), how.max_parallel)
}

/// Applies a sweep on this machine (all of it, or one deployment).
fn local(
    ctx: &Ctx,
    path: &Path,
    json: bool,
    deployment: Option<&str>,
    max_parallel: Option<u32>,
) -> anyhow::Result<u8> {
    let store = Store::open(&ctx.cache)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (sweep, _) = sweep::load(path, &ctx.overrides)?;
    // --deployment: found by label, which (unlike keys) does not change when an image is
    // pulled below.
    let only = match deployment {
        Some(sel) => {
            let p = plan_for(&store, &sweep, View::Local)?;
            let d = p.find_deployment(sel)?;
            let engine = sweep.engines[p.deployments[d].at.engine].name.value.clone();
            Some((p.deployments[d].label.clone(), engine))
        }
        None => None,
    };
    // Containers first: orphans of a killed apply go, images are pulled (or found), so that
    // the plan is keyed by the images' ids.
    let pulls = rt.block_on(prepare_containers(
        &sweep,
        only.as_ref().map(|(_, e)| e.as_str()),
    ));
    let plan = plan_for(&store, &sweep, View::Local)?;
    if ctx.verbose {
        let st = plan::statuses(&plan, &store);
        for &i in &plan.order {
            if let plan::Status::WillRun { why } = &st[i.index()] {
                eprintln!("will run {}: {why}", plan.graph[i].label);
            }
        }
    }
    let Some(samples) = load_datasets(&sweep, &plan) else {
        return Ok(2);
    };
    let only = only
        .map(|(label, _)| plan.find_deployment(&label))
        .transpose()?;
    let job = only.and_then(|d| slurm::InJob::begin(&store, &plan, Some(d)));
    // Deployments on disjoint devices at once, each its own `apply --deployment` process.
    let max = max_parallel
        .or(sweep.max_parallel)
        .map_or(usize::MAX, |m| m as usize);
    let status = plan::statuses(&plan, &store);
    // Said once: by this apply, or for its deployment by one run alone (`--deployment`, a
    // Slurm job) — not by the children of a parallel apply, whose parent said it.
    if std::env::var_os(exec::parallel::PARENT_VAR).is_none() {
        let cached = plan::drift::cached(&plan, &status, &store, only);
        let drift = plan::inherited::drift(&sweep, &plan, &cached);
        eprint!("{}", plan::inherited::drift_warning(&drift));
        let elsewhere = plan::machine::drift(&sweep, &plan, &cached);
        eprint!("{}", plan::machine::drift_warning(&elsewhere));
    }
    let parallel = only.is_none() && exec::parallel::worth_it(&sweep, &plan, &status, max);
    let summary = rt.block_on(async {
        let cancel = exec::interrupts();
        if parallel {
            let mut argv = vec!["--cache".to_string(), ctx.cache.display().to_string()];
            argv.extend(ctx.overrides.as_args());
            if ctx.quiet {
                argv.push("--quiet".into());
            }
            let exe = std::env::current_exe().unwrap_or_else(|_| "bench360".into());
            return exec::parallel::apply(
                &exe, &argv, path, &sweep, &plan, &store, &status, max, cancel,
            )
            .await;
        }
        let opts = exec::Options {
            reuse_connections: sweep.defaults.reuse_connections,
            pulls,
            only,
            samples,
        };
        exec::Executor::new(&sweep, &plan, &store, opts, cancel)
            .apply()
            .await
    });
    let code = emit(&Applied::of(&plan.sweep, summary), json)?;
    if let Some(job) = job {
        job.end(code);
    }
    Ok(code)
}

/// `bench360 run`: the implicit sweep is written to `CACHE/adhoc/NAME.kdl` (whole or not at
/// all, so the same settings find their cache again) and applied here.
pub(crate) fn adhoc(ctx: &Ctx, args: &RunArgs) -> anyhow::Result<u8> {
    let (name, text) = crate::app::adhoc_sweep(args)?;
    let dir = ctx.cache.join("adhoc");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.kdl"));
    crate::store::write_atomic(&path, text.as_bytes())?;
    if !ctx.quiet {
        eprintln!("implicit sweep: {}", path.display());
    }
    run(ctx, &path, args.json, How::here())
}
