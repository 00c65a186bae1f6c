//! Engines: the catalog (data) and launchers behind one trait. `process` starts a local
//! command on a free loopback port; `endpoint` uses a server that is already running. The
//! Docker launcher implements the same trait.

pub(crate) mod caches;
pub(crate) mod docker;
pub(crate) mod group;

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::record::Phases;
use crate::spec::{Engine, Launch};

/// Why an engine could not be started or reached.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum EngineError {
    /// The engine's process or container ended before it was healthy.
    #[error("{cause}; last log lines:\n{tail}")]
    Exited { cause: String, tail: String },
    /// It did not answer its health check in time.
    #[error("engine not healthy at {health} after {after_s:.0} s; last log lines:\n{tail}")]
    Unhealthy {
        health: String,
        after_s: f64,
        tail: String,
    },
    /// Everything before the engine runs: ports, log files, mounts, the Docker daemon, pulls.
    #[error("{0}")]
    Setup(String),
}

impl EngineError {
    /// The engine's last log lines, when the failure has them.
    pub fn log_tail(&self) -> Option<&str> {
        match self {
            EngineError::Exited { tail, .. } | EngineError::Unhealthy { tail, .. } => Some(tail),
            EngineError::Setup(_) => None,
        }
    }
}

impl From<crate::host::gpus::TooFewGpus> for EngineError {
    fn from(e: crate::host::gpus::TooFewGpus) -> EngineError {
        EngineError::Setup(e.to_string())
    }
}

impl From<String> for EngineError {
    fn from(s: String) -> Self {
        EngineError::Setup(s)
    }
}

impl From<&str> for EngineError {
    fn from(s: &str) -> Self {
        EngineError::Setup(s.to_string())
    }
}

/// Everything a launcher needs to start one deployment.
#[derive(Debug, Clone)]
pub(crate) struct LaunchSpec {
    pub engine: Engine,
    pub model_name: String,
    pub model_path: Option<String>,
    pub model_id: Option<String>,
    pub quantization: String,
}

pub(crate) trait RunningEngine: Send {
    fn base_url(&self) -> &str;
    fn api_key(&self) -> Option<String>;
    /// Name to send in the `model` field of requests.
    fn served_model(&self) -> &str;
    fn phases(&self) -> Phases;
    /// The engine's process, when it runs on this machine under bench360.
    fn pid(&self) -> Option<u32>;
    /// Some(cause) when the engine has died on its own.
    fn exited(&mut self) -> Option<String>;
    /// Stops the engine (SIGTERM, then SIGKILL after a grace period); says how it ended.
    fn stop(self) -> impl Future<Output = String> + Send;
}

pub(crate) trait Launcher {
    type Running: RunningEngine;
    /// Starts the engine and waits until it is healthy (or fails with a cause).
    fn launch(
        &self,
        spec: &LaunchSpec,
        log: &Path,
    ) -> impl Future<Output = Result<Self::Running, EngineError>> + Send;
}

/// Where the engine listens and sees its weights: the host for a process, the container's
/// view for a container.
pub(crate) struct Placement {
    pub host: String,
    pub port: u16,
    pub model_path: Option<String>,
}

fn fill(template: &str, spec: &LaunchSpec, at: &Placement) -> String {
    let e = &spec.engine;
    template
        .replace("{model.path}", at.model_path.as_deref().unwrap_or(""))
        .replace("{model.id}", spec.model_id.as_deref().unwrap_or(""))
        .replace(
            "{model.source}",
            at.model_path
                .as_deref()
                .or(spec.model_id.as_deref())
                .unwrap_or(""),
        )
        .replace("{model.name}", &spec.model_name)
        .replace("{quantization}", &spec.quantization)
        .replace("{host}", &at.host)
        .replace("{port}", &at.port.to_string())
        .replace("{parallel}", &e.parallel.to_string())
        .replace("{ctx.slot}", &e.ctx_size.to_string())
        .replace(
            "{ctx.total}",
            &(e.ctx_size as u64 * e.parallel as u64).to_string(),
        )
        .replace("{gpu-memory}", &e.gpu_memory.to_string())
        .replace("{tp}", &e.tensor_parallel.to_string())
        .replace("{dtype}", &e.dtype)
}

