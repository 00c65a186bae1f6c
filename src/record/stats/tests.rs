//! Unit tests of the run statistics (beside stats.rs, which is long enough without them).
use super::*;
use crate::record::ChunkKind;

#[test]
fn latencies_sent_together_are_resampled_together() {
    let v: Vec<f64> = (0..40)
        .map(|i| f64::from(i / 4) + 0.01 * f64::from(i))
        .collect();
    let p50 = |x: &mut [f64]| pct_of(x, 50.0);
    // One request per instant, neighbours in time unrelated (the values in a scrambled
    // order): the ordinary bootstrap, number for number.
    let mut apart: Vec<i64> = (0..40).collect();
    crate::record::rng::SplitMix64::new(9).shuffle(&mut apart);
    assert_eq!(batches(&v, &apart), None);
    assert_eq!(
        grouped_bootstrap_ci(&v, &apart, 50.0, 6, 500, 3),
        bootstrap_ci(&v, 500, 3, p50)
    );
    assert_eq!(batches(&v, &[]), None);
    // Ten batches of four: whole batches resampled, a wider interval.
    let batches: Vec<i64> = (0..40).map(|i| i / 4).collect();
    let split = super::batches(&v, &batches).unwrap();
    assert_eq!(split.len(), 10);
    assert!(split.iter().all(|b| b.len() == 4));
    let w = |c: Option<(f64, f64)>| c.map(|(lo, hi)| hi - lo).unwrap();
    let (by_batch, by_request) = (
        grouped_bootstrap_ci(&v, &batches, 50.0, 6, 500, 3),
        bootstrap_ci(&v, 500, 3, p50),
    );
    assert!(w(by_batch) > w(by_request), "{by_batch:?} {by_request:?}");
    // Fewer batches than the percentile's rule asks for: no interval.
    assert_eq!(grouped_bootstrap_ci(&v, &batches, 50.0, 11, 500, 3), None);
    // The distribution counts its batches as its observations.
    let d = Dist::of_scheduled(v.iter().copied().zip(batches.iter().copied()).collect());
    assert_eq!((d.n, d.groups, d.observations()), (40, Some(10), 10));
    let d = Dist::of_scheduled(v.iter().copied().zip(apart).collect());
    assert_eq!((d.groups, d.observations()), (None, 40));
    assert_eq!(d, Dist::of(v));
}

