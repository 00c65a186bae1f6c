//! `report.html`: one self-contained file (inline CSS and SVG, no script, no network) that
//! opens with the answer. Pure: a view model of plain values built from the rows, rendered
//! by the minijinja template `templates/report.html` (every value escaped there; only the
//! SVG charts are passed through). Returns the page.

use std::collections::BTreeMap;

use super::answer;
use super::summary::{self, Row};
use serde::Serialize;

use super::svg::{histogram_series, Chart, Series};
use crate::spec::{Cost, Slo};

fn n(v: Option<f64>, d: usize) -> String {
    v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "–".into())
}

/// A value with its 95 % interval, each as shown (the template adds the markup).
#[derive(Serialize)]
struct Ci {
    value: Option<String>,
    low: Option<String>,
    high: Option<String>,
}

fn ci(v: Option<f64>, c: Option<(f64, f64)>, d: usize) -> Ci {
    let f = |x: f64| format!("{x:.d$}");
    Ci {
        value: v.map(f),
        low: v.and(c).map(|c| f(c.0)),
        high: v.and(c).map(|c| f(c.1)),
    }
}

/// Marks a percentile that rests on too few requests (`text::THIN`).
fn thin_ci(mut c: Ci, d: &crate::record::stats::Dist, q: f64) -> Ci {
    let mark = super::text::thin(d, q);
    if let Some(v) = &mut c.value {
        v.push_str(mark);
    }
    c
}

fn param(r: &Row, key: &str) -> Option<f64> {
    let c = r.data.columns.as_ref()?;
    let m: BTreeMap<String, String> = serde_json::from_str(&c.scenario_params).ok()?;
    m.get(key)?.parse().ok()
}

