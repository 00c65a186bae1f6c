//! Building the report from the cache alone: for every run of the plan, what it recorded
//! (its summary, scores and traces), never recomputed from what the executor held in memory.

use std::path::{Path, PathBuf};

use petgraph::graph::NodeIndex;

use super::resolve::Read;
use super::summary::RunData;
use super::{markdown, terminal, ColdStart};
use crate::plan::Plan;
use crate::store::{RecordStatus, Store};
use crate::task;

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: PathBuf) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// A report's files, rendered.
pub(crate) struct ReportFiles {
    pub md: String,
    pub html: String,
    pub table: String,
    pub summary: Vec<Vec<(&'static str, crate::trace::Cell)>>,
}

/// A run's failure when its node has no record yet (the answer lists such configurations
/// together: [`super::text::exclusions`]).
pub(crate) const NOT_RUN_YET: &str = "not run yet";

/// Whether a run has no record yet and nothing else to show (a partial sweep's rest): the
/// failures list such runs on one line ([`super::text::not_run_failure`]) instead of one
/// each, and a configuration with other runs recorded is judged on those
/// ([`super::answer::Group::not_run`]).
pub(crate) fn not_run_yet(r: &super::summary::Row) -> bool {
    r.data.stats.is_none() && r.data.failure.as_deref() == Some(NOT_RUN_YET)
}

/// Whether a run has no record under its planned key: not run yet, or run as configured
/// before and not again since ("not run yet as the sweep now says…").
pub(crate) fn no_record(r: &super::summary::Row) -> bool {
    r.data.stats.is_none()
        && r.data
            .failure
            .as_deref()
            .is_some_and(|f| f.starts_with(NOT_RUN_YET))
}

fn run_data(store: &Store, plan: &Plan, spec: &crate::plan::RunSpec, read: &[Read]) -> RunData {
    let resolve = resolver(plan, read);
    let g = &plan.graph;
    let run_key = resolve(spec.node);
    let score_key = resolve(spec.score);
    let rec = store.record(&run_key);
    // A finished run whose files are not what was written is damage, not data.
    let damage = rec
        .as_ref()
        .filter(|r| r.status == RecordStatus::Finished)
        .and_then(|r| store.check_object(r, false).err());
    let finished = damage.is_none()
        && rec
            .as_ref()
            .is_some_and(|r| r.status == RecordStatus::Finished);
    let dir = store.object_dir(&run_key);
    let failure = match &rec {
        _ if damage.is_some() => damage
            .as_ref()
            .map(|d| format!("{d}; `bench360 apply` reruns it")),
        Some(r) if r.status == RecordStatus::Failed => r.cause.clone(),
        Some(r) if r.status == RecordStatus::Started => {
            Some("interrupted before it finished".into())
        }
        None => Some(match &read[spec.node.index()] {
            Read::Changed { changed } => format!(
                "not run yet as the sweep now says; the cache holds this run as configured before, not shown here ({changed})"
            ),
            _ => NOT_RUN_YET.into(),
        }),
        _ => None,
    };
    let d = &plan.deployments[spec.deployment];
    // When the run's node ran (its record's start and end), to tell runs that overlapped.
    let ran = rec.as_ref().and_then(|r| {
        let at = |s: &str| {
            humantime::parse_rfc3339_weak(s)
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64())
        };
        Some((at(&r.started_at)?, at(r.finished_at.as_deref()?)?))
    });
    let mut data = RunData {
        ran,
        label: g[spec.node].label.trim_start_matches("run ").to_string(),
        deployment: d.label.clone(),
        deployment_base: d.base.clone(),
        run_key: run_key.clone(),
        columns: Some(spec.columns.clone()),
        failure,
        coldstart: read_json(
            store
                .object_dir(&resolve(d.coldstart))
                .join("coldstart.json"),
        ),
        ..Default::default()
    };
    // Where it ran, as its run.json says — a failed run's too (over its error budget, or with
    // damaged files), whose repeat then counts against the configuration on that machine only.
    // Runs recorded before provenance was kept have none (shown as not recorded).
    let run_json = rec
        .as_ref()
        .and_then(|_| read_json::<serde_json::Value>(dir.join("run.json")));
    let field = |name: &str| run_json.as_ref().and_then(|v| v.get(name)).cloned();
    data.provenance = field("provenance").and_then(|v| serde_json::from_value(v).ok());
    if !finished {
        // A run failed over its error budget kept its trace: show its numbers beside the
        // failure.
        if rec.as_ref().is_some_and(|r| {
            r.status == RecordStatus::Failed
                && !r.objects.is_empty()
                && store.check_object(r, false).is_ok()
        }) {
            data.stats = read_json(dir.join("stats.json"));
        }
        return data;
    }
    data.stats = read_json(dir.join("stats.json"));
    data.telemetry = read_json(dir.join("telemetry.json"));
    data.stopped = field("stopped_at_margin").and_then(|v| serde_json::from_value(v).ok());
    data.engine_start = field("engine_start").and_then(|v| serde_json::from_value(v).ok());
    let score_rec = store.record(&score_key);
    data.metrics = score_rec
        .as_ref()
        .filter(|r| r.status == RecordStatus::Finished)
        .and_then(|_| read_json(store.object_dir(&score_key).join("metrics.json")))
        .unwrap_or_default();
    // A run whose outputs could not be scored is listed under failures, with the cause: its
    // quality is unknown, not zero.
    if let Some(r) = score_rec.filter(|r| r.status == RecordStatus::Failed) {
        data.failure = Some(format!(
            "scoring failed: {}",
            r.cause.as_deref().unwrap_or("no cause recorded")
        ));
    }
    let req = numeric(&dir.join("requests.parquet"), REQUEST_COLUMNS);
    let ok = col(&req, "ok");
    let start = request_series(&mut data, &req, &ok, &dir);
    itl(&mut data, &req, &ok, &dir);
    let scores_file = store.object_dir(&score_key).join("scores.parquet");
    let sc = numeric(&scores_file, &["score", "parsed", "request_id"]);
    scores(&mut data, &sc, &scores_file);
    data.truncation = truncation(&req, &ok, &dir.join("requests.parquet"), &sc);
    // Each request's sample id, read once for the two readers below.
    let ids = crate::trace::read_strings(&dir.join("requests.parquet"), &["sample_id"])
        .ok()
        .and_then(|mut m| m.remove("sample_id"));
    data.prompt_lengths = prompt_lengths(&req, &ok, ids.as_deref(), &dir);
    data.stream = stream_grain(&req, &ok);
    data.prefix_cache = prefix_cache(&req, ids.as_deref(), &dir);
    gpu_series(&mut data, &dir, start);
    data
}

