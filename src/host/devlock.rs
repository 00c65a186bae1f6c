//! Machine-wide locks on the devices a deployment measures on, so that two applies on one
//! machine — with different caches, different sweeps, or Slurm jobs sharing a node — never
//! run their engines on one device at once and both record their numbers as if alone.
//!
//! Each claim is an `flock` on a file of one folder of the machine (`BENCH360_DEVICE_LOCKS`,
//! by default `/tmp/bench360-devices`): a deployment that takes
//! the whole machine holds `machine.lock` exclusively; one that names its devices holds it
//! shared and each of its `gpu-<id>.lock` and `cpu-<n>.lock` exclusively; a deployment served
//! by an endpoint holds `endpoint-<hash of its URL>.lock`, so two load tests never meet on one
//! server. Claims are taken all or nothing (a set partly held is let go at once), so two
//! appliers never hold halves of each other's sets. The kernel lets go of a lock when its
//! process dies, however it dies.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// One device (or server) a deployment measures on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Claim {
    /// The whole machine (a deployment that names no devices).
    Machine,
    /// A GPU, as the node numbers it (an index or a UUID).
    Gpu(String),
    /// A CPU, as the kernel numbers it.
    Cpu(u32),
    /// A server bench360 does not start, by its URL.
    Endpoint(String),
}

impl Claim {
    fn file_name(&self) -> String {
        match self {
            Claim::Machine => "machine.lock".into(),
            Claim::Gpu(id) => format!("gpu-{}.lock", safe(id)),
            Claim::Cpu(n) => format!("cpu-{n}.lock"),
            Claim::Endpoint(url) => format!(
                "endpoint-{}.lock",
                &blake3::hash(url.as_bytes()).to_hex()[..16]
            ),
        }
    }

    /// How a person names it.
    pub fn describe(&self) -> String {
        match self {
            Claim::Machine => "the whole machine".into(),
            Claim::Gpu(id) => format!("GPU {id}"),
            Claim::Cpu(n) => format!("CPU {n}"),
            Claim::Endpoint(url) => format!("endpoint {url}"),
        }
    }
}

/// A name made of characters safe in a file name.
fn safe(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The claims of a deployment: exclusive ones, and `machine.lock` shared beside devices.
/// `gpus`: the node's ids of its GPUs; `cpus`: its CPUs; `endpoint`: the URL it is served at.
/// Nothing named: the whole machine.
pub(crate) fn claims(
    gpus: Option<&[String]>,
    cpus: Option<&[u32]>,
    endpoint: Option<&str>,
) -> Vec<Claim> {
    let mut out: Vec<Claim> = gpus
        .unwrap_or_default()
        .iter()
        .map(|g| Claim::Gpu(g.clone()))
        .chain(cpus.unwrap_or_default().iter().map(|&c| Claim::Cpu(c)))
        .chain(endpoint.map(|u| Claim::Endpoint(u.to_string())))
        .collect();
    if gpus.is_none() && cpus.is_none() && endpoint.is_none() {
        out.push(Claim::Machine);
    }
    out.sort();
    out.dedup();
    out
}

/// The folder of the machine's device locks; None when `BENCH360_DEVICE_LOCKS=off`. The
/// default is a fixed path, never `$TMPDIR`'s (a Slurm job or a user may have their own).
pub(crate) fn folder() -> Option<PathBuf> {
    match std::env::var_os("BENCH360_DEVICE_LOCKS") {
        Some(v) if v == "off" => None,
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => Some(PathBuf::from(DEFAULT_FOLDER)),
    }
}

/// Where the locks are unless `BENCH360_DEVICE_LOCKS` says otherwise.
pub(crate) const DEFAULT_FOLDER: &str = "/tmp/bench360-devices";

/// The locks a deployment holds while its engine runs; dropped, they are let go.
#[derive(Debug)]
pub(crate) struct Held {
    _files: Vec<File>,
}

/// What trying a set of claims found.
#[derive(Debug)]
pub(crate) enum Attempt {
    Held(Held),
    /// Another process holds one of them: which, and who (pid, host, since when, what;
    /// empty while the holder has not written itself yet).
    Busy {
        claim: Claim,
        holder: String,
    },
}

/// Why a set of locks could not be used: a folder that cannot be made or a filesystem
/// without `flock` (`refused` false: the apply goes on without locks, and says so), or a
/// folder or lock file that cannot or must not be used — a symbolic link, a file with several
/// names, a FIFO, a file or folder it may not open, another user's folder that anyone may
/// write — (`refused`: the deployment fails; locking is never switched off by what another
/// user put there).
#[derive(Debug, thiserror::Error)]
#[error("device lock {}: {source}", path.display())]
pub(crate) struct LockUnusable {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
    pub refused: bool,
}

/// Makes the folder, open to every user of the machine (sticky, as /tmp is): another user's
/// apply must be able to take the same locks. A folder that is a symbolic link, or that
/// another user owns and every user may write without the sticky bit, is refused. (Its owner
/// can always replace the files in it — and so disturb the locking, as anyone can by not
/// taking the locks — but never make bench360 write to or read from another file.)
fn make_folder(dir: &Path) -> Result<(), LockUnusable> {
    let fail = |source, refused| LockUnusable {
        path: dir.to_path_buf(),
        source,
        refused,
    };
    if fs::symlink_metadata(dir).is_err() {
        match fs::DirBuilder::new()
            .recursive(true)
            .mode(0o1777)
            .create(dir)
        {
            // The umask narrowed the mode.
            Ok(()) => {
                let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o1777));
            }
            Err(_) if dir.is_dir() => {}
            Err(e) => return Err(fail(e, false)),
        }
    }
    let m = fs::symlink_metadata(dir).map_err(|e| fail(e, false))?;
    let refuse = |why: &str| {
        Err(fail(
            std::io::Error::other(format!(
                "{why}: refused (set BENCH360_DEVICE_LOCKS to a folder of your own, or have root make {DEFAULT_FOLDER} with mode 1777)"
            )),
            true,
        ))
    };
    if !m.file_type().is_dir() {
        return refuse("not a folder (a symbolic link?)");
    }
    let me = unsafe { libc::geteuid() };
    if m.uid() != me && m.mode() & 0o002 != 0 && m.mode() & 0o1000 == 0 {
        return refuse("another user's folder that every user may write, without the sticky bit");
    }
    Ok(())
}

