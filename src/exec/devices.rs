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

/// A deployment's claims: its engine's `gpus` and `cpus`, the endpoint it is served at, or
/// the whole machine. GPUs are named as NVML names the board (`uuid`: its UUID from the
/// node's index; an index where NVML cannot say), so that one board has one lock whether a
/// process numbers it or names it. Inside an allocation, a deployment that names no devices
/// claims the allocation's, never the whole node: the GPUs of `CUDA_VISIBLE_DEVICES`; in a job
/// given no GPU, the CPUs it is bound to (a job not bound to some takes the whole machine). `gpus` beyond the allocation claim no GPU: the engine's start fails
/// and says why, rather than waiting on another job's GPU.
pub(crate) fn deployment_claims(w: &Where, uuid: &dyn Fn(&str) -> Option<String>) -> Vec<Claim> {
    let named = |ids: Vec<String>| -> Vec<String> {
        ids.into_iter().map(|id| uuid(&id).unwrap_or(id)).collect()
    };
    let whole = w.gpus.is_none() && w.cpus.is_none() && w.endpoint.is_none();
    let gpus: Option<Vec<String>> = match (w.gpus, &w.alloc.visible) {
        (Some(g), _) => Some(
            w.alloc
                .for_docker(Some(g))
                .ok()
                .flatten()
                .unwrap_or_default(),
        ),
        (None, Some(v)) if whole && !v.is_empty() => {
            let all: Vec<u32> = (0..v.len() as u32).collect();
            w.alloc.for_docker(Some(&all)).ok().flatten()
        }
        _ => None,
    }
    .map(named);
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

/// A GPU's UUID from NVML, by the node's index (a UUID or MIG id is kept as it is).
fn nvml_uuid(id: &str) -> Option<String> {
    let i: u32 = id.parse().ok()?;
    let n = crate::telemetry::gpu::nvml().ok()?;
    n.device_by_index(i).ok()?.uuid().ok()
}

/// What became of a deployment's claim on its devices.
pub(super) enum Claimed {
    /// Held (None: the locks cannot be used here, which was said).
    Held(Option<Held>),
    /// Cancelled while waiting: nothing ran.
    Cancelled,
    /// Waited `BENCH360_DEVICE_WAIT` seconds: the cause, naming the holder.
    TimedOut(String),
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
        let claims = deployment_claims(
            &Where {
                gpus: e.gpus.as_deref(),
                cpus: e.cpus.as_deref(),
                endpoint,
                alloc: &alloc,
                job_cpus,
            },
            &nvml_uuid,
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
                        return Claimed::TimedOut(format!(
                            "{what} held by {who} for more than {s:.0} s (BENCH360_DEVICE_WAIT)"
                        ));
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                        _ = self.cancel.cancelled() => return Claimed::Cancelled,
                    }
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
        let none = |_: &str| None;
        // The node's GPU 6 is board GPU-aaa6, however the process numbers it.
        let nvml = |id: &str| Some(format!("GPU-aaa{id}")).filter(|_| id.parse::<u32>().is_ok());
        let free = alloc(None, None);
        assert_eq!(
            deployment_claims(&at(Some(&[0]), None, None, &free, None), &none),
            vec![gpu("0")]
        );
        // In a job given the node's GPUs 4 and 6, `gpus 1` is the node's GPU 6.
        let job = alloc(Some("0,1"), Some("4,6"));
        assert_eq!(
            deployment_claims(&at(Some(&[1]), None, None, &job, None), &nvml),
            vec![gpu("GPU-aaa6")]
        );
        // Given by UUID: the UUID, as NVML would name the same board from its index.
        let by_uuid = alloc(Some("GPU-aaa6"), None);
        assert_eq!(
            deployment_claims(&at(Some(&[0]), None, None, &by_uuid, None), &nvml),
            vec![gpu("GPU-aaa6")]
        );
        // Beyond the allocation: no GPU claimed (the start fails and says why).
        assert_eq!(
            deployment_claims(&at(Some(&[3]), None, None, &job, None), &nvml),
            Vec::<Claim>::new()
        );
        // No devices named inside a job: the job's GPUs, never the whole node (nor its CPUs:
        // GPU jobs on one node are seldom bound to CPUs of their own).
        assert_eq!(
            deployment_claims(&at(None, None, None, &job, Some(vec![2, 3])), &none),
            vec![gpu("4"), gpu("6")]
        );
        // A CPU-only job bound to some CPUs: those.
        assert_eq!(
            deployment_claims(&at(None, None, None, &free, Some(vec![5])), &none),
            vec![Claim::Cpu(5)]
        );
        assert_eq!(
            deployment_claims(&at(None, None, None, &free, None), &none),
            vec![Claim::Machine]
        );
        assert_eq!(
            deployment_claims(&at(None, Some(&[2, 3]), None, &free, None), &none),
            vec![Claim::Cpu(2), Claim::Cpu(3)]
        );
        assert_eq!(
            deployment_claims(&at(None, None, Some("http://h:1/v1"), &job, None), &none),
            vec![Claim::Endpoint("http://h:1/v1".into())]
        );
    }

    #[test]
    fn this_process_runs_on_some_cpu() {
        assert!(!affinity().unwrap().is_empty());
    }
}
