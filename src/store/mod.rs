//! The cache directory: per-node records (the journal), node objects, per-deployment locks,
//! crash leftovers. Every file becomes visible by an atomic rename of a complete temp file,
//! and no file is appended to by several processes, so many hosts may share one cache on a
//! network filesystem. Assumed of that filesystem (docs/cluster.md, "The shared filesystem"): rename within a
//! directory is atomic; close-to-open consistency (a file renamed into place after `fsync` is
//! read whole by any host that opens it afterwards); `flock` locks hold across hosts (NFSv4
//! does; NFSv3 needs lockd). Temp files are hidden (`.tmp.<pid>.<n>.<host>.<name>`), so a
//! reader never mistakes another host's half-written file for a record.

pub(crate) mod flatten;
pub(crate) mod keys;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::host::{hostname, now_rfc3339, pid_alive};
pub(crate) use keys::KeyInputs;

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
    /// The node's object, file by file (path relative to `objects/<key>/`): size and blake3,
    /// as written. Reading checks the sizes; `bench360 verify` the hashes too. Records
    /// written before this field existed have none (their objects are taken as they are).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub objects: BTreeMap<String, ObjectFile>,
}

/// One file of a node's object, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ObjectFile {
    pub size: u64,
    pub blake3: String,
}

/// A finished node whose object no longer is what was written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("damaged object: {0}")]
pub(crate) struct DamagedObject(pub String);

/// What reading a record found.
#[derive(Debug, Clone)]
pub(crate) enum RecordRead {
    Missing,
    /// The file is there but is not a whole record (truncated, garbage).
    Damaged(String),
    Ok(Box<Record>),
}

#[derive(Debug, Clone)]
pub(crate) struct Store {
    root: PathBuf,
}

/// A hidden temp path beside `path`, unique per host, process and call:
/// `.tmp.<pid>.<n>.<host>.<file name>`. Readers skip dot files; [`Store::open`] removes the
/// leftovers of this host's dead processes.
pub(crate) fn temp_beside(path: &Path) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = path.parent().expect("path has a parent");
    dir.join(format!(
        ".tmp.{}.{n}.{}.{}",
        std::process::id(),
        hostname(),
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
    ))
}

/// The pid that wrote a temp file of [`temp_beside`] on this host, if it is one of ours.
fn temp_owner_here(name: &str, host: &str) -> Option<u32> {
    let rest = name.strip_prefix(".tmp.")?;
    let (pid, rest) = rest.split_once('.')?;
    let (_seq, rest) = rest.split_once('.')?;
    rest.strip_prefix(host)?.strip_prefix('.')?;
    pid.parse().ok()
}

/// Writes `bytes` to `path` atomically: a temp file beside it, fsync, rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_beside(path);
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    match written.and_then(|()| fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let mut h = blake3::Hasher::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(h.finalize().to_hex().to_string())
}

fn seal_dir(
    root: &Path,
    dir: &Path,
    out: &mut BTreeMap<String, ObjectFile>,
) -> std::io::Result<()> {
    for e in fs::read_dir(dir)? {
        let e = e?;
        let path = e.path();
        if e.file_type()?.is_dir() {
            seal_dir(root, &path, out)?;
        } else {
            let f = File::open(&path)?;
            f.sync_all()?;
            let rel = path
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .into_owned();
            out.insert(
                rel,
                ObjectFile {
                    size: f.metadata()?.len(),
                    blake3: hash_file(&path)?,
                },
            );
        }
    }
    File::open(dir)?.sync_all()
}

/// A held per-deployment lock; released on drop (and by the kernel if the process dies).
#[derive(Debug)]
pub(crate) struct Lock {
    _file: File,
}

#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum LockError {
    /// Another process holds it: who (pid, host, since when).
    #[error("held by {0}")]
    Held(String),
    #[error("{0}")]
    Io(String),
    /// A deployment's lock is held by another applier.
    #[error("{what} is being applied by another bench360 ({holder}); lock {path}")]
    Busy {
        what: String,
        holder: String,
        path: String,
    },
}

