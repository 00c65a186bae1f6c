//! One engine setting's effect with the others fixed. For each engine block that lists
//! several values of a setting (`parallel 1 2 4`, `variant …`), the runs that differ in that
//! setting alone — same other settings, model, task, scenario, sampling and repeat — side by
//! side, each latency with its interval, and the change from the first value called inside
//! or beyond the noise. Pure: it reads the report's rows.

use super::summary::Row;
use super::{ms, pct};

/// The runs of one engine block that differ in one setting alone.
pub(crate) struct Comparison<'a> {
    pub block: String,
    pub axis: String,
    /// What is held fixed: the other settings, model:quantization, task, scenario (with its
    /// varying parameters), sampling axes and repeat.
    pub fixed: String,
    /// (this run's value of the setting, the run), in the sweep's order.
    pub runs: Vec<(String, &'a Row)>,
}

/// Every group of two or more runs that differ in one setting alone, in the rows' order.
pub(crate) fn comparisons(rows: &[Row]) -> Vec<Comparison<'_>> {
    let mut out: Vec<Comparison> = Vec::new();
    // A partial sweep's runs with no record yet have nothing to compare.
    for r in rows.iter().filter(|r| !super::text::not_run_yet(r)) {
        let Some(c) = &r.data.columns else {
            continue;
        };
        // The run's label after its deployment ("mmlu single[batch-size=4] #2").
        let prefix = format!("{}:{}@{} ", c.model, c.quantization, c.engine);
        let rest = r.data.label.strip_prefix(&prefix).unwrap_or(&r.data.label);
        for (axis, value) in &c.engine_settings {
            let others: Vec<String> = c
                .engine_settings
                .iter()
                .filter(|(k, _)| k != axis)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let mut fixed = Vec::new();
            if !others.is_empty() {
                fixed.push(others.join(","));
            }
            fixed.push(format!("{}:{}", c.model, c.quantization));
            fixed.push(rest.to_string());
            let fixed = fixed.join(" · ");
            match out
                .iter_mut()
                .find(|g| g.block == c.engine_block && &g.axis == axis && g.fixed == fixed)
            {
                Some(g) => g.runs.push((value.clone(), r)),
                None => out.push(Comparison {
                    block: c.engine_block.clone(),
                    axis: axis.clone(),
                    fixed,
                    runs: vec![(value.clone(), r)],
                }),
            }
        }
    }
    out.retain(|g| g.runs.len() > 1);
    out
}

/// A median with its interval: "12.3 [11.9, 12.8]".
fn with_ci(v: Option<f64>, ci: Option<(f64, f64)>) -> String {
    match (v, ci) {
        (Some(_), Some((lo, hi))) => format!("{} [{}, {}]", ms(v), ms(Some(lo)), ms(Some(hi))),
        _ => ms(v),
    }
}

/// The change of TPOT p50 from the first value's run, and whether it is beyond the noise:
/// the two 95 % intervals apart (a conservative test: overlapping intervals can still hide a
/// real difference, which `bench360 compare` tests directly). None against a failed first
/// value, nor for a coarse stream (its TPOT times the delivery); measured on two machines, the
/// change holds the machines' difference too, and says so.
fn versus(first: &Row, r: &Row) -> String {
    if first.data.failure.is_some() {
        return "– (the first value failed)".into();
    }
    if first.coarse_stream() || r.coarse_stream() {
        return "– (coarse stream: its TPOT times the delivery)".into();
    }
    let (Some(a), Some(b)) = (first.decode_tpot_p50(), r.decode_tpot_p50()) else {
        return "–".into();
    };
    let change = format!("{:+.1} %", 100.0 * (b - a) / a);
    let verdict = match (first.tpot_p50_ci, r.tpot_p50_ci) {
        (Some((alo, ahi)), Some((blo, bhi))) if bhi < alo || blo > ahi => {
            format!("{change}, beyond the noise")
        }
        (Some(_), Some(_)) => format!("{change}, inside the noise"),
        _ => format!("{change}, no interval"),
    };
    match (&first.data.provenance, &r.data.provenance) {
        (Some(p), Some(q)) if !p.same_machine(q) => {
            format!("{verdict}; on another machine, whose difference is in it too")
        }
        _ => verdict,
    }
}

const HEADER: [&str; 9] = [
    "fixed",
    "value",
    "out tok/s",
    "TTFT p50 ms [95 % CI]",
    "TPOT p50 ms [95 % CI]",
    "E2E p95 ms [95 % CI]",
    "quality",
    "J/token",
    "TPOT p50 vs first value",
];

