//! Helpers for integration tests against the real llama-server installed by
//! scripts/install-engine.sh.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;

pub struct Engine {
    pub server: PathBuf,
    pub gguf: PathBuf,
}

fn bench360_home() -> PathBuf {
    std::env::var("BENCH360_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            let base = std::env::var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache"));
            base.join("bench360")
        })
}

fn from_env_file(file: &str, var: &str) -> Option<String> {
    let text = std::fs::read_to_string(bench360_home().join(file)).ok()?;
    text.lines()
        .filter_map(|l| l.trim_start_matches("export ").split_once('='))
        .find(|(k, _)| *k == var)
        .map(|(_, v)| v.to_string())
}

/// A path the setup scripts print and also write to `$BENCH360_HOME/<file>`. When it is
/// missing, the panic says why: the setup script's own failure (its `<name>.failed`), or
/// that the script has not run.
pub fn setting(file: &str, var: &str, script: &str) -> String {
    std::env::var(var)
        .ok()
        .or_else(|| from_env_file(file, var))
        .unwrap_or_else(|| panic!("{}", missing_setting(&bench360_home(), file, var, script)))
}

/// Why setting `var` (from `home/file`) is missing.
pub fn missing_setting(home: &Path, file: &str, var: &str, script: &str) -> String {
    let failed = home.join(file.replace(".env", ".failed"));
    match std::fs::read_to_string(&failed) {
        Ok(cause) => format!(
            "{var} is missing because {script} failed ({}):\n{}",
            failed.display(),
            cause.trim_end()
        ),
        Err(_) => format!(
            "{var} is not set and {} has none: {script} has not run here (scripts/test.sh runs \
             it first and stops if it fails)",
            home.join(file).display()
        ),
    }
}

/// The real engine and model; the tests need them (scripts/test.sh installs them).
pub fn engine() -> Engine {
    let e = Engine {
        server: PathBuf::from(setting(
            "engine.env",
            "BENCH360_LLAMA_SERVER",
            "scripts/install-engine.sh",
        )),
        gguf: PathBuf::from(setting(
            "engine.env",
            "BENCH360_SMOLLM2_GGUF",
            "scripts/install-engine.sh",
        )),
    };
    assert!(
        e.server.is_file(),
        "{} missing: run scripts/install-engine.sh",
        e.server.display()
    );
    assert!(
        e.gguf.is_file(),
        "{} missing: run scripts/install-engine.sh",
        e.gguf.display()
    );
    e
}

pub fn datasets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets")
}

/// The sweep blocks of the real model and engine: `model "smollm2"` and `engine "llama"`
/// (llama-server with `parallel` slots of 1024 tokens, one thread).
pub fn llama_blocks(e: &Engine, parallel: u32) -> String {
    format!(
        r#"model "smollm2" {{
    path "{gguf}"
    quantization "q4_1"
}}
engine "llama" {{
    kind "llama.cpp"
    binary "{server}"
    parallel {parallel}
    ctx-size 1024
    args "--threads" "1"
    startup-timeout 60
}}"#,
        gguf = e.gguf.display(),
        server = e.server.display(),
    )
}

/// A small sweep on the real engine: MMLU, single + batch + server, a few seconds of work.
pub fn small_sweep(
    e: &Engine,
    name: &str,
    extra_engine: &str,
    scenarios: &str,
    matrix: &str,
) -> String {
    format!(
        r#"sweep "{name}" {{
    seed 3
}}
defaults {{
    max-tokens 4
    warmup 1
    request-timeout 60
}}
{telemetry}{blocks}
{extra_engine}
task "mmlu" {{
    kind "mmlu"
    dataset "{datasets}/mmlu"
    samples 8
}}
{scenarios}
matrix {{
{matrix}
}}
"#,
        blocks = llama_blocks(e, 2),
        datasets = datasets().display(),
        // Requests of a few tokens last well under a second: the engine's gauges are scraped
        // with every sample, so that a run's peaks see them (the default is once a second).
        // A test that brings its own `telemetry` block says it there.
        telemetry = if extra_engine.contains("telemetry {") {
            ""
        } else {
            "telemetry {\n    metrics-interval 0.1\n}\n"
        },
    )
}