/// Flags of every open of a lock file: never through a symbolic link, never blocking (a FIFO
/// planted in its place must not hang the apply).
const OPEN_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;

/// Makes the lock file `path` if it is missing, open to every user from its first instant:
/// written under a name of its own, made 0666, then renamed into place unless another process
/// made it first (that one is kept). Without a window in which another user's umask leaves
/// it private.
fn create(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o666)
        .custom_flags(OPEN_FLAGS)
        .open(&tmp)?;
    let made = f
        .set_permissions(fs::Permissions::from_mode(0o666))
        .and_then(|()| {
            let from = std::ffi::CString::new(tmp.as_os_str().as_bytes())?;
            let to = std::ffi::CString::new(path.as_os_str().as_bytes())?;
            // SAFETY: both are valid NUL-terminated paths.
            let rc = unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    from.as_ptr(),
                    libc::AT_FDCWD,
                    to.as_ptr(),
                    libc::RENAME_NOREPLACE,
                )
            };
            match rc {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    match made {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            match e.raw_os_error() {
                // Made by another process meanwhile: theirs is the lock.
                Some(libc::EEXIST) => Ok(()),
                // A filesystem without the no-replace rename: made in place (the umask then
                // narrows it until it is made 0666 below).
                Some(libc::EINVAL | libc::ENOSYS) => match OpenOptions::new()
                    .create_new(true)
                    .write(true)
                    .mode(0o666)
                    .custom_flags(OPEN_FLAGS)
                    .open(path)
                {
                    Ok(f) => f.set_permissions(fs::Permissions::from_mode(0o666)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                    Err(e) => Err(e),
                },
                _ => Err(e),
            }
        }
    }
}