/// The columns of requests.parquet the report reads.
const REQUEST_COLUMNS: &[&str] = &[
    "ok",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "scheduled_ns",
    "sent_ns",
    "end_ns",
    "request_id",
    "completion_tokens",
    "content_chunks",
    "first_reasoning_ns",
    "prompt_tokens",
];

type Columns = std::collections::BTreeMap<String, Vec<Option<f64>>>;

fn numeric(file: &std::path::Path, cols: &[&str]) -> Columns {
    crate::trace::read_numeric(file, cols).unwrap_or_default()
}

fn col(m: &Columns, k: &str) -> Vec<Option<f64>> {
    m.get(k).cloned().unwrap_or_default()
}

/// Latencies of the successful requests, requests in flight over time, sentences in the
/// outputs. Returns the first scheduled time (ns), the origin of the time series.
fn request_series(
    data: &mut RunData,
    req: &Columns,
    ok: &[Option<f64>],
    dir: &std::path::Path,
) -> f64 {
    let pick = |k: &str| -> Vec<f64> {
        col(req, k)
            .iter()
            .zip(ok)
            .filter(|(_, o)| **o == Some(1.0))
            .filter_map(|(v, _)| *v)
            .collect()
    };
    // Each value with its request's scheduled instant (the group it was sent in).
    let scheduled = col(req, "scheduled_ns");
    let pick_grouped = |k: &str| -> (Vec<f64>, Vec<i64>) {
        let values = col(req, k);
        if scheduled.len() != values.len() {
            return (pick(k), Vec::new());
        }
        values
            .iter()
            .zip(ok)
            .zip(&scheduled)
            .filter(|((_, o), _)| **o == Some(1.0))
            .filter_map(|((v, _), s)| Some(((*v)?, (*s)? as i64)))
            .unzip()
    };
    (data.ttft_ms, data.ttft_group) = pick_grouped("ttft_ms");
    (data.tpot_ms, data.tpot_group) = pick_grouped("tpot_ms");
    (data.e2e_ms, data.e2e_group) = pick_grouped("e2e_ms");
    let (ttft, e2e) = (col(req, "ttft_ms"), col(req, "e2e_ms"));
    if ttft.len() == ok.len() && e2e.len() == ok.len() {
        data.ok_latency = ttft
            .into_iter()
            .zip(e2e)
            .zip(ok)
            .filter(|(_, o)| **o == Some(1.0))
            .map(|(p, _)| p)
            .collect();
    }
    let start = scheduled
        .iter()
        .flatten()
        .fold(f64::INFINITY, |a, b| a.min(*b));
    // Requests in flight: +1 at send, −1 at end.
    let mut events: Vec<(f64, f64)> = col(req, "sent_ns")
        .iter()
        .zip(col(req, "end_ns"))
        .filter_map(|(s, e)| Some([(s.as_ref()? - start, 1.0), (e? - start, -1.0)]))
        .flatten()
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    // A step line: each change drawn as a vertical jump.
    let mut level = 0.0;
    for (t, delta) in events {
        data.inflight.push((t / 1e9, level));
        level += delta;
        data.inflight.push((t / 1e9, level));
    }
    if let Ok(outputs) = crate::trace::read_strings(&dir.join("requests.parquet"), &["output"]) {
        data.sentences = outputs["output"]
            .iter()
            .zip(ok)
            .filter(|(_, o)| **o == Some(1.0))
            .map(|(t, _)| crate::telemetry::energy::sentences(t.as_deref().unwrap_or("")))
            .sum();
    }
    start
}

