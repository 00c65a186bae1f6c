//! What a run ran on: bench360's own version and commit, the engine's version, the machine
//! (CPU, memory, kernel, GPUs with driver, CUDA, power limit, clocks and persistence), the
//! model file, the datasets and the sweep file. Written into every run's `run.json`, shown
//! per deployment in the report, its key fields in summary.parquet. Never part of a key, and
//! never secret: no environment value enters it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub(crate) use crate::host::HostInfo;

/// bench360's version (Cargo's) and the git commit it was built from (`+modified` when the
/// sources differed from it; `unknown` outside a checkout).
pub(crate) fn bench360_build() -> (&'static str, &'static str) {
    (env!("CARGO_PKG_VERSION"), env!("BENCH360_GIT_COMMIT"))
}

/// One GPU as NVML describes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct GpuInfo {
    pub index: u32,
    pub name: String,
    /// The power limit in force, in watts.
    pub power_limit_w: Option<f64>,
    /// Application clocks (what the GPU runs at under load unless boosted), MHz.
    pub app_clock_graphics_mhz: Option<u32>,
    pub app_clock_memory_mhz: Option<u32>,
    pub persistence_mode: Option<bool>,
    /// NVML's UUID of the board (`GPU-…`): which physical GPU, so that two lends of one kind
    /// of machine can be told apart afterwards. Not part of what makes a machine the same
    /// ([`Provenance::same_machine`] compares kinds); recorded since 2026-12-03.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// The GPUs a deployment used, with the driver and CUDA version they share; or why none is
/// described (no NVML, no device): never made up.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct GpuSet {
    pub driver: Option<String>,
    /// The CUDA version the driver supports (`12.8`).
    pub cuda: Option<String>,
    pub devices: Vec<GpuInfo>,
    pub unavailable: Option<String>,
}

impl GpuSet {
    /// The GPU models with their counts (`NVIDIA H200 ×2`), in the models' name order, so
    /// the order NVML listed the devices in makes no difference; empty without devices.
    pub fn models(&self) -> Vec<String> {
        let mut names: std::collections::BTreeMap<&str, usize> = Default::default();
        for d in &self.devices {
            *names.entry(d.name.as_str()).or_default() += 1;
        }
        names.iter().map(|(n, k)| format!("{n} ×{k}")).collect()
    }

    /// "NVIDIA H200 ×1, driver 580.95, CUDA 13.0, 700 W" or why no GPU is described.
    pub fn line(&self) -> String {
        if self.devices.is_empty() {
            // The reason's head ("no NVIDIA GPU"); run.json keeps it whole.
            let why = self.unavailable.as_deref().unwrap_or("no GPU");
            return format!("none: {}", why.split(" (").next().unwrap_or(why));
        }
        let mut parts = self.models();
        if let Some(d) = &self.driver {
            parts.push(format!("driver {d}"));
        }
        if let Some(c) = &self.cuda {
            parts.push(format!("CUDA {c}"));
        }
        let limits: Vec<String> = self
            .devices
            .iter()
            .filter_map(|d| d.power_limit_w.map(|w| format!("{w:.0} W")))
            .collect();
        if !limits.is_empty() {
            let mut l = limits.clone();
            l.dedup();
            parts.push(format!("power limit {}", l.join("/")));
        }
        let clocks: Vec<String> = self
            .devices
            .iter()
            .filter_map(|d| {
                Some(format!(
                    "{}/{} MHz",
                    d.app_clock_graphics_mhz?, d.app_clock_memory_mhz?
                ))
            })
            .collect();
        if let Some(c) = clocks.first() {
            parts.push(format!("app clocks {c}"));
        }
        if let Some(p) = self.devices.iter().find_map(|d| d.persistence_mode) {
            parts.push(format!("persistence {}", if p { "on" } else { "off" }));
        }
        parts.join(", ")
    }
}

/// [`Provenance::same_machine`] on a machine's parts (this machine's, before any run records
/// them): the same host and the same GPUs but for their boards' UUIDs.
pub(crate) fn same_machine(host: &HostInfo, gpus: &GpuSet, h: &HostInfo, g: &GpuSet) -> bool {
    let kind = |g: &GpuSet| {
        let mut g = g.clone();
        for d in &mut g.devices {
            d.uuid = None;
        }
        g
    };
    host == h && kind(gpus) == kind(g)
}

/// What tells machines apart (the fields [`Provenance::same_machine`] compares, the GPUs as one
/// line without their UUIDs): (name, value) per field, for this machine or a recorded one.
pub(crate) fn machine_fields(host: &HostInfo, gpus: &GpuSet) -> [(&'static str, String); 6] {
    let [h, cpu, cores, memory, kernel] = host.fields();
    [h, cpu, cores, memory, kernel, ("GPUs", gpus.line())]
}

/// Everything a run's numbers rest on besides its key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct Provenance {
    pub bench360_version: String,
    pub bench360_commit: String,
    /// What the engine said of its version (`--version`, the Python package's
    /// `__version__`, the image's label), from its pull.
    pub engine_version: Option<String>,
    /// The binary's checksum, the image's id and digests, or the endpoint's URL.
    pub engine_artifact: Option<String>,
    pub host: HostInfo,
    pub gpus: GpuSet,
    pub model_path: Option<String>,
    pub model_bytes: Option<u64>,
    /// blake3 of the weights file (or of a folder's files).
    pub model_hash: Option<String>,
    /// Each file the prompts came from → its blake3.
    pub datasets: BTreeMap<String, String>,
    pub sweep_file: String,
    /// blake3 of the sweep file's text as read.
    pub sweep_hash: String,
    pub seed: u64,
    /// The variables of bench360's environment the engine inherited that change what it does
    /// (`plan::inherited`): name → value, a possible secret as `(set)`. Not keyed; `plan`
    /// and `apply` say when a cached run was made under others. None for a container or an
    /// endpoint, and in runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited_env: Option<BTreeMap<String, String>>,
}

