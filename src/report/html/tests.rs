//! Unit tests of the HTML page (`super`).

use super::*;

/// Whatever a label or a cause holds, the page shows it as text: the template escapes
/// every value, so a run named like markup cannot inject any.
#[test]
fn labels_and_causes_are_escaped() {
    let evil = r#"m<script>alert("x")</script>&'"#;
    let rows = vec![Row {
        data: summary::RunData {
            label: evil.into(),
            deployment: evil.into(),
            failure: Some(format!("{evil}\nlast log line <b>")),
            ..Default::default()
        },
        ..Default::default()
    }];
    let html = page(
        evil,
        &rows,
        &answer::answers(&rows, &Slo::default()),
        &Slo::default(),
        None,
        &[(evil.to_string(), None)],
    );
    assert!(!html.contains("<script>"), "{html}");
    assert!(!html.contains("line <b>"), "{html}");
    assert!(
        html.contains("m&lt;script&gt;alert(&quot;x&quot;)"),
        "{html}"
    );
    // The failure is listed, its log lines in full.
    assert!(
        html.contains(r#"<pre class="log">last log line &lt;b&gt;</pre>"#),
        "{html}"
    );
    assert!(html.contains("FAILED: m&lt;script&gt;"), "{html}");
    assert!(html.contains("none declared (add an <code>slo</code> block)"));
}

/// Two repeats of one configuration on machines with other kernels: the repeats table
/// counts two machines and marks it; a configuration repeated on one machine counts one.
#[test]
fn repeats_on_several_machines_are_counted_and_marked() {
    let run = |label: &str, kernel: &str, ttft: f64| {
        let mut p = crate::record::provenance::Provenance::default();
        p.host.kernel = kernel.into();
        Row {
            data: summary::RunData {
                label: label.into(),
                deployment: "m:q@e".into(),
                stats: Some(crate::record::stats::RunStats {
                    output_tokens_per_s: 100.0 + ttft,
                    ttft_ms: crate::record::stats::Dist {
                        p50: Some(ttft),
                        ..Default::default()
                    },
                    ..Default::default()
                }),
                provenance: Some(p),
                ..Default::default()
            },
            ..Default::default()
        }
    };
    // A fourth repeat failed over its error budget: its figures are shown beside its
    // failure, and it is no repeat of the mean.
    let mut failed = run("run m:q@e mmlu single #4", "v1147", 900.0);
    failed.data.failure =
        Some("3 of 10 requests failed (30.0%, over the 5.0% error budget)".into());
    let rows = vec![
        run("run m:q@e mmlu single #1", "v973", 28.0),
        run("run m:q@e mmlu single #2", "v1147", 45.0),
        run("run m:q@e mmlu single #3", "v1147", 50.0),
        run("run m:q@e cnn single #1", "v973", 30.0),
        run("run m:q@e cnn single #2", "v973", 31.0),
        failed,
    ];
    let r = repeats(&rows);
    let count = |c: &str| {
        r.iter()
            .find(|x| x.config == c)
            .map(|x| (x.count, x.machines))
    };
    assert_eq!(count("run m:q@e mmlu single"), Some((3, 2)));
    assert_eq!(count("run m:q@e cnn single"), Some((2, 1)));
    let html = page("s", &rows, &[], &Slo::default(), None, &[]);
    assert!(
        html.contains(r#"<span class="bad" title="its repeats ran on more than one machine"#),
        "{html}"
    );
    assert!(
        html.contains(r#"<span class="bad">⚠ FAILED: 3 of 10 requests failed (30.0%, over the 5.0% error budget)</span>"#),
        "{html}"
    );
}

#[test]
fn an_empty_report_says_there_is_no_failure() {
    let html = page("s", &[], &[], &Slo::default(), None, &[]);
    assert!(html.contains("<li>None.</li>"), "{html}");
    assert!(html.ends_with("</body></html>"), "{html}");
}

/// A run whose GPU energy counter and ∫power part by more than the power samples' spread
/// explains is flagged in its row; one where they agree is not.
#[test]
fn a_counter_that_power_samples_disagree_with_is_flagged() {
    let run = |label: &str, power_integral_j: f64| {
        let device = crate::telemetry::DeviceEnergy {
            source: "gpu".into(),
            device: "gpu0".into(),
            method: "counter".into(),
            energy_j: 1000.0,
            coverage: 1.0,
            idle_w: None,
            energy_above_idle_j: None,
            mean_w: Some(100.0),
            peak_w: None,
            power_integral_j: Some(power_integral_j),
            power_samples: Some(100),
            power_sd_w: Some(10.0),
        };
        Row {
            data: summary::RunData {
                label: label.into(),
                deployment: "m:q@e".into(),
                stats: Some(Default::default()),
                telemetry: Some(crate::telemetry::Summary {
                    window_s: 10.0,
                    energy_source: "gpu".into(),
                    energy_j: Some(1000.0),
                    devices: vec![device],
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    };
    // sd 10 W over 100 samples in 10 s: ∫power is precise to ± 1 J; 10 % apart is far out.
    let rows = vec![
        run("run m:q@e synth single #1", 1100.0),
        run("run m:q@e synth single #2", 1010.0),
    ];
    let html = page("s", &rows, &[], &Slo::default(), None, &[]);
    assert!(
        html.contains(
            "run m:q@e synth single #1 <span class=\"bad\">⚠ energy: gpu0&#x27;s counter and ∫power +10.0 % apart (report.md&#x27;s telemetry notes)</span>"
        ),
        "{html}"
    );
    assert_eq!(html.matches("counter and ∫power").count(), 1, "{html}");
}
