//! Resolving the `task` part of a sweep file (see the parent module).

use super::*;

/// A `task` block: kind and dataset, then the fields each kind takes.
///
/// Long on purpose: a flat list of `field → check` (docs/sweep.md's task rows in code), each
/// depending on the kind resolved first.
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
        // Synthetic prompts come from no file.
        None if kind == Some(TaskKind::Synthetic) => {
            Some(Spanned::new(String::new(), node.name.span))
        }
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
    let ignore_eos = Ctx::first(&f, "ignore-eos").and_then(|n| ctx.one_bool(n));
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
    let scoring_node = Ctx::first(&f, "scoring").and_then(|n| ctx.one_str(n));
    let scoring = match &scoring_node {
        None => Scoring::Generative,
        Some(s) => match Scoring::ALL.iter().find(|(n, _)| *n == s.value) {
            Some((_, sc)) => *sc,
            None => {
                let names = || Scoring::ALL.iter().map(|(n, _)| *n);
                let help = did_you_mean(&s.value, names()).unwrap_or_else(|| known_list(names()));
                ctx.err_help(
                    s.span,
                    format!("unknown scoring `{}`", s.value),
                    "not a scoring mode",
                    help,
                );
                Scoring::Generative
            }
        },
    };
    let fewshot_as_turns_node = Ctx::first(&f, "fewshot-as-turns");
    let fewshot_as_turns = fewshot_as_turns_node
        .and_then(|n| ctx.one_bool(n))
        .unwrap_or(false);
    if let (Some(n), true) = (fewshot_as_turns_node, fewshot_as_turns) {
        if shots == 0 {
            ctx.err_help(
                n.name.span,
                "`fewshot-as-turns` with no shots",
                "nothing to send as turns",
                "add `shots K` (1-5), or remove `fewshot-as-turns`",
            );
        }
        if mode == Some(Api::Completion) {
            ctx.err_help(
                n.name.span,
                "`fewshot-as-turns` needs chat messages, and this task is `mode \"completion\"`",
                "turns need a chat request",
                "remove `mode \"completion\"` (and use an engine with `api \"chat\"`), or remove `fewshot-as-turns`",
            );
        }
    }
    let reason_node = Ctx::first(&f, "reason");
    let reason = reason_node
        .and_then(|n| ctx.one_int(n, 1, 1_000_000))
        .map(|v| v as u32);
    if let (Some(n), true) = (reason_node, scoring != Scoring::Generative) {
        ctx.err_help(
            n.name.span,
            "`reason` does not apply with this task's `scoring`",
            "no reasoning is read",
            "reason-then-answer reads a generated final answer: use it with `scoring \"generative\"`",
        );
    }
    let (mut mode, mut max_tokens) = (mode, max_tokens);
    if scoring == Scoring::Logprobs {
        let span = scoring_node
            .as_ref()
            .map(|s| s.span)
            .unwrap_or(node.name.span);
        // The answer position's log-probabilities: a plain prompt ending at "Answer:", one
        // token generated, no text read.
        for field in ["answer-format", "extract", "max-tokens"] {
            if let Some(n) = Ctx::first(&f, field) {
                ctx.err_help(
                    n.name.span,
                    format!("`{field}` does not apply with `scoring \"logprobs\"`"),
                    "not read in logprobs scoring",
                    "logprobs scoring reads the options' log-probabilities after `Answer:` (one token, no text): remove it, or use `scoring \"generative\"`",
                );
            }
        }
        if mode == Some(Api::Chat) {
            ctx.err_help(
                span,
                "`scoring \"logprobs\"` needs `mode \"completion\"`",
                "a chat request has no answer position to read",
                "remove `mode \"chat\"`: logprobs scoring sends the plain prompt to /v1/completions",
            );
        }
        mode = Some(Api::Completion);
        max_tokens = Some(1);
    }
    if let Some(k) = kind {
        let only = |field: &str| -> Option<&'static str> {
            match field {
                "scoring" => Some("mmlu or custom `choice`"),
                "reason" => Some("every kind but synthetic"),
                "answer-format" => Some("built-in (custom tasks write it in their template)"),
                "extract" => Some("every kind but synthetic"),
                "article-words" => Some("summarization"),
                "sql-timeout" => Some("text2sql or custom"),
                "dataset" | "shots" => Some("dataset"),
                f if CUSTOM_FIELDS.contains(&f) => Some("custom"),
                f if SYNTHETIC_FIELDS.contains(&f) => Some("synthetic"),
                _ => None,
            }
        };
        for (field, nodes) in &f {
            let allowed = match *field {
                "scoring" => matches!(k, TaskKind::Mmlu | TaskKind::Custom),
                "reason" => k != TaskKind::Synthetic,
                "answer-format" => !matches!(k, TaskKind::Custom | TaskKind::Synthetic),
                // Every kind with a reference reads answers; synthetic prompts have none.
                "extract" => k != TaskKind::Synthetic,
                "article-words" => k == TaskKind::Summarization,
                "sql-timeout" => matches!(k, TaskKind::Text2Sql | TaskKind::Custom),
                "dataset" | "shots" => k != TaskKind::Synthetic,
                f if CUSTOM_FIELDS.contains(&f) => k == TaskKind::Custom,
                f if SYNTHETIC_FIELDS.contains(&f) => k == TaskKind::Synthetic,
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
    if let (Some(c), Some(s)) = (&custom, &scoring_node) {
        check_custom_scoring(ctx, c, scoring, s.span);
    }
    if kind == Some(TaskKind::Custom) && custom.is_none() {
        return None;
    }
    let synthetic = if kind == Some(TaskKind::Synthetic) {
        Some(resolve_synthetic(ctx, node, &f)?)
    } else {
        None
    };
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
        ignore_eos,
        article_words,
        sql_timeout_s,
        answer_format,
        extract,
        custom,
        synthetic,
        scoring,
        fewshot_as_turns,
        reason,
    })
}

