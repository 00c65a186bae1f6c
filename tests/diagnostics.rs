//! Every invalid sweep in tests/fixtures/invalid is rejected by `bench360 validate` with exit
//! code 2 and a diagnostic that points into the file; the messages are snapshot-tested.

use std::path::Path;

use assert_cmd::Command;

fn validate(path: &str) -> (i32, String, String) {
    let out = Command::cargo_bin("bench360")
        .unwrap()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .env_remove("BENCH360_FIXTURE_UNSET_VAR")
        .args(["validate", path])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The sweep files of `tests/fixtures/<dir>/`, by name.
fn fixtures(dir: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".kdl"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_invalid_fixture_is_rejected_with_a_pointed_diagnostic() {
    let names = fixtures("invalid");
    assert!(names.len() >= 20, "only {} invalid fixtures", names.len());
    for name in names {
        let rel = format!("tests/fixtures/invalid/{name}");
        let (code, stdout, stderr) = validate(&rel);
        assert_eq!(code, 2, "{name} should be rejected; stdout: {stdout}");
        assert!(stdout.is_empty(), "{name}: {stdout}");
        // A source snippet with a line number and a label, not just a sentence.
        assert!(
            stderr.contains(&format!("[{rel}:")),
            "{name} has no located snippet:\n{stderr}"
        );
        assert!(stderr.contains('╰'), "{name} has no label:\n{stderr}");
        insta::assert_snapshot!(name.trim_end_matches(".kdl"), stderr);
    }
}

#[test]
fn all_problems_of_a_file_are_reported_together() {
    let (_, _, stderr) = validate("tests/fixtures/invalid/many_problems_at_once.kdl");
    for needle in [
        "`seed` must be between",
        "unknown field `quantisation`",
        "did you mean `quantization`?",
        "unknown engine kind `vllm-ish`",
        "`parallel` must be between",
        "task has no `dataset`",
        "`rate` expects a number",
        "unknown task `tt`",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
}

#[test]
fn thousands_of_problems_are_counted_and_only_the_first_are_rendered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.kdl");
    let mut text = String::from("sweep \"s\" {\n}\n");
    for i in 0..2000 {
        text.push_str(&format!("model \"m{i}\" {{ bogus 1; }}\n"));
    }
    std::fs::write(&path, text).unwrap();
    let (code, _, stderr) = validate(path.to_str().unwrap());
    assert_eq!(code, 2);
    assert!(stderr.contains("problems in sweep file"), "{stderr}");
    assert!(
        stderr.contains("more problems not shown (the first 50 are above)"),
        "{stderr}"
    );
    // Rendering is bounded: 51 snippets, not thousands.
    assert!(stderr.len() < 60_000, "{} bytes", stderr.len());
}

/// The inputs that once aborted, panicked in or stalled the parser (outside fuzzing, 2026-12):
/// each is now a clean exit 2 naming its cause. How long each takes is measured by
/// `scripts/fuzz.sh` (BENCHMARKS.md), not here: the verdict is the exit code and the message.
#[test]
fn the_fuzzers_crashers_are_clean_diagnostics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz/crashers");
    for (file, cause) in [
        // ~100,000-deep nesting after an unclosed quote (a stack overflow, exit 134): a
        // string not closed on its line is now refused before the parser, whose recovery
        // would have read the nesting after it as blocks.
        (
            "sweep-unclosed-quote-deep-nesting",
            "this string is not closed on its line",
        ),
        // Found by scripts/fuzz.sh at 20,000 cases: an unclosed quote, then a `"""#` that a
        // depth check ending strings at their lines took for a multi-line string opener,
        // hiding 57,000 braces.
        (
            "sweep-unclosed-quote-misread-multiline-then-nesting",
            "this string is not closed on its line",
        ),
        // Found by scripts/fuzz.sh (seed 20261201): 72,000 braces inside a multi-line raw
        // string whose lines break its indentation rule; the parser's recovery read them as
        // blocks. The rule is now checked first; and past 8,192 `{` and `/*` in all a file is
        // refused whatever else, which bounds the parser's recursion (unit-tested in bounds).
        (
            "sweep-multiline-dedent-error-then-nesting",
            "does not begin with the whitespace of its closing line",
        ),
        // 20,000 slashdashes in a row: the parser's time grows with the square of their
        // number (1,600 took 19 s in a debug build).
        ("sweep-slashdash-chain", "a slashdash follows a slashdash"),
        // Found by scripts/fuzz.sh over 1 s (12.7 s and 7.7 s): 1,951 raw-string openers
        // closed by a far closing line whose indentation their lines lack, and a slashdash
        // chain inside such a string (the parser's recovery rescans them). KDL's indentation
        // rule of multi-line strings is now checked before the parser.
        (
            "sweep-raw-openers-closed-far-away",
            "does not begin with the whitespace of its closing line",
        ),
        (
            "sweep-slashdash-chain-in-misindented-string",
            "does not begin with the whitespace of its closing line",
        ),
        // 2,000 unclosed multi-line raw strings (took 10.8 s, quadratic in their number).
        (
            "sweep-raw-string-openers",
            "this multi-line raw string is never closed",
        ),
        // A problem past column 65,535 (the renderer panicked): its line is clipped.
        ("sweep-span-past-column-65535", "…"),
    ] {
        let (code, _, stderr) = validate(dir.join(file).to_str().unwrap());
        assert_eq!(code, 2, "{file}: {stderr}");
        assert!(stderr.contains(cause), "{file}: {stderr}");
        assert!(
            stderr.len() < 20_000,
            "{file}: {} bytes of diagnostics",
            stderr.len()
        );
    }
}

/// `--syntax-only` checks a sweep meant for another machine: its unset variables are named,
/// not errors.
#[test]
fn syntax_only_names_unset_variables_and_passes() {
    let out = Command::cargo_bin("bench360")
        .unwrap()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .env_remove("BENCH360_FIXTURE_UNSET_VAR")
        .args([
            "validate",
            "--syntax-only",
            "tests/fixtures/invalid/missing_env_var.kdl",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("not set here (the machine that runs the sweep must set them): ${BENCH360_FIXTURE_UNSET_VAR}"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok (1 run on 1 deployment)"));
    // Without --syntax-only it is still an error.
    let (code, _, stderr) = validate("tests/fixtures/invalid/missing_env_var.kdl");
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn a_device_or_a_deep_file_is_bad_input_not_a_crash() {
    let (code, _, stderr) = validate("/dev/zero");
    assert_eq!(code, 2);
    assert!(stderr.contains("not a regular file"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.kdl");
    std::fs::write(
        &path,
        format!("sweep \"s\" {{\n}}\n{}", "defaults {\n".repeat(2001)),
    )
    .unwrap();
    let (code, _, stderr) = validate(path.to_str().unwrap());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("nest deeper than 32"), "{stderr}");
}

#[test]
fn inputs_are_checked_by_validate_plan_and_apply_before_any_engine_starts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("w.gguf"), b"GGUF").unwrap();
    std::fs::write(d.join("trace.jsonl"), "{\"t\": 0}\n{\"t\": \"soon\"}\n").unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/mmlu");
    let sweep = d.join("s.kdl");
    std::fs::write(
        &sweep,
        format!(
            r#"sweep "pre" {{ }}
model "m" {{ path "w.gguf"; quantization "q4_1"; }}
engine "e" {{ kind "llama.cpp"; binary "/bin/sleep"; args "30"; }}
task "mmlu" {{ kind "mmlu"; dataset "{}"; samples 2; }}
scenario "r" {{ kind "replay"; trace "trace.jsonl"; }}
"#,
            data.display()
        ),
    )
    .unwrap();
    let (code, _, stderr) = validate(sweep.to_str().unwrap());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("trace.jsonl:2:"), "{stderr}");
    for cmd in ["plan", "apply"] {
        let out = Command::cargo_bin("bench360")
            .unwrap()
            .args(["--cache", d.join("cache").to_str().unwrap(), cmd])
            .arg(&sweep)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(err.contains("trace.jsonl:2:"), "{cmd}: {err}");
    }
    // Nothing was started or recorded.
    let records = d.join("cache/records");
    assert!(
        !records.exists() || std::fs::read_dir(&records).unwrap().next().is_none(),
        "apply recorded something"
    );
}

/// A problem in a file the sweep reads (a dataset line, a trace, missing weights, a scorer
/// not found) is shown like a problem of the sweep itself: at the span of the sweep that
/// names the file, with the file and line in the message; every one at once, in the file's
/// order; checked once. `tests/fixtures/inputs/` holds the cases, `tests/snapshots/` their
/// messages.
#[test]
fn input_problems_are_shown_at_the_sweep_span_that_names_them() {
    let names = fixtures("inputs");
    assert!(names.len() >= 4, "only {} input fixtures", names.len());
    for name in names {
        let rel = format!("tests/fixtures/inputs/{name}");
        let (code, stdout, stderr) = validate(&rel);
        assert_eq!(code, 2, "{name} should be rejected; stdout: {stdout}");
        assert!(
            stderr.contains(&format!("[{rel}:")),
            "{name} is not shown at a span of the sweep:\n{stderr}"
        );
        // Run once: each problem is said once.
        let first = stderr
            .lines()
            .find(|l| l.contains('×') && !l.contains("in sweep file"));
        if let Some(first) = first {
            assert_eq!(
                stderr.matches(first).count(),
                1,
                "{name} said twice:\n{stderr}"
            );
        }
        insta::assert_snapshot!(format!("inputs__{}", name.trim_end_matches(".kdl")), stderr);
        // --syntax-only reads none of them.
        let out = Command::cargo_bin("bench360")
            .unwrap()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["validate", "--syntax-only", &rel])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name} --syntax-only");
    }
}
