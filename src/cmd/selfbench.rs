//! `bench360 selfbench`: bench360's own client, planner, cached apply and Parquet writing
//! measured (BENCHMARKS.md); `--serve PORT` runs the scripted server alone.

use crate::cli::SelfbenchArgs;
use crate::selfbench;

pub(crate) fn run(a: SelfbenchArgs) -> anyhow::Result<u8> {
    if let Some(port) = a.serve {
        selfbench::serve(
            port,
            a.tokens,
            a.ttft_ms,
            a.itl_ms,
            a.serve_log.as_deref(),
            &a.server_cpus,
            a.keep_alive,
        )?;
        return Ok(0);
    }
    let md = selfbench::run(selfbench::Params {
        streams: a.streams,
        seconds: a.seconds,
        tokens: a.tokens,
        ttft_ms: a.ttft_ms,
        itl_ms: a.itl_ms,
        plan_nodes: a.plan_nodes,
        cached_runs: a.cached_runs,
        parquet_rows: a.parquet_rows,
        server_cpus: a.server_cpus,
        client_cpus: a.client_cpus,
        reuse_connections: a.keep_alive,
    })?;
    print!("{md}");
    Ok(0)
}
