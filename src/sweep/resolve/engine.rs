//! Resolving the `engine` part of a sweep file (see the parent module).

use super::*;

/// An `engine` block: kind and launcher, then every field with its check against the
/// catalog row.
///
/// Long on purpose: a flat list of `field → check` over the engine's fields (docs/sweep.md's
/// table in code); each check is a few lines and depends on the kind and launcher above it.
pub(super) fn resolve_engine(ctx: &mut Ctx, node: &RawNode) -> Option<Engine> {
    let name = ctx.block_name(node);
    let f = ctx.fields(node, ENGINE_FIELDS, &["env"]);
    let kind = match Ctx::first(&f, "kind") {
        Some(n) => ctx.one_str(n),
        None => {
            ctx.err_help(
                node.name.span,
                "engine has no `kind`",
                "missing `kind`",
                format!("add `kind \"llama.cpp\"`; {}", known_list(catalog::names())),
            );
            None
        }
    };
    let entry = kind.as_ref().and_then(|k| match catalog::lookup(&k.value) {
        Some(e) => Some(e),
        None => {
            let help = did_you_mean(&k.value, catalog::names())
                .unwrap_or_else(|| known_list(catalog::names()));
            ctx.err_help(
                k.span,
                format!("unknown engine kind `{}`", k.value),
                "not in the engine catalog",
                help,
            );
            None
        }
    });
    let launcher = Ctx::first(&f, "launcher").and_then(|n| ctx.one_str(n));
    let binary = Ctx::first(&f, "binary").and_then(|n| ctx.one_str(n));
    let url = Ctx::first(&f, "url").and_then(|n| ctx.one_str(n));
    let served_model = Ctx::first(&f, "served-model")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value);
    let api_key_env = Ctx::first(&f, "api-key-env").and_then(|n| ctx.one_str(n));
    if let Some(k) = &api_key_env {
        if !k
            .value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
            || k.value.is_empty()
        {
            ctx.err_help(
                k.span,
                "`api-key-env` names an environment variable",
                "not a variable name",
                "write the variable's name (e.g. `OPENAI_API_KEY`), never the key itself",
            );
        }
    }
    let launch = match launcher.as_ref().map(|l| l.value.as_str()) {
        Some("process") | None if url.is_none() => match binary {
            Some(b) => Some(Launch::Process {
                binary: ctx.expand_env(&b),
            }),
            None => {
                ctx.err_help(node.name.span, "process engine has no `binary`", "missing `binary`", "add `binary \"/path/to/llama-server\"` (or use `launcher \"endpoint\"` with a `url`)");
                None
            }
        },
        Some("endpoint") | None => match url {
            Some(u) => {
                let expanded = ctx.expand_env(&u);
                if !(expanded.starts_with("http://") || expanded.starts_with("https://")) {
                    ctx.err(
                        u.span,
                        "endpoint `url` must start with http:// or https://",
                        "not an http(s) URL",
                    );
                }
                if let Some(b) = binary {
                    ctx.err(
                        b.span,
                        "an endpoint engine has no `binary`",
                        "not used by `launcher \"endpoint\"`",
                    );
                }
                Some(Launch::Endpoint {
                    url: expanded.trim_end_matches('/').to_string(),
                    served_model,
                    api_key_env: api_key_env.map(|s| s.value),
                })
            }
            None => {
                ctx.err(
                    node.name.span,
                    "endpoint engine has no `url`",
                    "missing `url`",
                );
                None
            }
        },
        Some("process") => {
            ctx.err(
                url.map(|u| u.span).unwrap_or(node.span),
                "a process engine has no `url`",
                "bench360 picks a free loopback port itself",
            );
            None
        }
        Some("docker") => {
            let recipe = entry.and_then(|e| e.docker.as_ref());
            if entry.is_some() && recipe.is_none() {
                ctx.err_help(
                    launcher.as_ref().unwrap().span,
                    format!("engine kind `{}` has no container recipe", kind.as_ref().map(|k| k.value.as_str()).unwrap_or("")),
                    "no image in the catalog",
                    "use `launcher \"process\"` with its command, or an engine kind with an official image",
                );
            }
            for (field, what) in [(&binary, "binary"), (&url, "url")] {
                if let Some(v) = field {
                    ctx.err(
                        v.span,
                        format!("a docker engine has no `{what}`"),
                        "not used by `launcher \"docker\"`",
                    );
                }
            }
            let image = Ctx::first(&f, "image")
                .and_then(|n| ctx.one_str(n))
                .map(|s| ctx.expand_env(&s));
            let tag = Ctx::first(&f, "tag")
                .and_then(|n| ctx.one_str(n))
                .map(|s| ctx.expand_env(&s));
            let pull = match Ctx::first(&f, "pull").and_then(|n| ctx.one_str(n)) {
                None => PullPolicy::Missing,
                Some(p) if p.value == "missing" => PullPolicy::Missing,
                Some(p) if p.value == "always" => PullPolicy::Always,
                Some(p) => {
                    ctx.err_help(p.span, format!("unknown pull policy `{}`", p.value), "not a policy", "`missing` (use a local image when present) or `always` (pull at every apply)");
                    PullPolicy::Missing
                }
            };
            let env_pass: Vec<String> = Ctx::first(&f, "env-pass")
                .map(|n| ctx.strs(n))
                .unwrap_or_default()
                .into_iter()
                .filter(|s| {
                    let ok = !s.value.is_empty() && s.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if !ok {
                        ctx.err_help(s.span, "`env-pass` names environment variables", "not a variable name", "write names only (e.g. `HF_TOKEN`): values are read at launch and never stored");
                    }
                    ok
                })
                .map(|s| s.value)
                .collect();
            let shm_size = Ctx::first(&f, "shm-size")
                .and_then(|n| ctx.one_str(n))
                .and_then(|s| match parse_bytes(&s.value) {
                    Some(b) => Some(b),
                    None => {
                        ctx.err_help(
                            s.span,
                            format!("invalid size `{}`", s.value),
                            "not a size",
                            "e.g. `16g`, `512m`, or bytes",
                        );
                        None
                    }
                });
            let hf_cache = Ctx::first(&f, "hf-cache")
                .and_then(|n| ctx.one_str(n))
                .map(|s| ctx.expand_env(&s));
            recipe.map(|r| Launch::Docker {
                image: image.unwrap_or_else(|| r.image.to_string()),
                tag: tag.unwrap_or_else(|| r.tag.to_string()),
                pull,
                env_pass,
                shm_size,
                hf_cache,
            })
        }
        Some(other) => {
            let l = launcher.as_ref().unwrap();
            let help = did_you_mean(other, ["process", "endpoint", "docker"])
                .unwrap_or_else(|| known_list(["process", "endpoint", "docker"]));
            ctx.err_help(
                l.span,
                format!("unknown launcher `{other}`"),
                "not a launcher",
                help,
            );
            None
        }
    };
    let args = Ctx::first(&f, "args")
        .map(|n| {
            ctx.strs(n)
                .iter()
                .map(|s| ctx.expand_env(s))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut env_vars = Vec::new();
    for n in f.get("env").cloned().unwrap_or_default() {
        ctx.no_children(n);
        if n.props.is_empty() || !n.args.is_empty() {
            ctx.err(
                n.span,
                "`env` takes NAME=\"value\" properties",
                "e.g. env OMP_NUM_THREADS=\"2\"",
            );
        }
        for (k, v) in &n.props {
            match &v.value {
                RawValue::Str(s) => env_vars.push((
                    k.value.clone(),
                    ctx.expand_env(&Spanned::new(s.clone(), v.span)),
                )),
                RawValue::Int(i) => env_vars.push((k.value.clone(), i.to_string())),
                other => ctx.err(
                    v.span,
                    "environment values are strings",
                    format!("this is {}", other.type_name()),
                ),
            }
        }
    }
    let parallel = Ctx::first(&f, "parallel")
        .and_then(|n| ctx.one_int(n, 1, 4096))
        .unwrap_or(1) as u32;
    let ctx_size = Ctx::first(&f, "ctx-size")
        .and_then(|n| ctx.one_int(n, 64, 10_000_000))
        .unwrap_or(2048) as u32;
    let startup_timeout_s = Ctx::first(&f, "startup-timeout")
        .and_then(|n| ctx.one_num(n, 1.0, 86_400.0))
        .unwrap_or(600.0);
    let gpu_memory = Ctx::first(&f, "gpu-memory")
        .and_then(|n| ctx.one_num(n, 0.01, 1.0))
        .unwrap_or(0.9);
    let tensor_parallel = match Ctx::first(&f, "tensor-parallel") {
        Some(n) => {
            let tp = ctx.one_int(n, 1, 64).unwrap_or(1) as u32;
            if tp > 1 {
                if let Some(e) = entry.filter(|e| e.tensor_parallel_args.is_empty()) {
                    ctx.err_help(
                        n.name.span,
                        format!(
                            "engine kind `{}` cannot be told a tensor-parallel degree",
                            e.name
                        ),
                        "not for this kind",
                        "vllm, sglang, lmdeploy, tgi and llama.cpp take `tensor-parallel`",
                    );
                }
            }
            tp
        }
        None => 1,
    };
    let dtype = Ctx::first(&f, "dtype")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value)
        .unwrap_or_else(|| "auto".into());
    let gpus = Ctx::first(&f, "gpus").map(|n| {
        ctx.ints(n, 0, 1023)
            .into_iter()
            .map(|g| g as u32)
            .collect::<Vec<_>>()
    });
    let api = match Ctx::first(&f, "api").and_then(|n| ctx.one_str(n)) {
        None => Api::Chat,
        Some(s) if s.value == "chat" => Api::Chat,
        Some(s) if s.value == "completion" => Api::Completion,
        Some(s) => {
            ctx.err_help(
                s.span,
                format!("unknown api `{}`", s.value),
                "not an api",
                "use `chat` (/v1/chat/completions) or `completion` (/v1/completions)",
            );
            Api::Chat
        }
    };
    if let (Some(g), Some(n)) = (&gpus, Ctx::first(&f, "tensor-parallel")) {
        if (g.len() as u32) < tensor_parallel {
            ctx.err_help(
                n.name.span,
                format!(
                    "`tensor-parallel {tensor_parallel}` needs {tensor_parallel} GPUs; `gpus` lists {}",
                    g.len()
                ),
                "more GPUs than listed",
                "list as many `gpus` as the degree (their telemetry is sampled), or leave `gpus` out",
            );
        }
    }
    entry?;
    Some(Engine {
        name: name?,
        kind: kind?,
        catalog: entry?,
        launch: launch?,
        parallel,
        ctx_size,
        args,
        env: env_vars,
        startup_timeout_s,
        api,
        gpus,
        gpu_memory,
        tensor_parallel,
        dtype,
    })
}

/// `16g`, `512m`, `1024k` or plain bytes.
pub(super) fn parse_bytes(s: &str) -> Option<i64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mul) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1i64 << 10),
        'm' => (&s[..s.len() - 1], 1 << 20),
        'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s.as_str(), 1),
    };
    num.parse::<i64>().ok().filter(|n| *n > 0).map(|n| n * mul)
}
