//! Spider text-to-SQL: the prompt gives the database schema (from `tables.json`) and the
//! question; the score is execution accuracy — the predicted and the gold query run on the
//! database (read-only sandbox, time limit) and their results compared as multisets of rows,
//! in order when the gold query orders. The exact-match rate after normalisation is reported
//! beside it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::sql::{self, Sandbox};
use super::{read_jsonl, DatasetError, Sample, Score, TaskDef};

pub(crate) const TEMPLATE: &str = "text2sql/1\n\
Write one SQLite query that answers the question. Reply with the SQL query only.\n\n\
{shots: Database schema/Question/SQL blocks}\n\
Database schema:\n{CREATE TABLE per table, with primary and foreign keys}\n\nQuestion: {question}\nSQL:";
pub(crate) const METRIC: &str =
    "spider-execution/2 (multiset rows, ordered iff gold has ORDER BY; blobs as bytes; sql extraction v3: fences, inline code, sqlite parser, as written)";

#[derive(Debug, Deserialize)]
struct Item {
    id: String,
    db_id: String,
    question: String,
    query: String,
}

#[derive(Debug, Deserialize)]
struct Schema {
    db_id: String,
    table_names_original: Vec<String>,
    column_names_original: Vec<(i64, String)>,
    column_types: Vec<String>,
    primary_keys: Vec<serde_json::Value>,
    foreign_keys: Vec<(usize, usize)>,
}

/// The database files the task reads (for the run key).
pub(crate) fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.join("dev_subset.jsonl"), dir.join("tables.json")];
    if let Ok(entries) = std::fs::read_dir(dir.join("database")) {
        let mut dbs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| {
                let name = e.file_name();
                e.path().join(format!("{}.sqlite", name.to_string_lossy()))
            })
            .filter(|p| p.exists())
            .collect();
        dbs.sort();
        out.extend(dbs);
    }
    out
}

pub(crate) fn database_path(dir: &Path, db_id: &str) -> PathBuf {
    dir.join("database")
        .join(db_id)
        .join(format!("{db_id}.sqlite"))
}

fn schema_text(s: &Schema) -> String {
    let mut out = String::new();
    for (t, table) in s.table_names_original.iter().enumerate() {
        let cols: Vec<usize> = (0..s.column_names_original.len())
            .filter(|&c| s.column_names_original[c].0 == t as i64)
            .collect();
        let mut parts: Vec<String> = cols
            .iter()
            .map(|&c| {
                format!(
                    "{} {}",
                    s.column_names_original[c].1,
                    s.column_types.get(c).map_or("text", String::as_str)
                )
            })
            .collect();
        let pk: Vec<&str> = s
            .primary_keys
            .iter()
            .flat_map(|v| match v {
                serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_u64()).collect(),
                v => v.as_u64().into_iter().collect::<Vec<_>>(),
            })
            .filter(|&c| cols.contains(&(c as usize)))
            .map(|c| s.column_names_original[c as usize].1.as_str())
            .collect();
        if !pk.is_empty() {
            parts.push(format!("PRIMARY KEY ({})", pk.join(", ")));
        }
        for &(from, to) in &s.foreign_keys {
            if cols.contains(&from) {
                let (tt, tc) = &s.column_names_original[to];
                parts.push(format!(
                    "FOREIGN KEY ({}) REFERENCES {}({})",
                    s.column_names_original[from].1,
                    s.table_names_original
                        .get(*tt as usize)
                        .map_or("?", String::as_str),
                    tc
                ));
            }
        }
        out.push_str(&format!("CREATE TABLE {table} ({});\n", parts.join(", ")));
    }
    out
}

fn block(schema: &str, question: &str) -> String {
    format!(
        "Database schema:\n{schema}\nQuestion: {}\nSQL:",
        question.trim()
    )
}

