#!/usr/bin/env python3
"""Issue #26 item 6: the seed paper's tables and figures from bench360's own records.

    python3 docs/study/seed-tables.py CACHE [CACHE…] [--sweep gpu-seed] [--out DIR] [--png]

Each CACHE is a bench360 cache folder (a hold's `cache.tar.xz` unpacked: records/ and
objects/); several caches are several holds, read in the order given. A measurement is a node
key and the machine it ran on: met in more than one cache on one machine (a hold that resumed
an earlier one's cache holds its runs too; a damaged run run again), it is read once, the later
cache's record; on another machine (bench360's keys hold the machine's kind, not the machine,
so two machines of one kind record a start under one key) it is another. Unpack each hold into
a folder of its own: one folder keeps one record per key. Only finished nodes are read,
and only those of the sweep named by --sweep (any, when not given). What is read, per run:
run.json (its configuration), requests.parquet (every request's timings), telemetry.json (GPU
energy and utilisation), stats.json and scores.parquet (per-item scores); per cold start:
coldstart.json. Nothing is taken from a report, so every figure can be re-derived here from
the committed caches.

A configuration is (engine, quantization, task, scenario kind, its parameters); its runs are
its repeats (another `repeat` index: `repeats` in the sweep, each with its own cold start under
`cold-repeats`).
Every figure is given with what it rests on:

  * single stream (the seed's Figure 2/3): cold start of each deployment (mean over its cold
    starts, ± t-interval from 2 on; per machine, and with two machines or more of one GPU model
    pooled over them too), TTFT p50 and TPOT p50 with the distribution-free 95 %
    interval of the median (order statistics) when one run, or mean ± t-interval over repeats;
  * batch (the seed's Table 5): output tokens/s per batch (a batch's completion tokens over the
    time from its common send to its last response), mean ± 95 % t-interval over the batches,
    and over repeats when there are several;
  * server (the seed's Figure 4): TTFT p95 and E2E p95 per number of users, against the QoS
    lines TTFT 2 s and E2E 6 s, and whether both hold;
  * quality: the task metric's mean over the distinct items of the quality pass, with a 95 %
    normal interval over items (p ± 1.96·s/√n);
  * energy: J per output token (GPU energy from the NVML counter over the window) against the
    mean GPU utilisation, per engine;
  * prompt cached %: the share of the run's prompt tokens (usage.prompt_tokens) that the
    engine served from its prefix cache, from its own counter in engine_metrics.parquet over
    the window (as bench360's report reads it: summary's prefix_cache_share); a TTFT whose share
    is high is a cache hit's, not a prefill's. The range over the configuration's runs.

Writes to --out (default docs/results/seed): seed-tables.md (every table, and per scenario
and task which configuration is best and which are inside its noise: per machine, and with
runs on several machines also over every machine's runs pooled, their interval then holding
the machines' spread), seed-runs.csv (one row
per run, with its machine and the engine start it stood on: the deployment's recorded cold
start, a later start that a resumed or retried apply made, or `not recorded` before
2026-12-03), and the figures as SVG: seed-single.svg, seed-server.svg, seed-energy.svg.
Needs pyarrow and matplotlib (scripts/setup-python.sh's venv has both).
"""

import argparse
import csv
import json
import math
import os
import statistics
import sys
from collections import defaultdict

import pyarrow.parquet as pq

# The engines' counters of prompt tokens served from their prefix cache, in bench360's order.
CACHED_COUNTERS = ["vllm:prompt_tokens_cached_total", "vllm:prefix_cache_hits_total",
                   "sglang:cached_tokens_total", "llamacpp:prompt_tokens_cached_total",
                   "lmdeploy:cached_tokens_total"]
QOS_TTFT_MS = 2000.0
QOS_E2E_MS = 6000.0
# Student t, two-sided 95 %, by degrees of freedom (1..30); 1.96 beyond.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(df):
    return T975[df - 1] if 1 <= df <= len(T975) else 1.96


def mean_ci(values):
    """(mean, half-width of its 95 % t-interval or None below 2 values, n)."""
    v = [x for x in values if x is not None and not math.isnan(x)]
    if not v:
        return None, None, 0
    m = statistics.fmean(v)
    if len(v) < 2:
        return m, None, len(v)
    return m, t975(len(v) - 1) * statistics.stdev(v) / math.sqrt(len(v)), len(v)


def median_ci(sorted_v):
    """Median and its distribution-free 95 % interval (order statistics, normal approximation
    of the binomial ranks), or None for the interval below 6 values."""
    n = len(sorted_v)
    if n == 0:
        return None, None, None
    med = statistics.median(sorted_v)
    if n < 6:
        return med, None, None
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half))
    return med, sorted_v[lo], sorted_v[hi]


