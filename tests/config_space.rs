//! The configuration space on the real llama-server (scripts/install-engine.sh): engine
//! settings as axes (each combination its own deployment, keyed by what it changes, grouped
//! in the report), every run's provenance, and deployments applied in parallel on disjoint
//! CPU sets with the results a sequential apply gives — also after a kill -9.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

fn sweep_text(name: &str, engines: &str, extra_sweep: &str) -> String {
    let e = engine();
    format!(
        r#"sweep "{name}" {{
    seed 5
    {extra_sweep}
}}
defaults {{
    max-tokens 4
    warmup 1
    request-timeout 60
}}
model "smollm2" {{
    path "{gguf}"
    quantization "q4_1"
}}
{engines}
task "mmlu" {{
    kind "mmlu"
    dataset "{datasets}/mmlu"
    samples 6
}}
scenario "c2" {{
    kind "concurrency"
    concurrency 2
    requests 6
}}
"#,
        gguf = e.gguf.display(),
        datasets = datasets().display(),
    )
}

fn llama(name: &str, fields: &str) -> String {
    format!(
        r#"engine "{name}" {{
    kind "llama.cpp"
    binary "{server}"
    ctx-size 512
    args "--threads" "1"
    startup-timeout 60
    {fields}
}}"#,
        server = engine().server.display()
    )
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(format!("{name}.kdl"));
    std::fs::write(&p, text).unwrap();
    p
}

