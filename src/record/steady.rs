//! The steady part of a run's window and whether an open loop kept up. Pure.
//!
//! Rules (docs/metrics.md says the same):
//! - **Closed loop** (single, batch, concurrency, offline: a target number of requests in
//!   flight): the steady part runs from the first time the target (at most the number of
//!   requests) was in flight to the last send. Before it the loop was filling; after it, only
//!   draining.
//! - **Open loop** (server, rate, replay: arrivals on a schedule): from the first successful
//!   response to the last send. Before it the engine had finished nothing.
//! - Throughput over it counts the output tokens streamed inside it (each content chunk's
//!   tokens when the server reports them, else its request's completion tokens spread evenly
//!   over its content chunks), divided by its length.
//! - **Over-saturated** (open loops only): over the steady part, the least-squares slope of
//!   TTFT on send time, and of the requests in flight at each send on send time. A run is
//!   over-saturated when either slope is positive at 95 % (its interval's lower bound above
//!   zero) and its fitted rise across the steady part exceeds half the series' median (and,
//!   for requests in flight, 2 requests): the queue grew through the run instead of settling.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::paired::{slope, Slope};
use super::stats::pct_of;
use super::{ChunkRecord, RequestRecord};

/// How a scenario loads the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Load {
    /// A target number of requests in flight.
    Closed(usize),
    /// Arrivals on a schedule, whatever the engine does.
    Open,
}

/// The steady part of a run (run-clock ns) and what it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub(crate) struct Steady {
    pub start_ns: i64,
    pub end_ns: i64,
    /// The rule that chose it, in words.
    pub rule: String,
    /// Of the whole window (first scheduled → last successful end), the share outside the
    /// steady part.
    pub excluded_share: f64,
    /// Output tokens streamed inside it, and the share of all output tokens that were not.
    pub output_tokens: f64,
    pub excluded_token_share: f64,
    pub output_tokens_per_s: f64,
    /// Successful requests that ended inside it, per second.
    pub requests_per_s: f64,
    /// Open loops only.
    #[serde(default)]
    pub saturation: Option<Saturation>,
}

/// The slope tests of an open loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Saturation {
    /// TTFT (ms) on send time (s).
    pub ttft: Option<Slope>,
    pub ttft_median_ms: Option<f64>,
    /// Requests in flight at each send on send time (s).
    pub inflight: Option<Slope>,
    pub inflight_median: Option<f64>,
    pub over_saturated: bool,
    /// Why, in words, when over-saturated.
    pub why: Option<String>,
}

/// The steady part of a run; None when it has none (every request sent at once, or fewer than
/// two sends).
pub(crate) fn analyze(
    requests: &[RequestRecord],
    chunks: &[ChunkRecord],
    load: Load,
) -> Option<Steady> {
    let mut sends: Vec<i64> = requests.iter().filter_map(|r| r.sent_ns).collect();
    sends.sort_unstable();
    let mut ends: Vec<i64> = requests
        .iter()
        .filter(|r| r.sent_ns.is_some())
        .map(|r| r.end_ns)
        .collect();
    ends.sort_unstable();
    // The steady part ends at the last send, inside the run's window (which ends at the last
    // successful response: requests sent last that all failed are no steady load).
    let (window_start, window_end) = super::stats::window(requests)?;
    let last_send = (*sends.last()?).min(window_end);
    let inflight_at = |t: i64| -> usize {
        sends.partition_point(|&s| s <= t) - ends.partition_point(|&e| e <= t)
    };
    let (start, rule) = match load {
        Load::Closed(target) => {
            let target = target.min(sends.len()).max(1);
            let start = sends.iter().copied().find(|&t| inflight_at(t) >= target)?;
            (
                start,
                format!("closed loop: from the first time {target} request(s) were in flight to the last send"),
            )
        }
        // A request that failed at once (refused, 4xx) is no response of a running server.
        Load::Open => (
            requests.iter().filter(|r| r.ok()).map(|r| r.end_ns).min()?,
            "open loop: from the first successful response to the last send".to_string(),
        ),
    };
    if last_send <= start {
        return None;
    }
    let window = (window_end - window_start) as f64;
    let secs = (last_send - start) as f64 / 1e9;
    // Tokens per generated chunk (answer or reasoning) of each successful request (0 where
    // its usage is unknown).
    let ok: Vec<&RequestRecord> = requests.iter().filter(|r| r.ok()).collect();
    let ok_ids: HashSet<u32> = ok.iter().map(|r| r.id).collect();
    let per_chunk = super::stats::tokens_per_generated_chunk(&ok, chunks);
    let (mut inside, mut total) = (0.0, 0.0);
    for c in chunks.iter().filter(|c| c.kind.is_generated()) {
        if !ok_ids.contains(&c.request_id) {
            continue;
        }
        let even = per_chunk.get(&c.request_id).copied().unwrap_or(0.0);
        let t = c.tokens.map_or(even, f64::from);
        total += t;
        if c.t_ns >= start && c.t_ns <= last_send {
            inside += t;
        }
    }
    let completed = requests
        .iter()
        .filter(|r| r.ok() && r.end_ns >= start && r.end_ns <= last_send)
        .count();
    let saturation =
        (load == Load::Open).then(|| saturation(requests, start, last_send, &inflight_at));
    Some(Steady {
        start_ns: start,
        end_ns: last_send,
        rule,
        excluded_share: (1.0 - (last_send - start) as f64 / window).clamp(0.0, 1.0),
        output_tokens: inside,
        excluded_token_share: if total > 0.0 {
            1.0 - inside / total
        } else {
            0.0
        },
        output_tokens_per_s: inside / secs,
        requests_per_s: completed as f64 / secs,
        saturation,
    })
}

