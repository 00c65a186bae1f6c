//! The resolved sweep: the vocabulary every layer above speaks. A validated [`Sweep`] with its
//! models, engines, tasks, scenarios and matrix; the engine catalog as data (`catalog`); the
//! matrix expansion into configurations and deployments (`expand`). Pure data and pure
//! functions: no I/O, and imports nothing of the crate (the floor of the layering, with
//! `host` and `record`; see docs/ARCHITECTURE.md).

pub(crate) mod catalog;
pub(crate) mod expand;

use std::path::{Path, PathBuf};
use std::time::Duration;

use miette::SourceSpan;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spanned<T> {
    pub value: T,
    pub span: SourceSpan,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: SourceSpan) -> Self {
        Spanned { value, span }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Sweep {
    pub name: String,
    pub seed: u64,
    pub repeats: u32,
    /// `cold-repeats #true`: each repeat on its own cold start (its engines started anew), so
    /// that start-up and the first runs after it have a spread too.
    pub cold_repeats: bool,
    /// `max-parallel N`: at most N deployments at once (on disjoint devices); None: as many
    /// as the devices allow. Never part of a key.
    pub max_parallel: Option<u32>,
    pub defaults: Defaults,
    pub models: Vec<Model>,
    pub engines: Vec<Engine>,
    pub tasks: Vec<Task>,
    pub scenarios: Vec<Scenario>,
    pub matrix: Matrix,
    pub telemetry: TelemetryConfig,
    /// The user's service-level constraints: the report recommends among configurations
    /// that meet them.
    pub slo: Slo,
    pub cost: Option<Cost>,
    /// Job options for `apply --executor slurm`; never part of a node key.
    pub slurm: SlurmSettings,
    /// Directory that relative paths in the file are resolved against (the file's folder).
    pub base_dir: PathBuf,
    /// The file it was read from, so that a problem found later (a dataset line that does
    /// not parse) is shown at its span like a problem of the file itself.
    pub source: Source,
}

/// A sweep file's name (as given) and text.
#[derive(Debug, Clone, Default)]
pub(crate) struct Source {
    pub name: String,
    pub text: std::sync::Arc<str>,
}

/// The sweep's `slurm { … }` block: how its jobs are submitted (the command line overrides
/// each field). Where a job runs does not change what it measures beyond the machine
/// fingerprint, so none of this enters a key.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SlurmSettings {
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    /// Time limit per deployment job, in Slurm's syntax (`MM`, `HH:MM:SS`, `D-HH:MM`, …).
    pub time: Option<String>,
    /// `--gres` per deployment job (`none`: none); unset: `gpu:N` from the engine's `gpus`.
    pub gres: Option<String>,
    pub cpus: Option<u32>,
    /// `--mem` per deployment job (`32G`, `4000M`, …).
    pub mem: Option<String>,
    pub sbatch_args: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub(crate) struct Slo {
    /// Seconds.
    pub ttft_p95: Option<f64>,
    /// Seconds.
    pub e2e_p95: Option<f64>,
    /// GiB of GPU memory (peak, all sampled GPUs).
    pub gpu_memory_gib: Option<f64>,
    /// The quality a recommended configuration may lose against the reference (a fraction of
    /// the metric's scale: 0.02 = 2 points of accuracy), judged on the paired interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality_drop: Option<f64>,
    /// The reference of `quality_drop`: a configuration's label (a run label without its
    /// repeat, or a deployment label); None: each task's best quality.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality_baseline: Option<String>,
    /// What the recommendation optimizes among the configurations that qualify.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective: Option<Objective>,
    /// `quality-evidence "not-worse"`: a configuration whose paired interval straddles the
    /// allowed drop qualifies (default `"non-inferior"`: the interval must show it within).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub quality_not_worse: bool,
    /// Over-saturated open-loop runs may be recommended (default: excluded).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub include_over_saturated: bool,
}

/// What a declared recommendation optimizes (`slo { objective "…" }`).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Objective {
    Quality,
    JPerCorrect,
    CostPerCorrect,
    JPerToken,
    TtftP95,
    TpotP50,
    E2eP95,
    Goodput,
    TokensPerS,
}

impl Objective {
    pub const ALL: [Objective; 9] = [
        Objective::Quality,
        Objective::JPerCorrect,
        Objective::CostPerCorrect,
        Objective::JPerToken,
        Objective::TtftP95,
        Objective::TpotP50,
        Objective::E2eP95,
        Objective::Goodput,
        Objective::TokensPerS,
    ];

