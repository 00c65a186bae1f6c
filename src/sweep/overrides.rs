//! Command-line overrides of a sweep file: `--set PATH=VALUE` changes one field before the
//! sweep is resolved (so every check applies to the new value), `--only AXIS=VALUE[,VALUE…]`
//! narrows the matrix after it. The command line's overrides are a value handed to
//! [`super::parse`] and [`super::load`]; Slurm jobs get the same flags.
//!
//! PATH is `block.field` for the unnamed blocks (`sweep.seed`, `defaults.max-tokens`,
//! `slo.ttft-p95`, `telemetry.idle`) and `block.name.field` for the named ones
//! (`task.mmlu.samples`, `engine.llama-cpu.parallel`, `scenario.single.requests`). VALUE is
//! read as KDL reads it: an integer, a float, `#true`/`#false`, else a string; a comma-separated
//! VALUE gives several values (an axis).

use miette::SourceSpan;

use super::diag::Problem;
use super::raw::{RawNode, RawValue};
use crate::spec::{Spanned, Sweep};

#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
    pub sets: Vec<(String, String)>,
    pub only: Vec<(String, Vec<String>)>,
}

/// A `--set` or `--only` that cannot apply (a `--set` whose value the sweep refuses is a
/// problem of the sweep, at its span).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OverrideError {
    #[error("{flag} expects KEY=VALUE, got `{got}`")]
    NotKeyValue { flag: &'static str, got: String },
    #[error("--only {axis}=…: the axes are model, quantization, engine, task, scenario, repeat and the engine settings parallel, ctx-size, gpu-memory, dtype, tensor-parallel, variant")]
    UnknownAxis { axis: String },
    #[error("--only {axis}={value}: the sweep's matrix has no {axis} `{value}` (it has: {})", has.join(", "))]
    NotInMatrix {
        axis: String,
        value: String,
        has: Vec<String>,
    },
    #[error("--only leaves no configuration to run")]
    NothingLeft,
}

impl Overrides {
    /// Parses `--set` and `--only` arguments (each `KEY=VALUE`).
    pub(crate) fn parse(sets: &[String], only: &[String]) -> Result<Overrides, OverrideError> {
        let split = |s: &String, flag: &'static str| {
            s.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| OverrideError::NotKeyValue {
                    flag,
                    got: s.clone(),
                })
        };
        let mut o = Overrides::default();
        for s in sets {
            o.sets.push(split(s, "--set")?);
        }
        for s in only {
            let (axis, values) = split(s, "--only")?;
            if ![
                "model",
                "quantization",
                "engine",
                "task",
                "scenario",
                "repeat",
            ]
            .contains(&axis.as_str())
                && !crate::spec::ENGINE_AXES.contains(&axis.as_str())
            {
                return Err(OverrideError::UnknownAxis { axis });
            }
            o.only.push((
                axis,
                values.split(',').map(|v| v.trim().to_string()).collect(),
            ));
        }
        Ok(o)
    }

    /// The same overrides as command-line arguments (for the jobs a Slurm apply submits).
    pub(crate) fn as_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (k, val) in &self.sets {
            v.push("--set".into());
            v.push(format!("{k}={val}"));
        }
        for (axis, vals) in &self.only {
            v.push("--only".into());
            v.push(format!("{axis}={}", vals.join(",")));
        }
        v
    }
}

fn value(s: &str) -> RawValue {
    match s {
        "#true" | "true" => RawValue::Bool(true),
        "#false" | "false" => RawValue::Bool(false),
        "#null" => RawValue::Null,
        _ => {
            if let Ok(i) = s.parse::<i128>() {
                RawValue::Int(i)
            } else if let Ok(f) = s.parse::<f64>() {
                RawValue::Float(f)
            } else {
                RawValue::Str(s.to_string())
            }
        }
    }
}

const NAMED: &[&str] = &["model", "engine", "task", "scenario"];

