//! The application's pipeline, shared by the commands: sweep file → facts → sealed plan
//! (`load_plan_as`, `plan_for`), the inputs checked before anything runs (`load_datasets`),
//! and the containers made ready before planning (`prepare_containers`).

use std::collections::BTreeSet;
use std::path::Path;

use crate::store::Store;
use crate::{engine, exec, plan, record, slurm, spec, sweep};

/// Removes orphaned containers and pulls the images of docker engines that are missing
/// (or whose policy is `always`). Returns each image's pull: seconds taken or the cause.
pub(crate) async fn prepare_containers(
    sweep: &spec::Sweep,
    only_engine: Option<&str>,
) -> std::collections::BTreeMap<String, Result<f64, engine::EngineError>> {
    let mut pulls = std::collections::BTreeMap::new();
    let images: Vec<(String, spec::PullPolicy)> = sweep
        .engines
        .iter()
        .filter(|e| only_engine.is_none_or(|o| o == e.name.value))
        .filter_map(|e| match &e.launch {
            spec::Launch::Docker {
                image, tag, pull, ..
            } => Some((engine::docker::reference(image, tag), *pull)),
            _ => None,
        })
        .collect();
    if images.is_empty() {
        return pulls;
    }
    let d = match engine::docker::connect().await {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}: docker engines cannot run");
            return pulls;
        }
    };
    match engine::docker::remove_orphans(&d).await {
        Ok(removed) => {
            for name in removed {
                eprintln!("removed orphaned container {name} (its apply is gone)");
            }
        }
        Err(e) => eprintln!("{e}"),
    }
    let mp = indicatif::MultiProgress::new();
    for (reference, policy) in images {
        if pulls.contains_key(&reference) {
            continue;
        }
        let present = matches!(
            engine::docker::inspect_local(&d, &reference).await,
            Ok(Some(_))
        );
        if present && policy == spec::PullPolicy::Missing {
            continue;
        }
        eprintln!("pulling {reference}");
        let t0 = std::time::Instant::now();
        let r = engine::docker::pull(&d, &reference, &mp)
            .await
            .map(|()| t0.elapsed().as_secs_f64());
        if let Err(e) = &r {
            eprintln!("{e}");
        }
        pulls.insert(reference, r);
    }
    pulls
}

/// Whose facts key a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// This machine's: what a local apply runs here.
    Local,
    /// The Slurm cluster's (machines and engine artifacts its jobs recorded), when the sweep
    /// has run there; else this machine's. For looking at results: status, report, gc.
    ClusterIfRan,
    /// The cluster's: what `apply --executor slurm` submits.
    Cluster,
}

/// Sweep → facts → sealed plan.
pub(crate) fn load_plan(store: &Store, path: &Path) -> anyhow::Result<(spec::Sweep, plan::Plan)> {
    load_plan_as(store, path, View::Local)
}

pub(crate) fn load_plan_as(
    store: &Store,
    path: &Path,
    view: View,
) -> anyhow::Result<(spec::Sweep, plan::Plan)> {
    let (sweep, _) = sweep::load(path)?;
    let plan = plan_for(store, &sweep, view)?;
    Ok((sweep, plan))
}

/// Facts → sealed plan, for a sweep already parsed (each command parses its sweep once).
pub(crate) fn plan_for(
    store: &Store,
    sweep: &spec::Sweep,
    view: View,
) -> anyhow::Result<plan::Plan> {
    let mut facts = plan::facts::gather(store, sweep);
    if view != View::Local {
        let cf = slurm::SweepDir::new(store, &sweep.name).cluster_facts();
        if view == View::Cluster || cf.is_some() {
            slurm::cluster_view(&mut facts, sweep, cf.as_ref());
        }
    }
    Ok(plan::build(sweep, &facts)?)
}

/// Everything the plan's runs read is checked before any engine starts (or any job is
/// submitted): datasets line by line, replay traces, scorer commands, model paths. Problems
/// are printed with their file and line, and nothing runs. The samples go to the executor,
/// so nothing is read twice.
pub(crate) fn load_datasets(
    sweep: &spec::Sweep,
    plan: &plan::Plan,
) -> Option<std::collections::BTreeMap<usize, std::sync::Arc<Vec<record::Sample>>>> {
    let used: BTreeSet<usize> = plan.runs.iter().map(|r| r.config.task).collect();
    match exec::preflight::check(sweep, Some(&used)) {
        Ok(c) => Some(c.samples),
        Err(problems) => {
            for p in &problems {
                eprintln!("error: {p}");
            }
            eprintln!("nothing was run: fix the input(s) above and apply again");
            None
        }
    }
}
