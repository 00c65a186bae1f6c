//! The sweep file: KDL text → raw spanned nodes (`raw`) → a validated [`Sweep`] (`resolve`).
//! Parsing and validation do no I/O: `parse` takes text and an environment lookup; `load`
//! reads the file and attaches the source to diagnostics.

pub(crate) mod diag;
pub(crate) mod raw;
mod resolve;

use std::path::{Path, PathBuf};

use miette::SourceSpan;
use serde::Serialize;

pub(crate) use diag::{Problem, SweepError};
pub(crate) use raw::Spanned;

#[derive(Debug, Clone)]
pub(crate) struct Sweep {
    pub name: String,
    pub seed: u64,
    pub repeats: u32,
    pub defaults: Defaults,
    pub models: Vec<Model>,
    pub engines: Vec<Engine>,
    pub tasks: Vec<Task>,
    pub scenarios: Vec<Scenario>,
    pub matrix: Matrix,
    /// Directory that relative paths in the file are resolved against (the file's folder).
    pub base_dir: PathBuf,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Sampling {
    pub max_tokens: u32,
    pub temperature: f64,
    pub top_p: f64,
    pub stop: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Defaults {
    pub sampling: Sampling,
    /// Throw-away requests sent after the engine is healthy, before any run.
    pub warmup: u32,
    pub request_timeout_s: f64,
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
    pub name: Spanned<String>,
    pub kind: Spanned<String>,
    pub launch: Launch,
    /// Parallel request slots the engine is started with.
    pub parallel: u32,
    /// Context length per slot, in tokens.
    pub ctx_size: u32,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub startup_timeout_s: f64,
    pub api: Api,
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
    /// An engine that is already running at `url`.
    Endpoint {
        url: String,
        served_model: Option<String>,
        /// Name of the environment variable holding the API key (the key itself is never stored).
        api_key_env: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub name: Spanned<String>,
    pub kind: TaskKind,
    pub dataset: Spanned<String>,
    pub samples: Option<usize>,
    pub shots: u32,
    pub system: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum TaskKind {
    Mmlu,
}

impl TaskKind {
    pub const ALL: &'static [(&'static str, TaskKind)] = &[("mmlu", TaskKind::Mmlu)];
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub name: Spanned<String>,
    pub spec: ScenarioSpec,
}

/// A scenario as declared: every parameter may list several values (an axis).
#[derive(Debug, Clone)]
pub(crate) enum ScenarioSpec {
    Single {
        requests: Vec<Option<u64>>,
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
}

#[derive(Debug, Clone)]
pub(crate) struct Exclude {
    pub span: SourceSpan,
    /// (axis, value) pairs that must all match for a configuration to be excluded.
    pub conditions: Vec<(String, String)>,
}

/// Parses a sweep from text. `env` looks up `${VAR}` references; `name` labels diagnostics.
pub(crate) fn parse(
    name: &str,
    text: &str,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Sweep, SweepError> {
    let into_error = |problems: Vec<Problem>| SweepError {
        name: name.to_string(),
        src: miette::NamedSource::new(name, text.to_string()),
        problems,
    };
    let nodes = raw::parse_kdl(text).map_err(|e| {
        into_error(
            e.diagnostics
                .into_iter()
                .map(|d| Problem {
                    message: d.message.unwrap_or_else(|| "invalid KDL".to_string()),
                    span: d.span,
                    label: d.label.unwrap_or_else(|| "here".to_string()),
                    help: d.help,
                })
                .collect(),
        )
    })?;
    resolve::resolve(&nodes, base_dir, env).map_err(into_error)
}

/// Reads and parses a sweep file, with the process environment for `${VAR}`.
pub(crate) fn load(path: &Path) -> anyhow::Result<(Sweep, String)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("failed to read sweep file {}: {e}", path.display()))?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let env = |k: &str| std::env::var(k).ok();
    let sweep = parse(&path.display().to_string(), &text, &base, &env)?;
    Ok((sweep, text))
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
