//! Telemetry of a run: NVIDIA GPUs (NVML), the engine's process tree, the host and bench360
//! itself (procfs), CPU package energy (RAPL) and the engine's Prometheus metrics, each
//! sampled on the run's monotonic clock at a fixed interval, plus the accounting that turns
//! samples into energy, power and memory figures. What cannot be measured is said in the
//! notes; it is never reported as zero.

pub(crate) mod energy;
pub(crate) mod gpu;
pub(crate) mod procfs;
pub(crate) mod prom;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub(crate) use crate::record::{RequestRecord, RunClock, Source, TelemetrySample as Sample};
use crate::spec::TelemetryConfig as Config;
use energy::Integral;

/// What to watch during a run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Targets {
    pub engine_pid: Option<u32>,
    /// GPU indices the deployment uses; None = all.
    pub gpus: Option<Vec<u32>>,
    pub metrics_url: Option<String>,
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

impl Collector {
    pub fn start(cfg: &Config, clock: RunClock, targets: &Targets) -> Collector {
        let stop = Arc::new(AtomicBool::new(false));
        let notes = Arc::new(Mutex::new(Vec::new()));
        let note = |s: String| notes.lock().expect("notes lock").push(s);
        let mut threads = Vec::new();
        let (started, first_samples) = std::sync::mpsc::channel();
        let engine_pids = Arc::new(Mutex::new(Vec::<u32>::new()));

        match gpu::nvml().and_then(|n| gpu::devices(&n, targets.gpus.as_deref()).map(|d| (n, d))) {
            Ok((nvml, devs)) => {
                note(format!(
                    "GPUs sampled: {}",
                    devs.iter()
                        .map(|(i, n)| format!("gpu{i} ({n})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                let idx: Vec<u32> = devs.iter().map(|(i, _)| *i).collect();
                let (n2, idx2) = (nvml.clone(), idx.clone());
                threads.push(periodic(
                    "gpu-energy",
                    cfg.interval,
                    clock,
                    stop.clone(),
                    started.clone(),
                    move |t, out| {
                        out.samples.extend(gpu::energy_sample(&n2, &idx2, t));
                    },
                ));
                let pids = engine_pids.clone();
                let notes2 = notes.clone();
                let mut warned = false;
                threads.push(periodic("gpu", cfg.interval, clock, stop.clone(), started.clone(), move |t, out| {
                    let p = pids.lock().expect("pids lock").clone();
                    let (s, averaged) = gpu::fast_sample(&nvml, &idx, &p, t);
                    if averaged && !warned {
                        warned = true;
                        notes2.lock().expect("notes lock").push(
                            "GPU power from nvmlDeviceGetPowerUsage (a ~1 s moving average): the instant-power field is not supported".into(),
                        );
                    }
                    out.samples.extend(s);
                }));
            }
            Err(why) => note(why),
        }

        let rapl = procfs::rapl_domains();
        match &rapl {
            Ok(d) => note(format!(
                "CPU energy from RAPL: {}",
                d.iter()
                    .map(|x| x.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Err(why) => note(format!("no CPU energy: RAPL unavailable ({why})")),
        }
        let rapl = rapl.unwrap_or_default();
        let wraps = rapl
            .iter()
            .filter_map(|d| d.wrap_mj.map(|w| (d.name.clone(), w)))
            .collect();
        let mut tree = targets.engine_pid.map(procfs::ProcessTreeMeter::new);
        if tree.is_none() {
            note("engine CPU/RAM not sampled: the engine is not a local process".into());
        }
        let mut host = procfs::HostMeter::new();
        let mut me = procfs::ProcessTreeMeter::single(std::process::id());
        let pids = engine_pids.clone();
        threads.push(periodic(
            "procfs",
            cfg.interval,
            clock,
            stop.clone(),
            started.clone(),
            move |t, out| {
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
            },
        ));

        match &targets.metrics_url {
            Some(url) => {
                let url = url.clone();
                let notes2 = notes.clone();
                let mut first_error = None::<String>;
                let timeout = cfg
                    .interval
                    .max(Duration::from_millis(500))
                    .min(Duration::from_secs(2));
                threads.push(periodic(
                    "metrics",
                    cfg.interval,
                    clock,
                    stop.clone(),
                    started.clone(),
                    move |t, out| match scrape(&url, timeout) {
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
                ));
            }
            None => note("engine metrics not scraped: the engine has no metrics endpoint".into()),
        }
        // Return once every sampler has its first sample, so that a window starting now is
        // bracketed by samples (a slow first read, like NVML's energy counter, is waited for).
        for _ in 0..threads.len() {
            if first_samples.recv_timeout(Duration::from_secs(5)).is_err() {
                break;
            }
        }
        Collector {
            wraps,
            stop,
            threads,
            notes,
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

/// A plain HTTP/1.0 GET on loopback, blocking (samplers live in their own threads).
fn scrape(url: &str, timeout: Duration) -> Result<String, String> {
    use std::io::{Read, Write};
    let rest = url
        .strip_prefix("http://")
        .ok_or("only http:// metrics URLs are scraped")?;
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let addr = std::net::ToSocketAddrs::to_socket_addrs(host)
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("unresolvable host")?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: text/plain\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut body = String::new();
    s.read_to_string(&mut body)
        .map_err(|e| format!("read: {e}"))?;
    let (head, text) = body
        .split_once("\r\n\r\n")
        .ok_or("malformed HTTP response")?;
    let status = head.lines().next().unwrap_or("");
    if !status.contains(" 200") {
        return Err(format!("answered `{status}`"));
    }
    Ok(text.to_string())
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

/// Energy of one device (GPU or CPU package) over the run window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct DeviceEnergy {
    pub source: String,
    pub device: String,
    /// `counter` (energy counter deltas) or `power-integral` (trapezoids over power samples).
    pub method: String,
    pub energy_j: f64,
    pub coverage: f64,
    pub idle_w: Option<f64>,
    pub energy_above_idle_j: Option<f64>,
    pub mean_w: Option<f64>,
    pub peak_w: Option<f64>,
    /// When energy came from the counter: the same window integrated from power samples, as
    /// a cross-check of the two sources.
    pub power_integral_j: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct Summary {
    pub notes: Vec<String>,
    pub interval_s: f64,
    pub idle_window_s: f64,
    pub window_s: f64,
    pub devices: Vec<DeviceEnergy>,
    /// `gpu`, `cpu-rapl` or `none`: what `energy_j` and the per-unit figures count.
    pub energy_source: String,
    pub energy_j: Option<f64>,
    pub energy_above_idle_j: Option<f64>,
    pub energy_wh: Option<f64>,
    pub j_per_output_token: Option<f64>,
    pub j_per_request: Option<f64>,
    pub j_per_sentence: Option<f64>,
    pub output_tokens_per_j: Option<f64>,
    pub gpu_mem_mean_mb: Option<f64>,
    pub gpu_mem_peak_mb: Option<f64>,
    /// Mean GPU memory used (all sampled devices) − model size on disk.
    pub gpu_mem_overhead_mb: Option<f64>,
    pub gpu_util_mean_pct: Option<f64>,
    pub gpu_util_peak_pct: Option<f64>,
    pub engine_gpu_mem_peak_mb: Option<f64>,
    pub engine_cpu_mean_pct: Option<f64>,
    pub engine_cpu_peak_pct: Option<f64>,
    pub engine_rss_peak_mb: Option<f64>,
    pub host_cpu_mean_pct: Option<f64>,
    pub host_mem_peak_mb: Option<f64>,
    pub bench360_cpu_mean_pct: Option<f64>,
    /// bench360's own CPU averaged ≥ 90 % of the machine's cores during the window: the
    /// load generator, not the engine, may have limited the run.
    #[serde(default)]
    pub client_cpu_saturated: bool,
    pub running_peak: Option<f64>,
    pub waiting_peak: Option<f64>,
    pub kv_cache_peak_pct: Option<f64>,
    pub sampler_costs: Vec<SamplerCost>,
}

fn series(
    samples: &[Sample],
    source: Source,
    device: &str,
    f: impl Fn(&Sample) -> Option<f64>,
) -> (Vec<i64>, Vec<f64>) {
    samples
        .iter()
        .filter(|s| s.source == source && s.device == device)
        .filter_map(|s| f(s).map(|v| (s.t_ns, v)))
        .unzip()
}

fn mean_peak(
    samples: &[Sample],
    source: Source,
    device: &str,
    f: impl Fn(&Sample) -> Option<f64>,
    w: (i64, i64),
) -> Option<(f64, f64)> {
    let (t, v) = series(samples, source, device, f);
    energy::mean_peak(&t, &v, w.0, w.1)
}

/// Energy of each device over the window (counter when present, else power integral), with
/// idle power from the idle window.
fn device_energy(
    samples: &[Sample],
    source: Source,
    device: &str,
    wrap: Option<f64>,
    idle: Option<(i64, i64)>,
    w: (i64, i64),
    max_gap: i64,
) -> Option<DeviceEnergy> {
    let (ct, cv) = series(samples, source, device, |s| s.energy_mj);
    let (pt, pv) = series(samples, source, device, |s| s.power_w);
    let over = |a: i64, b: i64| -> Option<(Integral, &'static str)> {
        energy::counter_energy(&ct, &cv, wrap, a, b, max_gap)
            .map(|i| (i, "counter"))
            .or_else(|| {
                energy::power_integral(&pt, &pv, a, b, max_gap).map(|i| (i, "power-integral"))
            })
    };
    let (run, method) = over(w.0, w.1)?;
    let secs = (w.1 - w.0) as f64 / 1e9;
    let idle_w = idle.and_then(|(a, b)| over(a, b).map(|(i, _)| i.joules / ((b - a) as f64 / 1e9)));
    let (mean_w, peak_w) = match energy::mean_peak(&pt, &pv, w.0, w.1) {
        Some((m, p)) => (Some(m), Some(p)),
        None => (Some(run.joules / secs), None),
    };
    let power_integral_j = (method == "counter")
        .then(|| energy::power_integral(&pt, &pv, w.0, w.1, max_gap).map(|i| i.joules))
        .flatten();
    Some(DeviceEnergy {
        power_integral_j,
        source: source.as_str().into(),
        device: device.into(),
        method: method.into(),
        energy_j: run.joules,
        coverage: run.coverage,
        idle_w,
        energy_above_idle_j: idle_w.map(|p| run.joules - p * secs),
        mean_w,
        peak_w,
    })
}

/// Turns a run's samples into its telemetry summary. `idle` and `window` are [start, end] on
/// the run clock (ns); RAPL counter ranges come with the samples (`Collected::wraps`).
pub(crate) fn summarize(
    c: &Collected,
    cfg: &Config,
    idle: Option<(i64, i64)>,
    window: (i64, i64),
    requests: &[RequestRecord],
    model_bytes: Option<u64>,
) -> Summary {
    let s = &c.samples;
    let max_gap = (cfg.interval.as_nanos() as i64) * 3;
    let devices_of = |source: Source| -> Vec<String> {
        let mut d: Vec<String> = s
            .iter()
            .filter(|x| x.source == source)
            .map(|x| x.device.clone())
            .collect();
        d.sort();
        d.dedup();
        d
    };
    let gpus = devices_of(Source::Gpu);
    let packages = devices_of(Source::Rapl);
    let mut out = Summary {
        notes: c.notes.clone(),
        interval_s: cfg.interval.as_secs_f64(),
        idle_window_s: idle.map(|(a, b)| (b - a) as f64 / 1e9).unwrap_or(0.0),
        window_s: (window.1 - window.0) as f64 / 1e9,
        sampler_costs: c.costs.clone(),
        ..Default::default()
    };
    for g in &gpus {
        out.devices.extend(device_energy(
            s,
            Source::Gpu,
            g,
            None,
            idle,
            window,
            max_gap,
        ));
    }
    for p in &packages {
        let wrap = c.wraps.iter().find(|(d, _)| d == p).map(|(_, w)| *w);
        out.devices.extend(device_energy(
            s,
            Source::Rapl,
            p,
            wrap,
            idle,
            window,
            max_gap,
        ));
    }
    let total = |src: &str| -> Option<(f64, Option<f64>)> {
        let d: Vec<&DeviceEnergy> = out.devices.iter().filter(|d| d.source == src).collect();
        if d.is_empty() {
            return None;
        }
        let above = d.iter().map(|x| x.energy_above_idle_j).sum::<Option<f64>>();
        Some((d.iter().map(|x| x.energy_j).sum(), above))
    };
    let (source, e) = match (total("gpu"), total("rapl")) {
        (Some(g), _) => ("gpu", Some(g)),
        (None, Some(r)) => ("cpu-rapl", Some(r)),
        (None, None) => ("none", None),
    };
    out.energy_source = source.into();
    if let Some((joules, above)) = e {
        let ok: Vec<&RequestRecord> = requests.iter().filter(|r| r.ok()).collect();
        let tokens: u64 = ok
            .iter()
            .filter_map(|r| r.completion_tokens)
            .map(u64::from)
            .sum();
        let sentences: usize = ok.iter().map(|r| energy::sentences(&r.output)).sum();
        out.energy_j = Some(joules);
        out.energy_above_idle_j = above;
        out.energy_wh = Some(joules / 3600.0);
        out.j_per_output_token = (tokens > 0).then(|| joules / tokens as f64);
        out.output_tokens_per_j = (joules > 0.0).then(|| tokens as f64 / joules);
        out.j_per_request = (!ok.is_empty()).then(|| joules / ok.len() as f64);
        out.j_per_sentence = (sentences > 0).then(|| joules / sentences as f64);
    }
    // GPU memory and utilization: summed / averaged over the sampled devices per tick.
    if !gpus.is_empty() {
        let mut mem_mean = 0.0;
        let mut mem_peak = 0.0;
        let mut util: Vec<(f64, f64)> = Vec::new();
        let mut proc_peak: Option<f64> = None;
        for g in &gpus {
            if let Some((m, p)) = mean_peak(s, Source::Gpu, g, |x| x.mem_used_mb, window) {
                mem_mean += m;
                mem_peak += p;
            }
            util.extend(mean_peak(s, Source::Gpu, g, |x| x.util_pct, window));
            if let Some((_, p)) = mean_peak(s, Source::Gpu, g, |x| x.proc_mem_mb, window) {
                *proc_peak.get_or_insert(0.0) += p;
            }
        }
        out.gpu_mem_mean_mb = Some(mem_mean);
        out.gpu_mem_peak_mb = Some(mem_peak);
        out.gpu_mem_overhead_mb = model_bytes.map(|b| mem_mean - b as f64 / 1e6);
        if !util.is_empty() {
            out.gpu_util_mean_pct = Some(util.iter().map(|u| u.0).sum::<f64>() / util.len() as f64);
            out.gpu_util_peak_pct = util.iter().map(|u| u.1).reduce(f64::max);
        }
        out.engine_gpu_mem_peak_mb = proc_peak;
    }
    let mp =
        |src: Source, dev: &str, f: fn(&Sample) -> Option<f64>| mean_peak(s, src, dev, f, window);
    if let Some((m, p)) = mp(Source::Process, "engine", |x| x.cpu_pct) {
        out.engine_cpu_mean_pct = Some(m);
        out.engine_cpu_peak_pct = Some(p);
    }
    out.engine_rss_peak_mb = mp(Source::Process, "engine", |x| x.rss_mb).map(|x| x.1);
    out.host_cpu_mean_pct = mp(Source::Host, "host", |x| x.cpu_pct).map(|x| x.0);
    out.host_mem_peak_mb = mp(Source::Host, "host", |x| x.mem_used_mb).map(|x| x.1);
    out.bench360_cpu_mean_pct = mp(Source::Bench360, "bench360", |x| x.cpu_pct).map(|x| x.0);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1) as f64;
    out.client_cpu_saturated = out.bench360_cpu_mean_pct.is_some_and(|c| c >= 90.0 * cores);
    out.running_peak = mp(Source::Engine, "engine", |x| x.running).map(|x| x.1);
    out.waiting_peak = mp(Source::Engine, "engine", |x| x.waiting).map(|x| x.1);
    out.kv_cache_peak_pct = mp(Source::Engine, "engine", |x| x.kv_cache_pct).map(|x| x.1);
    out
}

#[cfg(test)]
mod tests {
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
        };
        let targets = Targets {
            engine_pid: Some(child.id()),
            gpus: None,
            metrics_url: None,
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
