//! `## Provenance`: per deployment, what its runs ran on — bench360's build, the engine's
//! version, the GPUs with driver, CUDA, power limit and clocks, the host, the weights — as
//! the runs recorded it (run.json). Where runs of one deployment recorded different
//! machines or builds (a driver updated between applies), each is listed.

use super::summary::Row;
use crate::record::provenance::Provenance;

/// (deployment, its runs' distinct provenances), in the rows' order; runs recorded before
/// provenance was kept count as "not recorded".
fn by_deployment(rows: &[Row]) -> Vec<(String, Vec<Option<&Provenance>>)> {
    let mut out: Vec<(String, Vec<Option<&Provenance>>)> = Vec::new();
    for r in rows {
        // A run that never ran records nothing: no row.
        if r.data.stats.is_none() && r.data.provenance.is_none() {
            continue;
        }
        let p = r.data.provenance.as_ref();
        match out.iter_mut().find(|(d, _)| *d == r.data.deployment) {
            Some((_, ps)) => {
                if !ps.iter().any(|q| same_machine(*q, p)) {
                    ps.push(p);
                }
            }
            None => out.push((r.data.deployment.clone(), vec![p])),
        }
    }
    out
}

/// Equal in everything but the per-run fields (datasets differ between tasks).
fn same_machine(a: Option<&Provenance>, b: Option<&Provenance>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            a.bench360_commit == b.bench360_commit
                && a.engine_version == b.engine_version
                && a.engine_artifact == b.engine_artifact
                && a.same_machine(b)
                && a.model_hash == b.model_hash
                && a.inherited_env == b.inherited_env
        }
        (None, None) => true,
        _ => false,
    }
}

/// A commit as `git log --oneline` shows it, keeping `+modified`.
fn short_commit(c: &str) -> String {
    match c.split_once('+') {
        Some((hash, rest)) => format!("{}+{rest}", &hash[..hash.len().min(12)]),
        None => c.chars().take(12).collect(),
    }
}

const HEADER: [&str; 7] = [
    "deployment",
    "bench360",
    "engine",
    "GPUs",
    "host",
    "weights",
    "inherited environment",
];

