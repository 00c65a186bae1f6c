//! Synthetic prompts of exact token counts and the ad-hoc `bench360 run`, on the real
//! llama-server: every request's `usage.prompt_tokens` (the server's own count) equals its
//! target, for fixed, uniform, normal and histogram lengths, a shared prefix, multi-turn
//! conversations and plain completions; with `ignore-eos` (each task's own here), every
//! completion is exactly its drawn output length, and requests.parquet says what cap each
//! request was sent with.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::{Array, BooleanArray, Int64Array, UInt32Array, UInt64Array};
use common::{bench, records, text};

/// One request of a run as requests.parquet has it.
struct Req {
    sample: String,
    prompt: Option<u64>,
    completion: Option<u64>,
    /// `request_max_tokens`: the cap this request was sent with, where not the run's.
    cap: Option<u64>,
    ok: bool,
}

/// Every request of a run.
fn requests(cache: &Path, key: &str) -> Vec<Req> {
    let f = std::fs::File::open(cache.join("objects").join(key).join("requests.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap();
    let int = |a: &dyn Array, i: usize| -> Option<u64> {
        if a.is_null(i) {
            return None;
        }
        let any = a.as_any();
        if let Some(x) = any.downcast_ref::<Int64Array>() {
            return Some(x.value(i) as u64);
        }
        if let Some(x) = any.downcast_ref::<UInt64Array>() {
            return Some(x.value(i));
        }
        if let Some(x) = any.downcast_ref::<UInt32Array>() {
            return Some(u64::from(x.value(i)));
        }
        if let Some(x) = any.downcast_ref::<arrow_array::Int32Array>() {
            return Some(x.value(i) as u64);
        }
        panic!("unexpected column type {:?}", a.data_type())
    };
    let mut out = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let col = |n: &str| {
            b.column_by_name(n)
                .unwrap_or_else(|| panic!("no column {n}"))
        };
        let ok = col("ok").as_any().downcast_ref::<BooleanArray>().unwrap();
        let ids = col("sample_id")
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        for i in 0..b.num_rows() {
            out.push(Req {
                sample: ids.value(i).to_string(),
                prompt: int(col("prompt_tokens").as_ref(), i),
                completion: int(col("completion_tokens").as_ref(), i),
                cap: int(col("request_max_tokens").as_ref(), i),
                ok: ok.value(i),
            });
        }
    }
    out
}

/// The run's prompts.jsonl, one value per line.
fn prompts_jsonl(cache: &Path, key: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(cache.join("objects").join(key).join("prompts.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The run's prompts.jsonl: sample id → (target prompt tokens, output tokens, turns sent).
fn targets(cache: &Path, key: &str) -> BTreeMap<String, (u64, u64, usize)> {
    prompts_jsonl(cache, key)
        .into_iter()
        .map(|v| {
            (
                v["sample_id"].as_str().unwrap().to_string(),
                (
                    v["target_prompt_tokens"].as_u64().unwrap(),
                    v["output_tokens"].as_u64().unwrap(),
                    v["history"].as_array().map_or(0, Vec::len),
                ),
            )
        })
        .collect()
}

fn check_exact(cache: &Path, run: &serde_json::Value) -> usize {
    let key = run["key"].as_str().unwrap();
    let t = targets(cache, key);
    let reqs = requests(cache, key);
    assert!(!reqs.is_empty(), "{run}");
    for Req {
        sample,
        prompt,
        completion,
        cap,
        ok,
    } in &reqs
    {
        assert!(ok, "{run}: request of sample {sample} failed");
        let (target, output, _) = t[sample.as_str()];
        // A task without output-tokens sends the run's max-tokens (null in the column).
        let own_cap = !run["label"].as_str().unwrap().contains("completion");
        assert_eq!(
            *cap,
            own_cap.then_some(output),
            "{}: sample {sample}: requests.parquet's request_max_tokens",
            run["label"]
        );
        assert_eq!(
            *prompt,
            Some(target),
            "{}: sample {sample}: server counted {prompt:?} prompt tokens, target {target}",
            run["label"]
        );
        assert_eq!(
            *completion,
            Some(output),
            "{}: sample {sample}: ignore-eos output",
            run["label"]
        );
    }
    reqs.len()
}

#[test]
fn synthetic_prompt_and_completion_tokens_are_exact_on_llama_server() {
    let e = common::engine();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sweep = dir.path().join("synthetic.kdl");
    std::fs::write(
        &sweep,
        format!(
            r#"sweep "synthetic" {{
    seed 11
}}
defaults {{
    max-tokens 8
    warmup 1
    request-timeout 60
}}
{blocks}
task "fixed" {{
    kind "synthetic"
    samples 6
    input-tokens 200
    output-tokens 5
    system "You are terse."
    ignore-eos #true
}}
task "uniform-prefix" {{
    kind "synthetic"
    samples 8
    input-tokens "uniform" min=90 max=300
    output-tokens "histogram" "3:1" "9:1"
    shared-prefix 32
    prefix-groups 2
    ignore-eos #true
}}
task "normal-turns" {{
    kind "synthetic"
    samples 3
    input-tokens "normal" mean=60 stddev=15 min=30 max=120
    output-tokens 6
    turns 3
    ignore-eos #true
}}
task "completion" {{
    kind "synthetic"
    samples 4
    input-tokens 77
    mode "completion"
    ignore-eos #true
}}
scenario "c4" {{
    kind "concurrency"
    concurrency 4
}}
"#,
            blocks = common::llama_blocks(&e, 4)
        ),
    )
    .unwrap();
    let s = sweep.to_str().unwrap();
    let out = bench(&cache, &["apply", s]);
    assert!(out.status.success(), "{}", text(&out));
    let runs: Vec<serde_json::Value> = records(&cache)
        .into_iter()
        .filter(|r| r["kind"] == "run")
        .collect();
    assert_eq!(runs.len(), 4, "{runs:?}");
    let mut total = 0;
    for r in &runs {
        total += check_exact(&cache, r);
    }
    // 6 + 8 + 3 conversations × 3 turns + 4.
    assert_eq!(total, 27);

    // Multi-turn: turn t carries t−1 earlier turns; shared prefixes are the same text.
    let by_label = |part: &str| {
        runs.iter()
            .find(|r| r["label"].as_str().unwrap().contains(part))
            .unwrap()["key"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let turns = targets(&cache, &by_label("normal-turns"));
    let sent: Vec<usize> = turns.values().map(|t| t.2).collect();
    assert_eq!(sent, [0, 1, 2, 0, 1, 2, 0, 1, 2]);
    let prompts: Vec<String> = std::fs::read_to_string(
        cache
            .join("objects")
            .join(by_label("uniform-prefix"))
            .join("prompts.jsonl"),
    )
    .unwrap()
    .lines()
    .map(|l| {
        serde_json::from_str::<serde_json::Value>(l).unwrap()["prompt"]
            .as_str()
            .unwrap()
            .to_string()
    })
    .collect();
    let common_len =
        |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    // Same group (0 and 2): a long common start; other group (0 and 1): little.
    assert!(common_len(&prompts[0], &prompts[2]) >= 60, "{prompts:?}");
    assert!(common_len(&prompts[0], &prompts[1]) < 20, "{prompts:?}");

    // Synthetic tasks have no quality: scored as unscorable, and the sweep still reports.
    let report = bench(&cache, &["report", s]);
    assert!(report.status.success(), "{}", text(&report));
    // The server counted every prompt at its target: no prompt-length warning. With one
    // target of prompts.jsonl moved by 3 tokens — what an engine whose tokenizer endpoint
    // counts otherwise than it bills would leave — the report names the run, in the terminal
    // and in report.md.
    assert!(
        !text(&report).contains("prompt lengths:"),
        "{}",
        text(&report)
    );
    let fixed = cache
        .join("objects")
        .join(by_label(" fixed "))
        .join("prompts.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&fixed)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if i == 0 {
                v["target_prompt_tokens"] =
                    (v["target_prompt_tokens"].as_u64().unwrap() + 3).into();
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&fixed, lines.join("\n") + "\n").unwrap();
    let report = bench(&cache, &["report", s]);
    assert!(report.status.success(), "{}", text(&report));
    let t = text(&report);
    assert!(
        t.contains("prompt lengths: ") && t.contains("fixed") && t.contains("the server counted 1 of 6 prompts at another length than their target (largest difference -3 tokens"),
        "{t}"
    );
    let md =
        std::fs::read_to_string(cache.join("reports").join("synthetic").join("report.md")).unwrap();
    assert!(md.contains("the server counted 1 of 6 prompts"), "{md}");

    // Changing the length distribution reruns only that task's run and score.
    std::fs::write(
        &sweep,
        std::fs::read_to_string(&sweep)
            .unwrap()
            .replace("input-tokens 77", "input-tokens 78"),
    )
    .unwrap();
    let plan = common::plan_json(&cache, &sweep);
    let will: Vec<String> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"]["status"] == "will-run" && n["kind"] == "run")
        .map(|n| n["label"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(will.len(), 1, "{will:?}");
    assert!(will[0].contains("completion"), "{will:?}");
}

/// `bench360 run --url …` against a llama-server started by the test: an implicit sweep in
/// the cache, the same records, Parquet and report as any sweep; a second identical command
/// finds everything cached.
#[test]
fn run_measures_a_server_at_a_url_without_a_sweep_file() {
    let e = common::engine();
    let port = common::free_port();
    let mut server = common::ServerGuard(
        std::process::Command::new(&e.server)
            .args([
                "-m",
                e.gguf.to_str().unwrap(),
                "--host",
                "127.0.0.1",
                "--port",
            ])
            .arg(port.to_string())
            .args([
                "--parallel",
                "4",
                "--ctx-size",
                "4096",
                "--threads",
                "1",
                "--metrics",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    common::wait_healthy(port);
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let url = format!("http://127.0.0.1:{port}");
    let args = [
        "run",
        "--url",
        &url,
        "--model",
        "smollm2",
        "--kind",
        "llama.cpp",
        "--concurrency",
        "4",
        "--requests",
        "12",
        "--input-tokens",
        "128",
        "--output-tokens",
        "6",
        "--prompts",
        "6",
        "--name",
        "adhoc",
        "--json",
    ];
    let out = bench(&cache, &args);
    assert!(out.status.success(), "{}", text(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["failed"].as_array().map_or(0, Vec::len),
        0,
        "{summary}"
    );
    let sweep = cache.join("adhoc/adhoc.kdl");
    assert!(sweep.is_file());
    // The implicit sweep is an ordinary sweep file: validate and plan read it.
    let v = bench(&cache, &["validate", sweep.to_str().unwrap()]);
    assert!(v.status.success(), "{}", text(&v));
    let run = records(&cache)
        .into_iter()
        .find(|r| r["kind"] == "run")
        .unwrap();
    assert_eq!(check_exact(&cache, &run), 12);
    assert!(cache.join("reports/adhoc/report.md").is_file());

    // The same command again: nothing runs.
    let again = bench(&cache, &args);
    assert!(again.status.success(), "{}", text(&again));
    let s: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(s["ran"].as_array().map_or(0, Vec::len), 0, "{s}");

    // A bad load is refused before anything is written.
    let bad = bench(&cache, &["run", "--url", &url, "--model", "m"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("--concurrency"), "{}", text(&bad));
    server.0.kill().ok();
}

/// `fresh-prompts`: two runs of one synthetic task on one start send different text, so the
/// engine's prefix cache serves the later one little of it; without it the later run sends the
/// earlier run's prompts again and the cache serves nearly all of them (llama-server's own
/// counter, as the report reads it).
#[test]
fn fresh_prompts_keep_a_run_off_the_prompts_of_the_run_before() {
    let e = common::engine();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sweep = dir.path().join("fresh.kdl");
    let task = |name: &str, fresh: &str| {
        format!(
            "task \"{name}\" {{\n    kind \"synthetic\"\n    samples 6\n    input-tokens 96\n    output-tokens 2\n    ignore-eos #true\n{fresh}}}\n"
        )
    };
    let sweep_text = format!(
        "sweep \"fresh\" {{\n    seed 5\n}}\ndefaults {{\n    warmup 1\n    request-timeout 60\n}}\n{}\n{}{}{}",
        common::llama_blocks(&e, 2),
        task("same", ""),
        task("fresh", "    fresh-prompts #true\n"),
        "scenario \"one\" {\n    kind \"single\"\n    requests 6\n}\nscenario \"two\" {\n    kind \"batch\"\n    batch-size 2\n    batches 3\n}\n",
    );
    std::fs::write(&sweep, sweep_text).unwrap();
    let out = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let key_of = |label: &str| -> String {
        records(&cache)
            .into_iter()
            .find(|r| r["kind"] == "run" && r["label"].as_str().unwrap().starts_with(label))
            .unwrap_or_else(|| panic!("no record {label}"))["key"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let prompts = |label: &str| -> BTreeMap<String, String> {
        prompts_jsonl(&cache, &key_of(label))
            .into_iter()
            .map(|v| {
                (
                    v["sample_id"].as_str().unwrap().to_string(),
                    v["prompt"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let run = |task: &str, scenario: &str| format!("run smollm2:q4_1@llama {task} {scenario}");
    let same = (prompts(&run("same", "one")), prompts(&run("same", "two")));
    assert_eq!(same.0.len(), 6);
    assert_eq!(
        same.0, same.1,
        "without fresh-prompts every run sends the same text"
    );
    let fresh = (prompts(&run("fresh", "one")), prompts(&run("fresh", "two")));
    for (id, p) in &fresh.0 {
        assert_ne!(Some(p), fresh.1.get(id), "{id}: the same text in both runs");
        assert!(
            !same.0.values().any(|s| s == p),
            "{id}: the task without it wrote it too"
        );
    }
    // What the engine's prefix cache served: the later run of `same` nearly all its prompt
    // tokens, either run of `fresh` at most the chat template's and the words that happen to
    // start alike.
    let report = bench(&cache, &["report", sweep.to_str().unwrap(), "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let share = |label: &str| -> f64 {
        json["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["label"].as_str().unwrap_or("").starts_with(label))
            .unwrap_or_else(|| panic!("no row {label}: {json}"))["prefix_cache_share"]
            .as_f64()
            .unwrap_or_else(|| panic!("{label}: no prefix_cache_share: {json}"))
    };
    let label = |task: &str, scenario: &str| format!("smollm2:q4_1@llama {task} {scenario}");
    let most = |task: &str| share(&label(task, "one")).max(share(&label(task, "two")));
    assert!(most("same") >= 0.8, "same: {}", most("same"));
    assert!(most("fresh") <= 0.6, "fresh: {}", most("fresh"));
}
