//! Resolving the sweep-wide blocks of a sweep file — `sweep`, `defaults`, `slo`, `cost`,
//! `telemetry` (see the parent module). A field left out, or one whose value is refused
//! (reported at its span), keeps the value of `Defaults::default()` /
//! `TelemetryConfig::default()`, the one place defaults are written.

use super::*;

/// `sweep "name" { seed N; repeats N; cold-repeats #true }`: (name, seed, repeats, whether
/// each repeat has its own cold start).
/// The `sweep` block's fields.
pub(super) struct SweepHead {
    pub name: Option<Spanned<String>>,
    pub seed: u64,
    pub repeats: u32,
    pub cold_repeats: bool,
    pub max_parallel: Option<u32>,
}

impl Default for SweepHead {
    fn default() -> Self {
        SweepHead {
            name: None,
            seed: 0,
            repeats: 1,
            cold_repeats: false,
            max_parallel: None,
        }
    }
}

pub(super) fn resolve_sweep(ctx: &mut Ctx, node: &RawNode) -> SweepHead {
    let name = ctx.block_name(node);
    let f = ctx.fields(node, SWEEP_FIELDS, &[]);
    let seed = Ctx::first(&f, "seed")
        .and_then(|n| ctx.one_int(n, 0, u64::MAX))
        .unwrap_or(0);
    let repeats = Ctx::first(&f, "repeats")
        .and_then(|n| ctx.one_int(n, 1, 1000))
        .map_or(1, |r| r as u32);
    let cold_repeats = Ctx::first(&f, "cold-repeats")
        .and_then(|n| ctx.one_bool(n))
        .unwrap_or(false);
    let max_parallel = Ctx::first(&f, "max-parallel")
        .and_then(|n| ctx.one_int(n, 1, 1024))
        .map(|m| m as u32);
    SweepHead {
        name,
        seed,
        repeats,
        cold_repeats,
        max_parallel,
    }
}

/// A block that takes no name: the problem when it was given one.
fn no_name(ctx: &mut Ctx, node: &RawNode, block: &str) {
    if let Some(a) = node.args.first() {
        ctx.err(
            a.span,
            format!("`{block}` takes no name"),
            "unexpected value",
        );
    }
}

pub(super) fn resolve_defaults(ctx: &mut Ctx, node: &RawNode) -> Defaults {
    let mut d = Defaults::default();
    ctx.no_props(node);
    no_name(ctx, node, "defaults");
    let f = ctx.fields(node, DEFAULT_FIELDS, &[]);
    let s = &mut d.sampling;
    if let Some(v) = Ctx::first(&f, "max-tokens").and_then(|n| ctx.one_int(n, 1, 1_000_000)) {
        s.max_tokens = v as u32;
    }
    if let Some(v) = Ctx::first(&f, "temperature").and_then(|n| ctx.one_num(n, 0.0, 10.0)) {
        s.temperature = v;
    }
    if let Some(v) = Ctx::first(&f, "top-p").and_then(|n| ctx.one_num(n, 0.0, 1.0)) {
        s.top_p = v;
    }
    if let Some(n) = Ctx::first(&f, "stop") {
        s.stop = ctx.strs(n).into_iter().map(|s| s.value).collect();
    }
    if let Some(v) = Ctx::first(&f, "ignore-eos").and_then(|n| ctx.one_bool(n)) {
        s.ignore_eos = v;
    }
    if let Some(n) = Ctx::first(&f, "min-tokens") {
        s.min_tokens = ctx.one_int(n, 1, 1_000_000).map(|v| v as u32);
    }
    if let Some(n) = Ctx::first(&f, "extra-body") {
        s.extra_body = ctx.json_object(n);
    }
    if let Some(n) = Ctx::first(&f, "connections") {
        match ctx.one_str(n) {
            Some(v) if v.value == "new" => d.reuse_connections = false,
            Some(v) if v.value == "reuse" => d.reuse_connections = true,
            Some(v) => ctx.err_help(
                v.span,
                format!("unknown connections `{}`", v.value),
                "not a connection policy",
                "use `new` (a connection per request, the default) or `reuse` (a pool)",
            ),
            None => {}
        }
    }
    if let Some(v) = Ctx::first(&f, "warmup").and_then(|n| ctx.one_int(n, 0, 100_000)) {
        d.warmup = v as u32;
    }
    if let Some(v) = Ctx::first(&f, "request-timeout").and_then(|n| ctx.one_num(n, 0.001, 86_400.0))
    {
        d.request_timeout_s = v;
    }
    if let Some(v) = Ctx::first(&f, "max-error-rate").and_then(|n| ctx.one_num(n, 0.0, 1.0)) {
        d.max_error_rate = v;
    }
    d
}