#[test]
fn percentiles_interpolate_like_numpy() {
    let v = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(percentile(&v, 50.0), Some(2.5));
    assert!((percentile(&v, 90.0).unwrap() - 3.7).abs() < 1e-12);
    assert_eq!(percentile(&v, 0.0), Some(1.0));
    assert_eq!(percentile(&v, 100.0), Some(4.0));
    assert_eq!(percentile(&[], 50.0), None);
    let d = Dist::of(vec![2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
    assert_eq!(d.mean, Some(5.0));
    assert!((d.std.unwrap() - 2.138_089_935).abs() < 1e-6);
}

fn req(id: u32, sched: i64, sent: i64, first: i64, last: i64, tokens: u32) -> RequestRecord {
    RequestRecord {
        id,
        scheduled_ns: sched,
        sent_ns: Some(sent),
        first_token_ns: Some(first),
        last_token_ns: Some(last),
        end_ns: last + 1_000_000,
        completion_tokens: Some(tokens),
        prompt_tokens: Some(10),
        ..Default::default()
    }
}

#[test]
fn a_reasoning_model_is_timed_from_its_first_thought_and_to_its_first_answer_token() {
    // Reasoning from 12 ms, the answer from 32 ms, the last token at 52 ms; 5 tokens.
    let r = RequestRecord {
        first_reasoning_ns: Some(12_000_000),
        first_token_ns: Some(32_000_000),
        reasoning_tokens: Some(2),
        ..req(0, 0, 2_000_000, 0, 52_000_000, 5)
    };
    assert_eq!(ttft_ms(&r), Some(10.0));
    assert_eq!(ttfa_ms(&r), Some(30.0));
    assert_eq!(tpot_ms(&r), Some(10.0)); // every generated token, reasoning included
    let chunk = |t_ns, kind| ChunkRecord {
        request_id: 0,
        index: 0,
        t_ns,
        kind,
        chars: 1,
        tokens: None,
    };
    let chunks = [
        chunk(12_000_000, ChunkKind::Reasoning),
        chunk(22_000_000, ChunkKind::Reasoning),
        chunk(32_000_000, ChunkKind::Content),
        chunk(42_000_000, ChunkKind::Content),
        chunk(52_000_000, ChunkKind::Content),
    ];
    let plain = req(1, 0, 2_000_000, 12_000_000, 52_000_000, 5);
    let s = run_stats(&[r], &chunks);
    assert_eq!(s.reasoning_requests, 1);
    assert_eq!(s.reasoning_tokens, Some(2));
    assert_eq!(s.ttft_ms.p50, Some(10.0));
    assert_eq!(s.ttfa_ms.p50, Some(30.0));
    // Four gaps of 10 ms between generated chunks, reasoning and answer alike.
    assert_eq!(s.itl_ms.n, 4);
    assert_eq!(s.itl_ms.p50, Some(10.0));
    // A model that does not reason: TTFA is its TTFT, and no reasoning tokens are claimed.
    let s = run_stats(&[plain], &[]);
    assert_eq!(s.reasoning_requests, 0);
    assert_eq!(s.reasoning_tokens, None);
    assert_eq!(s.ttfa_ms.p50, s.ttft_ms.p50);
}

#[test]
fn latency_definitions() {
    let r = req(0, 0, 2_000_000, 12_000_000, 52_000_000, 5);
    assert_eq!(ttft_ms(&r), Some(10.0));
    assert_eq!(tpot_ms(&r), Some(10.0)); // 40 ms over 4 gaps
    assert_eq!(e2e_ms(&r), 52.0);
    assert_eq!(queue_ms(&r), Some(2.0));
    assert_eq!(tpot_ms(&req(0, 0, 0, 5, 5, 1)), None);
}

#[test]
fn itl_per_token_stays_right_when_chunks_carry_several_tokens() {
    // Scripted: 3 content chunks 30 ms apart carrying 10 tokens each (LMDeploy-like);
    // usage says 30 tokens. Per chunk 30 ms; per token 3 ms.
    let mut r = req(0, 0, 0, 10_000_000, 70_000_000, 30);
    r.content_chunks = 3;
    let c = |i: u32, t: i64, tokens: Option<u32>| ChunkRecord {
        request_id: 0,
        index: i,
        t_ns: t,
        kind: ChunkKind::Content,
        chars: 40,
        tokens,
    };
    let estimated = run_stats(
        std::slice::from_ref(&r),
        &[
            c(0, 10_000_000, None),
            c(1, 40_000_000, None),
            c(2, 70_000_000, None),
        ],
    );
    assert_eq!(estimated.itl_ms.p50, Some(30.0));
    assert_eq!(estimated.itl_per_token_ms.p50, Some(3.0));
    // TPOT from usage: 60 ms over 29 token gaps, regardless of chunking.
    assert!((estimated.tpot_ms.p50.unwrap() - 60.0 / 29.0).abs() < 1e-9);
    // Per-chunk counts from the server win over the estimate: 2 then 20 tokens.
    let reported = run_stats(
        &[r],
        &[
            c(0, 10_000_000, Some(8)),
            c(1, 40_000_000, Some(2)),
            c(2, 70_000_000, Some(20)),
        ],
    );
    // Gaps of 30 ms over 2 and 20 tokens: 15 and 1.5 ms per token.
    assert_eq!(reported.itl_per_token_ms.min, Some(1.5));
    assert_eq!(reported.itl_per_token_ms.max, Some(15.0));
}

#[test]
fn failed_requests_are_counted_apart() {
    let mut bad = req(1, 0, 0, 1, 1, 99);
    bad.error = Some("HTTP 500".into());
    let good = req(0, 0, 0, 10_000_000, 30_000_000, 3);
    let chunks = vec![
        ChunkRecord {
            request_id: 0,
            index: 0,
            t_ns: 10_000_000,
            kind: ChunkKind::Content,
            chars: 1,
            tokens: None,
        },
        ChunkRecord {
            request_id: 0,
            index: 1,
            t_ns: 20_000_000,
            kind: ChunkKind::Content,
            chars: 1,
            tokens: None,
        },
        ChunkRecord {
            request_id: 0,
            index: 2,
            t_ns: 30_000_000,
            kind: ChunkKind::Content,
            chars: 1,
            tokens: None,
        },
        ChunkRecord {
            request_id: 1,
            index: 0,
            t_ns: 500,
            kind: ChunkKind::Content,
            chars: 1,
            tokens: None,
        },
        ChunkRecord {
            request_id: 1,
            index: 1,
            t_ns: 900,
            kind: ChunkKind::Content,
            chars: 1,
            tokens: None,
        },
    ];
    let s = run_stats(&[good, bad], &chunks);
    assert_eq!((s.requests, s.ok, s.failed), (2, 1, 1));
    assert_eq!(s.failures.get("HTTP 500"), Some(&1));
    assert_eq!(s.output_tokens, 3);
    assert_eq!(s.itl_ms.n, 2);
    assert_eq!(s.itl_ms.p50, Some(10.0));
    assert_eq!(s.ttft_ms.n, 1);
}

#[test]
fn an_output_that_arrived_in_one_event_has_no_time_per_token() {
    // 18 tokens, the first and the last at the same instant: not 0 ms per token, none.
    assert_eq!(tpot_ms(&req(0, 0, 0, 40_000_000, 40_000_000, 18)), None);
    // Two events 17 ms apart over 18 tokens: 1 ms per token.
    assert_eq!(
        tpot_ms(&req(1, 0, 0, 40_000_000, 57_000_000, 18)),
        Some(1.0)
    );
}

#[test]
fn a_distribution_weighed_in_time_order_counts_what_its_requests_are_worth() {
    // 1000 requests, neighbours moving together (AR(1), φ = 0.9), one per instant.
    let mut rng = crate::record::rng::SplitMix64::new(4);
    let v: Vec<f64> = block::ar1_from(0.9, 0.0, 1000, &mut rng)
        .into_iter()
        .map(|x| 50.0 + x)
        .collect();
    let at: Vec<i64> = (0..1000).collect();
    let mut d = Dist::of_scheduled(v.iter().copied().zip(at.iter().copied()).collect());
    assert_eq!(d.observations_at(99.0), 1000);
    d.weigh(&v, &at);
    assert!(
        d.worth.iter().all(|w| w.is_some_and(|w| w < 1000)),
        "{:?}",
        d.worth
    );
    assert!(d.observations_at(99.0) < 368, "{:?}", d.worth);
    assert_eq!(d.observations(), 1000);
    // Not recorded: stats.json is what the run wrote.
    let json = serde_json::to_string(&d).unwrap();
    assert!(!json.contains("worth"), "{json}");
    // The same values in a scrambled order are worth their count.
    let mut order = at.clone();
    rng.shuffle(&mut order);
    let mut e = Dist::of(v.clone());
    e.weigh(&v, &order);
    assert_eq!(e.worth, [None; 4]);
    // Batches are counted by their groups, not weighed.
    let batched: Vec<i64> = (0..1000).map(|i| i / 10).collect();
    let mut b = Dist::of_scheduled(v.iter().copied().zip(batched.iter().copied()).collect());
    b.weigh(&v, &batched);
    assert_eq!((b.worth, b.observations_at(99.0)), ([None; 4], 100));
}
