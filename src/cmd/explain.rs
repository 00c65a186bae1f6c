//! `bench360 explain NODE [--sweep SWEEP]`: a node's key inputs, status and dependencies.

use std::path::Path;

use super::Ctx;
use crate::app::load_plan;
use crate::plan;
use crate::store::{Record, Store};

pub(crate) fn run(ctx: &Ctx, node: &str, sweep: Option<&Path>) -> anyhow::Result<u8> {
    let store = Store::open(&ctx.cache)?;
    if let Some(path) = sweep {
        let (_, plan) = load_plan(&store, path, &ctx.overrides)?;
        let st = plan::statuses(&plan, &store);
        print!(
            "{}",
            plan::render::explain(&plan, &st, node).map_err(anyhow::Error::msg)?
        );
        return Ok(0);
    }
    let recs: Vec<Record> = store
        .records()
        .into_iter()
        .filter(|r| r.key.starts_with(node) || r.label == node)
        .collect();
    match recs.as_slice() {
        [r] => print!("{}", recorded(r)?),
        [] => anyhow::bail!(
            "no recorded node has a key starting with `{node}` or the label `{node}` (give --sweep to look in a plan)"
        ),
        many => anyhow::bail!(
            "`{node}` matches {} recorded nodes; give more of the key",
            many.len()
        ),
    }
    Ok(0)
}

/// A recorded node as `explain` shows it without a plan.
fn recorded(r: &Record) -> anyhow::Result<String> {
    let status = serde_json::to_value(r.status)?;
    let mut s = format!(
        "{}\n  key     {}\n  kind    {}\n  status  {}{}\n",
        r.label,
        r.key,
        r.kind,
        status.as_str().unwrap_or(""),
        r.cause
            .as_ref()
            .map(|c| format!(": {c}"))
            .unwrap_or_default()
    );
    s.push_str(&format!(
        "  sweep   {}\n  started {} on {} (pid {})\n",
        r.sweep, r.started_at, r.host, r.pid
    ));
    s.push_str(&format!(
        "\nkey inputs (format {}):\n",
        plan::keys::KEY_FORMAT
    ));
    let w = r.inputs.keys().map(|k| k.len()).max().unwrap_or(0);
    for (k, v) in &r.inputs {
        s.push_str(&format!("  {k:<w$}  {v}\n"));
    }
    s.push_str(&format!(
        "\noutputs: {}\n",
        serde_json::to_string_pretty(&r.outputs)?
    ));
    Ok(s)
}
