//! Resolving the `scenario` part of a sweep file (see the parent module).

use super::*;

/// A `scenario` block: its kind's allowed fields, then each kind's fields, each with its range.
///
/// Long on purpose: one arm per scenario kind, each a short list of `field → check`; split
/// apart, a field's name would sit far from its bounds and its message.
pub(super) fn resolve_scenario(ctx: &mut Ctx, node: &RawNode) -> Option<Scenario> {
    let name = ctx.block_name(node);
    let kind_node = node.children.iter().find(|c| c.name.value == "kind");
    let kind = kind_node.and_then(|n| ctx.one_str(n));
    let allowed: &[&str] = match kind.as_ref().map(|k| k.value.as_str()) {
        Some("single") => &["kind", "requests", "early-stop", "max-error-rate"],
        Some("batch") => &["kind", "batch-size", "batches", "max-error-rate"],
        Some("server") => &["kind", "users", "rate", "duration", "max-error-rate"],
        Some("rate") => &[
            "kind",
            "rate",
            "burstiness",
            "duration",
            "ramp-from",
            "max-error-rate",
        ],
        Some("concurrency") => &[
            "kind",
            "concurrency",
            "requests",
            "early-stop",
            "max-error-rate",
        ],
        Some("saturation") => &[
            "kind",
            "start",
            "factor",
            "max-rate",
            "step-duration",
            "precision",
            "burstiness",
            "ttft-p95",
            "e2e-p95",
            "max-error-rate",
        ],
        Some("offline") => &["kind", "requests", "max-error-rate"],
        Some("replay") => &["kind", "trace", "speed", "max-error-rate"],
        Some(other) => {
            let help = did_you_mean(other, SCENARIO_KINDS.iter().copied())
                .unwrap_or_else(|| known_list(SCENARIO_KINDS.iter().copied()));
            ctx.err_help(
                kind.as_ref().unwrap().span,
                format!("unknown scenario kind `{other}`"),
                "not a scenario kind",
                help,
            );
            return None;
        }
        None => {
            if kind_node.is_none() {
                ctx.err_help(
                    node.name.span,
                    "scenario has no `kind`",
                    "missing `kind`",
                    known_list(SCENARIO_KINDS.iter().copied()),
                );
            }
            return None;
        }
    };
    // Precision-based stopping, for every kind but saturation (its probes judge themselves).
    let mut allowed = allowed.to_vec();
    let saturation = kind.as_ref().is_some_and(|k| k.value == "saturation");
    if !saturation {
        allowed.extend(STOP_FIELDS);
    }
    allowed.push("repeats");
    let f = ctx.fields(node, &allowed, &[]);
    let stop = resolve_stop(ctx, node, &f);
    let required_ints = |field: &str, min: u64, max: u64, ctx: &mut Ctx| -> Vec<u64> {
        match Ctx::first(&f, field) {
            Some(n) => ctx.ints(n, min, max),
            None => {
                ctx.err(
                    node.name.span,
                    format!(
                        "`{}` scenario needs `{field}`",
                        kind.as_ref().unwrap().value
                    ),
                    format!("missing `{field}`"),
                );
                Vec::new()
            }
        }
    };
    let spec = match kind.as_ref().unwrap().value.as_str() {
        "single" => ScenarioSpec::Single {
            requests: match Ctx::first(&f, "requests") {
                Some(n) => ctx.ints(n, 1, 10_000_000).into_iter().map(Some).collect(),
                None => vec![None],
            },
            early_stop: Ctx::first(&f, "early-stop").and_then(|n| ctx.one_num(n, 0.001, 10.0)),
        },
        "batch" => {
            let batch_size = required_ints("batch-size", 1, 1_000_000, ctx);
            let batches = match Ctx::first(&f, "batches") {
                Some(n) => ctx.ints(n, 1, 1_000_000),
                None => vec![1],
            };
            ScenarioSpec::Batch {
                batch_size,
                batches,
            }
        }
        "server" => {
            let users = required_ints("users", 1, 1_000_000, ctx);
            let rate = match Ctx::first(&f, "rate") {
                Some(n) => ctx.nums(n, 1e-6, 1e9),
                None => {
                    ctx.err_help(
                        node.name.span,
                        "`server` scenario needs `rate`",
                        "missing `rate`",
                        "requests per minute per user, e.g. `rate 30`",
                    );
                    Vec::new()
                }
            };
            let duration_s = match Ctx::first(&f, "duration") {
                Some(n) => ctx.nums(n, 0.001, 7.0 * 86_400.0),
                None => {
                    ctx.err_help(
                        node.name.span,
                        "`server` scenario needs `duration`",
                        "missing `duration`",
                        "seconds of traffic, e.g. `duration 60`",
                    );
                    Vec::new()
                }
            };
            ScenarioSpec::Server {
                users,
                rate,
                duration_s,
            }
        }
        "rate" => {
            let need = |field: &str, min: f64, max: f64, help: &str, ctx: &mut Ctx| match Ctx::first(
                &f, field,
            ) {
                Some(n) => ctx.nums(n, min, max),
                None => {
                    ctx.err_help(
                        node.name.span,
                        format!("`rate` scenario needs `{field}`"),
                        format!("missing `{field}`"),
                        help,
                    );
                    Vec::new()
                }
            };
            let rate = need(
                "rate",
                1e-6,
                1e7,
                "requests per second in total, e.g. `rate 4`",
                ctx,
            );
            let duration_s = need(
                "duration",
                0.001,
                7.0 * 86_400.0,
                "seconds of traffic, e.g. `duration 60`",
                ctx,
            );
            let burstiness = Ctx::first(&f, "burstiness")
                .map(|n| ctx.nums(n, 0.01, 1000.0))
                .unwrap_or_else(|| vec![1.0]);
            let ramp_from = Ctx::first(&f, "ramp-from").and_then(|n| ctx.one_num(n, 0.0, 1e7));
            ScenarioSpec::Rate {
                rate,
                burstiness,
                duration_s,
                ramp_from,
            }
        }
        "saturation" => {
            let num = |name: &str, min: f64, max: f64, ctx: &mut Ctx| {
                Ctx::first(&f, name).and_then(|n| ctx.one_num(n, min, max))
            };
            let start = num("start", 0.001, 1e7, ctx).unwrap_or(1.0);
            let factor = num("factor", 1.05, 100.0, ctx).unwrap_or(2.0);
            let max_rate = num("max-rate", 0.001, 1e7, ctx).unwrap_or(1000.0);
            let step_s = num("step-duration", 0.1, 86_400.0, ctx).unwrap_or(10.0);
            let precision = num("precision", 0.001, 1.0, ctx).unwrap_or(0.05);
            let burstiness = num("burstiness", 0.01, 1000.0, ctx).unwrap_or(1.0);
            let ttft_p95 = num("ttft-p95", 0.0001, 86_400.0, ctx);
            let e2e_p95 = num("e2e-p95", 0.0001, 86_400.0, ctx);
            let max_error_rate = num("max-error-rate", 0.0, 1.0, ctx).unwrap_or(0.01);
            if max_rate < start {
                ctx.err(
                    node.name.span,
                    format!("`max-rate` {max_rate} is below `start` {start}"),
                    "this scenario",
                );
            }
            ScenarioSpec::Saturation(SaturationSpec {
                start,
                factor,
                max_rate,
                step_s,
                precision,
                burstiness,
                ttft_p95,
                e2e_p95,
                max_error_rate,
            })
        }
        "concurrency" => {
            let concurrency = required_ints("concurrency", 1, 1_000_000, ctx);
            let requests = match Ctx::first(&f, "requests") {
                Some(n) => ctx.ints(n, 1, 10_000_000).into_iter().map(Some).collect(),
                None => vec![None],
            };
            let early_stop = Ctx::first(&f, "early-stop").and_then(|n| ctx.one_num(n, 0.001, 10.0));
            ScenarioSpec::Concurrency {
                concurrency,
                requests,
                early_stop,
            }
        }
        "replay" => {
            let trace = match Ctx::first(&f, "trace").and_then(|n| ctx.one_str(n)) {
                Some(t) => Some(Spanned::new(ctx.expand_env(&t), t.span)),
                None => {
                    if Ctx::first(&f, "trace").is_none() {
                        ctx.err_help(node.name.span, "`replay` scenario needs `trace`", "missing `trace`", "a JSONL, CSV or Parquet file with arrival times `t` (seconds) and optionally `output_tokens`");
                    }
                    None
                }
            };
            let speed = Ctx::first(&f, "speed")
                .map(|n| ctx.nums(n, 0.001, 1000.0))
                .unwrap_or_else(|| vec![1.0]);
            ScenarioSpec::Replay {
                trace: trace?,
                speed,
            }
        }
        "offline" => ScenarioSpec::Offline {
            requests: match Ctx::first(&f, "requests") {
                Some(n) => ctx.ints(n, 1, 10_000_000).into_iter().map(Some).collect(),
                None => vec![None],
            },
        },
        _ => unreachable!("kind checked above"),
    };
    let max_error_rate = match &spec {
        ScenarioSpec::Saturation(_) => None,
        _ => Ctx::first(&f, "max-error-rate").and_then(|n| ctx.one_num(n, 0.0, 1.0)),
    };
    let repeats = Ctx::first(&f, "repeats").and_then(|n| {
        let span = n.args.first().map_or(n.name.span, |a| a.span);
        ctx.one_int(n, 1, 1000)
            .map(|r| Spanned::new(r as u32, span))
    });
    Some(Scenario {
        name: name?,
        spec,
        max_error_rate,
        stop,
        repeats,
    })
}