/// The inherited variables as `NAME=value` (a possible secret as `NAME=(set)`); "none set",
/// or "–" where nothing was recorded (a container, an endpoint, an older run).
pub(crate) fn env_line(p: &Provenance) -> String {
    match &p.inherited_env {
        None => "–".into(),
        Some(m) if m.is_empty() => "none set".into(),
        Some(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn cells(deployment: &str, p: Option<&Provenance>) -> Vec<String> {
    let Some(p) = p else {
        return vec![
            deployment.to_string(),
            "not recorded (a run from before provenance was kept)".into(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ];
    };
    let short = |h: &str| h.chars().take(12).collect::<String>();
    vec![
        deployment.to_string(),
        format!(
            "{} ({})",
            p.bench360_version,
            short_commit(&p.bench360_commit)
        ),
        match (&p.engine_version, &p.engine_artifact) {
            (Some(v), Some(a)) => format!("{v}; {}", a.chars().take(40).collect::<String>()),
            (Some(v), None) => v.clone(),
            (None, Some(a)) => a.chars().take(40).collect(),
            (None, None) => "–".into(),
        },
        p.gpu_line(),
        p.host_line(),
        match (&p.model_bytes, &p.model_hash) {
            (Some(b), Some(h)) => format!("{:.1} MB, blake3 {}", *b as f64 / 1e6, short(h)),
            (None, Some(h)) => format!("blake3 {}", short(h)),
            _ => "–".into(),
        },
        env_line(p),
    ]
}

fn body(rows: &[Row]) -> Vec<Vec<String>> {
    by_deployment(rows)
        .into_iter()
        .flat_map(|(d, ps)| {
            let many = ps.len() > 1;
            ps.into_iter()
                .enumerate()
                .map(|(i, p)| {
                    let label = if many {
                        format!("{d} (machine {})", i + 1)
                    } else {
                        d.clone()
                    };
                    cells(&label, p)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

const INTRO: &str = "What each deployment's runs ran on, as they recorded it. None of it is part of a key: a driver update does not rerun a cached run, and a deployment whose runs recorded different machines or builds is listed once for each.";

/// `## Provenance` of report.md; empty when no run ran.
pub(crate) fn markdown(rows: &[Row]) -> String {
    super::table_section("Provenance", INTRO, &HEADER, body(rows))
}

/// The same table for report.html (escaped); None when no run ran.
pub(crate) fn html(rows: &[Row]) -> Option<String> {
    super::table_section_html(INTRO, &HEADER, body(rows))
}

/// The key fields of a run's provenance (null for runs recorded before it was kept).
pub(crate) fn columns(
    p: Option<&crate::record::provenance::Provenance>,
) -> Vec<(&'static str, crate::trace::Cell)> {
    let s = |f: &dyn Fn(&crate::record::provenance::Provenance) -> Option<String>| {
        crate::trace::Cell::Str(p.and_then(f))
    };
    let first_gpu = |p: &crate::record::provenance::Provenance| p.gpus.devices.first().cloned();
    vec![
        ("bench360_version", s(&|p| Some(p.bench360_version.clone()))),
        ("bench360_commit", s(&|p| Some(p.bench360_commit.clone()))),
        ("engine_version", s(&|p| p.engine_version.clone())),
        ("engine_artifact", s(&|p| p.engine_artifact.clone())),
        ("gpu_name", s(&|p| first_gpu(p).map(|g| g.name))),
        (
            "gpu_count",
            crate::trace::Cell::I64(p.map(|p| p.gpus.devices.len() as i64)),
        ),
        ("gpu_driver", s(&|p| p.gpus.driver.clone())),
        ("cuda_version", s(&|p| p.gpus.cuda.clone())),
        (
            "gpu_power_limit_w",
            crate::trace::Cell::F64(p.and_then(|p| first_gpu(p)?.power_limit_w)),
        ),
        // Which boards: two lends of one kind of machine tell apart here, not in `machine`.
        (
            "gpu_uuids",
            s(&|p| Some(p.gpu_uuids().join(",")).filter(|u| !u.is_empty())),
        ),
        ("cpu_model", s(&|p| Some(p.host.cpu_model.clone()))),
        (
            "cpu_cores",
            crate::trace::Cell::I64(p.map(|p| p.host.cores as i64)),
        ),
        ("host", s(&|p| Some(p.host.hostname.clone()))),
        ("kernel", s(&|p| Some(p.host.kernel.clone()))),
        ("model_hash", s(&|p| p.model_hash.clone())),
        ("sweep_hash", s(&|p| Some(p.sweep_hash.clone()))),
        (
            "inherited_env",
            s(&|p| p.inherited_env.as_ref().map(|_| env_line(p))),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::stats::RunStats;
    use crate::report::summary::RunData;

    fn row(deployment: &str, driver: Option<&str>) -> Row {
        Row {
            data: RunData {
                deployment: deployment.into(),
                stats: Some(RunStats::default()),
                provenance: driver.map(|d| Provenance {
                    bench360_version: "0.1.0".into(),
                    bench360_commit: "abc".into(),
                    gpus: crate::record::provenance::GpuSet {
                        driver: Some(d.into()),
                        ..Default::default()
                    },
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_deployment_is_listed_once_per_machine_it_recorded() {
        let rows = vec![
            row("m@e", Some("580.1")),
            row("m@e", Some("580.1")),
            row("m@e", Some("590.2")),
            row("m@f", None),
        ];
        let md = markdown(&rows);
        assert!(md.contains("| m@e (machine 1) |"), "{md}");
        assert!(md.contains("| m@e (machine 2) |"), "{md}");
        assert!(!md.contains("machine 3"), "{md}");
        assert!(md.contains("| m@f | not recorded"), "{md}");
        assert!(html(&rows).unwrap().contains("<td>m@f</td>"));
    }
}