/// Applies `--set` overrides to the raw nodes; a path that names nothing is a problem (at the
/// file's start: the cause is on the command line).
pub(crate) fn apply_sets(nodes: &mut [RawNode], sets: &[(String, String)]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (path, val) in sets {
        let parts: Vec<&str> = path.split('.').collect();
        let (block, name, field) = match parts.as_slice() {
            [b, f] if !NAMED.contains(b) => (*b, None, *f),
            [b, n, f] if NAMED.contains(b) => (*b, Some(*n), *f),
            _ => {
                problems.push(Problem::new(
                    SourceSpan::from(0..0),
                    format!("--set {path}: a path is block.field, or block.name.field for model, engine, task and scenario blocks"),
                    "the command line",
                ));
                continue;
            }
        };
        let Some(node) = nodes.iter_mut().find(|n| {
            n.name.value == block
                && match name {
                    None => true,
                    Some(want) => matches!(n.args.first().map(|a| &a.value), Some(RawValue::Str(s)) if s == want),
                }
        }) else {
            problems.push(Problem::new(
                SourceSpan::from(0..0),
                format!(
                    "--set {path}: the sweep has no `{block}{}` block",
                    name.map(|n| format!(" \"{n}\"")).unwrap_or_default()
                ),
                "the command line",
            ));
            continue;
        };
        let span = node.name.span;
        let args: Vec<Spanned<RawValue>> = val
            .split(',')
            .map(|v| Spanned::new(value(v.trim()), span))
            .collect();
        match node.children.iter_mut().find(|c| c.name.value == field) {
            Some(child) => {
                let at = child
                    .args
                    .first()
                    .map(|a| a.span)
                    .unwrap_or(child.name.span);
                child.args = args
                    .into_iter()
                    .map(|a| Spanned::new(a.value, at))
                    .collect();
            }
            None => node.children.push(RawNode {
                name: Spanned::new(field.to_string(), span),
                args,
                props: Vec::new(),
                children: Vec::new(),
                span,
            }),
        }
    }
    problems
}

/// Narrows the matrix to the `--only` values: each must be one the sweep defines (and, when
/// its matrix selects, one it selects).
pub(crate) fn apply_only(
    sweep: &mut Sweep,
    only: &[(String, Vec<String>)],
) -> Result<(), OverrideError> {
    for (axis, values) in only {
        if crate::spec::ENGINE_AXES.contains(&axis.as_str()) {
            only_setting(sweep, axis, values)?;
            continue;
        }
        if axis == "repeat" {
            only_repeats(sweep, values)?;
            continue;
        }
        let defined: Vec<String> = match axis.as_str() {
            "model" => sweep.models.iter().map(|m| m.name.value.clone()).collect(),
            "quantization" => sweep
                .models
                .iter()
                .flat_map(|m| m.variants.iter().map(|v| v.quantization.value.clone()))
                .collect(),
            "engine" => {
                let mut names: Vec<String> = Vec::new();
                for e in &sweep.engines {
                    for n in [&e.base.value, &e.name.value] {
                        if !names.contains(n) {
                            names.push(n.clone());
                        }
                    }
                }
                names
            }
            "task" => sweep.tasks.iter().map(|t| t.name.value.clone()).collect(),
            _ => sweep
                .scenarios
                .iter()
                .map(|s| s.name.value.clone())
                .collect(),
        };
        let m = &mut sweep.matrix;
        let sel = match axis.as_str() {
            "model" => &mut m.models,
            "quantization" => &mut m.quantizations,
            "engine" => &mut m.engines,
            "task" => &mut m.tasks,
            _ => &mut m.scenarios,
        };
        let selected: Vec<String> = if sel.is_empty() {
            defined.clone()
        } else if axis == "engine" {
            // Every name of an engine the matrix selects: its block's and its own.
            defined
                .iter()
                .filter(|n| {
                    sweep
                        .engines
                        .iter()
                        .any(|e| e.named(n) && sel.iter().any(|s| e.named(&s.value)))
                })
                .cloned()
                .collect()
        } else {
            sel.iter().map(|s| s.value.clone()).collect()
        };
        for v in values {
            if !selected.contains(v) {
                return Err(OverrideError::NotInMatrix {
                    axis: axis.clone(),
                    value: v.clone(),
                    has: selected,
                });
            }
        }
        let span = sel
            .first()
            .map(|s| s.span)
            .unwrap_or(SourceSpan::from(0..0));
        *sel = values
            .iter()
            .map(|v| Spanned::new(v.clone(), span))
            .collect();
    }
    if !only.is_empty() && crate::spec::expand::configs(sweep).is_empty() {
        return Err(OverrideError::NothingLeft);
    }
    Ok(())
}

/// `--only repeat=2,3`: the repeats as labels count them (` #2`), from 1 to the sweep's
/// `repeats`.
fn only_repeats(sweep: &mut Sweep, values: &[String]) -> Result<(), OverrideError> {
    let has = || (1..=sweep.repeats).map(|k| k.to_string()).collect();
    let mut picked = Vec::new();
    for v in values {
        match v.parse::<u32>() {
            Ok(k) if (1..=sweep.repeats).contains(&k) => picked.push(k - 1),
            _ => {
                return Err(OverrideError::NotInMatrix {
                    axis: "repeat".into(),
                    value: v.clone(),
                    has: has(),
                })
            }
        }
    }
    sweep.matrix.repeats = picked;
    Ok(())
}

