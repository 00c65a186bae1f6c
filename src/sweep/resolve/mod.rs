//! Raw spanned nodes → validated [`Sweep`]. Keeps going after a problem so that every problem
//! of a file is reported at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use miette::SourceSpan;

use super::diag::{did_you_mean, known_list, Problem};
use super::raw::{RawNode, RawValue};
use super::*;
use crate::spec::catalog;

mod checks;
mod engine;
mod matrix;
mod model;
mod scenario;
mod settings;
mod slurm;
mod task;
mod values;

use checks::*;
use engine::*;
use matrix::*;
use model::*;
use scenario::*;
use settings::*;
use slurm::*;
pub(crate) use slurm::{slurm_mem_ok, slurm_time_ok};
use task::*;
use values::*;

const TOP_LEVEL: &[&str] = &[
    "sweep",
    "defaults",
    "telemetry",
    "slo",
    "cost",
    "slurm",
    "model",
    "engine",
    "task",
    "scenario",
    "matrix",
];
const SLO_FIELDS: &[&str] = &[
    "ttft-p95",
    "e2e-p95",
    "gpu-memory",
    "quality-drop",
    "quality-baseline",
    "objective",
    "quality-evidence",
    "over-saturated",
];
const COST_FIELDS: &[&str] = &["energy-price", "hardware-per-hour", "currency"];
const TELEMETRY_FIELDS: &[&str] = &["interval", "idle", "metrics-interval"];
const SLURM_FIELDS: &[&str] = &[
    "partition",
    "account",
    "qos",
    "time",
    "gres",
    "cpus",
    "mem",
    "sbatch-args",
];
const SWEEP_FIELDS: &[&str] = &["seed", "repeats", "cold-repeats", "max-parallel"];
const DEFAULT_FIELDS: &[&str] = &[
    "max-tokens",
    "temperature",
    "top-p",
    "stop",
    "warmup",
    "request-timeout",
    "max-error-rate",
    "ignore-eos",
    "min-tokens",
    "extra-body",
    "connections",
];
const MODEL_FIELDS: &[&str] = &["path", "id", "quantization"];
const ENGINE_FIELDS: &[&str] = &[
    "kind",
    "launcher",
    "binary",
    "url",
    "served-model",
    "api-key-env",
    "args",
    "env",
    "parallel",
    "ctx-size",
    "startup-timeout",
    "api",
    "gpus",
    "gpu-memory",
    "tensor-parallel",
    "dtype",
    "image",
    "tag",
    "pull",
    "env-pass",
    "shm-size",
    "hf-cache",
    "variant",
    "cpus",
];
const TASK_FIELDS: &[&str] = &[
    "kind",
    "dataset",
    "samples",
    "shots",
    "system",
    "mode",
    "max-tokens",
    "stop",
    "ignore-eos",
    "article-words",
    "sql-timeout",
    "answer-format",
    "scoring",
    "fewshot-as-turns",
    "reason",
    "template",
    "reference",
    "id",
    "metrics",
    "extract",
    "scorer",
    "scorer-timeout",
    "database",
    "group-by",
    "choices",
    "input-tokens",
    "output-tokens",
    "shared-prefix",
    "prefix-groups",
    "turns",
    "fresh-prompts",
];
/// Fields only a `synthetic` task takes.
const SYNTHETIC_FIELDS: &[&str] = &[
    "input-tokens",
    "output-tokens",
    "shared-prefix",
    "prefix-groups",
    "turns",
    "fresh-prompts",
];
/// Fields only a `custom` task takes (`extract` is taken by every kind).
const CUSTOM_FIELDS: &[&str] = &[
    "template",
    "reference",
    "id",
    "metrics",
    "scorer",
    "scorer-timeout",
    "database",
    "group-by",
    "choices",
];
const SCENARIO_KINDS: &[&str] = &[
    "single",
    "batch",
    "server",
    "rate",
    "concurrency",
    "offline",
    "replay",
    "saturation",
];
const MATRIX_FIELDS: &[&str] = &[
    "model",
    "quantization",
    "engine",
    "task",
    "scenario",
    "max-tokens",
    "temperature",
    "top-p",
    "exclude",
];
/// Matrix axes an `exclude` rule may name, besides the engine settings
/// (`spec::ENGINE_AXES`).
pub(crate) const EXCLUDE_AXES: &[&str] = &[
    "model",
    "quantization",
    "engine",
    "task",
    "scenario",
    "max-tokens",
    "temperature",
    "top-p",
];

