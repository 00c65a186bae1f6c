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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub(crate) use commands::SlurmCommands;

use crate::host::{self, now_rfc3339};
use crate::plan::{Facts, NodeKind, Plan, Status};
use crate::spec::{Launch, SlurmSettings, Sweep};
use crate::store::{self, Store};

/// A job as Slurm reports it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JobInfo {
    /// `PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, `CANCELLED`, `TIMEOUT`, …
    pub state: String,
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
        is_active(&self.state)
    }
}

/// States in which a job may still run (or is running): such a job is never submitted twice.
pub(crate) fn is_active(state: &str) -> bool {
    matches!(
        state,
        "PENDING"
            | "RUNNING"
            | "CONFIGURING"
            | "COMPLETING"
            | "SUSPENDED"
            | "REQUEUED"
            | "REQUEUE_HOLD"
            | "REQUEUE_FED"
            | "RESIZING"
            | "SIGNALING"
            | "STAGE_OUT"
            | "STOPPED"
            | "RESV_DEL_HOLD"
    )
}

/// The scheduler edge: the real Slurm commands, or a fake in tests.
pub(crate) trait Scheduler {
    /// `sbatch --parsable ARGS` with `script` on stdin; the job id.
    fn submit(&self, args: &[String], script: &str) -> Result<String, String>;
    /// What Slurm knows of these jobs (unknown ids are absent). An error means Slurm could
    /// not be asked, never that the jobs are gone.
    fn query(&self, ids: &[String]) -> Result<BTreeMap<String, JobInfo>, String>;
    fn cancel(&self, ids: &[String]) -> Result<(), String>;
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
pub(crate) struct SweepDir {
    root: PathBuf,
    lock_path: PathBuf,
}

/// A sweep name as a file name: itself when plain, else made plain plus a hash (no clash).
fn dir_name(sweep: &str) -> String {
    let plain: String = sweep
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if plain == sweep && !sweep.starts_with('.') {
        plain
    } else {
        format!("{plain}-{}", &blake3::hash(sweep.as_bytes()).to_hex()[..8])
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

impl SweepDir {
    pub fn new(store: &Store, sweep: &str) -> SweepDir {
        SweepDir::at(store.root(), sweep)
    }

    /// The same directory under a cache given by path (absolute for the jobs' command lines).
    pub fn at(cache: &Path, sweep: &str) -> SweepDir {
        let name = dir_name(sweep);
        let base = cache.join("slurm");
        SweepDir {
            root: base.join(&name),
            lock_path: base.join(format!("{name}.lock")),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn create(&self) -> Result<(), String> {
        for d in [self.root.join("logs"), self.root.join("jobs")] {
            std::fs::create_dir_all(&d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        Ok(())
    }

    /// The sweep's submission lock, waited for (another bench360 is deciding what to submit).
    fn lock(&self, say: &mut dyn FnMut(&str)) -> Result<store::Lock, String> {
        self.create()?;
        store::lock_file(
            &self.lock_path,
            Some(&mut |holder: &str| {
                say(&format!(
                    "waiting for another bench360 submitting this sweep ({holder})"
                ))
            }),
        )
        .map_err(|e| match e {
            store::LockError::Held(h) => h,
            store::LockError::Io(e) => e,
        })
    }

    fn deployment_path(&self, label: &str) -> PathBuf {
        self.root.join(format!(
            "deployment-{}.json",
            &blake3::hash(label.as_bytes()).to_hex()[..16]
        ))
    }

    fn report_path(&self) -> PathBuf {
        self.root.join("report.json")
    }

    pub fn deployment(&self, label: &str) -> Option<JobRecord> {
        read_json(&self.deployment_path(label))
    }

    pub fn report(&self) -> Option<JobRecord> {
        read_json(&self.report_path())
    }

    fn write(&self, rec: &JobRecord) -> Result<(), String> {
        let path = if rec.what == "report" {
            self.report_path()
        } else {
            self.deployment_path(&rec.what)
        };
        store::write_atomic(
            &path,
            &serde_json::to_vec_pretty(rec).expect("serializable"),
        )
        .map_err(|e| {
            format!(
                "cannot record job {} in {}: {e}",
                rec.job_id,
                path.display()
            )
        })
    }

    /// Every recorded job of the sweep (deployments and report).
    pub fn records(&self) -> Vec<JobRecord> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut v: Vec<JobRecord> = entries
            .flatten()
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                !n.starts_with('.') && n.ends_with(".json")
            })
            .filter_map(|e| read_json(&e.path()))
            .collect();
        v.sort_by(|a, b| a.submitted_at.cmp(&b.submitted_at));
        v
    }

    pub fn log_path(&self, job_id: &str) -> PathBuf {
        self.root.join("logs").join(format!("{job_id}.out"))
    }

    pub fn write_run(&self, run: &JobRun) -> Result<(), String> {
        let path = self.root.join("jobs").join(format!("{}.json", run.job_id));
        std::fs::create_dir_all(self.root.join("jobs"))
            .and_then(|()| {
                store::write_atomic(
                    &path,
                    &serde_json::to_vec_pretty(run).expect("serializable"),
                )
            })
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    pub fn run(&self, job_id: &str) -> Option<JobRun> {
        read_json(&self.root.join("jobs").join(format!("{job_id}.json")))
    }

    /// Every job's own record, oldest first.
    pub fn runs(&self) -> Vec<JobRun> {
        let Ok(entries) = std::fs::read_dir(self.root.join("jobs")) else {
            return Vec::new();
        };
        let mut v: Vec<JobRun> = entries
            .flatten()
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                !n.starts_with('.') && n.ends_with(".json")
            })
            .filter_map(|e| read_json(&e.path()))
            .collect();
        v.sort_by(|a, b| a.started_at.cmp(&b.started_at));
        v
    }

    /// The facts the cluster's jobs planned with: each deployment's machine (its last job's)
    /// and each engine's artifact (the last job that resolved it). None before any job ran.
    pub fn cluster_facts(&self) -> Option<ClusterFacts> {
        let runs = self.runs();
        let newest = runs.iter().rev().find(|r| !r.machine.is_empty())?;
        let mut cf = ClusterFacts {
            machine: newest.machine.clone(),
            host: newest.host.clone(),
            machines: BTreeMap::new(),
            artifacts: BTreeMap::new(),
        };
        for r in &runs {
            if r.what != "report" && !r.machine.is_empty() {
                cf.machines.insert(r.what.clone(), r.machine.clone());
            }
            cf.artifacts
                .extend(r.artifacts.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Some(cf)
    }
}

/// What the cluster's jobs saw; see [`SweepDir::cluster_facts`].
#[derive(Debug, Clone)]
pub(crate) struct ClusterFacts {
    /// The newest job's machine: the default for deployments that have not run there yet.
    pub machine: BTreeMap<String, String>,
    pub host: String,
    pub machines: BTreeMap<String, BTreeMap<String, String>>,
    pub artifacts: BTreeMap<String, String>,
}

/// Facts for planning a sweep as the cluster runs it: the machine fingerprints its jobs
/// recorded replace this machine's. A container image lives in each node's Docker, so its
/// id is the one the jobs recorded, and one they have not resolved yet is keyed provisionally
/// (its deployment is submitted; the job keys it with the image it finds) instead of
/// blocking. A binary on the shared filesystem is checksummed here, as the jobs see it (so a
/// new build is seen at once); one this host cannot read (installed on the nodes' disks)
/// takes the jobs' checksum, or is keyed provisionally until a job has run.
pub(crate) fn cluster_view(facts: &mut Facts, sweep: &Sweep, cf: Option<&ClusterFacts>) {
    if let Some(cf) = cf {
        facts.machine = cf.machine.clone();
        facts.machines = cf.machines.clone();
    }
    for e in &sweep.engines {
        let name = &e.name.value;
        let recorded = cf.and_then(|cf| cf.artifacts.get(name));
        let local_ok = matches!(
            facts.artifacts.get(name),
            Some(Ok(a)) if !a.starts_with("image-not-pulled:")
        );
        let artifact = match (&e.launch, recorded) {
            (Launch::Docker { .. }, Some(a)) => a.clone(),
            (_, Some(a)) if !local_ok => a.clone(),
            (Launch::Docker { image, tag, .. }, None) if !local_ok => format!(
                "image-on-compute-node:{}",
                crate::engine::docker::reference(image, tag)
            ),
            // Installed on the nodes' own disks: they check it.
            (Launch::Process { binary }, None) if !local_ok => {
                format!("binary-on-compute-node:{binary}")
            }
            _ => continue,
        };
        facts.artifacts.insert(name.clone(), Ok(artifact));
    }
}

/// The job's own record of a deployment (or report) job, kept while it runs; `end` completes
/// it. Only inside a Slurm job of this sweep (`SLURM_JOB_ID` set).
pub(crate) struct InJob {
    dir: SweepDir,
    run: JobRun,
}

impl InJob {
    pub fn begin(store: &Store, plan: &Plan, deployment: Option<usize>) -> Option<InJob> {
        let job_id = std::env::var("SLURM_JOB_ID").ok()?;
        let dir = SweepDir::new(store, &plan.sweep);
        let (what, machine, artifacts) = match deployment {
            Some(d) => {
                let dep = &plan.deployments[d];
                let machine: BTreeMap<String, String> = plan.graph[dep.coldstart]
                    .inputs
                    .iter()
                    .filter_map(|(k, v)| Some((k.strip_prefix("machine.")?.to_string(), v.clone())))
                    .collect();
                let engine = plan.graph[dep.pull]
                    .label
                    .trim_start_matches("pull ")
                    .to_string();
                let mut artifacts = BTreeMap::new();
                if plan.graph[dep.pull].blocked_by.is_none() {
                    if let Some(a) = plan.graph[dep.pull].inputs.get("engine.artifact") {
                        if !a.starts_with("image-not-pulled:") {
                            artifacts.insert(engine, a.clone());
                        }
                    }
                }
                (dep.label.clone(), machine, artifacts)
            }
            None => ("report".to_string(), BTreeMap::new(), BTreeMap::new()),
        };
        let run = JobRun {
            job_id,
            sweep: plan.sweep.clone(),
            what,
            host: host::hostname(),
            pid: std::process::id(),
            started_at: now_rfc3339(),
            finished_at: None,
            exit_code: None,
            machine,
            artifacts,
        };
        if let Err(e) = dir.write_run(&run) {
            eprintln!("warning: {e}");
        }
        Some(InJob { dir, run })
    }

    pub fn end(mut self, exit_code: u8) {
        self.run.finished_at = Some(now_rfc3339());
        self.run.exit_code = Some(exit_code);
        if let Err(e) = self.dir.write_run(&self.run) {
            eprintln!("warning: {e}");
        }
    }
}

/// Everything a submission needs to know.
pub(crate) struct Submit<'a> {
    pub sweep: &'a Sweep,
    pub plan: &'a Plan,
    pub status: &'a [Status],
    pub settings: &'a SlurmSettings,
    /// This bench360 (the jobs run the same path: shared installation).
    pub exe: PathBuf,
    pub cache: PathBuf,
    pub sweep_file: PathBuf,
    pub reuse_connections: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Submitted {
    pub what: String,
    pub job_id: String,
    pub nodes: usize,
    pub after: Vec<String>,
    pub log: PathBuf,
}

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub submitted: Vec<Submitted>,
    /// Deployments with work whose job is still queued or running: (label, job id, state,
    /// whether the job was submitted for other keys, i.e. an earlier version of the sweep).
    pub kept: Vec<(String, String, String, bool)>,
    /// The report job that will run after the deployments (new or kept).
    pub report: Option<Submitted>,
    pub report_kept: Option<(String, String)>,
    /// Pending report jobs replaced by one that also waits for the new jobs.
    pub superseded: Vec<String>,
    /// Nodes that cannot run, with why.
    pub blocked: Vec<(String, String)>,
}

impl Outcome {
    /// Every job the sweep now waits on (for `--wait`): (id, what).
    pub fn jobs(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .submitted
            .iter()
            .map(|s| (s.job_id.clone(), s.what.clone()))
            .chain(self.kept.iter().map(|k| (k.1.clone(), k.0.clone())))
            .collect();
        if let Some(r) = &self.report {
            v.push((r.job_id.clone(), "report".into()));
        }
        if let Some((id, _)) = &self.report_kept {
            v.push((id.clone(), "report".into()));
        }
        v
    }
}

/// POSIX shell single quoting.
fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@,+".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Slurm expands `%` in file names (`%j` = job id): a literal one is `%%`.
fn slurm_path(p: &Path) -> String {
    p.display().to_string().replace('%', "%%")
}

fn batch_script(argv: &[String], what: &str, sweep: &str) -> String {
    let clean = |s: &str| s.replace(|c: char| c.is_control(), " ");
    format!(
        "#!/bin/sh\n# bench360: {} of sweep {}\nexec {}\n",
        clean(what),
        clean(sweep),
        argv.iter()
            .map(|a| sh_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Engines whose servers want a GPU; without `gpus` or `--gres`, their job gets none.
const GPU_ENGINES: &[&str] = &["vllm", "sglang", "tgi", "lmdeploy"];

impl Submit<'_> {
    fn common_args(&self, job_name: &str, after: &[String]) -> Vec<String> {
        let dir = SweepDir::at(&self.cache, &self.plan.sweep);
        let mut a = vec![
            format!("--job-name={job_name}"),
            format!("--output={}/%j.out", slurm_path(&dir.root().join("logs"))),
            format!(
                "--chdir={}",
                slurm_path(self.sweep_file.parent().unwrap_or(Path::new("/")))
            ),
            // The sweep's `${VAR}`s (engine and model paths) are read in the job.
            "--export=ALL".to_string(),
        ];
        let s = self.settings;
        for (flag, v) in [
            ("partition", &s.partition),
            ("account", &s.account),
            ("qos", &s.qos),
            ("time", &s.time),
            ("mem", &s.mem),
        ] {
            if let Some(v) = v {
                a.push(format!("--{flag}={v}"));
            }
        }
        if !after.is_empty() {
            a.push(format!("--dependency=afterany:{}", after.join(":")));
        }
        a
    }

    fn deployment_args(&self, d: usize, job_name: &str, after: &[String]) -> Vec<String> {
        let mut a = self.common_args(job_name, after);
        let engine = &self.sweep.engines[self.plan.deployments[d].at.engine];
        let gres = match &self.settings.gres {
            Some(g) if g == "none" => None,
            Some(g) => Some(g.clone()),
            None => engine
                .gpus
                .as_ref()
                .filter(|g| !g.is_empty())
                .map(|g| format!("gpu:{}", g.len())),
        };
        if let Some(g) = gres {
            a.push(format!("--gres={g}"));
        }
        if let Some(c) = self.settings.cpus {
            a.push(format!("--cpus-per-task={c}"));
        }
        a.extend(self.settings.sbatch_args.iter().cloned());
        a
    }

    fn report_args(&self, job_name: &str, after: &[String]) -> Vec<String> {
        let mut a = self.common_args(job_name, after);
        a.extend(self.settings.sbatch_args.iter().cloned());
        a
    }

    fn base_argv(&self) -> Vec<String> {
        vec![
            self.exe.display().to_string(),
            "--cache".into(),
            self.cache.display().to_string(),
        ]
    }

    /// Decides what must run, submits it, records it. Jobs submitted before an error stay
    /// recorded (the next apply keeps them).
    pub fn run(&self, sched: &dyn Scheduler, say: &mut dyn FnMut(&str)) -> Result<Outcome, String> {
        let plan = self.plan;
        // The cache by its absolute path: the recorded log paths are the jobs'.
        let dir = SweepDir::at(&self.cache, &plan.sweep);
        let _lock = dir.lock(say)?;
        let records = dir.records();
        let ids: Vec<String> = records.iter().map(|r| r.job_id.clone()).collect();
        let states = sched.query(&ids).map_err(|e| {
            format!("cannot ask Slurm about the sweep's jobs ({e}); nothing submitted")
        })?;
        let active = |id: &str| states.get(id).filter(|i| i.is_active());
        let sweep_tag = dir_name(&plan.sweep);
        let mut out = Outcome::default();
        // Deployments with the same key share the deployment lock: the second waits for the first.
        let mut by_key: BTreeMap<String, String> = BTreeMap::new();
        for (d, dep) in plan.deployments.iter().enumerate() {
            let nodes: Vec<_> = plan
                .deployment_nodes(d)
                .into_iter()
                .filter(|&i| plan.graph[i].kind != NodeKind::Warmup)
                .collect();
            for &i in &nodes {
                if let Status::Blocked { why } = &self.status[i.index()] {
                    out.blocked.push((plan.graph[i].label.clone(), why.clone()));
                }
            }
            let to_run = nodes
                .iter()
                .filter(|&&i| self.status[i.index()].will_run())
                .count();
            if to_run == 0 {
                continue;
            }
            let key = plan.graph[dep.coldstart].key.clone();
            let previous = dir.deployment(&dep.label);
            if let Some(p) = &previous {
                if let Some(info) = active(&p.job_id) {
                    out.kept.push((
                        dep.label.clone(),
                        p.job_id.clone(),
                        info.state.clone(),
                        p.key.as_deref() != Some(key.as_str()),
                    ));
                    continue;
                }
            }
            let after: Vec<String> = by_key.get(&key).cloned().into_iter().collect();
            let job_name = format!("b360-{sweep_tag}-{}", &key[..8]);
            let args = self.deployment_args(d, &job_name, &after);
            let mut argv = self.base_argv();
            argv.extend([
                "apply".into(),
                self.sweep_file.display().to_string(),
                "--deployment".into(),
                dep.label.clone(),
            ]);
            if self.reuse_connections {
                argv.push("--reuse-connections".into());
            }
            let script = batch_script(&argv, &format!("deployment {}", dep.label), &plan.sweep);
            let job_id = sched.submit(&args, &script).map_err(|e| {
                format!(
                    "cannot submit deployment {}: {e}{}",
                    dep.label,
                    submitted_so_far(&out)
                )
            })?;
            by_key.insert(key.clone(), job_id.clone());
            let mut previous_jobs = previous
                .map(|p| {
                    let mut v = p.previous_jobs;
                    v.push(p.job_id);
                    v
                })
                .unwrap_or_default();
            previous_jobs.dedup();
            let rec = JobRecord {
                sweep: plan.sweep.clone(),
                what: dep.label.clone(),
                key: Some(key),
                job_id: job_id.clone(),
                job_name,
                submitted_at: now_rfc3339(),
                submitted_by: format!("pid {} on {}", std::process::id(), host::hostname()),
                command: argv,
                sbatch_args: args,
                log: dir.log_path(&job_id),
                nodes_to_run: to_run,
                after: after.clone(),
                previous_jobs,
            };
            dir.write(&rec)
                .map_err(|e| format!("{e}{}", submitted_so_far(&out)))?;
            out.submitted.push(Submitted {
                what: dep.label.clone(),
                job_id,
                nodes: to_run,
                after,
                log: rec.log,
            });
        }

        // The report: after every job that may still change the cache.
        let old_report = dir.report();
        let old_active = old_report
            .as_ref()
            .and_then(|r| active(&r.job_id).map(|i| (r.job_id.clone(), i.state.clone())));
        let report_needed = self.status[plan.report.index()].will_run();
        let nothing_runnable = out.submitted.is_empty() && out.kept.is_empty();
        let submit_report = if !out.submitted.is_empty() {
            true
        } else if nothing_runnable {
            // Everything is cached (or blocked, which no job can change).
            report_needed && out.blocked.is_empty() && old_active.is_none()
        } else {
            old_active.is_none()
        };
        if !submit_report {
            out.report_kept = old_active;
            return Ok(out);
        }
        if let Some((id, state)) = &old_active {
            // A pending report job would report before the new jobs end: replace it. A running
            // one finishes; the new one reports again afterwards.
            if state == "PENDING" {
                sched
                    .cancel(std::slice::from_ref(id))
                    .map_err(|e| format!("cannot cancel the superseded report job {id}: {e}"))?;
                out.superseded.push(id.clone());
            }
        }
        let after: Vec<String> = out
            .submitted
            .iter()
            .map(|s| s.job_id.clone())
            .chain(out.kept.iter().map(|k| k.1.clone()))
            .collect();
        let job_name = format!("b360-{sweep_tag}-report");
        let args = self.report_args(&job_name, &after);
        let mut argv = self.base_argv();
        argv.extend(["report".into(), self.sweep_file.display().to_string()]);
        let script = batch_script(&argv, "report", &plan.sweep);
        let job_id = sched.submit(&args, &script).map_err(|e| {
            format!(
                "cannot submit the report job: {e}{}",
                submitted_so_far(&out)
            )
        })?;
        let mut previous_jobs = old_report
            .map(|p| {
                let mut v = p.previous_jobs;
                v.push(p.job_id);
                v
            })
            .unwrap_or_default();
        previous_jobs.dedup();
        let rec = JobRecord {
            sweep: plan.sweep.clone(),
            what: "report".into(),
            key: Some(plan.graph[plan.report].key.clone()),
            job_id: job_id.clone(),
            job_name,
            submitted_at: now_rfc3339(),
            submitted_by: format!("pid {} on {}", std::process::id(), host::hostname()),
            command: argv,
            sbatch_args: args,
            log: dir.log_path(&job_id),
            nodes_to_run: 0,
            after: after.clone(),
            previous_jobs,
        };
        dir.write(&rec)?;
        out.report = Some(Submitted {
            what: "report".into(),
            job_id,
            nodes: 0,
            after,
            log: rec.log,
        });
        Ok(out)
    }
}

fn submitted_so_far(out: &Outcome) -> String {
    if out.submitted.is_empty() {
        String::new()
    } else {
        format!(
            " (submitted before this: {}; they are recorded)",
            out.submitted
                .iter()
                .map(|s| format!("job {} for {}", s.job_id, s.what))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// A warning for deployments of GPU engines that get no GPU.
pub(crate) fn gpu_warnings(sweep: &Sweep, plan: &Plan, settings: &SlurmSettings) -> Vec<String> {
    if settings.gres.is_some() {
        return Vec::new();
    }
    plan.deployments
        .iter()
        .filter(|d| {
            let e = &sweep.engines[d.at.engine];
            e.gpus.is_none() && GPU_ENGINES.contains(&e.kind.value.as_str())
                && !matches!(e.launch, Launch::Endpoint { .. })
        })
        .map(|d| {
            format!(
                "deployment {} ({} engine) declares no `gpus` and no --gres is given: its job gets no GPU",
                d.label, sweep.engines[d.at.engine].kind.value
            )
        })
        .collect()
}

/// Polls until none of `jobs` is queued or running; says each change of state. Returns the
/// last known state of each.
pub(crate) fn wait(
    sched: &dyn Scheduler,
    jobs: &[(String, String)],
    poll: std::time::Duration,
    say: &mut dyn FnMut(&str),
) -> BTreeMap<String, JobInfo> {
    let ids: Vec<String> = jobs.iter().map(|j| j.0.clone()).collect();
    let mut last: BTreeMap<String, JobInfo> = BTreeMap::new();
    let mut failures = 0;
    loop {
        match sched.query(&ids) {
            Ok(now) => {
                failures = 0;
                for (id, what) in jobs {
                    let Some(info) = now.get(id) else { continue };
                    if last.get(id).map(|l| &l.state) != Some(&info.state) {
                        say(&format!("job {id} ({what}): {}", describe(info)));
                    }
                    last.insert(id.clone(), info.clone());
                }
                // A job Slurm no longer knows at all has left the queue too.
                if !ids
                    .iter()
                    .any(|id| now.get(id).is_some_and(JobInfo::is_active))
                {
                    return last;
                }
            }
            Err(e) => {
                failures += 1;
                // slurmctld restarts and failovers answer nothing for a while: keep waiting.
                if failures == 1 || failures % 30 == 0 {
                    say(&format!("cannot ask Slurm ({e}); still waiting"));
                }
            }
        }
        std::thread::sleep(poll);
    }
}

/// `RUNNING on node01 since …`, `PENDING (Resources)`, `FAILED (exit 1:0)`.
pub(crate) fn describe(info: &JobInfo) -> String {
    let mut s = info.state.clone();
    match info.state.as_str() {
        "PENDING" => {
            if let Some(r) = &info.reason {
                s.push_str(&format!(" ({r})"));
            }
        }
        "RUNNING" | "COMPLETING" | "CONFIGURING" => {
            if let Some(n) = &info.node {
                s.push_str(&format!(" on {n}"));
            }
            if let Some(t) = &info.start {
                s.push_str(&format!(" since {t}"));
            }
        }
        _ => {
            if let Some(x) = info.exit_code.as_ref().filter(|x| *x != "0:0") {
                s.push_str(&format!(" (exit {x})"));
            } else if let Some(r) = &info.reason {
                // squeue's reason for an ended job: NonZeroExitCode, TimeLimit, OutOfMemory…
                s.push_str(&format!(" ({r})"));
            }
        }
    }
    s
}

/// Cancels the sweep's recorded jobs that are queued or running: (id, what, state before).
pub(crate) fn cancel(
    store: &Store,
    sweep: &str,
    sched: &dyn Scheduler,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<(String, String, String)>, String> {
    let dir = SweepDir::new(store, sweep);
    if !dir.root().is_dir() {
        return Ok(Vec::new());
    }
    let _lock = dir.lock(say)?;
    let records = dir.records();
    let ids: Vec<String> = records.iter().map(|r| r.job_id.clone()).collect();
    let states = sched.query(&ids)?;
    let live: Vec<(String, String, String)> = records
        .iter()
        .filter_map(|r| {
            let info = states.get(&r.job_id).filter(|i| i.is_active())?;
            Some((r.job_id.clone(), r.what.clone(), info.state.clone()))
        })
        .collect();
    let ids: Vec<String> = live.iter().map(|l| l.0.clone()).collect();
    sched.cancel(&ids)?;
    Ok(live)
}

/// Per deployment: label, key, cache state, Slurm state; then the report. For `status SWEEP`.
pub(crate) fn status_table(
    store: &Store,
    plan: &Plan,
    status: &[Status],
    sched: &dyn Scheduler,
) -> String {
    let dir = SweepDir::new(store, &plan.sweep);
    let records = dir.records();
    let ids: Vec<String> = records.iter().map(|r| r.job_id.clone()).collect();
    let (states, slurm_error) = match sched.query(&ids) {
        Ok(s) => (s, None),
        Err(e) => (BTreeMap::new(), Some(e)),
    };
    let job = |rec: Option<JobRecord>| -> String {
        let Some(r) = rec else {
            return "no job".into();
        };
        let mut s = format!("job {} ", r.job_id);
        match states.get(&r.job_id) {
            Some(info) => {
                s.push_str(&describe(info));
                if !info.is_active() && info.state != "COMPLETED" && r.log.exists() {
                    s.push_str(&format!(": log {}", r.log.display()));
                }
            }
            None if slurm_error.is_some() => s.push_str("(Slurm not reachable)"),
            None => {
                // Slurm forgot it; its own record may say how it ended.
                match dir.run(&r.job_id) {
                    Some(run) => s.push_str(&match run.exit_code {
                        Some(0) => "ended (exit 0)".to_string(),
                        Some(c) => format!("ended (exit {c}): log {}", r.log.display()),
                        None => format!("ended without finishing: log {}", r.log.display()),
                    }),
                    None => s.push_str("unknown to Slurm"),
                }
            }
        }
        s
    };
    let mut rows: Vec<[String; 4]> = vec![[
        "deployment".into(),
        "key".into(),
        "cache".into(),
        "slurm".into(),
    ]];
    for (d, dep) in plan.deployments.iter().enumerate() {
        let nodes: Vec<_> = plan
            .deployment_nodes(d)
            .into_iter()
            .filter(|&i| plan.graph[i].kind != NodeKind::Warmup)
            .collect();
        let (mut cached, mut to_run, mut blocked, mut failed, mut interrupted) = (0, 0, 0, 0, 0);
        for &i in &nodes {
            match &status[i.index()] {
                Status::Cached => cached += 1,
                Status::Blocked { .. } => blocked += 1,
                Status::WillRun { why } => {
                    to_run += 1;
                    if why.starts_with("failed last time") {
                        failed += 1;
                    } else if why.starts_with("interrupted") {
                        interrupted += 1;
                    }
                }
                Status::Skipped => {}
            }
        }
        let record = dir.deployment(&dep.label);
        // A `started` record of a deployment whose job runs is in progress, not interrupted.
        let running = record
            .as_ref()
            .and_then(|r| states.get(&r.job_id))
            .is_some_and(|i| i.state == "RUNNING");
        let mut cache = format!("{cached}/{} cached", nodes.len());
        if to_run > 0 {
            let mut why = Vec::new();
            if failed > 0 {
                why.push(format!("{failed} failed"));
            }
            if interrupted > 0 {
                why.push(format!(
                    "{interrupted} {}",
                    if running { "running" } else { "interrupted" }
                ));
            }
            cache.push_str(&format!(", {to_run} to run"));
            if !why.is_empty() {
                cache.push_str(&format!(" ({})", why.join(", ")));
            }
        }
        if blocked > 0 {
            cache.push_str(&format!(", {blocked} blocked"));
        }
        rows.push([
            dep.label.clone(),
            plan.graph[dep.coldstart].key[..12].to_string(),
            cache,
            job(record),
        ]);
    }
    rows.push([
        "report".into(),
        plan.graph[plan.report].key[..12].to_string(),
        match &status[plan.report.index()] {
            Status::Cached => "cached".into(),
            _ => "to run".into(),
        },
        job(dir.report()),
    ]);
    let w: Vec<usize> = (0..3)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let line = if records.is_empty() {
            // Never submitted to Slurm: the cache side only.
            format!(
                "{:<w0$}  {:<w1$}  {}",
                r[0],
                r[1],
                r[2],
                w0 = w[0],
                w1 = w[1]
            )
        } else {
            format!(
                "{:<w0$}  {:<w1$}  {:<w2$}  {}",
                r[0],
                r[1],
                r[2],
                r[3],
                w0 = w[0],
                w1 = w[1],
                w2 = w[2]
            )
        };
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if let Some(e) = slurm_error {
        out.push_str(&format!("(cannot ask Slurm: {e})\n"));
    }
    out
}

#[cfg(test)]
mod tests;
