//! Whether a task's configurations were measured on one machine. Repeats run across device
//! holds or days can land on another host (the seed study's LMDeploy: the same pack, GPU and
//! driver, another kernel build, its single-stream TPOT 1.5–1.7 × as long), and a difference
//! between two configurations measured on different machines holds the machines' difference
//! too. The answer keeps runs of two machines apart and says so, naming what differs and where
//! each configuration ran. Pure.

use super::*;
use crate::record::provenance::Provenance;

/// Each row's machine, for the rows that recorded their provenance, and the machines of the
/// finished ones — numbered in the order they were first used (by their runs' start times;
/// rows without one after, in row order), so that M1 is the earliest whatever order the plan
/// lists the runs in. A failed run (one that kept its trace) is placed on its machine when
/// finished runs were measured there; it makes no machine of its own.
pub(super) fn machine_ids(rows: &[Row]) -> (Vec<Option<usize>>, Vec<&Provenance>) {
    let mut ms: Vec<(&Provenance, f64)> = Vec::new();
    let mut met: Vec<Option<usize>> = rows
        .iter()
        .map(|r| {
            let p = r.data.provenance.as_ref().filter(|_| r.finished())?;
            let at = r.data.ran.map_or(f64::INFINITY, |(start, _)| start);
            Some(match ms.iter().position(|(q, _)| q.same_machine(p)) {
                Some(m) => {
                    ms[m].1 = ms[m].1.min(at);
                    m
                }
                None => {
                    ms.push((p, at));
                    ms.len() - 1
                }
            })
        })
        .collect();
    for (m, r) in met.iter_mut().zip(rows).filter(|(_, r)| !r.finished()) {
        *m = r
            .data
            .provenance
            .as_ref()
            .and_then(|p| ms.iter().position(|(q, _)| q.same_machine(p)));
    }
    let mut order: Vec<usize> = (0..ms.len()).collect();
    order.sort_by(|&a, &b| ms[a].1.total_cmp(&ms[b].1).then(a.cmp(&b)));
    let mut rank = vec![0; ms.len()];
    for (k, &m) in order.iter().enumerate() {
        rank[m] = k;
    }
    let ids = met.into_iter().map(|m| m.map(|m| rank[m])).collect();
    (ids, order.into_iter().map(|m| ms[m].0).collect())
}

/// Each row's machine as the answer names it (`M1`, `M2`…), when the runs recorded more than
/// one machine; else None throughout (and for the rows that recorded none).
pub(crate) fn machine_labels(rows: &[Row]) -> Vec<Option<String>> {
    let (ids, ms) = machine_ids(rows);
    ids.into_iter()
        .map(|m| m.filter(|_| ms.len() > 1).map(|m| Place::On(m).name()))
        .collect()
}

/// Where a task's configurations were measured, for the answers of a task split by machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Place {
    /// The machine of its finished runs (an index into the machines met).
    On(usize),
    /// Finished runs that recorded no machine (recorded before bench360 kept it).
    Unrecorded,
}

impl Place {
    /// As an answer's heading names it: `M2`, or `an unrecorded machine`.
    pub fn name(self) -> String {
        match self {
            Place::On(m) => format!("M{}", m + 1),
            Place::Unrecorded => "an unrecorded machine".into(),
        }
    }
}

/// A task's configurations by where their finished runs were measured, when that is more
/// than one place (else None): per place, in machine order (an unrecorded one last), its
/// configurations and those that finished nowhere (every run failed), which each place's
/// answer lists.
pub(super) fn per_machine<'g>(
    rows: &[Row],
    gs: &[&'g Group],
) -> Option<Vec<(Place, Vec<&'g Group>)>> {
    let place = |g: &Group| -> Option<Place> {
        if let Some(m) = g.machine {
            return Some(Place::On(m));
        }
        g.rows
            .iter()
            .any(|&i| rows[i].finished())
            .then_some(Place::Unrecorded)
    };
    let mut places: Vec<Place> = gs.iter().filter_map(|g| place(g)).collect();
    places.sort_unstable();
    places.dedup();
    if places.iter().filter(|p| matches!(p, Place::On(_))).count() < 2 {
        return None;
    }
    Some(
        places
            .into_iter()
            .map(|at| {
                let here = gs
                    .iter()
                    .filter(|g| place(g).is_none_or(|p| p == at))
                    .copied()
                    .collect();
                (at, here)
            })
            .collect(),
    )
}

/// None when the task's finished runs (those that recorded their provenance) ran on one
/// machine; else which machines, what differs between them, and where each configuration ran.
pub(super) fn machines(rows: &[Row], gs: &[&Group]) -> Option<String> {
    let on: Vec<(&str, usize)> = gs
        .iter()
        .filter_map(|g| Some((g.label.as_str(), g.machine?)))
        .collect();
    let mut seen: Vec<usize> = on.iter().map(|&(_, m)| m).collect();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() < 2 {
        return None;
    }
    let (_, all_ms) = machine_ids(rows);
    let all: Vec<(usize, [(&str, String); 6])> = seen
        .iter()
        .map(|&m| (m, all_ms[m].machine_fields()))
        .collect();
    let differ: Vec<usize> = (0..6)
        .filter(|&f| all.iter().any(|(_, m)| m[f].1 != all[0].1[f].1))
        .collect();
    let named: Vec<String> = all
        .iter()
        .map(|(k, m)| {
            let d: Vec<String> = differ
                .iter()
                .map(|&f| format!("{} {}", m[f].0, m[f].1))
                .collect();
            let name = Place::On(*k).name();
            if d.is_empty() {
                name
            } else {
                format!("{name} ({})", d.join(", "))
            }
        })
        .collect();
    let what = if differ.is_empty() {
        "details of run.json's provenance only".to_string()
    } else {
        differ
            .iter()
            .map(|&f| all[0].1[f].0)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut places: Vec<String> = Vec::new();
    for &k in &seen {
        let only: Vec<String> = on
            .iter()
            .filter(|&&(_, m)| m == k)
            .map(|(l, _)| format!("`{l}`"))
            .collect();
        if !only.is_empty() {
            places.push(format!("on {}: {}", Place::On(k).name(), only.join(", ")));
        }
    }
    Some(format!(
        "measured on {} machines, which differ in {}: {}. {}. Runs of two machines are never \
         pooled as repeats (a configuration is also its machine, `… on M2`), and the task is \
         answered once per machine, among the configurations measured on it: a difference \
         between configurations measured on different machines holds the machines' difference \
         too (repeat them on one machine to rank them together)",
        seen.len(),
        what,
        named.join("; "),
        capitalized(&places.join("; "))
    ))
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
}