/// Opens a lock file, made if missing ([`create`]): for writing its holder when it can be,
/// else read only (`flock` needs no write access). An existing file is opened without
/// `O_CREAT`, so that the kernel's protection of other users' files in sticky folders does not
/// stand in the way. Anything but a plain file with one name is refused: a link planted in a
/// shared folder must not make bench360 write to what it points at. Every failure here is a
/// refusal (the caller fails the deployment): what another user put there never switches the
/// locking off.
fn open(path: &Path) -> std::io::Result<(File, bool)> {
    let rw = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(OPEN_FLAGS)
            .open(path)
    };
    let first = match rw() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            create(path)?;
            rw()
        }
        other => other,
    };
    let (file, writable) = match first {
        Ok(f) => (f, true),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => (
            OpenOptions::new()
                .read(true)
                .custom_flags(OPEN_FLAGS)
                .open(path)?,
            false,
        ),
        Err(e) => return Err(e),
    };
    let m = file.metadata()?;
    if !m.file_type().is_file() || m.nlink() != 1 {
        return Err(std::io::Error::other(
            "not a plain file with one name: refused",
        ));
    }
    if m.uid() == unsafe { libc::geteuid() } {
        let _ = file.set_permissions(fs::Permissions::from_mode(0o666));
    }
    Ok((file, writable))
}

/// Who holds a lock, as its holder wrote it: read from the file already opened and checked
/// (never by its name again), at most 4 KiB, one line.
fn holder_of(file: &File) -> String {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 4096];
    let n = file.read_at(&mut buf, 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .collect::<String>()
        .trim()
        .to_string()
}

