//! bench360's answer on the committed H200 data (docs/results/h200-answer/: every run's
//! requests, scores and telemetry from `sweeps/gpu-answer.kdl`): the report, rendered here
//! from that cache alone, gives the answer docs/results-h200.md states — with its ties,
//! exclusions and the inconclusive note — without any external script.

mod common;

use std::path::Path;

use common::*;

#[test]
fn the_report_on_the_h200_data_gives_the_published_answer() {
    let dir = tempfile::tempdir().unwrap();
    let cache = unpack_results("h200-answer", dir.path());
    let sweep = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps/gpu-answer.kdl");
    // The GPU machine's paths are not here; the report reads only the cache.
    let out = assert_cmd::Command::cargo_bin("bench360")
        .unwrap()
        .env("NO_COLOR", "1")
        .env("BENCH360_LLAMA_SERVER", "/gpu-machine/llama-server")
        .env(
            "BENCH360_QWEN2_5_CODER_0_5B_GGUF",
            "/gpu-machine/qwen-0.5b.gguf",
        )
        .env(
            "BENCH360_QWEN2_5_CODER_1_5B_GGUF",
            "/gpu-machine/qwen-1.5b.gguf",
        )
        .arg("--cache")
        .arg(&cache)
        .arg("report")
        .arg(&sweep)
        .output()
        .unwrap();
    let terminal = text(&out);
    assert!(
        terminal.contains("answer (mmlu): qwen2.5-coder-1.5b:q4_k_m@llama-p8 mmlu c32"),
        "{terminal}"
    );
    assert!(
        terminal.contains(
            "`qwen2.5-coder-1.5b:q4_k_m@llama-p32 mmlu c32` would be (j-per-correct 7.77)"
        ),
        "{terminal}"
    );
    assert!(
        terminal.contains("answer (spider): qwen2.5-coder-1.5b:q4_k_m@llama-p32 spider c32-sql"),
        "{terminal}"
    );
    // Truncation in plain sight: every unparsed 1.5B answer was cut by the 16-token budget.
    assert!(
        terminal.contains("cut: qwen2.5-coder-1.5b:q4_k_m@llama-p32 mmlu c32: 43% of scored answers stopped at max-tokens (16), 219 of them with no readable answer"),
        "{terminal}"
    );
    let md = std::fs::read_to_string(cache.join("reports/gpu-answer/report.md")).unwrap();
    // Read as recorded on the GPU machine (other paths, weights not here), and said: the
    // scores are the earlier letter extraction's.
    assert!(
        md.contains("*Read from elsewhere:* 10 run(s) read from records of the same configuration made elsewhere")
            && md.contains("recorded with `mmlu-accuracy/1 (letter extraction v3)`"),
        "{md}"
    );
    assert!(
        md.contains("| 44.4% [37.3, 51.2] | 21.2% (21.2% / 0.0%) | 43.3% |"),
        "unparsed split into cut / other, and the cut share"
    );
    let line = |label: &str| -> String {
        md.lines()
            .find(|l| l.starts_with(&format!("| {label} | ")) && l.contains("pt"))
            .unwrap_or_else(|| panic!("no answer line for {label}"))
            .to_string()
    };
    let p32 = line("qwen2.5-coder-1.5b:q4_k_m@llama-p32 mmlu c32");
    assert!(
        p32.contains("Δ -1.4 pt") && p32.contains("inconclusive"),
        "{p32}"
    );
    let small = line("qwen2.5-coder-0.5b:q4_k_m@llama-p32 mmlu c32");
    assert!(small.contains("quality worse than allowed"), "{small}");
    let open = line("qwen2.5-coder-1.5b:q4_k_m@llama-p32 mmlu open-300");
    assert!(open.contains("misses the SLO"), "{open}");
    // The same weights with 32 or 8 slots: no detectable difference, item by item; the pairs
    // table reads it against the reference (8 slots) with the answer's own interval.
    let pair = md
        .lines()
        .find(|l| {
            l.starts_with("| qwen2.5-coder-1.5b:q4_k_m@llama-p8 mmlu c32 | qwen2.5-coder-1.5b:q4_k_m@llama-p32 mmlu c32 |")
        })
        .unwrap();
    assert!(
        pair.contains("| 200 | -1.4 | -3.5 … +0.8 |") && pair.contains("no detectable difference"),
        "{pair}"
    );
    assert!(p32.contains("Δ -1.4 pt [-3.5, +0.8]"), "{p32}");
    assert!(
        md.contains("**over-saturated**: TTFT rose by"),
        "steady-state section"
    );
    assert!(md.contains("stopped at ±"), "target-margin notes");
    // summary.parquet says the same, per run.
    let q = format!(
        "import duckdb; print(duckdb.sql(\"select count(*) from read_parquet('{}') where answer = 'recommended'\").fetchone()[0], duckdb.sql(\"select count(*) from read_parquet('{}') where over_saturated\").fetchone()[0])",
        cache.join("reports/gpu-answer/summary.parquet").display(),
        cache.join("reports/gpu-answer/summary.parquet").display()
    );
    let py = std::process::Command::new(python())
        .arg("-c")
        .arg(q)
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", text(&py));
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        "2 3",
        "one per task; three open loops"
    );
}