/// The plan's deployments, from its cold start nodes, sorted.
fn deployments(plan: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "coldstart")
        .map(|n| n["deployment"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

fn cached(n: &serde_json::Value) -> bool {
    n["status"]["status"] == "cached"
}

/// (label, key) of every finished node, sorted. Engine blocks with the same binary share one
/// pull (one key): whichever deployment gets to it first records it under its block's name,
/// so a pull is labelled `pull` alone.
fn finished(cache: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = records(cache)
        .into_iter()
        .filter(|r| r["status"] == "finished")
        .map(|r| {
            let label = match r["kind"].as_str() {
                Some("pull") => "pull".to_string(),
                _ => r["label"].as_str().unwrap().to_string(),
            };
            (label, r["key"].as_str().unwrap().to_string())
        })
        .collect();
    v.sort();
    v
}

/// A `plan --json` that succeeded and has every run cached.
fn assert_runs_cached(o: &std::process::Output) {
    assert!(o.status.success(), "{}", text(o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "run")
        .all(cached));
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn setting_axes_are_deployments_keyed_by_what_they_change_and_grouped_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let axes = write(
        dir.path(),
        "axes",
        &sweep_text(
            "axes",
            &llama(
                "llama",
                r#"parallel 1 2
    variant "cache"
    variant "no-cache" args="--no-cache-prompt""#,
            ),
            "",
        ),
    );
    let plan = plan_json(&cache, &axes);
    assert_eq!(
        deployments(&plan),
        [
            "smollm2:q4_1@llama[parallel=1,variant=cache]",
            "smollm2:q4_1@llama[parallel=1,variant=no-cache]",
            "smollm2:q4_1@llama[parallel=2,variant=cache]",
            "smollm2:q4_1@llama[parallel=2,variant=no-cache]",
        ]
    );
    // `--only` narrows by a setting like any axis.
    let o = bench(
        &cache,
        &[
            "plan",
            "--json",
            "--only",
            "variant=no-cache",
            axes.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let only: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(deployments(&only).len(), 2, "{}", text(&o));

    let o = bench(&cache, &["apply", axes.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));

    // The variant without arguments and parallel 2 is the plain engine with `parallel 2`:
    // the same cold start and runs, all cached.
    let plain = write(
        dir.path(),
        "plain",
        &sweep_text("plain", &llama("llama", "parallel 2"), ""),
    );
    let p = plan_json(&cache, &plain);
    let will: Vec<&serde_json::Value> = p["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| !cached(n) && n["kind"] != "report" && n["kind"] != "warmup")
        .collect();
    assert!(
        will.is_empty(),
        "keys changed beyond what changed: {will:?}"
    );

    let report = read(&cache.join("reports/axes/report.md"));
    assert!(report.contains("## Engine settings"), "{report}");
    assert!(report.contains("### llama: parallel"), "{report}");
    assert!(report.contains("### llama: variant"), "{report}");
    assert!(
        report.contains("| variant=cache · smollm2:q4_1 · mmlu c2 | parallel=1 |"),
        "{report}"
    );
    assert!(report.contains("## Provenance"), "{report}");
    let csv = read(&cache.join("reports/axes/summary.csv"));
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for col in [
        "engine_block",
        "engine_settings",
        "bench360_commit",
        "engine_version",
        "cpu_model",
        "gpu_driver",
    ] {
        assert!(header.contains(&col), "{col} not in {header:?}");
    }

    // From a notebook: the settings and the provenance are columns of summary.parquet.
    let check = format!(
        r#"
import duckdb, json
rows = duckdb.sql("select engine, engine_block, engine_settings, bench360_commit, cpu_cores, engine_version from read_parquet('{p}')").fetchall()
assert len(rows) == 4, rows
for engine, block, settings, commit, cores, version in rows:
    s = json.loads(settings)
    assert block == 'llama' and sorted(s) == ['parallel', 'variant'], (engine, block, s)
    assert engine == 'llama[parallel=%s,variant=%s]' % (s['parallel'], s['variant']), engine
    assert commit and cores >= 1 and version, (commit, cores, version)
print('SETTINGS_AND_PROVENANCE')
"#,
        p = cache.join("reports/axes/summary.parquet").display()
    );
    let py = std::process::Command::new(python())
        .arg("-c")
        .arg(check)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&py.stdout).contains("SETTINGS_AND_PROVENANCE"),
        "{}",
        text(&py)
    );

    // Every run's provenance: bench360's build, the engine's version, the machine; no GPU
    // here, and it says why rather than inventing one.
    let run = object_of(&cache, "run", "llama[parallel=2,variant=no-cache]");
    let rj: serde_json::Value = serde_json::from_str(&read(&run.join("run.json"))).unwrap();
    let p = &rj["provenance"];
    assert_eq!(p["bench360_version"], env!("CARGO_PKG_VERSION"));
    assert!(!p["bench360_commit"].as_str().unwrap().is_empty(), "{p}");
    assert!(
        p["engine_version"].as_str().is_some_and(|v| !v.is_empty()),
        "{p}"
    );
    assert!(
        p["engine_artifact"]
            .as_str()
            .unwrap()
            .starts_with("binary:"),
        "{p}"
    );
    assert!(p["host"]["cores"].as_u64().unwrap() >= 1, "{p}");
    assert!(p["host"]["memory_bytes"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(
        p["model_bytes"].as_u64(),
        Some(std::fs::metadata(engine().gguf).unwrap().len())
    );
    assert!(
        p["datasets"]
            .as_object()
            .unwrap()
            .contains_key("test.jsonl"),
        "{p}"
    );
    if p["gpus"]["devices"].as_array().unwrap().is_empty() {
        assert!(p["gpus"]["unavailable"].as_str().is_some(), "{p}");
    }
    assert!(rj["columns"]["engine_settings"].is_array(), "{rj}");
}

fn two_cpus(name: &str) -> String {
    sweep_text(
        name,
        &format!(
            "{}\n{}",
            llama("llama-a", "parallel 2\n    cpus 0"),
            llama("llama-b", "parallel 2\n    cpus 1")
        ),
        "max-parallel 2",
    )
}

/// Requests recorded per run label, from each run's requests.parquet via its row count in
/// outputs.jsonl (one line per request).
fn requests_per_run(cache: &Path) -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = records(cache)
        .into_iter()
        .filter(|r| r["kind"] == "run" && r["status"] == "finished")
        .map(|r| {
            let key = r["key"].as_str().unwrap();
            let out = read(&cache.join("objects").join(key).join("outputs.jsonl"));
            (
                r["label"].as_str().unwrap().to_string(),
                out.lines().count(),
            )
        })
        .collect();
    v.sort();
    v
}

fn interval(r: &serde_json::Value) -> (std::time::SystemTime, std::time::SystemTime) {
    let t = |k: &str| humantime::parse_rfc3339_weak(r[k].as_str().unwrap()).unwrap();
    (t("started_at"), t("finished_at"))
}

#[test]
fn deployments_on_disjoint_cpus_apply_at_once_with_the_results_of_a_sequential_apply() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = write(dir.path(), "two", &two_cpus("two"));
    let par = dir.path().join("parallel");
    let seq = dir.path().join("sequential");

    let o = bench(&par, &["apply", "--json", sweep.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ran: Vec<&str> = out["ran"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        ran.iter().any(|l| l.contains("@llama-a")) && ran.iter().any(|l| l.contains("@llama-b")),
        "{ran:?}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("in parallel"), "{err}");

    let o = bench(
        &seq,
        &["apply", "--max-parallel", "1", sweep.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("in parallel"));

    // The same nodes under the same keys, the same requests per run.
    assert_eq!(finished(&par), finished(&seq));
    assert_eq!(requests_per_run(&par), requests_per_run(&seq));

    // In the parallel apply the two deployments' runs overlapped in time; the report says so.
    let runs: Vec<serde_json::Value> = records(&par)
        .into_iter()
        .filter(|r| r["kind"] == "run")
        .collect();
    assert_eq!(runs.len(), 2);
    let (a, b) = (interval(&runs[0]), interval(&runs[1]));
    assert!(
        a.0 < b.1 && b.0 < a.1,
        "the runs did not overlap: {a:?} {b:?}"
    );
    let report = read(&par.join("reports/two/report.md"));
    assert!(report.contains("## Runs at the same time"), "{report}");
    let report = read(&seq.join("reports/two/report.md"));
    assert!(!report.contains("## Runs at the same time"), "{report}");

    // Each engine ran on its own CPU: the affinity its process was given.
    let log = read(&object_of(&par, "run", "@llama-a").join("engine.log"));
    assert!(!log.is_empty());
}

/// Processes applying one deployment of a sweep into `cache` (the children of a parallel
/// apply).
fn deployment_applies(cache: &Path) -> usize {
    let want = cache.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&want) && c.contains("--deployment"))
        .count()
}

#[test]
fn a_kill_9_while_deployments_run_in_parallel_resumes_both() {
    let dir = tempfile::tempdir().unwrap();
    // 60 requests per run: long enough to be killed while both run.
    let text_ = two_cpus("killed-par").replace("requests 6\n", "requests 60\n");
    let sweep = write(dir.path(), "killed-par", &text_);
    let cache = dir.path().join("cache");
    let mut child = spawn_apply(&cache, &sweep);
    wait_for_started_run(&cache, "@llama-a", Duration::from_secs(120));
    wait_for_started_run(&cache, "@llama-b", Duration::from_secs(120));
    child.kill().unwrap(); // SIGKILL of the parent: its children get SIGTERM and stop
    child.wait().unwrap();
    let t = std::time::Instant::now();
    while deployment_applies(&cache) > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "a deployment's apply outlived the kill"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let plan = plan_json(&cache, &sweep);
    let pending: Vec<&serde_json::Value> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "run" && !cached(n))
        .collect();
    assert_eq!(pending.len(), 2, "both runs are to run again: {pending:?}");
    let o = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let runs: Vec<serde_json::Value> = records(&cache)
        .into_iter()
        .filter(|r| r["kind"] == "run")
        .collect();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r["status"] == "finished"), "{runs:?}");
    for (_, n) in requests_per_run(&cache) {
        assert_eq!(n, 60);
    }
}

#[test]
fn an_endpoint_engine_records_the_version_its_server_reports() {
    let e = engine();
    let port = free_port();
    let _server = start_llama_server(&e, port, &["-t", "1", "-c", "512"]);
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let engines = format!(
        r#"engine "remote" {{
    kind "llama.cpp"
    launcher "endpoint"
    url "http://127.0.0.1:{port}"
}}"#
    );
    let sweep = write(dir.path(), "remote", &sweep_text("remote", &engines, ""));
    let o = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let run = object_of(&cache, "run", "@remote");
    let rj: serde_json::Value = serde_json::from_str(&read(&run.join("run.json"))).unwrap();
    // llama.cpp answers /props with its build; this build from the PyPI sdist has no git.
    let v = rj["provenance"]["engine_version"]
        .as_str()
        .unwrap_or_default();
    assert!(v.ends_with("(/props)"), "{}", rj["provenance"]);
    assert_eq!(
        rj["provenance"]["engine_artifact"],
        format!("endpoint:http://127.0.0.1:{port}")
    );
}

