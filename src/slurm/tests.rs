//! The submission logic against a fake Slurm (the real one is exercised by tests/slurm.rs).

use std::cell::RefCell;
use std::path::Path;

use super::*;
use crate::store::{Record, RecordStatus};

#[derive(Default)]
struct Fake {
    next: RefCell<u32>,
    /// id → state.
    jobs: RefCell<BTreeMap<String, String>>,
    /// (sbatch args, script) of each submission.
    submitted: RefCell<Vec<(Vec<String>, String)>>,
    cancelled: RefCell<Vec<String>>,
    down: bool,
}

impl Fake {
    fn set(&self, id: &str, state: &str) {
        self.jobs.borrow_mut().insert(id.into(), state.into());
    }
}

impl Scheduler for Fake {
    fn submit(&self, args: &[String], script: &str) -> Result<String, SlurmError> {
        if args.iter().any(|a| a == "--partition=nope") {
            return Err(SlurmError::Refused {
                cmd: "sbatch",
                refused: "refused the job",
                said: "sbatch: error: invalid partition specified: nope".into(),
            });
        }
        *self.next.borrow_mut() += 1;
        let id = (100 + *self.next.borrow()).to_string();
        let state = if args.iter().any(|a| a.starts_with("--dependency")) {
            "PENDING"
        } else {
            "RUNNING"
        };
        self.set(&id, state);
        self.submitted
            .borrow_mut()
            .push((args.to_vec(), script.to_string()));
        Ok(id)
    }

    fn query(&self, ids: &[String]) -> Result<BTreeMap<String, JobInfo>, SlurmError> {
        if self.down {
            return Err(SlurmError::Refused {
                cmd: "squeue",
                refused: "failed",
                said: "slurm_load_jobs error: Unable to contact slurm controller".into(),
            });
        }
        Ok(ids
            .iter()
            .filter_map(|id| {
                let state = self.jobs.borrow().get(id)?.clone();
                Some((
                    id.clone(),
                    JobInfo {
                        state: state.as_str().into(),
                        ..Default::default()
                    },
                ))
            })
            .collect())
    }

    fn cancel(&self, ids: &[String]) -> Result<(), SlurmError> {
        for id in ids {
            self.set(id, "CANCELLED");
            self.cancelled.borrow_mut().push(id.clone());
        }
        Ok(())
    }
}

const SWEEP: &str = r#"
sweep "two" { seed 1; }
model "m" { path "/w/m.gguf"; quantization "q4_1"; }
engine "cpu" { kind "llama.cpp"; binary "/bin/llama-server"; parallel 2; }
engine "gpu" { kind "llama.cpp"; binary "/bin/llama-server"; parallel 4; gpus 0 1; }
task "mmlu" { kind "mmlu"; dataset "/d/mmlu"; samples 4; }
scenario "one" { kind "single"; requests 2; }
slurm { partition "batch"; time "00:30:00"; sbatch-args "--constraint=x"; }
"#;

struct World {
    _dir: tempfile::TempDir,
    store: Store,
    sweep: Sweep,
    plan: Plan,
}

fn world(text: &str) -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("cache")).unwrap();
    let sweep = crate::sweep::parse(
        "two.kdl",
        text,
        Path::new("/sweeps"),
        &|_| None,
        &Default::default(),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let mut facts = Facts::default();
    facts.machine.insert("cpu".into(), "test".into());
    for p in crate::plan::required_files(&sweep) {
        facts.files.insert(p, Ok("h".into()));
    }
    for e in &sweep.engines {
        facts
            .artifacts
            .insert(e.name.value.clone(), Ok("binary:abc".into()));
    }
    let plan = crate::plan::build(&sweep, &facts).unwrap();
    World {
        _dir: dir,
        store,
        sweep,
        plan,
    }
}

