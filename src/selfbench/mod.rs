//! `bench360 selfbench`: measures bench360 itself, so that its numbers are the engine's and
//! not the client's. A scripted streaming server (a separate bench360 process, so its CPU is
//! not the client's) answers every request with a fixed schedule — first token `ttft` after
//! the request arrived, then one token every `itl` — and the client's measurements are
//! compared with that ground truth at several stream counts. Also timed: planning a large
//! DAG, re-applying a fully cached sweep, and writing chunk rows to Parquet.

mod analyze;
mod measure;
mod pieces;
mod server;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::record::stats::Dist;

use measure::measure;
use pieces::{bench_cached_apply, bench_parquet, bench_plan};
use server::raise_fd_limit;
pub(crate) use server::{pin, serve};

#[derive(Clone)]
pub(crate) struct Params {
    pub streams: Vec<usize>,
    pub seconds: f64,
    pub tokens: u32,
    pub ttft_ms: f64,
    pub itl_ms: f64,
    pub plan_nodes: usize,
    pub cached_runs: usize,
    pub parquet_rows: usize,
    /// CPUs of the scripted server and of the client (empty: not pinned).
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
    /// Keep connections alive (server: chunked bodies; client: a pool) instead of one per
    /// request.
    pub reuse_connections: bool,
}