def pct(sorted_v, q):
    if not sorted_v:
        return None
    k = (len(sorted_v) - 1) * q / 100.0
    f = math.floor(k)
    c = min(f + 1, len(sorted_v) - 1)
    return sorted_v[f] + (sorted_v[c] - sorted_v[f]) * (k - f)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def runs_of(cache, sweep, seen=None):
    """Every finished run of the cache and its cold starts, each with the machine it ran on (a
    cold start: that of the runs it served in this cache; None where it served none here), and
    the scores of runs this cache does not hold ({run key: score object}: a hold that scored
    runs an earlier hold's cache brought to the device). With
    `seen`, those whose (key, machine) is in it (read from another cache already) are left out
    and the others added to it. A key alone does not name a measurement: bench360's keys hold a
    machine's kind (CPU model, GPU, driver), not the machine, so two machines of one kind record
    a deployment's start under one key."""
    objects = os.path.join(cache, "objects")
    runs, colds = [], []
    # A run's scores are the object of its score node, which names the run among its inputs.
    scored = {}
    for name in os.listdir(os.path.join(cache, "records")):
        rec = read_json(os.path.join(cache, "records", name)) or {}
        if rec.get("kind") == "score" and rec.get("status") == "finished":
            scored[(rec.get("inputs") or {}).get("run")] = os.path.join(objects, rec["key"])
    keys = sorted(os.listdir(objects))
    for key in keys:
        d = os.path.join(objects, key)
        rec = read_json(os.path.join(cache, "records", key + ".json")) or {}
        if rec.get("status") != "finished":
            continue
        cold = read_json(os.path.join(d, "coldstart.json"))
        if cold is not None:
            if sweep and rec.get("sweep") not in (None, sweep):
                continue
            colds.append({"label": rec.get("label", key), "key": key,
                          "healthy_s": cold.get("phases", {}).get("healthy_s"),
                          "first_token_s": cold.get("first_token_s"),
                          "gpu_mem_after_load_mb": cold.get("gpu_mem_after_load_mb"),
                          "model_bytes": cold.get("model_bytes")})
            continue
        run = read_json(os.path.join(d, "run.json"))
        if run is None or not os.path.exists(os.path.join(d, "requests.parquet")):
            continue
        c = run["columns"]
        if sweep and c.get("sweep") != sweep:
            continue
        row = describe(key, d, c, rec, scored.get(key))
        row["machine"] = machine_of(run)
        row["gpu"] = gpu_of(run)
        row["started_at"] = rec.get("started_at") or ""
        row["engine_start"] = engine_start_of(run)
        row["deployment_key"] = (rec.get("inputs") or {}).get("deployment")
        runs.append(row)
    # A cold start ran where the runs it served ran (their `deployment` input is its key): their
    # run.json has the whole machine, GPUs and driver included, where coldstart.json's `host`
    # (since 2026-12-03) has the host only, and would name the same machine another.
    served = {r["deployment_key"]: r["machine"] for r in runs if r.get("deployment_key")}
    for c in colds:
        c["machine"] = served.get(c["key"])
    if seen is not None:
        runs = [r for r in runs if (r["key"], r["machine"]) not in seen]
        colds = [c for c in colds if (c["key"], c["machine"]) not in seen]
        seen.update((x["key"], x["machine"]) for x in runs + colds)
    held = set(keys)
    return runs, colds, {k: v for k, v in scored.items() if k and k not in held}


def engine_start_of(run):
    """The engine start a run stood on (run.json's engine_start, since 2026-12-03): the
    deployment's recorded cold start, or a later one (a resumed or retried apply started the
    engine again: its own prefix cache, compiled graphs and maybe machine), with its launch."""
    s = run.get("engine_start")
    if not s:
        return "not recorded"
    return "cold start" if s.get("cold_start") else f"later start {s.get('launched_utc')}"


def machine_of(run):
    """The machine a run recorded (run.json's provenance): what tells two of the lent VMs apart
    (their CPU model string, cores and GPU are alike; the kernel build and memory are not)."""
    p = run.get("provenance") or {}
    h, g = p.get("host") or {}, p.get("gpus") or {}
    if not h:
        return "not recorded"
    return (f"kernel {h.get('kernel')}, {h.get('memory_bytes', 0) // 1024} kB, {h.get('cpu_model')}"
            f" ×{h.get('cores')}, driver {g.get('driver')}, {gpu_of(run)}")


def gpu_of(run):
    """The GPU model(s) a run recorded (`NVIDIA H200`): machines of two GPU models are never
    pooled, not even in the answers across machines."""
    p = run.get("provenance")
    if not p:
        return "not recorded"
    devs = (p.get("gpus") or {}).get("devices") or []
    return ", ".join(sorted({d.get("name") or "?" for d in devs})) or "no GPU"


MACHINES = []  # the machines, in the order of their first run: M1, M2, …


def machine_name(m):
    if m not in MACHINES:
        MACHINES.append(m)
    return f"M{MACHINES.index(m) + 1}"


def machines_section():
    out = ["## Machines", "",
           "What each run's run.json recorded of its host; the answers above rank per machine "
           "where the configurations they compare ran on more than one.", "",
           "| machine | host |", "|---|---|"]
    out += [f"| M{i + 1} | {m} |" for i, m in enumerate(MACHINES)]
    return out + [""]


