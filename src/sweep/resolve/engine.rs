//! Resolving the `engine` part of a sweep file (see the parent module).

use super::*;

/// An `engine` block: kind and launcher, then every field with its check against the
/// catalog row.
///
/// Long on purpose: a flat list of `field → check` over the engine's fields (docs/sweep.md's
/// table in code); each check is a few lines and depends on the kind and launcher above it.
pub(super) fn resolve_engine(ctx: &mut Ctx, node: &RawNode) -> Option<Vec<Engine>> {
    let name = ctx.block_name(node);
    let f = ctx.fields(node, ENGINE_FIELDS, &["env", "variant"]);
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
    let parallel = int_axis(ctx, &f, "parallel", (1, 4096), 1);
    let ctx_size = int_axis(ctx, &f, "ctx-size", (64, 10_000_000), 2048);
    let startup_timeout_s = Ctx::first(&f, "startup-timeout")
        .and_then(|n| ctx.one_num(n, 1.0, 86_400.0))
        .unwrap_or(600.0);
    let gpu_memory = match Ctx::first(&f, "gpu-memory") {
        Some(n) => Axis {
            values: ctx.nums(n, 0.01, 1.0),
            span: Some(n.name.span),
        },
        None => Axis::one(0.9),
    };
    let tensor_parallel = int_axis(ctx, &f, "tensor-parallel", (1, 64), 1);
    if let (Some(span), Some(e)) = (tensor_parallel.span, entry) {
        if tensor_parallel.values.iter().any(|tp| *tp > 1) && e.tensor_parallel_args.is_empty() {
            ctx.err_help(
                span,
                format!(
                    "engine kind `{}` cannot be told a tensor-parallel degree",
                    e.name
                ),
                "not for this kind",
                "vllm, sglang, lmdeploy, tgi and llama.cpp take `tensor-parallel`",
            );
        }
    }
    let dtype = match Ctx::first(&f, "dtype") {
        Some(n) => {
            let values = ctx.strs(n);
            let mut out: Vec<String> = Vec::new();
            for v in values {
                if out.contains(&v.value) {
                    ctx.err(
                        v.span,
                        format!("`dtype` lists `{}` twice", v.value),
                        "duplicate value",
                    );
                } else {
                    out.push(v.value);
                }
            }
            Axis {
                values: out,
                span: Some(n.name.span),
            }
        }
        None => Axis::one("auto".to_string()),
    };
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
    let most_tp = tensor_parallel.values.iter().copied().max().unwrap_or(1) as u32;
    if let (Some(g), Some(span)) = (&gpus, tensor_parallel.span) {
        if (g.len() as u32) < most_tp {
            ctx.err_help(
                span,
                format!(
                    "`tensor-parallel {most_tp}` needs {most_tp} GPUs; `gpus` lists {}",
                    g.len()
                ),
                "more GPUs than listed",
                "list as many `gpus` as the degree (their telemetry is sampled), or leave `gpus` out",
            );
        }
    }
    let cpus = Ctx::first(&f, "cpus").map(|n| {
        if matches!(launch, Some(Launch::Endpoint { .. })) {
            ctx.err_help(
                n.name.span,
                "an endpoint engine cannot be given `cpus`",
                "bench360 does not start it",
                "pin the server where it is started, or let bench360 start it (`launcher \"process\"` or `\"docker\"`)",
            );
        }
        ctx.ints(n, 0, 4095)
            .into_iter()
            .map(|c| c as u32)
            .collect::<Vec<_>>()
    });
    let variants = resolve_variants(ctx, &f);
    let variant_span = f
        .get("variant")
        .and_then(|v| v.first())
        .map(|v| v.name.span);
    // Settings an engine is never told cannot be axes: every value would start the same
    // engine. An engine that is already running cannot be started with any.
    let axes: [(&str, usize, Option<SourceSpan>, &[&str]); 5] = [
        (
            "parallel",
            parallel.values.len(),
            parallel.span,
            &["{parallel}"],
        ),
        (
            "ctx-size",
            ctx_size.values.len(),
            ctx_size.span,
            &["{ctx.slot}", "{ctx.total}"],
        ),
        (
            "gpu-memory",
            gpu_memory.values.len(),
            gpu_memory.span,
            &["{gpu-memory}"],
        ),
        ("dtype", dtype.values.len(), dtype.span, &["{dtype}"]),
        ("variant", variants.len(), variant_span, &[]),
    ];
    for (field, n, span, placeholders) in axes {
        let Some(span) = span.filter(|_| n > 1) else {
            continue;
        };
        if matches!(launch, Some(Launch::Endpoint { .. })) {
            ctx.err_help(
                span,
                format!("an endpoint engine cannot take several `{field}` values"),
                "bench360 does not start it",
                "an endpoint is already running with its own settings: list one value, or let bench360 start the engine (`launcher \"process\"` or `\"docker\"`)",
            );
        } else if let Some(e) =
            entry.filter(|e| !placeholders.is_empty() && !placeholders.iter().any(|p| e.takes(p)))
        {
            ctx.err_help(
                span,
                format!("engine kind `{}` is not told `{field}`", e.name),
                "every value would start the same engine",
                "list one value, or give the engine's own flag in `variant` blocks (`variant \"a\" args=\"…\"`)",
            );
        }
    }
    if tensor_parallel.values.len() > 1 && matches!(launch, Some(Launch::Endpoint { .. })) {
        ctx.err_help(
            tensor_parallel.span.unwrap_or(node.span),
            "an endpoint engine cannot take several `tensor-parallel` values",
            "bench360 does not start it",
            "list one value, or let bench360 start the engine",
        );
    }
    entry?;
    let name = name?;
    let (kind, catalog, launch) = (kind?, entry?, launch?);
    let mut out = Vec::new();
    for &p in &parallel.values {
        for &c in &ctx_size.values {
            for &g in &gpu_memory.values {
                for d in &dtype.values {
                    for &tp in &tensor_parallel.values {
                        for v in variants
                            .iter()
                            .map(Some)
                            .chain(variants.is_empty().then_some(None))
                        {
                            let mut settings = Vec::new();
                            let mut set = |axis: &str, n: usize, value: String| {
                                if n > 1 {
                                    settings.push((axis.to_string(), value));
                                }
                            };
                            set("parallel", parallel.values.len(), p.to_string());
                            set("ctx-size", ctx_size.values.len(), c.to_string());
                            set("gpu-memory", gpu_memory.values.len(), g.to_string());
                            set("dtype", dtype.values.len(), d.clone());
                            set(
                                "tensor-parallel",
                                tensor_parallel.values.len(),
                                tp.to_string(),
                            );
                            set(
                                "variant",
                                variants.len(),
                                v.map(|v| v.name.clone()).unwrap_or_default(),
                            );
                            let full = if settings.is_empty() {
                                name.value.clone()
                            } else {
                                let list: Vec<String> =
                                    settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
                                format!("{}[{}]", name.value, list.join(","))
                            };
                            // With tensor parallelism as an axis, each degree takes the first
                            // GPUs it needs (its telemetry samples those alone).
                            let gpus = match &gpus {
                                Some(g) if tensor_parallel.values.len() > 1 => {
                                    Some(g[..(tp as usize).min(g.len())].to_vec())
                                }
                                other => other.clone(),
                            };
                            out.push(Engine {
                                name: Spanned::new(full, name.span),
                                base: name.clone(),
                                settings,
                                kind: kind.clone(),
                                catalog,
                                launch: launch.clone(),
                                parallel: p as u32,
                                ctx_size: c as u32,
                                args: args
                                    .iter()
                                    .chain(v.map(|v| &v.args).into_iter().flatten())
                                    .cloned()
                                    .collect(),
                                env: env_vars
                                    .iter()
                                    .chain(v.map(|v| &v.env).into_iter().flatten())
                                    .cloned()
                                    .collect(),
                                startup_timeout_s,
                                api,
                                gpus,
                                cpus: cpus.clone(),
                                gpu_memory: g,
                                tensor_parallel: tp as u32,
                                dtype: d.clone(),
                                variant: v.map(|v| v.name.clone()),
                            });
                        }
                    }
                }
            }
        }
    }
    Some(out)
}

