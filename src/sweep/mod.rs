//! The sweep file: KDL text → raw spanned nodes (`raw`) → a validated [`Sweep`] (`resolve`).
//! Parsing and validation do no I/O: `parse` takes text and an environment lookup; `load`
//! reads the file and attaches the source to diagnostics.

pub(crate) mod bounds;
pub(crate) mod diag;
pub(crate) mod overrides;
pub(crate) mod raw;
mod resolve;

use std::path::{Path, PathBuf};

use crate::spec::*;
pub(crate) use diag::{Problem, SweepError};
pub(crate) use overrides::Overrides;
pub(crate) use resolve::{slurm_mem_ok, slurm_time_ok};

/// A file that cannot be read as an input at all (a sweep file, a dataset, a trace): not
/// there, not a regular file, too large, not text.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error("cannot read {what} {}: {source}", path.display())]
    Unreadable {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {} is not a regular file", path.display())]
    NotRegular { what: &'static str, path: PathBuf },
    #[error("{what} {} has {size} bytes, more than the {max} allowed", path.display())]
    TooLarge {
        what: &'static str,
        path: PathBuf,
        size: u64,
        max: u64,
    },
    #[error("{what} {} grew past {max} bytes while read", path.display())]
    Grew {
        what: &'static str,
        path: PathBuf,
        max: u64,
    },
    #[error("sweep file {} is not UTF-8 text (byte {at})", path.display())]
    NotText { path: PathBuf, at: usize },
}

/// How long the KDL parser may take on one file (a 1 MiB sweep file, the largest read, parses
/// in under a second in a release build and in about 0.7 s in a debug one).
const PARSE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Parses a sweep from text. `env` looks up `${VAR}` references; `name` labels diagnostics.
pub(crate) fn parse(
    name: &str,
    text: &str,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    overrides: &Overrides,
) -> Result<Sweep, SweepError> {
    let into_error = |problems: Vec<Problem>| {
        let (problems, total) = bounds::cap(problems);
        SweepError {
            src: miette::NamedSource::new(name, text.to_string()),
            problems,
            total,
        }
    };
    if let Some(p) = bounds::check_before_parse(text) {
        return Err(into_error(vec![p]));
    }
    // The KDL parser recurses per level and per value: on its own thread with a stack of its
    // own, whatever thread (a test's 2 MiB one) asked. check_before_parse keeps the nesting it sees
    // to 32 levels, and a file to bounds::MAX_OPENERS (8,192) `{` and `/*` in all, which
    // bounds how deep the parser can recurse whatever it makes of the text: 256 MiB holds
    // that many levels (measured: 9,000 nested blocks or comments in a debug build; a debug
    // level takes 16-21 KiB). Only touched pages of the reservation are ever committed.
    // check_before_parse also refuses the shapes known to take the parser quadratic time; for any
    // other, the parse has PARSE_LIMIT: past it the file is refused with that cause (the
    // thread is left to finish on its own; the CLI exits with the error).
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = text.to_string();
    std::thread::Builder::new()
        .name("kdl-parse".into())
        .stack_size(256 << 20)
        .spawn(move || {
            let _ = tx.send(raw::parse_kdl(&owned));
        })
        .expect("spawn the parser thread");
    let parsed = match rx.recv_timeout(PARSE_LIMIT) {
        Ok(parsed) => parsed,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            return Err(into_error(vec![Problem::new(
                miette::SourceSpan::from(0..0),
                format!(
                    "the KDL parser did not finish within {} s on this file",
                    PARSE_LIMIT.as_secs()
                ),
                "parsing stopped",
            )
            .with_help(
                "real sweep files parse in milliseconds: this one holds a shape that makes the \
                 parser slow (please report it); look for long runs of repeated tokens",
            )]))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the KDL parser panicked")
        }
    };
    let mut nodes = parsed.map_err(|e| {
        into_error(
            e.diagnostics
                .into_iter()
                .map(|d| Problem {
                    message: d.message.unwrap_or_else(|| "invalid KDL".to_string()),
                    span: d.span,
                    label: d.label.unwrap_or_else(|| "here".to_string()),
                    help: d.help,
                })
                .collect(),
        )
    })?;
    let problems = overrides::apply_sets(&mut nodes, &overrides.sets);
    if !problems.is_empty() {
        return Err(into_error(problems));
    }
    let mut sweep = resolve::resolve(&nodes, base_dir, env).map_err(into_error)?;
    sweep.source = Source {
        name: name.to_string(),
        text: text.into(),
    };
    Ok(sweep)
}

