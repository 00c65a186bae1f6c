//! The `docker` launcher: the engine's official image through the Docker Engine API
//! (bollard). The engine port is published on 127.0.0.1 only, GPUs are passed as device
//! requests, weights are bind-mounted read-only, secrets are passed by name from the
//! environment, and every container carries `bench360.*` labels so that orphans of a killed
//! apply are found and removed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::models::{ContainerCreateBody, DeviceRequest, HostConfig, PortBinding};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    LogsOptionsBuilder, RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::{
    fill, tail_of, EngineError, LaunchSpec, Launcher, NotHealthy, Phases, Placement, RunningEngine,
};
use crate::spec::Launch;

pub(crate) const LABEL_KEY: &str = "bench360.key";
pub(crate) const LABEL_SWEEP: &str = "bench360.sweep";
pub(crate) const LABEL_PID: &str = "bench360.pid";
pub(crate) const LABEL_HOST: &str = "bench360.host";

/// Connects to the local Docker engine and agrees on an API version.
pub(crate) async fn connect() -> Result<Docker, EngineError> {
    let d = Docker::connect_with_local_defaults()
        .map_err(|e| format!("Docker engine not reachable: {e}"))?;
    let d = d
        .negotiate_version()
        .await
        .map_err(|e| format!("Docker engine not reachable: {e}"))?;
    d.ping()
        .await
        .map_err(|e| format!("Docker engine not reachable: {e}"))?;
    Ok(d)
}

/// `image:tag`, or the image as given when it is pinned by digest.
pub(crate) fn reference(image: &str, tag: &str) -> String {
    if image.contains('@') {
        image.to_string()
    } else {
        format!("{image}:{tag}")
    }
}

/// What a local image is: its content-addressed id, repository digests and labels.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ImageFacts {
    pub id: String,
    pub repo_digests: Vec<String>,
    /// The engine version the image states (OCI `org.opencontainers.image.version` label).
    pub version: Option<String>,
}

pub(crate) async fn inspect_local(
    d: &Docker,
    reference: &str,
) -> Result<Option<ImageFacts>, EngineError> {
    match d.inspect_image(reference).await {
        Ok(i) => Ok(Some(ImageFacts {
            id: i.id.unwrap_or_default(),
            repo_digests: i.repo_digests.unwrap_or_default(),
            version: i
                .config
                .and_then(|c| c.labels)
                .and_then(|l| l.get("org.opencontainers.image.version").cloned()),
        })),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(EngineError::Setup(format!(
            "cannot inspect image {reference}: {e}"
        ))),
    }
}

/// Pulls an image, with a progress bar per layer; says how it went.
pub(crate) async fn pull(
    d: &Docker,
    reference: &str,
    mp: &indicatif::MultiProgress,
) -> Result<(), EngineError> {
    let (image, tag) = match reference.rsplit_once(':') {
        Some((i, t)) if !t.contains('/') => (i, t),
        _ => (reference, "latest"),
    };
    let opts = CreateImageOptionsBuilder::default()
        .from_image(image)
        .tag(tag)
        .build();
    let mut stream = d.create_image(Some(opts), None, None);
    let mut bars: HashMap<String, indicatif::ProgressBar> = HashMap::new();
    let style = indicatif::ProgressStyle::with_template(
        "  {prefix} {msg:12} [{bar:25}] {bytes}/{total_bytes}",
    )
    .expect("valid template")
    .progress_chars("=> ");
    let mut result = Ok(());
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(err) = info.error_detail.and_then(|e| e.message) {
                    result = Err(format!("pull of {reference} failed: {err}"));
                    break;
                }
                let (Some(id), Some(status)) = (info.id, info.status) else {
                    continue;
                };
                let bar = bars.entry(id.clone()).or_insert_with(|| {
                    let b = mp.add(indicatif::ProgressBar::new(0));
                    b.set_style(style.clone());
                    b.set_prefix(id.clone());
                    b
                });
                bar.set_message(status);
                if let Some(p) = info.progress_detail {
                    if let (Some(c), Some(t)) = (p.current, p.total) {
                        bar.set_length(t.max(0) as u64);
                        bar.set_position(c.max(0) as u64);
                    }
                }
            }
            Err(e) => {
                result = Err(format!("pull of {reference} failed: {e}"));
                break;
            }
        }
    }
    for b in bars.values() {
        b.finish_and_clear();
    }
    result.map_err(EngineError::Setup)
}

