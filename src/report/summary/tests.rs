//! Unit tests of the summary rows (`super`).

use super::*;
use crate::record::stats::Dist;

fn row(task: &str, acc: f64, ttft_p95: f64, ok: bool) -> Row {
    let cols = Columns {
        sweep: "s".into(),
        model: "m".into(),
        quantization: "q".into(),
        engine: "e".into(),
        engine_kind: "llama.cpp".into(),
        engine_block: "e".into(),
        engine_settings: Vec::new(),
        task: task.into(),
        scenario: "x".into(),
        scenario_kind: "single".into(),
        scenario_params: "{}".into(),
        max_tokens: 8,
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        repeat: 0,
    };
    let stats = RunStats {
        requests: 10,
        ok: 10,
        window_s: 10.0,
        ttft_ms: Dist {
            p95: Some(ttft_p95),
            ..Default::default()
        },
        e2e_ms: Dist {
            p95: Some(1000.0),
            ..Default::default()
        },
        ..Default::default()
    };
    let data = RunData {
        label: format!("{task}-{acc}-{ttft_p95}"),
        run_key: format!("{acc}{ttft_p95}"),
        columns: Some(cols),
        failure: (!ok).then(|| "boom".to_string()),
        stats: Some(stats),
        metrics: BTreeMap::from([("quality".to_string(), acc)]),
        ttft_ms: vec![ttft_p95 / 2.0; 10],
        e2e_ms: vec![500.0; 10],
        ok_latency: vec![(Some(ttft_p95 / 2.0), Some(500.0)); 10],
        ..Default::default()
    };
    derive(data, &slo(), None)
}

fn slo() -> Slo {
    Slo {
        ttft_p95: Some(2.0),
        e2e_p95: Some(6.0),
        ..Default::default()
    }
}

#[test]
fn recommends_within_the_slo_only() {
    let rows = vec![
        row("mmlu", 0.9, 2500.0, true),
        row("mmlu", 0.7, 300.0, true),
        row("mmlu", 0.8, 900.0, true),
        row("mmlu", 0.95, 100.0, false),
    ];
    assert_eq!(rows[0].meets_slo, Some(false));
    assert_eq!(
        rows[0].slo_misses,
        vec!["TTFT p95 2500 ms > 2000 ms".to_string()]
    );
    let answers = crate::report::answer::answers(&rows, &slo());
    let picks = &answers[0].picks;
    assert_eq!(picks[0].objective, "highest quality");
    assert_eq!(
        picks[0].label.as_deref(),
        Some(rows[2].data.label.as_str()),
        "0.9 misses the SLO, 0.95 failed: 0.8 wins"
    );
    assert_eq!(picks[3].objective, "lowest p95 TTFT");
    assert_eq!(picks[3].label.as_deref(), Some(rows[1].data.label.as_str()));
    assert_eq!(picks[2].label, None, "no energy figures, no J/token pick");
    let why: Vec<&str> = answers[0].verdicts.iter().map(|v| v.why.as_str()).collect();
    assert_eq!(why[0], "misses the SLO: TTFT p95 2500 ms > 2000 ms");
    assert_eq!(why[3], "failed: boom");
    assert_eq!(rows[1].goodput_rps, Some(1.0));
}

/// Goodput judges each request on its own TTFT and E2E: a request that generated no token
/// (no TTFT) neither shifts the others' pairs nor escapes the TTFT threshold.
#[test]
fn goodput_judges_each_request_on_its_own_latencies() {
    let slo = Slo {
        ttft_p95: Some(1.0),
        e2e_p95: Some(3.0),
        ..Default::default()
    };
    let latency = [
        (Some(100.0), Some(500.0)),   // good
        (None, Some(50.0)),           // empty answer, at once: good
        (Some(200.0), Some(3500.0)),  // too slow to end
        (None, Some(1500.0)),         // empty answer after 1.5 s: over the TTFT threshold
        (Some(1200.0), Some(1300.0)), // first token too late
        (Some(300.0), Some(2900.0)),  // good
    ];
    assert_eq!(good_requests(&latency, &slo), 3);
    // Before, the TTFTs without their empty answers were zipped with every E2E: the third
    // TTFT (200 ms) met the fourth E2E (1500 ms), and so on.
    let ttft_only = Slo {
        e2e_p95: None,
        ..slo.clone()
    };
    assert_eq!(good_requests(&latency, &ttft_only), 4);
    let e2e_only = Slo {
        ttft_p95: None,
        ..slo
    };
    assert_eq!(good_requests(&latency, &e2e_only), 5);
}

