//! User-defined tasks: a dataset file (JSONL, CSV or Parquet), a minijinja prompt template
//! over its fields, the field holding the reference, and metrics from the built-in set or an
//! external scorer command (JSONL in, JSONL out).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Map, Value};

use super::{mmlu, sql, squad, summarization, DatasetError, Sample, Score, ScoreError};
use crate::spec::{CustomTask, Metric, Task as TaskDef};

/// One dataset row: where it is (1-based line of a JSONL/CSV file, row of a Parquet file) and
/// its fields.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub line: usize,
    pub fields: Map<String, Value>,
}

/// Reads a JSONL, CSV or Parquet file by its extension.
pub(crate) fn read_rows(path: &Path) -> Result<Vec<Row>, DatasetError> {
    let p = path.display().to_string();
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let io = |source| DatasetError::Io {
        path: p.clone(),
        source,
    };
    match ext.as_str() {
        "jsonl" | "ndjson" | "json" => {
            let text = std::fs::read_to_string(path).map_err(io)?;
            let mut out = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(line) {
                    Ok(Value::Object(fields)) => out.push(Row {
                        line: i + 1,
                        fields,
                    }),
                    Ok(_) => {
                        return Err(DatasetError::Line {
                            path: p,
                            line: i + 1,
                            message: "not a JSON object".into(),
                        })
                    }
                    Err(e) => {
                        return Err(DatasetError::Line {
                            path: p,
                            line: i + 1,
                            message: e.to_string(),
                        })
                    }
                }
            }
            Ok(out)
        }
        "csv" | "tsv" => {
            let mut r = csv::ReaderBuilder::new()
                .delimiter(if ext == "tsv" { b'\t' } else { b',' })
                .from_path(path)
                .map_err(|e| DatasetError::File {
                    path: p.clone(),
                    message: e.to_string(),
                })?;
            let headers = r
                .headers()
                .map_err(|e| DatasetError::Line {
                    path: p.clone(),
                    line: 1,
                    message: e.to_string(),
                })?
                .clone();
            let mut out = Vec::new();
            for rec in r.records() {
                let rec = rec.map_err(|e| DatasetError::Line {
                    path: p.clone(),
                    line: e.position().map_or(0, |pos| pos.line() as usize),
                    message: e.to_string(),
                })?;
                let line = rec.position().map_or(0, |pos| pos.line() as usize);
                let fields = headers
                    .iter()
                    .zip(rec.iter())
                    .map(|(h, v)| (h.to_string(), Value::String(v.to_string())))
                    .collect();
                out.push(Row { line, fields });
            }
            Ok(out)
        }
        "parquet" => crate::trace::read_json_rows(path)
            .map(|rows| {
                rows.into_iter()
                    .enumerate()
                    .map(|(i, fields)| Row {
                        line: i + 1,
                        fields,
                    })
                    .collect()
            })
            .map_err(|e| DatasetError::File {
                path: p,
                message: format!("{e:#}"),
            }),
        other => Err(DatasetError::File {
            path: p,
            message: format!(
                "unknown dataset format `.{other}`: use .jsonl, .csv, .tsv or .parquet"
            ),
        }),
    }
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        other => Some(other.to_string()),
    }
}

/// The references of a row: a string (or number), or a list of them.
fn references(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a.iter().filter_map(text_of).collect(),
        v => text_of(v).into_iter().collect(),
    }
}

fn environment(source: &str) -> Result<minijinja::Environment<'static>, TemplateError> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    env.add_template_owned("prompt", source.to_string())
        .map_err(|e| TemplateError(format!("the prompt template does not parse: {e}")))?;
    Ok(env)
}

/// A template that does not parse, with minijinja's reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TemplateError(pub String);

/// Checks a template without data: that it parses.
pub(crate) fn check_template(source: &str) -> Result<(), TemplateError> {
    environment(source).map(|_| ())
}

