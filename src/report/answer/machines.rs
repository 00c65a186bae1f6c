//! Whether a task's configurations were measured on one machine. Repeats run across device
//! holds or days can land on another host (the seed study's LMDeploy: the same pack, GPU and
//! driver, another kernel build, 35–40 % slower single streams), and a difference between two
//! configurations measured on different machines holds the machines' difference too. The
//! answer says so, naming what differs and where each configuration ran. Pure.

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

fn same_machine(a: &Provenance, b: &Provenance) -> bool {
    a.host == b.host && a.gpus == b.gpus
}

/// "M1 ×1, M2 ×2" for the machines a configuration's runs recorded.
fn counts(on: &[usize]) -> String {
    let mut c: BTreeMap<usize, usize> = BTreeMap::new();
    for &m in on {
        *c.entry(m).or_default() += 1;
    }
    c.iter()
        .map(|(m, k)| format!("M{} ×{k}", m + 1))
        .collect::<Vec<_>>()
        .join(", ")
}

/// None when the task's finished runs (those that recorded their provenance) ran on one
/// machine; else which machines, what differs between them, and where each configuration ran.
pub(super) fn machines(rows: &[Row], gs: &[&Group]) -> Option<String> {
    let mut ms: Vec<&Provenance> = Vec::new();
    let mut on: Vec<(&str, Vec<usize>)> = Vec::new();
    for g in gs {
        let mut here = Vec::new();
        for &i in g.rows.iter().filter(|&&i| finished(&rows[i])) {
            let Some(p) = rows[i].data.provenance.as_ref() else {
                continue;
            };
            let m = match ms.iter().position(|q| same_machine(q, p)) {
                Some(m) => m,
                None => {
                    ms.push(p);
                    ms.len() - 1
                }
            };
            here.push(m);
        }
        if !here.is_empty() {
            on.push((&g.label, here));
        }
    }
    if ms.len() < 2 {
        return None;
    }
    let all: Vec<[(&str, String); 6]> = ms.iter().map(|p| fields(p)).collect();
    let differ: Vec<usize> = (0..6)
        .filter(|&f| all.iter().any(|m| m[f].1 != all[0][f].1))
        .collect();
    let named: Vec<String> = all
        .iter()
        .enumerate()
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
            .map(|&f| all[0][f].0)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut places: Vec<String> = Vec::new();
    for (k, _) in ms.iter().enumerate() {
        let only: Vec<String> = on
            .iter()
            .filter(|(_, m)| m.iter().all(|&x| x == k))
            .map(|(l, _)| format!("`{l}`"))
            .collect();
        if !only.is_empty() {
            let on_k = format!("on M{} only: {}", k + 1, only.join(", "));
            places.push(if places.is_empty() {
                format!("O{}", &on_k[1..])
            } else {
                on_k
            });
        }
    }
    let spread: Vec<String> = on
        .iter()
        .filter(|(_, m)| m.iter().any(|&x| x != m[0]))
        .map(|(l, m)| format!("`{l}` ({})", counts(m)))
        .collect();
    if !spread.is_empty() {
        let several = format!("on several: {}", spread.join(", "));
        places.push(if places.is_empty() {
            format!("O{}", &several[1..])
        } else {
            several
        });
    }
    Some(format!(
        "measured on {} machines, which differ in {}: {}. {}. A difference between configurations \
         measured on different machines holds the machines' difference too, and so does the spread \
         of repeats run on several: rank them on one machine (repeat them there) before trusting \
         the order",
        ms.len(),
        what,
        named.join("; "),
        places.join("; ")
    ))
}
