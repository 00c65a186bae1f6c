//! Building the DAG: the matrix expansion walked once, one key builder per node kind.
//!
//! Each node kind's key inputs are a `#[derive(Serialize)]` struct, flattened by
//! [`inputs_of`] (`store/flatten.rs`) into the string map that is hashed ([`key_of`]) and that
//! `plan` diffs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

use super::graph::{Deployment, Node, NodeKind, Plan, PlanBuilder, PlanError, RunSpec};
use super::{weights_path, Facts};
use crate::record::Columns;
use crate::spec::expand::{self, Config, DeploymentRef, ScenarioInstance};
use crate::spec::{Engine, ModelSource, Sweep};
use crate::store::flatten::inputs_of;
use crate::store::keys::key_of;
use crate::task;

fn json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("serializable")
}

pub(super) fn hash_str(s: &str) -> String {
    blake3::hash(s.as_bytes()).to_hex()[..32].to_string()
}

/// What a `pull` node resolves: the engine's artifact (binary checksum, image digest, URL).
#[derive(Serialize)]
struct PullKey<'a> {
    node: &'static str,
    #[serde(rename = "engine.kind")]
    kind: &'a str,
    /// The launch block as JSON.
    #[serde(rename = "engine.launch")]
    launch: String,
    #[serde(rename = "engine.artifact")]
    artifact: String,
}

/// A deployment: the engine started with one model variant on this machine.
#[derive(Serialize)]
struct ColdstartKey<'a> {
    node: &'static str,
    pull: &'a str,
    #[serde(rename = "model.quantization")]
    quantization: &'a str,
    #[serde(rename = "model.path")]
    path: Option<String>,
    /// Content hash of the weights, or "unreadable" (the node is then blocked).
    #[serde(rename = "model.weights")]
    weights: Option<String>,
    #[serde(rename = "model.id")]
    id: Option<&'a str>,
    #[serde(rename = "engine.parallel")]
    parallel: u32,
    /// Rust `Display` of the fraction.
    #[serde(rename = "engine.gpu-memory")]
    gpu_memory: String,
    #[serde(rename = "engine.dtype")]
    dtype: String,
    #[serde(rename = "engine.gpus")]
    gpus: Option<String>,
    /// CPU affinity; left out when unset, so that keys made before the field existed stay
    /// valid.
    #[serde(rename = "engine.cpus")]
    cpus: Option<String>,
    #[serde(rename = "engine.ctx-size")]
    ctx_size: u32,
    /// Left out at 1, so that keys made before the field existed stay valid.
    #[serde(rename = "engine.tensor-parallel")]
    tensor_parallel: Option<u32>,
    /// Which cold start (`cold-repeats`), counted from 0; left out for the first, which is
    /// the deployment without `cold-repeats`.
    #[serde(rename = "engine.start")]
    start: Option<u32>,
    #[serde(rename = "engine.args")]
    args: String,
    #[serde(rename = "engine.catalog-args")]
    catalog_args: String,
    /// `engine.args.file.ARG`: the content hash of each regular file an argument names (see
    /// [`super::args_files`]); none when no argument names one, so older keys stay valid.
    #[serde(flatten)]
    args_files: BTreeMap<String, String>,
    /// `engine.env.NAME`: values may be secrets, so only their blake3 keyed by the cache's
    /// secret salt enters the key (`keyed:…`): not checkable against guesses without the
    /// cache, and still a new key when a value changes.
    #[serde(flatten)]
    env: BTreeMap<String, String>,
    /// `machine.FIELD`: the fingerprint of the machine the deployment runs on.
    #[serde(flatten)]
    machine: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct WarmupKey<'a> {
    node: &'static str,
    deployment: &'a str,
    requests: u32,
}

