//! One measured run on a running engine: its samples and client, the idle baseline, the
//! workload under telemetry, and its object (traces, outputs, stats, run.json, its part of
//! the engine log). The rest of a deployment's lifetime is in `node.rs`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::journal::*;
use super::node::{bytes_of, copy_log_since, write_json};
use super::Executor;
use crate::client::HttpClient;
use crate::engine::RunningEngine;
use crate::plan;
use crate::record::stats;
use crate::record::RunClock;
use crate::record::Sample;
use crate::telemetry;
use crate::workload;

/// What a finished run writes into its object.
struct RunFiles<'a> {
    key: &'a str,
    spec: &'a plan::RunSpec,
    utc_ns: i64,
    outcome: &'a workload::Outcome,
    samples: &'a [Sample],
    stats: &'a stats::RunStats,
    telemetry: &'a telemetry::Summary,
    collected: &'a telemetry::Collected,
    clock: &'a RunClock,
    served_model: &'a str,
    log: &'a Path,
    log_pos: u64,
    engine_start: Option<&'a crate::record::EngineStart>,
}

impl Executor<'_> {
    pub(super) async fn run<E: RunningEngine>(
        &mut self,
        r: usize,
        engine: &mut E,
        d: usize,
        start: Option<&crate::record::EngineStart>,
        log: &Path,
        log_pos: u64,
    ) -> u64 {
        let spec = self.plan.runs[r].clone();
        let node = spec.node;
        let key = self.plan.graph[node].key.clone();
        let label = self.plan.graph[node].label.clone();
        let t0 = Instant::now();
        let Some((samples, client, replay)) = self.prepare_run(&spec, engine, d).await else {
            return log_pos;
        };
        let j = Journal::start(self.store, self.plan, node);
        let bar = self.progress.run_bar(
            &label,
            workload::expected_requests(&spec.config.instance, samples.len()),
        );
        let clock = RunClock::start();
        let engine_def = &self.sweep.engines[self.plan.deployments[d].at.engine];
        let targets = telemetry::Targets {
            engine_pid: engine.pid(),
            gpus: engine_def.gpus.clone(),
            metrics_url: engine_def
                .catalog
                .metrics_path
                .map(|p| format!("{}{p}", engine.base_url())),
            metrics_auth: engine.api_key(),
        };
        let tcfg = self.sweep.telemetry;
        let collector = telemetry::Collector::start(&tcfg, clock, &targets);
        // Idle baseline: the engine loaded, no request in flight.
        let idle_start = clock.ns(Instant::now());
        let cancelled_in_idle = tokio::select! {
            _ = tokio::time::sleep(tcfg.idle) => false,
            _ = self.cancel.cancelled() => true,
        };
        let idle_end = clock.ns(Instant::now());
        let outcome = if cancelled_in_idle {
            workload::Outcome {
                cancelled: true,
                ..Default::default()
            }
        } else {
            workload::run(
                client,
                &spec.config.instance,
                samples.clone(),
                self.sweep.seed ^ u64::from(spec.config.repeat),
                clock,
                self.cancel.clone(),
                bar.clone(),
                &replay,
                self.sweep.scenarios[spec.config.scenario].stop.as_ref(),
            )
            .await
        };
        let collected = tokio::task::spawn_blocking(move || collector.stop())
            .await
            .unwrap_or_default();
        bar.finish_and_clear();
        if outcome.cancelled {
            // Nothing half-recorded: the `started` record stays, so the next apply reruns it.
            self.progress
                .say(&format!("■ {label}: interrupted, not recorded"));
            return log_pos;
        }
        if let Some(cause) = engine.exited() {
            let cause = format!(
                "{cause} during the run; last log lines:\n{}",
                crate::engine::tail_of(log, 10)
            );
            j.failed(&cause);
            self.fail(node, cause);
            return log_pos;
        }
        let mut run_stats = stats::run_stats(&outcome.requests, &outcome.chunks);
        run_stats.steady = load_of(&spec.config.instance).and_then(|load| {
            crate::record::steady::analyze(&outcome.requests, &outcome.chunks, load)
        });
        let window = stats::window(&outcome.requests)
            .unwrap_or_else(|| (idle_end, clock.ns(Instant::now())));
        let model_bytes =
            plan::weights_path(self.sweep, self.plan.deployments[d].at).and_then(|p| bytes_of(&p));
        let mut tsum = telemetry::summarize(
            &collected,
            &tcfg,
            (idle_end > idle_start && !tcfg.idle.is_zero()).then_some((idle_start, idle_end)),
            window,
            &outcome.requests,
            model_bytes,
        );
        tsum.steady_energy_j = run_stats.steady.as_ref().and_then(|st| {
            telemetry::energy_between(
                &collected,
                &tcfg,
                &tsum.energy_source,
                (st.start_ns, st.end_ns),
            )
        });
        let utc_ns = clock.utc_anchor.duration_since(std::time::UNIX_EPOCH);
        let files = RunFiles {
            key: &key,
            spec: &spec,
            utc_ns: utc_ns.map(|d| d.as_nanos() as i64).unwrap_or(0),
            outcome: &outcome,
            samples: &samples,
            stats: &run_stats,
            telemetry: &tsum,
            collected: &collected,
            clock: &clock,
            served_model: engine.served_model(),
            log,
            log_pos,
            engine_start: start,
        };
        let (written, new_pos) = self.write_run(&files);
        let summary = json!({"ok": run_stats.ok, "failed": run_stats.failed, "ttft_p50_ms": run_stats.ttft_ms.p50, "output_tokens_per_s": run_stats.output_tokens_per_s, "energy_source": tsum.energy_source, "energy_j": tsum.energy_j});
        if run_stats.failed > 0 {
            self.progress.say(&format!(
                "  {label}: {} of {} requests failed",
                run_stats.failed, run_stats.requests
            ));
        }
        match (
            written,
            over_budget(&run_stats, self.sweep.error_budget(spec.config.scenario)),
        ) {
            (Ok(objects), Some(cause)) => {
                j.failed_with_evidence(&cause, summary, objects);
                self.fail(node, cause);
            }
            (written, _) => {
                self.conclude(node, j, t0, written.map(|objects| (summary, objects)));
            }
        }
        new_pos
    }

    /// What a run needs before it starts: its task's samples (written with the engine's
    /// tokenizer for a synthetic task), a client, the replay trace. None: the run failed (and
    /// is recorded so) before it started.
    async fn prepare_run<E: RunningEngine>(
        &mut self,
        spec: &plan::RunSpec,
        engine: &E,
        d: usize,
    ) -> Option<(Arc<Vec<Sample>>, Arc<HttpClient>, Vec<workload::TraceItem>)> {
        let node = spec.node;
        let samples = match self
            .samples_for(spec.config.task, d, Some(&spec.columns), engine)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                let e = e.to_string();
                let j = Journal::start(self.store, self.plan, node);
                j.failed(&e);
                self.fail(node, e);
                return None;
            }
        };
        let mode = self.sweep.tasks[spec.config.task].mode;
        let client = match self.client(engine, d, spec.config.sampling.clone(), mode) {
            Ok(c) => Arc::new(c),
            Err(e) => {
                self.fail_recorded(node, e.to_string());
                return None;
            }
        };
        let replay = match &spec.config.instance {
            crate::spec::expand::ScenarioInstance::Replay { trace, .. } => {
                match workload::load_trace(Path::new(trace)) {
                    Ok(items) => items,
                    Err(e) => {
                        self.fail_recorded(node, e.to_string());
                        return None;
                    }
                }
            }
            _ => Vec::new(),
        };
        Some((samples, client, replay))
    }

    /// Writes a run's object (traces, outputs, stats, telemetry, run.json, its part of the
    /// engine log): the files written, and how far the engine log has been copied.
    fn write_run(
        &self,
        f: &RunFiles,
    ) -> (
        Result<std::collections::BTreeMap<String, crate::store::ObjectFile>, NodeError>,
        u64,
    ) {
        let mut new_pos = f.log_pos;
        let written = self.write_object(f.key, |tmp| {
            let pq = table_io("write the run's Parquet traces");
            let js = std_io("write the run's files");
            crate::trace::write_requests(&tmp.join("requests.parquet"), f.key, &f.spec.columns, f.utc_ns, &f.outcome.requests).map_err(&pq)?;
            crate::trace::write_chunks(&tmp.join("chunks.parquet"), f.key, &f.spec.columns, &f.outcome.chunks).map_err(&pq)?;
            let outputs: Vec<String> = f.outcome
                .requests
                .iter()
                .map(|q| {
                    let mut o = json!({"request_id": q.id, "sample": q.sample, "sample_id": q.sample_id, "ok": q.ok(), "output": q.output});
                    if let Some(t) = &q.top_logprobs {
                        o["top_logprobs"] = json!(t);
                    }
                    o.to_string()
                })
                .collect();
            std::fs::write(tmp.join("outputs.jsonl"), outputs.join("\n") + "\n").map_err(&js)?;
            if self.sweep.tasks[f.spec.config.task].synthetic.is_some() || f.samples.iter().any(|s| !s.history.is_empty()) {
                // What each synthetic request sent, with its targets; and the earlier turns of
                // conversations (`turns`, `fewshot-as-turns`), which outputs.jsonl does not show.
                let prompts: Vec<String> = f.samples.iter().enumerate().map(|(i, s)| json!({"sample": i, "sample_id": s.id, "target_prompt_tokens": s.extra.get("target_prompt_tokens").and_then(|v| v.parse::<u64>().ok()), "output_tokens": s.extra.get("output_tokens").and_then(|v| v.parse::<u64>().ok()), "system": s.system, "history": s.history, "prompt": s.prompt}).to_string()).collect();
                std::fs::write(tmp.join("prompts.jsonl"), prompts.join("\n") + "\n").map_err(&js)?;
            }
            write_json(&tmp.join("stats.json"), f.stats).map_err(&js)?;
            if let Some(sat) = &f.outcome.saturation {
                write_json(&tmp.join("saturation.json"), sat).map_err(&js)?;
            }
            write_json(&tmp.join("telemetry.json"), f.telemetry).map_err(&js)?;
            crate::trace::write_telemetry(&tmp.join("telemetry.parquet"), f.key, &f.spec.columns, &f.collected.samples).map_err(&pq)?;
            if !f.collected.prom.is_empty() {
                crate::trace::write_engine_metrics(&tmp.join("engine_metrics.parquet"), f.key, &f.spec.columns, &f.collected.prom).map_err(&pq)?;
            }
            write_json(&tmp.join("run.json"), &json!({"columns": f.spec.columns, "provenance": self.provenance(f.spec), "run_start_utc": humantime::format_rfc3339_nanos(f.clock.utc_anchor).to_string(), "served_model": f.served_model, "stopped_early": f.outcome.stopped_early, "stopped_at_margin": f.outcome.stopped, "connections": if self.sweep.defaults.reuse_connections { "reuse" } else { "new" }, "engine_start": f.engine_start})).map_err(&js)?;
            new_pos = copy_log_since(f.log, f.log_pos, &tmp.join("engine.log"));
            Ok(())
        });
        (written, new_pos)
    }
}

