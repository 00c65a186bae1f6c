//! The compile caches of a process engine, as they stand before it starts. A Python engine's
//! first start on a machine compiles (vLLM's torch.compile graphs, Triton kernels,
//! TorchInductor code) and leaves the results in folders its next start reads: in the seed
//! study, vLLM's second start on one machine took 72 s to healthy against 105 s for the first
//! (torch.compile 4.5 s from the cache against 18.4 s). A cold start records what those
//! folders held, so that the report does not pool first starts with repeated ones unsaid.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::spec::{catalog::CompileCache, Engine, Launch};

/// One compile cache before a start: its folder and the bytes in it (0: absent or empty).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct CacheState {
    pub path: String,
    pub bytes: u64,
}

/// Where a cache lives for a process whose environment is `var` (the engine's own
/// variables first, then bench360's, which the process inherits). None when a placeholder
/// the default needs is not set.
fn folder(
    c: &CompileCache,
    var: &dyn Fn(&str) -> Option<String>,
    account: &Account,
) -> Option<PathBuf> {
    let var = |k: &str| var(k).filter(|v| !v.is_empty());
    // As Python's `expanduser` reads `~`: HOME, else the account's home folder.
    let home = || var("HOME").or_else(|| account.home.clone());
    if let Some(v) = var(c.env) {
        // As Python's `expanduser` reads it.
        return match v.strip_prefix("~/") {
            Some(rest) => Some(PathBuf::from(home()?).join(rest)),
            None if v == "~" => home().map(PathBuf::from),
            None => Some(PathBuf::from(v)),
        };
    }
    let mut out = c.default.to_string();
    if out.contains("{cache}") {
        let cache = var("XDG_CACHE_HOME").or_else(|| home().map(|h| format!("{h}/.cache")))?;
        out = out.replace("{cache}", &cache);
    }
    if out.contains("{home}") {
        out = out.replace("{home}", &home()?);
    }
    if out.contains("{tmp}") {
        let tmp = var("TMPDIR").unwrap_or_else(|| "/tmp".into());
        out = out.replace("{tmp}", tmp.trim_end_matches('/'));
    }
    if out.contains("{user}") {
        // As Python's `getpass.getuser` reads it (torch's default folder): the first of its
        // variables that is set, else the account's name (a machine whose shell sets no USER,
        // as the study's GPU machines did: without this fallback the folder went unchecked).
        let user = ["LOGNAME", "USER", "LNAME", "USERNAME"]
            .iter()
            .find_map(|k| var(k))
            .or_else(|| account.name.clone())?;
        out = out.replace("{user}", &user);
    }
    Some(PathBuf::from(out))
}

/// Bytes of the regular files under the folder `p` — itself a link or not (a cache moved to
/// a larger disk) — links inside it not followed (0 when it is absent).
fn bytes_in(p: &Path) -> u64 {
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| bytes_under(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) if m.is_file() => m.len(),
        _ => 0,
    }
}

/// Bytes of the regular files under `p`, links not followed.
fn bytes_under(p: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if meta.is_file() {
        return meta.len();
    }
    if !meta.is_dir() {
        return 0;
    }
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| bytes_under(&e.path())).sum())
        .unwrap_or(0)
}

/// The compile caches the catalog lists for the engine, as its process would find them now;
/// None for a container or an endpoint (their caches are not folders of this machine) and
/// for an engine that keeps none.
pub(crate) fn before_start(engine: &Engine) -> Option<Vec<CacheState>> {
    if !matches!(engine.launch, Launch::Process { .. }) || engine.catalog.compile_caches.is_empty()
    {
        return None;
    }
    let var = |k: &str| {
        engine
            .env
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(k).ok())
    };
    states(engine.catalog.compile_caches, &var, &Account::of_process())
}

/// The process's account in the password database: what Python falls back to when the
/// environment names no user or home (`getpass.getuser`, `expanduser`). A process engine runs
/// as bench360's own user, so this is its account too.
#[derive(Debug, Default, Clone)]
struct Account {
    name: Option<String>,
    home: Option<String>,
}

