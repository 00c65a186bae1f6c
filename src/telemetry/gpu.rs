//! NVIDIA GPUs through NVML, loaded at run time (`libnvidia-ml.so.1`): without a driver the
//! binary runs and says "no NVIDIA GPU" — or, where the PCI bus has NVIDIA GPUs, that they
//! are there without NVML. Two samplers per run: the slow total-energy counter
//! (about 4 ms a read on an H200) in its own thread, everything else in another.
//!
//! Power is the instant-power field (NVML field 186), which follows the load within 100 ms;
//! `nvmlDeviceGetPowerUsage` is a ~1 s moving average and is used only when the field is not
//! supported (the summary says so). Memory is the v2 query's `used`, which excludes the
//! driver's reserved memory.

use std::sync::{Arc, OnceLock};

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::Nvml;

use super::{Sample, Source, Unavailable};

const FIELD_POWER_INSTANT: u32 = 186;

static NVML: OnceLock<Result<Arc<Nvml>, Unavailable>> = OnceLock::new();

/// The process-wide NVML handle, or why there is none.
pub(crate) fn nvml() -> Result<Arc<Nvml>, Unavailable> {
    NVML.get_or_init(|| {
        Nvml::init().map(Arc::new).map_err(|e| {
            let why = e.to_string();
            match crate::host::gpus::nvidia_on_pci(std::path::Path::new(
                crate::host::gpus::PCI_DEVICES,
            )) {
                0 => Unavailable::NoNvml(why),
                count => Unavailable::NvmlMissing { count, why },
            }
        })
    })
    .clone()
}

/// Indices of the devices to sample: the given ones, else every device NVML sees; inside an
/// allocation (a Slurm job's GPUs, CUDA_VISIBLE_DEVICES) those of the allocation.
pub(crate) fn devices(
    nvml: &Nvml,
    wanted: Option<&[u32]>,
) -> Result<Vec<(u32, String)>, Unavailable> {
    let count = nvml
        .device_count()
        .map_err(|e| Unavailable::DeviceCount(e.to_string()))?;
    if count == 0 {
        return Err(Unavailable::NoDevice);
    }
    // In a Slurm job (or under CUDA_VISIBLE_DEVICES), the engine's GPUs, not the node's.
    let indices: Vec<u32> = crate::host::gpus::Allocation::from_env()
        .for_nvml(wanted, count)
        .unwrap_or_else(|| (0..count).collect());
    indices
        .into_iter()
        .map(|i| {
            let d = nvml.device_by_index(i).map_err(|e| Unavailable::Device {
                index: i,
                why: e.to_string(),
            })?;
            Ok((i, d.name().unwrap_or_else(|_| "unknown GPU".into())))
        })
        .collect()
}

fn device_name(i: u32) -> String {
    format!("gpu{i}")
}

/// GPU memory used now on the given devices (all when None), summed; None without NVML.
pub(crate) fn memory_used_mb(wanted: Option<&[u32]>) -> Option<f64> {
    let n = nvml().ok()?;
    let devs = devices(&n, wanted).ok()?;
    devs.iter()
        .map(|(i, _)| {
            n.device_by_index(*i)
                .ok()?
                .memory_info()
                .ok()
                .map(|m| m.used as f64 / 1e6)
        })
        .sum()
}

/// Energy counter reads (mJ since driver load) of each device.
pub(crate) fn energy_sample(nvml: &Nvml, indices: &[u32], t_ns: i64) -> Vec<Sample> {
    indices
        .iter()
        .filter_map(|&i| {
            let d = nvml.device_by_index(i).ok()?;
            let mj = d.total_energy_consumption().ok()?;
            Some(Sample {
                t_ns,
                source: Source::Gpu,
                device: device_name(i),
                energy_mj: Some(mj as f64),
                ..Default::default()
            })
        })
        .collect()
}

fn instant_power(
    samples: &[Result<FieldValueSample, nvml_wrapper::error::NvmlError>],
) -> Option<f64> {
    use nvml_wrapper::enums::device::SampleValue;
    let s = samples.first()?.as_ref().ok()?;
    let mw = match s.value.as_ref().ok()? {
        SampleValue::U32(v) => *v as f64,
        SampleValue::U64(v) => *v as f64,
        SampleValue::I64(v) => *v as f64,
        SampleValue::F64(v) => *v,
    };
    Some(mw / 1000.0)
}

