//! End to end on the real llama-server (CPU) with SmolLM2-135M: incremental apply, resume
//! after kill -9, the per-deployment lock, engine faults as data, endpoints with API keys,
//! and the Parquet tables read back from Python.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;

fn will_run(plan: &serde_json::Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] != "warmup" && n["status"]["status"] == "will-run")
        .map(|n| {
            (
                n["label"].as_str().unwrap().to_string(),
                n["status"]["why"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn apply_runs_everything_then_nothing_then_only_what_changed() {
    let (_dir, cache, sweep) = setup("inc", "", SCENARIOS, "");
    let s = sweep.to_str().unwrap();

    let first = bench(&cache, &["apply", s]);
    assert!(first.status.success(), "{}", text(&first));
    assert_eq!(
        ran(&first),
        [
            "coldstart smollm2:q4_1@llama",
            "pull llama",
            "report inc",
            "run smollm2:q4_1@llama mmlu batch",
            "run smollm2:q4_1@llama mmlu server",
            "run smollm2:q4_1@llama mmlu single",
            "score smollm2:q4_1@llama mmlu batch",
            "score smollm2:q4_1@llama mmlu server",
            "score smollm2:q4_1@llama mmlu single",
        ]
    );
    let report = std::fs::read_to_string(cache.join("reports/inc/report.md")).unwrap();
    let runs_section = report
        .split("## Runs")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert_eq!(
        runs_section.matches("| smollm2:q4_1@llama mmlu ").count(),
        3,
        "{report}"
    );
    assert!(report.contains("## Energy, power and memory"), "{report}");
    assert!(report.contains("## Failures\n\nNone."), "{report}");

    // Nothing changed: nothing runs (how fast a cached apply is, is measured in BENCHMARKS.md).
    let second = bench(&cache, &["apply", s]);
    assert!(second.status.success(), "{}", text(&second));
    assert!(ran(&second).is_empty(), "{}", text(&second));
    assert!(
        text(&second).contains("0 ran, 9 cached, 0 failed"),
        "{}",
        text(&second)
    );
    assert!(will_run(&plan_json(&cache, &sweep)).is_empty());

    // One scenario's sample count changes: only its run and score, and the report.
    std::fs::write(
        &sweep,
        std::fs::read_to_string(&sweep)
            .unwrap()
            .replace("requests 3", "requests 4"),
    )
    .unwrap();
    let planned = will_run(&plan_json(&cache, &sweep));
    let labels: Vec<&str> = planned.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        [
            "report inc",
            "run smollm2:q4_1@llama mmlu single",
            "score smollm2:q4_1@llama mmlu single"
        ]
    );
    assert!(
        planned[1].1.contains("scenario.requests: 3 → 4"),
        "{planned:?}"
    );
    // Reported before it runs, the changed run is not shown with the numbers of its earlier
    // configuration (3 requests): it is not run yet, and the report says what changed.
    let early = bench(&cache, &["report", s]);
    let summary = std::fs::read_to_string(cache.join("reports/inc/summary.csv")).unwrap();
    let single = summary
        .lines()
        .find(|l| l.contains("smollm2:q4_1@llama mmlu single"))
        .unwrap_or_else(|| panic!("{summary}\n{}", text(&early)));
    assert!(!single.contains(",ok,"), "{single}");
    let report = std::fs::read_to_string(cache.join("reports/inc/report.md")).unwrap();
    assert!(
        report.contains("not run yet as the sweep now says")
            && report.contains("scenario.requests: 3 → 4"),
        "{report}"
    );
    let third = bench(&cache, &["apply", s]);
    assert!(third.status.success(), "{}", text(&third));
    assert_eq!(ran(&third), labels);

    // The tables, as a notebook reads them.
    let py = std::process::Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/check_traces.py"))
        .arg(&cache)
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", text(&py));
    let out = String::from_utf8_lossy(&py.stdout);
    assert!(out.contains("requests: 4 files ok"), "{out}");
    assert!(out.contains("scores: 4 files ok"), "{out}");
    assert!(out.contains("telemetry: 4 files ok"), "{out}");

    // Telemetry on a machine without GPU or RAPL: the engine's CPU and the gauges are
    // measured; energy is absent and the notes say why.
    let server = records(&cache)
        .into_iter()
        .find(|r| r["label"] == "run smollm2:q4_1@llama mmlu server" && r["status"] == "finished")
        .unwrap();
    let t: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            cache
                .join("objects")
                .join(server["key"].as_str().unwrap())
                .join("telemetry.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(t["engine_cpu_mean_pct"].as_f64().unwrap() > 1.0, "{t}");
    assert!(t["engine_rss_peak_mb"].as_f64().unwrap() > 50.0, "{t}");
    assert!(t["running_peak"].as_f64().unwrap() >= 1.0, "{t}");
    if t["energy_source"] == "none" {
        assert!(
            t["energy_j"].is_null() && t["j_per_output_token"].is_null(),
            "{t}"
        );
        let notes = t["notes"].to_string();
        assert!(
            notes.contains("no NVIDIA GPU")
                || notes.contains("but no NVML")
                || notes.contains("GPUs sampled"),
            "{notes}"
        );
    }

    // explain shows every key input of a node.
    let ex = bench(
        &cache,
        &[
            "explain",
            "--sweep",
            s,
            "run smollm2:q4_1@llama mmlu single",
        ],
    );
    assert!(ex.status.success(), "{}", text(&ex));
    let ex = text(&ex);
    for input in [
        "scenario.requests",
        "task.dataset.test.jsonl",
        "sampling.max-tokens",
        "deployment",
        "seed",
    ] {
        assert!(ex.contains(input), "{input} missing from:\n{ex}");
    }
}

const LONG_SERVER: &str = r#"scenario "single" {
    kind "single"
    requests 2
}
scenario "server" {
    kind "server"
    users 2
    rate 60
    duration 8
}"#;

#[test]
fn kill_9_in_the_middle_of_a_run_then_apply_resumes_consistently() {
    let (_dir, cache, sweep) = setup("killed", "", LONG_SERVER, "");
    let mut child = spawn_apply(&cache, &sweep);
    wait_for_started_run(&cache, "server", Duration::from_secs(90));
    std::thread::sleep(Duration::from_secs(2));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let plan = will_run(&plan_json(&cache, &sweep));
    let server = plan
        .iter()
        .find(|(l, _)| l == "run smollm2:q4_1@llama mmlu server")
        .expect("server run pending");
    assert_eq!(server.1, "interrupted last time");

    let resumed = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let r = ran(&resumed);
    assert!(
        r.contains(&"run smollm2:q4_1@llama mmlu server".to_string()),
        "{r:?}"
    );
    assert!(
        !r.contains(&"pull llama".to_string()),
        "pull was recorded before the kill: {r:?}"
    );

    // Consistent: every record finished, every finished node's object in place, no leftovers.
    for rec in records(&cache) {
        assert_eq!(rec["status"], "finished", "{rec}");
        let key = rec["key"].as_str().unwrap();
        assert!(
            cache.join("objects").join(key).is_dir(),
            "object of {} missing",
            rec["label"]
        );
    }
    assert_eq!(
        std::fs::read_dir(cache.join("tmp")).unwrap().count(),
        0,
        "temp leftovers remain"
    );
    let report = std::fs::read_to_string(cache.join("reports/killed/report.md")).unwrap();
    assert!(
        !report.contains("interrupted") && !report.contains("not run yet"),
        "{report}"
    );
    // The runs the resumed apply ran stood on an engine it started again, after the cold start
    // the killed apply had recorded: run.json says which start each run stood on, and the
    // report names the resumed ones.
    for rec in records(&cache).iter().filter(|rec| rec["kind"] == "run") {
        let key = rec["key"].as_str().unwrap();
        let rj: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(cache.join("objects").join(key).join("run.json")).unwrap(),
        )
        .unwrap();
        let resumed_run = r.contains(&rec["label"].as_str().unwrap().to_string());
        assert_eq!(
            rj["engine_start"]["cold_start"].as_bool(),
            Some(!resumed_run),
            "{rec} {rj}"
        );
        assert!(rj["engine_start"]["phases"]["healthy_s"].as_f64().unwrap() > 0.0);
    }
    let line = report
        .lines()
        .find(|l| l.contains("stood on a later start of the engine"))
        .unwrap_or_else(|| panic!("no line names the resumed runs:\n{report}"));
    assert!(line.contains("smollm2:q4_1@llama mmlu server"), "{line}");
    for label in records(&cache)
        .iter()
        .filter(|rec| rec["kind"] == "run")
        .filter_map(|rec| rec["label"].as_str())
        .filter(|l| !r.contains(&l.to_string()))
    {
        let label = label.trim_start_matches("run ");
        assert!(
            !line.contains(&format!("{label},")) && !line.ends_with(&format!("{label}.")),
            "{line}"
        );
    }
    assert!(will_run(&plan_json(&cache, &sweep)).is_empty());
}

#[test]
fn a_second_applier_of_the_same_deployment_gets_a_clear_error() {
    let (_dir, cache, sweep) = setup("locked", "", LONG_SERVER, "");
    let mut first = spawn_apply(&cache, &sweep);
    wait_for_started_run(&cache, "", Duration::from_secs(90));
    let second = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let t = text(&second);
    assert!(
        t.contains("is being applied by another bench360 (pid"),
        "{t}"
    );
    assert!(first.wait().unwrap().success());
    // The refused applier recorded nothing that would shadow the first one's work.
    assert!(will_run(&plan_json(&cache, &sweep)).is_empty());
}

#[test]
fn an_engine_that_cannot_start_is_recorded_and_the_sweep_goes_on() {
    let script = tempfile::Builder::new().suffix(".sh").tempfile().unwrap();
    std::fs::write(
        script.path(),
        "#!/bin/sh\necho 'loading model…' >&2\necho 'boom: cannot load the weights' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(
        script.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let script_path = script.into_temp_path();
    let broken = format!(
        r#"engine "broken" {{
    kind "openai"
    binary "{}"
    startup-timeout 20
}}"#,
        script_path.display()
    );
    let (_dir, cache, sweep) = setup("faults", &broken, SCENARIOS, "    scenario \"single\"");
    let out = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // The engine's last log lines reach the console and the report, not only the record.
    assert!(
        text(&out).contains("boom: cannot load the weights"),
        "{}",
        text(&out)
    );
    let r = ran(&out);
    assert!(
        r.contains(&"run smollm2:q4_1@llama mmlu single".to_string()),
        "{r:?}"
    );
    assert!(
        r.contains(&"score smollm2:q4_1@llama mmlu single".to_string()),
        "{r:?}"
    );
    let recs = records(&cache);
    let cold = recs
        .iter()
        .find(|r| r["label"] == "coldstart smollm2:q4_1@broken")
        .unwrap();
    assert_eq!(cold["status"], "failed");
    assert!(
        cold["cause"]
            .as_str()
            .unwrap()
            .contains("engine exited during startup"),
        "{cold}"
    );
    let report = std::fs::read_to_string(cache.join("reports/faults/report.md")).unwrap();
    assert!(
        report.contains("FAILED: engine failed to start"),
        "{report}"
    );
    assert!(report.contains("boom: cannot load the weights"), "{report}");
    let html = std::fs::read_to_string(cache.join("reports/faults/report.html")).unwrap();
    assert!(
        html.contains("boom: cannot load the weights"),
        "report.html"
    );
    // The next plan retries the failed node and says why.
    let plan = will_run(&plan_json(&cache, &sweep));
    let again = plan
        .iter()
        .find(|(l, _)| l == "coldstart smollm2:q4_1@broken")
        .unwrap();
    assert!(
        again
            .1
            .starts_with("failed last time: engine exited during startup"),
        "{again:?}"
    );
    assert!(!plan.iter().any(|(l, _)| l.contains("@llama")), "{plan:?}");
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_endpoint_with_an_api_key_from_the_environment_never_stores_the_key() {
    let e = engine();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let secret = "s3cr3t-bench360-test-key";
    let _server = Server(
        std::process::Command::new(&e.server)
            .args([
                "--model",
                e.gguf.to_str().unwrap(),
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .args([
                "--parallel",
                "2",
                "--ctx-size",
                "2048",
                "--threads",
                "1",
                "--api-key",
                secret,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let endpoint = format!(
        r#"engine "remote" {{
    kind "openai"
    launcher "endpoint"
    url "http://127.0.0.1:{port}"
    api-key-env "BENCH360_TEST_API_KEY"
    startup-timeout 60
}}"#
    );
    let (_dir, cache, sweep) = setup(
        "endpoint",
        &endpoint,
        SCENARIOS,
        "    engine \"remote\"\n    scenario \"single\" \"batch\"",
    );
    let s = sweep.to_str().unwrap();

    // Without the key in the environment: a recorded fault, not a crash.
    let out = assert_cmd::Command::cargo_bin("bench360")
        .unwrap()
        .env_remove("BENCH360_TEST_API_KEY")
        .args(["--cache", cache.to_str().unwrap(), "apply", s])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("BENCH360_TEST_API_KEY"),
        "{}",
        text(&out)
    );

    let out = assert_cmd::Command::cargo_bin("bench360")
        .unwrap()
        .env("BENCH360_TEST_API_KEY", secret)
        .args(["--cache", cache.to_str().unwrap(), "apply", s])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stats: serde_json::Value = {
        let rec = records(&cache)
            .into_iter()
            .find(|r| r["label"] == "run smollm2:q4_1@remote mmlu single")
            .unwrap();
        serde_json::from_str(
            &std::fs::read_to_string(
                cache
                    .join("objects")
                    .join(rec["key"].as_str().unwrap())
                    .join("stats.json"),
            )
            .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(stats["ok"], 3, "{stats}");
    assert!(!text(&out).contains(secret));
    // Not in any record, object, trace, log or report.
    for entry in walk(&cache) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "key written to {}",
            entry.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let c = std::fs::read_to_string(t.unwrap().path().join("children")).unwrap_or_default();
        out.extend(c.split_whitespace().map(|p| p.parse::<u32>().unwrap()));
    }
    out
}

#[test]
fn ctrl_c_stops_the_engine_and_records_nothing_half_done() {
    let (_dir, cache, sweep) = setup("interrupted", "", LONG_SERVER, "");
    let mut child = spawn_apply(&cache, &sweep);
    wait_for_started_run(&cache, "server", Duration::from_secs(90));
    std::thread::sleep(Duration::from_secs(1));
    let engines = children_of(child.id());
    assert_eq!(
        engines.len(),
        1,
        "one engine process under bench360: {engines:?}"
    );
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    // The stop did not wait for the run: exit 130 and the run left `started` (checked below),
    // whatever the machine's speed.
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    // bench360 stopped and reaped its engine before exiting.
    for pid in engines {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "engine {pid} still exists"
        );
    }
    let recs = records(&cache);
    let server = recs
        .iter()
        .find(|r| r["label"] == "run smollm2:q4_1@llama mmlu server")
        .unwrap();
    assert_eq!(
        server["status"], "started",
        "an interrupted run is not recorded as done"
    );
    assert!(!cache
        .join("objects")
        .join(server["key"].as_str().unwrap())
        .exists());
    assert_eq!(std::fs::read_dir(cache.join("tmp")).unwrap().count(), 0);
    for r in &recs {
        if r["status"] == "finished" {
            assert!(
                cache
                    .join("objects")
                    .join(r["key"].as_str().unwrap())
                    .is_dir(),
                "{r}"
            );
        }
    }
    let resumed = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert!(ran(&resumed).contains(&"run smollm2:q4_1@llama mmlu server".to_string()));
}

#[test]
fn rate_concurrency_and_offline_scenarios_run_on_the_real_engine() {
    let scenarios = r#"scenario "bursty" {
    kind "rate"
    rate 4
    burstiness 0.5
    duration 3
}
scenario "closed" {
    kind "concurrency"
    concurrency 2
    requests 6
}
scenario "all-at-once" {
    kind "offline"
    requests 4
}
scenario "replayed" {
    kind "replay"
    trace "trace.jsonl"
    speed 2
}"#;
    let (dir, cache, sweep) = setup("more-scenarios", "", scenarios, "");
    std::fs::write(
        dir.path().join("trace.jsonl"),
        "{\"t\": 0.0, \"output_tokens\": 2}\n{\"t\": 0.4, \"output_tokens\": 3}\n{\"t\": 0.8, \"output_tokens\": 2}\n",
    )
    .unwrap();
    let out = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let stats = |label: &str| -> serde_json::Value {
        let rec = records(&cache)
            .into_iter()
            .find(|r| r["label"] == label)
            .unwrap();
        serde_json::from_str(
            &std::fs::read_to_string(
                cache
                    .join("objects")
                    .join(rec["key"].as_str().unwrap())
                    .join("stats.json"),
            )
            .unwrap(),
        )
        .unwrap()
    };
    let closed = stats("run smollm2:q4_1@llama mmlu closed");
    assert_eq!(
        (closed["requests"].as_u64(), closed["failed"].as_u64()),
        (Some(6), Some(0)),
        "{closed}"
    );
    let offline = stats("run smollm2:q4_1@llama mmlu all-at-once");
    assert_eq!(offline["ok"], 4, "{offline}");
    // The replay sends the trace's requests with its output lengths as max tokens.
    let replayed = stats("run smollm2:q4_1@llama mmlu replayed");
    assert_eq!(
        (replayed["requests"].as_u64(), replayed["ok"].as_u64()),
        (Some(3), Some(3)),
        "{replayed}"
    );
    assert!(
        replayed["output_tokens"].as_u64().unwrap() <= 7,
        "{replayed}"
    );
    // requests.parquet says what cap each request went out with: the trace's lengths in the
    // order they arrived; none of its own in a run that sent the task's max-tokens.
    let replay_run = object_of(&cache, "run", "mmlu replayed");
    let ids = u32_column(&replay_run, "requests.parquet", "request_id");
    let caps = u32_column(&replay_run, "requests.parquet", "request_max_tokens");
    let mut by_id: Vec<(Option<u32>, Option<u32>)> = ids.into_iter().zip(caps).collect();
    by_id.sort();
    let caps: Vec<Option<u32>> = by_id.into_iter().map(|(_, c)| c).collect();
    assert_eq!(caps, [Some(2), Some(3), Some(2)]);
    let closed_caps = u32_column(
        &object_of(&cache, "run", "mmlu closed"),
        "requests.parquet",
        "request_max_tokens",
    );
    assert!(closed_caps.iter().all(Option::is_none), "{closed_caps:?}");
    let bursty = stats("run smollm2:q4_1@llama mmlu bursty");
    assert!(bursty["requests"].as_u64().unwrap() >= 2, "{bursty}");
    // Per-token ITL exists and, with one token per llama.cpp chunk, is close to ITL.
    let (itl, per_token) = (
        closed["itl_ms"]["p50"].as_f64().unwrap(),
        closed["itl_per_token_ms"]["p50"].as_f64().unwrap(),
    );
    assert!(
        per_token > 0.0 && per_token <= itl * 1.5,
        "{itl} vs {per_token}"
    );
}

/// Object integrity: a truncated trace or record is damage, found by `plan`, `report` and
/// `verify`, and repaired by the next `apply`; what depends on it runs again too.
#[test]
fn damaged_objects_and_records_are_found_and_rerun() {
    let (_dir, cache, sweep) = setup("damage", "", SCENARIOS, "    scenario \"single\"");
    let s = sweep.to_str().unwrap();
    let first = bench(&cache, &["apply", s]);
    assert!(first.status.success(), "{}", text(&first));
    let ok = bench(&cache, &["verify"]);
    assert!(ok.status.success(), "{}", text(&ok));

    let run = records(&cache)
        .into_iter()
        .find(|r| r["kind"] == "run")
        .unwrap();
    let key = run["key"].as_str().unwrap().to_string();
    assert!(
        run["objects"]["requests.parquet"]["size"].as_u64().unwrap() > 0,
        "{run}"
    );
    // Truncate the run's requests table.
    let parquet = cache.join("objects").join(&key).join("requests.parquet");
    let len = std::fs::metadata(&parquet).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&parquet)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let planned = will_run(&plan_json(&cache, &sweep));
    let run_why = &planned
        .iter()
        .find(|(l, _)| l.starts_with("run "))
        .expect("the damaged run runs again")
        .1;
    assert!(
        run_why.contains("damaged object: requests.parquet"),
        "{planned:?}"
    );
    assert!(
        planned
            .iter()
            .any(|(l, w)| l.starts_with("score ") && w.contains("which will run again")),
        "{planned:?}"
    );
    let v = bench(&cache, &["verify"]);
    assert_eq!(v.status.code(), Some(1), "{}", text(&v));
    assert!(text(&v).contains("requests.parquet"), "{}", text(&v));
    let report = bench(&cache, &["report", s]);
    assert!(
        text(&report).contains("damaged object") || {
            let md = std::fs::read_to_string(cache.join("reports/damage/report.md")).unwrap();
            md.contains("damaged object")
        },
        "{}",
        text(&report)
    );

    // A truncated record: damage too, not "new".
    let rec = cache.join("records").join(format!("{key}.json"));
    let text_rec = std::fs::read_to_string(&rec).unwrap();
    std::fs::write(&rec, &text_rec[..text_rec.len() / 3]).unwrap();
    let planned = will_run(&plan_json(&cache, &sweep));
    assert!(
        planned
            .iter()
            .any(|(l, w)| l.starts_with("run ") && w.starts_with("damaged record")),
        "{planned:?}"
    );

    // The next apply repairs everything.
    let again = bench(&cache, &["apply", s]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(will_run(&plan_json(&cache, &sweep)).is_empty());
    let ok = bench(&cache, &["verify"]);
    assert!(ok.status.success(), "{}", text(&ok));
}

/// Output control on the real llama-server: with `ignore-eos`, every request generates
/// exactly `max-tokens` tokens (the server's own `usage`), and `extra-body` reaches it.
#[test]
fn ignore_eos_makes_every_completion_exactly_max_tokens() {
    let (_dir, cache, sweep) = setup("eos", "", SCENARIOS, "    scenario \"single\"");
    let body = std::fs::read_to_string(&sweep).unwrap().replace(
        "    max-tokens 4\n",
        "    max-tokens 24\n    ignore-eos #true\n    extra-body {\n        n_probs 0\n    }\n",
    );
    std::fs::write(&sweep, body).unwrap();
    let out = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let run = records(&cache)
        .into_iter()
        .find(|r| r["kind"] == "run")
        .unwrap();
    assert_eq!(run["inputs"]["sampling.ignore-eos"], "true", "{run}");
    assert_eq!(
        run["inputs"]["sampling.extra-body"], "{\"n_probs\":0}",
        "{run}"
    );
    let key = run["key"].as_str().unwrap();
    let stats: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cache.join("objects").join(key).join("stats.json")).unwrap(),
    )
    .unwrap();
    let ok = stats["ok"].as_u64().unwrap();
    assert!(ok > 0, "{stats}");
    assert_eq!(stats["usage_missing"], 0, "{stats}");
    assert_eq!(stats["output_tokens"].as_u64().unwrap(), ok * 24, "{stats}");
}

/// `cold-repeats #true`: each repeat starts the engine anew — its own cold-start node and
/// record — the first start keeps the key it has without the field, the runs keep their
/// repeat labels, and the report gives the start-up time an interval across the starts.
#[test]
fn cold_repeats_start_the_engine_once_per_repeat() {
    let (_dir, cache, sweep) = setup(
        "cold",
        "",
        r#"scenario "single" {
    kind "single"
    requests 2
}"#,
        "",
    );
    let original = std::fs::read_to_string(&sweep).unwrap();
    let plan = |src: &str| {
        std::fs::write(&sweep, src).unwrap();
        let out = bench(&cache, &["plan", sweep.to_str().unwrap(), "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let coldstarts = |p: &serde_json::Value| -> Vec<(String, String)> {
        p["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "coldstart")
            .map(|n| {
                (
                    n["label"].as_str().unwrap().to_string(),
                    n["key"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let once = coldstarts(&plan(&original));
    let cold_text = original.replace(
        "    seed 3\n",
        "    seed 3\n    repeats 3\n    cold-repeats #true\n",
    );
    let mut cold = coldstarts(&plan(&cold_text));
    cold.sort();
    assert_eq!(once.len(), 1, "{once:?}");
    assert_eq!(cold.len(), 3, "{cold:?}");
    assert!(cold[0].0.ends_with("(start 1)"), "{cold:?}");
    // The first start is the deployment without the field: its cache stays valid.
    assert_eq!(cold[0].1, once[0].1);
    assert!(cold[1].1 != cold[0].1 && cold[2].1 != cold[1].1, "{cold:?}");

    let out = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let recs = records(&cache);
    let started: Vec<&serde_json::Value> = recs
        .iter()
        .filter(|r| r["kind"] == "coldstart" && r["status"] == "finished")
        .collect();
    assert_eq!(started.len(), 3, "{recs:?}");
    let runs: Vec<String> = recs
        .iter()
        .filter(|r| r["kind"] == "run")
        .map(|r| r["label"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(runs.len(), 3, "{runs:?}");
    for k in 1..=3 {
        assert!(
            runs.iter()
                .any(|l| l.ends_with(&format!("mmlu single #{k}"))),
            "{runs:?}"
        );
    }
    let report = std::fs::read_to_string(cache.join("reports/cold/report.md")).unwrap();
    assert!(report.contains("over 3 cold starts, healthy"), "{report}");
}
