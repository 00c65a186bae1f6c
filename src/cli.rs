//! Command line: what the user can ask for.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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
    /// `--set` / `--only` given before the command (the commands that read a sweep take
    /// them after it too).
    #[command(flatten)]
    pub sweep_args: SweepArgs,
    /// No progress lines or bars (errors and the result still print).
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Also say, before `apply` runs, every node that will run and why.
    #[arg(long, short, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// Changes to the sweep a command reads, made before it is checked (as the same edit of the
/// file would: keys change exactly as they would).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct SweepArgs {
    /// Override one field of the sweep before it is checked: `defaults.max-tokens=32`,
    /// `task.mmlu.samples=10`, `engine.llama-cpu.parallel=8` (repeatable; `a,b` for an axis).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub set: Vec<String>,
    /// Run only part of the matrix: `engine=vllm`, `model=m1,m2` (repeatable; axes model,
    /// quantization, engine, task, scenario, repeat, and the engine settings parallel,
    /// ctx-size, gpu-memory, dtype, tensor-parallel, variant).
    #[arg(long = "only", value_name = "AXIS=VALUE")]
    pub only: Vec<String>,
}

impl Cli {
    /// Every `--set` and `--only`, those before the command first.
    pub fn sweep_overrides(&self) -> (Vec<String>, Vec<String>) {
        let mut sets = self.sweep_args.set.clone();
        let mut only = self.sweep_args.only.clone();
        if let Some(a) = self.command.sweep_args() {
            sets.extend(a.set.iter().cloned());
            only.extend(a.only.iter().cloned());
        }
        (sets, only)
    }
}

impl Command {
    /// The command's own `--set` / `--only`, for the commands that read a sweep.
    pub fn sweep_args(&self) -> Option<&SweepArgs> {
        match self {
            Command::Run { sweep_args, .. }
            | Command::Plan { sweep_args, .. }
            | Command::Apply { sweep_args, .. }
            | Command::Status { sweep_args, .. }
            | Command::Cancel { sweep_args, .. }
            | Command::Report { sweep_args, .. }
            | Command::Explain { sweep_args, .. }
            | Command::Validate { sweep_args, .. }
            | Command::Compare { sweep_args, .. }
            | Command::Gc { sweep_args, .. } => Some(sweep_args),
            Command::Verify | Command::Selfbench(_) | Command::Metric { .. } => None,
        }
    }
}

