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
        terminal.contains("highest quality (mmlu): qwen2.5-coder-1.5b:fp8@vllm mmlu quality 42.1% (tied: qwen2.5-coder-1.5b:gguf@vllm-gguf mmlu quality, qwen2.5-coder-1.5b:q4_k_m@llama-cuda mmlu quality)"),
        "{terminal}"
    );
    assert!(
        terminal
            .contains("lowest J/token (spider): qwen2.5-coder-0.5b:default@vllm spider quality"),
        "{terminal}"
    );
}

/// The repeats (docs/results/h200-rq1-2/: the single stream's second and third cold starts of
/// each deployment, on another machine) read beside the first hold's cache: every start's
/// runs, the budget judged on a deployment's peak over all its starts (the later vLLM starts
/// served only the synthetic prompts and read less than the start that served CNN/DailyMail),
/// the bf16 1.5B failing on all three starts, and the cold starts' interval.
#[test]
fn the_rq1_repeats_keep_the_budget_over_every_start() {
    let dir = tempfile::tempdir().unwrap();
    unpack_results("h200-rq1", dir.path());
    let cache = unpack_results("h200-rq1-2", dir.path());
    let (terminal, md) = report(&cache, &[]);
    assert!(
        md.contains("*Read from elsewhere:* 35 run(s)"),
        "{}",
        &md[..400]
    );
    // The synthetic task ran on two machines: answered on each, within 5 GiB by llama.cpp
    // alone; FP8's later starts (5.1 GiB at most) carry the first start's 5.6 GiB.
    assert!(
        md.contains("- `qwen2.5-coder-1.5b:fp8@vllm synth single on M2` excluded: misses the SLO: GPU memory 5.6 GiB (its deployment's peak, in `qwen2.5-coder-1.5b:fp8@vllm cnn quality`) > 5 GiB"),
        "{md}"
    );
    assert!(
        terminal.contains("lowest J/token (synth on M2): qwen2.5-coder-1.5b:q4_k_m@llama-cuda synth single on M2 0.805 J"),
        "{terminal}"
    );
    // Three failed starts of the bf16 1.5B, each with vLLM's own message.
    assert!(md.contains("| qwen2.5-coder-1.5b:default@vllm synth single #3 | – |"));
    assert!(md.contains("ValueError: No available memory for the cache blocks."));
    assert!(
        md.contains(
            "qwen2.5-coder-1.5b:q4_k_m@llama-cuda: over 3 cold starts, healthy 1.34 ± 0.70 s"
        ),
        "{md}"
    );
    // docs/study/rq1-table.py over both caches: its pooled TPOT is the mean ± t(0.975, 2)·s/√3
    // of the three runs it lists run by run (M1's first, the second machine's two), and the
    // bf16 1.5B's start failed three times.
    let table = std::process::Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/study/rq1-table.py"))
        .arg(&cache)
        .args(["--budget", "5", "6"])
        .output()
        .unwrap();
    assert!(table.status.success(), "{}", text(&table));
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    let fp8 = "| qwen2.5-coder-1.5b:fp8@vllm |";
    let runs: Vec<(String, f64)> = table
        .lines()
        .filter(|l| l.starts_with(fp8) && l.contains(" | #"))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let median = cells[5].split(' ').next().unwrap().parse().unwrap();
            (cells[2].to_string(), median)
        })
        .collect();
    let machines: Vec<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(machines, ["M1", "M2", "M2"], "{table}");
    let v: Vec<f64> = runs.iter().map(|r| r.1).collect();
    let mean = v.iter().sum::<f64>() / 3.0;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    let half = 4.303 * sd / 3f64.sqrt();
    let row = table.lines().find(|l| l.starts_with(fp8)).unwrap();
    let pooled = row.split(" | ").nth(11).unwrap();
    let (m, h) = pooled.trim_end_matches(" (n=3)").split_once(" ± ").unwrap();
    let (m, h): (f64, f64) = (m.parse().unwrap(), h.parse().unwrap());
    // The cells are the runs' medians to two decimals: equal within their rounding.
    assert!(
        (m - mean).abs() <= 0.01 && (h - half).abs() <= 0.015,
        "{row} vs {mean} ± {half}"
    );
    assert!(
        table.contains("**failed** (3 of 3 starts): ValueError:"),
        "{table}"
    );
    // At 6 GiB the smaller model in bf16 is the fastest and cheapest one stream at a time on
    // both machines.
    let (terminal, _) = report(&cache, &["slo.gpu-memory=6"]);
    for (m, j) in [("M1", "0.429"), ("M2", "0.455")] {
        assert!(
            terminal.contains(&format!("lowest J/token (synth on {m}): qwen2.5-coder-0.5b:default@vllm synth single on {m} {j} J")),
            "{terminal}"
        );
    }
}