/// Two applies of one sweep into different caches, started at once on one machine: the
/// machine-wide device lock makes the second wait for the first's engine to stop, it says
/// who holds the machine, and the two engines' lifetimes do not overlap.
#[test]
fn applies_into_different_caches_take_turns_on_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = write(
        dir.path(),
        "turns",
        &sweep_text("turns", &llama("llama", "parallel 2"), ""),
    );
    let locks = dir.path().join("device-locks");
    let apply = |cache: std::path::PathBuf| {
        let (sweep, locks) = (sweep.clone(), locks.clone());
        std::thread::spawn(move || {
            let o = std::process::Command::new(assert_cmd::cargo::cargo_bin("bench360"))
                .env("NO_COLOR", "1")
                .env("BENCH360_DEVICE_LOCKS", &locks)
                .arg("--cache")
                .arg(&cache)
                .arg("apply")
                .arg(&sweep)
                .output()
                .unwrap();
            (cache, o)
        })
    };
    let (a, b) = (
        apply(dir.path().join("cache-a")),
        apply(dir.path().join("cache-b")),
    );
    let done = [a.join().unwrap(), b.join().unwrap()];
    for (_, o) in &done {
        assert!(o.status.success(), "{}", text(o));
    }
    let errs: Vec<String> = done
        .iter()
        .map(|(_, o)| String::from_utf8_lossy(&o.stderr).into_owned())
        .collect();
    let waited: Vec<&String> = errs
        .iter()
        .filter(|e| e.contains("waits for the whole machine, held by pid"))
        .collect();
    assert_eq!(waited.len(), 1, "exactly one apply waited: {errs:?}");
    assert!(
        waited[0].contains("deployment smollm2:q4_1@llama of sweep turns (cache ")
            && waited[0].matches("waits for").count() == 1
            && waited[0].contains("its devices are free after"),
        "{}",
        waited[0]
    );
    // Each cache's engine lifetime: its cold start's start to its run's end.
    let lifetime = |cache: &Path| {
        let rs: Vec<serde_json::Value> = records(cache)
            .into_iter()
            .filter(|r| r["kind"] == "coldstart" || r["kind"] == "run")
            .collect();
        assert_eq!(rs.len(), 2, "{rs:?}");
        let spans: Vec<_> = rs.iter().map(interval).collect();
        (
            spans.iter().map(|s| s.0).min().unwrap(),
            spans.iter().map(|s| s.1).max().unwrap(),
        )
    };
    let (x, y) = (lifetime(&done[0].0), lifetime(&done[1].0));
    assert!(
        x.1 <= y.0 || y.1 <= x.0,
        "the two engines ran at once: {x:?} {y:?}"
    );
}

