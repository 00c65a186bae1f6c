//! The regression gate on the real llama-server: two applies of the quickstart's MMLU runs
//! (same binary, same machine, same sweep) pass every gate, and a real slowdown — the same
//! configurations with the engine squeezed onto one core — fails the latency gates beyond
//! noise.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::*;

/// The quickstart sweep, narrowed to MMLU's single and batch runs; `one_core`: bench360 and
/// the engine it starts pinned to CPU 0 (`taskset`), the engine's two threads sharing it.
fn quickstart(e: &Engine, cache: &Path, args: &[&str], one_core: bool) -> Output {
    let sweep = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps/quickstart.kdl");
    let bin = assert_cmd::cargo::cargo_bin("bench360");
    let mut cmd = if one_core {
        let mut c = Command::new("taskset");
        c.args(["-c", "0"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    cmd.env("NO_COLOR", "1")
        .env("BENCH360_LLAMA_SERVER", &e.server)
        .env("BENCH360_SMOLLM2_GGUF", &e.gguf)
        .arg("--cache")
        .arg(cache)
        .args(args)
        .arg(sweep)
        .args(["--only", "task=mmlu", "--only", "scenario=single,batch"])
        .output()
        .unwrap()
}

const GATES: &[&str] = &[
    "ttft_p50>+5%",
    "ttft_p99>+5%",
    "tpot_p50>+5%",
    "e2e_p99>+5%",
    "quality<-2%",
];

#[test]
fn identical_applies_pass_the_gate_and_a_real_slowdown_fails_it() {
    let e = engine();
    let dir = tempfile::tempdir().unwrap();
    let sweep = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps/quickstart.kdl");
    let side = |c: &Path| format!("{}={}", c.display(), sweep.display());
    let (a, b, slow) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("slow"),
    );
    for c in [&a, &b] {
        let out = quickstart(&e, c, &["apply", "--quiet"], false);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let compare = |other: &Path, rule: &str| -> Output {
        let mut args = vec![
            "compare".to_string(),
            side(&a),
            side(other),
            "--format".into(),
            "json".into(),
            "--gate-rule".into(),
            rule.into(),
        ];
        for g in GATES {
            args.push("--fail-on".into());
            args.push(g.to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Command::new(assert_cmd::cargo::cargo_bin("bench360"))
            .env("NO_COLOR", "1")
            .env("BENCH360_LLAMA_SERVER", &e.server)
            .env("BENCH360_SMOLLM2_GGUF", &e.gguf)
            .args(&args)
            .args(["--only", "task=mmlu", "--only", "scenario=single,batch"])
            .output()
            .unwrap()
    };
    // Same configuration twice: nothing fires; whatever the point estimates cross is said to
    // be inconclusive, with its interval.
    let same = compare(&b, "confident");
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    let v: serde_json::Value = serde_json::from_slice(&same.stdout).unwrap();
    assert_eq!(v["matched"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(v["broken"].as_array().unwrap().len(), 0, "{v}");
    for i in v["inconclusive"].as_array().unwrap() {
        assert_eq!(i["verdict"], "inconclusive", "{i}");
    }
    // Quality is compared item by item: the same answers, the same items.
    for m in v["matched"].as_array().unwrap() {
        let q = m["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["metric"] == "quality")
            .unwrap();
        assert_eq!(q["change"], 0.0, "{q}");
        assert!(q["n"].as_u64().unwrap() >= 6, "{q}");
    }

    // A real slowdown: the same sweep with the engine's two threads on one core.
    assert!(
        std::thread::available_parallelism().map_or(0, |n| n.get()) >= 2,
        "this test slows the engine down by taking one of its two cores away: it needs two"
    );
    let out = quickstart(&e, &slow, &["apply", "--quiet"], true);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let slower = compare(&slow, "confident");
    assert_eq!(slower.status.code(), Some(1), "{}", text(&slower));
    let v: serde_json::Value = serde_json::from_slice(&slower.stdout).unwrap();
    let fired: Vec<(&str, &str)> = v["broken"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["metric"].as_str().unwrap(), b["run"].as_str().unwrap()))
        .collect();
    assert!(
        fired
            .iter()
            .any(|(m, r)| *m == "tpot_p50" && r.ends_with("mmlu single")),
        "{fired:?}"
    );
    assert!(text(&slower).contains("regression: "), "{}", text(&slower));
}