fn submit(w: &World, sched: &Fake, cli: &crate::cli::SlurmArgs) -> Result<Outcome, String> {
    let status = crate::plan::statuses(&w.plan, &w.store);
    let settings = merge(&w.sweep.slurm, cli);
    Submit {
        sweep: &w.sweep,
        plan: &w.plan,
        status: &status,
        settings: &settings,
        exe: "/opt/bench360/bin/bench360".into(),
        cache: w.store.root().to_path_buf(),
        sweep_file: "/shared/sweeps/two.kdl".into(),
        overrides: &crate::sweep::Overrides::default(),
    }
    .run(sched, &mut |_| {})
    .map_err(|e| e.to_string())
}

/// Records every node of deployment `d` as finished (what its job would have done).
fn finish_deployment(w: &World, d: usize) {
    for i in w.plan.deployment_nodes(d) {
        let n = &w.plan.graph[i];
        if n.kind == NodeKind::Warmup {
            continue;
        }
        w.store
            .write_record(&Record {
                format: store::STORE_FORMAT,
                key: n.key.clone(),
                kind: n.kind.as_str().into(),
                label: n.label.clone(),
                sweep: w.plan.sweep.clone(),
                status: RecordStatus::Finished,
                host: "node1".into(),
                pid: 1,
                started_at: now_rfc3339(),
                finished_at: None,
                duration_s: None,
                cause: None,
                inputs: n.inputs.clone(),
                outputs: serde_json::Value::Null,
                objects: Default::default(),
            })
            .unwrap();
    }
}

#[test]
fn each_deployment_becomes_a_job_and_the_report_waits_for_all() {
    let w = world(SWEEP);
    let sched = Fake::default();
    let out = submit(&w, &sched, &Default::default()).unwrap();
    let ids: Vec<&str> = out.submitted.iter().map(|s| s.job_id.as_str()).collect();
    assert_eq!(ids, ["101", "102"]);
    assert_eq!(out.submitted[0].what, "m:q4_1@cpu");
    // pull, cold start, run, score.
    assert_eq!(out.submitted[0].nodes, 4);
    let report = out.report.as_ref().unwrap();
    assert_eq!(report.after, ["101", "102"]);
    let subs = sched.submitted.borrow();
    let (args, script) = &subs[0];
    let key = &w.plan.graph[w.plan.deployments[0].coldstart].key;
    for want in [
        format!("--job-name=b360-two-{}", &key[..8]),
        format!(
            "--output={}/slurm/two/logs/%j.out",
            w.store.root().display()
        ),
        "--chdir=/shared/sweeps".to_string(),
        "--export=ALL".to_string(),
        "--partition=batch".to_string(),
        "--time=00:30:00".to_string(),
        "--constraint=x".to_string(),
    ] {
        assert!(args.contains(&want), "{want} not in {args:?}");
    }
    // No GPUs declared: none asked for; the engine with `gpus 0 1` gets two.
    assert!(!args.iter().any(|a| a.starts_with("--gres")), "{args:?}");
    assert!(
        subs[1].0.contains(&"--gres=gpu:2".to_string()),
        "{:?}",
        subs[1].0
    );
    assert!(
        script.ends_with(&format!(
            "exec /opt/bench360/bin/bench360 --cache {} apply /shared/sweeps/two.kdl --deployment m:q4_1@cpu\n",
            w.store.root().display()
        )),
        "{script}"
    );
    // The script marks the job as one of the sweep's: a shell in `salloc` is not.
    assert!(
        script.contains("\nBENCH360_SLURM_JOB=\"$SLURM_JOB_ID\"\nexport BENCH360_SLURM_JOB\nexec "),
        "{script}"
    );
    let (rargs, rscript) = &subs[2];
    assert!(rargs.contains(&"--dependency=afterany:101:102".to_string()));
    assert!(rargs.contains(&"--job-name=b360-two-report".to_string()));
    assert!(!rargs.iter().any(|a| a.starts_with("--gres")));
    assert!(
        rscript.contains(" report /shared/sweeps/two.kdl"),
        "{rscript}"
    );
    // Recorded, by deployment.
    let dir = SweepDir::new(&w.store, "two");
    let rec = dir.deployment("m:q4_1@gpu").unwrap();
    assert_eq!(rec.job_id, "102");
    assert_eq!(
        rec.key.as_deref(),
        Some(w.plan.graph[w.plan.deployments[1].coldstart].key.as_str())
    );
    assert_eq!(dir.report().unwrap().after, ["101", "102"]);
    assert_eq!(dir.records().len(), 3);
}

