//! Raw spanned nodes → validated [`Sweep`]. Keeps going after a problem so that every problem
//! of a file is reported at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use miette::SourceSpan;

use super::diag::{did_you_mean, known_list, Problem};
use super::raw::{RawNode, RawValue};
use super::*;
use crate::spec::catalog;

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
const SLO_FIELDS: &[&str] = &["ttft-p95", "e2e-p95", "gpu-memory"];
const COST_FIELDS: &[&str] = &["energy-price", "hardware-per-hour", "currency"];
const TELEMETRY_FIELDS: &[&str] = &["interval", "idle"];
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
const SWEEP_FIELDS: &[&str] = &["seed", "repeats"];
const DEFAULT_FIELDS: &[&str] = &[
    "max-tokens",
    "temperature",
    "top-p",
    "stop",
    "warmup",
    "request-timeout",
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
    "dtype",
    "image",
    "tag",
    "pull",
    "env-pass",
    "shm-size",
    "hf-cache",
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
    "article-words",
    "sql-timeout",
    "template",
    "reference",
    "id",
    "metrics",
    "extract",
    "scorer",
    "scorer-timeout",
    "database",
    "group-by",
];
/// Fields only a `custom` task takes.
const CUSTOM_FIELDS: &[&str] = &[
    "template",
    "reference",
    "id",
    "metrics",
    "extract",
    "scorer",
    "scorer-timeout",
    "database",
    "group-by",
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
/// Matrix axes an `exclude` rule may name.
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

struct Ctx<'e> {
    problems: Vec<Problem>,
    env: &'e dyn Fn(&str) -> Option<String>,
}

