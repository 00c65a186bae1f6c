//! Scenarios: how requests are scheduled against an engine. `single` sends one at a time,
//! `batch` sends b at once and waits for all, `server` runs U users, each an independent
//! Poisson process (open loop) with its own seeded prompt order.

mod replay;
mod saturation;
mod schedule;
mod stop;

pub(crate) use replay::*;
pub(crate) use saturation::*;
pub(crate) use schedule::*;
pub(crate) use stop::Stopped;

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::client::{GenRequest, InferenceClient};
use crate::record::rng::SplitMix64;
use crate::record::Sample;
use crate::record::{ChunkRecord, RequestRecord, RunClock};
use crate::spec::expand::ScenarioInstance;

/// Cancellation signal shared by everything a run started.
#[derive(Clone, Debug)]
pub(crate) struct Cancel(watch::Receiver<bool>);

impl Cancel {
    pub fn new() -> (watch::Sender<bool>, Cancel) {
        let (tx, rx) = watch::channel(false);
        (tx, Cancel(rx))
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    pub async fn cancelled(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|c| *c).await;
    }
}

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub requests: Vec<RequestRecord>,
    /// Every chunk of every request, once the run is over.
    pub chunks: Vec<ChunkRecord>,
    /// Each finished request's chunks while the run goes on: kept apart and joined at the
    /// end, so that no copy of all chunks so far (a doubling vector's growth, milliseconds at
    /// hundreds of thousands of chunks) stalls the client mid-run.
    pub parts: Vec<Vec<ChunkRecord>>,
    pub cancelled: bool,
    /// Saturation scenario: the search's probes and its answer.
    pub saturation: Option<Saturation>,
    /// The run ended before its last request because its estimate was tight enough.
    pub stopped_early: bool,
    /// Where `target-margin` stopped it.
    pub stopped: Option<Stopped>,
}

/// Whether the stop rule is met now (and, if so, recorded in `out`).
fn met(stopper: &mut Option<stop::Stopper>, out: &mut Outcome) -> bool {
    if out.stopped.is_some() {
        return true;
    }
    match stopper.as_mut().and_then(|st| st.check(&out.requests)) {
        Some(s) => {
            out.stopped = Some(s);
            out.stopped_early = true;
            true
        }
        None => false,
    }
}

/// Runs planned arrivals open-loop: each request is sent at its time, whatever the others do.
/// Request ids start at `first_id` (a saturation search numbers its probes' requests on).
#[allow(clippy::too_many_arguments)]
async fn open_loop<C: InferenceClient>(
    client: &Arc<C>,
    first_id: u32,
    plan: Vec<Planned>,
    samples: &[Sample],
    clock: RunClock,
    cancel: &Cancel,
    progress: &ProgressBar,
    stop: Option<&crate::spec::StopRule>,
    out: &mut Outcome,
) {
    progress.set_length(plan.len() as u64);
    let start = Instant::now() + Duration::from_millis(20);
    let mut set = JoinSet::new();
    // Once the stop rule is met, arrivals not yet sent are dropped; those in flight finish.
    let (halt_tx, halt) = Cancel::new();
    let mut stopper = stop.map(stop::Stopper::new);
    for (id, p) in plan.into_iter().enumerate() {
        let mut req = request(first_id + id as u32, p.user, p.sample, samples);
        if p.max_tokens.is_some() {
            req.max_tokens = p.max_tokens;
        }
        let c = client.clone();
        let at = start + p.at;
        let halt = halt.clone();
        set.spawn(async move {
            let go = tokio::select! {
                _ = tokio::time::sleep_until(at.into()) => true,
                _ = halt.cancelled() => false,
            };
            if go {
                Some(c.stream(req, at, clock).await)
            } else {
                None
            }
        });
    }
    loop {
        tokio::select! {
            next = set.join_next() => match next {
                Some(Ok(Some((r, c)))) => {
                    progress.inc(1);
                    out.requests.push(r);
                    out.parts.push(c);
                    if out.stopped.is_none() && met(&mut stopper, out) {
                        let _ = halt_tx.send(true);
                    }
                }
                Some(Ok(None)) => {}
                Some(Err(e)) => panic!("request task failed: {e}"),
                None => break,
            },
            _ = cancel.cancelled() => { out.cancelled = true; set.abort_all(); break; }
        }
    }
}

/// Number of measured requests a scenario sends (for progress; the server's is its schedule).
pub(crate) fn expected_requests(instance: &ScenarioInstance, n_samples: usize) -> u64 {
    match instance {
        ScenarioInstance::Single { requests, .. } => requests.unwrap_or(n_samples as u64),
        ScenarioInstance::Batch {
            batch_size,
            batches,
        } => batch_size * batches,
        ScenarioInstance::Server {
            users,
            rate,
            duration_s,
        } => (*users as f64 * rate / 60.0 * duration_s).round() as u64,
        ScenarioInstance::Rate {
            rate,
            duration_s,
            ramp_from,
            ..
        } => (ramp_from.map_or(*rate, |r0| (r0 + rate) / 2.0) * duration_s).round() as u64,
        ScenarioInstance::Replay { .. } => n_samples as u64,
        // Unknown in advance: each probe sets its own length.
        ScenarioInstance::Saturation(x) => (x.start * x.step_s).round() as u64,
        ScenarioInstance::Concurrency { requests, .. } | ScenarioInstance::Offline { requests } => {
            requests.unwrap_or(n_samples as u64)
        }
    }
}