/// The engine's processes, as the GPU sampler tells them from others on its devices.
pub(crate) struct EngineProcs<'a> {
    /// Those the procfs sampler last found.
    pub known: &'a [u32],
    /// The engine's own process; None when it is not a local process.
    pub root: Option<u32>,
    /// A pid NVML lists that this process cannot see in `/proc` is another's work: so when
    /// bench360 runs in the machine's own PID namespace and the engine's processes are its
    /// own user's (hidden ones, under `hidepid`, are then another user's). Otherwise — in a
    /// container's namespace, or a container engine's processes hidden from a user that is not
    /// root — such a pid may be the engine's own, and nothing is told apart while it is there.
    pub hidden_is_other: bool,
}

/// Whether a pid NVML lists but `/proc` hides counts as other work ([`EngineProcs`]).
pub(crate) fn hidden_is_other(engine_root: Option<u32>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mine = |r: u32| {
        std::fs::metadata(format!("/proc/{r}")).is_ok_and(|m| m.uid() == unsafe { libc::geteuid() })
    };
    !in_child_namespace() && engine_root.is_some_and(mine)
}

/// Keeps, of the other processes a sample found, those also found by the sample before
/// (`last`, then updated): a process that the engine starts and ends between NVML's list and
/// the look at `/proc`, or that flickers past, is not taken for another's work. The samples'
/// counts are set from those kept; returns them as (device, pid, MB).
pub(crate) fn confirm_others(
    samples: &mut [Sample],
    found: Vec<(String, u32, f64)>,
    last: &mut std::collections::BTreeSet<(String, u32)>,
) -> Vec<(String, u32, f64)> {
    let kept: Vec<(String, u32, f64)> = found
        .iter()
        .filter(|(d, p, _)| last.contains(&(d.clone(), *p)))
        .cloned()
        .collect();
    *last = found.into_iter().map(|(d, p, _)| (d, p)).collect();
    for s in samples.iter_mut().filter(|s| s.other_procs.is_some()) {
        let mine: Vec<&(String, u32, f64)> = kept.iter().filter(|k| k.0 == s.device).collect();
        s.other_procs = Some(mine.len() as f64);
        s.other_mem_mb = Some(mine.iter().map(|k| k.2).sum());
    }
    kept
}

/// Whether this process runs in a child PID namespace: `/proc/self/status` lists its pid in
/// more than one namespace.
pub(crate) fn in_child_namespace() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .map(|v| v.split_whitespace().count() > 1)
        })
        .unwrap_or(false)
}

/// A compute process on a device: (pid, GPU memory in bytes when NVML reports it).
pub(crate) type GpuProc = (u32, Option<u64>);

/// Whether `pid` is the engine's: among its known processes, or descended from its root (a
/// child started since the procfs sampler last looked). `parent` reads a process's parent.
pub(crate) fn is_engines(pid: u32, e: &EngineProcs, parent: &dyn Fn(u32) -> Option<u32>) -> bool {
    if e.known.contains(&pid) {
        return true;
    }
    let Some(root) = e.root else { return false };
    let mut p = pid;
    for _ in 0..64 {
        if p == root {
            return true;
        }
        match parent(p) {
            Some(q) if q > 1 && q != p => p = q,
            _ => return false,
        }
    }
    false
}

/// Of a device's compute processes: the engine's memory (MB), and the others (neither the
/// engine's nor `me`) as (pid, MB). The others are None when they cannot be told apart: the
/// engine is not a local process, or NVML lists a pid this process cannot see (`seen`: it is
/// in another PID namespace — bench360 in a container, or the engine's own processes as the
/// host numbers them), which is never taken for another's work.
pub(crate) fn split_procs(
    procs: &[GpuProc],
    e: &EngineProcs,
    me: u32,
    parent: &dyn Fn(u32) -> Option<u32>,
    seen: &dyn Fn(u32) -> bool,
) -> (f64, Option<Vec<(u32, f64)>>) {
    let mb = |b: Option<u64>| b.map_or(0.0, |b| b as f64 / 1e6);
    let mut engine = 0.0;
    let mut others = Vec::new();
    for &(pid, bytes) in procs {
        if is_engines(pid, e, parent) {
            engine += mb(bytes);
        } else if pid != me {
            others.push((pid, mb(bytes)));
        }
    }
    let told_apart = e.root.is_some() && others.iter().all(|(pid, _)| seen(*pid));
    (engine, told_apart.then_some(others))
}