impl Ctx<'_> {
    fn err(&mut self, span: SourceSpan, msg: impl Into<String>, label: impl Into<String>) {
        self.problems.push(Problem::new(span, msg, label));
    }

    fn err_help(
        &mut self,
        span: SourceSpan,
        msg: impl Into<String>,
        label: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.problems
            .push(Problem::new(span, msg, label).with_help(help));
    }

    /// Children of a block, checked against the allowed names; duplicates of non-repeatable
    /// fields are reported.
    fn fields<'n>(
        &mut self,
        node: &'n RawNode,
        allowed: &[&str],
        repeatable: &[&str],
    ) -> BTreeMap<&'n str, Vec<&'n RawNode>> {
        let mut out: BTreeMap<&str, Vec<&RawNode>> = BTreeMap::new();
        for child in &node.children {
            let name = child.name.value.as_str();
            if !allowed.contains(&name) {
                let help = did_you_mean(name, allowed.iter().copied())
                    .unwrap_or_else(|| known_list(allowed.iter().copied()));
                self.err_help(
                    child.name.span,
                    format!("unknown field `{name}` in `{}`", node.name.value),
                    "not a field of this block",
                    help,
                );
                continue;
            }
            let seen = out.entry(name).or_default();
            if !seen.is_empty() && !repeatable.contains(&name) {
                self.err(
                    child.name.span,
                    format!("duplicate field `{name}`"),
                    "already set above",
                );
                continue;
            }
            seen.push(child);
        }
        out
    }

    fn no_children(&mut self, node: &RawNode) {
        if let Some(first) = node.children.first() {
            self.err(
                first.span,
                format!("`{}` takes no block", node.name.value),
                "unexpected block",
            );
        }
    }

    fn no_props(&mut self, node: &RawNode) {
        for (k, _) in &node.props {
            self.err(
                k.span,
                format!("`{}` takes no properties", node.name.value),
                "unexpected property",
            );
        }
    }

    fn expand_env(&mut self, s: &Spanned<String>) -> String {
        let mut out = String::new();
        let mut rest = s.value.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                self.err(s.span, "unclosed `${` in string", "missing `}`");
                return s.value.clone();
            };
            let var = &after[..end];
            match (self.env)(var) {
                Some(v) => out.push_str(&v),
                None => {
                    self.err_help(
                        s.span,
                        format!("environment variable `{var}` is not set"),
                        "referenced here",
                        format!("set `{var}` before running bench360 (the quickstart's come from `eval \"$(scripts/install-engine.sh)\"`)"),
                    );
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The node's single argument, as a string.
    fn one_str(&mut self, node: &RawNode) -> Option<Spanned<String>> {
        self.no_props(node);
        self.no_children(node);
        match node.args.as_slice() {
            [v] => match &v.value {
                RawValue::Str(s) => Some(Spanned::new(s.clone(), v.span)),
                other => {
                    self.err(
                        v.span,
                        format!("`{}` expects a string", node.name.value),
                        format!("this is {}", other.type_name()),
                    );
                    None
                }
            },
            [] => {
                self.err(
                    node.span,
                    format!("`{}` needs a value", node.name.value),
                    "missing value",
                );
                None
            }
            [_, extra @ ..] => {
                self.err(
                    extra[0].span,
                    format!("`{}` takes exactly one value", node.name.value),
                    "extra value",
                );
                None
            }
        }
    }

    fn strs(&mut self, node: &RawNode) -> Vec<Spanned<String>> {
        self.no_props(node);
        self.no_children(node);
        if node.args.is_empty() {
            self.err(
                node.span,
                format!("`{}` needs at least one value", node.name.value),
                "missing value",
            );
        }
        let mut out = Vec::new();
        for v in &node.args {
            match &v.value {
                RawValue::Str(s) => out.push(Spanned::new(s.clone(), v.span)),
                other => self.err(
                    v.span,
                    format!("`{}` expects strings", node.name.value),
                    format!("this is {}", other.type_name()),
                ),
            }
        }
        out
    }

    fn num(&mut self, node: &RawNode, v: &Spanned<RawValue>) -> Option<f64> {
        match v.value {
            RawValue::Int(i) => Some(i as f64),
            RawValue::Float(f) => Some(f),
            ref other => {
                self.err(
                    v.span,
                    format!("`{}` expects a number", node.name.value),
                    format!("this is {}", other.type_name()),
                );
                None
            }
        }
    }

    fn int(&mut self, node: &RawNode, v: &Spanned<RawValue>, min: u64, max: u64) -> Option<u64> {
        match v.value {
            RawValue::Int(i) if i >= min as i128 && i <= max as i128 => Some(i as u64),
            RawValue::Int(_) => {
                self.err(
                    v.span,
                    format!("`{}` must be between {min} and {max}", node.name.value),
                    "out of range",
                );
                None
            }
            ref other => {
                self.err(
                    v.span,
                    format!("`{}` expects a whole number", node.name.value),
                    format!("this is {}", other.type_name()),
                );
                None
            }
        }
    }

    fn ints(&mut self, node: &RawNode, min: u64, max: u64) -> Vec<u64> {
        self.no_props(node);
        self.no_children(node);
        if node.args.is_empty() {
            self.err(
                node.span,
                format!("`{}` needs at least one value", node.name.value),
                "missing value",
            );
        }
        let mut out = Vec::new();
        for v in &node.args {
            if let Some(i) = self.int(node, v, min, max) {
                if out.contains(&i) {
                    self.err(
                        v.span,
                        format!("`{}` lists {i} twice", node.name.value),
                        "duplicate value",
                    );
                } else {
                    out.push(i);
                }
            }
        }
        out
    }

    fn one_int(&mut self, node: &RawNode, min: u64, max: u64) -> Option<u64> {
        let v = self.ints(node, min, max);
        if node.args.len() > 1 {
            self.err(
                node.args[1].span,
                format!("`{}` takes exactly one value", node.name.value),
                "extra value",
            );
            return None;
        }
        v.first().copied()
    }

    fn nums(&mut self, node: &RawNode, min: f64, max: f64) -> Vec<f64> {
        self.no_props(node);
        self.no_children(node);
        if node.args.is_empty() {
            self.err(
                node.span,
                format!("`{}` needs at least one value", node.name.value),
                "missing value",
            );
        }
        let mut out: Vec<f64> = Vec::new();
        for v in &node.args {
            if let Some(x) = self.num(node, v) {
                if !(min..=max).contains(&x) {
                    self.err(
                        v.span,
                        format!("`{}` must be between {min} and {max}", node.name.value),
                        "out of range",
                    );
                } else if out.contains(&x) {
                    self.err(
                        v.span,
                        format!("`{}` lists {x} twice", node.name.value),
                        "duplicate value",
                    );
                } else {
                    out.push(x);
                }
            }
        }
        out
    }

    fn one_num(&mut self, node: &RawNode, min: f64, max: f64) -> Option<f64> {
        let v = self.nums(node, min, max);
        if node.args.len() > 1 {
            self.err(
                node.args[1].span,
                format!("`{}` takes exactly one value", node.name.value),
                "extra value",
            );
            return None;
        }
        v.first().copied()
    }

    /// `model "name" { … }`: the block's name argument.
    fn block_name(&mut self, node: &RawNode) -> Option<Spanned<String>> {
        self.no_props(node);
        match node.args.as_slice() {
            [v] => match &v.value {
                RawValue::Str(s) if !s.is_empty() && !s.contains('/') => {
                    Some(Spanned::new(s.clone(), v.span))
                }
                RawValue::Str(_) => {
                    self.err(
                        v.span,
                        format!("invalid {} name", node.name.value),
                        "names must be non-empty and contain no `/`",
                    );
                    None
                }
                other => {
                    self.err(
                        v.span,
                        format!("{} name must be a string", node.name.value),
                        format!("this is {}", other.type_name()),
                    );
                    None
                }
            },
            [] => {
                self.err_help(
                    node.name.span,
                    format!("`{}` needs a name", node.name.value),
                    "missing name",
                    format!("write `{} \"my-name\" {{ … }}`", node.name.value),
                );
                None
            }
            [_, extra @ ..] => {
                self.err(
                    extra[0].span,
                    format!("`{}` takes one name", node.name.value),
                    "extra value",
                );
                None
            }
        }
    }

    fn first<'n>(fields: &BTreeMap<&str, Vec<&'n RawNode>>, name: &str) -> Option<&'n RawNode> {
        fields.get(name).and_then(|v| v.first().copied())
    }
}

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
    let mut name = None;
    let mut seed = 0u64;
    let mut repeats = 1u32;
    let mut defaults = Defaults {
        sampling: Sampling {
            max_tokens: 64,
            temperature: 0.0,
            top_p: 1.0,
            stop: Vec::new(),
        },
        warmup: 2,
        request_timeout_s: 120.0,
    };
    let mut telemetry = crate::spec::TelemetryConfig {
        interval: std::time::Duration::from_millis(100),
        idle: std::time::Duration::from_secs(2),
    };
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
                    "second `{kind}` block",
                );
                continue;
            }
            seen_singletons.insert(kind, node.span);
        }
        match kind {
            "sweep" => {
                name = ctx.block_name(node);
                let f = ctx.fields(node, SWEEP_FIELDS, &[]);
                if let Some(n) = Ctx::first(&f, "seed") {
                    seed = ctx.one_int(n, 0, u64::MAX).unwrap_or(0);
                }
                if let Some(n) = Ctx::first(&f, "repeats") {
                    repeats = ctx.one_int(n, 1, 1000).unwrap_or(1) as u32;
                }
            }
            "defaults" => {
                ctx.no_props(node);
                if !node.args.is_empty() {
                    ctx.err(
                        node.args[0].span,
                        "`defaults` takes no name",
                        "unexpected value",
                    );
                }
                let f = ctx.fields(node, DEFAULT_FIELDS, &[]);
                if let Some(n) = Ctx::first(&f, "max-tokens") {
                    defaults.sampling.max_tokens =
                        ctx.one_int(n, 1, 1_000_000).unwrap_or(64) as u32;
                }
                if let Some(n) = Ctx::first(&f, "temperature") {
                    defaults.sampling.temperature = ctx.one_num(n, 0.0, 10.0).unwrap_or(0.0);
                }
                if let Some(n) = Ctx::first(&f, "top-p") {
                    defaults.sampling.top_p = ctx.one_num(n, 0.0, 1.0).unwrap_or(1.0);
                }
                if let Some(n) = Ctx::first(&f, "stop") {
                    defaults.sampling.stop = ctx.strs(n).into_iter().map(|s| s.value).collect();
                }
                if let Some(n) = Ctx::first(&f, "warmup") {
                    defaults.warmup = ctx.one_int(n, 0, 100_000).unwrap_or(2) as u32;
                }
                if let Some(n) = Ctx::first(&f, "request-timeout") {
                    defaults.request_timeout_s = ctx.one_num(n, 0.001, 86_400.0).unwrap_or(120.0);
                }
            }
            "slo" => {
                ctx.no_props(node);
                let f = ctx.fields(node, SLO_FIELDS, &[]);
                slo.ttft_p95 =
                    Ctx::first(&f, "ttft-p95").and_then(|n| ctx.one_num(n, 0.0001, 86_400.0));
                slo.e2e_p95 =
                    Ctx::first(&f, "e2e-p95").and_then(|n| ctx.one_num(n, 0.0001, 86_400.0));
                slo.gpu_memory_gib =
                    Ctx::first(&f, "gpu-memory").and_then(|n| ctx.one_num(n, 0.001, 100_000.0));
            }
            "cost" => {
                ctx.no_props(node);
                let f = ctx.fields(node, COST_FIELDS, &[]);
                let energy = Ctx::first(&f, "energy-price").and_then(|n| ctx.one_num(n, 0.0, 1e6));
                let hw = Ctx::first(&f, "hardware-per-hour").and_then(|n| ctx.one_num(n, 0.0, 1e6));
                let currency = Ctx::first(&f, "currency")
                    .and_then(|n| ctx.one_str(n))
                    .map(|s| s.value)
                    .unwrap_or_else(|| "USD".into());
                if !f.contains_key("energy-price") && !f.contains_key("hardware-per-hour") {
                    ctx.err_help(node.name.span, "`cost` needs `energy-price` or `hardware-per-hour`", "no prices", "e.g. `cost { energy-price 0.30; hardware-per-hour 2.5; }` (per kWh, per hour)");
                }
                cost = Some(crate::spec::Cost {
                    energy_per_kwh: energy.unwrap_or(0.0),
                    hardware_per_hour: hw.unwrap_or(0.0),
                    currency,
                });
            }
            "telemetry" => {
                ctx.no_props(node);
                if !node.args.is_empty() {
                    ctx.err(
                        node.args[0].span,
                        "`telemetry` takes no name",
                        "unexpected value",
                    );
                }
                let f = ctx.fields(node, TELEMETRY_FIELDS, &[]);
                if let Some(n) = Ctx::first(&f, "interval") {
                    if let Some(s) = ctx.one_num(n, 0.01, 60.0) {
                        telemetry.interval = std::time::Duration::from_secs_f64(s);
                    }
                }
                if let Some(n) = Ctx::first(&f, "idle") {
                    if let Some(s) = ctx.one_num(n, 0.0, 3600.0) {
                        telemetry.idle = std::time::Duration::from_secs_f64(s);
                    }
                }
            }
            "slurm" => slurm = resolve_slurm(&mut ctx, node),
            "model" => {
                if let Some(m) = resolve_model(&mut ctx, node) {
                    models.push(m);
                }
            }
            "engine" => {
                if let Some(e) = resolve_engine(&mut ctx, node) {
                    engines.push(e);
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

    check_unique(
        &mut ctx,
        "model",
        &models.iter().map(|m| &m.name).collect::<Vec<_>>(),
    );
    check_unique(
        &mut ctx,
        "engine",
        &engines.iter().map(|m| &m.name).collect::<Vec<_>>(),
    );
    check_unique(
        &mut ctx,
        "task",
        &tasks.iter().map(|m| &m.name).collect::<Vec<_>>(),
    );
    check_unique(
        &mut ctx,
        "scenario",
        &scenarios.iter().map(|m| &m.name).collect::<Vec<_>>(),
    );

    let name = match name {
        Some(n) => n.value,
        None => {
            if !seen_singletons.contains_key("sweep") {
                ctx.err_help(
                    SourceSpan::from(0..0),
                    "missing `sweep` block",
                    "the file should start with it",
                    "add `sweep \"my-sweep\" { seed 1 }` at the top: its name keys the report",
                );
            }
            String::new()
        }
    };
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

    let matrix = match matrix_node {
        Some(node) => resolve_matrix(
            &mut ctx,
            node,
            &models,
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
            seed,
            repeats,
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
        };
        check_compatibility(&mut ctx, &sweep);
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
        if ctx.problems.is_empty() {
            return Ok(sweep);
        }
    }
    ctx.problems.sort_by_key(|p| p.span.offset());
    Err(ctx.problems)
}

/// Slurm's time limit syntax: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, or unlimited.
pub(crate) fn slurm_time_ok(t: &str) -> bool {
    if matches!(t, "UNLIMITED" | "unlimited" | "INFINITE" | "infinite") {
        return true;
    }
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, t),
    };
    let num = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = rest.split(':').collect();
    days.is_none_or(num) && parts.iter().all(|p| num(p)) && (1..=3).contains(&parts.len())
}

