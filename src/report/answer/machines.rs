//! Whether a task's configurations were measured on one machine. Repeats run across device
//! holds or days can land on another host (the seed study's LMDeploy: the same pack, GPU and
//! driver, another kernel build, its single-stream TPOT 1.5–1.7 × as long), and a difference
//! between two configurations measured on different machines holds the machines' difference
//! too. The answer keeps runs of two machines apart and says so, naming what differs and where
//! each configuration ran. Pure.

use super::*;
use crate::record::provenance::Provenance;

/// What tells machines apart, as run.json records them: (name, value) per field.
fn fields(p: &Provenance) -> [(&'static str, String); 6] {
    let h = &p.host;
    [
        ("host", h.hostname.clone()),
        ("CPU", h.cpu_model.clone()),
        ("cores", h.cores.to_string()),
        ("memory", format!("{} kB", h.memory_bytes / 1024)),
        ("kernel", h.kernel.clone()),
        ("GPUs", p.gpu_line()),
    ]
}

/// Each row's machine (an index into the machines met, in row order), for the finished rows
/// that recorded their provenance; and those machines.
pub(super) fn machine_ids(rows: &[Row]) -> (Vec<Option<usize>>, Vec<&Provenance>) {
    let mut ms: Vec<&Provenance> = Vec::new();
    let ids = rows
        .iter()
        .map(|r| {
            let p = r.data.provenance.as_ref().filter(|_| finished(r))?;
            Some(match ms.iter().position(|q| q.same_machine(p)) {
                Some(m) => m,
                None => {
                    ms.push(p);
                    ms.len() - 1
                }
            })
        })
        .collect();
    (ids, ms)
}

/// A task's configurations by the machine their finished runs recorded, when there are two
/// machines or more (else None): per machine, in machine order, its configurations and those
/// that finished nowhere (every run failed), which each machine's answer lists.
pub(super) fn per_machine<'g>(
    rows: &[Row],
    gs: &[&'g Group],
) -> Option<Vec<(usize, Vec<&'g Group>)>> {
    let (ids, _) = machine_ids(rows);
    let of = |g: &Group| g.rows.iter().find_map(|&i| ids[i]);
    let mut ms: Vec<usize> = gs.iter().filter_map(|g| of(g)).collect();
    ms.sort_unstable();
    ms.dedup();
    (ms.len() > 1).then(|| {
        ms.into_iter()
            .map(|m| {
                let here = gs
                    .iter()
                    .filter(|g| of(g).is_none_or(|x| x == m))
                    .copied()
                    .collect();
                (m, here)
            })
            .collect()
    })
}

/// None when the task's finished runs (those that recorded their provenance) ran on one
/// machine; else which machines, what differs between them, and where each configuration ran.
pub(super) fn machines(rows: &[Row], gs: &[&Group]) -> Option<String> {
    let (ids, all_ms) = machine_ids(rows);
    let mut on: Vec<(&str, Vec<usize>)> = Vec::new();
    let mut seen: Vec<usize> = Vec::new();
    for g in gs {
        let here: Vec<usize> = g.rows.iter().filter_map(|&i| ids[i]).collect();
        for &m in &here {
            if !seen.contains(&m) {
                seen.push(m);
            }
        }
        if !here.is_empty() {
            on.push((&g.label, here));
        }
    }
    if seen.len() < 2 {
        return None;
    }
    seen.sort_unstable();
    let all: Vec<(usize, [(&str, String); 6])> =
        seen.iter().map(|&m| (m, fields(all_ms[m]))).collect();
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
            if d.is_empty() {
                format!("M{}", k + 1)
            } else {
                format!("M{} ({})", k + 1, d.join(", "))
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
            .filter(|(_, m)| m.contains(&k))
            .map(|(l, _)| format!("`{l}`"))
            .collect();
        if !only.is_empty() {
            places.push(format!("on M{}: {}", k + 1, only.join(", ")));
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
