//! The planner: pure. Expands the matrix, builds the DAG (pull → coldstart → warmup → run →
//! score → report), seals it (acyclic), and computes node keys from the sweep and the facts
//! gathered at the edge (file content hashes, engine artifact digests, machine fingerprint).

pub(crate) mod facts;
pub(crate) mod render;

use std::collections::BTreeMap;
use std::path::PathBuf;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use serde::Serialize;

use crate::record::Columns;
use crate::spec::catalog;
use crate::spec::expand::{self, Config, DeploymentRef};
use crate::spec::{ModelSource, Sweep};
pub(crate) use crate::store::keys::{self, key_of, KeyInputs};
use crate::store::Store;
use crate::task;

/// Facts read at the edge (file hashes, engine artifacts, machine), handed to the planner.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    pub machine: BTreeMap<String, String>,
    /// Per deployment label: the machine it ran on elsewhere (a Slurm compute node), which
    /// keys it instead of `machine` (so a login node sees the cluster's results as cached).
    pub machines: BTreeMap<String, BTreeMap<String, String>>,
    /// Content hash of each file or directory the sweep reads, or why it could not be read.
    pub files: BTreeMap<PathBuf, Result<String, String>>,
    /// Per engine name: digest of what the `pull` node resolves (binary checksum, image
    /// digest, endpoint URL), or why it cannot be resolved.
    pub artifacts: BTreeMap<String, Result<String, String>>,
}

impl Facts {
    fn file(&self, p: &PathBuf) -> Result<String, String> {
        self.files
            .get(p)
            .cloned()
            .unwrap_or_else(|| Err(format!("{} was not examined", p.display())))
    }
}

/// Files whose content is part of some node key (model weights, dataset files).
pub(crate) fn required_files(sweep: &Sweep) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in expand::deployments(sweep) {
        if let Some(p) = weights_path(sweep, d) {
            out.push(p);
        }
    }
    for t in 0..sweep.tasks.len() {
        out.extend(task::of(sweep, t).files());
        out.extend(task::scoring_files(sweep, t));
    }
    for s in &sweep.scenarios {
        if let crate::spec::ScenarioSpec::Replay { trace, .. } = &s.spec {
            out.push(sweep.resolve_path(&trace.value));
        }
    }
    out.sort();
    out.dedup();
    out
}

