use super::*;

#[test]
fn traces_load_from_jsonl_csv_and_parquet_and_errors_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("t.jsonl");
    std::fs::write(&j, "{\"t\": 0.5, \"output_tokens\": 7}\n{\"t\": 0.1}\n").unwrap();
    let items = load_trace(&j).unwrap();
    assert_eq!(
        items,
        vec![
            TraceItem {
                t: 0.1,
                output_tokens: None
            },
            TraceItem {
                t: 0.5,
                output_tokens: Some(7)
            }
        ]
    );
    let c = dir.path().join("t.csv");
    std::fs::write(&c, "t,prompt_tokens,output_tokens\n0.0,10,3\n1.5,20,4\n").unwrap();
    assert_eq!(
        load_trace(&c).unwrap()[1],
        TraceItem {
            t: 1.5,
            output_tokens: Some(4)
        }
    );
    std::fs::write(&c, "t,output_tokens\n0.0,3\nsoon,4\n").unwrap();
    let e = load_trace(&c).unwrap_err().to_string();
    assert!(
        e.ends_with("t.csv:3: `t` must be a number of seconds ≥ 0"),
        "{e}"
    );
    // Quoted fields with commas and quotes, CRLF line ends, a header in any order.
    std::fs::write(
        &c,
        "prompt,output_tokens,t\r\n\"Hello, \"\"world\"\"\",7,0.25\r\n\"a\nb\",8,1\r\n",
    )
    .unwrap();
    assert_eq!(
        load_trace(&c).unwrap(),
        vec![
            TraceItem {
                t: 0.25,
                output_tokens: Some(7)
            },
            TraceItem {
                t: 1.0,
                output_tokens: Some(8)
            }
        ]
    );
    std::fs::write(&j, "{\"t\": 0.5}\n{broken\n").unwrap();
    assert!(load_trace(&j)
        .unwrap_err()
        .to_string()
        .contains("t.jsonl:2:"));
    assert!(load_trace(&dir.path().join("t.txt"))
        .unwrap_err()
        .to_string()
        .contains("unknown trace format"));
}

#[test]
fn rate_schedule_has_the_asked_rate_burstiness_and_ramp() {
    for k in [0.5, 1.0, 4.0] {
        let p = rate_schedule(50.0, k, 200.0, None, 10, 5);
        let n = p.len() as f64;
        assert!(
            (n - 10_000.0).abs() < 400.0,
            "k={k}: {n} arrivals for 10 000 expected"
        );
        let gaps: Vec<f64> = p
            .windows(2)
            .map(|w| (w[1].at - w[0].at).as_secs_f64())
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!(
            (sd / mean - 1.0 / k.sqrt()).abs() < 0.08 / k.sqrt(),
            "k={k} cv {}",
            sd / mean
        );
    }
    // A linear ramp 0 → 20/s over 100 s: half as many arrivals as a flat 20/s, and the
    // second half of the time holds three quarters of them.
    let p = rate_schedule(20.0, 1.0, 100.0, Some(0.0), 10, 9);
    assert!((p.len() as f64 - 1000.0).abs() < 100.0, "{}", p.len());
    let late = p.iter().filter(|x| x.at >= Duration::from_secs(50)).count() as f64;
    assert!(
        (late / p.len() as f64 - 0.75).abs() < 0.05,
        "{}",
        late / p.len() as f64
    );
    assert_eq!(
        p,
        rate_schedule(20.0, 1.0, 100.0, Some(0.0), 10, 9),
        "seeded"
    );
    // From 0, the first arrival comes when the ramp has brought one: at √(2u/a), about 2.8 s
    // on average here, whatever the seed — never an empty or half-empty run.
    let firsts: Vec<f64> = (0..200)
        .map(|seed| rate_schedule(20.0, 1.0, 100.0, Some(0.0), 10, seed))
        .map(|p| {
            assert!(p.len() > 800, "{}", p.len());
            p[0].at.as_secs_f64()
        })
        .collect();
    let mean = firsts.iter().sum::<f64>() / firsts.len() as f64;
    assert!((2.3..3.3).contains(&mean), "{mean}");
    // A ramp down, 20/s → 0: as many arrivals, three quarters in the first half.
    let down = rate_schedule(0.0, 1.0, 100.0, Some(20.0), 10, 9);
    assert!((down.len() as f64 - 1000.0).abs() < 100.0, "{}", down.len());
    let early = down
        .iter()
        .filter(|x| x.at < Duration::from_secs(50))
        .count() as f64;
    assert!((early / down.len() as f64 - 0.75).abs() < 0.05);
}

