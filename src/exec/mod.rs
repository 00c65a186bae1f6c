//! The executor: walks a sealed plan and runs only what is not cached. One engine at a
//! time in one process (deployments on disjoint devices run at once as one process each:
//! `parallel`); a deployment's engine is started only when some node below it must
//! run, and all of them run in that one engine lifetime. A failed node blocks only its
//! dependents. It alone writes run state (records, objects); progress is reported as lines
//! and bars.

mod devices;
mod journal;
mod node;
pub(crate) mod parallel;
pub(crate) mod preflight;
pub(crate) mod progress;
mod run;
mod start;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::plan::{self, NodeKind, Plan, Status};
use crate::record::Sample;
pub(crate) use crate::report::build_report;
use crate::spec::{Launch, Sweep};
use crate::store::Store;
use crate::workload::Cancel;
pub(crate) use node::write_report;
use progress::Progress;

#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// Reuse HTTP connections between requests (off: one connection per request).
    pub reuse_connections: bool,
    /// Image pulls done before planning (by image reference): seconds taken, or the cause.
    pub pulls: BTreeMap<String, Result<f64, crate::engine::EngineError>>,
    /// Run only this deployment (its pull, cold start, runs and scores) and not the report:
    /// what one Slurm job of a sweep does (`apply --deployment`).
    pub only: Option<usize>,
    /// Samples of the tasks, already loaded and checked before the apply (by task index).
    pub samples: BTreeMap<usize, Arc<Vec<Sample>>>,
}

/// What an apply did, by node label.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub ran: Vec<String>,
    pub cached: usize,
    /// (label, cause)
    pub failed: Vec<(String, String)>,
    /// (label, why it could not run)
    pub blocked: Vec<(String, String)>,
    pub interrupted: bool,
    pub report: Option<PathBuf>,
    pub report_table: Option<String>,
    pub elapsed_s: f64,
}

/// Ctrl-C and SIGTERM for the apply the executor owns: the first stops it gracefully (the
/// returned [`Cancel`] is what [`Executor::apply`] watches: the run in progress is abandoned
/// unrecorded, its engine stopped), a second exits at once with 130 — engines die with this
/// process (`PR_SET_PDEATHSIG`) and every record written so far is whole. Must be called
/// inside the runtime that runs the apply.
pub(crate) fn interrupts() -> Cancel {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, cancel) = Cancel::new();
    tokio::spawn(async move {
        let mut term = signal(SignalKind::terminate()).ok();
        if term.is_none() {
            eprintln!("warning: cannot watch SIGTERM: only Ctrl-C stops this apply gracefully");
        }
        let mut n = 0;
        loop {
            match term.as_mut() {
                Some(term) => tokio::select! {
                    _ = tokio::signal::ctrl_c() => {},
                    _ = term.recv() => {},
                },
                None => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            n += 1;
            if n == 1 {
                eprintln!("\ninterrupt: stopping gracefully (engines stopped, nothing half-recorded); press Ctrl-C again to force");
                let _ = tx.send(true);
            } else {
                eprintln!("\ninterrupt: forced stop");
                std::process::exit(130);
            }
        }
    });
    cancel
}

impl Summary {
    /// Counts the nodes in `scope` that are cached and lists those blocked (warmups aside),
    /// as the plan's statuses say before anything runs.
    fn tally(&mut self, plan: &Plan, status: &[Status], scope: &[bool]) {
        for (i, s) in status.iter().enumerate() {
            if !scope[i] {
                continue;
            }
            let n = &plan.graph[petgraph::graph::NodeIndex::new(i)];
            match s {
                Status::Cached => self.cached += 1,
                Status::Blocked { why } if n.kind != NodeKind::Warmup => {
                    self.blocked.push((n.label.clone(), why.clone()))
                }
                _ => {}
            }
        }
    }

    pub fn exit_code(&self) -> i32 {
        if self.interrupted {
            130
        } else if !self.failed.is_empty() || !self.blocked.is_empty() {
            1
        } else {
            0
        }
    }
}

pub(crate) struct Executor<'a> {
    sweep: &'a Sweep,
    plan: &'a Plan,
    store: &'a Store,
    opts: Options,
    cancel: Cancel,
    status: Vec<Status>,
    /// Nodes done in this apply (ran and finished).
    done: BTreeSet<usize>,
    /// Nodes that failed in this apply, with their cause.
    fates: BTreeMap<usize, String>,
    samples: BTreeMap<usize, Arc<Vec<Sample>>>,
    /// Synthetic tasks' prompts, written with a deployment's tokenizer: (task, deployment).
    /// Synthetic prompts written per (task, deployment, the run's identity under
    /// `fresh-prompts`).
    materialized: BTreeMap<(usize, usize, Option<String>), Arc<Vec<Sample>>>,
    summary: Summary,
    progress: Progress,
}