def describe(key, d, c, rec, score_dir):
    t = pq.read_table(os.path.join(d, "requests.parquet"),
                      columns=["scheduled_ns", "end_ns", "ttft_ms", "tpot_ms", "e2e_ms",
                               "completion_tokens", "prompt_tokens", "ok"]).to_pydict()
    ok = [i for i, x in enumerate(t["ok"]) if x]
    inputs = rec.get("inputs") or {}
    tokens = [t["completion_tokens"][i] for i in ok if t["completion_tokens"][i] is not None]
    srt = lambda col: sorted(t[col][i] for i in ok if t[col][i] is not None)
    ttft, tpot, e2e = srt("ttft_ms"), srt("tpot_ms"), srt("e2e_ms")
    tel = read_json(os.path.join(d, "telemetry.json")) or {}
    stats = read_json(os.path.join(d, "stats.json")) or {}
    params = json.loads(c.get("scenario_params") or "{}")
    row = {
        "key": key, "label": rec.get("label", key), "model": c.get("model"), "engine": c["engine"],
        "engine_kind": c["engine_kind"], "quantization": c["quantization"], "task": c["task"],
        "scenario": c["scenario_kind"], "params": params, "repeat": c.get("repeat", 0),
        "requests": len(t["ok"]), "ok": len(ok), "window_s": stats.get("window_s"),
        "tokens_per_s": stats.get("output_tokens_per_s"),
        "ttft_p50": median_ci(ttft), "tpot_p50": median_ci(tpot), "e2e_p50": median_ci(e2e),
        "ttft_p95": pct(ttft, 95), "e2e_p95": pct(e2e, 95),
        "j_per_token": tel.get("j_per_output_token"), "energy_source": tel.get("energy_source"),
        "gpu_util": gpu_util(tel), "gpu_mem_peak_mb": tel.get("gpu_mem_peak_mb"),
        "tokens_mean": statistics.fmean(tokens) if tokens else None,
        # Generation past end-of-sequence (exact output lengths), as the run's key has it.
        "ignore_eos": inputs.get("sampling.ignore-eos") == "true",
        "synthetic": inputs.get("task.kind") == '"synthetic"',
        "cache_share": cache_share(d, t),
    }
    if c["scenario_kind"] == "batch":
        row["batches"] = batch_rates(t, ok)
    row["quality"] = quality(score_dir) if score_dir else None
    return row


def cache_share(d, t):
    """The prefix cache's share of the run's prompt tokens: the first counter of CACHED_COUNTERS
    the scrapes hold, summed over label sets per scrape, from the last scrape at or before the
    first request's schedule to the first at or after the last request's end, over the requests'
    prompt tokens. None without such a counter or scrapes around the window."""
    path = os.path.join(d, "engine_metrics.parquet")
    prompt = sum(x for x in t["prompt_tokens"] if x is not None)
    if not os.path.exists(path) or prompt <= 0:
        return None
    m = pq.read_table(path, columns=["t_ns", "metric", "value"]).to_pydict()
    present = set(m["metric"])
    counter = next((c for c in CACHED_COUNTERS if c in present), None)
    if counter is None:
        return None
    by_t = defaultdict(float)
    for ts, name, v in zip(m["t_ns"], m["metric"], m["value"]):
        if name == counter:
            by_t[ts] += v
    series = sorted(by_t.items())
    t0 = min(x for x in t["scheduled_ns"] if x is not None)
    t1 = max(x for x in t["end_ns"] if x is not None)
    before = [v for ts, v in series if ts <= t0]
    after = [v for ts, v in series if ts >= t1]
    if not before or not after or after[0] < before[-1]:
        return None
    return (after[0] - before[-1]) / prompt


def cached_range(rs):
    """The prefix cache's share over a configuration's runs, in %: one value or min–max."""
    v = [100 * r["cache_share"] for r in rs if r.get("cache_share") is not None]
    if not v:
        return "–"
    lo, hi = min(v), max(v)
    return f"{lo:.1f}" if round(lo, 1) == round(hi, 1) else f"{lo:.1f}–{hi:.1f}"


def gpu_util(tel):
    return tel.get("gpu_util_mean_pct")


def batch_rates(t, ok):
    """Output tokens/s of each batch: requests sent together share their scheduled instant."""
    by = defaultdict(list)
    for i in ok:
        by[t["scheduled_ns"][i]].append(i)
    rates = []
    for s, idx in sorted(by.items()):
        span = (max(t["end_ns"][i] for i in idx) - s) / 1e9
        toks = sum(t["completion_tokens"][i] or 0 for i in idx)
        if span > 0:
            rates.append(toks / span)
    return rates


def quality(score_dir):
    """(metric, mean over distinct items, half-width of the 95 % normal interval over items, items)."""
    path = os.path.join(score_dir, "scores.parquet")
    if not os.path.exists(path):
        return None
    t = pq.read_table(path, columns=["sample_id", "score"]).to_pydict()
    col = "score" if "score" in t else None
    if col is None:
        return None
    per_item = defaultdict(list)
    for sid, s in zip(t.get("sample_id", range(len(t[col]))), t[col]):
        if s is not None and not (isinstance(s, float) and math.isnan(s)):
            per_item[sid].append(float(s))
    v = [statistics.fmean(x) for x in per_item.values()]
    if not v:
        return None
    m = statistics.fmean(v)
    hw = 1.96 * statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else None
    metrics = read_json(os.path.join(score_dir, "metrics.json")) or {}
    # The score column is the task's primary metric: name it by the one the metrics list.
    metric = next((k for k in ("accuracy", "f1", "rougeL", "execution_accuracy") if k in metrics), None)
    return metric, m, hw, len(v)