/// The variables an engine inherits from bench360's environment are not keyed: each run
/// records them (a secret's value never), the report shows them, and `plan` and `apply` say
/// when a cached run was made under others.
#[test]
fn a_cached_run_made_under_another_inherited_environment_or_on_another_machine_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = write(
        dir.path(),
        "inherit",
        &sweep_text("inherit", &llama("llama", "parallel 2"), ""),
    );
    let cache = dir.path().join("cache");
    let cmd = |mark: &str, args: &[&str]| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("bench360"))
            .env("NO_COLOR", "1")
            .env("BENCH360_DEVICE_LOCKS", dir.path().join("device-locks"))
            // Read by no engine: marks of the environment a run was made under.
            .env("GGML_BENCH360_TEST_MARK", mark)
            .env("GGML_BENCH360_TEST_TOKEN", "hunter2")
            .arg("--cache")
            .arg(&cache)
            .args(args)
            .arg(&sweep)
            .output()
            .unwrap()
    };
    let o = cmd("a", &["apply"]);
    assert!(o.status.success(), "{}", text(&o));
    let run = object_of(&cache, "run", "@llama");
    let rj: serde_json::Value = serde_json::from_str(&read(&run.join("run.json"))).unwrap();
    let env = &rj["provenance"]["inherited_env"];
    assert_eq!(env["GGML_BENCH360_TEST_MARK"], "a", "{env}");
    assert_eq!(env["GGML_BENCH360_TEST_TOKEN"], "(set)", "{env}");
    let report = read(&cache.join("reports/inherit/report.md"));
    assert!(
        report.contains("GGML_BENCH360_TEST_MARK=a")
            && report.contains("GGML_BENCH360_TEST_TOKEN=(set)"),
        "{report}"
    );
    let leaked = std::process::Command::new("grep")
        .args(["-r", "-l", "hunter2"])
        .arg(&cache)
        .output()
        .unwrap();
    assert!(
        leaked.stdout.is_empty(),
        "a secret was written: {}",
        String::from_utf8_lossy(&leaked.stdout)
    );

    // The same environment: cached, nothing said.
    let o = cmd("a", &["plan"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("inherited environment"), "{}", text(&o));
    assert!(!text(&o).contains("machine that differs"), "{}", text(&o));
    // Another: still cached (no key sees it), and said with what differs.
    let o = cmd("b", &["plan", "--json"]);
    assert_runs_cached(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("another inherited environment")
            && err.contains("smollm2:q4_1@llama (1 run): GGML_BENCH360_TEST_MARK: a → b"),
        "{err}"
    );
    let o = cmd("b", &["apply"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("GGML_BENCH360_TEST_MARK: a → b"),
        "{}",
        text(&o)
    );

    // Another machine, as far as the runs can tell: this one seen through one CPU (`taskset`
    // narrows the CPUs bench360 counts). Still cached, and said with what differs.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The first CPU this process may run on (CPU 0 need not be one of them).
    let status = read(Path::new("/proc/self/status"));
    let first = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|l| l.trim().split([',', '-']).next().map(str::to_string))
        .unwrap();
    let taskset = std::process::Command::new("taskset").arg("-V").output();
    if cores < 2 || taskset.is_err() {
        eprintln!("one CPU here, or no taskset: a narrower machine cannot be made; not checked");
        return;
    }
    let o = std::process::Command::new("taskset")
        .args(["-c", &first])
        .arg(assert_cmd::cargo::cargo_bin("bench360"))
        .env("NO_COLOR", "1")
        .env("GGML_BENCH360_TEST_MARK", "b")
        .arg("--cache")
        .arg(&cache)
        .args(["plan", "--json"])
        .arg(&sweep)
        .output()
        .unwrap();
    assert_runs_cached(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cached runs were measured on a machine that differs from this one")
            && err.contains(&format!("smollm2:q4_1@llama (1 run): cores: {cores} → 1")),
        "{err}"
    );
}