/// Removes containers labelled by bench360 on this host whose apply is no longer running.
pub(crate) async fn remove_orphans(d: &Docker) -> Result<Vec<String>, EngineError> {
    let filters: HashMap<&str, Vec<&str>> = HashMap::from([("label", vec![LABEL_KEY])]);
    let opts = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let list = d
        .list_containers(Some(opts))
        .await
        .map_err(|e| format!("cannot list containers: {e}"))?;
    let host = crate::host::hostname();
    let mut removed = Vec::new();
    for c in list {
        let labels = c.labels.unwrap_or_default();
        // Containers of other hosts belong to their appliers; here, a container is owned
        // while the apply that labelled it runs (and is not this one, which starts clean).
        let owned = labels
            .get(LABEL_PID)
            .and_then(|p| p.parse::<u32>().ok())
            .is_some_and(|p| crate::host::pid_alive(p) && p != std::process::id());
        if labels.get(LABEL_HOST) == Some(&host) && !owned {
            let name = c.names.and_then(|n| n.first().cloned()).unwrap_or_default();
            let id = c.id.unwrap_or_default();
            let opts = RemoveContainerOptionsBuilder::default().force(true).build();
            if d.remove_container(&id, Some(opts)).await.is_ok() {
                removed.push(name.trim_start_matches('/').to_string());
            }
        }
    }
    Ok(removed)
}

/// Container name for a deployment: deterministic, so a leftover is recognisable.
pub(crate) fn container_name(deployment_key: &str) -> String {
    format!(
        "bench360-{}",
        &deployment_key[..deployment_key.len().min(16)]
    )
}

/// Where weights are mounted in the container.
pub(crate) fn container_model_path(host_path: &str) -> String {
    let name = Path::new(host_path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    format!("/models/{name}")
}

/// What a container runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContainerCommand {
    /// Replaces the image's entrypoint when set.
    pub entrypoint: Option<Vec<String>>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The engine's port inside the container.
    pub port: u16,
}

/// The container's command and environment for a deployment (pure; unit-tested).
pub(crate) fn container_command(spec: &LaunchSpec) -> Result<ContainerCommand, EngineError> {
    let entry = spec.engine.catalog;
    let recipe = entry
        .docker
        .as_ref()
        .ok_or_else(|| format!("engine kind `{}` has no container recipe", entry.name))?;
    let placement = Placement {
        host: "0.0.0.0".into(),
        port: recipe.port,
        model_path: spec.model_path.as_deref().map(container_model_path),
    };
    let mut args: Vec<String> = entry
        .server_args
        .iter()
        .map(|a| fill(a, spec, &placement))
        .collect();
    if spec.quantization != "default" {
        args.extend(
            entry
                .quantization_args
                .iter()
                .map(|a| fill(a, spec, &placement)),
        );
    }
    if spec.engine.tensor_parallel > 1 {
        args.extend(
            entry
                .tensor_parallel_args
                .iter()
                .map(|a| fill(a, spec, &placement)),
        );
    }
    args.extend(spec.engine.args.iter().map(|a| fill(a, spec, &placement)));
    let env = recipe
        .env
        .iter()
        .map(|(k, v)| (k.to_string(), fill(v, spec, &placement)))
        .collect();
    let entrypoint = recipe
        .entrypoint
        .map(|e| e.iter().map(|s| s.to_string()).collect());
    Ok(ContainerCommand {
        entrypoint,
        args,
        env,
        port: recipe.port,
    })
}

pub(crate) struct DockerLauncher {
    pub docker: Docker,
    pub deployment_key: String,
    pub sweep: String,
}

pub(crate) struct DockerEngine {
    docker: Docker,
    name: String,
    base_url: String,
    served_model: String,
    phases: Phases,
    pid: Option<u32>,
    exit: Arc<Mutex<Option<String>>>,
    log_task: tokio::task::JoinHandle<()>,
}

async fn exit_cause(d: &Docker, name: &str) -> String {
    match d.inspect_container(name, None).await {
        Ok(i) => {
            let s = i.state.unwrap_or_default();
            format!(
                "container exited (exit code {}{}{})",
                s.exit_code.map_or("unknown".into(), |c| c.to_string()),
                if s.oom_killed == Some(true) {
                    ", OOM-killed"
                } else {
                    ""
                },
                s.error
                    .filter(|e| !e.is_empty())
                    .map(|e| format!(", {e}"))
                    .unwrap_or_default()
            )
        }
        Err(e) => format!("container gone ({e})"),
    }
}

impl Launcher for DockerLauncher {
    type Running = DockerEngine;

