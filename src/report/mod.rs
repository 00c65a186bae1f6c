//! Reports: aggregation of what the cache holds for a sweep into a terminal table and
//! `report.md`. Renderers return strings; the caller writes files.

pub(crate) mod answer;
mod build;
mod coldstart;
pub(crate) mod html;
pub(crate) mod text;

mod overlap;
mod provenance;
mod resolve;
mod settings;
pub(crate) mod summary;
pub(crate) mod svg;

pub(crate) use build::{
    build_report, publish_report, summary_rows, write_report_files, ReportFiles,
};

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::record::stats::Dist;
use crate::record::Phases;
use summary::Row;

/// What the `coldstart` node records.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ColdStart {
    pub phases: Phases,
    /// Launch call → first content token of the first (warmup) request.
    pub first_token_s: Option<f64>,
    pub model_bytes: Option<u64>,
    /// GPU memory used right after the engine became healthy (sampled GPUs), when NVML is there.
    #[serde(default)]
    pub gpu_mem_after_load_mb: Option<f64>,
    /// Whether the weights were already in the mounted Hugging Face cache before the start.
    #[serde(default)]
    pub weights_cached: Option<bool>,
    /// The machine it started on (cold starts recorded before bench360 kept it: None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::host::HostInfo>,
    /// What the engine's compile caches held before the start (a process engine that keeps
    /// them; cold starts recorded before bench360 looked: None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_caches: Option<Vec<crate::engine::caches::CacheState>>,
    /// When the engine was launched (RFC 3339, UTC): a run whose `engine_start` names another
    /// launch stood on a later start (cold starts recorded before 2026-12-03: None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_utc: Option<String>,
}

fn ms(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 1000.0 => format!("{:.2}s", x / 1000.0),
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) if x >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
        None => "–".into(),
    }
}

/// p50 / p90 / p95 / p99 (p95 is what the answer ranks on), each thin one marked
/// (`text::THIN`).
fn percentiles(d: &Dist) -> String {
    format!(
        "{} / {}{} / {}{} / {}{}",
        ms(d.p50),
        ms(d.p90),
        text::thin(d, 90.0),
        ms(d.p95),
        text::thin(d, 95.0),
        ms(d.p99),
        text::thin(d, 99.0)
    )
}

/// Failed requests as a share of all ("–" when none were sent).
fn error_rate(s: &crate::record::stats::RunStats) -> String {
    if s.requests == 0 {
        return "–".into();
    }
    format!("{:.1}%", 100.0 * s.failed as f64 / s.requests as f64)
}

fn pct(v: Option<&f64>) -> String {
    v.map(|x| format!("{:.1}%", x * 100.0))
        .unwrap_or_else(|| "–".into())
}

/// A `## title` section of report.md: an introduction and one table; empty without rows.
fn table_section(title: &str, intro: &str, header: &[&str], rows: Vec<Vec<String>>) -> String {
    if rows.is_empty() {
        return String::new();
    }
    format!("\n## {title}\n\n{intro}\n\n{}", text_table(header, rows))
}

/// The same for report.html (its heading is the template's); None without rows.
fn table_section_html(intro: &str, header: &[&str], rows: Vec<Vec<String>>) -> Option<String> {
    (!rows.is_empty()).then(|| format!("<p>{}</p>{}", plain(intro), html_table(header, rows)))
}

/// A Markdown sentence as escaped HTML text: its emphasis and code marks dropped.
fn plain(md: &str) -> String {
    svg::esc(&md.replace(['*', '`'], ""))
}

/// A markdown table whose cells are text (a `|` inside one is escaped).
fn text_table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let cells: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| r.into_iter().map(|c| c.replace('|', "\\|")).collect())
        .collect();
    table(header, &cells)
}

