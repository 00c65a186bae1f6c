//! Resolving the `task` part of a sweep file (see the parent module).

use super::*;

pub(super) fn resolve_task(ctx: &mut Ctx, node: &RawNode) -> Option<Task> {
    let name = ctx.block_name(node);
    let f = ctx.fields(node, TASK_FIELDS, &[]);
    let kinds = || TaskKind::ALL.iter().map(|(n, _)| *n);
    let kind = match Ctx::first(&f, "kind").and_then(|n| ctx.one_str(n)) {
        Some(k) => match TaskKind::ALL.iter().find(|(n, _)| *n == k.value) {
            Some((_, kind)) => Some(*kind),
            None => {
                let help = did_you_mean(&k.value, kinds()).unwrap_or_else(|| known_list(kinds()));
                ctx.err_help(
                    k.span,
                    format!("unknown task kind `{}`", k.value),
                    "not a built-in task",
                    help,
                );
                None
            }
        },
        None => {
            if Ctx::first(&f, "kind").is_none() {
                ctx.err_help(
                    node.name.span,
                    "task has no `kind`",
                    "missing `kind`",
                    known_list(kinds()),
                );
            }
            None
        }
    };
    let dataset = match Ctx::first(&f, "dataset") {
        Some(n) => ctx
            .one_str(n)
            .map(|s| Spanned::new(ctx.expand_env(&s), s.span)),
        None => {
            ctx.err_help(
                node.name.span,
                "task has no `dataset`",
                "missing `dataset`",
                "add `dataset \"../datasets/mmlu\"` (relative to the sweep file)",
            );
            None
        }
    };
    let samples = Ctx::first(&f, "samples")
        .and_then(|n| ctx.one_int(n, 1, 100_000_000))
        .map(|v| v as usize);
    let shots = Ctx::first(&f, "shots")
        .and_then(|n| ctx.one_int(n, 0, 5))
        .unwrap_or(0) as u32;
    let system = Ctx::first(&f, "system")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value);
    let mode = match Ctx::first(&f, "mode").and_then(|n| ctx.one_str(n)) {
        None => None,
        Some(s) if s.value == "chat" => Some(Api::Chat),
        Some(s) if s.value == "completion" => Some(Api::Completion),
        Some(s) => {
            ctx.err_help(
                s.span,
                format!("unknown mode `{}`", s.value),
                "not a prompting mode",
                "use `chat` (messages with a system prompt) or `completion` (one plain prompt)",
            );
            None
        }
    };
    let max_tokens = Ctx::first(&f, "max-tokens")
        .and_then(|n| ctx.one_int(n, 1, 1_000_000))
        .map(|v| v as u32);
    let stop = Ctx::first(&f, "stop")
        .map(|n| ctx.strs(n).into_iter().map(|s| s.value).collect())
        .unwrap_or_default();
    let article_words = Ctx::first(&f, "article-words")
        .and_then(|n| ctx.one_int(n, 10, 100_000))
        .unwrap_or(400) as usize;
    let sql_timeout_s = Ctx::first(&f, "sql-timeout")
        .and_then(|n| ctx.one_num(n, 0.001, 3600.0))
        .unwrap_or(5.0);
    let answer_format = Ctx::first(&f, "answer-format")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value);
    let extract = if kind == Some(TaskKind::Custom) {
        None
    } else {
        Ctx::first(&f, "extract").and_then(|n| ctx.one_str(n))
    };
    if let Some(e) = &extract {
        if let Err(err) = regex::Regex::new(&e.value) {
            ctx.err(
                e.span,
                format!("`extract` is not a valid regex: {err}"),
                "this pattern",
            );
        }
    }
    if let Some(k) = kind {
        let only = |field: &str| -> Option<&'static str> {
            match field {
                "answer-format" => Some("built-in (custom tasks write it in their template)"),
                "article-words" => Some("summarization"),
                "sql-timeout" => Some("text2sql or custom"),
                f if CUSTOM_FIELDS.contains(&f) => Some("custom"),
                _ => None,
            }
        };
        for (field, nodes) in &f {
            let allowed = match *field {
                "answer-format" => k != TaskKind::Custom,
                "article-words" => k == TaskKind::Summarization,
                "sql-timeout" => matches!(k, TaskKind::Text2Sql | TaskKind::Custom),
                f if CUSTOM_FIELDS.contains(&f) => k == TaskKind::Custom,
                _ => true,
            };
            if !allowed {
                ctx.err_help(
                    nodes[0].name.span,
                    format!("`{field}` does not apply to a `{}` task", kind_name(k)),
                    "not for this kind",
                    format!("`{field}` is for {} tasks", only(field).unwrap_or("other")),
                );
            }
        }
    }
    let custom = if kind == Some(TaskKind::Custom) {
        resolve_custom(ctx, node, &f)
    } else {
        None
    };
    if kind == Some(TaskKind::Custom) && custom.is_none() {
        return None;
    }
    Some(Task {
        name: name?,
        kind: kind?,
        dataset: dataset?,
        samples,
        shots,
        system,
        mode,
        max_tokens,
        stop,
        article_words,
        sql_timeout_s,
        answer_format,
        extract,
        custom,
    })
}

