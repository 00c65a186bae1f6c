//! The application's pipeline, shared by the commands: sweep file → facts → sealed plan
//! (`load_plan_as`, `plan_for`), the inputs checked before anything runs (`load_datasets`),
//! and the containers made ready before planning (`prepare_containers`).

use std::collections::BTreeSet;
use std::path::Path;

use crate::store::Store;
use crate::sweep::Overrides;
use crate::{engine, exec, plan, record, slurm, spec, sweep};

/// Removes orphaned containers and pulls the images of docker engines that are missing
/// (or whose policy is `always`). Returns each image's pull: seconds taken or the cause.
pub(crate) async fn prepare_containers(
    sweep: &spec::Sweep,
    only_engine: Option<&str>,
) -> std::collections::BTreeMap<String, Result<f64, engine::EngineError>> {
    let mut pulls = std::collections::BTreeMap::new();
    let mut images: Vec<(String, spec::PullPolicy)> = sweep
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
    // An engine block's setting combinations (consecutive) share one image.
    images.dedup_by(|a, b| a.0 == b.0);
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
pub(crate) fn load_plan(
    store: &Store,
    path: &Path,
    overrides: &Overrides,
) -> anyhow::Result<(spec::Sweep, plan::Plan)> {
    load_plan_as(store, path, View::Local, overrides)
}

pub(crate) fn load_plan_as(
    store: &Store,
    path: &Path,
    view: View,
    overrides: &Overrides,
) -> anyhow::Result<(spec::Sweep, plan::Plan)> {
    let (sweep, _) = sweep::load(path, overrides)?;
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
        Err(e) => {
            eprint!("{}", sweep::diag::render_for_stderr(&e));
            eprintln!("nothing was run: fix the input(s) above and apply again");
            None
        }
    }
}

/// A string as a KDL quoted string.
fn kdl_str(s: &str) -> anyhow::Result<String> {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => anyhow::bail!("{s:?} holds a control character"),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

/// `bench360 run`: the implicit sweep, as a sweep file's text, and its name. Everything the
/// command line decides is in the file, so the file alone reproduces the measurement.
pub(crate) fn adhoc_sweep(a: &crate::cli::RunArgs) -> anyhow::Result<(String, String)> {
    anyhow::ensure!(
        a.url.starts_with("http://") || a.url.starts_with("https://"),
        "--url must start with http:// or https:// (got {:?})",
        a.url
    );
    anyhow::ensure!(
        spec::catalog::lookup(&a.kind).is_some(),
        "--kind {:?} is not an engine kind ({})",
        a.kind,
        spec::catalog::names().collect::<Vec<_>>().join(", ")
    );
    anyhow::ensure!(
        a.input_tokens >= 1 && a.output_tokens >= 1,
        "--input-tokens and --output-tokens must be at least 1"
    );
    anyhow::ensure!(
        a.prompts >= 1 && a.turns >= 1,
        "--prompts and --turns must be at least 1"
    );
    let scenario = match (a.concurrency, a.rate) {
        (Some(c), None) => {
            anyhow::ensure!(c >= 1, "--concurrency must be at least 1");
            let requests = a
                .requests
                .unwrap_or_else(|| (8 * u64::from(c)).max(u64::from(a.prompts * a.turns)));
            format!("scenario \"load\" {{\n    kind \"concurrency\"\n    concurrency {c}\n    requests {requests}\n}}\n")
        }
        (None, Some(r)) => {
            anyhow::ensure!(
                r > 0.0 && r.is_finite(),
                "--rate must be a positive number of requests per second"
            );
            anyhow::ensure!(
                a.duration > 0.0 && a.duration.is_finite(),
                "--duration must be positive"
            );
            anyhow::ensure!(
                a.requests.is_none(),
                "--requests is for --concurrency; an open-loop run lasts --duration"
            );
            format!(
                "scenario \"load\" {{\n    kind \"rate\"\n    rate {r}\n    duration {}\n}}\n",
                a.duration
            )
        }
        (None, None) => anyhow::bail!(
            "say the load: --concurrency N (closed loop) or --rate R (requests/s, open loop)"
        ),
        (Some(_), Some(_)) => unreachable!("clap refuses both"),
    };
    let mut task = format!(
        "task \"synthetic\" {{\n    kind \"synthetic\"\n    samples {}\n    input-tokens {}\n    output-tokens {}\n",
        a.prompts, a.input_tokens, a.output_tokens
    );
    if a.shared_prefix > 0 {
        task.push_str(&format!("    shared-prefix {}\n", a.shared_prefix));
    }
    if a.turns > 1 {
        task.push_str(&format!("    turns {}\n", a.turns));
    }
    if a.completions {
        task.push_str("    mode \"completion\"\n");
    }
    task.push_str("}\n");
    let mut engine = format!(
        "engine \"server\" {{\n    kind {}\n    launcher \"endpoint\"\n    url {}\n    served-model {}\n",
        kdl_str(&a.kind)?,
        kdl_str(&a.url)?,
        kdl_str(&a.model)?
    );
    if let Some(v) = &a.api_key_env {
        engine.push_str(&format!("    api-key-env {}\n", kdl_str(v)?));
    }
    engine.push_str("}\n");
    let defaults = format!(
        "defaults {{\n    max-tokens {}\n    temperature 0.0\n    warmup {}\n{}}}\n",
        a.output_tokens,
        a.warmup,
        if a.stop_at_eos {
            ""
        } else {
            "    ignore-eos #true\n"
        }
    );
    let body = format!(
        "{defaults}model \"model\" {{\n    id {}\n}}\n{engine}{task}{scenario}",
        kdl_str(&a.model)?
    );
    let name = match &a.name {
        Some(n) => {
            anyhow::ensure!(
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                    && !n.starts_with('.'),
                "--name {n:?}: use letters, digits, '-', '_' and '.'"
            );
            n.clone()
        }
        None => format!(
            "run-{}",
            &blake3::hash(format!("{}\n{body}", a.seed).as_bytes()).to_hex()[..10]
        ),
    };
    let text = format!(
        "// Written by `bench360 run` (an implicit sweep): apply this file to measure again.\nsweep {} {{\n    seed {}\n}}\n{body}",
        kdl_str(&name)?,
        a.seed
    );
    Ok((name, text))
}
