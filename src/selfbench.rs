//! `bench360 selfbench`: measures bench360 itself, so that its numbers are the engine's and
//! not the client's. A scripted streaming server (a separate bench360 process, so its CPU is
//! not the client's) answers every request with a fixed schedule — first token `ttft` after
//! the request arrived, then one token every `itl` — and the client's measurements are
//! compared with that ground truth at several stream counts. Also timed: planning a large
//! DAG, re-applying a fully cached sweep, and writing chunk rows to Parquet.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::HttpClient;
use crate::record::stats::Dist;
use crate::record::RunClock;
use crate::spec::expand::ScenarioInstance;

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

/// The kernel's counters of connections refused at a full accept queue
/// (`TcpExt: ListenOverflows + ListenDrops`), machine-wide.
fn listen_drops() -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .filter(|(n, _)| *n == "ListenOverflows" || *n == "ListenDrops")
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// What the scripted server did for one request (its log line).
#[derive(Debug, Clone)]
struct Truth {
    arrive_ns: i64,
    end_ns: i64,
    sends: Vec<i64>,
}

fn read_truth(path: &std::path::Path) -> std::collections::HashMap<u32, Truth> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let id: u32 = it.next()?.parse().ok()?;
            let nums: Vec<i64> = it.map(|x| x.parse().ok()).collect::<Option<_>>()?;
            (nums.len() >= 3).then(|| {
                (
                    id,
                    Truth {
                        arrive_ns: nums[1],
                        end_ns: nums[2],
                        sends: nums[3..].to_vec(),
                    },
                )
            })
        })
        .collect()
}

fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid out-pointer; setrlimit only raises the soft limit to the hard one.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// CLOCK_MONOTONIC in ns: the clock `Instant` reads on Linux, shared by both processes.
pub(crate) fn mono_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// One SSE event of the scripted server: a chat completion chunk with these fields.
fn event(fields: &str) -> String {
    format!("data: {{\"object\":\"chat.completion.chunk\",\"model\":\"scripted\",{fields}}}\n\n")
}

/// Pins the calling thread (and the threads it creates afterwards) to these CPUs.
pub(crate) fn pin(cpus: &[usize]) -> anyhow::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: set is a plain bit set, zeroed then filled with CPU_SET; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            anyhow::ensure!(c < libc::CPU_SETSIZE as usize, "CPU {c} out of range");
            libc::CPU_SET(c, &mut set);
        }
        anyhow::ensure!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0,
            "cannot pin to CPUs {cpus:?}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// The scripted server: runs until killed. With `log`, one line per finished request:
