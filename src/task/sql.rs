//! Running model-generated SQL with least privilege, and comparing results.
//!
//! A [`Sandbox`] opens a SQLite file read-only, with `query_only` on, no attached databases
//! allowed (limit 0), extension loading off (rusqlite's default), and an authorizer that
//! allows only reading: SELECT, reads of columns, functions other than `load_extension`, and
//! recursive CTEs. Every other action — writes, DDL, ATTACH/DETACH, PRAGMA, transactions,
//! savepoints, ANALYZE, REINDEX, virtual tables — is refused while the statement is being
//! prepared, before it runs. A progress handler stops any statement past its time limit, and
//! results are capped in rows, so a runaway recursive CTE ends as an error, not a hang.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use regex::Regex;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

/// Results larger than this are an error (a model's cross join should not eat the memory).
pub(crate) const MAX_ROWS: usize = 100_000;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    /// A hashable form in which an integral REAL equals the INTEGER of the same value (as
    /// `1 == 1.0` in the reference evaluation's Python).
    fn canonical(&self) -> String {
        match self {
            Value::Null => "n".into(),
            Value::Int(i) => format!("i{i}"),
            Value::Real(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("i{}", *f as i64),
            Value::Real(f) => format!("r{:e}", f),
            Value::Text(s) => format!("t{s}"),
            Value::Blob(b) => format!("b{}", b.len()) + &String::from_utf8_lossy(b),
        }
    }
}

pub(crate) type Rows = Vec<Vec<Value>>;

pub(crate) struct Sandbox {
    conn: Connection,
    deadline_ns: Arc<AtomicI64>,
    base: Instant,
    timeout: Duration,
}

fn authorize(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => {
            Authorization::Allow
        }
        AuthAction::Function { function_name }
            if !function_name.eq_ignore_ascii_case("load_extension") =>
        {
            Authorization::Allow
        }
        _ => Authorization::Deny,
    }
}

impl Sandbox {
    pub(crate) fn open(path: &Path, timeout: Duration) -> Result<Sandbox, String> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| format!("cannot open {} read-only: {e}", path.display()))?;
        conn.pragma_update(None, "query_only", true)
            .map_err(|e| e.to_string())?;
        conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_ATTACHED, 0)
            .map_err(|e| e.to_string())?;
        conn.authorizer(Some(authorize));
        let deadline_ns = Arc::new(AtomicI64::new(i64::MAX));
        let base = Instant::now();
        let d = deadline_ns.clone();
        conn.progress_handler(
            1000,
            Some(move || base.elapsed().as_nanos() as i64 > d.load(Ordering::Relaxed)),
        );
        Ok(Sandbox {
            conn,
            deadline_ns,
            base,
            timeout,
        })
    }

    /// Runs one statement and returns its rows, or why it could not.
    pub(crate) fn query(&self, sql: &str) -> Result<Rows, String> {
        let start = self.base.elapsed();
        self.deadline_ns
            .store((start + self.timeout).as_nanos() as i64, Ordering::Relaxed);
        let res = self.query_inner(sql);
        self.deadline_ns.store(i64::MAX, Ordering::Relaxed);
        res.map_err(|e| {
            if self.base.elapsed() >= start + self.timeout {
                format!("stopped after the {:?} time limit", self.timeout)
            } else {
                e
            }
        })
    }

    fn query_inner(&self, sql: &str) -> Result<Rows, String> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| e.to_string())?;
        if !stmt.readonly() {
            return Err("not a read-only statement".into());
        }
        let n = stmt.column_count();
        let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| e.to_string())? {
            if out.len() >= MAX_ROWS {
                return Err(format!("more than {MAX_ROWS} rows"));
            }
            let mut r = Vec::with_capacity(n);
            for i in 0..n {
                r.push(match row.get_ref(i).map_err(|e| e.to_string())? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(v) => Value::Int(v),
                    ValueRef::Real(v) => Value::Real(v),
                    ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                });
            }
            out.push(r);
        }
        Ok(out)
    }
}

static ORDER_BY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\border\s+by\b").expect("valid regex"));

/// Whether the gold query orders its result (then order matters in the comparison).
pub(crate) fn orders(gold_sql: &str) -> bool {
    ORDER_BY.is_match(gold_sql)
}

/// Same result: row for row in order when `ordered`, else as multisets of rows. Columns are
/// compared in the order the queries return them.
pub(crate) fn same_result(gold: &Rows, pred: &Rows, ordered: bool) -> bool {
    if gold.len() != pred.len() {
        return false;
    }
    let key = |r: &Vec<Value>| r.iter().map(Value::canonical).collect::<Vec<_>>();
    if ordered {
        return gold.iter().zip(pred).all(|(a, b)| key(a) == key(b));
    }
    let mut counts: HashMap<Vec<String>, i64> = HashMap::new();
    for r in gold {
        *counts.entry(key(r)).or_default() += 1;
    }
    for r in pred {
        match counts.get_mut(&key(r)) {
            Some(c) if *c > 0 => *c -= 1,
            _ => return false,
        }
    }
    true
}

static FENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?s)```[ \t]*(?i:sql|sqlite)?[ \t]*\n?(.*?)```").expect("valid regex")
});
static OPEN_FENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?s)```[ \t]*(?i:sql|sqlite)?[ \t]*\n?(.*)$").expect("valid regex")
});
static STATEMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?is)\b(select|with)\b.*").expect("valid regex"));

/// The SQL in a model's output: the first fenced code block (closed or not), else the text
/// from the first SELECT or WITH; cut at the first `;` outside quotes. None when there is no
/// statement.
pub(crate) fn extract_sql(output: &str) -> Option<String> {
    let body = FENCE
        .captures(output)
        .or_else(|| OPEN_FENCE.captures(output))
        .map(|c| c[1].to_string())
        .unwrap_or_else(|| output.to_string());
    let m = STATEMENT.find(&body)?;
    let text = m.as_str();
    let mut quote: Option<char> = None;
    let mut end = text.len();
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '\'' | '"' | '`') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ';') => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let sql = text[..end].trim();
    (!sql.is_empty()).then(|| sql.to_string())
}

static SPACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").expect("valid regex"));
static AROUND_PUNCT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\s*([(),=<>!])\s*").expect("valid regex"));

/// Normalised SQL for the exact-match rate: lower case outside string literals, double quotes
/// as single, white space collapsed and removed around punctuation, no trailing `;`.
pub(crate) fn normalize_sql(sql: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    for c in sql.trim().trim_end_matches(';').chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push('\'');
            }
            (Some(q), c) if c == q => {
                quote = None;
                out.push('\'');
            }
            (Some(_), c) => out.push(c),
            (None, c) => out.extend(c.to_lowercase()),
        }
    }
    let collapsed = SPACES.replace_all(out.trim(), " ");
    AROUND_PUNCT.replace_all(&collapsed, "$1").into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db_path() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("datasets/spider/database/concert_singer/concert_singer.sqlite")
    }

    #[test]
    fn reads_and_compares_results() {
        let s = Sandbox::open(&db_path(), Duration::from_secs(5)).unwrap();
        let a = s.query("SELECT count(*) FROM singer").unwrap();
        assert_eq!(a, vec![vec![Value::Int(6)]]);
        let gold = s
            .query("SELECT name FROM singer ORDER BY age DESC")
            .unwrap();
        let rev = s.query("SELECT name FROM singer ORDER BY age ASC").unwrap();
        assert!(same_result(&gold, &rev, false), "same multiset");
        assert!(!same_result(&gold, &rev, true), "order differs");
        assert!(orders("SELECT name FROM singer ORDER BY age DESC"));
        assert!(!orders("SELECT name FROM singer"));
        // Multisets, not sets: a duplicate row matters.
        let one = vec![vec![Value::Int(1)]];
        let two = vec![vec![Value::Int(1)], vec![Value::Int(1)]];
        assert!(!same_result(&one, &two, false));
        // 1 and 1.0 are the same value; "1" is not.
        assert!(same_result(&one, &vec![vec![Value::Real(1.0)]], false));
        assert!(!same_result(
            &one,
            &vec![vec![Value::Text("1".into())]],
            false
        ));
    }

    #[test]
    fn refuses_everything_but_reading() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("db.sqlite");
        std::fs::copy(db_path(), &copy).unwrap();
        let before = std::fs::read(&copy).unwrap();
        let s = Sandbox::open(&copy, Duration::from_millis(300)).unwrap();
        for sql in [
            "DROP TABLE singer",
            "DELETE FROM singer",
            "UPDATE singer SET age = 0",
            "INSERT INTO singer(name) VALUES ('x')",
            "CREATE TABLE t(x)",
            "ATTACH DATABASE '/tmp/evil.db' AS evil",
            "PRAGMA writable_schema = ON",
            "PRAGMA query_only = OFF",
            "BEGIN",
            "VACUUM",
            "SELECT load_extension('x')",
            "SELECT 1; DROP TABLE singer",
        ] {
            assert!(s.query(sql).is_err(), "{sql} must fail");
        }
        let err = s
            .query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
            .unwrap_err();
        assert!(err.contains("time limit"), "{err}");
        // Still usable after a stopped query.
        assert_eq!(s.query("SELECT count(*) FROM singer").unwrap().len(), 1);
        drop(s);
        assert_eq!(std::fs::read(&copy).unwrap(), before);
        assert!(!dir.path().join("evil.db").exists() && !Path::new("/tmp/evil.db").exists());
    }

    #[test]
    fn extracts_sql_from_fences_and_prose() {
        assert_eq!(
            extract_sql("Here:\n```sql\nSELECT a FROM t;\n```\nDone").as_deref(),
            Some("SELECT a FROM t")
        );
        assert_eq!(
            extract_sql("```\nselect 1\n```").as_deref(),
            Some("select 1")
        );
        assert_eq!(
            extract_sql("The query is SELECT name FROM singer WHERE name = 'a;b'; it works")
                .as_deref(),
            Some("SELECT name FROM singer WHERE name = 'a;b'")
        );
        assert_eq!(extract_sql("```sql\nSELECT 1").as_deref(), Some("SELECT 1"));
        assert_eq!(extract_sql("I don't know"), None);
    }

    #[test]
    fn normalizes_for_exact_match() {
        assert_eq!(
            normalize_sql("SELECT  count(*)  FROM singer ;"),
            normalize_sql("select count( * ) from SINGER")
        );
        assert_eq!(
            normalize_sql("SELECT name FROM t WHERE c = \"France\""),
            "select name from t where c='France'"
        );
    }
}