fn request(id: u32, user: Option<u32>, sample_index: usize, samples: &[Sample]) -> GenRequest {
    let s = &samples[sample_index];
    GenRequest {
        id,
        user,
        sample: sample_index,
        sample_id: s.id.clone(),
        system: s.system.clone(),
        history: s.history.clone(),
        prompt: s.prompt.clone(),
        max_tokens: s.max_tokens,
    }
}

/// Runs one scenario to completion (or cancellation) on the given client. `replay` holds the
/// trace of a replay scenario (read by the caller, so that a bad trace fails before any
/// request), empty otherwise.
// Each argument is a different concern of one run (what, to whom, when, how to stop, how to
// show it); bundling them would only move the list into a struct built once per call.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run<C: InferenceClient>(
    client: Arc<C>,
    instance: &ScenarioInstance,
    samples: Arc<Vec<Sample>>,
    seed: u64,
    clock: RunClock,
    cancel: Cancel,
    progress: ProgressBar,
    replay: &[TraceItem],
    stop: Option<&crate::spec::StopRule>,
) -> Outcome {
    let mut out = Outcome::default();
    let n = samples.len();
    let d = Driver {
        client: &client,
        samples: &samples,
        clock,
        cancel: &cancel,
        progress: &progress,
        stop,
    };
    match instance {
        ScenarioInstance::Single {
            requests,
            early_stop,
        } => {
            d.single(requests.unwrap_or(n as u64), *early_stop, &mut out)
                .await
        }
        ScenarioInstance::Batch {
            batch_size,
            batches,
        } => d.batch(*batch_size, *batches, &mut out).await,
        ScenarioInstance::Server {
            users,
            rate,
            duration_s,
        } => {
            let plan = server_schedule(*users, *rate, *duration_s, n, seed);
            d.open(0, plan, &mut out).await;
        }
        ScenarioInstance::Rate {
            rate,
            burstiness,
            duration_s,
            ramp_from,
        } => {
            let plan = rate_schedule(*rate, *burstiness, *duration_s, *ramp_from, n, seed);
            d.open(0, plan, &mut out).await;
        }
        ScenarioInstance::Offline { requests } => {
            let plan = (0..requests.unwrap_or(n as u64) as usize)
                .map(|i| Planned {
                    at: Duration::ZERO,
                    user: None,
                    sample: i % n,
                    max_tokens: None,
                })
                .collect();
            d.open(0, plan, &mut out).await;
        }
        ScenarioInstance::Replay { speed, .. } => {
            // Arrival times scaled by the speed; prompts from the task, in a seeded order.
            let mut order: Vec<usize> = (0..n).collect();
            SplitMix64::derive(seed, "replay/order").shuffle(&mut order);
            let plan: Vec<Planned> = replay
                .iter()
                .enumerate()
                .map(|(i, it)| Planned {
                    at: Duration::from_secs_f64(it.t / speed),
                    user: None,
                    sample: order[i % n],
                    max_tokens: it.output_tokens,
                })
                .collect();
            d.open(0, plan, &mut out).await;
        }
        ScenarioInstance::Saturation(x) => d.saturation(x, seed, &mut out).await,
        ScenarioInstance::Concurrency {
            concurrency,
            requests,
            early_stop,
        } => {
            let total = requests.unwrap_or(n as u64);
            d.concurrency(*concurrency, total, *early_stop, &mut out)
                .await
        }
    }
    out.requests.sort_by_key(|r| r.id);
    out.chunks = std::mem::take(&mut out.parts).concat();
    out
}

/// What every scenario kind drives its requests with.
struct Driver<'a, C> {
    client: &'a Arc<C>,
    samples: &'a Arc<Vec<Sample>>,
    clock: RunClock,
    cancel: &'a Cancel,
    progress: &'a ProgressBar,
    /// `target-margin`: the rule each scenario kind checks as its requests return.
    stop: Option<&'a crate::spec::StopRule>,
}

