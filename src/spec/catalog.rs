//! The engine catalog, as data: for each engine, how it is launched as a local process and as
//! a container, how its health is checked, where its metrics are and which quantizations it
//! runs. One table, so that adding an engine is adding a row, and every launcher reads it.
//!
//! Argument placeholders: `{model.path}` (weights path; inside a container, where they are
//! mounted), `{model.id}`, `{model.source}` (path if any, else id), `{model.name}` (the
//! sweep's name, served as the model name), `{host}`, `{port}`, `{parallel}` (slots / max
//! concurrent sequences), `{ctx.slot}` (context per sequence), `{ctx.total}` (slots ×
//! per-slot context, for llama.cpp whose slots share one context), `{gpu-memory}` (fraction
//! of GPU memory the engine may take), `{dtype}`, `{quantization}`.
//!
//! Flag names follow each engine's documentation of its server CLI: llama.cpp
//! `tools/server/README.md`; vLLM "OpenAI-compatible server" engine arguments; SGLang "Server
//! arguments"; TGI `text-generation-launcher --help`; LMDeploy `lmdeploy serve api_server
//! --help`; Ollama's environment variables (`OLLAMA_HOST`, `OLLAMA_NUM_PARALLEL`,
//! `OLLAMA_CONTEXT_LENGTH`).

#[derive(Debug)]
pub(crate) struct DockerRecipe {
    /// Official image and pinned default tag (a sweep may override both).
    pub image: &'static str,
    pub tag: &'static str,
    /// Replaces the image's entrypoint when set.
    pub entrypoint: Option<&'static [&'static str]>,
    /// Environment of the container (values may use placeholders).
    pub env: &'static [(&'static str, &'static str)],
    /// Port the engine listens on inside the container.
    pub port: u16,
    /// Share the host's IPC namespace (PyTorch engines exchange tensors through /dev/shm).
    pub ipc_host: bool,
}

#[derive(Debug)]
pub(crate) struct CatalogEntry {
    /// The `kind` a sweep names.
    pub name: &'static str,
    /// The server's own arguments, the same for both launchers (a container's command after
    /// its entrypoint; a process's after `process_prefix`), before the sweep's own `args`.
    pub server_args: &'static [&'static str],
    /// What the process launcher puts before `server_args`: the module when the binary is a
    /// Python (`-m vllm.entrypoints.openai.api_server`).
    pub process_prefix: &'static [&'static str],
    /// Arguments added when the quantization is not `default` and the engine is told it
    /// (GGUF engines read it from the file: none).
    pub quantization_args: &'static [&'static str],
    /// Arguments added when `tensor-parallel` is above 1 (`{tp}` is the degree); empty: the
    /// engine cannot be told one.
    pub tensor_parallel_args: &'static [&'static str],
    pub docker: Option<DockerRecipe>,
    /// Path polled until it answers 200 after launch.
    pub health_path: &'static str,
    /// Prometheus metrics path, when the engine serves one.
    pub metrics_path: Option<&'static str>,
    /// Arguments that make the binary print its version (pull node of a process engine).
    pub version_args: &'static [&'static str],
    /// The Python distribution that is the engine, when it runs from a Python environment
    /// (its binary an interpreter, or a console script of one): its installed version is
    /// keyed beside the binary's hash (`plan::python`), since upgrading it leaves both the
    /// same.
    pub python_distribution: Option<&'static str>,
    /// The prefixes of the environment variables the engine itself reads (`VLLM_`): what a
    /// process engine inherits of them is recorded with each run (`plan::inherited`).
    pub env_prefixes: &'static [&'static str],
    /// The request field that makes the engine ignore end-of-sequence, if it has one.
    pub ignore_eos_field: Option<&'static str>,
    /// The request field for a minimum number of generated tokens, if it has one.
    pub min_tokens_field: Option<&'static str>,
    /// Quantizations the engine runs; empty means any.
    pub quantizations: &'static [&'static str],
    /// How the engine counts tokens with its own tokenizer (synthetic prompts); None: probed.
    pub tokenize: Option<TokenizeApi>,
    /// Its `/v1/completions` returns the top log-probabilities of generated tokens when asked
    /// (`logprobs: N`): what `scoring "logprobs"` reads.
    pub completion_logprobs: bool,
    /// How the engine is told to answer with one of a few strings (`scoring "constrained"`),
    /// if it can be.
    pub choice_constraint: Option<ChoiceConstraint>,
    /// The folders it fills on a first start and reads on later ones (compiled graphs,
    /// JIT-built kernels), when started as a process: a cold start that finds them filled is
    /// a repeated start, not a first one.
    pub compile_caches: &'static [CompileCache],
}

