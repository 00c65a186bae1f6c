//! The environment a process engine inherits from bench360 and its key does not see: the
//! variables that change what the engine does (`VLLM_ATTENTION_BACKEND`, `LLAMA_ARG_*`,
//! `NCCL_*`, `OMP_NUM_THREADS`, `PYTHONPATH`…). Keying them would rerun whole caches whenever a
//! shell differs, so each run records them instead (its provenance), and `plan`/`apply` say
//! when a cached run was made under others. A variable of the engine block's own `env` is
//! keyed and not inherited; `CUDA_VISIBLE_DEVICES` is which devices, said by the provenance's
//! GPUs (bench360 sets it from `gpus`; Slurm per job).

use std::collections::BTreeMap;

use super::drift::{tally, warning};
use crate::spec::{Engine, Launch};

/// Variables of every process engine: CUDA, NCCL and PyTorch settings, thread counts, and
/// what Python imports.
const COMMON_PREFIXES: &[&str] = &["CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "TRITON_"];
const COMMON_NAMES: &[&str] = &[
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTHONPATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
];
const NOT_SETTINGS: &[&str] = &["CUDA_VISIBLE_DEVICES"];

/// What a possible secret is recorded as: that it was set, never its value nor a hash of it
/// (a published cache carries its salt, and a short secret's hash could be guessed).
pub(crate) const SET: &str = "(set)";

/// A value that may be a secret: by its name, by its form (a URL with credentials or a query
/// string, a token's well-known prefix), kept as [`SET`].
fn secret(name: &str, value: &str) -> bool {
    let n = name.to_ascii_uppercase();
    let by_name = [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASS",
        "PWD",
        "CRED",
        "AUTH",
        "PRIVATE",
        "COOKIE",
        "SESSION",
        "SIGNATURE",
    ]
    .iter()
    .any(|s| n.contains(s));
    let url = value.split_once("://").is_some_and(|(_, rest)| {
        rest.split('/').next().unwrap_or("").contains('@') || rest.contains('?')
    });
    let token = [
        "hf_",
        "sk-",
        "ghp_",
        "gho_",
        "github_pat_",
        "glpat-",
        "xox",
        "AKIA",
        "ASIA",
        "eyJ",
    ]
    .iter()
    .any(|p| value.starts_with(p));
    by_name || url || token
}

/// The variables of `vars` (the process's environment) that engine `e` inherits and that
/// change what it does, name → value (a possible secret as [`SET`]). None for an engine that
/// inherits nothing of bench360's (a container, an endpoint).
pub(crate) fn inherited(
    e: &Engine,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Option<BTreeMap<String, String>> {
    if !matches!(e.launch, Launch::Process { .. }) {
        return None;
    }
    let own = e.catalog.env_prefixes;
    let wanted = |n: &str| {
        !NOT_SETTINGS.contains(&n)
            && (COMMON_NAMES.contains(&n)
                || COMMON_PREFIXES.iter().chain(own).any(|p| n.starts_with(p)))
            && !e.env.iter().any(|(k, _)| k == n)
    };
    Some(
        vars.into_iter()
            .filter(|(n, _)| wanted(n))
            .map(|(n, v)| {
                let shown = if secret(&n, &v) { SET.to_string() } else { v };
                (n, shown)
            })
            .collect(),
    )
}

/// This process's environment, as [`inherited`] reads it (variables that are not UTF-8 are
/// left out).
pub(crate) fn process_vars() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// How `recorded` (a cached run's) differs from `now`: one line per variable
/// (`VLLM_X: FLASH_ATTN → FLASHINFER`, `NCCL_P2P_DISABLE: unset → 1`, `HF_TOKEN: unset →
/// (set)`); a secret's change of value is not seen.
pub(crate) fn differences(
    recorded: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Vec<String> {
    let show = |v: Option<&String>| v.map_or("unset".to_string(), String::clone);
    let mut names: Vec<&String> = recorded.keys().chain(now.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| recorded.get(*n) != now.get(*n))
        .map(|n| format!("{n}: {} → {}", show(recorded.get(n)), show(now.get(n))))
        .collect()
}

/// Cached runs (as [`super::drift::cached`] read them) made under another inherited
/// environment than this process's: per deployment label, how many runs and what differs (the
/// union over them). Runs recorded before the environment was kept, and engines that inherit
/// nothing, are not compared.
pub(crate) fn drift(
    sweep: &crate::spec::Sweep,
    plan: &super::Plan,
    cached: &[(usize, crate::record::provenance::Provenance)],
) -> Vec<(String, usize, Vec<String>)> {
    let vars = process_vars();
    let mut now: BTreeMap<usize, Option<BTreeMap<String, String>>> = BTreeMap::new();
    let mut out: Vec<(String, usize, Vec<String>)> = Vec::new();
    for (i, p) in cached {
        let dep = &plan.deployments[plan.runs[*i].deployment];
        let current = now
            .entry(dep.at.engine)
            .or_insert_with(|| inherited(&sweep.engines[dep.at.engine], vars.clone()));
        let (Some(current), Some(recorded)) = (current, &p.inherited_env) else {
            continue;
        };
        tally(&mut out, &dep.label, differences(recorded, current));
    }
    out
}

/// The warning `plan` and `apply` print for [`drift`]; empty when there is none.
pub(crate) fn drift_warning(drift: &[(String, usize, Vec<String>)]) -> String {
    warning(
        "⚠ cached runs were made under another inherited environment than this one (keys do not see it; they stay cached — to rerun them under this one, set the variables in the engine's `env`, which is keyed):",
        drift,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(kind: &str, launcher: &str, env: &str) -> Engine {
        let text = format!(
            r#"
sweep "t" {{ seed 1; }}
model "m" {{ path "/w/m.gguf"; quantization "{q}"; }}
engine "e" {{ kind "{kind}"; {launcher}; {env} }}
task "mmlu" {{ kind "mmlu"; dataset "/d/mmlu"; samples 4; }}
scenario "one" {{ kind "single"; requests 2; }}
"#,
            q = if kind == "vllm" { "fp8" } else { "q4_k_m" }
        );
        let s = super::super::tests::sweep(&text);
        s.engines[0].clone()
    }

    fn vars(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn an_engine_records_its_own_and_the_common_variables_and_hides_secrets() {
        let env = vars(&[
            ("VLLM_ATTENTION_BACKEND", "FLASHINFER"),
            ("VLLM_API_KEY", "hunter2"),
            ("SGLANG_X", "1"),
            ("NCCL_P2P_DISABLE", "1"),
            ("CUDA_VISIBLE_DEVICES", "3"),
            ("OMP_NUM_THREADS", "4"),
            ("TORCH_HOME", "https://u:pw@mirror/x"),
            ("HOME", "/root"),
            ("VLLM_LOGGING_LEVEL", "DEBUG"),
        ]);
        let e = engine(
            "vllm",
            r#"binary "/bin/true""#,
            r#"env VLLM_LOGGING_LEVEL="INFO""#,
        );
        let got = inherited(&e, env.clone()).unwrap();
        let names: Vec<&str> = got.keys().map(String::as_str).collect();
        // Its block's own `env` is keyed, not inherited; CUDA_VISIBLE_DEVICES is the devices.
        assert_eq!(
            names,
            [
                "NCCL_P2P_DISABLE",
                "OMP_NUM_THREADS",
                "TORCH_HOME",
                "VLLM_API_KEY",
                "VLLM_ATTENTION_BACKEND"
            ]
        );
        assert_eq!(got["VLLM_ATTENTION_BACKEND"], "FLASHINFER");
        assert_eq!(got["VLLM_API_KEY"], SET);
        assert_eq!(got["TORCH_HOME"], SET);
        assert!(!format!("{got:?}").contains("hunter2") && !format!("{got:?}").contains("pw@"));
        // llama.cpp does not read vLLM's variables.
        let l = engine("llama.cpp", r#"binary "/bin/true""#, "");
        let got = inherited(&l, env.clone()).unwrap();
        assert!(!got.keys().any(|k| k.starts_with("VLLM_")), "{got:?}");
        // A container inherits nothing of bench360's.
        let d = engine("llama.cpp", r#"launcher "docker"; image "x"; tag "1""#, "");
        assert_eq!(inherited(&d, env), None);
        // Tokens by their form, and URLs that carry a signature.
        for (n, v) in [
            ("VLLM_X", "hf_abcdef"),
            (
                "LLAMA_ARG_MODEL_URL",
                "https://h/m.gguf?X-Amz-Signature=abc",
            ),
            ("NCCL_Y", "sk-123"),
        ] {
            assert!(secret(n, v), "{n}={v}");
        }
        assert!(!secret("VLLM_ATTENTION_BACKEND", "FLASHINFER"));
        assert!(!secret("LLAMA_ARG_MODEL_URL", "https://h/m.gguf"));
    }

    #[test]
    fn differences_say_what_changed_and_a_secret_only_whether_it_is_set() {
        let a: BTreeMap<String, String> = vars(&[
            ("VLLM_ATTENTION_BACKEND", "FLASH_ATTN"),
            ("VLLM_API_KEY", SET),
            ("OMP_NUM_THREADS", "4"),
        ])
        .into_iter()
        .collect();
        let b: BTreeMap<String, String> = vars(&[
            ("VLLM_ATTENTION_BACKEND", "FLASHINFER"),
            ("VLLM_API_KEY", SET),
            ("NCCL_P2P_DISABLE", "1"),
            ("HF_HUB_TOKEN_SECRET", SET),
        ])
        .into_iter()
        .collect();
        assert_eq!(
            differences(&a, &b),
            [
                "HF_HUB_TOKEN_SECRET: unset → (set)",
                "NCCL_P2P_DISABLE: unset → 1",
                "OMP_NUM_THREADS: 4 → unset",
                "VLLM_ATTENTION_BACKEND: FLASH_ATTN → FLASHINFER"
            ]
        );
        assert!(differences(&a, &a).is_empty());
    }
}