/// A device held by another process past `BENCH360_DEVICE_WAIT`: the deployment's cold start
/// fails with the holder as its cause, and the next apply, the device free, runs it.
#[test]
fn a_device_held_past_the_wait_limit_fails_the_deployment_with_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = write(
        dir.path(),
        "held",
        &sweep_text("held", &llama("llama", "parallel 2"), ""),
    );
    let cache = dir.path().join("cache");
    let locks = dir.path().join("device-locks");
    std::fs::create_dir(&locks).unwrap();
    let apply = || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("bench360"))
            .env("NO_COLOR", "1")
            .env("BENCH360_DEVICE_LOCKS", &locks)
            .env("BENCH360_DEVICE_WAIT", "1")
            .arg("--cache")
            .arg(&cache)
            .arg("apply")
            .arg(&sweep)
            .output()
            .unwrap()
    };
    let held = std::fs::File::create(locks.join("machine.lock")).unwrap();
    held.lock().unwrap();
    std::fs::write(locks.join("machine.lock"), "a training job of the test\n").unwrap();
    let o = apply();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let cold = records(&cache)
        .into_iter()
        .find(|r| r["kind"] == "coldstart")
        .unwrap();
    assert_eq!(cold["status"], "failed");
    let cause = cold["cause"].as_str().unwrap();
    assert!(
        cause.contains("the whole machine held by a training job of the test for more than 1 s"),
        "{cause}"
    );
    drop(held);
    let o = apply();
    assert!(o.status.success(), "{}", text(&o));
}
