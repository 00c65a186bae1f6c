//! The work of each node kind: pull, cold start + warmup + runs in one engine lifetime,
//! score, report. Each writes its outputs into a temp dir, renames it into `objects/`, and
//! only then renames its `finished` record into place.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use petgraph::graph::NodeIndex;
use serde_json::json;

use super::journal::*;

use super::Executor;
use crate::client::HttpClient;
use crate::engine::{LaunchSpec, Launcher, RunningEngine};
use crate::plan::facts;
use crate::plan::{self, Plan, Status};
use crate::record::{Sample, Score};
use crate::report::{build_report, publish_report, write_report_files, ColdStart, ReportFiles};
use crate::spec::{Launch, ModelSource};
use crate::store::Store;
use crate::task;

pub(super) fn write_json(path: &Path, v: &impl serde::Serialize) -> std::io::Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(v).expect("serializable"))
}

pub(super) fn bytes_of(path: &Path) -> Option<u64> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_file() {
        return Some(meta.len());
    }
    let mut total = 0;
    for e in std::fs::read_dir(path).ok()?.flatten() {
        total += bytes_of(&e.path()).unwrap_or(0);
    }
    Some(total)
}

/// What a running server says of its version, where it says it (provenance of an endpoint
/// engine, which bench360 cannot ask with `--version`): vLLM and Ollama `/version` (and
/// `/api/version`), TGI `/info`, SGLang `/get_server_info`, llama.cpp `/props`'s
/// `build_info`. None when no path answers within two seconds.
async fn endpoint_version(url: &str, api_key: Option<&str>) -> Option<String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    for (path, field) in [
        ("/version", "version"),
        ("/api/version", "version"),
        ("/info", "version"),
        ("/get_server_info", "version"),
        ("/props", "build_info"),
    ] {
        let mut req = client.get(format!("{url}{path}"));
        if let Some(k) = api_key {
            req = req.bearer_auth(k);
        }
        let Ok(resp) = req.send().await else {
            continue;
        };
        if !resp.status().is_success() {
            continue;
        }
        let body: Option<serde_json::Value> = resp.json().await.ok();
        if let Some(v) = body
            .as_ref()
            .and_then(|b| b.get(field))
            .and_then(|v| v.as_str())
        {
            return Some(format!("{v} ({path})"));
        }
    }
    None
}

/// Copies the part of the engine log written since `from` into `dest`; returns the new end.
pub(super) fn copy_log_since(log: &Path, from: u64, dest: &Path) -> u64 {
    let Ok(mut f) = std::fs::File::open(log) else {
        return from;
    };
    let _ = f.seek(SeekFrom::Start(from));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let _ = std::fs::write(dest, &buf);
    from + buf.len() as u64
}

