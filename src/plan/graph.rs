//! The plan's graph: node kinds, nodes, deployments and runs, and the sealed [`Plan`] (checked
//! acyclic, with a topological order) that the executor walks.

use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

use crate::record::Columns;
use crate::spec::expand::{Config, DeploymentRef};
use crate::store::keys::KeyInputs;

/// What can go wrong in planning.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub(crate) enum PlanError {
    #[error("the plan has a cycle through {label}")]
    Cycle { label: String },
    #[error("sweep `{sweep}` has no deployment labelled `{selector}` or with a key starting with it; its deployments: {known}")]
    NoDeployment {
        sweep: String,
        selector: String,
        known: String,
    },
    #[error("no node of this plan has a key starting with `{query}` or the label `{query}`")]
    NoNode { query: String },
    #[error("`{query}` matches {count} nodes; give more of the key: {keys}")]
    AmbiguousNode {
        query: String,
        count: usize,
        keys: String,
    },
    #[error("`{selector}` matches {count} deployments of sweep `{sweep}`; give more of the key")]
    AmbiguousDeployment {
        sweep: String,
        selector: String,
        count: usize,
    },
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
    /// `model:quantization@engine`, the runs' label prefix.
    pub base: String,
    /// The base, and with `cold-repeats` which cold start (`… (start 2)`).
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
pub(super) struct PlanBuilder {
    pub(super) graph: DiGraph<Node, ()>,
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
    pub fn find_deployment(&self, sel: &str) -> Result<usize, PlanError> {
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
            [] => Err(PlanError::NoDeployment {
                sweep: self.sweep.clone(),
                selector: sel.to_string(),
                known: self
                    .deployments
                    .iter()
                    .map(|d| format!("{} ({})", d.label, &self.graph[d.coldstart].key[..12]))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
            many => Err(PlanError::AmbiguousDeployment {
                sweep: self.sweep.clone(),
                selector: sel.to_string(),
                count: many.len(),
            }),
        }
    }
}

impl PlanBuilder {
    pub(super) fn add(&mut self, node: Node, deps: &[NodeIndex]) -> NodeIndex {
        let i = self.graph.add_node(node);
        for d in deps {
            self.graph.add_edge(*d, i, ());
        }
        i
    }

    pub(super) fn seal(
        self,
        sweep: String,
        deployments: Vec<Deployment>,
        runs: Vec<RunSpec>,
        report: NodeIndex,
    ) -> Result<Plan, PlanError> {
        let order = petgraph::algo::toposort(&self.graph, None).map_err(|c| PlanError::Cycle {
            label: self.graph[c.node_id()].label.clone(),
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