pub(super) fn resolve_slo(ctx: &mut Ctx, node: &RawNode) -> crate::spec::Slo {
    use crate::spec::Objective;
    ctx.no_props(node);
    let f = ctx.fields(node, SLO_FIELDS, &[]);
    let objective = Ctx::first(&f, "objective")
        .and_then(|n| ctx.one_str(n))
        .and_then(|v| match Objective::from_name(&v.value) {
            Some(o) => Some(o),
            None => {
                let names: Vec<&str> = Objective::ALL.iter().map(|o| o.name()).collect();
                ctx.err_help(
                    v.span,
                    format!("unknown objective `{}`", v.value),
                    "not an objective",
                    format!("one of {}", names.join(", ")),
                );
                None
            }
        });
    let include_over_saturated = match Ctx::first(&f, "over-saturated").and_then(|n| ctx.one_str(n))
    {
        Some(v) if v.value == "include" => true,
        Some(v) if v.value == "exclude" => false,
        Some(v) => {
            ctx.err_help(
                v.span,
                format!("unknown over-saturated `{}`", v.value),
                "not a choice",
                "`exclude` (the default: over-saturated open-loop runs are never recommended) or `include`",
            );
            false
        }
        None => false,
    };
    let quality_not_worse = match Ctx::first(&f, "quality-evidence").and_then(|n| ctx.one_str(n)) {
        Some(v) if v.value == "not-worse" => true,
        Some(v) if v.value == "non-inferior" => false,
        Some(v) => {
            ctx.err_help(
                v.span,
                format!("unknown quality-evidence `{}`", v.value),
                "not a choice",
                "`non-inferior` (the default: the paired interval must show the drop within the limit) or `not-worse` (it must not show it beyond)",
            );
            false
        }
        None => false,
    };
    let drop = Ctx::first(&f, "quality-drop");
    if let (Some(b), None) = (Ctx::first(&f, "quality-baseline"), drop) {
        ctx.err_help(
            b.name.span,
            "`quality-baseline` without `quality-drop`",
            "a reference with no allowed drop",
            "add `quality-drop 0.02` (how much quality a recommended configuration may lose against it)",
        );
    }
    if let (Some(d), None) = (drop, Ctx::first(&f, "objective")) {
        ctx.err_help(
            d.name.span,
            "`quality-drop` without an `objective`",
            "allowed to lose quality, but for what?",
            "add `objective \"j-per-correct\"` (or cost-per-correct, tokens-per-s, ttft-p95, tpot-p50, e2e-p95, goodput, j-per-token)",
        );
    }
    crate::spec::Slo {
        ttft_p95: Ctx::first(&f, "ttft-p95").and_then(|n| ctx.one_num(n, 0.0001, 86_400.0)),
        e2e_p95: Ctx::first(&f, "e2e-p95").and_then(|n| ctx.one_num(n, 0.0001, 86_400.0)),
        gpu_memory_gib: Ctx::first(&f, "gpu-memory").and_then(|n| ctx.one_num(n, 0.001, 100_000.0)),
        quality_drop: Ctx::first(&f, "quality-drop").and_then(|n| ctx.one_num(n, 0.0, 1.0)),
        quality_baseline: Ctx::first(&f, "quality-baseline")
            .and_then(|n| ctx.one_str(n))
            .map(|v| v.value),
        objective,
        quality_not_worse,
        include_over_saturated,
    }
}

pub(super) fn resolve_cost(ctx: &mut Ctx, node: &RawNode) -> crate::spec::Cost {
    ctx.no_props(node);
    let f = ctx.fields(node, COST_FIELDS, &[]);
    let energy = Ctx::first(&f, "energy-price").and_then(|n| ctx.one_num(n, 0.0, 1e6));
    let hw = Ctx::first(&f, "hardware-per-hour").and_then(|n| ctx.one_num(n, 0.0, 1e6));
    let currency = Ctx::first(&f, "currency")
        .and_then(|n| ctx.one_str(n))
        .map(|s| s.value)
        .unwrap_or_else(|| "USD".into());
    if !f.contains_key("energy-price") && !f.contains_key("hardware-per-hour") {
        ctx.err_help(
            node.name.span,
            "`cost` needs `energy-price` or `hardware-per-hour`",
            "no prices",
            "e.g. `cost { energy-price 0.30; hardware-per-hour 2.5; }` (per kWh, per hour)",
        );
    }
    crate::spec::Cost {
        energy_per_kwh: energy.unwrap_or(0.0),
        hardware_per_hour: hw.unwrap_or(0.0),
        currency,
    }
}

pub(super) fn resolve_telemetry(ctx: &mut Ctx, node: &RawNode) -> crate::spec::TelemetryConfig {
    let mut t = crate::spec::TelemetryConfig::default();
    ctx.no_props(node);
    no_name(ctx, node, "telemetry");
    let f = ctx.fields(node, TELEMETRY_FIELDS, &[]);
    if let Some(s) = Ctx::first(&f, "interval").and_then(|n| ctx.one_num(n, 0.01, 60.0)) {
        t.interval = std::time::Duration::from_secs_f64(s);
    }
    if let Some(s) = Ctx::first(&f, "idle").and_then(|n| ctx.one_num(n, 0.0, 3600.0)) {
        t.idle = std::time::Duration::from_secs_f64(s);
    }
    if let Some(s) = Ctx::first(&f, "metrics-interval").and_then(|n| ctx.one_num(n, 0.01, 60.0)) {
        t.metrics_interval = Some(std::time::Duration::from_secs_f64(s));
    }
    t
}
