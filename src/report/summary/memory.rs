//! The GPU memory budget (`slo gpu-memory`), judged per deployment. Pure.

use std::collections::BTreeMap;

use super::RunData;

/// Sets each run's [`RunData::deployment_mem_peak`]: the memory a deployment needs is the
/// most it took in any of its runs, not what it had reached by the run at hand. An engine's
/// memory grows over its life (vLLM 0.26's by up to 0.76 GiB in its second run on the H200,
/// docs/results-h200.md), so the run that happened to come first would otherwise fit a budget
/// its deployment does not, and the answer would depend on the order the runs ran in.
/// With `cold-repeats` the peak is over every start of the deployment on the same kind of
/// GPUs (models, driver, CUDA): a later start that served only short prompts reads less
/// (vLLM 0.26 on the H200: 4.9 GiB against the 5.6 of the start that served CNN/DailyMail),
/// and the answer would otherwise depend on which runs each start happened to serve.
pub(crate) fn deployment_memory(all: &mut [RunData]) {
    // Per deployment: its peak, and the run that reached it first (by when it started, when
    // known: the memory stays at its peak once there, so later runs read the same peak).
    let keys: Vec<(String, String)> = all.iter().map(pooled_over).collect();
    let mut peaks: BTreeMap<&(String, String), (f64, Option<f64>, String)> = BTreeMap::new();
    for (d, key) in all.iter().zip(&keys) {
        if let Some(mb) = d.telemetry.as_ref().and_then(|t| t.gpu_mem_peak_mb) {
            let start = d.ran.map(|r| r.0);
            let e = peaks.entry(key).or_insert((mb, start, d.label.clone()));
            let earlier = matches!((start, e.1), (Some(a), Some(b)) if a < b);
            if mb > e.0 || (mb == e.0 && earlier) {
                *e = (mb, start, d.label.clone());
            }
        }
    }
    for (d, key) in all.iter_mut().zip(&keys) {
        // Only when it is above this run's own peak (so never this run's own record).
        let own = d.telemetry.as_ref().and_then(|t| t.gpu_mem_peak_mb);
        d.deployment_mem_peak = peaks
            .get(key)
            .filter(|(mb, _, _)| own.is_none_or(|own| own < *mb))
            .map(|(mb, _, label)| (*mb, label.clone()));
    }
}

/// What a run's memory is pooled over: its deployment without the cold start, and the kind
/// of GPUs it recorded (their UUIDs left out: two lends of one kind are alike).
fn pooled_over(d: &RunData) -> (String, String) {
    let base = if d.deployment_base.is_empty() {
        &d.deployment
    } else {
        &d.deployment_base
    };
    let gpus = d.provenance.as_ref().map_or(String::new(), |p| {
        let g = &p.gpus;
        let models: Vec<&str> = g.devices.iter().map(|x| x.name.as_str()).collect();
        format!("{models:?} driver {:?} CUDA {:?}", g.driver, g.cuda)
    });
    (base.clone(), gpus)
}

