//! The sweep directory on the shared cache: job records, runs, cluster facts (see the parent module).

use super::*;

pub(crate) struct SweepDir {
    root: PathBuf,
    lock_path: PathBuf,
}

/// A sweep name as a file name: itself when plain, else made plain plus a hash (no clash).
pub(super) fn dir_name(sweep: &str) -> String {
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

pub(super) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
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

    pub(super) fn create(&self) -> Result<(), SlurmError> {
        for d in [self.root.join("logs"), self.root.join("jobs")] {
            std::fs::create_dir_all(&d).map_err(|source| SlurmError::Record {
                what: "create".into(),
                path: d.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// The sweep's submission lock, waited for (another bench360 is deciding what to submit).
    pub(super) fn lock(&self, say: &mut dyn FnMut(&str)) -> Result<store::Lock, SlurmError> {
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
            store::LockError::Held(h) => SlurmError::Lock(h),
            other => SlurmError::Lock(other.to_string()),
        })
    }

    pub(super) fn deployment_path(&self, label: &str) -> PathBuf {
        self.root.join(format!(
            "deployment-{}.json",
            &blake3::hash(label.as_bytes()).to_hex()[..16]
        ))
    }

    pub(super) fn report_path(&self) -> PathBuf {
        self.root.join("report.json")
    }

    pub fn deployment(&self, label: &str) -> Option<JobRecord> {
        read_json(&self.deployment_path(label))
    }

    pub fn report(&self) -> Option<JobRecord> {
        read_json(&self.report_path())
    }

    pub(super) fn write(&self, rec: &JobRecord) -> Result<(), SlurmError> {
        let path = if rec.what == "report" {
            self.report_path()
        } else {
            self.deployment_path(&rec.what)
        };
        store::write_atomic(
            &path,
            &serde_json::to_vec_pretty(rec).expect("serializable"),
        )
        .map_err(|source| SlurmError::Record {
            what: format!("record job {} in", rec.job_id),
            path: path.clone(),
            source,
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
        // Submission order; jobs submitted within the same stamp by their (numeric) ids, so
        // that the directory's listing order never decides.
        v.sort_by(|a, b| {
            (&a.submitted_at, a.job_id.len(), &a.job_id).cmp(&(
                &b.submitted_at,
                b.job_id.len(),
                &b.job_id,
            ))
        });
        v
    }

    pub fn log_path(&self, job_id: &str) -> PathBuf {
        self.root.join("logs").join(format!("{job_id}.out"))
    }

    pub fn write_run(&self, run: &JobRun) -> Result<(), SlurmError> {
        let path = self.root.join("jobs").join(format!("{}.json", run.job_id));
        std::fs::create_dir_all(self.root.join("jobs"))
            .and_then(|()| {
                store::write_atomic(
                    &path,
                    &serde_json::to_vec_pretty(run).expect("serializable"),
                )
            })
            .map_err(|source| SlurmError::Record {
                what: "write".into(),
                path: path.clone(),
                source,
            })
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
        let name = &e.base.value;
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