/// A test double counting how many requests are in flight at once.
struct Counting {
    now: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
}

impl InferenceClient for Counting {
    async fn stream(
        &self,
        req: GenRequest,
        scheduled: Instant,
        clock: RunClock,
    ) -> (RequestRecord, Vec<ChunkRecord>) {
        use std::sync::atomic::Ordering::SeqCst;
        let n = self.now.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(n, SeqCst);
        tokio::time::sleep(Duration::from_millis(5 + (req.id as u64 % 3) * 5)).await;
        self.now.fetch_sub(1, SeqCst);
        let t = clock.ns(Instant::now());
        (
            RequestRecord {
                id: req.id,
                scheduled_ns: clock.ns(scheduled),
                sent_ns: Some(clock.ns(scheduled)),
                end_ns: t,
                ..Default::default()
            },
            vec![],
        )
    }
}

/// Runs a scenario on a test client with a fresh clock and no progress bar.
async fn run_on<C: InferenceClient>(
    client: Arc<C>,
    inst: &ScenarioInstance,
    n_samples: usize,
    seed: u64,
    cancel: Cancel,
) -> Outcome {
    run(
        client,
        inst,
        samples(n_samples),
        seed,
        RunClock::start(),
        cancel,
        ProgressBar::hidden(),
        &[],
        None,
    )
    .await
}

fn samples(n: usize) -> Arc<Vec<Sample>> {
    Arc::new(
        (0..n)
            .map(|i| Sample {
                id: format!("s{i}"),
                system: None,
                prompt: "p".into(),
                reference: "A".into(),
                ..Default::default()
            })
            .collect(),
    )
}

/// A server of known capacity: `slots` requests served at once, each taking `service`;
/// the rest wait for a slot (so TTFT grows with the queue). Capacity = slots / service.
struct Capacity {
    slots: tokio::sync::Semaphore,
    service: Duration,
}

impl InferenceClient for Capacity {
    async fn stream(
        &self,
        req: GenRequest,
        scheduled: Instant,
        clock: RunClock,
    ) -> (RequestRecord, Vec<ChunkRecord>) {
        let sent = clock.ns(Instant::now());
        let _slot = self.slots.acquire().await.expect("open");
        tokio::time::sleep(self.service).await;
        let t = clock.ns(Instant::now());
        (
            RequestRecord {
                id: req.id,
                scheduled_ns: clock.ns(scheduled),
                sent_ns: Some(sent),
                first_token_ns: Some(t),
                last_token_ns: Some(t),
                end_ns: t,
                completion_tokens: Some(1),
                content_chunks: 1,
                chunks: 1,
                ..Default::default()
            },
            vec![],
        )
    }
}

fn probe(rate: f64, passed: bool) -> Probe {
    Probe {
        rate,
        first_request_id: 0,
        requests: 1,
        ok: 1,
        error_rate: 0.0,
        ttft_p95_ms: None,
        e2e_p95_ms: None,
        goodput_rps: 0.0,
        achieved_rps: 0.0,
        passed,
        missed: vec![],
    }
}

#[test]
fn the_p95_interval_covers_the_true_p95_and_narrows() {
    // Exponential latencies with mean 100 ms: true p95 = 100·ln 20 ≈ 299.6 ms.
    let truth = 100.0 * 20f64.ln();
    let mut covered = 0;
    for s in 0..200u64 {
        let mut rng = SplitMix64::new(s);
        let mut v: Vec<f64> = (0..400).map(|_| rng.exponential(1.0 / 100.0)).collect();
        let (lo, _, hi) = p95_interval(&mut v).unwrap();
        covered += usize::from(lo <= truth && truth <= hi);
    }
    assert!((180..=200).contains(&covered), "covered {covered} of 200");
    let mut few: Vec<f64> = (1..=50).map(f64::from).collect();
    assert!(
        p95_interval(&mut few).is_none(),
        "50 samples cannot bound a p95"
    );
}