/// Why a sweep file could not be loaded: the file itself, its problems (with spans), or an
/// override that cannot apply.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Sweep(Box<SweepError>),
    #[error(transparent)]
    Override(#[from] overrides::OverrideError),
}

impl From<SweepError> for LoadError {
    fn from(e: SweepError) -> LoadError {
        LoadError::Sweep(Box::new(e))
    }
}

/// Reads and parses a sweep file, with the process environment for `${VAR}`.
pub(crate) fn load(path: &Path, overrides: &Overrides) -> Result<(Sweep, String), LoadError> {
    load_with_env(path, &|k: &str| std::env::var(k).ok(), overrides)
}

/// [`load`] with another lookup for `${VAR}` (`validate --syntax-only` stands in for the
/// variables of another machine).
pub(crate) fn load_with_env(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    overrides: &Overrides,
) -> Result<(Sweep, String), LoadError> {
    let bytes = bounds::read_bounded(path, bounds::MAX_SWEEP_BYTES, "sweep file")?;
    let text = String::from_utf8(bytes).map_err(|e| InputError::NotText {
        path: path.to_path_buf(),
        at: e.utf8_error().valid_up_to(),
    })?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut sweep = parse(&path.display().to_string(), &text, &base, env, overrides)?;
    overrides::apply_only(&mut sweep, &overrides.only)?;
    Ok((sweep, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str, env: &[(&str, &str)]) -> Sweep {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        parse(
            "t.kdl",
            text,
            Path::new("/sweeps"),
            &lookup,
            &Overrides::default(),
        )
        .unwrap_or_else(|e| panic!("{}", diag::render(&e, false)))
    }

    /// The problems a sweep text is refused for (no environment, no overrides).
    fn parse_err(text: &str) -> SweepError {
        parse(
            "t.kdl",
            text,
            Path::new("/"),
            &|_| None,
            &Overrides::default(),
        )
        .unwrap_err()
    }

    fn messages(err: &SweepError) -> Vec<&str> {
        err.problems.iter().map(|p| p.message.as_str()).collect()
    }

    const TEXT: &str = r##"
sweep "s" { seed 5; repeats 3; }
defaults { max-tokens 32; temperature 0.5; top-p 0.9; stop "\n" "END"; warmup 0; request-timeout 30; }
model "m" {
    quantization "q4_1" path="${MODELS}/m-q4_1.gguf"
    quantization "Q8_0" path="${MODELS}/m-q8_0.gguf"
}
model "r" { id "org/remote"; }
engine "e" { kind "llama.cpp"; binary "llama-server"; parallel 8; ctx-size 4096; args "--threads" "${THREADS}"; env A="1" B=2; api "completion"; }
engine "x" { kind "openai"; launcher "endpoint"; url "http://127.0.0.1:9/"; served-model "srv"; api-key-env "KEY_VAR"; }
task "t" { kind "mmlu"; dataset "../datasets/mmlu"; samples 20; shots 3; system "be brief"; }
scenario "u" { kind "server"; users 1 2; rate 6.5; duration 30 60; }
matrix { exclude model="r" engine="e"; exclude model="m" engine="x"; }
"##;

    #[test]
    fn decodes_every_field() {
        let s = parse_ok(TEXT, &[("MODELS", "/w"), ("THREADS", "4")]);
        assert_eq!((s.name.as_str(), s.seed, s.repeats), ("s", 5, 3));
        let d = &s.defaults;
        assert_eq!(
            d.sampling,
            Sampling {
                max_tokens: 32,
                temperature: 0.5,
                top_p: 0.9,
                stop: vec!["\n".into(), "END".into()],
                ..Default::default()
            }
        );
        assert_eq!((d.warmup, d.request_timeout_s), (0, 30.0));
        let m = &s.models[0];
        assert_eq!(m.source, ModelSource::Path("/w/m-q4_1.gguf".into()));
        let q: Vec<(&str, Option<&str>)> = m
            .variants
            .iter()
            .map(|v| (v.quantization.value.as_str(), v.path.as_deref()))
            .collect();
        assert_eq!(
            q,
            [
                ("q4_1", Some("/w/m-q4_1.gguf")),
                ("q8_0", Some("/w/m-q8_0.gguf"))
            ]
        );
        assert_eq!(s.models[1].source, ModelSource::Id("org/remote".into()));
        assert_eq!(s.models[1].variants[0].quantization.value, "default");
        let e = &s.engines[0];
        assert_eq!(
            e.launch,
            Launch::Process {
                binary: "llama-server".into()
            }
        );
        assert_eq!((e.parallel, e.ctx_size, e.api), (8, 4096, Api::Completion));
        assert_eq!(e.args, ["--threads", "4"]);
        assert_eq!(
            e.env,
            [
                ("A".to_string(), "1".to_string()),
                ("B".to_string(), "2".to_string())
            ]
        );
        assert_eq!(
            s.engines[1].launch,
            Launch::Endpoint {
                url: "http://127.0.0.1:9".into(),
                served_model: Some("srv".into()),
                api_key_env: Some("KEY_VAR".into())
            }
        );
        let t = &s.tasks[0];
        assert_eq!(
            (t.samples, t.shots, t.system.as_deref()),
            (Some(20), 3, Some("be brief"))
        );
        assert_eq!(
            s.resolve_path(&t.dataset.value),
            PathBuf::from("/sweeps/../datasets/mmlu")
        );
        match &s.scenarios[0].spec {
            ScenarioSpec::Server {
                users,
                rate,
                duration_s,
            } => {
                assert_eq!(
                    (users.as_slice(), rate.as_slice(), duration_s.as_slice()),
                    (&[1, 2][..], &[6.5][..], &[30.0, 60.0][..])
                );
            }
            other => panic!("{other:?}"),
        }
        // 2 variants × e + r × x, each × 2 users × 2 durations, × 3 repeats.
        assert_eq!(crate::spec::expand::configs(&s).len(), 3 * 4 * 3);
    }

    #[test]
    fn a_scenarios_repeats_runs_the_first_of_the_sweeps_and_never_more() {
        let body = "model \"m\" { id \"o/m\"; }\nengine \"x\" { kind \"openai\"; launcher \"endpoint\"; url \"http://127.0.0.1:9\"; }\ntask \"t\" { kind \"mmlu\"; dataset \"d\"; }\nscenario \"timed\" { kind \"single\"; }\n";
        let per_scenario = |s: &Sweep| -> Vec<(usize, u32)> {
            crate::spec::expand::configs(s)
                .iter()
                .map(|c| (c.scenario, c.repeat))
                .collect()
        };
        // A temperature-0 quality pass once, beside a timed scenario's three repeats.
        let s = parse_ok(
            &format!("sweep \"s\" {{ repeats 3; cold-repeats #true; }}\n{body}scenario \"quality\" {{ kind \"concurrency\"; concurrency 8; repeats 1; }}\n"),
            &[],
        );
        assert_eq!(per_scenario(&s), [(0, 0), (0, 1), (0, 2), (1, 0)]);
        assert_eq!(s.scenarios[1].repeats(s.repeats), 1);
        // Lowered below it from the command line, the sweep's count wins.
        assert_eq!(s.scenarios[0].repeats(2), 2);
        // More than the sweep declares is an error at the value.
        let text = format!("sweep \"s\" {{ repeats 2; }}\n{body}scenario \"q\" {{ kind \"concurrency\"; concurrency 8; repeats 3; }}\n");
        let err = parse_err(&text);
        assert_eq!(
            messages(&err),
            ["scenario `q` repeats 3 times, more than the sweep's 2"]
        );
        let at = err.problems[0].span.offset();
        assert_eq!(&text[at..at + 1], "3");
    }

    #[test]
    fn a_tasks_own_ignore_eos_holds_for_its_runs_only_and_needs_the_engines_field() {
        let head =
            "sweep \"s\"\nmodel \"m\" { id \"o/m\"; }\nscenario \"c\" { kind \"single\"; }\n";
        let openai = "engine \"e\" { kind \"openai\"; launcher \"endpoint\"; url \"http://127.0.0.1:9\"; }\n";
        let per_task = |s: &Sweep| -> Vec<(usize, bool)> {
            crate::spec::expand::configs(s)
                .iter()
                .map(|c| (c.task, c.sampling.ignore_eos))
                .collect()
        };
        // A load task with exact output lengths beside a task whose answers end at EOS.
        let s = parse_ok(
            &format!("{head}{openai}task \"load\" {{ kind \"synthetic\"; input-tokens 32; output-tokens 8; ignore-eos #true; }}\ntask \"q\" {{ kind \"mmlu\"; dataset \"d\"; }}\n"),
            &[],
        );
        assert_eq!(per_task(&s), [(0, true), (1, false)]);
        // And the other way round: the sweep's, but not for one task.
        let s = parse_ok(
            &format!("defaults {{ ignore-eos #true; }}\n{head}{openai}task \"load\" {{ kind \"synthetic\"; input-tokens 32; }}\ntask \"q\" {{ kind \"mmlu\"; dataset \"d\"; ignore-eos #false; }}\n"),
            &[],
        );
        assert_eq!(per_task(&s), [(0, true), (1, false)]);
        // An engine that has no such request field is refused, as for the sweep's.
        let ollama = "engine \"o\" { kind \"ollama\"; launcher \"endpoint\"; url \"http://127.0.0.1:9\"; }\n";
        let err = parse_err(&format!(
            "{head}{ollama}task \"load\" {{ kind \"synthetic\"; input-tokens 32; ignore-eos #true; }}\n"
        ));
        assert_eq!(
            messages(&err),
            ["engine `o` (ollama) cannot be told `ignore-eos`"]
        );
        // Not refused where the matrix keeps that task from the engine, or where its tasks
        // turn the sweep's off.
        let s = parse_ok(
            &format!("{head}{openai}{ollama}task \"load\" {{ kind \"synthetic\"; input-tokens 32; ignore-eos #true; }}\ntask \"q\" {{ kind \"mmlu\"; dataset \"d\"; }}\nmatrix {{ exclude engine=\"o\" task=\"load\"; }}\n"),
            &[],
        );
        assert_eq!(crate::spec::expand::configs(&s).len(), 3);
        parse_ok(
            &format!("defaults {{ ignore-eos #true; }}\n{head}{ollama}task \"q\" {{ kind \"mmlu\"; dataset \"d\"; ignore-eos #false; }}\n"),
            &[],
        );
    }

    #[test]
    fn synthetic_tasks_decode_every_length_form_and_point_at_bad_ones() {
        let head = "sweep \"s\"\nmodel \"m\" { id \"o/m\"; }\nengine \"e\" { kind \"openai\"; launcher \"endpoint\"; url \"http://127.0.0.1:9\"; }\nscenario \"c\" { kind \"single\"; }\n";
        let s = parse_ok(
            &format!("{head}task \"a\" {{ kind \"synthetic\"; input-tokens \"normal\" mean=512 stddev=64 min=100; output-tokens \"histogram\" \"16:1\" \"64:3\"; shared-prefix 64; prefix-groups 4; turns 3; }}\ntask \"b\" {{ kind \"synthetic\"; input-tokens \"uniform\" min=10 max=20; }}\n"),
            &[],
        );
        let a = s.tasks[0].synthetic.as_ref().unwrap();
        assert_eq!(
            a.input,
            Lengths::Normal {
                mean: 512.0,
                stddev: 64.0,
                min: 100,
                max: 768
            }
        );
        assert_eq!(
            a.output,
            Some(Lengths::Histogram {
                bins: vec![(16, 1.0), (64, 3.0)]
            })
        );
        assert_eq!((a.shared_prefix, a.prefix_groups, a.turns), (64, 4, 3));
        assert_eq!(
            s.tasks[1].synthetic.as_ref().unwrap().input,
            Lengths::Uniform { min: 10, max: 20 }
        );
        let bad = format!(
            "{head}task \"a\" {{ kind \"synthetic\"; input-tokens \"uniform\" min=30 max=20; dataset \"d\"; }}\ntask \"b\" {{ kind \"synthetic\"; input-tokens \"histogram\" \"x:1\"; }}\ntask \"c\" {{ kind \"synthetic\"; input-tokens 32; shared-prefix 32; }}\ntask \"d\" {{ kind \"synthetic\"; }}\ntask \"e\" {{ kind \"mmlu\"; dataset \"d\"; turns 2; }}\n"
        );
        let err = parse_err(&bad);
        assert_eq!(
            messages(&err),
            [
                "`uniform` has min 30 above max 20",
                "`dataset` does not apply to a `synthetic` task",
                "a histogram bin is \"TOKENS:WEIGHT\"",
                "a shared prefix of 32 tokens leaves no room in prompts of 32 tokens",
                "synthetic task has no `input-tokens`",
                "`turns` does not apply to a `mmlu` task",
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_in_file_order() {
        let text = "sweep \"s\"\nmodel \"m\" { path 3; }\nengine \"e\" { kind \"nope\"; }\ntask \"t\" { kind \"mmlu\"; dataset \"d\"; shots 9; }\nscenario \"c\" { kind \"single\"; requests 0; }\n";
        let err = parse_err(text);
        assert_eq!(
            messages(&err),
            [
                "`path` expects a string",
                "process engine has no `binary`",
                "unknown engine kind `nope`",
                "`shots` must be between 0 and 5",
                "`requests` must be between 1 and 10000000",
            ]
        );
        let offsets: Vec<usize> = err.problems.iter().map(|p| p.span.offset()).collect();
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(&text[offsets[0]..offsets[0] + 1], "3");
    }

    #[test]
    fn the_slurm_block_is_decoded_and_checked() {
        let text = format!(
            "{TEXT}slurm {{ partition \"gpu\"; account \"${{ACCT}}\"; qos \"high\"; time \"1-02:00:00\"; gres \"gpu:h100:2\"; cpus 8; mem \"64G\"; sbatch-args \"--constraint=h100\" \"--exclusive\"; }}\n"
        );
        let s = parse_ok(
            &text,
            &[("MODELS", "/w"), ("THREADS", "4"), ("ACCT", "lab")],
        );
        assert_eq!(
            s.slurm,
            SlurmSettings {
                partition: Some("gpu".into()),
                account: Some("lab".into()),
                qos: Some("high".into()),
                time: Some("1-02:00:00".into()),
                gres: Some("gpu:h100:2".into()),
                cpus: Some(8),
                mem: Some("64G".into()),
                sbatch_args: vec!["--constraint=h100".into(), "--exclusive".into()],
            }
        );
        for (field, good) in [
            ("time", "90"),
            ("time", "2:30:00"),
            ("time", "3-12"),
            ("mem", "4000M"),
            ("mem", "12"),
        ] {
            let t = format!("{TEXT}slurm {{ {field} \"{good}\"; }}\n");
            parse_ok(&t, &[("MODELS", "/w"), ("THREADS", "4")]);
        }
        let bad =
            format!("{TEXT}slurm {{ time \"2h\"; mem \"lots\"; cpus 0; partitoin \"x\"; }}\n");
        let env = |k: &str| match k {
            "MODELS" => Some("/w".to_string()),
            "THREADS" => Some("4".to_string()),
            _ => None,
        };
        let err = parse("t.kdl", &bad, Path::new("/"), &env, &Overrides::default()).unwrap_err();
        let messages: Vec<&str> = err.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "`2h` is not a Slurm time limit",
                "`lots` is not a Slurm memory size",
                "`cpus` must be between 1 and 100000",
                "unknown field `partitoin` in `slurm`",
            ]
        );
    }

    const AXES: &str = r##"
sweep "s" { seed 1; max-parallel 2; }
model "m" { path "/w/m"; }
engine "v" {
    kind "vllm"
    binary "/bin/python"
    parallel 32 64
    gpu-memory 0.5
    tensor-parallel 1 2
    gpus 0 1
    args "--seed" "1"
    variant "graphs"
    variant "eager" args="--enforce-eager  --max-model-len 2048"
    variant "env" { args "--x" "a b"; env K="v"; }
}
engine "c" { kind "llama.cpp"; binary "/bin/llama-server"; cpus 0 1; }
task "t" { kind "mmlu"; dataset "../datasets/mmlu"; samples 4; }
scenario "one" { kind "single"; requests 2; }
matrix { exclude engine="v" tensor-parallel=2 variant="env"; }
"##;

    #[test]
    fn engine_setting_axes_expand_into_named_engines() {
        let s = parse_ok(AXES, &[]);
        assert_eq!(s.max_parallel, Some(2));
        let names: Vec<&str> = s.engines.iter().map(|e| e.name.value.as_str()).collect();
        assert_eq!(names.len(), 2 * 2 * 3 + 1);
        assert_eq!(names[0], "v[parallel=32,tensor-parallel=1,variant=graphs]");
        assert_eq!(names[12], "c");
        let e = s
            .engines
            .iter()
            .find(|e| e.name.value == "v[parallel=64,tensor-parallel=1,variant=eager]")
            .unwrap();
        assert_eq!((e.parallel, e.tensor_parallel, e.gpu_memory), (64, 1, 0.5));
        assert_eq!(e.base.value, "v");
        assert_eq!(e.variant.as_deref(), Some("eager"));
        // The block's arguments, then the variant's (split at spaces in `args=`).
        assert_eq!(
            e.args,
            ["--seed", "1", "--enforce-eager", "--max-model-len", "2048"]
        );
        // A tensor-parallel axis gives each degree the first GPUs it needs.
        assert_eq!(e.gpus, Some(vec![0]));
        let env = s
            .engines
            .iter()
            .find(|e| e.name.value == "v[parallel=32,tensor-parallel=2,variant=env]")
            .unwrap();
        assert_eq!(env.args, ["--seed", "1", "--x", "a b"]);
        assert_eq!(env.env, [("K".to_string(), "v".to_string())]);
        assert_eq!(env.gpus, Some(vec![0, 1]));
        assert_eq!(env.setting("variant"), "env");
        assert_eq!(env.setting("tensor-parallel"), "2");
        assert_eq!(s.engines[12].cpus, Some(vec![0, 1]));
        assert!(s.engines[12].settings.is_empty());
        // The exclude drops two of the twelve combinations (both parallel values).
        let deployments = crate::spec::expand::deployments(&s);
        assert_eq!(deployments.len(), 12 - 2 + 1);
    }

    #[test]
    fn only_narrows_by_an_engine_setting_or_a_full_name() {
        let only = |axis: &str, v: &str| {
            let mut s = parse_ok(AXES, &[]);
            overrides::apply_only(&mut s, &[(axis.to_string(), vec![v.to_string()])])
                .map(|()| {
                    crate::spec::expand::deployments(&s)
                        .iter()
                        .map(|d| s.engines[d.engine].name.value.clone())
                        .collect::<Vec<_>>()
                })
                .map_err(|e| e.to_string())
        };
        let v = only("variant", "eager").unwrap();
        assert_eq!(v.len(), 4, "{v:?}");
        assert!(v.iter().all(|n| n.contains("variant=eager")), "{v:?}");
        assert_eq!(only("parallel", "64").unwrap().len(), 5);
        let full = "v[parallel=32,tensor-parallel=1,variant=graphs]";
        assert_eq!(only("engine", full).unwrap(), [full]);
        assert_eq!(only("engine", "v").unwrap().len(), 10);
        let e = only("parallel", "8").unwrap_err();
        assert!(e.contains("has: 32, 64, 1"), "{e}");
    }
}