pub(crate) fn load(
    def: &TaskDef,
    c: &CustomTask,
    path: &Path,
    seed: u64,
) -> Result<Vec<Sample>, DatasetError> {
    let p = path.display().to_string();
    let rows = read_rows(path)?;
    if rows.is_empty() {
        return Err(DatasetError::File {
            path: p,
            message: "no rows".into(),
        });
    }
    let env = environment(&c.template.value).map_err(|e| DatasetError::File {
        path: p.clone(),
        message: e.0,
    })?;
    let tmpl = env.get_template("prompt").expect("just added");
    let wanted: BTreeSet<String> = tmpl.undeclared_variables(false).into_iter().collect();
    // Every row is checked before any is used: a bad row anywhere stops the task.
    let mut ids = BTreeSet::new();
    for row in &rows {
        let err = |message: String| DatasetError::Line {
            path: p.clone(),
            line: row.line,
            message,
        };
        let have = || row.fields.keys().cloned().collect::<Vec<_>>().join(", ");
        for w in &wanted {
            if !row.fields.contains_key(w) {
                return Err(err(format!(
                    "the prompt template uses `{w}`, which this row does not have (it has: {})",
                    have()
                )));
            }
        }
        match row.fields.get(&c.reference.value) {
            None | Some(Value::Null) => {
                return Err(err(format!(
                    "no reference: field `{}` is missing or null (it has: {})",
                    c.reference.value,
                    have()
                )))
            }
            Some(_) => {}
        }
        for g in &c.group_by {
            if !row.fields.contains_key(g) {
                return Err(err(format!(
                    "no field `{g}` to group by (it has: {})",
                    have()
                )));
            }
        }
        if let Some(id_field) = &c.id_field {
            let Some(id) = row.fields.get(id_field).and_then(text_of) else {
                return Err(err(format!("no id: field `{id_field}` is missing or null")));
            };
            if !ids.insert(id.clone()) {
                return Err(err(format!("id `{id}` appears twice")));
            }
        }
    }
    let render = |row: &Row| {
        tmpl.render(&row.fields).map_err(|e| DatasetError::Line {
            path: p.clone(),
            line: row.line,
            message: format!("the prompt template fails on this row: {e}"),
        })
    };
    let order = super::sample_order(rows.len(), def.samples, seed, "custom/order");
    let mut out = Vec::with_capacity(order.len());
    for &i in &order {
        let row = &rows[i];
        let id = match &c.id_field {
            Some(f) => row.fields.get(f).and_then(text_of).unwrap_or_default(),
            None => format!("row-{}", row.line),
        };
        let mut shots = super::Shots::new("", def.fewshot_as_turns);
        for s in super::shot_indices(rows.len(), &order, i, def.shots, seed, &id) {
            let shot = &rows[s];
            let reference = references(&shot.fields[&c.reference.value])
                .into_iter()
                .next()
                .unwrap_or_default();
            shots.push(render(shot)?.trim_end(), &reference);
        }
        let (prompt, history) = shots.finish(&render(row)?);
        let refs = references(&row.fields[&c.reference.value]);
        out.push(Sample {
            id,
            system: def.system.clone(),
            prompt,
            reference: refs.first().cloned().unwrap_or_default(),
            references: refs,
            groups: c
                .group_by
                .iter()
                .map(|g| (g.clone(), text_of(&row.fields[g]).unwrap_or_default()))
                .collect(),
            extra: BTreeMap::from([(
                "row".to_string(),
                Value::Object(row.fields.clone()).to_string(),
            )]),
            history,
            ..Default::default()
        });
    }
    Ok(out)
}

/// A custom `choice` task's score from the recorded top log-probabilities (`scoring
/// "logprobs"`): the declared option most likely at the answer position, right when it is one
/// of the references (case-insensitive, as the `choice` metric compares). `label_tie` is 1 where
/// the choice was a tie.
pub(crate) fn score_logprobs(c: &CustomTask, sample: &Sample, top: &str) -> Score {
    let options: Vec<&str> = c.choices.iter().map(String::as_str).collect();
    let chosen = mmlu::choose_among(top, &options);
    let picked = chosen.map(|(i, _, _)| options[i].to_string());
    let correct = picked.as_ref().is_some_and(|p| {
        sample
            .references
            .iter()
            .any(|r| r.trim().eq_ignore_ascii_case(p.trim()))
    });
    let v = f64::from(u8::from(correct));
    let tie = f64::from(u8::from(chosen.is_some_and(|(_, _, t)| t)));
    Score {
        score: v,
        correct: Some(correct),
        extracted: picked,
        parsed: Some(chosen.is_some()),
        metrics: BTreeMap::from([
            ("choice_accuracy".to_string(), v),
            ("label_tie".to_string(), tie),
        ]),
        ..Score::default()
    }
}