/// The same table for report.html, every cell escaped.
fn html_table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    use std::fmt::Write;
    let esc = svg::esc;
    let mut out = String::from("<table><thead><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for c in row {
            let _ = write!(out, "<td>{}</td>", esc(&c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!(
        "|{}\n",
        header.iter().map(|_| "---|").collect::<String>()
    ));
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out
}

/// `report.md`: per run, latency percentiles, throughput, errors and accuracy; energy; format
/// failures; cold starts; every failure.
pub(crate) fn markdown(
    sweep: &str,
    read_note: Option<&str>,
    coldstarts: &[(String, Option<ColdStart>)],
    rows: &[Row],
    answers: &[answer::TaskAnswer],
) -> String {
    let mut out = format!("# bench360 report: {sweep}\n\n");
    if let Some(n) = read_note {
        // What was read from records made elsewhere ([`resolve`]), before anything read so.
        out.push_str(&format!("*Read from elsewhere:* {n}\n\n"));
    }
    out.push_str(&text::answer_markdown(answers));
    out.push_str("## Runs\n\nLatencies in milliseconds as p50 / p90 / p95 / p99 over successful requests (failed requests are counted apart). TTFT = first generated token − send (a reasoning model's first reasoning token; its first answer token is under Reasoning); TPOT = (last − first generated token) / (completion tokens − 1); ITL = gap between chunks of generated text; E2E = last token − scheduled. Quality with its 95 % bootstrap interval over dataset items; requests sent together (batches) count once in a percentile's sample, and `ok` says how many batches there were; requests each at their own instant whose neighbours moved together count as the independent requests they are worth (the † rule and the intervals).\n\n");
    out.push_str(&runs_section(rows));
    if text::any_thin(rows) {
        out.push_str(&format!("\n{}\n", text::thin_legend()));
    }
    out.push_str(&settings::markdown(rows));
    out.push_str(&text::steady_markdown(rows));
    out.push_str(&text::per_correct_markdown(rows, None));
    out.push_str(&energy_section(rows));
    let format_notes: Vec<String> = rows
        .iter()
        .filter_map(summary::format_note)
        .chain(rows.iter().filter_map(summary::truncation_note))
        .chain(rows.iter().filter_map(summary::prompt_length_note))
        .chain(rows.iter().filter_map(summary::stream_note))
        .chain(rows.iter().filter_map(summary::usage_note))
        .chain(rows.iter().filter_map(summary::prefix_cache_note))
        .chain(rows.iter().filter_map(summary::scoring_note))
        .collect();
    if !format_notes.is_empty() {
        out.push_str(
            "\n## Format failures, truncation, prompt lengths, streaming, token usage and prefix caches\n\n",
        );
        for n in format_notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    let reasoning: Vec<String> = rows.iter().filter_map(summary::reasoning_note).collect();
    if !reasoning.is_empty() {
        out.push_str("\n## Reasoning\n\n");
        for n in reasoning {
            let _ = writeln!(out, "- {n}");
        }
    }
    out.push_str("\n## Cold starts\n\n");
    out.push_str(&coldstart::coldstart_section(coldstarts));
    out.push_str(&coldstart::restarts(rows, coldstarts));
    out.push_str(&provenance::markdown(rows));
    out.push_str(&overlap::markdown(rows));
    out.push_str("\n## Failures\n\n");
    out.push_str(&failures_section(rows));
    out
}

/// One row per run: requests, errors, latency percentiles, throughput, quality, notes.
fn runs_section(rows: &[Row]) -> String {
    // A partial sweep's runs with no record yet: counted under the table, not a row each.
    let body: Vec<Vec<String>> = rows
        .iter()
        .filter(|r| !text::not_run_yet(r))
        .map(|r| match &r.data.stats {
            Some(s) => vec![
                r.data.label.clone(),
                ok_cell(s),
                format!("{} ({})", s.failed, error_rate(s)),
                percentiles(&s.ttft_ms),
                percentiles(&s.tpot_ms),
                percentiles(&s.itl_ms),
                percentiles(&s.e2e_ms),
                format!("{:.1}", s.output_tokens_per_s),
                format!("{:.2}", s.requests_per_s),
                quality_cell(r),
                unparsed_split(r),
                pct(r.data.truncation.and_then(|t| t.cut_share()).as_ref()),
                match (&r.data.failure, s.client_behind, r.over_saturated()) {
                    (Some(f), _, _) => format!(
                        "FAILED: {}",
                        crate::engine::failure_headline(f).replace('|', "\\|")
                    ),
                    (None, _, Some(why)) => format!("over-saturated: {why}"),
                    (None, true, None) => format!("client lag p99 {}", ms(s.queue_ms.p99)),
                    (None, false, None) => r.stop_note().unwrap_or_default(),
                },
            ],
            None => vec![
                r.data.label.clone(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                "–".into(),
                text::no_figures(
                    &r.data
                        .failure
                        .clone()
                        .unwrap_or_default()
                        .replace('\n', " "),
                ),
            ],
        })
        .collect();
    let mut out = table(
        &[
            "run",
            "ok",
            "errors",
            "TTFT ms",
            "TPOT ms",
            "ITL ms",
            "E2E ms",
            "out tok/s",
            "req/s",
            "quality [95 % CI]",
            "unparsed (cut / other)",
            "cut at max-tokens",
            "notes",
        ],
        &body,
    );
    if let Some(line) = text::not_run_count(rows, "the Failures section lists") {
        let _ = writeln!(out, "\n{line}.");
    }
    out
}

/// Successful of sent requests, and — when requests were sent together (batches, an offline
/// burst) — the groups, the independent observations the percentiles rest on.
fn ok_cell(s: &crate::record::stats::RunStats) -> String {
    match s.ttft_ms.groups.or(s.e2e_ms.groups) {
        Some(g) if g < s.ok => format!(
            "{}/{} ({g} batch{})",
            s.ok,
            s.requests,
            if g == 1 { "" } else { "es" }
        ),
        _ => format!("{}/{}", s.ok, s.requests),
    }
}

/// The quality with its 95 % interval (over dataset items).
fn quality_cell(r: &Row) -> String {
    let q = pct(r.data.metrics.get("quality"));
    match r.quality_ci {
        Some((lo, hi)) if r.data.metrics.contains_key("quality") => {
            format!("{q} [{:.1}, {:.1}]", lo * 100.0, hi * 100.0)
        }
        _ => q,
    }
}

/// The unparsed share, split into answers cut by max-tokens and the others when known.
fn unparsed_split(r: &Row) -> String {
    let all = pct(r.data.metrics.get("unparsed_rate"));
    match r.data.truncation {
        Some(t) if t.scored > 0 && t.unparsed_cut + t.unparsed_other > 0 => format!(
            "{all} ({:.1}% / {:.1}%)",
            100.0 * t.unparsed_cut as f64 / t.scored as f64,
            100.0 * t.unparsed_other as f64 / t.scored as f64
        ),
        _ => all,
    }
}

/// Every failure, never hidden: failed runs (an engine's last log lines in full) and failed
/// requests by cause.
fn failures_section(rows: &[Row]) -> String {
    let failures = text::failures(rows, |l| format!("`{l}`"));
    if failures.is_empty() {
        return "None.\n".into();
    }
    let mut out = String::new();
    for f in failures {
        let _ = writeln!(out, "- {}: {}", f.label, f.cause);
        // The rest of the cause (an engine's last log lines) in full, as a block.
        if let Some(log) = f.log {
            out.push_str("\n  ~~~text\n");
            for l in log.lines() {
                let _ = writeln!(out, "  {}", l.replace("~~~", "~ ~ ~"));
            }
            out.push_str("  ~~~\n\n");
        }
    }
    out
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

/// Energy, power, memory and CPU per run, the telemetry notes, and the samplers' cost.
fn energy_section(rows: &[Row]) -> String {
    let with: Vec<(&Row, &crate::telemetry::Summary)> = rows
        .iter()
        .filter_map(|r| r.data.telemetry.as_ref().map(|t| (r, t)))
        .collect();
    let mut out = String::from("\n## Energy, power and memory\n\n");
    if with.is_empty() {
        out.push_str("No telemetry recorded.\n");
        return out;
    }
    out.push_str("Energy over the measurement window (first scheduled request → last successful response), from the device's energy counter where it has one, else the integral of power samples; idle power measured just before the window with the engine loaded. `–` means not measured, never zero.\n\n");
    let body: Vec<Vec<String>> = with
        .iter()
        .map(|(r, t)| {
            // Power of the devices that `energy from` counts (GPUs, or CPU packages without GPU).
            let counted: Vec<&crate::telemetry::DeviceEnergy> = t.counted_devices().collect();
            let total = |f: fn(&crate::telemetry::DeviceEnergy) -> Option<f64>| -> Option<f64> {
                if counted.is_empty() {
                    None
                } else {
                    counted.iter().map(|d| f(d)).sum()
                }
            };
            let (idle, mean) = (total(|d| d.idle_w), total(|d| d.mean_w));
            vec![
                r.data.label.clone(),
                t.energy_source.clone(),
                num(t.energy_j, 1),
                num(t.energy_above_idle_j, 1),
                num(idle, 1),
                num(mean, 1),
                num(t.j_per_output_token, 3),
                num(t.output_tokens_per_j, 2),
                num(t.j_per_request, 2),
                format!(
                    "{} / {}",
                    num(t.gpu_mem_mean_mb, 0),
                    num(t.gpu_mem_peak_mb, 0)
                ),
                num(t.gpu_mem_overhead_mb, 0),
                num(t.gpu_util_mean_pct, 0),
                num(t.engine_cpu_mean_pct, 0),
                num(t.engine_rss_peak_mb, 0),
                num(t.bench360_cpu_mean_pct, 1),
                format!("{} / {}", num(t.running_peak, 0), num(t.waiting_peak, 0)),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "run",
            "energy from",
            "energy J",
            "above idle J",
            "idle W",
            "mean W",
            "J/token",
            "tokens/J",
            "J/request",
            "GPU mem mean/peak MB",
            "mem overhead MB",
            "GPU util %",
            "engine CPU %",
            "engine RSS MB",
            "bench360 CPU %",
            "running/waiting peak",
        ],
        &body,
    ));
    let mut notes: Vec<&String> = with.iter().flat_map(|(_, t)| t.notes.iter()).collect();
    notes.sort();
    notes.dedup();
    out.push_str("\nTelemetry notes:\n\n");
    for n in notes {
        let _ = writeln!(out, "- {n}");
    }
    // Where a device's energy counter and its ∫power part by more than sampling explains.
    for (r, t) in &with {
        for d in &t.devices {
            if let Some(n) = d.counter_note(t.window_s) {
                let _ = writeln!(out, "- {}, {n}", r.data.label);
            }
        }
    }
    let mut costs: BTreeMap<&str, (f64, u64)> = BTreeMap::new();
    for (_, t) in &with {
        for c in &t.sampler_costs {
            let e = costs.entry(&c.sampler).or_default();
            e.0 += c.cpu_us_per_sample * c.samples as f64;
            e.1 += c.samples;
        }
    }
    let costs: Vec<String> = costs
        .iter()
        .map(|(k, (us, n))| format!("{k} {:.0} µs", if *n > 0 { us / *n as f64 } else { 0.0 }))
        .collect();
    let _ = writeln!(
        out,
        "- sampler cost (CPU time per sample): {}",
        costs.join(", ")
    );
    out
}

/// Compact terminal table, the answer's lines and the flags under it.
pub(crate) fn terminal(rows: &[Row], answers: &[answer::TaskAnswer]) -> String {
    let header = [
        "run",
        "ok/n",
        "errors",
        "TTFT p50/p99 ms",
        "TPOT p50/p99 ms",
        "E2E p50/p99 ms",
        "tok/s",
        "quality",
        "unparsed",
        "cut",
    ];
    // A partial sweep's runs with no record yet: counted under the table, not a row each.
    let body: Vec<Vec<String>> = rows
        .iter()
        .filter(|r| !text::not_run_yet(r))
        .map(|r| match &r.data.stats {
            Some(s) => vec![
                r.data.label.clone(),
                format!(
                    "{}/{}{}",
                    s.ok,
                    s.requests,
                    if r.data.failure.is_some() {
                        " FAILED"
                    } else {
                        ""
                    }
                ),
                error_rate(s),
                format!(
                    "{} / {}{}",
                    ms(s.ttft_ms.p50),
                    ms(s.ttft_ms.p99),
                    text::thin(&s.ttft_ms, 99.0)
                ),
                format!(
                    "{} / {}{}",
                    ms(s.tpot_ms.p50),
                    ms(s.tpot_ms.p99),
                    text::thin(&s.tpot_ms, 99.0)
                ),
                format!(
                    "{} / {}{}",
                    ms(s.e2e_ms.p50),
                    ms(s.e2e_ms.p99),
                    text::thin(&s.e2e_ms, 99.0)
                ),
                format!("{:.1}", s.output_tokens_per_s),
                pct(r.data.metrics.get("quality")),
                pct(r.data.metrics.get("unparsed_rate")),
                pct(r.data.truncation.and_then(|t| t.cut_share()).as_ref()),
            ],
            None => {
                // Its configuration changed since it ran: not a failure either.
                let what = if build::no_record(r) {
                    "not run yet (changed)"
                } else {
                    "FAILED"
                };
                let mut v = vec![r.data.label.clone(), what.into()];
                v.resize(header.len(), String::new());
                v
            }
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            body.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(header.iter().map(|s| s.to_string()).collect());
    out.push('\n');
    for r in body {
        out.push_str(&line(r));
        out.push('\n');
    }
    if let Some(line) = text::not_run_count(rows, "report.md lists") {
        let _ = writeln!(out, "{line}");
    }
    if text::any_thin(rows) {
        out.push_str(&format!("{}\n", text::thin_legend()));
    }
    for r in rows {
        if let Some(why) = r.over_saturated() {
            out.push_str(&format!("over-saturated: {}: {why}\n", r.data.label));
        }
        if let Some(note) = summary::truncation_note(r) {
            out.push_str(&format!("cut: {note}\n"));
        }
        if let Some(note) = summary::prompt_length_note(r) {
            out.push_str(&format!("prompt lengths: {note}\n"));
        }
        if let Some(note) = summary::stream_note(r) {
            out.push_str(&format!("stream: {note}\n"));
        }
        if let Some(note) = summary::usage_note(r) {
            out.push_str(&format!("usage: {note}\n"));
        }
        if let Some(note) = summary::prefix_cache_note(r) {
            out.push_str(&format!("prefix cache: {note}\n"));
        }
        if let Some(note) = overlap::shared_gpu_note(r) {
            out.push_str(&format!("shared GPU: {note}\n"));
        }
    }
    out.push_str(&text::answer_terminal(answers));
    out
}

/// The summary table's rows as JSON objects (`report --json`).
pub(crate) fn summary_json(rows: &[Vec<(&'static str, crate::trace::Cell)>]) -> serde_json::Value {
    use crate::trace::Cell;
    serde_json::Value::Array(
        rows.iter()
            .map(|r| {
                let mut m = serde_json::Map::new();
                for (k, c) in r {
                    let v = match c {
                        Cell::Str(s) => serde_json::json!(s),
                        Cell::F64(x) => serde_json::json!(x.filter(|x| x.is_finite())),
                        Cell::I64(x) => serde_json::json!(x),
                        Cell::Bool(x) => serde_json::json!(x),
                    };
                    m.insert(k.to_string(), v);
                }
                serde_json::Value::Object(m)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// report.md's runs table says what a figure rests on: the batches a batch run's
    /// percentiles count, and quality's interval over items.
    #[test]
    fn the_runs_table_says_batches_and_the_quality_interval() {
        let mut s = crate::record::stats::RunStats {
            requests: 48,
            ok: 48,
            ..Default::default()
        };
        assert_eq!(ok_cell(&s), "48/48");
        s.ttft_ms.groups = Some(3);
        assert_eq!(ok_cell(&s), "48/48 (3 batches)");
        s.ttft_ms.groups = Some(1);
        assert_eq!(ok_cell(&s), "48/48 (1 batch)");
        let mut r = Row::default();
        assert_eq!(quality_cell(&r), "–");
        r.data.metrics.insert("quality".into(), 0.444);
        assert_eq!(quality_cell(&r), "44.4%");
        r.quality_ci = Some((0.373, 0.512));
        assert_eq!(quality_cell(&r), "44.4% [37.3, 51.2]");
    }

    /// report.md's Failures section: a run's failure with the engine's log lines as a block
    /// (a `~~~` in them cannot close it), its failed requests by cause, then the runs not run
    /// yet on one line.
    #[test]
    fn the_failures_section_keeps_the_log_and_counts_failed_requests() {
        let mut failed = summary::RunData {
            label: "a synth single".into(),
            failure: Some("engine exited during startup\nerror: out of memory\n~~~ end\n\n".into()),
            ..Default::default()
        };
        let mut stats = crate::record::stats::RunStats::default();
        stats.failures.insert("HTTP 503".into(), 2);
        failed.stats = Some(stats);
        let rows = [
            Row {
                data: failed,
                ..Default::default()
            },
            Row {
                data: summary::RunData {
                    label: "b synth single".into(),
                    failure: Some(build::NOT_RUN_YET.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        ];
        assert_eq!(
            failures_section(&rows),
            "- `a synth single`: engine exited during startup\n\n  ~~~text\n  error: out of memory\n  ~ ~ ~ end\n  ~~~\n\n- `a synth single`: 2 request(s) failed: HTTP 503\n- `b synth single`: not run yet\n"
        );
        assert_eq!(failures_section(&rows[..0]), "None.\n");
    }

    /// The runs tables (terminal, report.md, report.html) list the runs that have a record; a
    /// partial sweep's others are one line under them, and a run whose configuration changed
    /// since it ran says so instead of FAILED.
    #[test]
    fn the_terminal_counts_runs_not_run_yet_under_its_table() {
        let row = |label: &str, failure: Option<&str>| Row {
            data: summary::RunData {
                label: label.into(),
                failure: failure.map(str::to_string),
                ..Default::default()
            },
            ..Default::default()
        };
        let rows = [
            row("a synth single", Some("engine exited during startup")),
            row("b synth single", Some(build::NOT_RUN_YET)),
            row("c synth single", Some(build::NOT_RUN_YET)),
            row(
                "d synth single",
                Some("not run yet as the sweep now says; … (changed: seed: 1 → 2)"),
            ),
        ];
        let t = terminal(&rows, &[]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].starts_with("a synth single  FAILED"), "{t}");
        assert!(
            lines[2].starts_with("d synth single  not run yet (changed)"),
            "{t}"
        );
        assert_eq!(
            lines[3],
            "2 runs not run yet (`bench360 apply` runs them; report.md lists them)"
        );
        assert_eq!(lines.len(), 4, "{t}");
        // report.md's and report.html's runs tables alike.
        let md = runs_section(&rows);
        assert!(
            md.contains("| FAILED: engine exited during startup |")
                && md.contains("| not run yet as the sweep now says; … (changed: seed: 1 → 2) |")
                && !md.contains("b synth single")
                && md.ends_with("\n\n2 runs not run yet (`bench360 apply` runs them; the Failures section lists them).\n"),
            "{md}"
        );
        let page = html::page("s", &rows, &[], &crate::spec::Slo::default(), None, &[]);
        assert!(
            page.contains(">FAILED: engine exited during startup<")
                && page.contains(">not run yet as the sweep now says;")
                && !page.contains("FAILED: not run yet")
                && page.contains("<p>2 runs not run yet (`bench360 apply` runs them; the Failures section lists them).</p>"),
            "{page}"
        );
        let one = terminal(&rows[1..2], &[]);
        assert!(
            one.ends_with("\n1 run not run yet (`bench360 apply` runs it; report.md lists it)\n"),
            "{one}"
        );
    }
}