/// `--only parallel=4,8`: the matrix keeps the engines (of those it selects) whose setting
/// has one of the values.
fn only_setting(sweep: &mut Sweep, axis: &str, values: &[String]) -> Result<(), OverrideError> {
    let m = &sweep.matrix;
    let selected: Vec<&crate::spec::Engine> = sweep
        .engines
        .iter()
        .filter(|e| m.engines.is_empty() || m.engines.iter().any(|n| e.named(&n.value)))
        .collect();
    let mut has: Vec<String> = Vec::new();
    for e in &selected {
        let v = e.setting(axis);
        if !v.is_empty() && !has.contains(&v) {
            has.push(v);
        }
    }
    for v in values {
        if !has.iter().any(|h| same_number_or_name(h, v)) {
            return Err(OverrideError::NotInMatrix {
                axis: axis.to_string(),
                value: v.clone(),
                has,
            });
        }
    }
    let span = m
        .engines
        .first()
        .map(|s| s.span)
        .unwrap_or(SourceSpan::from(0..0));
    let keep: Vec<Spanned<String>> = selected
        .iter()
        .filter(|e| {
            values
                .iter()
                .any(|v| same_number_or_name(&e.setting(axis), v))
        })
        .map(|e| Spanned::new(e.name.value.clone(), span))
        .collect();
    sweep.matrix.engines = keep;
    Ok(())
}

/// `0.5` and `0.50`, `4` and `4.0` are one value; names compare as written.
fn same_number_or_name(a: &str, b: &str) -> bool {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
sweep "t" { seed 1; }
defaults { max-tokens 8; }
model "m" { path "/w/m.gguf"; quantization "q4_1"; }
engine "a" { kind "llama.cpp"; binary "/bin/a"; }
engine "b" { kind "llama.cpp"; binary "/bin/b"; }
task "mmlu" { kind "mmlu"; dataset "/d/mmlu"; samples 10; }
scenario "one" { kind "single"; requests 4; }
"#;

    fn parsed(sets: &[(String, String)]) -> Result<Sweep, String> {
        let mut nodes = super::super::raw::parse_kdl(TEXT).unwrap();
        let problems = apply_sets(&mut nodes, sets);
        if !problems.is_empty() {
            return Err(problems[0].message.clone());
        }
        super::super::resolve::resolve(&nodes, std::path::Path::new("/"), &|_| None)
            .map_err(|p| p[0].message.clone())
    }

    #[test]
    fn set_changes_a_field_before_it_is_checked() {
        let s = parsed(&[
            ("defaults.max-tokens".into(), "32".into()),
            ("task.mmlu.samples".into(), "3".into()),
            ("scenario.one.requests".into(), "2".into()),
            ("defaults.temperature".into(), "0.5".into()),
        ])
        .unwrap();
        assert_eq!(s.defaults.sampling.max_tokens, 32);
        assert_eq!(s.tasks[0].samples, Some(3));
        assert_eq!(s.defaults.sampling.temperature, 0.5);
        let e = parsed(&[("task.nope.samples".into(), "3".into())]).unwrap_err();
        assert!(e.contains("no `task \"nope\"` block"), "{e}");
        let e = parsed(&[("defaults.max-tokens".into(), "0".into())]).unwrap_err();
        assert!(e.contains("max-tokens"), "{e}");
    }

    #[test]
    fn only_narrows_the_matrix() {
        let mut s = parsed(&[]).unwrap();
        assert_eq!(crate::spec::expand::configs(&s).len(), 2);
        apply_only(&mut s, &[("engine".into(), vec!["b".into()])]).unwrap();
        let c = crate::spec::expand::configs(&s);
        assert_eq!(c.len(), 1);
        assert_eq!(s.engines[c[0].engine].name.value, "b");
        let e = apply_only(&mut s, &[("engine".into(), vec!["zz".into()])]).unwrap_err();
        assert!(e.to_string().contains("no engine `zz`"), "{e}");
    }

    #[test]
    fn only_repeat_keeps_the_repeats_named_as_labels_count_them() {
        let mut s = parsed(&[
            ("sweep.repeats".into(), "3".into()),
            ("sweep.cold-repeats".into(), "#true".into()),
        ])
        .unwrap();
        assert_eq!(crate::spec::expand::configs(&s).len(), 6);
        apply_only(&mut s, &[("repeat".into(), vec!["2".into(), "3".into()])]).unwrap();
        let c = crate::spec::expand::configs(&s);
        // Both engines, repeats #2 and #3 (indices 1 and 2), each on its own cold start.
        assert_eq!(c.len(), 4);
        assert!(
            c.iter().all(|c| c.repeat >= 1 && c.start == c.repeat),
            "{c:?}"
        );
        assert_eq!(s.repeats, 3, "the sweep's repeats (labels, keys) stay");
        for bad in ["0", "4", "x"] {
            let e = apply_only(&mut s, &[("repeat".into(), vec![bad.into()])]).unwrap_err();
            assert!(
                e.to_string()
                    .contains(&format!("no repeat `{bad}` (it has: 1, 2, 3)")),
                "{e}"
            );
        }
        assert!(Overrides::parse(&[], &["repeat=1".into()]).is_ok());
    }
}
