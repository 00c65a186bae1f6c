//! Resolving the `model` part of a sweep file (see the parent module).

use super::*;

pub(super) fn resolve_model(ctx: &mut Ctx, node: &RawNode) -> Option<Model> {
    let name = ctx.block_name(node);
    let f = ctx.fields(node, MODEL_FIELDS, &["quantization"]);
    let path = Ctx::first(&f, "path").and_then(|n| ctx.one_str(n));
    let id = Ctx::first(&f, "id").and_then(|n| ctx.one_str(n));
    let source = match (path, id) {
        (Some(p), None) => Some(ModelSource::Path(ctx.expand_env(&p))),
        (None, Some(i)) => Some(ModelSource::Id(ctx.expand_env(&i))),
        (Some(_), Some(i)) => {
            ctx.err(
                i.span,
                "a model has either `path` or `id`, not both",
                "second source",
            );
            None
        }
        // A `path`/`id` that is present but invalid is reported already.
        (None, None) if f.contains_key("path") || f.contains_key("id") => None,
        (None, None) => {
            let has_variant_paths = f.get("quantization").is_some_and(|v| {
                v.iter()
                    .all(|q| q.props.iter().any(|(k, _)| k.value == "path"))
            });
            if !has_variant_paths {
                ctx.err_help(
                    node.name.span,
                    "model has no weights",
                    "no `path` or `id`",
                    "add `path \"/models/x.gguf\"` (local weights) or `id \"org/name\"` (resolved by the engine)",
                );
            }
            None
        }
    };
    let mut variants = Vec::new();
    for q in f.get("quantization").cloned().unwrap_or_default() {
        if q.args.len() != 1 {
            ctx.err(
                q.span,
                "`quantization` takes one name",
                "e.g. quantization \"q4_1\" path=\"…\"",
            );
            continue;
        }
        let Some(qname) = (match &q.args[0].value {
            RawValue::Str(s) => Some(Spanned::new(s.to_ascii_lowercase(), q.args[0].span)),
            other => {
                ctx.err(
                    q.args[0].span,
                    "quantization name must be a string",
                    format!("this is {}", other.type_name()),
                );
                None
            }
        }) else {
            continue;
        };
        let mut vpath = None;
        for (k, v) in &q.props {
            match (k.value.as_str(), &v.value) {
                ("path", RawValue::Str(s)) => {
                    vpath = Some(ctx.expand_env(&Spanned::new(s.clone(), v.span)))
                }
                ("path", other) => ctx.err(
                    v.span,
                    "`path` must be a string",
                    format!("this is {}", other.type_name()),
                ),
                (other, _) => {
                    let help =
                        did_you_mean(other, ["path"]).unwrap_or_else(|| known_list(["path"]));
                    ctx.err_help(
                        k.span,
                        format!("unknown property `{other}` of `quantization`"),
                        "unknown property",
                        help,
                    );
                }
            }
        }
        if variants
            .iter()
            .any(|v: &Variant| v.quantization.value == qname.value)
        {
            ctx.err(
                qname.span,
                format!("quantization `{}` is listed twice", qname.value),
                "duplicate",
            );
            continue;
        }
        variants.push(Variant {
            quantization: qname,
            path: vpath,
        });
    }
    if variants.is_empty() {
        // A model without declared quantizations runs as published ("default").
        variants.push(Variant {
            quantization: Spanned::new("default".into(), node.name.span),
            path: None,
        });
    }
    let source = source.or_else(|| {
        variants
            .first()
            .and_then(|v| v.path.clone())
            .map(ModelSource::Path)
    })?;
    Some(Model {
        name: name?,
        source,
        variants,
    })
}
