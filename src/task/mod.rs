//! Tasks: a task turns a dataset into prompts with references, and scores outputs against
//! them. Loading reads files (the edge); scoring of the built-in metrics is pure. Scoring is
//! its own node in the DAG, keyed by the run and the metric's identity, so a changed metric
//! reruns only scoring and the report.
//!
//! The registry is [`TaskKind::ALL`] (names in the sweep) and [`of`] (the implementation of a
//! declared task).

pub(crate) mod custom;
pub(crate) mod mmlu;
pub(crate) mod porter;
pub(crate) mod reason;
pub(crate) mod rouge;
mod shots;
pub(crate) mod sql;
pub(crate) mod squad;
pub(crate) mod summarization;
pub(crate) mod synthetic;
pub(crate) mod text2sql;

#[cfg(test)]
mod corpus;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rayon::prelude::*;
use thiserror::Error;

use crate::record::rng::SplitMix64;
pub(crate) use crate::record::{Sample, Score};
pub(crate) use crate::spec::Task as TaskDef;
use crate::spec::{Sweep, TaskKind};
pub(crate) use shots::{shot_indices, Shots};

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

/// Why a task could not score a run's outputs at all (one output that fails is scored 0
/// with its cause instead).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScoreError {
    #[error("{0}")]
    Sandbox(#[from] sql::SqlError),
    #[error("{0}")]
    Template(#[from] custom::TemplateError),
    /// The external scorer failed: its exit, its output, its time limit.
    #[error("{0}")]
    Scorer(String),
}

impl From<String> for ScoreError {
    fn from(s: String) -> Self {
        ScoreError::Scorer(s)
    }
}

impl From<&str> for ScoreError {
    fn from(s: &str) -> Self {
        ScoreError::Scorer(s.to_string())
    }
}

/// A declared task, ready to load and score.
pub(crate) trait Task: Send + Sync {
    /// Files whose content the task's prompts and references come from (part of run keys).
    fn files(&self) -> Vec<PathBuf>;
    /// Identity of the prompt construction (part of run keys).
    fn template(&self) -> String;
    /// Identity of the scoring method (part of score keys).
    fn metric(&self) -> String;
    /// Name of the per-request score (`Score::score`).
    fn primary(&self) -> &'static str;
    /// The samples, in the seeded order the scenarios draw from.
    fn load(&self, seed: u64) -> Result<Vec<Sample>, DatasetError>;
    /// Scores outputs (sample, output text), one score per item in order.
    fn score(&self, items: &[(&Sample, &str)]) -> Result<Vec<Score>, ScoreError>;
    /// Scores from the recorded top log-probabilities (`RequestRecord::top_logprobs`) instead
    /// of the output text: `score` is then handed those.
    fn reads_logprobs(&self) -> bool {
        false
    }
}

struct Builtin {
    def: TaskDef,
    dir: PathBuf,
}

impl Task for Builtin {
    fn files(&self) -> Vec<PathBuf> {
        match self.def.kind {
            TaskKind::Mmlu => vec![self.dir.join("test.jsonl"), self.dir.join("dev.jsonl")],
            TaskKind::SquadV2 => vec![self.dir.join("dev_subset.jsonl")],
            TaskKind::Summarization => vec![self.dir.join("test_subset.jsonl")],
            TaskKind::Text2Sql => text2sql::files(&self.dir),
            TaskKind::Custom | TaskKind::Synthetic => unreachable!("not built-in tasks"),
        }
    }

    fn reads_logprobs(&self) -> bool {
        self.def.scoring == crate::spec::Scoring::Logprobs
    }

    fn template(&self) -> String {
        let t = match self.def.kind {
            TaskKind::Mmlu if self.reads_logprobs() => mmlu::LOGPROBS_TEMPLATE,
            TaskKind::Mmlu => mmlu::TEMPLATE,
            TaskKind::SquadV2 => squad::TEMPLATE,
            TaskKind::Summarization => summarization::TEMPLATE,
            TaskKind::Text2Sql => text2sql::TEMPLATE,
            TaskKind::Custom | TaskKind::Synthetic => unreachable!("not built-in tasks"),
        };
        let mut t = if self.def.kind == TaskKind::Summarization {
            format!("{t}\narticle-words={}", self.def.article_words)
        } else {
            t.to_string()
        };
        if let Some(a) = &self.def.answer_format {
            t.push_str(&format!("\nanswer-format={a}"));
        }
        if self.def.scoring == crate::spec::Scoring::Constrained {
            // The generative prompt, its answer forced by the engine (the field is keyed too).
            t.push_str("\nscoring=constrained");
        }
        if self.def.fewshot_as_turns {
            t.push_str("\nfewshot-as-turns");
        }
        t
    }

    fn metric(&self) -> String {
        let m: String = match self.def.kind {
            TaskKind::Mmlu if self.reads_logprobs() => mmlu::LOGPROBS_METRIC.into(),
            TaskKind::Mmlu if self.def.scoring == crate::spec::Scoring::Constrained => {
                mmlu::CONSTRAINED_METRIC.into()
            }
            TaskKind::Mmlu => mmlu::METRIC.into(),
            TaskKind::SquadV2 => squad::METRIC.into(),
            TaskKind::Summarization => summarization::METRIC.into(),
            TaskKind::Text2Sql => {
                format!("{} timeout={}", text2sql::METRIC, self.def.sql_timeout_s)
            }
            TaskKind::Custom | TaskKind::Synthetic => unreachable!("not built-in tasks"),
        };
        match &self.def.extract {
            Some(e) => format!("{m} extract={:?}", e.value),
            None => m,
        }
    }

    fn primary(&self) -> &'static str {
        match self.def.kind {
            TaskKind::Mmlu => "accuracy",
            TaskKind::SquadV2 => "f1",
            TaskKind::Summarization => "rougeL",
            TaskKind::Text2Sql => "execution_accuracy",
            TaskKind::Custom | TaskKind::Synthetic => unreachable!("not built-in tasks"),
        }
    }

    fn load(&self, seed: u64) -> Result<Vec<Sample>, DatasetError> {
        let mut samples = match self.def.kind {
            TaskKind::Mmlu => mmlu::load(&self.def, &self.dir, seed),
            TaskKind::SquadV2 => squad::load(&self.def, &self.dir, seed),
            TaskKind::Summarization => summarization::load(&self.def, &self.dir, seed),
            TaskKind::Text2Sql => text2sql::load(&self.def, &self.dir, seed),
            TaskKind::Custom | TaskKind::Synthetic => unreachable!("not built-in tasks"),
        }?;
        if let Some(a) = &self.def.answer_format {
            for s in &mut samples {
                s.prompt = format!("{}\n\n{a}", s.prompt.trim_end());
            }
        }
        Ok(samples)
    }

    fn score(&self, items: &[(&Sample, &str)]) -> Result<Vec<Score>, ScoreError> {
        if let Some(e) = &self.def.extract {
            // The sweep's own reading first: the regex's capture is what the task reads.
            let re = regex::Regex::new(&e.value)
                .map_err(|err| ScoreError::Scorer(format!("`extract`: {err}")))?;
            let captured: Vec<Option<String>> = items
                .iter()
                .map(|(_, o)| {
                    re.captures(o).map(|c| {
                        c.get(1)
                            .or_else(|| c.get(0))
                            .map(|m| m.as_str().to_string())
                            .unwrap_or_default()
                    })
                })
                .collect();
            let inner: Vec<(&Sample, &str)> = items
                .iter()
                .zip(&captured)
                .map(|((s, _), c)| (*s, c.as_deref().unwrap_or("")))
                .collect();
            let mut scores = self.score_read(&inner)?;
            for (s, c) in scores.iter_mut().zip(&captured) {
                if c.is_none() {
                    // No match: unparsed, and worth nothing.
                    s.parsed = Some(false);
                    s.correct = s.correct.map(|_| false);
                    s.score = 0.0;
                    for v in s.metrics.values_mut() {
                        *v = 0.0;
                    }
                }
            }
            return Ok(scores);
        }
        self.score_read(items)
    }
}