#[test]
fn a_second_submission_while_jobs_are_queued_or_running_submits_nothing() {
    let w = world(SWEEP);
    let sched = Fake::default();
    submit(&w, &sched, &Default::default()).unwrap();
    sched.set("101", "COMPLETING");
    let out = submit(&w, &sched, &Default::default()).unwrap();
    assert!(out.submitted.is_empty() && out.report.is_none(), "{out:?}");
    assert_eq!(out.kept.len(), 2);
    assert_eq!(out.report_kept, Some(("103".into(), "PENDING".into())));
    assert_eq!(sched.submitted.borrow().len(), 3);
    assert_eq!(out.jobs().len(), 3);
}

#[test]
fn after_a_cancellation_only_the_unfinished_deployment_is_resubmitted() {
    let w = world(SWEEP);
    let sched = Fake::default();
    submit(&w, &sched, &Default::default()).unwrap();
    // 101 was cancelled mid-run; 102 finished everything; the report job ran (afterany).
    sched.set("101", "CANCELLED");
    sched.set("102", "COMPLETED");
    sched.set("103", "COMPLETED");
    finish_deployment(&w, 1);
    let out = submit(&w, &sched, &Default::default()).unwrap();
    let what: Vec<&str> = out.submitted.iter().map(|s| s.what.as_str()).collect();
    assert_eq!(what, ["m:q4_1@cpu"]);
    assert_eq!(out.report.as_ref().unwrap().after, ["104"]);
    let dir = SweepDir::new(&w.store, "two");
    assert_eq!(dir.deployment("m:q4_1@cpu").unwrap().previous_jobs, ["101"]);
    assert_eq!(dir.report().unwrap().previous_jobs, ["103"]);
    // Everything done: nothing more.
    sched.set("104", "COMPLETED");
    sched.set("105", "COMPLETED");
    finish_deployment(&w, 0);
    let report = &w.plan.graph[w.plan.report];
    w.store
        .write_record(&Record {
            format: store::STORE_FORMAT,
            key: report.key.clone(),
            kind: "report".into(),
            label: report.label.clone(),
            sweep: "two".into(),
            status: RecordStatus::Finished,
            host: "node1".into(),
            pid: 1,
            started_at: now_rfc3339(),
            finished_at: None,
            duration_s: None,
            cause: None,
            inputs: report.inputs.clone(),
            outputs: serde_json::Value::Null,
            objects: Default::default(),
        })
        .unwrap();
    let out = submit(&w, &sched, &Default::default()).unwrap();
    assert!(out.jobs().is_empty(), "{out:?}");
}

#[test]
fn a_pending_report_job_is_replaced_when_new_jobs_are_submitted() {
    let w = world(SWEEP);
    let sched = Fake::default();
    submit(&w, &sched, &Default::default()).unwrap();
    // 101 failed early; 102 still runs; the report (103) still waits.
    sched.set("101", "FAILED");
    let out = submit(&w, &sched, &Default::default()).unwrap();
    assert_eq!(out.submitted.len(), 1);
    assert_eq!(out.kept.len(), 1);
    assert_eq!(out.superseded, ["103"]);
    assert_eq!(*sched.cancelled.borrow(), ["103"]);
    let mut after = out.report.unwrap().after;
    after.sort();
    assert_eq!(after, ["102", "104"]);
}

#[test]
fn nothing_is_submitted_when_slurm_cannot_be_asked() {
    let w = world(SWEEP);
    let sched = Fake {
        down: true,
        ..Default::default()
    };
    let err = submit(&w, &sched, &Default::default()).unwrap_err();
    assert!(err.contains("nothing submitted"), "{err}");
    assert!(sched.submitted.borrow().is_empty());
}