    /// The name a sweep file writes.
    pub fn name(self) -> &'static str {
        match self {
            Objective::Quality => "quality",
            Objective::JPerCorrect => "j-per-correct",
            Objective::CostPerCorrect => "cost-per-correct",
            Objective::JPerToken => "j-per-token",
            Objective::TtftP95 => "ttft-p95",
            Objective::TpotP50 => "tpot-p50",
            Objective::E2eP95 => "e2e-p95",
            Objective::Goodput => "goodput",
            Objective::TokensPerS => "tokens-per-s",
        }
    }

    pub fn from_name(s: &str) -> Option<Objective> {
        Objective::ALL.into_iter().find(|o| o.name() == s)
    }

    /// Whether more is better.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Objective::Quality | Objective::Goodput | Objective::TokensPerS
        )
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Cost {
    /// Price of 1 kWh of energy.
    pub energy_per_kwh: f64,
    /// Price of one hour of the hardware.
    pub hardware_per_hour: f64,
    pub currency: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub(crate) struct Sampling {
    pub max_tokens: u32,
    pub temperature: f64,
    pub top_p: f64,
    pub stop: Vec<String>,
    /// Generate until `max_tokens`, past the end-of-sequence token (engines that take it).
    pub ignore_eos: bool,
    /// Generate at least this many tokens (engines that take it).
    pub min_tokens: Option<u32>,
    /// Fields merged into every request body as given (e.g. `chat_template_kwargs`).
    pub extra_body: std::collections::BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone)]
pub(crate) struct Defaults {
    pub sampling: Sampling,
    /// Throw-away requests sent after the engine is healthy, before any run.
    pub warmup: u32,
    pub request_timeout_s: f64,
    /// Reuse HTTP connections between requests (default: a new connection per request). It
    /// changes what is measured, so it keys the runs.
    pub reuse_connections: bool,
    /// A run in which more than this fraction of requests failed is itself failed: its
    /// trace is kept as evidence, it is not cached, and the next apply runs it again.
    pub max_error_rate: f64,
}

/// The default error budget of a run (docs/failures.md, "Error budget and failures").
pub(crate) const DEFAULT_MAX_ERROR_RATE: f64 = 0.05;