def config_key(r):
    p = ",".join(f"{k}={v}" for k, v in sorted(r["params"].items()) if k not in ("batches", "requests"))
    return (r["engine"], r["quantization"], r["task"], r["scenario"], p)


def fmt(x, nd=1):
    return "–" if x is None else f"{x:.{nd}f}"


def fmt_ci(m, hw, nd=1):
    if m is None:
        return "–"
    return f"{m:.{nd}f}" if hw is None else f"{m:.{nd}f} ± {hw:.{nd}f}"


def fmt_med(t, nd=1):
    m, lo, hi = t
    if m is None:
        return "–"
    return f"{m:.{nd}f}" if lo is None else f"{m:.{nd}f} [{lo:.{nd}f}, {hi:.{nd}f}]"


def pooled(rows, field):
    """One run: its median and interval; several: mean of the medians ± t-interval."""
    if len(rows) == 1:
        return fmt_med(rows[0][field], 2)
    m, hw, n = mean_ci([r[field][0] for r in rows])
    return f"{fmt_ci(m, hw, 2)} (n={n})"


def split_field(cands, higher):
    """cands: (name, mean, low, high), the interval None where there is none. The best by mean;
    those whose interval overlaps the best's; those behind it beyond the noise; those without
    an interval (no claim either way) — each in the order given."""
    cands = [c for c in cands if c[1] is not None]
    if not cands:
        return None, [], [], []
    best = max(cands, key=lambda c: c[1]) if higher else min(cands, key=lambda c: c[1])
    ties, behind, unknown = [], [], []
    for c in cands:
        if c is best:
            continue
        if best[2] is None or c[2] is None:
            unknown.append(c)
        elif best[2] <= c[3] and c[2] <= best[3]:
            ties.append(c)
        else:
            behind.append(c)
    return best, ties, behind, unknown


def verdict(label, cands, higher, unit):
    return say(label, split_field(cands, higher), higher, unit)


def say(label, field, higher, unit):
    """The verdict line of a [`split_field`]."""
    best, ties, behind, unknown = field
    if best is None:
        return f"- {label}: no data"
    iv = lambda c: "" if c[2] is None else f" [{c[2]:.2f}, {c[3]:.2f}]"
    behind = sorted(behind, key=lambda c: c[1], reverse=higher)  # nearest the best first
    s = f"- {label}: **{best[0]}** ({best[1]:.2f}{iv(best)} {unit})"
    if ties:
        s += "; inside its noise: " + ", ".join(f"{c[0]} ({c[1]:.2f}{iv(c)})" for c in ties)
    if behind:
        s += "; behind beyond the noise: " + ", ".join(f"{c[0]} ({c[1]:.2f}{iv(c)})" for c in behind)
    if unknown:
        s += "; no interval to compare: " + ", ".join(f"{c[0]} ({c[1]:.2f})" for c in unknown)
    return s


