//! `## Runs at the same time`: runs of different deployments whose nodes ran at once (an
//! apply with deployments in parallel), with how long they overlapped, and runs whose GPUs
//! served processes outside the sweep, with the host's CPU and memory during each: the
//! numbers of a run that shared the host or its devices rest on that.

use super::summary::Row;

/// Per run that overlapped another deployment's run: (row index, [(other row, seconds)]).
pub(crate) fn overlaps(rows: &[Row]) -> Vec<(usize, Vec<(usize, f64)>)> {
    let mut out = Vec::new();
    for (i, a) in rows.iter().enumerate() {
        let Some((a0, a1)) = a.data.ran else {
            continue;
        };
        let beside: Vec<(usize, f64)> = rows
            .iter()
            .enumerate()
            .filter(|(j, b)| *j != i && b.data.deployment != a.data.deployment)
            .filter_map(|(j, b)| {
                let (b0, b1) = b.data.ran?;
                let s = a1.min(b1) - a0.max(b0);
                (s > 0.0).then_some((j, s))
            })
            .collect();
        if !beside.is_empty() {
            out.push((i, beside));
        }
    }
    out
}

const HEADER: [&str; 6] = [
    "run",
    "beside (overlap s)",
    "other processes on its GPUs (MB)",
    "host CPU mean %",
    "host memory peak MB",
    "engine CPU mean %",
];

/// Other processes on a run's GPUs during its window: (how many at most, their GPU memory).
pub(crate) fn shared_gpus(r: &Row) -> Option<(f64, f64)> {
    let t = r.data.telemetry.as_ref()?;
    let n = t.gpu_other_procs_peak.filter(|&n| n > 0.0)?;
    Some((n, t.gpu_other_mem_peak_mb.unwrap_or(0.0)))
}

fn body(rows: &[Row]) -> Vec<Vec<String>> {
    let num = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.0}"));
    let mut beside: Vec<(usize, Vec<(usize, f64)>)> = overlaps(rows);
    for (i, r) in rows.iter().enumerate() {
        if shared_gpus(r).is_some() && !beside.iter().any(|(j, _)| *j == i) {
            beside.push((i, Vec::new()));
        }
    }
    beside.sort_by_key(|(i, _)| *i);
    beside
        .into_iter()
        .map(|(i, beside)| {
            let t = rows[i].data.telemetry.as_ref();
            vec![
                rows[i].data.label.clone(),
                if beside.is_empty() {
                    "–".into()
                } else {
                    beside
                        .iter()
                        .map(|(j, s)| format!("{} ({s:.0})", rows[*j].data.label))
                        .collect::<Vec<_>>()
                        .join("; ")
                },
                shared_gpus(&rows[i]).map_or("–".into(), |(n, mb)| format!("{n:.0} ({mb:.0})")),
                num(t.and_then(|t| t.host_cpu_mean_pct)),
                num(t.and_then(|t| t.host_mem_peak_mb)),
                num(t.and_then(|t| t.engine_cpu_mean_pct)),
            ]
        })
        .collect()
}

/// The note of a run whose GPUs served other processes during its window, said beside its
/// figures and the answer.
pub(crate) fn shared_gpu_note(r: &Row) -> Option<String> {
    let (n, mb) = shared_gpus(r)?;
    Some(format!(
        "{}: {n:.0} other process{} used its GPUs during the run ({mb:.0} MB of GPU memory at most; pids and names in its telemetry notes) — its latency, throughput and GPU energy (NVML counts the whole device) were measured on a shared device: run it again with the device to itself.",
        r.data.label,
        if n == 1.0 { "" } else { "es" }
    ))
}

const INTRO: &str = "These runs did not have their devices to themselves: runs of another deployment ran at the same time (deployments applied in parallel on disjoint `gpus`/`cpus`: they shared the host's memory bandwidth, caches and the load generator), or processes outside the sweep used their GPUs (NVML's list of compute processes: how many at most at once, with their GPU memory). The host's CPU and memory are over each run's window.";

pub(crate) fn markdown(rows: &[Row]) -> String {
    super::table_section("Runs at the same time", INTRO, &HEADER, body(rows))
}

/// The same table for report.html (escaped); None when no runs overlapped.
pub(crate) fn html(rows: &[Row]) -> Option<String> {
    super::table_section_html(INTRO, &HEADER, body(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::RunData;

    fn row(label: &str, deployment: &str, ran: (f64, f64)) -> Row {
        Row {
            data: RunData {
                label: label.into(),
                deployment: deployment.into(),
                ran: Some(ran),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn runs_of_other_deployments_that_ran_at_once_are_paired() {
        let rows = vec![
            row("a1", "a", (0.0, 10.0)),
            row("a2", "a", (10.0, 20.0)),
            row("b1", "b", (5.0, 12.0)),
            row("c1", "c", (30.0, 40.0)),
        ];
        let o = overlaps(&rows);
        // a1 and b1 for 5 s, a2 and b1 for 2 s; the runs of one deployment never pair, and
        // c1 ran alone.
        assert_eq!(
            o,
            vec![
                (0, vec![(2, 5.0)]),
                (1, vec![(2, 2.0)]),
                (2, vec![(0, 5.0), (1, 2.0)])
            ]
        );
        let md = markdown(&rows);
        assert!(md.contains("| b1 | a1 (5); a2 (2) |"), "{md}");
        assert!(!md.contains("c1"), "{md}");
        assert_eq!(markdown(&rows[3..]), "");
    }

    #[test]
    fn a_run_whose_gpus_served_other_processes_is_listed_and_said() {
        let mut shared = row("c1", "c", (30.0, 40.0));
        shared.data.telemetry = Some(crate::telemetry::Summary {
            gpu_other_procs_peak: Some(2.0),
            gpu_other_mem_peak_mb: Some(3072.4),
            ..Default::default()
        });
        let mut alone = row("d1", "d", (50.0, 60.0));
        alone.data.telemetry = Some(crate::telemetry::Summary {
            gpu_other_procs_peak: Some(0.0),
            ..Default::default()
        });
        let rows = vec![row("a1", "a", (0.0, 10.0)), shared, alone];
        let md = markdown(&rows);
        assert!(md.contains("| c1 | – | 2 (3072) |"), "{md}");
        assert!(!md.contains("a1") && !md.contains("d1"), "{md}");
        let note = shared_gpu_note(&rows[1]).unwrap();
        assert!(
            note.starts_with("c1: 2 other processes used its GPUs during the run (3072 MB"),
            "{note}"
        );
        assert_eq!(shared_gpu_note(&rows[2]), None);
    }
}
