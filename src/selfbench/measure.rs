//! One measurement of `selfbench`: the client at a number of streams against the scripted
//! server, then the server's log read back and handed to [`super::analyze`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::analyze::{analyze, Analysis, Observed};
use super::server::{listen_drops, mono_ns, read_truth};
use super::Params;
use crate::client::HttpClient;
use crate::record::RunClock;
use crate::spec::expand::ScenarioInstance;

pub(super) struct StreamResult {
    pub streams: usize,
    pub requests: usize,
    pub failed: usize,
    pub chunks: u64,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub rss_per_stream_kb: f64,
    /// The client's errors against the schedule and against the server's log.
    pub a: Analysis,
    /// Connections the kernel refused at a full accept queue during the run.
    pub listen_drops: u64,
}

pub(super) async fn measure(
    base: &str,
    p: &Params,
    streams: usize,
    log: &std::path::Path,
) -> anyhow::Result<StreamResult> {
    let per_request_s = (p.ttft_ms + p.itl_ms * p.tokens.saturating_sub(1) as f64) / 1000.0;
    let rounds = (p.seconds / per_request_s).ceil().max(1.0) as u64;
    let requests = streams as u64 * rounds;
    let sampling = crate::spec::Sampling {
        max_tokens: p.tokens,
        temperature: 0.0,
        top_p: 1.0,
        stop: vec![],
        ..Default::default()
    };
    let client = Arc::new(
        HttpClient::new(
            base,
            crate::spec::Api::Chat,
            "scripted",
            sampling,
            Duration::from_secs(120),
            None,
            false,
        )?
        .with_request_ids(),
    );
    let (_tx, cancel) = crate::workload::Cancel::new();
    // Start from an empty server log (the server appends; truncating is enough).
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(log)?;
    // Peak memory from the kernel's high-water mark, reset here: no watcher thread polling
    // /proc beside the client (it preempted the client's core for ~1 ms every 20 ms).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let base_rss = rss_mb();
    let drops0 = listen_drops();
    let cpu0 = cpu_s();
    let t0 = Instant::now();
    let clock = RunClock::start();
    // The run clock's origin on CLOCK_MONOTONIC (read back to back: within ~0.1 µs).
    let origin_mono = mono_ns() - clock.ns(Instant::now());
    let inst = ScenarioInstance::Concurrency {
        concurrency: streams as u64,
        requests: Some(requests),
        early_stop: None,
    };
    let out = crate::workload::run(
        client,
        &inst,
        samples(16),
        1,
        clock,
        cancel,
        indicatif::ProgressBar::hidden(),
        &[],
        None,
    )
    .await;
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu = cpu_s() - cpu0;
    let peak_rss = hwm_mb().max(base_rss);
    let ok: Vec<_> = out.requests.iter().filter(|r| r.ok()).collect();
    // The server logs a request after closing its stream: wait for the last lines.
    let mut truth = read_truth(log);
    let waited = Instant::now();
    while truth.len() < ok.len() && waited.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        truth = read_truth(log);
    }
    let a = analyze(
        &truth,
        &Observed {
            ok: &ok,
            chunks: &out.chunks,
            origin_mono,
            streams,
            ttft_ms: p.ttft_ms,
            itl_ms: p.itl_ms,
        },
    );
    Ok(StreamResult {
        streams,
        requests: out.requests.len(),
        failed: out.requests.len() - ok.len(),
        chunks: out
            .chunks
            .iter()
            .filter(|c| c.kind == crate::record::ChunkKind::Content)
            .count() as u64,
        wall_s,
        cpu_s: cpu,
        rss_per_stream_kb: (peak_rss - base_rss).max(0.0) * 1000.0 / streams as f64,
        a,
        listen_drops: listen_drops().saturating_sub(drops0),
    })
}

pub(super) fn cpu_s() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

pub(super) fn rss_mb() -> f64 {
    crate::telemetry::procfs::rss_bytes(std::process::id()).unwrap_or(0.0) / 1e6
}

/// Peak resident memory since the last reset (`VmHWM`).
pub(super) fn hwm_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map(|kb| kb / 1000.0)
        .unwrap_or(0.0)
}

pub(super) fn samples(n: usize) -> Arc<Vec<crate::record::Sample>> {
    Arc::new(
        (0..n)
            .map(|i| crate::record::Sample {
                id: format!("s{i}"),
                system: None,
                prompt: "Say something.".into(),
                reference: "A".into(),
                ..Default::default()
            })
            .collect(),
    )
}
