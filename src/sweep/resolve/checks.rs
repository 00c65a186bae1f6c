//! Resolving the `checks` part of a sweep file (see the parent module).

use super::*;

/// Plan-time checks that need the whole sweep: engine × quantization pairs the engine
/// cannot run are reported at the quantization's declaration.
pub(super) fn check_compatibility(ctx: &mut Ctx, sweep: &Sweep) {
    for e in &sweep.matrix.excludes {
        if !crate::spec::expand::exclude_matches(sweep, e) {
            ctx.err_help(
                e.span,
                "this exclude rule matches no configuration",
                "excludes nothing",
                "check the names and values: each must be one the matrix actually has",
            );
        }
    }
    if crate::spec::expand::configs(sweep).is_empty() {
        ctx.err_help(
            sweep
                .matrix
                .excludes
                .first()
                .map(|e| e.span)
                .unwrap_or(SourceSpan::from(0..0)),
            "the matrix is empty",
            "nothing left to run",
            "the exclude rules (or the quantization filter) remove every configuration",
        );
    }
    // Logprobs and constrained scoring, shots as turns, ignore-eos and min-tokens need what only
    // some engines offer; the configurations are expanded only when a task or the sweep asks
    // for one of them.
    let mut refused = BTreeSet::new();
    let d = &sweep.defaults.sampling;
    let needs_engine = d.ignore_eos
        || d.min_tokens.is_some()
        || sweep.tasks.iter().any(|t| {
            t.scoring != crate::spec::Scoring::Generative
                || t.fewshot_as_turns
                || t.ignore_eos == Some(true)
        });
    let configs = if needs_engine {
        crate::spec::expand::configs(sweep)
    } else {
        Vec::new()
    };
    for cfg in &configs {
        let (engine, task) = (&sweep.engines[cfg.engine], &sweep.tasks[cfg.task]);
        // Shots as turns are chat messages: a completion prompt would drop them.
        if task.fewshot_as_turns
            && task.mode.unwrap_or(engine.api) == crate::spec::Api::Completion
            && refused.insert((engine.base.value.as_str(), cfg.task))
        {
            ctx.err_help(
                engine.name.span,
                format!(
                    "engine `{}` is asked through /v1/completions, and task `{}` sends its shots as chat turns (`fewshot-as-turns`)",
                    engine.base.value, task.name.value
                ),
                "a plain prompt has no turns",
                format!(
                    "give task `{}` `mode \"chat\"`, or remove `fewshot-as-turns`",
                    task.name.value
                ),
            );
        }
        let missing = match task.scoring {
            crate::spec::Scoring::Logprobs if !engine.catalog.completion_logprobs => Some((
                "cannot return log-probabilities from /v1/completions",
                "no log-probabilities here",
            )),
            crate::spec::Scoring::Constrained if engine.catalog.choice_constraint.is_none() => {
                Some((
                    "has no constrained decoding bench360 can ask for",
                    "no constrained decoding here",
                ))
            }
            _ => None,
        };
        if let Some((what, label)) = missing {
            if refused.insert((engine.base.value.as_str(), cfg.task)) {
                ctx.err_help(
                    engine.kind.span,
                    format!(
                        "engine `{}` ({}) {what}, which task `{}` scores with",
                        engine.base.value, engine.catalog.name, task.name.value
                    ),
                    label,
                    format!(
                        "use `scoring \"generative\"` for this engine, or add `exclude engine=\"{}\" task=\"{}\"` to the matrix",
                        engine.base.value, task.name.value
                    ),
                );
            }
        }
    }
    check_engine_blocks(ctx, sweep, &configs);
}

/// Once per engine block (its setting combinations and cold starts share these): the request
/// fields its runs are asked for (`configs`: the matrix's, when a task or the sweep asks for
/// one) and the quantization it is given.
fn check_engine_blocks(ctx: &mut Ctx, sweep: &Sweep, configs: &[crate::spec::expand::Config]) {
    let mut said = BTreeSet::new();
    for cfg in crate::spec::expand::deployments(sweep) {
        let engine = &sweep.engines[cfg.engine];
        if !said.insert((engine.base.value.as_str(), cfg.model, cfg.variant)) {
            continue;
        }
        let variant = &sweep.models[cfg.model].variants[cfg.variant];
        let entry = engine.catalog;
        // Asked of this engine block's runs (the sweep's, or a task's own; not of a task the
        // matrix excludes from it).
        let asked = |f: fn(&crate::spec::Sampling) -> bool| {
            configs.iter().any(|c| {
                sweep.engines[c.engine].base.value == engine.base.value
                    && (c.model, c.variant) == (cfg.model, cfg.variant)
                    && f(&c.sampling)
            })
        };
        for (set, field, name) in [
            (
                asked(|s| s.ignore_eos),
                entry.ignore_eos_field,
                "ignore-eos",
            ),
            (
                asked(|s| s.min_tokens.is_some()),
                entry.min_tokens_field,
                "min-tokens",
            ),
        ] {
            if set && field.is_none() {
                ctx.err_help(
                    engine.kind.span,
                    format!(
                        "engine `{}` ({}) cannot be told `{name}`",
                        engine.base.value, entry.name
                    ),
                    "no such request field",
                    format!("leave `{name}` out, or pass the engine's own field in `extra-body`"),
                );
            }
        }
        if !entry.accepts_quantization(&variant.quantization.value) {
            ctx.err_help(
                variant.quantization.span,
                format!(
                    "engine `{}` ({}) cannot run quantization `{}`",
                    engine.base.value, entry.name, variant.quantization.value
                ),
                "unsupported by this engine",
                format!(
                    "{} accepts: {}; or add `exclude engine=\"{}\" quantization=\"{}\"` to the matrix",
                    entry.name,
                    entry.quantizations.join(", "),
                    engine.base.value,
                    variant.quantization.value
                ),
            );
        }
    }
}

/// A scenario's `repeats` may lower the sweep's, never raise it: its repeats are the sweep's
/// first ones (their keys, labels and cold starts), and more would be starts the sweep does
/// not declare.
pub(super) fn check_scenario_repeats(ctx: &mut Ctx, scenarios: &[Scenario], sweep_repeats: u32) {
    for s in scenarios {
        if let Some(r) = &s.repeats {
            if r.value > sweep_repeats {
                ctx.err_help(
                    r.span,
                    format!(
                        "scenario `{}` repeats {} times, more than the sweep's {sweep_repeats}",
                        s.name.value, r.value
                    ),
                    "more than the sweep's `repeats`",
                    format!(
                        "a scenario's `repeats` runs fewer of the sweep's repeats: raise `repeats` in the `sweep` block to {} or lower this",
                        r.value
                    ),
                );
            }
        }
    }
}
