//! Engine faults are data, and a run that mostly failed is a failed run: the fault-injecting
//! engine (`examples/fault_engine.rs`, started by bench360's process launcher) answers 500s,
//! garbage events, closes mid-stream, stalls, never gets healthy, or exits mid-run. Each is
//! recorded with its cause, the run fails over its error budget (trace kept as evidence, not
//! cached, retried by the next apply, exit 1), and the report and console say why.

use std::path::{Path, PathBuf};
use std::process::Output;

fn fault_engine() -> PathBuf {
    let bin = assert_cmd::cargo::cargo_bin("bench360");
    bin.parent().unwrap().join("examples/fault_engine")
}

fn bench(cache: &Path, args: &[&str]) -> Output {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("bench360"))
        .env("NO_COLOR", "1")
        .env(
            "BENCH360_DEVICE_LOCKS",
            cache.with_file_name("device-locks"),
        )
        .arg("--cache")
        .arg(cache)
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A sweep of 10 MMLU questions sent one at a time to the fault engine in `mode`.
fn sweep(dir: &Path, mode: &str, after: u32, extra: &str) -> PathBuf {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/mmlu");
    let weights = dir.join("none.gguf");
    std::fs::write(&weights, b"not used by the fault engine").unwrap();
    let p = dir.join("faults.kdl");
    std::fs::write(
        &p,
        format!(
            r#"sweep "faults" {{ seed 1; }}
defaults {{ warmup 0; request-timeout 2; max-tokens 8; }}
model "m" {{ path "{w}"; quantization "q4_1"; }}
engine "fault" {{
    kind "openai"
    binary "{bin}"
    args "--port" "{{port}}" "--mode" "{mode}" "--after" "{after}"
    startup-timeout 3
}}
task "mmlu" {{ kind "mmlu"; dataset "{data}"; samples 10; }}
scenario "single" {{ kind "single"; requests 10; {extra} }}
"#,
            w = weights.display(),
            bin = fault_engine().display(),
            data = data.display(),
        ),
    )
    .unwrap();
    p
}

