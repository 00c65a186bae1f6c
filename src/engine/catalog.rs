//! The engine catalog, as data: how each engine is launched, checked for health and which
//! quantizations it runs. One table, so that adding an engine is adding a row.

#[derive(Debug)]
pub(crate) struct CatalogEntry {
    /// The `kind` a sweep names.
    pub name: &'static str,
    /// Arguments for the process launcher, before the sweep's own `args`. Placeholders:
    /// `{model.path}`, `{model.id}`, `{model.source}`, `{port}`, `{host}`, `{parallel}`,
    /// `{ctx.total}` (slots × per-slot context), `{ctx.slot}`, `{quantization}`.
    pub process_args: &'static [&'static str],
    /// Path polled until it answers 200 after launch.
    pub health_path: &'static str,
    /// Prometheus metrics path, when the engine serves one.
    pub metrics_path: Option<&'static str>,
    /// Arguments that make the binary print its version (pull node).
    pub version_args: &'static [&'static str],
    /// Quantizations the engine runs; empty means any.
    pub quantizations: &'static [&'static str],
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

pub(crate) const CATALOG: &[CatalogEntry] = &[
    CatalogEntry {
        name: "llama.cpp",
        process_args: &[
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
        ],
        health_path: "/health",
        metrics_path: Some("/metrics"),
        version_args: &["--version"],
        quantizations: GGUF_TYPES,
    },
    CatalogEntry {
        name: "openai",
        process_args: &[],
        health_path: "/v1/models",
        // vLLM, SGLang and TGI serve /metrics; a server without one is noted, not an error.
        metrics_path: Some("/metrics"),
        version_args: &["--version"],
        quantizations: &[],
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
    fn llama_cpp_runs_gguf_types_only() {
        let e = lookup("llama.cpp").unwrap();
        assert!(e.accepts_quantization("q4_1"));
        assert!(!e.accepts_quantization("awq"));
        assert!(lookup("openai").unwrap().accepts_quantization("awq"));
    }
}
