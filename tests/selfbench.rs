//! `bench360 selfbench` runs end to end at small sizes (the real measurements are in
//! BENCHMARKS.md; speed is not asserted in tests).

use assert_cmd::Command;

#[test]
fn selfbench_measures_every_part_at_small_sizes() {
    let out = Command::cargo_bin("bench360")
        .unwrap()
        .args([
            "selfbench",
            "--streams",
            "1,8",
            "--seconds",
            "1",
            "--tokens",
            "8",
            "--ttft-ms",
            "10",
            "--itl-ms",
            "2",
        ])
        .args([
            "--plan-nodes",
            "2000",
            "--cached-runs",
            "20",
            "--parquet-rows",
            "20000",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("| 1 |") || l.starts_with("| 8 |"))
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    for r in rows {
        // No failed request, and both timing-error columns filled in.
        let cells: Vec<&str> = r.split('|').map(str::trim).collect();
        assert!(cells[2].ends_with("(0)"), "{r}");
        assert!(
            !cells[8].contains("NaN") && !cells[9].contains("NaN"),
            "{r}"
        );
    }
    assert!(stdout.contains("| plan 200"), "{stdout}");
    assert!(stdout.contains("fully cached sweep of 20 runs"), "{stdout}");
    assert!(stdout.contains("M rows/s"), "{stdout}");
}
