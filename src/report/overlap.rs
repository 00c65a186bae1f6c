//! `## Runs at the same time`: runs of different deployments whose nodes ran at once (an
//! apply with deployments in parallel), with how long they overlapped and the host's CPU
//! and memory during each: the numbers of a run that shared the host rest on that.

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

const HEADER: [&str; 5] = [
    "run",
    "beside (overlap s)",
    "host CPU mean %",
    "host memory peak MB",
    "engine CPU mean %",
];

fn body(rows: &[Row]) -> Vec<Vec<String>> {
    let num = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.0}"));
    overlaps(rows)
        .into_iter()
        .map(|(i, beside)| {
            let t = rows[i].data.telemetry.as_ref();
            vec![
                rows[i].data.label.clone(),
                beside
                    .iter()
                    .map(|(j, s)| format!("{} ({s:.0})", rows[*j].data.label))
                    .collect::<Vec<_>>()
                    .join("; "),
                num(t.and_then(|t| t.host_cpu_mean_pct)),
                num(t.and_then(|t| t.host_mem_peak_mb)),
                num(t.and_then(|t| t.engine_cpu_mean_pct)),
            ]
        })
        .collect()
}

const INTRO: &str = "These runs ran while runs of another deployment did (deployments applied in parallel on disjoint `gpus`/`cpus`): they shared the host's memory bandwidth, caches and the load generator. The host's CPU and memory are over each run's window.";

/// `## Runs at the same time` of report.md; empty when no runs overlapped.
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
}
