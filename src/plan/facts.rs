//! Gathers the facts the pure planner needs: content hashes of the files a sweep reads
//! (memoized by path, size and mtime, so a 70 GB model is not re-read by every `plan`), the
//! digest of each engine's artifact, and the machine fingerprint.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::{Facts, Unavailable};
use crate::plan;
use crate::spec::{Launch, Sweep};
use crate::store::{write_atomic, Store};

#[derive(Serialize, Deserialize)]
struct Memo {
    path: String,
    size: u64,
    mtime_ns: u128,
    hash: String,
}

fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut f = fs::File::open(path)?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().to_hex().to_string())
}

impl Store {
    /// blake3 of a file's content (or, for a directory, of its files' relative paths and
    /// hashes), memoized under `hashes/`.
    pub fn content_hash(&self, path: &Path) -> Result<String, Unavailable> {
        let meta =
            fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if meta.is_dir() {
            let mut files = Vec::new();
            collect_files(path, path, &mut files)
                .map_err(|e| format!("cannot list {}: {e}", path.display()))?;
            files.sort();
            let mut h = blake3::Hasher::new();
            for rel in files {
                let sub = self.content_hash(&path.join(&rel))?;
                h.update(rel.to_string_lossy().as_bytes());
                h.update(&[0]);
                h.update(sub.as_bytes());
            }
            return Ok(format!("dir:{}", h.finalize().to_hex()));
        }
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let canonical = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let memo_path = self.root().join("hashes").join(format!(
            "{}.json",
            &blake3::hash(canonical.to_string_lossy().as_bytes()).to_hex()[..32]
        ));
        if let Some(m) = fs::read_to_string(&memo_path)
            .ok()
            .and_then(|t| serde_json::from_str::<Memo>(&t).ok())
        {
            if m.size == meta.len()
                && m.mtime_ns == mtime_ns
                && m.path == canonical.to_string_lossy()
            {
                return Ok(m.hash);
            }
        }
        let hash = hash_file(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let memo = Memo {
            path: canonical.to_string_lossy().into_owned(),
            size: meta.len(),
            mtime_ns,
            hash: hash.clone(),
        };
        let _ = write_atomic(
            &memo_path,
            &serde_json::to_vec(&memo).expect("serializable"),
        );
        Ok(hash)
    }
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        if e.file_type()?.is_dir() {
            collect_files(root, &p, out)?;
        } else {
            out.push(p.strip_prefix(root).expect("under root").to_path_buf());
        }
    }
    Ok(())
}

/// Finds a binary as a shell would: a path with `/` as is, else on `PATH`.
pub(crate) fn resolve_binary(binary: &str) -> Result<PathBuf, Unavailable> {
    if binary.contains('/') {
        let p = PathBuf::from(binary);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("engine binary {binary} does not exist").into())
        };
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(binary))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| format!("engine binary `{binary}` is not on PATH").into())
}

/// CPU model, architecture and NVIDIA GPU models (from procfs: no NVML needed to plan).
pub(crate) fn machine_fingerprint() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("cpu".into(), crate::host::cpu_model());
    m.insert("arch".into(), std::env::consts::ARCH.into());
    let mut gpus: Vec<String> = fs::read_dir("/proc/driver/nvidia/gpus")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| fs::read_to_string(e.path().join("information")).ok())
                .filter_map(|t| {
                    t.lines()
                        .find(|l| l.starts_with("Model:"))
                        .map(|l| l["Model:".len()..].trim().to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    gpus.sort();
    m.insert(
        "gpu".into(),
        if gpus.is_empty() {
            "none".into()
        } else {
            gpus.join(", ")
        },
    );
    // The driver's version is provenance (each run's run.json), not a key input: a driver
    // update reruns nothing. A machine without one keeps `none`, so that its keys stay those
    // made before the version left the key.
    if fs::metadata("/proc/driver/nvidia/version").is_err() {
        m.insert("gpu-driver".into(), "none".into());
    }
    m
}

/// The local image's id keys the deployment (content-addressed: a retagged image changes
/// it). An image not present yet gives a provisional artifact: `apply` pulls it before
/// planning, so only `plan` shows provisional keys below it.
fn docker_artifact(reference: &str) -> Result<String, Unavailable> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let d = crate::engine::docker::connect()
            .await
            .map_err(|e| e.to_string())?;
        match crate::engine::docker::inspect_local(&d, reference)
            .await
            .map_err(|e| e.to_string())?
        {
            Some(f) => Ok(format!("image:{}", f.id)),
            None => Ok(format!("image-not-pulled:{reference}")),
        }
    })
}

