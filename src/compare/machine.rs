//! Whether the two sides of a matched configuration were measured on the same kind of machine.
//! A change between runs on other hardware (another GPU model or count, power limit or
//! application clocks, CPU or core count) is the machines' as much as B's: a gate does not judge
//! such a pair unless `--across-machines` says to. Lesser differences (the host's name, its
//! memory, the kernel, the GPU driver, CUDA) are said beside the comparison and judged. An
//! endpoint's runs record the machine bench360 ran on, not its server's: they are not checked.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::provenance::{GpuSet, Provenance};

/// A machine as a run recorded it: field name → value.
pub(crate) type Machine = BTreeMap<String, String>;

/// The fields whose difference makes a gate not judge the pair.
const HARDWARE: &[&str] = &["CPU", "cores", "GPUs", "GPU power limit", "GPU clocks"];

/// The field that marks a run against an endpoint (its URL): its server's machine is unknown.
const ENDPOINT: &str = "endpoint";

/// The fields of a run's machine that compare looks at (`--save` keeps them).
pub(crate) fn of(p: &Provenance) -> Machine {
    let mut m = Machine::new();
    if let Some(url) = p
        .engine_artifact
        .as_deref()
        .and_then(|a| a.strip_prefix("endpoint:"))
    {
        m.insert(ENDPOINT.into(), url.to_string());
        return m;
    }
    // The host's fields as the report names them (host, CPU, cores, memory, kernel).
    for (k, v) in p.host.fields() {
        m.insert(k.into(), v);
    }
    let g = &p.gpus;
    m.insert("GPUs".into(), gpu_models(g));
    // Per device, sorted (the order NVML or `gpus` listed them in is no difference); `?` for
    // a device whose value NVML did not give.
    let each = |f: &dyn Fn(&crate::record::provenance::GpuInfo) -> Option<String>| {
        let mut v: Vec<String> = g
            .devices
            .iter()
            .map(|d| f(d).unwrap_or_else(|| "?".into()))
            .collect();
        v.sort();
        (!v.iter().all(|x| x == "?")).then(|| v.join(", "))
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

/// The GPU models with their counts, sorted (`NVIDIA H200 ×2`), or `none` with the head of the
/// reason NVML gave (`none: no NVIDIA GPU`, as the report's provenance line says it).
fn gpu_models(g: &GpuSet) -> String {
    let models = g.models();
    if models.is_empty() {
        return g.line();
    }
    models.join(", ")
}

/// One field that differs between A's machine and B's (`(not recorded)` on the side whose run
/// did not record it).
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
    /// A side (`A`, `B`, or `A and B`) whose run did not record its machine (a baseline saved,
    /// or a run recorded, before bench360 kept it): not checked, and judged.
    Unrecorded {
        side: &'static str,
    },
    /// A side ran against an endpoint: its server's machine is not known to bench360.
    Endpoint {
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
        (None, None) => return MachineCheck::Unrecorded { side: "A and B" },
        (None, _) => return MachineCheck::Unrecorded { side: "A" },
        (_, None) => return MachineCheck::Unrecorded { side: "B" },
    };
    match (a.contains_key(ENDPOINT), b.contains_key(ENDPOINT)) {
        (true, true) => return MachineCheck::Endpoint { side: "A and B" },
        (true, false) => return MachineCheck::Endpoint { side: "A" },
        (false, true) => return MachineCheck::Endpoint { side: "B" },
        (false, false) => {}
    }
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
                "{side} did not record the machine {} ran on (saved or recorded before bench360 \
                 kept it): whether A and B ran on one kind of machine is not known",
                if side.contains(" and ") { "they" } else { "it" }
            )),
            MachineCheck::Endpoint { side } => Some(format!(
                "{side} ran against an endpoint, whose server's machine bench360 does not see: \
                 whether A and B ran on one kind of machine is not known"
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

/// The notes and unjudged lines of the machines: per distinct difference, the configurations it
/// concerns. A hardware difference of a configuration a gate would judge (`gated`: a gated
/// metric present on a side) is an `unjudged:` line (unless `across`); any other difference,
/// or one no gate would judge, is a `note:`.
pub(crate) fn lines(
    checks: &[(&str, &MachineCheck, bool)],
    across: bool,
) -> (Vec<String>, Vec<String>) {
    let mut groups: Vec<(String, bool, Vec<&str>)> = Vec::new();
    for (label, c, gated) in checks {
        let Some(line) = c.line() else { continue };
        let blocks = *gated && c.hardware_differs();
        match groups
            .iter_mut()
            .find(|(l, b, _)| *l == line && *b == blocks)
        {
            Some((_, _, labels)) => labels.push(label),
            None => groups.push((line, blocks, vec![label])),
        }
    }
    let (mut notes, mut unjudged) = (Vec::new(), Vec::new());
    for (line, blocks, labels) in groups {
        let which = match labels.as_slice() {
            [one] => (*one).to_string(),
            [first, ..] => format!("{} configurations (first: {first})", labels.len()),
            [] => continue,
        };
        if blocks && !across {
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
        let checks = [
            ("r1", &gpu, true),
            ("r2", &gpu, true),
            ("r3", &kernel, true),
        ];
        let (notes, unjudged) = lines(&checks, false);
        assert_eq!(unjudged.len(), 1, "{unjudged:?}");
        assert!(unjudged[0]
            .starts_with("unjudged: 2 configurations (first: r1): machines differ: GPUs"));
        assert_eq!(notes, ["note: r3: machines differ: kernel: k → k2"]);
        // With --across-machines, or where no gate would judge it (no gate, or no gated
        // metric on either side), the GPU difference is a note.
        let ungated = checks.map(|(l, c, _)| (l, c, false));
        for (checks, across) in [(&checks, true), (&ungated, false)] {
            let (notes, unjudged) = lines(checks, across);
            assert!(unjudged.is_empty());
            assert_eq!(notes.len(), 2);
        }
        // The same machines say nothing.
        assert_eq!(
            lines(&[("r", &MachineCheck::Same, true)], false),
            (vec![], vec![])
        );
    }

    #[test]
    fn order_missing_values_and_endpoints() {
        let two = |first: &str, second: &str, w: Option<f64>| {
            let mut p = Provenance::default();
            for (i, name) in [first, second].into_iter().enumerate() {
                p.gpus.devices.push(GpuInfo {
                    index: i as u32,
                    name: name.into(),
                    power_limit_w: if i == 0 { Some(700.0) } else { w },
                    ..GpuInfo::default()
                });
            }
            of(&p)
        };
        // The order the GPUs were listed in is no difference.
        let a = two("NVIDIA H200", "NVIDIA H100", Some(700.0));
        let b = two("NVIDIA H100", "NVIDIA H200", Some(700.0));
        assert_eq!(check(Some(&a), Some(&b)), MachineCheck::Same);
        assert_eq!(a["GPUs"], "NVIDIA H100 ×1, NVIDIA H200 ×1");
        // A power limit NVML did not give on one device is `?`, not a shorter list.
        let c = two("NVIDIA H200", "NVIDIA H100", None);
        assert_eq!(c["GPU power limit"], "700 W, ?");
        assert!(check(Some(&a), Some(&c)).hardware_differs());
        // No GPU described: the head of NVML's reason (a host without NVML and one without a
        // device read alike).
        let mut p = Provenance::default();
        p.gpus.unavailable = Some("no NVIDIA GPU (NVML unavailable: libnvidia-ml.so.1)".into());
        assert_eq!(of(&p)["GPUs"], "none: no NVIDIA GPU");
        // An endpoint's run says nothing of its server: not compared.
        p.engine_artifact = Some("endpoint:http://10.0.0.1:8000/v1".into());
        let e = of(&p);
        assert_eq!(e.len(), 1);
        let line = check(Some(&a), Some(&e)).line().unwrap();
        assert!(line.starts_with("B ran against an endpoint"), "{line}");
        assert!(!check(Some(&a), Some(&e)).hardware_differs());
        assert_eq!(
            check(None, None),
            MachineCheck::Unrecorded { side: "A and B" }
        );
    }
}