/// An exclusive `flock` on `path` (created if missing), with the holder's pid, host and time
/// written into it for whoever finds it taken. Without `wait`, a held lock is
/// [`LockError::Held`]; with it, `wait` is told the holder once and the call blocks.
/// On NFS, Linux implements `flock` with POSIX byte-range locks, which NFSv4 (and NFSv3 with
/// lockd) hold across hosts; the kernel (or the server's lease) releases them when the
/// process dies.
pub(crate) fn lock_file(
    path: &Path,
    wait: Option<&mut dyn FnMut(&str)>,
) -> Result<Lock, LockError> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| LockError::Io(format!("cannot open lock {}: {e}", path.display())))?;
    let unsupported = |e: std::io::Error| {
        LockError::Io(format!(
            "cannot lock {}: {e} (the cache's filesystem must support flock: docs/cluster.md, \"The shared filesystem\")",
            path.display()
        ))
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let holder = fs::read_to_string(path)
                .unwrap_or_default()
                .trim()
                .to_string();
            match wait {
                None => return Err(LockError::Held(holder)),
                Some(w) => {
                    w(&holder);
                    file.lock().map_err(unsupported)?;
                }
            }
        }
        Err(fs::TryLockError::Error(e)) => return Err(unsupported(e)),
    }
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

/// A cache that cannot be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    #[error("failed to create cache directory {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cache {} has format {found:?}, this bench360 writes {want:?}; use another --cache directory", root.display())]
    Format {
        root: PathBuf,
        found: String,
        want: String,
    },
}