#[tokio::test]
async fn closed_loop_stops_early_once_tight_and_never_sooner() {
    let (_tx, cancel) = Cancel::new();
    // Constant 10-20 ms latencies: the interval gets tight as soon as it exists.
    let inst = ScenarioInstance::Concurrency {
        concurrency: 4,
        requests: Some(2000),
        early_stop: Some(0.5),
    };
    let client = Arc::new(Counting {
        now: 0.into(),
        peak: 0.into(),
    });
    let out = run_on(client, &inst, 8, 1, cancel).await;
    assert!(out.stopped_early);
    assert!(
        (70..400).contains(&out.requests.len()),
        "{} requests",
        out.requests.len()
    );
}

#[test]
fn saturation_ramps_then_bisects() {
    let spec = crate::spec::SaturationSpec {
        start: 1.0,
        factor: 2.0,
        max_rate: 100.0,
        step_s: 1.0,
        precision: 0.05,
        burstiness: 1.0,
        ttft_p95: Some(1.0),
        e2e_p95: None,
        max_error_rate: 0.0,
    };
    let next = |p: &[Probe]| next_rate(p, &spec);
    assert_eq!(next(&[]), Some(1.0));
    assert_eq!(next(&[probe(1.0, true)]), Some(2.0));
    assert_eq!(next(&[probe(1.0, true), probe(2.0, true)]), Some(4.0));
    let p = [probe(1.0, true), probe(2.0, true), probe(4.0, false)];
    assert_eq!(next(&p), Some(3.0));
    let p = [
        probe(1.0, true),
        probe(2.0, true),
        probe(4.0, false),
        probe(3.0, false),
    ];
    assert_eq!(next(&p), Some(2.5));
    // Within 5 %: done.
    let p = [probe(2.0, true), probe(2.05, false)];
    assert_eq!(next(&p), None);
    // The first probe fails: nothing below is probed.
    assert_eq!(next(&[probe(1.0, false)]), None);
    // Everything passes up to max-rate.
    assert_eq!(next(&[probe(64.0, true)]), Some(100.0));
    assert_eq!(next(&[probe(64.0, true), probe(100.0, true)]), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saturation_finds_a_known_capacity_within_ten_percent() {
    // 4 slots × 50 ms = 80 requests/s. Regular arrivals (burstiness 100: CV 0.1), so a
    // queue forms only above capacity; the TTFT threshold allows little queueing.
    let client = Arc::new(Capacity {
        slots: tokio::sync::Semaphore::new(4),
        service: Duration::from_millis(50),
    });
    let (_tx, cancel) = Cancel::new();
    let inst = ScenarioInstance::Saturation(crate::spec::SaturationSpec {
        start: 10.0,
        factor: 2.0,
        max_rate: 1000.0,
        step_s: 2.0,
        precision: 0.03,
        burstiness: 100.0,
        ttft_p95: Some(0.09),
        e2e_p95: None,
        max_error_rate: 0.0,
    });
    let out = run_on(client, &inst, 8, 3, cancel).await;
    let sat = out.saturation.expect("a saturation result");
    let found = sat.rate.expect("some rate passed");
    assert!(
        (found - 80.0).abs() / 80.0 <= 0.10,
        "found {found:.1} req/s; probes: {:?}",
        sat.probes
            .iter()
            .map(|p| (p.rate, p.passed, p.ttft_p95_ms))
            .collect::<Vec<_>>()
    );
    // Every request belongs to exactly one probe, ids contiguous.
    let total: usize = sat.probes.iter().map(|p| p.requests).sum();
    assert_eq!(total, out.requests.len());
    assert!(out
        .requests
        .iter()
        .enumerate()
        .all(|(i, r)| r.id as usize == i));
}

/// Blocks its executor thread before each send: a client starved of CPU.
struct Starved;

impl InferenceClient for Starved {
    async fn stream(
        &self,
        req: GenRequest,
        scheduled: Instant,
        clock: RunClock,
    ) -> (RequestRecord, Vec<ChunkRecord>) {
        std::thread::sleep(Duration::from_millis(40));
        let sent = clock.ns(Instant::now());
        (
            RequestRecord {
                id: req.id,
                scheduled_ns: clock.ns(scheduled),
                sent_ns: Some(sent),
                first_token_ns: Some(sent),
                last_token_ns: Some(sent),
                end_ns: sent,
                completion_tokens: Some(1),
                content_chunks: 1,
                ..Default::default()
            },
            vec![],
        )
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_starved_client_is_flagged_as_behind() {
    let (_tx, cancel) = Cancel::new();
    // 50 requests/s for 1 s on one thread that each send blocks for 40 ms: sends fall
    // further and further behind their schedule.
    let inst = ScenarioInstance::Rate {
        rate: 50.0,
        burstiness: 1.0,
        duration_s: 1.0,
        ramp_from: None,
    };
    let out = run_on(Arc::new(Starved), &inst, 8, 1, cancel).await;
    let stats = crate::record::stats::run_stats(&out.requests, &out.chunks);
    assert!(stats.client_behind, "queue p99 {:?}", stats.queue_ms.p99);
    // The same schedule on a client that does not block is not flagged.
    let (_tx, cancel) = Cancel::new();
    let fine = run(
        Arc::new(Capacity {
            slots: tokio::sync::Semaphore::new(1000),
            service: Duration::from_millis(1),
        }),
        &inst,
        samples(8),
        1,
        RunClock::start(),
        cancel,
        ProgressBar::hidden(),
        &[],
        None,
    )
    .await;
    let stats = crate::record::stats::run_stats(&fine.requests, &fine.chunks);
    assert!(!stats.client_behind, "queue p99 {:?}", stats.queue_ms.p99);
}

#[tokio::test]
async fn closed_loop_keeps_exactly_n_in_flight_and_offline_sends_all_at_once() {
    let (_tx, cancel) = Cancel::new();
    let client = Arc::new(Counting {
        now: 0.into(),
        peak: 0.into(),
    });
    let inst = ScenarioInstance::Concurrency {
        concurrency: 4,
        requests: Some(40),
        early_stop: None,
    };
    let out = run(
        client.clone(),
        &inst,
        samples(7),
        1,
        RunClock::start(),
        cancel.clone(),
        ProgressBar::hidden(),
        &[],
        None,
    )
    .await;
    assert_eq!(out.requests.len(), 40);
    assert_eq!(client.peak.load(std::sync::atomic::Ordering::SeqCst), 4);
    assert_eq!(
        out.requests.iter().map(|r| r.id).collect::<Vec<_>>(),
        (0..40).collect::<Vec<_>>()
    );

    let client = Arc::new(Counting {
        now: 0.into(),
        peak: 0.into(),
    });
    let out = run(
        client.clone(),
        &ScenarioInstance::Offline { requests: Some(25) },
        samples(7),
        1,
        RunClock::start(),
        cancel,
        ProgressBar::hidden(),
        &[],
        None,
    )
    .await;
    assert_eq!(out.requests.len(), 25);
    assert_eq!(client.peak.load(std::sync::atomic::Ordering::SeqCst), 25);
    let first = out.requests.iter().map(|r| r.scheduled_ns).min().unwrap();
    assert!(
        out.requests.iter().all(|r| r.scheduled_ns == first),
        "all scheduled at one instant"
    );
}

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

/// `target-margin` ends every kind of run once the percentile is known: an open loop planned
/// for 30 s and a closed loop of 5,000 requests both stop after a few hundred requests, with
/// what they reached recorded.
#[tokio::test]
async fn target_margin_stops_open_and_closed_loops() {
    let rule = crate::spec::StopRule {
        latency: "e2e".into(),
        q: 50.0,
        margin: 0.2,
        min_requests: 50,
        min_duration_s: 0.0,
    };
    let client = || {
        Arc::new(Capacity {
            slots: tokio::sync::Semaphore::new(1000),
            service: Duration::from_millis(5),
        })
    };
    let open = ScenarioInstance::Rate {
        rate: 200.0,
        burstiness: 1.0,
        duration_s: 30.0,
        ramp_from: None,
    };
    let closed = ScenarioInstance::Concurrency {
        concurrency: 4,
        requests: Some(5000),
        early_stop: None,
    };
    for inst in [open, closed] {
        let (_tx, cancel) = Cancel::new();
        let out = run(
            client(),
            &inst,
            samples(8),
            1,
            RunClock::start(),
            cancel,
            ProgressBar::hidden(),
            &[],
            Some(&rule),
        )
        .await;
        let s = out.stopped.as_ref().expect("stopped on its margin");
        assert!(s.margin <= 0.2 && s.requests >= 50, "{s:?}");
        assert!(out.stopped_early);
        // Of 6,000 planned (open) or 5,000 (closed).
        assert!(out.requests.len() < 2000, "{} requests", out.requests.len());
        // Those in flight when it stopped finished and count: nothing is half-recorded.
        assert!(out.requests.iter().all(|r| r.ok()));
    }
}