/// Inter-token latencies: gaps between generated (content or reasoning) chunks of successful
/// requests.
fn itl(data: &mut RunData, req: &Columns, ok: &[Option<f64>], dir: &std::path::Path) {
    let ok_ids: std::collections::HashSet<i64> = col(req, "request_id")
        .iter()
        .zip(ok)
        .filter(|(_, o)| **o == Some(1.0))
        .filter_map(|(i, _)| i.map(|x| x as i64))
        .collect();
    let chunks = numeric(&dir.join("chunks.parquet"), &["request_id", "t_ns"]);
    let kinds =
        crate::trace::read_strings(&dir.join("chunks.parquet"), &["kind"]).unwrap_or_default();
    let mut last: std::collections::HashMap<i64, f64> = std::collections::HashMap::new();
    for ((id, t), k) in col(&chunks, "request_id")
        .iter()
        .zip(col(&chunks, "t_ns"))
        .zip(kinds.get("kind").cloned().unwrap_or_default())
    {
        let (Some(id), Some(t)) = (id.map(|x| x as i64), t) else {
            continue;
        };
        // Generated chunks, the answer's and the reasoning's: ITL as stats.json and every
        // table define it.
        if !matches!(k.as_deref(), Some("content" | "reasoning")) || !ok_ids.contains(&id) {
            continue;
        }
        if let Some(prev) = last.insert(id, t) {
            data.itl_ms.push((t - prev) / 1e6);
        }
    }
}

/// How often max-tokens cut the successful requests (`finish_reason` `length`), and the
/// scored answers' unparsed ones by cause. None without the finish reasons.
fn truncation(
    req: &Columns,
    ok: &[Option<f64>],
    requests_file: &std::path::Path,
    sc: &Columns,
) -> Option<crate::report::summary::Truncation> {
    let reasons = crate::trace::read_strings(requests_file, &["finish_reason"]).ok()?;
    let reasons = reasons.get("finish_reason")?;
    let ids = col(req, "request_id");
    let mut cut_ids = std::collections::HashSet::new();
    let mut t = crate::report::summary::Truncation::default();
    for ((id, reason), o) in ids.iter().zip(reasons).zip(ok) {
        if *o != Some(1.0) {
            continue;
        }
        t.ok += 1;
        if reason.as_deref() == Some("length") {
            t.cut += 1;
            if let Some(id) = id {
                cut_ids.insert(*id as i64);
            }
        }
    }
    for ((id, parsed), score) in col(sc, "request_id")
        .iter()
        .zip(col(sc, "parsed"))
        .zip(col(sc, "score"))
    {
        if score.is_none() {
            continue;
        }
        t.scored += 1;
        let cut = id.is_some_and(|i| cut_ids.contains(&(i as i64)));
        t.scored_cut += usize::from(cut);
        if parsed == Some(0.0) {
            if cut {
                t.unparsed_cut += 1;
            } else {
                t.unparsed_other += 1;
            }
        }
    }
    Some(t)
}