pub(crate) fn load(def: &TaskDef, dir: &Path, seed: u64) -> Result<Vec<Sample>, DatasetError> {
    let path = dir.join("dev_subset.jsonl");
    let items: Vec<Item> = read_jsonl(&path)?;
    let tables_path = dir.join("tables.json");
    let text = std::fs::read_to_string(&tables_path).map_err(|source| DatasetError::Io {
        path: tables_path.display().to_string(),
        source,
    })?;
    let schemas: Vec<Schema> = serde_json::from_str(&text).map_err(|e| DatasetError::Line {
        path: tables_path.display().to_string(),
        line: e.line(),
        message: e.to_string(),
    })?;
    let schemas: HashMap<&str, String> = schemas
        .iter()
        .map(|s| (s.db_id.as_str(), schema_text(s)))
        .collect();
    for (i, item) in items.iter().enumerate() {
        let err = |message: String| DatasetError::Line {
            path: path.display().to_string(),
            line: i + 1,
            message,
        };
        if !schemas.contains_key(item.db_id.as_str()) {
            return Err(err(format!(
                "`{}` names database `{}`, which tables.json does not describe",
                item.id, item.db_id
            )));
        }
        if !database_path(dir, &item.db_id).exists() {
            return Err(err(format!(
                "`{}` names database `{}`, but {} does not exist",
                item.id,
                item.db_id,
                database_path(dir, &item.db_id).display()
            )));
        }
    }
    if items.is_empty() {
        return Err(DatasetError::File {
            path: path.display().to_string(),
            message: "no questions".into(),
        });
    }
    let order = super::sample_order(items.len(), def.samples, seed, "text2sql/order");
    let mut out = Vec::with_capacity(order.len());
    for &i in &order {
        let item = &items[i];
        let mut shots = super::Shots::new(
            "Write one SQLite query that answers the question. Reply with the SQL query only.\n\n",
            def.fewshot_as_turns,
        );
        for s in super::shot_indices(items.len(), &order, i, def.shots, seed, &item.id) {
            let shot = &items[s];
            shots.push(
                &block(&schemas[shot.db_id.as_str()], &shot.question),
                shot.query.trim(),
            );
        }
        let (prompt, history) = shots.finish(&block(&schemas[item.db_id.as_str()], &item.question));
        out.push(Sample {
            id: item.id.clone(),
            system: def.system.clone(),
            prompt,
            reference: item.query.clone(),
            references: vec![item.query.clone()],
            groups: BTreeMap::from([("db".to_string(), item.db_id.clone())]),
            extra: BTreeMap::from([(
                "database".to_string(),
                database_path(dir, &item.db_id).display().to_string(),
            )]),
            history,
            ..Default::default()
        });
    }
    Ok(out)
}

