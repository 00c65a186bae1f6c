//! `docs/study/seed-tables.py` — the seed study's published tables — re-run on two committed
//! holds of the GPU machine (docs/results/h200-seed-9: SGLang's repeats 2 and 3 on one kernel
//! build; h200-seed-11: SGLang's and LMDeploy's fourth on another), and its figures re-derived
//! here from the per-run rows it writes: the machines are never pooled in a per-machine
//! ranking, the pooled ranking's interval is the Student t-interval over every machine's runs,
//! a configuration with one run is not ranked against, each run names the engine start it
//! stood on (run.json's `engine_start`), and machines of two GPU models are never pooled.
//! `docs/study/outputs-parquet.py` is re-run too, on two H100 holds, one of which scored
//! the other's runs, and `docs/study/energy-check.py` against two holds' committed files.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::*;

/// seed-runs.csv's rows as column → value maps.
fn rows(csv_path: &Path) -> Vec<BTreeMap<String, String>> {
    let mut r = csv::Reader::from_path(csv_path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            header
                .iter()
                .cloned()
                .zip(rec.iter().map(String::from))
                .collect()
        })
        .collect()
}

/// `seed-tables.py` over CACHE (the gpu-seed sweep's runs) into OUT: its seed-tables.md.
fn seed_tables(cache: &Path, out: &Path) -> String {
    seed_tables_of(&[cache], out)
}

