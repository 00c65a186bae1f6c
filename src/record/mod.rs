//! Run records: the vocabulary of what a run measured and scored — the run's one clock,
//! request and chunk records, cold-start phases, telemetry samples, task samples and scores,
//! the configuration columns every row carries — and the pure formulas over them (`stats`:
//! TTFT, TPOT, ITL, E2E, queueing, percentiles, bootstrap; `rng`: the seeded generator).
//! Imports only `spec` below it.

pub(crate) mod paired;
pub(crate) mod provenance;
pub(crate) mod rng;
pub(crate) mod stats;
pub(crate) mod steady;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

/// Version of the report a run's rows feed; part of the report node's key.
pub(crate) const REPORT_FORMAT: &str = "report/5";

/// The run's clock: one monotonic origin for every event, plus its UTC anchor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunClock {
    pub origin: Instant,
    pub utc_anchor: SystemTime,
}

impl RunClock {
    pub fn start() -> Self {
        RunClock {
            origin: Instant::now(),
            utc_anchor: SystemTime::now(),
        }
    }

    pub fn ns(&self, t: Instant) -> i64 {
        t.saturating_duration_since(self.origin).as_nanos() as i64
    }

    pub fn at(&self, ns: i64) -> Instant {
        self.origin + Duration::from_nanos(ns.max(0) as u64)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ChunkKind {
    /// Carries generated answer text.
    Content,
    /// Carries reasoning text only (`reasoning_content`).
    Reasoning,
    /// Carries no text (role announcement, finish reason, usage).
    Empty,
}

impl ChunkKind {
    /// Carries generated tokens: the answer's or the reasoning's (both are the engine's
    /// output, and both count between tokens).
    pub fn is_generated(self) -> bool {
        matches!(self, ChunkKind::Content | ChunkKind::Reasoning)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ChunkKind::Content => "content",
            ChunkKind::Reasoning => "reasoning",
            ChunkKind::Empty => "empty",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChunkRecord {
    pub request_id: u32,
    pub index: u32,
    pub t_ns: i64,
    pub kind: ChunkKind,
    pub chars: u32,
    /// Tokens in this chunk when the server says (per-chunk `usage`); else unknown.
    pub tokens: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct RequestRecord {
    pub id: u32,
    pub user: Option<u32>,
    pub sample: usize,
    pub sample_id: String,
    /// The `max_tokens` this request was sent with where it was not the run's (a synthetic
    /// sample's drawn output length, a replayed arrival's).
    pub max_tokens: Option<u32>,
    pub scheduled_ns: i64,
    pub sent_ns: Option<i64>,
    pub first_byte_ns: Option<i64>,
    pub first_token_ns: Option<i64>,
    pub first_reasoning_ns: Option<i64>,
    pub last_token_ns: Option<i64>,
    pub end_ns: i64,
    pub http_status: Option<u16>,
    pub finish_reason: Option<String>,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// Of `completion_tokens`, those the engine says were spent reasoning
    /// (`usage.completion_tokens_details.reasoning_tokens`); None where it does not say.
    pub reasoning_tokens: Option<u32>,
    pub chunks: u32,
    pub content_chunks: u32,
    pub error: Option<String>,
    pub output: String,
    /// The first generated position's top log-probabilities as the server sent them, as JSON
    /// `[[token, logprob], …]`, when the request asked for them (`logprobs` scoring).
    pub top_logprobs: Option<String>,
}

impl RequestRecord {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
}

/// Cold-start phases, seconds from the launch call.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, PartialEq, Default)]
pub(crate) struct Phases {
    /// Launch call → process (or container) started.
    pub start_s: f64,
    /// Launch call → health check answered 200 (model loaded).
    pub healthy_s: f64,
}

/// The engine start a run ran on (run.json's `engine_start`). A deployment's engine is started
/// once per apply: by the apply that records its cold start, or again by a later one that
/// resumes the deployment after its cold start was recorded (another machine, a killed apply),
/// whose start is recorded nowhere else. Runs of one cold start may so stand on two starts.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub(crate) struct EngineStart {
    /// This start is the deployment's recorded cold start.
    pub cold_start: bool,
    /// When it was launched (RFC 3339, UTC).
    pub launched_utc: String,
    pub phases: Phases,
}

/// One prompt with what it is scored against.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub(crate) struct Sample {
    pub id: String,
    pub system: Option<String>,
    /// The user message (chat) or the whole prompt (completion).
    pub prompt: String,
    /// The main reference (MMLU: the letter; SQuAD: the first gold answer, empty when
    /// unanswerable; summaries: the highlights; SQL: the gold query).
    pub reference: String,
    /// Every acceptable reference (SQuAD: all gold answers; none when unanswerable).
    #[serde(default)]
    pub references: Vec<String>,
    /// Grouping for per-group metrics (MMLU: subject and category; SQuAD: answerable).
    pub groups: BTreeMap<String, String>,
    /// What a scorer needs beyond the references (text2sql: the database file; custom
    /// tasks: the dataset row as JSON; synthetic tasks: the token targets).
    #[serde(default)]
    pub extra: BTreeMap<String, String>,
    /// Earlier turns of a conversation, (user, assistant), sent before `prompt` (chat only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<(String, String)>,
    /// This request's `max_tokens`, overriding the run's (synthetic output lengths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// A scored output.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub(crate) struct Score {
    /// The task's per-request quality (its primary metric), 0..1 for every built-in metric.
    pub score: f64,
    /// Right or wrong, for metrics that are pass/fail (accuracy, exact match, execution).
    pub correct: Option<bool>,
    /// What the scorer read out of the output (a letter, an answer span, a SQL query).
    pub extracted: Option<String>,
    /// Whether the expected form was found (None when the metric reads the output as is).
    pub parsed: Option<bool>,
    /// Every per-request metric by name.
    pub metrics: BTreeMap<String, f64>,
    /// Why the output scored as it did when something failed (a SQL error, say).
    pub error: Option<String>,
    /// The reference itself could not be evaluated: the request is left out of the means.
    pub unscorable: bool,
    /// Unscorable through a fault of the scoring side, not of the model's output: the
    /// database or dataset file missing or unreadable, the gold query failing. Such requests
    /// count against the run's error budget; over it, the score node fails with their causes.
    pub fault: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Source {
    #[default]
    Gpu,
    /// The engine's process tree.
    Process,
    Host,
    /// bench360's own process (the load generator's cost).
    Bench360,
    /// CPU package energy.
    Rapl,
    /// Gauges read from the engine's Prometheus metrics.
    Engine,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Gpu => "gpu",
            Source::Process => "process",
            Source::Host => "host",
            Source::Bench360 => "bench360",
            Source::Rapl => "rapl",
            Source::Engine => "engine",
        }
    }
}

/// One telemetry row; only the fields its source measures are set.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct TelemetrySample {
    pub t_ns: i64,
    pub source: Source,
    pub device: String,
    pub power_w: Option<f64>,
    /// Cumulative energy counter as read (GPU: since driver load; RAPL: wraps), mJ.
    pub energy_mj: Option<f64>,
    pub mem_used_mb: Option<f64>,
    pub mem_total_mb: Option<f64>,
    pub util_pct: Option<f64>,
    pub mem_util_pct: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub temp_c: Option<f64>,
    pub throttle_reasons: Option<u64>,
    /// GPU memory of the engine's processes on this device.
    pub proc_mem_mb: Option<f64>,
    /// Compute processes on this device that are neither the engine's nor bench360's, and
    /// their GPU memory; None when the engine is not a local process (nothing to tell apart).
    pub other_procs: Option<f64>,
    pub other_mem_mb: Option<f64>,
    pub cpu_pct: Option<f64>,
    pub rss_mb: Option<f64>,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    pub kv_cache_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PromSample {
    pub name: String,
    /// Labels as `k="v",…` in the order given (empty when none).
    pub labels: String,
    pub value: f64,
}

/// Configuration columns carried by every trace row and summary.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub(crate) struct Columns {
    pub sweep: String,
    pub model: String,
    pub quantization: String,
    pub engine: String,
    pub engine_kind: String,
    /// The `engine` block's name, and the values of its setting axes for this engine (empty
    /// without axes): what the report groups by to show one setting's effect.
    pub engine_block: String,
    pub engine_settings: Vec<(String, String)>,
    pub task: String,
    pub scenario: String,
    pub scenario_kind: String,
    /// All scenario parameters as a JSON object.
    pub scenario_params: String,
    pub max_tokens: u32,
    pub temperature: f64,
    pub top_p: f64,
    pub seed: u64,
    pub repeat: u32,
}
