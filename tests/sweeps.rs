//! Every sweep shipped in sweeps/ and every KDL example of the documentation (README.md and the
//! book in docs/) is a valid sweep; the README's sweep is the file it names.

mod common;

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
        .env("BENCH360_QWEN2_5_CODER_1_5B_GGUF", "/models/qwen-1.5b.gguf")
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

/// The ```kdl blocks of one Markdown text, each with the line it starts on.
fn kdl_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```kdl") => current = Some((n + 2, String::new())),
            (Some(_), l) if l.starts_with("```") => blocks.extend(current.take()),
            (Some((_, b)), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

#[test]
fn every_kdl_example_in_the_docs_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    for (page, text) in common::book() {
        for (line, b) in kdl_blocks(&text) {
            let p = dir.path().join(format!("example-{n}.kdl"));
            std::fs::write(&p, &b).unwrap();
            let out = validate(&p);
            assert!(
                out.status.success(),
                "{page}:{line}: example:\n{b}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            n += 1;
        }
    }
    // The front page's sweep, the quickstart in full, the larger example, the synthetic and
    // custom-task examples at least.
    assert!(n >= 5, "the docs have {n} kdl examples");
}

#[test]
fn the_readme_sweep_is_the_file_it_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (_, example) = kdl_blocks(&readme)
        .into_iter()
        .next()
        .expect("README has a sweep");
    let file = std::fs::read_to_string(root.join("sweeps/mmlu-traffic.kdl")).unwrap();
    let body: String = file
        .lines()
        .skip_while(|l| l.starts_with("//"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        body, example,
        "README's sweep differs from sweeps/mmlu-traffic.kdl"
    );
    assert!(readme.contains("sweeps/mmlu-traffic.kdl"));
}

fn bench(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("bench360")
        .unwrap()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .env("BENCH360_LLAMA_SERVER", "/bin/true")
        .env("BENCH360_SMOLLM2_GGUF", "/etc/hostname")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn set_and_only_override_the_sweep_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let cache = cache.to_str().unwrap();
    let plan = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["--cache", cache];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["plan", "--json", "sweeps/quickstart.kdl"]);
        let o = bench(&args);
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)))
    };
    let runs = |p: &serde_json::Value| -> Vec<String> {
        p["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "run")
            .map(|n| n["label"].as_str().unwrap().to_string())
            .collect()
    };
    let all = runs(&plan(&[]));
    let only = runs(&plan(&["--only", "task=mmlu,spider"]));
    assert!(only.len() < all.len() && !only.is_empty());
    assert!(
        only.iter()
            .all(|l| l.contains(" mmlu ") || l.contains(" spider ")),
        "{only:?}"
    );
    // --only repeat=K: that repeat, with the key and label the whole sweep gives it.
    let keyed = |p: &serde_json::Value| -> Vec<(String, String)> {
        p["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == "run")
            .map(|n| {
                let label = n["label"].as_str().unwrap().to_string();
                (label, n["key"].as_str().unwrap().to_string())
            })
            .collect()
    };
    let three = [
        "--set",
        "sweep.repeats=3",
        "--set",
        "sweep.cold-repeats=#true",
    ];
    let whole = keyed(&plan(&three));
    let second = keyed(&plan(&[&three[..], &["--only", "repeat=2"]].concat()));
    assert_eq!(whole.len(), 3 * all.len());
    assert_eq!(second.len(), all.len());
    for run in &second {
        assert!(run.0.ends_with(" #2"), "{run:?}");
        assert!(whole.contains(run), "{run:?} is not the whole sweep's");
    }
    // A scenario's own `repeats` runs fewer of them: the first ones, under the whole sweep's
    // keys (run once, without the ` #1` of its label); the other scenarios keep all three.
    let once = keyed(&plan(
        &[&three[..], &["--set", "scenario.single.repeats=1"]].concat(),
    ));
    let single = |r: &&(String, String)| r.0.contains(" single");
    assert_eq!(
        once.iter().filter(single).count() * 3,
        whole.iter().filter(single).count()
    );
    assert_eq!(
        once.iter().filter(|r| !single(r)).count(),
        whole.iter().filter(|r| !single(r)).count()
    );
    for run in &once {
        let as_whole = if single(&run) {
            assert!(!run.0.contains(" #"), "{run:?}");
            (format!("{} #1", run.0), run.1.clone())
        } else {
            run.clone()
        };
        assert!(
            whole.contains(&as_whole),
            "{run:?} is not the whole sweep's"
        );
    }
    // --set changes the key input, which the plan shows.
    let set = plan(&["--set", "task.mmlu.samples=7"]);
    let run = set["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "run" && n["label"].as_str().unwrap().contains(" mmlu "))
        .unwrap();
    assert_eq!(run["inputs"]["task.samples"], "7", "{run}");
    // A bad override is bad input, named.
    let o = bench(&[
        "--set",
        "task.nope.samples=3",
        "validate",
        "--syntax-only",
        "sweeps/quickstart.kdl",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no `task \"nope\"` block"));
    let o = bench(&[
        "--set",
        "defaults.max-tokens=0",
        "validate",
        "--syntax-only",
        "sweeps/quickstart.kdl",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = bench(&[
        "--only",
        "engine=vllm",
        "validate",
        "--syntax-only",
        "sweeps/quickstart.kdl",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no engine `vllm`"));
}

/// `--set` / `--only` belong to the commands that read a sweep: given before the command or
/// after it, they mean the same; commands without a sweep do not offer them.
#[test]
fn sweep_flags_are_offered_only_where_a_sweep_is_read() {
    let help = |cmd: &str| {
        let o = bench(&[cmd, "--help"]);
        assert!(o.status.success(), "{cmd} --help");
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    for cmd in ["metric", "verify", "selfbench"] {
        let h = help(cmd);
        assert!(
            !h.contains("--set") && !h.contains("--only"),
            "`{cmd} --help` lists sweep flags:\n{h}"
        );
    }
    for cmd in ["plan", "apply", "validate", "report", "status", "gc", "run"] {
        let h = help(cmd);
        assert!(h.contains("--set") && h.contains("--only"), "{cmd}:\n{h}");
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let cache = cache.to_str().unwrap();
    let plan = |args: &[&str]| -> String {
        let o = bench(args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let before = plan(&[
        "--cache",
        cache,
        "--only",
        "task=spider",
        "plan",
        "sweeps/quickstart.kdl",
    ]);
    let after = plan(&[
        "--cache",
        cache,
        "plan",
        "sweeps/quickstart.kdl",
        "--only",
        "task=spider",
    ]);
    assert_eq!(before, after);
    assert!(
        !before.contains(" mmlu ") && before.contains(" spider "),
        "{before}"
    );
    // A sweep flag where no sweep is read is refused by the parser, not ignored.
    let o = bench(&["metric", "rouge", "--set", "a.b=1"]);
    assert_eq!(o.status.code(), Some(2));
    let o = bench(&["--set", "a.b=1", "verify"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("this command reads none"));
}

/// `gc` with a sweep whose engine binary this machine lacks deletes nothing: the keys below
/// the blocked pull are provisional, so every record of the real ones would look unused.
/// With the binary there, the same record (used by no plan) is collected.
#[test]
fn gc_keeps_every_record_while_a_sweeps_inputs_are_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(cache.join("records")).unwrap();
    let key = "0123456789abcdef0123456789abcdef";
    let record = cache.join("records").join(format!("{key}.json"));
    std::fs::write(
        &record,
        format!(
            r#"{{"format": 1, "key": "{key}", "kind": "run", "label": "run of another binary", "sweep": "quickstart", "status": "finished", "host": "h", "pid": 1, "started_at": "2026-12-05T00:00:00Z", "finished_at": null, "duration_s": null, "cause": null, "inputs": {{}}, "outputs": null}}"#
        ),
    )
    .unwrap();
    let gc_with = |server: &str, extra: &[&str]| {
        Command::cargo_bin("bench360")
            .unwrap()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("NO_COLOR", "1")
            .env("BENCH360_LLAMA_SERVER", server)
            .env("BENCH360_SMOLLM2_GGUF", "/etc/hostname")
            .args([
                "--cache",
                cache.to_str().unwrap(),
                "gc",
                "sweeps/quickstart.kdl",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let gc = |server: &str| gc_with(server, &[]);
    // `--only` would leave the rest of the sweep out of what gc keeps: refused, nothing
    // deleted.
    let out = gc_with("/bin/true", &["--only", "task=mmlu"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--only") && err.contains("nothing deleted"),
        "{err}"
    );
    assert!(record.exists());
    let out = gc("/nonexistent/llama-server");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("nothing deleted") && err.contains("/nonexistent/llama-server"),
        "{err}"
    );
    assert!(record.exists());
    let out = gc("/bin/true");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!record.exists());
}