/// The values of an engine setting that may list several (an axis), and the span of its
/// field; the default alone when the block leaves it out.
struct Axis<T> {
    values: Vec<T>,
    span: Option<SourceSpan>,
}

impl<T> Axis<T> {
    fn one(v: T) -> Self {
        Axis {
            values: vec![v],
            span: None,
        }
    }
}

fn int_axis(
    ctx: &mut Ctx,
    f: &BTreeMap<&str, Vec<&RawNode>>,
    field: &str,
    (min, max): (u64, u64),
    default: u64,
) -> Axis<u64> {
    match Ctx::first(f, field) {
        Some(n) => Axis {
            values: ctx.ints(n, min, max),
            span: Some(n.name.span),
        },
        None => Axis::one(default),
    }
}

/// An argument variant: `variant "eager" args="--enforce-eager"`, or with a block
/// `variant "x" { args "--flag" "value with spaces"; env NAME="v" }`.
struct EngineVariant {
    name: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

fn resolve_variants(ctx: &mut Ctx, f: &BTreeMap<&str, Vec<&RawNode>>) -> Vec<EngineVariant> {
    let mut out: Vec<EngineVariant> = Vec::new();
    for n in f.get("variant").cloned().unwrap_or_default() {
        let name = match n.args.as_slice() {
            [a] => match &a.value {
                RawValue::Str(s) if !s.is_empty() && !s.contains([',', '[', ']', '=']) => {
                    Spanned::new(s.clone(), a.span)
                }
                _ => {
                    ctx.err_help(a.span, "a variant's name is a plain string", "not a name", "e.g. `variant \"eager\" args=\"--enforce-eager\"` (no `,`, `[`, `]` or `=`: the name goes into the deployment's label)");
                    continue;
                }
            },
            _ => {
                ctx.err_help(
                    n.name.span,
                    "`variant` takes one name",
                    "e.g. variant \"eager\" args=\"--enforce-eager\"",
                    "name each variant once; its arguments follow as `args=\"…\"`",
                );
                continue;
            }
        };
        let mut v = EngineVariant {
            name: name.value.clone(),
            args: Vec::new(),
            env: Vec::new(),
        };
        for (k, val) in &n.props {
            match (k.value.as_str(), &val.value) {
                ("args", RawValue::Str(s)) => v.args.extend(
                    ctx.expand_env(&Spanned::new(s.clone(), val.span))
                        .split_whitespace()
                        .map(str::to_string),
                ),
                ("args", other) => ctx.err(
                    val.span,
                    "`args` is a string",
                    format!("this is {}", other.type_name()),
                ),
                (other, _) => {
                    let help =
                        did_you_mean(other, ["args"]).unwrap_or_else(|| known_list(["args"]));
                    ctx.err_help(
                        k.span,
                        format!("unknown property `{other}` of `variant`"),
                        "unknown property",
                        help,
                    );
                }
            }
        }
        let fields = ctx.fields(n, &["args", "env"], &["env"]);
        if let Some(a) = Ctx::first(&fields, "args") {
            for s in ctx.strs(a) {
                v.args.push(ctx.expand_env(&s));
            }
        }
        for e in fields.get("env").cloned().unwrap_or_default() {
            ctx.no_children(e);
            for (k, val) in &e.props {
                match &val.value {
                    RawValue::Str(s) => v.env.push((
                        k.value.clone(),
                        ctx.expand_env(&Spanned::new(s.clone(), val.span)),
                    )),
                    RawValue::Int(i) => v.env.push((k.value.clone(), i.to_string())),
                    other => ctx.err(
                        val.span,
                        "environment values are strings",
                        format!("this is {}", other.type_name()),
                    ),
                }
            }
        }
        if out.iter().any(|o| o.name == v.name) {
            ctx.err(
                name.span,
                format!("variant `{}` is listed twice", v.name),
                "duplicate",
            );
        } else if let Some(same) = out.iter().find(|o| o.args == v.args && o.env == v.env) {
            ctx.err_help(
                name.span,
                format!(
                    "variant `{}` starts the engine as `{}` does",
                    v.name, same.name
                ),
                "the same arguments and environment",
                "variants differ in what the engine is started with; drop one",
            );
        } else {
            out.push(v);
        }
    }
    out
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