/// How coarsely the engine streamed: per successful request of two tokens or more and no
/// reasoning, its completion tokens over the stream events that carried its content. None when
/// no request qualifies (or the trace predates these columns).
fn stream_grain(req: &Columns, ok: &[Option<f64>]) -> Option<crate::report::summary::StreamGrain> {
    let (tokens, events) = (col(req, "completion_tokens"), col(req, "content_chunks"));
    let reasoning = col(req, "first_reasoning_ns");
    let mut per_event = Vec::new();
    let mut one_event = 0;
    for (i, o) in ok.iter().enumerate() {
        let (Some(1.0), Some(Some(t)), Some(Some(e))) = (o, tokens.get(i), events.get(i)) else {
            continue;
        };
        if *t < 2.0 || *e < 1.0 || reasoning.get(i).copied().flatten().is_some() {
            continue;
        }
        per_event.push(t / e);
        one_event += usize::from(*e == 1.0);
    }
    Some(crate::report::summary::StreamGrain {
        checked: per_event.len(),
        tokens_per_event_p50: crate::record::stats::pct_of(&mut per_event, 50.0)?,
        one_event,
    })
}

/// The prompt tokens the engine's prefix cache served over the run's window (first request
/// scheduled to last ended), from the engine's counter in engine_metrics.parquet, against the
/// requests' prompt tokens as the server counted them. None without such a counter.
fn prefix_cache(
    req: &Columns,
    ids: Option<&[Option<String>]>,
    dir: &std::path::Path,
) -> Option<crate::report::summary::PrefixCache> {
    let ids = ids?;
    let values = |k: &str| col(req, k).into_iter().flatten();
    let start = values("scheduled_ns").reduce(f64::min)?;
    let end = values("end_ns").reduce(f64::max)?;
    let prompt: f64 = values("prompt_tokens").sum();
    let file = dir.join("engine_metrics.parquet");
    let names = crate::trace::read_strings(&file, &["metric"]).ok()?;
    let nums = numeric(&file, &["t_ns", "value"]);
    let scrapes: Vec<(f64, &str, f64)> = names
        .get("metric")?
        .iter()
        .zip(col(&nums, "t_ns"))
        .zip(col(&nums, "value"))
        .filter_map(|((m, t), v)| {
            let m = m.as_deref()?;
            crate::report::summary::CACHED_COUNTERS
                .contains(&m)
                .then_some((t?, m, v?))
        })
        .collect();
    let distinct = ids
        .iter()
        .flatten()
        .collect::<std::collections::HashSet<_>>()
        .len();
    crate::report::summary::prefix_cache(&scrapes, (start, end), prompt, (ids.len(), distinct))
}

/// Synthetic runs: each successful request's prompt tokens as the server counted them
/// (`usage`) against the target its prompt was written for (`prompts.jsonl`). None for runs
/// without targets or without the server's counts.
fn prompt_lengths(
    req: &Columns,
    ok: &[Option<f64>],
    ids: Option<&[Option<String>]>,
    dir: &std::path::Path,
) -> Option<crate::report::summary::PromptLengths> {
    let text = std::fs::read_to_string(dir.join("prompts.jsonl")).ok()?;
    let targets: std::collections::HashMap<String, i64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            Some((
                v.get("sample_id")?.as_str()?.to_string(),
                v.get("target_prompt_tokens")?.as_i64()?,
            ))
        })
        .collect();
    if targets.is_empty() {
        return None;
    }
    let ids = ids?;
    let counted = col(req, "prompt_tokens");
    let mut p = crate::report::summary::PromptLengths::default();
    for ((id, n), o) in ids.iter().zip(&counted).zip(ok) {
        let (Some(id), Some(n), Some(1.0)) = (id, n, o) else {
            continue;
        };
        let Some(target) = targets.get(id) else {
            continue;
        };
        p.checked += 1;
        let d = *n as i64 - target;
        if d != 0 {
            p.differ += 1;
            if d.abs() > p.largest.abs() {
                p.largest = d;
            }
        }
    }
    (p.checked > 0).then_some(p)
}

/// Per-request scores and the dataset item each scored (quality's interval resamples items).
fn scores(data: &mut RunData, sc: &Columns, scores_file: &std::path::Path) {
    let scores = col(sc, "score");
    let ids: Vec<Option<String>> = crate::trace::read_strings(scores_file, &["sample_id"])
        .map(|mut m| m.remove("sample_id").unwrap_or_default())
        .unwrap_or_default();
    data.scores = scores.iter().flatten().copied().collect();
    if ids.len() == scores.len() {
        data.score_samples = scores
            .iter()
            .zip(ids)
            .filter(|(s, _)| s.is_some())
            .map(|(_, id)| id.unwrap_or_default())
            .collect();
    }
}