impl Account {
    fn of_process() -> Account {
        // SAFETY: getpwuid_r writes only into `pw` and `buf`, whose sizes it is given; the
        // strings it points `pw` at live in `buf`, which outlives their reads below.
        unsafe {
            let mut pw: libc::passwd = std::mem::zeroed();
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            let mut buf = vec![0 as libc::c_char; 16 * 1024];
            loop {
                let rc = libc::getpwuid_r(
                    libc::getuid(),
                    &mut pw,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut found,
                );
                // An entry larger than the buffer: a larger one (up to 1 MiB), as glibc advises.
                if rc == libc::ERANGE && buf.len() < 1 << 20 {
                    buf = vec![0; buf.len() * 2];
                    continue;
                }
                if rc != 0 || found.is_null() {
                    return Account::default();
                }
                break;
            }
            let text = |p: *const libc::c_char| {
                (!p.is_null())
                    .then(|| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
                    .filter(|s| !s.is_empty())
            };
            Account {
                name: text(pw.pw_name),
                home: text(pw.pw_dir),
            }
        }
    }
}

fn states(
    caches: &[CompileCache],
    var: &dyn Fn(&str) -> Option<String>,
    account: &Account,
) -> Option<Vec<CacheState>> {
    let mut out: Vec<CacheState> = Vec::new();
    for c in caches {
        let Some(f) = folder(c, var, account) else {
            continue;
        };
        let path = f.display().to_string();
        if !out.iter().any(|s| s.path == path) {
            out.push(CacheState {
                bytes: bytes_in(&f),
                path,
            });
        }
    }
    (!out.is_empty()).then_some(out)
}

/// What a start's compile caches held in all, in MB.
pub(crate) fn megabytes(states: &[CacheState]) -> f64 {
    states.iter().map(|s| s.bytes).sum::<u64>() as f64 / 1e6
}

/// Whether a start found any of its compile caches non-empty: filled by an earlier start of
/// it, or of another model or engine that shares them (Triton's and TorchInductor's are every
/// PyTorch engine's).
pub(crate) fn warm(states: &[CacheState]) -> bool {
    states.iter().any(|s| s.bytes > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    /// No account to fall back to: only the environment names folders.
    const NOBODY: Account = Account {
        name: None,
        home: None,
    };

    /// A machine whose environment sets neither USER nor HOME (the seed study's GPU machines
    /// set no USER): the folders are those Python finds through the password database.
    #[test]
    fn without_user_or_home_the_account_names_them() {
        let vllm = crate::spec::catalog::lookup("vllm").unwrap().compile_caches;
        let account = Account {
            name: Some("root".into()),
            home: Some("/root".into()),
        };
        let e = env(&[]);
        let paths: Vec<PathBuf> = vllm
            .iter()
            .filter_map(|c| folder(c, &e, &account))
            .collect();
        assert_eq!(
            paths,
            [
                PathBuf::from("/root/.cache/vllm"),
                PathBuf::from("/root/.triton/cache"),
                PathBuf::from("/tmp/torchinductor_root"),
            ]
        );
        // The environment still comes first, in getpass's order (LNAME, USERNAME too).
        let e = env(&[("HOME", "/home/u"), ("USERNAME", "u")]);
        assert_eq!(
            folder(&vllm[2], &e, &account),
            Some(PathBuf::from("/tmp/torchinductor_u"))
        );
        assert_eq!(
            folder(&vllm[1], &e, &account),
            Some(PathBuf::from("/home/u/.triton/cache"))
        );
    }

    /// The account is this process's entry in /etc/passwd (name and home by its uid).
    #[test]
    fn the_account_is_the_process_uid_s_entry() {
        let uid = unsafe { libc::getuid() }.to_string();
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
        let Some(line) = passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() >= 6 && f[2] == uid)
        else {
            // An account from another source (LDAP, NSS): not in the file to compare with.
            return;
        };
        let a = Account::of_process();
        assert_eq!(a.name.as_deref(), Some(line[0]));
        assert_eq!(a.home.as_deref(), Some(line[5]));
    }

    #[test]
    fn folders_resolve_as_each_library_resolves_its_own() {
        let vllm = crate::spec::catalog::lookup("vllm").unwrap().compile_caches;
        let vars = [("HOME", "/home/u"), ("USER", "u")];
        let e = env(&vars);
        let paths: Vec<PathBuf> = vllm.iter().filter_map(|c| folder(c, &e, &NOBODY)).collect();
        assert_eq!(
            paths,
            [
                PathBuf::from("/home/u/.cache/vllm"),
                PathBuf::from("/home/u/.triton/cache"),
                PathBuf::from("/tmp/torchinductor_u"),
            ]
        );
        // The engine's variables name the folder; XDG_CACHE_HOME and TMPDIR move the defaults.
        let vars = [
            ("HOME", "/home/u"),
            ("USER", "u"),
            ("VLLM_CACHE_ROOT", "/scratch/vllm"),
            ("XDG_CACHE_HOME", "/xdg"),
            ("TMPDIR", "/fast/tmp/"),
        ];
        let e = env(&vars);
        let paths: Vec<PathBuf> = vllm.iter().filter_map(|c| folder(c, &e, &NOBODY)).collect();
        assert_eq!(paths[0], PathBuf::from("/scratch/vllm"));
        assert_eq!(paths[2], PathBuf::from("/fast/tmp/torchinductor_u"));
        // Without the variables a default needs, that cache is not guessed.
        let e = env(&[]);
        assert_eq!(
            vllm.iter().filter_map(|c| folder(c, &e, &NOBODY)).count(),
            0
        );
        // SGLang's kernels built through TVM-FFI: `~/.cache/tvm-ffi` whatever XDG says.
        let sglang = crate::spec::catalog::lookup("sglang")
            .unwrap()
            .compile_caches;
        let vars = [
            ("HOME", "/home/u"),
            ("USER", "u"),
            ("XDG_CACHE_HOME", "/xdg"),
        ];
        let e = env(&vars);
        let paths: Vec<PathBuf> = sglang
            .iter()
            .filter_map(|c| folder(c, &e, &NOBODY))
            .collect();
        assert_eq!(paths[0], PathBuf::from("/home/u/.cache/tvm-ffi"));
        let vars = [("HOME", "/home/u"), ("TVM_FFI_CACHE_DIR", "/scratch/tvm")];
        let e = env(&vars);
        assert_eq!(
            folder(&sglang[0], &e, &NOBODY),
            Some(PathBuf::from("/scratch/tvm"))
        );
        // llama.cpp keeps none.
        assert!(crate::spec::catalog::lookup("llama.cpp")
            .unwrap()
            .compile_caches
            .is_empty());
    }

    #[test]
    fn a_filled_cache_is_counted_an_absent_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap().to_string();
        std::fs::create_dir_all(dir.path().join("vllm/torch_compile_cache/x")).unwrap();
        std::fs::write(
            dir.path().join("vllm/torch_compile_cache/x/graph"),
            [0u8; 1000],
        )
        .unwrap();
        std::fs::write(dir.path().join("vllm/a"), [0u8; 24]).unwrap();
        let vllm = crate::spec::catalog::lookup("vllm").unwrap().compile_caches;
        let (v, t) = (format!("{root}/vllm"), format!("{root}/triton"));
        let vars = [
            ("VLLM_CACHE_ROOT", v.as_str()),
            ("TRITON_CACHE_DIR", t.as_str()),
            ("TORCHINDUCTOR_CACHE_DIR", v.as_str()),
        ];
        let e = env(&vars);
        let st = states(vllm, &e, &NOBODY).unwrap();
        // The inductor folder is vLLM's here: listed once.
        assert_eq!(
            st,
            [
                CacheState {
                    path: format!("{root}/vllm"),
                    bytes: 1024
                },
                CacheState {
                    path: format!("{root}/triton"),
                    bytes: 0
                },
            ]
        );
        assert!(warm(&st));
        assert!(!warm(&st[1..]));
        // A cache folder that is a link (moved to a larger disk) is read through the link.
        let link = dir.path().join("vllm-link");
        std::os::unix::fs::symlink(dir.path().join("vllm"), &link).unwrap();
        assert_eq!(bytes_in(&link), 1024);
        // A link inside it is not followed (no loop, no bytes counted twice).
        std::os::unix::fs::symlink(dir.path(), dir.path().join("vllm/loop")).unwrap();
        assert_eq!(bytes_in(&link), 1024);
    }

    #[test]
    fn empty_variables_are_unset_and_a_tilde_is_the_home_folder() {
        let caches = crate::spec::catalog::lookup("vllm").unwrap().compile_caches;
        let vars = [
            ("HOME", "/home/u"),
            ("USER", ""),
            ("LOGNAME", "u"),
            ("VLLM_CACHE_ROOT", "~/vllm-cache"),
            ("TRITON_CACHE_DIR", ""),
        ];
        let e = env(&vars);
        let paths: Vec<PathBuf> = caches
            .iter()
            .filter_map(|c| folder(c, &e, &NOBODY))
            .collect();
        assert_eq!(
            paths,
            [
                PathBuf::from("/home/u/vllm-cache"),
                PathBuf::from("/home/u/.triton/cache"),
                PathBuf::from("/tmp/torchinductor_u"),
            ]
        );
    }
}
