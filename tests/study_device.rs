//! The study's device script, tried here (`BENCH360_GPU_ROOT` is a temp folder): a `wait` call
//! that leaves the apply running brings back, as `delta-HHMMSS.tar.xz`, what the hold's cache
//! recorded since the call before — so that a machine lost between two calls loses only one
//! call's runs (the eighth seed hold lost all of its own); and the last call's collection brings
//! back the hold's own records with their chunk traces, not the earlier holds' again (the ninth
//! hold's whole cache filled the files a call may bring back, and its last runs' traces stayed
//! there).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Sets a file's modification time to `secs` since the epoch.
fn age(path: &Path, secs: u64) {
    let st = Command::new("touch")
        .arg("-d")
        .arg(format!("@{secs}"))
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// A record and its object (with a chunk trace), as the store lays them out.
fn record(cache: &Path, key: &str) -> PathBuf {
    let obj = cache.join("objects").join(key);
    std::fs::create_dir_all(&obj).unwrap();
    std::fs::write(obj.join("chunks.parquet"), format!("trace of {key}")).unwrap();
    std::fs::write(obj.join("metrics.json"), "{}").unwrap();
    let rec = cache.join("records").join(format!("{key}.json"));
    std::fs::write(&rec, format!("{{\"key\": \"{key}\"}}")).unwrap();
    rec
}

/// `device-vllm.sh wait 0 [final]`: returns its exit code and the members of each archive
/// (`*.tar.xz`) it left in a fresh `$OUT`.
fn wait_call(root: &Path, out: &Path, final_: bool) -> (i32, Vec<(String, Vec<String>)>) {
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out).unwrap();
    let bin = root.join("shims");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    std::fs::write(&smi, "#!/bin/sh\necho '0, 80.00 W, 0 MiB, 0 %'\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/study/device-vllm.sh");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let o = Command::new("bash")
        .arg(&script)
        .args(["wait", "0"])
        .args(final_.then_some("final"))
        .env("BENCH360_GPU_ROOT", root)
        .env("OUT", out)
        .env("PATH", path)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    let mut archives = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.retain(|n| n.ends_with(".tar.xz"));
    names.sort();
    for name in names {
        let t = Command::new("tar")
            .arg("-tJf")
            .arg(out.join(&name))
            .output()
            .unwrap();
        assert!(t.status.success(), "{name} is no tar.xz: {log}");
        let mut members: Vec<String> = String::from_utf8_lossy(&t.stdout)
            .lines()
            .filter(|l| !l.ends_with('/'))
            .map(str::to_string)
            .collect();
        members.sort();
        archives.push((name, members));
    }
    (o.status.code().unwrap_or(-1), archives)
}

/// A hold's root ten minutes after `start`: the earlier holds' cache unpacked with its archives'
/// times (one record, one label), the salt, and a running apply.
fn hold() -> (tempfile::TempDir, PathBuf, PathBuf, u64) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let cache = root.join("cache");
    for d in ["records", "objects", "labels"] {
        std::fs::create_dir_all(cache.join(d)).unwrap();
    }
    std::fs::write(cache.join("salt"), "ab".repeat(32)).unwrap();
    std::fs::write(cache.join("FORMAT"), "1\n").unwrap();
    std::fs::write(root.join("apply.sweep"), "sweeps/gpu-seed.kdl").unwrap();
    let t = now();
    let old = record(&cache, "00000000000000000000000000000000");
    age(&old, t - 86_400);
    let old_label = cache.join("labels/old.json");
    std::fs::write(&old_label, "{}").unwrap();
    age(&old_label, t - 86_400);
    let start = root.join("hold.start");
    std::fs::write(&start, "").unwrap();
    age(&start, t - 600);
    (dir, root, cache, t)
}

/// What an archive of the hold's two new runs holds: their records and objects (chunk traces
/// included), the label written during the hold, the salt and FORMAT — not the earlier holds'.
fn two_runs() -> Vec<String> {
    [
        "cache/FORMAT",
        "cache/labels/new.json",
        "cache/objects/11111111111111111111111111111111/chunks.parquet",
        "cache/objects/11111111111111111111111111111111/metrics.json",
        "cache/objects/22222222222222222222222222222222/chunks.parquet",
        "cache/objects/22222222222222222222222222222222/metrics.json",
        "cache/records/11111111111111111111111111111111.json",
        "cache/records/22222222222222222222222222222222.json",
        "cache/salt",
    ]
    .map(str::to_string)
    .to_vec()
}

#[test]
fn each_wait_call_brings_back_what_finished_since_the_call_before() {
    let (dir, root, cache, t) = hold();

    // The first call after two runs finished.
    let r1 = record(&cache, "11111111111111111111111111111111");
    let r2 = record(&cache, "22222222222222222222222222222222");
    std::fs::write(cache.join("labels/new.json"), "{}").unwrap();
    let out = dir.path().join("out");
    let (rc, archives) = wait_call(&root, &out, false);
    assert_eq!(rc, 3, "the apply is still running: exit 3");
    assert_eq!(archives.len(), 1, "{archives:?}");
    let (name, members) = &archives[0];
    assert!(
        name.starts_with("delta-") && name.ends_with(".tar.xz"),
        "{name}"
    );
    assert_eq!(members, &two_runs());

    // Minutes later: one more run finished; the first two are not sent again.
    let last = root.join("delta.last");
    assert!(last.exists(), "the call marks what it sent");
    age(&last, t - 60);
    age(&r1, t - 120);
    age(&r2, t - 120);
    record(&cache, "33333333333333333333333333333333");
    let (rc, archives) = wait_call(&root, &out, false);
    assert_eq!(rc, 3);
    assert_eq!(archives.len(), 1, "{archives:?}");
    let records: Vec<_> = archives[0]
        .1
        .iter()
        .filter(|m| m.starts_with("cache/records/"))
        .collect();
    assert_eq!(
        records,
        ["cache/records/33333333333333333333333333333333.json"]
    );

    // A call during which nothing finished brings back nothing.
    age(&root.join("delta.last"), t - 60);
    age(
        &cache.join("records/33333333333333333333333333333333.json"),
        t - 120,
    );
    let (rc, archives) = wait_call(&root, &out, false);
    assert_eq!(rc, 3);
    assert!(archives.is_empty(), "{archives:?}");
}

#[test]
fn the_final_collection_brings_back_the_holds_own_records_with_their_traces() {
    let (dir, root, cache, t) = hold();
    let r1 = record(&cache, "11111111111111111111111111111111");
    age(&r1, t - 300);
    std::fs::write(cache.join("labels/new.json"), "{}").unwrap();
    let out = dir.path().join("out");
    // A delta before, then one more run; `final` collects while the apply still runs.
    let (rc, _) = wait_call(&root, &out, false);
    assert_eq!(rc, 3);
    age(&root.join("delta.last"), t - 60);
    record(&cache, "22222222222222222222222222222222");
    let (rc, archives) = wait_call(&root, &out, true);
    assert_eq!(rc, 4, "collected while the apply is unfinished: exit 4");
    let names: Vec<_> = archives.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["cache.tar.xz"], "{archives:?}");
    assert_eq!(archives[0].1, two_runs());
}
