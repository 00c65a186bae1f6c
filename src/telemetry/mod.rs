//! Telemetry of a run: NVIDIA GPUs (NVML), the engine's process tree, the host and bench360
//! itself (procfs), CPU package energy (RAPL) and the engine's Prometheus metrics, each
//! sampled on the run's monotonic clock at a fixed interval, plus the accounting that turns
//! samples into energy, power and memory figures. What cannot be measured is said in the
//! notes; it is never reported as zero.

pub(crate) mod energy;
pub(crate) mod gpu;
pub(crate) mod procfs;
pub(crate) mod prom;
mod summary;

pub(crate) use summary::*;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub(crate) use crate::record::{RequestRecord, RunClock, Source, TelemetrySample as Sample};
use crate::spec::TelemetryConfig as Config;

/// Why a source has no figures for this run: said in the run's telemetry notes (and the
/// report), never shown as zero. Kept as text where the library's own error is not `Clone`
/// (one NVML handle serves the whole process, and one failed scraper every tick).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum Unavailable {
    #[error("no NVIDIA GPU (NVML unavailable: {0})")]
    NoNvml(String),
    /// NVML cannot be loaded on a host whose PCI bus has NVIDIA GPUs (no driver, or its
    /// library not where the loader looks): the GPUs are there, their figures are not.
    #[error(
        "{count} NVIDIA GPU{} on the PCI bus but no NVML ({why})",
        if *count == 1 { "" } else { "s" }
    )]
    NvmlMissing { count: usize, why: String },
    #[error("NVML device count failed: {0}")]
    DeviceCount(String),
    #[error("no NVIDIA GPU (NVML sees no device)")]
    NoDevice,
    #[error("GPU {index}: {why}")]
    Device { index: u32, why: String },
    #[error("{} is not readable ({why})", path.display())]
    Unreadable {
        path: std::path::PathBuf,
        why: String,
    },
    #[error("no RAPL package domain under {}", root.display())]
    NoRapl { root: std::path::PathBuf },
    #[error("cannot set up the metrics scraper: {0}")]
    Scraper(String),
    #[error("{0}")]
    Request(String),
    #[error("answered `{0}`")]
    Status(reqwest::StatusCode),
}
use energy::Integral;

/// What to watch during a run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Targets {
    pub engine_pid: Option<u32>,
    /// GPU indices the deployment uses; None = all.
    pub gpus: Option<Vec<u32>>,
    pub metrics_url: Option<String>,
    /// Bearer token for the metrics endpoint (an endpoint engine's API key).
    pub metrics_auth: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct SamplerCost {
    pub sampler: String,
    pub samples: u64,
    /// CPU time of the sampling thread per sample, µs.
    pub cpu_us_per_sample: f64,
    /// Ticks skipped because a sample took longer than the interval.
    pub missed_ticks: u64,
}

#[derive(Debug, Default)]
struct Output {
    samples: Vec<Sample>,
    prom: Vec<(i64, prom::PromSample)>,
    cost: Option<SamplerCost>,
    /// Scrapes that failed (the first failure's cause is in the notes).
    failures: u64,
}

/// Samplers running in their own threads until [`Collector::stop`].
pub(crate) struct Collector {
    /// RAPL counter ranges (device, mJ at which it wraps), for accounting.
    wraps: Vec<(String, f64)>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Output>>,
    notes: Arc<Mutex<Vec<String>>>,
}

