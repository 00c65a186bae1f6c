//! A report's configurations: its runs grouped by label without the repeat (and, when the
//! runs recorded more than one machine, by machine), with their pooled item scores. A
//! configuration with a record stands on the repeats that have one; its repeats with no record
//! yet (a partial sweep, or repeats run over several sessions) are counted beside it instead
//! of excluding it. A failed repeat belongs to its machine's configuration, or, when it
//! recorded no machine, to the configuration on every machine: one failed repeat excludes a
//! configuration wherever it may have run. Pure.

use std::collections::{BTreeMap, HashSet};

use super::super::build::no_record;
use super::super::summary::Row;
use super::machines;
use crate::record::paired;

/// The label of a configuration: a run label without its repeat.
pub(crate) fn base_label(label: &str) -> &str {
    label.rsplit_once(" #").map_or(label, |(b, _)| b)
}

/// One configuration of one task: its rows (repeats) and its pooled item scores.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// The configuration's label: its runs' without the repeat, and — when the sweep's runs
    /// recorded more than one machine — `… on M2`: runs of two machines are never pooled.
    pub label: String,
    /// The label without the machine.
    pub base: String,
    /// The machine its finished runs recorded (an index into `machines::machine_ids`'s
    /// machines; None when none finished or none recorded one).
    pub machine: Option<usize>,
    pub deployment: String,
    pub task: String,
    pub rows: Vec<usize>,
    /// Its repeats with no record yet (not run, or changed since they ran), when other runs
    /// of it have one (those stay out of `rows`: the configuration is judged on what ran). The
    /// count is the configuration's, whichever machine its repeats will run on.
    pub not_run: usize,
    pub items: Option<BTreeMap<String, f64>>,
    /// Per dataset item, the share of its requests answered correctly (as for J per correct
    /// answer: a pass, or a graded score ≥ `summary::CORRECT_AT`).
    pub hits: Option<BTreeMap<String, f64>>,
}

/// The configurations of the rows, in the rows' order.
pub(crate) fn groups(rows: &[Row]) -> Vec<Group> {
    let (machine, ms) = machines::machine_ids(rows);
    let task_of = |r: &Row| r.data.columns.as_ref().map(|c| c.task.clone());
    // Configurations (base label, task) with at least one run that has a record under its
    // planned key.
    let recorded: HashSet<(String, String)> = rows
        .iter()
        .filter(|r| !no_record(r))
        .filter_map(|r| Some((base_label(&r.data.label).to_string(), task_of(r)?)))
        .collect();
    // Configurations with a run that has a machine or finished: a failed repeat whose machine
    // is not known (it kept no trace) counts against the configuration on every machine.
    let placed: HashSet<(String, String)> = rows
        .iter()
        .zip(&machine)
        .filter(|(r, m)| m.is_some() || r.finished())
        .filter_map(|(r, _)| Some((base_label(&r.data.label).to_string(), task_of(r)?)))
        .collect();
    let mut later: Vec<(String, String)> = Vec::new();
    let mut unplaced: Vec<(usize, (String, String))> = Vec::new();
    let mut out: Vec<Group> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let Some(task) = task_of(r) else {
            continue;
        };
        let base = base_label(&r.data.label).to_string();
        let key = (base, task);
        if no_record(r) && recorded.contains(&key) {
            later.push(key);
            continue;
        }
        // (One that recorded a machine where nothing finished stays a configuration of its
        // own: its failure is that machine's, not the others'.)
        if !r.finished()
            && machine[i].is_none()
            && r.data.provenance.is_none()
            && placed.contains(&key)
        {
            unplaced.push((i, key));
            continue;
        }
        let (base, task) = key;
        let label = match machine[i] {
            Some(m) if ms.len() > 1 => format!("{base} on {}", machines::Place::On(m).name()),
            _ => base.clone(),
        };
        match out.iter_mut().find(|g| g.label == label && g.task == task) {
            Some(g) => {
                g.rows.push(i);
                g.machine = g.machine.or(machine[i]);
            }
            None => out.push(Group {
                label,
                base,
                machine: machine[i],
                deployment: r.data.deployment.clone(),
                task,
                rows: vec![i],
                not_run: 0,
                items: None,
                hits: None,
            }),
        }
    }
    for (i, (base, task)) in unplaced {
        for g in out.iter_mut().filter(|g| g.base == base && g.task == task) {
            g.rows.push(i);
            g.rows.sort_unstable();
        }
    }
    for g in &mut out {
        g.not_run = later
            .iter()
            .filter(|(b, t)| *b == g.base && *t == g.task)
            .count();
        g.items = pooled_items(rows, &g.rows, false);
        g.hits = pooled_items(rows, &g.rows, true);
    }
    out
}

/// Item means over the finished rows' scores — or, with `hits`, of their correct answers —
/// (None when any lacks its items).
pub(super) fn pooled_items(
    rows: &[Row],
    idx: &[usize],
    hits: bool,
) -> Option<BTreeMap<String, f64>> {
    let (mut scores, mut items) = (Vec::new(), Vec::new());
    for &i in idx.iter().filter(|&&i| rows[i].finished()) {
        let d = &rows[i].data;
        if d.score_samples.len() != d.scores.len() {
            return None;
        }
        if hits {
            scores.extend(super::super::summary::hits_of(&d.scores));
        } else {
            scores.extend_from_slice(&d.scores);
        }
        items.extend(d.score_samples.iter().cloned());
    }
    paired::item_means(&scores, &items)
}
