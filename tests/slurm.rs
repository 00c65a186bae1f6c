//! The Slurm executor on a real Slurm (the one-node cluster of scripts/setup-slurm.sh: four
//! GPUs declared by count, four jobs per core) with the real llama-server: a two-deployment
//! sweep end to end, a cancelled job and its resubmission, two submitters at once. The jobs
//! run `bench360` from target/ against each test's cache, as compute nodes would against a
//! shared one.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;

/// A second llama-server configuration (more slots): a second deployment.
const SECOND: &str = r#"engine "llama4" {
    kind "llama.cpp"
    binary "__SERVER__"
    parallel 4
    ctx-size 512
    args "--threads" "1"
    startup-timeout 60
}
telemetry {
    idle 0.3
    metrics-interval 0.1
}"#;

/// Fails (never skips) without a cluster, saying how to get one.
fn slurm() {
    let how = "run scripts/setup-slurm.sh as root first (scripts/test.sh does): it starts a one-node Slurm cluster here";
    let _ = setting("slurm.env", "BENCH360_SLURM", "scripts/setup-slurm.sh");
    match Command::new("sinfo").args(["-h", "-o", "%t"]).output() {
        Err(e) => panic!("`sinfo` cannot run ({e}): these tests need Slurm; {how}"),
        Ok(o) if !o.status.success() => panic!(
            "`sinfo` failed ({}): the Slurm cluster is not running; {how}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Ok(o) => {
            let state = String::from_utf8_lossy(&o.stdout);
            assert!(
                state
                    .lines()
                    // Up and taking jobs: free, partly or wholly allocated, reserved by the
                    // scheduler for a pending job (`plnd`, seen between two tests' jobs), or
                    // finishing one (`comp`).
                    .any(|s| matches!(s.trim(), "idle" | "mix" | "alloc" | "plnd" | "comp")),
                "the Slurm node is `{}`, not up; {how}",
                state.trim()
            );
        }
    }
}

fn two_deployments(
    name: &str,
    scenarios: &str,
) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let e = engine();
    let second = SECOND.replace("__SERVER__", &e.server.display().to_string());
    setup(name, &second, scenarios, "")
}

/// `apply --executor slurm` with job options that let both deployment jobs run at once here.
fn submit(cache: &Path, sweep: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "apply",
        sweep.to_str().unwrap(),
        "--executor",
        "slurm",
        "--mem",
        "1G",
        "--gres",
        "gpu:1",
        "--time",
        "10:00",
    ];
    args.extend(extra);
    bench(cache, &args)
}

/// `submitted job ID for deployment LABEL …` and `… for the report` lines: what → id.
fn submitted(o: &Output) -> BTreeMap<String, String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("submitted job ")?;
            let (id, what) = rest.split_once(" for ")?;
            let what = match what.strip_prefix("deployment ") {
                Some(d) => d.split(" (").next().unwrap().to_string(),
                None => "report".to_string(),
            };
            Some((what, id.to_string()))
        })
        .collect()
}