impl Builtin {
    /// The task's own reading and scoring of outputs.
    fn score_read(&self, items: &[(&Sample, &str)]) -> Result<Vec<Score>, ScoreError> {
        let one: fn(&Sample, &str) -> Score = match self.def.kind {
            TaskKind::Mmlu if self.reads_logprobs() => mmlu::score_logprobs,
            TaskKind::Mmlu => mmlu::score,
            TaskKind::SquadV2 => squad::score,
            TaskKind::Summarization => summarization::score,
            TaskKind::Text2Sql => {
                return Ok(text2sql::score_all(
                    items,
                    Duration::from_secs_f64(self.def.sql_timeout_s),
                ))
            }
            TaskKind::Custom | TaskKind::Synthetic => unreachable!("not built-in tasks"),
        };
        Ok(items.par_iter().map(|(s, o)| one(s, o)).collect())
    }
}

struct Custom {
    def: TaskDef,
    path: PathBuf,
    /// The sweep file's folder: the scorer runs there and its paths are relative to it.
    base: PathBuf,
}

impl Task for Custom {
    fn files(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }

    fn reads_logprobs(&self) -> bool {
        self.def.scoring == crate::spec::Scoring::Logprobs
    }

    fn template(&self) -> String {
        let c = self.custom();
        let mut extra = String::new();
        if self.def.fewshot_as_turns {
            extra.push_str("\nfewshot-as-turns");
        }
        if self.def.scoring != crate::spec::Scoring::Generative {
            extra.push_str(&format!(
                "\nscoring={} choices={:?}",
                self.def.scoring.as_str(),
                c.choices
            ));
        }
        format!(
            "custom/1\n{}\nreference={} id={:?}{extra}",
            c.template.value, c.reference.value, c.id_field
        )
    }

