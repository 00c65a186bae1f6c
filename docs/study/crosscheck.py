#!/usr/bin/env python3
"""Issue #9 item 4: bench360's token counts and throughput against the engines' own counters.

    python3 docs/study/crosscheck.py CACHE_DIR [--sweep NAME] [--csv OUT.csv]

For every finished run in CACHE_DIR (records/*.json of kind "run" whose object has both
requests.parquet and engine_metrics.parquet), compares

  bench360:  sum(completion_tokens) of the successful requests (ok = true) of requests.parquet,
             and throughput = those tokens / window, where the window runs from the first
             request's scheduled_ns to the last request's end_ns (as bench360's stats.rs does);
  engine:    the delta of the engine's generation-token counter over the run, from the scrapes
             of engine_metrics.parquet (every label set summed per scrape):
               vLLM      vllm:generation_tokens_total
               SGLang    sglang:generation_tokens_total
               llama.cpp llamacpp:tokens_predicted_total (the per-request `timings` of the stream
                         are not stored, so the server's own counter stands in for predicted_n)
               LMDeploy  lmdeploy:generation_tokens_total (if the engine exposes it)
             "engine Δ window" is the counter at the first scrape at or after the window's end
             minus the counter at the last scrape at or before the window's start; "Δ all" is
             last minus first scrape of the whole collection (idle baseline included).
             Engine throughput = Δ window / window (the same window as bench360's, so the two
             throughputs differ exactly as the token counts do), and, as the engine's own clock,
             Δ window / (t of the first scrape showing the final value − t of the last scrape
             at or before the window's start), a span that the 100 ms scrape interval widens
             by up to ~0.2 s (so it reads low on sub-second windows).

Prints one row per run and the verdict: tokens equal, throughput within 2 %. Where the counts
differ by exactly the number of successful requests that ended on EOS (finish_reason "stop"),
the note says so: that engine counts the EOS token, usage.completion_tokens does not.
Exit status 1 if any run is outside 2 %.
Needs pyarrow (or duckdb); no other dependency.
"""
import argparse
import csv
import glob
import json
import os
import sys

import pyarrow.parquet as pq

COUNTERS = {
    "vllm": "vllm:generation_tokens_total",
    "sglang": "sglang:generation_tokens_total",
    "llama.cpp": "llamacpp:tokens_predicted_total",
    "lmdeploy": "lmdeploy:generation_tokens_total",
}


def counter_series(path, metric):
    """[(t_ns, value)] with every label set summed per scrape time."""
    t = pq.read_table(path, columns=["t_ns", "metric", "value"]).to_pydict()
    by_t = {}
    for ts, m, v in zip(t["t_ns"], t["metric"], t["value"]):
        if m == metric:
            by_t[ts] = by_t.get(ts, 0.0) + v
    return sorted(by_t.items())


def at_or_before(series, t):
    best = None
    for ts, v in series:
        if ts <= t:
            best = (ts, v)
        else:
            break
    return best


def at_or_after(series, t):
    for ts, v in series:
        if ts >= t:
            return (ts, v)
    return None