    async fn launch(&self, spec: &LaunchSpec, log: &Path) -> Result<DockerEngine, EngineError> {
        let Launch::Docker {
            image,
            tag,
            env_pass,
            shm_size,
            hf_cache,
            ..
        } = &spec.engine.launch
        else {
            return Err("not a docker engine".into());
        };
        let d = &self.docker;
        let reference = reference(image, tag);
        let ContainerCommand {
            entrypoint,
            args: cmd,
            env: recipe_env,
            port,
        } = container_command(spec)?;
        let name = container_name(&self.deployment_key);
        // A container of this name is a leftover of this deployment: replace it.
        let _ = d
            .remove_container(
                &name,
                Some(RemoveContainerOptionsBuilder::default().force(true).build()),
            )
            .await;
        let host_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let (env, binds) = env_and_binds(spec, recipe_env, env_pass, hf_cache.as_deref())?;
        let entry = spec.engine.catalog;
        let recipe = entry.docker.as_ref().expect("checked by container_command");
        let device_ids =
            crate::host::gpus::Allocation::from_env().for_docker(spec.engine.gpus.as_deref())?;
        let device_requests = device_ids.map(|ids| {
            vec![DeviceRequest {
                driver: Some("nvidia".into()),
                device_ids: Some(ids),
                capabilities: Some(vec![vec!["gpu".into()]]),
                ..Default::default()
            }]
        });
        let container_port = format!("{port}/tcp");
        let labels = HashMap::from([
            (LABEL_KEY.to_string(), self.deployment_key.clone()),
            (LABEL_SWEEP.to_string(), self.sweep.clone()),
            (LABEL_PID.to_string(), std::process::id().to_string()),
            (LABEL_HOST.to_string(), crate::host::hostname()),
        ]);
        let body = ContainerCreateBody {
            image: Some(reference.clone()),
            entrypoint,
            cmd: Some(cmd),
            env: Some(env),
            labels: Some(labels),
            exposed_ports: Some(vec![container_port.clone()]),
            host_config: Some(HostConfig {
                port_bindings: Some(HashMap::from([(
                    container_port,
                    Some(vec![PortBinding {
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some(host_port.to_string()),
                    }]),
                )])),
                binds: Some(binds),
                device_requests,
                shm_size: *shm_size,
                ipc_mode: recipe.ipc_host.then(|| "host".to_string()),
                cpuset_cpus: spec
                    .engine
                    .cpus
                    .as_ref()
                    .map(|c| c.iter().map(u32::to_string).collect::<Vec<_>>().join(",")),
                ..Default::default()
            }),
            ..Default::default()
        };
        let t0 = Instant::now();
        d.create_container(
            Some(CreateContainerOptionsBuilder::default().name(&name).build()),
            body,
        )
        .await
        .map_err(|e| format!("cannot create container from {reference}: {e}"))?;
        d.start_container(&name, None)
            .await
            .map_err(|e| format!("cannot start container {name}: {e}"))?;
        let start_s = t0.elapsed().as_secs_f64();
        let pid = d
            .inspect_container(&name, None)
            .await
            .ok()
            .and_then(|i| i.state)
            .and_then(|s| s.pid)
            .filter(|p| *p > 0)
            .map(|p| p as u32);

        let (exit, log_task) = stream_logs(d, &name, log).await?;
        let engine = DockerEngine {
            docker: d.clone(),
            name: name.clone(),
            base_url: format!("http://127.0.0.1:{host_port}"),
            served_model: spec
                .model_id
                .clone()
                .unwrap_or_else(|| spec.model_name.clone()),
            phases: Phases {
                start_s,
                healthy_s: 0.0,
            },
            pid,
            exit,
            log_task,
        };
        let health = format!("{}{}", engine.base_url, entry.health_path);
        let mut engine = wait_healthy(engine, spec, &health, log, t0).await?;
        engine.phases.healthy_s = t0.elapsed().as_secs_f64();
        Ok(engine)
    }
}

