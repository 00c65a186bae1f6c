//! `report.html`: one self-contained file (inline CSS and SVG, no script, no network) that
//! opens with the answer. Pure: returns the page.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::summary::{self, Row};
use super::svg::{esc, histogram_series, stacked_bars, Chart, Series};
use crate::spec::{Cost, Slo};

fn n(v: Option<f64>, d: usize) -> String {
    v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "–".into())
}

fn ci(v: Option<f64>, c: Option<(f64, f64)>, d: usize) -> String {
    match (v, c) {
        (Some(x), Some((lo, hi))) => format!("{x:.d$} <small>[{lo:.d$}, {hi:.d$}]</small>"),
        (Some(x), None) => format!("{x:.d$}"),
        _ => "–".into(),
    }
}

fn param(r: &Row, key: &str) -> Option<f64> {
    let c = r.data.columns.as_ref()?;
    let m: BTreeMap<String, String> = serde_json::from_str(&c.scenario_params).ok()?;
    m.get(key)?.parse().ok()
}

/// Runs grouped by everything but one scenario parameter: one series per group.
fn groups_by<'a>(rows: &'a [Row], kind: &str, axis: &str) -> BTreeMap<String, Vec<(f64, &'a Row)>> {
    let mut g: BTreeMap<String, Vec<(f64, &Row)>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.data.stats.is_some()) {
        let Some(c) = &r.data.columns else { continue };
        if c.scenario_kind != kind {
            continue;
        }
        if let Some(x) = param(r, axis) {
            let key = format!("{} {} {}", r.data.deployment, c.task, c.scenario);
            g.entry(key).or_default().push((x, r));
        }
    }
    for v in g.values_mut() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    g
}

