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
/// Largest string or blob a statement may make (SQLITE_LIMIT_LENGTH): `zeroblob(1e9)` fails
/// at once with "string or blob too big" instead of allocating.
pub(crate) const MAX_VALUE_BYTES: i32 = 1_000_000;
/// Largest result, summed over every value of every row.
pub(crate) const MAX_RESULT_BYTES: usize = 32 << 20;
/// SQLite's heap in this process, all sandboxes together (`sqlite3_hard_heap_limit64`): past
/// it a statement fails with "out of memory" and the others go on.
pub(crate) const HEAP_LIMIT_BYTES: i64 = 512 << 20;

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
            Value::Blob(b) => {
                // Bytes as they are (hex), never a lossy text decoding: x'ff' ≠ x'fe'.
                let mut s = String::with_capacity(1 + 2 * b.len());
                s.push('b');
                for byte in b {
                    s.push_str(&format!("{byte:02x}"));
                }
                s
            }
        }
    }
}

pub(crate) type Rows = Vec<Vec<Value>>;

/// Why a statement gave no rows: each is scored 0 with this cause, and scoring goes on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum SqlError {
    #[error("cannot open {path} read-only: {message}")]
    Open { path: String, message: String },
    #[error("not a read-only statement")]
    NotReadOnly,
    #[error("stopped after the {0:?} time limit")]
    TimeLimit(Duration),
    #[error("more than {MAX_ROWS} rows")]
    TooManyRows,
    #[error("result larger than {MAX_RESULT_BYTES} bytes")]
    TooLarge,
    /// SQLite's own error: syntax, an unknown name, an authorizer refusal, "string or blob too
    /// big", "out of memory".
    #[error("{0}")]
    Sqlite(String),
}

impl From<rusqlite::Error> for SqlError {
    fn from(e: rusqlite::Error) -> Self {
        SqlError::Sqlite(e.to_string())
    }
}

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
    pub(crate) fn open(path: &Path, timeout: Duration) -> Result<Sandbox, SqlError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| SqlError::Open {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        conn.pragma_update(None, "query_only", true)?;
        conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_ATTACHED, 0)?;
        conn.set_limit(
            rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH,
            MAX_VALUE_BYTES,
        )?;
        conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_SQL_LENGTH, 100_000)?;
        static HEAP: std::sync::Once = std::sync::Once::new();
        // SAFETY: sets a process-wide SQLite setting; callable at any time, from any thread.
        HEAP.call_once(|| unsafe {
            rusqlite::ffi::sqlite3_hard_heap_limit64(HEAP_LIMIT_BYTES);
        });
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
    pub(crate) fn query(&self, sql: &str) -> Result<Rows, SqlError> {
        let start = self.base.elapsed();
        self.deadline_ns
            .store((start + self.timeout).as_nanos() as i64, Ordering::Relaxed);
        let res = self.query_inner(sql);
        self.deadline_ns.store(i64::MAX, Ordering::Relaxed);
        res.map_err(|e| {
            if self.base.elapsed() >= start + self.timeout {
                SqlError::TimeLimit(self.timeout)
            } else {
                e
            }
        })
    }

    fn query_inner(&self, sql: &str) -> Result<Rows, SqlError> {
        let mut stmt = self.conn.prepare(sql)?;
        if !stmt.readonly() {
            return Err(SqlError::NotReadOnly);
        }
        let n = stmt.column_count();
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        let mut bytes = 0usize;
        while let Some(row) = rows.next()? {
            if out.len() >= MAX_ROWS {
                return Err(SqlError::TooManyRows);
            }
            if bytes > MAX_RESULT_BYTES {
                return Err(SqlError::TooLarge);
            }
            let mut r = Vec::with_capacity(n);
            for i in 0..n {
                let v = row.get_ref(i)?;
                bytes += 16
                    + match v {
                        ValueRef::Text(t) | ValueRef::Blob(t) => t.len(),
                        _ => 0,
                    };
                r.push(match v {
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

static FENCE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)```[^\n`]*\n?(.*?)```").expect("valid regex"));
static OPEN_FENCE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)```[^\n`]*\n?(.*)$").expect("valid regex"));
static START: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(?:select|with)\b").expect("valid regex"));

thread_local! {
    /// An empty in-memory database on which candidate statements are prepared, never run.
    static PARSER: Option<Connection> = Connection::open_in_memory().ok();
}

/// Whether SQLite's parser accepts `sql` as one whole statement. Preparing against an empty
/// database, errors about names ("no such table") mean the syntax was accepted.
fn parses(sql: &str) -> bool {
    PARSER.with(|c| {
        let Some(c) = c else { return false };
        match c.prepare(sql) {
            Ok(_) => true,
            Err(rusqlite::Error::SqlInputError { msg, .. })
            | Err(rusqlite::Error::SqliteFailure(_, Some(msg))) => {
                let m = msg.to_ascii_lowercase();
                !(m.contains("syntax error")
                    || m.contains("incomplete input")
                    || m.contains("unrecognized token")
                    || m.contains("unterminated"))
            }
            Err(_) => false,
        }
    })
}

/// Where a statement starting at the beginning of `text` may end: every line end, every `;`,
/// every sentence end (". ", a final "."), all outside quotes, and the end of the text.
fn cut_points(text: &str) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut quote: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        match (quote, c) {
            (None, '\'' | '"' | '`') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '\n' | ';') => cuts.push(i),
            (None, '.') if next.is_none_or(char::is_whitespace) => cuts.push(i),
            _ => {}
        }
    }
    cuts.push(text.len());
    cuts
}

/// Where the first `;` outside the `quotes` is.
fn first_semicolon(text: &str, quotes: &[char]) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if quotes.contains(&c) => quote = Some(c),
            None if c == ';' => return Some(i),
            None => {}
        }
    }
    None
}