/// One measured run of a configuration on a deployment.
#[derive(Serialize)]
struct RunKey<'a> {
    node: &'static str,
    deployment: &'a str,
    api: String,
    #[serde(rename = "task.kind")]
    task_kind: String,
    #[serde(rename = "task.samples")]
    samples: String,
    #[serde(rename = "task.shots")]
    shots: u32,
    #[serde(rename = "task.system")]
    system: &'a str,
    #[serde(rename = "task.template")]
    template: String,
    /// `task.dataset.FILE`: content hash of each file the prompts come from.
    #[serde(flatten)]
    dataset: BTreeMap<String, String>,
    #[serde(rename = "scenario.kind")]
    scenario_kind: &'a str,
    #[serde(rename = "scenario.trace-content")]
    trace_content: Option<String>,
    /// Precision-based stopping; left out when unset, so older keys stay valid.
    #[serde(rename = "scenario.target-margin")]
    target_margin: Option<String>,
    /// How a ramped rate's arrivals are drawn (since 2026-12-05: by time rescaling); left out
    /// of flat schedules, whose keys stay valid.
    #[serde(rename = "scenario.arrivals")]
    arrivals: Option<&'static str>,
    /// `scenario.PARAM`: the scenario instance's parameters.
    #[serde(flatten)]
    scenario: BTreeMap<String, String>,
    #[serde(rename = "sampling.max-tokens")]
    max_tokens: u32,
    #[serde(rename = "sampling.temperature")]
    temperature: String,
    #[serde(rename = "sampling.top-p")]
    top_p: String,
    #[serde(rename = "sampling.stop")]
    stop: String,
    /// Output control: left out when unset, so older keys stay valid.
    #[serde(rename = "sampling.ignore-eos")]
    ignore_eos: Option<bool>,
    #[serde(rename = "sampling.min-tokens")]
    min_tokens: Option<u32>,
    #[serde(rename = "sampling.extra-body")]
    extra_body: Option<String>,
    #[serde(rename = "request-timeout")]
    request_timeout: String,
    /// `reuse` when connections are pooled; left out for the default (a new one each).
    connections: Option<&'static str>,
    #[serde(rename = "telemetry.interval")]
    telemetry_interval: String,
    #[serde(rename = "telemetry.idle")]
    telemetry_idle: String,
    /// The engine metrics' scrape interval, left out when it is `telemetry.interval` (as
    /// every run before 2026-12-05 was scraped), so those keys stay valid.
    #[serde(rename = "telemetry.metrics-interval")]
    telemetry_metrics_interval: Option<String>,
    seed: u64,
    repeat: u32,
}

#[derive(Serialize)]
struct ScoreKey<'a> {
    node: &'static str,
    run: &'a str,
    metric: String,
    /// `scoring-file.PATH`: content hash of each file the scorer reads (a scorer script).
    #[serde(flatten)]
    scoring_files: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct ReportKey {
    node: &'static str,
    format: &'static str,
    slo: String,
    cost: String,
    /// `coldstart LABEL` and `score LABEL` → key: everything the report reads.
    #[serde(flatten)]
    parts: BTreeMap<String, String>,
}

fn pull_node(engine: &Engine, facts: &Facts) -> Node {
    let (artifact, blocked_by) = match facts.artifacts.get(&engine.base.value) {
        Some(Ok(d)) => (d.clone(), None),
        Some(Err(e)) => ("unresolved".to_string(), Some(e.to_string())),
        None => (
            "unresolved".to_string(),
            Some("engine artifact was not examined".to_string()),
        ),
    };
    let inputs = inputs_of(&PullKey {
        node: "pull",
        kind: &engine.kind.value,
        launch: json(&engine.launch),
        artifact,
    });
    Node {
        kind: NodeKind::Pull,
        key: key_of(&inputs),
        label: format!("pull {}", engine.base.value),
        inputs,
        deployment: None,
        run: None,
        blocked_by,
    }
}

/// `engine.args.file.ARG` of the files an engine's arguments name (gathered with the facts);
/// a file that could not be read blocks the deployment, as unreadable weights do.
fn args_file_hashes(
    engine: &crate::spec::Engine,
    facts: &Facts,
    blocked_by: &mut Option<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (token, path) in facts
        .args_files
        .get(&engine.name.value)
        .into_iter()
        .flatten()
    {
        let h = facts.file(path).unwrap_or_else(|e| {
            blocked_by.get_or_insert_with(|| e.to_string());
            "unreadable".into()
        });
        out.insert(format!("engine.args.file.{token}"), h);
    }
    out
}

