//! The analysis of one `selfbench` measurement, pure: what the client observed against what
//! the scripted server did (its log), per request and per event. No I/O and no clock, so each
//! figure is unit-tested on made-up truth.

use std::collections::HashMap;

use super::server::Truth;
use crate::record::stats::Dist;
use crate::record::{ChunkKind, ChunkRecord, RequestRecord};

/// What the client recorded, on its run clock, with that clock's origin on CLOCK_MONOTONIC
/// (the server's clock) and the schedule the server was told.
pub(super) struct Observed<'a> {
    /// The successful requests.
    pub ok: &'a [&'a RequestRecord],
    pub chunks: &'a [ChunkRecord],
    pub origin_mono: i64,
    /// Streams of the run: requests with a lower id were the first wave.
    pub streams: usize,
    pub ttft_ms: f64,
    pub itl_ms: f64,
}

/// Errors in ms (client − truth) and what the server did.
pub(super) struct Analysis {
    /// Against the schedule alone: the client's TTFT − the scripted TTFT, its ITL − the
    /// scripted ITL.
    pub ttft_err: Dist,
    pub itl_err: Dist,
    /// Against the server's log: first content event's arrival − its send; the same after the
    /// first wave (whose first tokens are all due at one instant); each gap at the client −
    /// the same gap at the server; each event's delivery delay; request setup (client sent →
    /// server has the whole request).
    pub truth_ttft_err: Dist,
    pub truth_ttft_steady: Dist,
    pub truth_itl_err: Dist,
    pub event_delay: Dist,
    pub setup: Dist,
    /// Requests whose events matched the server's log one for one.
    pub matched: usize,
    /// Mean requests in flight at the server over the middle 80 % of the run, time-weighted.
    pub in_flight: f64,
    /// The server's own lateness: each send − when it was due (arrival + ttft + k·itl).
    pub server_late: Dist,
}

const MS: f64 = 1e6;

pub(super) fn analyze(truth: &HashMap<u32, Truth>, o: &Observed) -> Analysis {
    let content = || o.chunks.iter().filter(|c| c.kind == ChunkKind::Content);
    let mut by_req: HashMap<u32, Vec<i64>> = HashMap::new();
    for c in content() {
        by_req
            .entry(c.request_id)
            .or_default()
            .push(c.t_ns + o.origin_mono);
    }
    let mut late = Vec::new();
    for t in truth.values() {
        for (k, s) in t.sends.iter().enumerate() {
            let due = t.arrive_ns as f64 + (o.ttft_ms + k as f64 * o.itl_ms) * MS;
            late.push((*s as f64 - due) / MS);
        }
    }
    let (mut t_ttft, mut steady, mut t_itl, mut delay, mut setup) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut matched = 0;
    for r in o.ok {
        let (Some(t), Some(got)) = (truth.get(&r.id), by_req.get(&r.id)) else {
            continue;
        };
        if t.sends.len() != got.len() || got.is_empty() {
            continue;
        }
        matched += 1;
        let first = (got[0] - t.sends[0]) as f64 / MS;
        t_ttft.push(first);
        if r.id as usize >= o.streams {
            steady.push(first);
        }
        for k in 0..got.len() {
            delay.push((got[k] - t.sends[k]) as f64 / MS);
            if k > 0 {
                t_itl.push(((got[k] - got[k - 1]) - (t.sends[k] - t.sends[k - 1])) as f64 / MS);
            }
        }
        if let Some(sent) = r.sent_ns {
            setup.push((t.arrive_ns - (sent + o.origin_mono)) as f64 / MS);
        }
    }
    let ttft_err =
        o.ok.iter()
            .filter_map(|r| crate::record::stats::ttft_ms(r))
            .map(|t| t - o.ttft_ms)
            .collect();
    let mut last = HashMap::new();
    let mut itl = Vec::new();
    for c in content() {
        if let Some(prev) = last.insert(c.request_id, c.t_ns) {
            itl.push((c.t_ns - prev) as f64 / MS - o.itl_ms);
        }
    }
    Analysis {
        ttft_err: Dist::of(ttft_err),
        itl_err: Dist::of(itl),
        truth_ttft_err: Dist::of(t_ttft),
        truth_ttft_steady: Dist::of(steady),
        truth_itl_err: Dist::of(t_itl),
        event_delay: Dist::of(delay),
        setup: Dist::of(setup),
        matched,
        in_flight: in_flight(truth),
        server_late: Dist::of(late),
    }
}

