//! Arrow schemas and Parquet writers of the trace tables. One module owns every schema; each
//! table carries `schema_version`, the node key and the configuration columns, so files
//! of many runs concatenate in a notebook without joins.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::record::stats;

/// A Parquet table that could not be written or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TableError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),
    /// The `parquet` crate panicked reading it (corrupt page headers, lengths past the end).
    #[error("{} is not a readable Parquet file (damaged)", path.display())]
    Damaged { path: std::path::PathBuf },
    #[error("column type {0} is not supported in datasets")]
    Unsupported(String),
}
use crate::record::Columns;
use crate::record::{ChunkRecord, RequestRecord};
use crate::record::{Sample, Score};

pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Rows per row group (the parquet crate's default).
const ROW_GROUP: usize = 1024 * 1024;

struct Table {
    fields: Vec<Field>,
    columns: Vec<ArrayRef>,
    /// Columns holding one value on every row (the configuration): written PLAIN, which
    /// Snappy shrinks to almost nothing, instead of interning every row into a dictionary.
    constant: Vec<String>,
}

impl Table {
    fn new(n: usize, node_key: &str, c: &Columns) -> Table {
        let mut t = Table {
            fields: Vec::new(),
            columns: Vec::new(),
            constant: Vec::new(),
        };
        let u32c = |v: u32| Arc::new(UInt32Array::from_value(v, n)) as ArrayRef;
        t.push(
            "schema_version",
            DataType::UInt32,
            false,
            u32c(SCHEMA_VERSION),
        );
        t.const_str("node_key", node_key, n);
        for (name, v) in [
            ("sweep", &c.sweep),
            ("model", &c.model),
            ("quantization", &c.quantization),
            ("engine", &c.engine),
            ("engine_kind", &c.engine_kind),
            ("task", &c.task),
            ("scenario", &c.scenario),
            ("scenario_kind", &c.scenario_kind),
            ("scenario_params", &c.scenario_params),
        ] {
            t.const_str(name, v, n);
        }
        t.push("max_tokens", DataType::UInt32, false, u32c(c.max_tokens));
        let f64c = |v: f64| Arc::new(Float64Array::from_value(v, n)) as ArrayRef;
        t.push("temperature", DataType::Float64, false, f64c(c.temperature));
        t.push("top_p", DataType::Float64, false, f64c(c.top_p));
        let seed = Arc::new(Int64Array::from_value(c.seed as i64, n)) as ArrayRef;
        t.push("seed", DataType::Int64, false, seed);
        t.push("repeat", DataType::UInt32, false, u32c(c.repeat));
        t.constant = t.fields.iter().map(|f| f.name().clone()).collect();
        t
    }

    fn push(&mut self, name: &str, dt: DataType, nullable: bool, a: ArrayRef) {
        self.fields.push(Field::new(name, dt, nullable));
        self.columns.push(a);
    }
    fn str(&mut self, name: &str, v: Vec<Option<String>>, nullable: bool) {
        self.push(
            name,
            DataType::Utf8,
            nullable,
            Arc::new(StringArray::from(v)),
        );
    }
    /// A string column from borrowed values: one buffer, no allocation per row.
    fn str_iter<'a>(
        &mut self,
        name: &str,
        v: impl Iterator<Item = Option<&'a str>>,
        nullable: bool,
    ) {
        self.push(
            name,
            DataType::Utf8,
            nullable,
            Arc::new(v.collect::<StringArray>()),
        );
    }
    /// A column of one string on every row, built as two buffers (the value repeated, and
    /// evenly spaced offsets) rather than row by row.
    fn const_str(&mut self, name: &str, v: &str, n: usize) {
        let len = v.len() as i64;
        assert!(
            len * n as i64 <= i64::from(i32::MAX),
            "column `{name}`: {n} rows of {len} bytes exceed a string column's 2 GiB"
        );
        let offsets: Vec<i32> = (0..=n as i64).map(|i| (i * len) as i32).collect();
        // SAFETY: the values are `v` repeated, a valid UTF-8 string, and every offset is a
        // multiple of its length, so each slice is exactly `v` (offsets rise monotonically
        // from 0 to the buffer's length).
        let array = unsafe {
            StringArray::new_unchecked(
                arrow_buffer::OffsetBuffer::new_unchecked(offsets.into()),
                arrow_buffer::Buffer::from(v.repeat(n).into_bytes()),
                None,
            )
        };
        self.push(name, DataType::Utf8, false, Arc::new(array));
    }
    fn u32(&mut self, name: &str, v: Vec<Option<u32>>, nullable: bool) {
        self.push(
            name,
            DataType::UInt32,
            nullable,
            Arc::new(UInt32Array::from(v)),
        );
    }
    fn i64(&mut self, name: &str, v: Vec<Option<i64>>, nullable: bool) {
        self.push(
            name,
            DataType::Int64,
            nullable,
            Arc::new(Int64Array::from(v)),
        );
    }
    fn f64(&mut self, name: &str, v: Vec<Option<f64>>, nullable: bool) {
        self.push(
            name,
            DataType::Float64,
            nullable,
            Arc::new(Float64Array::from(v)),
        );
    }
    fn bool(&mut self, name: &str, v: Vec<Option<bool>>, nullable: bool) {
        self.push(
            name,
            DataType::Boolean,
            nullable,
            Arc::new(BooleanArray::from(v)),
        );
    }

    /// Writes the table: row groups of at most [`ROW_GROUP`] rows, the columns of each row
    /// group encoded in parallel (rayon), then appended in schema order — the same file the
    /// single-threaded `ArrowWriter` writes, faster on several cores.
    fn write(self, path: &Path) -> Result<(), TableError> {
        self.write_groups(path, ROW_GROUP)
    }

    fn write_groups(self, path: &Path, row_group: usize) -> Result<(), TableError> {
        use parquet::arrow::arrow_writer::{compute_leaves, ArrowRowGroupWriterFactory};
        use parquet::arrow::ArrowSchemaConverter;
        use parquet::file::writer::SerializedFileWriter;
        use rayon::prelude::*;
        let schema = Arc::new(Schema::new(self.fields));
        // Checks lengths and types, as ArrowWriter would.
        let batch = RecordBatch::try_new(schema.clone(), self.columns)?;
        let mut props = WriterProperties::builder().set_compression(Compression::SNAPPY);
        for f in schema.fields().iter() {
            if self.constant.contains(f.name()) {
                let c = f.name().as_str();
                props = props.set_column_dictionary_enabled(c.into(), false);
            }
        }
        let mut props = props.build();
        // The Arrow schema in the file's metadata, as ArrowWriter stores it (readers restore
        // the exact Arrow types from it).
        parquet::arrow::add_encoded_arrow_schema_to_metadata(&schema, &mut props);
        let props = Arc::new(props);
        let parquet_schema = ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&schema)?;
        let file = std::io::BufWriter::with_capacity(1 << 20, File::create(path)?);
        let mut writer =
            SerializedFileWriter::new(file, parquet_schema.root_schema_ptr(), props.clone())?;
        let factory = ArrowRowGroupWriterFactory::new(&writer, schema.clone());
        let rows = batch.num_rows();
        let mut start = 0;
        let mut index = 0;
        while start < rows || (rows == 0 && index == 0) {
            let len = (rows - start).min(row_group);
            let part = batch.slice(start, len);
            let writers = factory.create_column_writers(index)?;
            let mut leaves = Vec::with_capacity(writers.len());
            for (field, col) in schema.fields().iter().zip(part.columns()) {
                leaves.extend(compute_leaves(field, col)?);
            }
            let chunks = writers
                .into_par_iter()
                .zip(leaves.into_par_iter())
                .map(|(mut w, leaf)| {
                    w.write(&leaf)?;
                    w.close()
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut rg = writer.next_row_group()?;
            for c in chunks {
                c.append_to_row_group(&mut rg)?;
            }
            rg.close()?;
            start += len;
            index += 1;
            if rows == 0 {
                break;
            }
        }
        writer.close()?;
        Ok(())
    }
}

/// `requests.parquet`: one row per measured request.
pub(crate) fn write_requests(
    path: &Path,
    node_key: &str,
    c: &Columns,
    utc_anchor_ns: i64,
    rs: &[RequestRecord],
) -> Result<(), TableError> {
    let n = rs.len();
    let mut t = Table::new(n, node_key, c);
    t.i64("run_start_utc_ns", vec![Some(utc_anchor_ns); n], false);
    t.u32("request_id", rs.iter().map(|r| Some(r.id)).collect(), false);
    t.u32("user", rs.iter().map(|r| r.user).collect(), true);
    t.str(
        "sample_id",
        rs.iter().map(|r| Some(r.sample_id.clone())).collect(),
        false,
    );
    t.i64(
        "scheduled_ns",
        rs.iter().map(|r| Some(r.scheduled_ns)).collect(),
        false,
    );
    t.i64("sent_ns", rs.iter().map(|r| r.sent_ns).collect(), true);
    t.i64(
        "first_byte_ns",
        rs.iter().map(|r| r.first_byte_ns).collect(),
        true,
    );
    t.i64(
        "first_token_ns",
        rs.iter().map(|r| r.first_token_ns).collect(),
        true,
    );
    t.i64(
        "first_reasoning_ns",
        rs.iter().map(|r| r.first_reasoning_ns).collect(),
        true,
    );
    t.i64(
        "last_token_ns",
        rs.iter().map(|r| r.last_token_ns).collect(),
        true,
    );
    t.i64("end_ns", rs.iter().map(|r| Some(r.end_ns)).collect(), false);
    t.f64("queue_ms", rs.iter().map(stats::queue_ms).collect(), true);
    t.f64(
        "ttft_ms",
        rs.iter()
            .map(|r| r.ok().then(|| stats::ttft_ms(r)).flatten())
            .collect(),
        true,
    );
    t.f64(
        "tpot_ms",
        rs.iter()
            .map(|r| r.ok().then(|| stats::tpot_ms(r)).flatten())
            .collect(),
        true,
    );
    t.f64(
        "ttfa_ms",
        rs.iter()
            .map(|r| r.ok().then(|| stats::ttfa_ms(r)).flatten())
            .collect(),
        true,
    );
    t.f64(
        "e2e_ms",
        rs.iter()
            .map(|r| r.ok().then(|| stats::e2e_ms(r)))
            .collect(),
        true,
    );
    t.u32(
        "prompt_tokens",
        rs.iter().map(|r| r.prompt_tokens).collect(),
        true,
    );
    t.u32(
        "completion_tokens",
        rs.iter().map(|r| r.completion_tokens).collect(),
        true,
    );
    t.u32(
        "reasoning_tokens",
        rs.iter().map(|r| r.reasoning_tokens).collect(),
        true,
    );
    t.u32("chunks", rs.iter().map(|r| Some(r.chunks)).collect(), false);
    t.u32(
        "content_chunks",
        rs.iter().map(|r| Some(r.content_chunks)).collect(),
        false,
    );
    t.u32(
        "http_status",
        rs.iter().map(|r| r.http_status.map(u32::from)).collect(),
        true,
    );
    t.u32(
        "request_max_tokens",
        rs.iter().map(|r| r.max_tokens).collect(),
        true,
    );
    t.str(
        "finish_reason",
        rs.iter().map(|r| r.finish_reason.clone()).collect(),
        true,
    );
    t.bool("ok", rs.iter().map(|r| Some(r.ok())).collect(), false);
    t.str("error", rs.iter().map(|r| r.error.clone()).collect(), true);
    t.str(
        "output",
        rs.iter().map(|r| Some(r.output.clone())).collect(),
        false,
    );
    t.str(
        "top_logprobs",
        rs.iter().map(|r| r.top_logprobs.clone()).collect(),
        true,
    );
    t.write(path)
}

/// `chunks.parquet`: one row per streamed event of every measured request.
pub(crate) fn write_chunks(
    path: &Path,
    node_key: &str,
    c: &Columns,
    cs: &[ChunkRecord],
) -> Result<(), TableError> {
    let mut t = Table::new(cs.len(), node_key, c);
    t.u32(
        "request_id",
        cs.iter().map(|x| Some(x.request_id)).collect(),
        false,
    );
    t.u32(
        "chunk_index",
        cs.iter().map(|x| Some(x.index)).collect(),
        false,
    );
    t.i64("t_ns", cs.iter().map(|x| Some(x.t_ns)).collect(), false);
    t.str_iter("kind", cs.iter().map(|x| Some(x.kind.as_str())), false);
    t.u32("chars", cs.iter().map(|x| Some(x.chars)).collect(), false);
    t.u32("tokens", cs.iter().map(|x| x.tokens).collect(), true);
    t.write(path)
}

/// `telemetry.parquet`: one row per telemetry sample (idle baseline and run window).
pub(crate) fn write_telemetry(
    path: &Path,
    node_key: &str,
    c: &Columns,
    s: &[crate::record::TelemetrySample],
) -> Result<(), TableError> {
    let mut t = Table::new(s.len(), node_key, c);
    t.i64("t_ns", s.iter().map(|x| Some(x.t_ns)).collect(), false);
    t.str(
        "source",
        s.iter()
            .map(|x| Some(x.source.as_str().to_string()))
            .collect(),
        false,
    );
    t.str(
        "device",
        s.iter().map(|x| Some(x.device.clone())).collect(),
        false,
    );
    type Get = fn(&crate::record::TelemetrySample) -> Option<f64>;
    let before: [(&str, Get); 9] = [
        ("power_w", |x| x.power_w),
        ("energy_mj", |x| x.energy_mj),
        ("mem_used_mb", |x| x.mem_used_mb),
        ("mem_total_mb", |x| x.mem_total_mb),
        ("util_pct", |x| x.util_pct),
        ("mem_util_pct", |x| x.mem_util_pct),
        ("sm_clock_mhz", |x| x.sm_clock_mhz),
        ("mem_clock_mhz", |x| x.mem_clock_mhz),
        ("temp_c", |x| x.temp_c),
    ];
    for (name, f) in before {
        t.f64(name, s.iter().map(f).collect(), true);
    }
    t.i64(
        "throttle_reasons",
        s.iter()
            .map(|x| x.throttle_reasons.map(|b| b as i64))
            .collect(),
        true,
    );
    let after: [(&str, Get); 8] = [
        ("proc_gpu_mem_mb", |x| x.proc_mem_mb),
        ("other_gpu_procs", |x| x.other_procs),
        ("other_gpu_mem_mb", |x| x.other_mem_mb),
        ("cpu_pct", |x| x.cpu_pct),
        ("rss_mb", |x| x.rss_mb),
        ("running", |x| x.running),
        ("waiting", |x| x.waiting),
        ("kv_cache_pct", |x| x.kv_cache_pct),
    ];
    for (name, f) in after {
        t.f64(name, s.iter().map(f).collect(), true);
    }
    t.write(path)
}

/// `engine_metrics.parquet`: every Prometheus sample scraped from the engine, raw.
pub(crate) fn write_engine_metrics(
    path: &Path,
    node_key: &str,
    c: &Columns,
    p: &[(i64, crate::record::PromSample)],
) -> Result<(), TableError> {
    let mut t = Table::new(p.len(), node_key, c);
    t.i64("t_ns", p.iter().map(|x| Some(x.0)).collect(), false);
    t.str(
        "metric",
        p.iter().map(|x| Some(x.1.name.clone())).collect(),
        false,
    );
    t.str(
        "labels",
        p.iter().map(|x| Some(x.1.labels.clone())).collect(),
        false,
    );
    t.f64("value", p.iter().map(|x| Some(x.1.value)).collect(), false);
    t.write(path)
}

/// `scores.parquet` (score node): one row per request of the run, joined to
/// `requests.parquet` by (`run_key`, `request_id`). Fixed columns, then one Float64 column per
/// metric the task reports per request (e.g. `accuracy`; `exact`, `f1`; `rouge1`…`rougeLsum`;
/// `execution_accuracy`, `exact_match`) and one string column `group_<name>` per grouping
/// (e.g. `group_subject`, `group_answerable`). Failed requests have null scores.
pub(crate) fn write_scores(
    path: &Path,
    node_key: &str,
    run_key: &str,
    c: &Columns,
    rows: &[(u32, &Sample, Option<&Score>)],
) -> Result<(), TableError> {
    let mut t = Table::new(rows.len(), node_key, c);
    t.str(
        "run_key",
        vec![Some(run_key.to_string()); rows.len()],
        false,
    );
    t.u32(
        "request_id",
        rows.iter().map(|r| Some(r.0)).collect(),
        false,
    );
    t.str(
        "sample_id",
        rows.iter().map(|r| Some(r.1.id.clone())).collect(),
        false,
    );
    t.str(
        "reference",
        rows.iter().map(|r| Some(r.1.reference.clone())).collect(),
        false,
    );
    t.str(
        "extracted",
        rows.iter()
            .map(|r| r.2.and_then(|s| s.extracted.clone()))
            .collect(),
        true,
    );
    fn scorable<'a>(r: &(u32, &Sample, Option<&'a Score>)) -> Option<&'a Score> {
        r.2.filter(|s| !s.unscorable)
    }
    t.f64(
        "score",
        rows.iter().map(|r| scorable(r).map(|s| s.score)).collect(),
        true,
    );
    t.bool(
        "correct",
        rows.iter()
            .map(|r| scorable(r).and_then(|s| s.correct))
            .collect(),
        true,
    );
    t.bool(
        "parsed",
        rows.iter().map(|r| r.2.and_then(|s| s.parsed)).collect(),
        true,
    );
    t.str(
        "score_error",
        rows.iter()
            .map(|r| r.2.and_then(|s| s.error.clone()))
            .collect(),
        true,
    );
    let metric_names: std::collections::BTreeSet<&String> = rows
        .iter()
        .filter_map(|r| r.2)
        .flat_map(|s| s.metrics.keys())
        .collect();
    for m in metric_names {
        t.f64(
            m,
            rows.iter()
                .map(|r| scorable(r).and_then(|s| s.metrics.get(m).copied()))
                .collect(),
            true,
        );
    }
    let group_names: std::collections::BTreeSet<&String> =
        rows.iter().flat_map(|r| r.1.groups.keys()).collect();
    for g in group_names {
        t.str(
            &format!("group_{g}"),
            rows.iter().map(|r| r.1.groups.get(g).cloned()).collect(),
            true,
        );
    }
    t.write(path)
}

