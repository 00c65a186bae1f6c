//! `notebooks/analysis.ipynb` executed headless (nbclient, pinned in
//! scripts/requirements-test.txt) over a real quickstart cache: no cell fails, both plots are
//! drawn, and its summary has one row per finished run.

mod common;

use std::path::Path;

use common::{bench, text};

#[test]
fn the_analysis_notebook_runs_over_a_quickstart_cache() {
    // The quickstart reads its engine and model from these (scripts/install-engine.sh).
    let e = common::engine();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = assert_cmd::Command::cargo_bin("bench360")
        .unwrap()
        .current_dir(root)
        .env(
            "BENCH360_DEVICE_LOCKS",
            cache.with_file_name("device-locks"),
        )
        .env("BENCH360_LLAMA_SERVER", &e.server)
        .env("BENCH360_SMOLLM2_GGUF", &e.gguf)
        .arg("--cache")
        .arg(&cache)
        .args(["--quiet", "apply", "sweeps/quickstart.kdl"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // A synthetic run too: a task without references must not break the notebook.
    let synth = dir.path().join("synth.kdl");
    std::fs::write(
        &synth,
        format!(
            r#"sweep "synth" {{ seed 1; }}
defaults {{ max-tokens 4; warmup 1; }}
{}
task "synthetic" {{ kind "synthetic"; samples 4; input-tokens 64; }}
scenario "c" {{ kind "concurrency"; concurrency 1 2; requests 4; }}
"#,
            common::llama_blocks(&e, 2)
        ),
    )
    .unwrap();
    let s = bench(&cache, &["apply", synth.to_str().unwrap()]);
    assert!(s.status.success(), "{}", text(&s));

    let nb_out = dir.path().join("nb");
    let run = std::process::Command::new(common::python())
        .arg(root.join("tests/python/run_notebook.py"))
        .arg(&cache)
        .arg(&nb_out)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "{said}");
    assert!(said.contains("run_notebook: ok"), "{said}");
    for f in [
        "pareto.png",
        "latency_vs_load.png",
        "analysis.executed.ipynb",
    ] {
        let len = std::fs::metadata(nb_out.join(f))
            .unwrap_or_else(|e| panic!("{f}: {e}\n{said}"))
            .len();
        assert!(len > 1000, "{f} is {len} bytes");
    }
}