/// All facts a sweep's plan needs.
pub(crate) fn gather(store: &Store, sweep: &Sweep) -> Facts {
    let mut facts = Facts {
        machine: machine_fingerprint(),
        ..Default::default()
    };
    match store.secret_salt() {
        Ok(s) => facts.salt = s,
        Err(e) => {
            // Without the salt no key with an environment value can be made: block them.
            for en in sweep.engines.iter().filter(|en| !en.env.is_empty()) {
                facts.artifacts.insert(
                    en.base.value.clone(),
                    Err(format!("cannot read the cache's salt: {e}").into()),
                );
            }
        }
    }
    for f in plan::required_files(sweep) {
        let h = store.content_hash(&f);
        facts.files.insert(f, h);
    }
    // A container's arguments name paths inside it: only a process's are read here.
    for e in sweep
        .engines
        .iter()
        .filter(|e| matches!(e.launch, Launch::Process { .. }))
    {
        let files = plan::args_files(&e.args);
        for (_, path) in &files {
            facts
                .files
                .entry(path.clone())
                .or_insert_with(|| store.content_hash(path));
        }
        if !files.is_empty() {
            facts.args_files.insert(e.name.value.clone(), files);
        }
    }
    // One artifact per engine block (its setting combinations share the binary or image). A
    // Python engine's variants are each asked for their package's version (their `env` may
    // differ: another `PYTHONPATH` is another engine), once per distinct `env`, and must agree.
    let mut probed = std::collections::HashMap::new();
    for e in &sweep.engines {
        let python =
            matches!(e.launch, Launch::Process { .. }) && e.catalog.python_distribution.is_some();
        match facts.artifacts.get(&e.base.value) {
            Some(Err(_)) => continue,
            Some(Ok(_)) if !python => continue,
            _ => {}
        }
        let artifact = match &e.launch {
            Launch::Process { binary } => probed
                .entry((e.base.value.clone(), e.env.clone()))
                .or_insert_with(|| process_artifact(store, binary, e))
                .clone(),
            Launch::Endpoint { url, .. } => Ok(format!("endpoint:{url}")),
            Launch::Docker { image, tag, .. } => {
                docker_artifact(&crate::engine::docker::reference(image, tag))
            }
        };
        let merged = match (facts.artifacts.get(&e.base.value), artifact) {
            (Some(Ok(a)), Ok(b)) if *a != b => Err(format!(
                "the setting combinations of engine `{}` run different engines ({a}; {b}): their `env` differ; give each its own engine block",
                e.base.value
            )
            .into()),
            (Some(Ok(a)), Ok(_)) => Ok(a.clone()),
            (_, artifact) => artifact,
        };
        facts.artifacts.insert(e.base.value.clone(), merged);
    }
    facts
}