/// A folder an engine's start fills and a later start reads: the one `env` names when the
/// engine's environment sets it, else `default`, where `{home}` is `$HOME`, `{cache}`
/// `$XDG_CACHE_HOME` (else `{home}/.cache`), `{tmp}` the temporary folder (`$TMPDIR`, else
/// `/tmp`) and `{user}` `$USER` — as each library resolves its own.
#[derive(Debug)]
pub(crate) struct CompileCache {
    pub env: &'static str,
    pub default: &'static str,
}

/// vLLM's own cache root: `torch_compile_cache` (its compiled graphs, AOT-compiled
/// functions), FlashInfer's autotune cache… (`vllm/envs.py`: `VLLM_CACHE_ROOT`).
const VLLM_CACHE: CompileCache = CompileCache {
    env: "VLLM_CACHE_ROOT",
    default: "{cache}/vllm",
};
/// Triton's compiled kernels (`TRITON_CACHE_DIR`, else `~/.triton/cache`).
const TRITON_CACHE: CompileCache = CompileCache {
    env: "TRITON_CACHE_DIR",
    default: "{home}/.triton/cache",
};
/// TorchInductor's generated code and compiled artifacts (`TORCHINDUCTOR_CACHE_DIR`, else
/// `torchinductor_<user>` in the temporary folder).
const INDUCTOR_CACHE: CompileCache = CompileCache {
    env: "TORCHINDUCTOR_CACHE_DIR",
    default: "{tmp}/torchinductor_{user}",
};
const TORCH_ENGINE_CACHES: &[CompileCache] = &[TRITON_CACHE, INDUCTOR_CACHE];
/// SGLang's own CUDA kernels (RoPE, the KV-cache store, activations), built with nvcc through
/// TVM-FFI on their first use and loaded from here after (`TVM_FFI_CACHE_DIR`, else
/// `~/.cache/tvm-ffi`, not XDG-aware). On one H200 the first start's prefill CUDA-graph
/// capture, which runs the first forward passes, took 83.7 s, the next start's 5.1 s.
const TVM_FFI_CACHE: CompileCache = CompileCache {
    env: "TVM_FFI_CACHE_DIR",
    default: "{home}/.cache/tvm-ffi",
};

/// An engine's own form of "the output is exactly one of these strings".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChoiceConstraint {
    /// llama.cpp: a GBNF `grammar` field.
    Grammar,
    /// vLLM (0.12 on): `structured_outputs: {choice: […]}`.
    StructuredOutputs,
    /// SGLang: a `regex` field.
    Regex,
}

impl ChoiceConstraint {
    /// The request field and value that restrict the output to one of `choices` (plain
    /// letters or words: no quoting beyond what they need).
    pub fn field(self, choices: &[&str]) -> (&'static str, serde_json::Value) {
        match self {
            ChoiceConstraint::Grammar => (
                "grammar",
                serde_json::json!(format!(
                    "root ::= {}",
                    choices
                        .iter()
                        .map(|c| format!("{c:?}"))
                        .collect::<Vec<_>>()
                        .join(" | ")
                )),
            ),
            ChoiceConstraint::StructuredOutputs => (
                "structured_outputs",
                serde_json::json!({ "choice": choices }),
            ),
            ChoiceConstraint::Regex => (
                "regex",
                serde_json::json!(format!(
                    "({})",
                    choices
                        .iter()
                        .map(|c| regex::escape(c))
                        .collect::<Vec<_>>()
                        .join("|")
                )),
            ),
        }
    }
}

/// A server's tokenizer endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenizeApi {
    /// llama.cpp: `/tokenize {content}`, `/detokenize {tokens}`, `/apply-template {messages}`.
    LlamaCpp,
    /// vLLM and SGLang: `/tokenize {model, prompt | messages}` (with `count`), `/detokenize`
    /// (its text as `prompt` on vLLM, `text` on SGLang).
    Vllm,
    /// LMDeploy: `/v1/encode {input, do_preprocess, add_bos}`; no detokenize endpoint.
    Lmdeploy,
}

impl CatalogEntry {
    pub fn accepts_quantization(&self, q: &str) -> bool {
        q == "default" || self.quantizations.is_empty() || self.quantizations.contains(&q)
    }
}

