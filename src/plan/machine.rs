//! Cached runs measured on a machine that differs from this one. A deployment's key holds the
//! machine's fingerprint (CPU model, architecture, GPU models: `plan::facts`), not the rest of
//! what tells machines apart: another lease of one kind of VM (another kernel build — 1.5 to 1.7
//! times the single-stream TPOT in the seed study), an upgraded driver, another power limit or
//! host keep the runs cached, and their numbers stay the first machine's. `plan` and `apply`
//! say so per deployment, with what differs (the fields [`Provenance::same_machine`] compares);
//! the report keeps runs of two machines apart (`report::answer::machines`).
//!
//! [`Provenance::same_machine`]: crate::record::provenance::Provenance::same_machine

use std::collections::HashMap;

use crate::host::HostInfo;
use crate::record::provenance::{machine_fields, same_machine, GpuSet, Provenance};

use super::drift::{tally, warning};

/// How a recorded machine differs from this one, as [`Provenance::same_machine`] decides:
/// `kernel: 6.8.0 → 6.18.44`, one line per field that differs (and one for GPUs that differ
/// only where the one-line description does not look: their indices, a later board's clocks).
pub(crate) fn differences(recorded: &Provenance, host: &HostInfo, gpus: &GpuSet) -> Vec<String> {
    if same_machine(&recorded.host, &recorded.gpus, host, gpus) {
        return Vec::new();
    }
    let mut out: Vec<String> = recorded
        .machine_fields()
        .into_iter()
        .zip(machine_fields(host, gpus))
        .filter(|((_, was), (_, now))| was != now)
        .map(|((name, was), (_, now))| format!("{name}: {was} → {now}"))
        .collect();
    if out.is_empty() {
        let idx =
            |g: &GpuSet| -> Vec<String> { g.devices.iter().map(|d| d.index.to_string()).collect() };
        out.push(format!(
            "GPUs: other boards or settings of one model (indices {} → {}, or a board's clocks or persistence)",
            idx(&recorded.gpus).join(","),
            idx(gpus).join(",")
        ));
    }
    out
}

/// Cached runs (as [`super::drift::cached`] read them) measured on a machine that differs
/// from this one: per deployment label, how many runs and what differs (the union over them).
/// This machine's GPUs are the ones each engine's `gpus` name, as a run records them. An
/// endpoint's runs are not compared: their numbers are its server's (bench360 sees only the
/// client's machine).
pub(crate) fn drift(
    sweep: &crate::spec::Sweep,
    plan: &super::Plan,
    cached: &[(usize, Provenance)],
) -> Vec<(String, usize, Vec<String>)> {
    let host = crate::host::host_info();
    let mut gpus: HashMap<usize, GpuSet> = HashMap::new();
    let mut out: Vec<(String, usize, Vec<String>)> = Vec::new();
    for (i, recorded) in cached {
        let dep = &plan.deployments[plan.runs[*i].deployment];
        let engine = &sweep.engines[dep.at.engine];
        if matches!(engine.launch, crate::spec::Launch::Endpoint { .. }) {
            continue;
        }
        let now = gpus
            .entry(dep.at.engine)
            .or_insert_with(|| crate::telemetry::gpu::describe(engine.gpus.as_deref()));
        tally(&mut out, &dep.label, differences(recorded, &host, now));
    }
    out
}

/// The warning `plan` and `apply` print for [`drift`]; empty when there is none.
pub(crate) fn drift_warning(drift: &[(String, usize, Vec<String>)]) -> String {
    warning(
        "⚠ cached runs were measured on a machine that differs from this one as bench360 sees it (another host, kernel, driver, power limit or clocks — or this one through another CPU set or other visible GPUs); keys hold only the CPU and GPU models, so they stay cached with that machine's numbers, and the report keeps the machines apart — to measure this one, apply into another `--cache` or raise `repeats`:",
        drift,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::provenance::GpuInfo;

    fn host(kernel: &str) -> HostInfo {
        HostInfo {
            hostname: "gpu-1".into(),
            cpu_model: "AMD EPYC 9654".into(),
            cores: 16,
            memory_bytes: 128 << 30,
            kernel: kernel.into(),
        }
    }

    fn gpus(name: &str, uuid: &str) -> GpuSet {
        GpuSet {
            driver: Some("580.159.04".into()),
            cuda: Some("13.0".into()),
            devices: vec![GpuInfo {
                index: 0,
                name: name.into(),
                power_limit_w: Some(700.0),
                uuid: Some(uuid.into()),
                ..Default::default()
            }],
            unavailable: None,
        }
    }

    #[test]
    fn the_same_kind_of_machine_is_no_difference_whichever_board() {
        let p = Provenance {
            host: host("6.18.44"),
            gpus: gpus("NVIDIA H200", "GPU-a"),
            ..Default::default()
        };
        assert!(differences(&p, &host("6.18.44"), &gpus("NVIDIA H200", "GPU-b")).is_empty());
    }

    #[test]
    fn another_gpu_and_kernel_are_named_with_both_values() {
        let p = Provenance {
            host: host("6.18.44-v1252"),
            gpus: gpus("NVIDIA H200", "GPU-a"),
            ..Default::default()
        };
        let d = differences(
            &p,
            &host("6.18.44-v310"),
            &gpus("NVIDIA H100 80GB HBM3", "GPU-a"),
        );
        assert_eq!(
            d,
            [
                "kernel: 6.18.44-v1252 → 6.18.44-v310",
                "GPUs: NVIDIA H200 ×1, driver 580.159.04, CUDA 13.0, power limit 700 W → \
                 NVIDIA H100 80GB HBM3 ×1, driver 580.159.04, CUDA 13.0, power limit 700 W"
            ]
        );
        let none = GpuSet {
            unavailable: Some("no NVIDIA GPU (NVML: libnvidia-ml.so.1 not found)".into()),
            ..Default::default()
        };
        let d = differences(&p, &host("6.18.44-v1252"), &none);
        assert_eq!(d.len(), 1);
        assert!(d[0].ends_with("→ none: no NVIDIA GPU"), "{d:?}");
    }

    #[test]
    fn another_board_of_one_model_is_a_difference_the_report_makes_too() {
        let p = Provenance {
            host: host("6.18.44"),
            gpus: gpus("NVIDIA H200", "GPU-a"),
            ..Default::default()
        };
        let mut other = gpus("NVIDIA H200", "GPU-b");
        other.devices[0].index = 3;
        let d = differences(&p, &host("6.18.44"), &other);
        assert_eq!(
            d,
            ["GPUs: other boards or settings of one model (indices 0 → 3, or a board's clocks or persistence)"]
        );
    }

    #[test]
    fn the_warning_names_each_deployment_once_with_its_count() {
        let mut out = Vec::new();
        tally(&mut out, "m@vllm", vec!["cores: 16 → 8".into()]);
        tally(
            &mut out,
            "m@vllm",
            vec!["cores: 16 → 8".into(), "kernel: a → b".into()],
        );
        tally(&mut out, "m@sglang", vec![]);
        let w = drift_warning(&out);
        assert!(
            w.starts_with("⚠ cached runs were measured on a machine that differs"),
            "{w}"
        );
        assert!(
            w.ends_with("  m@vllm (2 runs): cores: 16 → 8; kernel: a → b\n"),
            "{w}"
        );
        assert!(!w.contains("sglang"), "{w}");
        assert_eq!(drift_warning(&[]), "");
    }
}