/// Runs a Parquet read that the `parquet` crate may panic in on a damaged file (seen by the
/// fuzzer: corrupt page headers, lengths past the end): the panic becomes an error naming
/// the file, and the caller goes on.
fn guarded<T>(path: &Path, read: impl FnOnce() -> Result<T, TableError>) -> Result<T, TableError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|_| {
        Err(TableError::Damaged {
            path: path.to_path_buf(),
        })
    })
}

/// The rows of a Parquet file as JSON objects (strings, numbers, booleans, lists of them),
/// for user datasets.
pub(crate) fn read_json_rows(
    path: &Path,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, TableError> {
    guarded(path, || read_json_rows_inner(path))
}

/// Reads numeric (and boolean) columns of a Parquet file as f64 (nulls as None). Columns
/// missing from the file come back empty.
pub(crate) fn read_numeric(
    path: &Path,
    names: &[&str],
) -> Result<std::collections::BTreeMap<String, Vec<Option<f64>>>, TableError> {
    guarded(path, || read_numeric_inner(path, names))
}

/// Reads utf8 columns of a Parquet file.
pub(crate) fn read_strings(
    path: &Path,
    names: &[&str],
) -> Result<std::collections::BTreeMap<String, Vec<Option<String>>>, TableError> {
    guarded(path, || read_strings_inner(path, names))
}

fn read_json_rows_inner(
    path: &Path,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, TableError> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    use arrow_array::{Array, ArrayRef};
    use arrow_schema::DataType as D;
    use serde_json::Value;
    fn cell(a: &ArrayRef, i: usize) -> Result<Value, TableError> {
        if a.is_null(i) {
            return Ok(Value::Null);
        }
        Ok(match a.data_type() {
            D::Utf8 => Value::from(a.as_string::<i32>().value(i)),
            D::LargeUtf8 => Value::from(a.as_string::<i64>().value(i)),
            D::Utf8View => Value::from(a.as_string_view().value(i)),
            D::Boolean => Value::from(a.as_boolean().value(i)),
            D::Int8 => Value::from(a.as_primitive::<Int8Type>().value(i)),
            D::Int16 => Value::from(a.as_primitive::<Int16Type>().value(i)),
            D::Int32 => Value::from(a.as_primitive::<Int32Type>().value(i)),
            D::Int64 => Value::from(a.as_primitive::<Int64Type>().value(i)),
            D::UInt8 => Value::from(a.as_primitive::<UInt8Type>().value(i)),
            D::UInt16 => Value::from(a.as_primitive::<UInt16Type>().value(i)),
            D::UInt32 => Value::from(a.as_primitive::<UInt32Type>().value(i)),
            D::UInt64 => Value::from(a.as_primitive::<UInt64Type>().value(i)),
            D::Float32 => Value::from(a.as_primitive::<Float32Type>().value(i)),
            D::Float64 => Value::from(a.as_primitive::<Float64Type>().value(i)),
            D::List(_) => {
                let l = a.as_list::<i32>().value(i);
                Value::Array(
                    (0..l.len())
                        .map(|j| cell(&l, j))
                        .collect::<Result<_, _>>()?,
                )
            }
            D::LargeList(_) => {
                let l = a.as_list::<i64>().value(i);
                Value::Array(
                    (0..l.len())
                        .map(|j| cell(&l, j))
                        .collect::<Result<_, _>>()?,
                )
            }
            other => return Err(TableError::Unsupported(other.to_string())),
        })
    }
    let mut out = Vec::new();
    for batch in batches(path)? {
        let batch = batch?;
        let schema = batch.schema();
        for i in 0..batch.num_rows() {
            let mut row = serde_json::Map::new();
            for (f, col) in schema.fields().iter().zip(batch.columns()) {
                row.insert(f.name().clone(), cell(col, i)?);
            }
            out.push(row);
        }
    }
    Ok(out)
}

/// The record batches of a Parquet file.
fn batches(
    path: &Path,
) -> Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader, TableError> {
    Ok(
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?
            .build()?,
    )
}

/// Reads numeric (and boolean) columns of a Parquet file as f64 (nulls as None). Columns
/// missing from the file come back empty.
fn read_numeric_inner(
    path: &Path,
    names: &[&str],
) -> Result<std::collections::BTreeMap<String, Vec<Option<f64>>>, TableError> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type, UInt32Type};
    use arrow_array::Array;
    let mut out: std::collections::BTreeMap<String, Vec<Option<f64>>> =
        names.iter().map(|n| (n.to_string(), Vec::new())).collect();
    for batch in batches(path)? {
        let batch = batch?;
        for n in names {
            let Some(col) = batch.column_by_name(n) else {
                continue;
            };
            let v = out.get_mut(*n).expect("initialized");
            let get = |i: usize| -> Option<f64> {
                if col.is_null(i) {
                    return None;
                }
                match col.data_type() {
                    DataType::Float64 => Some(col.as_primitive::<Float64Type>().value(i)),
                    DataType::Int64 => Some(col.as_primitive::<Int64Type>().value(i) as f64),
                    DataType::UInt32 => Some(col.as_primitive::<UInt32Type>().value(i) as f64),
                    DataType::Boolean => Some(col.as_boolean().value(i) as u8 as f64),
                    _ => None,
                }
            };
            v.extend((0..col.len()).map(get));
        }
    }
    Ok(out)
}

