//! bench360: load sweep → plan → open store → apply → report. Errors become exit codes here:
//! 0 all done, 1 some node failed or is blocked, 2 bad input, 130 interrupted.

mod app;
mod cli;
mod client;
mod compare;
mod engine;
mod exec;
#[cfg(test)]
mod fuzz;
mod host;
mod plan;
mod record;
mod report;
mod selfbench;
mod slurm;
mod spec;
mod store;
mod sweep;
mod task;
mod telemetry;
mod trace;
mod workload;

use std::collections::BTreeSet;

/// mimalloc: planning 100k nodes and writing millions of trace rows are allocation-bound
/// (half of the planner's instructions were glibc malloc/free; BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;

use app::{load_datasets, load_plan, load_plan_as, plan_for, prepare_containers, View};
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

/// `apply --executor slurm`: submit what must run, then (with `--wait`) follow the jobs and
/// print the report like a local apply.
fn apply_slurm(cache: &Path, path: &Path, args: &cli::SlurmArgs, wait: bool) -> anyhow::Result<u8> {
    // Jobs run elsewhere: every path they get is absolute (and must be the same there).
    let cache_abs = std::path::absolute(cache)?;
    let store = Store::open(&cache_abs)?;
    let sweep_abs = std::path::absolute(path)?;
    let exe = std::env::current_exe()?;
    let (sweep, plan) = load_plan_as(&store, path, View::Cluster)?;
    if load_datasets(&sweep, &plan).is_none() {
        return Ok(2);
    }
    let status = plan::statuses(&plan, &store);
    let settings = slurm::merge(&sweep.slurm, args);
    for w in slurm::gpu_warnings(&sweep, &plan, &settings) {
        eprintln!("warning: {w}");
    }
    let sched = slurm::SlurmCommands;
    let submit = slurm::Submit {
        sweep: &sweep,
        plan: &plan,
        status: &status,
        settings: &settings,
        exe,
        cache: cache_abs.clone(),
        sweep_file: sweep_abs.clone(),
    };
    let out = submit
        .run(&sched, &mut |l| eprintln!("{l}"))
        .map_err(anyhow::Error::msg)?;
    for s in &out.submitted {
        println!(
            "submitted job {} for deployment {} ({} node{} to run{})",
            s.job_id,
            s.what,
            s.nodes,
            if s.nodes == 1 { "" } else { "s" },
            if s.after.is_empty() {
                String::new()
            } else {
                format!(", after job {}", s.after.join(", "))
            }
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
        println!(
            "submitted job {} for the report{}",
            r.job_id,
            if r.after.is_empty() {
                String::new()
            } else {
                format!(
                    " (after job {}, whatever their outcome)",
                    r.after.join(", ")
                )
            }
        );
    }
    if let Some((id, state)) = &out.report_kept {
        println!("kept job {id} for the report ({state})");
    }
    for (label, why) in &out.blocked {
        eprintln!("  blocked {label}: {}", why.lines().next().unwrap_or(""));
    }
    let jobs = out.jobs();
    let dir = slurm::SweepDir::at(&cache_abs, &sweep.name);
    let again = format!(
        "bench360 --cache {} {{}} {}",
        cache_abs.display(),
        sweep_abs.display()
    );
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
        eprintln!(
            "job logs: {}/<job id>.out\nwatch: {}\ncancel: {}",
            dir.root().join("logs").display(),
            again.replace("{}", "status"),
            again.replace("{}", "cancel"),
        );
    }
    if !wait {
        return Ok(if out.blocked.is_empty() { 0 } else { 1 });
    }
    if !jobs.is_empty() {
        eprintln!(
            "waiting for {} job{} to leave the queue (Ctrl-C stops waiting; the jobs go on)",
            jobs.len(),
            if jobs.len() == 1 { "" } else { "s" }
        );
    }
    let ended = slurm::wait(&sched, &jobs, std::time::Duration::from_secs(2), &mut |l| {
        eprintln!("{l}")
    });
    // As a local apply ends: the report table, what failed, the exit code.
    let (sweep, plan) = load_plan_as(&store, path, View::Cluster)?;
    let st = plan::statuses(&plan, &store);
    println!("{}", exec::build_report(&store, &plan, &sweep).table);
    for (id, what) in &jobs {
        let info = ended.get(id);
        if info.is_some_and(|i| i.state == "COMPLETED") {
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
    let (mut cached, mut failed, mut blocked, mut missing) = (0, Vec::new(), 0, 0);
    for &i in &plan.order {
        let n = &plan.graph[i];
        if n.kind == plan::NodeKind::Warmup {
            continue;
        }
        match &st[i.index()] {
            plan::Status::Cached => cached += 1,
            plan::Status::Blocked { .. } => blocked += 1,
            plan::Status::WillRun { why } if why.starts_with("failed last time") => {
                failed.push((n.label.clone(), why.clone()))
            }
            _ => missing += 1,
        }
    }
    eprintln!(
        "{cached} cached, {} failed, {blocked} blocked, {missing} not done",
        failed.len()
    );
    for (label, why) in &failed {
        eprintln!("  failed  {label}: {}", why.lines().next().unwrap_or(""));
    }
    let report = store.report_dir(&sweep.name).join("report.html");
    if report.exists() {
        eprintln!("report: {}", report.display());
    }
    Ok(if failed.is_empty() && blocked == 0 && missing == 0 {
        0
    } else {
        1
    })
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    sweep::overrides::set(&cli.set, &cli.only)
        .map_err(|e| anyhow::Error::new(sweep::BadInput(e)))?;
    exec::progress::set_quiet(cli.quiet);
    match cli.command {
        Command::Run(args) => {
            let (name, text) = app::adhoc_sweep(&args)?;
            let dir = cli.cache.join("adhoc");
            std::fs::create_dir_all(&dir)?;
            let path = dir.join(format!("{name}.kdl"));
            // Written whole or not at all: a re-run with the same settings finds its cache.
            let tmp = dir.join(format!(".{name}.kdl.tmp"));
            std::fs::write(&tmp, &text)?;
            std::fs::rename(&tmp, &path)?;
            if !cli.quiet {
                eprintln!("implicit sweep: {}", path.display());
            }
            run(Cli {
                command: Command::Apply {
                    sweep: path,
                    json: args.json,
                    reuse_connections: false,
                    executor: cli::Executor::Local,
                    deployment: None,
                    wait: false,
                    slurm: cli::SlurmArgs::default(),
                },
                ..cli
            })
        }
        Command::Validate {
            sweeps,
            syntax_only,
        } => {
            let mut bad = 0;
            for p in &sweeps {
                // --syntax-only checks a sweep meant for another machine: a variable unset here
                // stands in as `/unset/VAR` and is named, not an error.
                let unset = std::cell::RefCell::new(BTreeSet::new());
                let env = |k: &str| {
                    std::env::var(k).ok().or_else(|| {
                        syntax_only.then(|| {
                            unset.borrow_mut().insert(k.to_string());
                            format!("/unset/{k}")
                        })
                    })
                };
                let loaded = sweep::load_with_env(p, &env);
                let unset = unset.into_inner();
                if !unset.is_empty() {
                    let names: Vec<String> = unset.iter().map(|v| format!("${{{v}}}")).collect();
                    eprintln!(
                        "note: {}: not set here (the machine that runs the sweep must set them): {}",
                        p.display(),
                        names.join(", ")
                    );
                }
                match loaded {
                    Ok((s, _)) if !syntax_only && exec::preflight::check(&s, None).is_err() => {
                        bad += 1;
                        for problem in exec::preflight::check(&s, None).unwrap_err() {
                            eprintln!("error: {}: {problem}", p.display());
                        }
                    }
                    Ok((s, _)) => {
                        let n = spec::expand::configs(&s).len();
                        let d = spec::expand::deployments(&s).len();
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
            let (s, plan) = load_plan(&store, &sweep)?;
            let st = plan::statuses(&plan, &store);
            if json {
                println!("{}", plan::render::json(&plan, &st));
            } else if dot {
                print!("{}", plan::render::dot(&plan, &st));
            } else {
                print!("{}", plan::render::table(&plan, &st));
            }
            // What apply would refuse, said now (after the plan, which is still shown).
            let used: BTreeSet<usize> = plan.runs.iter().map(|r| r.config.task).collect();
            if let Err(problems) = exec::preflight::check(&s, Some(&used)) {
                for p in &problems {
                    eprintln!("error: {p}");
                }
                eprintln!("apply would run nothing: fix the input(s) above");
                return Ok(2);
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
            json,
            reuse_connections,
            executor,
            deployment,
            wait,
            slurm: slurm_args,
        } => {
            if executor == cli::Executor::Slurm {
                anyhow::ensure!(
                    deployment.is_none(),
                    "--deployment runs one deployment on this machine; it does not combine with --executor slurm (each Slurm job runs `apply --deployment`)"
                );
                anyhow::ensure!(
                    !reuse_connections,
                    "--reuse-connections is now a sweep field: `defaults {{ connections \"reuse\" }}`"
                );
                return apply_slurm(&cli.cache, &path, &slurm_args, wait);
            }
            anyhow::ensure!(
                !reuse_connections,
                "--reuse-connections is now a sweep field: `defaults {{ connections \"reuse\" }}` (it changes what is measured, so it keys the runs)"
            );
            let given = slurm_args.given();
            anyhow::ensure!(
                given.is_empty(),
                "{} only appl{} with --executor slurm",
                given.join(", "),
                if given.len() == 1 { "ies" } else { "y" }
            );
            anyhow::ensure!(!wait, "--wait only applies with --executor slurm");
            let store = Store::open(&cli.cache)?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            // --deployment: found by label, which (unlike keys) does not change when an image
            // is pulled below.
            let (sweep, _) = sweep::load(&path)?;
            let only = match &deployment {
                Some(sel) => {
                    let p = plan_for(&store, &sweep, View::Local)?;
                    let d = p.find_deployment(sel)?;
                    let engine = sweep.engines[p.deployments[d].at.engine].name.value.clone();
                    Some((p.deployments[d].label.clone(), engine))
                }
                None => None,
            };
            // Containers first: orphans of a killed apply go, images are pulled (or found), so
            // that the plan is keyed by the images' ids.
            let pulls = rt.block_on(prepare_containers(
                &sweep,
                only.as_ref().map(|(_, e)| e.as_str()),
            ));
            let plan = plan_for(&store, &sweep, View::Local)?;
            if cli.verbose {
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
                let ex = exec::Executor::new(&sweep, &plan, &store, exec::Options { reuse_connections: sweep.defaults.reuse_connections, pulls, only, samples }, cancel);
                ex.apply().await
            });
            let code = summary.exit_code() as u8;
            if json {
                let v = serde_json::json!({
                    "sweep": plan.sweep,
                    "exit_code": code,
                    "ran": summary.ran,
                    "cached": summary.cached,
                    "failed": summary.failed.iter().map(|(l, c)| serde_json::json!({"label": l, "cause": c})).collect::<Vec<_>>(),
                    "blocked": summary.blocked.iter().map(|(l, c)| serde_json::json!({"label": l, "why": c})).collect::<Vec<_>>(),
                    "interrupted": summary.interrupted,
                    "elapsed_s": summary.elapsed_s,
                    "report": summary.report.as_ref().map(|p| p.display().to_string()),
                });
                println!("{v}");
            } else if let Some(t) = &summary.report_table {
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
            if let Some(job) = job {
                job.end(code);
            }
            Ok(code)
        }
        Command::Report { sweep, json } => {
            let store = Store::open(&cli.cache)?;
            let (sweep, plan) = load_plan_as(&store, &sweep, View::ClusterIfRan)?;
            let job = slurm::InJob::begin(&store, &plan, None);
            let files = exec::build_report(&store, &plan, &sweep);
            let (path, recorded) = exec::write_report(&store, &plan, &files)?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "sweep": plan.sweep,
                        "report": path.display().to_string(),
                        "complete": recorded,
                        "runs": report::summary_json(&files.summary),
                    })
                );
            } else {
                println!("{}", files.table);
            }
            eprintln!(
                "report: {}{}",
                path.display(),
                if recorded {
                    ""
                } else {
                    " (some runs are missing or failed)"
                }
            );
            // Missing or failed runs: exit 1 (a Slurm report job ends 0: its job record and the
            // report say what is missing, and the job itself did its work).
            let code = if recorded || job.is_some() { 0 } else { 1 };
            if let Some(job) = job {
                job.end(0);
            }
            Ok(code)
        }
        Command::Status { sweep, json } => {
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
            let planned = match &sweep {
                Some(path) => {
                    let (_, plan) = load_plan_as(&store, path, View::ClusterIfRan)?;
                    let st = plan::statuses(&plan, &store);
                    Some((plan, st))
                }
                None => None,
            };
            // With SWEEP: exit 1 while some node of its plan is not cached (to run or blocked).
            let code = match &planned {
                Some((plan, st)) => {
                    let (_, r, b) = plan::render::counts(plan, st);
                    u8::from(r + b > 0)
                }
                None => 0,
            };
            if json {
                let nodes =
                    |f: &dyn Fn(&[usize; 3]) -> usize| -> usize { by.values().map(f).sum() };
                let mut v = serde_json::json!({
                    "cache": store.root().display().to_string(),
                    "records": records.len(),
                    "finished": nodes(&|c| c[0]),
                    "failed": nodes(&|c| c[1]),
                    "interrupted": nodes(&|c| c[2]),
                    "by_sweep": by.iter().map(|((s, k), [f, x, i])| serde_json::json!({"sweep": s, "node": k, "finished": f, "failed": x, "interrupted": i})).collect::<Vec<_>>(),
                });
                if let Some((plan, st)) = &planned {
                    let (c, r, b) = plan::render::counts(plan, st);
                    v["plan"] = serde_json::json!({"sweep": plan.sweep, "cached": c, "to_run": r, "blocked": b});
                }
                println!("{v}");
                return Ok(code);
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
            if let Some((plan, st)) = &planned {
                let (c, r, b) = plan::render::counts(plan, st);
                println!("\n{}: {c} cached, {r} to run, {b} blocked", plan.sweep);
                if let Some(cf) = slurm::SweepDir::new(&store, &plan.sweep).cluster_facts() {
                    if cf.machine != plan::facts::machine_fingerprint() {
                        println!(
                            "(keyed by the machines its Slurm jobs ran on, last {}: {})",
                            cf.host,
                            cf.machine
                                .iter()
                                .map(|(k, v)| format!("{k} {v}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        );
                    }
                }
                print!(
                    "\n{}",
                    slurm::status_table(&store, plan, st, &slurm::SlurmCommands)
                );
            }
            Ok(code)
        }
        Command::Cancel { sweep } => {
            let store = Store::open(&cli.cache)?;
            let (sweep, _) = sweep::load(&sweep)?;
            let cancelled = slurm::cancel(&store, &sweep.name, &slurm::SlurmCommands, &mut |l| {
                eprintln!("{l}")
            })
            .map_err(anyhow::Error::msg)?;
            if cancelled.is_empty() {
                println!("no job of sweep {} is queued or running", sweep.name);
            }
            for (id, what, state) in &cancelled {
                let what = if what == "report" {
                    "the report".to_string()
                } else {
                    format!("deployment {what}")
                };
                println!("cancelled job {id} for {what} (was {state})");
            }
            Ok(0)
        }
        Command::Metric {
            metric,
            file,
            sql_timeout,
            split_sentences,
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
                split_sentences,
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
            serve_log,
            server_cpus,
            client_cpus,
            keep_alive,
        } => {
            if let Some(port) = serve {
                selfbench::serve(
                    port,
                    tokens,
                    ttft_ms,
                    itl_ms,
                    serve_log.as_deref(),
                    &server_cpus,
                    keep_alive,
                )?;
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
                server_cpus,
                client_cpus,
                reuse_connections: keep_alive,
            })?;
            print!("{md}");
            Ok(0)
        }
        Command::Compare {
            sides,
            save,
            fail_on,
            format,
        } => {
            let gates = fail_on
                .iter()
                .map(|g| compare::parse_gate(g))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow::Error::new(sweep::BadInput(e)))?;
            let side = |spec: &str| -> anyhow::Result<(String, Vec<compare::RunValues>)> {
                let p = Path::new(spec);
                if p.extension().is_some_and(|x| x == "json") {
                    let b = compare::load(p).map_err(|e| anyhow::Error::new(sweep::BadInput(e)))?;
                    return Ok((b.sweep, b.runs));
                }
                let (cache, file) = match spec.split_once('=') {
                    Some((c, f)) => (Path::new(c).to_path_buf(), Path::new(f)),
                    None => (cli.cache.clone(), p),
                };
                let store = Store::open(&cache)?;
                let (sw, plan) = load_plan_as(&store, file, View::ClusterIfRan)?;
                let rows = report::summary_rows(&store, &plan, &sw);
                Ok((plan.sweep.clone(), compare::from_rows(&rows)))
            };
            let (name_a, a) = side(&sides[0])?;
            if let Some(out) = save {
                compare::save(&out, &name_a, a.clone())?;
                eprintln!(
                    "baseline of `{name_a}` ({} runs): {}",
                    a.len(),
                    out.display()
                );
                if sides.len() == 1 {
                    return Ok(0);
                }
            }
            anyhow::ensure!(
                sides.len() == 2,
                "compare needs A and B (or --save FILE with A)"
            );
            let (_, b) = side(&sides[1])?;
            let (matched, only_a, only_b) = compare::compare(&a, &b);
            let broken = compare::broken(&gates, &matched);
            if format == "json" {
                let v = serde_json::json!({
                    "matched": matched,
                    "only_a": only_a,
                    "only_b": only_b,
                    "broken": broken.iter().map(|(g, l, c)| serde_json::json!({"gate": g.text, "run": l, "change": c})).collect::<Vec<_>>(),
                });
                println!("{v}");
            } else {
                print!("{}", compare::markdown(&matched, &only_a, &only_b));
            }
            for (g, label, c) in &broken {
                eprintln!(
                    "regression: {label}: {} changed {:+.1}% (gate {})",
                    g.metric,
                    c * 100.0,
                    g.text
                );
            }
            if matched.is_empty() {
                eprintln!("no configuration ran on both sides");
            }
            Ok(u8::from(!broken.is_empty()))
        }
        Command::Verify => {
            let store = Store::open(&cli.cache)?;
            let (checked, damaged) = store.verify();
            for (what, why) in &damaged {
                println!("damaged  {what}: {why}");
            }
            eprintln!(
                "{checked} record(s) checked, {} damaged{}",
                damaged.len(),
                if damaged.is_empty() {
                    ""
                } else {
                    "; `bench360 apply` reruns them"
                }
            );
            Ok(if damaged.is_empty() { 0 } else { 1 })
        }
        Command::Gc { sweeps, dry_run } => {
            let store = Store::open(&cli.cache)?;
            let mut keep = BTreeSet::new();
            for p in &sweeps {
                // What this machine would run, and what the sweep's Slurm jobs ran elsewhere.
                for view in [View::Local, View::ClusterIfRan] {
                    let (_, plan) = load_plan_as(&store, p, view)?;
                    keep.extend(plan.graph.node_weights().map(|n| n.key.clone()));
                }
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
