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
    // Two tables, a row per stream count in each: against the server's log, then against
    // the schedule.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| 1 |") || l.starts_with("| 8 |"))
        .map(|r| r.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    for cells in &rows[..2] {
        // No failed request; the errors against the server's log filled in (TTFT, ITL,
        // event delay, request setup); the server's in-flight count never above the streams,
        // and with 8 streams more than one at a time. (How near it stays to the streams depends
        // on the machine's speed: that is BENCHMARKS.md's, not a test's.)
        assert!(cells[2].ends_with("(0)"), "{cells:?}");
        for c in &cells[8..13] {
            assert!(!c.contains("NaN"), "{cells:?}");
        }
        let streams: f64 = cells[1].parse().unwrap();
        let held: f64 = cells[3].parse().unwrap();
        let least = if streams > 1.0 { 1.0 } else { 0.0 };
        assert!(held > least && held <= streams + 0.01, "{cells:?}");
    }
    for cells in &rows[2..] {
        // Every request matched with the server's log line.
        let (m, of) = cells[2].split_once(" of ").unwrap();
        assert_eq!(m, of, "{cells:?}");
        assert!(
            !cells[3].contains("NaN") && !cells[5].contains("NaN"),
            "{cells:?}"
        );
    }
    assert!(stdout.contains("| plan 200"), "{stdout}");
    assert!(stdout.contains("fully cached sweep of 20 runs"), "{stdout}");
    assert!(stdout.contains("M rows/s"), "{stdout}");
}