/// The fields of precision-based stopping.
const STOP_FIELDS: [&str; 4] = [
    "target-margin",
    "target-metric",
    "min-requests",
    "min-duration",
];

/// `target-margin 0.05` with `target-metric "e2e-p95"` (the default), `min-requests N` (default:
/// the fewest requests the percentile's distribution-free interval exists at) and
/// `min-duration S` (default 0).
fn resolve_stop(
    ctx: &mut Ctx,
    node: &RawNode,
    f: &BTreeMap<&str, Vec<&RawNode>>,
) -> Option<crate::spec::StopRule> {
    let margin = Ctx::first(f, "target-margin").and_then(|n| ctx.one_num(n, 0.001, 1.0));
    if Ctx::first(f, "target-margin").is_none() {
        for field in ["target-metric", "min-requests", "min-duration"] {
            if let Some(n) = Ctx::first(f, field) {
                ctx.err_help(
                    n.name.span,
                    format!("`{field}` without `target-margin`"),
                    "no margin to stop at",
                    "add `target-margin 0.05` (stop once the metric's 95 % interval is within ±5 %)",
                );
            }
        }
        return None;
    }
    let (latency, q) = match Ctx::first(f, "target-metric").and_then(|n| ctx.one_str(n)) {
        Some(v) => match crate::spec::StopRule::parse_metric(&v.value) {
            Some(m) => m,
            None => {
                ctx.err_help(
                    v.span,
                    format!("unknown target-metric `{}`", v.value),
                    "not a latency percentile",
                    format!("one of {}", crate::spec::StopRule::METRICS.join(", ")),
                );
                return None;
            }
        },
        None => ("e2e".to_string(), 95.0),
    };
    let least = crate::record::paired::percentile_min_n(q) as u64;
    let min_requests =
        match Ctx::first(f, "min-requests").and_then(|n| ctx.one_int(n, 1, 100_000_000)) {
            Some(m) if m < least => {
                let span = Ctx::first(f, "min-requests").map_or(node.name.span, |n| n.name.span);
                ctx.err_help(
                    span,
                    format!("`min-requests {m}` is below what a p{q} interval needs"),
                    "too few to ever have an interval",
                    format!(
                        "a distribution-free 95 % interval of p{q} needs at least {least} requests"
                    ),
                );
                least
            }
            Some(m) => m,
            None => least,
        };
    Some(crate::spec::StopRule {
        latency,
        q,
        margin: margin?,
        min_requests,
        min_duration_s: Ctx::first(f, "min-duration")
            .and_then(|n| ctx.one_num(n, 0.0, 86_400.0))
            .unwrap_or(0.0),
    })
}