/// GPU power, memory and utilization over the window, summed over devices per sample time.
fn gpu_series(data: &mut RunData, dir: &std::path::Path, start: f64) {
    let tele = numeric(
        &dir.join("telemetry.parquet"),
        &["t_ns", "power_w", "mem_used_mb", "util_pct"],
    );
    let sources =
        crate::trace::read_strings(&dir.join("telemetry.parquet"), &["source"]).unwrap_or_default();
    let mut power: std::collections::BTreeMap<i64, f64> = Default::default();
    let mut mem: std::collections::BTreeMap<i64, f64> = Default::default();
    let mut util: std::collections::BTreeMap<i64, (f64, f64)> = Default::default();
    for ((((t, w), m), u), src) in col(&tele, "t_ns")
        .iter()
        .zip(col(&tele, "power_w"))
        .zip(col(&tele, "mem_used_mb"))
        .zip(col(&tele, "util_pct"))
        .zip(sources.get("source").cloned().unwrap_or_default())
    {
        let (Some(t), Some("gpu")) = (t, src.as_deref()) else {
            continue;
        };
        // Samples of all GPUs in one tick land within a few ms: bucket them by 10 ms.
        let bucket = ((t - start) / 1e7).round() as i64;
        if let Some(w) = w {
            *power.entry(bucket).or_default() += w;
        }
        if let Some(m) = m {
            *mem.entry(bucket).or_default() += m / 1000.0;
        }
        if let Some(u) = u {
            let e = util.entry(bucket).or_default();
            e.0 += u;
            e.1 += 1.0;
        }
    }
    data.power = power
        .into_iter()
        .map(|(b, w)| (b as f64 / 100.0, w))
        .collect();
    data.gpu_mem_gb = mem
        .into_iter()
        .map(|(b, m)| (b as f64 / 100.0, m))
        .collect();
    data.gpu_util = util
        .into_iter()
        .map(|(b, (sum, k))| (b as f64 / 100.0, sum / k))
        .collect();
}

/// Builds the report from the cache alone: for every run of the plan, its recorded results
/// (under its planned key, or the same configuration's record made elsewhere:
/// [`super::resolve`]), and the cold starts.
pub(crate) fn build_report(store: &Store, plan: &Plan, sweep: &crate::spec::Sweep) -> ReportFiles {
    let read = super::resolve::reads(store, plan);
    let rows = rows_as_read(store, plan, sweep, &read);
    report_files(store, plan, sweep, rows, &read)
}

/// A node's key as the report reads it ([`super::resolve`]): the planned key, or the same
/// configuration's record made elsewhere.
fn resolver<'a>(plan: &'a Plan, read: &'a [Read]) -> impl Fn(NodeIndex) -> String + 'a {
    move |i| match &read[i.index()] {
        Read::Elsewhere { key, .. } => key.clone(),
        _ => plan.graph[i].key.clone(),
    }
}

/// Every run of the plan as the report sees it (`bench360 compare` reads the same rows).
pub(crate) fn summary_rows(
    store: &Store,
    plan: &Plan,
    sweep: &crate::spec::Sweep,
) -> Vec<crate::report::summary::Row> {
    rows_as_read(store, plan, sweep, &super::resolve::reads(store, plan))
}

/// Every run of the plan: what it recorded, read as `read` says.
fn rows_as_read(
    store: &Store,
    plan: &Plan,
    sweep: &crate::spec::Sweep,
    read: &[Read],
) -> Vec<crate::report::summary::Row> {
    let primaries: Vec<&'static str> = (0..sweep.tasks.len())
        .map(|t| task::of(sweep, t).primary())
        .collect();
    let mut all: Vec<crate::report::summary::RunData> = plan
        .runs
        .iter()
        .map(|spec| {
            let mut data = run_data(store, plan, spec, read);
            data.primary = primaries[spec.config.task].to_string();
            data.scoring = sweep.tasks[spec.config.task].scoring;
            if data.scoring == crate::spec::Scoring::Logprobs {
                // One token is the budget by design: nothing is cut.
                data.truncation = None;
            }
            data
        })
        .collect();
    crate::report::summary::deployment_memory(&mut all);
    all.into_iter()
        .map(|data| crate::report::summary::derive(data, &sweep.slo, sweep.cost.as_ref()))
        .collect()
}