/// Everything but energy, per device, and the other processes found on each device
/// (device, pid, MB). `engine` tells the engine's processes (whose GPU memory counts as the
/// engine's) from the others. Returns also whether power came from the averaged query.
pub(crate) fn fast_sample(
    nvml: &Nvml,
    indices: &[u32],
    engine: &EngineProcs,
    t_ns: i64,
) -> (Vec<Sample>, bool, Vec<(String, u32, f64)>) {
    let mut found = Vec::new();
    let mut averaged = false;
    let mut out = Vec::new();
    for &i in indices {
        let Ok(d) = nvml.device_by_index(i) else {
            continue;
        };
        let power_w = match d
            .field_values_for(&[FieldId(FIELD_POWER_INSTANT)])
            .ok()
            .and_then(|v| instant_power(&v))
        {
            Some(w) => Some(w),
            None => {
                averaged = true;
                d.power_usage().ok().map(|mw| mw as f64 / 1000.0)
            }
        };
        let mem = d.memory_info().ok();
        let util = d.utilization_rates().ok();
        let split = d.running_compute_processes().ok().map(|ps| {
            let procs: Vec<GpuProc> = ps
                .iter()
                .map(|p| match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => (p.pid, Some(b)),
                    UsedGpuMemory::Unavailable => (p.pid, None),
                })
                .collect();
            split_procs(
                &procs,
                engine,
                std::process::id(),
                &super::procfs::parent,
                &|pid| {
                    engine.hidden_is_other || std::path::Path::new(&format!("/proc/{pid}")).exists()
                },
            )
        });
        let proc_mem = split.as_ref().map(|s| s.0);
        let others = split.and_then(|s| s.1);
        for &(pid, mb) in others.iter().flatten() {
            found.push((device_name(i), pid, mb));
        }
        out.push(Sample {
            t_ns,
            source: Source::Gpu,
            device: device_name(i),
            power_w,
            mem_used_mb: mem.as_ref().map(|m| m.used as f64 / 1e6),
            mem_total_mb: mem.as_ref().map(|m| m.total as f64 / 1e6),
            util_pct: util.as_ref().map(|u| u.gpu as f64),
            mem_util_pct: util.as_ref().map(|u| u.memory as f64),
            sm_clock_mhz: d.clock_info(Clock::SM).ok().map(f64::from),
            mem_clock_mhz: d.clock_info(Clock::Memory).ok().map(f64::from),
            temp_c: d.temperature(TemperatureSensor::Gpu).ok().map(f64::from),
            throttle_reasons: d.current_throttle_reasons().ok().map(|r| r.bits()),
            proc_mem_mb: proc_mem,
            other_procs: others.as_ref().map(|o| o.len() as f64),
            other_mem_mb: others.as_ref().map(|o| o.iter().map(|p| p.1).sum()),
            ..Default::default()
        });
    }
    (out, averaged, found)
}

