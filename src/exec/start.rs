//! What follows an engine's launch before its runs: the warmup requests, and the record of
//! its cold start when this lifetime is the one that records it.

use std::path::Path;
use std::time::Instant;

use super::journal::*;
use super::node::{copy_log_since, write_json};
use super::Executor;
use crate::client::{GenRequest, InferenceClient};
use crate::engine::RunningEngine;
use crate::record::RunClock;
use crate::report::ColdStart;

impl Executor<'_> {
    /// The warmup requests, never measured, before the runs of this engine lifetime (at
    /// least one when the cold start is recorded). Returns the first token's time since the
    /// launch, for the cold start; failed warmup requests are said, not hidden.
    pub(super) async fn warm_up<E: RunningEngine>(
        &mut self,
        engine: &E,
        d: usize,
        runs: &[usize],
        need_cold: bool,
        t_launch: Instant,
    ) -> Option<f64> {
        let first_task = runs
            .first()
            .map(|&r| self.plan.runs[r].config.task)
            .unwrap_or(0);
        let warm_samples = self.samples_for(first_task, d, None, engine).await.ok();
        let mut first_token_s = None;
        let mut warm_failures = Vec::new();
        if let Some(samples) = &warm_samples {
            let sampling = self.sweep.defaults.sampling.clone();
            let mode = self.sweep.tasks[first_task].mode;
            if let Ok(client) = self.client(engine, d, sampling, mode) {
                let n = self.sweep.defaults.warmup.max(u32::from(need_cold));
                for w in 0..n {
                    if self.cancel.is_cancelled() {
                        break;
                    }
                    let s = &samples[w as usize % samples.len()];
                    let clock = RunClock::start();
                    let req = GenRequest {
                        id: w,
                        user: None,
                        sample: 0,
                        sample_id: s.id.clone(),
                        system: s.system.clone(),
                        history: s.history.clone(),
                        prompt: s.prompt.clone(),
                        max_tokens: s.max_tokens,
                    };
                    let (rec, _) = client.stream(req, Instant::now(), clock).await;
                    if w == 0 {
                        first_token_s = rec
                            .first_token_ns
                            .map(|ns| (clock.at(ns) - t_launch).as_secs_f64());
                    }
                    if let Some(e) = rec.error {
                        warm_failures.push(e);
                    }
                }
            }
        }
        if !warm_failures.is_empty() {
            self.progress.say(&format!(
                "  warmup: {} of its requests failed: {}",
                warm_failures.len(),
                warm_failures[0]
            ));
        }
        first_token_s
    }

    /// Writes the cold start's object (coldstart.json, the launch log so far) and concludes
    /// its node: whether it was recorded, and how far the engine log has been copied.
    pub(super) fn record_coldstart(
        &mut self,
        d: usize,
        j: Journal,
        cs: &ColdStart,
        log: &Path,
        t_launch: Instant,
    ) -> (bool, u64) {
        let node = self.plan.deployments[d].coldstart;
        let key = self.plan.graph[node].key.clone();
        let mut log_pos = 0u64;
        let res = self.write_object(&key, |tmp| {
            write_json(&tmp.join("coldstart.json"), cs).map_err(std_io("write coldstart.json"))?;
            log_pos = copy_log_since(log, 0, &tmp.join("launch.log"));
            Ok(())
        });
        let outputs = serde_json::to_value(cs).expect("serializable");
        let recorded = self.conclude(node, j, t_launch, res.map(|objects| (outputs, objects)));
        (recorded, log_pos)
    }
}
