//! Deployments at once on disjoint devices. A deployment whose engine declares its devices
//! (`gpus`, `cpus`) may run beside another whose devices it does not share; one that
//! declares neither takes the whole machine. At most `max-parallel` run at a time.
//!
//! Each deployment runs as its own `bench360 apply SWEEP --deployment LABEL` process, as a
//! Slurm job would: the same executor, locks and records, so resuming, Ctrl-C and kill -9
//! behave as for one deployment (a child dies with this process: it gets SIGTERM and stops
//! gracefully, recording nothing half-done). When all have ended, this process writes the
//! report from the cache alone. The scheduling is pure ([`startable`]); [`apply`] spawns.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::{deployment_order, Summary};
use crate::plan::{NodeKind, Plan, Status};
use crate::spec::Sweep;
use crate::store::Store;
use crate::workload::Cancel;

/// The devices a deployment's engine declared; neither: the whole machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Devices {
    pub gpus: Option<BTreeSet<u32>>,
    pub cpus: Option<BTreeSet<u32>>,
}

impl Devices {
    pub fn of(sweep: &Sweep, plan: &Plan, d: usize) -> Devices {
        let e = &sweep.engines[plan.deployments[d].at.engine];
        let set = |v: &Option<Vec<u32>>| v.as_ref().map(|v| v.iter().copied().collect());
        Devices {
            gpus: set(&e.gpus),
            cpus: set(&e.cpus),
        }
    }

    fn whole_machine(&self) -> bool {
        self.gpus.is_none() && self.cpus.is_none()
    }

    /// Whether the two cannot run at once: either takes the whole machine, or they share a
    /// GPU or a CPU.
    pub fn overlaps(&self, other: &Devices) -> bool {
        let shared = |a: &Option<BTreeSet<u32>>, b: &Option<BTreeSet<u32>>| match (a, b) {
            (Some(a), Some(b)) => !a.is_disjoint(b),
            _ => false,
        };
        self.whole_machine()
            || other.whole_machine()
            || shared(&self.gpus, &other.gpus)
            || shared(&self.cpus, &other.cpus)
    }
}

/// Of the pending deployments (in the plan's order), those to start now beside the running
/// ones: each in turn if fewer than `max` run and it overlaps none of them. A deployment that
/// must wait does not hold back a later one that fits.
pub(crate) fn startable(
    pending: &[usize],
    running: &[usize],
    devices: &[Devices],
    max: usize,
) -> Vec<usize> {
    let mut now: Vec<usize> = running.to_vec();
    let mut out = Vec::new();
    for &d in pending {
        if now.len() >= max {
            break;
        }
        if now.iter().all(|&r| !devices[d].overlaps(&devices[r])) {
            now.push(d);
            out.push(d);
        }
    }
    out
}

/// The deployments with a node to run (warmups aside), in the plan's order.
pub(crate) fn with_work(plan: &Plan, status: &[Status]) -> Vec<usize> {
    deployment_order(plan)
        .into_iter()
        .filter(|&d| {
            plan.deployment_nodes(d)
                .iter()
                .any(|&i| status[i.index()].will_run() && plan.graph[i].kind != NodeKind::Warmup)
        })
        .collect()
}

/// Whether running deployments at once would change anything: at least two with work that
/// do not overlap, and `max` above 1.
pub(crate) fn worth_it(sweep: &Sweep, plan: &Plan, status: &[Status], max: usize) -> bool {
    if max < 2 {
        return false;
    }
    startable(&with_work(plan, status), &[], &devices(sweep, plan), max).len() > 1
}

/// Each deployment's devices, by deployment index.
fn devices(sweep: &Sweep, plan: &Plan) -> Vec<Devices> {
    (0..plan.deployments.len())
        .map(|d| Devices::of(sweep, plan, d))
        .collect()
}

/// One deployment's process, as it ended.
struct Ended {
    label: String,
    outcome: Option<serde_json::Value>,
    code: Option<i32>,
}

/// Applies the plan's deployments as child processes of `exe` (`argv` before `apply`: the
/// cache and the overrides), at most `max` at once on disjoint devices, then writes the report.
/// `status`: the plan's statuses before anything runs (what [`worth_it`] was asked with).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn apply(
    exe: &Path,
    argv: &[String],
    sweep_file: &Path,
    sweep: &Sweep,
    plan: &Plan,
    store: &Store,
    status: &[Status],
    max: usize,
    cancel: Cancel,
) -> Summary {
    let t0 = Instant::now();
    let mut summary = Summary::default();
    summary.tally(plan, status, &vec![true; status.len()]);
    let devices = devices(sweep, plan);
    let mut pending = with_work(plan, status);
    let mut running: Vec<usize> = Vec::new();
    let mut children: tokio::task::JoinSet<(usize, Ended)> = tokio::task::JoinSet::new();
    let mut pids: Vec<(usize, u32)> = Vec::new();
    let mut signalled = false;
    loop {
        if !cancel.is_cancelled() {
            for d in startable(&pending, &running, &devices, max) {
                pending.retain(|&p| p != d);
                let label = plan.deployments[d].label.clone();
                eprintln!(
                    "▶ deployment {label} in parallel ({} running; devices {})",
                    running.len() + 1,
                    describe(&devices[d])
                );
                match spawn(exe, argv, sweep_file, &label) {
                    Ok(child) => {
                        if let Some(pid) = child.id() {
                            pids.push((d, pid));
                        }
                        running.push(d);
                        children.spawn(async move { (d, follow(child, label).await) });
                    }
                    Err(e) => summary.failed.push((
                        format!("deployment {label}"),
                        format!("cannot start its apply: {e}"),
                    )),
                }
            }
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            Some(joined) = children.join_next() => {
                let Ok((d, ended)) = joined else { continue };
                running.retain(|&r| r != d);
                pids.retain(|(p, _)| *p != d);
                merge(&mut summary, ended);
            }
            _ = cancel.cancelled(), if !signalled => {
                signalled = true;
                // Stop every child gracefully; each records nothing half-done.
                for (_, pid) in &pids {
                    // SAFETY: kill has no memory preconditions; a pid that has exited
                    // (not yet reaped) only makes it fail.
                    unsafe { libc::kill(*pid as i32, libc::SIGTERM) };
                }
                pending.clear();
            }
        }
    }
    summary.interrupted = cancel.is_cancelled();
    if !summary.interrupted {
        let files = crate::report::build_report(store, plan, sweep);
        summary.report_table = Some(files.table.clone());
        match super::write_report(store, plan, &files) {
            Ok((path, recorded)) => {
                summary.report = Some(path);
                if recorded {
                    summary.ran.push(plan.graph[plan.report].label.clone());
                }
            }
            Err(e) => summary
                .failed
                .push((plan.graph[plan.report].label.clone(), e.to_string())),
        }
    }
    summary.elapsed_s = t0.elapsed().as_secs_f64();
    summary
}