/// Mean requests in flight at the server over the middle 80 % of the run, time-weighted.
fn in_flight(truth: &HashMap<u32, Truth>) -> f64 {
    let lo = truth.values().map(|t| t.arrive_ns).min().unwrap_or(0);
    let hi = truth.values().map(|t| t.end_ns).max().unwrap_or(0);
    let (a, b) = (lo + (hi - lo) / 10, hi - (hi - lo) / 10);
    if b <= a {
        return 0.0;
    }
    truth
        .values()
        .map(|t| (t.end_ns.min(b) - t.arrive_ns.max(a)).max(0) as f64)
        .sum::<f64>()
        / (b - a) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTFT_MS: f64 = 20.0;
    const ITL_MS: f64 = 5.0;

    /// A server that kept its schedule exactly: request `id` arrives at `arrive_ns`, its k-th
    /// event leaves at arrive + ttft + k·itl.
    fn truth(id: u32, arrive_ns: i64, events: usize) -> (u32, Truth) {
        let sends: Vec<i64> = (0..events)
            .map(|k| arrive_ns + ((TTFT_MS + k as f64 * ITL_MS) * MS) as i64)
            .collect();
        let end_ns = *sends.last().unwrap() + 1_000;
        (
            id,
            Truth {
                arrive_ns,
                end_ns,
                sends,
            },
        )
    }

    /// The client's records of that request: sent `setup_ns` before arrival, each event seen
    /// `delay_ns(k)` after it was sent (run clock = CLOCK_MONOTONIC − origin).
    fn observed(
        t: &(u32, Truth),
        origin: i64,
        setup_ns: i64,
        delay_ns: impl Fn(usize) -> i64,
    ) -> (RequestRecord, Vec<ChunkRecord>) {
        let (id, t) = t;
        let chunks: Vec<ChunkRecord> = t
            .sends
            .iter()
            .enumerate()
            .map(|(k, s)| ChunkRecord {
                request_id: *id,
                index: k as u32,
                t_ns: s + delay_ns(k) - origin,
                kind: ChunkKind::Content,
                chars: 1,
                tokens: None,
            })
            .collect();
        let sent = t.arrive_ns - setup_ns - origin;
        let r = RequestRecord {
            id: *id,
            scheduled_ns: sent,
            sent_ns: Some(sent),
            first_token_ns: Some(chunks[0].t_ns),
            last_token_ns: Some(chunks.last().unwrap().t_ns),
            end_ns: chunks.last().unwrap().t_ns,
            completion_tokens: Some(chunks.len() as u32),
            content_chunks: chunks.len() as u32,
            ..Default::default()
        };
        (r, chunks)
    }

    fn run(delay: impl Fn(usize) -> i64 + Copy, setup_ns: i64) -> Analysis {
        let origin = 1_000_000_000;
        let truths: Vec<(u32, Truth)> = (0..4)
            .map(|i| truth(i, origin + i as i64 * 50_000_000, 8))
            .collect();
        let mut reqs = Vec::new();
        let mut chunks = Vec::new();
        for t in &truths {
            let (r, c) = observed(t, origin, setup_ns, delay);
            reqs.push(r);
            chunks.extend(c);
        }
        let ok: Vec<&RequestRecord> = reqs.iter().collect();
        let truth: HashMap<u32, Truth> = truths.into_iter().collect();
        analyze(
            &truth,
            &Observed {
                ok: &ok,
                chunks: &chunks,
                origin_mono: origin,
                streams: 2,
                ttft_ms: TTFT_MS,
                itl_ms: ITL_MS,
            },
        )
    }

    #[test]
    fn a_client_that_sees_every_event_when_it_is_sent_has_no_error() {
        let a = run(|_| 0, 0);
        assert_eq!(a.matched, 4);
        for d in [
            &a.truth_ttft_err,
            &a.truth_itl_err,
            &a.event_delay,
            &a.setup,
            &a.server_late,
        ] {
            assert!(
                d.max.unwrap().abs() < 1e-9 && d.min.unwrap().abs() < 1e-9,
                "{d:?}"
            );
        }
        assert!(a.ttft_err.max.unwrap().abs() < 1e-9 && a.itl_err.max.unwrap().abs() < 1e-9);
        // Only requests 2 and 3 are past the first wave of 2 streams.
        assert_eq!(a.truth_ttft_steady.n, 2);
    }

    #[test]
    fn a_late_first_event_is_a_ttft_error_and_not_an_itl_error() {
        // Every event seen 0.3 ms late, the first 2 ms late; setup of 0.5 ms.
        let a = run(|k| if k == 0 { 2_000_000 } else { 300_000 }, 500_000);
        assert!(
            (a.truth_ttft_err.p50.unwrap() - 2.0).abs() < 1e-9,
            "{:?}",
            a.truth_ttft_err
        );
        // The gap after the first event is 1.7 ms short at the client; the others exact.
        assert!(
            (a.truth_itl_err.min.unwrap() + 1.7).abs() < 1e-9,
            "{:?}",
            a.truth_itl_err
        );
        assert!(a.truth_itl_err.p50.unwrap().abs() < 1e-9);
        assert!((a.setup.p50.unwrap() - 0.5).abs() < 1e-9);
        // Measured from the client's own send, TTFT includes the setup: 0.5 + 2 ms.
        assert!(
            (a.ttft_err.p50.unwrap() - 2.5).abs() < 1e-9,
            "{:?}",
            a.ttft_err
        );
    }

    #[test]
    fn a_request_whose_events_do_not_match_the_log_is_left_out() {
        let origin = 0;
        let t = truth(7, 10_000_000, 4);
        let (r, mut chunks) = observed(&t, origin, 0, |_| 0);
        chunks.pop();
        let ok = [&r];
        let truth: HashMap<u32, Truth> = [t].into_iter().collect();
        let a = analyze(
            &truth,
            &Observed {
                ok: &ok,
                chunks: &chunks,
                origin_mono: origin,
                streams: 1,
                ttft_ms: TTFT_MS,
                itl_ms: ITL_MS,
            },
        );
        assert_eq!(a.matched, 0);
        assert_eq!(a.truth_ttft_err.n, 0);
    }

    #[test]
    fn in_flight_is_time_weighted_over_the_middle_of_the_run() {
        // Two requests over the same 100 ms: two in flight throughout.
        let t: HashMap<u32, Truth> = [0, 1]
            .map(|i| {
                (
                    i,
                    Truth {
                        arrive_ns: 0,
                        end_ns: 100_000_000,
                        sends: vec![],
                    },
                )
            })
            .into_iter()
            .collect();
        assert!((in_flight(&t) - 2.0).abs() < 1e-9);
        assert_eq!(in_flight(&HashMap::new()), 0.0);
    }
}