/// `request_id accept_ns arrive_ns end_ns send_ns_1 … send_ns_N` (CLOCK_MONOTONIC ns;
/// request_id from the `x-request-id` header or `-`; send_ns_k = when content event k was
/// handed to the kernel) — the truth the client's measurements are compared with.
pub(crate) fn serve(
    port: u16,
    tokens: u32,
    ttft_ms: f64,
    itl_ms: f64,
    log: Option<&std::path::Path>,
    cpus: &[usize],
    keep_alive: bool,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    raise_fd_limit();
    pin(cpus)?;
    let log = match log {
        // Appending: selfbench truncates the log between stream counts, and every write must
        // land at the new end, not at this process's old offset.
        Some(p) => Some(Arc::new(std::sync::Mutex::new(std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?,
        )))),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // A deep accept queue: a burst of new connections must not meet SYN drops.
        let sock = tokio::net::TcpSocket::new_v4()?;
        sock.set_reuseaddr(true)?;
        sock.bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))?;
        let listener = sock.listen(8192)?;
        loop {
            let (mut sock, _) = listener.accept().await?;
            let accept_ns = mono_ns();
            let _ = sock.set_nodelay(true);
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf: Vec<u8> = Vec::with_capacity(4096);
                let mut tmp = [0u8; 4096];
                let mut accept_ns = accept_ns;
                loop {
                    // Read one request's head and body.
                    let mut id = String::from("-");
                    let (consumed, close) = loop {
                        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                            let len = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()))
                                .unwrap_or(0);
                            if let Some(v) = head.lines().find_map(|l| l.strip_prefix("x-request-id:")) {
                                let v = v.trim();
                                if !v.is_empty() && v.bytes().all(|b| b.is_ascii_graphic()) {
                                    id = v.to_string();
                                }
                            }
                            if buf.len() >= end + 4 + len {
                                let close = head.lines().any(|l| l.starts_with("connection:") && l.contains("close"));
                                break (end + 4 + len, close);
                            }
                        }
                        let n = match sock.read(&mut tmp).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        buf.extend_from_slice(&tmp[..n]);
                    };
                    buf.drain(..consumed);
                    // Kept alive only when asked to and the client did not ask to close; the
                    // body is then chunked (its end must be marked), else closed after.
                    let keep = keep_alive && !close;
                    let frame = |ev: &str| -> String {
                        if keep {
                            format!("{:x}\r\n{ev}\r\n", ev.len())
                        } else {
                            ev.to_string()
                        }
                    };
                    // The schedule starts when the request has fully arrived.
                    let arrive_ns = mono_ns();
                    let t0 = tokio::time::Instant::now();
                    let mut out = String::from(if keep {
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                    } else {
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                    });
                    out.push_str(&frame(&event(r#""choices":[{"index":0,"delta":{"role":"assistant"}}]"#)));
                    if sock.write_all(out.as_bytes()).await.is_err() {
                        return;
                    }
                    let ev = frame(&event(r#""choices":[{"index":0,"delta":{"content":"tok "}}]"#));
                    let mut sends = Vec::with_capacity(tokens as usize);
                    for k in 0..tokens {
                        let at = t0 + Duration::from_secs_f64((ttft_ms + k as f64 * itl_ms) / 1000.0);
                        tokio::time::sleep_until(at).await;
                        if sock.write_all(ev.as_bytes()).await.is_err() {
                            return;
                        }
                        sends.push(mono_ns());
                    }
                    let mut tail = frame(&format!(
                        "{}{}data: [DONE]\n\n",
                        event(r#""choices":[{"index":0,"delta":{},"finish_reason":"length"}]"#),
                        event(&format!(r#""choices":[],"usage":{{"prompt_tokens":8,"completion_tokens":{tokens}}}"#)),
                    ));
                    if keep {
                        tail.push_str("0\r\n\r\n");
                    }
                    let ok = sock.write_all(tail.as_bytes()).await.is_ok();
                    if !keep {
                        let _ = sock.shutdown().await;
                    }
                    let end_ns = mono_ns();
                    if let Some(log) = &log {
                        let mut line = format!("{id} {accept_ns} {arrive_ns} {end_ns}");
                        for s in &sends {
                            let _ = write!(line, " {s}");
                        }
                        line.push('\n');
                        let mut w = log.lock().unwrap_or_else(|e| e.into_inner());
                        let _ = w.write_all(line.as_bytes());
                        let _ = w.flush();
                    }
                    if !keep || !ok {
                        return;
                    }
                    // The next request on this connection: it was "accepted" as this one ended.
                    accept_ns = end_ns;
                }
            });
        }
    })
}

fn cpu_s() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn rss_mb() -> f64 {
    crate::telemetry::procfs::rss_bytes(std::process::id()).unwrap_or(0.0) / 1e6
}

/// Peak resident memory since the last reset (`VmHWM`).
fn hwm_mb() -> f64 {
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

fn samples(n: usize) -> Arc<Vec<crate::record::Sample>> {
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

struct StreamResult {
    streams: usize,
    requests: usize,
    failed: usize,
    chunks: u64,
    wall_s: f64,
    cpu_s: f64,
    rss_per_stream_kb: f64,
    ttft_err: Dist,
    itl_err: Dist,
    /// Against what the server did: first content event's arrival (client stamp) − its send
    /// (server stamp); gap between events at the client − the same gap at the server; every
    /// event's delivery delay; request setup (client `sent` → server has the whole request).
    truth_ttft_err: Dist,
    truth_ttft_steady: Dist,
    truth_itl_err: Dist,
    event_delay: Dist,
    setup: Dist,
    /// Requests matched with the server's log, and the mean number of requests the server had
    /// in flight (time-weighted, middle 80 % of the run).
    matched: usize,
    in_flight: f64,
    /// The server's own lateness: each send − its scheduled time (arrival + ttft + k·itl).
    server_late: Dist,
    /// Connections the kernel refused at a full accept queue during the run.
    listen_drops: u64,
}

async fn measure(
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
        std::thread::sleep(Duration::from_millis(50));
        truth = read_truth(log);
    }
    let mut by_req: std::collections::HashMap<u32, Vec<i64>> = std::collections::HashMap::new();
    for c in out
        .chunks
        .iter()
        .filter(|c| c.kind == crate::record::ChunkKind::Content)
    {
        by_req
            .entry(c.request_id)
            .or_default()
            .push(c.t_ns + origin_mono);
    }
    let (mut t_ttft, mut t_itl, mut delay, mut setup) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // The first wave starts together, so its first tokens are all due at the same instant: a
    // burst the one client thread stamps one after the other. Apart from it, the steady state.
    let mut t_ttft_steady = Vec::new();
    let mut matched = 0;
    let mut late = Vec::new();
    for t in truth.values() {
        for (k, s) in t.sends.iter().enumerate() {
            let due = t.arrive_ns as f64 + (p.ttft_ms + k as f64 * p.itl_ms) * 1e6;
            late.push((*s as f64 - due) / 1e6);
        }
    }
    for r in &ok {
        let (Some(t), Some(got)) = (truth.get(&r.id), by_req.get(&r.id)) else {
            continue;
        };
        if t.sends.len() != got.len() || got.is_empty() {
            continue;
        }
        matched += 1;
        t_ttft.push((got[0] - t.sends[0]) as f64 / 1e6);
        if r.id as usize >= streams {
            t_ttft_steady.push((got[0] - t.sends[0]) as f64 / 1e6);
        }
        for k in 0..got.len() {
            delay.push((got[k] - t.sends[k]) as f64 / 1e6);
            if k > 0 {
                t_itl.push(((got[k] - got[k - 1]) - (t.sends[k] - t.sends[k - 1])) as f64 / 1e6);
            }
        }
        if let Some(sent) = r.sent_ns {
            setup.push((t.arrive_ns - (sent + origin_mono)) as f64 / 1e6);
        }
    }
    // Mean in flight at the server over the middle 80 % of the run, time-weighted.
    let in_flight = {
        let (lo, hi) = (
            truth.values().map(|t| t.arrive_ns).min().unwrap_or(0),
            truth.values().map(|t| t.end_ns).max().unwrap_or(0),
        );
        let (a, b) = (lo + (hi - lo) / 10, hi - (hi - lo) / 10);
        if b > a {
            truth
                .values()
                .map(|t| (t.end_ns.min(b) - t.arrive_ns.max(a)).max(0) as f64)
                .sum::<f64>()
                / (b - a) as f64
        } else {
            0.0
        }
    };
    let ttft_err = Dist::of(
        ok.iter()
            .filter_map(|r| crate::record::stats::ttft_ms(r))
            .map(|t| t - p.ttft_ms)
            .collect(),
    );
    let mut last = std::collections::HashMap::new();
    let mut itl = Vec::new();
    for c in out
        .chunks
        .iter()
        .filter(|c| c.kind == crate::record::ChunkKind::Content)
    {
        if let Some(prev) = last.insert(c.request_id, c.t_ns) {
            itl.push((c.t_ns - prev) as f64 / 1e6 - p.itl_ms);
        }
    }
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
        ttft_err,
        itl_err: Dist::of(itl),
        truth_ttft_err: Dist::of(t_ttft),
        truth_ttft_steady: Dist::of(t_ttft_steady),
        truth_itl_err: Dist::of(t_itl),
        event_delay: Dist::of(delay),
        setup: Dist::of(setup),
        matched,
        in_flight,
        server_late: Dist::of(late),
        listen_drops: listen_drops().saturating_sub(drops0),
    })
}