fn records(cache: &Path) -> Vec<serde_json::Value> {
    std::fs::read_dir(cache.join("records"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

fn run_record(cache: &Path) -> serde_json::Value {
    records(cache)
        .into_iter()
        .find(|r| r["kind"] == "run")
        .expect("a run record")
}

/// Applies `mode`, expects exit 1 with the run failed for `cause`, its trace kept, the
/// report and console naming the cause, and the next plan retrying it.
fn failed_run(mode: &str, after: u32, cause: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let s = sweep(dir.path(), mode, after, "");
    let out = bench(&cache, &["apply", s.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{mode}: {}", text(&out));
    let run = run_record(&cache);
    assert_eq!(run["status"], "failed", "{mode}: {run}");
    let why = run["cause"].as_str().unwrap();
    assert!(why.contains("error budget"), "{mode}: {why}");
    assert!(why.contains(cause), "{mode}: {why}");
    // The trace is kept as evidence, whole.
    let key = run["key"].as_str().unwrap();
    assert!(run["objects"]["requests.parquet"]["size"].as_u64().unwrap() > 0);
    assert!(cache
        .join("objects")
        .join(key)
        .join("requests.parquet")
        .is_file());
    // And where it ran: the report places the failed repeat on its machine.
    let run_json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cache.join("objects").join(key).join("run.json")).unwrap(),
    )
    .unwrap();
    assert!(
        run_json["provenance"]["host"]["cores"].as_u64().unwrap() > 0,
        "{mode}: {run_json}"
    );
    assert!(text(&out).contains(cause), "{mode}: {}", text(&out));
    let md = std::fs::read_to_string(cache.join("reports/faults/report.md")).unwrap();
    assert!(md.contains("FAILED") && md.contains(cause), "{mode}: {md}");
    // Not cached: the next plan runs it again and says why.
    let plan = bench(&cache, &["plan", s.to_str().unwrap()]);
    assert!(
        text(&plan).contains("failed last time"),
        "{mode}: {}",
        text(&plan)
    );
}

#[test]
fn http_500_on_every_request_fails_the_run() {
    failed_run("500", 0, "HTTP 500");
}

#[test]
fn garbage_events_fail_the_run() {
    failed_run("garbage", 0, "unparseable stream event");
}

#[test]
fn a_connection_closed_mid_stream_fails_the_run() {
    failed_run("close-mid", 0, "10 of 10 requests failed");
}

#[test]
fn a_stalled_stream_times_out_and_fails_the_run() {
    failed_run("stall", 0, "10 of 10 requests failed");
}

#[test]
fn an_engine_that_exits_mid_run_fails_the_run_or_the_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let s = sweep(dir.path(), "exit-mid-run", 3, "");
    let out = bench(&cache, &["apply", s.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let run = run_record(&cache);
    assert_eq!(run["status"], "failed", "{run}");
    let why = run["cause"].as_str().unwrap();
    assert!(
        why.contains("exiting after 3 requests") || why.contains("error budget"),
        "{why}"
    );
}

#[test]
fn an_engine_that_never_gets_healthy_is_a_failed_cold_start() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let s = sweep(dir.path(), "never-healthy", 0, "");
    let out = bench(&cache, &["apply", s.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let cold = records(&cache)
        .into_iter()
        .find(|r| r["kind"] == "coldstart")
        .unwrap();
    assert_eq!(cold["status"], "failed");
    let why = cold["cause"].as_str().unwrap();
    assert!(why.contains("not healthy"), "{why}");
    // Its log tail (the engine's own line) is on the console.
    assert!(
        text(&out).contains("fault_engine: mode never-healthy"),
        "{}",
        text(&out)
    );
}

#[test]
fn failures_within_the_budget_leave_a_finished_run_with_its_error_rate() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    // Every 5th request fails: 2 of 10, within a 25% budget.
    let s = sweep(dir.path(), "flaky", 5, "max-error-rate 0.25;");
    let out = bench(&cache, &["apply", s.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(run_record(&cache)["status"], "finished");
    let md = std::fs::read_to_string(cache.join("reports/faults/report.md")).unwrap();
    assert!(md.contains("| 2 (20.0%) |"), "{md}");
    // The same faults over the default 5% budget fail the run.
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let s = sweep(dir.path(), "flaky", 5, "");
    let out = bench(&cache, &["apply", s.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("2 of 10 requests failed (20.0%, over the 5.0% error budget)"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_healthy_fault_engine_run_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let s = sweep(dir.path(), "ok", 0, "");
    let out = bench(&cache, &["apply", s.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(run_record(&cache)["status"], "finished");
}

/// A write that fails (here: past the file-size limit, EFBIG, as a full disk gives ENOSPC)
/// fails the node cleanly — its record says failed with the OS's reason, its temp folder is
/// gone — and the next apply with room completes with nothing lost.
#[test]
fn a_failed_write_fails_the_node_cleanly_and_the_next_apply_completes() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let s = sweep(dir.path(), "ok", 0, "");
    // Records (~3 KB) fit under 5 KB; the run's Parquet traces and the report do not.
    let script = format!(
        "trap '' XFSZ; ulimit -f 5; exec '{}' --cache '{}' apply '{}'",
        assert_cmd::cargo::cargo_bin("bench360").display(),
        cache.display(),
        s.display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .env("NO_COLOR", "1")
        .env(
            "BENCH360_DEVICE_LOCKS",
            cache.with_file_name("device-locks"),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let failed: Vec<serde_json::Value> = records(&cache)
        .into_iter()
        .filter(|r| r["status"] != "finished")
        .collect();
    assert!(!failed.is_empty(), "{}", text(&out));
    for r in &failed {
        assert_eq!(r["status"], "failed", "never left started: {r}");
        assert!(
            !r["cause"].as_str().unwrap_or("").contains("External:"),
            "{r}"
        );
    }
    let run = run_record(&cache);
    let why = run["cause"].as_str().unwrap_or("");
    assert!(
        why.starts_with("cannot write the run's Parquet traces: File too large"),
        "{run}"
    );
    let tmp: Vec<_> = std::fs::read_dir(cache.join("tmp"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(tmp.is_empty(), "temp folders left: {tmp:?}");
    // With room again: everything completes, and the cache verifies.
    let out = bench(&cache, &["apply", s.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(records(&cache).iter().all(|r| r["status"] == "finished"));
    let v = bench(&cache, &["verify"]);
    assert!(v.status.success(), "{}", text(&v));
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: stdout {:?}", String::from_utf8_lossy(&o.stdout)))
}

/// Scripting: `--json` for apply, status and report; `--quiet`; and the exit codes of report
/// and status, which say whether the sweep's runs are all there.
#[test]
fn json_output_and_exit_codes_for_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let s = sweep(dir.path(), "ok", 0, "");
    let s = s.to_str().unwrap();
    // Before anything ran: status and report say runs are missing.
    let st = bench(&cache, &["status", "--json", s]);
    assert_eq!(st.status.code(), Some(1), "{}", text(&st));
    assert!(json_of(&st)["plan"]["to_run"].as_u64().unwrap() > 0);
    let out = bench(&cache, &["apply", "--json", "--quiet", s]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v = json_of(&out);
    assert_eq!(v["exit_code"], 0);
    assert!(v["ran"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().starts_with("run ")));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains('✓'),
        "--quiet"
    );
    let st = bench(&cache, &["status", "--json", s]);
    assert_eq!(st.status.code(), Some(0), "{}", text(&st));
    assert_eq!(json_of(&st)["plan"]["to_run"], 0);
    let rep = bench(&cache, &["report", "--json", s]);
    assert_eq!(rep.status.code(), Some(0), "{}", text(&rep));
    let r = json_of(&rep);
    assert_eq!(r["complete"], true);
    assert_eq!(r["runs"][0]["ok"], 10, "{r}");

    // A failed run: apply, report and status all exit 1, and the JSON says why.
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let s = sweep(dir.path(), "500", 0, "");
    let s = s.to_str().unwrap();
    let out = bench(&cache, &["apply", "--json", s]);
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    assert!(
        v["failed"][0]["cause"]
            .as_str()
            .unwrap()
            .contains("error budget"),
        "{v}"
    );
    let rep = bench(&cache, &["report", "--json", s]);
    assert_eq!(rep.status.code(), Some(1), "{}", text(&rep));
    assert_eq!(json_of(&rep)["complete"], false);
    assert_eq!(bench(&cache, &["status", s]).status.code(), Some(1));
}

/// `compare`: two caches of the same sweep, a saved baseline, the regression gate, JSON.
#[test]
fn compare_matches_configurations_and_gates_regressions() {
    let dir = tempfile::tempdir().unwrap();
    let s = sweep(dir.path(), "ok", 0, "");
    let (ca, cb) = (dir.path().join("a"), dir.path().join("b"));
    for c in [&ca, &cb] {
        let out = bench(c, &["apply", "--quiet", s.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let side = |c: &Path| format!("{}={}", c.display(), s.display());
    let out = bench(
        &ca,
        &["compare", &side(&ca), &side(&cb), "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v = json_of(&out);
    let m = &v["matched"][0];
    assert!(m["label"].as_str().unwrap().contains("mmlu single"), "{v}");
    let ttft = m["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "ttft_p50")
        .unwrap();
    assert!(ttft["ci"].is_array(), "{ttft}");
    // Same answers on both sides: quality unchanged.
    let q = m["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "quality")
        .unwrap();
    assert_eq!(q["change"], 0.0, "{q}");
    // A baseline file stands for A; a gate any change crosses fails the comparison.
    let base = dir.path().join("base.json");
    let out = bench(
        &ca,
        &["compare", &side(&ca), "--save", base.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // `compare base.json SWEEP ARGS…` with B read from `cache`.
    let against_base = |cache: &Path, args: &[&str]| {
        let mut all = vec!["compare", base.to_str().unwrap(), s.to_str().unwrap()];
        all.extend_from_slice(args);
        bench(cache, &all)
    };
    let out = against_base(&cb, &["--fail-on", "ttft_p50>-100%"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("regression:"), "{}", text(&out));
    // The terminal table aligns its columns; --format markdown is a Markdown table.
    assert!(
        text(&out)
            .lines()
            .any(|l| l.trim_start().starts_with("ttft_p50 ")),
        "{}",
        text(&out)
    );
    let md = against_base(&cb, &["--format", "markdown"]);
    assert_eq!(md.status.code(), Some(0), "{}", text(&md));
    assert!(text(&md).contains("| ttft_p50 |"), "{}", text(&md));
    assert!(text(&md).contains("|---|---|---|---|---|"), "{}", text(&md));
    let out = against_base(&cb, &["--fail-on", "bogus>1%"]);
    assert_eq!(out.status.code(), Some(2));
    // A gate that could fire only on an improvement is bad input, naming the gate meant.
    let out = against_base(&cb, &["--fail-on", "tokens_per_s>+5%"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("`tokens_per_s<…`"), "{}", text(&out));
    // A gate never passes what it did not see: B's cache never ran the sweep.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = against_base(&empty, &["--fail-on", "ttft_p50>+5%", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v = json_of(&out);
    let unjudged = v["unjudged"].as_array().unwrap();
    assert!(
        unjudged[0]
            .as_str()
            .unwrap()
            .contains("mmlu single: no finished run of this configuration in B"),
        "{v}"
    );
    assert!(
        unjudged
            .iter()
            .any(|u| u.as_str().unwrap().contains("judged no configuration")),
        "{v}"
    );
    assert!(v["broken"].as_array().unwrap().is_empty(), "{v}");

    // The baseline keeps the machine of each run; B on the same machine: nothing said.
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    let machine = &saved["runs"][0]["machine"];
    let (gpus, kernel) = (
        machine["GPUs"].as_str().unwrap(),
        machine["kernel"].as_str().unwrap(),
    );
    let gate = ["--fail-on", "ttft_p50>+1000%", "--format", "json"];
    let out = against_base(&cb, &gate);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json_of(&out)["matched"][0]["machine"]["state"], "same");
    assert!(!text(&out).contains("note:"), "{}", text(&out));
    // A baseline from other hardware: no gate judges it, even one that any change fires (exit
    // 1, `unjudged`, nothing `broken`), unless --across-machines.
    let mut other = saved.clone();
    for r in other["runs"].as_array_mut().unwrap() {
        r["machine"]["GPUs"] = "Test GPU ×3".into();
        r["machine"]["kernel"] = "6.18.44-other".into();
    }
    std::fs::write(&base, other.to_string()).unwrap();
    let fires = ["--fail-on", "ttft_p50>-100%", "--format", "json"];
    let out = against_base(&cb, &fires);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v = json_of(&out);
    let u = v["unjudged"][0].as_str().unwrap();
    let said =
        format!("machines differ: GPUs: Test GPU ×3 → {gpus}; kernel: 6.18.44-other → {kernel}");
    assert!(u.contains(&said), "{v}");
    assert!(u.contains("--across-machines"), "{v}");
    assert!(v["broken"].as_array().unwrap().is_empty(), "{v}");
    let m = &v["matched"][0]["machine"];
    assert_eq!(m["state"], "differs", "{v}");
    assert_eq!(m["fields"][0]["field"], "GPUs", "{v}");
    assert_eq!(m["fields"][0]["hardware"], true, "{v}");
    let mut across = fires.to_vec();
    across.push("--across-machines");
    let out = against_base(&cb, &across);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v = json_of(&out);
    assert!(!v["broken"].as_array().unwrap().is_empty(), "{v}");
    assert!(v["unjudged"].as_array().unwrap().is_empty(), "{v}");
    assert!(text(&out).contains("note: ") && text(&out).contains(&said));
    // The terminal table names the other hardware under the configuration.
    let out = against_base(&cb, &[]);
    assert!(text(&out).contains(&format!("  {said}")), "{}", text(&out));
    // A baseline saved before compare kept machines: said, and judged.
    for r in other["runs"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("machine");
    }
    std::fs::write(&base, other.to_string()).unwrap();
    let out = against_base(&cb, &gate);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        json_of(&out)["matched"][0]["machine"]["side"],
        "A",
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains(
            "A did not record the machine it ran on (saved or recorded before bench360 kept it)"
        ),
        "{}",
        text(&out)
    );
}