/// What a sweep without a `defaults` block gets (docs/sweep.md lists the same values): the one
/// place they are written.
impl Default for Defaults {
    fn default() -> Defaults {
        Defaults {
            sampling: Sampling {
                max_tokens: 64,
                temperature: 0.0,
                top_p: 1.0,
                stop: Vec::new(),
                ..Default::default()
            },
            warmup: 2,
            request_timeout_s: 120.0,
            reuse_connections: false,
            max_error_rate: DEFAULT_MAX_ERROR_RATE,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub name: Spanned<String>,
    pub source: ModelSource,
    pub variants: Vec<Variant>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ModelSource {
    /// A local file or directory (GGUF file, safetensors folder).
    Path(String),
    /// A model id the engine resolves itself (hub id, served model name).
    Id(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Variant {
    pub quantization: Spanned<String>,
    /// Weights of this quantization when they are a separate file (GGUF); else the model's.
    pub path: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Engine {
    /// The deployment's engine name: the block's name, followed by the values of its
    /// setting axes when it declares any (`vllm[parallel=64,variant=eager]`).
    pub name: Spanned<String>,
    /// The `engine` block's own name (one block with setting axes gives several engines).
    pub base: Spanned<String>,
    /// This combination's value of each setting the block lists several values of (an
    /// axis), in `ENGINE_AXES` order; empty for a block without axes.
    pub settings: Vec<(String, String)>,
    pub kind: Spanned<String>,
    /// The catalog row of `kind`, resolved once by the resolver.
    pub catalog: &'static catalog::CatalogEntry,
    pub launch: Launch,
    /// Parallel request slots the engine is started with.
    pub parallel: u32,
    /// Context length per slot, in tokens.
    pub ctx_size: u32,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub startup_timeout_s: f64,
    pub api: Api,
    /// GPU indices the engine uses (CUDA_VISIBLE_DEVICES for a process; the devices the
    /// telemetry samples); None = all.
    pub gpus: Option<Vec<u32>>,
    /// Fraction of GPU memory the engine may take (vLLM, SGLang, TGI, LMDeploy).
    pub gpu_memory: f64,
    /// GPUs one engine instance spreads over (vLLM `--tensor-parallel-size`, SGLang
    /// `--tp-size`, LMDeploy `--tp`, TGI `--num-shard`, llama.cpp `--split-mode tensor`).
    pub tensor_parallel: u32,
    pub dtype: String,
    /// CPUs the engine may run on (CPU affinity of the process, a container's cpuset); None
    /// = all. With `gpus`, what lets deployments run at once on disjoint devices.
    pub cpus: Option<Vec<u32>>,
    /// The argument variant (`variant "eager" args="--enforce-eager"`) whose arguments and
    /// environment this engine adds to the block's.
    pub variant: Option<String>,
}

/// The engine settings that may list several values (each combination its own deployment),
/// in the order they appear in a deployment's name; `variant` names an argument variant.
pub(crate) const ENGINE_AXES: &[&str] = &[
    "parallel",
    "ctx-size",
    "gpu-memory",
    "dtype",
    "tensor-parallel",
    "variant",
];

impl Engine {
    /// This engine's value of a setting axis (`ENGINE_AXES`), as `exclude` and `--only`
    /// compare it; `variant` is empty for a block without variants.
    pub fn setting(&self, axis: &str) -> String {
        match axis {
            "parallel" => self.parallel.to_string(),
            "ctx-size" => self.ctx_size.to_string(),
            "gpu-memory" => self.gpu_memory.to_string(),
            "dtype" => self.dtype.clone(),
            "tensor-parallel" => self.tensor_parallel.to_string(),
            "variant" => self.variant.clone().unwrap_or_default(),
            other => unreachable!("engine axis `{other}` validated by the resolver"),
        }
    }

    /// Whether a matrix or `--only` name selects this engine: its block's name (every
    /// combination) or its own full name.
    pub fn named(&self, name: &str) -> bool {
        self.base.value == name || self.name.value == name
    }
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Api {
    Chat,
    Completion,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Launch {
    /// Start a local command; `{port}`, `{model.path}`, … are filled in by the launcher.
    Process { binary: String },
    /// A container of the engine's image, through the Docker Engine API.
    Docker {
        image: String,
        tag: String,
        pull: PullPolicy,
        /// Names of environment variables passed into the container (values never stored).
        env_pass: Vec<String>,
        shm_size: Option<i64>,
        /// Host folder mounted as the container's Hugging Face cache.
        hf_cache: Option<String>,
    },
    /// An engine that is already running at `url`.
    Endpoint {
        url: String,
        served_model: Option<String>,
        /// Name of the environment variable holding the API key (the key itself is never stored).
        api_key_env: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum PullPolicy {
    /// Use the local image when present (its id keys everything below), else pull.
    Missing,
    /// Pull at every apply (a moved tag then makes the runs on it stale).
    Always,
}

#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub name: Spanned<String>,
    pub kind: TaskKind,
    /// A folder for the built-in tasks, a JSONL/CSV/Parquet file for custom ones.
    pub dataset: Spanned<String>,
    pub samples: Option<usize>,
    pub shots: u32,
    pub system: Option<String>,
    /// Chat messages or a plain completion prompt; None: the engine's `api`.
    pub mode: Option<Api>,
    /// Overrides the sweep's `max-tokens` for this task's runs.
    pub max_tokens: Option<u32>,
    /// Overrides the sweep's `stop` for this task's runs (when not empty).
    pub stop: Vec<String>,
    /// Overrides the sweep's `ignore-eos` for this task's runs (a synthetic load task with
    /// exact output lengths beside tasks whose answers end where the model ends them).
    pub ignore_eos: Option<bool>,
    /// Summarization: articles are cut to this many words in the prompt.
    pub article_words: usize,
    /// Time limit of one SQL statement when scoring.
    pub sql_timeout_s: f64,
    /// Built-in tasks: an answer-format instruction added after each question ("Reply with
    /// the letter only."), part of the prompt.
    pub answer_format: Option<String>,
    /// Built-in tasks: a regex whose group 1 (or whole match) is the answer read from an
    /// output before the task's own reading; no match leaves the output unparsed.
    pub extract: Option<Spanned<String>>,
    pub custom: Option<CustomTask>,
    /// `synthetic` tasks: prompts of exact token counts, made with the engine's tokenizer.
    pub synthetic: Option<Synthetic>,
    /// How a multiple-choice task reads the model's choice (part of the metric's identity).
    pub scoring: Scoring,
    /// K-shot examples sent as earlier chat turns (user: the example, assistant: its answer)
    /// instead of inside one prompt; part of the prompt's identity.
    pub fewshot_as_turns: bool,
    /// Reason, then answer: the model is asked to think step by step and end with a line
    /// `Final answer: …`, which is what the task reads; this many tokens are added to the
    /// task's max-tokens for the reasoning. Part of the prompt's and the metric's identity.
    pub reason: Option<u32>,
}

/// How a multiple-choice task (MMLU) reads the model's choice.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Scoring {
    /// The option letter read out of generated text: what users' traffic looks like.
    #[default]
    Generative,
    /// The option whose label is most likely at the answer position, from the engine's
    /// next-token log-probabilities (`/v1/completions` with `logprobs`): one generated token
    /// per request, prefill-only timing (lm-evaluation-harness's and Hendrycks's method).
    Logprobs,
    /// Generative, with the engine's own constrained decoding forcing the output to be one
    /// option label (llama.cpp `grammar`, vLLM `structured_outputs`, SGLang `regex`).
    Constrained,
}

impl Scoring {
    pub const ALL: &'static [(&'static str, Scoring)] = &[
        ("generative", Scoring::Generative),
        ("logprobs", Scoring::Logprobs),
        ("constrained", Scoring::Constrained),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scoring::Generative => "generative",
            Scoring::Logprobs => "logprobs",
            Scoring::Constrained => "constrained",
        }
    }
}

/// The labels a `constrained` MMLU answer is forced to.
pub(crate) const CHOICE_LABELS: &[&str] = &["A", "B", "C", "D"];

/// How many top log-probabilities a `logprobs` request asks for at the answer position
/// (vLLM's default ceiling). The chosen option is exact whenever any label is among them:
/// a label not listed is less likely than every one listed.
pub(crate) const LOGPROBS_TOP: u32 = 20;

/// A distribution of token counts, drawn per request with the sweep's seed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub(crate) enum Lengths {
    Fixed {
        tokens: u32,
    },
    /// Integers from `min` to `max`, both included, equally likely.
    Uniform {
        min: u32,
        max: u32,
    },
    /// Rounded draws of a normal distribution, clamped to `[min, max]`.
    Normal {
        mean: f64,
        stddev: f64,
        min: u32,
        max: u32,
    },
    /// `(tokens, weight)` bins: a bin is drawn with probability weight / total.
    Histogram {
        bins: Vec<(u32, f64)>,
    },
}

/// A `synthetic` task: what each request's prompt and output are made of.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Synthetic {
    /// Prompt tokens of each request as the server counts them (chat template included); with
    /// `turns`, the tokens each turn adds after the previous reply.
    pub input: Lengths,
    /// Requested output tokens of each request (`max_tokens`); none: the task's or sweep's.
    pub output: Option<Lengths>,
    /// Tokens at the start of every prompt that the prompts of a prefix group share.
    pub shared_prefix: u32,
    /// Number of distinct shared prefixes (prompt i belongs to group i mod groups).
    pub prefix_groups: u32,
    /// Turns of each conversation; each turn carries the previous turns and replies.
    pub turns: u32,
    /// Every run writes its own prompts (the text seeded by its scenario, parameters and
    /// repeat as well as the sweep's seed): no run sends prompts an earlier run on the same
    /// start left in the engine's prefix cache. Left out of the key when off, so sweeps from
    /// before it keep theirs.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fresh_prompts: bool,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum TaskKind {
    Mmlu,
    SquadV2,
    Summarization,
    Text2Sql,
    Custom,
    Synthetic,
}

impl TaskKind {
    pub const ALL: &'static [(&'static str, TaskKind)] = &[
        ("mmlu", TaskKind::Mmlu),
        ("squad_v2", TaskKind::SquadV2),
        ("summarization", TaskKind::Summarization),
        ("text2sql", TaskKind::Text2Sql),
        ("custom", TaskKind::Custom),
        ("synthetic", TaskKind::Synthetic),
    ];
}

/// A user-defined task's prompt and scoring.
#[derive(Debug, Clone)]
pub(crate) struct CustomTask {
    /// minijinja template over the row's fields.
    pub template: Spanned<String>,
    /// Field holding the reference (a string or a list of acceptable strings).
    pub reference: Spanned<String>,
    /// Field holding a unique id (default: the row's line).
    pub id_field: Option<String>,
    pub metrics: Vec<Spanned<Metric>>,
    /// Regex whose group 1 (or whole match) is the answer the metrics compare.
    pub extract: Option<Spanned<String>>,
    /// External scorer: command and arguments (JSONL on stdin, JSONL on stdout).
    pub scorer: Option<Vec<String>>,
    pub scorer_timeout_s: f64,
    /// SQLite file for the `sql` metric (relative to the sweep file).
    pub database: Option<Spanned<String>>,
    /// Fields to report per-group metrics by.
    pub group_by: Vec<String>,
    /// The options a `choice` task answers with (`choices "yes" "no"`): what `scoring
    /// "logprobs"` compares at the answer position and `scoring "constrained"` forces.
    pub choices: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Metric {
    ExactMatch,
    F1,
    Rouge,
    Choice,
    Contains,
    Json,
    Sql,
}

impl Metric {
    pub const ALL: &'static [(&'static str, Metric)] = &[
        ("exact_match", Metric::ExactMatch),
        ("f1", Metric::F1),
        ("rouge", Metric::Rouge),
        ("choice", Metric::Choice),
        ("contains", Metric::Contains),
        ("json", Metric::Json),
        ("sql", Metric::Sql),
    ];