    fn metric(&self) -> String {
        let c = self.custom();
        let metrics: Vec<&str> = c.metrics.iter().map(|m| m.value.name()).collect();
        if self.reads_logprobs() {
            return format!(
                "custom-choice-logprobs/1 choices={:?} (ties to the earlier option) group-by={:?}",
                c.choices, c.group_by
            );
        }
        let constrained = if self.def.scoring == crate::spec::Scoring::Constrained {
            format!(" constrained={:?}", c.choices)
        } else {
            String::new()
        };
        format!(
            "custom-metrics/1 {metrics:?} extract={:?} scorer={:?} timeout={} database={:?} group-by={:?} sql-timeout={}",
            c.extract.as_ref().map(|e| &e.value),
            c.scorer,
            c.scorer_timeout_s,
            c.database.as_ref().map(|d| &d.value),
            c.group_by,
            self.def.sql_timeout_s,
        ) + &constrained
    }

    fn primary(&self) -> &'static str {
        custom::primary(self.custom())
    }

    fn load(&self, seed: u64) -> Result<Vec<Sample>, DatasetError> {
        custom::load(&self.def, self.custom(), &self.path, seed)
    }

    fn score(&self, items: &[(&Sample, &str)]) -> Result<Vec<Score>, ScoreError> {
        let c = self.custom();
        if self.reads_logprobs() {
            return Ok(items
                .par_iter()
                .map(|(s, top)| custom::score_logprobs(c, s, top))
                .collect());
        }
        if let Some(cmd) = &c.scorer {
            return custom::run_scorer(
                cmd,
                &self.base,
                Duration::from_secs_f64(c.scorer_timeout_s),
                items,
            );
        }
        let timeout = Duration::from_secs_f64(self.def.sql_timeout_s);
        let sandbox = match &c.database {
            Some(db) => Some(sql::Sandbox::open(&self.base.join(&db.value), timeout)?),
            None => None,
        };
        // One connection is not shared across threads: SQL tasks score in order.
        if sandbox.is_some() {
            return Ok(items
                .iter()
                .map(|(s, o)| custom::score_builtin(c, s, o, sandbox.as_ref()))
                .collect());
        }
        Ok(items
            .par_iter()
            .map(|(s, o)| custom::score_builtin(c, s, o, None))
            .collect())
    }
}

impl Custom {
    fn custom(&self) -> &crate::spec::CustomTask {
        self.def
            .custom
            .as_ref()
            .expect("a custom task has its custom part")
    }
}

/// A `synthetic` task: placeholders with token targets; their text is written at run time
/// with the engine's tokenizer ([`synthetic::materialize`]).
struct SyntheticTask {
    def: TaskDef,
    /// Output tokens when the task draws none (the task's or sweep's `max-tokens`).
    output: u32,
}

impl SyntheticTask {
    fn syn(&self) -> &crate::spec::Synthetic {
        self.def
            .synthetic
            .as_ref()
            .expect("a synthetic task has its synthetic part")
    }
}

