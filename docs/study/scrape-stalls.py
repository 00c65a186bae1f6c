#!/usr/bin/env python3
"""How much bench360's sampling ticks hold up an engine's token stream (docs/telemetry.md,
"Scraping the engine perturbs it"), from a cache's chunk traces and telemetry.

  scrape-stalls.py CACHE [--sweep NAME] [--scenario single]   Markdown table on stdout

Per run: the gaps between consecutive chunks of one request; the ticks are the engine-metrics
scrapes (`engine` samples in telemetry.parquet). A tick falls more often in a long gap than in
a short one, so the expected length of a gap that holds a tick, if ticks did nothing, is the
length-biased mean E[g²]/E[g], not the mean; `excess` is the mean gap that held a tick minus
that. `share` = excess × ticks that fell in a gap / the time spanned by the gaps: the part of
the streams' time the ticks account for (of the gaps read). Gaps as long as the tick interval
(at most 100 ms) are left out: they hold a tick whatever ticks do. `--ticks gpu` reads NVML's
samples as the ticks instead: with `metrics-interval` apart from `interval`, the two tell the
scrape's cost from NVML's. Runs without chunk traces or ticks are skipped.
"""
import argparse
import json
import os
import sys

import numpy as np
import pyarrow.parquet as pq


def run_stalls(d, source):
    c = pq.read_table(os.path.join(d, "chunks.parquet"), columns=["request_id", "t_ns"]).to_pydict()
    t = pq.read_table(os.path.join(d, "telemetry.parquet"), columns=["t_ns", "source"]).to_pydict()
    ticks = np.array(sorted(x for x, s in zip(t["t_ns"], t["source"]) if s == source), dtype=float)
    # One tick per instant: NVML's energy and fast-field threads each write a row per tick.
    if len(ticks):
        ticks = ticks[np.concatenate(([True], np.diff(ticks) > 5e6))]
    rid = np.array(c["request_id"])
    tt = np.array(c["t_ns"], dtype=float)
    order = np.lexsort((tt, rid))
    rid, tt = rid[order], tt[order]
    same = rid[1:] == rid[:-1]
    start, end = tt[:-1][same], tt[1:][same]
    g = (end - start) / 1e6
    if len(g) < 100 or len(ticks) < 10:
        return None
    # A gap as long as the tick interval holds a tick whatever ticks do: only shorter gaps
    # can tell (and a rare long stall would otherwise weigh on the length-biased mean); at
    # most 100 ms, so that a run scraped once a second is read on the same gaps.
    interval = min(float(np.median(np.diff(ticks))) / 1e6, 100.0)
    short = g < interval
    start, end, g = start[short], end[short], g[short]
    j = np.searchsorted(ticks, end) - 1
    held = (j >= 0) & (ticks[np.clip(j, 0, None)] > start)
    if held.sum() < 10:
        return None
    biased = float((g * g).sum() / g.sum())
    excess = float(g[held].mean() - biased)
    return {"gaps": len(g), "ticks_held": int(held.sum()), "itl_p50": float(np.median(g)),
            "held_mean": float(g[held].mean()), "biased": biased, "excess": excess,
            "share": excess * held.sum() / g.sum()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache")
    ap.add_argument("--sweep")
    ap.add_argument("--scenario", default="single", help="scenario kind to read (default single)")
    ap.add_argument("--ticks", default="engine", choices=["engine", "gpu", "process"],
                    help="whose samples are the ticks: the engine's scrapes (default), NVML's or "
                         "procfs's — the same instants when the sweep samples all at one interval")
    a = ap.parse_args()
    objects = os.path.join(a.cache, "objects")
    rows = []
    for key in sorted(os.listdir(objects)):
        d = os.path.join(objects, key)
        if not all(os.path.exists(os.path.join(d, f)) for f in ("chunks.parquet", "telemetry.parquet", "run.json")):
            continue
        cols = json.load(open(os.path.join(d, "run.json")))["columns"]
        if (a.sweep and cols.get("sweep") != a.sweep) or cols.get("scenario_kind") != a.scenario:
            continue
        s = run_stalls(d, a.ticks)
        if s:
            rows.append((cols.get("engine", "?"), cols.get("quantization", "?"), cols.get("task", "?"),
                         int(cols.get("repeat", 0)), s))
    if not rows:
        sys.exit("no run with chunk traces and engine scrapes")
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[3]))
    print("| engine | quantization | task | repeat | gaps | ticks in a gap | ITL p50 ms | held gap ms | length-biased ms | excess ms | share |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for e, q, task, rep, s in rows:
        print(f"| {e} | {q} | {task} | {rep + 1} | {s['gaps']} | {s['ticks_held']} | {s['itl_p50']:.2f} | "
              f"{s['held_mean']:.2f} | {s['biased']:.2f} | {s['excess']:.2f} | {100 * s['share']:.1f} % |")
    print()
    by = {}
    for e, q, task, rep, s in rows:
        by.setdefault(e, []).append(s)
    for e, ss in sorted(by.items()):
        ex = [s["excess"] for s in ss]
        sh = [100 * s["share"] for s in ss]
        print(f"- {e}: {len(ss)} runs, excess per held tick {min(ex):.2f}–{max(ex):.2f} ms "
              f"(median {np.median(ex):.2f}), share of the streams' time {min(sh):.1f}–{max(sh):.1f} %")


if __name__ == "__main__":
    main()
