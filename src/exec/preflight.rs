//! Everything a sweep reads, checked before any engine starts (and by `validate` and `plan`):
//! every task's dataset loaded and checked line by line, every replay trace read, every
//! scorer command found, every model path there. Files that are not regular files (a device,
//! a FIFO) are refused. A problem names its file (and line) and is shown at the span of the
//! sweep that names that file, as the sweep's own problems are; nothing runs while one remains.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use miette::SourceSpan;

use crate::record::Sample;
use crate::spec::{ScenarioSpec, Sweep};
use crate::sweep::{Problem, SweepError};
use crate::task;

/// A problem of an input, at the span of the sweep that names it.
fn at(span: SourceSpan, label: &str, message: String) -> Problem {
    Problem {
        message,
        span,
        label: label.to_string(),
        help: None,
    }
}

/// The checked inputs: each used task's samples, loaded once and handed to the executor.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    pub samples: BTreeMap<usize, Arc<Vec<Sample>>>,
}

/// A path the sweep reads must be a regular file or a folder (weights may be a folder):
/// the problem when it is not.
fn irregular(path: &Path, what: &str) -> Option<String> {
    match std::fs::metadata(path) {
        Err(e) => Some(format!("{what} {}: {e}", path.display())),
        Ok(m) if m.is_file() || m.is_dir() => None,
        Ok(_) => Some(format!(
            "{what} {} is not a regular file or a folder",
            path.display()
        )),
    }
}

/// Checks every input of `sweep` that `tasks` (the tasks some planned run uses; all when
/// None) and its scenarios and deployments read. Returns the loaded samples, or every
/// problem found, as a diagnostic of the sweep file.
pub(crate) fn check(sweep: &Sweep, tasks: Option<&BTreeSet<usize>>) -> Result<Checked, SweepError> {
    problems(sweep, tasks).map_err(|p| crate::sweep::diag::input_problems(sweep, p))
}

fn problems(sweep: &Sweep, tasks: Option<&BTreeSet<usize>>) -> Result<Checked, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut out = Checked::default();
    for t in 0..sweep.tasks.len() {
        if tasks.is_some_and(|u| !u.contains(&t)) {
            continue;
        }
        let name = &sweep.tasks[t].name.value;
        let data = sweep.tasks[t].dataset.span;
        let imp = task::of(sweep, t);
        let mut files_ok = true;
        for f in imp
            .files()
            .iter()
            .chain(task::scoring_files(sweep, t).iter())
        {
            if let Some(e) = irregular(f, &format!("task `{name}`:")) {
                problems.push(at(data, "read for this task", e));
                files_ok = false;
            }
        }
        if let Some(c) = &sweep.tasks[t].custom {
            if let Some(cmd) = &c.scorer {
                let prog = cmd.first().map(String::as_str).unwrap_or("");
                // Relative to the sweep's folder (where it runs) or on PATH.
                let local = sweep.base_dir.join(prog);
                if !(prog.contains('/') && local.is_file())
                    && crate::plan::facts::resolve_binary(prog).is_err()
                {
                    problems.push(at(
                        sweep.tasks[t].name.span,
                        "this task's scorer",
                        format!(
                            "task `{name}`: scorer command `{prog}` is neither a file (relative to {}) nor on PATH",
                            sweep.base_dir.display()
                        ),
                    ));
                }
            }
        }
        if !files_ok {
            continue;
        }
        match imp.load(sweep.seed) {
            Ok(s) if s.is_empty() => problems.push(at(
                data,
                "this dataset",
                format!("task `{name}` has no samples"),
            )),
            Ok(s) => {
                out.samples.insert(t, Arc::new(s));
            }
            Err(e) => problems.push(at(data, "this dataset", format!("task `{name}`: {e}"))),
        }
    }
    for s in &sweep.scenarios {
        if let ScenarioSpec::Replay { trace, .. } = &s.spec {
            let path = sweep.resolve_path(&trace.value);
            let here = |m: String| at(trace.span, "this trace", m);
            match irregular(&path, &format!("scenario `{}`: trace", s.name.value)) {
                Some(e) => problems.push(here(e)),
                None => match crate::workload::load_trace(&path) {
                    Ok(items) if items.is_empty() => problems.push(here(format!(
                        "scenario `{}`: trace {} has no requests",
                        s.name.value,
                        path.display()
                    ))),
                    Ok(_) => {}
                    Err(e) => problems.push(here(format!("scenario `{}`: {e}", s.name.value))),
                },
            }
        }
    }
    for d in crate::spec::expand::deployments(sweep) {
        if let Some(p) = crate::plan::weights_path(sweep, d) {
            let m = &sweep.models[d.model];
            if let Some(e) = irregular(&p, &format!("model `{}`: weights", m.name.value)) {
                if !problems.iter().any(|q| q.message == e) {
                    problems.push(at(m.name.span, "this model's weights", e));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(e: SweepError) -> String {
        e.problems
            .iter()
            .map(|p| p.message.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn sweep_in(dir: &Path, body: &str) -> Sweep {
        crate::sweep::parse("t.kdl", body, dir, &|_| None, &Default::default())
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn datasets_traces_scorers_and_weights_are_checked_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("w.gguf"), b"GGUF").unwrap();
        std::fs::create_dir(d.join("mmlu")).unwrap();
        std::fs::write(d.join("mmlu/test.jsonl"), "{\"id\":\"a\"}\n").unwrap();
        std::fs::write(d.join("mmlu/dev.jsonl"), "").unwrap();
        std::fs::write(d.join("trace.jsonl"), "{\"t\": 0}\n{\"t\": -1}\n").unwrap();
        let s = sweep_in(
            d,
            r#"
sweep "p" { }
model "m" { path "w.gguf"; quantization "q4_1"; }
model "gone" { path "missing.gguf"; quantization "q4_1"; }
engine "e" { kind "llama.cpp"; binary "/bin/true"; }
task "mmlu" { kind "mmlu"; dataset "mmlu"; }
scenario "r" { kind "replay"; trace "trace.jsonl"; }
"#,
        );
        let all = messages(check(&s, None).unwrap_err());
        assert!(all.contains("test.jsonl:1:"), "{all}");
        assert!(all.contains("trace.jsonl:2:"), "{all}");
        assert!(!all.contains("w.gguf"), "{all}");
        assert!(all.contains("missing.gguf"), "{all}");
    }

    #[test]
    fn a_device_is_refused_as_a_dataset() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("w.gguf"), b"GGUF").unwrap();
        std::fs::create_dir(d.join("mmlu")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join("mmlu/test.jsonl")).unwrap();
        std::fs::write(d.join("mmlu/dev.jsonl"), "").unwrap();
        let s = sweep_in(
            d,
            r#"
sweep "p" { }
model "m" { path "w.gguf"; quantization "q4_1"; }
engine "e" { kind "llama.cpp"; binary "/bin/true"; }
task "mmlu" { kind "mmlu"; dataset "mmlu"; }
scenario "one" { kind "single"; requests 1; }
"#,
        );
        let all = messages(check(&s, None).unwrap_err());
        assert!(all.contains("not a regular file"), "{all}");
    }
}
