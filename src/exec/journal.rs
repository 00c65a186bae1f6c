//! Journaling a node and writing its object: `started` → `finished` (with its files' sizes and
//! hashes) or `failed` (with a clean cause, even on a full disk), the typed [`NodeError`], the
//! error budget of a run.

use std::path::Path;
use std::time::Instant;

use petgraph::graph::NodeIndex;

use crate::host::now_rfc3339;
use crate::plan::Plan;
use crate::record::stats;
use crate::store::{Record, RecordStatus, Store};
use crate::task;

pub(super) fn new_record(plan: &Plan, i: NodeIndex) -> Record {
    let n = &plan.graph[i];
    Record {
        format: crate::store::STORE_FORMAT,
        key: n.key.clone(),
        kind: n.kind.as_str().into(),
        label: n.label.clone(),
        sweep: plan.sweep.clone(),
        status: RecordStatus::Started,
        host: crate::host::hostname(),
        pid: std::process::id(),
        started_at: now_rfc3339(),
        finished_at: None,
        duration_s: None,
        cause: None,
        inputs: n.inputs.clone(),
        outputs: serde_json::Value::Null,
        objects: Default::default(),
    }
}

/// Why a node failed; recorded verbatim as its cause.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NodeError {
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    #[error(transparent)]
    Score(#[from] task::ScoreError),
    #[error(transparent)]
    Dataset(#[from] task::DatasetError),
    #[error(transparent)]
    Damaged(#[from] crate::store::DamagedObject),
    /// A filesystem failure (disk full, read-only, I/O error) while doing `what`.
    #[error("cannot {what}: {cause}")]
    Io { what: &'static str, cause: String },
    #[error("{0}")]
    Failed(String),
}

impl From<String> for NodeError {
    fn from(s: String) -> Self {
        NodeError::Failed(s)
    }
}

impl NodeError {
    /// An I/O failure, told by its root cause ("No space left on device (os error 28)"),
    /// without the wrappers of the libraries in between.
    pub(crate) fn io(what: &'static str, e: &(dyn std::error::Error + 'static)) -> NodeError {
        NodeError::Io {
            what,
            cause: root_cause(e),
        }
    }
}

/// The deepest `io::Error` in an error's chain, else its own text without a library's
/// "External: " prefix.
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut io = None;
    while let Some(x) = cur {
        if let Some(i) = x.downcast_ref::<std::io::Error>() {
            io = Some(i.to_string());
        }
        cur = x.source();
    }
    io.unwrap_or_else(|| {
        let t = e.to_string();
        t.strip_prefix("External: ")
            .map(str::to_string)
            .unwrap_or(t)
    })
}

pub(super) fn table_io(what: &'static str) -> impl Fn(crate::trace::TableError) -> NodeError {
    move |e| NodeError::io(what, &e)
}

pub(super) fn std_io(what: &'static str) -> impl Fn(std::io::Error) -> NodeError {
    move |e| NodeError::io(what, &e)
}

/// Journals a node: `started` now, then `finished` (after its object is in place) or `failed`.
pub(super) struct Journal<'s> {
    store: &'s Store,
    rec: Record,
    t0: Instant,
}

impl<'s> Journal<'s> {
    pub(super) fn start(store: &'s Store, plan: &Plan, i: NodeIndex) -> Self {
        let rec = new_record(plan, i);
        let _ = store.write_record(&rec);
        Journal {
            store,
            rec,
            t0: Instant::now(),
        }
    }

    fn close(
        &mut self,
        status: RecordStatus,
        cause: Option<String>,
        outputs: serde_json::Value,
    ) -> std::io::Result<()> {
        self.rec.status = status;
        self.rec.cause = cause;
        self.rec.outputs = outputs;
        self.rec.finished_at = Some(now_rfc3339());
        self.rec.duration_s = Some(self.t0.elapsed().as_secs_f64());
        self.store.write_record(&self.rec)?;
        self.store
            .set_label(&self.rec.sweep, &self.rec.label, &self.rec.key)
    }

    /// Finished, with its object's files listed (sizes and hashes) in the record.
    pub(super) fn finish(
        &mut self,
        outputs: serde_json::Value,
        objects: Objects,
    ) -> std::io::Result<()> {
        self.rec.objects = objects;
        self.close(RecordStatus::Finished, None, outputs)
    }

    /// Failed, its object kept as evidence (listed in the record, but not cached: the next
    /// apply runs the node again).
    /// When the disk is too full for a new record, the `started` record is overwritten in
    /// place (it needs no new space), so no record stays `started`.
    pub(super) fn failed_with_evidence(
        mut self,
        cause: &str,
        outputs: serde_json::Value,
        objects: Objects,
    ) {
        self.rec.objects = objects;
        if self
            .close(RecordStatus::Failed, Some(cause.to_string()), outputs)
            .is_err()
        {
            let _ = self.store.write_record_in_place(&self.rec);
        }
    }

    /// Failed, with its cause and no object (as [`Journal::failed_with_evidence`] without
    /// the evidence).
    pub(super) fn failed(self, cause: &str) {
        self.failed_with_evidence(cause, serde_json::Value::Null, Objects::new());
    }
}

pub(super) type Objects = std::collections::BTreeMap<String, crate::store::ObjectFile>;

/// Records a node as failed without having run it.
pub(super) fn record_failure(store: &Store, plan: &Plan, i: NodeIndex, cause: &str) {
    Journal::start(store, plan, i).failed(cause);
}

/// A run whose failed requests exceed its error budget is itself failed: the cause says how
/// many failed and their most frequent causes.
pub(crate) fn over_budget(stats: &stats::RunStats, budget: Option<f64>) -> Option<String> {
    let budget = budget?;
    if stats.requests == 0 {
        return None;
    }
    let rate = stats.failed as f64 / stats.requests as f64;
    if rate <= budget {
        return None;
    }
    Some(format!(
        "{} of {} requests failed ({:.1}%, over the {:.1}% error budget); top causes: {}",
        stats.failed,
        stats.requests,
        rate * 100.0,
        budget * 100.0,
        top_causes(stats.failures.iter().map(|(c, n)| (c.as_str(), *n)))
    ))
}

/// The three most frequent causes, as "n× cause; …" (most frequent first, ties by cause).
pub(crate) fn top_causes<'a>(counts: impl IntoIterator<Item = (&'a str, usize)>) -> String {
    let mut causes: Vec<(&str, usize)> = counts.into_iter().collect();
    causes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    causes
        .iter()
        .take(3)
        .map(|(c, n)| format!("{n}× {c}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// See [`Executor::write_object`].
pub(super) fn write_object(
    store: &Store,
    key: &str,
    fill: impl FnOnce(&Path) -> Result<(), NodeError>,
) -> Result<Objects, NodeError> {
    let tmp = store
        .begin_object(key)
        .map_err(std_io("create the node's temp folder"))?;
    let res = fill(&tmp)
        .and_then(|()| {
            store
                .seal_object(&tmp)
                .map_err(std_io("write the node's files"))
        })
        .and_then(|objects| {
            store
                .commit_object(&tmp, key)
                .map(|_| objects)
                .map_err(std_io("move the node's object into place"))
        });
    if res.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    res
}