impl Task for SyntheticTask {
    fn files(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    fn template(&self) -> String {
        format!(
            "{} {} system={:?} default-output={}",
            synthetic::RECIPE,
            serde_json::to_string(self.syn()).expect("serializable"),
            self.def.system,
            self.output
        )
    }

    fn metric(&self) -> String {
        "synthetic: no reference".into()
    }

    fn primary(&self) -> &'static str {
        "none"
    }

    fn load(&self, seed: u64) -> Result<Vec<Sample>, DatasetError> {
        Ok(synthetic::plan(
            self.syn(),
            self.def.samples.unwrap_or(100),
            self.def.system.as_deref(),
            self.output,
            seed,
        ))
    }

    fn score(&self, items: &[(&Sample, &str)]) -> Result<Vec<Score>, ScoreError> {
        Ok(synthetic::score(items.len()))
    }
}

/// The implementation of the sweep's task number `t`.
pub(crate) fn of(sweep: &Sweep, t: usize) -> Box<dyn Task> {
    let def = sweep.tasks[t].clone();
    let path = sweep.resolve_path(&def.dataset.value);
    let reason = def.reason;
    let task: Box<dyn Task> = match def.kind {
        TaskKind::Custom => Box::new(Custom {
            def,
            path,
            base: sweep.base_dir.clone(),
        }),
        TaskKind::Synthetic => Box::new(SyntheticTask {
            output: def.max_tokens.unwrap_or(sweep.defaults.sampling.max_tokens),
            def,
        }),
        _ => Box::new(Builtin { def, dir: path }),
    };
    match reason {
        Some(budget) => Box::new(reason::Reasoned {
            inner: task,
            budget,
        }),
        None => task,
    }
}

/// Files a task's scoring depends on beyond the run's outputs (an external scorer's script, a
/// custom task's database).
pub(crate) fn scoring_files(sweep: &Sweep, t: usize) -> Vec<PathBuf> {
    let def = &sweep.tasks[t];
    match &def.custom {
        Some(c) => {
            let base = sweep.base_dir.clone();
            let mut f = custom::scorer_files(c, &base);
            if let Some(db) = &c.database {
                f.push(base.join(&db.value));
            }
            f
        }
        None => Vec::new(),
    }
}

/// The evaluated items: a seeded permutation of the dataset, cut to `samples`.
pub(crate) fn sample_order(
    len: usize,
    samples: Option<usize>,
    seed: u64,
    stream: &str,
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    SplitMix64::derive(seed, stream).shuffle(&mut order);
    if let Some(n) = samples {
        order.truncate(n);
    }
    order
}

/// Aggregate metrics over scored requests: `quality` (mean of the per-request score), the
/// mean of every per-request metric, `scored`, `unparsed_rate` where outputs are parsed,
/// `error_rate`, and per group `<metric>.<group>.<value>`.
pub(crate) fn aggregate(scored: &[(&Sample, &Score)]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let scored: Vec<&(&Sample, &Score)> = scored.iter().filter(|(_, s)| !s.unscorable).collect();
    if scored.is_empty() {
        return out;
    }
    let n = scored.len() as f64;
    out.insert("scored".into(), n);
    out.insert(
        "quality".into(),
        scored.iter().map(|(_, s)| s.score).sum::<f64>() / n,
    );
    let parsed: Vec<bool> = scored.iter().filter_map(|(_, s)| s.parsed).collect();
    if !parsed.is_empty() {
        out.insert(
            "unparsed_rate".into(),
            parsed.iter().filter(|p| !**p).count() as f64 / parsed.len() as f64,
        );
    }
    out.insert(
        "error_rate".into(),
        scored.iter().filter(|(_, s)| s.error.is_some()).count() as f64 / n,
    );
    let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (sample, s) in &scored {
        for (m, v) in &s.metrics {
            let e = sums.entry(m.clone()).or_default();
            e.0 += v;
            e.1 += 1.0;
            for (g, gv) in &sample.groups {
                let e = sums.entry(format!("{m}.{g}.{gv}")).or_default();
                e.0 += v;
                e.1 += 1.0;
            }
        }
    }
    for (k, (sum, n)) in sums {
        out.insert(k, sum / n);
    }
    out
}

