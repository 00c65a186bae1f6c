//! FP8 against bf16 on the committed H200 outputs (issue #26, the fifteenth hold):
//! `docs/study/fp8-paired.py` over the per-request outputs of the seed study reproduces the
//! committed `docs/results/seed/fp8-paired.md`, and each of its rows — the items paired, the
//! two passes' means, the paired difference, the items scored differently and the outputs
//! word for word the same — is derived again here by one SQL query per row (duckdb over the
//! same files), not by the script's own pairing.

mod common;

use std::path::Path;

use common::{python, text};

const FILES: [&str; 3] = [
    "docs/results/h200-seed-3/outputs.parquet",
    "docs/results/h200-seed-5/outputs.parquet",
    "docs/results/h200-seed-12/outputs.parquet",
];

/// The pair of one engine and task by SQL: items, bf16 %, FP8 %, difference in points,
/// items whose score differs, identical outputs.
fn by_sql(root: &Path, engine: &str, task: &str, bf16: &str) -> Vec<f64> {
    let fp8 = root.join(FILES[2]);
    let bf16 = root.join(bf16);
    let query = format!(
        "with b as (select sample_id, score, output from '{}' where ok and label = \
         'qwen2.5-coder-1.5b:default@{engine} {task} quality'), \
         q as (select sample_id, score, output from '{}' where ok and label = \
         'qwen2.5-coder-1.5b:fp8@{engine} {task} quality') \
         select count(*), 100 * avg(b.score), 100 * avg(q.score), 100 * avg(q.score - b.score), \
         sum((abs(q.score - b.score) > 1e-12)::int), sum((q.output = b.output)::int) \
         from b join q using (sample_id)",
        bf16.display(),
        fp8.display()
    );
    let out = std::process::Command::new(python())
        .arg("-c")
        .arg("import sys, duckdb; print(*duckdb.sql(sys.argv[1]).fetchone())")
        .arg(query)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

#[test]
fn the_fp8_table_is_the_outputs_paired_item_by_item() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(python())
        .current_dir(root)
        .arg("docs/study/fp8-paired.py")
        .args(FILES)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    let committed = std::fs::read_to_string(root.join("docs/results/seed/fp8-paired.md")).unwrap();
    assert_eq!(table, committed);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(2)
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 8, "{table}");
    for row in &rows {
        let (engine, task) = (row[0], row[1]);
        // vLLM's bf16 pass is the seventh hold's (h200-seed-5), SGLang's the third's.
        let bf16 = if engine == "vllm" { FILES[1] } else { FILES[0] };
        assert_eq!(row[8], bf16.split('/').nth(2).unwrap(), "{row:?}");
        let sql = by_sql(root, engine, task, bf16);
        let num = |cell: &str| -> f64 { cell.split(' ').next().unwrap().parse().unwrap() };
        assert_eq!(num(row[2]), sql[0], "items: {row:?}");
        assert!(
            (num(row[3]) - sql[1]).abs() <= 0.05,
            "bf16: {row:?} {sql:?}"
        );
        assert!((num(row[4]) - sql[2]).abs() <= 0.05, "fp8: {row:?} {sql:?}");
        let delta = num(row[5]);
        assert!((delta - sql[3]).abs() <= 0.05, "delta: {row:?} {sql:?}");
        // The bootstrap interval holds the point estimate.
        let (lo, hi) = row[5]
            .split_once('[')
            .unwrap()
            .1
            .trim_end_matches(']')
            .split_once(", ")
            .unwrap();
        let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
        assert!(lo <= delta && delta <= hi, "{row:?}");
        assert_eq!(num(row[6]), sql[4], "changed: {row:?}");
        assert_eq!(num(row[7]), sql[5], "identical: {row:?}");
    }
}
