//! Command line: what the user can ask for.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "bench360",
    version,
    about = "Which model, quantization and engine is best for my task and my traffic?"
)]
pub(crate) struct Cli {
    /// Cache directory (records, objects, locks, reports).
    #[arg(long, global = true, env = "BENCH360_CACHE", default_value = "cache")]
    pub cache: PathBuf,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show every node of the sweep's DAG: cached, will run (and why) or blocked.
    Plan {
        sweep: PathBuf,
        /// Machine-readable plan.
        #[arg(long, conflicts_with = "dot")]
        json: bool,
        /// Graphviz DOT of the DAG.
        #[arg(long)]
        dot: bool,
    },
    /// Run what is not cached; resumable after any interruption.
    Apply {
        sweep: PathBuf,
        /// Reuse HTTP connections between requests (default: a new connection per request).
        #[arg(long)]
        reuse_connections: bool,
    },
    /// Summarize what the cache holds (for one sweep: its plan's counts).
    Status { sweep: Option<PathBuf> },
    /// Regenerate the report of a sweep from the cache alone.
    Report { sweep: PathBuf },
    /// Show a node's full key inputs (key prefix or label).
    Explain {
        node: String,
        /// Look the node up in this sweep's plan (else among recorded nodes).
        #[arg(long)]
        sweep: Option<PathBuf>,
    },
    /// Check sweep files and report every problem.
    Validate {
        #[arg(required = true)]
        sweeps: Vec<PathBuf>,
    },
    /// Delete cached nodes that no given sweep's plan uses any more.
    Gc {
        #[arg(required = true)]
        sweeps: Vec<PathBuf>,
        /// Only list what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
}