pub(super) fn kind_name(k: TaskKind) -> &'static str {
    TaskKind::ALL
        .iter()
        .find(|(_, x)| *x == k)
        .map(|(n, _)| *n)
        .expect("listed")
}

pub(super) fn resolve_custom(
    ctx: &mut Ctx,
    node: &RawNode,
    f: &BTreeMap<&str, Vec<&RawNode>>,
) -> Option<CustomTask> {
    let template = match Ctx::first(f, "template").and_then(|n| ctx.one_str(n)) {
        Some(t) => {
            if let Err(e) = crate::task::custom::check_template(&t.value) {
                ctx.err(t.span, e.0, "this template");
            }
            Some(t)
        }
        None => {
            if Ctx::first(f, "template").is_none() {
                ctx.err_help(
                    node.name.span,
                    "custom task has no `template`",
                    "missing `template`",
                    "add `template \"Question: {{ question }}\\nAnswer:\"` (minijinja over the dataset's fields)",
                );
            }
            None
        }
    };
    let reference = match Ctx::first(f, "reference").and_then(|n| ctx.one_str(n)) {
        Some(r) => Some(r),
        None => {
            if Ctx::first(f, "reference").is_none() {
                ctx.err_help(
                    node.name.span,
                    "custom task has no `reference`",
                    "missing `reference`",
                    "name the dataset field that holds the expected answer: `reference \"answer\"`",
                );
            }
            None
        }
    };
    let id_field = Ctx::first(f, "id")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value);
    let mut metrics = Vec::new();
    if let Some(n) = Ctx::first(f, "metrics") {
        for m in ctx.strs(n) {
            match Metric::ALL.iter().find(|(name, _)| *name == m.value) {
                Some((_, metric)) => metrics.push(Spanned::new(*metric, m.span)),
                None => {
                    let names = || Metric::ALL.iter().map(|(n, _)| *n);
                    let help =
                        did_you_mean(&m.value, names()).unwrap_or_else(|| known_list(names()));
                    ctx.err_help(
                        m.span,
                        format!("unknown metric `{}`", m.value),
                        "not a built-in metric",
                        help,
                    );
                }
            }
        }
    }
    let extract = Ctx::first(f, "extract").and_then(|n| ctx.one_str(n));
    if let Some(e) = &extract {
        if let Err(err) = regex::Regex::new(&e.value) {
            ctx.err(
                e.span,
                format!("`extract` is not a valid regex: {err}"),
                "this pattern",
            );
        }
    }
    let scorer = Ctx::first(f, "scorer").map(|n| {
        ctx.strs(n)
            .iter()
            .map(|s| ctx.expand_env(s))
            .collect::<Vec<_>>()
    });
    let scorer_timeout_s = Ctx::first(f, "scorer-timeout")
        .and_then(|n| ctx.one_num(n, 0.001, 86_400.0))
        .unwrap_or(300.0);
    let database = Ctx::first(f, "database")
        .and_then(|n| ctx.one_str(n))
        .map(|s| Spanned::new(ctx.expand_env(&s), s.span));
    let group_by = Ctx::first(f, "group-by")
        .map(|n| ctx.strs(n).into_iter().map(|s| s.value).collect())
        .unwrap_or_default();
    if metrics.is_empty() && scorer.is_none() {
        ctx.err_help(
            node.name.span,
            "custom task has neither `metrics` nor `scorer`",
            "nothing to score with",
            format!(
                "add `metrics \"exact_match\" \"f1\"` (any of {}) or `scorer \"python3\" \"score.py\"`",
                Metric::ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        );
        return None;
    }
    if let Some(m) = metrics.iter().find(|m| m.value == Metric::Sql) {
        if database.is_none() {
            ctx.err_help(
                m.span,
                "the `sql` metric needs a `database`",
                "no database to run SQL on",
                "add `database \"path/to/db.sqlite\"` (opened read-only)",
            );
        }
    }
    Some(CustomTask {
        template: template?,
        reference: reference?,
        id_field,
        metrics,
        extract,
        scorer,
        scorer_timeout_s,
        database,
        group_by,
    })
}