/// One table per (block, setting): its header's title and its rows of cells.
fn tables(rows: &[Row]) -> Vec<(String, Vec<Vec<String>>)> {
    let mut out: Vec<(String, Vec<Vec<String>>)> = Vec::new();
    for g in comparisons(rows) {
        let title = format!("{}: {}", g.block, g.axis);
        let first = g.runs[0].1;
        let body: Vec<Vec<String>> = g
            .runs
            .iter()
            .enumerate()
            .map(|(i, (value, r))| {
                let s = r.data.stats.as_ref();
                let failed = r.data.failure.is_some();
                vec![
                    if i == 0 {
                        g.fixed.clone()
                    } else {
                        String::new()
                    },
                    format!("{}={value}", g.axis),
                    match s {
                        Some(s) if !failed => format!("{:.1}", s.output_tokens_per_s),
                        _ => "–".into(),
                    },
                    with_ci(s.and_then(|s| s.ttft_ms.p50), r.ttft_p50_ci),
                    with_ci(s.and_then(|s| s.tpot_ms.p50), r.tpot_p50_ci),
                    with_ci(s.and_then(|s| s.e2e_ms.p95), r.e2e_p95_ci),
                    pct(r.data.metrics.get("quality")),
                    r.data
                        .telemetry
                        .as_ref()
                        .and_then(|t| t.j_per_output_token)
                        .map_or("–".into(), |j| format!("{j:.3}")),
                    if failed {
                        super::text::no_figures(
                            r.data
                                .failure
                                .as_deref()
                                .unwrap_or("")
                                .lines()
                                .next()
                                .unwrap_or(""),
                        )
                    } else if i == 0 {
                        "(first)".into()
                    } else {
                        versus(first, r)
                    },
                ]
            })
            .collect();
        match out.iter_mut().find(|(t, _)| *t == title) {
            Some((_, rows)) => rows.extend(body),
            None => out.push((title, body)),
        }
    }
    out
}

const INTRO: &str = "Each table holds runs that differ in one engine setting alone: the other settings, the model, the task, the scenario and the sampling are those of the row's `fixed` cell. Latencies are medians (E2E the 95th percentile) with their 95 % intervals; a change from the first value is *beyond the noise* when the two intervals do not overlap, *inside the noise* when they do (within one run's request-to-request noise; repeats or `bench360 compare` test it more finely).";

/// `## Engine settings` of report.md; empty when no engine block has setting axes.
pub(crate) fn markdown(rows: &[Row]) -> String {
    let tables = tables(rows);
    if tables.is_empty() {
        return String::new();
    }
    let mut out = format!("\n## Engine settings\n\n{INTRO}\n");
    for (title, body) in tables {
        out.push_str(&format!("\n### {title}\n\n"));
        out.push_str(&super::text_table(&HEADER, body));
    }
    out
}

/// The same tables for report.html (escaped); None when no engine block has setting axes.
pub(crate) fn html(rows: &[Row]) -> Option<String> {
    let tables = tables(rows);
    if tables.is_empty() {
        return None;
    }
    let esc = super::svg::esc;
    let mut out = format!("<p>{}</p>", super::plain(INTRO));
    for (title, body) in tables {
        out.push_str(&format!("<h3>{}</h3>", esc(&title)));
        out.push_str(&super::html_table(&HEADER, body));
    }
    Some(out)
}