pub(crate) fn run(p: Params) -> anyhow::Result<String> {
    raise_fd_limit();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let (server_cpus, client_cpus) =
        if p.server_cpus.is_empty() && p.client_cpus.is_empty() && cores > 1 {
            // Default: the server on the first CPU, the client on the others.
            (vec![0], (1..cores).collect::<Vec<_>>())
        } else {
            (p.server_cpus.clone(), p.client_cpus.clone())
        };
    let log = std::env::temp_dir().join(format!("bench360-selfbench-{}.log", std::process::id()));
    let (mut server, port) = start_server(&p, &server_cpus, &log)?;
    let base = format!("http://127.0.0.1:{port}");
    // The client's threads (the runtime's workers) are created after this, on these CPUs.
    pin(&client_cpus)?;
    let client_threads = if client_cpus.is_empty() {
        cores
    } else {
        client_cpus.len()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(client_threads)
        .enable_all()
        .build()?;
    let mut results = Vec::new();
    for &n in &p.streams {
        eprintln!("selfbench: {n} concurrent streams for ~{} s", p.seconds);
        // On a worker of the runtime, not on this thread: the client's work stays on its
        // pinned workers, with no second thread to switch to.
        let (b, pp, lg) = (base.clone(), p.clone(), log.clone());
        results.push(rt.block_on(async move {
            tokio::spawn(async move { measure(&b, &pp, n, &lg).await })
                .await
                .map_err(|e| anyhow::anyhow!("selfbench task: {e}"))?
        })?);
    }
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_file(&log);
    let pins = |c: &[usize]| {
        if c.is_empty() {
            "not pinned".to_string()
        } else {
            format!("CPUs {}", cpu_list(c))
        }
    };
    let mut md = format!(
        "Machine: {} ({cores} cores). Scripted server (separate process, {}): first token {} ms after the request, then one token every {} ms, {} tokens, one token per event; {}. Client: {} worker threads, {}.\n\n",
        crate::plan::facts::machine_fingerprint().get("cpu").cloned().unwrap_or_default(),
        pins(&server_cpus),
        p.ttft_ms,
        p.itl_ms,
        p.tokens,
        if p.reuse_connections { "connections kept alive (chunked bodies, the client's pool)" } else { "one connection per request" },
        client_threads,
        pins(&client_cpus),
    );
    md.push_str(&client_tables(&results));
    md.push_str(&pieces_table(&p)?);
    Ok(md)
}

fn cpu_list(c: &[usize]) -> String {
    c.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts the scripted server (`selfbench --serve`, a separate process, pinned apart) with an
/// empty log, and waits until it accepts connections: the child and its port.
fn start_server(
    p: &Params,
    server_cpus: &[usize],
    log: &std::path::Path,
) -> anyhow::Result<(std::process::Child, u16)> {
    std::fs::write(log, "")?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let server = std::process::Command::new(std::env::current_exe()?)
        .args([
            "selfbench",
            "--serve",
            &port.to_string(),
            "--tokens",
            &p.tokens.to_string(),
        ])
        .args([
            "--ttft-ms",
            &p.ttft_ms.to_string(),
            "--itl-ms",
            &p.itl_ms.to_string(),
        ])
        .arg("--serve-log")
        .arg(log)
        .args(if p.reuse_connections {
            vec!["--keep-alive"]
        } else {
            vec![]
        })
        .args(if server_cpus.is_empty() {
            vec![]
        } else {
            vec!["--server-cpus".to_string(), cpu_list(server_cpus)]
        })
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(10),
            "scripted server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((server, port))
}

/// The client's errors at each stream count: against the server's log, and against the
/// schedule with the suspects measured apart.
fn client_tables(results: &[measure::StreamResult]) -> String {
    let mut md = String::new();
    let f = |d: &Dist| {
        format!(
            "{:.3} / {:.3}",
            d.p50.unwrap_or(f64::NAN),
            d.p99.unwrap_or(f64::NAN)
        )
    };
    md.push_str("Against what the server did (its log of every event's send time):\n\n| streams | requests (failed) | in flight held | tokens/s | client CPU ms / 1000 tokens | client CPU cores | memory / stream KB | TTFT error p50 / p99 ms | TTFT error after the first wave p50 / p99 ms | ITL error p50 / p99 ms | event delay p50 / p99 ms | request setup p50 / p99 ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in results {
        let _ = writeln!(
            md,
            "| {} | {} ({}) | {:.1} | {:.0} | {:.2} | {:.2} | {:.1} | {} | {} | {} | {} | {} |",
            r.streams,
            r.requests,
            r.failed,
            r.a.in_flight,
            r.chunks as f64 / r.wall_s,
            r.cpu_s * 1000.0 / (r.chunks.max(1) as f64 / 1000.0),
            r.cpu_s / r.wall_s,
            r.rss_per_stream_kb,
            f(&r.a.truth_ttft_err),
            f(&r.a.truth_ttft_steady),
            f(&r.a.truth_itl_err),
            f(&r.a.event_delay),
            f(&r.a.setup),
        );
    }
    md.push_str("\nAgainst the schedule (what a client that cannot see the server's log can check: it includes request setup and the server's own lateness), and the suspects measured apart:\n\n| streams | matched with the server log | TTFT − scheduled p50 / p99 ms | gap − scheduled ITL p50 / p99 ms | server lateness p50 / p99 ms | connections dropped at the accept queue |\n|---|---|---|---|---|---|\n");
    for r in results {
        let _ = writeln!(
            md,
            "| {} | {} of {} | {} | {} | {} | {} |",
            r.streams,
            r.a.matched,
            r.requests - r.failed,
            f(&r.a.ttft_err),
            f(&r.a.itl_err),
            f(&r.a.server_late),
            r.listen_drops,
        );
    }
    md
}

/// Planning, a cached apply and Parquet writing, timed without a server.
fn pieces_table(p: &Params) -> anyhow::Result<String> {
    let mut md = String::new();
    // The median (by total) of five plannings.
    let mut plans = (0..5)
        .map(|_| bench_plan(p.plan_nodes))
        .collect::<anyhow::Result<Vec<_>>>()?;
    plans.sort_by(|a, b| (a.1 + a.2).total_cmp(&(b.1 + b.2)));
    let (nodes, parse_s, plan_s) = plans[2];
    let cached_s = bench_cached_apply(p.cached_runs)?;
    let rows_per_s = bench_parquet(p.parquet_rows)?;
    let _ = write!(
        md,
        "\n| what | result |\n|---|---|\n| plan {nodes} nodes (expand, keys, seal, statuses; median of 5) | {:.3} s (+ {:.3} s to parse the sweep) |\n| `apply` of a fully cached sweep of {} runs (new process: parse, hash, plan, report) | {:.3} s |\n| chunk rows to Parquet ({} rows; median of 5, min – max) | {:.2} M rows/s ({:.2} – {:.2}) |\n",
        plan_s,
        parse_s,
        p.cached_runs,
        cached_s,
        p.parquet_rows,
        rows_per_s.0 / 1e6,
        rows_per_s.1 / 1e6,
        rows_per_s.2 / 1e6,
    );
    Ok(md)
}
