//! The cache directory: per-node records (the journal), node objects, per-deployment locks,
//! crash leftovers. Every file becomes visible by an atomic rename of a complete temp file,
//! and no file is appended to by several processes, so many hosts may share one cache
//! (NFS close-to-open semantics and atomic rename within a directory are assumed).

pub(crate) mod facts;

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plan::{History, KeyInputs, Past};

/// Bump when the layout or a record's meaning changes; an old cache is then refused, not misread.
pub(crate) const STORE_FORMAT: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RecordStatus {
    Started,
    Finished,
    Failed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    pub format: u32,
    pub key: String,
    pub kind: String,
    pub label: String,
    pub sweep: String,
    pub status: RecordStatus,
    pub host: String,
    pub pid: u32,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub duration_s: Option<f64>,
    pub cause: Option<String>,
    pub inputs: KeyInputs,
    /// Small results worth seeing without opening the object (summary numbers, versions).
    pub outputs: serde_json::Value,
}

#[derive(Debug, Clone)]
pub(crate) struct Store {
    root: PathBuf,
}

pub(crate) fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}

pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Writes `bytes` to `path` atomically: a temp file beside it, fsync, rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("path has a parent");
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id(),
        hostname()
    ));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}

/// A process that exists and is not a zombie (a killed process whose parent has not reaped
/// it still has a /proc entry).
pub(crate) fn pid_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may itself contain spaces.
        Ok(stat) => {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}

/// A held per-deployment lock; released on drop (and by the kernel if the process dies).
#[derive(Debug)]
pub(crate) struct Lock {
    _file: File,
}

