//! Every built-in task and a custom task (built-in metrics and an external scorer) on the real
//! llama-server: scores land per request beside the request rows, a changed metric reruns
//! scoring only, and a broken custom dataset is refused before any engine starts.

mod common;

use std::path::Path;

use common::{bench, datasets, engine, python, ran, text};

fn sweep_text(e: &common::Engine, custom_dir: &Path) -> String {
    format!(
        r#####"sweep "tasks" {{
    seed 5
}}
defaults {{
    max-tokens 8
    warmup 1
    request-timeout 60
}}
{blocks}
task "mmlu" {{
    kind "mmlu"
    dataset "{d}/mmlu"
    samples 4
}}
task "squad" {{
    kind "squad_v2"
    dataset "{d}/squad_v2"
    samples 4
    max-tokens 12
    stop "\n"
}}
task "cnn" {{
    kind "summarization"
    dataset "{d}/cnn_dailymail"
    samples 2
    article-words 120
    max-tokens 32
}}
task "spider" {{
    kind "text2sql"
    dataset "{d}/spider"
    samples 4
    max-tokens 32
    sql-timeout 2
}}
task "yesno" {{
    kind "custom"
    dataset "{c}/qa.csv"
    template "Question: {{{{ question }}}}\nAnswer yes or no:"
    reference "answer"
    extract #"(?i)\b(yes|no)\b"#
    metrics "choice" "contains"
    group-by "kind"
    mode "completion"
}}
task "scored" {{
    kind "custom"
    dataset "{c}/qa.csv"
    template "Question: {{{{ question }}}}\nAnswer yes or no:"
    reference "answer"
    scorer "{py}" "score.py"
}}
scenario "single" {{
    kind "single"
}}
"#####,
        blocks = common::llama_blocks(e, 2),
        d = datasets().display(),
        c = custom_dir.display(),
        py = python(),
    )
}

const CSV: &str = "question,answer,kind\n\
\"Is water wet, usually?\",yes,easy\n\
Is the sun cold?,no,easy\n\
Is 7 a prime number?,yes,math\n";

const SCORER: &str = r#"import json, sys
for line in sys.stdin:
    item = json.loads(line)
    out = item["output"].lower()
    print(json.dumps({"id": item["id"], "score": float(item["reference"] in out), "length": len(out)}))
"#;