    pub fn name(self) -> &'static str {
        Metric::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map(|(n, _)| *n)
            .expect("every metric is listed")
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub name: Spanned<String>,
    pub spec: ScenarioSpec,
    /// This scenario's error budget, over the sweep's default (saturation has its own rule).
    pub max_error_rate: Option<f64>,
    /// Stop each run once a latency percentile is known to this margin (`target-margin`).
    pub stop: Option<StopRule>,
    /// `repeats N`: this scenario's runs repeated N times, fewer than the sweep's `repeats`
    /// (e.g. a temperature-0 quality pass run once beside timed scenarios run three times);
    /// `None`: the sweep's. Its repeats keep the keys and labels the sweep's would have.
    pub repeats: Option<Spanned<u32>>,
}

impl Scenario {
    /// How many of the sweep's repeats this scenario runs: its own `repeats`, never more than
    /// the sweep's (a `--set sweep.repeats=` below it lowers both).
    pub fn repeats(&self, sweep_repeats: u32) -> u32 {
        self.repeats
            .as_ref()
            .map_or(sweep_repeats, |r| r.value.min(sweep_repeats))
    }
}

/// Precision-based stopping: a run ends (no new requests; those in flight finish and count)
/// once the distribution-free 95 % interval of `latency`'s q-th percentile lies within
/// ±`margin` of its estimate (relative), after at least `min_requests` successful requests
/// and `min_duration_s` seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StopRule {
    /// `ttft`, `tpot` or `e2e`.
    pub latency: String,
    /// 50, 90, 95 or 99.
    pub q: f64,
    pub margin: f64,
    pub min_requests: u64,
    pub min_duration_s: f64,
}