/// Runs `f` every `interval` until `stop`, then once more, so that every sampler's samples
/// bracket any window inside the collector's lifetime. `started` is signalled after the
/// first sample.
fn periodic<F>(
    name: &str,
    interval: Duration,
    clock: RunClock,
    stop: Arc<AtomicBool>,
    started: std::sync::mpsc::Sender<()>,
    mut f: F,
) -> JoinHandle<Output>
where
    F: FnMut(i64, &mut Output) + Send + 'static,
{
    let name = name.to_string();
    std::thread::Builder::new()
        .name(format!("telemetry-{name}"))
        .spawn(move || {
            let mut out = Output::default();
            let (mut count, mut cpu, mut missed) = (0u64, 0u64, 0u64);
            let start = Instant::now();
            let mut k = 0u32;
            loop {
                let last = stop.load(Ordering::Relaxed);
                let c0 = procfs::thread_cpu_ns();
                f(clock.ns(Instant::now()), &mut out);
                cpu += procfs::thread_cpu_ns() - c0;
                count += 1;
                if count == 1 {
                    let _ = started.send(());
                }
                if last {
                    break;
                }
                // Absolute schedule: start + k × interval; late ticks are skipped and counted.
                k += 1;
                let mut next = start + interval * k;
                let now = Instant::now();
                while next < now {
                    k += 1;
                    missed += 1;
                    next = start + interval * k;
                }
                // Sleep in short steps so that stop is prompt.
                while !stop.load(Ordering::Relaxed) {
                    let left = next.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(left.min(Duration::from_millis(20)));
                }
            }
            out.cost = Some(SamplerCost {
                sampler: name,
                samples: count,
                cpu_us_per_sample: if count > 0 {
                    cpu as f64 / count as f64 / 1000.0
                } else {
                    0.0
                },
                missed_ticks: missed,
            });
            out
        })
        .expect("spawning a sampler thread")
}

/// What the sampler threads share while [`Collector::start`] sets them up.
struct Samplers {
    interval: Duration,
    /// The engine metrics' scrape interval ([`Config::metrics_every`]).
    metrics_interval: Duration,
    clock: RunClock,
    stop: Arc<AtomicBool>,
    notes: Arc<Mutex<Vec<String>>>,
    started: std::sync::mpsc::Sender<()>,
    threads: Vec<JoinHandle<Output>>,
    /// The engine's processes, found by the procfs sampler, whose GPU memory NVML reports.
    engine_pids: Arc<Mutex<Vec<u32>>>,
}

impl Samplers {
    fn note(&self, s: String) {
        self.notes.lock().expect("notes lock").push(s);
    }