/// Scores every output; outputs on the same database share one sandboxed connection.
pub(crate) fn score_all(items: &[(&Sample, &str)], timeout: Duration) -> Vec<Score> {
    let mut out: Vec<Option<Score>> = vec![None; items.len()];
    let mut by_db: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (s, _)) in items.iter().enumerate() {
        by_db
            .entry(s.extra.get("database").map_or("", String::as_str))
            .or_default()
            .push(i);
    }
    use rayon::prelude::*;
    let scored: Vec<(usize, Score)> = by_db
        .into_par_iter()
        .flat_map_iter(|(db, idx)| {
            let sandbox = Sandbox::open(Path::new(db), timeout);
            idx.into_iter()
                .map(|i| {
                    let (sample, output) = items[i];
                    let score = match &sandbox {
                        Ok(sb) => score_with(sb, sample, output),
                        Err(e) => Score {
                            error: Some(e.to_string()),
                            unscorable: true,
                            fault: true,
                            ..Score::default()
                        },
                    };
                    (i, score)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for (i, s) in scored {
        out[i] = Some(s);
    }
    out.into_iter()
        .map(|s| s.expect("every item scored"))
        .collect()
}

pub(crate) fn score_with(sb: &Sandbox, sample: &Sample, output: &str) -> Score {
    let gold = match sb.query(&sample.reference) {
        Ok(rows) => rows,
        Err(e) => {
            return Score {
                error: Some(format!("the gold query failed: {e}")),
                unscorable: true,
                fault: true,
                ..Score::default()
            }
        }
    };
    let Some(pred_sql) = sql::extract_sql(output) else {
        return Score {
            parsed: Some(false),
            metrics: BTreeMap::from([
                ("execution_accuracy".to_string(), 0.0),
                ("exact_match".to_string(), 0.0),
            ]),
            error: Some("no SQL statement in the output".into()),
            correct: Some(false),
            ..Score::default()
        };
    };
    let em = f64::from(u8::from(
        sql::normalize_sql(&pred_sql) == sql::normalize_sql(&sample.reference),
    ));
    let (ex, error) = match sb.query(&pred_sql) {
        Ok(rows) => (
            sql::same_result(&gold, &rows, sql::orders(&sample.reference)),
            None,
        ),
        Err(e) => (false, Some(e)),
    };
    let exf = f64::from(u8::from(ex));
    Score {
        score: exf,
        correct: Some(ex),
        extracted: Some(pred_sql),
        parsed: Some(true),
        metrics: BTreeMap::from([
            ("execution_accuracy".to_string(), exf),
            ("exact_match".to_string(), em),
        ]),
        error: error.map(|e| e.to_string()),
        unscorable: false,
        fault: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/spider")
    }

    #[test]
    fn prompts_carry_the_schema_and_gold_queries_all_run() {
        let def = super::super::tests::def(crate::spec::TaskKind::Text2Sql, None);
        let samples = load(&def, &dir(), 1).unwrap();
        assert_eq!(samples.len(), 972);
        let s = samples.iter().find(|s| s.id == "dev_0").unwrap();
        assert!(s.prompt.contains("CREATE TABLE singer ("), "{}", s.prompt);
        assert!(s
            .prompt
            .contains("FOREIGN KEY (Singer_ID) REFERENCES singer(Singer_ID)"));
        assert!(s
            .prompt
            .ends_with("Question: How many singers do we have?\nSQL:"));
        // The gold query scores 1 against itself on every question of the subset.
        let items: Vec<(&Sample, &str)> =
            samples.iter().map(|s| (s, s.reference.as_str())).collect();
        let scores = score_all(&items, Duration::from_secs(10));
        let bad: Vec<_> = scores
            .iter()
            .zip(&samples)
            .filter(|(sc, _)| sc.score != 1.0)
            .map(|(sc, s)| (s.id.clone(), sc.error.clone()))
            .collect();
        assert!(bad.is_empty(), "{bad:?}");
    }

    #[test]
    fn scores_by_execution_not_by_text() {
        let def = super::super::tests::def(crate::spec::TaskKind::Text2Sql, None);
        let samples = load(&def, &dir(), 1).unwrap();
        let s = samples.iter().find(|s| s.id == "dev_0").unwrap();
        let outs = [
            "```sql\nSELECT COUNT(singer_id) FROM singer;\n```",
            "SELECT count(*) FROM singer",
            "SELECT count(*) FROM stadium",
            "SELECT nonsense FROM nowhere",
            "DROP TABLE singer",
            "I cannot answer",
        ];
        let items: Vec<(&Sample, &str)> = outs.iter().map(|o| (s, *o)).collect();
        let sc = score_all(&items, Duration::from_secs(5));
        assert_eq!(sc[0].score, 1.0, "different text, same result");
        assert_eq!(sc[0].metrics["exact_match"], 0.0);
        assert_eq!(sc[1].metrics["exact_match"], 1.0);
        assert_eq!(sc[2].score, 0.0);
        assert!(sc[3].error.is_some());
        // A DROP is a statement (read as written), refused by the sandbox before it runs.
        assert_eq!(sc[4].score, 0.0);
        assert_eq!(sc[4].parsed, Some(true));
        assert!(sc[4].error.is_some(), "{:?}", sc[4]);
        assert_eq!(sc[5].parsed, Some(false));
    }
}
