//! Whether the two sides of a matched configuration were measured on the same kind of machine.
//! A change between runs on other hardware (another GPU model or count, power limit, CPU or
//! core count) is the machines' as much as B's: a gate over such a pair does not judge it
//! unless `--across-machines` says to. Lesser differences (the host's name, its memory, the
//! kernel, the GPU driver, CUDA, clocks) are said beside the comparison and judged.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::provenance::{GpuSet, Provenance};

/// A machine as a run recorded it: field name → value.
pub(crate) type Machine = BTreeMap<String, String>;

/// The fields whose difference makes a gate not judge the pair.
const HARDWARE: &[&str] = &["CPU", "cores", "GPUs", "GPU power limit"];

/// The fields of a run's machine that compare looks at (`--save` keeps them).
pub(crate) fn of(p: &Provenance) -> Machine {
    let h = &p.host;
    let mut m = Machine::new();
    m.insert("host".into(), h.hostname.clone());
    m.insert("CPU".into(), h.cpu_model.clone());
    m.insert("cores".into(), h.cores.to_string());
    m.insert(
        "memory".into(),
        format!("{:.1} GiB", h.memory_bytes as f64 / (1u64 << 30) as f64),
    );
    m.insert("kernel".into(), h.kernel.clone());
    m.insert("GPUs".into(), gpu_models(&p.gpus));
    let g = &p.gpus;
    let each = |f: &dyn Fn(&crate::record::provenance::GpuInfo) -> Option<String>| {
        let v: Vec<String> = g.devices.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.join(", "))
    };
    let optional = [
        ("GPU driver", g.driver.clone()),
        ("CUDA", g.cuda.clone()),
        (
            "GPU power limit",
            each(&|d| d.power_limit_w.map(|w| format!("{w:.0} W"))),
        ),
        (
            "GPU clocks",
            each(&|d| {
                Some(format!(
                    "{}/{} MHz",
                    d.app_clock_graphics_mhz?, d.app_clock_memory_mhz?
                ))
            }),
        ),
    ];
    for (k, v) in optional {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    }
    m
}

/// The GPU models with their counts (`NVIDIA H200 ×2`), or `none` (whatever the reason NVML
/// gave: no GPU is no GPU).
fn gpu_models(g: &GpuSet) -> String {
    let mut names: Vec<(String, usize)> = Vec::new();
    for d in &g.devices {
        match names.iter_mut().find(|(n, _)| *n == d.name) {
            Some((_, k)) => *k += 1,
            None => names.push((d.name.clone(), 1)),
        }
    }
    if names.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = names.iter().map(|(n, k)| format!("{n} ×{k}")).collect();
    parts.join(", ")
}

/// One field that differs between A's machine and B's.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct FieldDiff {
    pub field: String,
    pub a: String,
    pub b: String,
    /// A hardware field ([`HARDWARE`]): a gate does not judge the pair.
    pub hardware: bool,
}

/// A matched configuration's two machines.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(crate) enum MachineCheck {
    #[default]
    Same,
    /// A side whose run did not record its machine (a baseline saved before compare kept it,
    /// a run recorded before provenance was).
    Unrecorded {
        side: &'static str,
    },
    Differs {
        fields: Vec<FieldDiff>,
    },
}

/// A's machine against B's.
pub(crate) fn check(a: Option<&Machine>, b: Option<&Machine>) -> MachineCheck {
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (None, _) => return MachineCheck::Unrecorded { side: "A" },
        (_, None) => return MachineCheck::Unrecorded { side: "B" },
    };
    let none = String::from("(not recorded)");
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let fields: Vec<FieldDiff> = keys
        .into_iter()
        .filter_map(|k| {
            let (x, y) = (a.get(k).unwrap_or(&none), b.get(k).unwrap_or(&none));
            (x != y).then(|| FieldDiff {
                field: k.clone(),
                a: x.clone(),
                b: y.clone(),
                hardware: HARDWARE.contains(&k.as_str()),
            })
        })
        .collect();
    if fields.is_empty() {
        MachineCheck::Same
    } else {
        MachineCheck::Differs { fields }
    }
}

impl MachineCheck {
    /// Whether A and B ran on other hardware.
    pub(crate) fn hardware_differs(&self) -> bool {
        matches!(self, MachineCheck::Differs { fields } if fields.iter().any(|f| f.hardware))
    }

    /// What differs, as one line (`GPUs: NVIDIA H200 ×1 → NVIDIA H100 ×1; kernel: …`); None
    /// when the machines are the same.
    pub(crate) fn line(&self) -> Option<String> {
        match self {
            MachineCheck::Same => None,
            MachineCheck::Unrecorded { side } => Some(format!(
                "{side} does not record the machine it ran on (a baseline saved, or a run \
                 recorded, before bench360 kept it): whether A and B ran on one kind of machine \
                 is not known"
            )),
            MachineCheck::Differs { fields } => {
                let mut f: Vec<&FieldDiff> = fields.iter().collect();
                // Hardware first: it is what the reader must see.
                f.sort_by_key(|d| !d.hardware);
                let parts: Vec<String> = f
                    .iter()
                    .map(|d| format!("{}: {} → {}", d.field, d.a, d.b))
                    .collect();
                Some(format!("machines differ: {}", parts.join("; ")))
            }
        }
    }
}

