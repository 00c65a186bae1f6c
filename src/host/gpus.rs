//! Which devices an engine's `gpus` indices mean. Inside an allocation (the GPUs Slurm gave a
//! job, or a `CUDA_VISIBLE_DEVICES` the user set) they index the allocation, never the whole
//! node: `gpus 0 1` in a job on a shared 8-GPU node are the job's two GPUs, whichever they are.

/// The GPUs this process was given, read from its environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Allocation {
    /// `CUDA_VISIBLE_DEVICES` as inherited: what a child process may use (indices or UUIDs).
    pub visible: Option<Vec<String>>,
    /// `SLURM_JOB_GPUS` (or `SLURM_STEP_GPUS`): the node's indices of the job's GPUs, which
    /// is how the Docker daemon and an unconfined NVML number them.
    pub slurm: Option<Vec<u32>>,
}

/// An engine's `gpus` asks for more GPUs than this process was given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the engine asks for GPU {asked}, but only {have} GPU{} allocated to it ({from}): ask for more (e.g. --gres=gpu:{need})",
    if *have == 1 { " is" } else { "s are" }
)]
pub(crate) struct TooFewGpus {
    pub asked: u32,
    pub have: usize,
    /// The allocation, as the variable that said it (`CUDA_VISIBLE_DEVICES=0,1`).
    pub from: String,
    /// GPUs the job would need.
    pub need: u32,
}