/// A custom task scored other than generatively reads one of its declared `choices`: it
/// needs them, the `choice` metric first and no external scorer (`extract` is refused with
/// logprobs scoring above, as for MMLU).
fn check_custom_scoring(ctx: &mut Ctx, c: &CustomTask, scoring: Scoring, span: SourceSpan) {
    if scoring == Scoring::Generative {
        return;
    }
    let mode = scoring.as_str();
    if c.choices.is_empty() {
        ctx.err_help(
            span,
            format!("`scoring \"{mode}\"` on a custom task needs its `choices`"),
            "no options to choose among",
            "list the options the answer is one of, e.g. `choices \"yes\" \"no\"`",
        );
    }
    if c.metrics.first().map(|m| m.value) != Some(crate::spec::Metric::Choice) || c.scorer.is_some()
    {
        ctx.err_help(
            span,
            format!("`scoring \"{mode}\"` on a custom task needs `metrics \"choice\"` first"),
            "the choice is what is scored",
            "make `choice` the task's first metric (and drop `scorer`), or use `scoring \"generative\"`",
        );
    }
}

/// The fields of a `synthetic` task.
fn resolve_synthetic(
    ctx: &mut Ctx,
    node: &RawNode,
    f: &BTreeMap<&str, Vec<&RawNode>>,
) -> Option<Synthetic> {
    let input = match Ctx::first(f, "input-tokens") {
        Some(n) => resolve_lengths(ctx, n),
        None => {
            ctx.err_help(
                node.name.span,
                "synthetic task has no `input-tokens`",
                "missing `input-tokens`",
                "add `input-tokens 512` (or `\"uniform\" min=… max=…`, `\"normal\" mean=… stddev=…`, `\"histogram\" \"128:3\" \"512:1\"`)",
            );
            None
        }
    };
    let output = match Ctx::first(f, "output-tokens") {
        Some(n) => Some(resolve_lengths(ctx, n)?),
        None => None,
    };
    let shared_prefix = Ctx::first(f, "shared-prefix")
        .and_then(|n| ctx.one_int(n, 0, 1_000_000))
        .unwrap_or(0) as u32;
    let prefix_groups = Ctx::first(f, "prefix-groups")
        .and_then(|n| ctx.one_int(n, 1, 1_000_000))
        .unwrap_or(1) as u32;
    let turns = Ctx::first(f, "turns")
        .and_then(|n| ctx.one_int(n, 1, 1000))
        .unwrap_or(1) as u32;
    let fresh_prompts = Ctx::first(f, "fresh-prompts")
        .and_then(|n| ctx.one_bool(n))
        .unwrap_or(false);
    let input = input?;
    if shared_prefix > 0 {
        let min_input = match &input {
            Lengths::Fixed { tokens } => *tokens,
            Lengths::Uniform { min, .. } | Lengths::Normal { min, .. } => *min,
            Lengths::Histogram { bins } => bins.iter().map(|b| b.0).min().unwrap_or(0),
        };
        if shared_prefix >= min_input {
            let n = Ctx::first(f, "shared-prefix").expect("present");
            ctx.err_help(
                n.args.first().map(|a| a.span).unwrap_or(n.span),
                format!("a shared prefix of {shared_prefix} tokens leaves no room in prompts of {min_input} tokens"),
                "prefix as long as a prompt",
                "make `shared-prefix` smaller than the shortest `input-tokens`",
            );
            return None;
        }
    }
    Some(Synthetic {
        input,
        output,
        shared_prefix,
        prefix_groups,
        turns,
        fresh_prompts,
    })
}