impl<C: InferenceClient> Driver<'_, C> {
    fn keep(&self, out: &mut Outcome, (r, c): (RequestRecord, Vec<ChunkRecord>)) {
        self.progress.inc(1);
        out.requests.push(r);
        out.parts.push(c);
    }

    fn request(&self, id: u64) -> GenRequest {
        request(
            id as u32,
            None,
            id as usize % self.samples.len(),
            self.samples,
        )
    }

    /// Planned arrivals, open loop.
    async fn open(&self, first_id: u32, plan: Vec<Planned>, out: &mut Outcome) {
        open_loop(
            self.client,
            first_id,
            plan,
            self.samples,
            self.clock,
            self.cancel,
            self.progress,
            self.stop,
            out,
        )
        .await;
    }

    /// One request at a time.
    async fn single(&self, total: u64, early_stop: Option<f64>, out: &mut Outcome) {
        let mut stopper = self.stop.map(stop::Stopper::new);
        for i in 0..total {
            tokio::select! {
                res = self.client.stream(self.request(i), Instant::now(), self.clock) => self.keep(out, res),
                _ = self.cancel.cancelled() => { out.cancelled = true; break; }
            }
            if early_stop.is_some_and(|w| tight_enough(&out.requests, w)) {
                out.stopped_early = true;
                break;
            }
            if out.cancelled || met(&mut stopper, out) {
                break;
            }
        }
    }

    /// `batch_size` requests at once, the next batch after all of them returned.
    async fn batch(&self, batch_size: u64, batches: u64, out: &mut Outcome) {
        let mut id = 0u64;
        let mut stopper = self.stop.map(stop::Stopper::new);
        'batches: for _ in 0..batches {
            // Between batches: a whole batch always runs.
            if met(&mut stopper, out) {
                break;
            }
            let scheduled = Instant::now();
            let mut set = JoinSet::new();
            for _ in 0..batch_size {
                let req = self.request(id);
                id += 1;
                let (c, clock) = (self.client.clone(), self.clock);
                set.spawn(async move { c.stream(req, scheduled, clock).await });
            }
            loop {
                tokio::select! {
                    next = set.join_next() => match next {
                        Some(Ok(res)) => self.keep(out, res),
                        Some(Err(e)) => panic!("request task failed: {e}"),
                        None => break,
                    },
                    _ = self.cancel.cancelled() => { out.cancelled = true; break 'batches; }
                }
            }
        }
    }

    /// Closed loop: start `concurrency`, and start the next one each time one returns.
    async fn concurrency(
        &self,
        concurrency: u64,
        total: u64,
        early_stop: Option<f64>,
        out: &mut Outcome,
    ) {
        let mut next = 0u64;
        let mut set = JoinSet::new();
        let mut stopper = self.stop.map(stop::Stopper::new);
        let launch = |set: &mut JoinSet<_>, next: &mut u64| {
            let req = self.request(*next);
            let (c, clock) = (self.client.clone(), self.clock);
            *next += 1;
            set.spawn(async move { c.stream(req, Instant::now(), clock).await });
        };
        while next < total.min(concurrency) {
            launch(&mut set, &mut next);
        }
        loop {
            tokio::select! {
                done = set.join_next() => match done {
                    Some(Ok(res)) => {
                        self.keep(out, res);
                        if !out.stopped_early
                            && early_stop.is_some_and(|w| tight_enough(&out.requests, w))
                        {
                            // No new requests; those in flight finish and count.
                            out.stopped_early = true;
                        }
                        if !out.stopped_early {
                            met(&mut stopper, out);
                        }
                        if next < total && !out.stopped_early {
                            launch(&mut set, &mut next);
                        }
                    }
                    Some(Err(e)) => panic!("request task failed: {e}"),
                    None => break,
                },
                _ = self.cancel.cancelled() => { out.cancelled = true; set.abort_all(); break; }
            }
        }
    }

    /// Probes of open-loop traffic, ramped then bisected, each judged against the thresholds.
    async fn saturation(&self, x: &crate::spec::SaturationSpec, seed: u64, out: &mut Outcome) {
        let n = self.samples.len();
        let mut sat = Saturation {
            ttft_p95_s: x.ttft_p95,
            e2e_p95_s: x.e2e_p95,
            max_error_rate: x.max_error_rate,
            ..Saturation::default()
        };
        while let Some(rate) = next_rate(&sat.probes, x) {
            let first = out.requests.len();
            let first_id = first as u32;
            // Each probe its own seeded arrivals; the next starts once this one drained.
            let probe_seed = seed ^ (sat.probes.len() as u64).wrapping_mul(0x9E37_79B9);
            let plan = rate_schedule(rate, x.burstiness, x.step_s, None, n, probe_seed);
            self.progress.set_message(format!("probe {rate:.3} req/s"));
            self.open(first_id, plan, out).await;
            if out.cancelled {
                break;
            }
            out.requests[first..].sort_by_key(|r| r.id);
            sat.probes.push(judge_probe(
                rate,
                first_id,
                &out.requests[first..],
                x.ttft_p95,
                x.e2e_p95,
                x.max_error_rate,
            ));
        }
        (sat.rate, sat.failed_at) = bracket(&sat.probes);
        out.saturation = Some(sat);
    }
}

#[cfg(test)]
mod tests;