/// Slurm's memory syntax: a whole number with an optional K, M, G or T suffix.
pub(crate) fn slurm_mem_ok(m: &str) -> bool {
    let digits = m.trim_end_matches(['K', 'M', 'G', 'T', 'k', 'm', 'g', 't']);
    m.len() - digits.len() <= 1 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn resolve_slurm(ctx: &mut Ctx, node: &RawNode) -> SlurmSettings {
    ctx.no_props(node);
    if !node.args.is_empty() {
        ctx.err(
            node.args[0].span,
            "`slurm` takes no name",
            "unexpected value",
        );
    }
    let f = ctx.fields(node, SLURM_FIELDS, &[]);
    let text = |ctx: &mut Ctx, field: &str| {
        Ctx::first(&f, field)
            .and_then(|n| ctx.one_str(n))
            .map(|s| (ctx.expand_env(&s), s.span))
    };
    let partition = text(ctx, "partition").map(|t| t.0);
    let account = text(ctx, "account").map(|t| t.0);
    let qos = text(ctx, "qos").map(|t| t.0);
    let gres = text(ctx, "gres").map(|t| t.0);
    let time = text(ctx, "time").and_then(|(t, span)| {
        if slurm_time_ok(&t) {
            Some(t)
        } else {
            ctx.err_help(
                span,
                format!("`{t}` is not a Slurm time limit"),
                "not a time limit",
                "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. \"02:00:00\")",
            );
            None
        }
    });
    let mem = text(ctx, "mem").and_then(|(m, span)| {
        if slurm_mem_ok(&m) {
            Some(m)
        } else {
            ctx.err_help(
                span,
                format!("`{m}` is not a Slurm memory size"),
                "not a memory size",
                "a whole number with an optional K, M, G or T suffix (e.g. \"32G\")",
            );
            None
        }
    });
    let cpus = Ctx::first(&f, "cpus").and_then(|n| ctx.one_int(n, 1, 100_000).map(|c| c as u32));
    let sbatch_args = Ctx::first(&f, "sbatch-args")
        .map(|n| ctx.strs(n).iter().map(|s| ctx.expand_env(s)).collect())
        .unwrap_or_default();
    SlurmSettings {
        partition,
        account,
        qos,
        time,
        gres,
        cpus,
        mem,
        sbatch_args,
    }
}

fn resolve_model(ctx: &mut Ctx, node: &RawNode) -> Option<Model> {
    let name = ctx.block_name(node);
    let f = ctx.fields(node, MODEL_FIELDS, &["quantization"]);
    let path = Ctx::first(&f, "path").and_then(|n| ctx.one_str(n));
    let id = Ctx::first(&f, "id").and_then(|n| ctx.one_str(n));
    let source = match (path, id) {
        (Some(p), None) => Some(ModelSource::Path(ctx.expand_env(&p))),
        (None, Some(i)) => Some(ModelSource::Id(ctx.expand_env(&i))),
        (Some(_), Some(i)) => {
            ctx.err(
                i.span,
                "a model has either `path` or `id`, not both",
                "second source",
            );
            None
        }
        // A `path`/`id` that is present but invalid is reported already.
        (None, None) if f.contains_key("path") || f.contains_key("id") => None,
        (None, None) => {
            let has_variant_paths = f.get("quantization").is_some_and(|v| {
                v.iter()
                    .all(|q| q.props.iter().any(|(k, _)| k.value == "path"))
            });
            if !has_variant_paths {
                ctx.err_help(
                    node.name.span,
                    "model has no weights",
                    "no `path` or `id`",
                    "add `path \"/models/x.gguf\"` (local weights) or `id \"org/name\"` (resolved by the engine)",
                );
            }
            None
        }
    };
    let mut variants = Vec::new();
    for q in f.get("quantization").cloned().unwrap_or_default() {
        if q.args.len() != 1 {
            ctx.err(
                q.span,
                "`quantization` takes one name",
                "e.g. quantization \"q4_1\" path=\"…\"",
            );
            continue;
        }
        let Some(qname) = (match &q.args[0].value {
            RawValue::Str(s) => Some(Spanned::new(s.to_ascii_lowercase(), q.args[0].span)),
            other => {
                ctx.err(
                    q.args[0].span,
                    "quantization name must be a string",
                    format!("this is {}", other.type_name()),
                );
                None
            }
        }) else {
            continue;
        };
        let mut vpath = None;
        for (k, v) in &q.props {
            match (k.value.as_str(), &v.value) {
                ("path", RawValue::Str(s)) => {
                    vpath = Some(ctx.expand_env(&Spanned::new(s.clone(), v.span)))
                }
                ("path", other) => ctx.err(
                    v.span,
                    "`path` must be a string",
                    format!("this is {}", other.type_name()),
                ),
                (other, _) => {
                    let help =
                        did_you_mean(other, ["path"]).unwrap_or_else(|| known_list(["path"]));
                    ctx.err_help(
                        k.span,
                        format!("unknown property `{other}` of `quantization`"),
                        "unknown property",
                        help,
                    );
                }
            }
        }
        if variants
            .iter()
            .any(|v: &Variant| v.quantization.value == qname.value)
        {
            ctx.err(
                qname.span,
                format!("quantization `{}` is listed twice", qname.value),
                "duplicate",
            );
            continue;
        }
        variants.push(Variant {
            quantization: qname,
            path: vpath,
        });
    }
    if variants.is_empty() {
        // A model without declared quantizations runs as published ("default").
        variants.push(Variant {
            quantization: Spanned::new("default".into(), node.name.span),
            path: None,
        });
    }
    let source = source.or_else(|| {
        variants
            .first()
            .and_then(|v| v.path.clone())
            .map(ModelSource::Path)
    })?;
    Some(Model {
        name: name?,
        source,
        variants,
    })
}

fn resolve_engine(ctx: &mut Ctx, node: &RawNode) -> Option<Engine> {
    let name = ctx.block_name(node);
    let f = ctx.fields(node, ENGINE_FIELDS, &["env"]);
    let kind = match Ctx::first(&f, "kind") {
        Some(n) => ctx.one_str(n),
        None => {
            ctx.err_help(
                node.name.span,
                "engine has no `kind`",
                "missing `kind`",
                format!("add `kind \"llama.cpp\"`; {}", known_list(catalog::names())),
            );
            None
        }
    };
    let entry = kind.as_ref().and_then(|k| match catalog::lookup(&k.value) {
        Some(e) => Some(e),
        None => {
            let help = did_you_mean(&k.value, catalog::names())
                .unwrap_or_else(|| known_list(catalog::names()));
            ctx.err_help(
                k.span,
                format!("unknown engine kind `{}`", k.value),
                "not in the engine catalog",
                help,
            );
            None
        }
    });
    let launcher = Ctx::first(&f, "launcher").and_then(|n| ctx.one_str(n));
    let binary = Ctx::first(&f, "binary").and_then(|n| ctx.one_str(n));
    let url = Ctx::first(&f, "url").and_then(|n| ctx.one_str(n));
    let served_model = Ctx::first(&f, "served-model")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value);
    let api_key_env = Ctx::first(&f, "api-key-env").and_then(|n| ctx.one_str(n));
    if let Some(k) = &api_key_env {
        if !k
            .value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
            || k.value.is_empty()
        {
            ctx.err_help(
                k.span,
                "`api-key-env` names an environment variable",
                "not a variable name",
                "write the variable's name (e.g. `OPENAI_API_KEY`), never the key itself",
            );
        }
    }
    let launch = match launcher.as_ref().map(|l| l.value.as_str()) {
        Some("process") | None if url.is_none() => match binary {
            Some(b) => Some(Launch::Process {
                binary: ctx.expand_env(&b),
            }),
            None => {
                ctx.err_help(node.name.span, "process engine has no `binary`", "missing `binary`", "add `binary \"/path/to/llama-server\"` (or use `launcher \"endpoint\"` with a `url`)");
                None
            }
        },
        Some("endpoint") | None => match url {
            Some(u) => {
                let expanded = ctx.expand_env(&u);
                if !(expanded.starts_with("http://") || expanded.starts_with("https://")) {
                    ctx.err(
                        u.span,
                        "endpoint `url` must start with http:// or https://",
                        "not an http(s) URL",
                    );
                }
                if let Some(b) = binary {
                    ctx.err(
                        b.span,
                        "an endpoint engine has no `binary`",
                        "not used by `launcher \"endpoint\"`",
                    );
                }
                Some(Launch::Endpoint {
                    url: expanded.trim_end_matches('/').to_string(),
                    served_model,
                    api_key_env: api_key_env.map(|s| s.value),
                })
            }
            None => {
                ctx.err(
                    node.name.span,
                    "endpoint engine has no `url`",
                    "missing `url`",
                );
                None
            }
        },
        Some("process") => {
            ctx.err(
                url.map(|u| u.span).unwrap_or(node.span),
                "a process engine has no `url`",
                "bench360 picks a free loopback port itself",
            );
            None
        }
        Some("docker") => {
            let recipe = entry.and_then(|e| e.docker.as_ref());
            if entry.is_some() && recipe.is_none() {
                ctx.err_help(
                    launcher.as_ref().unwrap().span,
                    format!("engine kind `{}` has no container recipe", kind.as_ref().map(|k| k.value.as_str()).unwrap_or("")),
                    "no image in the catalog",
                    "use `launcher \"process\"` with its command, or an engine kind with an official image",
                );
            }
            for (field, what) in [(&binary, "binary"), (&url, "url")] {
                if let Some(v) = field {
                    ctx.err(
                        v.span,
                        format!("a docker engine has no `{what}`"),
                        "not used by `launcher \"docker\"`",
                    );
                }
            }
            let image = Ctx::first(&f, "image")
                .and_then(|n| ctx.one_str(n))
                .map(|s| ctx.expand_env(&s));
            let tag = Ctx::first(&f, "tag")
                .and_then(|n| ctx.one_str(n))
                .map(|s| ctx.expand_env(&s));
            let pull = match Ctx::first(&f, "pull").and_then(|n| ctx.one_str(n)) {
                None => PullPolicy::Missing,
                Some(p) if p.value == "missing" => PullPolicy::Missing,
                Some(p) if p.value == "always" => PullPolicy::Always,
                Some(p) => {
                    ctx.err_help(p.span, format!("unknown pull policy `{}`", p.value), "not a policy", "`missing` (use a local image when present) or `always` (pull at every apply)");
                    PullPolicy::Missing
                }
            };
            let env_pass: Vec<String> = Ctx::first(&f, "env-pass")
                .map(|n| ctx.strs(n))
                .unwrap_or_default()
                .into_iter()
                .filter(|s| {
                    let ok = !s.value.is_empty() && s.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if !ok {
                        ctx.err_help(s.span, "`env-pass` names environment variables", "not a variable name", "write names only (e.g. `HF_TOKEN`): values are read at launch and never stored");
                    }
                    ok
                })
                .map(|s| s.value)
                .collect();
            let shm_size = Ctx::first(&f, "shm-size")
                .and_then(|n| ctx.one_str(n))
                .and_then(|s| match parse_bytes(&s.value) {
                    Some(b) => Some(b),
                    None => {
                        ctx.err_help(
                            s.span,
                            format!("invalid size `{}`", s.value),
                            "not a size",
                            "e.g. `16g`, `512m`, or bytes",
                        );
                        None
                    }
                });
            let hf_cache = Ctx::first(&f, "hf-cache")
                .and_then(|n| ctx.one_str(n))
                .map(|s| ctx.expand_env(&s));
            recipe.map(|r| Launch::Docker {
                image: image.unwrap_or_else(|| r.image.to_string()),
                tag: tag.unwrap_or_else(|| r.tag.to_string()),
                pull,
                env_pass,
                shm_size,
                hf_cache,
            })
        }
        Some(other) => {
            let l = launcher.as_ref().unwrap();
            let help = did_you_mean(other, ["process", "endpoint", "docker"])
                .unwrap_or_else(|| known_list(["process", "endpoint", "docker"]));
            ctx.err_help(
                l.span,
                format!("unknown launcher `{other}`"),
                "not a launcher",
                help,
            );
            None
        }
    };
    let args = Ctx::first(&f, "args")
        .map(|n| {
            ctx.strs(n)
                .iter()
                .map(|s| ctx.expand_env(s))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut env_vars = Vec::new();
    for n in f.get("env").cloned().unwrap_or_default() {
        ctx.no_children(n);
        if n.props.is_empty() || !n.args.is_empty() {
            ctx.err(
                n.span,
                "`env` takes NAME=\"value\" properties",
                "e.g. env OMP_NUM_THREADS=\"2\"",
            );
        }
        for (k, v) in &n.props {
            match &v.value {
                RawValue::Str(s) => env_vars.push((
                    k.value.clone(),
                    ctx.expand_env(&Spanned::new(s.clone(), v.span)),
                )),
                RawValue::Int(i) => env_vars.push((k.value.clone(), i.to_string())),
                other => ctx.err(
                    v.span,
                    "environment values are strings",
                    format!("this is {}", other.type_name()),
                ),
            }
        }
    }
    let parallel = Ctx::first(&f, "parallel")
        .and_then(|n| ctx.one_int(n, 1, 4096))
        .unwrap_or(1) as u32;
    let ctx_size = Ctx::first(&f, "ctx-size")
        .and_then(|n| ctx.one_int(n, 64, 10_000_000))
        .unwrap_or(2048) as u32;
    let startup_timeout_s = Ctx::first(&f, "startup-timeout")
        .and_then(|n| ctx.one_num(n, 1.0, 86_400.0))
        .unwrap_or(600.0);
    let gpu_memory = Ctx::first(&f, "gpu-memory")
        .and_then(|n| ctx.one_num(n, 0.01, 1.0))
        .unwrap_or(0.9);
    let dtype = Ctx::first(&f, "dtype")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value)
        .unwrap_or_else(|| "auto".into());
    let gpus = Ctx::first(&f, "gpus").map(|n| {
        ctx.ints(n, 0, 1023)
            .into_iter()
            .map(|g| g as u32)
            .collect::<Vec<_>>()
    });
    let api = match Ctx::first(&f, "api").and_then(|n| ctx.one_str(n)) {
        None => Api::Chat,
        Some(s) if s.value == "chat" => Api::Chat,
        Some(s) if s.value == "completion" => Api::Completion,
        Some(s) => {
            ctx.err_help(
                s.span,
                format!("unknown api `{}`", s.value),
                "not an api",
                "use `chat` (/v1/chat/completions) or `completion` (/v1/completions)",
            );
            Api::Chat
        }
    };
    entry?;
    Some(Engine {
        name: name?,
        kind: kind?,
        launch: launch?,
        parallel,
        ctx_size,
        args,
        env: env_vars,
        startup_timeout_s,
        api,
        gpus,
        gpu_memory,
        dtype,
    })
}

/// `16g`, `512m`, `1024k` or plain bytes.
fn parse_bytes(s: &str) -> Option<i64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mul) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1i64 << 10),
        'm' => (&s[..s.len() - 1], 1 << 20),
        'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s.as_str(), 1),
    };
    num.parse::<i64>().ok().filter(|n| *n > 0).map(|n| n * mul)
}