/// Reads utf8 columns of a Parquet file.
fn read_strings_inner(
    path: &Path,
    names: &[&str],
) -> Result<std::collections::BTreeMap<String, Vec<Option<String>>>, TableError> {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    let mut out: std::collections::BTreeMap<String, Vec<Option<String>>> =
        names.iter().map(|n| (n.to_string(), Vec::new())).collect();
    for batch in batches(path)? {
        let batch = batch?;
        for n in names {
            let Some(col) = batch.column_by_name(n) else {
                continue;
            };
            let s = col.as_string::<i32>();
            out.get_mut(*n)
                .expect("initialized")
                .extend((0..s.len()).map(|i| (!s.is_null(i)).then(|| s.value(i).to_string())));
        }
    }
    Ok(out)
}

/// A table of rows of named values, written as Parquet and CSV (summary.parquet/.csv).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Str(Option<String>),
    F64(Option<f64>),
    I64(Option<i64>),
    Bool(Option<bool>),
}

pub(crate) fn write_rows(
    parquet_path: &Path,
    csv_path: &Path,
    rows: &[Vec<(&'static str, Cell)>],
) -> Result<(), TableError> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (c, (name, proto)) in first.iter().enumerate() {
        let col = rows.iter().map(|r| &r[c].1);
        let (dt, arr): (DataType, ArrayRef) = match proto {
            Cell::Str(_) => (
                DataType::Utf8,
                Arc::new(StringArray::from(
                    col.map(|x| {
                        if let Cell::Str(v) = x {
                            v.clone()
                        } else {
                            None
                        }
                    })
                    .collect::<Vec<_>>(),
                )),
            ),
            Cell::F64(_) => (
                DataType::Float64,
                Arc::new(Float64Array::from(
                    col.map(|x| if let Cell::F64(v) = x { *v } else { None })
                        .collect::<Vec<_>>(),
                )),
            ),
            Cell::I64(_) => (
                DataType::Int64,
                Arc::new(Int64Array::from(
                    col.map(|x| if let Cell::I64(v) = x { *v } else { None })
                        .collect::<Vec<_>>(),
                )),
            ),
            Cell::Bool(_) => (
                DataType::Boolean,
                Arc::new(BooleanArray::from(
                    col.map(|x| if let Cell::Bool(v) = x { *v } else { None })
                        .collect::<Vec<_>>(),
                )),
            ),
        };
        fields.push(Field::new(*name, dt, true));
        columns.push(arr);
    }
    Table {
        fields,
        columns,
        constant: Vec::new(),
    }
    .write(parquet_path)?;
    let quote = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut csv = first
        .iter()
        .map(|(n, _)| n.to_string())
        .collect::<Vec<_>>()
        .join(",");
    csv.push('\n');
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .map(|(_, c)| match c {
                Cell::Str(v) => v.as_deref().map(quote).unwrap_or_default(),
                Cell::F64(v) => v.map(|x| x.to_string()).unwrap_or_default(),
                Cell::I64(v) => v.map(|x| x.to_string()).unwrap_or_default(),
                Cell::Bool(v) => v.map(|x| x.to_string()).unwrap_or_default(),
            })
            .collect();
        csv.push_str(&line.join(","));
        csv.push('\n');
    }
    std::fs::write(csv_path, csv)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    fn table(n: usize) -> Table {
        let mut t = Table {
            fields: Vec::new(),
            columns: Vec::new(),
            constant: vec!["s".into()],
        };
        t.u32("a", (0..n as u32).map(Some).collect(), false);
        t.str_iter("s", (0..n).map(|i| (i % 3 != 0).then_some("x")), true);
        t.f64("f", (0..n).map(|i| Some(i as f64 / 2.0)).collect(), false);
        t
    }

    #[test]
    fn parallel_row_groups_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        for (n, group) in [(10, 3), (7, 100), (0, 5)] {
            let p = dir.path().join(format!("t{n}.parquet"));
            let expected =
                RecordBatch::try_new(Arc::new(Schema::new(table(n).fields)), table(n).columns)
                    .unwrap();
            table(n).write_groups(&p, group).unwrap();
            let b = ParquetRecordBatchReaderBuilder::try_new(File::open(&p).unwrap()).unwrap();
            assert_eq!(b.metadata().num_row_groups(), n.div_ceil(group).max(1));
            // The Arrow types come back exactly (UInt32 stays UInt32).
            assert_eq!(b.schema().as_ref(), expected.schema().as_ref());
            let mut at = 0;
            for got in b.build().unwrap() {
                let got = got.unwrap();
                assert_eq!(got, expected.slice(at, got.num_rows()));
                at += got.num_rows();
            }
            assert_eq!(at, n);
        }
    }
}
