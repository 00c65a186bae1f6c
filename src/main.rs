//! bench360: parse the command line, run one command (`cmd`), map its outcome to an exit
//! code — 0 all done, 1 some node failed or is blocked, 2 bad input, 130 interrupted.

mod app;
mod cli;
mod client;
mod cmd;
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

use std::process::ExitCode;

use clap::Parser;

/// mimalloc: planning 100k nodes and writing millions of trace rows are allocation-bound
/// (half of the planner's instructions were glibc malloc/free; BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if !matches!(cli.command, cli::Command::Apply { .. }) {
        // Printing commands end quietly when their reader goes away (`bench360 plan | head`).
        // apply keeps Rust's default so a closed pipe cannot kill a sweep.
        // SAFETY: setting a signal's disposition to SIG_DFL before any thread exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cmd::dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprint!("{}", cmd::render_error(err));
            ExitCode::from(2)
        }
    }
}
