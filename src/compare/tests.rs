use super::*;

pub(super) fn run(config: &str, scale: f64) -> RunValues {
    RunValues {
        label: format!("run {config}"),
        config: config.into(),
        ttft_ms: (1..=200).map(|i| i as f64 * scale).collect(),
        tpot_ms: (1..=200).map(|i| 10.0 + i as f64 * 0.01).collect(),
        e2e_ms: (1..=200).map(|i| 100.0 + i as f64).collect(),
        ttft_group: Vec::new(),
        tpot_group: Vec::new(),
        e2e_group: Vec::new(),
        scores: (0..200).map(|i| f64::from(u8::from(i % 2 == 0))).collect(),
        // 20 questions, each asked 10 times.
        score_samples: (0..200).map(|i| format!("q{}", i % 20)).collect(),
        output_tokens_per_s: Some(100.0 * scale),
        j_per_output_token: None,
        j_per_correct: None,
        saturation: false,
        requests: 200,
        failed: 0,
        machine: None,
    }
}

/// The verdict of the gate `gate` on `c` (past its limit) under the confident rule, and its
/// line.
fn verdict(gate: &str, c: &Change) -> (Judgement, String) {
    let judgement = judge(&parse_gate(gate).unwrap(), c, GateRule::Confident).unwrap();
    let v = Verdict {
        gate,
        metric: c.metric,
        run: "r".into(),
        judgement,
    };
    let line = gate::verdict_line(&v);
    (v.judgement, line)
}

/// Requests at their own instants whose neighbours moved together (AR(1), φ = 0.8) are
/// worth fewer independent ones: the percentile's interval widens and `effective` says
/// by how much; the same values in a scrambled order are worth their count.
#[test]
fn a_percentile_of_requests_that_moved_together_rests_on_fewer() {
    let mut rng = SplitMix64::new(5);
    let series: Vec<f64> = crate::record::stats::block::ar1_from(0.8, 0.0, 1000, &mut rng)
        .into_iter()
        .map(|x| 100.0 + 10.0 * x)
        .collect();
    let (mut a, mut b) = (run("x", 1.0), run("x", 1.0));
    a.ttft_ms = series.clone();
    b.ttft_ms = series.iter().map(|v| v * 1.02).collect();
    let (mut sa, mut sb) = (a.clone(), b.clone());
    a.ttft_group = (0..1000).collect();
    b.ttft_group = a.ttft_group.clone();
    let dependent = change("ttft_p50", &a, &b, 3);
    let e = dependent.effective.unwrap();
    assert_eq!((e.a.n, e.b.n), (1000, 1000));
    // B is A's series scaled: the same indicator, worth the same.
    assert_eq!(e.a.worth, e.b.worth);
    assert!((100..600).contains(&e.a.worth), "{e:?}");
    // p50's rule asks 7 independent requests per side (at 97.5 %): 1000 / worth times 7.
    let need = (7.0 * 1000.0 / e.a.worth as f64).ceil() as usize;
    assert_eq!(dependent.interval_from, Some(need), "{dependent:?}");
    let mut order: Vec<i64> = (0..1000).collect();
    rng.shuffle(&mut order);
    sa.ttft_group = order.clone();
    sb.ttft_group = order;
    let scrambled = change("ttft_p50", &sa, &sb, 3);
    assert_eq!(scrambled.effective, None, "{scrambled:?}");
    let w = |c: &Change| c.ci.map(|(l, h)| h - l).unwrap();
    assert!(
        w(&dependent) > 1.5 * w(&scrambled),
        "{dependent:?} {scrambled:?}"
    );
}