/// The full argument list of a process engine: the catalog's arguments, the quantization's
/// (when not `default`), then the sweep's.
pub(crate) fn process_args(spec: &LaunchSpec, port: u16) -> Vec<String> {
    let entry = spec.engine.catalog;
    let at = Placement {
        host: "127.0.0.1".into(),
        port,
        model_path: spec.model_path.clone(),
    };
    let quant: &[&str] = if spec.quantization == "default" {
        &[]
    } else {
        entry.quantization_args
    };
    let tp: &[&str] = if spec.engine.tensor_parallel > 1 {
        entry.tensor_parallel_args
    } else {
        &[]
    };
    entry
        .process_args()
        .iter()
        .chain(quant)
        .chain(tp)
        .map(|a| a.to_string())
        .chain(spec.engine.args.iter().cloned())
        .map(|a| fill(&a, spec, &at))
        .collect()
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The last `lines` lines of a log file, for failure causes; before them, the error lines from
/// earlier in the log that the tail lacks (at most [`EARLIER_ERRORS`]). A Python engine whose
/// worker process failed ends its log with the server's own traceback ("See root cause
/// above"): the root cause — vLLM's "No available memory for the cache blocks", a CUDA
/// out-of-memory — is pages above it, and a cause without it would not say why.
pub(crate) fn tail_of(path: &Path, lines: usize) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    if all.is_empty() {
        return format!("(nothing in {})", path.display());
    }
    let cut = all.len().saturating_sub(lines);
    let tail = &all[cut..];
    let earlier = error_lines(&all[..cut], tail);
    if earlier.is_empty() {
        return tail.join("\n");
    }
    format!(
        "{}\n…\n{}",
        earlier
            .iter()
            .map(|l| shorten(l, 400))
            .collect::<Vec<_>>()
            .join("\n"),
        tail.join("\n")
    )
}

/// How many error lines from before a log's tail a failure cause keeps (the first ones: the
/// root cause comes before what it set off).
const EARLIER_ERRORS: usize = 4;

/// An exception's message line (`ValueError: …`, `torch.OutOfMemoryError: …`, after any
/// logger prefix) or any line reporting memory exhaustion (llama.cpp's `cudaMalloc failed: out
/// of memory`).
static ERROR_LINE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?:^|[\s:\]])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S.*)$|((?i:out of memory|no available memory).*)",
    )
    .expect("valid regex")
});

/// A log line's error message, from its exception's name on (or the memory-exhaustion
/// report), when [`ERROR_LINE`] finds one.
fn error_message(l: &str) -> Option<String> {
    ERROR_LINE
        .captures(l)
        .and_then(|c| c.get(1).or_else(|| c.get(2)))
        .map(|m| l[m.start()..].trim().to_string())
}

/// The distinct error lines of `earlier` (compared from the exception's name on, so the same
/// message printed by two processes counts once) that `tail` does not already show.
fn error_lines<'a>(earlier: &[&'a str], tail: &[&str]) -> Vec<&'a str> {
    let mut seen: std::collections::HashSet<String> =
        tail.iter().filter_map(|l| error_message(l)).collect();
    let mut out = Vec::new();
    for &l in earlier {
        if let Some(m) = error_message(l) {
            if seen.insert(m) {
                out.push(l.trim_end());
                if out.len() == EARLIER_ERRORS {
                    break;
                }
            }
        }
    }
    out
}

/// `s` cut to at most `max` characters, with an ellipsis when cut.
fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// One line for a failure cause, as tables and the answer show it: the cause's first line
/// and, when that line does not itself carry the error and a later line does (an engine's log
/// lines under "last log lines:"), that error's message from its exception's name on
/// (`ValueError: No available memory for the cache blocks.`): its first sentence, or its
/// first 200 characters.
/// The whole cause stays in the record and the HTML report's failure list.
pub(crate) fn failure_headline(cause: &str) -> String {
    let mut lines = cause.lines();
    let first = lines.next().unwrap_or("").trim_end();
    if error_message(first).is_some() {
        return first.to_string();
    }
    match lines.find_map(error_message) {
        Some(m) => {
            let head = first.strip_suffix("; last log lines:").unwrap_or(first);
            // Its first sentence when that is short enough (the rest is advice), else its
            // first 200 characters.
            let m = match m.find(". ") {
                Some(i) if i < 200 => m[..=i].to_string(),
                _ => shorten(&m, 200),
            };
            format!("{} — {m}", head.trim_end_matches(':'))
        }
        None => first.to_string(),
    }
}

/// Why an engine being started did not become healthy.
pub(crate) enum NotHealthy {
    /// It exited first: the launcher's account of how.
    Exited(String),
    /// The startup timeout passed.
    TimedOut,
    /// The health check itself could not be set up.
    Setup(String),
}

