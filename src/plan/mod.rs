//! The planner: pure. Expands the matrix, builds the DAG (pull → coldstart → warmup → run →
//! score → report), seals it (acyclic), and computes node keys from the sweep and the facts
//! gathered at the edge (file content hashes, engine artifact digests, machine fingerprint).

mod build;
pub(crate) mod drift;
pub(crate) mod facts;
mod graph;
pub(crate) mod inherited;
pub(crate) mod machine;
mod python;
pub(crate) mod render;
mod status;

pub(crate) use build::build;
#[allow(unused_imports)]
pub(crate) use graph::{Deployment, Node, NodeKind, Plan, PlanError, RunSpec};
pub(crate) use status::{statuses, History, Past, Status, Why};

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::spec::expand::{self, DeploymentRef};
use crate::spec::{ModelSource, Sweep};
pub(crate) use crate::store::keys;
use crate::task;

/// Why a fact could not be established (a file unreadable, a binary missing, an image that
/// cannot be inspected): it blocks the nodes keyed by it, and is shown as their cause.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unavailable(pub String);

impl From<String> for Unavailable {
    fn from(s: String) -> Self {
        Unavailable(s)
    }
}

impl From<&str> for Unavailable {
    fn from(s: &str) -> Self {
        Unavailable(s.to_string())
    }
}

/// Facts read at the edge (file hashes, engine artifacts, machine), handed to the planner.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    pub machine: BTreeMap<String, String>,
    /// Per deployment label: the machine it ran on elsewhere (a Slurm compute node), which
    /// keys it instead of `machine` (so a login node sees the cluster's results as cached).
    pub machines: BTreeMap<String, BTreeMap<String, String>>,
    /// Content hash of each file or directory the sweep reads, or why it could not be read.
    pub files: BTreeMap<PathBuf, Result<String, Unavailable>>,
    /// Per engine name: digest of what the `pull` node resolves (binary checksum, image
    /// digest, endpoint URL), or why it cannot be resolved.
    pub artifacts: BTreeMap<String, Result<String, Unavailable>>,
    /// The cache's secret salt, which keys the hashes of engine environment values.
    pub salt: [u8; 32],
    /// Per process engine (by name): the regular files its arguments name ([`args_files`]),
    /// as written, with the path each reaches; their content hashes are in `files`.
    pub args_files: BTreeMap<String, Vec<(String, PathBuf)>>,
}

impl Facts {
    fn file(&self, p: &PathBuf) -> Result<String, Unavailable> {
        self.files
            .get(p)
            .cloned()
            .unwrap_or_else(|| Err(format!("{} was not examined", p.display()).into()))
    }
}