/// The notes and unjudged lines of the machines, for the gates (`gated`) or not: per distinct
/// difference, the configurations it concerns. A hardware difference under a gate is an
/// `unjudged:` line (unless `across`); any other difference, or one not gated, is a `note:`.
pub(crate) fn lines(
    checks: &[(&str, &MachineCheck)],
    gated: bool,
    across: bool,
) -> (Vec<String>, Vec<String>) {
    let mut groups: Vec<(String, bool, Vec<&str>)> = Vec::new();
    for (label, c) in checks {
        let Some(line) = c.line() else { continue };
        match groups.iter_mut().find(|(l, _, _)| *l == line) {
            Some((_, _, labels)) => labels.push(label),
            None => groups.push((line, c.hardware_differs(), vec![label])),
        }
    }
    let (mut notes, mut unjudged) = (Vec::new(), Vec::new());
    for (line, hardware, labels) in groups {
        let which = match labels.as_slice() {
            [one] => (*one).to_string(),
            [first, ..] => format!("{} configurations (first: {first})", labels.len()),
            [] => continue,
        };
        if hardware && gated && !across {
            unjudged.push(format!(
                "unjudged: {which}: {line}: a change is the machines' as much as B's; compare \
                 runs of one kind of machine, or pass --across-machines to judge anyway"
            ));
        } else {
            notes.push(format!("note: {which}: {line}"));
        }
    }
    (notes, unjudged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::provenance::{GpuInfo, HostInfo};

    fn machine(gpu: &str, kernel: &str) -> Machine {
        of(&Provenance {
            host: HostInfo {
                hostname: "h".into(),
                cpu_model: "Intel Xeon".into(),
                cores: 16,
                memory_bytes: 128 << 30,
                kernel: kernel.into(),
            },
            gpus: GpuSet {
                driver: Some("580.159.04".into()),
                cuda: Some("13.0".into()),
                devices: vec![GpuInfo {
                    name: gpu.into(),
                    power_limit_w: Some(700.0),
                    uuid: Some(format!("GPU-{gpu}")),
                    ..GpuInfo::default()
                }],
                unavailable: None,
            },
            ..Provenance::default()
        })
    }

    #[test]
    fn another_gpu_is_hardware_another_kernel_is_not() {
        let h200 = machine("NVIDIA H200", "6.18-v1252");
        assert_eq!(check(Some(&h200), Some(&h200.clone())), MachineCheck::Same);
        // Another board of the same model (UUID) is the same machine.
        assert!(!h200.values().any(|v| v.contains("GPU-")));
        let kernel = check(Some(&h200), Some(&machine("NVIDIA H200", "6.18-v973")));
        assert!(!kernel.hardware_differs());
        assert_eq!(
            kernel.line().unwrap(),
            "machines differ: kernel: 6.18-v1252 → 6.18-v973"
        );
        let gpu = check(
            Some(&h200),
            Some(&machine("NVIDIA H100 80GB HBM3", "6.18-v973")),
        );
        assert!(gpu.hardware_differs());
        // The hardware field comes first.
        assert_eq!(
            gpu.line().unwrap(),
            "machines differ: GPUs: NVIDIA H200 ×1 → NVIDIA H100 80GB HBM3 ×1; kernel: \
             6.18-v1252 → 6.18-v973"
        );
        assert_eq!(
            check(None, Some(&h200)),
            MachineCheck::Unrecorded { side: "A" }
        );
    }

    #[test]
    fn a_gate_over_other_hardware_is_unjudged_unless_across() {
        let a = machine("NVIDIA H200", "k");
        let gpu = check(Some(&a), Some(&machine("NVIDIA H100", "k")));
        let kernel = check(Some(&a), Some(&machine("NVIDIA H200", "k2")));
        let checks = [("r1", &gpu), ("r2", &gpu), ("r3", &kernel)];
        let (notes, unjudged) = lines(&checks, true, false);
        assert_eq!(unjudged.len(), 1, "{unjudged:?}");
        assert!(unjudged[0]
            .starts_with("unjudged: 2 configurations (first: r1): machines differ: GPUs"));
        assert_eq!(notes, ["note: r3: machines differ: kernel: k → k2"]);
        // Without gates, or with --across-machines, the GPU difference is a note.
        for (gated, across) in [(false, false), (true, true)] {
            let (notes, unjudged) = lines(&checks, gated, across);
            assert!(unjudged.is_empty());
            assert_eq!(notes.len(), 2);
        }
        // The same machines say nothing.
        assert_eq!(
            lines(&[("r", &MachineCheck::Same)], true, false),
            (vec![], vec![])
        );
    }
}