/// Polls a starting engine's health endpoint every `every` until it answers 200, `exited`
/// reports that the engine is gone (checked first, each round), or `deadline` passes. The
/// launchers' one startup loop; each cleans up after a failure in its own way.
pub(crate) async fn poll_health(
    health: &str,
    deadline: Instant,
    every: Duration,
    mut exited: impl FnMut() -> Option<String>,
) -> Result<(), NotHealthy> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| NotHealthy::Setup(e.to_string()))?;
    loop {
        if let Some(cause) = exited() {
            return Err(NotHealthy::Exited(cause));
        }
        if healthy(&http, health, None).await {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(NotHealthy::TimedOut);
        }
        tokio::time::sleep(every).await;
    }
}

async fn healthy(http: &reqwest::Client, url: &str, key: Option<&str>) -> bool {
    let mut rb = http.get(url).timeout(Duration::from_secs(2));
    if let Some(k) = key {
        rb = rb.bearer_auth(k);
    }
    matches!(rb.send().await, Ok(r) if r.status().is_success())
}

pub(crate) struct ProcessLauncher;

pub(crate) struct ProcessEngine {
    child: tokio::process::Child,
    /// Kills the engine's process group if it is dropped unstopped.
    group: group::Guard,
    base_url: String,
    served_model: String,
    phases: Phases,
    exit: Option<String>,
}

/// A CPU set of the given CPUs, or why it cannot be one (a CPU past what the set holds).
fn cpu_set(cpus: &[u32]) -> Result<libc::cpu_set_t, EngineError> {
    // SAFETY: cpu_set_t is plain bits; all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c as usize >= libc::CPU_SETSIZE as usize {
            return Err(format!(
                "cpu {c} is past the {} CPUs a CPU set holds",
                libc::CPU_SETSIZE
            )
            .into());
        }
        // SAFETY: `c` is within the set's size (checked above).
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    Ok(set)
}

impl Launcher for ProcessLauncher {
    type Running = ProcessEngine;

    async fn launch(&self, spec: &LaunchSpec, log: &Path) -> Result<ProcessEngine, EngineError> {
        let Launch::Process { binary } = &spec.engine.launch else {
            return Err("not a process engine".into());
        };
        let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
        let args = process_args(spec, port);
        let log_file = std::fs::File::create(log)
            .map_err(|e| format!("cannot create engine log {}: {e}", log.display()))?;
        let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = tokio::process::Command::new(binary);
        if let Some(list) =
            crate::host::gpus::Allocation::from_env().for_process(spec.engine.gpus.as_deref())?
        {
            cmd.env("CUDA_VISIBLE_DEVICES", list);
        }
        cmd.args(&args)
            .envs(spec.engine.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .kill_on_drop(true);
        // `cpus`: the engine and what it starts run on those CPUs alone (its affinity is
        // inherited), made before the fork so that the child only applies it.
        let affinity = spec.engine.cpus.as_deref().map(cpu_set).transpose()?;
        // Own process group (so stop reaches the engine's children too), and die with us:
        // a `kill -9` of bench360 must not leave an engine holding the GPU or port.
        unsafe {
            cmd.pre_exec(move || {
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if let Some(set) = &affinity {
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let t0 = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("failed to start `{binary}`: {e}"))?;
        // A start that fails or is abandoned below takes the engine's workers with it.
        let mut guard = group::Guard {
            pgid: child.id().map_or(0, |p| p as i32),
            armed: child.id().is_some(),
        };
        let start_s = t0.elapsed().as_secs_f64();
        let base_url = format!("http://127.0.0.1:{port}");
        let entry = spec.engine.catalog;
        let health = format!("{base_url}{}", entry.health_path);
        let deadline = t0 + Duration::from_secs_f64(spec.engine.startup_timeout_s);
        let exited = || {
            child
                .try_wait()
                .ok()
                .flatten()
                .map(|status| format!("engine exited during startup ({status})"))
        };
        match poll_health(&health, deadline, Duration::from_millis(50), exited).await {
            Ok(()) => {}
            Err(NotHealthy::Exited(cause)) => {
                // A worker its leader left behind goes too, before the next start.
                group::reap(guard.pgid, Duration::from_secs(2)).await;
                guard.armed = false;
                return Err(EngineError::Exited {
                    cause,
                    tail: tail_of(log, 15),
                });
            }
            Err(NotHealthy::TimedOut) => {
                let _ = child.start_kill();
                group::reap(guard.pgid, Duration::ZERO).await;
                guard.armed = false;
                return Err(EngineError::Unhealthy {
                    health,
                    after_s: spec.engine.startup_timeout_s,
                    tail: tail_of(log, 15),
                });
            }
            Err(NotHealthy::Setup(e)) => {
                group::reap(guard.pgid, Duration::ZERO).await;
                guard.armed = false;
                return Err(e.into());
            }
        }
        Ok(ProcessEngine {
            child,
            group: guard,
            base_url,
            served_model: spec.model_name.clone(),
            phases: Phases {
                start_s,
                healthy_s: t0.elapsed().as_secs_f64(),
            },
            exit: None,
        })
    }
}

impl RunningEngine for ProcessEngine {
    fn base_url(&self) -> &str {
        &self.base_url
    }
    fn api_key(&self) -> Option<String> {
        None
    }
    fn served_model(&self) -> &str {
        &self.served_model
    }
    fn phases(&self) -> Phases {
        self.phases
    }
    fn pid(&self) -> Option<u32> {
        self.child.id()
    }
    fn exited(&mut self) -> Option<String> {
        if self.exit.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some(format!("engine exited unexpectedly ({status})"));
            }
        }
        self.exit.clone()
    }

    async fn stop(mut self) -> String {
        if let Some(e) = self.exited() {
            // The leader is gone: a worker it left behind is killed and waited for.
            group::reap(self.group.pgid, Duration::from_secs(2)).await;
            self.group.armed = false;
            return e;
        }
        let Some(pid) = self.child.id() else {
            group::reap(self.group.pgid, Duration::from_secs(2)).await;
            self.group.armed = false;
            return "already stopped".into();
        };
        unsafe {
            libc::kill(-(pid as i32), libc::SIGTERM);
        }
        let how = match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(Ok(status)) => format!("stopped with SIGTERM ({status})"),
            _ => {
                unsafe {
                    libc::kill(-(pid as i32), libc::SIGKILL);
                }
                let _ = self.child.wait().await;
                "did not stop within 15 s of SIGTERM; killed".into()
            }
        };
        // Its workers, which may hold the GPU a moment after the leader: gone before the next
        // engine starts or the devices are let go.
        let killed = group::reap(pid as i32, Duration::from_secs(15)).await;
        self.group.armed = false;
        if killed {
            format!("{how}; its other processes were killed 15 s later")
        } else {
            how
        }
    }
}

pub(crate) struct EndpointLauncher;

pub(crate) struct EndpointEngine {
    base_url: String,
    api_key: Option<String>,
    served_model: String,
    phases: Phases,
}

impl Launcher for EndpointLauncher {
    type Running = EndpointEngine;