/// Files whose content is part of some node key (model weights, dataset files).
pub(crate) fn required_files(sweep: &Sweep) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in expand::deployments(sweep) {
        if let Some(p) = weights_path(sweep, d) {
            out.push(p);
        }
    }
    for t in 0..sweep.tasks.len() {
        out.extend(task::of(sweep, t).files());
        out.extend(task::scoring_files(sweep, t));
    }
    for s in &sweep.scenarios {
        if let crate::spec::ScenarioSpec::Replay { trace, .. } = &s.spec {
            out.push(sweep.resolve_path(&trace.value));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The engine flags whose values name files an engine *reads* (a chat template, an adapter, a
/// draft model, a grammar, a parser plugin): only these are keyed by content. A flag whose file
/// the engine writes (`--log-file`) or that holds a secret (`--ssl-keyfile`, `--api-key-file`)
/// is not among them, and an ordinary value (`2`, `triton`) is never taken for a file.
pub(crate) const INPUT_FILE_FLAGS: &[&str] = &[
    "--chat-template",
    "--chat-template-file",
    "--lora",
    "--lora-scaled",
    "--lora-modules",
    "--lora-paths",
    "--model-draft",
    "-md",
    "--mmproj",
    "-mm",
    "--grammar-file",
    "--json-schema-file",
    "-jf",
    "--control-vector",
    "--control-vector-scaled",
    "--speculative-draft-model-path",
    "--tool-parser-plugin",
    "--tokenizer",
];

/// The regular files an engine process reads that its arguments name: the values of
/// [`INPUT_FILE_FLAGS`] (`--chat-template FILE`, `--chat-template=FILE`, `--lora-modules
/// a=FILE b=FILE`: a value, or what follows its first `=`), as bench360's working folder
/// reaches them (the engine inherits that folder). (as written, path) pairs. A folder is left
/// out — a tokenizer or LoRA folder stays keyed by its name (docs/cache.md) — and so is what
/// does not exist here. Reads the filesystem: facts, not the pure planner.
pub(crate) fn args_files(args: &[String]) -> Vec<(String, PathBuf)> {
    let here = std::env::current_dir().ok();
    let file = |cand: &str| -> Option<(String, PathBuf)> {
        [Some(cand), cand.split_once('=').map(|(_, v)| v)]
            .into_iter()
            .flatten()
            .filter(|c| !c.is_empty())
            .find_map(|c| {
                let p = std::path::Path::new(c);
                let p = if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    here.as_ref()?.join(p)
                };
                std::fs::metadata(&p)
                    .is_ok_and(|m| m.is_file())
                    .then(|| (c.to_string(), p))
            })
    };
    let mut out = Vec::new();
    let mut values = false;
    for a in args {
        if a.starts_with('-') {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (a.as_str(), None),
            };
            values = INPUT_FILE_FLAGS.contains(&flag);
            if let Some(v) = inline.filter(|_| values) {
                out.extend(file(v));
                values = false;
            }
        } else if values {
            out.extend(file(a));
        }
    }
    out
}

pub(crate) fn weights_path(sweep: &Sweep, d: DeploymentRef) -> Option<PathBuf> {
    let model = &sweep.models[d.model];
    match (&model.variants[d.variant].path, &model.source) {
        (Some(p), _) => Some(sweep.resolve_path(p)),
        (None, ModelSource::Path(p)) => Some(sweep.resolve_path(p)),
        (None, ModelSource::Id(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const SWEEP: &str = r#"
sweep "t" { seed 7; }
defaults { max-tokens 8; }
model "m1" { path "/w/m1.gguf"; quantization "q4_1"; }
model "m2" {
    quantization "q4_0" path="/w/m2-q4_0.gguf"
    quantization "q8_0" path="/w/m2-q8_0.gguf"
}
engine "e" { kind "llama.cpp"; binary "/bin/llama-server"; args "--threads" "2"; }
task "mmlu" { kind "mmlu"; dataset "/d/mmlu"; samples 10; }
scenario "one" { kind "single"; requests 4; }
scenario "b" { kind "batch"; batch-size 2 4; batches 1; }
matrix {
    scenario "one" "b"
    max-tokens 8 16
    exclude model="m2" quantization="q8_0" scenario="b"
}
"#;

    /// A sweep of the given text, as read from `/t.kdl` (the plan's tests and its submodules').
    pub(super) fn sweep(text: &str) -> Sweep {
        crate::sweep::parse(
            "t.kdl",
            text,
            Path::new("/"),
            &|_| None,
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn facts(sweep: &Sweep) -> Facts {
        let mut f = Facts::default();
        f.machine.insert("cpu".into(), "test-cpu".into());
        for p in required_files(sweep) {
            let h = blake3::hash(p.to_string_lossy().as_bytes())
                .to_hex()
                .to_string();
            f.files.insert(p, Ok(h));
        }
        f.artifacts.insert("e".into(), Ok("binary:abc".into()));
        f
    }

    fn keys(plan: &Plan) -> Vec<(String, String)> {
        plan.order
            .iter()
            .map(|&i| (plan.graph[i].label.clone(), plan.graph[i].key.clone()))
            .collect()
    }

    fn changed(a: &Plan, b: &Plan) -> Vec<String> {
        let ka = keys(a);
        let kb = keys(b);
        assert_eq!(ka.len(), kb.len());
        let mut out: Vec<String> = ka
            .iter()
            .filter(|(label, key)| kb.iter().find(|(l, _)| l == label).map(|(_, k)| k) != Some(key))
            .map(|(l, _)| l.clone())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn matrix_expands_in_the_documented_order() {
        let s = sweep(SWEEP);
        let plan = build(&s, &facts(&s)).unwrap();
        let labels: Vec<&str> = plan
            .runs
            .iter()
            .map(|r| plan.graph[r.node].label.as_str())
            .collect();
        assert_eq!(
            labels,
            [
                "run m1:q4_1@e mmlu one[max-tokens=8]",
                "run m1:q4_1@e mmlu one[max-tokens=16]",
                "run m1:q4_1@e mmlu b[batch-size=2,max-tokens=8]",
                "run m1:q4_1@e mmlu b[batch-size=2,max-tokens=16]",
                "run m1:q4_1@e mmlu b[batch-size=4,max-tokens=8]",
                "run m1:q4_1@e mmlu b[batch-size=4,max-tokens=16]",
                "run m2:q4_0@e mmlu one[max-tokens=8]",
                "run m2:q4_0@e mmlu one[max-tokens=16]",
                "run m2:q4_0@e mmlu b[batch-size=2,max-tokens=8]",
                "run m2:q4_0@e mmlu b[batch-size=2,max-tokens=16]",
                "run m2:q4_0@e mmlu b[batch-size=4,max-tokens=8]",
                "run m2:q4_0@e mmlu b[batch-size=4,max-tokens=16]",
                "run m2:q8_0@e mmlu one[max-tokens=8]",
                "run m2:q8_0@e mmlu one[max-tokens=16]",
            ]
        );
        let deps: Vec<&str> = plan.deployments.iter().map(|d| d.label.as_str()).collect();
        assert_eq!(deps, ["m1:q4_1@e", "m2:q4_0@e", "m2:q8_0@e"]);
        // One pull per engine, shared by its deployments; 6 nodes per deployment chain head.
        let pulls = plan
            .graph
            .node_weights()
            .filter(|n| n.kind == NodeKind::Pull)
            .count();
        assert_eq!(pulls, 1);
        assert_eq!(plan.graph.node_count(), 1 + 3 * 2 + 14 * 2 + 1);
    }

    #[test]
    fn same_inputs_give_the_same_keys() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let b = build(&sweep(SWEEP), &facts(&s)).unwrap();
        assert_eq!(keys(&a), keys(&b));
        let all: std::collections::BTreeSet<_> = keys(&a).into_iter().map(|(_, k)| k).collect();
        assert_eq!(all.len(), a.graph.node_count(), "keys are unique");
    }

    /// A model given by a relative path keys the same from whichever folder bench360 runs:
    /// `apply sweeps/x.kdl` from the project and `apply x.kdl` from `sweeps/` (where `gc`
    /// would otherwise delete the other folder's records).
    #[test]
    fn a_relative_model_path_keys_the_same_from_any_working_folder() {
        let text = SWEEP.replace("/w/m1.gguf", "../w/m1.gguf");
        let at = |base: &Path| {
            let s = crate::sweep::parse("t.kdl", &text, base, &|_| None, &Default::default())
                .unwrap_or_else(|e| panic!("{e:?}"));
            // The same files, whatever path reaches them.
            let mut f = facts(&s);
            for h in f.files.values_mut() {
                *h = Ok("same-content".into());
            }
            build(&s, &f).unwrap()
        };
        let cwd = std::env::current_dir().unwrap();
        let (relative, absolute) = (at(Path::new("sweeps")), at(&cwd.join("sweeps")));
        assert_eq!(keys(&relative), keys(&absolute));
        // From a sibling folder: `apply ../proj/sweeps/x.kdl`.
        assert_eq!(keys(&at(Path::new("x/../sweeps"))), keys(&absolute));
    }

    /// The metrics scrape interval enters run keys only where it differs from the sampling
    /// interval (every run recorded before it existed was scraped at that interval).
    #[test]
    fn the_metrics_interval_is_keyed_only_where_it_differs_from_the_interval() {
        let keys = |telemetry: &str| {
            let s = sweep(&format!("{SWEEP}\ntelemetry {{ {telemetry} }}"));
            let p = build(&s, &facts(&s)).unwrap();
            p.order
                .iter()
                .map(|&i| (p.graph[i].label.clone(), p.graph[i].key.clone()))
                .collect::<Vec<_>>()
        };
        let old = keys("interval 0.1; metrics-interval 0.1");
        assert_eq!(keys("interval 0.1; idle 2; metrics-interval 0.1"), old);
        // The default (1 s) differs from 0.1: every run, score and the report move.
        let default = keys("interval 0.1");
        let moved = |other: &[(String, String)]| {
            old.iter()
                .zip(other)
                .filter(|(a, b)| a.1 != b.1)
                .map(|(a, _)| a.0.split(' ').next().unwrap().to_string())
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(
            moved(&default),
            ["report", "run", "score"].map(String::from).into()
        );
        // A sampling interval of 1 s scrapes at 1 s by default: nothing to key.
        assert_eq!(keys("interval 1"), keys("interval 1; metrics-interval 1"));
    }

    /// A ramped rate's runs say how their arrivals are drawn (a ramp changed how on
    /// 2026-12-05: those runs run again); a flat rate's keys are as before.
    #[test]
    fn a_ramped_rate_keys_its_arrivals() {
        let text = SWEEP
            .replace(
                r#"scenario "b" { kind "batch"; batch-size 2 4; batches 1; }"#,
                r#"scenario "b" { kind "rate"; rate 4; duration 5; ramp-from 0; }
scenario "f" { kind "rate"; rate 4; duration 5; }"#,
            )
            .replace(r#"scenario "one" "b""#, r#"scenario "b" "f""#)
            .replace(
                r#"    exclude model="m2" quantization="q8_0" scenario="b""#,
                "",
            );
        let s = sweep(&text);
        let plan = build(&s, &facts(&s)).unwrap();
        let arrivals: Vec<(String, Option<String>)> = plan
            .graph
            .node_weights()
            .filter(|n| n.kind == NodeKind::Run)
            .map(|n| (n.label.clone(), n.inputs.get("scenario.arrivals").cloned()))
            .collect();
        assert!(!arrivals.is_empty());
        for (label, a) in arrivals {
            let ramped = label.contains(" b");
            assert_eq!(a.is_some(), ramped, "{label}: {a:?}");
        }
    }

    #[test]
    fn a_scenario_parameter_changes_only_its_runs_scores_and_the_report() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let s2 = sweep(&SWEEP.replace("requests 4", "requests 5"));
        let b = build(&s2, &facts(&s2)).unwrap();
        assert_eq!(
            changed(&a, &b),
            [
                "report t",
                "run m1:q4_1@e mmlu one[max-tokens=16]",
                "run m1:q4_1@e mmlu one[max-tokens=8]",
                "run m2:q4_0@e mmlu one[max-tokens=16]",
                "run m2:q4_0@e mmlu one[max-tokens=8]",
                "run m2:q8_0@e mmlu one[max-tokens=16]",
                "run m2:q8_0@e mmlu one[max-tokens=8]",
                "score m1:q4_1@e mmlu one[max-tokens=16]",
                "score m1:q4_1@e mmlu one[max-tokens=8]",
                "score m2:q4_0@e mmlu one[max-tokens=16]",
                "score m2:q4_0@e mmlu one[max-tokens=8]",
                "score m2:q8_0@e mmlu one[max-tokens=16]",
                "score m2:q8_0@e mmlu one[max-tokens=8]",
            ]
        );
    }

    #[test]
    fn changed_weights_rerun_only_that_deployment() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let mut f = facts(&s);
        f.files
            .insert(PathBuf::from("/w/m2-q8_0.gguf"), Ok("new-weights".into()));
        let b = build(&s, &f).unwrap();
        let c = changed(&a, &b);
        assert!(
            c.iter().all(|l| l.contains("m2:q8_0") || l == "report t"),
            "{c:?}"
        );
        assert_eq!(c.len(), 1 + 1 + 2 + 2 + 1, "{c:?}"); // coldstart, warmup, 2 runs, 2 scores, report
    }

    #[test]
    fn a_new_engine_artifact_or_machine_changes_everything_below_it() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let mut f = facts(&s);
        f.artifacts.insert("e".into(), Ok("binary:def".into()));
        assert_eq!(
            changed(&a, &build(&s, &f).unwrap()).len(),
            a.graph.node_count()
        );
        let mut f = facts(&s);
        f.machine.insert("gpu".into(), "NVIDIA H200".into());
        // Everything but the pull (which does not depend on the machine).
        assert_eq!(
            changed(&a, &build(&s, &f).unwrap()).len(),
            a.graph.node_count() - 1
        );
    }

    #[test]
    fn a_changed_dataset_file_changes_runs_not_deployments() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let mut f = facts(&s);
        f.files
            .insert(PathBuf::from("/d/mmlu/test.jsonl"), Ok("edited".into()));
        let c = changed(&a, &build(&s, &f).unwrap());
        assert!(
            c.iter()
                .all(|l| l.starts_with("run ") || l.starts_with("score ") || l == "report t"),
            "{c:?}"
        );
        assert_eq!(c.len(), 14 * 2 + 1);
    }

    #[test]
    fn an_unreadable_input_blocks_exactly_its_dependents() {
        struct Nothing;
        impl History for Nothing {
            fn past(&self, _: &str) -> Option<Past> {
                None
            }
            fn last_key(&self, _: &str, _: &str) -> Option<String> {
                None
            }
        }
        let s = sweep(SWEEP);
        let mut f = facts(&s);
        f.files.insert(
            PathBuf::from("/w/m1.gguf"),
            Err("cannot read /w/m1.gguf: missing".into()),
        );
        let plan = build(&s, &f).unwrap();
        let st = statuses(&plan, &Nothing);
        for &i in &plan.order {
            let n = &plan.graph[i];
            let blocked = matches!(st[i.index()], Status::Blocked { .. });
            let expect = n.label.contains("m1:q4_1") && n.kind != NodeKind::Pull;
            assert_eq!(blocked, expect, "{} {:?}", n.label, st[i.index()]);
        }
    }

    #[test]
    fn secrets_in_engine_env_enter_keys_only_hashed() {
        let text = SWEEP.replace(
            "args \"--threads\" \"2\";",
            "args \"--threads\" \"2\"; env HF_TOKEN=\"hf_secret_value\";",
        );
        let s = sweep(&text);
        let plan = build(&s, &facts(&s)).unwrap();
        for n in plan.graph.node_weights() {
            for v in n.inputs.values() {
                assert!(!v.contains("hf_secret_value"), "{}: {v}", n.label);
            }
        }
        assert!(plan
            .graph
            .node_weights()
            .any(|n| n.inputs.contains_key("engine.env.HF_TOKEN")));
    }

    #[test]
    fn slurm_settings_enter_no_key() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let text = format!(
            "{SWEEP}slurm {{ partition \"gpu\"; time \"01:00:00\"; gres \"gpu:1\"; cpus 4; mem \"32G\"; sbatch-args \"--exclusive\"; }}\n"
        );
        let s2 = sweep(&text);
        assert_eq!(s2.slurm.partition.as_deref(), Some("gpu"));
        let b = build(&s2, &facts(&s2)).unwrap();
        assert_eq!(keys(&a), keys(&b));
    }

    #[test]
    fn a_deployment_is_found_by_label_or_key_prefix() {
        let s = sweep(SWEEP);
        let plan = build(&s, &facts(&s)).unwrap();
        assert_eq!(plan.find_deployment("m2:q4_0@e").ok(), Some(1));
        let key = plan.graph[plan.deployments[2].coldstart].key.clone();
        assert_eq!(plan.find_deployment(&key[..10]).ok(), Some(2));
        assert_eq!(plan.find_deployment(&key).ok(), Some(2));
        let err = plan.find_deployment("nope").unwrap_err().to_string();
        assert!(err.contains("m1:q4_1@e ("), "{err}");
        // Too short a prefix names nothing.
        assert!(plan.find_deployment(&key[..2]).is_err());
        let nodes = plan.deployment_nodes(0);
        assert_eq!(nodes.len(), 3 + 6 * 2);
        assert!(nodes
            .iter()
            .all(|&i| plan.graph[i].deployment.is_none_or(|d| d == 0)));
    }

    #[test]
    fn a_deployment_can_be_keyed_by_the_machine_it_ran_on() {
        let s = sweep(SWEEP);
        let a = build(&s, &facts(&s)).unwrap();
        let mut f = facts(&s);
        let mut node = BTreeMap::new();
        node.insert("cpu".to_string(), "compute-node-cpu".to_string());
        f.machines.insert("m2:q4_0@e".into(), node);
        let c = changed(&a, &build(&s, &f).unwrap());
        assert!(
            c.iter().all(|l| l.contains("m2:q4_0@e") || l == "report t"),
            "{c:?}"
        );
        assert_eq!(c.len(), 1 + 1 + 6 * 2 + 1, "{c:?}");
    }

    #[test]
    fn only_the_values_of_flags_that_read_files_are_taken_for_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.safetensors"), dir.path().join("t.jinja"));
        std::fs::write(&a, "x").unwrap();
        std::fs::write(&b, "y").unwrap();
        let args: Vec<String> = [
            "--lora-modules".to_string(),
            format!("one={}", a.display()),
            format!("two={}", dir.path().display()),
            "--threads".into(),
            b.display().to_string(),
            format!("--chat-template={}", b.display()),
            "--log-file".into(),
            a.display().to_string(),
        ]
        .into();
        let got: Vec<String> = args_files(&args).into_iter().map(|f| f.0).collect();
        assert_eq!(got, [a.display().to_string(), b.display().to_string()]);
    }
}

/// The node keys of the shipped sweeps, pinned: a change here invalidates users' caches, so it
/// must come with a deliberate `KEY_FORMAT` bump (docs/cache.md; CONTRIBUTING.md, "Node keys").
#[cfg(test)]
mod pinned_keys {
    use std::path::{Path, PathBuf};

    use super::*;

    fn keys_of(file: &str, text: &str) -> String {
        let vars = |v: &str| -> Option<String> {
            match v {
                "BENCH360_SMOLLM2_GGUF" => Some("/models/smollm2.gguf".into()),
                "BENCH360_LLAMA_SERVER" => Some("/engines/llama-server".into()),
                _ => Some(format!("/env/{v}")),
            }
        };
        let sweep = crate::sweep::parse(
            file,
            text,
            Path::new("/repo/sweeps"),
            &vars,
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let mut facts = Facts::default();
        facts.machine.insert("cpu".into(), "pinned-cpu".into());
        for p in required_files(&sweep) {
            let h = blake3::hash(p.to_string_lossy().as_bytes())
                .to_hex()
                .to_string();
            facts.files.insert(p, Ok(h));
        }
        for e in &sweep.engines {
            facts
                .artifacts
                .insert(e.name.value.clone(), Ok(format!("pinned:{}", e.name.value)));
        }
        let plan = build(&sweep, &facts).unwrap_or_else(|e| panic!("{e}"));
        let mut out = String::new();
        for &i in &plan.order {
            let n = &plan.graph[i];
            out.push_str(&format!("{} {}\n", n.key, n.label));
        }
        out
    }

    fn check(name: &str) {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(root.join("sweeps").join(name)).unwrap();
        let got = keys_of(name, &text);
        let pinned = root
            .join("tests/fixtures/keys")
            .join(name.replace(".kdl", ".txt"));
        if std::env::var_os("BENCH360_PIN_KEYS").is_some() {
            std::fs::create_dir_all(pinned.parent().unwrap()).unwrap();
            std::fs::write(&pinned, &got).unwrap();
        }
        let want = std::fs::read_to_string(&pinned).unwrap_or_default();
        let changed: Vec<&str> = got
            .lines()
            .filter(|l| !want.lines().any(|w| w == *l))
            .collect();
        assert!(
            got == want,
            "node keys of sweeps/{name} changed: users' caches would be invalidated; bump \
             KEY_FORMAT on purpose (and re-pin with BENCH360_PIN_KEYS=1) or restore the \
             inputs. Changed ({} of {}):\n{}",
            changed.len(),
            got.lines().count(),
            changed
                .iter()
                .take(20)
                .copied()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    #[test]
    fn quickstart_keys_are_pinned() {
        check("quickstart.kdl");
    }

    #[test]
    fn gpu_engines_keys_are_pinned() {
        check("gpu-engines.kdl");
    }
}