fn report_files(
    store: &Store,
    plan: &Plan,
    sweep: &crate::spec::Sweep,
    mut rows: Vec<crate::report::summary::Row>,
    read: &[Read],
) -> ReportFiles {
    let answers = crate::report::answer::answers(&rows, &sweep.slo);
    crate::report::answer::annotate(&mut rows, &answers);
    let resolve = resolver(plan, read);
    let coldstarts: Vec<(String, Option<ColdStart>)> = plan
        .deployments
        .iter()
        .map(|d| {
            (
                d.label.clone(),
                read_json(
                    store
                        .object_dir(&resolve(d.coldstart))
                        .join("coldstart.json"),
                ),
            )
        })
        .collect();
    let coldstarts = crate::report::coldstart::with_hosts_of_runs(coldstarts, &rows);
    ReportFiles {
        md: markdown(
            &plan.sweep,
            super::resolve::note(plan, read).as_deref(),
            &coldstarts,
            &rows,
            &answers,
        ),
        html: crate::report::html::page(
            &plan.sweep,
            &rows,
            &answers,
            &sweep.slo,
            sweep.cost.as_ref(),
            &coldstarts,
        ),
        table: terminal(&rows, &answers),
        summary: crate::report::summary::table(&rows),
    }
}

/// Writes `reports/<sweep>/`: report.md, report.html, summary.parquet, summary.csv (each
/// atomically); returns the HTML report's path.
pub(crate) fn publish_report(
    store: &Store,
    sweep: &str,
    files: &ReportFiles,
) -> std::io::Result<PathBuf> {
    let dir = store.report_dir(sweep);
    std::fs::create_dir_all(&dir)?;
    write_report_files(&dir, files)?;
    Ok(dir.join("report.html"))
}

pub(crate) fn write_report_files(dir: &Path, files: &ReportFiles) -> std::io::Result<()> {
    crate::store::write_atomic(&dir.join("report.md"), files.md.as_bytes())?;
    crate::store::write_atomic(&dir.join("report.html"), files.html.as_bytes())?;
    // Unique temp names: the report job and a `bench360 report` elsewhere may write at once.
    let (parquet, csv) = (dir.join("summary.parquet"), dir.join("summary.csv"));
    let (tp, tc) = (
        crate::store::temp_beside(&parquet),
        crate::store::temp_beside(&csv),
    );
    let written = crate::trace::write_rows(&tp, &tc, &files.summary)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|()| std::fs::rename(&tp, &parquet))
        .and_then(|()| std::fs::rename(&tc, &csv));
    if written.is_err() {
        let _ = std::fs::remove_file(&tp);
        let _ = std::fs::remove_file(&tc);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ChunkKind, ChunkRecord};

    /// The HTML report's ITL histogram reads the gaps between generated chunks, the answer's
    /// and the reasoning's, of successful requests: ITL as stats.json defines it.
    #[test]
    fn itl_gaps_span_reasoning_and_answer_chunks_of_successful_requests() {
        let dir = tempfile::tempdir().unwrap();
        let chunk = |request_id, index, ms: i64, kind| ChunkRecord {
            request_id,
            index,
            t_ns: ms * 1_000_000,
            kind,
            chars: 4,
            tokens: None,
        };
        let chunks = [
            chunk(1, 0, 0, ChunkKind::Empty),
            chunk(1, 1, 10, ChunkKind::Reasoning),
            chunk(1, 2, 20, ChunkKind::Reasoning),
            chunk(1, 3, 35, ChunkKind::Content),
            chunk(1, 4, 40, ChunkKind::Content),
            chunk(1, 5, 41, ChunkKind::Empty),
            // A failed request's gaps are not the server's ITL.
            chunk(2, 0, 0, ChunkKind::Content),
            chunk(2, 1, 500, ChunkKind::Content),
        ];
        crate::trace::write_chunks(
            &dir.path().join("chunks.parquet"),
            "k",
            &crate::record::Columns::default(),
            &chunks,
        )
        .unwrap();
        let req: Columns = [("request_id".to_string(), vec![Some(1.0), Some(2.0)])].into();
        let mut data = RunData::default();
        itl(&mut data, &req, &[Some(1.0), Some(0.0)], dir.path());
        assert_eq!(data.itl_ms, [10.0, 15.0, 5.0]);
    }
}