fn resolve_task(ctx: &mut Ctx, node: &RawNode) -> Option<Task> {
    let name = ctx.block_name(node);
    let f = ctx.fields(node, TASK_FIELDS, &[]);
    let kinds = || TaskKind::ALL.iter().map(|(n, _)| *n);
    let kind = match Ctx::first(&f, "kind").and_then(|n| ctx.one_str(n)) {
        Some(k) => match TaskKind::ALL.iter().find(|(n, _)| *n == k.value) {
            Some((_, kind)) => Some(*kind),
            None => {
                let help = did_you_mean(&k.value, kinds()).unwrap_or_else(|| known_list(kinds()));
                ctx.err_help(
                    k.span,
                    format!("unknown task kind `{}`", k.value),
                    "not a built-in task",
                    help,
                );
                None
            }
        },
        None => {
            if Ctx::first(&f, "kind").is_none() {
                ctx.err_help(
                    node.name.span,
                    "task has no `kind`",
                    "missing `kind`",
                    known_list(kinds()),
                );
            }
            None
        }
    };
    let dataset = match Ctx::first(&f, "dataset") {
        Some(n) => ctx
            .one_str(n)
            .map(|s| Spanned::new(ctx.expand_env(&s), s.span)),
        None => {
            ctx.err_help(
                node.name.span,
                "task has no `dataset`",
                "missing `dataset`",
                "add `dataset \"../datasets/mmlu\"` (relative to the sweep file)",
            );
            None
        }
    };
    let samples = Ctx::first(&f, "samples")
        .and_then(|n| ctx.one_int(n, 1, 100_000_000))
        .map(|v| v as usize);
    let shots = Ctx::first(&f, "shots")
        .and_then(|n| ctx.one_int(n, 0, 5))
        .unwrap_or(0) as u32;
    let system = Ctx::first(&f, "system")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value);
    let mode = match Ctx::first(&f, "mode").and_then(|n| ctx.one_str(n)) {
        None => None,
        Some(s) if s.value == "chat" => Some(Api::Chat),
        Some(s) if s.value == "completion" => Some(Api::Completion),
        Some(s) => {
            ctx.err_help(
                s.span,
                format!("unknown mode `{}`", s.value),
                "not a prompting mode",
                "use `chat` (messages with a system prompt) or `completion` (one plain prompt)",
            );
            None
        }
    };
    let max_tokens = Ctx::first(&f, "max-tokens")
        .and_then(|n| ctx.one_int(n, 1, 1_000_000))
        .map(|v| v as u32);
    let stop = Ctx::first(&f, "stop")
        .map(|n| ctx.strs(n).into_iter().map(|s| s.value).collect())
        .unwrap_or_default();
    let article_words = Ctx::first(&f, "article-words")
        .and_then(|n| ctx.one_int(n, 10, 100_000))
        .unwrap_or(400) as usize;
    let sql_timeout_s = Ctx::first(&f, "sql-timeout")
        .and_then(|n| ctx.one_num(n, 0.001, 3600.0))
        .unwrap_or(5.0);
    if let Some(k) = kind {
        let only = |field: &str| -> Option<&'static str> {
            match field {
                "article-words" => Some("summarization"),
                "sql-timeout" => Some("text2sql or custom"),
                f if CUSTOM_FIELDS.contains(&f) => Some("custom"),
                _ => None,
            }
        };
        for (field, nodes) in &f {
            let allowed = match *field {
                "article-words" => k == TaskKind::Summarization,
                "sql-timeout" => matches!(k, TaskKind::Text2Sql | TaskKind::Custom),
                f if CUSTOM_FIELDS.contains(&f) => k == TaskKind::Custom,
                _ => true,
            };
            if !allowed {
                ctx.err_help(
                    nodes[0].name.span,
                    format!("`{field}` does not apply to a `{}` task", kind_name(k)),
                    "not for this kind",
                    format!("`{field}` is for {} tasks", only(field).unwrap_or("other")),
                );
            }
        }
    }
    let custom = if kind == Some(TaskKind::Custom) {
        resolve_custom(ctx, node, &f)
    } else {
        None
    };
    if kind == Some(TaskKind::Custom) && custom.is_none() {
        return None;
    }
    Some(Task {
        name: name?,
        kind: kind?,
        dataset: dataset?,
        samples,
        shots,
        system,
        mode,
        max_tokens,
        stop,
        article_words,
        sql_timeout_s,
        custom,
    })
}

