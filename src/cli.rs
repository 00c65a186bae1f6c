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
    /// Benchmark bench360 itself: client against a scripted loopback server, planner, cached
    /// apply, Parquet writing (results as Markdown, for BENCHMARKS.md).
    Selfbench {
        /// Concurrent streams to measure at.
        #[arg(long, value_delimiter = ',', default_value = "1,64,256,1024")]
        streams: Vec<usize>,
        /// Seconds of load per stream count.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Tokens per scripted response.
        #[arg(long, default_value_t = 64)]
        tokens: u32,
        /// Scripted time to first token and between tokens, ms.
        #[arg(long, default_value_t = 20.0)]
        ttft_ms: f64,
        #[arg(long, default_value_t = 5.0)]
        itl_ms: f64,
        /// Nodes to plan and runs to re-apply from a full cache.
        #[arg(long, default_value_t = 100_000)]
        plan_nodes: usize,
        #[arg(long, default_value_t = 1000)]
        cached_runs: usize,
        /// Chunk rows to write to Parquet.
        #[arg(long, default_value_t = 2_000_000)]
        parquet_rows: usize,
        /// Run the scripted streaming server on this port (used by selfbench itself).
        #[arg(long, hide = true)]
        serve: Option<u16>,
    },
    /// Score predictions with one of bench360's metrics, outside any sweep: JSONL in
    /// (FILE or stdin), JSONL out. rouge: {id, prediction, reference} → rouge1, rouge2,
    /// rougeL, rougeLsum (F, stemmed; Lsum over newline-separated sentences). squad:
    /// {id, prediction, answers: [..]} → exact, f1 (official SQuAD v2). sql: {id, prediction,
    /// reference, database} → execution_accuracy, exact_match, error (read-only sandbox).
    Metric {
        #[arg(value_parser = ["rouge", "squad", "sql"])]
        metric: String,
        file: Option<PathBuf>,
        /// Time limit of one SQL statement, seconds.
        #[arg(long, default_value_t = 5.0)]
        sql_timeout: f64,
    },
}
