//! The installed version of a Python engine, for its pull key.
//!
//! vLLM and SGLang run as `python -m …` and LMDeploy as its console script: the binary's hash
//! is the interpreter's (or the script's, the same for every version), so upgrading the engine
//! under one interpreter would keep every key and reuse the old version's records. When the
//! binary is a Python interpreter, or a script whose `#!` names one, that interpreter is asked
//! for the distribution's version (`importlib.metadata`, which reads the installed metadata
//! without importing the engine: tens of milliseconds), with the engine's own `env` (a
//! `PYTHONPATH` there is what the engine will import from). A wrapper of another kind (a shell
//! script setting `PYTHONPATH`, as `docs/study/` uses) is keyed by its content alone.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the interpreter said of the distribution.
#[derive(Debug, PartialEq)]
pub(crate) enum Installed {
    Version(String),
    /// Not installed as a distribution (a source checkout on `PYTHONPATH`, a test double):
    /// nothing to key beside the binary.
    Absent,
}

/// The Python interpreter behind `binary`: the binary itself when its name (or the name it
/// links to) starts with `python`, or the interpreter of its `#!` line (through `env`).
pub(crate) fn interpreter(binary: &Path) -> Option<Interpreter> {
    let named_python = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("python"))
    };
    if named_python(binary) || std::fs::canonicalize(binary).is_ok_and(|p| named_python(&p)) {
        return Some(Interpreter {
            path: binary.to_path_buf(),
            flags: Vec::new(),
        });
    }
    let mut head = [0u8; 1024];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(binary).ok()?;
        f.read(&mut head).ok()?
    };
    let text = String::from_utf8_lossy(&head[..n]);
    let mut lines = text.lines();
    let line = lines.next()?.strip_prefix("#!")?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    let (program, flags): (PathBuf, Vec<String>) = if first.file_name().is_some_and(|n| n == "env")
    {
        // `env [-S] [-u NAME] [VAR=value] python3 [flags]`
        let mut name = None;
        while let Some(w) = words.next() {
            if w == "-u" {
                words.next();
            } else if !w.starts_with('-') && !w.contains('=') {
                name = Some(w);
                break;
            }
        }
        let program = super::facts::resolve_binary(name?).ok()?;
        (program, words.map(String::from).collect())
    } else if first.file_name().is_some_and(|n| n == "sh") {
        // pip's launcher for a long interpreter path: `#!/bin/sh`, then
        // `'''exec' "PYTHON" "$0" "$@"` on the next line.
        let exec = lines.next()?.strip_prefix("'''exec' \"")?;
        (PathBuf::from(&exec[..exec.find('"')?]), Vec::new())
    } else {
        (first, words.map(String::from).collect())
    };
    named_python(&program).then_some(Interpreter {
        path: program,
        flags,
    })
}

/// A Python interpreter and the flags its `#!` line gives it (`-E`, `-s`, `-I` change what it
/// imports, so the probe runs with them too).
#[derive(Debug, PartialEq)]
pub(crate) struct Interpreter {
    pub path: PathBuf,
    pub flags: Vec<String>,
}

const PROBE: &str = "import importlib.metadata as m, sys\ntry:\n    print('version', m.version(sys.argv[1]))\nexcept m.PackageNotFoundError:\n    print('absent')";