static FENCED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)```[a-zA-Z]*\s*\n?(.*?)```").expect("valid regex"));

fn valid_json(output: &str) -> bool {
    let body = FENCED
        .captures(output)
        .map(|c| c[1].to_string())
        .unwrap_or_else(|| output.to_string());
    serde_json::from_str::<Value>(body.trim()).is_ok()
}

/// The answer the metrics compare: group 1 (or the whole match) of the `extract` pattern,
/// else the output trimmed.
fn answer_of(c: &CustomTask, output: &str) -> Option<String> {
    match &c.extract {
        Some(re) => {
            let re = Regex::new(&re.value).ok()?;
            let caps = re.captures(output)?;
            Some(
                caps.get(1)
                    .or_else(|| caps.get(0))
                    .map_or("", |m| m.as_str())
                    .trim()
                    .to_string(),
            )
        }
        None => Some(output.trim().to_string()),
    }
}

/// Scores one output with the task's built-in metrics. `sandbox` is open on the task's
/// database when it uses the `sql` metric.
pub(crate) fn score_builtin(
    c: &CustomTask,
    sample: &Sample,
    output: &str,
    sandbox: Option<&sql::Sandbox>,
) -> Score {
    let answer = answer_of(c, output);
    let mut s = Score {
        extracted: answer.clone(),
        parsed: c.extract.as_ref().map(|_| answer.is_some()),
        ..Score::default()
    };
    let answer = answer.unwrap_or_default();
    let refs: Vec<String> = if sample.references.is_empty() {
        vec![String::new()]
    } else {
        sample.references.clone()
    };
    let best = |f: &dyn Fn(&str) -> f64| refs.iter().map(|r| f(r)).fold(0.0, f64::max);
    let mut primary = None;
    for m in &c.metrics {
        let (name, v): (&str, f64) = match m.value {
            Metric::ExactMatch => ("exact_match", best(&|r| squad::exact(r, &answer))),
            Metric::F1 => ("f1", best(&|r| squad::f1(r, &answer))),
            Metric::Contains => (
                "contains",
                best(&|r| {
                    let r = squad::normalize_answer(r);
                    f64::from(u8::from(
                        !r.is_empty()
                            && format!(" {} ", squad::normalize_answer(&answer))
                                .contains(&format!(" {r} ")),
                    ))
                }),
            ),
            Metric::Choice => {
                let picked = match &c.extract {
                    Some(_) => (!answer.is_empty()).then(|| answer.clone()),
                    // A declared option, as a constrained answer is written.
                    None if c.choices.iter().any(|o| o.trim() == output.trim()) => {
                        Some(output.trim().to_string())
                    }
                    None => mmlu::extract_letter(output).map(String::from),
                };
                s.parsed = Some(picked.is_some());
                s.extracted = picked.clone();
                let ok = picked
                    .is_some_and(|p| refs.iter().any(|r| r.trim().eq_ignore_ascii_case(p.trim())));
                ("choice_accuracy", f64::from(u8::from(ok)))
            }
            Metric::Json => ("valid_json", f64::from(u8::from(valid_json(output)))),
            Metric::Rouge => {
                let r = summarization::rouge_metrics(&sample.reference, output);
                for (k, v) in &r {
                    s.metrics.insert(k.clone(), *v);
                }
                ("rougeL", r["rougeL"])
            }
            Metric::Sql => {
                // The same execution comparison as the Spider task.
                let v = match sandbox {
                    Some(sb) => {
                        let r = super::text2sql::score_with(sb, sample, output);
                        s.unscorable |= r.unscorable;
                        s.fault |= r.fault;
                        s.error = r.error;
                        r.metrics.get("execution_accuracy").copied().unwrap_or(0.0)
                    }
                    None => {
                        s.unscorable = true;
                        s.fault = true;
                        s.error = Some("no database to run SQL on".into());
                        0.0
                    }
                };
                ("execution_accuracy", v)
            }
        };
        s.metrics.insert(name.to_string(), v);
        primary.get_or_insert(v);
    }
    s.score = primary.unwrap_or(0.0);
    if matches!(
        c.metrics.first().map(|m| m.value),
        Some(Metric::ExactMatch | Metric::Choice | Metric::Contains | Metric::Json | Metric::Sql)
    ) {
        s.correct = Some(s.score == 1.0);
    }
    s
}