#[test]
fn a_refused_job_keeps_what_was_submitted_before_it() {
    let w = world(SWEEP);
    let sched = Fake::default();
    let cli = crate::cli::SlurmArgs {
        partition: Some("nope".into()),
        ..Default::default()
    };
    let err = submit(&w, &sched, &cli).unwrap_err();
    assert!(err.contains("invalid partition"), "{err}");
    assert!(sched.submitted.borrow().is_empty());
}

#[test]
fn command_line_options_override_the_sweep_and_stay_out_of_keys() {
    let w = world(SWEEP);
    let cli = crate::cli::SlurmArgs {
        partition: Some("gpu".into()),
        gres: Some("none".into()),
        cpus_per_task: Some(3),
        mem: Some("8G".into()),
        sbatch_args: vec!["--exclusive".into()],
        ..Default::default()
    };
    let sched = Fake::default();
    submit(&w, &sched, &cli).unwrap();
    let subs = sched.submitted.borrow();
    let args = &subs[1].0;
    for want in [
        "--partition=gpu",
        "--time=00:30:00",
        "--cpus-per-task=3",
        "--mem=8G",
        "--constraint=x",
        "--exclusive",
    ] {
        assert!(args.contains(&want.to_string()), "{want} not in {args:?}");
    }
    assert!(!args.iter().any(|a| a.starts_with("--gres")), "{args:?}");
    assert!(!args.contains(&"--partition=batch".to_string()));
}

#[test]
fn deployments_with_the_same_key_run_one_after_the_other() {
    // Two engine blocks that differ only in name are one deployment key (one lock).
    let text = SWEEP.replace("parallel 4; gpus 0 1;", "parallel 2;");
    let w = world(&text);
    let sched = Fake::default();
    let out = submit(&w, &sched, &Default::default()).unwrap();
    assert_eq!(out.submitted[1].after, [out.submitted[0].job_id.clone()]);
}

#[test]
fn status_shows_the_cache_next_to_each_job() {
    let w = world(SWEEP);
    let sched = Fake::default();
    submit(&w, &sched, &Default::default()).unwrap();
    sched.set("101", "CANCELLED");
    // Slurm wrote 101's log; the report job (cancelled before it ran) has none.
    let dir = SweepDir::new(&w.store, "two");
    std::fs::write(dir.log_path("101"), "✓ pull cpu (0.0 s)\n").unwrap();
    finish_deployment(&w, 1);
    let st = crate::plan::statuses(&w.plan, &w.store);
    let table = status_table(&w.store, &w.plan, &st, &sched);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("deployment"), "{table}");
    // Its pull is shared with the other deployment's (same binary), which finished it.
    assert!(
        lines[1].starts_with("m:q4_1@cpu") && lines[1].contains("1/4 cached, 3 to run"),
        "{table}"
    );
    assert!(
        lines[1].contains("job 101 CANCELLED: log /") && lines[1].ends_with("logs/101.out"),
        "{table}"
    );
    assert!(
        lines[2].contains("4/4 cached") && lines[2].contains("job 102 RUNNING"),
        "{table}"
    );
    assert!(
        lines[3].starts_with("report") && lines[3].contains("job 103 PENDING"),
        "{table}"
    );
}

#[test]
fn cancel_stops_only_live_jobs() {
    let w = world(SWEEP);
    let sched = Fake::default();
    submit(&w, &sched, &Default::default()).unwrap();
    sched.set("102", "COMPLETED");
    let done = cancel(&w.store, "two", &sched, &mut |_| {}).unwrap();
    let ids: Vec<&str> = done.iter().map(|d| d.0.as_str()).collect();
    assert_eq!(ids, ["101", "103"]);
    assert_eq!(done[1].1, "report");
    assert!(cancel(&w.store, "two", &sched, &mut |_| {})
        .unwrap()
        .is_empty());
}