fn job_state(id: &str) -> String {
    let o = Command::new("squeue")
        .args(["-h", "-t", "all", "-j", id, "-o", "%T"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn wait_until_gone(ids: &[&String], timeout: Duration) {
    let t = Instant::now();
    while ids.iter().any(|id| {
        matches!(
            job_state(id).as_str(),
            "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING"
        )
    }) {
        assert!(
            t.elapsed() < timeout,
            "jobs {ids:?} still queued after {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The jobs' own records (`slurm/<sweep>/jobs/<id>.json`), by job id.
fn job_runs(cache: &Path, sweep: &str) -> BTreeMap<String, serde_json::Value> {
    std::fs::read_dir(cache.join("slurm").join(sweep).join("jobs"))
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap();
            (v["job_id"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

fn log_of(cache: &Path, sweep: &str, id: &str) -> String {
    std::fs::read_to_string(
        cache
            .join("slurm")
            .join(sweep)
            .join("logs")
            .join(format!("{id}.out")),
    )
    .unwrap_or_default()
}

/// Labels of the nodes a job ran (its log's "✓ label (…)" lines).
fn ran_in_log(log: &str) -> BTreeSet<String> {
    log.lines()
        .filter_map(|l| l.strip_prefix("✓ "))
        .map(|l| l.rsplit_once(" (").map(|(a, _)| a).unwrap_or(l).to_string())
        .collect()
}

#[test]
fn a_two_deployment_sweep_runs_as_concurrent_jobs_then_the_report() {
    slurm();
    let (_dir, cache, sweep) = two_deployments("sl-two", SCENARIOS);
    let first = submit(&cache, &sweep, &["--wait"]);
    let out = text(&first);
    assert!(first.status.success(), "{out}");
    let jobs = submitted(&first);
    assert_eq!(
        jobs.keys().collect::<Vec<_>>(),
        ["report", "smollm2:q4_1@llama", "smollm2:q4_1@llama4"],
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "for the report (after job {}, {}, whatever their outcome)",
            jobs["smollm2:q4_1@llama"], jobs["smollm2:q4_1@llama4"]
        )),
        "{out}"
    );
    // --wait ends like a local apply: the report table, every node cached.
    assert!(out.contains("smollm2:q4_1@llama4 mmlu server"), "{out}");
    assert!(out.contains("0 failed, 0 blocked, 0 not done"), "{out}");
    let report = std::fs::read_to_string(cache.join("reports/sl-two/report.md")).unwrap();
    assert!(
        report.matches("| smollm2:q4_1@llama4 mmlu ").count() >= 3,
        "{report}"
    );
    for r in records(&cache) {
        assert_eq!(r["status"], "finished", "{r}");
    }
    // Each job says when it ran: the two deployments at the same time, the report after both.
    let runs = job_runs(&cache, "sl-two");
    let span = |what: &str| {
        let r = &runs[&jobs[what]];
        assert_eq!(r["exit_code"], 0, "{r}");
        assert_eq!(r["what"], what);
        (
            r["started_at"].as_str().unwrap().to_string(),
            r["finished_at"].as_str().unwrap().to_string(),
        )
    };
    let (a, b, rep) = (
        span("smollm2:q4_1@llama"),
        span("smollm2:q4_1@llama4"),
        span("report"),
    );
    assert!(
        a.0 < b.1 && b.0 < a.1,
        "deployment jobs did not overlap: {a:?} {b:?}"
    );
    assert!(
        rep.0 > a.1 && rep.0 > b.1,
        "report {rep:?} before {a:?} {b:?}"
    );
    // The job options reached Slurm, and the jobs wrote where they were told.
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::fs::read_dir(cache.join("slurm/sl-two"))
                .unwrap()
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with("deployment-"))
                .unwrap()
                .path(),
        )
        .unwrap(),
    )
    .unwrap();
    let args: Vec<&str> = rec["sbatch_args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for want in ["--gres=gpu:1", "--mem=1G", "--time=10:00", "--export=ALL"] {
        assert!(args.contains(&want), "{args:?}");
    }
    let log = log_of(&cache, "sl-two", &jobs["smollm2:q4_1@llama4"]);
    assert!(
        log.contains("✓ run smollm2:q4_1@llama4 mmlu server"),
        "{log}"
    );

    // Nothing changed: nothing is submitted.
    let second = submit(&cache, &sweep, &[]);
    assert!(second.status.success(), "{}", text(&second));
    assert!(submitted(&second).is_empty(), "{}", text(&second));
    assert!(text(&second).contains("nothing to submit: every node of sweep sl-two is cached"));
    let status = bench(&cache, &["status", sweep.to_str().unwrap()]);
    let st = text(&status);
    assert!(status.status.success(), "{st}");
    for (what, id) in &jobs {
        let line = st
            .lines()
            .find(|l| l.starts_with(&format!("{what} ")))
            .unwrap_or_else(|| panic!("{what}: {st}"));
        assert!(line.contains(&format!("job {id} COMPLETED")), "{st}");
        assert!(line.contains("cached"), "{st}");
    }
}

#[test]
fn a_cancelled_job_is_resubmitted_for_its_unfinished_nodes_only() {
    slurm();
    let (_dir, cache, sweep) = two_deployments("sl-cancel", SCENARIOS);
    let first = submit(&cache, &sweep, &[]);
    assert!(first.status.success(), "{}", text(&first));
    let jobs = submitted(&first);
    let victim = jobs["smollm2:q4_1@llama4"].clone();
    // Mid-run: its last run (3 s of server traffic) has started.
    wait_for_started_run(&cache, "@llama4 mmlu server", Duration::from_secs(120));
    let o = Command::new("scancel").arg(&victim).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let all: Vec<&String> = jobs.values().collect();
    wait_until_gone(&all, Duration::from_secs(120));
    assert_eq!(job_state(&victim), "CANCELLED");
    // The job stopped gracefully (SIGTERM): its engine stopped, its record closed.
    let run = &job_runs(&cache, "sl-cancel")[&victim];
    assert_eq!(run["exit_code"], 130, "{run}");
    // Its engine ended and bench360 said how before its record closed. Slurm signals every
    // process of the job, so llama-server races two SIGTERMs (Slurm's and bench360's): it has
    // exited already when bench360 stops it ("exited unexpectedly (exit status: 0)"), or stops
    // on bench360's ("stopped"), or hangs in llama.cpp's exit from its handler on the second
    // and is killed 15 s later. Which one is the machine's timing, not bench360's behaviour.
    let log = log_of(&cache, "sl-cancel", &victim);
    assert!(
        [
            "engine llama4: stopped",
            "engine llama4: did not stop within 15 s of SIGTERM; killed",
            "engine llama4: engine exited unexpectedly",
        ]
        .iter()
        .any(|l| log.contains(l)),
        "{log}"
    );

    let before: BTreeMap<String, serde_json::Value> = records(&cache)
        .into_iter()
        .map(|r| (r["key"].as_str().unwrap().to_string(), r))
        .collect();
    // By key: both engines run the same binary, so their pulls are one node.
    let finished_before: BTreeSet<&str> = before
        .values()
        .filter(|r| r["status"] == "finished")
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    let plan = plan_json(&cache, &sweep);
    let unfinished: BTreeSet<String> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] != "warmup" && n["kind"] != "report")
        .filter(|n| !finished_before.contains(n["key"].as_str().unwrap()))
        .map(|n| n["label"].as_str().unwrap().to_string())
        .collect();
    assert!(
        unfinished.contains("run smollm2:q4_1@llama4 mmlu server"),
        "{unfinished:?}"
    );
    assert!(
        unfinished.iter().all(|l| l.contains("@llama4")),
        "the other deployment finished: {unfinished:?}"
    );

    let again = submit(&cache, &sweep, &["--wait"]);
    let out = text(&again);
    assert!(again.status.success(), "{out}");
    let jobs2 = submitted(&again);
    assert_eq!(
        jobs2.keys().collect::<Vec<_>>(),
        ["report", "smollm2:q4_1@llama4"],
        "only the cancelled deployment again: {out}"
    );
    assert!(
        out.contains(&format!(
            "for deployment smollm2:q4_1@llama4 ({} nodes to run)",
            unfinished.len()
        )),
        "{out} {unfinished:?}"
    );
    // The new job ran exactly what had not finished (the engine started again for it).
    let log = log_of(&cache, "sl-cancel", &jobs2["smollm2:q4_1@llama4"]);
    assert_eq!(ran_in_log(&log), unfinished, "{log}");
    // Nothing recorded before is lost or rewritten.
    let after: BTreeMap<String, serde_json::Value> = records(&cache)
        .into_iter()
        .map(|r| (r["key"].as_str().unwrap().to_string(), r))
        .collect();
    for (key, r) in &before {
        if r["status"] == "finished" {
            assert_eq!(&after[key], r, "record {key} changed");
            assert!(cache.join("objects").join(key).is_dir(), "object {key}");
        }
    }
    assert!(after.values().all(|r| r["status"] == "finished"));
    let dep: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::fs::read_dir(cache.join("slurm/sl-cancel"))
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| {
                    std::fs::read_to_string(p)
                        .is_ok_and(|t| t.contains("\"what\": \"smollm2:q4_1@llama4\""))
                })
                .unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(dep["previous_jobs"], serde_json::json!([victim]));
}

#[test]
fn two_submitters_at_once_submit_each_deployment_once() {
    slurm();
    let scenario = r#"scenario "single" {
    kind "single"
    requests 1
}"#;
    let (_dir, cache, sweep) = two_deployments("sl-race", scenario);
    let spawn = || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("bench360"))
            .env(
                "BENCH360_DEVICE_LOCKS",
                cache.with_file_name("device-locks"),
            )
            .args([
                "--cache",
                cache.to_str().unwrap(),
                "apply",
                sweep.to_str().unwrap(),
            ])
            .args(["--executor", "slurm", "--mem", "1G"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(
        a.status.success() && b.status.success(),
        "{}\n{}",
        text(&a),
        text(&b)
    );
    let (ja, jb) = (submitted(&a), submitted(&b));
    let mut all: Vec<&String> = ja.keys().chain(jb.keys()).collect();
    all.sort();
    assert_eq!(
        all,
        ["report", "smollm2:q4_1@llama", "smollm2:q4_1@llama4"],
        "{}\n{}",
        text(&a),
        text(&b)
    );
    // The later one found the jobs of the first.
    let later = if ja.is_empty() { &a } else { &b };
    let kept = String::from_utf8_lossy(&later.stdout);
    assert_eq!(kept.matches("kept job ").count(), 3, "{kept}");
    // Slurm got exactly those jobs of this sweep (earlier runs of this test used the same
    // job names: only jobs from the first of ours on count).
    let first: u64 = ja
        .values()
        .chain(jb.values())
        .map(|i| i.parse::<u64>().unwrap())
        .min()
        .unwrap();
    let o = Command::new("squeue")
        .args(["-h", "-t", "all", "-o", "%i %j"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&o.stdout);
    let ours: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.trim().split_once(' '))
        .filter(|(id, name)| {
            name.starts_with("b360-sl-race-") && id.parse::<u64>().unwrap() >= first
        })
        .map(|(_, name)| name)
        .collect();
    assert_eq!(ours.len(), 3, "{listed}");

    // cancel: every job still queued or running, named.
    let c = bench(&cache, &["cancel", sweep.to_str().unwrap()]);
    let ct = text(&c);
    assert!(c.status.success(), "{ct}");
    let ids: Vec<&String> = ja.values().chain(jb.values()).collect();
    for id in &ids {
        let state = job_state(id);
        assert!(
            ct.contains(&format!("cancelled job {id} ")) || state == "COMPLETED",
            "{id} {state}: {ct}"
        );
    }
    assert!(ct.contains("for the report (was PENDING)"), "{ct}");
    wait_until_gone(&ids, Duration::from_secs(60));
    let c2 = bench(&cache, &["cancel", sweep.to_str().unwrap()]);
    assert!(
        text(&c2).contains("no job of sweep sl-race is queued or running"),
        "{}",
        text(&c2)
    );
}

#[test]
fn slurm_options_need_the_slurm_executor() {
    let (_dir, cache, sweep) = setup("sl-opts", "", SCENARIOS, "");
    let o = bench(
        &cache,
        &[
            "apply",
            sweep.to_str().unwrap(),
            "--partition",
            "gpu",
            "--wait",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("--partition only applies with --executor slurm"),
        "{}",
        text(&o)
    );
    let o = bench(
        &cache,
        &["apply", sweep.to_str().unwrap(), "--deployment", "nope"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("no deployment labelled `nope`"),
        "{}",
        text(&o)
    );
}