fn kind_name(k: TaskKind) -> &'static str {
    TaskKind::ALL
        .iter()
        .find(|(_, x)| *x == k)
        .map(|(n, _)| *n)
        .expect("listed")
}

fn resolve_custom(
    ctx: &mut Ctx,
    node: &RawNode,
    f: &BTreeMap<&str, Vec<&RawNode>>,
) -> Option<CustomTask> {
    let template = match Ctx::first(f, "template").and_then(|n| ctx.one_str(n)) {
        Some(t) => {
            if let Err(e) = crate::task::custom::check_template(&t.value) {
                ctx.err(t.span, e, "this template");
            }
            Some(t)
        }
        None => {
            if Ctx::first(f, "template").is_none() {
                ctx.err_help(
                    node.name.span,
                    "custom task has no `template`",
                    "missing `template`",
                    "add `template \"Question: {{ question }}\\nAnswer:\"` (minijinja over the dataset's fields)",
                );
            }
            None
        }
    };
    let reference = match Ctx::first(f, "reference").and_then(|n| ctx.one_str(n)) {
        Some(r) => Some(r),
        None => {
            if Ctx::first(f, "reference").is_none() {
                ctx.err_help(
                    node.name.span,
                    "custom task has no `reference`",
                    "missing `reference`",
                    "name the dataset field that holds the expected answer: `reference \"answer\"`",
                );
            }
            None
        }
    };
    let id_field = Ctx::first(f, "id")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value);
    let mut metrics = Vec::new();
    if let Some(n) = Ctx::first(f, "metrics") {
        for m in ctx.strs(n) {
            match Metric::ALL.iter().find(|(name, _)| *name == m.value) {
                Some((_, metric)) => metrics.push(Spanned::new(*metric, m.span)),
                None => {
                    let names = || Metric::ALL.iter().map(|(n, _)| *n);
                    let help =
                        did_you_mean(&m.value, names()).unwrap_or_else(|| known_list(names()));
                    ctx.err_help(
                        m.span,
                        format!("unknown metric `{}`", m.value),
                        "not a built-in metric",
                        help,
                    );
                }
            }
        }
    }
    let extract = Ctx::first(f, "extract").and_then(|n| ctx.one_str(n));
    if let Some(e) = &extract {
        if let Err(err) = regex::Regex::new(&e.value) {
            ctx.err(
                e.span,
                format!("`extract` is not a valid regex: {err}"),
                "this pattern",
            );
        }
    }
    let scorer = Ctx::first(f, "scorer").map(|n| {
        ctx.strs(n)
            .iter()
            .map(|s| ctx.expand_env(s))
            .collect::<Vec<_>>()
    });
    let scorer_timeout_s = Ctx::first(f, "scorer-timeout")
        .and_then(|n| ctx.one_num(n, 0.001, 86_400.0))
        .unwrap_or(300.0);
    let database = Ctx::first(f, "database")
        .and_then(|n| ctx.one_str(n))
        .map(|s| Spanned::new(ctx.expand_env(&s), s.span));
    let group_by = Ctx::first(f, "group-by")
        .map(|n| ctx.strs(n).into_iter().map(|s| s.value).collect())
        .unwrap_or_default();
    if metrics.is_empty() && scorer.is_none() {
        ctx.err_help(
            node.name.span,
            "custom task has neither `metrics` nor `scorer`",
            "nothing to score with",
            format!(
                "add `metrics \"exact_match\" \"f1\"` (any of {}) or `scorer \"python3\" \"score.py\"`",
                Metric::ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        );
        return None;
    }
    if let Some(m) = metrics.iter().find(|m| m.value == Metric::Sql) {
        if database.is_none() {
            ctx.err_help(
                m.span,
                "the `sql` metric needs a `database`",
                "no database to run SQL on",
                "add `database \"path/to/db.sqlite\"` (opened read-only)",
            );
        }
    }
    Some(CustomTask {
        template: template?,
        reference: reference?,
        id_field,
        metrics,
        extract,
        scorer,
        scorer_timeout_s,
        database,
        group_by,
    })
}

