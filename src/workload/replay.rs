//! Replay traces: reading and checking a trace of arrivals (see the parent module).

/// One request of a replayed trace.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TraceItem {
    /// Arrival, seconds from the trace's start.
    pub t: f64,
    /// Output length to ask for (the request's max tokens), when the trace gives it.
    pub output_tokens: Option<u32>,
}

/// A replay trace that cannot be used, with its file (and line).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TraceError {
    #[error("cannot read {path}: {why}")]
    Unreadable { path: String, why: String },
    #[error("{path}:{line}: {why}")]
    Line {
        path: String,
        line: usize,
        why: String,
    },
    #[error("{path}: unknown trace format `.{ext}` (use .jsonl, .csv or .parquet)")]
    Format { path: String, ext: String },
    #[error("{path}: the trace has no requests")]
    Empty { path: String },
}

/// Reads a trace: JSONL (objects), CSV (header row) or Parquet, each with a `t` field in
/// seconds and an optional `output_tokens`. Errors name the file and line.
pub(crate) fn load_trace(path: &std::path::Path) -> Result<Vec<TraceItem>, TraceError> {
    let name = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut items = Vec::new();
    let at = |line: usize, why: String| TraceError::Line {
        path: name.clone(),
        line,
        why,
    };
    let unreadable = |e: &dyn std::fmt::Display| TraceError::Unreadable {
        path: name.clone(),
        why: e.to_string(),
    };
    const BAD_T: &str = "`t` must be a number of seconds ≥ 0";
    let item = |t: Option<f64>, out: Option<f64>, line: usize| -> Result<TraceItem, TraceError> {
        let t = t
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| at(line, BAD_T.into()))?;
        let output_tokens = match out {
            Some(o) if o.is_finite() && o >= 1.0 => Some(o as u32),
            Some(_) => return Err(at(line, "`output_tokens` must be ≥ 1".into())),
            None => None,
        };
        Ok(TraceItem { t, output_tokens })
    };
    match ext.as_str() {
        "jsonl" | "json" => {
            let text = std::fs::read_to_string(path).map_err(|e| unreadable(&e))?;
            for (i, line) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                let v: serde_json::Value =
                    serde_json::from_str(line).map_err(|e| at(i + 1, e.to_string()))?;
                items.push(item(
                    v.get("t").and_then(|x| x.as_f64()),
                    v.get("output_tokens").and_then(|x| x.as_f64()),
                    i + 1,
                )?);
            }
        }
        "csv" => {
            // The csv crate: quoted fields (with commas and quotes inside), a header row,
            // CRLF line ends; errors keep the file's line.
            let mut rdr = csv::ReaderBuilder::new()
                .has_headers(true)
                .trim(csv::Trim::All)
                .flexible(true)
                .from_path(path)
                .map_err(|e| unreadable(&e))?;
            let header = rdr.headers().map_err(|e| at(1, e.to_string()))?.clone();
            let col = |n: &str| header.iter().position(|h| h == n);
            let (ti, oi) = (
                col("t").ok_or_else(|| at(1, "no `t` column".into()))?,
                col("output_tokens"),
            );
            for rec in rdr.records() {
                let rec = rec.map_err(|e| {
                    let line = e.position().map_or(0, |p| p.line()) as usize;
                    at(line, e.to_string())
                })?;
                let line = rec.position().map_or(0, |p| p.line()) as usize;
                if rec.iter().all(|c| c.is_empty()) {
                    continue;
                }
                let num = |k: usize| {
                    rec.get(k)
                        .filter(|c| !c.is_empty())
                        .and_then(|c| c.parse::<f64>().ok())
                };
                let t = num(ti);
                if rec.get(ti).is_some_and(|c| !c.is_empty()) && t.is_none() {
                    return Err(at(line, BAD_T.into()));
                }
                items.push(item(t, oi.and_then(num), line)?);
            }
        }
        "parquet" => {
            let cols = crate::trace::read_numeric(path, &["t", "output_tokens"])
                .map_err(|e| unreadable(&e))?;
            let out = cols.get("output_tokens").cloned().unwrap_or_default();
            for (i, t) in cols["t"].iter().enumerate() {
                items.push(item(*t, out.get(i).copied().flatten(), i + 1)?);
            }
        }
        other => {
            return Err(TraceError::Format {
                path: name,
                ext: other.to_string(),
            })
        }
    }
    if items.is_empty() {
        return Err(TraceError::Empty { path: name });
    }
    items.sort_by(|a, b| a.t.total_cmp(&b.t));
    Ok(items)
}