/// Quality's interval resamples questions: 20 questions asked 10 times each give about
/// √10 the interval of 200 independent requests.
#[test]
fn the_quality_interval_resamples_questions() {
    let mut b = run("x", 1.0);
    b.scores = (0..200).map(|i| f64::from(u8::from(i % 20 < 12))).collect();
    let clustered = change("quality", &run("x", 1.0), &b, 3).ci.unwrap();
    let (mut a2, mut b2) = (run("x", 1.0), b.clone());
    a2.score_samples.clear();
    b2.score_samples.clear();
    let flat = change("quality", &a2, &b2, 3).ci.unwrap();
    let w = |c: (f64, f64)| c.1 - c.0;
    assert!(w(clustered) > 2.0 * w(flat), "{clustered:?} vs {flat:?}");
}

#[test]
fn a_slower_ttft_is_a_change_with_an_interval_and_breaks_a_gate() {
    let a = vec![run("x", 1.0), run("only-a", 1.0)];
    let b = vec![run("x", 1.5)];
    let (m, only_a, only_b) = compare(&a, &b);
    assert_eq!((m.len(), only_a.len(), only_b.len()), (1, 1, 0));
    let ttft = m[0].change("ttft_p50").unwrap();
    assert!((ttft.change.unwrap() - 0.5).abs() < 1e-9, "{ttft:?}");
    let (lo, hi) = ttft.ci.unwrap();
    assert!(lo <= 0.5 && 0.5 <= hi && lo > 0.0, "{lo} {hi}");
    let same = m[0].change("quality").unwrap();
    assert_eq!(same.change, Some(0.0));
    let gates = vec![
        parse_gate("ttft_p50>+5%").unwrap(),
        parse_gate("ttft_p99>+5%").unwrap(),
        parse_gate("quality<-1%").unwrap(),
    ];
    let b = judge_all(&gates, &m, GateRule::Confident);
    assert_eq!(b.len(), 2, "{b:?}");
    assert_eq!(b[0].metric, "ttft_p50");
    assert!(matches!(b[0].judgement, Judgement::Fired { .. }), "{b:?}");
    // 200 requests are too few for a 97.5 % interval of p99 on each side (437).
    assert_eq!(
        b[1].judgement,
        Judgement::Inconclusive {
            change: 0.5,
            ci: None,
            n: Some(200),
            need: None,
            unit: "requests",
            mcnemar_p: None,
            lacking: ["A", "B"]
                .map(|side| Lack {
                    side,
                    have: 200,
                    need: 437,
                    unit: "requests"
                })
                .to_vec(),
        }
    );
    let line = gate::verdict_line(&b[1]);
    assert!(line.ends_with("need ~237 more requests per side"), "{line}");
    // Runs of unequal length: A's 1000 requests have what p99 asks, B's 200 do not — the
    // need is B's alone (237 more, not 437 − 200 for both).
    let mut long = run("x", 1.0);
    long.ttft_ms = (1..=1000).map(f64::from).collect();
    let c = change("ttft_p99", &long, &run("x", 10.0), 3);
    let want = [Lack {
        side: "B",
        have: 200,
        need: 437,
        unit: "requests",
    }];
    assert_eq!((c.ci, c.lacking.as_slice()), (None, &want[..]), "{c:?}");
    let (_, line) = verdict("ttft_p99>+5%", &c);
    assert!(line.ends_with("need ~237 more requests in B"), "{line}");
    // Enough requests on both sides, and still no relative interval: A's p50 interval
    // reaches 0 (half its values are 0). No count of requests would tell, and none is said.
    let mut zeros = run("x", 1.0);
    zeros.ttft_ms = (0..1000)
        .map(|i| if i < 490 { 0.0 } else { f64::from(i) })
        .collect();
    let mut twice = zeros.clone();
    twice.ttft_ms.iter_mut().for_each(|x| *x *= 2.0);
    let c = change("ttft_p50", &zeros, &twice, 3);
    assert_eq!((c.ci, c.lacking.len()), (None, 0), "{c:?}");
    let (_, line) = verdict("ttft_p50>+5%", &c);
    assert!(
        line.ends_with("no relative interval: A's percentile reaches 0"),
        "{line}"
    );
    assert!(parse_gate("ttft>5%").is_err());
    assert!(parse_gate("ttft_p99=5%").is_err());
}