fn resolve_scenario(ctx: &mut Ctx, node: &RawNode) -> Option<Scenario> {
    let name = ctx.block_name(node);
    let kind_node = node.children.iter().find(|c| c.name.value == "kind");
    let kind = kind_node.and_then(|n| ctx.one_str(n));
    let allowed: &[&str] = match kind.as_ref().map(|k| k.value.as_str()) {
        Some("single") => &["kind", "requests", "early-stop"],
        Some("batch") => &["kind", "batch-size", "batches"],
        Some("server") => &["kind", "users", "rate", "duration"],
        Some("rate") => &["kind", "rate", "burstiness", "duration", "ramp-from"],
        Some("concurrency") => &["kind", "concurrency", "requests", "early-stop"],
        Some("saturation") => &[
            "kind",
            "start",
            "factor",
            "max-rate",
            "step-duration",
            "precision",
            "burstiness",
            "ttft-p95",
            "e2e-p95",
            "max-error-rate",
        ],
        Some("offline") => &["kind", "requests"],
        Some("replay") => &["kind", "trace", "speed"],
        Some(other) => {
            let help = did_you_mean(other, SCENARIO_KINDS.iter().copied())
                .unwrap_or_else(|| known_list(SCENARIO_KINDS.iter().copied()));
            ctx.err_help(
                kind.as_ref().unwrap().span,
                format!("unknown scenario kind `{other}`"),
                "not a scenario kind",
                help,
            );
            return None;
        }
        None => {
            if kind_node.is_none() {
                ctx.err_help(
                    node.name.span,
                    "scenario has no `kind`",
                    "missing `kind`",
                    known_list(SCENARIO_KINDS.iter().copied()),
                );
            }
            return None;
        }
    };
    let f = ctx.fields(node, allowed, &[]);
    let required_ints = |field: &str, min: u64, max: u64, ctx: &mut Ctx| -> Vec<u64> {
        match Ctx::first(&f, field) {
            Some(n) => ctx.ints(n, min, max),
            None => {
                ctx.err(
                    node.name.span,
                    format!(
                        "`{}` scenario needs `{field}`",
                        kind.as_ref().unwrap().value
                    ),
                    format!("missing `{field}`"),
                );
                Vec::new()
            }
        }
    };
    let spec = match kind.as_ref().unwrap().value.as_str() {
        "single" => ScenarioSpec::Single {
            requests: match Ctx::first(&f, "requests") {
                Some(n) => ctx.ints(n, 1, 10_000_000).into_iter().map(Some).collect(),
                None => vec![None],
            },
            early_stop: Ctx::first(&f, "early-stop").and_then(|n| ctx.one_num(n, 0.001, 10.0)),
        },
        "batch" => {
            let batch_size = required_ints("batch-size", 1, 1_000_000, ctx);
            let batches = match Ctx::first(&f, "batches") {
                Some(n) => ctx.ints(n, 1, 1_000_000),
                None => vec![1],
            };
            ScenarioSpec::Batch {
                batch_size,
                batches,
            }
        }
        "server" => {
            let users = required_ints("users", 1, 1_000_000, ctx);
            let rate = match Ctx::first(&f, "rate") {
                Some(n) => ctx.nums(n, 1e-6, 1e9),
                None => {
                    ctx.err_help(
                        node.name.span,
                        "`server` scenario needs `rate`",
                        "missing `rate`",
                        "requests per minute per user, e.g. `rate 30`",
                    );
                    Vec::new()
                }
            };
            let duration_s = match Ctx::first(&f, "duration") {
                Some(n) => ctx.nums(n, 0.001, 7.0 * 86_400.0),
                None => {
                    ctx.err_help(
                        node.name.span,
                        "`server` scenario needs `duration`",
                        "missing `duration`",
                        "seconds of traffic, e.g. `duration 60`",
                    );
                    Vec::new()
                }
            };
            ScenarioSpec::Server {
                users,
                rate,
                duration_s,
            }
        }
        "rate" => {
            let need = |field: &str, min: f64, max: f64, help: &str, ctx: &mut Ctx| match Ctx::first(
                &f, field,
            ) {
                Some(n) => ctx.nums(n, min, max),
                None => {
                    ctx.err_help(
                        node.name.span,
                        format!("`rate` scenario needs `{field}`"),
                        format!("missing `{field}`"),
                        help,
                    );
                    Vec::new()
                }
            };
            let rate = need(
                "rate",
                1e-6,
                1e7,
                "requests per second in total, e.g. `rate 4`",
                ctx,
            );
            let duration_s = need(
                "duration",
                0.001,
                7.0 * 86_400.0,
                "seconds of traffic, e.g. `duration 60`",
                ctx,
            );
            let burstiness = Ctx::first(&f, "burstiness")
                .map(|n| ctx.nums(n, 0.01, 1000.0))
                .unwrap_or_else(|| vec![1.0]);
            let ramp_from = Ctx::first(&f, "ramp-from").and_then(|n| ctx.one_num(n, 0.0, 1e7));
            ScenarioSpec::Rate {
                rate,
                burstiness,
                duration_s,
                ramp_from,
            }
        }
        "saturation" => {
            let num = |name: &str, min: f64, max: f64, ctx: &mut Ctx| {
                Ctx::first(&f, name).and_then(|n| ctx.one_num(n, min, max))
            };
            let start = num("start", 0.001, 1e7, ctx).unwrap_or(1.0);
            let factor = num("factor", 1.05, 100.0, ctx).unwrap_or(2.0);
            let max_rate = num("max-rate", 0.001, 1e7, ctx).unwrap_or(1000.0);
            let step_s = num("step-duration", 0.1, 86_400.0, ctx).unwrap_or(10.0);
            let precision = num("precision", 0.001, 1.0, ctx).unwrap_or(0.05);
            let burstiness = num("burstiness", 0.01, 1000.0, ctx).unwrap_or(1.0);
            let ttft_p95 = num("ttft-p95", 0.0001, 86_400.0, ctx);
            let e2e_p95 = num("e2e-p95", 0.0001, 86_400.0, ctx);
            let max_error_rate = num("max-error-rate", 0.0, 1.0, ctx).unwrap_or(0.01);
            if max_rate < start {
                ctx.err(
                    node.name.span,
                    format!("`max-rate` {max_rate} is below `start` {start}"),
                    "this scenario",
                );
            }
            ScenarioSpec::Saturation(SaturationSpec {
                start,
                factor,
                max_rate,
                step_s,
                precision,
                burstiness,
                ttft_p95,
                e2e_p95,
                max_error_rate,
            })
        }
        "concurrency" => {
            let concurrency = required_ints("concurrency", 1, 1_000_000, ctx);
            let requests = match Ctx::first(&f, "requests") {
                Some(n) => ctx.ints(n, 1, 10_000_000).into_iter().map(Some).collect(),
                None => vec![None],
            };
            let early_stop = Ctx::first(&f, "early-stop").and_then(|n| ctx.one_num(n, 0.001, 10.0));
            ScenarioSpec::Concurrency {
                concurrency,
                requests,
                early_stop,
            }
        }
        "replay" => {
            let trace = match Ctx::first(&f, "trace").and_then(|n| ctx.one_str(n)) {
                Some(t) => Some(Spanned::new(ctx.expand_env(&t), t.span)),
                None => {
                    if Ctx::first(&f, "trace").is_none() {
                        ctx.err_help(node.name.span, "`replay` scenario needs `trace`", "missing `trace`", "a JSONL, CSV or Parquet file with arrival times `t` (seconds) and optionally `output_tokens`");
                    }
                    None
                }
            };
            let speed = Ctx::first(&f, "speed")
                .map(|n| ctx.nums(n, 0.001, 1000.0))
                .unwrap_or_else(|| vec![1.0]);
            ScenarioSpec::Replay {
                trace: trace?,
                speed,
            }
        }
        "offline" => ScenarioSpec::Offline {
            requests: match Ctx::first(&f, "requests") {
                Some(n) => ctx.ints(n, 1, 10_000_000).into_iter().map(Some).collect(),
                None => vec![None],
            },
        },
        _ => unreachable!("kind checked above"),
    };
    Some(Scenario { name: name?, spec })
}