/// Plans a sweep of about `nodes` nodes (runs + scores); returns (nodes, parse s, plan s).
fn bench_plan(nodes: usize) -> anyhow::Result<(usize, f64, f64)> {
    let runs = (nodes / 2).max(1);
    let sizes: Vec<String> = (1..=runs).map(|i| i.to_string()).collect();
    let text = format!(
        "sweep \"plan-bench\" {{ seed 1; }}\nmodel \"m\" {{ id \"org/m\"; }}\nengine \"e\" {{ kind \"openai\"; launcher \"endpoint\"; url \"http://127.0.0.1:9\"; }}\ntask \"t\" {{ kind \"mmlu\"; dataset \"/nonexistent\"; }}\nscenario \"b\" {{ kind \"batch\"; batch-size {}; }}\n",
        sizes.join(" ")
    );
    let t0 = Instant::now();
    let sweep = crate::sweep::parse(
        "plan-bench.kdl",
        &text,
        std::path::Path::new("/"),
        &|_| None,
        &Default::default(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let parse_s = t0.elapsed().as_secs_f64();
    let mut facts = crate::plan::Facts::default();
    for f in crate::plan::required_files(&sweep) {
        facts.files.insert(f, Ok("hash".into()));
    }
    facts
        .artifacts
        .insert("e".into(), Ok("endpoint:http://127.0.0.1:9".into()));
    let t1 = Instant::now();
    let plan = crate::plan::build(&sweep, &facts).map_err(anyhow::Error::msg)?;
    struct Empty;
    impl crate::plan::History for Empty {
        fn past(&self, _: &str) -> Option<crate::plan::Past> {
            None
        }
        fn last_key(&self, _: &str, _: &str) -> Option<String> {
            None
        }
    }
    let st = crate::plan::statuses(&plan, &Empty);
    let plan_s = t1.elapsed().as_secs_f64();
    Ok((st.len(), parse_s, plan_s))
}

/// A real `bench360 apply` (a new process) of a sweep of `runs` runs whose every node is
/// recorded as finished: the cost of deciding that nothing has to run.
fn bench_cached_apply(runs: usize) -> anyhow::Result<f64> {
    let dir = std::env::temp_dir().join(format!("bench360-selfbench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data"))?;
    let item = r#"{"id": "x/test/0", "subject": "x", "subcategory": "x", "category": "STEM", "question": "q", "choices": ["1", "2", "3", "4"], "answer": "A"}"#;
    std::fs::write(dir.join("data/test.jsonl"), format!("{item}\n"))?;
    std::fs::write(dir.join("data/dev.jsonl"), format!("{item}\n"))?;
    let sizes: Vec<String> = (1..=runs).map(|i| i.to_string()).collect();
    let sweep_path = dir.join("cached.kdl");
    std::fs::write(
        &sweep_path,
        format!(
            "sweep \"cached\" {{ seed 1; }}\nmodel \"m\" {{ id \"org/m\"; }}\nengine \"e\" {{ kind \"openai\"; launcher \"endpoint\"; url \"http://127.0.0.1:9\"; }}\ntask \"t\" {{ kind \"mmlu\"; dataset \"data\"; }}\nscenario \"b\" {{ kind \"batch\"; batch-size {}; }}\n",
            sizes.join(" ")
        ),
    )?;
    let cache = dir.join("cache");
    let store = crate::store::Store::open(&cache)?;
    let (sweep, _) = crate::sweep::load(&sweep_path, &Default::default())?;
    let facts = crate::plan::facts::gather(&store, &sweep);
    let plan = crate::plan::build(&sweep, &facts).map_err(anyhow::Error::msg)?;
    for n in plan.graph.node_weights() {
        std::fs::create_dir_all(store.object_dir(&n.key))?;
        store.write_record(&crate::store::Record {
            format: crate::store::STORE_FORMAT,
            key: n.key.clone(),
            kind: n.kind.as_str().into(),
            label: n.label.clone(),
            sweep: plan.sweep.clone(),
            status: crate::store::RecordStatus::Finished,
            host: crate::host::hostname(),
            pid: std::process::id(),
            started_at: crate::host::now_rfc3339(),
            finished_at: None,
            duration_s: None,
            cause: None,
            inputs: n.inputs.clone(),
            outputs: serde_json::Value::Null,
            objects: Default::default(),
        })?;
    }
    let exe = std::env::current_exe()?;
    let t0 = Instant::now();
    let out = std::process::Command::new(exe)
        .arg("--cache")
        .arg(&cache)
        .arg("apply")
        .arg(&sweep_path)
        .output()?;
    let s = t0.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(
        out.status.success() && text.contains("0 ran"),
        "cached apply did not run nothing: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(s)
}

/// Chunk rows written per second: (median, min, max) of five writes.
fn bench_parquet(rows: usize) -> anyhow::Result<(f64, f64, f64)> {
    let chunks: Vec<crate::record::ChunkRecord> = (0..rows)
        .map(|i| crate::record::ChunkRecord {
            request_id: (i / 64) as u32,
            index: (i % 64) as u32,
            t_ns: i as i64 * 1000,
            kind: crate::record::ChunkKind::Content,
            chars: 4,
            tokens: None,
        })
        .collect();
    let cols = crate::record::Columns {
        sweep: "s".into(),
        model: "m".into(),
        quantization: "q".into(),
        engine: "e".into(),
        engine_kind: "llama.cpp".into(),
        task: "t".into(),
        scenario: "x".into(),
        scenario_kind: "batch".into(),
        scenario_params: "{}".into(),
        max_tokens: 64,
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        repeat: 0,
    };
    let path =
        std::env::temp_dir().join(format!("bench360-selfbench-{}.parquet", std::process::id()));
    // The median of five writes (the first also pays for fresh memory).
    let mut rates = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        crate::trace::write_chunks(&path, "key", &cols, &chunks)?;
        rates.push(rows as f64 / t0.elapsed().as_secs_f64());
        let _ = std::fs::remove_file(&path);
    }
    rates.sort_by(f64::total_cmp);
    Ok((rates[2], rates[0], rates[4]))
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
    std::fs::write(&log, "")?;
    let cpu_list = |c: &[usize]| {
        c.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut server = std::process::Command::new(std::env::current_exe()?)
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
        .arg(&log)
        .args(if p.reuse_connections {
            vec!["--keep-alive"]
        } else {
            vec![]
        })
        .args(if server_cpus.is_empty() {
            vec![]
        } else {
            vec!["--server-cpus".to_string(), cpu_list(&server_cpus)]
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
    let f = |d: &Dist| {
        format!(
            "{:.3} / {:.3}",
            d.p50.unwrap_or(f64::NAN),
            d.p99.unwrap_or(f64::NAN)
        )
    };
    md.push_str("Against what the server did (its log of every event's send time):\n\n| streams | requests (failed) | in flight held | tokens/s | client CPU ms / 1000 tokens | client CPU cores | memory / stream KB | TTFT error p50 / p99 ms | TTFT error after the first wave p50 / p99 ms | ITL error p50 / p99 ms | event delay p50 / p99 ms | request setup p50 / p99 ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in &results {
        let _ = writeln!(
            md,
            "| {} | {} ({}) | {:.1} | {:.0} | {:.2} | {:.2} | {:.1} | {} | {} | {} | {} | {} |",
            r.streams,
            r.requests,
            r.failed,
            r.in_flight,
            r.chunks as f64 / r.wall_s,
            r.cpu_s * 1000.0 / (r.chunks.max(1) as f64 / 1000.0),
            r.cpu_s / r.wall_s,
            r.rss_per_stream_kb,
            f(&r.truth_ttft_err),
            f(&r.truth_ttft_steady),
            f(&r.truth_itl_err),
            f(&r.event_delay),
            f(&r.setup),
        );
    }
    md.push_str("\nAgainst the schedule (what a client that cannot see the server's log can check: it includes request setup and the server's own lateness), and the suspects measured apart:\n\n| streams | matched with the server log | TTFT − scheduled p50 / p99 ms | gap − scheduled ITL p50 / p99 ms | server lateness p50 / p99 ms | connections dropped at the accept queue |\n|---|---|---|---|---|---|\n");
    for r in &results {
        let _ = writeln!(
            md,
            "| {} | {} of {} | {} | {} | {} | {} |",
            r.streams,
            r.matched,
            r.requests - r.failed,
            f(&r.ttft_err),
            f(&r.itl_err),
            f(&r.server_late),
            r.listen_drops,
        );
    }
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
