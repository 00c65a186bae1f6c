//! The parts of `selfbench` that time bench360 without a server: planning a large DAG,
//! re-applying a fully cached sweep, writing chunk rows to Parquet.

use std::time::Instant;

/// Plans a sweep of about `nodes` nodes (runs + scores); returns (nodes, parse s, plan s).
pub(super) fn bench_plan(nodes: usize) -> anyhow::Result<(usize, f64, f64)> {
    let runs = (nodes / 2).max(1);
    let sizes: Vec<String> = (1..=runs).map(|i| i.to_string()).collect();
    let text = format!(
        "sweep \"plan-bench\" {{ seed 1; }}\nmodel \"m\" {{ id \"org/m\"; }}\nengine \"e\" {{ kind \"openai\"; launcher \"endpoint\"; url \"http://127.0.0.1:9\"; }}\ntask \"t\" {{ kind \"mmlu\"; dataset \"/nonexistent\"; }}\nscenario \"b\" {{ kind \"batch\"; batch-size {}; }}\n",
        sizes.join(" ")
    );
    let t0 = Instant::now();
    let sweep = crate::sweep::parse(
        "plan-bench.kdl",
        &text,
        std::path::Path::new("/"),
        &|_| None,
        &Default::default(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let parse_s = t0.elapsed().as_secs_f64();
    let mut facts = crate::plan::Facts::default();
    for f in crate::plan::required_files(&sweep) {
        facts.files.insert(f, Ok("hash".into()));
    }
    facts
        .artifacts
        .insert("e".into(), Ok("endpoint:http://127.0.0.1:9".into()));
    let t1 = Instant::now();
    let plan = crate::plan::build(&sweep, &facts).map_err(anyhow::Error::msg)?;
    struct Empty;
    impl crate::plan::History for Empty {
        fn past(&self, _: &str) -> Option<crate::plan::Past> {
            None
        }
        fn last_key(&self, _: &str, _: &str) -> Option<String> {
            None
        }
    }
    let st = crate::plan::statuses(&plan, &Empty);
    let plan_s = t1.elapsed().as_secs_f64();
    Ok((st.len(), parse_s, plan_s))
}

/// A real `bench360 apply` (a new process) of a sweep of `runs` runs whose every node is
/// recorded as finished: the cost of deciding that nothing has to run.
pub(super) fn bench_cached_apply(runs: usize) -> anyhow::Result<f64> {
    let dir = std::env::temp_dir().join(format!("bench360-selfbench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data"))?;
    let item = r#"{"id": "x/test/0", "subject": "x", "subcategory": "x", "category": "STEM", "question": "q", "choices": ["1", "2", "3", "4"], "answer": "A"}"#;
    std::fs::write(dir.join("data/test.jsonl"), format!("{item}\n"))?;
    std::fs::write(dir.join("data/dev.jsonl"), format!("{item}\n"))?;
    let sizes: Vec<String> = (1..=runs).map(|i| i.to_string()).collect();
    let sweep_path = dir.join("cached.kdl");
    std::fs::write(
        &sweep_path,
        format!(
            "sweep \"cached\" {{ seed 1; }}\nmodel \"m\" {{ id \"org/m\"; }}\nengine \"e\" {{ kind \"openai\"; launcher \"endpoint\"; url \"http://127.0.0.1:9\"; }}\ntask \"t\" {{ kind \"mmlu\"; dataset \"data\"; }}\nscenario \"b\" {{ kind \"batch\"; batch-size {}; }}\n",
            sizes.join(" ")
        ),
    )?;
    let cache = dir.join("cache");
    let store = crate::store::Store::open(&cache)?;
    let (sweep, _) = crate::sweep::load(&sweep_path, &Default::default())?;
    let facts = crate::plan::facts::gather(&store, &sweep);
    let plan = crate::plan::build(&sweep, &facts).map_err(anyhow::Error::msg)?;
    for n in plan.graph.node_weights() {
        std::fs::create_dir_all(store.object_dir(&n.key))?;
        store.write_record(&crate::store::Record {
            format: crate::store::STORE_FORMAT,
            key: n.key.clone(),
            kind: n.kind.as_str().into(),
            label: n.label.clone(),
            sweep: plan.sweep.clone(),
            status: crate::store::RecordStatus::Finished,
            host: crate::host::hostname(),
            pid: std::process::id(),
            started_at: crate::host::now_rfc3339(),
            finished_at: None,
            duration_s: None,
            cause: None,
            inputs: n.inputs.clone(),
            outputs: serde_json::Value::Null,
            objects: Default::default(),
        })?;
    }
    let exe = std::env::current_exe()?;
    let t0 = Instant::now();
    let out = std::process::Command::new(exe)
        .arg("--cache")
        .arg(&cache)
        .arg("apply")
        .arg(&sweep_path)
        .output()?;
    let s = t0.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(
        out.status.success() && text.contains("0 ran"),
        "cached apply did not run nothing: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(s)
}

/// Chunk rows written per second: (median, min, max) of five writes.
pub(super) fn bench_parquet(rows: usize) -> anyhow::Result<(f64, f64, f64)> {
    let chunks: Vec<crate::record::ChunkRecord> = (0..rows)
        .map(|i| crate::record::ChunkRecord {
            request_id: (i / 64) as u32,
            index: (i % 64) as u32,
            t_ns: i as i64 * 1000,
            kind: crate::record::ChunkKind::Content,
            chars: 4,
            tokens: None,
        })
        .collect();
    let cols = crate::record::Columns {
        sweep: "s".into(),
        model: "m".into(),
        quantization: "q".into(),
        engine: "e".into(),
        engine_kind: "llama.cpp".into(),
        engine_block: "e".into(),
        engine_settings: Vec::new(),
        task: "t".into(),
        scenario: "x".into(),
        scenario_kind: "batch".into(),
        scenario_params: "{}".into(),
        max_tokens: 64,
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        repeat: 0,
    };
    let path =
        std::env::temp_dir().join(format!("bench360-selfbench-{}.parquet", std::process::id()));
    // The median of five writes (the first also pays for fresh memory).
    let mut rates = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        crate::trace::write_chunks(&path, "key", &cols, &chunks)?;
        rates.push(rows as f64 / t0.elapsed().as_secs_f64());
        let _ = std::fs::remove_file(&path);
    }
    rates.sort_by(f64::total_cmp);
    Ok((rates[2], rates[0], rates[4]))
}