impl<'a> Executor<'a> {
    pub fn new(
        sweep: &'a Sweep,
        plan: &'a Plan,
        store: &'a Store,
        mut opts: Options,
        cancel: Cancel,
    ) -> Self {
        let samples = std::mem::take(&mut opts.samples);
        let status = plan::statuses(plan, store);
        let scope = in_scope(plan, opts.only);
        let to_run = status
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                s.will_run()
                    && scope[*i]
                    && plan.graph[petgraph::graph::NodeIndex::new(*i)].kind != NodeKind::Warmup
            })
            .count();
        Executor {
            sweep,
            plan,
            store,
            opts,
            cancel,
            status,
            done: BTreeSet::new(),
            fates: BTreeMap::new(),
            samples,
            materialized: BTreeMap::new(),
            summary: Summary::default(),
            progress: Progress::new(to_run as u64),
        }
    }

    fn will_run(&self, i: petgraph::graph::NodeIndex) -> bool {
        self.status[i.index()].will_run()
    }

    fn fail(&mut self, i: petgraph::graph::NodeIndex, cause: String) {
        let label = self.plan.graph[i].label.clone();
        let mut lines = cause.lines();
        let mut text = format!("✗ {label}: {}", lines.next().unwrap_or(""));
        // The rest of the cause (an engine's last log lines), indented, never dropped.
        for l in lines {
            text.push_str("\n    │ ");
            text.push_str(l);
        }
        self.progress.say(&text);
        self.summary.failed.push((label, cause.clone()));
        self.fates.insert(i.index(), cause);
        self.progress.node_done();
    }

    /// Fails a node that did not get to start (its dependency failed, its engine is gone):
    /// the failure is recorded, with its cause, so the report shows it.
    fn fail_recorded(&mut self, i: petgraph::graph::NodeIndex, cause: String) {
        journal::record_failure(self.store, self.plan, i, &cause);
        self.fail(i, cause);
    }

    fn succeed(&mut self, i: petgraph::graph::NodeIndex, started: Instant) {
        let label = self.plan.graph[i].label.clone();
        self.progress.say(&format!(
            "✓ {label} ({:.1} s)",
            started.elapsed().as_secs_f64()
        ));
        self.summary.ran.push(label);
        self.done.insert(i.index());
        self.progress.node_done();
    }

    /// Pulls unless another bench360 does or did: engines with the same launch share one pull
    /// key, and the deployments using them may run at once (Slurm jobs on a shared cache).
    async fn pull_once(&mut self, i: petgraph::graph::NodeIndex) {
        let key = self.plan.graph[i].key.clone();
        let label = self.plan.graph[i].label.clone();
        let progress = &self.progress;
        let lock = self.store.lock_wait(&key, &mut |holder| {
            progress.say(&format!(
                "  waiting for another bench360 to finish `{label}` ({holder})"
            ))
        });
        let _lock = match lock {
            Ok(l) => l,
            Err(e) => {
                self.fail(i, e.to_string());
                return;
            }
        };
        if self.store.is_cached(&key) {
            self.progress
                .say(&format!("= {label} (done by another bench360 meanwhile)"));
            self.done.insert(i.index());
            self.progress.node_done();
            return;
        }
        self.pull(i).await;
    }

    fn is_ok(&self, i: petgraph::graph::NodeIndex) -> bool {
        !self.fates.contains_key(&i.index())
            && (self.done.contains(&i.index()) || self.status[i.index()] == Status::Cached)
    }

    pub async fn apply(mut self) -> Summary {
        let t0 = Instant::now();
        let scope = in_scope(self.plan, self.opts.only);
        self.summary.tally(self.plan, &self.status, &scope);
        for d in deployment_order(self.plan) {
            if self.cancel.is_cancelled() {
                break;
            }
            if self.opts.only.is_some_and(|o| o != d) {
                continue;
            }
            self.deployment(d).await;
        }
        if !self.cancel.is_cancelled() && self.opts.only.is_none() {
            self.report();
        }
        self.summary.interrupted = self.cancel.is_cancelled();
        self.summary.elapsed_s = t0.elapsed().as_secs_f64();
        self.progress.finish();
        self.summary
    }

    /// Whether every node `i` depends on (its predecessors in the sealed graph) is done or
    /// cached: what makes a node ready.
    fn ready(&self, i: petgraph::graph::NodeIndex) -> bool {
        self.plan
            .graph
            .neighbors_directed(i, petgraph::Direction::Incoming)
            .all(|p| self.is_ok(p) || self.plan.graph[p].kind == NodeKind::Warmup)
    }

    async fn deployment(&mut self, d: usize) {
        let dep = self.plan.deployments[d].clone();
        let pos = positions(self.plan);
        let mut runs: Vec<usize> = dep
            .runs
            .iter()
            .copied()
            .filter(|&r| self.will_run(self.plan.runs[r].node))
            .collect();
        runs.sort_by_key(|&r| pos[self.plan.runs[r].node.index()]);
        let mut scores: Vec<usize> = dep
            .runs
            .iter()
            .copied()
            .filter(|&r| self.will_run(self.plan.runs[r].score))
            .collect();
        scores.sort_by_key(|&r| pos[self.plan.runs[r].score.index()]);
        let need_pull = self.will_run(dep.pull)
            && !self.done.contains(&dep.pull.index())
            && !self.fates.contains_key(&dep.pull.index());
        let need_cold = self.will_run(dep.coldstart);
        if !need_pull && !need_cold && runs.is_empty() && scores.is_empty() {
            return;
        }
        let coldstart_key = self.plan.graph[dep.coldstart].key.clone();
        let _lock = match self
            .store
            .lock(&coldstart_key, &format!("deployment {}", dep.label))
        {
            Ok(l) => l,
            Err(e) => {
                for i in [dep.coldstart]
                    .into_iter()
                    .chain(runs.iter().map(|&r| self.plan.runs[r].node))
                    .chain(scores.iter().map(|&r| self.plan.runs[r].score))
                {
                    if self.will_run(i) {
                        self.fail(i, e.to_string());
                    }
                }
                return;
            }
        };
        self.progress.say(&format!("▶ deployment {}", dep.label));
        if need_pull {
            self.pull_once(dep.pull).await;
        }
        if !self.is_ok(dep.pull) {
            let cause = format!("needs `{}`, which failed", self.plan.graph[dep.pull].label);
            self.fail_engine_nodes(d, &runs, &cause);
        } else if need_cold || !runs.is_empty() {
            // Held until the engine has stopped; cancelled while waiting: nothing ran. Scoring
            // below needs no device.
            match self.claim_devices(d).await {
                devices::Claimed::Held(_devices) => self.run_engine(d, &runs).await,
                devices::Claimed::Cancelled => return,
                devices::Claimed::Failed(cause) => self.fail_engine_nodes(d, &runs, &cause),
            }
        }
        for r in scores {
            if self.cancel.is_cancelled() {
                return;
            }
            let spec = &self.plan.runs[r];
            if !self.ready(spec.score) {
                let cause = format!(
                    "needs `{}`, which did not finish",
                    self.plan.graph[spec.node].label
                );
                self.fail_recorded(spec.score, cause);
                continue;
            }
            self.score(r);
        }
    }

    /// Records the cold start and the runs of deployment `d` that were to run as failed, with
    /// `cause`: its engine could not be started (scores still run, or fail, below).
    fn fail_engine_nodes(&mut self, d: usize, runs: &[usize], cause: &str) {
        let dep = &self.plan.deployments[d];
        let nodes: Vec<_> = [dep.coldstart]
            .into_iter()
            .chain(runs.iter().map(|&r| self.plan.runs[r].node))
            .collect();
        for i in nodes {
            if self.will_run(i) {
                self.fail_recorded(i, cause.to_string());
            }
        }
    }

    /// Starts deployment `d`'s engine with its launcher, runs `runs` in that lifetime and
    /// stops it.
    async fn run_engine(&mut self, d: usize, runs: &[usize]) {
        let dep = &self.plan.deployments[d];
        match &self.sweep.engines[dep.at.engine].launch {
            Launch::Process { .. } => {
                self.engine_lifetime(d, runs, crate::engine::ProcessLauncher)
                    .await
            }
            Launch::Endpoint { .. } => {
                self.engine_lifetime(d, runs, crate::engine::EndpointLauncher)
                    .await
            }
            Launch::Docker { .. } => match crate::engine::docker::connect().await {
                Ok(docker) => {
                    let launcher = crate::engine::docker::DockerLauncher {
                        docker,
                        deployment_key: self.plan.graph[dep.coldstart].key.clone(),
                        sweep: self.plan.sweep.clone(),
                    };
                    self.engine_lifetime(d, runs, launcher).await
                }
                Err(cause) => self.fail_engine_nodes(d, runs, &cause.to_string()),
            },
        }
    }
}

/// Each node's position in the sealed plan's topological order (by node index).
fn positions(plan: &Plan) -> Vec<usize> {
    let mut pos = vec![usize::MAX; plan.graph.node_count()];
    for (k, i) in plan.order.iter().enumerate() {
        pos[i.index()] = k;
    }
    pos
}

/// Deployments in the order the sealed plan reaches their cold starts: the executor walks
/// the plan's topological order, one engine lifetime per deployment.
fn deployment_order(plan: &Plan) -> Vec<usize> {
    let pos = positions(plan);
    let mut ds: Vec<usize> = (0..plan.deployments.len()).collect();
    ds.sort_by_key(|&d| pos[plan.deployments[d].coldstart.index()]);
    ds
}

/// Per node (by index): whether it belongs to the apply's scope (everything, or one
/// deployment's pull, cold start, warmup, runs and scores).
fn in_scope(plan: &Plan, only: Option<usize>) -> Vec<bool> {
    let Some(d) = only else {
        return vec![true; plan.graph.node_count()];
    };
    let mut v = vec![false; plan.graph.node_count()];
    for i in plan.deployment_nodes(d) {
        v[i.index()] = true;
    }
    v
}