impl Executor<'_> {
    /// Writes a node's object: `fill` writes its files into a fresh temp folder; then every
    /// file and folder is fsynced and hashed and the folder renamed into `objects/<key>/`. On
    /// any failure the temp folder is removed and nothing is left half-written.
    pub(super) fn write_object(
        &self,
        key: &str,
        fill: impl FnOnce(&Path) -> Result<(), NodeError>,
    ) -> Result<Objects, NodeError> {
        write_object(self.store, key, fill)
    }

    /// Ends a node: `finished` with its object's file list, or `failed` with the cause.
    pub(super) fn conclude(
        &mut self,
        i: NodeIndex,
        mut j: Journal,
        t0: Instant,
        result: Result<(serde_json::Value, Objects), NodeError>,
    ) -> bool {
        let done = result.and_then(|(outputs, objects)| {
            j.finish(outputs, objects)
                .map_err(std_io("write the node's record"))
        });
        match done {
            Ok(()) => {
                self.succeed(i, t0);
                true
            }
            Err(e) => {
                let cause = e.to_string();
                j.failed(&cause);
                self.fail(i, cause);
                false
            }
        }
    }

    pub(super) async fn pull(&mut self, i: NodeIndex) {
        let engine_name = self.plan.graph[i]
            .label
            .trim_start_matches("pull ")
            .to_string();
        let engine = self
            .sweep
            .engines
            .iter()
            .find(|e| e.base.value == engine_name)
            .expect("pull of a sweep engine block")
            .clone();
        let j = Journal::start(self.store, self.plan, i);
        let t0 = Instant::now();
        let result: Result<serde_json::Value, NodeError> = match &engine.launch {
            Launch::Process { binary } => match facts::resolve_binary(binary) {
                Ok(path) => {
                    let entry = engine.catalog;
                    let out = tokio::time::timeout(
                        Duration::from_secs(30),
                        tokio::process::Command::new(&path)
                            .args(entry.version_args)
                            // The engine's own environment (e.g. PYTHONPATH of a carried
                            // Python engine), so the probe sees what the engine will.
                            .envs(engine.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                            .kill_on_drop(true)
                            .output(),
                    )
                    .await;
                    let version = match out {
                        Ok(Ok(o)) => {
                            let text = format!(
                                "{}{}",
                                String::from_utf8_lossy(&o.stdout),
                                String::from_utf8_lossy(&o.stderr)
                            );
                            text.lines()
                                .find(|l| l.contains("version"))
                                .unwrap_or(text.lines().next().unwrap_or(""))
                                .trim()
                                .to_string()
                        }
                        Ok(Err(e)) => format!("unknown ({e})"),
                        Err(_) => "unknown (version command timed out)".into(),
                    };
                    Ok(
                        json!({"binary": path, "artifact": self.plan.graph[i].inputs.get("engine.artifact"), "version": version}),
                    )
                }
                Err(e) => Err(NodeError::Failed(e.to_string())),
            },
            Launch::Endpoint {
                url, api_key_env, ..
            } => {
                let key = api_key_env.as_deref().and_then(|v| std::env::var(v).ok());
                let version = endpoint_version(url, key.as_deref()).await;
                Ok(json!({"endpoint": url, "version": version}))
            }
            Launch::Docker {
                image, tag, pull, ..
            } => {
                let reference = crate::engine::docker::reference(image, tag);
                let pulled = self.opts.pulls.get(&reference).cloned();
                match crate::engine::docker::connect().await {
                    Err(e) => Err(e.into()),
                    Ok(d) => match crate::engine::docker::inspect_local(&d, &reference).await {
                        Ok(Some(facts)) => Ok(json!({
                            "image": reference,
                            "image_id": facts.id,
                            "repo_digests": facts.repo_digests,
                            "version": facts.version,
                            "pull_policy": pull,
                            "pulled_s": pulled.and_then(|p| p.ok()),
                        })),
                        Ok(None) => Err(NodeError::Failed(match pulled {
                            Some(Err(cause)) => cause.to_string(),
                            _ => format!(
                                "image {reference} is not present locally and was not pulled"
                            ),
                        })),
                        Err(e) => Err(e.into()),
                    },
                }
            }
        };
        let key = self.plan.graph[i].key.clone();
        let result = result.and_then(|outputs| {
            let objects = self.write_object(&key, |tmp| {
                write_json(&tmp.join("pull.json"), &outputs).map_err(std_io("write pull.json"))
            })?;
            Ok((outputs, objects))
        });
        match result {
            Ok(done) => {
                self.conclude(i, j, t0, Ok(done));
            }
            Err(e) => {
                let e = e.to_string();
                j.failed(&e);
                self.fail(i, e);
            }
        }
    }

    fn samples_of(&mut self, task: usize) -> Result<Arc<Vec<Sample>>, NodeError> {
        if let Some(s) = self.samples.get(&task) {
            return Ok(s.clone());
        }
        let def = &self.sweep.tasks[task];
        let s = task::of(self.sweep, task).load(self.sweep.seed)?;
        if s.is_empty() {
            return Err(format!("task `{}` has no samples", def.name.value).into());
        }
        let s = Arc::new(s);
        self.samples.insert(task, s.clone());
        Ok(s)
    }

    /// The samples a run sends: the task's, or for a synthetic task, their text written with
    /// this deployment's tokenizer (once per deployment; once per run identity — `run`, its
    /// scenario kind, parameters and repeat — where the task writes `fresh-prompts`).
    pub(super) async fn samples_for(
        &mut self,
        task: usize,
        d: usize,
        run: Option<&crate::record::Columns>,
        engine: &impl RunningEngine,
    ) -> Result<Arc<Vec<Sample>>, NodeError> {
        let base = self.samples_of(task)?;
        let def = &self.sweep.tasks[task];
        let Some(syn) = &def.synthetic else {
            return Ok(base);
        };
        // A run of a `fresh-prompts` task writes its own text: another seed for its streams,
        // from what its key holds (the task's settings, the scenario, its parameters, the
        // repeat), so that two such tasks of other lengths do not share their text either.
        let identity = run.filter(|_| syn.fresh_prompts).map(|c| {
            format!(
                "fresh-prompts/{}/{}/{}/{}",
                serde_json::to_string(syn).unwrap_or_default(),
                c.scenario_kind,
                c.scenario_params,
                c.repeat
            )
        });
        let seed = match &identity {
            Some(id) => crate::record::rng::SplitMix64::derive(self.sweep.seed, id).next_u64(),
            None => self.sweep.seed,
        };
        let at = (task, d, identity);
        if let Some(s) = self.materialized.get(&at) {
            return Ok(s.clone());
        }
        let e = &self.sweep.engines[self.plan.deployments[d].at.engine];
        let api = def.mode.unwrap_or(e.api);
        let tok = crate::client::tokenize::ServerTokenizer::connect(
            engine.base_url(),
            engine.served_model(),
            engine.api_key(),
            e.catalog.tokenize,
        )
        .await
        .map_err(|e| NodeError::Failed(format!("synthetic prompts: {e}")))?;
        self.progress.say(&format!(
            "  writing {} synthetic prompts of task `{}` with the engine's tokenizer",
            base.len(),
            def.name.value
        ));
        let t0 = Instant::now();
        let s = task::synthetic::materialize(syn, api, &base, &tok, seed)
            .await
            .map_err(|e| {
                NodeError::Failed(format!(
                    "synthetic prompts of task `{}`: {e}",
                    def.name.value
                ))
            })?;
        self.progress.say(&format!(
            "  wrote them in {:.1} s",
            t0.elapsed().as_secs_f64()
        ));
        let s = Arc::new(s);
        self.materialized.insert(at, s.clone());
        Ok(s)
    }

    fn launch_spec(&self, d: usize) -> LaunchSpec {
        let at = self.plan.deployments[d].at;
        let model = &self.sweep.models[at.model];
        LaunchSpec {
            engine: self.sweep.engines[at.engine].clone(),
            model_name: model.name.value.clone(),
            model_path: plan::weights_path(self.sweep, at).map(|p| p.display().to_string()),
            model_id: match &model.source {
                ModelSource::Id(id) => Some(id.clone()),
                ModelSource::Path(_) => None,
            },
            quantization: model.variants[at.variant].quantization.value.clone(),
        }
    }

    pub(super) fn client(
        &self,
        engine: &impl RunningEngine,
        d: usize,
        sampling: crate::spec::Sampling,
        mode: Option<crate::spec::Api>,
    ) -> Result<HttpClient, NodeError> {
        let e = &self.sweep.engines[self.plan.deployments[d].at.engine];
        let extra = crate::client::extra_fields(&sampling, e.catalog);
        HttpClient::new(
            engine.base_url(),
            mode.unwrap_or(e.api),
            engine.served_model(),
            sampling,
            Duration::from_secs_f64(self.sweep.defaults.request_timeout_s),
            engine.api_key(),
            self.opts.reuse_connections,
        )
        .map(|c| c.with_extra(extra))
        .map_err(|e| NodeError::Failed(format!("cannot build HTTP client: {e}")))
    }

    /// Starts the engine, records its cold start if needed, warms it up, runs every run of
    /// this deployment that must run, and stops it.
    pub(super) async fn engine_lifetime<L: Launcher>(
        &mut self,
        d: usize,
        runs: &[usize],
        launcher: L,
    ) {
        let dep = self.plan.deployments[d].clone();
        let spec = self.launch_spec(d);
        let need_cold = self.will_run(dep.coldstart);
        let cold_key = self.plan.graph[dep.coldstart].key.clone();
        let engine_dir = match self.store.begin_object(&format!("engine-{cold_key}")) {
            Ok(p) => p,
            Err(e) => {
                let cause = format!("cannot create a temp dir in the cache: {e}");
                for &r in runs {
                    self.fail_recorded(self.plan.runs[r].node, cause.clone());
                }
                return;
            }
        };
        let log = engine_dir.join("engine.log");
        let cold_journal = need_cold.then(|| Journal::start(self.store, self.plan, dep.coldstart));
        // Weights already in a mounted Hugging Face cache (before the engine may fetch them)?
        let weights_cached = match (&spec.engine.launch, &spec.model_id) {
            (
                crate::spec::Launch::Docker {
                    hf_cache: Some(h), ..
                },
                Some(id),
            ) => Some(
                Path::new(h)
                    .join("hub")
                    .join(format!("models--{}", id.replace('/', "--")))
                    .is_dir(),
            ),
            _ => None,
        };
        let compile_caches = match &cold_journal {
            Some(_) => {
                // A walk of folders that may hold many files: off the runtime's workers.
                let e = spec.engine.clone();
                tokio::task::spawn_blocking(move || crate::engine::caches::before_start(&e))
                    .await
                    .ok()
                    .flatten()
            }
            None => None,
        };
        let t_launch = Instant::now();
        let launched_at = std::time::SystemTime::now();
        self.progress.say(&format!(
            "  starting {} ({})",
            spec.engine.name.value, spec.engine.kind.value
        ));
        let launched = tokio::select! {
            r = launcher.launch(&spec, &log) => Some(r),
            _ = self.cancel.cancelled() => None,
        };
        let mut engine = match launched {
            None => {
                drop(cold_journal);
                let _ = std::fs::remove_dir_all(&engine_dir);
                return;
            }
            Some(Err(err)) => {
                let cause = err.to_string();
                if let Some(j) = cold_journal {
                    j.failed(&cause);
                    self.fail(dep.coldstart, cause.clone());
                }
                let _ = std::fs::remove_dir_all(&engine_dir);
                for &r in runs {
                    self.fail_recorded(
                        self.plan.runs[r].node,
                        match err.log_tail() {
                            Some(tail) if !tail.trim().is_empty() => format!(
                                "engine failed to start: {}\n{tail}",
                                cause.lines().next().unwrap_or("")
                            ),
                            _ => format!("engine failed to start: {cause}"),
                        },
                    );
                }
                return;
            }
            Some(Ok(e)) => e,
        };
        let gpu_mem_after_load_mb =
            crate::telemetry::gpu::memory_used_mb(spec.engine.gpus.as_deref());

        // Warmup: the first request also times the cold start's first token.
        let first_token_s = self.warm_up(&engine, d, runs, need_cold, t_launch).await;
        let launched_utc = humantime::format_rfc3339_millis(launched_at).to_string();
        let (mut log_pos, mut recorded) = (0u64, false);
        if let Some(j) = cold_journal {
            let cs = ColdStart {
                phases: engine.phases(),
                first_token_s,
                model_bytes: spec
                    .model_path
                    .as_deref()
                    .and_then(|p| bytes_of(Path::new(p))),
                gpu_mem_after_load_mb,
                weights_cached,
                host: Some(crate::host::host_info()),
                compile_caches,
                launched_utc: Some(launched_utc.clone()),
            };
            (recorded, log_pos) = self.record_coldstart(d, j, &cs, &log, t_launch);
        }
        // The start the runs stand on; none for an endpoint, which bench360 did not start.
        let start =
            (!matches!(spec.engine.launch, crate::spec::Launch::Endpoint { .. })).then(|| {
                crate::record::EngineStart {
                    cold_start: recorded,
                    launched_utc,
                    phases: engine.phases(),
                }
            });

        for &r in runs {
            if self.cancel.is_cancelled() {
                break;
            }
            let node = self.plan.runs[r].node;
            if let Some(cause) = engine.exited() {
                self.fail_recorded(
                    node,
                    format!(
                        "{cause}; last log lines:\n{}",
                        crate::engine::tail_of(&log, 10)
                    ),
                );
                continue;
            }
            log_pos = self
                .run(r, &mut engine, d, start.as_ref(), &log, log_pos)
                .await;
        }
        let how = engine.stop().await;
        self.progress
            .say(&format!("  engine {}: {how}", spec.engine.name.value));
        let _ = std::fs::remove_dir_all(&engine_dir);
    }

    pub(super) fn score(&mut self, r: usize) {
        let spec = self.plan.runs[r].clone();
        let i = spec.score;
        let t0 = Instant::now();
        let j = Journal::start(self.store, self.plan, i);
        let run_key = &self.plan.graph[spec.node].key;
        let key = self.plan.graph[i].key.clone();
        let imp = task::of(self.sweep, spec.config.task);
        let result = (|| -> Result<(serde_json::Value, Objects), NodeError> {
            let samples = self.samples_of(spec.config.task)?;
            // The run's object as it was written (sizes; a truncated file is damage, not data).
            if let Some(rec) = self.store.record(run_key) {
                self.store.check_object(&rec, false)?;
            }
            let text =
                std::fs::read_to_string(self.store.object_dir(run_key).join("outputs.jsonl"))
                    .map_err(std_io("read the run's outputs"))?;
            let outputs: Vec<serde_json::Value> = text
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_str(l).map_err(|e| e.to_string()))
                .collect::<Result<_, _>>()?;
            let mut rows: Vec<(u32, &Sample, Option<Score>)> = Vec::new();
            for o in &outputs {
                let idx = o["sample"].as_u64().unwrap_or(u64::MAX) as usize;
                let sample = samples.get(idx).filter(|s| o["sample_id"].as_str() == Some(s.id.as_str())).ok_or_else(|| {
                    format!("output of request {} names sample {} which this dataset no longer has at that place", o["request_id"], o["sample_id"])
                })?;
                rows.push((o["request_id"].as_u64().unwrap_or(0) as u32, sample, None));
            }
            // Only successful requests are scored; failed ones are counted apart.
            let ok: Vec<usize> = (0..outputs.len())
                .filter(|&i| outputs[i]["ok"].as_bool().unwrap_or(false))
                .collect();
            // What the task reads: the output text, or the recorded log-probabilities.
            let field = if imp.reads_logprobs() {
                "top_logprobs"
            } else {
                "output"
            };
            let items: Vec<(&Sample, &str)> = ok
                .iter()
                .map(|&i| (rows[i].1, outputs[i][field].as_str().unwrap_or("")))
                .collect();
            let scored = imp.score(&items)?;
            // "The scorer could not run" is a fault, not a wrong answer: over the run's error
            // budget the node fails with the causes, is not cached, and runs again.
            let budget = self
                .sweep
                .error_budget(spec.config.scenario)
                .unwrap_or(self.sweep.defaults.max_error_rate);
            if let Some(cause) = scoring_faults(&scored, budget) {
                return Err(cause.into());
            }
            for (&i, s) in ok.iter().zip(scored) {
                rows[i].2 = Some(s);
            }
            let pairs: Vec<(&Sample, &Score)> = rows
                .iter()
                .filter_map(|(_, s, sc)| sc.as_ref().map(|sc| (*s, sc)))
                .collect();
            let metrics = task::aggregate(&pairs);
            let refs: Vec<(u32, &Sample, Option<&Score>)> = rows
                .iter()
                .map(|(id, s, sc)| (*id, *s, sc.as_ref()))
                .collect();
            let objects = self.write_object(&key, |tmp| {
                crate::trace::write_scores(
                    &tmp.join("scores.parquet"),
                    &key,
                    run_key,
                    &spec.columns,
                    &refs,
                )
                .map_err(table_io("write scores.parquet"))?;
                write_json(&tmp.join("metrics.json"), &metrics)
                    .map_err(std_io("write metrics.json"))
            })?;
            Ok((
                json!({
                    "primary": imp.primary(),
                    "quality": metrics.get("quality"),
                    "scored": metrics.get("scored"),
                    "unparsed_rate": metrics.get("unparsed_rate"),
                }),
                objects,
            ))
        })();
        self.conclude(i, j, t0, result);
    }

    pub(super) fn report(&mut self) {
        let i = self.plan.report;
        let anything_ran = !self.summary.ran.is_empty() || !self.summary.failed.is_empty();
        if self.status[i.index()] == Status::Cached && !anything_ran {
            let path = self.store.report_dir(&self.plan.sweep).join("report.html");
            self.summary.report = path.exists().then_some(path);
            self.summary.report_table = Some(build_report(self.store, self.plan, self.sweep).table);
            return;
        }
        let t0 = Instant::now();
        let files = build_report(self.store, self.plan, self.sweep);
        self.summary.report_table = Some(files.table.clone());
        match write_report(self.store, self.plan, &files) {
            Ok((path, recorded)) => {
                self.summary.report = Some(path);
                if recorded {
                    self.succeed(i, t0);
                } else {
                    self.progress.say(&format!(
                        "• report {} written with missing runs (not cached)",
                        self.plan.sweep
                    ));
                }
            }
            Err(cause) => self.fail(i, cause.to_string()),
        }
    }
}

