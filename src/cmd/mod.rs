//! One module per command. Each returns an outcome: a `#[derive(Serialize)]` value that is
//! the command's `--json` output and from which [`emit`] writes its terminal text, so the two
//! can never disagree. `main` parses the command line and calls [`dispatch`].

mod apply;
mod compare;
mod explain;
mod gc;
mod metric;
mod plan;
mod report;
mod selfbench;
mod slurm;
mod status;
mod validate;
mod verify;

use std::path::PathBuf;

use serde::Serialize;

use crate::cli::{Cli, Command};
use crate::sweep::{self, Overrides};

/// What every command is given besides its own arguments.
pub(crate) struct Ctx {
    pub cache: PathBuf,
    /// `--set` / `--only`, handed to every sweep the command loads.
    pub overrides: Overrides,
    pub quiet: bool,
    pub verbose: bool,
}

/// Text for a person: what goes to stdout (the result) and to stderr (what it means, what
/// to do next). With `--json`, stdout holds the JSON instead; stderr is the same.
#[derive(Debug, Default)]
pub(crate) struct Text {
    pub out: String,
    pub err: String,
}

impl Text {
    pub fn out(&mut self, line: impl AsRef<str>) {
        self.out.push_str(line.as_ref());
        self.out.push('\n');
    }
    pub fn err(&mut self, line: impl AsRef<str>) {
        self.err.push_str(line.as_ref());
        self.err.push('\n');
    }
}

/// A command's result.
pub(crate) trait Outcome: Serialize {
    /// 0 done, 1 some node failed, is blocked or missing, 2 bad input, 130 interrupted.
    fn exit_code(&self) -> u8;
    fn render(&self, t: &mut Text);
}

/// Prints an outcome (as JSON on stdout with `json`) and returns its exit code.
pub(crate) fn emit<O: Outcome>(o: &O, json: bool) -> anyhow::Result<u8> {
    let mut t = Text::default();
    o.render(&mut t);
    if json {
        println!("{}", serde_json::to_string(o)?);
    } else {
        print!("{}", t.out);
    }
    eprint!("{}", t.err);
    Ok(o.exit_code())
}

/// An error as the user reads it: a sweep's diagnostics rendered at their spans (in colour
/// on a terminal unless `NO_COLOR`), anything else with its chain of causes.
pub(crate) fn render_error(err: anyhow::Error) -> String {
    let err = match err.downcast::<sweep::LoadError>() {
        Ok(sweep::LoadError::Sweep(diag)) => return sweep::diag::render_for_stderr(&diag),
        Ok(other) => anyhow::Error::new(other),
        Err(err) => err,
    };
    match err.downcast::<sweep::SweepError>() {
        Ok(diag) => sweep::diag::render_for_stderr(&diag),
        Err(err) => format!("error: {err:#}\n"),
    }
}

/// "s" unless there is exactly one.
pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The first line of a cause, for one-line listings.
pub(crate) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

pub(crate) fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    if cli.command.sweep_args().is_none()
        && !(cli.sweep_args.set.is_empty() && cli.sweep_args.only.is_empty())
    {
        anyhow::bail!("--set / --only change a sweep, and this command reads none");
    }
    let (sets, only) = cli.sweep_overrides();
    let ctx = Ctx {
        cache: cli.cache.clone(),
        overrides: Overrides::parse(&sets, &only)?,
        quiet: cli.quiet,
        verbose: cli.verbose,
    };
    crate::exec::progress::set_quiet(cli.quiet);
    match cli.command {
        Command::Run { run: args, .. } => apply::adhoc(&ctx, &args),
        Command::Validate {
            sweeps,
            syntax_only,
            ..
        } => emit(&validate::run(&ctx, &sweeps, syntax_only), false),
        Command::Plan {
            sweep, json, dot, ..
        } => plan::run(&ctx, &sweep, json, dot),
        Command::Explain { node, sweep, .. } => explain::run(&ctx, &node, sweep.as_deref()),
        Command::Apply {
            sweep,
            json,
            reuse_connections,
            executor,
            deployment,
            wait,
            max_parallel,
            slurm: slurm_args,
            ..
        } => {
            let how = apply::How {
                reuse_connections,
                executor,
                deployment,
                wait,
                max_parallel,
                slurm: slurm_args,
            };
            apply::run(&ctx, &sweep, json, how)
        }
        Command::Report { sweep, json, .. } => emit(&report::run(&ctx, &sweep)?, json),
        Command::Status { sweep, json, .. } => {
            emit(&status::run(&ctx, sweep.as_deref(), !json)?, json)
        }
        Command::Cancel { sweep, .. } => emit(&slurm::cancel(&ctx, &sweep)?, false),
        Command::Metric {
            metric,
            file,
            sql_timeout,
            split_sentences,
        } => metric::run(&metric, file.as_deref(), sql_timeout, split_sentences),
        Command::Selfbench(args) => selfbench::run(args),
        Command::Compare {
            sides,
            save,
            fail_on,
            gate_rule,
            format,
            across_machines,
            ..
        } => compare::run(
            &ctx,
            &sides,
            save.as_deref(),
            &fail_on,
            gate_rule,
            format,
            across_machines,
        ),
        Command::Verify => emit(&verify::run(&ctx)?, false),
        Command::Gc {
            sweeps, dry_run, ..
        } => emit(&gc::run(&ctx, &sweeps, dry_run)?, false),
    }
}