#[test]
fn a_change_inside_its_noise_is_inconclusive_and_says_how_many_requests_would_tell() {
    let gate = parse_gate("ttft_p99>+5%").unwrap();
    let c = |change: f64, ci: Option<(f64, f64)>| Change {
        metric: "ttft_p99",
        a: Some(100.0),
        b: Some(100.0 * (1.0 + change)),
        change: Some(change),
        ci,
        n: Some(100),
        p: None,
        interval_from: None,
        groups: None,
        effective: None,
        lacking: Vec::new(),
    };
    // The quickstart's case: +5.3 % with an interval of −90 % … +1132 %.
    let noisy = c(0.053, Some((-0.9, 11.32)));
    match judge(&gate, &noisy, GateRule::Confident).unwrap() {
        Judgement::Inconclusive { need, .. } => {
            // The side toward the limit, 0.953, over a distance of 0.003 to it: ~10
            // million per side.
            assert!(need.unwrap() > 1_000_000, "{need:?}");
        }
        j => panic!("{j:?}"),
    }
    assert!(matches!(
        judge(&gate, &noisy, GateRule::Point),
        Some(Judgement::Fired { .. })
    ));
    // Past the limit with the whole interval: fires. Within the limit: holds.
    assert!(matches!(
        judge(&gate, &c(0.5, Some((0.3, 0.7))), GateRule::Confident),
        Some(Judgement::Fired { .. })
    ));
    assert_eq!(
        judge(&gate, &c(0.02, Some((-0.5, 0.6))), GateRule::Confident),
        None
    );
    // No interval (throughput from one run): inconclusive, never fired by default.
    let mut flat = c(0.5, None);
    flat.n = None;
    let v = Verdict {
        gate: &gate.text,
        metric: "tokens_per_s",
        run: "r".into(),
        judgement: judge(&gate, &flat, GateRule::Confident).unwrap(),
    };
    assert!(
        verdict_line(&v).contains("no interval"),
        "{}",
        verdict_line(&v)
    );
    // A lower gate judges the upper bound.
    let down = parse_gate("quality<-2%").unwrap();
    assert!(matches!(
        judge(&down, &c(-0.1, Some((-0.15, -0.05))), GateRule::Confident),
        Some(Judgement::Fired { .. })
    ));
    assert!(matches!(
        judge(&down, &c(-0.1, Some((-0.15, 0.01))), GateRule::Confident),
        Some(Judgement::Inconclusive { .. })
    ));
}

/// One run of `batches` batches of `size` requests whose TPOT moves with its batch: each
/// batch's server state (a lognormal factor, sd 10 %) times a small per-request noise.
fn batched(rng: &mut SplitMix64, batches: usize, size: usize) -> RunValues {
    let mut r = run("x", 1.0);
    r.tpot_ms.clear();
    r.tpot_group.clear();
    for b in 0..batches {
        let state = (0.1 * rng.normal()).exp();
        for _ in 0..size {
            r.tpot_ms.push(20.0 * state * (0.01 * rng.normal()).exp());
            r.tpot_group.push(b as i64 * 1_000_000);
        }
    }
    r
}

