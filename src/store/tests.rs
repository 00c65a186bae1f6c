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
        objects: Default::default(),
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
    let err = s.lock("dep", "deployment x").unwrap_err().to_string();
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

/// One writer process of `many_processes_writing_at_once_leave_a_consistent_cache`: runs
/// only when that test starts it (the test binary re-executed with this test's name).
#[test]
fn concurrent_writer_child() {
    let (Ok(root), Ok(me)) = (
        std::env::var("BENCH360_TEST_WRITER_CACHE"),
        std::env::var("BENCH360_TEST_WRITER"),
    ) else {
        return;
    };
    let s = Store::open(Path::new(&root)).unwrap();
    // Start together, so that the writes really interleave.
    let go = Path::new(&root).join("go");
    while !go.exists() {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    for n in 0..WRITER_NODES {
        // Every writer also writes one node that all of them write (the report is such a
        // node: nobody locks it).
        for key in [format!("w{me}-n{n}"), "shared".to_string()] {
            write_node(&s, &key);
        }
    }
}

const WRITERS: usize = 8;
const WRITER_NODES: usize = 12;

/// What a node's journal does: started record, object files in tmp/, rename, finished.
fn write_node(s: &Store, key: &str) {
    s.write_record(&record(key, RecordStatus::Started)).unwrap();
    let tmp = s.begin_object(key).unwrap();
    for (name, size) in [("a.bin", 70_000usize), ("b.json", 3_000)] {
        let byte = blake3::hash(key.as_bytes()).as_bytes()[0];
        fs::write(tmp.join(name), vec![byte; size]).unwrap();
    }
    s.commit_object(&tmp, key).unwrap();
    let mut r = record(key, RecordStatus::Finished);
    r.outputs = serde_json::json!({"files": 2});
    s.write_record(&r).unwrap();
    s.set_label("s", key, key).unwrap();
}

fn object_complete(s: &Store, key: &str) -> bool {
    let byte = blake3::hash(key.as_bytes()).as_bytes()[0];
    [("a.bin", 70_000usize), ("b.json", 3_000)]
        .iter()
        .all(|(name, size)| {
            fs::read(s.object_dir(key).join(name))
                .is_ok_and(|b| b.len() == *size && b.iter().all(|&x| x == byte))
        })
}

#[test]
fn many_processes_writing_at_once_leave_a_consistent_cache() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let s = Store::open(&root).unwrap();
    // Another host's half-written temp files, as NFS shows them to this one.
    let foreign = [
        root.join("records").join(".tmp.4242.0.other-host.k.json"),
        root.join("labels").join(".tmp.4242.1.other-host.l.json"),
    ];
    for f in &foreign {
        fs::write(f, "{\"format\": 1, \"key\": \"half").unwrap();
    }
    let foreign_dir = root.join("tmp").join("4242.other-host.k.1");
    fs::create_dir_all(&foreign_dir).unwrap();
    let children: Vec<_> = (0..WRITERS)
        .map(|i| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "store::tests::concurrent_writer_child",
                    "--test-threads=1",
                ])
                .env("BENCH360_TEST_WRITER_CACHE", &root)
                .env("BENCH360_TEST_WRITER", i.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    fs::write(root.join("go"), "").unwrap();
    // A reader meanwhile: every record it lists parses, and a finished one (other than the
    // shared node, which its writers replace) has its whole object.
    let mut reads = 0;
    let mut finished_seen = 0;
    let mut children = children;
    loop {
        let done = children.iter_mut().all(|c| c.try_wait().unwrap().is_some());
        for e in fs::read_dir(root.join("records")).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            // Records are replaced by rename, never deleted: the file opened is whole.
            let text = fs::read_to_string(e.path()).unwrap();
            serde_json::from_str::<Record>(&text)
                .unwrap_or_else(|err| panic!("{:?} does not parse: {err}", e.path()));
        }
        let recs = s.records();
        for r in recs
            .iter()
            .filter(|r| r.status == RecordStatus::Finished && r.key != "shared")
        {
            assert!(
                object_complete(&s, &r.key),
                "{} finished without its object",
                r.key
            );
            finished_seen += 1;
        }
        reads += 1;
        if done {
            break;
        }
    }
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a writer failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert!(
        reads > 1 && finished_seen > 0,
        "{reads} reads, {finished_seen}"
    );
    // Afterwards: every record readable and finished, every object whole.
    let recs = s.records();
    assert_eq!(recs.len(), WRITERS * WRITER_NODES + 1);
    for r in &recs {
        assert_eq!(r.status, RecordStatus::Finished, "{}", r.key);
        assert!(object_complete(&s, &r.key), "{}", r.key);
        assert_eq!(s.last_key("s", &r.key).as_deref(), Some(r.key.as_str()));
    }
    let raw = fs::read_dir(root.join("records")).unwrap().count();
    // Only records, and the other host's temp file.
    assert_eq!(raw, recs.len() + 1);
    // No temp leftovers of ours: tmp/ has only the other host's dir; the objects are dirs
    // of exactly the nodes.
    let tmp: Vec<_> = fs::read_dir(root.join("tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(tmp, std::slice::from_ref(&foreign_dir));
    assert_eq!(
        fs::read_dir(root.join("objects")).unwrap().count(),
        recs.len()
    );
    for d in ["records", "labels", "hashes"] {
        for e in fs::read_dir(root.join(d)).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                !name.starts_with(".tmp.") || name.contains("other-host"),
                "leftover {d}/{name}"
            );
        }
    }
    // Reopening leaves the other host's files alone.
    Store::open(&root).unwrap();
    assert!(foreign.iter().all(|f| f.exists()) && foreign_dir.exists());
}

#[test]
fn temp_files_of_dead_processes_here_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    let path = dir.path().join("records").join("k.json");
    let mine = temp_beside(&path);
    let name = mine.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!(".tmp.{}.", std::process::id())),
        "{name}"
    );
    assert!(name.ends_with(&format!(".{}.k.json", hostname())), "{name}");
    assert_ne!(temp_beside(&path), mine, "unique per call");
    let dead = dir
        .path()
        .join("records")
        .join(format!(".tmp.999999999.0.{}.k.json", hostname()));
    let other_host = dir
        .path()
        .join("records")
        .join(".tmp.1.0.other-host.k.json");
    for f in [&dead, &other_host] {
        fs::write(f, "{").unwrap();
    }
    drop(s);
    let s = Store::open(dir.path()).unwrap();
    assert!(!dead.exists());
    assert!(other_host.exists());
    assert!(s.records().is_empty(), "temp files are not records");
}

#[test]
fn the_secret_salt_is_made_once_private_and_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path()).unwrap();
    let a = s.secret_salt().unwrap();
    assert_ne!(a, [0u8; 32]);
    assert_eq!(s.secret_salt().unwrap(), a);
    let mode = fs::metadata(dir.path().join("salt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let other = tempfile::tempdir().unwrap();
    assert_ne!(Store::open(other.path()).unwrap().secret_salt().unwrap(), a);
}