/// Runs grouped by everything but one scenario parameter: one series per group.
fn groups_by<'a>(rows: &'a [Row], kind: &str, axis: &str) -> BTreeMap<String, Vec<(f64, &'a Row)>> {
    let mut g: BTreeMap<String, Vec<(f64, &Row)>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.finished()) {
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

/// The page's values, in the template's order.
#[derive(Serialize)]
struct Page {
    sweep: String,
    /// The SLO as text; None: none declared.
    constraints: Option<String>,
    answers: Vec<TaskAnswer>,
    /// Set when a shown percentile rests on too few requests.
    thin_legend: Option<String>,
    runs: Vec<RunRow>,
    repeats: Vec<RepeatRow>,
    pareto: Vec<ParetoChart>,
    users: Vec<String>,
    batch: Option<String>,
    /// `## Engine settings`: runs that differ in one engine setting alone (pre-escaped).
    settings: Option<String>,
    /// `## Provenance`: what each deployment ran on (pre-escaped).
    provenance: Option<String>,
    /// `## Runs at the same time` (pre-escaped).
    overlap: Option<String>,
    /// Stacked phases of each deployment's first start.
    cold: Option<String>,
    /// The cold-start table, its starts' intervals, runs on later starts (pre-escaped).
    coldstarts: Option<String>,
    per_run: Vec<PerRun>,
    /// The runs with no record yet, counted under the runs table.
    not_run: Option<String>,
    failures: Vec<super::text::Failure>,
    cost: Option<CostNote>,
}

#[derive(Serialize)]
struct TaskAnswer {
    task: String,
    /// The declared rule in words; None: one pick per objective.
    rule: Option<String>,
    recommended: Option<String>,
    alternative: Option<String>,
    reference: Option<String>,
    reference_problem: Option<String>,
    picks: Vec<Pick>,
    verdicts: Vec<VerdictRow>,
    excluded: Vec<String>,
    /// Configurations that stand on the repeats recorded while others are not run yet.
    partial: Option<String>,
    pairs: Vec<PairRow>,
    power: Option<String>,
    machines: Option<String>,
    /// Runs of the task whose quality is held down by format failures.
    notes: Vec<String>,
}

#[derive(Serialize)]
struct Pick {
    objective: &'static str,
    /// The run's label; None: no run meets the constraints or has the figure.
    who: Option<String>,
    value: String,
    /// Within noise of it, with the rule; empty: none.
    tied: String,
}

#[derive(Serialize)]
struct VerdictRow {
    label: String,
    standing: &'static str,
    value: String,
    vs_reference: String,
    why: String,
}

#[derive(Serialize)]
struct PairRow {
    a: String,
    b: String,
    items: usize,
    delta: String,
    interval: String,
    p: String,
    different: bool,
}

#[derive(Serialize, Default)]
struct RunRow {
    label: String,
    /// Set for a run that failed (`FAILED: …`) or has no record of this configuration
    /// (then nothing else is).
    failure: Option<String>,
    /// Why the client may have limited the run.
    client_notes: Option<String>,
    /// Over-saturation.
    flags: Option<String>,
    /// Where `target-margin` stopped the run.
    stop: Option<String>,
    ok: usize,
    requests: usize,
    ttft_p50: Option<Ci>,
    ttft_p95: Option<Ci>,
    tpot_p50: Option<Ci>,
    itl_p50: String,
    e2e_p95: Option<Ci>,
    tokens_per_s: String,
    goodput: String,
    quality: Option<Ci>,
    unparsed: String,
    j_per_token: String,
    j_per_correct: Option<Ci>,
    steady_tokens_per_s: String,
    /// Share of successful requests stopped at max-tokens.
    cut: String,
    cost: String,
    meets_slo: Option<bool>,
    slo_misses: String,
}

#[derive(Serialize)]
struct RepeatRow {
    config: String,
    count: usize,
    /// How many machines its repeats recorded (host and GPUs): more than one, and the
    /// interval holds the machines' difference too.
    machines: usize,
    ttft: String,
    tokens_per_s: String,
}

#[derive(Serialize)]
struct ParetoChart {
    task: String,
    axis: &'static str,
    svg: String,
}

#[derive(Serialize)]
struct PerRun {
    label: String,
    distributions: String,
    timeline: String,
}

#[derive(Serialize)]
struct CostNote {
    /// Prices as Rust writes them (`0`, `0.1`), not as the template would (`0.0`).
    energy: String,
    hardware: String,
    currency: String,
}

const TEMPLATE: &str = include_str!("templates/report.html");

pub(crate) fn page(
    sweep: &str,
    rows: &[Row],
    task_answers: &[answer::TaskAnswer],
    slo: &Slo,
    cost: Option<&Cost>,
    coldstarts: &[(String, Option<super::ColdStart>)],
) -> String {
    let page = Page {
        sweep: sweep.to_string(),
        constraints: constraints(slo),
        answers: answers(rows, task_answers),
        thin_legend: super::text::any_thin(rows).then(super::text::thin_legend),
        runs: rows
            .iter()
            .filter(|r| !super::text::not_run_yet(r))
            .map(|r| run_row(r, cost))
            .collect(),
        not_run: super::text::not_run_count(rows, "the Failures section lists"),
        repeats: repeats(rows),
        pareto: pareto(rows),
        users: users(rows, slo),
        batch: batch(rows),
        settings: super::settings::html(rows),
        provenance: super::provenance::html(rows),
        overlap: super::overlap::html(rows),
        cold: super::coldstart::chart(rows),
        coldstarts: super::coldstart::html(rows, coldstarts),
        per_run: per_run(rows),
        failures: super::text::failures(rows, str::to_string),
        cost: cost.map(|c| CostNote {
            energy: c.energy_per_kwh.to_string(),
            hardware: c.hardware_per_hour.to_string(),
            currency: c.currency.clone(),
        }),
    };
    let mut env = minijinja::Environment::new();
    env.add_template("report.html", TEMPLATE)
        .expect("the report template parses");
    env.get_template("report.html")
        .and_then(|t| t.render(&page))
        .expect("the report template renders its view model")
}

fn constraints(slo: &Slo) -> Option<String> {
    let parts: Vec<String> = [
        slo.ttft_p95.map(|x| format!("TTFT p95 ≤ {x} s")),
        slo.e2e_p95.map(|x| format!("E2E p95 ≤ {x} s")),
        slo.gpu_memory_gib.map(|x| format!("GPU memory ≤ {x} GiB")),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn answers(rows: &[Row], answers: &[answer::TaskAnswer]) -> Vec<TaskAnswer> {
    use answer::sig3;
    answers
        .iter()
        .map(|a| TaskAnswer {
            task: a.heading(),
            rule: a.rule.clone(),
            recommended: a.recommended.clone(),
            alternative: a.alternative.clone(),
            reference: a.reference.clone().filter(|_| a.configurations > 1),
            reference_problem: a.reference_problem.clone(),
            picks: a
                .picks
                .iter()
                .map(|p| Pick {
                    objective: p.objective,
                    who: p.label.clone(),
                    value: p.shown(),
                    tied: if p.tied.is_empty() {
                        String::new()
                    } else {
                        format!("{} ({})", p.tied.join(", "), p.tie_rule)
                    },
                })
                .collect(),
            verdicts: if a.rule.is_some() {
                a.verdicts
                    .iter()
                    .map(|v| VerdictRow {
                        label: v.label.clone(),
                        standing: v.standing.as_str(),
                        value: v.value.map_or("–".into(), sig3),
                        vs_reference: v.vs_reference.as_ref().map_or("–".into(), answer::describe),
                        why: v.why.clone(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            excluded: excluded_lines(a),
            partial: super::text::partial_line(a, str::to_string),
            pairs: a
                .pairs
                .iter()
                .map(|l| PairRow {
                    a: l.a.clone(),
                    b: l.b.clone(),
                    items: l.paired.items,
                    delta: format!("{:+.1}", l.paired.delta * 100.0),
                    interval: l.paired.ci.map_or("–".into(), |(lo, hi)| {
                        format!("{:+.1} … {:+.1}", lo * 100.0, hi * 100.0)
                    }),
                    p: l.paired.mcnemar.map_or("–".into(), |m| answer::fmt_p(m.p)),
                    different: l.paired.detectable(),
                })
                .collect(),
            power: a.power.clone(),
            machines: a.machines.clone(),
            notes: a
                .row_indices()
                .into_iter()
                .map(|i| &rows[i])
                .flat_map(|r| {
                    summary::format_note(r)
                        .into_iter()
                        .chain(summary::truncation_note(r))
                        .chain(summary::prompt_length_note(r))
                        .chain(summary::stream_note(r))
                        .chain(summary::usage_note(r))
                        .chain(summary::prefix_cache_note(r))
                        .chain(summary::scoring_note(r))
                        .chain(summary::reasoning_note(r))
                        .chain(super::overlap::shared_gpu_note(r))
                })
                .collect(),
        })
        .collect()
}

/// Without a declared objective, the configurations left out of the picks and why: one line
/// each, the ones not run yet on one line together.
fn excluded_lines(a: &answer::TaskAnswer) -> Vec<String> {
    if a.rule.is_some() {
        return Vec::new();
    }
    let (excluded, not_run) = super::text::exclusions(a);
    let mut lines: Vec<String> = excluded
        .iter()
        .map(|v| format!("{} excluded: {}", v.label, v.why))
        .collect();
    lines.extend(super::text::not_run_line(&not_run, str::to_string));
    lines
}

fn run_row(r: &Row, cost: Option<&Cost>) -> RunRow {
    let d = &r.data;
    let Some(s) = &d.stats else {
        return RunRow {
            label: d.label.clone(),
            failure: Some(super::text::no_figures(
                d.failure.as_deref().unwrap_or_default(),
            )),
            ..Default::default()
        };
    };
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
    let mut flags = Vec::new();
    // A run failed over its error budget keeps its figures, beside its failure.
    if let Some(f) = &d.failure {
        flags.push(format!("FAILED: {}", crate::engine::failure_headline(f)));
    }
    if let Some(why) = r.over_saturated() {
        flags.push(format!("over-saturated: {why}"));
    }
    if let Some((n, _)) = super::overlap::shared_gpus(r) {
        flags.push(format!("shared GPU: {n:.0} other process(es) on it"));
    }
    // Its J/token rests on an energy counter that ∫power disagrees with beyond sampling.
    if let Some(t) = &d.telemetry {
        for x in &t.devices {
            if let Some(c) = x.counter_check(t.window_s).filter(|c| c.disagrees()) {
                flags.push(format!(
                    "energy: {}'s counter and ∫power {:+.1} % apart (report.md's telemetry notes)",
                    x.device,
                    100.0 * c.delta
                ));
            }
        }
    }
    let stop = r.stop_note();
    let currency = cost.map(|c| c.currency.as_str()).unwrap_or_default();
    RunRow {
        label: d.label.clone(),
        failure: None,
        client_notes: (!notes.is_empty()).then(|| notes.join("; ")),
        flags: (!flags.is_empty()).then(|| flags.join("; ")),
        stop,
        ok: s.ok,
        requests: s.requests,
        ttft_p50: Some(ci(s.ttft_ms.p50, r.ttft_p50_ci, 1)),
        ttft_p95: Some(thin_ci(
            ci(s.ttft_ms.p95, r.ttft_p95_ci, 1),
            &s.ttft_ms,
            95.0,
        )),
        tpot_p50: Some(ci(s.tpot_ms.p50, r.tpot_p50_ci, 2)),
        itl_p50: n(s.itl_ms.p50, 2),
        e2e_p95: Some(thin_ci(ci(s.e2e_ms.p95, r.e2e_p95_ci, 1), &s.e2e_ms, 95.0)),
        tokens_per_s: n(Some(s.output_tokens_per_s), 1),
        goodput: n(r.goodput_rps, 2),
        quality: Some(ci(d.metrics.get("quality").copied(), r.quality_ci, 3)),
        unparsed: d
            .metrics
            .get("unparsed_rate")
            .map(|u| format!("{:.1}%", u * 100.0))
            .unwrap_or_else(|| "–".into()),
        j_per_token: n(d.telemetry.as_ref().and_then(|t| t.j_per_output_token), 3),
        j_per_correct: Some(ci(r.j_per_correct, r.j_per_correct_ci, 2)),
        steady_tokens_per_s: n(r.steady().map(|st| st.output_tokens_per_s), 1),
        cut: d
            .truncation
            .and_then(|t| t.cut_share())
            .map(|c| format!("{:.1}%", c * 100.0))
            .unwrap_or_else(|| "–".into()),
        cost: r
            .cost_per_query
            .map(|c| format!("{} {currency}", per_thousand(c)))
            .unwrap_or_else(|| "–".into()),
        meets_slo: r.meets_slo,
        slo_misses: r.slo_misses.join("; "),
    }
}

fn repeats(rows: &[Row]) -> Vec<RepeatRow> {
    let reps = summary::across_repeats(rows, |r| r.data.stats.as_ref().and_then(|s| s.ttft_ms.p50));
    let tps = summary::across_repeats(rows, |r| {
        r.data.stats.as_ref().map(|s| s.output_tokens_per_s)
    });
    let machines = |k: &str| {
        let mut seen: Vec<&crate::record::provenance::Provenance> = Vec::new();
        for r in rows
            .iter()
            .filter(|r| answer::base_label(&r.data.label) == k && r.finished())
        {
            if let Some(p) = &r.data.provenance {
                if !seen.iter().any(|q| q.same_machine(p)) {
                    seen.push(p);
                }
            }
        }
        seen.len()
    };
    reps.iter()
        .map(|(k, (m, hw, cnt))| RepeatRow {
            config: k.clone(),
            count: *cnt,
            machines: machines(k),
            ttft: format!("{m:.1} ± {hw:.1}"),
            tokens_per_s: tps
                .get(k)
                .map(|(m, hw, _)| format!("{m:.1} ± {hw:.1}"))
                .unwrap_or_default(),
        })
        .collect()
}

/// Per task (and machine, when the runs recorded several: a frontier across machines would
/// rank them too), quality against TPOT and against J/token, the Pareto frontier joined and labelled.
fn pareto(rows: &[Row]) -> Vec<ParetoChart> {
    let mut tasks: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for (r, m) in rows.iter().zip(answer::machine_labels(rows)) {
        if let (Some(c), true) = (&r.data.columns, r.finished()) {
            let key = m.map_or_else(|| c.task.clone(), |m| format!("{} on {m}", c.task));
            tasks.entry(key).or_default().push(r);
        }
    }
    let mut out = Vec::new();
    for (task, rs) in &tasks {
        let metric = rs
            .first()
            .map(|r| r.data.primary.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "quality".into());
        type Get = fn(&Row) -> Option<f64>;
        let axes: [(&str, &'static str, Get); 2] = [
            ("TPOT p50 (ms)", "tpot", |r| r.decode_tpot_p50()),
            ("J per output token", "energy", |r| {
                r.data.telemetry.as_ref().and_then(|t| t.j_per_output_token)
            }),
        ];
        for (xl, axis, fx) in axes {
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
            // Quality's 95 % bootstrap interval as an error bar.
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
            out.push(ParetoChart {
                task: task.clone(),
                axis,
                svg: chart.svg(),
            });
        }
    }
    out
}

/// Latency against concurrent users, one chart per deployment × task × scenario, with the SLO.
fn users(rows: &[Row], slo: &Slo) -> Vec<String> {
    let mut out = Vec::new();
    for (group, pts) in &groups_by(rows, "server", "users") {
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
        let mut hlines = Vec::new();
        if let Some(x) = slo.ttft_p95 {
            hlines.push((format!("TTFT SLO {x} s"), x * 1000.0));
        }
        if let Some(x) = slo.e2e_p95 {
            hlines.push((format!("E2E SLO {x} s"), x * 1000.0));
        }
        let chart = Chart {
            title: group.clone(),
            x_label: "concurrent users".into(),
            y_label: "ms".into(),
            series,
            hlines,
        };
        out.push(chart.svg());
    }
    out
}

fn batch(rows: &[Row]) -> Option<String> {
    let batch = groups_by(rows, "batch", "batch-size");
    if batch.is_empty() {
        return None;
    }
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
    Some(chart.svg())
}

/// Per run (the first 40 that finished): TTFT and ITL distributions and a timeline.
fn per_run(rows: &[Row]) -> Vec<PerRun> {
    rows.iter()
        .filter(|r| r.data.stats.is_some())
        .take(40)
        .map(|r| {
            let d = &r.data;
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
            let mut tl = vec![Series::new("requests in flight", d.inflight.clone(), true)];
            for (name, s) in [
                ("GPU power (W)", &d.power),
                ("GPU memory (GB)", &d.gpu_mem_gb),
                ("GPU utilization (%)", &d.gpu_util),
            ] {
                if !s.is_empty() {
                    tl.push(Series::new(name, s.clone(), true));
                }
            }
            let timeline = Chart {
                title: "Timeline".into(),
                x_label: "seconds since the window start".into(),
                y_label: "".into(),
                series: tl,
                hlines: vec![],
            };
            PerRun {
                label: d.label.clone(),
                distributions: dist.svg(),
                timeline: timeline.svg(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
