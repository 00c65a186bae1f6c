//! Resolving the `slurm` part of a sweep file (see the parent module).

use super::*;

/// Slurm's time limit syntax: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, or unlimited.
pub(crate) fn slurm_time_ok(t: &str) -> bool {
    if matches!(t, "UNLIMITED" | "unlimited" | "INFINITE" | "infinite") {
        return true;
    }
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, t),
    };
    let num = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = rest.split(':').collect();
    days.is_none_or(num) && parts.iter().all(|p| num(p)) && (1..=3).contains(&parts.len())
}

/// Slurm's memory syntax: a whole number with an optional K, M, G or T suffix.
pub(crate) fn slurm_mem_ok(m: &str) -> bool {
    let digits = m.trim_end_matches(['K', 'M', 'G', 'T', 'k', 'm', 'g', 't']);
    m.len() - digits.len() <= 1 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn resolve_slurm(ctx: &mut Ctx, node: &RawNode) -> SlurmSettings {
    ctx.no_props(node);
    if !node.args.is_empty() {
        ctx.err(
            node.args[0].span,
            "`slurm` takes no name",
            "unexpected value",
        );
    }
    let f = ctx.fields(node, SLURM_FIELDS, &[]);
    let text = |ctx: &mut Ctx, field: &str| {
        Ctx::first(&f, field)
            .and_then(|n| ctx.one_str(n))
            .map(|s| (ctx.expand_env(&s), s.span))
    };
    let partition = text(ctx, "partition").map(|t| t.0);
    let account = text(ctx, "account").map(|t| t.0);
    let qos = text(ctx, "qos").map(|t| t.0);
    let gres = text(ctx, "gres").map(|t| t.0);
    let time = text(ctx, "time").and_then(|(t, span)| {
        if slurm_time_ok(&t) {
            Some(t)
        } else {
            ctx.err_help(
                span,
                format!("`{t}` is not a Slurm time limit"),
                "not a time limit",
                "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. \"02:00:00\")",
            );
            None
        }
    });
    let mem = text(ctx, "mem").and_then(|(m, span)| {
        if slurm_mem_ok(&m) {
            Some(m)
        } else {
            ctx.err_help(
                span,
                format!("`{m}` is not a Slurm memory size"),
                "not a memory size",
                "a whole number with an optional K, M, G or T suffix (e.g. \"32G\")",
            );
            None
        }
    });
    let cpus = Ctx::first(&f, "cpus").and_then(|n| ctx.one_int(n, 1, 100_000).map(|c| c as u32));
    let sbatch_args = Ctx::first(&f, "sbatch-args")
        .map(|n| ctx.strs(n).iter().map(|s| ctx.expand_env(s)).collect())
        .unwrap_or_default();
    SlurmSettings {
        partition,
        account,
        qos,
        time,
        gres,
        cpus,
        mem,
        sbatch_args,
    }
}