/// Tries to take every claim at once, without waiting: all of them held, or none and who
/// holds the first one taken. Each lock taken is emptied at once (what an earlier holder, or
/// an attempt that failed, wrote is stale); `holder` is written into each lock held
/// exclusively once all are held, for whoever finds it taken.
pub(crate) fn attempt(dir: &Path, claims: &[Claim], holder: &str) -> Result<Attempt, LockUnusable> {
    make_folder(dir)?;
    let devices = claims
        .iter()
        .any(|c| matches!(c, Claim::Gpu(_) | Claim::Cpu(_)));
    let mut wanted: Vec<(Claim, bool)> = claims.iter().map(|c| (c.clone(), true)).collect();
    if devices {
        // A set of devices shares the machine with other sets, never with the whole of it.
        wanted.insert(0, (Claim::Machine, false));
    }
    let mut files = Vec::new();
    for (claim, exclusive) in wanted {
        let path = dir.join(claim.file_name());
        let fail = |source, refused| LockUnusable {
            path: path.clone(),
            source,
            refused,
        };
        let (file, writable) = open(&path).map_err(|e| fail(e, true))?;
        let got = if exclusive {
            file.try_lock()
        } else {
            file.try_lock_shared()
        };
        match got {
            Ok(()) => {
                if writable {
                    let _ = file.set_len(0);
                }
                files.push((file, writable, exclusive));
            }
            Err(fs::TryLockError::WouldBlock) => {
                // Empty: its holder has not written itself yet, or holds it shared.
                return Ok(Attempt::Busy {
                    claim,
                    holder: holder_of(&file),
                });
            }
            // A filesystem without flock: the locks cannot work here (said, and the apply goes
            // on without them); any other failure is a refusal.
            Err(fs::TryLockError::Error(e)) => {
                let unsupported = matches!(
                    e.raw_os_error(),
                    Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS)
                );
                return Err(fail(e, !unsupported));
            }
        }
    }
    for (file, writable, exclusive) in &files {
        if *writable && *exclusive {
            let _ = (&*file).write_all(format!("{holder}\n").as_bytes());
        }
    }
    Ok(Attempt::Held(Held {
        _files: files.into_iter().map(|f| f.0).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn take(dir: &Path, c: &[Claim]) -> Option<Held> {
        match attempt(dir, c, "pid 1 on test since now: deployment a").unwrap() {
            Attempt::Held(h) => Some(h),
            Attempt::Busy { .. } => None,
        }
    }

    #[test]
    fn claims_name_devices_or_the_whole_machine() {
        assert_eq!(claims(None, None, None), vec![Claim::Machine]);
        assert_eq!(
            claims(Some(&gpus(&["1", "0"])), Some(&[3]), None),
            vec![
                Claim::Gpu("0".into()),
                Claim::Gpu("1".into()),
                Claim::Cpu(3)
            ]
        );
        assert_eq!(
            claims(None, None, Some("http://127.0.0.1:8000/v1")),
            vec![Claim::Endpoint("http://127.0.0.1:8000/v1".into())]
        );
        assert_eq!(
            Claim::Gpu("GPU-1a2b/../x".into()).file_name(),
            "gpu-GPU-1a2b____x.lock"
        );
    }

    #[test]
    fn overlapping_sets_exclude_each_other_and_disjoint_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("locks");
        let g0 = claims(Some(&gpus(&["0"])), None, None);
        let g1 = claims(Some(&gpus(&["1"])), None, None);
        let g01 = claims(Some(&gpus(&["0", "1"])), None, None);
        let whole = claims(None, None, None);
        // flock locks belong to open file descriptions: a second open conflicts in-process.
        let a = take(&d, &g0).expect("free");
        assert!(
            take(&d, &g1).is_some(),
            "disjoint GPUs run beside each other"
        );
        assert!(take(&d, &g01).is_none(), "GPU 0 is held");
        assert!(
            take(&d, &whole).is_none(),
            "the whole machine waits for GPU 0"
        );
        drop(a);
        let w = take(&d, &whole).expect("free again");
        assert!(take(&d, &g1).is_none(), "a set waits for the whole machine");
        match attempt(&d, &g1, "me").unwrap() {
            Attempt::Busy { claim, holder } => {
                assert_eq!(claim, Claim::Machine);
                assert_eq!(holder, "pid 1 on test since now: deployment a");
            }
            Attempt::Held(_) => panic!("held twice"),
        }
        drop(w);
        // Held shared by a set of devices, the machine's lock keeps no stale holder.
        let g = take(&d, &g0).unwrap();
        match attempt(&d, &whole, "me").unwrap() {
            Attempt::Busy { claim, holder } => {
                assert_eq!((claim, holder.as_str()), (Claim::Machine, ""))
            }
            Attempt::Held(_) => panic!("held twice"),
        }
        drop(g);
        // A set partly held is let go: GPU 1 is free after a failed attempt at {0, 1}.
        let a = take(&d, &g0).unwrap();
        assert!(take(&d, &g01).is_none());
        assert!(take(&d, &g1).is_some());
        drop(a);
    }

    #[test]
    fn an_endpoint_is_claimed_by_its_url_beside_the_machine() {
        let dir = tempfile::tempdir().unwrap();
        let e = claims(None, None, Some("http://10.0.0.1:8000/v1"));
        let a = take(dir.path(), &e).unwrap();
        assert!(take(dir.path(), &e).is_none(), "one load test per server");
        assert!(take(
            dir.path(),
            &claims(None, None, Some("http://10.0.0.2:8000/v1"))
        )
        .is_some());
        assert!(
            take(dir.path(), &claims(None, None, None)).is_some(),
            "a remote server does not take this machine"
        );
        drop(a);
    }

    #[test]
    fn the_folder_is_open_to_every_user() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("a/b");
        let _h = take(&d, &claims(None, None, None)).unwrap();
        let mode = fs::metadata(&d).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o1777);
        let f = fs::metadata(d.join("machine.lock")).unwrap().permissions();
        assert_eq!(f.mode() & 0o777, 0o666);
    }

    #[test]
    fn a_link_planted_in_the_folder_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("locks");
        fs::create_dir(&d).unwrap();
        let precious = dir.path().join("precious");
        fs::write(&precious, "keep me").unwrap();
        fs::set_permissions(&precious, fs::Permissions::from_mode(0o600)).unwrap();
        let g0 = claims(Some(&gpus(&["0"])), None, None);
        std::os::unix::fs::symlink(&precious, d.join("gpu-0.lock")).unwrap();
        assert!(attempt(&d, &g0, "me").unwrap_err().refused);
        fs::remove_file(d.join("gpu-0.lock")).unwrap();
        fs::hard_link(&precious, d.join("gpu-0.lock")).unwrap();
        let e = attempt(&d, &g0, "me").unwrap_err();
        assert!(e.refused && e.to_string().contains("one name"), "{e}");
        assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me");
        let mode = fs::metadata(&precious).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // The folder itself a link: refused.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        let e = attempt(&link, &claims(None, None, None), "me").unwrap_err();
        assert!(e.refused && e.to_string().contains("not a folder"), "{e}");
        // A FIFO in a lock's place: refused at once, not waited on.
        fs::remove_file(d.join("gpu-0.lock")).unwrap();
        let fifo = std::ffi::CString::new(d.join("gpu-0.lock").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        assert!(attempt(&d, &g0, "me").unwrap_err().refused);
    }
}
