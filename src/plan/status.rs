//! Node statuses against what the store remembers: cached, will run (and why), blocked.

use serde::Serialize;

use petgraph::Direction;

use super::graph::{Node, NodeKind, Plan};
use crate::store::keys::{self, KeyInputs};
use crate::store::Store;

/// What the store remembers of a node, for status and "why".
#[derive(Debug, Clone)]
pub(crate) struct Past {
    pub finished: bool,
    pub failed_cause: Option<String>,
    pub inputs: KeyInputs,
    /// The record or the object is not what was written (truncated, missing files).
    pub damaged: Option<String>,
}

pub(crate) trait History {
    fn past(&self, key: &str) -> Option<Past>;
    /// Key of the last recorded node with this label in this sweep.
    fn last_key(&self, sweep: &str, label: &str) -> Option<String>;
}

impl History for Store {
    fn past(&self, key: &str) -> Option<Past> {
        use crate::store::{RecordRead, RecordStatus};
        let r = match self.read_record(key) {
            RecordRead::Missing => return None,
            RecordRead::Damaged(why) => {
                return Some(Past {
                    finished: false,
                    failed_cause: None,
                    inputs: KeyInputs::new(),
                    damaged: Some(format!("damaged record: {why}")),
                })
            }
            RecordRead::Ok(r) => *r,
        };
        let finished = r.status == RecordStatus::Finished;
        let damaged = if finished {
            self.check_object(&r, false).err().map(|e| e.to_string())
        } else {
            None
        };
        Some(Past {
            finished,
            failed_cause: (r.status == RecordStatus::Failed).then(|| r.cause.unwrap_or_default()),
            inputs: r.inputs,
            damaged,
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
        why: Why,
    },
    /// Not needed: nothing below it runs (warmup only).
    Skipped,
    Blocked {
        why: String,
    },
}

/// Why a node will run. Rendered in one place (its `Display`, which is also how it is
/// serialized in `plan --json`), and matched on, never read back from its text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Why {
    /// No node with this label was recorded in this sweep.
    New,
    /// The last node recorded under this label had other key inputs (all of them here; three
    /// are shown).
    Changed(Vec<keys::Change>),
    /// Its last attempt failed, with this cause.
    FailedLastTime(String),
    /// Its last attempt started and never ended (killed, interrupted).
    Interrupted,
    /// Its record or object is not what was written.
    Damaged(String),
    /// It is cached, but a node it reads will run again (label of that node).
    Upstream(String),
    /// A warmup: never cached, it precedes the runs of its engine lifetime.
    Ephemeral,
}

impl Why {
    /// The node failed last time (as opposed to being new, changed or interrupted).
    pub fn is_failure(&self) -> bool {
        matches!(self, Why::FailedLastTime(_))
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::New => write!(f, "new"),
            Why::Changed(changes) => {
                let shown: Vec<String> = changes.iter().take(3).map(|c| c.to_string()).collect();
                write!(f, "changed: {}", shown.join("; "))?;
                if changes.len() > 3 {
                    write!(f, " (+{} more)", changes.len() - 3)?;
                }
                Ok(())
            }
            Why::FailedLastTime(cause) => write!(f, "failed last time: {cause}"),
            Why::Interrupted => write!(f, "interrupted last time"),
            Why::Damaged(why) => write!(f, "{why}"),
            Why::Upstream(label) => write!(f, "needs `{label}`, which will run again"),
            Why::Ephemeral => write!(f, "ephemeral: precedes the runs of this engine lifetime"),
        }
    }
}

impl Serialize for Why {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
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
            // A node whose input node will run again must run again too (its key is the same
            // when that input was damaged or failed, but what it read will change).
            let rerun_dep = g
                .neighbors_directed(i, Direction::Incoming)
                .filter(|d| g[*d].kind != NodeKind::Warmup)
                .find(|d| st[d.index()].as_ref().is_some_and(Status::will_run));
            match history.past(&node.key) {
                Some(Past {
                    damaged: Some(why), ..
                }) => Status::WillRun {
                    why: Why::Damaged(why),
                },
                Some(p) if p.finished => match rerun_dep {
                    Some(d) => Status::WillRun {
                        why: Why::Upstream(g[d].label.clone()),
                    },
                    None => Status::Cached,
                },
                Some(p) => Status::WillRun {
                    why: match p.failed_cause {
                        Some(c) => Why::FailedLastTime(c),
                        None => Why::Interrupted,
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
                why: Why::Ephemeral,
            }
        } else {
            Status::Skipped
        });
    }
    st.into_iter()
        .map(|s| s.expect("every node visited"))
        .collect()
}

fn why_new(plan: &Plan, history: &dyn History, node: &Node) -> Why {
    let Some(prev) = history.last_key(&plan.sweep, &node.label) else {
        return Why::New;
    };
    let Some(past) = history.past(&prev) else {
        return Why::New;
    };
    let changes = keys::diff(&past.inputs, &node.inputs);
    if changes.is_empty() {
        return Why::New;
    }
    Why::Changed(changes)
}