def check_run(cache, rec):
    obj = os.path.join(cache, "objects", rec["key"])
    rq = os.path.join(obj, "requests.parquet")
    em = os.path.join(obj, "engine_metrics.parquet")
    cols = rec.get("inputs", {})
    row = {"label": rec["label"], "key": rec["key"]}
    if not os.path.exists(rq):
        row["note"] = "no requests.parquet"
        return row
    r = pq.read_table(rq, columns=["engine_kind", "scheduled_ns", "end_ns", "completion_tokens",
                                   "finish_reason", "ok"]).to_pydict()
    kind = r["engine_kind"][0] if r["engine_kind"] else "?"
    row["engine_kind"] = kind
    n = len(r["ok"])
    ok = [i for i in range(n) if r["ok"][i]]
    row["requests"] = n
    row["ok"] = len(ok)
    toks = sum(r["completion_tokens"][i] or 0 for i in ok)
    row["bench_tokens"] = toks
    # Requests that ended on the end-of-sequence token (an engine may count that token in its
    # counter while leaving it out of usage.completion_tokens).
    row["eos_stops"] = sum(1 for i in ok if r["finish_reason"][i] == "stop")
    row["usage_missing"] = sum(1 for i in ok if r["completion_tokens"][i] is None)
    # Tokens of failed requests that still reported usage (none expected).
    row["failed_tokens"] = sum(r["completion_tokens"][i] or 0 for i in range(n) if not r["ok"][i])
    if n == 0:
        row["note"] = "no requests"
        return row
    w0, w1 = min(r["scheduled_ns"]), max(r["end_ns"])
    window = (w1 - w0) / 1e9
    row["window_s"] = window
    row["bench_tok_s"] = toks / window if window > 0 else None
    metric = COUNTERS.get(kind)
    if metric is None:
        row["note"] = f"no counter known for engine kind {kind}"
        return row
    if not os.path.exists(em):
        row["note"] = "no engine_metrics.parquet (engine not scraped)"
        return row
    s = counter_series(em, metric)
    if not s:
        row["note"] = f"{metric} not exposed"
        return row
    row["metric"] = metric
    row["scrapes"] = len(s)
    row["engine_delta_all"] = s[-1][1] - s[0][1]
    a, b = at_or_before(s, w0), at_or_after(s, w1)
    if a is None or b is None:
        row["note"] = "scrapes do not bracket the window"
        return row
    d = b[1] - a[1]
    row["engine_delta_window"] = d
    row["engine_tok_s"] = d / window if window > 0 else None
    # The engine's own span: the last scrape at or before the window's start .. the first scrape
    # that shows the final value (the scrape clock brackets the window, so this is at most
    # ~2 scrape intervals longer than the window; shorter if the counter settled early).
    t_lo, end_v = a[0], b[1]
    t_hi = min((ts for ts, v in s if v >= end_v and ts >= t_lo), default=b[0])
    span = (t_hi - t_lo) / 1e9
    row["engine_span_s"] = span
    row["engine_own_tok_s"] = d / span if span > 0 else None
    row["tokens_diff"] = d - toks
    row["tok_s_diff_pct"] = (
        100.0 * (row["engine_tok_s"] - row["bench_tok_s"]) / row["bench_tok_s"]
        if row.get("bench_tok_s") else None
    )
    row["within_2pct"] = row["tok_s_diff_pct"] is not None and abs(row["tok_s_diff_pct"]) <= 2.0
    if row["tokens_diff"] != 0 and row["tokens_diff"] == row["eos_stops"]:
        row["note"] = (f"diff = {row['eos_stops']} requests ended by EOS: the engine counts the EOS "
                       f"token, usage does not; without it {d - row['eos_stops']:.0f} = {toks}")
    return row


def fmt(v, nd=1):
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cache")
    ap.add_argument("--sweep", help="only runs of this sweep")
    ap.add_argument("--csv", help="also write the rows as CSV")
    ap.add_argument("--all", action="store_true", help="include engines without a known counter")
    args = ap.parse_args()
    rows = []
    for f in sorted(glob.glob(os.path.join(args.cache, "records", "*.json"))):
        rec = json.load(open(f))
        if rec.get("kind") != "run" or rec.get("status") != "finished":
            continue
        if args.sweep and rec.get("sweep") != args.sweep:
            continue
        row = check_run(args.cache, rec)
        if args.all or row.get("engine_kind") in COUNTERS:
            rows.append(row)
    rows.sort(key=lambda r: (r.get("engine_kind", ""), r["label"]))
    hdr = ["run", "ok/req", "EOS stops", "bench tok", "engine Δ", "diff", "window s", "bench tok/s",
           "engine tok/s", "Δ %", "≤2 %", "engine span s", "engine-clock tok/s", "note"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        label = r["label"].removeprefix("run ")
        print("| " + " | ".join([
            label,
            f"{r.get('ok', '—')}/{r.get('requests', '—')}",
            fmt(r.get("eos_stops")),
            fmt(r.get("bench_tokens")),
            fmt(r.get("engine_delta_window"), 0),
            fmt(r.get("tokens_diff"), 0),
            fmt(r.get("window_s"), 2),
            fmt(r.get("bench_tok_s")),
            fmt(r.get("engine_tok_s")),
            fmt(r.get("tok_s_diff_pct"), 2),
            fmt(r.get("within_2pct")),
            fmt(r.get("engine_span_s"), 2),
            fmt(r.get("engine_own_tok_s")),
            r.get("note", "") + (f" Δall={r['engine_delta_all']:.0f}" if r.get("engine_delta_all") is not None
                                 and r.get("engine_delta_window") is not None
                                 and r["engine_delta_all"] != r["engine_delta_window"] else ""),
        ]) + " |")
    checked = [r for r in rows if r.get("within_2pct") is not None and "tok_s_diff_pct" in r]
    bad = [r for r in checked if not r["within_2pct"]]
    exact = [r for r in checked if r.get("tokens_diff") == 0]
    eos = [r for r in bad if r.get("tokens_diff") == r.get("eos_stops")]
    print(f"\n{len(checked)} runs compared: {len(exact)} with equal token counts, "
          f"{len(checked) - len(bad)} within 2 %, {len(bad)} outside "
          f"({len(eos)} of them off by exactly the EOS-stopped requests); "
          f"{len(rows) - len(checked)} not comparable.")
    if args.csv:
        keys = sorted({k for r in rows for k in r})
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