impl Store {
    pub fn open(root: &Path) -> anyhow::Result<Store> {
        for d in [
            "locks", "records", "objects", "tmp", "labels", "reports", "hashes",
        ] {
            fs::create_dir_all(root.join(d)).map_err(|e| {
                anyhow::anyhow!(
                    "failed to create cache directory {}: {e}",
                    root.join(d).display()
                )
            })?;
        }
        let version = root.join("FORMAT");
        let want = format!("bench360-store {STORE_FORMAT}\n");
        match fs::read_to_string(&version) {
            Ok(v) if v == want => {}
            Ok(v) => anyhow::bail!(
                "cache {} has format {:?}, this bench360 writes {:?}; use another --cache directory",
                root.display(),
                v.trim(),
                want.trim()
            ),
            Err(_) => write_atomic(&version, want.as_bytes())?,
        }
        let store = Store {
            root: root.to_path_buf(),
        };
        store.clean_tmp();
        Ok(store)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Removes leftovers of interrupted nodes: temp dirs of processes on this host that are
    /// no longer alive. Other hosts' temp dirs are left to them.
    fn clean_tmp(&self) {
        let host = hostname();
        let Ok(entries) = fs::read_dir(self.root.join("tmp")) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let mut parts = name.splitn(3, '.');
            let (Some(pid), Some(h)) = (parts.next(), parts.next()) else {
                continue;
            };
            if h == host
                && pid
                    .parse::<u32>()
                    .is_ok_and(|p| !pid_alive(p) || p == std::process::id())
            {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }

    fn record_path(&self, key: &str) -> PathBuf {
        self.root.join("records").join(format!("{key}.json"))
    }

    pub fn object_dir(&self, key: &str) -> PathBuf {
        self.root.join("objects").join(key)
    }

    pub fn record(&self, key: &str) -> Option<Record> {
        let text = fs::read_to_string(self.record_path(key)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Finished, with its object in place.
    pub fn is_cached(&self, key: &str) -> bool {
        self.record(key)
            .is_some_and(|r| r.status == RecordStatus::Finished)
    }

    pub fn write_record(&self, r: &Record) -> std::io::Result<()> {
        write_atomic(
            &self.record_path(&r.key),
            &serde_json::to_vec_pretty(r).expect("serializable"),
        )
    }

    /// A fresh temp directory for a node's outputs.
    pub fn begin_object(&self, key: &str) -> std::io::Result<PathBuf> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = self.root.join("tmp").join(format!(
            "{}.{}.{key}.{nanos}",
            std::process::id(),
            hostname()
        ));
        fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Moves a complete temp directory into `objects/<key>/`.
    pub fn commit_object(&self, tmp: &Path, key: &str) -> std::io::Result<PathBuf> {
        let dest = self.object_dir(key);
        if dest.exists() {
            // An object without a finished record (the process died between the two renames):
            // replace it with the new, complete one.
            fs::remove_dir_all(&dest)?;
        }
        fs::rename(tmp, &dest)?;
        Ok(dest)
    }

    fn label_path(&self, sweep: &str, label: &str) -> PathBuf {
        let h = blake3::hash(format!("{sweep}\0{label}").as_bytes()).to_hex();
        self.root.join("labels").join(format!("{}.json", &h[..32]))
    }

    pub fn set_label(&self, sweep: &str, label: &str, key: &str) -> std::io::Result<()> {
        let v = serde_json::json!({"sweep": sweep, "label": label, "key": key});
        write_atomic(&self.label_path(sweep, label), v.to_string().as_bytes())
    }

    /// Takes the lock named `name` (a deployment key) or says who holds it.
    pub fn lock(&self, name: &str, what: &str) -> Result<Lock, String> {
        let path = self.root.join("locks").join(format!("{name}.lock"));
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open lock {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {
                let _ = file.set_len(0);
                let _ = (&file).write_all(
                    format!(
                        "pid {} on {} since {}\n",
                        std::process::id(),
                        hostname(),
                        now_rfc3339()
                    )
                    .as_bytes(),
                );
                Ok(Lock { _file: file })
            }
            Err(_) => {
                let holder = fs::read_to_string(&path).unwrap_or_default();
                Err(format!(
                    "{what} is being applied by another bench360 ({}); lock {}",
                    holder.trim(),
                    path.display()
                ))
            }
        }
    }

    pub fn records(&self) -> Vec<Record> {
        let Ok(entries) = fs::read_dir(self.root.join("records")) else {
            return Vec::new();
        };
        let mut out: Vec<Record> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| fs::read_to_string(e.path()).ok())
            .filter_map(|t| serde_json::from_str(&t).ok())
            .collect();
        out.sort_by(|a, b| a.started_at.cmp(&b.started_at));
        out
    }

    pub fn report_dir(&self, sweep: &str) -> PathBuf {
        self.root.join("reports").join(sweep)
    }
}

impl History for Store {
    fn past(&self, key: &str) -> Option<Past> {
        let r = self.record(key)?;
        Some(Past {
            finished: r.status == RecordStatus::Finished,
            failed_cause: (r.status == RecordStatus::Failed).then(|| r.cause.unwrap_or_default()),
            inputs: r.inputs,
        })
    }

    fn last_key(&self, sweep: &str, label: &str) -> Option<String> {
        let text = fs::read_to_string(self.label_path(sweep, label)).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v.get("key")?.as_str().map(String::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, status: RecordStatus) -> Record {
        Record {
            format: 1,
            key: key.into(),
            kind: "run".into(),
            label: "run x".into(),
            sweep: "s".into(),
            status,
            host: hostname(),
            pid: std::process::id(),
            started_at: now_rfc3339(),
            finished_at: None,
            duration_s: None,
            cause: None,
            inputs: KeyInputs::new(),
            outputs: serde_json::Value::Null,
        }
    }

    #[test]
    fn only_finished_records_count_as_cached() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        s.write_record(&record("k1", RecordStatus::Started))
            .unwrap();
        assert!(!s.is_cached("k1"));
        s.write_record(&record("k1", RecordStatus::Finished))
            .unwrap();
        assert!(s.is_cached("k1"));
        assert!(!s.is_cached("k2"));
    }

    #[test]
    fn a_second_lock_holder_is_refused_with_the_holder_named() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let _held = s.lock("dep", "deployment x").unwrap();
        // flock locks are per open file description: a second open conflicts even in-process.
        let err = s.lock("dep", "deployment x").unwrap_err();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
    }

    #[test]
    fn leftovers_of_dead_processes_are_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let dead = dir
            .path()
            .join("tmp")
            .join(format!("999999999.{}.k.1", hostname()));
        let other_host = dir.path().join("tmp").join("1.some-other-host.k.1");
        fs::create_dir_all(&dead).unwrap();
        fs::create_dir_all(&other_host).unwrap();
        drop(s);
        Store::open(dir.path()).unwrap();
        assert!(!dead.exists());
        assert!(other_host.exists());
    }

    #[test]
    fn refuses_a_cache_of_another_format() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("FORMAT"), "bench360-store 999\n").unwrap();
        let err = Store::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("999"), "{err}");
    }
}