#[test]
fn four_tasks_and_custom_ones_score_per_request() {
    let e = engine();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    std::fs::write(dir.path().join("qa.csv"), CSV).unwrap();
    std::fs::write(dir.path().join("score.py"), SCORER).unwrap();
    let sweep = dir.path().join("tasks.kdl");
    std::fs::write(&sweep, sweep_text(&e, dir.path())).unwrap();
    let o = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let r = ran(&o);
    assert_eq!(
        r.iter().filter(|l| l.starts_with("score ")).count(),
        6,
        "{r:?}"
    );

    // Per-request scores join the request rows; per-task metric columns; quality in the summary.
    let check = r#"
import duckdb, json, sys
c = duckdb.connect()
cache = sys.argv[1]
rows = c.execute(f"""
  select s.task, count(*), count(r.request_id), avg(s.score), min(s.score), max(s.score)
  from read_parquet('{cache}/objects/*/scores.parquet', union_by_name=true) s
  join read_parquet('{cache}/objects/*/requests.parquet', union_by_name=true) r
    on s.run_key = r.node_key and s.request_id = r.request_id
  group by 1 order by 1""").fetchall()
print(json.dumps(rows))
cols = {}
for t in ["mmlu", "squad", "cnn", "spider", "yesno", "scored"]:
    cols[t] = [d[0] for d in c.execute(f"select * from read_parquet('{cache}/objects/*/scores.parquet', union_by_name=true) where task = '{t}' limit 0").description]
summary = c.execute(f"select task, quality_metric, quality from read_parquet('{cache}/reports/tasks/summary.parquet') order by 1").fetchall()
print(json.dumps(summary))
"#;
    // Every duckdb query the documentation shows (README and docs/) runs on this cache and
    // returns rows.
    let mut queries = Vec::new();
    for (_, page) in common::book() {
        let mut rest = page.as_str();
        while let Some(i) = rest.find("`select ") {
            let q = &rest[i + 1..];
            let end = q.find('`').unwrap();
            let query = q[..end].split_whitespace().collect::<Vec<_>>().join(" ");
            if query.contains("read_parquet('cache/") {
                queries.push(query.replace("'cache/", &format!("'{}/", cache.display())));
            }
            rest = &q[end + 1..];
        }
    }
    assert!(queries.len() >= 2, "{queries:?}");
    let run_queries = r#"
import duckdb, sys
c = duckdb.connect()
for q in sys.argv[1:]:
    rows = c.execute(q).fetchall()
    assert rows, f"no rows: {q}"
print(len(sys.argv) - 1)
"#;
    let out = std::process::Command::new(python())
        .arg("-c")
        .arg(run_queries)
        .args(&queries)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "documented queries: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = std::process::Command::new(python())
        .args(["-c", check, cache.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    let joined: Vec<serde_json::Value> = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(joined.len(), 6, "{joined:?}");
    for row in &joined {
        assert_eq!(row[1], row[2], "every score row joins its request: {row}");
        let (lo, hi) = (row[4].as_f64().unwrap(), row[5].as_f64().unwrap());
        assert!(
            (0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi),
            "{row}"
        );
    }
    let summary: Vec<serde_json::Value> = serde_json::from_str(lines.next().unwrap()).unwrap();
    let metric = |t: &str| {
        summary
            .iter()
            .find(|r| r[0] == t)
            .map(|r| r[1].as_str().unwrap().to_string())
    };
    assert_eq!(metric("mmlu").as_deref(), Some("accuracy"));
    assert_eq!(metric("squad").as_deref(), Some("f1"));
    assert_eq!(metric("cnn").as_deref(), Some("rougeL"));
    assert_eq!(metric("spider").as_deref(), Some("execution_accuracy"));
    assert_eq!(metric("yesno").as_deref(), Some("choice_accuracy"));
    assert_eq!(metric("scored").as_deref(), Some("score"));
    for s in &summary {
        assert!(s[2].is_number(), "quality of {s}");
    }
    // The model's summaries got ROUGE above zero: they share words with the highlights.
    let cnn_rouge = summary.iter().find(|r| r[0] == "cnn").unwrap()[2]
        .as_f64()
        .unwrap();
    assert!(cnn_rouge > 0.0, "ROUGE-L {cnn_rouge}");

    // A changed scorer reruns that task's scoring and the report, nothing else.
    std::fs::write(
        dir.path().join("score.py"),
        SCORER.replace("float(item", "0.5 * float(item"),
    )
    .unwrap();
    let o = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let r = ran(&o);
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r[0].starts_with("report"), "{r:?}");
    assert!(
        r[1].starts_with("score ") && r[1].contains(" scored "),
        "{r:?}"
    );

    // A broken row of the custom dataset: refused with file and line, nothing starts.
    std::fs::write(
        dir.path().join("qa.csv"),
        format!("{CSV}\"unterminated,yes,easy\nIs it?,yes\n"),
    )
    .unwrap();
    let o = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("qa.csv:"), "{t}");
    assert!(!t.contains("coldstart"), "no engine starts: {t}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// The databases vanish after the run started and before it is scored (as when a sweep's
/// folder is replaced under a running apply): the score node fails with the cause, is listed
/// under the report's failures, and the next apply (databases back) scores the cached run.
#[test]
fn a_score_node_that_cannot_open_its_databases_fails_with_the_cause() {
    let e = engine();
    let dir = tempfile::tempdir().unwrap();
    let spider = dir.path().join("spider");
    copy_dir(&datasets().join("spider"), &spider);
    let cache = dir.path().join("cache");
    let sweep = dir.path().join("noscore.kdl");
    std::fs::write(
        &sweep,
        format!(
            r#"sweep "noscore" {{
    seed 5
}}
defaults {{
    max-tokens 24
    warmup 0
    request-timeout 60
}}
{blocks}
task "spider" {{
    kind "text2sql"
    dataset "{spider}"
    samples 4
}}
scenario "server" {{
    kind "server"
    users 2
    rate 20
    duration 4
}}
"#,
            blocks = common::llama_blocks(&e, 2),
            spider = spider.display(),
        ),
    )
    .unwrap();
    let mut child = common::spawn_apply(&cache, &sweep);
    common::wait_for_started_run(&cache, "spider", std::time::Duration::from_secs(120));
    let db = spider.join("database");
    let kept = dir.path().join("database.kept");
    std::fs::rename(&db, &kept).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "a failed score node fails the apply"
    );
    let recs = common::records(&cache);
    let of = |kind: &str| {
        recs.iter()
            .find(|r| r["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} record"))
            .clone()
    };
    assert_eq!(of("run")["status"], "finished", "the run itself is fine");
    let score = of("score");
    assert_eq!(score["status"], "failed", "{score}");
    let cause = score["cause"].as_str().unwrap();
    assert!(
        cause.contains("could not be scored") && cause.contains("over the 5.0% error budget"),
        "{cause}"
    );
    assert!(
        cause.contains("cannot open"),
        "the top cause names the database: {cause}"
    );
    let report = std::fs::read_to_string(cache.join("reports/noscore/report.md")).unwrap();
    let failures = report.split("## Failures").nth(1).unwrap();
    assert!(failures.contains("scoring failed"), "{failures}");

    // Databases back: the run stays cached, only the score (and the report) runs again.
    std::fs::rename(&kept, &db).unwrap();
    let again = bench(&cache, &["apply", sweep.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again));
    let ran_now = ran(&again);
    assert!(
        ran_now.iter().any(|l| l.starts_with("score"))
            && !ran_now.iter().any(|l| l.starts_with("run")),
        "{ran_now:?}"
    );
}