const GGUF_TYPES: &[&str] = &[
    "f32", "f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q5_k_s", "q5_1", "q5_0", "q4_k_m", "q4_k_s",
    "q4_1", "q4_0", "q3_k_l", "q3_k_m", "q3_k_s", "q2_k", "iq4_xs", "iq4_nl", "iq3_xxs", "iq3_s",
    "iq2_xs", "iq2_xxs", "iq1_s", "tq1_0", "tq2_0",
];

const LLAMA_CPP_ARGS: &[&str] = &[
    "--model",
    "{model.path}",
    "--host",
    "{host}",
    "--port",
    "{port}",
    "--parallel",
    "{parallel}",
    "--ctx-size",
    "{ctx.total}",
    "--metrics",
];

const VLLM_ARGS: &[&str] = &[
    "--model",
    "{model.source}",
    "--served-model-name",
    "{model.name}",
    "--host",
    "{host}",
    "--port",
    "{port}",
    "--max-num-seqs",
    "{parallel}",
    "--max-model-len",
    "{ctx.slot}",
    "--gpu-memory-utilization",
    "{gpu-memory}",
    "--dtype",
    "{dtype}",
];

const SGLANG_ARGS: &[&str] = &[
    "--model-path",
    "{model.source}",
    "--served-model-name",
    "{model.name}",
    "--host",
    "{host}",
    "--port",
    "{port}",
    "--max-running-requests",
    "{parallel}",
    "--context-length",
    "{ctx.slot}",
    "--mem-fraction-static",
    "{gpu-memory}",
    "--dtype",
    "{dtype}",
    "--enable-metrics",
];

const TGI_ARGS: &[&str] = &[
    "--model-id",
    "{model.source}",
    "--hostname",
    "{host}",
    "--port",
    "{port}",
    "--max-concurrent-requests",
    "{parallel}",
    "--max-total-tokens",
    "{ctx.slot}",
    "--cuda-memory-fraction",
    "{gpu-memory}",
];

const LMDEPLOY_ARGS: &[&str] = &[
    "serve",
    "api_server",
    "{model.source}",
    "--model-name",
    "{model.name}",
    "--server-name",
    "{host}",
    "--server-port",
    "{port}",
    "--max-batch-size",
    "{parallel}",
    "--session-len",
    "{ctx.slot}",
    "--cache-max-entry-count",
    "{gpu-memory}",
    "--dtype",
    "{dtype}",
    "--backend",
    "pytorch",
];

impl CatalogEntry {
    /// The process launcher's arguments before the sweep's own: `process_prefix` then
    /// `server_args` (one list of the server's flags serves both launchers).
    /// Whether a placeholder (`{gpu-memory}`) reaches the engine: in its arguments or,
    /// for a container, its environment.
    pub fn takes(&self, placeholder: &str) -> bool {
        self.process_args()
            .iter()
            .chain(
                self.docker
                    .iter()
                    .flat_map(|d| d.env.iter().map(|(_, v)| v)),
            )
            .any(|a| a.contains(placeholder))
    }

    pub fn process_args(&self) -> Vec<&'static str> {
        self.process_prefix
            .iter()
            .chain(self.server_args)
            .copied()
            .collect()
    }
}

