//! Resolving the `matrix` part of a sweep file (see the parent module).

use super::*;

pub(super) fn resolve_matrix(
    ctx: &mut Ctx,
    node: &RawNode,
    (models, engines): (&[Model], &[Engine]),
    [model_names, mut engine_names, task_names, scenario_names]: [Vec<&str>; 4],
) -> Matrix {
    // A block's name selects all its setting combinations; a full name one of them.
    engine_names.extend(
        engines
            .iter()
            .filter(|e| !e.settings.is_empty())
            .map(|e| e.name.value.as_str()),
    );
    let f = ctx.fields(node, MATRIX_FIELDS, &["exclude"]);
    let refs = |field: &str, defined: Vec<&str>, ctx: &mut Ctx| -> Vec<Spanned<String>> {
        let Some(n) = Ctx::first(&f, field) else {
            return Vec::new();
        };
        let values = ctx.strs(n);
        let mut out: Vec<Spanned<String>> = Vec::new();
        for v in values {
            if !defined.contains(&v.value.as_str()) {
                let help = did_you_mean(&v.value, defined.iter().copied())
                    .unwrap_or_else(|| known_list(defined.iter().copied()));
                ctx.err_help(
                    v.span,
                    format!("unknown {field} `{}`", v.value),
                    format!("no {field} of this name is defined"),
                    help,
                );
            } else if out.iter().any(|o| o.value == v.value) {
                ctx.err(
                    v.span,
                    format!("{field} `{}` is listed twice", v.value),
                    "duplicate",
                );
            } else {
                out.push(v);
            }
        }
        out
    };
    let quant_names: BTreeSet<&str> = models
        .iter()
        .flat_map(|m| m.variants.iter().map(|v| v.quantization.value.as_str()))
        .collect();
    let m = Matrix {
        repeats: Vec::new(),
        models: refs("model", model_names, ctx),
        quantizations: refs("quantization", quant_names.into_iter().collect(), ctx),
        engines: refs("engine", engine_names, ctx),
        tasks: refs("task", task_names, ctx),
        scenarios: refs("scenario", scenario_names, ctx),
        max_tokens: Ctx::first(&f, "max-tokens")
            .map(|n| {
                ctx.ints(n, 1, 1_000_000)
                    .into_iter()
                    .map(|v| v as u32)
                    .collect()
            })
            .unwrap_or_default(),
        temperature: Ctx::first(&f, "temperature")
            .map(|n| ctx.nums(n, 0.0, 10.0))
            .unwrap_or_default(),
        top_p: Ctx::first(&f, "top-p")
            .map(|n| ctx.nums(n, 0.0, 1.0))
            .unwrap_or_default(),
        excludes: Vec::new(),
    };
    let mut excludes = Vec::new();
    for e in f.get("exclude").cloned().unwrap_or_default() {
        ctx.no_children(e);
        if !e.args.is_empty() || e.props.is_empty() {
            ctx.err_help(
                e.span,
                "`exclude` takes axis=value properties",
                "no conditions",
                "e.g. `exclude engine=\"vllm\" quantization=\"q4_1\"`",
            );
            continue;
        }
        let mut conditions = Vec::new();
        for (k, v) in &e.props {
            let axes = || EXCLUDE_AXES.iter().chain(crate::spec::ENGINE_AXES).copied();
            if !axes().any(|a| a == k.value) {
                let help = did_you_mean(&k.value, axes()).unwrap_or_else(|| known_list(axes()));
                ctx.err_help(
                    k.span,
                    format!("unknown axis `{}` in `exclude`", k.value),
                    "not a matrix axis",
                    help,
                );
                continue;
            }
            let value = match &v.value {
                RawValue::Str(s) => s.clone(),
                RawValue::Int(i) => i.to_string(),
                RawValue::Float(x) => x.to_string(),
                other => {
                    ctx.err(
                        v.span,
                        "exclude values are names or numbers",
                        format!("this is {}", other.type_name()),
                    );
                    continue;
                }
            };
            conditions.push((k.value.clone(), value));
        }
        excludes.push(Exclude {
            span: e.span,
            conditions,
        });
    }
    Matrix { excludes, ..m }
}
