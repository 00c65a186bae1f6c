//! lm-evaluation-harness (0.4.13, pinned by hash: scripts/setup-lm-eval.sh) beside bench360's
//! `scoring "logprobs"` on one real llama-server: the harness, run by scripts/lm-eval-mmlu.py
//! on the items bench360 asked (a local task, no hub), must choose the same option as bench360
//! on every item, zero-shot and five-shot.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

#[test]
fn lm_eval_chooses_the_options_bench360_reads_from_log_probabilities() {
    let e = engine();
    let harness_python = setting(
        "lm-eval.env",
        "BENCH360_LM_EVAL_PYTHON",
        "scripts/setup-lm-eval.sh",
    );
    let port = free_port();
    // One slot and no prompt cache, so that every prompt is evaluated alone and whole: the
    // harness and bench360 see the same logits for the same text (with the cache, a prompt
    // whose prefix was cached is evaluated in other batch splits, and two labels 0.016 nats
    // apart swapped order once). 2048 tokens hold every five-shot prompt of the sample.
    let _server = start_llama_server(
        &e,
        port,
        &[
            "--ctx-size",
            "2048",
            "--parallel",
            "1",
            "--threads",
            "2",
            "--no-cache-prompt",
        ],
    );

    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sweep = dir.path().join("reference.kdl");
    std::fs::write(
        &sweep,
        format!(
            r#"sweep "reference" {{
    seed 25
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
    launcher "endpoint"
    url "http://127.0.0.1:{port}"
    startup-timeout 60
}}
task "mmlu" {{
    kind "mmlu"
    dataset "{data}/mmlu"
    samples 30
    scoring "logprobs"
}}
task "mmlu-5shot" {{
    kind "mmlu"
    dataset "{data}/mmlu"
    samples 20
    shots 5
    scoring "logprobs"
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

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/lm-eval-mmlu.py");
    for (label, shots, items) in [("mmlu single", "0", 30), ("mmlu-5shot single", "5", 20)] {
        let check = Command::new(&harness_python)
            .arg(&script)
            .arg("--cache")
            .arg(&cache)
            .args(["--label", label, "--shots", shots])
            .arg("--url")
            .arg(format!("http://127.0.0.1:{port}/v1/completions"))
            .arg("--dataset")
            .arg(datasets().join("mmlu"))
            .arg("--work")
            .arg(dir.path().join(format!("harness-{shots}")))
            .output()
            .unwrap();
        assert!(check.status.success(), "{label}: {}", text(&check));
        let v: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
        assert_eq!(v["items"].as_u64(), Some(items), "{label}: {v}");
        // Every item: the same label, and so the same accuracy.
        assert_eq!(v["agree"], v["items"], "{label}: {v}");
        assert_eq!(
            v["accuracy"]["bench360"], v["accuracy"]["harness"],
            "{label}: {v}"
        );
    }
}