impl StopRule {
    /// The metrics a stop rule takes: `ttft-p95`, `e2e-p50`, …
    pub const METRICS: [&'static str; 12] = [
        "ttft-p50", "ttft-p90", "ttft-p95", "ttft-p99", "tpot-p50", "tpot-p90", "tpot-p95",
        "tpot-p99", "e2e-p50", "e2e-p90", "e2e-p95", "e2e-p99",
    ];

    /// (`ttft`, 95.0) from `ttft-p95`.
    pub fn parse_metric(s: &str) -> Option<(String, f64)> {
        if !Self::METRICS.contains(&s) {
            return None;
        }
        let (l, p) = s.split_once("-p")?;
        Some((l.to_string(), p.parse().ok()?))
    }

    pub fn metric(&self) -> String {
        format!("{}-p{}", self.latency, self.q)
    }
}

impl Sweep {
    /// The error budget of runs of scenario `s`; None for saturation, whose probes judge
    /// errors themselves.
    pub fn error_budget(&self, s: usize) -> Option<f64> {
        let sc = &self.scenarios[s];
        if matches!(sc.spec, ScenarioSpec::Saturation(_)) {
            return None;
        }
        Some(sc.max_error_rate.unwrap_or(self.defaults.max_error_rate))
    }
}

/// A scenario as declared: every parameter may list several values (an axis).
#[derive(Debug, Clone)]
pub(crate) enum ScenarioSpec {
    Single {
        requests: Vec<Option<u64>>,
        /// Stop once the p95 E2E latency's 95 % confidence interval is this narrow (relative).
        early_stop: Option<f64>,
    },
    Batch {
        batch_size: Vec<u64>,
        batches: Vec<u64>,
    },
    Server {
        users: Vec<u64>,
        /// Requests per minute per user.
        rate: Vec<f64>,
        duration_s: Vec<f64>,
    },
    /// Open loop at a total rate (requests/s) with gamma-distributed gaps.
    Rate {
        rate: Vec<f64>,
        /// Gamma shape: 1 = Poisson, < 1 burstier, > 1 more regular.
        burstiness: Vec<f64>,
        duration_s: Vec<f64>,
        /// Linear ramp from this rate to `rate` over the duration.
        ramp_from: Option<f64>,
    },
    /// Closed loop: N requests in flight, each replaced as it returns.
    Concurrency {
        concurrency: Vec<u64>,
        requests: Vec<Option<u64>>,
        early_stop: Option<f64>,
    },
    /// Everything at once (MLPerf Offline).
    Offline { requests: Vec<Option<u64>> },
    /// Arrival times (and output lengths) from a trace file, optionally sped up.
    Replay {
        /// Path as written (relative to the sweep file).
        trace: Spanned<String>,
        speed: Vec<f64>,
    },
    /// The highest open-loop rate (requests/s) whose p95 TTFT and E2E hold: probes of
    /// `step_s` seconds at `start`, `start·factor`, … until one fails or `max_rate`, then
    /// bisection between the last passing and the first failing rate until they are within
    /// `precision` (relative). SLO thresholds in seconds (None: the sweep's `slo`).
    Saturation(SaturationSpec),
}