pub(crate) fn weights_path(sweep: &Sweep, d: DeploymentRef) -> Option<PathBuf> {
    let model = &sweep.models[d.model];
    match (&model.variants[d.variant].path, &model.source) {
        (Some(p), _) => Some(sweep.resolve_path(p)),
        (None, ModelSource::Path(p)) => Some(sweep.resolve_path(p)),
        (None, ModelSource::Id(_)) => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NodeKind {
    Pull,
    Coldstart,
    Warmup,
    Run,
    Score,
    Report,
}

impl NodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Pull => "pull",
            NodeKind::Coldstart => "coldstart",
            NodeKind::Warmup => "warmup",
            NodeKind::Run => "run",
            NodeKind::Score => "score",
            NodeKind::Report => "report",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Node {
    pub kind: NodeKind,
    pub key: String,
    /// Stable name of the configuration this node belongs to (not of its parameter values),
    /// so the last recorded node of the same configuration can be found and compared.
    pub label: String,
    pub inputs: KeyInputs,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<usize>,
    /// A fact that makes this node impossible to run (missing binary, unreadable dataset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Deployment {
    pub at: DeploymentRef,
    pub label: String,
    pub pull: NodeIndex,
    pub coldstart: NodeIndex,
    pub warmup: NodeIndex,
    pub runs: Vec<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct RunSpec {
    pub config: Config,
    pub columns: Columns,
    pub deployment: usize,
    pub node: NodeIndex,
    pub score: NodeIndex,
}

/// A DAG under construction; only [`PlanBuilder::seal`] turns it into a [`Plan`].
struct PlanBuilder {
    graph: DiGraph<Node, ()>,
}

/// A sealed (checked acyclic) plan: the only thing the executor accepts.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub sweep: String,
    pub graph: DiGraph<Node, ()>,
    pub deployments: Vec<Deployment>,
    pub runs: Vec<RunSpec>,
    pub report: NodeIndex,
    /// Nodes in a topological order.
    pub order: Vec<NodeIndex>,
}

impl Plan {
    /// Every node of deployment `d`: its pull, cold start, warmup, runs and scores.
    pub fn deployment_nodes(&self, d: usize) -> Vec<NodeIndex> {
        let dep = &self.deployments[d];
        let mut v = vec![dep.pull, dep.coldstart, dep.warmup];
        for &r in &dep.runs {
            v.push(self.runs[r].node);
            v.push(self.runs[r].score);
        }
        v
    }

    /// The deployment named by `sel`: its label, or a prefix of its cold start key (at least
    /// 4 hex digits).
    pub fn find_deployment(&self, sel: &str) -> Result<usize, String> {
        if let Some(i) = self.deployments.iter().position(|d| d.label == sel) {
            return Ok(i);
        }
        let by_key: Vec<usize> = (0..self.deployments.len())
            .filter(|&i| {
                sel.len() >= 4
                    && self.graph[self.deployments[i].coldstart]
                        .key
                        .starts_with(sel)
            })
            .collect();
        match by_key.as_slice() {
            [i] => Ok(*i),
            [] => Err(format!(
                "sweep `{}` has no deployment labelled `{sel}` or with a key starting with it; its deployments: {}",
                self.sweep,
                self.deployments
                    .iter()
                    .map(|d| format!("{} ({})", d.label, &self.graph[d.coldstart].key[..12]))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            many => Err(format!(
                "`{sel}` matches {} deployments of sweep `{}`; give more of the key",
                many.len(),
                self.sweep
            )),
        }
    }
}

impl PlanBuilder {
    fn add(&mut self, node: Node, deps: &[NodeIndex]) -> NodeIndex {
        let i = self.graph.add_node(node);
        for d in deps {
            self.graph.add_edge(*d, i, ());
        }
        i
    }

    fn seal(
        self,
        sweep: String,
        deployments: Vec<Deployment>,
        runs: Vec<RunSpec>,
        report: NodeIndex,
    ) -> Result<Plan, String> {
        let order = petgraph::algo::toposort(&self.graph, None).map_err(|c| {
            format!(
                "the plan has a cycle through {}",
                self.graph[c.node_id()].label
            )
        })?;
        Ok(Plan {
            sweep,
            graph: self.graph,
            deployments,
            runs,
            report,
            order,
        })
    }
}

fn hash_str(s: &str) -> String {
    blake3::hash(s.as_bytes()).to_hex()[..32].to_string()
}

/// Builds the sealed DAG with every node's key.
pub(crate) fn build(sweep: &Sweep, facts: &Facts) -> Result<Plan, String> {
    let configs = expand::configs(sweep);
    let mut b = PlanBuilder {
        graph: DiGraph::new(),
    };
    let mut deployments: Vec<Deployment> = Vec::new();
    let mut pulls: BTreeMap<usize, NodeIndex> = BTreeMap::new();
    let mut runs = Vec::new();
    // Per task, once: its implementation, files and scoring files.
    let imps: Vec<Box<dyn task::Task>> =
        (0..sweep.tasks.len()).map(|t| task::of(sweep, t)).collect();
    let task_files: Vec<Vec<PathBuf>> = imps.iter().map(|i| i.files()).collect();
    let scoring_files: Vec<Vec<PathBuf>> = (0..sweep.tasks.len())
        .map(|t| task::scoring_files(sweep, t))
        .collect();

    for cfg in &configs {
        let at = cfg.deployment();
        let di = match deployments.iter().position(|d| d.at == at) {
            Some(i) => i,
            None => {
                let engine = &sweep.engines[at.engine];
                let pull = *pulls.entry(at.engine).or_insert_with(|| {
                    let mut inputs = KeyInputs::new();
                    inputs.insert("node".into(), "pull".into());
                    inputs.insert("engine.kind".into(), engine.kind.value.clone());
                    inputs.insert(
                        "engine.launch".into(),
                        serde_json::to_string(&engine.launch).expect("serializable"),
                    );
                    let (artifact, blocked_by) = match facts.artifacts.get(&engine.name.value) {
                        Some(Ok(d)) => (d.clone(), None),
                        Some(Err(e)) => ("unresolved".to_string(), Some(e.clone())),
                        None => (
                            "unresolved".to_string(),
                            Some("engine artifact was not examined".to_string()),
                        ),
                    };
                    inputs.insert("engine.artifact".into(), artifact);
                    b.add(
                        Node {
                            kind: NodeKind::Pull,
                            key: key_of(&inputs),
                            label: format!("pull {}", engine.name.value),
                            inputs,
                            deployment: None,
                            run: None,
                            blocked_by,
                        },
                        &[],
                    )
                });
                let model = &sweep.models[at.model];
                let variant = &model.variants[at.variant];
                let label = format!(
                    "{}:{}@{}",
                    model.name.value, variant.quantization.value, engine.name.value
                );
                let mut inputs = KeyInputs::new();
                inputs.insert("node".into(), "coldstart".into());
                inputs.insert("pull".into(), b.graph[pull].key.clone());
                inputs.insert(
                    "model.quantization".into(),
                    variant.quantization.value.clone(),
                );
                let mut blocked_by = None;
                match weights_path(sweep, at) {
                    Some(p) => {
                        inputs.insert("model.path".into(), p.display().to_string());
                        match facts.file(&p) {
                            Ok(h) => {
                                inputs.insert("model.weights".into(), h);
                            }
                            Err(e) => {
                                inputs.insert("model.weights".into(), "unreadable".into());
                                blocked_by = Some(e);
                            }
                        }
                    }
                    None => {
                        if let ModelSource::Id(id) = &model.source {
                            inputs.insert("model.id".into(), id.clone());
                        }
                    }
                }
                inputs.insert("engine.parallel".into(), engine.parallel.to_string());
                // Both change the launch command of engines that take them.
                inputs.insert("engine.gpu-memory".into(), engine.gpu_memory.to_string());
                inputs.insert(
                    "engine.dtype".into(),
                    serde_json::to_string(&engine.dtype).expect("string"),
                );
                if let Some(g) = &engine.gpus {
                    inputs.insert(
                        "engine.gpus".into(),
                        serde_json::to_string(g).expect("numbers"),
                    );
                }
                inputs.insert("engine.ctx-size".into(), engine.ctx_size.to_string());
                inputs.insert(
                    "engine.args".into(),
                    serde_json::to_string(&engine.args).expect("strings"),
                );
                inputs.insert(
                    "engine.catalog-args".into(),
                    serde_json::to_string(
                        &catalog::lookup(&engine.kind.value).map(|e| e.process_args),
                    )
                    .expect("strings"),
                );
                // Environment values may be secrets: only their hash enters the key.
                for (k, v) in &engine.env {
                    inputs.insert(format!("engine.env.{k}"), format!("blake3:{}", hash_str(v)));
                }
                for (k, v) in facts.machines.get(&label).unwrap_or(&facts.machine) {
                    inputs.insert(format!("machine.{k}"), v.clone());
                }
                let coldstart = b.add(
                    Node {
                        kind: NodeKind::Coldstart,
                        key: key_of(&inputs),
                        label: format!("coldstart {label}"),
                        inputs,
                        deployment: Some(deployments.len()),
                        run: None,
                        blocked_by,
                    },
                    &[pull],
                );
                let mut winputs = KeyInputs::new();
                winputs.insert("node".into(), "warmup".into());
                winputs.insert("deployment".into(), b.graph[coldstart].key.clone());
                winputs.insert("requests".into(), sweep.defaults.warmup.to_string());
                let warmup = b.add(
                    Node {
                        kind: NodeKind::Warmup,
                        key: key_of(&winputs),
                        label: format!("warmup {label}"),
                        inputs: winputs,
                        deployment: Some(deployments.len()),
                        run: None,
                        blocked_by: None,
                    },
                    &[coldstart],
                );
                deployments.push(Deployment {
                    at,
                    label,
                    pull,
                    coldstart,
                    warmup,
                    runs: Vec::new(),
                });
                deployments.len() - 1
            }
        };
        let dep = deployments[di].clone();
        let deployment_key = b.graph[dep.coldstart].key.clone();
        let task = &sweep.tasks[cfg.task];
        let scenario = &sweep.scenarios[cfg.scenario];
        let engine = &sweep.engines[cfg.engine];
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
        let run_label = format!(
            "{} {} {}{}{}",
            dep.label,
            task.name.value,
            scenario.name.value,
            axis_label,
            if sweep.repeats > 1 {
                format!(" #{}", cfg.repeat + 1)
            } else {
                String::new()
            }
        );
        let mut inputs = KeyInputs::new();
        inputs.insert("node".into(), "run".into());
        inputs.insert("deployment".into(), deployment_key);
        inputs.insert(
            "api".into(),
            serde_json::to_string(&task.mode.unwrap_or(engine.api)).expect("enum"),
        );
        inputs.insert(
            "task.kind".into(),
            serde_json::to_string(&task.kind).expect("enum"),
        );
        inputs.insert(
            "task.samples".into(),
            task.samples.map_or("all".into(), |s| s.to_string()),
        );
        inputs.insert("task.shots".into(), task.shots.to_string());
        inputs.insert(
            "task.system".into(),
            task.system.clone().unwrap_or_default(),
        );
        let imp = &imps[cfg.task];
        inputs.insert("task.template".into(), hash_str(&imp.template()));
        let mut blocked_by = None;
        let dir = sweep.resolve_path(&task.dataset.value);
        for f in &task_files[cfg.task] {
            let name = f
                .strip_prefix(&dir)
                .unwrap_or(f)
                .to_string_lossy()
                .into_owned();
            let name = if name.is_empty() {
                f.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            } else {
                name
            };
            match facts.file(f) {
                Ok(h) => {
                    inputs.insert(format!("task.dataset.{name}"), h);
                }
                Err(e) => {
                    inputs.insert(format!("task.dataset.{name}"), "unreadable".into());
                    blocked_by.get_or_insert(e);
                }
            }
        }
        inputs.insert("scenario.kind".into(), cfg.instance.kind().into());
        if let expand::ScenarioInstance::Replay { trace, .. } = &cfg.instance {
            match facts.file(&PathBuf::from(trace)) {
                Ok(h) => {
                    inputs.insert("scenario.trace-content".into(), h);
                }
                Err(e) => {
                    inputs.insert("scenario.trace-content".into(), "unreadable".into());
                    blocked_by.get_or_insert(e);
                }
            }
        }
        for (k, v) in cfg.instance.params() {
            inputs.insert(format!("scenario.{k}"), v);
        }
        inputs.insert(
            "sampling.max-tokens".into(),
            cfg.sampling.max_tokens.to_string(),
        );
        inputs.insert(
            "sampling.temperature".into(),
            cfg.sampling.temperature.to_string(),
        );
        inputs.insert("sampling.top-p".into(), cfg.sampling.top_p.to_string());
        inputs.insert(
            "sampling.stop".into(),
            serde_json::to_string(&cfg.sampling.stop).expect("strings"),
        );
        inputs.insert(
            "request-timeout".into(),
            sweep.defaults.request_timeout_s.to_string(),
        );
        inputs.insert(
            "telemetry.interval".into(),
            sweep.telemetry.interval.as_secs_f64().to_string(),
        );
        inputs.insert(
            "telemetry.idle".into(),
            sweep.telemetry.idle.as_secs_f64().to_string(),
        );
        inputs.insert("seed".into(), sweep.seed.to_string());
        inputs.insert("repeat".into(), cfg.repeat.to_string());
        let run_key = key_of(&inputs);
        let run_index = runs.len();
        let run = b.add(
            Node {
                kind: NodeKind::Run,
                key: run_key.clone(),
                label: format!("run {run_label}"),
                inputs,
                deployment: Some(di),
                run: Some(run_index),
                blocked_by,
            },
            &[dep.warmup],
        );
        let mut sinputs = KeyInputs::new();
        sinputs.insert("node".into(), "score".into());
        sinputs.insert("run".into(), run_key);
        sinputs.insert("metric".into(), imp.metric());
        for f in &scoring_files[cfg.task] {
            let h = facts.file(f).unwrap_or_else(|e| format!("unreadable: {e}"));
            let name = f.strip_prefix(&sweep.base_dir).unwrap_or(f);
            sinputs.insert(format!("scoring-file.{}", name.display()), h);
        }
        let score = b.add(
            Node {
                kind: NodeKind::Score,
                key: key_of(&sinputs),
                label: format!("score {run_label}"),
                inputs: sinputs,
                deployment: Some(di),
                run: Some(run_index),
                blocked_by: None,
            },
            &[run],
        );
        let model = &sweep.models[cfg.model];
        let params: BTreeMap<String, String> = cfg.instance.params();
        runs.push(RunSpec {
            config: cfg.clone(),
            columns: Columns {
                sweep: sweep.name.clone(),
                model: model.name.value.clone(),
                quantization: model.variants[cfg.variant].quantization.value.clone(),
                engine: engine.name.value.clone(),
                engine_kind: engine.kind.value.clone(),
                task: task.name.value.clone(),
                scenario: scenario.name.value.clone(),
                scenario_kind: cfg.instance.kind().into(),
                scenario_params: serde_json::to_string(&params).expect("strings"),
                max_tokens: cfg.sampling.max_tokens,
                temperature: cfg.sampling.temperature,
                top_p: cfg.sampling.top_p,
                seed: sweep.seed,
                repeat: cfg.repeat,
            },
            deployment: di,
            node: run,
            score,
        });
        deployments[di].runs.push(run_index);
    }

    let mut rinputs = KeyInputs::new();
    rinputs.insert("node".into(), "report".into());
    rinputs.insert("format".into(), crate::record::REPORT_FORMAT.into());
    rinputs.insert(
        "slo".into(),
        serde_json::to_string(&sweep.slo).expect("numbers"),
    );
    rinputs.insert(
        "cost".into(),
        serde_json::to_string(&sweep.cost).expect("numbers"),
    );
    for d in &deployments {
        rinputs.insert(
            format!("coldstart {}", d.label),
            b.graph[d.coldstart].key.clone(),
        );
    }
    for r in &runs {
        rinputs.insert(b.graph[r.score].label.clone(), b.graph[r.score].key.clone());
    }
    let deps: Vec<NodeIndex> = deployments
        .iter()
        .map(|d| d.coldstart)
        .chain(runs.iter().map(|r| r.score))
        .collect();
    let report = b.add(
        Node {
            kind: NodeKind::Report,
            key: key_of(&rinputs),
            label: format!("report {}", sweep.name),
            inputs: rinputs,
            deployment: None,
            run: None,
            blocked_by: None,
        },
        &deps,
    );
    b.seal(sweep.name.clone(), deployments, runs, report)
}

/// What the store remembers of a node, for status and "why".
#[derive(Debug, Clone)]
pub(crate) struct Past {
    pub finished: bool,
    pub failed_cause: Option<String>,
    pub inputs: KeyInputs,
}

pub(crate) trait History {
    fn past(&self, key: &str) -> Option<Past>;
    /// Key of the last recorded node with this label in this sweep.
    fn last_key(&self, sweep: &str, label: &str) -> Option<String>;
}

impl History for Store {
    fn past(&self, key: &str) -> Option<Past> {
        let r = self.record(key)?;
        Some(Past {
            finished: r.status == crate::store::RecordStatus::Finished,
            failed_cause: (r.status == crate::store::RecordStatus::Failed)
                .then(|| r.cause.unwrap_or_default()),
            inputs: r.inputs,
        })
    }

    fn last_key(&self, sweep: &str, label: &str) -> Option<String> {
        Store::last_key(self, sweep, label)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub(crate) enum Status {
    Cached,
    WillRun {
        why: String,
    },
    /// Not needed: nothing below it runs (warmup only).
    Skipped,
    Blocked {
        why: String,
    },
}

impl Status {
    pub fn will_run(&self) -> bool {
        matches!(self, Status::WillRun { .. })
    }
}

/// Status of every node, in plan order, with the reason for each that will run.
pub(crate) fn statuses(plan: &Plan, history: &dyn History) -> Vec<Status> {
    let g = &plan.graph;
    let mut st: Vec<Option<Status>> = vec![None; g.node_count()];
    // Warmups are decided after their runs; everything else in topological order.
    for &i in &plan.order {
        let node = &g[i];
        if node.kind == NodeKind::Warmup {
            continue;
        }
        let blocked_dep = g
            .neighbors_directed(i, Direction::Incoming)
            .flat_map(|d| {
                if g[d].kind == NodeKind::Warmup {
                    g.neighbors_directed(d, Direction::Incoming)
                        .collect::<Vec<_>>()
                } else {
                    vec![d]
                }
            })
            .find(|d| matches!(st[d.index()], Some(Status::Blocked { .. })));
        let s = if let Some(why) = &node.blocked_by {
            Status::Blocked { why: why.clone() }
        } else if let (Some(d), false) = (blocked_dep, node.kind == NodeKind::Report) {
            Status::Blocked {
                why: format!("needs `{}`, which is blocked", g[d].label),
            }
        } else {
            match history.past(&node.key) {
                Some(p) if p.finished => Status::Cached,
                Some(p) => Status::WillRun {
                    why: match p.failed_cause {
                        Some(c) => format!("failed last time: {c}"),
                        None => "interrupted last time".to_string(),
                    },
                },
                None => Status::WillRun {
                    why: why_new(plan, history, node),
                },
            }
        };
        st[i.index()] = Some(s);
    }
    for d in &plan.deployments {
        let any = d.runs.iter().any(|&r| {
            st[plan.runs[r].node.index()]
                .as_ref()
                .is_some_and(Status::will_run)
        });
        let cold_blocked = matches!(st[d.coldstart.index()], Some(Status::Blocked { .. }));
        st[d.warmup.index()] = Some(if cold_blocked {
            Status::Blocked {
                why: "its engine cannot start".into(),
            }
        } else if any {
            Status::WillRun {
                why: "ephemeral: precedes the runs of this engine lifetime".into(),
            }
        } else {
            Status::Skipped
        });
    }
    st.into_iter()
        .map(|s| s.expect("every node visited"))
        .collect()
}

fn why_new(plan: &Plan, history: &dyn History, node: &Node) -> String {
    let Some(prev) = history.last_key(&plan.sweep, &node.label) else {
        return "new".to_string();
    };
    let Some(past) = history.past(&prev) else {
        return "new".to_string();
    };
    let changes = keys::diff(&past.inputs, &node.inputs);
    if changes.is_empty() {
        return "new".to_string();
    }
    let shown: Vec<String> = changes.iter().take(3).map(|c| c.to_string()).collect();
    let more = if changes.len() > 3 {
        format!(" (+{} more)", changes.len() - 3)
    } else {
        String::new()
    };
    format!("changed: {}{more}", shown.join("; "))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const SWEEP: &str = r#"
sweep "t" { seed 7; }
defaults { max-tokens 8; }
model "m1" { path "/w/m1.gguf"; quantization "q4_1"; }
model "m2" {
    quantization "q4_0" path="/w/m2-q4_0.gguf"
    quantization "q8_0" path="/w/m2-q8_0.gguf"
}
engine "e" { kind "llama.cpp"; binary "/bin/llama-server"; args "--threads" "2"; }
task "mmlu" { kind "mmlu"; dataset "/d/mmlu"; samples 10; }
scenario "one" { kind "single"; requests 4; }
scenario "b" { kind "batch"; batch-size 2 4; batches 1; }
matrix {
    scenario "one" "b"
    max-tokens 8 16
    exclude model="m2" quantization="q8_0" scenario="b"
}
"#;

    fn sweep(text: &str) -> Sweep {
        crate::sweep::parse("t.kdl", text, Path::new("/"), &|_| None)
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn facts(sweep: &Sweep) -> Facts {
        let mut f = Facts::default();
        f.machine.insert("cpu".into(), "test-cpu".into());
        for p in required_files(sweep) {
            let h = blake3::hash(p.to_string_lossy().as_bytes())
                .to_hex()
                .to_string();
            f.files.insert(p, Ok(h));
        }
        f.artifacts.insert("e".into(), Ok("binary:abc".into()));
        f
    }

    fn keys(plan: &Plan) -> Vec<(String, String)> {
        plan.order
            .iter()
            .map(|&i| (plan.graph[i].label.clone(), plan.graph[i].key.clone()))
            .collect()
    }

    fn changed(a: &Plan, b: &Plan) -> Vec<String> {
        let ka = keys(a);
        let kb = keys(b);
        assert_eq!(ka.len(), kb.len());
        let mut out: Vec<String> = ka
            .iter()
            .filter(|(label, key)| kb.iter().find(|(l, _)| l == label).map(|(_, k)| k) != Some(key))
            .map(|(l, _)| l.clone())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn matrix_expands_in_the_documented_order() {
        let s = sweep(SWEEP);
        let plan = build(&s, &facts(&s)).unwrap();
        let labels: Vec<&str> = plan
            .runs
            .iter()
            .map(|r| plan.graph[r.node].label.as_str())
            .collect();
        assert_eq!(
            labels,
            [
                "run m1:q4_1@e mmlu one[max-tokens=8]",
                "run m1:q4_1@e mmlu one[max-tokens=16]",
                "run m1:q4_1@e mmlu b[batch-size=2,max-tokens=8]",
                "run m1:q4_1@e mmlu b[batch-size=2,max-tokens=16]",
                "run m1:q4_1@e mmlu b[batch-size=4,max-tokens=8]",
                "run m1:q4_1@e mmlu b[batch-size=4,max-tokens=16]",
                "run m2:q4_0@e mmlu one[max-tokens=8]",
                "run m2:q4_0@e mmlu one[max-tokens=16]",
                "run m2:q4_0@e mmlu b[batch-size=2,max-tokens=8]",
                "run m2:q4_0@e mmlu b[batch-size=2,max-tokens=16]",
                "run m2:q4_0@e mmlu b[batch-size=4,max-tokens=8]",
                "run m2:q4_0@e mmlu b[batch-size=4,max-tokens=16]",
                "run m2:q8_0@e mmlu one[max-tokens=8]",
                "run m2:q8_0@e mmlu one[max-tokens=16]",
            ]
        );
        let deps: Vec<&str> = plan.deployments.iter().map(|d| d.label.as_str()).collect();
        assert_eq!(deps, ["m1:q4_1@e", "m2:q4_0@e", "m2:q8_0@e"]);
        // One pull per engine, shared by its deployments; 6 nodes per deployment chain head.
        let pulls = plan
            .graph
            .node_weights()
            .filter(|n| n.kind == NodeKind::Pull)
            .count();
        assert_eq!(pulls, 1);
        assert_eq!(plan.graph.node_count(), 1 + 3 * 2 + 14 * 2 + 1);
    }

    #[test]
    fn same_inputs_give_the_same_keys() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let b = build(&sweep(SWEEP), &facts(&s)).unwrap();
        assert_eq!(keys(&a), keys(&b));
        let all: std::collections::BTreeSet<_> = keys(&a).into_iter().map(|(_, k)| k).collect();
        assert_eq!(all.len(), a.graph.node_count(), "keys are unique");
    }

    #[test]
    fn a_scenario_parameter_changes_only_its_runs_scores_and_the_report() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let s2 = sweep(&SWEEP.replace("requests 4", "requests 5"));
        let b = build(&s2, &facts(&s2)).unwrap();
        assert_eq!(
            changed(&a, &b),
            [
                "report t",
                "run m1:q4_1@e mmlu one[max-tokens=16]",
                "run m1:q4_1@e mmlu one[max-tokens=8]",
                "run m2:q4_0@e mmlu one[max-tokens=16]",
                "run m2:q4_0@e mmlu one[max-tokens=8]",
                "run m2:q8_0@e mmlu one[max-tokens=16]",
                "run m2:q8_0@e mmlu one[max-tokens=8]",
                "score m1:q4_1@e mmlu one[max-tokens=16]",
                "score m1:q4_1@e mmlu one[max-tokens=8]",
                "score m2:q4_0@e mmlu one[max-tokens=16]",
                "score m2:q4_0@e mmlu one[max-tokens=8]",
                "score m2:q8_0@e mmlu one[max-tokens=16]",
                "score m2:q8_0@e mmlu one[max-tokens=8]",
            ]
        );
    }

    #[test]
    fn changed_weights_rerun_only_that_deployment() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let mut f = facts(&s);
        f.files
            .insert(PathBuf::from("/w/m2-q8_0.gguf"), Ok("new-weights".into()));
        let b = build(&s, &f).unwrap();
        let c = changed(&a, &b);
        assert!(
            c.iter().all(|l| l.contains("m2:q8_0") || l == "report t"),
            "{c:?}"
        );
        assert_eq!(c.len(), 1 + 1 + 2 + 2 + 1, "{c:?}"); // coldstart, warmup, 2 runs, 2 scores, report
    }

    #[test]
    fn a_new_engine_artifact_or_machine_changes_everything_below_it() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let mut f = facts(&s);
        f.artifacts.insert("e".into(), Ok("binary:def".into()));
        assert_eq!(
            changed(&a, &build(&s, &f).unwrap()).len(),
            a.graph.node_count()
        );
        let mut f = facts(&s);
        f.machine.insert("gpu".into(), "NVIDIA H200".into());
        // Everything but the pull (which does not depend on the machine).
        assert_eq!(
            changed(&a, &build(&s, &f).unwrap()).len(),
            a.graph.node_count() - 1
        );
    }

    #[test]
    fn a_changed_dataset_file_changes_runs_not_deployments() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let mut f = facts(&s);
        f.files
            .insert(PathBuf::from("/d/mmlu/test.jsonl"), Ok("edited".into()));
        let c = changed(&a, &build(&s, &f).unwrap());
        assert!(
            c.iter()
                .all(|l| l.starts_with("run ") || l.starts_with("score ") || l == "report t"),
            "{c:?}"
        );
        assert_eq!(c.len(), 14 * 2 + 1);
    }

    #[test]
    fn an_unreadable_input_blocks_exactly_its_dependents() {
        struct Nothing;
        impl History for Nothing {
            fn past(&self, _: &str) -> Option<Past> {
                None
            }
            fn last_key(&self, _: &str, _: &str) -> Option<String> {
                None
            }
        }
        let s = sweep(SWEEP);
        let mut f = facts(&s);
        f.files.insert(
            PathBuf::from("/w/m1.gguf"),
            Err("cannot read /w/m1.gguf: missing".into()),
        );
        let plan = build(&s, &f).unwrap();
        let st = statuses(&plan, &Nothing);
        for &i in &plan.order {
            let n = &plan.graph[i];
            let blocked = matches!(st[i.index()], Status::Blocked { .. });
            let expect = n.label.contains("m1:q4_1") && n.kind != NodeKind::Pull;
            assert_eq!(blocked, expect, "{} {:?}", n.label, st[i.index()]);
        }
    }

    #[test]
    fn secrets_in_engine_env_enter_keys_only_hashed() {
        let text = SWEEP.replace(
            "args \"--threads\" \"2\";",
            "args \"--threads\" \"2\"; env HF_TOKEN=\"hf_secret_value\";",
        );
        let s = sweep(&text);
        let plan = build(&s, &facts(&s)).unwrap();
        for n in plan.graph.node_weights() {
            for v in n.inputs.values() {
                assert!(!v.contains("hf_secret_value"), "{}: {v}", n.label);
            }
        }
        assert!(plan
            .graph
            .node_weights()
            .any(|n| n.inputs.contains_key("engine.env.HF_TOKEN")));
    }

    #[test]
    fn slurm_settings_enter_no_key() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let text = format!(
            "{SWEEP}slurm {{ partition \"gpu\"; time \"01:00:00\"; gres \"gpu:1\"; cpus 4; mem \"32G\"; sbatch-args \"--exclusive\"; }}\n"
        );
        let s2 = sweep(&text);
        assert_eq!(s2.slurm.partition.as_deref(), Some("gpu"));
        let b = build(&s2, &facts(&s2)).unwrap();
        assert_eq!(keys(&a), keys(&b));
    }

    #[test]
    fn a_deployment_is_found_by_label_or_key_prefix() {
        let s = sweep(SWEEP);
        let plan = build(&s, &facts(&s)).unwrap();
        assert_eq!(plan.find_deployment("m2:q4_0@e"), Ok(1));
        let key = plan.graph[plan.deployments[2].coldstart].key.clone();
        assert_eq!(plan.find_deployment(&key[..10]), Ok(2));
        assert_eq!(plan.find_deployment(&key), Ok(2));
        let err = plan.find_deployment("nope").unwrap_err();
        assert!(err.contains("m1:q4_1@e ("), "{err}");
        // Too short a prefix names nothing.
        assert!(plan.find_deployment(&key[..2]).is_err());
        let nodes = plan.deployment_nodes(0);
        assert_eq!(nodes.len(), 3 + 6 * 2);
        assert!(nodes
            .iter()
            .all(|&i| plan.graph[i].deployment.is_none_or(|d| d == 0)));
    }

    #[test]
    fn a_deployment_can_be_keyed_by_the_machine_it_ran_on() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let mut f = facts(&s);
        let mut node = BTreeMap::new();
        node.insert("cpu".to_string(), "compute-node-cpu".to_string());
        f.machines.insert("m2:q4_0@e".into(), node);
        let c = changed(&a, &build(&s, &f).unwrap());
        assert!(
            c.iter().all(|l| l.contains("m2:q4_0@e") || l == "report t"),
            "{c:?}"
        );
        assert_eq!(c.len(), 1 + 1 + 6 * 2 + 1, "{c:?}");
    }
}

/// The node keys of the shipped sweeps, pinned: a change here invalidates users' caches, so it
/// must come with a deliberate `KEY_FORMAT` bump (see README, "Cache keys").
#[cfg(test)]
mod pinned_keys {
    use std::path::{Path, PathBuf};

    use super::*;

    fn keys_of(file: &str, text: &str) -> String {
        let vars = |v: &str| -> Option<String> {
            match v {
                "BENCH360_SMOLLM2_GGUF" => Some("/models/smollm2.gguf".into()),
                "BENCH360_LLAMA_SERVER" => Some("/engines/llama-server".into()),
                _ => Some(format!("/env/{v}")),
            }
        };
        let sweep = crate::sweep::parse(file, text, Path::new("/repo/sweeps"), &vars)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let mut facts = Facts::default();
        facts.machine.insert("cpu".into(), "pinned-cpu".into());
        for p in required_files(&sweep) {
            let h = blake3::hash(p.to_string_lossy().as_bytes())
                .to_hex()
                .to_string();
            facts.files.insert(p, Ok(h));
        }
        for e in &sweep.engines {
            facts
                .artifacts
                .insert(e.name.value.clone(), Ok(format!("pinned:{}", e.name.value)));
        }
        let plan = build(&sweep, &facts).unwrap_or_else(|e| panic!("{e}"));
        let mut out = String::new();
        for &i in &plan.order {
            let n = &plan.graph[i];
            out.push_str(&format!("{} {}\n", n.key, n.label));
        }
        out
    }

    fn check(name: &str) {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(root.join("sweeps").join(name)).unwrap();
        let got = keys_of(name, &text);
        let pinned = root
            .join("tests/fixtures/keys")
            .join(name.replace(".kdl", ".txt"));
        if std::env::var_os("BENCH360_PIN_KEYS").is_some() {
            std::fs::create_dir_all(pinned.parent().unwrap()).unwrap();
            std::fs::write(&pinned, &got).unwrap();
        }
        let want = std::fs::read_to_string(&pinned).unwrap_or_default();
        assert_eq!(
            got, want,
            "node keys of sweeps/{name} changed: users' caches would be invalidated; bump \
             KEY_FORMAT on purpose (and re-pin with BENCH360_PIN_KEYS=1) or restore the inputs"
        );
    }

    #[test]
    fn quickstart_keys_are_pinned() {
        check("quickstart.kdl");
    }

    #[test]
    fn gpu_engines_keys_are_pinned() {
        check("gpu-engines.kdl");
    }
}