    async fn launch(&self, spec: &LaunchSpec, log: &Path) -> Result<EndpointEngine, EngineError> {
        let Launch::Endpoint {
            url,
            served_model,
            api_key_env,
        } = &spec.engine.launch
        else {
            return Err("not an endpoint engine".into());
        };
        let api_key =
            match api_key_env {
                Some(var) => Some(std::env::var(var).map_err(|_| {
                    format!("environment variable `{var}` (api-key-env) is not set")
                })?),
                None => None,
            };
        let t0 = Instant::now();
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| e.to_string())?;
        let health = format!("{url}/v1/models");
        let deadline = t0 + Duration::from_secs_f64(spec.engine.startup_timeout_s.min(60.0));
        while !healthy(&http, &health, api_key.as_deref()).await {
            if Instant::now() > deadline {
                return Err(format!("endpoint {health} did not answer 200").into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let _ = std::fs::write(log, format!("endpoint {url}: healthy\n"));
        Ok(EndpointEngine {
            base_url: url.clone(),
            api_key,
            served_model: served_model
                .clone()
                .or_else(|| spec.model_id.clone())
                .unwrap_or_else(|| spec.model_name.clone()),
            phases: Phases {
                start_s: 0.0,
                healthy_s: t0.elapsed().as_secs_f64(),
            },
        })
    }
}

impl RunningEngine for EndpointEngine {
    fn base_url(&self) -> &str {
        &self.base_url
    }
    fn api_key(&self) -> Option<String> {
        self.api_key.clone()
    }
    fn served_model(&self) -> &str {
        &self.served_model
    }
    fn phases(&self) -> Phases {
        self.phases
    }
    fn pid(&self) -> Option<u32> {
        None
    }
    fn exited(&mut self) -> Option<String> {
        None
    }
    async fn stop(self) -> String {
        "endpoint left running (not started by bench360)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{catalog, Api, Spanned};

    #[test]
    fn a_failure_headline_names_the_error_under_the_log_lines() {
        let cause = "engine failed to start: engine exited during startup (exit status: 1); \
            last log lines:\n    │ (EngineCore pid=7825) ERROR 12-02 17:08:05 [core.py:1330] \
            ValueError: No available memory for the cache blocks. Try increasing \
            `gpu_memory_utilization` when initializing the engine (this flag also controls CPU \
            memory reservation on the CPU backend, despite its name).\n…\n    │ RuntimeError: \
            Engine core initialization failed.";
        assert_eq!(
            failure_headline(cause),
            "engine failed to start: engine exited during startup (exit status: 1) — ValueError: \
             No available memory for the cache blocks."
        );
        let long = format!(
            "exited; last log lines:\nERROR ValueError: {}",
            "x".repeat(300)
        );
        assert_eq!(
            failure_headline(&long),
            format!("exited — ValueError: {}…", "x".repeat(188))
        );
        // A first line that carries its error, or a cause without one, is shown as it is.
        assert_eq!(
            failure_headline("RuntimeError: boom\nmore"),
            "RuntimeError: boom"
        );
        assert_eq!(failure_headline("no results\n  │ INFO ready"), "no results");
        assert_eq!(failure_headline(""), "");
    }

    #[test]
    fn a_failure_cause_keeps_the_root_cause_from_above_the_tail() {
        // The shape of a Python engine whose worker failed: the worker's traceback and its
        // message, then the server's own traceback, which only points back at it.
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("engine.log");
        let mut text = String::from("(EngineCore pid=7) INFO loading weights took 3.41 GiB\n");
        for _ in 0..2 {
            text.push_str(
                "(EngineCore pid=7) ERROR [core.py:1] Traceback (most recent call last):\n",
            );
            text.push_str("(EngineCore pid=7) ERROR [core.py:1]     raise ValueError(\n");
            text.push_str("(EngineCore pid=7) ERROR [core.py:1] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.\n");
        }
        text.push_str("(EngineCore pid=7) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n");
        for i in 0..20 {
            text.push_str(&format!(
                "(APIServer pid=1)   File \"api_server.py\", line {i}, in main\n"
            ));
        }
        text.push_str("(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above.\n");
        std::fs::write(&log, text).unwrap();

        let cause = tail_of(&log, 5);
        let lines: Vec<&str> = cause.lines().collect();
        // The two distinct messages from above, once each, in order; then the tail.
        assert!(lines[0].ends_with("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."), "{cause}");
        assert!(
            lines[1].ends_with(
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"
            ),
            "{cause}"
        );
        assert_eq!(lines[2], "…");
        assert_eq!(lines.len(), 3 + 5, "{cause}");
        assert!(lines[7].ends_with("See root cause above."));
        // The source line that raised it is not a message.
        assert!(!cause.contains("raise ValueError("));

        // A log whose tail already says why keeps only the tail.
        std::fs::write(
            &log,
            "starting\nllama_init: cudaMalloc failed: out of memory\nexiting\n",
        )
        .unwrap();
        assert_eq!(
            tail_of(&log, 2),
            "llama_init: cudaMalloc failed: out of memory\nexiting"
        );
        assert_eq!(
            tail_of(&log, 1),
            "llama_init: cudaMalloc failed: out of memory\n…\nexiting"
        );
        assert!(tail_of(&dir.path().join("none.log"), 3).starts_with("(nothing in "));
    }

    #[test]
    fn llama_cpp_context_is_per_slot_times_slots() {
        let spec = LaunchSpec {
            engine: Engine {
                name: Spanned::new("e".into(), (0..0).into()),
                base: Spanned::new("e".into(), (0..0).into()),
                settings: Vec::new(),
                kind: Spanned::new("llama.cpp".into(), (0..0).into()),
                catalog: catalog::lookup("llama.cpp").unwrap(),
                launch: Launch::Process {
                    binary: "llama-server".into(),
                },
                parallel: 4,
                ctx_size: 1024,
                args: vec!["--threads".into(), "2".into()],
                env: vec![],
                startup_timeout_s: 10.0,
                api: Api::Chat,
                gpus: None,
                gpu_memory: 0.9,
                tensor_parallel: 1,
                dtype: "auto".into(),
                cpus: None,
                variant: None,
            },
            model_name: "m".into(),
            model_path: Some("/m.gguf".into()),
            model_id: None,
            quantization: "q4_1".into(),
        };
        let args = process_args(&spec, 9000).join(" ");
        assert_eq!(
            args,
            "--model /m.gguf --host 127.0.0.1 --port 9000 --parallel 4 --ctx-size 4096 --metrics --threads 2"
        );
    }
}