fn split(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

impl Allocation {
    pub fn from_env() -> Allocation {
        Allocation::from_vars(&|k| std::env::var(k).ok())
    }

    pub fn from_vars(var: &dyn Fn(&str) -> Option<String>) -> Allocation {
        let slurm = var("SLURM_JOB_GPUS")
            .or_else(|| var("SLURM_STEP_GPUS"))
            .and_then(|v| split(&v).iter().map(|s| s.parse().ok()).collect());
        Allocation {
            visible: var("CUDA_VISIBLE_DEVICES").map(|v| split(&v)),
            slurm,
        }
    }

    fn pick(pool: &[String], gpus: &[u32], what: &str) -> Result<Vec<String>, TooFewGpus> {
        gpus.iter()
            .map(|&i| {
                pool.get(i as usize).cloned().ok_or_else(|| TooFewGpus {
                    asked: i,
                    have: pool.len(),
                    from: what.to_string(),
                    need: gpus.iter().max().map_or(1, |m| m + 1),
                })
            })
            .collect()
    }

    /// `CUDA_VISIBLE_DEVICES` for an engine process (None: it inherits bench360's).
    pub fn for_process(&self, gpus: Option<&[u32]>) -> Result<Option<String>, TooFewGpus> {
        let Some(g) = gpus else { return Ok(None) };
        let ids = match &self.visible {
            Some(v) => Self::pick(v, g, &format!("CUDA_VISIBLE_DEVICES={}", v.join(",")))?,
            None => g.iter().map(u32::to_string).collect(),
        };
        Ok(Some(ids.join(",")))
    }

    /// Device ids for a container: the Docker daemon runs outside the job and numbers the
    /// node's GPUs.
    pub fn for_docker(&self, gpus: Option<&[u32]>) -> Result<Option<Vec<String>>, TooFewGpus> {
        let Some(g) = gpus else { return Ok(None) };
        match (&self.slurm, &self.visible) {
            (Some(s), _) => {
                let pool: Vec<String> = s.iter().map(u32::to_string).collect();
                Self::pick(&pool, g, &format!("SLURM_JOB_GPUS={}", pool.join(","))).map(Some)
            }
            (None, Some(v)) => {
                Self::pick(v, g, &format!("CUDA_VISIBLE_DEVICES={}", v.join(","))).map(Some)
            }
            (None, None) => Ok(Some(g.iter().map(u32::to_string).collect())),
        }
    }

    /// NVML indices to sample. NVML ignores `CUDA_VISIBLE_DEVICES` and numbers the GPUs it can
    /// open: in a job confined to its GPUs (cgroup devices) only those, from 0; otherwise the
    /// whole node, where the allocation's node indices pick the job's.
    pub fn for_nvml(&self, gpus: Option<&[u32]>, nvml_count: u32) -> Option<Vec<u32>> {
        let pool: Option<Vec<u32>> = self.slurm.clone().or_else(|| {
            self.visible
                .as_ref()
                .and_then(|v| v.iter().map(|s| s.parse().ok()).collect())
        });
        match pool {
            Some(p) if nvml_count as usize > p.len() => Some(match gpus {
                Some(g) => g
                    .iter()
                    .filter_map(|&i| p.get(i as usize).copied())
                    .collect(),
                None => p,
            }),
            _ => gpus.map(<[u32]>::to_vec),
        }
    }
}

/// Where Linux lists the PCI bus's devices, one folder each.
pub(crate) const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// NVIDIA display and 3D controllers on the PCI bus under `root` ([`PCI_DEVICES`] on
/// Linux): vendor `0x10de`, class `0x0300xx` or `0x0302xx`. Read only where NVML cannot be
/// loaded, so that "no NVML" on a host with GPUs is not said as "no GPU"; 0 where the folder
/// cannot be read (not Linux, a container without sysfs).
pub(crate) fn nvidia_on_pci(root: &std::path::Path) -> usize {
    let Ok(dir) = std::fs::read_dir(root) else {
        return 0;
    };
    let read = |d: &std::path::Path, f: &str| {
        std::fs::read_to_string(d.join(f))
            .map(|s| s.trim().to_ascii_lowercase())
            .unwrap_or_default()
    };
    dir.flatten()
        .filter(|e| {
            let d = e.path();
            let class = read(&d, "class");
            read(&d, "vendor") == "0x10de"
                && (class.starts_with("0x0300") || class.starts_with("0x0302"))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_on_pci_counts_nvidia_gpus_only() {
        let root = tempfile::tempdir().unwrap();
        let dev = |name: &str, vendor: &str, class: &str| {
            let d = root.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(d.join("class"), format!("{class}\n")).unwrap();
        };
        dev("0000:18:00.0", "0x10de", "0x030200"); // H100: 3D controller
        dev("0000:65:00.0", "0x10DE", "0x030000"); // a VGA-class NVIDIA GPU
        dev("0000:18:00.1", "0x10de", "0x040300"); // its audio function
        dev("0000:00:02.0", "0x8086", "0x030000"); // an Intel GPU
        dev("0000:3b:00.0", "0x15b3", "0x020000"); // a NIC
        std::fs::create_dir(root.path().join("0000:00:1f.0")).unwrap(); // no files
        assert_eq!(nvidia_on_pci(root.path()), 2);
        assert_eq!(nvidia_on_pci(&root.path().join("absent")), 0);
    }

    fn alloc(vars: &[(&str, &str)]) -> Allocation {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Allocation::from_vars(&move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn outside_any_allocation_indices_are_the_nodes() {
        let a = alloc(&[]);
        assert_eq!(
            a.for_process(Some(&[0, 1])).unwrap().as_deref(),
            Some("0,1")
        );
        assert_eq!(a.for_process(None).unwrap(), None);
        assert_eq!(
            a.for_docker(Some(&[1])).unwrap(),
            Some(vec!["1".to_string()])
        );
        assert_eq!(a.for_nvml(Some(&[1]), 8), Some(vec![1]));
        assert_eq!(a.for_nvml(None, 8), None);
    }

    #[test]
    fn in_a_slurm_job_indices_are_the_jobs_gpus() {
        // Unconfined: the job got GPUs 2 and 5 of 8 and sees their node numbers.
        let a = alloc(&[("SLURM_JOB_GPUS", "2,5"), ("CUDA_VISIBLE_DEVICES", "2,5")]);
        assert_eq!(a.for_process(Some(&[1])).unwrap().as_deref(), Some("5"));
        assert_eq!(
            a.for_docker(Some(&[0, 1])).unwrap(),
            Some(vec!["2".into(), "5".into()])
        );
        assert_eq!(a.for_nvml(Some(&[1]), 8), Some(vec![5]));
        assert_eq!(a.for_nvml(None, 8), Some(vec![2, 5]));
        // Confined by cgroups: Slurm renumbers CUDA_VISIBLE_DEVICES and NVML sees two GPUs.
        let c = alloc(&[("SLURM_JOB_GPUS", "2,5"), ("CUDA_VISIBLE_DEVICES", "0,1")]);
        assert_eq!(c.for_process(Some(&[1])).unwrap().as_deref(), Some("1"));
        assert_eq!(c.for_docker(Some(&[1])).unwrap(), Some(vec!["5".into()]));
        assert_eq!(c.for_nvml(Some(&[1]), 2), Some(vec![1]));
        // Asking for more than the job has says how to get them.
        let err = a.for_process(Some(&[0, 2])).unwrap_err().to_string();
        assert!(
            err.contains("asks for GPU 2, but only 2 GPUs are allocated"),
            "{err}"
        );
        assert!(err.contains("--gres=gpu:3"), "{err}");
    }

    #[test]
    fn a_users_cuda_visible_devices_is_an_allocation_too() {
        let a = alloc(&[("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb")]);
        assert_eq!(
            a.for_process(Some(&[1])).unwrap().as_deref(),
            Some("GPU-bbbb")
        );
        assert_eq!(
            a.for_docker(Some(&[0])).unwrap(),
            Some(vec!["GPU-aaaa".into()])
        );
        // UUIDs cannot be mapped to NVML indices here: sampled as given.
        assert_eq!(a.for_nvml(Some(&[0]), 4), Some(vec![0]));
        let n = alloc(&[("CUDA_VISIBLE_DEVICES", "3")]);
        assert_eq!(n.for_nvml(Some(&[0]), 4), Some(vec![3]));
        assert!(alloc(&[("CUDA_VISIBLE_DEVICES", "")])
            .for_process(Some(&[0]))
            .is_err());
    }
}