impl Store {
    pub fn open(root: &Path) -> Result<Store, OpenError> {
        let create = |path: PathBuf| move |source| OpenError::Create { path, source };
        for d in [
            "locks", "records", "objects", "tmp", "labels", "reports", "hashes",
        ] {
            fs::create_dir_all(root.join(d)).map_err(create(root.join(d)))?;
        }
        let version = root.join("FORMAT");
        let want = format!("bench360-store {STORE_FORMAT}\n");
        match fs::read_to_string(&version) {
            Ok(v) if v == want => {}
            Ok(v) => {
                return Err(OpenError::Format {
                    root: root.to_path_buf(),
                    found: v.trim().to_string(),
                    want: want.trim().to_string(),
                })
            }
            Err(_) => write_atomic(&version, want.as_bytes()).map_err(create(version.clone()))?,
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

    /// Removes leftovers of interrupted nodes and writes: temp dirs in `tmp/` and hidden temp
    /// files beside records, labels and hashes, of processes on this host that are no longer
    /// alive. Other hosts' leftovers are left to them (their pids mean nothing here).
    fn clean_tmp(&self) {
        let host = hostname();
        let me = std::process::id();
        let dead = |pid: u32| !pid_alive(pid) || pid == me;
        if let Ok(entries) = fs::read_dir(self.root.join("tmp")) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                // `<pid>.<host>.<key>.<nanos>` (see begin_object); hosts may contain dots.
                let Some((pid, rest)) = name.split_once('.') else {
                    continue;
                };
                if rest.starts_with(&format!("{host}.")) && pid.parse::<u32>().is_ok_and(dead) {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
        for d in ["records", "labels", "hashes"] {
            let Ok(entries) = fs::read_dir(self.root.join(d)) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if temp_owner_here(&name, &host).is_some_and(dead) {
                    let _ = fs::remove_file(e.path());
                }
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
        match self.read_record(key) {
            RecordRead::Ok(r) => Some(*r),
            _ => None,
        }
    }

    /// A node's record, telling a missing record from a damaged one.
    pub fn read_record(&self, key: &str) -> RecordRead {
        let path = self.record_path(key);
        match fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => RecordRead::Missing,
            Err(e) => RecordRead::Damaged(format!("cannot read {}: {e}", path.display())),
            Ok(bytes) => match serde_json::from_slice::<Record>(&bytes) {
                Ok(r) => RecordRead::Ok(Box::new(r)),
                Err(e) => RecordRead::Damaged(format!("record {} unreadable: {e}", path.display())),
            },
        }
    }

    /// Finished, with its object in place and whole (sizes as recorded).
    pub fn is_cached(&self, key: &str) -> bool {
        self.record(key).is_some_and(|r| {
            r.status == RecordStatus::Finished && self.check_object(&r, false).is_ok()
        })
    }

    /// Checks a finished node's object against its record: every listed file there with its
    /// size (cheap: what every read does) and, when `hashes`, its blake3 (`bench360 verify`).
    pub fn check_object(&self, r: &Record, hashes: bool) -> Result<(), DamagedObject> {
        let dir = self.object_dir(&r.key);
        for (name, want) in &r.objects {
            let path = dir.join(name);
            let size = fs::metadata(&path)
                .map_err(|e| DamagedObject(format!("{name} is missing ({e})")))?
                .len();
            if size != want.size {
                return Err(DamagedObject(format!(
                    "{name} has {size} bytes, {} were written",
                    want.size
                )));
            }
            if hashes {
                let got = hash_file(&path).map_err(|e| DamagedObject(format!("{name}: {e}")))?;
                if got != want.blake3 {
                    return Err(DamagedObject(format!("{name} does not hash as written")));
                }
            }
        }
        Ok(())
    }

    pub fn write_record(&self, r: &Record) -> std::io::Result<()> {
        write_atomic(
            &self.record_path(&r.key),
            &serde_json::to_vec_pretty(r).expect("serializable"),
        )
    }

    /// Rewrites an existing record file in place, for when the disk is too full for a new
    /// one: compact JSON within the space the file already has (the cause shortened if it
    /// must be), then truncated to its length and fsynced.
    pub fn write_record_in_place(&self, r: &Record) -> std::io::Result<()> {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let path = self.record_path(&r.key);
        let f = fs::OpenOptions::new().write(true).open(&path)?;
        let room = (f.metadata()?.blocks() * 512).max(f.metadata()?.len()) as usize;
        let mut r = r.clone();
        r.inputs.clear();
        let mut bytes = serde_json::to_vec(&r).expect("serializable");
        while bytes.len() > room {
            let cause = r.cause.take().unwrap_or_default();
            if cause.is_empty() {
                return Err(std::io::Error::other("no room for the record"));
            }
            let keep = cause.len().saturating_sub(bytes.len() - room + 8);
            let mut cut = keep.min(cause.len());
            while !cause.is_char_boundary(cut) {
                cut -= 1;
            }
            r.cause = Some(format!("{}…", &cause[..cut]));
            bytes = serde_json::to_vec(&r).expect("serializable");
        }
        f.write_all_at(&bytes, 0)?;
        f.set_len(bytes.len() as u64)?;
        f.sync_all()
    }

    /// The cache's secret salt: 32 random bytes made once (from /dev/urandom) and kept in
    /// `salt` (mode 0600). Engine environment values enter node keys only as blake3 keyed by
    /// it, so a key in a record cannot be checked against guessed values without the cache.
    pub fn secret_salt(&self) -> std::io::Result<[u8; 32]> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.root.join("salt");
        let read = |p: &Path| -> std::io::Result<Option<[u8; 32]>> {
            match fs::read_to_string(p) {
                Ok(t) => {
                    let t = t.trim();
                    let mut out = [0u8; 32];
                    if t.len() != 64 {
                        return Err(std::io::Error::other(format!("{} is damaged", p.display())));
                    }
                    for (i, b) in out.iter_mut().enumerate() {
                        *b = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).map_err(|_| {
                            std::io::Error::other(format!("{} is damaged", p.display()))
                        })?;
                    }
                    Ok(Some(out))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        };
        if let Some(s) = read(&path)? {
            return Ok(s);
        }
        let mut salt = [0u8; 32];
        std::io::Read::read_exact(&mut File::open("/dev/urandom")?, &mut salt)?;
        let hex: String = salt.iter().map(|b| format!("{b:02x}")).collect();
        let tmp = temp_beside(&path);
        {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(hex.as_bytes())?;
            f.sync_all()?;
        }
        // Never replaces a salt another process made first: that one wins, and is read.
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(salt),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                read(&path)?.ok_or_else(|| std::io::Error::other("salt vanished"))
            }
            Err(e) => Err(e),
        }
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

    /// Lists, fsyncs and hashes the files of a complete temp directory (and fsyncs the
    /// directories), so that the record that names them is written only once they are durable.
    pub fn seal_object(&self, tmp: &Path) -> std::io::Result<BTreeMap<String, ObjectFile>> {
        let mut out = BTreeMap::new();
        seal_dir(tmp, tmp, &mut out)?;
        Ok(out)
    }

    /// Moves a complete temp directory into `objects/<key>/`. An object already there is
    /// complete too (it got there the same way): it is either a leftover of a process that died
    /// between its two renames, or another writer's copy of a node nobody locks (the report).
    /// It is moved aside first, so a reader sees the old complete object, none, or the new one,
    /// never a half-deleted one.
    pub fn commit_object(&self, tmp: &Path, key: &str) -> std::io::Result<PathBuf> {
        let dest = self.object_dir(key);
        for _ in 0..20 {
            match fs::rename(tmp, &dest) {
                Ok(()) => return Ok(dest),
                // Taken (possibly by a writer that has moved it aside again since).
                Err(e)
                    if dest.exists()
                        || matches!(
                            e.kind(),
                            std::io::ErrorKind::DirectoryNotEmpty
                                | std::io::ErrorKind::AlreadyExists
                        ) =>
                {
                    let aside = self.begin_object(&format!("replaced-{key}"))?;
                    // Another writer may move it (or put its own) first: then try again.
                    let _ = fs::rename(&dest, aside.join("old"));
                    let _ = fs::remove_dir_all(&aside);
                }
                Err(e) => return Err(e),
            }
        }
        // Writers of the same key keep racing: one of their complete objects stands, and
        // this one, equivalent (same key, same inputs), goes.
        let _ = fs::remove_dir_all(tmp);
        if dest.exists() {
            Ok(dest)
        } else {
            Err(std::io::Error::other(format!(
                "cannot put {} in place",
                dest.display()
            )))
        }
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
    pub fn lock(&self, name: &str, what: &str) -> Result<Lock, LockError> {
        let path = self.root.join("locks").join(format!("{name}.lock"));
        lock_file(&path, None).map_err(|e| match e {
            LockError::Held(holder) => LockError::Busy {
                what: what.to_string(),
                holder,
                path: path.display().to_string(),
            },
            other => other,
        })
    }

    /// Takes the lock named `name`, waiting while another process holds it (`waiting` is
    /// called once, with the holder, before waiting).
    pub fn lock_wait(&self, name: &str, waiting: &mut dyn FnMut(&str)) -> Result<Lock, LockError> {
        let path = self.root.join("locks").join(format!("{name}.lock"));
        lock_file(&path, Some(waiting))
    }

    /// Deletes a node from the cache: its record first (so the node counts as never run at
    /// once, whatever happens next), then its object folder. A node that is not there is not
    /// an error.
    pub fn delete_node(&self, key: &str) -> std::io::Result<()> {
        let gone = |r: std::io::Result<()>| match r {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        gone(fs::remove_file(
            self.root.join("records").join(format!("{key}.json")),
        ))?;
        gone(fs::remove_dir_all(self.object_dir(key)))
    }

    pub fn records(&self) -> Vec<Record> {
        let Ok(entries) = fs::read_dir(self.root.join("records")) else {
            return Vec::new();
        };
        let mut out: Vec<Record> = entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                // Hidden: another process's temp file, possibly half-written.
                !name.starts_with('.') && name.ends_with(".json")
            })
            .filter_map(|e| fs::read_to_string(e.path()).ok())
            .filter_map(|t| serde_json::from_str(&t).ok())
            .collect();
        out.sort_by(|a, b| a.started_at.cmp(&b.started_at));
        out
    }

    /// Checks the whole cache: every record readable, every finished node's object whole
    /// (each file's size and blake3 as recorded). Returns what is damaged, and how many
    /// records were checked.
    pub fn verify(&self) -> (usize, Vec<(String, String)>) {
        let Ok(entries) = fs::read_dir(self.root.join("records")) else {
            return (0, Vec::new());
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.') && n.ends_with(".json"))
            .collect();
        names.sort();
        let mut damaged = Vec::new();
        for name in &names {
            let key = name.trim_end_matches(".json");
            match self.read_record(key) {
                RecordRead::Missing => {}
                RecordRead::Damaged(why) => damaged.push((key.to_string(), why)),
                RecordRead::Ok(r) => {
                    if r.status == RecordStatus::Finished {
                        if let Err(e) = self.check_object(&r, true) {
                            damaged.push((format!("{} ({})", r.label, key), e.to_string()));
                        }
                    }
                }
            }
        }
        (names.len(), damaged)
    }

    /// Key of the last recorded node with this label in this sweep.
    pub fn last_key(&self, sweep: &str, label: &str) -> Option<String> {
        let text = fs::read_to_string(self.label_path(sweep, label)).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v.get("key")?.as_str().map(String::from)
    }

    pub fn report_dir(&self, sweep: &str) -> PathBuf {
        self.root.join("reports").join(sweep)
    }
}

#[cfg(test)]
mod tests;