fn describe(d: &Devices) -> String {
    let list = |s: &BTreeSet<u32>| s.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    match (&d.gpus, &d.cpus) {
        (Some(g), Some(c)) => format!("gpus {}, cpus {}", list(g), list(c)),
        (Some(g), None) => format!("gpus {}", list(g)),
        (None, Some(c)) => format!("cpus {}", list(c)),
        (None, None) => "the whole machine".into(),
    }
}

/// Set in a child of a parallel apply (to the parent's pid): what the parent says for the
/// whole sweep, the child does not repeat.
pub(crate) const PARENT_VAR: &str = "BENCH360_APPLY_PARENT";

fn spawn(
    exe: &Path,
    argv: &[String],
    sweep_file: &Path,
    label: &str,
) -> std::io::Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.env(PARENT_VAR, std::process::id().to_string())
        .args(argv)
        .arg("apply")
        .arg(sweep_file)
        .args(["--deployment", label, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    // A child stops (gracefully: SIGTERM) when this process dies, even by kill -9.
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    cmd.spawn()
}

/// Relays the child's lines to stderr under its label, and reads its JSON outcome.
async fn follow(mut child: tokio::process::Child, label: String) -> Ended {
    let stderr = child.stderr.take();
    let mut stdout = child.stdout.take();
    let relay = {
        let label = label.clone();
        tokio::spawn(async move {
            if let Some(e) = stderr {
                let mut lines = BufReader::new(e).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    eprintln!("[{label}] {l}");
                }
            }
        })
    };
    let mut out = String::new();
    if let Some(o) = stdout.as_mut() {
        let _ = o.read_to_string(&mut out).await;
    }
    let code = child.wait().await.ok().and_then(|s| s.code());
    let _ = relay.await;
    Ended {
        label,
        outcome: serde_json::from_str(&out).ok(),
        code,
    }
}

/// A child's outcome into the apply's: what it ran and what failed (its cached and blocked
/// nodes are counted once, from the plan, before any child started).
fn merge(summary: &mut Summary, ended: Ended) {
    let strs = |v: Option<&serde_json::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    match &ended.outcome {
        Some(o) => {
            summary.ran.extend(strs(o.get("ran")));
            for f in o
                .get("failed")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
            {
                summary.failed.push((
                    f.get("label")
                        .and_then(|v| v.as_str())
                        .unwrap_or("?")
                        .to_string(),
                    f.get("cause")
                        .and_then(|v| v.as_str())
                        .unwrap_or("")
                        .to_string(),
                ));
            }
            if o.get("interrupted").and_then(|v| v.as_bool()) == Some(true) {
                summary.interrupted = true;
            }
        }
        None => summary.failed.push((
            format!("deployment {}", ended.label),
            format!(
                "its apply ended without an outcome (exit {})",
                ended.code.map_or("by a signal".into(), |c| c.to_string())
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(gpus: Option<&[u32]>, cpus: Option<&[u32]>) -> Devices {
        Devices {
            gpus: gpus.map(|g| g.iter().copied().collect()),
            cpus: cpus.map(|c| c.iter().copied().collect()),
        }
    }

    #[test]
    fn disjoint_devices_run_together_and_the_whole_machine_alone() {
        let devices = vec![
            dev(None, Some(&[0])),
            dev(None, Some(&[1])),
            dev(None, Some(&[1, 2])),
            dev(None, None),
            dev(Some(&[0]), None),
            dev(Some(&[1]), None),
        ];
        // 0 and 1 are disjoint; 2 shares CPU 1 with 1; 3 takes everything.
        assert_eq!(startable(&[0, 1, 2, 3], &[], &devices, usize::MAX), [0, 1]);
        // max-parallel bounds it.
        assert_eq!(startable(&[0, 1, 2, 3], &[], &devices, 1), [0]);
        // With 1 running, 2 waits but the GPU deployments (no CPU set) fit beside it.
        assert_eq!(startable(&[2, 3, 4, 5], &[1], &devices, usize::MAX), [4, 5]);
        // The whole machine waits for an empty machine, and then runs alone.
        assert_eq!(startable(&[3, 0], &[1], &devices, usize::MAX), [0]);
        assert_eq!(startable(&[3, 0], &[], &devices, usize::MAX), [3]);
        assert!(dev(Some(&[0, 1]), None).overlaps(&dev(Some(&[1]), None)));
        assert!(!dev(Some(&[0]), Some(&[0])).overlaps(&dev(Some(&[1]), Some(&[1]))));
    }
}
