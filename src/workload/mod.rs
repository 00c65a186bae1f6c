//! Scenarios: how requests are scheduled against an engine. `single` sends one at a time,
//! `batch` sends b at once and waits for all, `server` runs U users, each an independent
//! Poisson process (open loop) with its own seeded prompt order.

pub(crate) mod rng;

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::client::{ChunkRecord, GenRequest, InferenceClient, RequestRecord, RunClock};
use crate::plan::expand::ScenarioInstance;
use crate::task::Sample;
use rng::SplitMix64;

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
    pub chunks: Vec<ChunkRecord>,
    pub cancelled: bool,
}

/// One planned request: when (offset from the run start), who, which sample.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Planned {
    pub at: Duration,
    pub user: Option<u32>,
    pub sample: usize,
}

/// Arrival schedule of the server scenario: per user, exponential gaps at `rate`/60 per
/// second for `duration_s`, prompts in that user's own seeded order. Sorted by time.
pub(crate) fn server_schedule(
    users: u64,
    rate_per_min: f64,
    duration_s: f64,
    n_samples: usize,
    seed: u64,
) -> Vec<Planned> {
    let mut out = Vec::new();
    for u in 0..users {
        let mut r = SplitMix64::derive(seed, &format!("server/user/{u}/arrivals"));
        let mut order: Vec<usize> = (0..n_samples).collect();
        SplitMix64::derive(seed, &format!("server/user/{u}/order")).shuffle(&mut order);
        let mut t = 0.0;
        let mut i = 0;
        loop {
            t += r.exponential(rate_per_min / 60.0);
            if t >= duration_s {
                break;
            }
            out.push(Planned {
                at: Duration::from_secs_f64(t),
                user: Some(u as u32),
                sample: order[i % n_samples],
            });
            i += 1;
        }
    }
    out.sort_by(|a, b| a.at.cmp(&b.at).then(a.user.cmp(&b.user)));
    out
}

/// Number of measured requests a scenario sends (for progress; the server's is its schedule).
pub(crate) fn expected_requests(instance: &ScenarioInstance, n_samples: usize) -> u64 {
    match instance {
        ScenarioInstance::Single { requests } => requests.unwrap_or(n_samples as u64),
        ScenarioInstance::Batch {
            batch_size,
            batches,
        } => batch_size * batches,
        ScenarioInstance::Server {
            users,
            rate,
            duration_s,
        } => (*users as f64 * rate / 60.0 * duration_s).round() as u64,
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
        prompt: s.prompt.clone(),
    }
}

/// Runs one scenario to completion (or cancellation) on the given client.
pub(crate) async fn run<C: InferenceClient>(
    client: Arc<C>,
    instance: &ScenarioInstance,
    samples: Arc<Vec<Sample>>,
    seed: u64,
    clock: RunClock,
    cancel: Cancel,
    progress: ProgressBar,
) -> Outcome {
    let mut out = Outcome::default();
    let n = samples.len();
    let keep = |out: &mut Outcome, (r, c): (RequestRecord, Vec<ChunkRecord>)| {
        progress.inc(1);
        out.requests.push(r);
        out.chunks.extend(c);
    };
    match instance {
        ScenarioInstance::Single { requests } => {
            let total = requests.unwrap_or(n as u64);
            for i in 0..total {
                let req = request(i as u32, None, i as usize % n, &samples);
                tokio::select! {
                    res = client.stream(req, Instant::now(), clock) => keep(&mut out, res),
                    _ = cancel.cancelled() => { out.cancelled = true; break; }
                }
            }
        }
        ScenarioInstance::Batch {
            batch_size,
            batches,
        } => {
            let mut id = 0u32;
            'batches: for _ in 0..*batches {
                let scheduled = Instant::now();
                let mut set = JoinSet::new();
                for _ in 0..*batch_size {
                    let req = request(id, None, id as usize % n, &samples);
                    id += 1;
                    let c = client.clone();
                    set.spawn(async move { c.stream(req, scheduled, clock).await });
                }
                loop {
                    tokio::select! {
                        next = set.join_next() => match next {
                            Some(Ok(res)) => keep(&mut out, res),
                            Some(Err(e)) => panic!("request task failed: {e}"),
                            None => break,
                        },
                        _ = cancel.cancelled() => { out.cancelled = true; break 'batches; }
                    }
                }
            }
        }
        ScenarioInstance::Server {
            users,
            rate,
            duration_s,
        } => {
            let plan = server_schedule(*users, *rate, *duration_s, n, seed);
            progress.set_length(plan.len() as u64);
            let start = Instant::now() + Duration::from_millis(20);
            let mut set = JoinSet::new();
            for (id, p) in plan.into_iter().enumerate() {
                let req = request(id as u32, p.user, p.sample, &samples);
                let c = client.clone();
                let at = start + p.at;
                set.spawn(async move {
                    tokio::time::sleep_until(at.into()).await;
                    c.stream(req, at, clock).await
                });
            }
            loop {
                tokio::select! {
                    next = set.join_next() => match next {
                        Some(Ok(res)) => keep(&mut out, res),
                        Some(Err(e)) => panic!("request task failed: {e}"),
                        None => break,
                    },
                    _ = cancel.cancelled() => { out.cancelled = true; set.abort_all(); break; }
                }
            }
        }
    }
    out.requests.sort_by_key(|r| r.id);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_schedule_is_seeded_per_user_and_bounded_by_duration() {
        let a = server_schedule(4, 60.0, 100.0, 50, 1);
        let b = server_schedule(4, 60.0, 100.0, 50, 1);
        assert_eq!(a, b);
        assert!(a.iter().all(|p| p.at < Duration::from_secs(100)));
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        // 4 users × 1 request/s × 100 s ≈ 400 (Poisson: within ±4 sd).
        assert!((320..=480).contains(&a.len()), "{}", a.len());
        // Users draw their own prompt orders: their first prompts differ.
        let firsts: Vec<usize> = (0..4u32)
            .map(|u| a.iter().find(|p| p.user == Some(u)).unwrap().sample)
            .collect();
        assert!(firsts.windows(2).any(|w| w[0] != w[1]), "{firsts:?}");
        assert_ne!(a, server_schedule(4, 60.0, 100.0, 50, 2));
    }
}