/// `seed-tables.py` over several CACHES, read in that order, into OUT.
fn seed_tables_of(caches: &[&Path], out: &Path) -> String {
    let run = Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/study/seed-tables.py"))
        .args(caches)
        .args(["--sweep", "gpu-seed", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    std::fs::read_to_string(out.join("seed-tables.md")).unwrap()
}

#[test]
fn the_seed_tables_rank_per_machine_and_pooled_with_the_spread_of_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cache = unpack_results("h200-seed-9", dir.path());
    assert_eq!(unpack_results("h200-seed-11", dir.path()), cache);
    let out = dir.path().join("out");
    let md = seed_tables(&cache, &out);
    // 26 runs of the eleventh hold, 23 of the thirteenth.
    assert!(
        md.contains("49 runs from 1 cache(s); sweep gpu-seed."),
        "{md}"
    );
    let runs = rows(&out.join("seed-runs.csv"));
    assert_eq!(runs.len(), 49);

    // SGLang's MMLU single streams: two on one machine, one on the other.
    let mmlu: Vec<&BTreeMap<String, String>> = runs
        .iter()
        .filter(|r| r["label"].starts_with("run qwen2.5-coder-1.5b:default@sglang mmlu single"))
        .collect();
    assert_eq!(mmlu.len(), 3);
    let tpot: Vec<f64> = mmlu
        .iter()
        .map(|r| r["tpot_p50"].parse().unwrap())
        .collect();
    let mut machines: Vec<&str> = mmlu.iter().map(|r| r["machine"].as_str()).collect();
    machines.sort();
    let (one, two) = if machines[0] == machines[1] {
        (machines[2], machines[0])
    } else {
        (machines[0], machines[1])
    };
    assert_ne!(one, two);
    assert_eq!(machines.iter().filter(|m| **m == two).count(), 2);

    // Pooled: the mean of the three runs' medians ± t(0.975, 2) · s / √3.
    let n = tpot.len() as f64;
    let mean = tpot.iter().sum::<f64>() / n;
    let sd = (tpot.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let hw = 4.302652729911275 * sd / n.sqrt();
    let mut order = [one, two];
    order.sort();
    let counts: Vec<String> = order
        .iter()
        .map(|m| format!("{m}×{}", if *m == two { 2 } else { 1 }))
        .collect();
    let pooled = format!(
        "- single, mmlu: lowest TPOT p50 (ms), every machine: **sglang/default (3 runs: {})** ({:.2} [{:.2}, {:.2}] ms); no interval to compare: lmdeploy/default (1 run: {one}×1) (4.31)",
        counts.join(", "),
        mean,
        mean - hw,
        mean + hw
    );
    assert!(md.contains(&pooled), "{pooled}\n{md}");

    // Per machine: the thirteenth hold's machine ranks SGLang against LMDeploy on its runs'
    // own intervals (the median's order-statistic interval), the other has SGLang alone.
    assert!(
        md.contains(&format!("- single, mmlu: lowest TPOT p50 (ms), on {one} only: **sglang on {one}/default** (1.90 [1.89, 1.91] ms); behind beyond the noise: lmdeploy on {one}/default (4.31 [4.25, 4.37])")),
        "{md}"
    );
    assert!(
        md.contains(&format!("- single, mmlu: lowest TPOT p50 (ms), on {two} only: sglang on {two}/default alone (2 run(s)): nothing to rank against")),
        "{md}"
    );

    // The engine start each run stood on: none recorded before 2026-12-03; in the thirteenth
    // hold the runs of the first stages on the cold start, the server loads on a later start.
    let start = |label: &str| {
        runs.iter()
            .find(|r| r["label"] == label)
            .unwrap_or_else(|| panic!("no row {label}"))["engine_start"]
            .clone()
    };
    assert_eq!(
        start("run qwen2.5-coder-1.5b:default@sglang mmlu single #2"),
        "not recorded"
    );
    assert_eq!(
        start("run qwen2.5-coder-1.5b:default@sglang mmlu single #4"),
        "cold start"
    );
    assert_eq!(
        start("run qwen2.5-coder-1.5b:default@sglang synth server[users=64] #4"),
        "later start 2026-12-04T13:02:56.066Z"
    );
    assert_eq!(
        start("run qwen2.5-coder-1.5b:default@lmdeploy synth server[users=64] #4"),
        "later start 2026-12-04T13:06:36.983Z"
    );
}

/// The same two holds with one of the two machines' runs re-labelled as an H100's (their
/// run.json's GPU name): machines of two GPU models are never pooled, so the tables keep the
/// per-machine answers and drop the answers across machines, and the machines section names
/// each machine's GPU.
#[test]
fn machines_of_two_gpu_models_are_never_pooled() {
    let dir = tempfile::tempdir().unwrap();
    let cache = unpack_results("h200-seed-9", dir.path());
    unpack_results("h200-seed-11", dir.path());
    // Every run.json recorded on the kernel of the thirteenth hold (h200-seed-11: SGLang's and
    // LMDeploy's fourth repeats, `repeat` 3 counted from 0) now says it ran on an H100.
    let relabel = r#"
import json, os, sys
root = sys.argv[1]
runs = []
for d, _, files in os.walk(root):
    if "run.json" in files:
        p = os.path.join(d, "run.json")
        runs.append((p, json.load(open(p))))
kernel = next(r["provenance"]["host"]["kernel"] for _, r in runs
              if r.get("columns", {}).get("repeat") == 3 and r.get("provenance"))
n = 0
for p, r in runs:
    prov = r.get("provenance") or {}
    if (prov.get("host") or {}).get("kernel") == kernel:
        for dev in prov["gpus"]["devices"]:
            dev["name"] = "NVIDIA H100 80GB HBM3"
        json.dump(r, open(p, "w"))
        n += 1
print(n)
"#;
    let o = Command::new(python())
        .args(["-c", relabel])
        .arg(&cache)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let relabelled: usize = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert!(
        relabelled > 0 && relabelled < 49,
        "{relabelled} runs relabelled"
    );
    let out = dir.path().join("out");
    let md = seed_tables(&cache, &out);
    assert!(!md.contains("## Across machines"), "{md}");
    assert!(!md.contains(", every machine:"), "{md}");
    assert!(
        md.contains("on M1 only:") && md.contains("on M2 only:"),
        "{md}"
    );
    let machines: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| M1 |") || l.starts_with("| M2 |"))
        .collect();
    assert_eq!(machines.len(), 2, "{md}");
    assert_eq!(
        machines
            .iter()
            .filter(|l| l.ends_with(", NVIDIA H100 80GB HBM3 |"))
            .count(),
        1,
        "{machines:?}"
    );
    assert_eq!(
        machines
            .iter()
            .filter(|l| l.ends_with(", NVIDIA H200 |"))
            .count(),
        1,
        "{machines:?}"
    );
}

/// `verdicts` (the pooled answers' lines) goes down the field: after the best, the same question
/// among those behind it beyond the noise, while two or more are left; a configuration inside
/// a leader's noise is never ranked below it, and one without an interval is never ranked —
/// where it leads by mean, the next line asks the same among those with an interval.
#[test]
fn a_pooled_verdict_ranks_those_behind_among_themselves() {
    // (name, mean, low, high): A leads; B is inside A's noise; C, D and E are behind A beyond
    // it; among those, C leads with D inside its noise and E behind both; F has one run.
    let lines = verdict_lines(
        r#"("A", 100.0, 95.0, 105.0), ("B", 97.0, 90.0, 104.0), ("C", 80.0, 78.0, 82.0),
           ("D", 79.0, 76.0, 81.0), ("E", 50.0, 49.0, 51.0), ("F", 120.0, None, None)"#,
    );
    let field = [
        "- batch: **A** (100.00 [95.00, 105.00] tok/s); inside its noise: B (97.00 [90.00, 104.00]); behind beyond the noise: C (80.00 [78.00, 82.00]), D (79.00 [76.00, 81.00]), E (50.00 [49.00, 51.00])",
        "- the same, among those behind it: **C** (80.00 [78.00, 82.00] tok/s); inside its noise: D (79.00 [76.00, 81.00]); behind beyond the noise: E (50.00 [49.00, 51.00])",
    ];
    assert_eq!(
        lines,
        [
            "- batch: **F** (120.00 tok/s); no interval to compare: A (100.00), B (97.00), C (80.00), D (79.00), E (50.00)".to_string(),
            field[0].replace("- batch:", "- the same, among those with a spread:"),
            field[1].to_string(),
        ]
    );
    // F, one run, ranks no one: the field with a spread is ordered as without it.
    let lines = verdict_lines(
        r#"("A", 100.0, 95.0, 105.0), ("B", 97.0, 90.0, 104.0), ("C", 80.0, 78.0, 82.0),
           ("D", 79.0, 76.0, 81.0), ("E", 50.0, 49.0, 51.0)"#,
    );
    assert_eq!(lines, field);
}

/// seed-tables.py's `verdicts("batch", [CANDS], higher is better, "tok/s")`: its lines.
fn verdict_lines(cands: &str) -> Vec<String> {
    let program = format!(
        r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("seed_tables", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print("\n".join(m.verdicts("batch", [{cands}], True, "tok/s")))
"#
    );
    python_lines(
        &program,
        &[&Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/study/seed-tables.py")],
    )
}

/// `python -c PROGRAM ARGS…`, which must succeed: its stdout's lines.
fn python_lines(program: &str, args: &[&Path]) -> Vec<String> {
    let o = Command::new(python())
        .arg("-c")
        .arg(program)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// The cold-start rows of a seed-tables.md: the deployment column of each.
fn cold_rows(md: &str) -> Vec<&str> {
    md.split("## Cold start")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("| qwen"))
        .map(|l| l.split('|').nth(1).unwrap().trim())
        .collect()
}

/// The nineteenth hold (M4) and the twenty-third (M5) each started SGLang on an H100 of one
/// host kind, so the two starts have one key: read from a folder each, both are measurements,
/// one row per machine; unpacked into one folder, the later record replaced the earlier.
#[test]
fn one_key_on_two_machines_of_one_kind_is_two_measurements() {
    let dir = tempfile::tempdir().unwrap();
    let m4 = unpack_results("h100-seed", &dir.path().join("m4"));
    let m5 = unpack_results("h100-seed-2", &dir.path().join("m5"));
    let starts = |cache: &Path| -> Vec<String> {
        std::fs::read_dir(cache.join("objects"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|d| d.join("coldstart.json").exists())
            .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    let at_m5 = starts(&m5);
    let shared: Vec<String> = starts(&m4)
        .into_iter()
        .filter(|k| at_m5.contains(k))
        .collect();
    assert_eq!(shared.len(), 1, "{shared:?}");
    let sglang = "qwen2.5-coder-1.5b:default@sglang";
    let md = seed_tables_of(&[&m4, &m5], &dir.path().join("out"));
    assert!(md.contains("from 2 cache(s)"), "{md}");
    let rows = cold_rows(&md);
    assert!(
        rows.contains(&format!("{sglang} on M1").as_str())
            && rows.contains(&format!("{sglang} on M2").as_str()),
        "{rows:?}"
    );
    // The machines are named here in the order of their first run (M4 of the study is M1,
    // M5 is M2). Every other start ran on one machine only: five rows in all (vLLM on M1,
    // llama.cpp and LMDeploy on M2, SGLang on both).
    assert_eq!(rows.len(), 5, "{rows:?}");
    // Pooled over the two H100s, SGLang's two starts are one deployment's, with the t-interval
    // over both; the others have one start and nothing to be ranked against.
    let pooled = md
        .split("## Cold start, every machine pooled (NVIDIA H100 80GB HBM3)")
        .nth(1)
        .unwrap_or_else(|| panic!("no pooled cold starts: {md}"));
    let row = pooled
        .lines()
        .find(|l| l.starts_with(&format!("| {sglang} |")))
        .unwrap_or_else(|| panic!("{pooled}"));
    assert!(
        row.contains("| 2 (M1×1, M2×1) |") && row.contains(" ± "),
        "{row}"
    );
    assert!(
        pooled.contains("**qwen2.5-coder-1.5b:q4_k_m@llama-cuda (1: M2×1)**")
            && pooled.contains("; no interval to compare: "),
        "{pooled}"
    );
    let one = unpack_results("h100-seed", &dir.path().join("one"));
    assert_eq!(unpack_results("h100-seed-2", &dir.path().join("one")), one);
    let md = seed_tables(&one, &dir.path().join("out-one"));
    let rows = cold_rows(&md);
    assert_eq!(
        rows.iter().filter(|r| r.starts_with(sglang)).count(),
        1,
        "{rows:?}"
    );
}

/// `docs/study/scrape-stalls.py` on the sixteenth hold (vLLM's and SGLang's fifth runs on one
/// machine): a chunk gap that held a 100 ms scrape is longer than chance by more on SGLang
/// than on vLLM in every single-stream run — what made 1 s the default scrape interval
/// (docs/telemetry.md).
#[test]
fn a_scrape_holds_sglangs_stream_up_more_than_vllms() {
    let dir = tempfile::tempdir().unwrap();
    let cache = unpack_results("h200-seed-13", dir.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/study/scrape-stalls.py");
    let run = Command::new(python())
        .arg(&script)
        .arg(&cache)
        .args(["--sweep", "gpu-seed", "--scenario", "single"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    let out = String::from_utf8_lossy(&run.stdout).to_string();
    // Table rows: | engine | quantization | task | repeat | gaps | ticks | ITL | held | biased | excess | share |
    let excess = |engine: &str| -> Vec<f64> {
        out.lines()
            .filter(|l| l.starts_with(&format!("| {engine} |")))
            .map(|l| l.split('|').nth(10).unwrap().trim().parse::<f64>().unwrap())
            .collect()
    };
    let (sglang, vllm) = (excess("sglang"), excess("vllm"));
    // The five tasks' single streams of each engine.
    assert_eq!((sglang.len(), vllm.len()), (5, 5), "{out}");
    let sglang_least = sglang.iter().cloned().fold(f64::INFINITY, f64::min);
    let vllm_most = vllm.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    assert!(sglang_least > 3.0 * vllm_most, "{out}");
    assert!(vllm_most < 2.0, "{out}");
}

/// The twenty-fifth hold scored the twenty-fourth's llama.cpp runs (carried to the device in
/// its cache): read from a folder each, a score whose run is in an earlier folder gives that
/// run its quality — the mean over items of the per-request scores the hold's
/// `outputs.parquet` publishes — and without the later folder the run has none.
#[test]
fn a_score_in_a_later_folder_gives_the_run_of_its_key_its_quality() {
    let dir = tempfile::tempdir().unwrap();
    let m6 = unpack_results("h100-seed-3", &dir.path().join("m6"));
    let m5 = unpack_results("h100-seed-4", &dir.path().join("m5"));
    let label = "run qwen2.5-coder-1.5b:q4_k_m@llama-cuda mmlu single #2";
    let quality = |out: &Path| -> String {
        rows(&out.join("seed-runs.csv"))
            .into_iter()
            .find(|r| r["label"] == label)
            .unwrap_or_else(|| panic!("no row {label}"))["quality"]
            .clone()
    };
    seed_tables(&m6, &dir.path().join("alone"));
    assert_eq!(quality(&dir.path().join("alone")), "");
    seed_tables_of(&[&m6, &m5], &dir.path().join("both"));
    let joined: f64 = quality(&dir.path().join("both")).parse().unwrap();
    let outputs =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/results/h100-seed-4/outputs.parquet");
    let mean = Command::new(python())
        .arg("-c")
        .arg(
            "import sys, statistics, collections, pyarrow.parquet as pq\n\
             t = pq.read_table(sys.argv[1]).to_pylist()\n\
             items = collections.defaultdict(list)\n\
             for r in t:\n    \
                 if r['label'] == sys.argv[2] and r['score'] is not None:\n        \
                     items[r['sample_id']].append(r['score'])\n\
             print(statistics.fmean(statistics.fmean(v) for v in items.values()), len(items))",
        )
        .arg(&outputs)
        .arg(label.trim_start_matches("run "))
        .output()
        .unwrap();
    assert!(mean.status.success(), "{}", text(&mean));
    let out = String::from_utf8_lossy(&mean.stdout).to_string();
    let mut words = out.split_whitespace();
    let expected: f64 = words.next().unwrap().parse().unwrap();
    let items: usize = words.next().unwrap().parse().unwrap();
    assert!(items > 100, "{out}");
    assert!((joined - expected).abs() < 1e-9, "{joined} vs {out}");
}

/// `outputs-parquet.py --earlier`: the twenty-fifth hold's file is what that hold ran or
/// scored — its own runs and the twenty-fourth's llama.cpp runs it scored, with their scores —
/// and none of the twenty-fourth's runs scored there (LMDeploy's); without the earlier cache
/// the runs it scored are not found at all. Equal, row for row, to the committed file.
#[test]
fn a_holds_outputs_are_what_it_ran_or_scored_with_the_earlier_caches_read_beside() {
    let dir = tempfile::tempdir().unwrap();
    let m6 = unpack_results("h100-seed-3", &dir.path().join("m6"));
    let m5 = unpack_results("h100-seed-4", &dir.path().join("m5"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/study/outputs-parquet.py");
    let committed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/results/h100-seed-4/outputs.parquet");
    let summary = |earlier: bool| -> Vec<String> {
        let out = dir.path().join(format!("out-{earlier}.parquet"));
        let mut cmd = Command::new(python());
        cmd.arg(&script)
            .arg(&m5)
            .arg(&out)
            .args(["--skip-task", "synth"]);
        if earlier {
            cmd.arg("--earlier").arg(&m6);
        }
        let run = cmd.output().unwrap();
        assert!(run.status.success(), "{}", text(&run));
        python_lines(
            "import sys, pyarrow.parquet as pq\n\
             t = pq.read_table(sys.argv[1])\n\
             rows = t.to_pylist()\n\
             print('equal' if t.equals(pq.read_table(sys.argv[2])) else 'differs')\n\
             for l in sorted({r['label'] for r in rows}):\n    \
                 s = [r['score'] for r in rows if r['label'] == l]\n    \
                 print(l, '|', len(s), sum(x is not None for x in s))",
            &[&out, &committed],
        )
    };
    let scored_here = "qwen2.5-coder-1.5b:q4_k_m@llama-cuda mmlu single #2 |";
    let with = summary(true);
    assert_eq!(with[0], "equal", "{with:#?}");
    let llama = with.iter().find(|l| l.starts_with(scored_here));
    let counts: Vec<usize> = llama
        .unwrap_or_else(|| panic!("no {scored_here} in {with:#?}"))
        .rsplit('|')
        .next()
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(counts[0] > 100 && counts[0] == counts[1], "{counts:?}");
    assert!(!with.iter().any(|l| l.contains("@lmdeploy")), "{with:#?}");
    let without = summary(false);
    assert_eq!(without[0], "differs", "{without:#?}");
    assert!(
        !without.iter().any(|l| l.starts_with(scored_here)),
        "{without:#?}"
    );
    assert!(
        without.iter().any(|l| l.contains("@sglang mmlu single #2")),
        "{without:#?}"
    );
}

/// `energy-check.py` re-run on two committed H100 holds gives their committed files byte for
/// byte — without `--sampling` as the twenty-fifth hold's was written, with it as the
/// twenty-sixth's — and the one window outside 5 % (LMDeploy's B = 16) is the one whose
/// difference exceeds two standard errors of ∫power; the script exits 1 for it.
#[test]
fn the_energy_check_reproduces_its_files_and_measures_the_one_miss_in_sampling_errors() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("docs/study/energy-check.py");
    let check = |hold: &str, sampling: bool| -> (i32, String) {
        let cache = unpack_results(hold, &dir.path().join(hold));
        let mut cmd = Command::new(python());
        cmd.arg(&script).arg(&cache);
        if sampling {
            cmd.arg("--sampling");
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let committed = std::fs::read_to_string(
            root.join("docs/results")
                .join(hold)
                .join("energy-check.txt"),
        )
        .unwrap();
        assert_eq!(stdout, committed, "{hold}: {}", text(&out));
        (out.status.code().unwrap(), stdout)
    };
    let (code, _) = check("h100-seed-4", false);
    assert_eq!(code, 0);
    let (code, table) = check("h100-seed-5", true);
    assert_eq!(code, 1, "one window is outside 5 %");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.starts_with("| qwen"))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 24);
    for r in &rows {
        // Columns: run, GPUs, window, counter, ∫power, ratio, Δ %, ≤ 5 %, …, Δ / SE.
        let in_se: f64 = r[r.len() - 2].parse().unwrap();
        let miss = r[8] == "NO";
        assert_eq!(miss, in_se.abs() > 2.0, "{r:?}");
        if miss {
            assert!(
                r[1].contains("@lmdeploy synth batch[batch-size=16]"),
                "{r:?}"
            );
        }
    }
    assert_eq!(rows.iter().filter(|r| r[8] == "NO").count(), 1);
}