/// Two runs of one configuration (the same distribution): a batch's requests resampled
/// one by one make an interval that misses "no change" most of the time; resampled by
/// batch, about as often as a 95 % interval should. Seeded: the same verdict every time.
#[test]
fn batched_requests_are_resampled_by_batch_and_keep_the_false_alarm_rate() {
    let mut rng = SplitMix64::new(7);
    let (trials, mut grouped_misses, mut flat_misses) = (100u64, 0, 0);
    for t in 0..trials {
        let (a, b) = (batched(&mut rng, 12, 16), batched(&mut rng, 12, 16));
        let c = change("tpot_p50", &a, &b, t);
        assert_eq!(c.groups, Some(12));
        let (lo, hi) = c.ci.expect("12 batches per side are enough for p50");
        grouped_misses += u64::from(lo > 0.0 || hi < 0.0);
        let (lo, hi) = percentile_ratio_ci(
            &a.tpot_ms,
            &b.tpot_ms,
            50.0,
            (a.tpot_ms.len(), b.tpot_ms.len()),
        )
        .unwrap();
        flat_misses += u64::from(lo > 0.0 || hi < 0.0);
    }
    assert!(
        grouped_misses <= trials / 10,
        "{grouped_misses} of {trials}"
    );
    assert!(flat_misses >= trials / 4, "{flat_misses} of {trials}");
    // Three batches are three observations: no interval, and a gate cannot fire.
    let (a, mut b) = (batched(&mut rng, 3, 4), batched(&mut rng, 3, 4));
    b.tpot_ms.iter_mut().for_each(|x| *x *= 2.0);
    let c = change("tpot_p50", &a, &b, 1);
    assert_eq!((c.ci, c.groups, c.interval_from), (None, Some(3), Some(7)));
    let g = parse_gate("tpot_p50>+5%").unwrap();
    match judge(&g, &c, GateRule::Confident).unwrap() {
        Judgement::Inconclusive {
            n,
            need,
            unit,
            lacking,
            ..
        } => {
            assert_eq!((n, need, unit), (Some(3), None, "batches"));
            let each = ["A", "B"].map(|side| Lack {
                side,
                have: 3,
                need: 7,
                unit: "batches",
            });
            assert_eq!(lacking, each);
        }
        j => panic!("{j:?}"),
    }
    assert_eq!(show::cells(&c)[5], "12 in 3 batches");
}

