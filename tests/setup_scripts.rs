//! The setup scripts fail loudly: a forced failure stops the step with its own cause, leaves
//! `<name>.failed` for the tests to quote, removes the stale `<name>.env`, and stops
//! scripts/test.sh before anything else runs. Each run here works on a copy of scripts/ in a
//! temp folder with an empty BENCH360_HOME, and commands that would change the machine
//! (`apt-get`, `dpkg-query`, `apt-cache`) replaced on PATH by shims that answer as Debian would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn copy_scripts(to: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
    let dest = to.join("repo/scripts");
    for rel in [
        "test.sh",
        "install-engine.sh",
        "setup-python.sh",
        "setup-lm-eval.sh",
        "setup-browser.sh",
        "setup-docker-test.sh",
        "setup-slurm.sh",
        "stop-slurm.sh",
        "lib/setup.sh",
    ] {
        let d = dest.join(rel);
        std::fs::create_dir_all(d.parent().unwrap()).unwrap();
        std::fs::copy(from.join(rel), &d).unwrap();
    }
    dest
}

fn shim(bin: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin).unwrap();
    let p = bin.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn run(script: &Path, home: &Path, bin: &Path, env: &[(&str, &str)]) -> Output {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut c = Command::new("bash");
    c.arg(script)
        .env("PATH", path)
        .env("BENCH360_HOME", home)
        .env_remove("BENCH360_CHROMIUM");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn a_package_outside_its_pinned_range_stops_the_step_with_what_apt_offers() {
    let dir = tempfile::tempdir().unwrap();
    let scripts = copy_scripts(dir.path());
    let (home, bin) = (dir.path().join("home"), dir.path().join("bin"));
    std::fs::create_dir_all(&home).unwrap();
    // A stale env file from an earlier success must not survive a failure.
    std::fs::write(home.join("browser.env"), "export BENCH360_CHROMIUM=/old\n").unwrap();
    shim(&bin, "id", "echo 0");
    shim(&bin, "dpkg-query", "exit 1"); // not installed
    shim(&bin, "apt-get", "exit 0");
    shim(
        &bin,
        "apt-cache",
        r#"case "$1" in
  policy) printf 'chromium:\n  Installed: (none)\n  Candidate: 149.0.7000.1-1~deb12u1\n' ;;
  madison) echo ' chromium | 149.0.7000.1-1~deb12u1 | http://deb.debian.org/debian bookworm/main amd64 Packages' ;;
esac"#,
    );
    let out = run(&scripts.join("setup-browser.sh"), &home, &bin, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let cause = "apt offers chromium 149.0.7000.1-1~deb12u1, outside the pinned range >= 150.0";
    assert!(stderr.contains(cause), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing to eval on failure");
    let failed = std::fs::read_to_string(home.join("browser.failed")).unwrap();
    assert!(failed.contains(cause), "{failed}");
    assert!(
        !home.join("browser.env").exists(),
        "stale browser.env removed"
    );

    // No candidate at all.
    shim(&bin, "apt-cache", "exit 0");
    let out = run(&scripts.join("setup-browser.sh"), &home, &bin, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("apt offers no chromium (wanted >= 150.0)"),
        "{stderr}"
    );
}

#[test]
fn a_failing_setup_step_stops_the_test_command_before_any_test() {
    let dir = tempfile::tempdir().unwrap();
    let scripts = copy_scripts(dir.path());
    let (home, bin) = (dir.path().join("home"), dir.path().join("bin"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    // The first step (install-engine) cannot find its Python. The copy has no Cargo.toml:
    // were the failure swallowed, cargo would say so instead.
    let out = run(
        &scripts.join("test.sh"),
        &home,
        &bin,
        &[("PYTHON", "/nonexistent/python3")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("[install-engine] error: /nonexistent/python3 not found"),
        "{stderr}"
    );
    assert!(
        stderr.contains("setup step scripts/install-engine.sh failed: stopping before any test"),
        "{stderr}"
    );
    assert!(!stderr.contains("Cargo.toml"), "{stderr}");
    assert!(
        !stderr.contains("[setup-python]"),
        "no later step ran: {stderr}"
    );
    let failed = std::fs::read_to_string(home.join("engine.failed")).unwrap();
    assert!(
        failed.contains("/nonexistent/python3 not found"),
        "{failed}"
    );
}