/// Asks `python` for the installed version of `distribution`, with `env` added to its
/// environment. An error (the interpreter does not run, or answers nothing readable within
/// 20 s) blocks the engine's nodes rather than giving it a key that flips with the next try.
pub(crate) fn installed(
    python: &Interpreter,
    distribution: &str,
    env: &[(String, String)],
) -> Result<Installed, super::Unavailable> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let out = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            tokio::process::Command::new(&python.path)
                .args(&python.flags)
                .args(["-c", PROBE, distribution])
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
    });
    let why = |cause: String| {
        format!(
            "could not read the installed version of `{distribution}` with {}: {cause}",
            python.path.display()
        )
    };
    let out = match out {
        Err(_) => return Err(why("no answer within 20 s".into()).into()),
        Ok(Err(e)) => return Err(why(e.to_string()).into()),
        Ok(Ok(o)) => o,
    };
    // The probe prints last: a `.pth` file or `sitecustomize` may print before it.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    match last.trim().split_once(' ') {
        _ if last.trim() == "absent" => Ok(Installed::Absent),
        Some(("version", v)) if out.status.success() && !v.trim().is_empty() => {
            Ok(Installed::Version(v.trim().to_string()))
        }
        _ => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
            Err(why(format!(
                "{} ({})",
                last.unwrap_or("no output").trim(),
                out.status
            ))
            .into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn at(path: &Path, flags: &[&str]) -> Option<Interpreter> {
        Some(Interpreter {
            path: path.to_path_buf(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
        })
    }

    #[test]
    fn interpreter_of_a_python_a_console_script_and_not_of_a_shell_wrapper() {
        let d = tempfile::tempdir().unwrap();
        let py = script(d.path(), "python3.12", "");
        assert_eq!(interpreter(&py), at(&py, &[]));
        // A link named otherwise to a Python (`/usr/bin/python3` → `python3.12`).
        let link = d.path().join("py");
        std::os::unix::fs::symlink(&py, &link).unwrap();
        assert_eq!(interpreter(&link), at(&link, &[]));
        // A console script, its interpreter's flags kept (they change what it imports).
        let cli = script(
            d.path(),
            "lmdeploy",
            &format!("#!{} -E\nimport sys\n", py.display()),
        );
        assert_eq!(interpreter(&cli), at(&py, &["-E"]));
        // pip's launcher for an interpreter path too long for `#!`.
        let long = script(
            d.path(),
            "sglang",
            &format!(
                "#!/bin/sh\n'''exec' \"{}\" \"$0\" \"$@\"\n' '''\nimport sys\n",
                py.display()
            ),
        );
        assert_eq!(interpreter(&long), at(&py, &[]));
        let wrapper = script(d.path(), "vllm-python", "#!/bin/sh\nexec python3 \"$@\"\n");
        assert_eq!(interpreter(&wrapper), None);
        let elf = d.path().join("llama-server");
        std::fs::write(&elf, b"\x7fELF\x02\x01\x01").unwrap();
        assert_eq!(interpreter(&elf), None);
    }

    /// The distribution's version from its installed metadata, on the engine's `PYTHONPATH`;
    /// an upgrade changes it. Needs `python3` on PATH (every machine that runs the suite has
    /// one: the engine install builds llama.cpp from a Python sdist).
    #[test]
    fn installed_version_follows_the_metadata_on_the_engines_path() {
        let Ok(path) = super::super::facts::resolve_binary("python3") else {
            panic!("python3 is not on PATH");
        };
        let python = Interpreter {
            path,
            flags: Vec::new(),
        };
        let d = tempfile::tempdir().unwrap();
        let site = d.path().join("site");
        let put = |v: &str| {
            let _ = std::fs::remove_dir_all(&site);
            let info = site.join(format!("fake_engine-{v}.dist-info"));
            std::fs::create_dir_all(&info).unwrap();
            std::fs::write(
                info.join("METADATA"),
                format!("Metadata-Version: 2.1\nName: fake-engine\nVersion: {v}\n"),
            )
            .unwrap();
        };
        let env = vec![("PYTHONPATH".to_string(), site.display().to_string())];
        put("0.26.0");
        assert_eq!(
            installed(&python, "fake-engine", &env).unwrap(),
            Installed::Version("0.26.0".into())
        );
        put("0.27.1");
        assert_eq!(
            installed(&python, "fake-engine", &env).unwrap(),
            Installed::Version("0.27.1".into())
        );
        assert_eq!(
            installed(&python, "fake-engine", &[]).unwrap(),
            Installed::Absent
        );
        // An interpreter that does not run is an error, not an absent package.
        // What a `sitecustomize` prints before the probe's answer is not the answer.
        std::fs::write(
            site.join("sitecustomize.py"),
            "print('hello from sitecustomize')\n",
        )
        .unwrap();
        assert_eq!(
            installed(&python, "fake-engine", &env).unwrap(),
            Installed::Version("0.27.1".into())
        );
        // `-E` (from a `#!` line) ignores PYTHONPATH, as the engine would.
        let isolated = Interpreter {
            path: python.path.clone(),
            flags: vec!["-E".into()],
        };
        assert_eq!(
            installed(&isolated, "fake-engine", &env).unwrap(),
            Installed::Absent
        );
        let broken = Interpreter {
            path: script(d.path(), "python-broken", "#!/bin/sh\nexit 3\n"),
            flags: Vec::new(),
        };
        let e = installed(&broken, "fake-engine", &env).unwrap_err().0;
        let _ = std::fs::remove_file(site.join("sitecustomize.py"));
        assert!(
            e.contains("could not read the installed version of `fake-engine`"),
            "{e}"
        );
    }
}
