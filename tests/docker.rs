//! The docker launcher for real on this machine's Docker engine: the quickstart in a
//! container, pulling through a registry on 127.0.0.1, a retagged image making runs stale,
//! and engine faults (early exit, never healthy, killed mid-run, orphan of a killed apply).

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

struct Image {
    repo: String,
    tag: String,
}

fn image() -> Image {
    Image {
        repo: setting(
            "image.env",
            "BENCH360_LLAMA_IMAGE",
            "scripts/build-llama-image.sh",
        ),
        tag: setting(
            "image.env",
            "BENCH360_LLAMA_TAG",
            "scripts/build-llama-image.sh",
        ),
    }
}

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("docker CLI");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Containers bench360 created for this sweep.
fn containers(sweep: &str) -> Vec<String> {
    docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=bench360.sweep={sweep}"),
        "--format",
        "{{.Names}}",
    ])
    .lines()
    .map(String::from)
    .collect()
}

fn docker_engine(repo: &str, tag: &str, extra: &str) -> String {
    format!(
        r#"engine "box" {{
    kind "llama.cpp"
    launcher "docker"
    image "{repo}"
    tag "{tag}"
    parallel 2
    ctx-size 1024
    args "--threads" "1"
    startup-timeout 60
{extra}
}}"#
    )
}

/// `common::setup` with the matrix naming the `box` engine unless the test names engines.
fn setup(
    name: &str,
    engine: &str,
    scenarios: &str,
    matrix: &str,
) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let matrix = if matrix.contains("engine ") {
        matrix.to_string()
    } else {
        format!("    engine \"box\"\n{matrix}")
    };
    common::setup(name, engine, scenarios, &matrix)
}

#[test]
fn the_quickstart_runs_in_a_container_incrementally() {
    let img = image();
    let (_dir, cache, sweep) = setup(
        "dock-inc",
        &docker_engine(&img.repo, &img.tag, ""),
        SCENARIOS,
        "",
    );
    let s = sweep.to_str().unwrap();
    let first = bench(&cache, &["apply", s]);
    assert!(first.status.success(), "{}", text(&first));
    assert_eq!(ran(&first).len(), 9, "{}", text(&first));
    assert!(
        containers("dock-inc").is_empty(),
        "the container was not removed"
    );
    let pull = records(&cache)
        .into_iter()
        .find(|r| r["kind"] == "pull")
        .unwrap();
    assert!(
        pull["outputs"]["image_id"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{pull}"
    );
    // The engine inside the container was sampled through its host pid.
    let run = records(&cache)
        .into_iter()
        .find(|r| r["label"] == "run smollm2:q4_1@box mmlu server")
        .unwrap();
    let t: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            cache
                .join("objects")
                .join(run["key"].as_str().unwrap())
                .join("telemetry.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(t["engine_cpu_mean_pct"].as_f64().unwrap() > 1.0, "{t}");
    let second = bench(&cache, &["apply", s]);
    assert!(second.status.success());
    assert!(ran(&second).is_empty(), "{}", text(&second));
}

struct Registry {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn registry() -> Registry {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("docker-registry (scripts/setup-docker-test.sh installs it)");
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "registry did not listen within 120 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Registry {
        child,
        port,
        _dir: dir,
    }
}

#[test]
fn images_are_pulled_through_a_registry_once_and_a_moved_tag_makes_runs_stale() {
    let img = image();
    let reg = registry();
    let remote = format!("127.0.0.1:{}/bench360/llama-server", reg.port);
    docker(&[
        "tag",
        &format!("{}:{}", img.repo, img.tag),
        &format!("{remote}:cpu"),
    ]);
    docker(&["push", &format!("{remote}:cpu")]);
    docker(&["rmi", &format!("{remote}:cpu")]);

    let (_dir, cache, sweep) = setup(
        "dock-pull",
        &docker_engine(&remote, "cpu", ""),
        SCENARIOS,
        "    scenario \"single\"",
    );
    let s = sweep.to_str().unwrap();
    let first = bench(&cache, &["apply", s]);
    assert!(first.status.success(), "{}", text(&first));
    assert!(
        text(&first).contains(&format!("pulling {remote}:cpu")),
        "{}",
        text(&first)
    );
    let pull = records(&cache)
        .into_iter()
        .find(|r| r["kind"] == "pull" && r["status"] == "finished")
        .unwrap();
    let digests = pull["outputs"]["repo_digests"].to_string();
    assert!(digests.contains(&remote), "{pull}");

    // Present now: the second apply pulls and runs nothing.
    let second = bench(&cache, &["apply", s]);
    assert!(second.status.success());
    assert!(!text(&second).contains("pulling"), "{}", text(&second));
    assert!(ran(&second).is_empty(), "{}", text(&second));

    // The same tag now names a different image: everything on it is stale.
    let other = format!("{remote}:other-build");
    let rootfs = Command::new("docker")
        .args(["save", &format!("{}:{}", img.repo, img.tag)])
        .output()
        .unwrap();
    assert!(rootfs.status.success());
    // A different image: the same files with another label.
    let cid = docker(&["create", &format!("{}:{}", img.repo, img.tag)]);
    let export = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "docker export {cid} | docker import --change 'ENTRYPOINT [\"/llama-server\"]' --change 'LABEL rebuilt=yes' - {other}"
        ))
        .output()
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    docker(&["rm", &cid]);
    docker(&["tag", &other, &format!("{remote}:cpu")]);
    let plan = plan_json(&cache, &sweep);
    let stale: Vec<(&str, &str)> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"]["status"] == "will-run" && n["kind"] != "warmup")
        .map(|n| {
            (
                n["label"].as_str().unwrap(),
                n["status"]["why"].as_str().unwrap(),
            )
        })
        .collect();
    let labels: Vec<&str> = stale.iter().map(|x| x.0).collect();
    assert_eq!(
        labels,
        [
            "pull box",
            "coldstart smollm2:q4_1@box",
            "run smollm2:q4_1@box mmlu single",
            "score smollm2:q4_1@box mmlu single",
            "report dock-pull"
        ]
    );
    assert!(stale[0].1.contains("engine.artifact"), "{stale:?}");
    docker(&["rmi", &format!("{remote}:cpu"), &other]);
}