/// Publishes a built report into `reports/<sweep>/` and, when every cold start and score of
/// the plan is cached, records the report node (so the next apply finds it cached). A report
/// over failed or missing nodes is written for the user but not recorded: the next apply
/// retries those nodes and rewrites it. Returns the HTML path and whether it was recorded.
pub(crate) fn write_report(
    store: &Store,
    plan: &Plan,
    files: &ReportFiles,
) -> Result<(PathBuf, bool), NodeError> {
    let i = plan.report;
    let key = plan.graph[i].key.clone();
    let complete = plan
        .runs
        .iter()
        .all(|r| store.is_cached(&plan.graph[r.score].key))
        && plan
            .deployments
            .iter()
            .all(|d| store.is_cached(&plan.graph[d.coldstart].key));
    let path = publish_report(store, &plan.sweep, files).map_err(std_io("write the report"))?;
    if !complete {
        return Ok((path, false));
    }
    let mut j = Journal::start(store, plan, i);
    let done = write_object(store, &key, |tmp| {
        write_report_files(tmp, files).map_err(std_io("write the report's files"))
    })
    .and_then(|objects| {
        j.finish(json!({"report": "report.html"}), objects)
            .map_err(std_io("record the report"))
    });
    if let Err(e) = done {
        j.failed(&e.to_string());
        return Err(e);
    }
    Ok((path, true))
}

