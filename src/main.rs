//! bench360: load sweep → plan → open store → apply → report. Errors become exit codes here:
//! 0 all done, 1 some node failed or is blocked, 2 bad input, 130 interrupted.

mod cli;
mod client;
mod engine;
mod exec;
mod plan;
mod report;
mod selfbench;
mod store;
mod sweep;
mod task;
mod telemetry;
mod trace;
mod workload;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use cli::{Cli, Command};
use store::Store;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Apply { .. }) {
        // Printing commands end quietly when their reader goes away (`bench360 plan | head`).
        // apply keeps Rust's default so a closed pipe cannot kill a sweep.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            print_error(err);
            ExitCode::from(2)
        }
    }
}

fn print_error(err: anyhow::Error) {
    use std::io::IsTerminal;
    match err.downcast::<sweep::SweepError>() {
        Ok(diag) => {
            let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            eprint!("{}", sweep::diag::render(&diag, color));
        }
        Err(err) => eprintln!("error: {err:#}"),
    }
}

/// Removes orphaned containers and pulls the images of docker engines that are missing
/// (or whose policy is `always`). Returns each image's pull: seconds taken or the cause.
async fn prepare_containers(
    sweep: &sweep::Sweep,
) -> std::collections::BTreeMap<String, Result<f64, String>> {
    let mut pulls = std::collections::BTreeMap::new();
    let images: Vec<(String, sweep::PullPolicy)> = sweep
        .engines
        .iter()
        .filter_map(|e| match &e.launch {
            sweep::Launch::Docker {
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
        if present && policy == sweep::PullPolicy::Missing {
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

/// Sweep → facts → sealed plan.
fn load_plan(store: &Store, path: &Path) -> anyhow::Result<(sweep::Sweep, plan::Plan)> {
    let (sweep, _) = sweep::load(path)?;
    let facts = store::facts::gather(store, &sweep);
    let plan = plan::build(&sweep, &facts).map_err(anyhow::Error::msg)?;
    Ok((sweep, plan))
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Validate { sweeps } => {
            let mut bad = 0;
            for p in &sweeps {
                match sweep::load(p) {
                    Ok((s, _)) => {
                        let n = plan::expand::configs(&s).len();
                        let d = plan::expand::deployments(&s).len();
                        println!(
                            "{}: ok ({n} run{} on {d} deployment{})",
                            p.display(),
                            if n == 1 { "" } else { "s" },
                            if d == 1 { "" } else { "s" }
                        );
                    }
                    Err(e) => {
                        bad += 1;
                        print_error(e);
                    }
                }
            }
            Ok(if bad > 0 { 2 } else { 0 })
        }
        Command::Plan { sweep, json, dot } => {
            let store = Store::open(&cli.cache)?;
            let (_, plan) = load_plan(&store, &sweep)?;
            let st = plan::statuses(&plan, &store);
            if json {
                println!("{}", plan::render::json(&plan, &st));
            } else if dot {
                print!("{}", plan::render::dot(&plan, &st));
            } else {
                print!("{}", plan::render::table(&plan, &st));
            }
            Ok(0)
        }
        Command::Explain { node, sweep } => {
            let store = Store::open(&cli.cache)?;
            match sweep {
                Some(path) => {
                    let (_, plan) = load_plan(&store, &path)?;
                    let st = plan::statuses(&plan, &store);
                    print!(
                        "{}",
                        plan::render::explain(&plan, &st, &node).map_err(anyhow::Error::msg)?
                    );
                }
                None => {
                    let recs: Vec<_> = store
                        .records()
                        .into_iter()
                        .filter(|r| r.key.starts_with(&node) || r.label == node)
                        .collect();
                    match recs.as_slice() {
                        [r] => {
                            println!("{}\n  key     {}\n  kind    {}\n  status  {}{}", r.label, r.key, r.kind, serde_json::to_value(r.status)?.as_str().unwrap_or(""), r.cause.as_ref().map(|c| format!(": {c}")).unwrap_or_default());
                            println!("  sweep   {}\n  started {} on {} (pid {})", r.sweep, r.started_at, r.host, r.pid);
                            println!("\nkey inputs (format {}):", plan::keys::KEY_FORMAT);
                            let w = r.inputs.keys().map(|k| k.len()).max().unwrap_or(0);
                            for (k, v) in &r.inputs {
                                println!("  {k:<w$}  {v}");
                            }
                            println!("\noutputs: {}", serde_json::to_string_pretty(&r.outputs)?);
                        }
                        [] => anyhow::bail!("no recorded node has a key starting with `{node}` or the label `{node}` (give --sweep to look in a plan)"),
                        many => anyhow::bail!("`{node}` matches {} recorded nodes; give more of the key", many.len()),
                    }
                }
            }
            Ok(0)
        }
        Command::Apply {
            sweep: path,
            reuse_connections,
        } => {
            let store = Store::open(&cli.cache)?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            // Containers first: orphans of a killed apply go, images are pulled (or found), so
            // that the plan is keyed by the images' ids.
            let (draft, _) = sweep::load(&path)?;
            let pulls = rt.block_on(prepare_containers(&draft));
            let (sweep, plan) = load_plan(&store, &path)?;
            // Every task's dataset is read and checked before any engine starts: a bad line
            // is reported with its file and line, and nothing runs.
            let used: BTreeSet<usize> = plan.runs.iter().map(|r| r.config.task).collect();
            let mut bad = false;
            for t in used {
                if let Err(e) = task::of(&sweep, t).load(sweep.seed) {
                    eprintln!("error: task `{}`: {e}", sweep.tasks[t].name.value);
                    bad = true;
                }
            }
            if bad {
                eprintln!("nothing was run: fix the dataset(s) above and apply again");
                return Ok(2);
            }
            let summary = rt.block_on(async {
                let (tx, cancel) = workload::Cancel::new();
                tokio::spawn(async move {
                    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
                    let mut n = 0;
                    loop {
                        tokio::select! {
                            _ = tokio::signal::ctrl_c() => {},
                            _ = term.recv() => {},
                        }
                        n += 1;
                        if n == 1 {
                            eprintln!("\ninterrupt: stopping gracefully (engines stopped, nothing half-recorded); press Ctrl-C again to force");
                            let _ = tx.send(true);
                        } else {
                            eprintln!("\ninterrupt: forced stop");
                            // Engines die with us (PR_SET_PDEATHSIG); records written so far are whole.
                            std::process::exit(130);
                        }
                    }
                });
                let ex = exec::Executor::new(&sweep, &plan, &store, exec::Options { reuse_connections, pulls }, cancel);
                ex.apply().await
            });
            if let Some(t) = &summary.report_table {
                println!("{t}");
            }
            eprintln!(
                "{} ran, {} cached, {} failed, {} blocked in {:.1} s{}",
                summary.ran.len(),
                summary.cached,
                summary.failed.len(),
                summary.blocked.len(),
                summary.elapsed_s,
                if summary.interrupted {
                    " (interrupted; run apply again to resume)"
                } else {
                    ""
                }
            );
            for (label, cause) in &summary.failed {
                eprintln!("  failed  {label}: {}", cause.lines().next().unwrap_or(""));
            }
            for (label, why) in &summary.blocked {
                eprintln!("  blocked {label}: {}", why.lines().next().unwrap_or(""));
            }
            if let Some(p) = &summary.report {
                eprintln!("report: {}", p.display());
            }
            Ok(summary.exit_code() as u8)
        }
        Command::Report { sweep } => {
            let store = Store::open(&cli.cache)?;
            let (sweep, plan) = load_plan(&store, &sweep)?;
            let files = exec::build_report(&store, &plan, &sweep);
            let table = files.table.clone();
            let path = exec::node_publish(&store, &plan.sweep, &files)
                .context("failed to write the report")?;
            println!("{table}");
            eprintln!("report: {}", path.display());
            Ok(0)
        }
        Command::Status { sweep } => {
            let store = Store::open(&cli.cache)?;
            let records = store.records();
            let mut by: std::collections::BTreeMap<(String, String), [usize; 3]> =
                Default::default();
            for r in &records {
                let e = by.entry((r.sweep.clone(), r.kind.clone())).or_default();
                e[match r.status {
                    store::RecordStatus::Finished => 0,
                    store::RecordStatus::Failed => 1,
                    store::RecordStatus::Started => 2,
                }] += 1;
            }
            println!(
                "cache {} ({} records)",
                store.root().display(),
                records.len()
            );
            println!(
                "{:<24} {:<10} {:>9} {:>7} {:>12}",
                "sweep", "node", "finished", "failed", "interrupted"
            );
            for ((s, k), [f, x, i]) in &by {
                println!("{s:<24} {k:<10} {f:>9} {x:>7} {i:>12}");
            }
            if let Some(path) = sweep {
                let (_, plan) = load_plan(&store, &path)?;
                let st = plan::statuses(&plan, &store);
                let (c, r, b) = plan::render::counts(&plan, &st);
                println!("\n{}: {c} cached, {r} to run, {b} blocked", plan.sweep);
            }
            Ok(0)
        }
        Command::Metric {
            metric,
            file,
            sql_timeout,
        } => {
            let input: Box<dyn std::io::BufRead> = match &file {
                Some(f) => Box::new(std::io::BufReader::new(
                    std::fs::File::open(f)
                        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", f.display()))?,
                )),
                None => Box::new(std::io::stdin().lock()),
            };
            task::metric_cli(
                &metric,
                input,
                &mut std::io::stdout().lock(),
                std::time::Duration::from_secs_f64(sql_timeout),
            )?;
            Ok(0)
        }
        Command::Selfbench {
            streams,
            seconds,
            tokens,
            ttft_ms,
            itl_ms,
            plan_nodes,
            cached_runs,
            parquet_rows,
            serve,
        } => {
            if let Some(port) = serve {
                selfbench::serve(port, tokens, ttft_ms, itl_ms)?;
                return Ok(0);
            }
            let md = selfbench::run(selfbench::Params {
                streams,
                seconds,
                tokens,
                ttft_ms,
                itl_ms,
                plan_nodes,
                cached_runs,
                parquet_rows,
            })?;
            print!("{md}");
            Ok(0)
        }
        Command::Gc { sweeps, dry_run } => {
            let store = Store::open(&cli.cache)?;
            let mut keep = BTreeSet::new();
            for p in &sweeps {
                let (_, plan) = load_plan(&store, p)?;
                keep.extend(plan.graph.node_weights().map(|n| n.key.clone()));
            }
            let mut removed = 0;
            for r in store.records() {
                if keep.contains(&r.key) {
                    continue;
                }
                removed += 1;
                println!(
                    "{} {} {}",
                    if dry_run { "would delete" } else { "delete" },
                    &r.key[..12],
                    r.label
                );
                if !dry_run {
                    let _ = std::fs::remove_file(
                        store.root().join("records").join(format!("{}.json", r.key)),
                    );
                    let _ = std::fs::remove_dir_all(store.object_dir(&r.key));
                }
            }
            println!(
                "{removed} node(s) {}",
                if dry_run { "unused" } else { "deleted" }
            );
            Ok(0)
        }
    }
}
