//! The Slurm executor. bench360 does not schedule a cluster: it hands its DAG to Slurm. Each
//! deployment with nodes to run becomes one batch job running `bench360 apply SWEEP
//! --deployment LABEL` against the shared cache (cold start, warmup, runs and scores in one
//! engine lifetime, as on one machine); the report is one more job, `afterany` of them all, so
//! failures are reported too.
//!
//! What was submitted is kept beside the cache's records, under `slurm/<sweep>/`:
//! `deployment-<hash>.json` per deployment and `report.json` (job id, command, sbatch options,
//! log), `jobs/<id>.json` written by each job itself (host, start, end, exit code, the machine
//! and engine artifact it ran with), `logs/<id>.out`. Deciding and submitting happen under an
//! exclusive lock on `slurm/<sweep>.lock`, and a deployment whose recorded job is still queued
//! or running is never submitted again.

mod commands;
mod in_job;
mod status;
mod submit;
mod sweep_dir;

pub(crate) use in_job::*;
pub(crate) use status::*;
pub(crate) use submit::*;
pub(crate) use sweep_dir::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub(crate) use commands::SlurmCommands;

use crate::host::{self, now_rfc3339};
use crate::plan::{Facts, NodeKind, Plan, Status, Why};
use crate::spec::{Launch, SlurmSettings, Sweep};
use crate::store::{self, Store};

/// A job's state as Slurm names it (`squeue %T`, `sacct State`; `CANCELLED by 1000` is
/// `Cancelled`). States bench360 acts on are variants; any other is kept by its name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum JobState {
    #[default]
    Pending,
    Running,
    Configuring,
    Completing,
    Completed,
    Failed,
    Cancelled,
    Timeout,
    /// One of the other states a job may still run from (suspended, requeued, …).
    Waiting(String),
    /// Another ended state (NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL, DEADLINE, …).
    Ended(String),
}

impl JobState {
    /// Reads Slurm's state word (the first word: `CANCELLED by 1000` → `CANCELLED`).
    pub fn parse(s: &str) -> JobState {
        let word = s.split_whitespace().next().unwrap_or("");
        match word {
            "PENDING" => JobState::Pending,
            "RUNNING" => JobState::Running,
            "CONFIGURING" => JobState::Configuring,
            "COMPLETING" => JobState::Completing,
            "COMPLETED" => JobState::Completed,
            "FAILED" => JobState::Failed,
            "CANCELLED" => JobState::Cancelled,
            "TIMEOUT" => JobState::Timeout,
            "SUSPENDED" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "RESIZING"
            | "SIGNALING" | "STAGE_OUT" | "STOPPED" | "RESV_DEL_HOLD" => {
                JobState::Waiting(word.to_string())
            }
            other => JobState::Ended(other.to_string()),
        }
    }

    /// States in which a job may still run (or is running): such a job is never submitted
    /// twice.
    pub fn is_active(&self) -> bool {
        matches!(
            self,
            JobState::Pending
                | JobState::Running
                | JobState::Configuring
                | JobState::Completing
                | JobState::Waiting(_)
        )
    }

    /// Running on a node now (it has a node and a start time).
    pub fn is_running(&self) -> bool {
        matches!(
            self,
            JobState::Running | JobState::Completing | JobState::Configuring
        )
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Configuring => "CONFIGURING",
            JobState::Completing => "COMPLETING",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Timeout => "TIMEOUT",
            JobState::Waiting(s) | JobState::Ended(s) => s,
        })
    }
}

impl From<&str> for JobState {
    fn from(s: &str) -> JobState {
        JobState::parse(s)
    }
}

/// A job as Slurm reports it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JobInfo {
    pub state: JobState,
    /// Why it is pending (`Resources`, `Dependency`, …).
    pub reason: Option<String>,
    pub node: Option<String>,
    pub start: Option<String>,
    pub end: Option<String>,
    /// `exit:signal` (from accounting only).
    pub exit_code: Option<String>,
}

impl JobInfo {
    pub fn is_active(&self) -> bool {
        self.state.is_active()
    }
}

