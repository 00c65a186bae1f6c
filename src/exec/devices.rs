//! The machine-wide device locks of a deployment ([`crate::host::devlock`]): taken before its
//! engine starts, held until the engine has stopped. Another apply on the same devices is
//! waited for (at most `BENCH360_DEVICE_WAIT` seconds when set), and said, with who holds
//! them; the wait is not part of any measurement.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Executor;
use crate::host::devlock::{self, Attempt, Claim, Held};
use crate::host::gpus::Allocation;
use crate::spec::Launch;

/// Where a deployment runs, as its claims need it.
pub(crate) struct Where<'a> {
    pub gpus: Option<&'a [u32]>,
    pub cpus: Option<&'a [u32]>,
    pub endpoint: Option<&'a str>,
    pub alloc: &'a Allocation,
    /// Inside a Slurm job that was bound to some of the node's CPUs: those (this process's
    /// affinity). None outside a job, or when the job may run on every CPU.
    pub job_cpus: Option<Vec<u32>>,
}

/// What NVML says of this machine's GPUs: how many it can open, and a board's UUID by its
/// NVML index. None where there is no NVML (no GPU, no driver).
pub(crate) struct Nvml<'a> {
    pub count: u32,
    pub uuid: &'a dyn Fn(u32) -> Option<String>,
}

/// The names of the GPUs that the process-level indices `g` reach (an engine's `gpus`), for
/// their locks: NVML's UUID of each board, reached as the telemetry reaches it (in a job
/// confined to its GPUs NVML numbers only those, from 0); the allocation's own names where
/// `CUDA_VISIBLE_DEVICES` gives UUIDs or MIG ids; without NVML, the index as the engine's
/// process (`CUDA_VISIBLE_DEVICES`) or a container (the node's numbering) is given it. Indices
/// beyond the allocation name nothing.
pub(crate) fn gpu_names(
    alloc: &Allocation,
    g: &[u32],
    process: bool,
    nvml: Option<&Nvml>,
) -> Vec<String> {
    let named = alloc
        .visible
        .as_ref()
        .filter(|v| v.iter().any(|x| x.parse::<u32>().is_err()));
    if let Some(v) = named {
        return g
            .iter()
            .filter_map(|&i| v.get(i as usize).cloned())
            .collect();
    }
    if let Some(n) = nvml {
        // `CUDA_VISIBLE_DEVICES` alone (no Slurm) always maps: `0,1` reordered as `1,0` on a
        // node of two names other boards than the indices. In a Slurm job NVML may see the
        // job's GPUs alone, from 0: `for_nvml` knows.
        let visible: Option<Vec<u32>> = alloc
            .visible
            .as_ref()
            .filter(|_| alloc.slurm.is_none())
            .and_then(|v| v.iter().map(|x| x.parse().ok()).collect());
        let idx = match visible {
            Some(v) => g
                .iter()
                .filter_map(|&i| v.get(i as usize).copied())
                .collect(),
            None => alloc
                .for_nvml(Some(g), n.count)
                .unwrap_or_else(|| g.to_vec()),
        };
        return idx
            .into_iter()
            .filter(|&i| i < n.count)
            .map(|i| (n.uuid)(i).unwrap_or_else(|| i.to_string()))
            .collect();
    }
    let pick = |pool: &[String]| -> Vec<String> {
        g.iter()
            .filter_map(|&i| pool.get(i as usize).cloned())
            .collect()
    };
    match (&alloc.visible, process) {
        (Some(v), true) => pick(v),
        _ => alloc.for_docker(Some(g)).ok().flatten().unwrap_or_default(),
    }
}

/// A deployment's claims: its engine's `gpus` (named by [`gpu_names`], so that one board has
/// one lock however a process numbers it) and `cpus`, the endpoint it is served at, or the
/// whole machine. Inside an allocation, a deployment that names no devices claims the
/// allocation's, never the whole node: the GPUs of `CUDA_VISIBLE_DEVICES`; in a job given no
/// GPU, the CPUs it is bound to (a job not bound to some takes the whole machine). `gpus`
/// beyond the allocation claim no GPU: the engine's start fails and says why, rather than
/// waiting on another job's GPU.
pub(crate) fn deployment_claims(w: &Where, process: bool, nvml: Option<&Nvml>) -> Vec<Claim> {
    let whole = w.gpus.is_none() && w.cpus.is_none() && w.endpoint.is_none();
    let gpus: Option<Vec<String>> = match (w.gpus, &w.alloc.visible) {
        (Some(g), _) => Some(gpu_names(w.alloc, g, process, nvml)),
        (None, Some(v)) if whole && !v.is_empty() => {
            let all: Vec<u32> = (0..v.len() as u32).collect();
            Some(gpu_names(w.alloc, &all, process, nvml))
        }
        _ => None,
    };
    let cpus: Option<Vec<u32>> = match (w.cpus, &w.job_cpus) {
        (Some(c), _) => Some(c.to_vec()),
        (None, Some(c)) if whole && gpus.is_none() => Some(c.clone()),
        _ => None,
    };
    if whole && (gpus.is_some() || cpus.is_some()) {
        return devlock::claims(
            Some(gpus.as_deref().unwrap_or_default()),
            cpus.as_deref(),
            None,
        );
    }
    devlock::claims(gpus.as_deref(), cpus.as_deref(), w.endpoint)
}

