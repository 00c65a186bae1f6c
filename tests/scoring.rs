//! `scoring "logprobs"` on the real llama-server: MMLU read from the options'
//! log-probabilities at the answer position, checked from outside by a script that rebuilds
//! lm-evaluation-harness's prompt itself and asks the same server without streaming.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

#[test]
fn logprobs_scoring_chooses_what_the_server_finds_most_likely() {
    let e = engine();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sweep = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps/quickstart.kdl");
    let apply = |extra: &[&str]| {
        Command::new(assert_cmd::cargo::cargo_bin("bench360"))
            .env("NO_COLOR", "1")
            .env(
                "BENCH360_DEVICE_LOCKS",
                cache.with_file_name("device-locks"),
            )
            .env("BENCH360_LLAMA_SERVER", &e.server)
            .env("BENCH360_SMOLLM2_GGUF", &e.gguf)
            .arg("--cache")
            .arg(&cache)
            .arg("apply")
            .arg(&sweep)
            .args(["--only", "task=mmlu", "--only", "scenario=single"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = apply(&["--set", "task.mmlu.scoring=logprobs"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // The report says how quality was read, and that the timing is a prefill's.
    let report = std::fs::read_to_string(cache.join("reports/quickstart/report.md")).unwrap();
    assert!(report.contains("`scoring \"logprobs\"`"), "{report}");
    assert!(!report.contains("stopped at max-tokens"), "{report}");

    let recs = records(&cache);
    let object = |kind: &str| {
        let r = recs
            .iter()
            .find(|r| r["kind"] == kind && r["label"].as_str().unwrap().contains("mmlu single"))
            .unwrap_or_else(|| panic!("no {kind} record"));
        cache.join("objects").join(r["key"].as_str().unwrap())
    };
    let (run, score) = (object("run"), object("score"));
    // Every request carried the answer position's log-probabilities.
    let outputs = std::fs::read_to_string(run.join("outputs.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = outputs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 10, "{outputs}");
    assert!(
        lines.iter().all(|o| o["top_logprobs"].is_string()),
        "{outputs}"
    );

    // The same server, asked from outside: the same choice on every item.
    let port = free_port();
    let _server = start_llama_server(&e, port, &["--ctx-size", "1024", "--threads", "2"]);
    let check = Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/logprobs_reference.py"))
        .arg(port.to_string())
        .arg(datasets().join("mmlu"))
        .arg(run.join("outputs.jsonl"))
        .arg(score.join("scores.parquet"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check));
    let v: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(v["items"].as_u64(), Some(lines.len() as u64), "{v}");
    assert_eq!(v["agree"], v["items"], "{v}");

    // Constrained: the engine's grammar forces every answer to one label.
    let out = apply(&["--set", "task.mmlu.scoring=constrained"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = std::fs::read_to_string(cache.join("reports/quickstart/report.md")).unwrap();
    assert!(report.contains("`scoring \"constrained\"`"), "{report}");
    let recs = records(&cache);
    let run = recs
        .iter()
        .filter(|r| r["kind"] == "run" && r["label"].as_str().unwrap().contains("mmlu single"))
        .max_by_key(|r| r["started_at"].as_str().unwrap().to_string())
        .unwrap();
    let answers = output_texts(&cache.join("objects").join(run["key"].as_str().unwrap()));
    assert!(answers.len() >= 10, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|a| ["A", "B", "C", "D"].contains(&a.as_str())),
        "{answers:?}"
    );

    // Generative scoring is another metric and another prompt: its nodes run apart.
    let out = apply(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        ran(&out)
            .iter()
            .any(|l| l.contains("run ") && l.contains("mmlu single")),
        "{}",
        text(&out)
    );
}

/// A custom `choice` task with declared options, scored from log-probabilities and with the
/// engine's grammar forcing one of them.
#[test]
fn custom_choice_tasks_score_their_declared_options() {
    let e = engine();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sweep = dir.path().join("choices.kdl");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps/custom/answerable.jsonl");
    let task = |name: &str, scoring: &str| {
        format!(
            r##"task "{name}" {{
    kind "custom"
    dataset "{data}"
    id "id"
    template #"""
        Read the paragraph and say whether it answers the question.

        Paragraph: {{{{ context }}}}
        Question: {{{{ question }}}}
        Answer (yes or no):
        """#
    reference "answerable"
    metrics "choice"
    choices "yes" "no"
    scoring "{scoring}"
    samples 12
}}
"##,
            data = data.display()
        )
    };
    std::fs::write(
        &sweep,
        format!(
            r#"sweep "choices" {{
    seed 3
}}
defaults {{
    temperature 0.0
    warmup 1
}}
model "smollm2-135m" {{
    path "{gguf}"
}}
engine "llama" {{
    kind "llama.cpp"
    binary "{server}"
    ctx-size 2048
    args "--threads" "2"
}}
{lp}{constrained}scenario "single" {{
    kind "single"
}}
"#,
            gguf = e.gguf.display(),
            server = e.server.display(),
            lp = task("yn-lp", "logprobs"),
            constrained = task("yn-constrained", "constrained"),
        ),
    )
    .unwrap();
    let out = apply_sweep(&cache, &sweep);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let object = |kind: &str, label: &str| object_of(&cache, kind, label);
    // Log-probabilities: the choice is the option most likely at the answer position, as a
    // reading written here of the recorded top 20 finds it.
    let check = Command::new(python())
        .arg("-c")
        .arg(
            r#"
import json, sys
import pyarrow.parquet as pq
outputs = [json.loads(l) for l in open(sys.argv[1] + "/outputs.jsonl")]
scores = {s["request_id"]: s for s in pq.read_table(sys.argv[2] + "/scores.parquet").to_pylist()}
agree, listed = 0, 0
for o in outputs:
    best = {}
    for tok, lp in json.loads(o["top_logprobs"]):
        if tok.strip() in ("yes", "no"):
            best[tok.strip()] = max(best.get(tok.strip(), -1e9), lp)
    ours = max(("yes", "no"), key=lambda k: best.get(k, -1e9)) if best else None
    listed += bool(best)
    agree += ours == scores[o["request_id"]]["extracted"]
print(json.dumps({"items": len(outputs), "agree": agree, "listed": listed}))
"#,
        )
        .arg(object("run", "yn-lp single"))
        .arg(object("score", "yn-lp single"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check));
    let v: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(v["items"], 12, "{v}");
    assert_eq!(v["agree"], 12, "{v}");
    assert!(v["listed"].as_u64().unwrap() >= 6, "{v}");
    // Constrained: every answer is exactly one of the options, and read as that option.
    let answers = output_texts(&object("run", "yn-constrained single"));
    assert_eq!(answers.len(), 12);
    assert!(
        answers.iter().all(|a| a == "yes" || a == "no"),
        "{answers:?}"
    );
    let metrics: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(object("score", "yn-constrained single").join("metrics.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(metrics["unparsed_rate"], 0.0, "{metrics}");
}
