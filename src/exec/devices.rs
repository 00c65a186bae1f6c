//! The machine-wide device locks of a deployment ([`crate::host::devlock`]): taken before its
//! engine starts, held until the engine has stopped. Another apply on the same devices is
//! waited for, and said once, with who holds them; the wait is not part of any measurement.

use std::time::Duration;

use super::Executor;
use crate::host::devlock::{self, Attempt, Claim, Held};
use crate::host::gpus::Allocation;
use crate::spec::Launch;

/// A deployment's claims: its engine's `gpus` (as the node numbers them) and `cpus`, the
/// endpoint it is served at, or the whole machine — inside an allocation
/// (`CUDA_VISIBLE_DEVICES`), the allocation's GPUs rather than the whole node.
pub(crate) fn deployment_claims(
    gpus: Option<&[u32]>,
    cpus: Option<&[u32]>,
    endpoint: Option<&str>,
    alloc: &Allocation,
) -> Vec<Claim> {
    let node_ids = |g: &[u32]| {
        alloc
            .for_docker(Some(g))
            .ok()
            .flatten()
            .unwrap_or_else(|| g.iter().map(u32::to_string).collect())
    };
    let ids = match (gpus, cpus, endpoint, &alloc.visible) {
        (Some(g), ..) => Some(node_ids(g)),
        (None, None, None, Some(v)) if !v.is_empty() => {
            let all: Vec<u32> = (0..v.len() as u32).collect();
            Some(node_ids(&all))
        }
        _ => None,
    };
    devlock::claims(ids.as_deref(), cpus, endpoint)
}

impl Executor<'_> {
    /// Holds the devices of deployment `d`, waiting while another process holds them.
    /// None: cancelled while waiting. Some(None): the locks cannot be used here (said).
    pub(super) async fn claim_devices(&mut self, d: usize) -> Option<Option<Held>> {
        let Some(dir) = devlock::folder() else {
            return Some(None);
        };
        let dep = &self.plan.deployments[d];
        let e = &self.sweep.engines[dep.at.engine];
        let endpoint = match &e.launch {
            Launch::Endpoint { url, .. } => Some(url.as_str()),
            _ => None,
        };
        let claims = deployment_claims(
            e.gpus.as_deref(),
            e.cpus.as_deref(),
            endpoint,
            &Allocation::from_env(),
        );
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
                    return Some(Some(h));
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
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                        _ = self.cancel.cancelled() => return None,
                    }
                }
                Err(e) => {
                    self.progress.say(&format!(
                        "⚠ {e}: deployment {label} runs without the machine-wide device lock; another apply on its devices would not be noticed (set BENCH360_DEVICE_LOCKS to a folder that supports flock)"
                    ));
                    return Some(None);
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

    #[test]
    fn gpus_are_claimed_as_the_node_numbers_them() {
        let gpu = |s: &str| Claim::Gpu(s.into());
        assert_eq!(
            deployment_claims(Some(&[0]), None, None, &alloc(None, None)),
            vec![gpu("0")]
        );
        // In a job given the node's GPUs 4 and 6, `gpus 1` is the node's GPU 6.
        assert_eq!(
            deployment_claims(Some(&[1]), None, None, &alloc(Some("0,1"), Some("4,6"))),
            vec![gpu("6")]
        );
        // A deployment naming no devices inside an allocation takes the allocation's GPUs,
        // not the node: other jobs' GPUs stay free.
        assert_eq!(
            deployment_claims(None, None, None, &alloc(Some("0,1"), Some("4,6"))),
            vec![gpu("4"), gpu("6")]
        );
        assert_eq!(
            deployment_claims(None, None, None, &alloc(None, None)),
            vec![Claim::Machine]
        );
        assert_eq!(
            deployment_claims(None, Some(&[2, 3]), None, &alloc(None, None)),
            vec![Claim::Cpu(2), Claim::Cpu(3)]
        );
        assert_eq!(
            deployment_claims(None, None, Some("http://h:1/v1"), &alloc(Some("0"), None)),
            vec![Claim::Endpoint("http://h:1/v1".into())]
        );
    }
}