/// The CPUs a Slurm job was bound to: this process's affinity, when it is not every online
/// CPU of the node.
fn bound_cpus() -> Option<Vec<u32>> {
    let mine = affinity()?;
    // SAFETY: sysconf has no memory preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    (online > 0 && mine.len() < online as usize).then_some(mine)
}

/// The CPUs this process may run on (its affinity).
fn affinity() -> Option<Vec<u32>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if ok != 0 {
        return None;
    }
    Some(
        (0..libc::CPU_SETSIZE as u32)
            .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
            .collect(),
    )
}

/// What became of a deployment's claim on its devices.
pub(super) enum Claimed {
    /// Held (None: the locks cannot be used here, which was said).
    Held(Option<Held>),
    /// Cancelled while waiting: nothing ran.
    Cancelled,
    /// Waited `BENCH360_DEVICE_WAIT` seconds, or a lock that must not be used (a link
    /// planted in the folder): the cause.
    Failed(String),
}

/// An unusable lock folder is said once per process.
static SAID_UNUSABLE: AtomicBool = AtomicBool::new(false);

impl Executor<'_> {
    /// Holds the devices of deployment `d`, waiting while another process holds them.
    pub(super) async fn claim_devices(&mut self, d: usize) -> Claimed {
        let Some(dir) = devlock::folder() else {
            return Claimed::Held(None);
        };
        let dep = &self.plan.deployments[d];
        let e = &self.sweep.engines[dep.at.engine];
        let endpoint = match &e.launch {
            Launch::Endpoint { url, .. } => Some(url.as_str()),
            _ => None,
        };
        let alloc = Allocation::from_env();
        let job_cpus = std::env::var_os("SLURM_JOB_ID").and_then(|_| bound_cpus());
        let nvml = crate::telemetry::gpu::nvml().ok();
        let uuid = |i: u32| nvml.as_ref()?.device_by_index(i).ok()?.uuid().ok();
        let view = nvml.as_ref().and_then(|n| {
            Some(Nvml {
                count: n.device_count().ok()?,
                uuid: &uuid,
            })
        });
        let claims = deployment_claims(
            &Where {
                gpus: e.gpus.as_deref(),
                cpus: e.cpus.as_deref(),
                endpoint,
                alloc: &alloc,
                job_cpus,
            },
            matches!(e.launch, Launch::Process { .. }),
            view.as_ref(),
        );
        let limit = std::env::var("BENCH360_DEVICE_WAIT")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| *s >= 0.0);
        let label = dep.label.clone();
        let me = format!(
            "pid {} on {} since {}: deployment {label} of sweep {} (cache {})",
            std::process::id(),
            crate::host::hostname(),
            crate::host::now_rfc3339(),
            self.plan.sweep,
            self.store.root().display()
        );
        let t0 = std::time::Instant::now();
        let mut told: Option<(Claim, String)> = None;
        let mut polls = 0u32;
        loop {
            polls += 1;
            match devlock::attempt(&dir, &claims, &me) {
                Ok(Attempt::Held(h)) => {
                    if told.is_some() {
                        self.progress.say(&format!(
                            "▶ deployment {label}: its devices are free after {:.0} s",
                            t0.elapsed().as_secs_f64()
                        ));
                    }
                    return Claimed::Held(Some(h));
                }
                Ok(Attempt::Busy { claim, holder }) => {
                    // A holder that has just taken the lock writes itself a moment later: give
                    // it a poll before saying "another process".
                    let holder = match holder.as_str() {
                        "" if polls < 3 => None,
                        "" if claim == Claim::Machine => {
                            Some("deployments on some of its devices (`gpus`/`cpus`)".to_string())
                        }
                        "" => Some("another process (it did not say who)".to_string()),
                        _ => Some(holder),
                    };
                    if let Some(h) = holder.filter(|h| told != Some((claim.clone(), h.clone()))) {
                        self.progress.say(&format!(
                            "⏸ deployment {label} waits for {}, held by {h} (device locks in {})",
                            claim.describe(),
                            dir.display()
                        ));
                        told = Some((claim, h));
                    }
                    if let Some(s) = limit.filter(|s| t0.elapsed().as_secs_f64() >= *s) {
                        let (what, who) = told.clone().map_or_else(
                            || ("its devices".to_string(), "another process".to_string()),
                            |(c, h)| (c.describe(), h),
                        );
                        return Claimed::Failed(format!(
                            "{what} held by {who} for more than {s:.0} s (BENCH360_DEVICE_WAIT)"
                        ));
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                        _ = self.cancel.cancelled() => return Claimed::Cancelled,
                    }
                }
                Err(e) if e.refused => {
                    return Claimed::Failed(format!(
                    "{e} (another user may have planted it: bench360 neither uses nor writes it)"
                ))
                }
                Err(e) => {
                    if !SAID_UNUSABLE.swap(true, Ordering::Relaxed) {
                        self.progress.say(&format!(
                            "⚠ {e}: deployments run without the machine-wide device lock; another apply on their devices would not be noticed (set BENCH360_DEVICE_LOCKS to a folder that supports flock)"
                        ));
                    }
                    return Claimed::Held(None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(visible: Option<&str>, slurm: Option<&str>) -> Allocation {
        Allocation::from_vars(&|k| match k {
            "CUDA_VISIBLE_DEVICES" => visible.map(String::from),
            "SLURM_JOB_GPUS" => slurm.map(String::from),
            _ => None,
        })
    }

    fn at<'a>(
        gpus: Option<&'a [u32]>,
        cpus: Option<&'a [u32]>,
        endpoint: Option<&'a str>,
        alloc: &'a Allocation,
        job_cpus: Option<Vec<u32>>,
    ) -> Where<'a> {
        Where {
            gpus,
            cpus,
            endpoint,
            alloc,
            job_cpus,
        }
    }

    #[test]
    fn gpus_are_claimed_as_the_board_nvml_names() {
        let gpu = |s: &str| Claim::Gpu(s.into());
        let uuid = |i: u32| Some(format!("GPU-{i}"));
        // A node of 8 boards, or a job confined to its 2 (NVML then numbers those from 0).
        let (node, confined) = (
            Nvml {
                count: 8,
                uuid: &uuid,
            },
            Nvml {
                count: 2,
                uuid: &uuid,
            },
        );
        let free = alloc(None, None);
        let claims = |w: &Where, process: bool, n: Option<&Nvml>| deployment_claims(w, process, n);
        assert_eq!(
            claims(&at(Some(&[0]), None, None, &free, None), true, None),
            vec![gpu("0")]
        );
        assert_eq!(
            claims(&at(Some(&[3]), None, None, &free, None), true, Some(&node)),
            vec![gpu("GPU-3")]
        );
        // In a job given the node's GPUs 4 and 6, `gpus 1` is the node's GPU 6: board 6 where
        // NVML sees the node, board 1 of the two where it sees the job's alone.
        let job = alloc(Some("0,1"), Some("4,6"));
        assert_eq!(
            claims(&at(Some(&[1]), None, None, &job, None), true, Some(&node)),
            vec![gpu("GPU-6")]
        );
        assert_eq!(
            claims(
                &at(Some(&[1]), None, None, &job, None),
                true,
                Some(&confined)
            ),
            vec![gpu("GPU-1")]
        );
        // Without NVML: a process gets CUDA_VISIBLE_DEVICES's entry, a container the node's.
        assert_eq!(
            claims(&at(Some(&[1]), None, None, &job, None), true, None),
            vec![gpu("1")]
        );
        assert_eq!(
            claims(&at(Some(&[1]), None, None, &job, None), false, None),
            vec![gpu("6")]
        );
        // CUDA_VISIBLE_DEVICES reordered, without Slurm: `gpus 0` is board 1.
        let reordered = alloc(Some("1,0"), None);
        let two = Nvml {
            count: 2,
            uuid: &uuid,
        };
        assert_eq!(
            claims(
                &at(Some(&[0]), None, None, &reordered, None),
                true,
                Some(&two)
            ),
            vec![gpu("GPU-1")]
        );
        // Given by UUID: the UUID.
        let by_uuid = alloc(Some("GPU-aaa6,GPU-bbb7"), None);
        assert_eq!(
            claims(
                &at(Some(&[1]), None, None, &by_uuid, None),
                true,
                Some(&node)
            ),
            vec![gpu("GPU-bbb7")]
        );
        // Beyond the allocation: no GPU claimed (the start fails and says why).
        assert_eq!(
            claims(&at(Some(&[3]), None, None, &job, None), true, Some(&node)),
            Vec::<Claim>::new()
        );
        // No devices named inside a job: the job's GPUs, never the whole node (nor its CPUs:
        // GPU jobs on one node are seldom bound to CPUs of their own).
        assert_eq!(
            claims(
                &at(None, None, None, &job, Some(vec![2, 3])),
                true,
                Some(&node)
            ),
            vec![gpu("GPU-4"), gpu("GPU-6")]
        );
        // A CPU-only job bound to some CPUs: those.
        assert_eq!(
            claims(&at(None, None, None, &free, Some(vec![5])), true, None),
            vec![Claim::Cpu(5)]
        );
        assert_eq!(
            claims(&at(None, None, None, &free, None), true, Some(&node)),
            vec![Claim::Machine]
        );
        assert_eq!(
            claims(&at(None, Some(&[2, 3]), None, &free, None), true, None),
            vec![Claim::Cpu(2), Claim::Cpu(3)]
        );
        assert_eq!(
            claims(
                &at(None, None, Some("http://h:1/v1"), &job, None),
                false,
                None
            ),
            vec![Claim::Endpoint("http://h:1/v1".into())]
        );
    }

    #[test]
    fn this_process_runs_on_some_cpu() {
        assert!(!affinity().unwrap().is_empty());
    }
}