fn check_unique(ctx: &mut Ctx, what: &str, names: &[&Spanned<String>]) {
    let mut seen: BTreeMap<&str, SourceSpan> = BTreeMap::new();
    for n in names {
        if seen.contains_key(n.value.as_str()) {
            ctx.err(
                n.span,
                format!("{what} `{}` is defined twice", n.value),
                "second definition",
            );
        } else {
            seen.insert(&n.value, n.span);
        }
    }
}

pub(super) fn resolve(
    nodes: &[RawNode],
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Sweep, Vec<Problem>> {
    let mut ctx = Ctx {
        problems: Vec::new(),
        env,
    };
    let mut head = SweepHead::default();
    let mut defaults = Defaults::default();
    let mut telemetry = crate::spec::TelemetryConfig::default();
    let mut slo = crate::spec::Slo::default();
    let mut cost = None;
    let mut slurm = SlurmSettings::default();
    let mut models = Vec::new();
    let mut engines = Vec::new();
    let mut tasks = Vec::new();
    let mut scenarios = Vec::new();
    let mut matrix_node = None;
    let mut seen_singletons: BTreeMap<&str, SourceSpan> = BTreeMap::new();

    for node in nodes {
        let kind = node.name.value.as_str();
        if matches!(
            kind,
            "sweep" | "defaults" | "matrix" | "telemetry" | "slo" | "cost" | "slurm"
        ) {
            if seen_singletons.contains_key(kind) {
                ctx.err(
                    node.name.span,
                    format!("`{kind}` appears twice"),
                    format!("second `{kind}` block"),
                );
                continue;
            }
            seen_singletons.insert(kind, node.span);
        }
        match kind {
            "sweep" => head = resolve_sweep(&mut ctx, node),
            "defaults" => defaults = resolve_defaults(&mut ctx, node),
            "slo" => slo = resolve_slo(&mut ctx, node),
            "cost" => cost = Some(resolve_cost(&mut ctx, node)),
            "telemetry" => telemetry = resolve_telemetry(&mut ctx, node),
            "slurm" => slurm = resolve_slurm(&mut ctx, node),
            "model" => {
                if let Some(m) = resolve_model(&mut ctx, node) {
                    models.push(m);
                }
            }
            "engine" => {
                if let Some(e) = resolve_engine(&mut ctx, node) {
                    engines.extend(e);
                }
            }
            "task" => {
                if let Some(t) = resolve_task(&mut ctx, node) {
                    tasks.push(t);
                }
            }
            "scenario" => {
                if let Some(s) = resolve_scenario(&mut ctx, node) {
                    scenarios.push(s);
                }
            }
            "matrix" => matrix_node = Some(node),
            other => {
                let help = did_you_mean(other, TOP_LEVEL.iter().copied())
                    .unwrap_or_else(|| known_list(TOP_LEVEL.iter().copied()));
                ctx.err_help(
                    node.name.span,
                    format!("unknown block `{other}`"),
                    "not a sweep block",
                    help,
                );
            }
        }
    }

    check_names(&mut ctx, &models, &engines, &tasks, &scenarios);
    check_scenario_repeats(&mut ctx, &scenarios, head.repeats);
    let name = sweep_name(
        &mut ctx,
        head.name.take(),
        seen_singletons.contains_key("sweep"),
    );
    // Names as declared, including blocks that failed validation (their own problems are
    // reported already; references to them are not problems too).
    let declared = |kind: &str| -> Vec<&str> {
        nodes
            .iter()
            .filter(|n| n.name.value == kind)
            .filter_map(|n| match n.args.first().map(|a| &a.value) {
                Some(RawValue::Str(s)) => Some(s.as_str()),
                _ => None,
            })
            .collect()
    };
    check_every_kind_defined(&mut ctx, nodes);

    let matrix = match matrix_node {
        Some(node) => resolve_matrix(
            &mut ctx,
            node,
            (&models, &engines),
            [
                declared("model"),
                declared("engine"),
                declared("task"),
                declared("scenario"),
            ],
        ),
        None => Matrix::default(),
    };
    if ctx.problems.is_empty() {
        let sweep = Sweep {
            name,
            seed: head.seed,
            repeats: head.repeats,
            cold_repeats: head.cold_repeats,
            max_parallel: head.max_parallel,
            defaults,
            models,
            engines,
            tasks,
            scenarios,
            matrix,
            telemetry,
            slo,
            cost,
            slurm,
            base_dir: base_dir.to_path_buf(),
            source: Default::default(),
        };
        check_compatibility(&mut ctx, &sweep);
        check_saturation_thresholds(&mut ctx, &sweep);
        if ctx.problems.is_empty() {
            return Ok(sweep);
        }
    }
    ctx.problems.sort_by_key(|p| p.span.offset());
    Err(ctx.problems)
}

/// The sweep's name; a problem when there is no `sweep` block at all (a block without a name
/// has its own problem already).
fn sweep_name(ctx: &mut Ctx, name: Option<Spanned<String>>, has_block: bool) -> String {
    match name {
        Some(n) => n.value,
        None => {
            if !has_block {
                ctx.err_help(
                    SourceSpan::from(0..0),
                    "missing `sweep` block",
                    "the file should start with it",
                    "add `sweep \"my-sweep\" { seed 1 }` at the top: its name keys the report",
                );
            }
            String::new()
        }
    }
}

/// Two blocks of one kind may not share a name.
fn check_names(
    ctx: &mut Ctx,
    models: &[Model],
    engines: &[Engine],
    tasks: &[Task],
    scenarios: &[Scenario],
) {
    check_unique(
        ctx,
        "model",
        &models.iter().map(|m| &m.name).collect::<Vec<_>>(),
    );
    // One name per block: a block with setting axes gives several engines.
    let mut blocks: Vec<&Spanned<String>> = Vec::new();
    for e in engines {
        if blocks.last().is_none_or(|b| b.span != e.base.span) {
            blocks.push(&e.base);
        }
    }
    check_unique(ctx, "engine", &blocks);
    check_unique(
        ctx,
        "task",
        &tasks.iter().map(|m| &m.name).collect::<Vec<_>>(),
    );
    check_unique(
        ctx,
        "scenario",
        &scenarios.iter().map(|m| &m.name).collect::<Vec<_>>(),
    );
}

/// A sweep needs at least one model, engine, task and scenario.
fn check_every_kind_defined(ctx: &mut Ctx, nodes: &[RawNode]) {
    for what in ["model", "engine", "task", "scenario"] {
        if !nodes.iter().any(|n| n.name.value == what) {
            ctx.err_help(
                SourceSpan::from(0..0),
                format!("no `{what}` is defined"),
                "here",
                format!("a sweep needs at least one `{what}` block"),
            );
        }
    }
}

/// A saturation search needs latency thresholds: its own, or the sweep's `slo`.
fn check_saturation_thresholds(ctx: &mut Ctx, sweep: &Sweep) {
    for s in &sweep.scenarios {
        if let ScenarioSpec::Saturation(SaturationSpec {
            ttft_p95: None,
            e2e_p95: None,
            ..
        }) = s.spec
        {
            if sweep.slo.ttft_p95.is_none() && sweep.slo.e2e_p95.is_none() {
                ctx.err_help(
                    s.name.span,
                    "a `saturation` scenario needs latency thresholds",
                    "no `ttft-p95` or `e2e-p95` here or in `slo`",
                    "add `ttft-p95 2.0` (seconds) to the scenario, or an `slo` block",
                );
            }
        }
    }
}