/// A side in batches against one whose requests each had their own instant: the latter
/// is resampled in blocks of neighbours where they moved together (AR(1), φ = 0.8), so
/// its dependence widens the interval as it does between two such sides.
#[test]
fn beside_a_batched_side_requests_that_moved_together_are_resampled_in_blocks() {
    let mut rng = SplitMix64::new(11);
    let a = batched(&mut rng, 12, 16);
    let mut b = run("x", 1.0);
    b.tpot_ms = crate::record::stats::block::ar1_from(0.8, 0.0, 600, &mut rng)
        .into_iter()
        .map(|x| 20.0 * (0.3 * x).exp())
        .collect();
    b.tpot_group = (0..600).collect();
    let dependent = change("tpot_p50", &a, &b, 3);
    let e = dependent.effective.expect("B's requests moved together");
    // A's 192 requests are worth its 12 batches.
    assert_eq!((e.a.n, e.a.worth, e.b.n), (192, 12, 600));
    assert!((12..400).contains(&e.b.worth), "{e:?}");
    // The observations behind the interval: A's 12 batches, fewer than B's worth; an
    // interval needs 7 of them (p50's rule).
    assert_eq!(
        (dependent.groups, dependent.interval_from),
        (Some(12), Some(7))
    );
    assert_eq!(show::cells(&dependent)[5], "192 in 12 batches");
    // The requests counted are the batched side's, whichever side has fewer.
    let mut fewer = b.clone();
    fewer.tpot_ms.truncate(100);
    fewer.tpot_group.truncate(100);
    let c = change("tpot_p50", &fewer, &a, 3);
    assert_eq!(show::cells(&c)[5], "192 in 12 batches", "{c:?}");
    let mut order: Vec<i64> = (0..600).collect();
    rng.shuffle(&mut order);
    let mut scrambled = b.clone();
    scrambled.tpot_group = order;
    let independent = change("tpot_p50", &a, &scrambled, 3);
    let e = independent.effective.unwrap();
    assert_eq!((e.a.worth, e.b.worth), (12, 600), "{independent:?}");
    // Same values either way: only B's order, and so its blocks, differ.
    assert_eq!(dependent.b, independent.b);
    let w = |c: &Change| c.ci.map(|(l, h)| h - l).unwrap();
    assert!(
        w(&dependent) > 1.25 * w(&independent),
        "{dependent:?} {independent:?}"
    );
    // At p99 B is worth fewer than A's batches and rules: no interval (p99 asks 437
    // independent observations per side), and what it lacks is said in B's requests, not
    // in batches.
    let mut b99 = b.clone();
    b99.ttft_ms = b.tpot_ms.iter().map(|x| 1.5 * x).collect();
    b99.ttft_group = b.tpot_group.clone();
    let mut a99 = a.clone();
    a99.ttft_ms = (0..600).map(|i| 20.0 + (i % 40) as f64).collect();
    a99.ttft_group = (0..600).map(|i| i / 2).collect();
    let p99 = change("ttft_p99", &a99, &b99, 3);
    let e = p99.effective.unwrap();
    assert_eq!((e.a.worth, e.b.n), (300, 600));
    assert!(e.b.worth < 300, "{e:?}");
    assert_eq!((p99.ci, p99.groups, p99.n), (None, None, Some(600)));
    let need = (437.0 * 600.0 / e.b.worth as f64).ceil() as usize;
    assert_eq!(p99.interval_from, Some(need));
    let line = |c: &Change| {
        let (j, text) = verdict("ttft_p99>+1%", c);
        let Judgement::Inconclusive {
            unit,
            need,
            lacking,
            ..
        } = &j
        else {
            panic!("{j:?} {c:?}")
        };
        assert_eq!((*unit, *need), ("requests", None), "{c:?}");
        let sides: Vec<&str> = lacking.iter().map(|l| l.side).collect();
        (sides, text)
    };
    // A's 300 batches are short of 437 too: each side lacks, in its own unit.
    let (sides, text) = line(&p99);
    assert_eq!(sides, ["A", "B"]);
    let both = format!(
        "need ~137 more batches in A and ~{} more requests in B",
        need - 600
    );
    assert!(text.ends_with(&both), "{text}");
    // With 500 batches A has what p99 asks: only B lacks requests, and the line says so.
    a99.ttft_ms = (0..1000).map(|i| 20.0 + (i % 40) as f64).collect();
    a99.ttft_group = (0..1000).map(|i| i / 2).collect();
    let p99 = change("ttft_p99", &a99, &b99, 3);
    assert_eq!(p99.interval_from, Some(need));
    let (sides, text) = line(&p99);
    assert_eq!(sides, ["B"]);
    assert!(text.ends_with(&format!("need ~{} more requests in B", need - 600)));
    // Swapped, the side named follows.
    let swapped = change("ttft_p99", &b99, &a99, 3);
    assert_eq!(
        swapped.lacking.iter().map(|l| l.side).collect::<Vec<_>>(),
        ["A"]
    );
}

#[test]
fn quality_is_compared_item_by_item_with_mcnemar() {
    let mut a = run("x", 1.0);
    let mut b = run("x", 1.0);
    // 100 items once each: A right on the first 60, B on the first 50.
    a.scores = (0..100).map(|i| f64::from(u8::from(i < 60))).collect();
    b.scores = (0..100).map(|i| f64::from(u8::from(i < 50))).collect();
    a.score_samples = (0..100).map(|i| format!("q{i}")).collect();
    b.score_samples = a.score_samples.clone();
    let q = change("quality", &a, &b, 1);
    assert_eq!(q.n, Some(100));
    // 10 discordant items, all one way: p = 2 · 0.5^10.
    assert!((q.p.unwrap() - 2.0 * 0.5f64.powi(10)).abs() < 1e-15);
    let (lo, hi) = q.ci.unwrap();
    assert!(hi < 0.0 && lo < q.change.unwrap(), "{lo} {hi}");
}