pub(crate) const CATALOG: &[CatalogEntry] = &[
    CatalogEntry {
        name: "llama.cpp",
        server_args: LLAMA_CPP_ARGS,
        process_prefix: &[],
        quantization_args: &[],
        // `row` is gone from CUDA builds (llama.cpp of llama-cpp-python 0.3.36: "device CUDA0
        // does not support split buffers"); `tensor` splits each layer's tensors over the GPUs
        // (measured on two H200s: docs/results-h200.md).
        tensor_parallel_args: &["--split-mode", "tensor"],
        docker: Some(DockerRecipe {
            // CPU build; `server-cuda` for NVIDIA GPUs.
            image: "ghcr.io/ggml-org/llama.cpp",
            tag: "server",
            entrypoint: None,
            env: &[],
            port: 8080,
            ipc_host: false,
        }),
        health_path: "/health",
        metrics_path: Some("/metrics"),
        version_args: &["--version"],
        python_distribution: None,
        env_prefixes: &["LLAMA_ARG_", "LLAMA_", "GGML_"],
        ignore_eos_field: Some("ignore_eos"),
        min_tokens_field: None,
        quantizations: GGUF_TYPES,
        tokenize: Some(TokenizeApi::LlamaCpp),
        completion_logprobs: true,
        choice_constraint: Some(ChoiceConstraint::Grammar),
        compile_caches: &[],
    },
    CatalogEntry {
        name: "vllm",
        // binary: a Python with vLLM installed (`python3`).
        server_args: VLLM_ARGS,
        process_prefix: &["-m", "vllm.entrypoints.openai.api_server"],
        quantization_args: &["--quantization", "{quantization}"],
        tensor_parallel_args: &["--tensor-parallel-size", "{tp}"],
        docker: Some(DockerRecipe {
            image: "vllm/vllm-openai",
            tag: "v0.26.0",
            entrypoint: Some(&["python3", "-m", "vllm.entrypoints.openai.api_server"]),
            env: &[("VLLM_NO_USAGE_STATS", "1")],
            port: 8000,
            ipc_host: true,
        }),
        health_path: "/health",
        metrics_path: Some("/metrics"),
        version_args: &["-c", "import vllm; print('vllm', vllm.__version__)"],
        python_distribution: Some("vllm"),
        env_prefixes: &["VLLM_"],
        ignore_eos_field: Some("ignore_eos"),
        min_tokens_field: Some("min_tokens"),
        quantizations: &[
            "awq",
            "awq_marlin",
            "gptq",
            "gptq_marlin",
            "fp8",
            "bitsandbytes",
            "compressed-tensors",
            "marlin",
            "modelopt",
            "gguf",
            "experts_int8",
        ],
        tokenize: Some(TokenizeApi::Vllm),
        completion_logprobs: true,
        choice_constraint: Some(ChoiceConstraint::StructuredOutputs),
        compile_caches: &[VLLM_CACHE, TRITON_CACHE, INDUCTOR_CACHE],
    },
    CatalogEntry {
        name: "sglang",
        // binary: a Python with SGLang installed (`python3`).
        server_args: SGLANG_ARGS,
        process_prefix: &["-m", "sglang.launch_server"],
        quantization_args: &["--quantization", "{quantization}"],
        tensor_parallel_args: &["--tp-size", "{tp}"],
        docker: Some(DockerRecipe {
            image: "lmsysorg/sglang",
            tag: "v0.5.17",
            entrypoint: Some(&["python3", "-m", "sglang.launch_server"]),
            env: &[],
            port: 30000,
            ipc_host: true,
        }),
        health_path: "/health",
        metrics_path: Some("/metrics"),
        version_args: &["-c", "import sglang; print('sglang', sglang.__version__)"],
        python_distribution: Some("sglang"),
        env_prefixes: &["SGLANG_", "SGL_"],
        ignore_eos_field: Some("ignore_eos"),
        min_tokens_field: Some("min_tokens"),
        quantizations: &[
            "awq",
            "awq_marlin",
            "gptq",
            "gptq_marlin",
            "fp8",
            "bitsandbytes",
            "compressed-tensors",
            "w8a8_int8",
            "w8a8_fp8",
            "modelopt",
            "gguf",
        ],
        tokenize: Some(TokenizeApi::Vllm),
        completion_logprobs: true,
        choice_constraint: Some(ChoiceConstraint::Regex),
        compile_caches: &[TVM_FFI_CACHE, TRITON_CACHE, INDUCTOR_CACHE],
    },
    CatalogEntry {
        name: "tgi",
        server_args: TGI_ARGS,
        process_prefix: &[],
        quantization_args: &["--quantize", "{quantization}"],
        tensor_parallel_args: &["--num-shard", "{tp}"],
        docker: Some(DockerRecipe {
            image: "ghcr.io/huggingface/text-generation-inference",
            tag: "3.3.6",
            entrypoint: None,
            env: &[],
            port: 80,
            ipc_host: false,
        }),
        health_path: "/health",
        metrics_path: Some("/metrics"),
        version_args: &["--version"],
        python_distribution: None,
        env_prefixes: &[],
        ignore_eos_field: None,
        min_tokens_field: None,
        quantizations: &[
            "awq",
            "gptq",
            "marlin",
            "eetq",
            "exl2",
            "fp8",
            "bitsandbytes",
            "bitsandbytes-nf4",
            "bitsandbytes-fp4",
        ],
        tokenize: None,
        completion_logprobs: false,
        choice_constraint: None,
        compile_caches: TORCH_ENGINE_CACHES,
    },
    CatalogEntry {
        name: "lmdeploy",
        // binary: `lmdeploy` (its CLI).
        server_args: LMDEPLOY_ARGS,
        process_prefix: &[],
        quantization_args: &["--model-format", "{quantization}"],
        tensor_parallel_args: &["--tp", "{tp}"],
        docker: Some(DockerRecipe {
            image: "openmmlab/lmdeploy",
            tag: "v0.18.0",
            entrypoint: Some(&["lmdeploy"]),
            env: &[],
            port: 23333,
            ipc_host: true,
        }),
        health_path: "/health",
        metrics_path: Some("/metrics"),
        version_args: &["--version"],
        python_distribution: Some("lmdeploy"),
        env_prefixes: &["LMDEPLOY_"],
        ignore_eos_field: Some("ignore_eos"),
        min_tokens_field: Some("min_new_tokens"),
        quantizations: &["awq", "gptq", "fp8"],
        tokenize: Some(TokenizeApi::Lmdeploy),
        completion_logprobs: false,
        choice_constraint: None,
        compile_caches: TORCH_ENGINE_CACHES,
    },
    CatalogEntry {
        name: "ollama",
        // Configured by environment; the model must be in Ollama's store (`ollama pull`).
        server_args: &["serve"],
        process_prefix: &[],
        quantization_args: &[],
        tensor_parallel_args: &[],
        docker: Some(DockerRecipe {
            image: "ollama/ollama",
            tag: "0.12.6",
            entrypoint: None,
            env: &[
                ("OLLAMA_HOST", "{host}:{port}"),
                ("OLLAMA_NUM_PARALLEL", "{parallel}"),
                ("OLLAMA_CONTEXT_LENGTH", "{ctx.slot}"),
            ],
            port: 11434,
            ipc_host: false,
        }),
        health_path: "/api/version",
        metrics_path: None,
        version_args: &["--version"],
        python_distribution: None,
        env_prefixes: &[],
        ignore_eos_field: None,
        min_tokens_field: None,
        quantizations: &[],
        tokenize: None,
        completion_logprobs: false,
        choice_constraint: None,
        compile_caches: &[],
    },
    CatalogEntry {
        name: "openai",
        // Any OpenAI-compatible server: the sweep's `args` are the whole command line.
        server_args: &[],
        process_prefix: &[],
        quantization_args: &[],
        tensor_parallel_args: &[],
        docker: None,
        health_path: "/v1/models",
        // vLLM, SGLang and TGI serve /metrics; a server without one is noted, not an error.
        metrics_path: Some("/metrics"),
        version_args: &["--version"],
        python_distribution: None,
        env_prefixes: &[],
        ignore_eos_field: Some("ignore_eos"),
        min_tokens_field: Some("min_tokens"),
        quantizations: &[],
        tokenize: None,
        // The OpenAI completions API itself returns them; a server that does not leaves
        // every answer unparsed, which the report shows.
        completion_logprobs: true,
        choice_constraint: None,
        compile_caches: &[],
    },
];

