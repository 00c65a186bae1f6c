//! bench360's answer on the committed H200 RQ1 data (docs/results/h200-rq1/: every run of
//! `sweeps/gpu-rq1.kdl`, the 1.5B in bf16 failing to start under vLLM's memory fraction): the
//! report, rendered here from that cache alone, reads every run recorded there (two engine
//! blocks share one binary, so one pull record under the other block's label), names the
//! out-of-memory error as the failure's cause, and judges the memory budget on each
//! deployment's peak over its runs, not on the run at hand.

mod common;

use std::path::Path;

use common::*;

fn report(cache: &Path, set: &[&str]) -> (String, String) {
    let sweep = gpu_sweep("gpu-rq1", cache.parent().unwrap());
    let mut cmd = assert_cmd::Command::cargo_bin("bench360").unwrap();
    cmd.env("NO_COLOR", "1")
        .env("BENCH360_LLAMA_SERVER", "/gpu-machine/llama-server")
        .env(
            "BENCH360_QWEN2_5_CODER_1_5B_GGUF",
            "/gpu-machine/qwen-1.5b.gguf",
        )
        .arg("--cache")
        .arg(cache)
        .arg("report")
        .arg(&sweep);
    for s in set {
        cmd.arg("--set").arg(s);
    }
    let out = cmd.output().unwrap();
    let md = std::fs::read_to_string(cache.join("reports/gpu-rq1/report.md")).unwrap();
    (text(&out), md)
}

#[test]
fn the_report_on_the_rq1_data_keeps_to_the_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let cache = unpack_results("h200-rq1", dir.path());
    let (terminal, md) = report(&cache, &[]);
    // All 25 runs, the GGUF deployment's too: its pull was recorded as `pull vllm`.
    assert!(
        md.contains("*Read from elsewhere:* 25 run(s)"),
        "{}",
        &md[..400]
    );
    // The bf16 1.5B did not start, and the answer says why in one line.
    assert!(
        md.contains("- `qwen2.5-coder-1.5b:default@vllm mmlu quality` excluded: failed: engine failed to start: engine exited during startup (exit status: 1) — ValueError: To serve at least one request with the model's max seq len (4096), (0.11 GiB KV cache is needed, which is larger than the available KV cache memory (0.04 GiB)."),
        "{md}"
    );
    // FP8's Spider run came first and read 4.8 GiB; its deployment reached 5.6 GiB.
    assert!(
        md.contains("- `qwen2.5-coder-1.5b:fp8@vllm spider quality` excluded: misses the SLO: GPU memory 5.6 GiB (its deployment's peak, in `qwen2.5-coder-1.5b:fp8@vllm cnn quality`) > 5 GiB"),
        "{md}"
    );
    // Within 5 GiB only llama.cpp on the Q4_K_M GGUF remains.
    for task in ["mmlu", "squad", "cnn", "spider"] {
        assert!(
            terminal.contains(&format!(
                "highest quality ({task}): qwen2.5-coder-1.5b:q4_k_m@llama-cuda {task} quality"
            )),
            "{terminal}"
        );
    }
    // The engines' own counters: Spider's prompts share their schemas, so most of their tokens
    // came from vLLM's prefix cache (said beside the run); the synthetic prompts, sent first on
    // each start, were prefilled (one 16-token block of 320 shared: no note).
    assert!(
        terminal.contains("prefix cache: qwen2.5-coder-1.5b:fp8@vllm spider quality: 89.2% of its 249013 prompt tokens came from the engine's prefix cache (vllm:prompt_tokens_cached_total)"),
        "{terminal}"
    );
    assert!(
        md.contains("- qwen2.5-coder-1.5b:q4_k_m@llama-cuda squad quality: 79.7% of its 128697 prompt tokens came from the engine's prefix cache (llamacpp:prompt_tokens_cached_total)"),
        "{md}"
    );
    assert!(
        !terminal.contains("prefix cache: qwen2.5-coder-1.5b:fp8@vllm synth single"),
        "{terminal}"
    );
    // At 6 GiB the smaller model in bf16 and the larger one quantized all fit: the larger
    // one's quality, with the other quantizations tied; the smaller one's energy.
    let (terminal, _) = report(&cache, &["slo.gpu-memory=6"]);
    assert!(
        terminal.contains("highest quality (mmlu): qwen2.5-coder-1.5b:fp8@vllm mmlu quality 0.421 (tied: qwen2.5-coder-1.5b:gguf@vllm-gguf mmlu quality, qwen2.5-coder-1.5b:q4_k_m@llama-cuda mmlu quality)"),
        "{terminal}"
    );
    assert!(
        terminal
            .contains("lowest J/token (spider): qwen2.5-coder-0.5b:default@vllm spider quality"),
        "{terminal}"
    );
}