fn resolve_matrix(
    ctx: &mut Ctx,
    node: &RawNode,
    models: &[Model],
    [model_names, engine_names, task_names, scenario_names]: [Vec<&str>; 4],
) -> Matrix {
    let f = ctx.fields(node, MATRIX_FIELDS, &["exclude"]);
    let refs = |field: &str, defined: Vec<&str>, ctx: &mut Ctx| -> Vec<Spanned<String>> {
        let Some(n) = Ctx::first(&f, field) else {
            return Vec::new();
        };
        let values = ctx.strs(n);
        let mut out: Vec<Spanned<String>> = Vec::new();
        for v in values {
            if !defined.contains(&v.value.as_str()) {
                let help = did_you_mean(&v.value, defined.iter().copied())
                    .unwrap_or_else(|| known_list(defined.iter().copied()));
                ctx.err_help(
                    v.span,
                    format!("unknown {field} `{}`", v.value),
                    format!("no {field} of this name is defined"),
                    help,
                );
            } else if out.iter().any(|o| o.value == v.value) {
                ctx.err(
                    v.span,
                    format!("{field} `{}` is listed twice", v.value),
                    "duplicate",
                );
            } else {
                out.push(v);
            }
        }
        out
    };
    let quant_names: BTreeSet<&str> = models
        .iter()
        .flat_map(|m| m.variants.iter().map(|v| v.quantization.value.as_str()))
        .collect();
    let m = Matrix {
        models: refs("model", model_names, ctx),
        quantizations: refs("quantization", quant_names.into_iter().collect(), ctx),
        engines: refs("engine", engine_names, ctx),
        tasks: refs("task", task_names, ctx),
        scenarios: refs("scenario", scenario_names, ctx),
        max_tokens: Ctx::first(&f, "max-tokens")
            .map(|n| {
                ctx.ints(n, 1, 1_000_000)
                    .into_iter()
                    .map(|v| v as u32)
                    .collect()
            })
            .unwrap_or_default(),
        temperature: Ctx::first(&f, "temperature")
            .map(|n| ctx.nums(n, 0.0, 10.0))
            .unwrap_or_default(),
        top_p: Ctx::first(&f, "top-p")
            .map(|n| ctx.nums(n, 0.0, 1.0))
            .unwrap_or_default(),
        excludes: Vec::new(),
    };
    let mut excludes = Vec::new();
    for e in f.get("exclude").cloned().unwrap_or_default() {
        ctx.no_children(e);
        if !e.args.is_empty() || e.props.is_empty() {
            ctx.err_help(
                e.span,
                "`exclude` takes axis=value properties",
                "no conditions",
                "e.g. `exclude engine=\"vllm\" quantization=\"q4_1\"`",
            );
            continue;
        }
        let mut conditions = Vec::new();
        for (k, v) in &e.props {
            if !EXCLUDE_AXES.contains(&k.value.as_str()) {
                let help = did_you_mean(&k.value, EXCLUDE_AXES.iter().copied())
                    .unwrap_or_else(|| known_list(EXCLUDE_AXES.iter().copied()));
                ctx.err_help(
                    k.span,
                    format!("unknown axis `{}` in `exclude`", k.value),
                    "not a matrix axis",
                    help,
                );
                continue;
            }
            let value = match &v.value {
                RawValue::Str(s) => s.clone(),
                RawValue::Int(i) => i.to_string(),
                RawValue::Float(x) => x.to_string(),
                other => {
                    ctx.err(
                        v.span,
                        "exclude values are names or numbers",
                        format!("this is {}", other.type_name()),
                    );
                    continue;
                }
            };
            conditions.push((k.value.clone(), value));
        }
        excludes.push(Exclude {
            span: e.span,
            conditions,
        });
    }
    Matrix { excludes, ..m }
}