/// The cause of a score node's failure when more than `budget` of the scored requests could
/// not be scored through a fault of the scoring side (see [`Score::fault`]).
pub(crate) fn scoring_faults(scored: &[Score], budget: f64) -> Option<String> {
    let faults: Vec<&Score> = scored.iter().filter(|s| s.fault).collect();
    if scored.is_empty() {
        return None;
    }
    let rate = faults.len() as f64 / scored.len() as f64;
    if rate <= budget {
        return None;
    }
    let mut causes: std::collections::BTreeMap<&str, usize> = Default::default();
    for f in &faults {
        *causes
            .entry(f.error.as_deref().unwrap_or("no cause given"))
            .or_default() += 1;
    }
    Some(format!(
        "{} of {} requests could not be scored ({:.1}%, over the {:.1}% error budget) for a reason other than the model's output; top causes: {}",
        faults.len(),
        scored.len(),
        rate * 100.0,
        budget * 100.0,
        super::journal::top_causes(causes)
    ))
}

#[cfg(test)]
mod scoring_fault_tests {
    use super::*;

    fn fault(cause: &str) -> Score {
        Score {
            unscorable: true,
            fault: true,
            error: Some(cause.into()),
            ..Score::default()
        }
    }

    #[test]
    fn faults_over_the_budget_fail_with_their_top_causes() {
        let mut scored = vec![Score::default(); 90];
        scored.extend(std::iter::repeat_n(fault("cannot open db.sqlite"), 8));
        scored.extend(std::iter::repeat_n(fault("the gold query failed: x"), 2));
        let cause = scoring_faults(&scored, 0.05).expect("10 % is over 5 %");
        assert!(
            cause.starts_with(
                "10 of 100 requests could not be scored (10.0%, over the 5.0% error budget)"
            ),
            "{cause}"
        );
        assert!(
            cause.ends_with("top causes: 8× cannot open db.sqlite; 2× the gold query failed: x"),
            "{cause}"
        );
        // Within the budget, or wrong answers (no fault), or by design unscorable: no failure.
        assert_eq!(scoring_faults(&scored, 0.10), None);
        let wrong = Score {
            error: Some("no such column".into()),
            ..Score::default()
        };
        assert_eq!(scoring_faults(&vec![wrong; 10], 0.0), None);
        let synthetic = Score {
            unscorable: true,
            ..Score::default()
        };
        assert_eq!(scoring_faults(&vec![synthetic; 10], 0.0), None);
        assert_eq!(scoring_faults(&[], 0.0), None);
    }
}