/// An engine's setting axes as a JSON object (`{"parallel":"4","variant":"eager"}`;
/// `{}` without axes).
pub(crate) fn json(settings: &[(String, String)]) -> String {
    serde_json::Value::Object(
        settings
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect(),
    )
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::stats::{Dist, RunStats};
    use crate::record::Columns;
    use crate::report::summary::RunData;

    fn row(engine: &str, settings: &[(&str, &str)], tpot: f64, ci: (f64, f64)) -> Row {
        let columns = Columns {
            model: "m".into(),
            quantization: "q".into(),
            engine: engine.into(),
            engine_block: "e".into(),
            engine_settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            task: "mmlu".into(),
            scenario: "single".into(),
            ..Default::default()
        };
        Row {
            data: RunData {
                label: format!("m:q@{engine} mmlu single"),
                columns: Some(columns),
                stats: Some(RunStats {
                    tpot_ms: Dist {
                        p50: Some(tpot),
                        ..Default::default()
                    },
                    ..Default::default()
                }),
                ..Default::default()
            },
            tpot_p50_ci: Some(ci),
            ..Default::default()
        }
    }

    #[test]
    fn runs_that_differ_in_one_setting_are_grouped_with_the_others_fixed() {
        let rows = vec![
            row(
                "e[parallel=1,variant=a]",
                &[("parallel", "1"), ("variant", "a")],
                10.0,
                (9.5, 10.5),
            ),
            row(
                "e[parallel=2,variant=a]",
                &[("parallel", "2"), ("variant", "a")],
                12.0,
                (11.5, 12.5),
            ),
            row(
                "e[parallel=1,variant=b]",
                &[("parallel", "1"), ("variant", "b")],
                10.2,
                (9.8, 10.6),
            ),
            row(
                "e[parallel=2,variant=b]",
                &[("parallel", "2"), ("variant", "b")],
                12.1,
                (11.0, 13.0),
            ),
        ];
        let c = comparisons(&rows);
        // parallel with variant a, parallel with variant b, variant at parallel 1, at 2.
        assert_eq!(c.len(), 4);
        assert_eq!(c[0].axis, "parallel");
        assert_eq!(c[0].fixed, "variant=a · m:q · mmlu single");
        assert_eq!(
            c[0].runs
                .iter()
                .map(|(v, _)| v.as_str())
                .collect::<Vec<_>>(),
            ["1", "2"]
        );
        assert_eq!(c[1].axis, "variant");
        assert_eq!(c[1].fixed, "parallel=1 · m:q · mmlu single");
        let md = markdown(&rows);
        assert!(md.contains("### e: parallel"), "{md}");
        assert!(md.contains("### e: variant"), "{md}");
        // 10 → 12 with intervals apart; 10 → 10.2 with intervals overlapping.
        assert!(md.contains("+20.0 %, beyond the noise"), "{md}");
        assert!(md.contains("+2.0 %, inside the noise"), "{md}");
        assert!(html(&rows).unwrap().contains("<h3>e: parallel</h3>"));
    }

    /// A partial sweep's run with no record yet is in no comparison; one whose configuration
    /// changed since it ran says so, not FAILED; a failed one keeps FAILED and its cause.
    #[test]
    fn runs_with_no_record_are_not_failures_in_the_settings_tables() {
        let no_figures = |mut r: Row, failure: &str| {
            r.data.stats = None;
            r.data.failure = Some(failure.into());
            r
        };
        let one = |p: &str| {
            row(
                &format!("e[parallel={p}]"),
                &[("parallel", p)],
                10.0,
                (9.0, 11.0),
            )
        };
        let rows = vec![
            one("1"),
            no_figures(one("2"), super::super::build::NOT_RUN_YET),
            no_figures(
                one("4"),
                "not run yet as the sweep now says; … (changed: seed: 1 → 2)",
            ),
            no_figures(one("8"), "engine exited during startup\nlast log line"),
        ];
        let c = comparisons(&rows);
        assert_eq!(c.len(), 1);
        let values: Vec<&str> = c[0].runs.iter().map(|(v, _)| v.as_str()).collect();
        assert_eq!(values, ["1", "4", "8"]);
        let md = markdown(&rows);
        assert!(
            md.contains("| not run yet as the sweep now says; … (changed: seed: 1 → 2) |")
                && md.contains("| FAILED: engine exited during startup |")
                && !md.contains("FAILED: not run yet"),
            "{md}"
        );
    }

    /// The change from the first value is claimed only where it means something: not
    /// against a failed first value, not for a coarse stream's TPOT, and said to hold the
    /// machines' difference when the two ran on different machines.
    #[test]
    fn the_change_from_the_first_value_says_what_it_rests_on() {
        let one = |p: &str, tpot: f64, ci: (f64, f64)| {
            row(&format!("e[parallel={p}]"), &[("parallel", p)], tpot, ci)
        };
        let (a, b) = (one("1", 10.0, (9.5, 10.5)), one("2", 12.0, (11.5, 12.5)));
        assert_eq!(versus(&a, &b), "+20.0 %, beyond the noise");
        let mut failed = a.clone();
        failed.data.failure = Some("3 of 10 requests failed".into());
        assert_eq!(versus(&failed, &b), "– (the first value failed)");
        let mut coarse = b.clone();
        coarse.data.stream = Some(crate::report::summary::StreamGrain {
            tokens_per_event_p50: 16.0,
            ..Default::default()
        });
        assert_eq!(
            versus(&a, &coarse),
            "– (coarse stream: its TPOT times the delivery)"
        );
        let on = |mut r: Row, kernel: &str| {
            let mut p = crate::record::provenance::Provenance::default();
            p.host.kernel = kernel.into();
            r.data.provenance = Some(p);
            r
        };
        assert_eq!(
            versus(&on(a.clone(), "v973"), &on(b.clone(), "v1147")),
            "+20.0 %, beyond the noise; on another machine, whose difference is in it too"
        );
        assert_eq!(
            versus(&on(a, "v973"), &on(b, "v973")),
            "+20.0 %, beyond the noise"
        );
    }

    #[test]
    fn engines_without_setting_axes_add_no_section() {
        let rows = vec![row("e", &[], 10.0, (9.0, 11.0))];
        assert!(comparisons(&rows).is_empty());
        assert_eq!(markdown(&rows), "");
        assert!(html(&rows).is_none());
    }
}