#[test]
fn cost_per_query_formula() {
    let c = Cost {
        energy_per_kwh: 0.36,
        hardware_per_hour: 3.6,
        currency: "EUR".into(),
    };
    // 3.6e6 J = 1 kWh → 0.36; 100 s of hardware → 0.1; over 10 queries.
    let v = cost_per_query(&c, Some(3.6e6), 100.0, 10).unwrap();
    assert!((v - 0.046).abs() < 1e-12, "{v}");
    assert_eq!(cost_per_query(&c, None, 100.0, 10), None);
    let hw_only = Cost {
        energy_per_kwh: 0.0,
        ..c
    };
    assert!((cost_per_query(&hw_only, None, 100.0, 10).unwrap() - 0.01).abs() < 1e-12);
}

#[test]
fn each_latency_is_weighed_by_its_own_requests_in_time_order() {
    // TTFT drifts (AR(1), φ = 0.9) over 1000 requests at their own instants; E2E holds the
    // same values in a scrambled order. Only TTFT's percentiles are worth fewer requests.
    let mut rng = crate::record::rng::SplitMix64::new(6);
    let ttft: Vec<f64> = crate::record::stats::block::ar1_from(0.9, 0.0, 1000, &mut rng)
        .into_iter()
        .map(|x| 50.0 + x)
        .collect();
    let at: Vec<i64> = (0..1000).collect();
    let mut scrambled = at.clone();
    rng.shuffle(&mut scrambled);
    let stats = RunStats {
        requests: 1000,
        ok: 1000,
        window_s: 100.0,
        ttft_ms: Dist::of(ttft.clone()),
        e2e_ms: Dist::of(ttft.clone()),
        ..Default::default()
    };
    let data = RunData {
        label: "drift".into(),
        run_key: "drift".into(),
        stats: Some(stats),
        ttft_ms: ttft.clone(),
        ttft_group: at,
        e2e_ms: ttft,
        e2e_group: scrambled,
        ..Default::default()
    };
    let row = derive(data, &slo(), None);
    let s = row.data.stats.as_ref().unwrap();
    assert!(
        s.ttft_ms.worth.iter().all(Option::is_some),
        "{:?}",
        s.ttft_ms.worth
    );
    assert_eq!(
        crate::report::text::thin(&s.ttft_ms, 99.0),
        crate::report::text::THIN
    );
    assert_eq!(s.e2e_ms.worth, [None; 4]);
    assert_eq!(crate::report::text::thin(&s.e2e_ms, 99.0), "");
    assert_eq!(s.tpot_ms.worth, [None; 4]);
}

#[test]
fn power_integral_columns_sum_the_counted_devices_and_compare_them_with_their_counters() {
    let dev = |source: &str, device: &str, energy_j: f64, pi: Option<f64>| {
        crate::telemetry::DeviceEnergy {
            source: source.into(),
            device: device.into(),
            method: if pi.is_some() {
                "counter"
            } else {
                "power-integral"
            }
            .into(),
            energy_j,
            coverage: 1.0,
            idle_w: None,
            energy_above_idle_j: None,
            mean_w: None,
            peak_w: None,
            power_integral_j: pi,
            power_samples: None,
            power_sd_w: None,
        }
    };
    // Two GPUs (counted) and a CPU package (not counted while GPUs are).
    let mut t = crate::telemetry::Summary {
        energy_source: "gpu".into(),
        devices: vec![
            dev("gpu", "gpu0", 1000.0, Some(1010.0)),
            dev("gpu", "gpu1", 3000.0, Some(2950.0)),
            dev("rapl", "package-0", 500.0, Some(900.0)),
        ],
        ..Default::default()
    };
    let (pi, delta) = counter_integral(&t).unwrap();
    assert!((pi - 3960.0).abs() < 1e-9);
    assert!((delta - (-40.0 / 4000.0)).abs() < 1e-12);
    // Without GPUs the CPU packages are the counted devices.
    t.energy_source = "cpu-rapl".into();
    t.devices.retain(|d| d.source == "rapl");
    let (pi, delta) = counter_integral(&t).unwrap();
    assert!((pi - 900.0).abs() < 1e-9 && (delta - 0.8).abs() < 1e-12);
    // A counted device whose energy is ∫power itself (no counter): nothing to compare.
    t.devices.push(dev("rapl", "package-1", 200.0, None));
    assert_eq!(counter_integral(&t), None);
    // Nothing measured.
    assert_eq!(
        counter_integral(&crate::telemetry::Summary::default()),
        None
    );
}