/// The output of `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns for a terminal.
    Terminal,
    /// Markdown tables (for a CI comment or a report).
    Markdown,
    /// One JSON object.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Measure a running OpenAI-compatible server without a sweep file: writes an implicit
    /// sweep (synthetic prompts of exact token counts under one load) to
    /// `CACHE/adhoc/NAME.kdl` and applies it like any other (same DAG, cache, Parquet and
    /// report; `--set`/`--only` apply to it too).
    Run {
        #[command(flatten)]
        run: RunArgs,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Show every node of the sweep's DAG: cached, will run (and why) or blocked.
    Plan {
        sweep: PathBuf,
        /// Machine-readable plan.
        #[arg(long, conflicts_with = "dot")]
        json: bool,
        /// Graphviz DOT of the DAG.
        #[arg(long)]
        dot: bool,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Run what is not cached; resumable after any interruption. With `--executor slurm`,
    /// submit one Slurm job per deployment that has work and a report job after them.
    Apply {
        sweep: PathBuf,
        /// The outcome as JSON on stdout (ran, cached, failed with causes, blocked, report).
        #[arg(long)]
        json: bool,
        /// Moved to the sweep: `defaults { connections "reuse" }` (refused here, with that hint).
        #[arg(long, hide = true)]
        reuse_connections: bool,
        /// Where the nodes run: here, or as Slurm jobs writing to this (shared) cache.
        #[arg(long, value_enum, default_value_t = Executor::Local)]
        executor: Executor,
        /// Run only this deployment (label or cold start key prefix): its cold start, warmup,
        /// runs and scores, not the report. What each Slurm job runs.
        #[arg(long, value_name = "DEPLOYMENT", conflicts_with = "wait")]
        deployment: Option<String>,
        /// Slurm: wait until the sweep's jobs have left the queue, then print the report.
        #[arg(long)]
        wait: bool,
        /// At most N deployments at once, each on its own devices (`gpus`, `cpus`): replaces
        /// the sweep's `max-parallel`; 1 runs them one after another.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
        max_parallel: Option<u32>,
        #[command(flatten)]
        slurm: SlurmArgs,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Summarize what the cache holds; for one sweep, each deployment's cache state and
    /// Slurm job.
    Status {
        sweep: Option<PathBuf>,
        /// Machine-readable (exit codes as without).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Cancel a sweep's Slurm jobs that are still queued or running.
    Cancel {
        sweep: PathBuf,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Regenerate the report of a sweep from the cache alone.
    Report {
        sweep: PathBuf,
        /// The runs as JSON on stdout instead of the table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Show a node's full key inputs (key prefix or label).
    Explain {
        node: String,
        /// Look the node up in this sweep's plan (else among recorded nodes).
        #[arg(long)]
        sweep: Option<PathBuf>,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Check sweep files and report every problem.
    Validate {
        #[arg(required = true)]
        sweeps: Vec<PathBuf>,
        /// Check the sweep file only, not the files it reads (datasets, traces, scorers,
        /// weights): for a sweep meant for another machine.
        #[arg(long)]
        syntax_only: bool,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Compare two sweeps (or a saved baseline and a sweep) per matched configuration: the
    /// change of p50/p99 TTFT, TPOT and E2E, throughput, J/token and quality, with 95 %
    /// bootstrap intervals. A and B: a sweep file (read from `--cache`, or `CACHE_DIR=SWEEP`
    /// for another cache) or a baseline written by `--save`.
    Compare {
        /// A (the baseline), then B.
        #[arg(required = true, num_args = 1..=2)]
        sides: Vec<String>,
        /// Write A's per-request values as a baseline file instead of comparing.
        #[arg(long, value_name = "FILE")]
        save: Option<PathBuf>,
        /// Exit 1 when a change crosses a limit — `ttft_p99>+5%`, `quality<-2%`,
        /// `error_rate>+1%` (points) — or where a gate cannot judge (a configuration or a
        /// metric missing on one side) (repeatable).
        #[arg(long = "fail-on", value_name = "GATE")]
        fail_on: Vec<String>,
        /// How a gate judges: `confident` fires only when the change's 95 % interval is past
        /// the limit (else it says "inconclusive" and how many more requests would tell);
        /// `point` fires on the point estimate.
        #[arg(long = "gate-rule", value_enum, default_value_t = GateRule::Confident)]
        gate_rule: GateRule,
        /// Judge the gates where A and B ran on other hardware (GPU model or count, power
        /// limit or application clocks, CPU, cores) too; without it such a configuration is unjudged (exit 1).
        #[arg(long = "across-machines", requires = "fail_on")]
        across_machines: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Terminal)]
        format: Format,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Check the whole cache: every record readable, every finished node's files there with
    /// the size and blake3 they were written with. Exit 1 when something is damaged (the
    /// next `plan` shows those nodes as "will run: damaged object …").
    Verify,
    /// Delete cached nodes that no given sweep's plan uses any more.
    Gc {
        #[arg(required = true)]
        sweeps: Vec<PathBuf>,
        /// Only list what would be deleted.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        sweep_args: SweepArgs,
    },
    /// Benchmark bench360 itself: client against a scripted loopback server, planner, cached
    /// apply, Parquet writing (results as Markdown, for BENCHMARKS.md).
    Selfbench(SelfbenchArgs),
    /// Score predictions with one of bench360's metrics, outside any sweep: JSONL in
    /// (FILE or stdin), JSONL out. rouge: {id, prediction, reference} → rouge1, rouge2,
    /// rougeL, rougeLsum (F, stemmed; Lsum over newline-separated sentences). squad:
    /// {id, prediction, answers: [..]} → exact, f1 (official SQuAD v2). sql: {id, prediction,
    /// reference, database} → execution_accuracy, exact_match, error (read-only sandbox).
    /// mmlu: {id, prediction, answer} → extracted, correct, parsed, ambiguous (the task's
    /// letter extraction).
    Metric {
        #[arg(value_parser = ["rouge", "squad", "sql", "mmlu"])]
        metric: String,
        file: Option<PathBuf>,
        /// rouge: split prediction and reference into sentences first, one per line, as the
        /// summarization task does before rougeLsum (reproduces the task's scores exactly).
        #[arg(long)]
        split_sentences: bool,
        /// Time limit of one SQL statement, seconds.
        #[arg(long, default_value_t = 5.0)]
        sql_timeout: f64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Executor {
    /// Run on this machine: deployments on disjoint devices (`gpus`, `cpus`) at once, up to
    /// `--max-parallel`; the others one after the other.
    Local,
    /// Submit the DAG to Slurm (sbatch), one job per deployment.
    Slurm,
}

/// `bench360 run`: an ad-hoc measurement of a server at a URL.
#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// The server's base URL (`http://127.0.0.1:8000`).
    #[arg(long)]
    pub url: String,
    /// The model name the server serves (sent in every request).
    #[arg(long)]
    pub model: String,
    /// The engine kind behind the URL: names of output-control fields and the tokenize
    /// endpoint (`openai`: probed).
    #[arg(long, default_value = "openai")]
    pub kind: String,
    /// Name of the environment variable holding the API key (never written anywhere).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Closed loop: this many requests in flight.
    #[arg(long, conflicts_with = "rate")]
    pub concurrency: Option<u32>,
    /// Open loop: requests per second (Poisson arrivals) for `--duration` seconds.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Length of an open-loop run, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Requests of a closed-loop run (default: 8 × concurrency, at least prompts × turns).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Prompt tokens of every request, as the server counts them (chat template included).
    #[arg(long, default_value_t = 512)]
    pub input_tokens: u32,
    /// Output tokens of every request (`max_tokens`; end-of-sequence ignored unless
    /// `--stop-at-eos`).
    #[arg(long, default_value_t = 128)]
    pub output_tokens: u32,
    /// Let requests end at end-of-sequence before `--output-tokens`.
    #[arg(long)]
    pub stop_at_eos: bool,
    /// Distinct prompts (conversations with `--turns`).
    #[arg(long, default_value_t = 100)]
    pub prompts: u32,
    /// Tokens every prompt starts with in common (prefix caching).
    #[arg(long, default_value_t = 0)]
    pub shared_prefix: u32,
    /// Turns per conversation (each turn carries the earlier ones).
    #[arg(long, default_value_t = 1)]
    pub turns: u32,
    /// Completions API (plain prompt) instead of chat messages.
    #[arg(long)]
    pub completions: bool,
    /// Throw-away requests before measuring.
    #[arg(long, default_value_t = 2)]
    pub warmup: u32,
    /// Seed of the prompts and arrivals.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Name of the implicit sweep (default: `run-` and a hash of these settings).
    #[arg(long)]
    pub name: Option<String>,
    /// The outcome as JSON on stdout, as `apply --json`.
    #[arg(long)]
    pub json: bool,
}

/// Job options for `--executor slurm`; each overrides the sweep's `slurm { … }` block. None of
/// them enters a node key.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct SlurmArgs {
    /// Slurm partition (sbatch --partition).
    #[arg(long, help_heading = "Slurm")]
    pub partition: Option<String>,
    /// Account charged (sbatch --account).
    #[arg(long, help_heading = "Slurm")]
    pub account: Option<String>,
    /// Quality of service (sbatch --qos).
    #[arg(long, help_heading = "Slurm")]
    pub qos: Option<String>,
    /// Time limit of each job, e.g. 01:30:00 (sbatch --time).
    #[arg(long, help_heading = "Slurm", value_parser = slurm_time)]
    pub time: Option<String>,
    /// Generic resources per deployment job, e.g. gpu:1 or gpu:h100:2; `none` for none
    /// (default: gpu:N for an engine that declares N `gpus`).
    #[arg(long, help_heading = "Slurm")]
    pub gres: Option<String>,
    /// CPUs per deployment job (sbatch --cpus-per-task).
    #[arg(long, help_heading = "Slurm")]
    pub cpus_per_task: Option<u32>,
    /// Memory per job, e.g. 32G (sbatch --mem).
    #[arg(long, help_heading = "Slurm", value_parser = slurm_mem)]
    pub mem: Option<String>,
    /// An extra sbatch argument for every job, e.g. --sbatch-arg=--constraint=h100
    /// (repeatable; after bench360's own, so it wins).
    #[arg(
        long = "sbatch-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = "Slurm"
    )]
    pub sbatch_args: Vec<String>,
}

impl SlurmArgs {
    /// The options given, by flag name (to refuse them without `--executor slurm`).
    pub fn given(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (set, name) in [
            (self.partition.is_some(), "--partition"),
            (self.account.is_some(), "--account"),
            (self.qos.is_some(), "--qos"),
            (self.time.is_some(), "--time"),
            (self.gres.is_some(), "--gres"),
            (self.cpus_per_task.is_some(), "--cpus-per-task"),
            (self.mem.is_some(), "--mem"),
            (!self.sbatch_args.is_empty(), "--sbatch-arg"),
        ] {
            if set {
                v.push(name);
            }
        }
        v
    }
}

fn slurm_time(v: &str) -> Result<String, String> {
    if crate::sweep::slurm_time_ok(v) {
        Ok(v.to_string())
    } else {
        Err("not a Slurm time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS".into())
    }
}

fn slurm_mem(v: &str) -> Result<String, String> {
    if crate::sweep::slurm_mem_ok(v) {
        Ok(v.to_string())
    } else {
        Err("not a Slurm memory size: a whole number with an optional K, M, G or T suffix".into())
    }
}

/// `bench360 selfbench`.
#[derive(Debug, Args)]
pub(crate) struct SelfbenchArgs {
    /// Concurrent streams to measure at.
    #[arg(long, value_delimiter = ',', default_value = "1,64,256,1024")]
    pub streams: Vec<usize>,
    /// Seconds of load per stream count.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Tokens per scripted response.
    #[arg(long, default_value_t = 64)]
    pub tokens: u32,
    /// Scripted time to first token and between tokens, ms.
    #[arg(long, default_value_t = 20.0)]
    pub ttft_ms: f64,
    #[arg(long, default_value_t = 5.0)]
    pub itl_ms: f64,
    /// Nodes to plan and runs to re-apply from a full cache.
    #[arg(long, default_value_t = 100_000)]
    pub plan_nodes: usize,
    #[arg(long, default_value_t = 1000)]
    pub cached_runs: usize,
    /// Chunk rows to write to Parquet.
    #[arg(long, default_value_t = 2_000_000)]
    pub parquet_rows: usize,
    /// Run the scripted streaming server on this port (selfbench starts it; peers'
    /// benchmarks can be pointed at it too).
    #[arg(long)]
    pub serve: Option<u16>,
    /// With --serve: log every request's event send times here (CLOCK_MONOTONIC ns).
    #[arg(long, value_name = "FILE", requires = "serve")]
    pub serve_log: Option<PathBuf>,
    /// Keep connections alive (the scripted server chunks its bodies, the client pools
    /// connections) instead of one connection per request. With --serve: the server only.
    #[arg(long = "keep-alive", alias = "reuse-connections")]
    pub keep_alive: bool,
    /// CPUs of the scripted server (default: the first; `0` or `0,1`).
    #[arg(long, value_delimiter = ',')]
    pub server_cpus: Vec<usize>,
    /// CPUs of the client (default: all but the server's).
    #[arg(long, value_delimiter = ',')]
    pub client_cpus: Vec<usize>,
}

/// How `compare --fail-on` judges a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum, Default)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum GateRule {
    /// Fires only when the change's whole 95 % interval is past the limit.
    #[default]
    Confident,
    /// Fires when the point estimate is past the limit (noise included).
    Point,
}