/// Why `bench360 metric` stopped: its input or output, a line it cannot read, a metric it
/// does not know.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MetricCliError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("input line {line}: {why}")]
    Line { line: usize, why: String },
    #[error("cannot write the scores: {0}")]
    Output(#[from] serde_json::Error),
    #[error("unknown metric `{0}`")]
    UnknownMetric(String),
}

/// `bench360 metric`: scores JSONL predictions with one metric (see the CLI help).
pub(crate) fn metric_cli(
    metric: &str,
    input: Box<dyn std::io::BufRead>,
    out: &mut dyn std::io::Write,
    sql_timeout: Duration,
    split_sentences: bool,
) -> Result<(), MetricCliError> {
    use serde_json::{json, Value};
    let mut sandboxes: BTreeMap<String, Result<sql::Sandbox, sql::SqlError>> = BTreeMap::new();
    for (i, line) in std::io::BufRead::lines(input).enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| MetricCliError::Line { line: i + 1, why };
        let v: Value = serde_json::from_str(&line).map_err(|e| at(e.to_string()))?;
        let field = |k: &str| -> Result<String, MetricCliError> {
            v.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| at(format!("no string `{k}`")))
        };
        let id = v.get("id").cloned().unwrap_or(Value::Null);
        let pred = field("prediction")?;
        let res = match metric {
            "rouge" => {
                let (reference, pred) = if split_sentences {
                    (
                        rouge::sentence_lines(&field("reference")?),
                        rouge::sentence_lines(&pred),
                    )
                } else {
                    (field("reference")?, pred)
                };
                let r = rouge::score(&reference, &pred);
                json!({"id": id, "rouge1": r.rouge1.f, "rouge2": r.rouge2.f,
                       "rougeL": r.rouge_l.f, "rougeLsum": r.rouge_lsum.f})
            }
            "squad" => {
                let answers: Vec<String> = v
                    .get("answers")
                    .and_then(Value::as_array)
                    .ok_or_else(|| at("no `answers` list".into()))?
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect();
                let (em, f1) = squad::score_answers(&answers, &pred);
                json!({"id": id, "exact": em, "f1": f1})
            }
            "sql" => {
                let db = field("database")?;
                let sb = sandboxes
                    .entry(db.clone())
                    .or_insert_with(|| sql::Sandbox::open(Path::new(&db), sql_timeout));
                let sample = Sample {
                    reference: field("reference")?,
                    extra: BTreeMap::from([("database".to_string(), db)]),
                    ..Sample::default()
                };
                let s = match sb {
                    Ok(sb) => text2sql::score_with(sb, &sample, &pred),
                    Err(e) => Score {
                        error: Some(e.to_string()),
                        unscorable: true,
                        ..Score::default()
                    },
                };
                json!({"id": id,
                       "execution_accuracy": s.metrics.get("execution_accuracy"),
                       "exact_match": s.metrics.get("exact_match"),
                       "extracted": s.extracted, "error": s.error})
            }
            "mmlu" => {
                let answer = field("answer")?;
                let reading = mmlu::read_letter(&pred);
                let extracted = match reading {
                    mmlu::Reading::Letter(l) => Some(l.to_string()),
                    _ => None,
                };
                let correct = extracted.as_deref() == Some(answer.trim());
                json!({"id": id, "extracted": extracted, "correct": correct,
                       "parsed": extracted.is_some(),
                       "ambiguous": reading == mmlu::Reading::Ambiguous})
            }
            other => return Err(MetricCliError::UnknownMetric(other.into())),
        };
        serde_json::to_writer(&mut *out, &res)?;
        writeln!(out)?;
    }
    Ok(())
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::Spanned;

    pub(crate) fn def(kind: TaskKind, samples: Option<usize>) -> TaskDef {
        TaskDef {
            name: Spanned::new("t".into(), (0..0).into()),
            kind,
            dataset: Spanned::new("x".into(), (0..0).into()),
            samples,
            shots: 0,
            system: None,
            mode: None,
            max_tokens: None,
            stop: Vec::new(),
            ignore_eos: None,
            article_words: 400,
            sql_timeout_s: 5.0,
            answer_format: None,
            extract: None,
            custom: None,
            synthetic: None,
            scoring: crate::spec::Scoring::Generative,
            fewshot_as_turns: false,
            reason: None,
        }
    }

    #[test]
    fn built_in_tasks_take_an_answer_format_and_an_extract_regex() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/mmlu");
        let mut d = def(TaskKind::Mmlu, Some(2));
        d.answer_format = Some("Reply with <answer>X</answer>.".into());
        d.extract = Some(Spanned::new(
            r"<answer>([A-D])</answer>".into(),
            (0..0).into(),
        ));
        let t = Builtin { def: d, dir };
        let samples = t.load(1).unwrap();
        assert!(samples[0]
            .prompt
            .ends_with("\n\nReply with <answer>X</answer>."));
        assert!(t.template().contains("answer-format=Reply with"));
        assert!(t.metric().contains("extract="));
        let right = format!("I think A... <answer>{}</answer>", samples[0].reference);
        let scores = t
            .score(&[
                (&samples[0], right.as_str()),
                (&samples[0], "The answer is B"),
            ])
            .unwrap();
        assert_eq!(scores[0].correct, Some(true), "{scores:?}");
        // No match: unparsed and 0, even where the task's own reading would find a letter.
        assert_eq!(scores[1].parsed, Some(false));
        assert_eq!(scores[1].score, 0.0);
    }

    #[test]
    fn aggregates_means_splits_and_leaves_unscorable_out() {
        let a = Sample {
            groups: BTreeMap::from([("answerable".to_string(), "has_answer".to_string())]),
            ..Sample::default()
        };
        let b = Sample {
            groups: BTreeMap::from([("answerable".to_string(), "no_answer".to_string())]),
            ..Sample::default()
        };
        let s = |v: f64| Score {
            score: v,
            metrics: BTreeMap::from([("f1".to_string(), v)]),
            ..Score::default()
        };
        let bad = Score {
            unscorable: true,
            ..Score::default()
        };
        let (s1, s2, s3) = (s(1.0), s(0.5), s(0.0));
        let m = aggregate(&[(&a, &s1), (&a, &s2), (&b, &s3), (&b, &bad)]);
        assert_eq!(m["scored"], 3.0);
        assert_eq!(m["quality"], 0.5);
        assert_eq!(m["f1"], 0.5);
        assert_eq!(m["f1.answerable.has_answer"], 0.75);
        assert_eq!(m["f1.answerable.no_answer"], 0.0);
        assert!(!m.contains_key("unparsed_rate"));
    }

    #[test]
    fn shots_never_include_the_item_and_prefer_unevaluated_items() {
        let evaluated = [0, 1, 2];
        for item in evaluated {
            let s = shot_indices(10, &evaluated, item, 3, 1, &item.to_string());
            assert_eq!(s.len(), 3);
            assert!(s.iter().all(|i| !evaluated.contains(i)));
        }
        let all: Vec<usize> = (0..4).collect();
        let s = shot_indices(4, &all, 2, 3, 1, "x");
        assert_eq!(s.len(), 3);
        assert!(!s.contains(&2));
        assert_eq!(s, shot_indices(4, &all, 2, 3, 1, "x"), "seeded");
    }

    /// A custom scorer's own files are keyed: a script given as an argument, or the program
    /// when its command names it by a path; a bare program name (found on PATH) is not a file
    /// of the sweep's, even when one of that name sits beside it.
    #[test]
    fn a_custom_scorer_given_by_a_path_is_keyed_by_its_content() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["score.sh", "score.py", "python3"] {
            std::fs::write(dir.path().join(f), "#!/bin/sh\n").unwrap();
        }
        let files = |cmd: &[&str]| -> Vec<PathBuf> {
            let c = crate::spec::CustomTask {
                template: Spanned::new("{{ q }}".into(), (0..0).into()),
                reference: Spanned::new("answer".into(), (0..0).into()),
                id_field: None,
                metrics: Vec::new(),
                extract: None,
                scorer: Some(cmd.iter().map(|s| s.to_string()).collect()),
                scorer_timeout_s: 10.0,
                database: None,
                group_by: Vec::new(),
                choices: Vec::new(),
            };
            custom::scorer_files(&c, dir.path())
        };
        assert_eq!(files(&["./score.sh"]), [dir.path().join("./score.sh")]);
        assert_eq!(
            files(&["python3", "score.py"]),
            [dir.path().join("score.py")]
        );
        assert!(files(&["python3"]).is_empty());
    }
}