    fn spawn<F: FnMut(i64, &mut Output) + Send + 'static>(&mut self, name: &str, f: F) {
        self.spawn_every(name, self.interval, f);
    }

    fn spawn_every<F: FnMut(i64, &mut Output) + Send + 'static>(
        &mut self,
        name: &str,
        interval: Duration,
        f: F,
    ) {
        self.threads.push(periodic(
            name,
            interval,
            self.clock,
            self.stop.clone(),
            self.started.clone(),
            f,
        ));
    }

    /// NVML: the energy counter in its own thread (a read costs ~4 ms on an H200), the fast
    /// fields in another; or a note saying why there is no GPU. `engine_root`: the engine's
    /// process, to tell other processes on the devices from its own (each other process is
    /// noted once, by pid and name).
    fn gpu(&mut self, gpus: Option<&[u32]>, engine_root: Option<u32>) {
        match gpu::nvml().and_then(|n| gpu::devices(&n, gpus).map(|d| (n, d))) {
            Ok((nvml, devs)) => {
                self.note(format!(
                    "GPUs sampled: {}",
                    devs.iter()
                        .map(|(i, n)| format!("gpu{i} ({n})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                let idx: Vec<u32> = devs.iter().map(|(i, _)| *i).collect();
                let (n2, idx2) = (nvml.clone(), idx.clone());
                self.spawn("gpu-energy", move |t, out| {
                    out.samples.extend(gpu::energy_sample(&n2, &idx2, t));
                });
                let pids = self.engine_pids.clone();
                let notes2 = self.notes.clone();
                let mut warned = false;
                if engine_root.is_none() {
                    self.note("other processes on the GPUs not told apart from the engine's: the engine is not a local process".into());
                }
                let mut seen = std::collections::BTreeSet::new();
                let mut last = std::collections::BTreeSet::new();
                let mut hidden_said = false;
                let hidden_is_other = gpu::hidden_is_other(engine_root);
                self.spawn("gpu", move |t, out| {
                    let p = pids.lock().expect("pids lock").clone();
                    let engine = gpu::EngineProcs {
                        known: &p,
                        root: engine_root,
                        hidden_is_other,
                    };
                    let (mut s, averaged, found) = gpu::fast_sample(&nvml, &idx, &engine, t);
                    let others = gpu::confirm_others(&mut s, found, &mut last);
                    if engine_root.is_some()
                        && !hidden_said
                        && s.iter()
                            .any(|x| x.proc_mem_mb.is_some() && x.other_procs.is_none())
                    {
                        hidden_said = true;
                        notes2.lock().expect("notes lock").push(
                            "NVML lists GPU processes this process cannot see (bench360 runs in a container's PID namespace, or the engine's processes are another user's): other work on the GPUs is not told apart from the engine's while they are there".into(),
                        );
                    }
                    for (dev, pid, mb) in others {
                        if seen.insert((dev.clone(), pid)) {
                            let name = procfs::comm(pid).unwrap_or_else(|| "?".into());
                            notes2.lock().expect("notes lock").push(format!(
                                "{dev}: another process used the device beside the engine: pid {pid} ({name}), {mb:.0} MB of GPU memory when first seen"
                            ));
                        }
                    }
                    if averaged && !warned {
                        warned = true;
                        notes2.lock().expect("notes lock").push(
                            "GPU power from nvmlDeviceGetPowerUsage (a ~1 s moving average): the instant-power field is not supported".into(),
                        );
                    }
                    out.samples.extend(s);
                });
            }
            Err(why) => self.note(why.to_string()),
        }
    }

    /// procfs and RAPL: the engine's process tree, the host, bench360 itself, the CPU
    /// packages' energy counters. Returns the RAPL counters' ranges, for unwrapping.
    fn procfs(&mut self, engine_pid: Option<u32>) -> Vec<(String, f64)> {
        let rapl = procfs::rapl_domains();
        match &rapl {
            Ok(d) => self.note(format!(
                "CPU energy from RAPL: {}",
                d.iter()
                    .map(|x| x.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Err(why) => self.note(format!("no CPU energy: RAPL unavailable ({why})")),
        }
        let rapl = rapl.unwrap_or_default();
        let wraps = rapl
            .iter()
            .filter_map(|d| d.wrap_mj.map(|w| (d.name.clone(), w)))
            .collect();
        let mut tree = engine_pid.map(procfs::ProcessTreeMeter::new);
        if tree.is_none() {
            self.note("engine CPU/RAM not sampled: the engine is not a local process".into());
        }
        let mut host = procfs::HostMeter::new();
        let mut me = procfs::ProcessTreeMeter::single(std::process::id());
        let pids = self.engine_pids.clone();
        self.spawn("procfs", move |t, out| {
            if let Some(m) = tree.as_mut() {
                if let Some((cpu, rss, p)) = m.sample(t) {
                    *pids.lock().expect("pids lock") = p;
                    out.samples.push(Sample {
                        t_ns: t,
                        source: Source::Process,
                        device: "engine".into(),
                        cpu_pct: cpu,
                        rss_mb: Some(rss),
                        ..Default::default()
                    });
                }
            }
            let (cpu, used, total) = host.sample();
            out.samples.push(Sample {
                t_ns: t,
                source: Source::Host,
                device: "host".into(),
                cpu_pct: cpu,
                mem_used_mb: used,
                mem_total_mb: total,
                ..Default::default()
            });
            if let Some((cpu, rss, _)) = me.sample(t) {
                out.samples.push(Sample {
                    t_ns: t,
                    source: Source::Bench360,
                    device: "bench360".into(),
                    cpu_pct: cpu,
                    rss_mb: Some(rss),
                    ..Default::default()
                });
            }
            for d in &rapl {
                if let Some(mj) = d.read_mj() {
                    out.samples.push(Sample {
                        t_ns: t,
                        source: Source::Rapl,
                        device: d.name.clone(),
                        energy_mj: Some(mj),
                        ..Default::default()
                    });
                }
            }
        });
        wraps
    }

    /// The engine's Prometheus metrics, when it serves them.
    fn metrics(&mut self, metrics_url: Option<&str>, auth: Option<String>) {
        match metrics_url {
            Some(url) => {
                let url = url.to_string();
                let notes2 = self.notes.clone();
                let mut first_error = None::<Unavailable>;
                let timeout = self
                    .metrics_interval
                    .max(Duration::from_millis(500))
                    .min(Duration::from_secs(2));
                let scraper = Scraper::new(timeout, auth);
                self.spawn_every(
                    "metrics",
                    self.metrics_interval,
                    move |t, out| match scraper
                        .as_ref()
                        .map_err(|e| e.clone())
                        .and_then(|s| s.get(&url))
                    {
                        Ok(text) => {
                            let parsed = prom::parse(&text);
                            let g = prom::gauges(&parsed);
                            out.samples.push(Sample {
                                t_ns: t,
                                source: Source::Engine,
                                device: "engine".into(),
                                running: g.running,
                                waiting: g.waiting,
                                kv_cache_pct: g.kv_cache_pct,
                                ..Default::default()
                            });
                            out.prom.extend(parsed.into_iter().map(|p| (t, p)));
                        }
                        Err(e) => {
                            out.failures += 1;
                            if first_error.is_none() {
                                first_error = Some(e.clone());
                                notes2
                                    .lock()
                                    .expect("notes lock")
                                    .push(format!("engine metrics {url}: {e}"));
                            }
                        }
                    },
                );
            }
            None => {
                self.note("engine metrics not scraped: the engine has no metrics endpoint".into())
            }
        }
    }
}

impl Collector {
    pub fn start(cfg: &Config, clock: RunClock, targets: &Targets) -> Collector {
        let (started, first_samples) = std::sync::mpsc::channel();
        let mut s = Samplers {
            interval: cfg.interval,
            metrics_interval: cfg.metrics_every(),
            clock,
            stop: Arc::new(AtomicBool::new(false)),
            notes: Arc::new(Mutex::new(Vec::new())),
            started,
            threads: Vec::new(),
            engine_pids: Arc::new(Mutex::new(Vec::new())),
        };
        s.gpu(targets.gpus.as_deref(), targets.engine_pid);
        let wraps = s.procfs(targets.engine_pid);
        s.metrics(targets.metrics_url.as_deref(), targets.metrics_auth.clone());
        // Return once every sampler has its first sample, so that a window starting now is
        // bracketed by samples (a slow first read, like NVML's energy counter, is waited for).
        for _ in 0..s.threads.len() {
            if first_samples.recv_timeout(Duration::from_secs(5)).is_err() {
                break;
            }
        }
        Collector {
            wraps,
            stop: s.stop,
            threads: s.threads,
            notes: s.notes,
        }
    }

    /// Stops every sampler and returns what they collected, sorted by time.
    pub fn stop(self) -> Collected {
        self.stop.store(true, Ordering::Relaxed);
        let mut c = Collected::default();
        for t in self.threads {
            if let Ok(out) = t.join() {
                if out.failures > 0 {
                    let n = out.cost.as_ref().map_or(0, |c| c.samples);
                    self.notes.lock().expect("notes lock").push(format!(
                        "engine metrics: {} of {n} scrapes failed",
                        out.failures
                    ));
                }
                c.samples.extend(out.samples);
                c.prom.extend(out.prom);
                c.costs.extend(out.cost);
            }
        }
        c.samples.sort_by_key(|s| s.t_ns);
        c.prom.sort_by_key(|p| p.0);
        c.notes = std::mem::take(&mut *self.notes.lock().expect("notes lock"));
        c.wraps = self.wraps;
        c
    }
}

/// Scrapes a Prometheus endpoint with reqwest (http or https, redirects followed, a bearer
/// token when the engine has an API key), blocking on a runtime of its own: samplers live
/// in their own threads.
struct Scraper {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    auth: Option<String>,
}

impl Scraper {
    fn new(timeout: Duration, auth: Option<String>) -> Result<Scraper, Unavailable> {
        let failed = |e: &dyn std::fmt::Display| Unavailable::Scraper(e.to_string());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failed(&e))?;
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| failed(&e))?;
        Ok(Scraper { rt, http, auth })
    }

    fn get(&self, url: &str) -> Result<String, Unavailable> {
        let failed = |e: reqwest::Error| Unavailable::Request(e.to_string());
        self.rt.block_on(async {
            let mut rb = self.http.get(url).header("Accept", "text/plain");
            if let Some(k) = &self.auth {
                rb = rb.bearer_auth(k);
            }
            let r = rb.send().await.map_err(failed)?;
            if !r.status().is_success() {
                return Err(Unavailable::Status(r.status()));
            }
            r.text().await.map_err(failed)
        })
    }
}

#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub samples: Vec<Sample>,
    pub prom: Vec<(i64, prom::PromSample)>,
    pub notes: Vec<String>,
    pub costs: Vec<SamplerCost>,
    /// RAPL counter ranges by device, mJ.
    pub wraps: Vec<(String, f64)>,
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_scraper_follows_redirects_and_sends_the_token() {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for conn in listener.incoming().take(8) {
                let mut conn = conn.unwrap();
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut head = Vec::new();
                loop {
                    let mut l = String::new();
                    reader.read_line(&mut l).unwrap();
                    if l == "\r\n" || l.is_empty() {
                        break;
                    }
                    head.push(l);
                }
                let first = head[0].clone();
                let authed = head
                    .iter()
                    .any(|h| h.eq_ignore_ascii_case("authorization: bearer k\r\n"));
                let reply = if first.starts_with("GET /metrics ") {
                    "HTTP/1.1 302 Found\r\nLocation: /real\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".to_string()
                } else if authed {
                    let body = "vllm:num_requests_running 3\n";
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    "HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
                        .to_string()
                };
                conn.write_all(reply.as_bytes()).unwrap();
            }
        });
        let url = format!("http://{addr}/metrics");
        let s = Scraper::new(Duration::from_secs(2), Some("k".into())).unwrap();
        assert_eq!(s.get(&url).unwrap(), "vllm:num_requests_running 3\n");
        let anonymous = Scraper::new(Duration::from_secs(2), None).unwrap();
        assert!(anonymous.get(&url).unwrap_err().to_string().contains("401"));
    }
    use super::*;

    const MS: i64 = 1_000_000;

    fn gpu(t: i64, w: f64, mj: f64, mem: f64) -> [Sample; 2] {
        [
            Sample {
                t_ns: t,
                source: Source::Gpu,
                device: "gpu0".into(),
                energy_mj: Some(mj),
                ..Default::default()
            },
            Sample {
                t_ns: t,
                source: Source::Gpu,
                device: "gpu0".into(),
                power_w: Some(w),
                mem_used_mb: Some(mem),
                util_pct: Some(50.0),
                ..Default::default()
            },
        ]
    }

    #[test]
    fn summarizes_a_recorded_gpu_series() {
        // 2 s idle at 80 W, then 4 s of load at 200 W, sampled every 100 ms; counter in mJ.
        let mut samples = Vec::new();
        let mut mj = 1_000_000.0;
        for i in 0..=60 {
            let t = i * 100 * MS;
            let w = if t < 2000 * MS { 80.0 } else { 200.0 };
            samples.extend(gpu(t, w, mj, 1500.0));
            mj += w * 100.0; // W × 0.1 s = J; ×1000 mJ → w*100 mJ
        }
        let c = Collected {
            samples,
            notes: vec!["GPUs sampled: gpu0 (test)".into()],
            ..Default::default()
        };
        let cfg = Config {
            interval: Duration::from_millis(100),
            idle: Duration::from_secs(2),
            metrics_interval: None,
        };
        let reqs: Vec<RequestRecord> = (0..4)
            .map(|i| RequestRecord {
                id: i,
                completion_tokens: Some(100),
                output: "One. Two.".into(),
                ..Default::default()
            })
            .collect();
        let s = summarize(
            &c,
            &cfg,
            Some((0, 1900 * MS)),
            (2000 * MS, 6000 * MS),
            &reqs,
            Some(500_000_000),
        );
        assert_eq!(s.energy_source, "gpu");
        let d = &s.devices[0];
        assert_eq!(d.method, "counter");
        assert!((d.energy_j - 800.0).abs() < 1e-6, "{d:?}");
        assert!((d.idle_w.unwrap() - 80.0).abs() < 1e-6);
        assert!((s.energy_above_idle_j.unwrap() - 480.0).abs() < 1e-6);
        assert!((s.j_per_output_token.unwrap() - 2.0).abs() < 1e-9);
        assert!((s.j_per_request.unwrap() - 200.0).abs() < 1e-9);
        assert!((s.j_per_sentence.unwrap() - 100.0).abs() < 1e-9);
        assert!((s.gpu_mem_overhead_mb.unwrap() - 1000.0).abs() < 1e-9);
        assert_eq!(s.gpu_util_mean_pct, Some(50.0));
        assert_eq!(d.peak_w, Some(200.0));
        assert!((d.power_integral_j.unwrap() - 800.0).abs() < 1e-6, "{d:?}");
        assert!(!s.client_cpu_saturated);
    }

    #[test]
    fn without_any_energy_source_the_summary_says_none() {
        let c = Collected {
            notes: vec!["no NVIDIA GPU (NVML unavailable: x)".into()],
            ..Default::default()
        };
        let cfg = Config {
            interval: Duration::from_millis(100),
            idle: Duration::ZERO,
            metrics_interval: None,
        };
        let s = summarize(&c, &cfg, None, (0, 1000 * MS), &[], None);
        assert_eq!(s.energy_source, "none");
        assert_eq!(
            (s.energy_j, s.j_per_output_token, s.gpu_mem_mean_mb),
            (None, None, None)
        );
        assert!(s.notes[0].starts_with("no NVIDIA GPU"));
        // A starved client is flagged: bench360 itself at 100 % of every core.
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as f64;
        let busy: Vec<Sample> = (0..=10)
            .map(|i| Sample {
                t_ns: i * 100 * MS,
                source: Source::Bench360,
                device: "bench360".into(),
                cpu_pct: Some(100.0 * cores),
                ..Default::default()
            })
            .collect();
        let c = Collected {
            samples: busy,
            ..Default::default()
        };
        assert!(summarize(&c, &cfg, None, (0, 1000 * MS), &[], None).client_cpu_saturated);
    }

    /// A local `/metrics` endpoint answering every GET with one gauge, until the test ends.
    fn metrics_server() -> String {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                loop {
                    let mut l = String::new();
                    if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                        break;
                    }
                }
                let body = "vllm:num_requests_running 1\n";
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        format!("http://{addr}/metrics")
    }

    /// The engine's metrics are scraped at `metrics_every` (1 s unless the sweep says), not at
    /// the sampling interval: over 300 ms the default scrapes at its first tick and at the stop
    /// (never more), while `metrics-interval 0.02` scrapes along with the other samplers.
    #[test]
    fn the_engine_metrics_keep_their_own_interval() {
        let url = metrics_server();
        let scrapes = |metrics_interval: Option<Duration>| {
            let cfg = Config {
                interval: Duration::from_millis(20),
                idle: Duration::ZERO,
                metrics_interval,
            };
            let targets = Targets {
                engine_pid: None,
                gpus: None,
                metrics_url: Some(url.clone()),
                metrics_auth: None,
            };
            let col = Collector::start(&cfg, RunClock::start(), &targets);
            std::thread::sleep(Duration::from_millis(300));
            let c = col.stop();
            c.samples
                .iter()
                .filter(|s| s.source == Source::Engine)
                .count()
        };
        let default = scrapes(None);
        assert!(
            (1..=2).contains(&default),
            "{default} scrapes at the default"
        );
        let fast = scrapes(Some(Duration::from_millis(20)));
        assert!(fast >= 3, "{fast} scrapes every 20 ms");
    }

    #[test]
    fn collects_procfs_samples_of_a_real_process_for_real() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let clock = RunClock::start();
        let cfg = Config {
            interval: Duration::from_millis(20),
            idle: Duration::ZERO,
            metrics_interval: None,
        };
        let targets = Targets {
            engine_pid: Some(child.id()),
            gpus: None,
            metrics_url: None,
            metrics_auth: None,
        };
        let col = Collector::start(&cfg, clock, &targets);
        let window_start = clock.ns(Instant::now());
        std::thread::sleep(Duration::from_millis(300));
        let window_end = clock.ns(Instant::now());
        let c = col.stop();
        // Every sampler's series brackets a window that starts after start() and ends before
        // stop(): accounting can interpolate at both edges.
        for src in [Source::Process, Source::Host, Source::Bench360] {
            let ts: Vec<i64> = c
                .samples
                .iter()
                .filter(|s| s.source == src)
                .map(|s| s.t_ns)
                .collect();
            assert!(
                ts[0] <= window_start && *ts.last().unwrap() >= window_end,
                "{src:?}: {ts:?}"
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let n = |src: Source| c.samples.iter().filter(|s| s.source == src).count();
        assert!(
            n(Source::Process) >= 5 && n(Source::Host) >= 5 && n(Source::Bench360) >= 5,
            "{:?}",
            c.costs
        );
        assert!(c.samples.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
        let procfs = c.costs.iter().find(|x| x.sampler == "procfs").unwrap();
        assert!(
            procfs.samples >= 5 && procfs.cpu_us_per_sample > 0.0,
            "{procfs:?}"
        );
        assert!(c
            .notes
            .iter()
            .any(|n| n.contains("engine metrics not scraped")));
    }
}