pub const SCENARIOS: &str = r#"scenario "single" {
    kind "single"
    requests 3
}
scenario "batch" {
    kind "batch"
    batch-size 2
    batches 1
}
scenario "server" {
    kind "server"
    users 2
    rate 60
    duration 3
}"#;

pub fn bench(cache: &Path, args: &[&str]) -> Output {
    Command::cargo_bin("bench360")
        .unwrap()
        .env("NO_COLOR", "1")
        // Each test's applies take their own device locks: tests share the machine, and one
        // waiting for another's engine would only make the suite slower.
        .env(
            "BENCH360_DEVICE_LOCKS",
            cache.with_file_name("device-locks"),
        )
        .arg("--cache")
        .arg(cache)
        .args(args)
        .output()
        .unwrap()
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Labels of the nodes an apply ran (its "✓ label (…)" lines).
pub fn ran(o: &Output) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter_map(|l| l.strip_prefix("✓ "))
        .map(|l| l.rsplit_once(" (").map(|(a, _)| a).unwrap_or(l).to_string())
        .collect();
    v.sort();
    v
}

pub fn plan_json(cache: &Path, sweep: &Path) -> serde_json::Value {
    let o = bench(cache, &["plan", "--json", sweep.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Every record of the cache. Hidden files are another process's temp files (possibly
/// half-written, or renamed away while listed): skipped, as bench360's own readers do.
pub fn records(cache: &Path) -> Vec<serde_json::Value> {
    std::fs::read_dir(cache.join("records"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap())
        .collect()
}

/// A sweep file of `small_sweep` in a fresh temp dir: (dir, cache path, sweep path).
pub fn setup(
    name: &str,
    extra_engine: &str,
    scenarios: &str,
    matrix: &str,
) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let e = engine();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sweep = dir.path().join(format!("{name}.kdl"));
    std::fs::write(
        &sweep,
        small_sweep(&e, name, extra_engine, scenarios, matrix),
    )
    .unwrap();
    (dir, cache, sweep)
}

/// `bench360 apply` in the background (to be killed or interrupted by the test).
pub fn spawn_apply(cache: &Path, sweep: &Path) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("bench360"))
        .env(
            "BENCH360_DEVICE_LOCKS",
            cache.with_file_name("device-locks"),
        )
        .arg("--cache")
        .arg(cache)
        .arg("apply")
        .arg(sweep)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until a run whose label contains `label_part` has a `started` record.
pub fn wait_for_started_run(cache: &Path, label_part: &str, timeout: Duration) {
    let t = Instant::now();
    loop {
        if cache.join("records").is_dir()
            && records(cache).iter().any(|r| {
                r["kind"] == "run"
                    && r["status"] == "started"
                    && r["label"].as_str().unwrap().contains(label_part)
            })
        {
            return;
        }
        assert!(
            t.elapsed() < timeout,
            "no run `{label_part}` started within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The Python with pyarrow and duckdb (scripts/setup-python.sh).
pub fn python() -> String {
    setting("python.env", "BENCH360_PYTHON", "scripts/setup-python.sh")
}

/// A committed results folder's cache and chunk traces (`docs/results/NAME/cache.tar.xz` and
/// `chunks.tar.xz`) unpacked into `into`; returns the cache folder. Python's tarfile reads xz
/// without an `xz` binary on the machine.
pub fn unpack_results(name: &str, into: &Path) -> PathBuf {
    let results = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/results")
        .join(name);
    for archive in ["cache.tar.xz", "chunks.tar.xz"] {
        let out = std::process::Command::new(python())
            .arg("-c")
            .arg("import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])")
            .arg(results.join(archive))
            .arg(into)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    into.join("cache")
}

/// A copy of the GPU machine's sweep `sweeps/NAME.kdl` in `dir`, its fixed-layout paths (a
/// model's `path="/root/…"`, an engine's `binary "/root/…"`) moved under `/gpu-machine/`,
/// which no machine here has: what the test reads from the committed cache then cannot hang
/// on whether this machine happens to hold a folder at the GPU machine's path (its weights
/// would be hashed, and differ). Datasets stay the repository's.
pub fn gpu_sweep(name: &str, dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("sweeps").join(format!("{name}.kdl"))).unwrap();
    let datasets = format!("dataset \"{}/", root.join("datasets").display());
    let text = text
        .replace("path=\"/root/", "path=\"/gpu-machine/")
        .replace("binary \"/root/", "binary \"/gpu-machine/")
        .replace("dataset \"../datasets/", &datasets);
    assert!(
        !Path::new("/gpu-machine").exists(),
        "/gpu-machine exists here"
    );
    let out = dir.join(format!("{name}.kdl"));
    std::fs::write(&out, text).unwrap();
    out
}

/// A free loopback port (bound, then released for the server the test starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process the test started: killed when the test ends, even on panic.
pub struct ServerGuard(pub std::process::Child);

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (up to 60 s) until a llama-server on `port` answers `/health` with 200.
pub fn wait_healthy(port: u16) {
    use std::io::{Read, Write};
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
            let mut buf = String::new();
            let _ = s.read_to_string(&mut buf);
            if buf.starts_with("HTTP/1.1 200") || buf.starts_with("HTTP/1.0 200") {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("server on port {port} not healthy after 60 s");
}

/// The user-facing documentation: README.md, CONTRIBUTING.md and every Markdown page under
/// docs/ (the book), as (path relative to the repository, text), in path order. The tests
/// that keep examples true read all of it, so an example moved between pages stays tested.
pub fn book() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    pages.extend(files_under(&root.join("docs"), "md"));
    pages.sort();
    pages
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.strip_prefix(root).unwrap().display().to_string(), text)
        })
        .collect()
}

/// Every file under `dir` (recursively) whose name ends in `.ext`.
pub fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out
}

/// A llama-server on `port` with the test model, started by the test (stopped when the guard
/// drops) and healthy: `--host 127.0.0.1 --port PORT`, then `args`.
pub fn start_llama_server(e: &Engine, port: u16, args: &[&str]) -> ServerGuard {
    let guard = ServerGuard(
        std::process::Command::new(&e.server)
            .arg("-m")
            .arg(&e.gguf)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_healthy(port);
    guard
}

/// `bench360 --cache CACHE apply SWEEP`, without colour.
pub fn apply_sweep(cache: &Path, sweep: &Path) -> Output {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("bench360"))
        .env("NO_COLOR", "1")
        .env(
            "BENCH360_DEVICE_LOCKS",
            cache.with_file_name("device-locks"),
        )
        .arg("--cache")
        .arg(cache)
        .arg("apply")
        .arg(sweep)
        .output()
        .unwrap()
}

/// The object folder of the first record of `kind` whose label contains `label`.
pub fn object_of(cache: &Path, kind: &str, label: &str) -> PathBuf {
    let r = records(cache)
        .into_iter()
        .find(|r| r["kind"] == kind && r["label"].as_str().unwrap().contains(label))
        .unwrap_or_else(|| panic!("no {kind} record for {label}"));
    cache.join("objects").join(r["key"].as_str().unwrap())
}

/// The `output` text of every request in a run's `outputs.jsonl`, in order.
pub fn output_texts(run: &Path) -> Vec<String> {
    std::fs::read_to_string(run.join("outputs.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["output"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// A uint32 column of one of a run's Parquet tables (`requests.parquet`…), row by row.
pub fn u32_column(run: &Path, table: &str, column: &str) -> Vec<Option<u32>> {
    use arrow_array::Array;
    let f = std::fs::File::open(run.join(table)).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let c = b
            .column_by_name(column)
            .unwrap_or_else(|| panic!("{table} has no column {column}"));
        let c = c
            .as_any()
            .downcast_ref::<arrow_array::UInt32Array>()
            .unwrap_or_else(|| panic!("{table}: {column} is not uint32"));
        out.extend((0..c.len()).map(|i| (!c.is_null(i)).then(|| c.value(i))));
    }
    out
}
