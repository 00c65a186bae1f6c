//! Embeds the git commit bench360 is built from (`BENCH360_GIT_COMMIT`, "unknown" outside a
//! git checkout; `+modified` when the sources differ from it), recorded in every run's
//! provenance. Looked at again when HEAD moves or a source changes.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // Uncommitted changes to tracked sources at build time.
    let dirty = git(&[
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        "src",
        "Cargo.toml",
        "Cargo.lock",
    ])
    .is_some();
    let commit = if dirty && commit != "unknown" {
        format!("{commit}+modified")
    } else {
        commit
    };
    println!("cargo:rustc-env=BENCH360_GIT_COMMIT={commit}");
    // HEAD names the branch; the branch's ref file (or packed-refs) moves with each commit.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head}");
        }
        println!("cargo:rerun-if-changed={dir}/packed-refs");
    }
    // Sources edited after the last commit make the build "+modified": looked at again
    // whenever they change.
    for p in ["build.rs", "src", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={p}");
    }
}