fn median(v: &[f64]) -> Option<f64> {
    pct_of(&mut v.to_vec(), 50.0)
}

fn saturation(
    requests: &[RequestRecord],
    start: i64,
    end: i64,
    inflight_at: &dyn Fn(i64) -> usize,
) -> Saturation {
    let mut sent: Vec<&RequestRecord> = requests
        .iter()
        .filter(|r| r.sent_ns.is_some_and(|s| s >= start && s <= end))
        .collect();
    sent.sort_by_key(|r| r.sent_ns);
    let secs = |t: i64| (t - start) as f64 / 1e9;
    let (tx, ty): (Vec<f64>, Vec<f64>) = sent
        .iter()
        .filter(|r| r.ok())
        .filter_map(|r| Some((secs(r.sent_ns?), super::stats::ttft_ms(r)?)))
        .unzip();
    let (ix, iy): (Vec<f64>, Vec<f64>) = sent
        .iter()
        .filter_map(|r| r.sent_ns)
        .map(|s| (secs(s), inflight_at(s) as f64))
        .unzip();
    let (ttft, ttft_median_ms) = (slope(&tx, &ty), median(&ty));
    let (inflight, inflight_median) = (slope(&ix, &iy), median(&iy));
    let grows = |s: &Option<Slope>, median: Option<f64>, floor: f64| -> Option<f64> {
        let s = (*s)?;
        let m = median?;
        (s.ci.0 > 0.0 && s.rise > (0.5 * m).max(floor)).then_some(s.rise)
    };
    let why = match (
        grows(&ttft, ttft_median_ms, 0.0),
        grows(&inflight, inflight_median, 2.0),
    ) {
        (Some(r), _) => Some(format!(
            "TTFT rose by {r:.0} ms across the steady part (median {:.0} ms)",
            ttft_median_ms.unwrap_or(0.0)
        )),
        (None, Some(r)) => Some(format!(
            "requests in flight rose by {r:.1} across the steady part (median {:.1})",
            inflight_median.unwrap_or(0.0)
        )),
        (None, None) => None,
    };
    Saturation {
        ttft,
        ttft_median_ms,
        inflight,
        inflight_median,
        over_saturated: why.is_some(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ChunkKind;

    const MS: i64 = 1_000_000;

    fn req(id: u32, sent: i64, ttft: i64, end: i64, tokens: u32) -> RequestRecord {
        RequestRecord {
            id,
            scheduled_ns: sent,
            sent_ns: Some(sent),
            first_token_ns: Some(sent + ttft),
            last_token_ns: Some(end),
            end_ns: end,
            completion_tokens: Some(tokens),
            content_chunks: tokens,
            ..Default::default()
        }
    }

    /// One content chunk per token, evenly from the first token to the last.
    fn chunks_of(r: &RequestRecord) -> Vec<ChunkRecord> {
        let (a, b) = (r.first_token_ns.unwrap(), r.last_token_ns.unwrap());
        let n = r.completion_tokens.unwrap() as i64;
        (0..n)
            .map(|i| ChunkRecord {
                request_id: r.id,
                index: i as u32,
                t_ns: a + (b - a) * i / (n - 1).max(1),
                kind: ChunkKind::Content,
                chars: 1,
                tokens: None,
            })
            .collect()
    }

    #[test]
    fn a_closed_loop_starts_when_the_target_is_in_flight_and_ends_at_the_last_send() {
        // Concurrency 2: the second request is sent 100 ms after the first.
        let rs = vec![
            req(0, 0, 10 * MS, 1000 * MS, 10),
            req(1, 100 * MS, 10 * MS, 1100 * MS, 10),
            req(2, 1000 * MS, 10 * MS, 2000 * MS, 10),
            req(3, 1100 * MS, 10 * MS, 2100 * MS, 10),
        ];
        let cs: Vec<ChunkRecord> = rs.iter().flat_map(chunks_of).collect();
        let s = analyze(&rs, &cs, Load::Closed(2)).unwrap();
        assert_eq!((s.start_ns, s.end_ns), (100 * MS, 1100 * MS));
        // The window is 2.1 s; 1 s of it is steady.
        assert!((s.excluded_share - (1.0 - 1.0 / 2.1)).abs() < 1e-12);
        // Requests 0 and 1 stream 10 tokens each between 10–1000 and 110–1100 ms; inside
        // [100, 1100]: 9 of request 0's chunks (from 120 ms on), all 10 of request 1's and
        // request 2's first (at 1010 ms).
        assert_eq!(s.output_tokens, 20.0);
        assert!((s.output_tokens_per_s - 20.0).abs() < 1e-9);
        assert!(
            (s.excluded_token_share - 0.5).abs() < 1e-12,
            "20 of 40 tokens"
        );
        assert!(s.saturation.is_none(), "closed loops are not tested for it");
        // All sent at once: no steady part.
        let burst: Vec<RequestRecord> = (0..4).map(|i| req(i, 0, MS, 10 * MS, 4)).collect();
        assert_eq!(analyze(&burst, &[], Load::Closed(4)), None);
    }

    #[test]
    fn an_open_loop_whose_queue_grows_is_over_saturated_and_a_stable_one_is_not() {
        // 100 arrivals, 100 ms apart; service 250 ms per request one at a time: the queue grows.
        let mut free = 0;
        let growing: Vec<RequestRecord> = (0..100)
            .map(|i| {
                let sent = i * 100 * MS;
                let start = free.max(sent);
                free = start + 250 * MS;
                req(i as u32, sent, start - sent + 20 * MS, free, 5)
            })
            .collect();
        let s = analyze(&growing, &[], Load::Open).unwrap();
        let sat = s.saturation.unwrap();
        assert!(sat.over_saturated, "{sat:?}");
        assert!(sat.why.unwrap().starts_with("TTFT rose by"));
        // Service 50 ms: the engine keeps up; TTFT jitters without a trend.
        let stable: Vec<RequestRecord> = (0..100)
            .map(|i| {
                let sent = i * 100 * MS;
                req(i as u32, sent, (20 + (i * 7) % 11) * MS, sent + 50 * MS, 5)
            })
            .collect();
        let s = analyze(&stable, &[], Load::Open).unwrap();
        assert_eq!(s.start_ns, 50 * MS, "from the first response");
        let sat = s.saturation.unwrap();
        assert!(!sat.over_saturated, "{sat:?}");
        // A first request refused at once is no response: the steady part starts at the first
        // successful one, and a last request that hung until its timeout stretches no window.
        let mut faulty = stable.clone();
        faulty[0].end_ns = MS;
        faulty[0].error = Some("connection refused".into());
        faulty[99].end_ns = 120_000 * MS;
        faulty[99].error = Some("timed out".into());
        let s = analyze(&faulty, &[], Load::Open).unwrap();
        assert_eq!(s.start_ns, 150 * MS, "from the first successful response");
        // The hung last request's send is past the window's end: the steady part stops there.
        assert_eq!(s.end_ns, 98 * 100 * MS + 50 * MS);
        let w = crate::record::stats::window(&faulty).unwrap();
        assert_eq!(
            w,
            (0, 98 * 100 * MS + 50 * MS),
            "to the last successful end"
        );
        let stats = crate::record::stats::run_stats(&faulty, &[]);
        assert!((stats.window_s - 9.85).abs() < 1e-9, "{}", stats.window_s);
    }
}