impl Executor<'_> {
    /// What the run ran on (record::provenance): bench360's build, the engine's version from
    /// its pull, this machine and the deployment's GPUs now, the weights, datasets and sweep
    /// file as the plan hashed them.
    fn provenance(&self, spec: &plan::RunSpec) -> crate::record::provenance::Provenance {
        let g = &self.plan.graph;
        let dep = &self.plan.deployments[spec.deployment];
        let pull: Option<serde_json::Value> =
            std::fs::read(self.store.object_dir(&g[dep.pull].key).join("pull.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
        let engine_version = pull
            .as_ref()
            .and_then(|p| p.get("version"))
            .and_then(|v| v.as_str())
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        let cold = &g[dep.coldstart].inputs;
        let model_path = cold.get("model.path").cloned();
        let (bench360_version, bench360_commit) = crate::record::provenance::bench360_build();
        crate::record::provenance::Provenance {
            bench360_version: bench360_version.into(),
            bench360_commit: bench360_commit.into(),
            engine_version,
            engine_artifact: g[dep.pull].inputs.get("engine.artifact").cloned(),
            host: crate::host::host_info(),
            gpus: crate::telemetry::gpu::describe(
                self.sweep.engines[dep.at.engine].gpus.as_deref(),
            ),
            model_bytes: model_path.as_deref().and_then(|p| bytes_of(Path::new(p))),
            model_path,
            model_hash: cold.get("model.weights").cloned(),
            datasets: g[spec.node]
                .inputs
                .iter()
                .filter_map(|(k, v)| {
                    Some((k.strip_prefix("task.dataset.")?.to_string(), v.clone()))
                })
                .collect(),
            sweep_file: self.sweep.source.name.clone(),
            sweep_hash: blake3::hash(self.sweep.source.text.as_bytes())
                .to_hex()
                .to_string(),
            seed: self.sweep.seed,
            inherited_env: crate::plan::inherited::inherited(
                &self.sweep.engines[dep.at.engine],
                crate::plan::inherited::process_vars(),
            ),
        }
    }
}

/// How a scenario loads the engine, for the steady-state rule; None for a saturation search
/// (its probes are judged one by one).
fn load_of(i: &crate::spec::expand::ScenarioInstance) -> Option<crate::record::steady::Load> {
    use crate::record::steady::Load;
    use crate::spec::expand::ScenarioInstance as S;
    Some(match i {
        S::Single { .. } => Load::Closed(1),
        S::Batch { batch_size, .. } => Load::Closed(*batch_size as usize),
        S::Concurrency { concurrency, .. } => Load::Closed(*concurrency as usize),
        S::Offline { .. } => Load::Closed(usize::MAX),
        S::Server { .. } | S::Rate { .. } | S::Replay { .. } => Load::Open,
        S::Saturation(_) => return None,
    })
}