fn coldstart_node(
    sweep: &Sweep,
    facts: &Facts,
    at: DeploymentRef,
    pull_key: &str,
    (base, label): (&str, &str),
    deployment: usize,
) -> Node {
    let engine = &sweep.engines[at.engine];
    let model = &sweep.models[at.model];
    let variant = &model.variants[at.variant];
    let mut blocked_by = None;
    let (path, weights, id) = match weights_path(sweep, at) {
        Some(p) => {
            let weights = match facts.file(&p) {
                Ok(h) => h,
                Err(e) => {
                    blocked_by = Some(e.to_string());
                    "unreadable".into()
                }
            };
            // Absolute, so the key is the same from whichever folder bench360 runs (a
            // relative path is the sweep folder's as the working folder reaches it).
            let p = lexical_absolute(&p);
            (Some(p.display().to_string()), Some(weights), None)
        }
        None => match &model.source {
            ModelSource::Id(id) => (None, None, Some(id.as_str())),
            ModelSource::Path(_) => (None, None, None),
        },
    };
    let inputs = inputs_of(&ColdstartKey {
        node: "coldstart",
        pull: pull_key,
        quantization: &variant.quantization.value,
        path,
        weights,
        id,
        parallel: engine.parallel,
        gpu_memory: engine.gpu_memory.to_string(),
        dtype: json(&engine.dtype),
        gpus: engine.gpus.as_ref().map(json),
        cpus: engine.cpus.as_ref().map(json),
        ctx_size: engine.ctx_size,
        tensor_parallel: (engine.tensor_parallel > 1).then_some(engine.tensor_parallel),
        start: (at.start > 0).then_some(at.start),
        args: json(&engine.args),
        catalog_args: json(&Some(engine.catalog.process_args())),
        args_files: args_file_hashes(engine, facts, &mut blocked_by),
        env: engine
            .env
            .iter()
            .map(|(k, v)| {
                let h = blake3::keyed_hash(&facts.salt, v.as_bytes()).to_hex();
                (format!("engine.env.{k}"), format!("keyed:{}", &h[..32]))
            })
            .collect(),
        machine: facts
            .machines
            .get(base)
            .unwrap_or(&facts.machine)
            .iter()
            .map(|(k, v)| (format!("machine.{k}"), v.clone()))
            .collect(),
    });
    Node {
        kind: NodeKind::Coldstart,
        key: key_of(&inputs),
        label: format!("coldstart {label}"),
        inputs,
        deployment: Some(deployment),
        run: None,
        blocked_by,
    }
}

fn warmup_node(sweep: &Sweep, coldstart_key: &str, label: &str, deployment: usize) -> Node {
    let inputs = inputs_of(&WarmupKey {
        node: "warmup",
        deployment: coldstart_key,
        requests: sweep.defaults.warmup,
    });
    Node {
        kind: NodeKind::Warmup,
        key: key_of(&inputs),
        label: format!("warmup {label}"),
        inputs,
        deployment: Some(deployment),
        run: None,
        blocked_by: None,
    }
}