/// Name of a custom task's per-request score.
pub(crate) fn primary(c: &CustomTask) -> &'static str {
    if c.scorer.is_some() {
        return "score";
    }
    match c.metrics.first().map(|m| m.value) {
        Some(Metric::ExactMatch) => "exact_match",
        Some(Metric::F1) => "f1",
        Some(Metric::Contains) => "contains",
        Some(Metric::Choice) => "choice_accuracy",
        Some(Metric::Json) => "valid_json",
        Some(Metric::Rouge) => "rougeL",
        Some(Metric::Sql) => "execution_accuracy",
        None => "score",
    }
}

/// Runs the external scorer: one JSON object per output on its stdin (`id`, `prompt`,
/// `output`, `reference`, `references`, `fields`), one per line back on its stdout with the
/// same `id`, a numeric `score`, and optionally more numeric fields (recorded as
/// `scorer_<name>`). It runs in `cwd` with a cleared environment (PATH, HOME, LANG and
/// TMPDIR only: no tokens or keys) and is killed after `timeout`.
pub(crate) fn run_scorer(
    command: &[String],
    cwd: &Path,
    timeout: Duration,
    items: &[(&Sample, &str)],
) -> Result<Vec<Score>, ScoreError> {
    let (prog, args) = command.split_first().ok_or("empty scorer command")?;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for k in ["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the scorer `{prog}`: {e}"))?;
    let mut input = Vec::new();
    for (s, output) in items {
        let fields: Value = s
            .extra
            .get("row")
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or(Value::Null);
        let line = serde_json::json!({
            "id": s.id, "prompt": s.prompt, "output": output,
            "reference": s.reference, "references": s.references, "fields": fields,
        });
        serde_json::to_writer(&mut input, &line).expect("json");
        input.push(b'\n');
    }
    let mut stdin = child.stdin.take().expect("piped");
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the scorer ran past its {timeout:?} limit and was killed").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    let out = reader
        .join()
        .map_err(|_| "scorer output reader panicked")?
        .map_err(|e| format!("cannot read the scorer's output: {e}"))?;
    let err = err_reader.join().unwrap_or_default();
    if !status.success() {
        return Err(ScoreError::Scorer(format!(
            "the scorer exited with {status}: {}",
            {
                let lines: Vec<&str> = err.lines().collect();
                lines[lines.len().saturating_sub(5)..].join("\n")
            }
        )));
    }
    let mut by_id: BTreeMap<String, Score> = BTreeMap::new();
    for (i, line) in out.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |m: String| format!("scorer output line {}: {m}", i + 1);
        let v: Value = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        let id = v
            .get("id")
            .and_then(text_of)
            .ok_or_else(|| bad("no `id`".into()))?;
        let score = v
            .get("score")
            .and_then(Value::as_f64)
            .ok_or_else(|| bad(format!("no numeric `score` for `{id}`")))?;
        let mut metrics = BTreeMap::from([("score".to_string(), score)]);
        if let Some(o) = v.as_object() {
            for (k, x) in o {
                if k != "id" && k != "score" {
                    if let Some(f) = x.as_f64() {
                        metrics.insert(format!("scorer_{k}"), f);
                    }
                }
            }
        }
        by_id.insert(
            id,
            Score {
                score,
                metrics,
                ..Score::default()
            },
        );
    }
    items
        .iter()
        .map(|(s, _)| {
            by_id.get(&s.id).cloned().ok_or_else(|| {
                ScoreError::Scorer(format!("the scorer returned no score for `{}`", s.id))
            })
        })
        .collect()
}

