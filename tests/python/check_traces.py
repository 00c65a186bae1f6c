"""Reads every Parquet table of a bench360 cache with pyarrow and duckdb, as a notebook would,
and checks them against each run's stats.json. Prints one line per table type; exits non-zero
on the first inconsistency. Usage: check_traces.py CACHE_DIR"""
import glob
import json
import os
import sys

import duckdb
import pyarrow.parquet as pq

CONFIG = ["schema_version", "node_key", "sweep", "model", "quantization", "engine", "engine_kind",
          "task", "scenario", "scenario_kind", "scenario_params", "max_tokens", "temperature",
          "top_p", "seed", "repeat"]
REQUESTS = CONFIG + ["run_start_utc_ns", "request_id", "user", "sample_id", "scheduled_ns", "sent_ns",
                     "first_byte_ns", "first_token_ns", "first_reasoning_ns", "last_token_ns", "end_ns",
                     "queue_ms", "ttft_ms", "tpot_ms", "ttfa_ms", "e2e_ms", "prompt_tokens", "completion_tokens",
                     "reasoning_tokens", "chunks", "content_chunks", "http_status", "request_max_tokens", "finish_reason", "ok", "error",
                     "output", "top_logprobs"]
CHUNKS = CONFIG + ["request_id", "chunk_index", "t_ns", "kind", "chars", "tokens"]
TELEMETRY = CONFIG + ["t_ns", "source", "device", "power_w", "energy_mj", "mem_used_mb", "mem_total_mb",
                      "util_pct", "mem_util_pct", "sm_clock_mhz", "mem_clock_mhz", "temp_c", "throttle_reasons",
                      "proc_gpu_mem_mb", "other_gpu_procs", "other_gpu_mem_mb", "cpu_pct", "rss_mb", "running", "waiting", "kv_cache_pct"]
ENGINE_METRICS = CONFIG + ["t_ns", "metric", "labels", "value"]
# Fixed columns; then one float64 column per metric and one `group_<name>` column per grouping.
SCORES = CONFIG + ["run_key", "request_id", "sample_id", "reference", "extracted", "score", "correct",
                   "parsed", "score_error"]

cache = sys.argv[1]
objects = os.path.join(cache, "objects")
runs = sorted(glob.glob(os.path.join(objects, "*", "requests.parquet")))
assert runs, "no requests.parquet in " + objects
for path in runs:
    d = os.path.dirname(path)
    key = os.path.basename(d)
    stats = json.load(open(os.path.join(d, "stats.json")))
    t = pq.read_table(path)
    assert t.column_names == REQUESTS, t.column_names
    assert t.num_rows == stats["requests"], (t.num_rows, stats["requests"])
    rows = t.to_pylist()
    assert all(r["node_key"] == key and r["schema_version"] == 1 for r in rows)
    ok = [r for r in rows if r["ok"]]
    assert len(ok) == stats["ok"]
    assert sum(r["completion_tokens"] or 0 for r in ok) == stats["output_tokens"]
    for r in ok:
        assert r["scheduled_ns"] <= r["sent_ns"] <= r["first_byte_ns"] <= r["first_token_ns"] <= r["last_token_ns"] <= r["end_ns"], r
        first = min(x for x in (r["first_token_ns"], r["first_reasoning_ns"]) if x is not None)
        assert abs(r["ttft_ms"] - (first - r["sent_ns"]) / 1e6) < 1e-6
        assert abs(r["ttfa_ms"] - (r["first_token_ns"] - r["sent_ns"]) / 1e6) < 1e-6
    c = pq.read_table(os.path.join(d, "chunks.parquet"))
    assert c.column_names == CHUNKS, c.column_names
    content = sum(1 for x in c.column("kind").to_pylist() if x == "content")
    assert content == sum(r["content_chunks"] for r in rows), (content,)
print(f"requests: {len(runs)} files ok")

# duckdb over all runs at once: the configuration columns make them concatenate.
con = duckdb.connect()
q = os.path.join(objects, "*", "requests.parquet")
n_runs, n = con.execute(f"select count(distinct node_key), count(*) from read_parquet('{q}')").fetchone()
assert n_runs == len(runs) and n > 0
by = con.execute(f"select scenario_kind, quantile_cont(ttft_ms, 0.5) from read_parquet('{q}') where ok group by 1 order by 1").fetchall()
print("duckdb: ttft p50 by scenario kind", [(k, round(v, 2)) for k, v in by])

scores = sorted(glob.glob(os.path.join(objects, "*", "scores.parquet")))
assert scores, "no scores.parquet"
for path in scores:
    t = pq.read_table(path)
    assert t.column_names[:len(SCORES)] == SCORES, t.column_names
    metrics = json.load(open(os.path.join(os.path.dirname(path), "metrics.json")))
    scored = [x for x in t.column("score").to_pylist() if x is not None]
    assert abs(sum(scored) / len(scored) - metrics["quality"]) < 1e-12
    for extra in t.column_names[len(SCORES):]:
        if extra.startswith("group_"):
            continue
        vals = [x for x in t.column(extra).to_pylist() if x is not None]
        assert abs(sum(vals) / len(vals) - metrics[extra]) < 1e-12, extra
    # Every score row joins its request row.
    run_keys = set(t.column("run_key").to_pylist())
    assert len(run_keys) == 1
    req = pq.read_table(os.path.join(objects, run_keys.pop(), "requests.parquet"))
    assert sorted(req.column("request_id").to_pylist()) == sorted(t.column("request_id").to_pylist())
print(f"scores: {len(scores)} files ok")
n = con.execute(f"select count(*) from read_parquet('{os.path.join(objects, '*', 'chunks.parquet')}')").fetchone()[0]
print(f"chunks: {n} rows ok")

tele = sorted(glob.glob(os.path.join(objects, "*", "telemetry.parquet")))
assert len(tele) == len(runs), (len(tele), len(runs))
for path in tele:
    t = pq.read_table(path)
    assert t.column_names == TELEMETRY, t.column_names
    ts = t.column("t_ns").to_pylist()
    assert ts == sorted(ts)
    sources = set(t.column("source").to_pylist())
    assert {"process", "host", "bench360"} <= sources, sources
q = os.path.join(objects, "*", "telemetry.parquet")
peak = con.execute(f"select max(running) from read_parquet('{q}') where source = 'engine'").fetchone()[0]
print(f"telemetry: {len(tele)} files ok, peak running requests {peak}")
em = sorted(glob.glob(os.path.join(objects, "*", "engine_metrics.parquet")))
for path in em:
    assert pq.read_table(path).column_names == ENGINE_METRICS
n = con.execute(f"select count(distinct metric) from read_parquet('{os.path.join(objects, '*', 'engine_metrics.parquet')}')").fetchone()[0]
print(f"engine_metrics: {len(em)} files, {n} distinct metrics ok")