/// A saturation search (see `ScenarioSpec::Saturation`). Rates in requests/s, thresholds in
/// seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SaturationSpec {
    pub start: f64,
    pub factor: f64,
    pub max_rate: f64,
    pub step_s: f64,
    pub precision: f64,
    pub burstiness: f64,
    pub ttft_p95: Option<f64>,
    pub e2e_p95: Option<f64>,
    pub max_error_rate: f64,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Matrix {
    pub models: Vec<Spanned<String>>,
    pub quantizations: Vec<Spanned<String>>,
    pub engines: Vec<Spanned<String>>,
    pub tasks: Vec<Spanned<String>>,
    pub scenarios: Vec<Spanned<String>>,
    pub max_tokens: Vec<u32>,
    pub temperature: Vec<f64>,
    pub top_p: Vec<f64>,
    pub excludes: Vec<Exclude>,
    /// `--only repeat=K…`: the repeats (counted from 0) this invocation runs; empty: all of
    /// `repeats`. Never written in a sweep file: a repeat's key and label are those of the
    /// whole sweep, so a hold can run one repeat and the next hold another.
    pub repeats: Vec<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct Exclude {
    pub span: SourceSpan,
    /// (axis, value) pairs that must all match for a configuration to be excluded.
    pub conditions: Vec<(String, String)>,
}

impl Sweep {
    pub fn resolve_path(&self, p: &str) -> PathBuf {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.base_dir.join(path)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct TelemetryConfig {
    pub interval: Duration,
    /// Idle baseline measured with the engine loaded and no requests, before each run.
    pub idle: Duration,
    /// How often the engine's metrics endpoint is scraped, when the sweep says
    /// (`metrics-interval`); else [`TelemetryConfig::metrics_every`]'s default.
    pub metrics_interval: Option<Duration>,
}

/// Every 100 ms, with 2 s of idle baseline (docs/telemetry.md).
impl Default for TelemetryConfig {
    fn default() -> TelemetryConfig {
        TelemetryConfig {
            interval: Duration::from_millis(100),
            idle: Duration::from_secs(2),
            metrics_interval: None,
        }
    }
}

impl TelemetryConfig {
    /// The engine's metrics endpoint is scraped at most once a second unless the sweep asks
    /// for more: a scrape is served by the engine's own HTTP server, between the chunks it
    /// streams. On the H200, a 100 ms sampling tick (scrape, NVML and procfs at one instant)
    /// cost 6–12 % of SGLang's streaming time, 2–4 % of LMDeploy's, ~1 % of vLLM's and none
    /// of llama.cpp's: the scrape is the likely cause, not isolated (docs/telemetry.md).
    /// NVML and procfs keep `interval`.
    pub fn metrics_every(&self) -> Duration {
        self.metrics_interval
            .unwrap_or_else(|| self.interval.max(Duration::from_secs(1)))
    }
}