/// The container's environment (the recipe's, the sweep's, the variables passed by name) and
/// its mounts (the weights read-only, a Hugging Face cache).
fn env_and_binds(
    spec: &LaunchSpec,
    recipe_env: Vec<(String, String)>,
    env_pass: &[String],
    hf_cache: Option<&str>,
) -> Result<(Vec<String>, Vec<String>), EngineError> {
    let mut env: Vec<String> = recipe_env
        .into_iter()
        .chain(spec.engine.env.iter().cloned())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for var in env_pass {
        // Passed by name: the value goes to the container only, never to records or logs.
        if let Ok(v) = std::env::var(var) {
            env.push(format!("{var}={v}"));
        }
    }
    let mut binds = Vec::new();
    if let Some(p) = &spec.model_path {
        let abs = std::fs::canonicalize(p).map_err(|e| format!("cannot mount weights {p}: {e}"))?;
        binds.push(format!("{}:{}:ro", abs.display(), container_model_path(p)));
    }
    if let Some(h) = hf_cache {
        std::fs::create_dir_all(h)
            .map_err(|e| format!("cannot create the Hugging Face cache {h}: {e}"))?;
        binds.push(format!("{h}:/root/.cache/huggingface"));
    }
    Ok((env, binds))
}

/// Streams the container's log into the node's engine log; when the stream ends (the
/// container stopped), records why it exited.
async fn stream_logs(
    d: &Docker,
    name: &str,
    log: &Path,
) -> Result<(Arc<Mutex<Option<String>>>, tokio::task::JoinHandle<()>), EngineError> {
    // The container's log, streamed into the node's engine log.
    let mut logs = d.logs(
        name,
        Some(
            LogsOptionsBuilder::default()
                .follow(true)
                .stdout(true)
                .stderr(true)
                .build(),
        ),
    );
    let mut file = tokio::fs::File::create(log)
        .await
        .map_err(|e| format!("cannot create engine log: {e}"))?;
    let exit = Arc::new(Mutex::new(None::<String>));
    let (d2, n2, exit2) = (d.clone(), name.to_string(), exit.clone());
    let log_task = tokio::spawn(async move {
        while let Some(Ok(chunk)) = logs.next().await {
            let _ = file.write_all(&chunk.into_bytes()).await;
            let _ = file.flush().await;
        }
        // The log stream ends when the container stops.
        let cause = exit_cause(&d2, &n2).await;
        *exit2.lock().expect("exit lock") = Some(cause);
    });
    Ok((exit, log_task))
}

/// Polls the health endpoint until it answers, the container exits (its cause and last log
/// lines), or the startup timeout passes; a container that never became healthy is stopped.
async fn wait_healthy(
    mut engine: DockerEngine,
    spec: &LaunchSpec,
    health: &str,
    log: &Path,
    t0: Instant,
) -> Result<DockerEngine, EngineError> {
    let deadline = t0 + Duration::from_secs_f64(spec.engine.startup_timeout_s);
    let exited = || {
        engine
            .exited()
            .map(|cause| format!("{cause} during startup"))
    };
    match super::poll_health(health, deadline, Duration::from_millis(100), exited).await {
        Ok(()) => {}
        Err(NotHealthy::Exited(cause)) => {
            let tail = tail_of(log, 15);
            engine.stop().await;
            return Err(EngineError::Exited { cause, tail });
        }
        Err(NotHealthy::TimedOut) => {
            let tail = tail_of(log, 15);
            engine.stop().await;
            return Err(EngineError::Unhealthy {
                health: health.to_string(),
                after_s: spec.engine.startup_timeout_s,
                tail,
            });
        }
        Err(NotHealthy::Setup(e)) => return Err(e.into()),
    }
    Ok(engine)
}