/// Files whose content a custom task's runs and scores depend on: the dataset, and the
/// scorer's files its command names — a script given as an argument (`python3 score.py`), or
/// the program itself when given as a path (`./score.sh`; a bare name is found on PATH).
pub(crate) fn scorer_files(c: &CustomTask, base: &Path) -> Vec<PathBuf> {
    c.scorer
        .as_ref()
        .map(|cmd| {
            cmd.iter()
                .enumerate()
                .filter(|(i, a)| *i > 0 || a.contains('/'))
                .map(|(_, a)| base.join(a))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spanned;

    fn sp<T>(v: T) -> Spanned<T> {
        Spanned::new(v, (0..0).into())
    }

    fn custom(template: &str, metrics: &[Metric]) -> CustomTask {
        CustomTask {
            template: sp(template.into()),
            reference: sp("answer".into()),
            id_field: Some("id".into()),
            metrics: metrics.iter().map(|m| sp(*m)).collect(),
            extract: None,
            scorer: None,
            scorer_timeout_s: 10.0,
            database: None,
            group_by: vec![],
            choices: vec![],
        }
    }

    fn def() -> TaskDef {
        super::super::tests::def(crate::spec::TaskKind::Custom, None)
    }

    #[test]
    fn reads_jsonl_csv_and_parquet_with_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("d.jsonl");
        std::fs::write(&j, "{\"id\":\"a\",\"q\":\"x\",\"answer\":\"1\"}\n\n{\"id\":\"b\",\"q\":\"y\",\"answer\":2}\n").unwrap();
        let rows = read_rows(&j).unwrap();
        assert_eq!(rows.iter().map(|r| r.line).collect::<Vec<_>>(), [1, 3]);
        std::fs::write(&j, "{\"id\":\"a\"}\n[1,2]\n").unwrap();
        let e = read_rows(&j).unwrap_err().to_string();
        assert!(e.ends_with("d.jsonl:2: not a JSON object"), "{e}");
        let c = dir.path().join("d.csv");
        std::fs::write(&c, "id,q,answer\na,\"multi\nline\",1\nb,y,2\n").unwrap();
        let rows = read_rows(&c).unwrap();
        assert_eq!(rows[1].line, 4, "the second record starts on line 4");
        assert_eq!(rows[0].fields["q"], "multi\nline");
        std::fs::write(&c, "id,q,answer\na,x\n").unwrap();
        let e = read_rows(&c).unwrap_err().to_string();
        assert!(e.contains("d.csv:2:"), "{e}");
    }

    #[test]
    fn a_template_naming_a_missing_field_points_at_the_row() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("d.jsonl");
        std::fs::write(
            &j,
            "{\"id\":\"a\",\"question\":\"x\",\"answer\":\"1\"}\n{\"id\":\"b\",\"qestion\":\"y\",\"answer\":\"2\"}\n",
        )
        .unwrap();
        let c = custom("Q: {{ question }}\nA:", &[Metric::ExactMatch]);
        let e = load(&def(), &c, &j, 1).unwrap_err().to_string();
        assert!(
            e.contains("d.jsonl:2:") && e.contains("`question`") && e.contains("qestion"),
            "{e}"
        );
        // Loop variables and filters are not fields.
        let c = custom(
            "{% for w in words %}{{ w|upper }} {% endfor %}",
            &[Metric::ExactMatch],
        );
        std::fs::write(
            &j,
            "{\"id\":\"a\",\"words\":[\"x\",\"y\"],\"answer\":\"1\"}\n",
        )
        .unwrap();
        let s = load(&def(), &c, &j, 1).unwrap();
        assert_eq!(s[0].prompt, "X Y ");
    }

    #[test]
    fn built_in_metrics() {
        let s = Sample {
            reference: "Paris".into(),
            references: vec!["Paris".into(), "the city of Paris".into()],
            ..Sample::default()
        };
        let c = custom(
            "x",
            &[
                Metric::ExactMatch,
                Metric::F1,
                Metric::Contains,
                Metric::Json,
            ],
        );
        let sc = score_builtin(&c, &s, " paris. ", None);
        assert_eq!(sc.metrics["exact_match"], 1.0);
        assert_eq!(sc.metrics["f1"], 1.0);
        assert_eq!(sc.metrics["contains"], 1.0);
        assert_eq!(sc.metrics["valid_json"], 0.0);
        assert_eq!((sc.score, sc.correct), (1.0, Some(true)));
        let sc = score_builtin(&c, &s, "It is Paris, France", None);
        assert_eq!(sc.metrics["exact_match"], 0.0);
        assert_eq!(sc.metrics["contains"], 1.0);
        // "Parisian" does not contain the word "Paris".
        assert_eq!(
            score_builtin(&c, &s, "Parisian", None).metrics["contains"],
            0.0
        );
        let j = custom("x", &[Metric::Json]);
        assert_eq!(
            score_builtin(&j, &s, "```json\n{\"a\": 1}\n```", None).score,
            1.0
        );
        assert_eq!(score_builtin(&j, &s, "{\"a\": 1", None).score, 0.0);
        let mut ch = custom("x", &[Metric::Choice]);
        let b = Sample {
            references: vec!["B".into()],
            reference: "B".into(),
            ..Sample::default()
        };
        assert_eq!(score_builtin(&ch, &b, "Answer: B", None).score, 1.0);
        ch.extract = Some(sp(r"Label:\s*(\w+)".into()));
        let pos = Sample {
            references: vec!["positive".into()],
            reference: "positive".into(),
            ..Sample::default()
        };
        let sc = score_builtin(&ch, &pos, "Label: Positive", None);
        assert_eq!((sc.score, sc.parsed), (1.0, Some(true)));
        let sc = score_builtin(&ch, &pos, "no idea", None);
        assert_eq!((sc.score, sc.parsed), (0.0, Some(false)));
    }

    #[test]
    fn sql_metric_executes_both_queries_on_the_database() {
        let db = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("datasets/spider/database/concert_singer/concert_singer.sqlite");
        let sb = sql::Sandbox::open(&db, Duration::from_secs(5)).unwrap();
        let c = custom("x", &[Metric::Sql]);
        let s = Sample {
            reference: "SELECT count(*) FROM singer".into(),
            references: vec!["SELECT count(*) FROM singer".into()],
            ..Sample::default()
        };
        let right = score_builtin(
            &c,
            &s,
            "```sql\nSELECT COUNT(Singer_ID) FROM singer\n```",
            Some(&sb),
        );
        assert_eq!((right.score, right.correct), (1.0, Some(true)));
        let wrong = score_builtin(&c, &s, "SELECT count(*) FROM stadium", Some(&sb));
        assert_eq!(wrong.score, 0.0);
        let broken = score_builtin(&c, &s, "SELECT nothing FROM nowhere", Some(&sb));
        assert!(broken.error.is_some() && !broken.unscorable);
        let no_db = score_builtin(&c, &s, "SELECT 1", None);
        assert!(no_db.unscorable && no_db.fault);
        assert!(!broken.fault && !wrong.fault);
    }

    #[test]
    fn external_scorer_reads_and_writes_jsonl_without_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s.sh");
        // Scores 1 when the output has the reference in it; reports whether HF_TOKEN leaked.
        std::fs::write(
            &script,
            "while IFS= read -r l; do id=$(printf '%s' \"$l\" | sed 's/.*\"id\":\"\\([^\"]*\\)\".*/\\1/'); \
             leak=0; [ -n \"${HF_TOKEN:-}\" ] && leak=1; \
             case \"$l\" in *'\"output\":\"yes'*) s=1;; *) s=0;; esac; \
             printf '{\"id\":\"%s\",\"score\":%s,\"leak\":%s}\\n' \"$id\" $s $leak; done\n",
        )
        .unwrap();
        let a = Sample {
            id: "a".into(),
            ..Sample::default()
        };
        let b = Sample {
            id: "b".into(),
            ..Sample::default()
        };
        std::env::set_var("HF_TOKEN", "secret");
        let cmd = vec!["sh".to_string(), "s.sh".to_string()];
        let sc = run_scorer(
            &cmd,
            dir.path(),
            Duration::from_secs(20),
            &[(&a, "yes"), (&b, "no")],
        )
        .unwrap();
        assert_eq!((sc[0].score, sc[1].score), (1.0, 0.0));
        assert_eq!(
            sc[0].metrics["scorer_leak"], 0.0,
            "HF_TOKEN must not reach it"
        );
        let slow = vec!["sleep".to_string(), "30".to_string()];
        let e =
            run_scorer(&slow, dir.path(), Duration::from_millis(300), &[(&a, "x")]).unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
        let fail = vec![
            "sh".to_string(),
            "-c".to_string(),
            "echo boom >&2; exit 3".to_string(),
        ];
        let e = run_scorer(&fail, dir.path(), Duration::from_secs(5), &[(&a, "x")]).unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
    }
}