impl Provenance {
    /// Recorded on the same kind of machine: the same host (name, CPU, cores, memory, kernel)
    /// and the same GPUs (models, driver, CUDA, power limits, clocks), whatever build ran
    /// there and whichever boards they were (their UUIDs are not compared: repeats on two
    /// lends of one kind pool; hosts with other names do not).
    pub fn same_machine(&self, other: &Provenance) -> bool {
        same_machine(&self.host, &self.gpus, &other.host, &other.gpus)
    }

    /// The UUIDs of the GPUs it ran on, where NVML gave them.
    pub fn gpu_uuids(&self) -> Vec<&str> {
        self.gpus
            .devices
            .iter()
            .filter_map(|d| d.uuid.as_deref())
            .collect()
    }

    /// "NVIDIA H200 ×1, driver 580.95, CUDA 13.0, 700 W" or why no GPU is described.
    pub fn gpu_line(&self) -> String {
        self.gpus.line()
    }

    /// What tells machines apart, as run.json records them: (name, value) per field.
    pub fn machine_fields(&self) -> [(&'static str, String); 6] {
        machine_fields(&self.host, &self.gpus)
    }

    /// "AMD EPYC 9654 (16 cores), 125.8 GiB, Linux 6.8.0".
    pub fn host_line(&self) -> String {
        let h = &self.host;
        format!(
            "{} ({} cores), {:.1} GiB, kernel {}, host {}",
            h.cpu_model,
            h.cores,
            h.memory_bytes as f64 / (1u64 << 30) as f64,
            h.kernel,
            h.hostname
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_what_was_described_and_why_not() {
        let mut p = Provenance {
            host: HostInfo {
                hostname: "h".into(),
                cpu_model: "CPU X".into(),
                cores: 16,
                memory_bytes: 2 << 30,
                kernel: "6.8.0".into(),
            },
            gpus: GpuSet {
                unavailable: Some("NVML not found".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(p.gpu_line(), "none: NVML not found");
        p.gpus.unavailable = Some("no NVIDIA GPU (NVML unavailable: libnvidia-ml.so.1)".into());
        assert_eq!(p.gpu_line(), "none: no NVIDIA GPU");
        // A host with GPUs whose NVML cannot be loaded says so, not "no GPU".
        p.gpus.unavailable = Some(
            "2 NVIDIA GPUs on the PCI bus but no NVML (libnvidia-ml.so.1: cannot open)".into(),
        );
        assert_eq!(
            p.gpu_line(),
            "none: 2 NVIDIA GPUs on the PCI bus but no NVML"
        );
        assert_eq!(
            p.host_line(),
            "CPU X (16 cores), 2.0 GiB, kernel 6.8.0, host h"
        );
        p.gpus = GpuSet {
            driver: Some("580.95".into()),
            cuda: Some("13.0".into()),
            devices: vec![
                GpuInfo {
                    index: 0,
                    name: "NVIDIA H200".into(),
                    power_limit_w: Some(700.0),
                    app_clock_graphics_mhz: Some(1980),
                    app_clock_memory_mhz: Some(3201),
                    persistence_mode: Some(true),
                    uuid: None,
                },
                GpuInfo {
                    index: 1,
                    name: "NVIDIA H200".into(),
                    power_limit_w: Some(700.0),
                    ..Default::default()
                },
            ],
            unavailable: None,
        };
        assert_eq!(
            p.gpu_line(),
            "NVIDIA H200 ×2, driver 580.95, CUDA 13.0, power limit 700 W, app clocks 1980/3201 MHz, persistence on"
        );
        // Two lends of that kind: other boards, the same machine; another clock, not.
        let mut q = p.clone();
        q.gpus.devices[0].uuid = Some("GPU-aaaa".into());
        let mut r = p.clone();
        r.gpus.devices[0].uuid = Some("GPU-bbbb".into());
        assert!(q.same_machine(&r) && q.same_machine(&p));
        assert_eq!(q.gpu_uuids(), ["GPU-aaaa"]);
        r.gpus.devices[0].app_clock_graphics_mhz = Some(1755);
        assert!(!q.same_machine(&r));
        // Written only when known: run.json of a machine without it stays as it was.
        let json = serde_json::to_string(&p.gpus.devices[0]).unwrap();
        assert!(!json.contains("uuid"), "{json}");
        let back: GpuInfo =
            serde_json::from_str(&serde_json::to_string(&q.gpus.devices[0]).unwrap()).unwrap();
        assert_eq!(back.uuid.as_deref(), Some("GPU-aaaa"));
    }
}
