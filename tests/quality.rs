//! Quality metrics against the reference implementations, and model SQL that must not harm a
//! database. The references run in the Python that scripts/setup-python.sh installs
//! (`rouge-score` 0.1.2 with nltk's Porter stemmer; the SQuAD v2 evaluation functions as
//! shipped in `transformers`).

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{bench, datasets, python, text};
use serde_json::{json, Value};

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run_python(script: &str, input: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let mut child = Command::new(python())
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Written from a thread: the script answers line by line, so reading and writing must
    // overlap or both sides block on full pipes.
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(data.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_lines(&out.stdout)
}

fn parse_lines(b: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(b)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run_metric(metric: &str, input: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("in.jsonl");
    std::fs::write(&f, input).unwrap();
    let o = bench(
        &dir.path().join("cache"),
        &["metric", metric, f.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    parse_lines(&o.stdout)
}

/// The article's first sentences: a summary written by the article's journalist, not here.
fn lead(article: &str, n: usize) -> String {
    let mut out = Vec::new();
    for s in article.split_inclusive(". ") {
        out.push(s.trim());
        if out.len() == n {
            break;
        }
    }
    out.join("\n")
}

#[test]
fn rouge_matches_rouge_score_with_stemming() {
    let items = jsonl(&datasets().join("cnn_dailymail/test_subset.jsonl"));
    let mut lines = String::new();
    let mut n = 0;
    for (i, it) in items.iter().enumerate() {
        let reference = it["highlights"].as_str().unwrap().replace(" . ", " .\n");
        let article = it["article"].as_str().unwrap();
        // Lead-3 (newline-separated sentences), the lead paragraph on one line, and another
        // article's highlights as a poor prediction.
        let other = items[(i + 7) % items.len()]["highlights"].as_str().unwrap();
        for (k, pred) in [lead(article, 3), lead(article, 1), other.to_string()]
            .iter()
            .enumerate()
        {
            lines.push_str(
                &json!({"id": format!("{i}-{k}"), "prediction": pred, "reference": reference})
                    .to_string(),
            );
            lines.push('\n');
            n += 1;
        }
    }
    assert!(n >= 700, "{n} pairs");
    let ours = run_metric("rouge", &lines);
    let theirs = run_python("ref_rouge.py", &lines);
    assert_eq!(ours.len(), theirs.len());
    let mut worst = (0.0f64, String::new());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a["id"], b["id"]);
        for m in ["rouge1", "rouge2", "rougeL", "rougeLsum"] {
            let d = (a[m].as_f64().unwrap() - b[m].as_f64().unwrap()).abs();
            if d > worst.0 {
                worst = (d, format!("{} {m}: {} vs {}", a["id"], a[m], b[m]));
            }
        }
    }
    eprintln!(
        "ROUGE: {n} pairs, largest difference {:e} ({})",
        worst.0, worst.1
    );
    assert!(worst.0 <= 0.002, "largest difference: {}", worst.1);
}

#[test]
fn squad_matches_the_official_evaluation() {
    let items = jsonl(&datasets().join("squad_v2/dev_subset.jsonl"));
    let mut lines = String::new();
    let mut n = 0;
    for (i, it) in items.iter().enumerate() {
        let answers: Vec<String> = it["answers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let context = it["context"].as_str().unwrap();
        let words: Vec<&str> = context.split_whitespace().collect();
        let other = items[(i + 13) % items.len()]["answers"]
            .as_array()
            .unwrap()
            .first()
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        // Predictions from the dataset's own text: a gold answer with its neighbours, a window
        // of the context, another question's answer, and the empty answer.
        let with_context = answers
            .first()
            .and_then(|a| context.find(a.as_str()).map(|p| (a, p)))
            .map(|(a, p)| {
                let start = context[..p]
                    .char_indices()
                    .rev()
                    .nth(12)
                    .map_or(0, |(j, _)| j);
                format!("{}{a}", &context[start..p])
            })
            .unwrap_or_default();
        let window = words[i % words.len()..(i % words.len() + 4).min(words.len())].join(" ");
        for (k, pred) in [with_context, window, other, String::new()]
            .iter()
            .enumerate()
        {
            lines.push_str(
                &json!({"id": format!("{i}-{k}"), "prediction": pred, "answers": answers})
                    .to_string(),
            );
            lines.push('\n');
            n += 1;
        }
    }
    assert!(n >= 2000, "{n} pairs");
    let ours = run_metric("squad", &lines);
    let theirs = run_python("ref_squad.py", &lines);
    assert_eq!(ours.len(), theirs.len());
    let mut nonzero = 0;
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a["id"], b["id"]);
        for m in ["exact", "f1"] {
            let (x, y) = (a[m].as_f64().unwrap(), b[m].as_f64().unwrap());
            assert!((x - y).abs() <= 1e-9, "{} {m}: {x} vs {y}", a["id"]);
        }
        if a["f1"].as_f64().unwrap() > 0.0 && a["f1"].as_f64().unwrap() < 1.0 {
            nonzero += 1;
        }
    }
    eprintln!("SQuAD: {n} pairs equal; {nonzero} with partial F1");
    assert!(nonzero > 100, "the pairs exercise partial overlaps");
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn hostile_sql_changes_nothing() {
    let db_dir = datasets().join("spider/database");
    let dbs: Vec<_> = std::fs::read_dir(&db_dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            p.join(format!("{name}.sqlite"))
        })
        .collect();
    // The checksums the dataset README records.
    let readme = std::fs::read_to_string(datasets().join("spider/README.md")).unwrap();
    for db in &dbs {
        let h = sha256(db);
        assert!(readme.contains(&h), "{} differs from README", db.display());
    }
    let db = db_dir.join("concert_singer/concert_singer.sqlite");
    let evil = std::env::temp_dir().join(format!("bench360-evil-{}.db", std::process::id()));
    let hostile = [
        "DROP TABLE singer",
        "```sql\nDELETE FROM singer;\n```",
        "UPDATE singer SET Age = 0",
        "SELECT 1; DROP TABLE singer;",
        &format!("ATTACH DATABASE '{}' AS evil", evil.display()),
        "PRAGMA writable_schema = ON",
        "PRAGMA query_only = 0",
        "CREATE TABLE t AS SELECT * FROM singer",
        "VACUUM INTO '/tmp/bench360-vacuum.db'",
        "SELECT load_extension('/tmp/x.so')",
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT max(x) FROM r",
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r",
    ];
    let mut lines = String::new();
    for (i, h) in hostile.iter().enumerate() {
        lines.push_str(
            &json!({"id": i, "prediction": h, "reference": "SELECT count(*) FROM singer",
                    "database": db.to_str().unwrap()})
            .to_string(),
        );
        lines.push('\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("in.jsonl");
    std::fs::write(&f, &lines).unwrap();
    let o = bench(
        &dir.path().join("cache"),
        &["metric", "sql", "--sql-timeout", "1", f.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = parse_lines(&o.stdout);
    assert_eq!(out.len(), hostile.len());
    for (r, h) in out.iter().zip(hostile) {
        assert_eq!(r["execution_accuracy"], json!(0.0), "{h}: {r}");
    }
    let errors: Vec<String> = out
        .iter()
        .map(|r| r["error"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(errors[10].contains("time limit"), "{}", errors[10]);
    assert!(
        errors[11].contains("time limit") || errors[11].contains("rows"),
        "{}",
        errors[11]
    );
    // The time limits held: the runaway queries ended with their own "time limit" error
    // (checked above) rather than running on; no wall-clock bound is needed to see it.
    for db in &dbs {
        assert!(readme.contains(&sha256(db)), "{} changed", db.display());
    }
    assert!(!evil.exists(), "ATTACH created a file");
    assert!(!Path::new("/tmp/bench360-vacuum.db").exists());
    let leftovers: Vec<_> = std::fs::read_dir(db_dir.join("concert_singer"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "no journal or WAL files: {leftovers:?}");
}