/// `N`, `"uniform" min=A max=B`, `"normal" mean=M stddev=S [min=A] [max=B]` or
/// `"histogram" "TOKENS:WEIGHT"…`.
///
/// Long on purpose: one arm per distribution, each checking its own properties at their
/// spans, so that every message points at the value it is about.
fn resolve_lengths(ctx: &mut Ctx, node: &RawNode) -> Option<Lengths> {
    const MAX: u64 = 10_000_000;
    ctx.no_children(node);
    let help = "write `N`, `\"uniform\" min=A max=B`, `\"normal\" mean=M stddev=S min=A max=B` or `\"histogram\" \"128:3\" \"512:1\"`";
    let Some(first) = node.args.first() else {
        ctx.err_help(
            node.span,
            format!("`{}` needs a value", node.name.value),
            "missing value",
            help,
        );
        return None;
    };
    let prop = |name: &str| {
        node.props
            .iter()
            .find(|(k, _)| k.value == name)
            .map(|(_, v)| v)
    };
    let check_props = |ctx: &mut Ctx, allowed: &[&str]| -> bool {
        let mut ok = true;
        for (k, _) in &node.props {
            if !allowed.contains(&k.value.as_str()) {
                ctx.err_help(
                    k.span,
                    format!("`{}` takes no property `{}` here", node.name.value, k.value),
                    "unexpected property",
                    format!(
                        "this form takes {}",
                        if allowed.is_empty() {
                            "none".to_string()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                );
                ok = false;
            }
        }
        ok
    };
    match &first.value {
        RawValue::Int(_) => {
            if !check_props(ctx, &[]) {
                return None;
            }
            let t = ctx.one_int(node, 1, MAX)?;
            Some(Lengths::Fixed { tokens: t as u32 })
        }
        RawValue::Str(form) if form == "uniform" => {
            if !check_props(ctx, &["min", "max"]) {
                return None;
            }
            let (Some(a), Some(b)) = (prop("min"), prop("max")) else {
                ctx.err_help(
                    first.span,
                    "`uniform` needs `min` and `max`",
                    "incomplete",
                    help,
                );
                return None;
            };
            let (a, b) = (ctx.int(node, a, 1, MAX)?, ctx.int(node, b, 1, MAX)?);
            if a > b {
                ctx.err(
                    first.span,
                    format!("`uniform` has min {a} above max {b}"),
                    "empty range",
                );
                return None;
            }
            Some(Lengths::Uniform {
                min: a as u32,
                max: b as u32,
            })
        }
        RawValue::Str(form) if form == "normal" => {
            if !check_props(ctx, &["mean", "stddev", "min", "max"]) {
                return None;
            }
            let (Some(m), Some(sd)) = (prop("mean"), prop("stddev")) else {
                ctx.err_help(
                    first.span,
                    "`normal` needs `mean` and `stddev`",
                    "incomplete",
                    help,
                );
                return None;
            };
            let (m, sd) = (ctx.num(node, m)?, ctx.num(node, sd)?);
            if !(1.0..=MAX as f64).contains(&m) || !(0.0..=MAX as f64).contains(&sd) {
                ctx.err(
                    first.span,
                    "`normal` needs a mean of at least 1 and a stddev of at least 0",
                    "out of range",
                );
                return None;
            }
            let min = match prop("min") {
                Some(v) => ctx.int(node, v, 1, MAX)? as u32,
                None => 1,
            };
            let max = match prop("max") {
                Some(v) => ctx.int(node, v, 1, MAX)? as u32,
                None => (m + 4.0 * sd).ceil().min(MAX as f64) as u32,
            };
            if min > max {
                ctx.err(
                    first.span,
                    format!("`normal` has min {min} above max {max}"),
                    "empty range",
                );
                return None;
            }
            Some(Lengths::Normal {
                mean: m,
                stddev: sd,
                min,
                max,
            })
        }
        RawValue::Str(form) if form == "histogram" => {
            if !check_props(ctx, &[]) {
                return None;
            }
            let mut bins = Vec::new();
            for v in &node.args[1..] {
                let parsed = match &v.value {
                    RawValue::Str(s) => s.split_once(':').and_then(|(t, w)| {
                        let t: u32 = t
                            .trim()
                            .parse()
                            .ok()
                            .filter(|t| (1..=MAX as u32).contains(t))?;
                        let w: f64 = w
                            .trim()
                            .parse()
                            .ok()
                            .filter(|w: &f64| w.is_finite() && *w >= 0.0)?;
                        Some((t, w))
                    }),
                    _ => None,
                };
                match parsed {
                    Some(b) => bins.push(b),
                    None => {
                        ctx.err_help(
                            v.span,
                            "a histogram bin is \"TOKENS:WEIGHT\"",
                            "not a bin",
                            "e.g. \"512:3\": 512 tokens, weight 3",
                        );
                        return None;
                    }
                }
            }
            if bins.iter().map(|b| b.1).sum::<f64>() <= 0.0 {
                ctx.err_help(
                    first.span,
                    "`histogram` needs at least one bin of positive weight",
                    "no bins",
                    help,
                );
                return None;
            }
            Some(Lengths::Histogram { bins })
        }
        other => {
            let got = match other {
                RawValue::Str(s) => format!("`{s}`"),
                v => v.type_name().to_string(),
            };
            ctx.err_help(
                first.span,
                format!("`{}` cannot be {got}", node.name.value),
                "not a length",
                help,
            );
            None
        }
    }
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
    let choices: Vec<String> = Ctx::first(f, "choices")
        .map(|n| ctx.strs(n).into_iter().map(|s| s.value).collect())
        .unwrap_or_default();
    if let Some(n) = Ctx::first(f, "choices") {
        let mut seen = std::collections::BTreeSet::new();
        if choices.len() < 2
            || choices
                .iter()
                .any(|c| c.trim().is_empty() || !seen.insert(c.trim()))
        {
            ctx.err_help(
                n.span,
                "`choices` needs two or more distinct, non-empty options",
                "not a set of options",
                "list the answers the task accepts, e.g. `choices \"yes\" \"no\"`",
            );
        }
    }
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
        choices,
    })
}