/// A cost per query shown per 1,000 queries, with three significant digits ("0.0123", "4.56",
/// "1230").
fn per_thousand(per_query: f64) -> String {
    let v = per_query * 1000.0;
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

pub(crate) fn page(sweep: &str, rows: &[Row], slo: &Slo, cost: Option<&Cost>) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>bench360 report: {0}</title><style>
body{{font-family:system-ui,sans-serif;margin:24px;max-width:1400px;color:#222}} table{{border-collapse:collapse;margin:8px 0 20px;font-size:13px}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}} td:first-child,th:first-child{{text-align:left}} th{{background:#f3f3f3}}
.ok{{color:#2ca02c}} .bad{{color:#d62728}} .answer{{background:#f6fbff;border:1px solid #9cc3e6;padding:8px 16px;border-radius:6px}}
small{{color:#666}} .charts{{display:flex;flex-wrap:wrap;gap:12px}} h2{{margin-top:32px}}</style></head><body>
<h1>bench360 report: {0}</h1>"#,
        esc(sweep)
    );
    // The answer first.
    let slo_text: Vec<String> = [
        slo.ttft_p95.map(|x| format!("TTFT p95 ≤ {x} s")),
        slo.e2e_p95.map(|x| format!("E2E p95 ≤ {x} s")),
        slo.gpu_memory_gib.map(|x| format!("GPU memory ≤ {x} GiB")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let _ = write!(
        h,
        r#"<div class="answer" id="answer"><h2>The answer</h2><p>Constraints: {}.</p>"#,
        if slo_text.is_empty() {
            "none declared (add an <code>slo</code> block)".into()
        } else {
            esc(&slo_text.join(", "))
        }
    );
    for (task, picks) in summary::recommend(rows) {
        let _ = write!(h, "<h3>Task {}</h3><table><tr><th>objective</th><th>best configuration</th><th>value</th></tr>", esc(&task));
        for p in picks {
            let (who, val) = match p.row {
                Some(i) => (esc(&rows[i].data.label), n(p.value, 3)),
                None => (
                    "none meets the constraints or has this figure".into(),
                    "–".into(),
                ),
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{who}</td><td>{val}</td></tr>",
                p.objective
            );
        }
        h.push_str("</table>");
        let notes: Vec<String> = rows
            .iter()
            .filter(|r| r.data.columns.as_ref().is_some_and(|c| c.task == task))
            .filter_map(summary::format_note)
            .collect();
        if !notes.is_empty() {
            h.push_str(r#"<ul class="format-failures">"#);
            for n in notes {
                let _ = write!(h, r#"<li class="bad">{}</li>"#, esc(&n));
            }
            h.push_str("</ul>");
        }
    }
    h.push_str("</div>");

    // Every run.
    let currency = cost.map(|c| c.currency.clone()).unwrap_or_default();
    h.push_str(r#"<h2>Runs</h2><p>Latencies in ms; brackets are 95 % bootstrap intervals over requests. Failed requests are counted apart and excluded from latencies. Quality is each task's primary metric (MMLU accuracy, SQuAD v2 F1, ROUGE-L F, Spider execution accuracy, a custom task's first metric).</p><table id="runs"><tr><th>run</th><th>ok / n</th><th>TTFT p50</th><th>TTFT p95</th><th>TPOT p50</th><th>ITL p50</th><th>E2E p95</th><th>tok/s</th><th>goodput req/s</th><th>quality</th><th>unparsed</th><th>J/token</th><th>cost / 1,000 queries</th><th>SLO</th></tr>"#);
    for r in rows {
        let d = &r.data;
        match &d.stats {
            Some(s) => {
                let mut notes = Vec::new();
                if s.client_behind {
                    notes.push(format!(
                        "client lagged (send − schedule p99 {:.0} ms)",
                        s.queue_ms.p99.unwrap_or(0.0)
                    ));
                }
                if d.telemetry.as_ref().is_some_and(|t| t.client_cpu_saturated) {
                    notes.push("client CPU saturated".to_string());
                }
                let label = if notes.is_empty() {
                    esc(&d.label)
                } else {
                    format!(
                        r#"{} <span class="bad">⚠ {}: the client, not the engine, may have limited this run</span>"#,
                        esc(&d.label),
                        esc(&notes.join("; "))
                    )
                };
                let slo_cell = match r.meets_slo {
                    Some(true) => r#"<span class="ok">✓</span>"#.to_string(),
                    Some(false) => format!(
                        r#"<span class="bad" title="{}">✗ {}</span>"#,
                        esc(&r.slo_misses.join("; ")),
                        esc(&r.slo_misses.join("; "))
                    ),
                    None => "?".into(),
                };
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{slo_cell}</td></tr>",
                    label,
                    s.ok,
                    s.requests,
                    ci(s.ttft_ms.p50, r.ttft_p50_ci, 1),
                    ci(s.ttft_ms.p95, r.ttft_p95_ci, 1),
                    ci(s.tpot_ms.p50, r.tpot_p50_ci, 2),
                    n(s.itl_ms.p50, 2),
                    ci(s.e2e_ms.p95, r.e2e_p95_ci, 1),
                    n(Some(s.output_tokens_per_s), 1),
                    n(r.goodput_rps, 2),
                    ci(d.metrics.get("quality").copied(), r.quality_ci, 3),
                    d.metrics
                        .get("unparsed_rate")
                        .map(|u| format!("{:.1}%", u * 100.0))
                        .unwrap_or_else(|| "–".into()),
                    n(d.telemetry.as_ref().and_then(|t| t.j_per_output_token), 3),
                    r.cost_per_query.map(|c| format!("{} {}", per_thousand(c), esc(&currency))).unwrap_or_else(|| "–".into()),
                );
            }
            None => {
                let _ = write!(
                    h,
                    r#"<tr><td>{}</td><td colspan="13" class="bad">FAILED: {}</td></tr>"#,
                    esc(&d.label),
                    esc(d.failure.as_deref().unwrap_or(""))
                );
            }
        }
    }
    h.push_str("</table>");
    let reps = summary::across_repeats(rows, |r| r.data.stats.as_ref().and_then(|s| s.ttft_ms.p50));
    if !reps.is_empty() {
        h.push_str("<h3>Across repeats (mean ± 95 % t-interval)</h3><table><tr><th>configuration</th><th>repeats</th><th>TTFT p50 ms</th><th>tok/s</th></tr>");
        let tps = summary::across_repeats(rows, |r| {
            r.data.stats.as_ref().map(|s| s.output_tokens_per_s)
        });
        for (k, (m, hw, cnt)) in &reps {
            let t = tps
                .get(k)
                .map(|(m, hw, _)| format!("{m:.1} ± {hw:.1}"))
                .unwrap_or_default();
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{cnt}</td><td>{m:.1} ± {hw:.1}</td><td>{t}</td></tr>",
                esc(k)
            );
        }
        h.push_str("</table>");
    }

    // Pareto frontiers per task.
    h.push_str(r#"<h2>Quality vs. speed and energy</h2><div class="charts">"#);
    let mut tasks: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.data.stats.is_some()) {
        if let Some(c) = &r.data.columns {
            tasks.entry(c.task.clone()).or_default().push(r);
        }
    }
    for (task, rs) in &tasks {
        let metric = rs
            .first()
            .map(|r| r.data.primary.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "quality".into());
        type Get = fn(&Row) -> Option<f64>;
        let axes: [(&str, &str, Get); 2] = [
            ("TPOT p50 (ms)", "tpot", |r| {
                r.data.stats.as_ref().and_then(|s| s.tpot_ms.p50)
            }),
            ("J per output token", "energy", |r| {
                r.data.telemetry.as_ref().and_then(|t| t.j_per_output_token)
            }),
        ];
        for (xl, id, fx) in axes {
            let pts: Vec<(f64, f64, String)> = rs
                .iter()
                .filter_map(|r| {
                    Some((
                        fx(r)?,
                        *r.data.metrics.get("quality")?,
                        r.data.label.clone(),
                    ))
                })
                .collect();
            if pts.is_empty() {
                continue;
            }
            let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
            let front = crate::record::stats::pareto_front(&xy);
            let mut all = Series::new("configurations", xy.clone(), false);
            // Accuracy's 95 % bootstrap interval as an error bar.
            all.errors = rs
                .iter()
                .filter(|r| fx(r).is_some() && r.data.metrics.contains_key("quality"))
                .map(|r| r.quality_ci)
                .collect();
            let mut fr = Series::new(
                "Pareto frontier",
                front.iter().map(|&i| xy[i]).collect(),
                true,
            );
            fr.labels = front.iter().map(|&i| pts[i].2.clone()).collect();
            let chart = Chart {
                title: format!("{task}: {metric} vs. {xl}"),
                x_label: xl.into(),
                y_label: metric.clone(),
                series: vec![all, fr],
                hlines: vec![],
            };
            let _ = write!(
                h,
                r#"<div id="pareto-{}-{id}">{}</div>"#,
                esc(task),
                chart.svg()
            );
        }
    }
    h.push_str("</div>");

    // Latency vs users, throughput vs batch size.
    let users = groups_by(rows, "server", "users");
    if !users.is_empty() {
        h.push_str(r#"<h2>Latency vs. concurrent users</h2><div class="charts">"#);
        for (group, pts) in &users {
            let mk = |name: &str, f: fn(&Row) -> Option<f64>| {
                Series::new(
                    name,
                    pts.iter().filter_map(|(x, r)| Some((*x, f(r)?))).collect(),
                    true,
                )
            };
            let mut p50 = mk("TTFT p50", |r| r.data.stats.as_ref()?.ttft_ms.p50);
            // Each point's 95 % bootstrap interval as an error bar.
            p50.errors = pts
                .iter()
                .filter(|(_, r)| {
                    r.data
                        .stats
                        .as_ref()
                        .is_some_and(|s| s.ttft_ms.p50.is_some())
                })
                .map(|(_, r)| r.ttft_p50_ci)
                .collect();
            let series = vec![
                p50,
                mk("TTFT p99", |r| r.data.stats.as_ref()?.ttft_ms.p99),
                mk("E2E p50", |r| r.data.stats.as_ref()?.e2e_ms.p50),
                mk("E2E p99", |r| r.data.stats.as_ref()?.e2e_ms.p99),
            ];
            let mut hl = Vec::new();
            if let Some(x) = slo.ttft_p95 {
                hl.push((format!("TTFT SLO {x} s"), x * 1000.0));
            }
            if let Some(x) = slo.e2e_p95 {
                hl.push((format!("E2E SLO {x} s"), x * 1000.0));
            }
            let chart = Chart {
                title: group.clone(),
                x_label: "concurrent users".into(),
                y_label: "ms".into(),
                series,
                hlines: hl,
            };
            let _ = write!(h, r#"<div class="latency-users">{}</div>"#, chart.svg());
        }
        h.push_str("</div>");
    }
    let batch = groups_by(rows, "batch", "batch-size");
    if !batch.is_empty() {
        let series: Vec<Series> = batch
            .iter()
            .map(|(g, pts)| {
                Series::new(
                    g.clone(),
                    pts.iter()
                        .filter_map(|(x, r)| Some((*x, r.data.stats.as_ref()?.output_tokens_per_s)))
                        .collect(),
                    true,
                )
            })
            .collect();
        let chart = Chart {
            title: "Throughput vs. batch size".into(),
            x_label: "batch size".into(),
            y_label: "output tokens/s".into(),
            series,
            hlines: vec![],
        };
        let _ = write!(
            h,
            r#"<h2>Throughput vs. batch size</h2><div id="throughput-batch">{}</div>"#,
            chart.svg()
        );
    }

    // Cold starts.
    let mut cold: Vec<(String, Vec<f64>)> = Vec::new();
    for r in rows {
        if let Some(c) = &r.data.coldstart {
            if !cold.iter().any(|x| x.0 == r.data.deployment) {
                let ft = c
                    .first_token_s
                    .map(|f| (f - c.phases.healthy_s).max(0.0))
                    .unwrap_or(0.0);
                cold.push((
                    r.data.deployment.clone(),
                    vec![
                        c.phases.start_s,
                        (c.phases.healthy_s - c.phases.start_s).max(0.0),
                        ft,
                    ],
                ));
            }
        }
    }
    if !cold.is_empty() {
        let _ = write!(
            h,
            r#"<h2>Cold start</h2><div id="coldstart">{}</div>"#,
            stacked_bars(
                "Cold start by phase",
                "s",
                &["start", "load → healthy", "→ first token"],
                &cold
            )
        );
    }

    // Per-run distributions and timelines.
    h.push_str("<h2>Per run</h2>");
    for r in rows.iter().filter(|r| r.data.stats.is_some()).take(40) {
        let d = &r.data;
        let _ = write!(h, r#"<h3>{}</h3><div class="charts run">"#, esc(&d.label));
        let dist = Chart {
            title: "TTFT and ITL distributions".into(),
            x_label: "ms".into(),
            y_label: "count".into(),
            series: vec![
                histogram_series("TTFT", &d.ttft_ms, 20),
                histogram_series("ITL", &d.itl_ms, 20),
            ],
            hlines: vec![],
        };
        h.push_str(&dist.svg());
        let mut tl = vec![Series::new("requests in flight", d.inflight.clone(), true)];
        if !d.power.is_empty() {
            tl.push(Series::new("GPU power (W)", d.power.clone(), true));
        }
        if !d.gpu_mem_gb.is_empty() {
            tl.push(Series::new("GPU memory (GB)", d.gpu_mem_gb.clone(), true));
        }
        if !d.gpu_util.is_empty() {
            tl.push(Series::new("GPU utilization (%)", d.gpu_util.clone(), true));
        }
        let timeline = Chart {
            title: "Timeline".into(),
            x_label: "seconds since the window start".into(),
            y_label: "".into(),
            series: tl,
            hlines: vec![],
        };
        h.push_str(&timeline.svg());
        h.push_str("</div>");
    }

    // Failures, never hidden.
    h.push_str(r#"<h2>Failures</h2><ul id="failures">"#);
    let mut any = false;
    for r in rows {
        if let Some(f) = &r.data.failure {
            any = true;
            let (first, rest) = f.split_once('\n').unwrap_or((f, ""));
            let _ = write!(h, "<li><b>{}</b>: {}", esc(&r.data.label), esc(first));
            // The rest of the cause (an engine's last log lines) in full.
            if !rest.trim().is_empty() {
                let _ = write!(h, "<pre class=\"log\">{}</pre>", esc(rest.trim_end()));
            }
            h.push_str("</li>");
        }
        if let Some(s) = &r.data.stats {
            for (cause, k) in &s.failures {
                any = true;
                let _ = write!(
                    h,
                    "<li><b>{}</b>: {k} request(s) failed: {}</li>",
                    esc(&r.data.label),
                    esc(cause)
                );
            }
        }
    }
    if !any {
        h.push_str("<li>None.</li>");
    }
    h.push_str("</ul>");
    if let Some(c) = cost {
        let _ = write!(h, "<p><small>Cost per query = (energy J / 3.6·10⁶ × {} {cur}/kWh + {} {cur}/h × window s / 3600) / successful requests.</small></p>", c.energy_per_kwh, c.hardware_per_hour, cur = esc(&c.currency));
    }
    h.push_str("<p><small>Goodput = successful requests per second whose own TTFT and E2E are within the SLO thresholds. Definitions of every metric: docs/metrics.md and docs/report.md of bench360.</small></p></body></html>");
    h
}