impl RunningEngine for DockerEngine {
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
        self.pid
    }
    fn exited(&mut self) -> Option<String> {
        self.exit.lock().expect("exit lock").clone()
    }

    async fn stop(mut self) -> String {
        let already = self.exited();
        let stopped = self
            .docker
            .stop_container(
                &self.name,
                Some(StopContainerOptionsBuilder::default().t(15).build()),
            )
            .await;
        let removed = self
            .docker
            .remove_container(
                &self.name,
                Some(RemoveContainerOptionsBuilder::default().force(true).build()),
            )
            .await;
        self.log_task.abort();
        match (already, stopped, removed) {
            (Some(cause), _, _) => format!("{cause}; removed"),
            (None, Ok(()), Ok(())) => "stopped and removed".into(),
            (None, s, r) => format!("stop: {s:?}, remove: {r:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{catalog, Api, Engine, PullPolicy, Spanned};

    fn spec(
        kind: &str,
        model_path: Option<&str>,
        model_id: Option<&str>,
        quant: &str,
    ) -> LaunchSpec {
        let recipe = catalog::lookup(kind).unwrap().docker.as_ref().unwrap();
        LaunchSpec {
            engine: Engine {
                name: Spanned::new("e".into(), (0..0).into()),
                base: Spanned::new("e".into(), (0..0).into()),
                settings: Vec::new(),
                kind: Spanned::new(kind.into(), (0..0).into()),
                catalog: catalog::lookup(kind).unwrap(),
                launch: Launch::Docker {
                    image: recipe.image.into(),
                    tag: recipe.tag.into(),
                    pull: PullPolicy::Missing,
                    env_pass: vec![],
                    shm_size: None,
                    hf_cache: None,
                },
                parallel: 16,
                ctx_size: 4096,
                args: vec![],
                env: vec![],
                startup_timeout_s: 600.0,
                api: Api::Chat,
                gpus: Some(vec![0]),
                gpu_memory: 0.85,
                tensor_parallel: 1,
                dtype: "bfloat16".into(),
                cpus: None,
                variant: None,
            },
            model_name: "qwen".into(),
            model_path: model_path.map(String::from),
            model_id: model_id.map(String::from),
            quantization: quant.into(),
        }
    }

    fn line(kind: &str, s: &LaunchSpec) -> String {
        let ContainerCommand {
            entrypoint: entry,
            args,
            env,
            port,
        } = container_command(s).unwrap();
        let mut out = entry.map(|e| e.join(" ") + " ").unwrap_or_default();
        out.push_str(&args.join(" "));
        for (k, v) in env {
            out.push_str(&format!(" [{k}={v}]"));
        }
        format!("{kind}:{port} {out}")
    }

    // Each engine's command line as its documentation prescribes (flag names from the docs
    // cited in src/spec/catalog.rs).
    #[test]
    fn container_commands_per_engine() {
        assert_eq!(
            line("llama.cpp", &spec("llama.cpp", Some("/data/m/qwen-q4_k_m.gguf"), None, "q4_k_m")),
            "llama.cpp:8080 --model /models/qwen-q4_k_m.gguf --host 0.0.0.0 --port 8080 --parallel 16 --ctx-size 65536 --metrics"
        );
        assert_eq!(
            line("vllm", &spec("vllm", None, Some("Qwen/Qwen2.5-7B-Instruct-AWQ"), "awq")),
            "vllm:8000 python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-7B-Instruct-AWQ --served-model-name qwen --host 0.0.0.0 --port 8000 --max-num-seqs 16 --max-model-len 4096 --gpu-memory-utilization 0.85 --dtype bfloat16 --quantization awq [VLLM_NO_USAGE_STATS=1]"
        );
        assert_eq!(
            line("sglang", &spec("sglang", None, Some("Qwen/Qwen2.5-7B-Instruct"), "default")),
            "sglang:30000 python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --served-model-name qwen --host 0.0.0.0 --port 30000 --max-running-requests 16 --context-length 4096 --mem-fraction-static 0.85 --dtype bfloat16 --enable-metrics"
        );
        assert_eq!(
            line("tgi", &spec("tgi", None, Some("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4"), "gptq")),
            "tgi:80 --model-id Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4 --hostname 0.0.0.0 --port 80 --max-concurrent-requests 16 --max-total-tokens 4096 --cuda-memory-fraction 0.85 --quantize gptq"
        );
        assert_eq!(
            line("lmdeploy", &spec("lmdeploy", None, Some("Qwen/Qwen2.5-7B-Instruct-AWQ"), "awq")),
            "lmdeploy:23333 lmdeploy serve api_server Qwen/Qwen2.5-7B-Instruct-AWQ --model-name qwen --server-name 0.0.0.0 --server-port 23333 --max-batch-size 16 --session-len 4096 --cache-max-entry-count 0.85 --dtype bfloat16 --backend pytorch --model-format awq"
        );
        assert_eq!(
            line("ollama", &spec("ollama", None, Some("qwen2.5:7b"), "default")),
            "ollama:11434 serve [OLLAMA_HOST=0.0.0.0:11434] [OLLAMA_NUM_PARALLEL=16] [OLLAMA_CONTEXT_LENGTH=4096]"
        );
    }

    #[test]
    fn references_and_names() {
        assert_eq!(
            reference("vllm/vllm-openai", "v0.26.0"),
            "vllm/vllm-openai:v0.26.0"
        );
        assert_eq!(reference("img@sha256:abc", "ignored"), "img@sha256:abc");
        assert_eq!(
            container_name("0123456789abcdef0123"),
            "bench360-0123456789abcdef"
        );
        assert_eq!(container_model_path("/a/b/m.gguf"), "/models/m.gguf");
    }
}