/// A `;` outside quotes: more than one statement (SQLite would prepare only the first).
fn several_statements(sql: &str) -> bool {
    first_semicolon(sql, &['\'', '"', '`']).is_some()
}

/// The statement that starts at the beginning of `text`: its longest prefix, cut where prose
/// may resume, that SQLite's parser accepts.
fn statement_at(text: &str) -> Option<&str> {
    cut_points(text)
        .into_iter()
        .rev()
        .map(|end| text[..end].trim().trim_end_matches(';').trim_end())
        .find(|sql| !sql.is_empty() && !several_statements(sql) && parses(sql))
}

/// Other statements a model may give instead of a query (refused by the sandbox; scored 0).
static OTHER_START: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:create\s+(?:temp\s+|temporary\s+|unique\s+)?(?:table|index|view|trigger)|insert\s+(?:or\s+\w+\s+)?into|update\s+\w+\s+set|delete\s+from|drop\s+(?:table|index|view|trigger)|alter\s+table|replace\s+into|pragma\s+\w+)\b")
        .expect("valid regex")
});
/// A statement start that is SQL, not prose: SELECT, or a WITH that opens a CTE
/// ("with the desired output" is English).
static SQL_START: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bselect\b|\bwith\s+(?:recursive\s+)?[\w\x22`\[\]]+\s*(?:\([^)]*\)\s*)?as\s*(?:not\s+)?(?:materialized\s+)?\(")
        .expect("valid regex")
});
static INLINE_CODE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"`([^`\n]+)`").expect("valid regex"));

/// Statement starts of `re` in `text` that begin a statement rather than a subquery (not
/// right after an opening parenthesis).
fn starts(re: &Regex, text: &str) -> Vec<usize> {
    re.find_iter(text)
        .map(|m| m.start())
        .filter(|&i| !text[..i].trim_end().ends_with('('))
        .collect()
}

/// From `at`, up to the first `;` outside quotes, or the end.
fn up_to_semicolon(text: &str) -> &str {
    &text[..first_semicolon(text, &['\'', '"']).unwrap_or(text.len())]
}

/// Where prose resumes after a statement SQLite cannot parse: a blank line or a `;`.
fn up_to_prose(text: &str) -> &str {
    let t = up_to_semicolon(text);
    match t.find("\n\n") {
        Some(i) => &t[..i],
        None => t,
    }
}

fn clean(sql: &str) -> Option<String> {
    let sql = sql.trim().trim_end_matches(';').trim_end();
    (!sql.is_empty()).then(|| sql.to_string())
}

/// The SQL in a model's output, as a careful reader takes it (docs/tasks.md, "Answer extraction"):
/// 1. In the first fenced code block that holds one: its first SELECT/WITH statement (not a
///    subquery), up to a `;` or the fence's end — else its first other statement.
/// 2. An inline code span that SQLite parses as a whole statement.
/// 3. In the prose: the first SELECT/WITH at which SQLite's own parser accepts a statement,
///    the longest such prefix, cut where prose may resume (line ends, `;`, sentence ends).
/// 4. Otherwise the model's own statement as written, unparseable or cut off: the first
///    SELECT/WITH that begins a line (else any), up to a blank line or a `;` — then the first
///    other statement. It is scored by running it (a syntax error scores 0).
///
/// None when the output holds no statement.
pub(crate) fn extract_sql(output: &str) -> Option<String> {
    let mut fences: Vec<&str> = FENCE
        .captures_iter(output)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    if fences.is_empty() {
        if let Some(c) = OPEN_FENCE.captures(output) {
            fences.extend(c.get(1).map(|m| m.as_str()));
        }
    }
    for body in &fences {
        for re in [&*SQL_START, &*OTHER_START] {
            if let Some(&i) = starts(re, body).first() {
                return clean(up_to_semicolon(&body[i..]));
            }
        }
    }
    for c in INLINE_CODE.captures_iter(output) {
        let code = c[1].trim();
        if START.find(code).is_some_and(|m| m.start() == 0) {
            let sql = code.trim_end_matches(';').trim_end();
            if !several_statements(sql) && parses(sql) {
                return Some(sql.to_string());
            }
        }
    }
    let prose_starts = starts(&START, output);
    for &i in &prose_starts {
        if let Some(sql) = statement_at(&output[i..]) {
            return Some(sql.to_string());
        }
    }
    let line_start = |i: &usize| {
        output[..*i]
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .trim()
            .is_empty()
    };
    // Here the model's own words are taken without the parser's consent: only SQL written as
    // SQL (upper-case SELECT/WITH), not "Select the columns…".
    let sql_starts: Vec<usize> = starts(&SQL_START, output)
        .into_iter()
        .filter(|&i| output[i..].starts_with("SELECT") || output[i..].starts_with("WITH"))
        .collect();
    let fallback = sql_starts
        .iter()
        .find(|i| line_start(i))
        .or(sql_starts.first())
        .copied()
        .or_else(|| {
            starts(&OTHER_START, output)
                .into_iter()
                .find(|i| line_start(i))
        });
    fallback.and_then(|i| clean(up_to_prose(&output[i..])))
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
        assert_eq!(
            err,
            SqlError::TimeLimit(Duration::from_millis(300)),
            "{err}"
        );
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
        // Issue 14's phrasings: prose after a blank line, no `;`; prose with "with" first.
        assert_eq!(
            extract_sql("SELECT count(*) FROM singer\n\nThis query counts the singers.").as_deref(),
            Some("SELECT count(*) FROM singer")
        );
        assert_eq!(
            extract_sql(
                "Here is the query, written with standard SQLite syntax:\nSELECT name FROM singer ORDER BY age"
            )
            .as_deref(),
            Some("SELECT name FROM singer ORDER BY age")
        );
        assert_eq!(
            extract_sql("SELECT name FROM singer. It lists every singer.").as_deref(),
            Some("SELECT name FROM singer")
        );
        assert_eq!(
            extract_sql("SELECT 1; SELECT 2").as_deref(),
            Some("SELECT 1")
        );
        assert_eq!(
            extract_sql("WITH x AS (SELECT 1 AS a) SELECT a FROM x\nThat is all.").as_deref(),
            Some("WITH x AS (SELECT 1 AS a) SELECT a FROM x")
        );
    }

    #[test]
    fn huge_values_fail_the_statement_not_the_process() {
        let sb = Sandbox::open(&db_path(), Duration::from_secs(5)).unwrap();
        for sql in [
            "SELECT zeroblob(100000000) FROM singer",
            "SELECT zeroblob(1000000000) FROM singer",
            "SELECT zeroblob(400000000) FROM singer",
            "SELECT randomblob(900000) FROM singer a, singer b, singer c, singer d",
        ] {
            let err = sb.query(sql).unwrap_err().to_string();
            assert!(
                err.contains("too big") || err.contains("larger than") || err.contains("rows"),
                "{sql}: {err}"
            );
        }
        // The sandbox still answers afterwards.
        assert!(sb.query("SELECT count(*) FROM singer").is_ok());
    }

    #[test]
    fn blobs_compare_as_bytes() {
        let a = vec![vec![Value::Blob(vec![0xff])]];
        let b = vec![vec![Value::Blob(vec![0xfe])]];
        assert!(!same_result(&a, &b, false));
        assert!(same_result(&a, &a.clone(), true));
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