/// Whether the run's deployment stays within `limit_gib` of GPU memory (as NVML reads the
/// device, MB = 10⁶ bytes), and the miss as the report words it; None when no peak is known.
/// The deployment's peak, when [`deployment_memory`] set it (another of its runs took more than
/// this one), counts instead of the run's own, and the miss then says which run that was.
pub(crate) fn memory_verdict(data: &RunData, limit_gib: f64) -> Option<(bool, String)> {
    let (peak, at) = match &data.deployment_mem_peak {
        Some((mb, label)) => (Some(*mb), Some(label)),
        None => (
            data.telemetry.as_ref().and_then(|t| t.gpu_mem_peak_mb),
            None,
        ),
    };
    peak.map(|mb| {
        let gib = mb * 1e6 / (1u64 << 30) as f64;
        let whose = at.map_or(String::new(), |l| {
            format!(" (its deployment's peak, in `{l}`)")
        });
        (
            gib <= limit_gib,
            format!("GPU memory {gib:.1} GiB{whose} > {limit_gib} GiB"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(deployment: &str, label: &str, peak_mb: Option<f64>) -> RunData {
        RunData {
            deployment: deployment.into(),
            label: label.into(),
            telemetry: peak_mb.map(|mb| crate::telemetry::Summary {
                gpu_mem_peak_mb: Some(mb),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_budget_is_judged_on_the_deployments_peak_over_its_runs() {
        // The H200's RQ1 hold: vLLM FP8 read 5151 MB in its first run, 5961 MB in the next.
        let mut all = vec![
            run("fp8@vllm", "fp8@vllm spider quality", Some(5151.5)),
            run("fp8@vllm", "fp8@vllm cnn quality", Some(5961.0)),
            run("q4@llama", "q4@llama spider quality", Some(3574.4)),
            run("q4@llama", "q4@llama cnn quality", None),
        ];
        deployment_memory(&mut all);
        let first = memory_verdict(&all[0], 5.0).unwrap();
        assert_eq!(
            first,
            (
                false,
                "GPU memory 5.6 GiB (its deployment's peak, in `fp8@vllm cnn quality`) > 5 GiB"
                    .to_string()
            ),
            "the first run alone (4.8 GiB) would have fit"
        );
        assert_eq!(
            memory_verdict(&all[1], 5.0).unwrap(),
            (false, "GPU memory 5.6 GiB > 5 GiB".to_string())
        );
        // Another deployment's peak never counts; a run without telemetry takes its
        // deployment's.
        assert!(memory_verdict(&all[2], 5.0).unwrap().0);
        let (fits, why) = memory_verdict(&all[3], 3.0).unwrap();
        assert!(!fits);
        assert_eq!(
            why,
            "GPU memory 3.3 GiB (its deployment's peak, in `q4@llama spider quality`) > 3 GiB"
        );
        // Runs at the same peak: the one that started first reached it.
        let at = |mut d: RunData, start: f64| {
            d.ran = Some((start, start + 1.0));
            d
        };
        let mut tie = vec![
            at(run("d", "d synth single", Some(5961.0)), 30.0),
            at(run("d", "d spider quality", Some(5150.0)), 10.0),
            at(run("d", "d cnn quality", Some(5961.0)), 20.0),
        ];
        deployment_memory(&mut tie);
        assert_eq!(
            tie[1].deployment_mem_peak,
            Some((5961.0, "d cnn quality".to_string()))
        );
        assert_eq!(tie[0].deployment_mem_peak, None, "at the peak itself");
        // With `cold-repeats`: over every start on the same kind of GPUs, not another kind's.
        let started = |start: &str, label: &str, mb: f64, gpu: &str| {
            let mut d = run(&format!("fp8@vllm (start {start})"), label, Some(mb));
            d.deployment_base = "fp8@vllm".into();
            let mut p = crate::record::provenance::Provenance::default();
            p.gpus.devices.push(crate::record::provenance::GpuInfo {
                name: gpu.into(),
                uuid: Some(format!("GPU-{start}")),
                ..Default::default()
            });
            d.provenance = Some(p);
            d
        };
        let mut starts = vec![
            started("1", "fp8@vllm cnn quality", 5961.0, "NVIDIA H200"),
            started("2", "fp8@vllm synth single #2", 5235.0, "NVIDIA H200"),
            started("3", "fp8@vllm synth single #3", 6500.0, "NVIDIA A100"),
        ];
        deployment_memory(&mut starts);
        assert_eq!(
            memory_verdict(&starts[1], 5.0).unwrap().1,
            "GPU memory 5.6 GiB (its deployment's peak, in `fp8@vllm cnn quality`) > 5 GiB"
        );
        assert_eq!(starts[2].deployment_mem_peak, None, "another kind of GPU");
        // Nothing measured anywhere: no verdict (the SLO cannot be checked).
        let mut none = vec![run("d", "d a", None)];
        deployment_memory(&mut none);
        assert_eq!(memory_verdict(&none[0], 5.0), None);
    }
}