/// A process engine's binary by content, and a Python engine's installed version beside it
/// (`python`): upgrading the package under one interpreter changes no file's hash.
fn process_artifact(
    store: &Store,
    binary: &str,
    e: &crate::spec::Engine,
) -> Result<String, Unavailable> {
    let p = resolve_binary(binary)?;
    let h = store.content_hash(&p)?;
    let python = e
        .catalog
        .python_distribution
        .zip(super::python::interpreter(&p));
    Ok(match python {
        None => format!("binary:{h}"),
        Some((dist, py)) => match super::python::installed(&py, dist, &e.env)? {
            super::python::Installed::Version(v) => format!("binary:{h} {dist}=={v}"),
            super::python::Installed::Absent => format!("binary:{h}"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_is_memoized_and_follows_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache")).unwrap();
        let f = dir.path().join("data.txt");
        fs::write(&f, "one").unwrap();
        let a = store.content_hash(&f).unwrap();
        assert_eq!(a, blake3::hash(b"one").to_hex().to_string());
        assert_eq!(store.content_hash(&f).unwrap(), a);
        fs::write(&f, "two!").unwrap();
        assert_eq!(
            store.content_hash(&f).unwrap(),
            blake3::hash(b"two!").to_hex().to_string()
        );
        assert!(store
            .content_hash(&dir.path().join("missing"))
            .unwrap_err()
            .0
            .contains("cannot read"));
    }

    /// `vllm` VERSION as installed in the folder `site` (its metadata only: what
    /// `importlib.metadata` reads).
    fn installed_vllm(site: &Path, version: &str) {
        let info = site.join(format!("vllm-{version}.dist-info"));
        fs::create_dir_all(&info).unwrap();
        fs::write(
            info.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"),
        )
        .unwrap();
    }

    /// A Python engine's installed version enters its artifact (so its pull key); a change of
    /// it alone — the interpreter's hash the same — changes the artifact.
    #[test]
    fn a_python_engines_version_enters_its_artifact() {
        let python = resolve_binary("python3").expect("python3 on PATH");
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache")).unwrap();
        let site = dir.path().join("site");
        let artifact = |version: &str| {
            let _ = fs::remove_dir_all(&site);
            installed_vllm(&site, version);
            let text = format!(
                r#"
sweep "t" {{ seed 7; }}
model "m" {{ path "/w/m"; quantization "fp8"; }}
engine "v" {{ kind "vllm"; binary "{}"; env PYTHONPATH="{}"; }}
task "mmlu" {{ kind "mmlu"; dataset "/d/mmlu"; samples 10; }}
scenario "one" {{ kind "single"; requests 4; }}
"#,
                python.display(),
                site.display()
            );
            let sweep = super::super::tests::sweep(&text);
            gather(&store, &sweep).artifacts["v"]
                .as_ref()
                .map_err(|e| e.0.clone())
                .unwrap()
                .clone()
        };
        let a = artifact("0.26.0");
        assert!(
            a.starts_with("binary:") && a.ends_with(" vllm==0.26.0"),
            "{a}"
        );
        let b = artifact("0.27.0");
        assert!(b.ends_with(" vllm==0.27.0"), "{b}");
        assert_eq!(a.split(' ').next(), b.split(' ').next());
    }

    /// Two variants of one Python engine block that import different versions (their own
    /// `PYTHONPATH`) block the engine with a cause, rather than share the first one's key.
    #[test]
    fn variants_of_a_python_engine_that_import_different_versions_are_an_error() {
        let python = resolve_binary("python3").expect("python3 on PATH");
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache")).unwrap();
        let site = |v: &str| {
            let s = dir.path().join(format!("site-{v}"));
            installed_vllm(&s, v);
            s.display().to_string()
        };
        let (a, b) = (site("0.26.0"), site("0.27.0"));
        let sweep_with = |second: &str| {
            let text = format!(
                r#"
sweep "t" {{ seed 7; }}
model "m" {{ path "/w/m"; quantization "fp8"; }}
engine "v" {{
    kind "vllm"
    binary "{}"
    variant "one" {{ env PYTHONPATH="{a}"; }}
    variant "two" {{ args "--enforce-eager"; env PYTHONPATH="{second}"; }}
}}
task "mmlu" {{ kind "mmlu"; dataset "/d/mmlu"; samples 10; }}
scenario "one" {{ kind "single"; requests 4; }}
"#,
                python.display()
            );
            super::super::tests::sweep(&text)
        };
        let same = gather(&store, &sweep_with(&a));
        assert!(
            same.artifacts["v"]
                .as_ref()
                .unwrap()
                .ends_with(" vllm==0.26.0"),
            "{:?}",
            same.artifacts["v"]
        );
        let differ = gather(&store, &sweep_with(&b));
        let e = differ.artifacts["v"].as_ref().unwrap_err().0.clone();
        assert!(
            e.contains("run different engines") && e.contains("vllm==0.27.0"),
            "{e}"
        );
    }

    #[test]
    fn a_file_an_engine_reads_is_keyed_by_its_content_and_a_folder_by_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cache")).unwrap();
        let template = dir.path().join("chat.jinja");
        let lora = dir.path().join("lora");
        fs::create_dir_all(&lora).unwrap();
        let coldstart = |args: &str| {
            let text = format!(
                r#"
sweep "t" {{ seed 7; }}
model "m" {{ path "/w/m"; quantization "fp8"; }}
engine "v" {{ kind "vllm"; binary "/bin/true"; args {args}; }}
task "mmlu" {{ kind "mmlu"; dataset "/d/mmlu"; samples 10; }}
scenario "one" {{ kind "single"; requests 4; }}
"#
            );
            let sweep = super::super::tests::sweep(&text);
            let plan = plan::build(&sweep, &gather(&store, &sweep)).unwrap();
            let n = plan
                .order
                .iter()
                .map(|&i| &plan.graph[i])
                .find(|n| n.kind == plan::NodeKind::Coldstart)
                .unwrap()
                .clone();
            (n.key, n.inputs)
        };
        let t = template.display();
        fs::write(&template, "{{ messages }}").unwrap();
        let (k1, inputs) = coldstart(&format!(r#""--chat-template" "{t}""#));
        assert_eq!(
            inputs[&format!("engine.args.file.{t}")],
            blake3::hash(b"{{ messages }}").to_hex().to_string()
        );
        // `--flag=FILE` names it too; its key input is the part after `=`.
        let (k_eq, inputs) = coldstart(&format!(r#""--chat-template={t}""#));
        assert!(inputs.contains_key(&format!("engine.args.file.{t}")));
        assert_ne!(k_eq, k1, "the arguments differ as text");
        fs::write(&template, "{{ messages | tojson }}").unwrap();
        let (k2, _) = coldstart(&format!(r#""--chat-template" "{t}""#));
        assert_ne!(k1, k2, "an edited template reruns the deployment");
        // A folder, a file the engine writes (`--log-file`), and a file after a flag that
        // reads none stay keyed as text: no file input.
        let (_, inputs) = coldstart(&format!(
            r#""--lora-modules" "a={}" "--log-file" "{t}" "--max-num-seqs" "{t}""#,
            lora.display()
        ));
        assert!(
            !inputs.keys().any(|k| k.starts_with("engine.args.file.")),
            "{inputs:?}"
        );
    }
}