#[test]
fn the_cluster_view_uses_what_the_jobs_recorded() {
    let w = world(&SWEEP.replace(
        "engine \"gpu\" { kind \"llama.cpp\"; binary \"/bin/llama-server\"; parallel 4; gpus 0 1; }",
        "engine \"gpu\" { kind \"llama.cpp\"; launcher \"docker\"; image \"ghcr.io/x/llama\"; tag \"t\"; gpus 0; }",
    ));
    let dir = SweepDir::new(&w.store, "two");
    assert!(dir.cluster_facts().is_none());
    let mut facts = Facts::default();
    facts
        .artifacts
        .insert("gpu".into(), Err("cannot connect to Docker".into()));
    facts.artifacts.insert(
        "cpu".into(),
        Err("engine binary /bin/llama-server does not exist".into()),
    );
    cluster_view(&mut facts, &w.sweep, None);
    assert_eq!(
        facts.artifacts["gpu"],
        Ok("image-on-compute-node:ghcr.io/x/llama:t".to_string())
    );
    assert_eq!(
        facts.artifacts["cpu"],
        Ok("binary-on-compute-node:/bin/llama-server".to_string())
    );
    let mut machine = BTreeMap::new();
    machine.insert("gpu".to_string(), "NVIDIA H100".to_string());
    dir.write_run(&JobRun {
        job_id: "7".into(),
        sweep: "two".into(),
        what: "m:q4_1@gpu".into(),
        host: "gpu-node-3".into(),
        pid: 9,
        started_at: now_rfc3339(),
        finished_at: None,
        exit_code: None,
        machine: machine.clone(),
        artifacts: [("gpu".to_string(), "image:sha256:abc".to_string())].into(),
    })
    .unwrap();
    dir.write_run(&JobRun {
        job_id: "8".into(),
        sweep: "two".into(),
        what: "m:q4_1@cpu".into(),
        host: "gpu-node-4".into(),
        pid: 9,
        started_at: now_rfc3339(),
        finished_at: None,
        exit_code: None,
        machine: machine.clone(),
        artifacts: [("cpu".to_string(), "binary:old-build".to_string())].into(),
    })
    .unwrap();
    let cf = dir.cluster_facts().unwrap();
    assert_eq!(cf.host, "gpu-node-4");
    let mut facts = Facts::default();
    facts
        .artifacts
        .insert("cpu".into(), Ok("binary:new-build".into()));
    cluster_view(&mut facts, &w.sweep, Some(&cf));
    assert_eq!(facts.machine, machine);
    assert_eq!(facts.machines["m:q4_1@gpu"], machine);
    assert_eq!(facts.artifacts["gpu"], Ok("image:sha256:abc".to_string()));
    // A binary this host reads is checksummed here (a new build shows at once)...
    assert_eq!(facts.artifacts["cpu"], Ok("binary:new-build".to_string()));
    // ...one only the nodes have takes the jobs' checksum.
    let mut facts = Facts::default();
    facts.artifacts.insert(
        "cpu".into(),
        Err("engine binary /bin/llama-server does not exist".into()),
    );
    cluster_view(&mut facts, &w.sweep, Some(&cf));
    assert_eq!(facts.artifacts["cpu"], Ok("binary:old-build".to_string()));
}

#[test]
fn odd_sweep_names_make_plain_directories() {
    assert_eq!(dir_name("quickstart"), "quickstart");
    let odd = dir_name("my sweep %j");
    assert!(
        odd.starts_with("my_sweep__j-") && odd.len() == "my_sweep__j-".len() + 8,
        "{odd}"
    );
    assert_ne!(dir_name("a b"), dir_name("a_b"));
    assert_eq!(sh_quote("it's"), r"'it'\''s'");
    assert_eq!(sh_quote("m:q4_1@cpu"), "m:q4_1@cpu");
    assert_eq!(sh_quote("a b"), "'a b'");
    assert_eq!(slurm_path(Path::new("/c/100%/x")), "/c/100%%/x");
}