/// The run's label: deployment, task, scenario, the axis values that vary, the repeat.
fn run_label(sweep: &Sweep, cfg: &Config, deployment_label: &str) -> String {
    let task = &sweep.tasks[cfg.task];
    let scenario = &sweep.scenarios[cfg.scenario];
    let mut axis = cfg.instance.axis_params(&scenario.spec);
    let m = &sweep.matrix;
    if m.max_tokens.len() > 1 {
        axis.push(("max-tokens".into(), cfg.sampling.max_tokens.to_string()));
    }
    if m.temperature.len() > 1 {
        axis.push(("temperature".into(), cfg.sampling.temperature.to_string()));
    }
    if m.top_p.len() > 1 {
        axis.push(("top-p".into(), cfg.sampling.top_p.to_string()));
    }
    let axis_label = if axis.is_empty() {
        String::new()
    } else {
        format!(
            "[{}]",
            axis.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    // A scenario run once (its own `repeats 1`) keeps the label it had before repeats.
    let repeat = if scenario.repeats(sweep.repeats) > 1 {
        format!(" #{}", cfg.repeat + 1)
    } else {
        String::new()
    };
    format!(
        "{deployment_label} {} {}{axis_label}{repeat}",
        task.name.value, scenario.name.value
    )
}

/// Per task, computed once: its implementation, prompt files and scoring files.
struct TaskFacts {
    /// Hash of the prompt construction (`task.template`).
    template: String,
    /// `task.dataset.FILE` → content hash, and the first file that could not be hashed.
    dataset: BTreeMap<String, String>,
    dataset_blocked: Option<String>,
    /// The metric's identity and `scoring-file.PATH` → content hash.
    metric: String,
    scoring_files: BTreeMap<String, String>,
}

impl TaskFacts {
    /// Everything a task contributes to run and score keys, computed once per task (a sweep
    /// of 50,000 runs of one task hashes its template and files once, not 50,000 times).
    fn of(sweep: &Sweep, facts: &Facts, t: usize) -> TaskFacts {
        let imp = task::of(sweep, t);
        let dir = sweep.resolve_path(&sweep.tasks[t].dataset.value);
        let mut dataset = BTreeMap::new();
        let mut dataset_blocked = None;
        for f in imp.files() {
            let name = f
                .strip_prefix(&dir)
                .unwrap_or(&f)
                .to_string_lossy()
                .into_owned();
            let name = if name.is_empty() {
                f.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            } else {
                name
            };
            let h = facts.file(&f).unwrap_or_else(|e| {
                dataset_blocked.get_or_insert(e.to_string());
                "unreadable".into()
            });
            dataset.insert(format!("task.dataset.{name}"), h);
        }
        let scoring_files = task::scoring_files(sweep, t)
            .iter()
            .map(|f| {
                let h = facts.file(f).unwrap_or_else(|e| format!("unreadable: {e}"));
                let name = f.strip_prefix(&sweep.base_dir).unwrap_or(f);
                (format!("scoring-file.{}", name.display()), h)
            })
            .collect();
        TaskFacts {
            template: hash_str(&imp.template()),
            dataset,
            dataset_blocked,
            metric: imp.metric(),
            scoring_files,
        }
    }
}

/// Where a run node sits: its deployment (key and index), its label and its run index.
struct RunPlace<'a> {
    deployment_key: &'a str,
    label: &'a str,
    deployment: usize,
    run_index: usize,
}

fn run_node(sweep: &Sweep, facts: &Facts, cfg: &Config, t: &TaskFacts, at: &RunPlace) -> Node {
    let RunPlace {
        deployment_key,
        label,
        deployment,
        run_index,
    } = *at;
    let task = &sweep.tasks[cfg.task];
    let engine = &sweep.engines[cfg.engine];
    let mut blocked_by = t.dataset_blocked.clone();
    let trace_content = match &cfg.instance {
        ScenarioInstance::Replay { trace, .. } => {
            Some(facts.file(&PathBuf::from(trace)).unwrap_or_else(|e| {
                blocked_by.get_or_insert(e.to_string());
                "unreadable".into()
            }))
        }
        _ => None,
    };
    let inputs = inputs_of(&RunKey {
        node: "run",
        deployment: deployment_key,
        api: json(&task.mode.unwrap_or(engine.api)),
        task_kind: json(&task.kind),
        samples: task.samples.map_or("all".into(), |s| s.to_string()),
        shots: task.shots,
        system: task.system.as_deref().unwrap_or_default(),
        template: t.template.clone(),
        dataset: t.dataset.clone(),
        scenario_kind: cfg.instance.kind(),
        trace_content,
        target_margin: sweep.scenarios[cfg.scenario].stop.as_ref().map(json),
        arrivals: matches!(
            cfg.instance,
            ScenarioInstance::Rate {
                ramp_from: Some(_),
                ..
            }
        )
        .then_some("time-rescaled"),
        scenario: cfg
            .instance
            .params()
            .into_iter()
            .map(|(k, v)| (format!("scenario.{k}"), v))
            .collect(),
        max_tokens: cfg.sampling.max_tokens,
        temperature: cfg.sampling.temperature.to_string(),
        top_p: cfg.sampling.top_p.to_string(),
        stop: json(&cfg.sampling.stop),
        ignore_eos: cfg.sampling.ignore_eos.then_some(true),
        min_tokens: cfg.sampling.min_tokens,
        extra_body: (!cfg.sampling.extra_body.is_empty()).then(|| json(&cfg.sampling.extra_body)),
        request_timeout: sweep.defaults.request_timeout_s.to_string(),
        connections: sweep.defaults.reuse_connections.then_some("reuse"),
        telemetry_interval: sweep.telemetry.interval.as_secs_f64().to_string(),
        telemetry_idle: sweep.telemetry.idle.as_secs_f64().to_string(),
        telemetry_metrics_interval: (sweep.telemetry.metrics_every() != sweep.telemetry.interval)
            .then(|| sweep.telemetry.metrics_every().as_secs_f64().to_string()),
        seed: sweep.seed,
        repeat: cfg.repeat,
    });
    Node {
        kind: NodeKind::Run,
        key: key_of(&inputs),
        label: format!("run {label}"),
        inputs,
        deployment: Some(deployment),
        run: Some(run_index),
        blocked_by,
    }
}

fn score_node(
    t: &TaskFacts,
    run_key: &str,
    label: &str,
    deployment: usize,
    run_index: usize,
) -> Node {
    let inputs = inputs_of(&ScoreKey {
        node: "score",
        run: run_key,
        metric: t.metric.clone(),
        scoring_files: t.scoring_files.clone(),
    });
    Node {
        kind: NodeKind::Score,
        key: key_of(&inputs),
        label: format!("score {label}"),
        inputs,
        deployment: Some(deployment),
        run: Some(run_index),
        blocked_by: None,
    }
}

fn columns(sweep: &Sweep, cfg: &Config) -> Columns {
    let model = &sweep.models[cfg.model];
    let engine = &sweep.engines[cfg.engine];
    Columns {
        sweep: sweep.name.clone(),
        model: model.name.value.clone(),
        quantization: model.variants[cfg.variant].quantization.value.clone(),
        engine: engine.name.value.clone(),
        engine_kind: engine.kind.value.clone(),
        engine_block: engine.base.value.clone(),
        engine_settings: engine.settings.clone(),
        task: sweep.tasks[cfg.task].name.value.clone(),
        scenario: sweep.scenarios[cfg.scenario].name.value.clone(),
        scenario_kind: cfg.instance.kind().into(),
        scenario_params: json(&cfg.instance.params()),
        max_tokens: cfg.sampling.max_tokens,
        temperature: cfg.sampling.temperature,
        top_p: cfg.sampling.top_p,
        seed: sweep.seed,
        repeat: cfg.repeat,
    }
}

/// Builds the sealed DAG with every node's key.
pub(crate) fn build(sweep: &Sweep, facts: &Facts) -> Result<Plan, PlanError> {
    let mut b = PlanBuilder {
        graph: DiGraph::new(),
    };
    let mut deployments: Vec<Deployment> = Vec::new();
    // One pull per engine block: its setting combinations share the artifact.
    let mut pulls: BTreeMap<&str, NodeIndex> = BTreeMap::new();
    let mut runs = Vec::new();
    let tasks: Vec<TaskFacts> = (0..sweep.tasks.len())
        .map(|t| TaskFacts::of(sweep, facts, t))
        .collect();

    for cfg in &expand::configs(sweep) {
        let at = cfg.deployment();
        let di = match deployments.iter().position(|d| d.at == at) {
            Some(i) => i,
            None => {
                let engine = &sweep.engines[at.engine];
                let pull = *pulls
                    .entry(engine.base.value.as_str())
                    .or_insert_with(|| b.add(pull_node(engine, facts), &[]));
                let model = &sweep.models[at.model];
                let base = format!(
                    "{}:{}@{}",
                    model.name.value,
                    model.variants[at.variant].quantization.value,
                    engine.name.value
                );
                // Each cold start of `cold-repeats` is its own deployment; its runs keep the
                // base label (and their ` #k`), so that repeats pool as before.
                let label = if sweep.cold_repeats && sweep.repeats > 1 {
                    format!("{base} (start {})", at.start + 1)
                } else {
                    base.clone()
                };
                let di = deployments.len();
                let pull_key = b.graph[pull].key.clone();
                let coldstart = b.add(
                    coldstart_node(sweep, facts, at, &pull_key, (&base, &label), di),
                    &[pull],
                );
                let cs_key = b.graph[coldstart].key.clone();
                let warmup = b.add(warmup_node(sweep, &cs_key, &label, di), &[coldstart]);
                deployments.push(Deployment {
                    at,
                    base,
                    label,
                    pull,
                    coldstart,
                    warmup,
                    runs: Vec::new(),
                });
                di
            }
        };
        let dep = &deployments[di];
        let deployment_key = b.graph[dep.coldstart].key.clone();
        let warmup = dep.warmup;
        let label = run_label(sweep, cfg, &dep.base);
        let run_index = runs.len();
        let t = &tasks[cfg.task];
        let run = b.add(
            run_node(
                sweep,
                facts,
                cfg,
                t,
                &RunPlace {
                    deployment_key: &deployment_key,
                    label: &label,
                    deployment: di,
                    run_index,
                },
            ),
            &[warmup],
        );
        let run_key = b.graph[run].key.clone();
        let score = b.add(score_node(t, &run_key, &label, di, run_index), &[run]);
        runs.push(RunSpec {
            config: cfg.clone(),
            columns: columns(sweep, cfg),
            deployment: di,
            node: run,
            score,
        });
        deployments[di].runs.push(run_index);
    }

    let mut parts = BTreeMap::new();
    for d in &deployments {
        parts.insert(
            format!("coldstart {}", d.label),
            b.graph[d.coldstart].key.clone(),
        );
    }
    for r in &runs {
        parts.insert(b.graph[r.score].label.clone(), b.graph[r.score].key.clone());
    }
    let inputs = inputs_of(&ReportKey {
        node: "report",
        format: crate::record::REPORT_FORMAT,
        slo: json(&sweep.slo),
        cost: json(&sweep.cost),
        parts,
    });
    let deps: Vec<NodeIndex> = deployments
        .iter()
        .map(|d| d.coldstart)
        .chain(runs.iter().map(|r| r.score))
        .collect();
    let report = b.add(
        Node {
            kind: NodeKind::Report,
            key: key_of(&inputs),
            label: format!("report {}", sweep.name),
            inputs,
            deployment: None,
            run: None,
            blocked_by: None,
        },
        &deps,
    );
    b.seal(sweep.name.clone(), deployments, runs, report)
}

/// `p` made absolute against the working folder, its `.` and `..` folded away by name (not
/// through the filesystem: a symlink stays as named), so that one file reached from two
/// working folders keys the same.
fn lexical_absolute(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_structs_flatten_to_the_strings_keys_have_always_hashed() {
        #[derive(Serialize)]
        struct K {
            a: u32,
            b: String,
            c: Option<String>,
            #[serde(flatten)]
            m: BTreeMap<String, String>,
        }
        let got = inputs_of(&K {
            a: 7,
            b: 0.5f64.to_string(),
            c: None,
            m: [("x.y".to_string(), "z".to_string())].into(),
        });
        let want: crate::store::keys::KeyInputs = [("a", "7"), ("b", "0.5"), ("x.y", "z")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn environment_values_enter_keys_only_as_hashes_keyed_by_the_cache_salt() {
        let text = r#"
sweep "t" { }
model "m" { path "/w/m.gguf"; quantization "q4_1"; }
engine "e" { kind "llama.cpp"; binary "/bin/llama-server"; env TOKEN="hunter2"; }
task "mmlu" { kind "mmlu"; dataset "/d/mmlu"; samples 2; }
scenario "one" { kind "single"; requests 1; }
"#;
        let sweep = crate::sweep::parse(
            "t.kdl",
            text,
            std::path::Path::new("/"),
            &|_| None,
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let key = |salt: [u8; 32]| {
            let facts = Facts {
                salt,
                ..Facts::default()
            };
            let plan = build(&sweep, &facts).unwrap();
            let cold = &plan.graph[plan.deployments[0].coldstart];
            (cold.key.clone(), cold.inputs["engine.env.TOKEN"].clone())
        };
        let (k1, v1) = key([1; 32]);
        let (k2, v2) = key([2; 32]);
        assert_ne!(k1, k2);
        assert_ne!(v1, v2);
        assert_eq!(key([1; 32]).0, k1);
        assert!(v1.starts_with("keyed:"), "{v1}");
        let bare = blake3::hash(b"hunter2").to_hex().to_string();
        assert!(!v1.contains(&bare[..16]) && !v1.contains("hunter2"), "{v1}");
    }
}