pub(crate) fn lookup(kind: &str) -> Option<&'static CatalogEntry> {
    CATALOG.iter().find(|e| e.name == kind)
}

pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    CATALOG.iter().map(|e| e.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_is_told_its_own_form_of_one_of_the_labels() {
        let labels = ["A", "B", "C", "D"];
        assert_eq!(
            ChoiceConstraint::Grammar.field(&labels),
            (
                "grammar",
                serde_json::json!(r#"root ::= "A" | "B" | "C" | "D""#)
            )
        );
        assert_eq!(
            ChoiceConstraint::StructuredOutputs.field(&labels),
            ("structured_outputs", serde_json::json!({"choice": labels}))
        );
        assert_eq!(
            ChoiceConstraint::Regex.field(&["A", "B.1"]),
            ("regex", serde_json::json!(r"(A|B\.1)"))
        );
        let of = |k: &str| lookup(k).unwrap().choice_constraint;
        assert_eq!(of("llama.cpp"), Some(ChoiceConstraint::Grammar));
        assert_eq!(of("vllm"), Some(ChoiceConstraint::StructuredOutputs));
        assert_eq!(of("tgi"), None);
    }

    #[test]
    fn llama_cpp_runs_gguf_types_only() {
        let e = lookup("llama.cpp").unwrap();
        assert!(e.accepts_quantization("q4_1"));
        assert!(!e.accepts_quantization("awq"));
        assert!(lookup("openai").unwrap().accepts_quantization("awq"));
        assert!(lookup("vllm").unwrap().accepts_quantization("awq"));
        assert!(!lookup("vllm").unwrap().accepts_quantization("q4_1"));
    }
}
