//! Chat and reasoning models on the real llama-server: its reasoning parser
//! (`--reasoning-format deepseek`, with a chat template that knows `reasoning_content`) returns
//! a `<think>…</think>` block apart, which a grammar forces the model to write before its
//! answer. bench360 never scores that reasoning, times the first answer token apart from the
//! first token, reads the final answer of `reason N`, and sends shots as chat turns with
//! `fewshot-as-turns`.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

#[test]
fn reasoning_is_timed_apart_and_never_scored() {
    let e = engine();
    let port = free_port();
    let template =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reasoning/chatml-think.jinja");
    let template = template.to_str().unwrap();
    let _server = start_llama_server(
        &e,
        port,
        &[
            "--ctx-size",
            "4096",
            "--parallel",
            "1",
            "--threads",
            "2",
            "--jinja",
            "--reasoning-format",
            "deepseek",
            "--chat-template-file",
            template,
        ],
    );

    // The reasoning states a lowercase letter as "the answer" (which the MMLU reader would
    // take, were it read); the answer that follows names one of B, C or D.
    let grammar = r#"root ::= \"<think>the answer is a because \" [a-z]{4,12} \"</think>\" \"Final answer: \" [BCD]"#;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sweep = dir.path().join("reasoning.kdl");
    std::fs::write(
        &sweep,
        format!(
            r#"sweep "reasoning" {{
    seed 26
}}
defaults {{
    temperature 0.0
    max-tokens 8
    warmup 1
    extra-body {{
        grammar "{grammar}"
    }}
}}
model "smollm2-135m" {{
    path "{gguf}"
}}
engine "llama" {{
    kind "llama.cpp"
    launcher "endpoint"
    url "http://127.0.0.1:{port}"
    startup-timeout 60
}}
task "mmlu-reason" {{
    kind "mmlu"
    dataset "{data}/mmlu"
    samples 12
    reason 48
}}
task "mmlu-turns" {{
    kind "mmlu"
    dataset "{data}/mmlu"
    samples 6
    shots 2
    fewshot-as-turns #true
    mode "chat"
}}
scenario "single" {{
    kind "single"
}}
"#,
            gguf = e.gguf.display(),
            data = datasets().display(),
        ),
    )
    .unwrap();
    let out = apply_sweep(&cache, &sweep);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let object = |kind: &str, label: &str| object_of(&cache, kind, label);

    // Reason, then answer: 8 + 48 tokens asked, the reasoning apart, the answer read after
    // "Final answer:" and never from the reasoning's "the answer is a".
    let run = object("run", "mmlu-reason single");
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(run_json["columns"]["max_tokens"], 56, "{run_json}");
    let outputs: Vec<serde_json::Value> = std::fs::read_to_string(run.join("outputs.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(outputs.len(), 12);
    for o in &outputs {
        let text = o["output"].as_str().unwrap();
        assert!(text.starts_with("Final answer: "), "{o}");
        assert!(
            !text.contains("think") && !text.contains("the answer is a"),
            "{o}"
        );
    }
    let check = Command::new(python())
        .arg("-c")
        .arg(
            r#"
import json, sys
import pyarrow.parquet as pq
run, score = sys.argv[1], sys.argv[2]
req = pq.read_table(run + "/requests.parquet").to_pylist()
sc = pq.read_table(score + "/scores.parquet").to_pylist()
print(json.dumps({
    "reasoned_first": all(r["first_reasoning_ns"] is not None and r["first_token_ns"] is not None
                          and r["first_reasoning_ns"] < r["first_token_ns"] for r in req),
    "ttfa_after_ttft": all(r["ttfa_ms"] > r["ttft_ms"] for r in req),
    "ttft_is_first_reasoning": all(abs(r["ttft_ms"] - (r["first_reasoning_ns"] - r["sent_ns"]) / 1e6) < 1e-6 for r in req),
    "extracted": sorted({s["extracted"] for s in sc}),
    "parsed": all(s["parsed"] for s in sc),
}))
"#,
        )
        .arg(&run)
        .arg(object("score", "mmlu-reason single"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check));
    let v: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(v["reasoned_first"], true, "{v}");
    assert_eq!(v["ttfa_after_ttft"], true, "{v}");
    assert_eq!(v["ttft_is_first_reasoning"], true, "{v}");
    assert_eq!(v["parsed"], true, "{v}");
    for x in v["extracted"].as_array().unwrap() {
        assert!(["B", "C", "D"].contains(&x.as_str().unwrap()), "{v}");
    }
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats["reasoning_requests"], 12, "{stats}");
    assert!(
        stats["ttfa_ms"]["p50"].as_f64().unwrap() > stats["ttft_ms"]["p50"].as_f64().unwrap(),
        "{stats}"
    );
    // llama-server does not say how many tokens were reasoning: unknown, not zero.
    assert!(stats["reasoning_tokens"].is_null(), "{stats}");
    let report = std::fs::read_to_string(cache.join("reports/reasoning/report.md")).unwrap();
    assert!(report.contains("## Reasoning"), "{report}");
    assert!(
        report.contains("12 of 12 answers came after reasoning"),
        "{report}"
    );
    assert!(
        report.contains("the engine did not report how many output tokens were reasoning"),
        "{report}"
    );

    // Shots as turns: two earlier user/assistant turns, the question alone in the last one.
    let run = object("run", "mmlu-turns single");
    let prompts = std::fs::read_to_string(run.join("prompts.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(prompts.lines().next().unwrap()).unwrap();
    let history = first["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{first}");
    assert!(
        history[0][0]
            .as_str()
            .unwrap()
            .starts_with("The following is a multiple choice question about"),
        "{first}"
    );
    assert!(
        ["A", "B", "C", "D"].contains(&history[0][1].as_str().unwrap()),
        "{first}"
    );
    let prompt = first["prompt"].as_str().unwrap();
    assert!(
        !prompt.contains("The following is") && prompt.contains("Answer:"),
        "{first}"
    );
    // The server saw the turns: the prompt it counted holds far more than the last message.
    let check = Command::new(python())
        .arg("-c")
        .arg(
            r#"
import json, sys, urllib.request
import pyarrow.parquet as pq
port, prompt, run = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request(f"http://127.0.0.1:{port}/tokenize", data=json.dumps({"content": prompt}).encode(),
                             headers={"Content-Type": "application/json"})
alone = len(json.load(urllib.request.urlopen(req, timeout=30))["tokens"])
first = min(pq.read_table(run + "/requests.parquet").to_pylist(), key=lambda r: r["request_id"])
print(json.dumps({"alone": alone, "counted": first["prompt_tokens"], "sample_id": first["sample_id"]}))
"#,
        )
        .arg(port.to_string())
        .arg(prompt)
        .arg(&run)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check));
    let v: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(v["sample_id"], first["sample_id"], "{v}");
    assert!(
        v["counted"].as_u64().unwrap() > 2 * v["alone"].as_u64().unwrap(),
        "{v}"
    );
}