/// Plan-time checks that need the whole sweep: engine × quantization pairs the engine
/// cannot run are reported at the quantization's declaration.
fn check_compatibility(ctx: &mut Ctx, sweep: &Sweep) {
    for e in &sweep.matrix.excludes {
        if !crate::spec::expand::exclude_matches(sweep, e) {
            ctx.err_help(
                e.span,
                "this exclude rule matches no configuration",
                "excludes nothing",
                "check the names and values: each must be one the matrix actually has",
            );
        }
    }
    if crate::spec::expand::configs(sweep).is_empty() {
        ctx.err_help(
            sweep
                .matrix
                .excludes
                .first()
                .map(|e| e.span)
                .unwrap_or(SourceSpan::from(0..0)),
            "the matrix is empty",
            "nothing left to run",
            "the exclude rules (or the quantization filter) remove every configuration",
        );
    }
    for cfg in crate::spec::expand::deployments(sweep) {
        let engine = &sweep.engines[cfg.engine];
        let variant = &sweep.models[cfg.model].variants[cfg.variant];
        let entry = catalog::lookup(&engine.kind.value).expect("kind validated");
        if !entry.accepts_quantization(&variant.quantization.value) {
            ctx.err_help(
                variant.quantization.span,
                format!(
                    "engine `{}` ({}) cannot run quantization `{}`",
                    engine.name.value, entry.name, variant.quantization.value
                ),
                "unsupported by this engine",
                format!(
                    "{} accepts: {}; or add `exclude engine=\"{}\" quantization=\"{}\"` to the matrix",
                    entry.name,
                    entry.quantizations.join(", "),
                    engine.name.value,
                    variant.quantization.value
                ),
            );
        }
    }
}