def verdicts(label, cands, higher, unit):
    """[`verdict`], then the same question again among those it put behind beyond the noise, and
    so on while two or more are left: the order of the field, not only its head, each step
    claimed only where it holds beyond the spread. A head without a spread (one run) ranks no
    one, so the next line asks the same among those with one."""
    out = []
    while True:
        field = split_field(cands, higher)
        out.append(say(label, field, higher, unit))
        best, _, behind, unknown = field
        if best is None:
            return out
        if best[2] is None:
            cands, label = [c for c in unknown if c[2] is not None], "the same, among those with a spread"
        else:
            cands, label = behind, "the same, among those behind it"
        if len(cands) < 2:
            return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("caches", nargs="+")
    ap.add_argument("--sweep", default=None)
    ap.add_argument("--out", default="docs/results/seed")
    ap.add_argument("--png", action="store_true", help="also write PNGs (to look at)")
    a = ap.parse_args()
    # One measurement per (key, machine): a later cache's record of the same one (a damaged run
    # run again) replaces the earlier, as unpacking it over the earlier would; the same key on
    # another machine of one kind (a hold that ran a start again elsewhere) is another measurement.
    # A score whose run is not in its own cache scored the run of that key the device had then:
    # the latest of the caches read before it (carried there with SEED_CACHE).
    by_run, colds, latest = {}, [], {}
    for c in a.caches:
        r, k, orphans = runs_of(c, a.sweep)
        by_run.update(((x["key"], x["machine"]), x) for x in r)
        latest.update((x["key"], x) for x in r)
        colds += k
        for run_key, score_dir in orphans.items():
            if run_key in latest and latest[run_key]["quality"] is None:
                latest[run_key]["quality"] = quality(score_dir)
    runs = list(by_run.values())
    if not runs:
        sys.exit("no runs found")
    # The synthetic task's runs from before it forced its lengths (`ignore-eos`) stopped at EOS:
    # where the same configuration has runs with exact lengths, they are superseded; any other
    # is shown under its own task name, so that the two are never pooled as repeats.
    exact = {config_key(r) for r in runs if r["ignore_eos"]}
    superseded = [r for r in runs if r["synthetic"] and not r["ignore_eos"] and config_key(r) in exact]
    runs = [r for r in runs if not any(r is x for x in superseded)]
    for r in runs:
        if r["synthetic"] and not r["ignore_eos"]:
            r["task"] += " (stops at EOS)"
    # Runs of several machines are never pooled: a configuration is also its machine, shown as
    # "engine on M2" everywhere (tables, figures, answers) once there is more than one.
    # Machines are named in the order of their first run (M1 the earliest), so that a later
    # hold's records (whose keys may sort first) never rename the machines met before.
    # (a run that recorded no start time comes after every dated one).
    for r in sorted(runs, key=lambda r: (r["started_at"] == "", r["started_at"])):
        machine_name(r["machine"])
    for r in runs:
        r["engine_name"] = r["engine"]
    # A cold start that served no run of its own cache: the machine of the runs it served in
    # another (a start whose runs a later hold recorded).
    served = {r["deployment_key"]: r["machine"] for r in runs if r.get("deployment_key")}
    for c in colds:
        c["machine"] = c["machine"] or served.get(c["key"])
    colds = list({(c["key"], c["machine"]): c for c in colds}.values())
    if len(MACHINES) > 1:
        for r in runs:
            r["engine"] = f"{r['engine_name']} on {machine_name(r['machine'])}"
    os.makedirs(a.out, exist_ok=True)
    groups = defaultdict(list)
    for r in runs:
        groups[config_key(r)].append(r)
    md = ["# The seed's scenarios, from bench360's records", "",
          f"{len(runs)} runs from {len(a.caches)} cache(s); sweep {a.sweep or '(any)'}."
          + (f" {len(superseded)} synthetic runs that stopped at EOS are left out: the same"
             " configurations ran again with exact lengths." if superseded else ""), ""]
    md += cold_table(colds)
    md += pooled_colds(colds, {r["machine"]: r["gpu"] for r in runs})
    md += single_table(groups)
    md += batch_table(groups)
    md += server_table(groups)
    md += quality_table(groups)
    md += answers(groups)
    md += pooled_answers(runs)
    md += machines_section()
    with open(os.path.join(a.out, "seed-tables.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    write_runs_csv(runs, os.path.join(a.out, "seed-runs.csv"))
    figures(groups, runs, a.out, a.png)
    print("\n".join(md))


def deployment_of(cold):
    """A cold start's deployment: "coldstart M:Q@E (start 2)" -> "M:Q@E"."""
    return cold["label"].removeprefix("coldstart ").split(" (start")[0]


def machines_where(items):
    """Where items (runs or cold starts) ran: "M1×1, M2×2"."""
    per = defaultdict(int)
    for x in items:
        per[machine_name(x["machine"])] += 1
    return ", ".join(f"{m}×{n}" for m, n in sorted(per.items()))


def cold_table(colds):
    by = defaultdict(list)
    for c in colds:
        name = deployment_of(c)
        if len(MACHINES) > 1:
            name += f" on {machine_name(c['machine'])}" if c.get("machine") else " (machine not recorded)"
        by[name].append(c)
    out = ["## Cold start", "", "| deployment | cold starts | healthy s | first token s | GPU memory after load MB |",
           "|---|---|---|---|---|"]
    for name, cs in sorted(by.items()):
        h = mean_ci([c["healthy_s"] for c in cs])
        ft = mean_ci([c["first_token_s"] for c in cs])
        mem = mean_ci([c["gpu_mem_after_load_mb"] for c in cs])
        out.append(f"| {name} | {len(cs)} | {fmt_ci(h[0], h[1])} | {fmt_ci(ft[0], ft[1])} | {fmt(mem[0], 0)} |")
    return out + ["", "± is the 95 % t-interval over cold starts (from 2 on).", ""]


def pooled_colds(colds, gpu_by_machine):
    """Each deployment's cold starts on every machine of one GPU model at once (where there are
    two machines or more): the mean ± the t-interval over the starts, which then holds the
    machines' spread as well as the starts', and the fastest to healthy by mean with those behind
    it beyond that spread. Machines of another GPU model are never pooled with these."""
    out = []
    gpus = {gpu_by_machine.get(c.get("machine")) for c in colds} - {None}
    for gpu in sorted(gpus):
        mine = [c for c in colds if gpu_by_machine.get(c.get("machine")) == gpu]
        if len({c["machine"] for c in mine}) < 2:
            continue
        by = defaultdict(list)
        for c in mine:
            by[deployment_of(c)].append(c)
        out += [f"## Cold start, every machine pooled ({gpu})", "",
                f"Each deployment's cold starts on every machine of one GPU model ({gpu}), whichever "
                "machine they ran on: the mean ± the 95 % t-interval over the starts, so the interval "
                "holds the spread between machines as well as between starts (a host build, a compile "
                "cache another engine's start left on the machine). Fastest by mean; *inside its "
                "noise* when the intervals overlap; where two or more are behind beyond it, the "
                "next line asks the same among them.", "",
                "| deployment | cold starts | healthy s | first token s |", "|---|---|---|---|"]
        cands = []
        for name, cs in sorted(by.items()):
            where = machines_where(cs)
            h = mean_ci([c["healthy_s"] for c in cs])
            ft = mean_ci([c["first_token_s"] for c in cs])
            out.append(f"| {name} | {len(cs)} ({where}) | {fmt_ci(h[0], h[1])} | {fmt_ci(ft[0], ft[1])} |")
            cands.append((f"{name} ({len(cs)}: {where})", *with_hw(h[0], h[1])))
        out += [""] + verdicts("healthy after a cold start, every machine", cands, False, "s") + [""]
    return out


def single_table(groups):
    out = ["## Single stream", "",
           "| engine | weights | task | runs | requests | window s | TTFT p50 ms | TPOT p50 ms | E2E p50 ms | prompt cached % |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for k, rs in sorted(groups.items()):
        if k[3] != "single":
            continue
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {len(rs)} | {sum(r['ok'] for r in rs)} | "
                   f"{fmt(min(r['window_s'] or 0 for r in rs))} | {pooled(rs, 'ttft_p50')} | "
                   f"{pooled(rs, 'tpot_p50')} | {pooled(rs, 'e2e_p50')} | {cached_range(rs)} |")
    return out + ["", "One run: the median [its distribution-free 95 % interval]; several: the mean of "
                  "the runs' medians ± 95 % t-interval over runs. Window: the shortest run's. Prompt "
                  "cached: the share of prompt tokens the engine served from its prefix cache (its own "
                  "counter; over the runs): a TTFT with a high share is a cache hit's.", ""]


def batch_stat(rs):
    """Tokens/s: one run: mean ± t-interval over its batches; several: over the runs' means."""
    if len(rs) == 1:
        m, hw, n = mean_ci(rs[0]["batches"])
        return m, hw, f"{n} batches"
    m, hw, n = mean_ci([statistics.fmean(r["batches"]) for r in rs if r["batches"]])
    return m, hw, f"{n} runs"


def batch_table(groups):
    out = ["## Batch (the seed's Table 5)", "",
           "| engine | weights | prompts | B | over | tokens/s (± 95 %) | TTFT p50 ms | E2E p50 ms | J/token | window s | prompt cached % |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for k, rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2], int(kv[1][0]["params"].get("batch-size", 0)))):
        if k[3] != "batch":
            continue
        m, hw, over = batch_stat(rs)
        j = mean_ci([r["j_per_token"] for r in rs])[0]
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {rs[0]['params'].get('batch-size')} | {over} | {fmt_ci(m, hw)} | "
                   f"{pooled(rs, 'ttft_p50')} | {pooled(rs, 'e2e_p50')} | {fmt(j, 3)} | "
                   f"{fmt(min(r['window_s'] or 0 for r in rs))} | {cached_range(rs)} |")
    return out + ["", "tokens/s of a batch: its completion tokens over the time from its common send "
                  "to its last response.", ""]


def qos(rs):
    """(TTFT p95, E2E p95) of a server configuration, means over its runs, and whether both are
    within the seed's QoS lines."""
    t95 = mean_ci([r["ttft_p95"] for r in rs])[0]
    e95 = mean_ci([r["e2e_p95"] for r in rs])[0]
    return t95, e95, t95 is not None and e95 is not None and t95 <= QOS_TTFT_MS and e95 <= QOS_E2E_MS


def server_table(groups):
    out = ["## Server (the seed's Figure 4)", "",
           "| engine | weights | prompts | users | requests | TTFT p95 ms | E2E p95 ms | QoS (TTFT 2 s, E2E 6 s) | tokens/s | prompt cached % |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for k, rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2], int(kv[1][0]["params"].get("users", 0)))):
        if k[3] != "server":
            continue
        t95, e95, ok = qos(rs)
        tps = mean_ci([r["tokens_per_s"] for r in rs])
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {rs[0]['params'].get('users')} | {sum(r['ok'] for r in rs)} | "
                   f"{fmt(t95)} | {fmt(e95)} | {'meets' if ok else 'misses'} | {fmt_ci(tps[0], tps[1])} | "
                   f"{cached_range(rs)} |")
    return out + [""]


def quality_table(groups):
    out = ["## Quality (every item once, temperature 0)", "",
           "| engine | weights | task | metric | items | quality (± 95 % over items) |", "|---|---|---|---|---|---|"]
    for k, rs in sorted(groups.items()):
        if k[3] != "concurrency":
            continue
        q = [r["quality"] for r in rs if r["quality"]]
        if not q:
            continue
        metric, m, hw, n = q[0]
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {metric or '–'} | {n} | {fmt_ci(100 * m, 100 * hw if hw else None)} |")
    return out + [""]


def questions(groups):
    """The rankings' questions, in order: (scenario kind, the question as its verdict line
    names it, [(configuration, its runs)…]) per scenario, task and parameters that one is asked
    of (single stream, batch size, quality pass)."""
    by_task = defaultdict(list)
    for k, rs in groups.items():
        by_task[(k[3], k[2], k[4])].append((k, rs))
    for (scen, task, p), items in sorted(by_task.items()):
        label = {"single": f"single, {task}: lowest TPOT p50 (ms)",
                 "batch": f"batch {p}, {task}: highest tokens/s",
                 "concurrency": f"quality, {task}: highest score (%)"}.get(scen)
        if label is not None:
            yield scen, label, items


def answers(groups):
    out = ["## Which configuration, per scenario and task", "",
           "Best by mean; *inside its noise* when the two intervals overlap (a ranking is claimed only "
           "beyond that). Where the runs are of more than one machine (see *Machines*), a configuration "
           "is also its machine (`engine on M1`) and configurations are ranked per machine, each "
           "over its runs there: a difference between machines is not a difference between "
           "configurations.", ""]
    for scen, label, items in questions(groups):
        names = sorted({machine_name(r["machine"]) for _, rs in items for r in rs})
        if len(names) < 2:
            out.append(rank(scen, label, items))
            continue
        for m in names:
            here = [(k, [r for r in rs if machine_name(r["machine"]) == m]) for k, rs in items]
            here = [(k, rs) for k, rs in here if rs]
            if len(here) > 1:
                out.append(rank(scen, f"{label}, on {m} only", here))
            else:
                out.append(f"- {label}, on {m} only: {here[0][0][0]}/{here[0][0][1]} alone"
                           f" ({len(here[0][1])} run(s)): nothing to rank against")
    server = defaultdict(list)
    for k, rs in groups.items():
        if k[3] == "server":
            if qos(rs)[2]:
                server[(k[2], f"{k[0]}/{k[1]}")].append(int(rs[0]["params"].get("users", 0)))
    for task in sorted({t for t, _ in server}):
        out.append(f"- server, {task}: most users within QoS: " + ", ".join(
            f"{e} {max(u)}" for (t, e), u in sorted(server.items(), key=lambda kv: -max(kv[1])) if t == task))
    return out + [""]


def pooled_answers(runs):
    """With runs on more than one machine, the same questions over each configuration's runs on
    every machine at once: the mean of its runs' figures ± the t-interval over those runs, which
    then holds the machine-to-machine spread as well as the run-to-run one. A ranking that holds
    beyond it holds on every machine the runs met; one run has no spread and is not ranked."""
    out = []
    for gpu in sorted({r["gpu"] for r in runs}):
        out += pooled_on(gpu, [r for r in runs if r["gpu"] == gpu])
    return out


def pooled_on(gpu, runs):
    """[`pooled_answers`] over the runs of one GPU model."""
    if len({r["machine"] for r in runs}) < 2:
        return []
    groups = defaultdict(list)
    for r in runs:
        groups[(r["engine_name"],) + config_key(r)[1:]].append(r)
    out = [f"## Across machines: every repeat pooled ({gpu})", "",
           f"Each configuration over all its runs on machines of one GPU model ({gpu}), whichever "
           "machine they ran on: the mean of the runs' "
           "figures (TPOT p50; a batch run's mean tokens/s) ± the 95 % t-interval over those runs, so "
           "the interval holds the spread between machines as well as between starts. Best by mean, "
           "*inside its noise* when the intervals overlap; a configuration with one run has no spread "
           "to compare. Where two or more are behind beyond the noise, the next line asks the same "
           "among them, and so on down the field; where the best by mean has one run, among those "
           "with a spread. Machines of another GPU model are never pooled with these.", ""]
    for scen, label, items in questions(groups):
        if scen not in ("single", "batch"):
            continue
        cands = []
        for k, rs in items:
            where = machines_where(rs)
            if scen == "single":
                vals = [r["tpot_p50"][0] for r in rs]
            else:
                vals = [statistics.fmean(r["batches"]) for r in rs if r.get("batches")]
            m, hw, n = mean_ci(vals)
            cands.append((f"{k[0]}/{k[1]} ({n} run{'' if n == 1 else 's'}: {where})", *with_hw(m, hw)))
        higher, unit = (False, "ms") if scen == "single" else (True, "tok/s")
        out += verdicts(f"{label}, every machine", cands, higher, unit)
    return out + [""]


def rank(scen, label, items):
    """The verdict line of one scenario over (configuration, its runs)."""
    name = lambda k: f"{k[0]}/{k[1]}"
    if scen == "single":
        cands = [(name(k), *interval_of(rs, "tpot_p50")) for k, rs in items]
        return verdict(label, cands, False, "ms")
    if scen == "batch":
        cands = [(name(k), *with_hw(*batch_stat(rs)[:2])) for k, rs in items]
        return verdict(label, cands, True, "tok/s")
    cands = []
    for k, rs in items:
        q = [r["quality"] for r in rs if r["quality"]]
        if q:
            cands.append((name(k), *with_hw(100 * q[0][1], 100 * q[0][2] if q[0][2] else None)))
    return verdict(label, cands, True, "%")


def interval_of(rs, field):
    """(estimate, low, high): one run, its median and the median's own (asymmetric) interval;
    several, the mean of their medians ± t-interval; None where there is none."""
    if len(rs) == 1:
        return rs[0][field]
    m, hw, _ = mean_ci([r[field][0] for r in rs])
    return (m, None, None) if hw is None else (m, m - hw, m + hw)


def with_hw(m, hw):
    return (m, None, None) if m is None or hw is None else (m, m - hw, m + hw)


def write_runs_csv(runs, path):
    cols = ["label", "engine", "quantization", "task", "scenario", "params", "repeat", "requests", "ok",
            "window_s", "tokens_per_s", "ttft_p50", "tpot_p50", "e2e_p50", "ttft_p95", "e2e_p95",
            "j_per_token", "gpu_util", "batch_rate_mean", "batches", "quality", "quality_items",
            "completion_tokens_mean", "ignore_eos", "prefix_cache_share", "machine", "engine_start", "key"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in sorted(runs, key=lambda r: r["label"]):
            b = r.get("batches") or []
            q = r["quality"]
            w.writerow([r["label"], r["engine_name"], r["quantization"], r["task"], r["scenario"],
                        json.dumps(r["params"], sort_keys=True), r["repeat"], r["requests"], r["ok"],
                        r["window_s"], r["tokens_per_s"], r["ttft_p50"][0], r["tpot_p50"][0],
                        r["e2e_p50"][0], r["ttft_p95"], r["e2e_p95"], r["j_per_token"], r["gpu_util"],
                        statistics.fmean(b) if b else None, len(b) or None,
                        q[1] if q else None, q[3] if q else None, r["tokens_mean"], r["ignore_eos"],
                        r["cache_share"], machine_name(r["machine"]), r["engine_start"], r["key"]])


def figures(groups, runs, out, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "bench360-seed"  # stable SVG ids: a re-run changes no byte

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(os.path.join(out, name + ".svg"), metadata={"Date": None})
        if png:
            fig.savefig(os.path.join(out, name + ".png"), dpi=90)
        plt.close(fig)

    # Single stream: TPOT p50 per engine and task, with its interval.
    single = {k: rs for k, rs in groups.items() if k[3] == "single"}
    if single:
        tasks = sorted({k[2] for k in single})
        engines = sorted({(k[0], k[1]) for k in single})
        fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(tasks) * len(engines) / 2), 3.6))
        w = 0.8 / len(engines)
        for j, e in enumerate(engines):
            xs, ys, lo, hi = [], [], [], []
            for i, t in enumerate(tasks):
                rs = single.get((e[0], e[1], t, "single", next((k[4] for k in single if k[:3] == (e[0], e[1], t)), "")))
                if not rs:
                    continue
                m, l, h = interval_of(rs, "tpot_p50")  # one run: the median's own interval
                l, h = (m, m) if l is None else (l, h)
                xs.append(i + j * w)
                ys.append(m)
                lo.append(m - l)
                hi.append(h - m)
            ax.bar(xs, ys, w, yerr=[lo, hi], capsize=2, label=f"{e[0]} ({e[1]})")
        ax.set_xticks([i + 0.4 - w / 2 for i in range(len(tasks))], tasks)
        ax.set_ylabel("TPOT p50, ms (one request at a time)")
        ax.legend(fontsize=7)
        save(fig, "seed-single")

    # Server: TTFT p95 and E2E p95 against users, with the QoS lines.
    server = {k: rs for k, rs in groups.items() if k[3] == "server"}
    if server:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
        by_engine = defaultdict(list)
        for k, rs in server.items():
            by_engine[(k[0], k[1], k[2])].append((int(rs[0]["params"].get("users", 0)), rs))
        for e, pts in sorted(by_engine.items()):
            pts.sort(key=lambda p: p[0])
            u = [p[0] for p in pts]
            # The prompts named unless they are the seed's (an earlier reading that stopped at EOS).
            label = f"{e[0]} ({e[1]})" + ("" if e[2] == "synth" else f", {e[2]}")
            axes[0].plot(u, [mean_ci([r["ttft_p95"] for r in p[1]])[0] for p in pts], marker="o", label=label)
            axes[1].plot(u, [mean_ci([r["e2e_p95"] for r in p[1]])[0] for p in pts], marker="o", label=label)
        for ax, qos, name in ((axes[0], QOS_TTFT_MS, "TTFT p95, ms"), (axes[1], QOS_E2E_MS, "E2E p95, ms")):
            ax.axhline(qos, color="red", linestyle="--", linewidth=1, label=f"QoS {qos / 1000:g} s")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("users (12 requests/min each, Poisson)")
            ax.set_ylabel(name)
        axes[1].legend(fontsize=7)
        save(fig, "seed-server")

    # Energy per output token against GPU utilisation, every run with GPU energy.
    pts = [r for r in runs if r["j_per_token"] and r["gpu_util"] is not None and r["energy_source"] == "gpu"]
    if pts:
        fig, ax = plt.subplots(figsize=(6, 3.8))
        for e in sorted({(r["engine"], r["quantization"]) for r in pts}):
            sel = [r for r in pts if (r["engine"], r["quantization"]) == e]
            ax.scatter([r["gpu_util"] for r in sel], [r["j_per_token"] for r in sel], s=14, label=f"{e[0]} ({e[1]})")
        ax.set_yscale("log")
        ax.set_xlabel("mean GPU utilisation, %")
        ax.set_ylabel("J per output token (GPU)")
        ax.legend(fontsize=7)
        save(fig, "seed-energy")


if __name__ == "__main__":
    main()