/// The given devices (all when None) as NVML describes them, with the driver and CUDA
/// version; or why none can be described. Provenance: read once per run, never a key.
pub(crate) fn describe(wanted: Option<&[u32]>) -> crate::record::provenance::GpuSet {
    use crate::record::provenance::{GpuInfo, GpuSet};
    let n = match nvml() {
        Ok(n) => n,
        Err(e) => {
            return GpuSet {
                unavailable: Some(e.to_string()),
                ..Default::default()
            }
        }
    };
    let devs = match devices(&n, wanted) {
        Ok(d) => d,
        Err(e) => {
            return GpuSet {
                unavailable: Some(e.to_string()),
                ..Default::default()
            }
        }
    };
    let cuda = n.sys_cuda_driver_version().ok().map(|v| {
        format!(
            "{}.{}",
            nvml_wrapper::cuda_driver_version_major(v),
            nvml_wrapper::cuda_driver_version_minor(v)
        )
    });
    GpuSet {
        driver: n.sys_driver_version().ok(),
        cuda,
        devices: devs
            .into_iter()
            .map(|(index, name)| {
                let d = n.device_by_index(index).ok();
                let d = d.as_ref();
                GpuInfo {
                    index,
                    name,
                    power_limit_w: d
                        .and_then(|d| d.enforced_power_limit().ok())
                        .map(|mw| f64::from(mw) / 1000.0),
                    app_clock_graphics_mhz: d
                        .and_then(|d| d.applications_clock(Clock::Graphics).ok()),
                    app_clock_memory_mhz: d.and_then(|d| d.applications_clock(Clock::Memory).ok()),
                    persistence_mode: d.and_then(|d| d.is_in_persistent_mode().ok()),
                    uuid: d.and_then(|d| d.uuid().ok()),
                }
            })
            .collect(),
        unavailable: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_driver_nvml_says_so_instead_of_numbers() {
        // On machines with a GPU this checks the other branch: devices are listed by name.
        match nvml() {
            Err(why) => {
                // The PCI bus says which of the two this host is.
                let pci = crate::host::gpus::nvidia_on_pci(std::path::Path::new(
                    crate::host::gpus::PCI_DEVICES,
                ));
                let head = if pci == 0 {
                    "no NVIDIA GPU (NVML unavailable: ".to_string()
                } else {
                    format!("{pci} NVIDIA GPU")
                };
                assert!(why.to_string().starts_with(&head), "{why}");
            }
            Ok(n) => {
                let d = devices(&n, None).unwrap();
                assert!(!d.is_empty());
                let s = energy_sample(&n, &[d[0].0], 0);
                assert!(s.iter().all(|x| x.energy_mj.is_some()));
            }
        }
    }

    #[test]
    fn a_host_with_gpus_but_no_nvml_is_not_said_to_have_none() {
        let e = |count| {
            Unavailable::NvmlMissing {
                count,
                why: "libnvidia-ml.so.1: cannot open shared object file".into(),
            }
            .to_string()
        };
        assert_eq!(
            e(1),
            "1 NVIDIA GPU on the PCI bus but no NVML (libnvidia-ml.so.1: cannot open shared object file)"
        );
        assert!(e(8).starts_with("8 NVIDIA GPUs on the PCI bus but no NVML ("));
    }

    #[test]
    fn the_engines_processes_are_told_from_others_on_the_device() {
        // 10 is the engine; 11 its child found by procfs; 12 a child started since (its
        // parent 11); 20 another user's job; 30 bench360 itself.
        let parents = |p: u32| match p {
            11 | 13 => Some(10),
            12 => Some(11),
            20 => Some(7),
            7 => Some(1),
            _ => None,
        };
        let e = EngineProcs {
            known: &[10, 11],
            root: Some(10),
            hidden_is_other: false,
        };
        assert!(is_engines(12, &e, &parents));
        assert!(!is_engines(20, &e, &parents));
        let procs: Vec<GpuProc> = vec![
            (11, Some(3_000_000_000)),
            (12, Some(1_000_000_000)),
            (20, Some(2_500_000_000)),
            (30, None),
            (21, None),
        ];
        let seen = |_: u32| true;
        let (engine, others) = split_procs(&procs, &e, 30, &parents, &seen);
        assert_eq!(engine, 4000.0);
        assert_eq!(others, Some(vec![(20, 2500.0), (21, 0.0)]));
        // A pid this process cannot see (another PID namespace): nothing is told apart.
        let (_, others) = split_procs(&procs, &e, 30, &parents, &|p| p != 21);
        assert_eq!(others, None);
        // An engine that is not a local process: its memory unknown, the others not told.
        let remote = EngineProcs {
            known: &[],
            root: None,
            hidden_is_other: false,
        };
        assert_eq!(
            split_procs(&procs, &remote, 30, &parents, &seen),
            (0.0, None)
        );
        // A cycle in what /proc says (a pid reused mid-walk) ends the walk.
        let cyclic = |p: u32| Some(if p == 40 { 41 } else { 40 });
        assert!(!is_engines(40, &e, &cyclic));
    }

    #[test]
    fn another_process_counts_from_its_second_sighting() {
        let sample = |dev: &str| Sample {
            device: dev.into(),
            other_procs: Some(9.0),
            other_mem_mb: Some(9.0),
            ..Default::default()
        };
        let mut last = std::collections::BTreeSet::new();
        let found = |v: &[(&str, u32, f64)]| -> Vec<(String, u32, f64)> {
            v.iter().map(|(d, p, m)| (d.to_string(), *p, *m)).collect()
        };
        // First seen: not yet counted.
        let mut s = vec![sample("gpu0"), sample("gpu1")];
        let kept = confirm_others(&mut s, found(&[("gpu0", 7, 100.0)]), &mut last);
        assert!(kept.is_empty());
        assert_eq!(
            (s[0].other_procs, s[0].other_mem_mb),
            (Some(0.0), Some(0.0))
        );
        // Seen again: counted on its device; a newcomer on gpu1 waits for its second sample.
        let mut s = vec![sample("gpu0"), sample("gpu1")];
        let kept = confirm_others(
            &mut s,
            found(&[("gpu0", 7, 120.0), ("gpu1", 8, 50.0)]),
            &mut last,
        );
        assert_eq!(kept, found(&[("gpu0", 7, 120.0)]));
        assert_eq!(
            (s[0].other_procs, s[0].other_mem_mb),
            (Some(1.0), Some(120.0))
        );
        assert_eq!(s[1].other_procs, Some(0.0));
        // A sample that could not tell them apart stays so.
        let mut s = vec![Sample {
            device: "gpu0".into(),
            ..Default::default()
        }];
        confirm_others(&mut s, found(&[("gpu0", 7, 1.0)]), &mut last);
        assert_eq!(s[0].other_procs, None);
    }
}