/// The scheduler edge: the real Slurm commands, or a fake in tests.
pub(crate) trait Scheduler {
    /// `sbatch --parsable ARGS` with `script` on stdin; the job id.
    fn submit(&self, args: &[String], script: &str) -> Result<String, SlurmError>;
    /// What Slurm knows of these jobs (unknown ids are absent). An error means Slurm could
    /// not be asked, never that the jobs are gone.
    fn query(&self, ids: &[String]) -> Result<BTreeMap<String, JobInfo>, SlurmError>;
    fn cancel(&self, ids: &[String]) -> Result<(), SlurmError>;
}

/// What went wrong talking to Slurm or recording its jobs.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SlurmError {
    #[error("`{cmd}` is not on PATH: run bench360 on a Slurm submit host (scripts/setup-slurm.sh makes this machine a one-node cluster)")]
    NotOnPath { cmd: String },
    /// A Slurm command could not be started, fed its script, or waited for.
    #[error("{what} `{cmd}`: {source}")]
    Command {
        what: &'static str,
        cmd: String,
        source: std::io::Error,
    },
    /// It ran and said no (its standard error, or output).
    #[error("{cmd} {refused}: {said}")]
    Refused {
        cmd: &'static str,
        refused: &'static str,
        said: String,
    },
    /// The sweep's Slurm folder (job records, logs) could not be written.
    #[error("cannot {what} {}: {source}", path.display())]
    Record {
        what: String,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The sweep's submission lock.
    #[error("{0}")]
    Lock(String),
    /// A step of a submission failed; what was submitted before it stays recorded.
    #[error("{step}: {source}{so_far}")]
    Step {
        step: String,
        source: Box<SlurmError>,
        so_far: String,
    },
}

/// The sweep's `slurm` block with the command line's options over it.
pub(crate) fn merge(sweep: &SlurmSettings, cli: &crate::cli::SlurmArgs) -> SlurmSettings {
    let mut s = sweep.clone();
    let pick = |cli: &Option<String>, sweep: &mut Option<String>| {
        if let Some(v) = cli {
            *sweep = Some(v.clone());
        }
    };
    pick(&cli.partition, &mut s.partition);
    pick(&cli.account, &mut s.account);
    pick(&cli.qos, &mut s.qos);
    pick(&cli.time, &mut s.time);
    pick(&cli.gres, &mut s.gres);
    pick(&cli.mem, &mut s.mem);
    if let Some(c) = cli.cpus_per_task {
        s.cpus = Some(c);
    }
    s.sbatch_args.extend(cli.sbatch_args.iter().cloned());
    s
}

/// What one job of the sweep is for: a deployment's label, or the report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct JobRecord {
    pub sweep: String,
    /// A deployment label, or `report`.
    pub what: String,
    /// The deployment's cold start key as planned when it was submitted.
    pub key: Option<String>,
    pub job_id: String,
    pub job_name: String,
    pub submitted_at: String,
    /// `pid N on HOST`.
    pub submitted_by: String,
    pub command: Vec<String>,
    pub sbatch_args: Vec<String>,
    pub log: PathBuf,
    /// Nodes of the deployment that were to run (0 for the report).
    pub nodes_to_run: usize,
    /// Jobs this one waits for (`afterany`).
    pub after: Vec<String>,
    /// Earlier jobs of the same deployment, oldest first.
    pub previous_jobs: Vec<String>,
}

/// Written by a job itself when it starts and when it ends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct JobRun {
    pub job_id: String,
    pub sweep: String,
    pub what: String,
    pub host: String,
    pub pid: u32,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub exit_code: Option<u8>,
    /// The machine fingerprint the job's deployment was keyed with.
    #[serde(default)]
    pub machine: BTreeMap<String, String>,
    /// Engine name → the artifact its pull resolved on that node (image id, binary checksum).
    #[serde(default)]
    pub artifacts: BTreeMap<String, String>,
}

/// `slurm/<sweep>/` of a cache.
#[cfg(test)]
mod tests;
