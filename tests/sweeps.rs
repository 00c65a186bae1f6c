//! Every sweep shipped in sweeps/ and every KDL example in README.md is a valid sweep.

use std::path::Path;

use assert_cmd::Command;

fn validate(path: &Path) -> std::process::Output {
    Command::cargo_bin("bench360")
        .unwrap()
        .env("NO_COLOR", "1")
        // Paths the shipped sweeps take from the environment; `--syntax-only` reads no files.
        .env("BENCH360_LLAMA_SERVER", "/opt/llama-server")
        .env("BENCH360_SMOLLM2_GGUF", "/models/smollm2.gguf")
        .env("BENCH360_QWEN2_5_CODER_0_5B_GGUF", "/models/qwen-0.5b.gguf")
        .env("BENCH360_LLAMA_IMAGE", "bench360-local/llama-server")
        .env("BENCH360_LLAMA_TAG", "cpu")
        .env("OPENAI_API_KEY_VAR_IS_NOT_READ", "")
        // Inputs (weights, the GPU machine's paths) are not on this machine: the files the
        // sweeps read are checked by tests that run them.
        .args(["validate", "--syntax-only"])
        .arg(path)
        .output()
        .unwrap()
}

#[test]
fn every_shipped_sweep_is_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "kdl") {
            let out = validate(&p);
            assert!(
                out.status.success(),
                "{}: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            n += 1;
        }
    }
    assert!(n >= 1);
}

#[test]
fn every_kdl_example_in_the_readme_is_valid() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```kdl") => current = Some(String::new()),
            (Some(b), l) if l.starts_with("```") => {
                blocks.push(std::mem::take(b));
                current = None;
            }
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    assert!(
        blocks.len() >= 2,
        "README has {} kdl examples",
        blocks.len()
    );
    let dir = tempfile::tempdir().unwrap();
    for (i, b) in blocks.iter().enumerate() {
        let p = dir.path().join(format!("readme-{i}.kdl"));
        std::fs::write(&p, b).unwrap();
        let out = validate(&p);
        assert!(
            out.status.success(),
            "README example {i}:\n{b}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