#[test]
fn container_faults_are_recorded_with_their_causes() {
    let img = image();
    // Exits at once: an argument llama-server rejects.
    let bad =
        docker_engine(&img.repo, &img.tag, "").replace("\"--threads\" \"1\"", "\"--no-such-flag\"");
    // Never healthy: the server listens on another port than the one published.
    let deaf = docker_engine(&img.repo, &img.tag, "")
        .replace("engine \"box\"", "engine \"deaf\"")
        .replace("startup-timeout 60", "startup-timeout 4")
        .replace("\"--threads\" \"1\"", "\"--port\" \"9999\"");
    let (_dir, cache, sweep) = setup(
        "dock-faults",
        &format!("{bad}\n{deaf}"),
        SCENARIOS,
        "    engine \"box\" \"deaf\"\n    scenario \"single\"",
    );
    let out = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let recs = records(&cache);
    let cause = |label: &str| {
        recs.iter()
            .find(|r| r["label"] == label)
            .map(|r| r["cause"].as_str().unwrap_or("").to_string())
            .unwrap()
    };
    let early = cause("coldstart smollm2:q4_1@box");
    assert!(
        early.contains("container exited (exit code 1") && early.contains("during startup"),
        "{early}"
    );
    let never = cause("coldstart smollm2:q4_1@deaf");
    assert!(
        never.contains("not healthy") && never.contains("after 4 s"),
        "{never}"
    );
    let report = std::fs::read_to_string(cache.join("reports/dock-faults/report.md")).unwrap();
    assert!(
        report.contains("FAILED: engine failed to start: container exited (exit code 1"),
        "{report}"
    );
    assert!(
        containers("dock-faults").is_empty(),
        "failed containers are removed"
    );
}

const LONG: &str = r#"scenario "server" {
    kind "server"
    users 2
    rate 60
    duration 30
}"#;

#[test]
fn a_container_killed_mid_run_fails_the_run_and_an_orphan_is_removed_next_time() {
    let img = image();
    let (_dir, cache, sweep) = setup(
        "dock-kill",
        &docker_engine(&img.repo, &img.tag, ""),
        LONG,
        "",
    );
    // The engine dies during the run: the run fails with the container's cause.
    let mut child = spawn_apply(&cache, &sweep);
    wait_for_started_run(&cache, "server", Duration::from_secs(90));
    std::thread::sleep(Duration::from_secs(1));
    let names = containers("dock-kill");
    assert_eq!(names.len(), 1, "{names:?}");
    docker(&["kill", &names[0]]);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let run = records(&cache)
        .into_iter()
        .find(|r| r["label"] == "run smollm2:q4_1@box mmlu server")
        .unwrap();
    assert_eq!(run["status"], "failed");
    assert!(
        run["cause"]
            .as_str()
            .unwrap()
            .contains("container exited (exit code 137"),
        "{run}"
    );

    // bench360 itself is killed: its container stays behind until the next apply.
    let mut child = spawn_apply(&cache, &sweep);
    wait_for_started_run(&cache, "server", Duration::from_secs(90));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        containers("dock-kill").len(),
        1,
        "the orphan should still exist"
    );
    let resumed = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(
        text(&resumed).contains("removed orphaned container bench360-"),
        "{}",
        text(&resumed)
    );
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert!(containers("dock-kill").is_empty());
}
