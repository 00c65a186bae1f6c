//! Tasks: a task turns a dataset into prompts with references, and scores outputs against
//! them. Loading reads files (the edge); scoring is pure.

pub(crate) mod mmlu;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

use crate::sweep::{Task as TaskDef, TaskKind};

/// One prompt with what it is scored against.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub(crate) struct Sample {
    pub id: String,
    pub system: Option<String>,
    /// The user message (chat) or the whole prompt (completion).
    pub prompt: String,
    pub reference: String,
    /// Grouping for per-group metrics (MMLU: subject and category).
    pub groups: BTreeMap<String, String>,
}

#[derive(Debug, Error)]
pub(crate) enum DatasetError {
    #[error("failed to read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

/// A scored output.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Score {
    pub correct: bool,
    /// What the scorer read out of the output (MMLU: the letter), if anything.
    pub extracted: Option<String>,
}

pub(crate) fn dataset_files(kind: TaskKind, dir: &Path) -> Vec<PathBuf> {
    match kind {
        TaskKind::Mmlu => vec![dir.join("test.jsonl"), dir.join("dev.jsonl")],
    }
}

/// Text of the prompt template; its hash is part of every run key.
pub(crate) fn template_source(kind: TaskKind) -> &'static str {
    match kind {
        TaskKind::Mmlu => mmlu::TEMPLATE,
    }
}

/// Identity of the scoring method; part of every score key.
pub(crate) fn metric_id(kind: TaskKind) -> &'static str {
    match kind {
        TaskKind::Mmlu => mmlu::METRIC,
    }
}

/// Loads the task's samples, in the seeded order the scenarios draw from.
pub(crate) fn load(def: &TaskDef, dir: &Path, seed: u64) -> Result<Vec<Sample>, DatasetError> {
    match def.kind {
        TaskKind::Mmlu => mmlu::load(def, dir, seed),
    }
}

pub(crate) fn score(kind: TaskKind, sample: &Sample, output: &str) -> Score {
    match kind {
        TaskKind::Mmlu => mmlu::score(sample, output),
    }
}

/// Aggregate metrics over scored requests: overall accuracy and per group.
pub(crate) fn aggregate(scored: &[(&Sample, &Score)]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    if scored.is_empty() {
        return out;
    }
    let n = scored.len() as f64;
    let correct = scored.iter().filter(|(_, s)| s.correct).count() as f64;
    out.insert("accuracy".into(), correct / n);
    out.insert("scored".into(), n);
    out.insert(
        "unparsed_rate".into(),
        scored.iter().filter(|(_, s)| s.extracted.is_none()).count() as f64 / n,
    );
    let mut groups: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (sample, s) in scored {
        for (g, v) in &sample.groups {
            let e = groups.entry(format!("accuracy.{g}.{v}")).or_default();
            e.0 += s.correct as u8 as f64;
            e.1 += 1.0;
        }
    }
    for (k, (c, n)) in groups {
        out.insert(k, c / n);
    }
    out
}

pub(crate) fn read_jsonl<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Vec<T>, DatasetError> {
    let text = std::fs::read_to_string(path).map_err(|source| DatasetError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(line).map_err(|e| DatasetError::Line {
            path: path.display().to_string(),
            line: i + 1,
            message: e.to_string(),
        })?;
        out.push(v);
    }
    Ok(out)
}
