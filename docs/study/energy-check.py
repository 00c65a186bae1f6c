#!/usr/bin/env python3
"""Issue #16 cross-check (a): the NVML energy counter against the integral of sampled power.

    python3 docs/study/energy-check.py CACHE_DIR [--keys KEY...] [--summary summary.csv] [--sampling]

For every finished run (records/*.json of kind "run"; or only the node keys given, or those
of a summary.csv), recomputes from the raw files, independently of bench360's Rust code:

  window   first request's scheduled_ns .. last request's end_ns (requests.parquet), the
           window bench360's stats use;
  counter  the GPU's total-energy counter (telemetry.parquet, energy_mj, source "gpu"),
           linearly interpolated at both ends of the window, difference in J;
  ∫power   trapezoids over the power samples (power_w: NVML field 186, instant power) in the
           window, interpolated at both ends;

and prints both, their ratio, whether they agree within 5 %, and bench360's own figures from
telemetry.json (energy_j, power_integral_j) next to them. Also the idle baseline (the
telemetry before the first request) both ways. An engine on several GPUs (tensor-parallel):
each GPU's series is checked on its own and the GPUs are summed (the JSON keeps each).
With --sampling, two more columns say how precise ∫power itself is: the power samples in the
window, their standard deviation, and the standard error of ∫power as a mean of independent
samples (window × sd / √n, the GPUs' errors added in quadrature), as ± 2 SE in % and as the
difference Δ in units of that SE. The counter is the GPU's own running integral; ∫power
samples an instant reading every 100 ms, so a load whose power swings within a tick (a batch
engine's bursts) makes ∫power the less certain of the two. Needs pyarrow.
"""
import argparse
import csv
import glob
import json
import math
import os
import statistics
import sys

import pyarrow.parquet as pq


def interp(ts, vs, t):
    if not ts or t < ts[0] or t > ts[-1]:
        return None
    for i in range(1, len(ts)):
        if ts[i] >= t:
            t0, t1, v0, v1 = ts[i - 1], ts[i], vs[i - 1], vs[i]
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return vs[-1]


def counter_j(ts, mj, a, b):
    x, y = interp(ts, mj, a), interp(ts, mj, b)
    return None if x is None or y is None else (y - x) / 1000.0


def trapezoid_j(ts, w, a, b):
    pa, pb = interp(ts, w, a), interp(ts, w, b)
    if pa is None or pb is None:
        return None
    pts = [(a, pa)] + [(t, v) for t, v in zip(ts, w) if a < t < b] + [(b, pb)]
    return sum((t1 - t0) / 1e9 * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(pts, pts[1:]))


def check_device(et, ev, pt, pv, w0, w1):
    """Counter and ∫power over [w0, w1] and over the idle span before w0, for one GPU."""
    start = max(et[0], pt[0])
    inside = [v for t, v in zip(pt, pv) if w0 <= t <= w1]
    n = len(inside)
    sd = statistics.stdev(inside) if n > 1 else None
    return {"samples_in_window": n, "power_sd_w": sd,
            "integral_se_j": None if sd is None else (w1 - w0) / 1e9 * sd / math.sqrt(n),
            "counter_j": counter_j(et, ev, w0, w1), "integral_j": trapezoid_j(pt, pv, w0, w1),
            "idle_counter_j": counter_j(et, ev, start, w0),
            "idle_integral_j": trapezoid_j(pt, pv, start, w0), "start": start,
            "energy_samples": len(et), "power_samples": len(pt)}


def add(xs):
    return None if any(x is None for x in xs) else sum(xs)


def check(cache, key, label):
    obj = os.path.join(cache, "objects", key)
    r = pq.read_table(os.path.join(obj, "requests.parquet"), columns=["scheduled_ns", "end_ns"]).to_pydict()
    w0, w1 = min(r["scheduled_ns"]), max(r["end_ns"])
    t = pq.read_table(os.path.join(obj, "telemetry.parquet"),
                      columns=["t_ns", "source", "device", "power_w", "energy_mj"]).to_pydict()
    # One series per GPU (an engine on several GPUs: tensor-parallel), checked apart, then
    # summed, as bench360 sums its devices.
    devs = sorted({d for s, d in zip(t["source"], t["device"]) if s == "gpu"})
    per = {}
    for dv in devs:
        e = sorted((ts, v) for ts, s, d, v in zip(t["t_ns"], t["source"], t["device"], t["energy_mj"])
                   if s == "gpu" and d == dv and v is not None)
        p = sorted((ts, v) for ts, s, d, v in zip(t["t_ns"], t["source"], t["device"], t["power_w"])
                   if s == "gpu" and d == dv and v is not None)
        per[dv] = check_device([x for x, _ in e], [y for _, y in e], [x for x, _ in p], [y for _, y in p], w0, w1)
    c = add([v["counter_j"] for v in per.values()])
    i = add([v["integral_j"] for v in per.values()])
    tj = json.load(open(os.path.join(obj, "telemetry.json")))
    gds = [d for d in (tj.get("devices") or []) if d.get("source") == "gpu"] or [{}]
    start = max(v["start"] for v in per.values())
    return {
        "label": label.removeprefix("run "), "key": key, "window_s": (w1 - w0) / 1e9,
        "devices": devs,
        "per_device": {dv: {k: v[k] for k in ("counter_j", "integral_j", "idle_counter_j", "idle_integral_j")}
                       for dv, v in per.items()},
        "energy_samples": sum(v["energy_samples"] for v in per.values()),
        "power_samples": sum(v["power_samples"] for v in per.values()),
        "counter_j": c, "integral_j": i,
        "ratio": (c / i) if c and i else None,
        "diff_pct": (100 * (c - i) / i) if c and i else None,
        "bench_counter_j": add([d.get("energy_j") for d in gds]),
        "bench_integral_j": add([d.get("power_integral_j") for d in gds]),
        "method": ",".join(sorted({str(d.get("method")) for d in gds})),
        "idle_s": (w0 - start) / 1e9,
        "idle_counter_j": add([v["idle_counter_j"] for v in per.values()]),
        "idle_integral_j": add([v["idle_integral_j"] for v in per.values()]),
        "samples_in_window": sum(v["samples_in_window"] for v in per.values()),
        "power_sd_w": [v["power_sd_w"] for v in per.values()],
        "integral_se_j": (math.sqrt(sum(v["integral_se_j"] ** 2 for v in per.values()))
                          if all(v["integral_se_j"] is not None for v in per.values()) else None),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cache")
    ap.add_argument("--keys", nargs="*")
    ap.add_argument("--summary", help="take the node keys (and labels) of this summary.csv")
    ap.add_argument("--json", help="also write the rows as JSON")
    ap.add_argument("--sampling", action="store_true",
                    help="add the sampling precision of ∫power (samples, sd, ± 2 SE, Δ in SE)")
    a = ap.parse_args()
    recs = {}
    for f in glob.glob(os.path.join(a.cache, "records", "*.json")):
        rec = json.load(open(f))
        if rec.get("kind") == "run" and rec.get("status") == "finished":
            recs[rec["key"]] = rec["label"]
    keys = a.keys or list(recs)
    skipped, absent = [], []
    if a.summary:
        # Only the runs that finished: a row of a run that failed or never ran has nothing
        # to re-measure (it is listed below, not checked).
        keys = []
        for row in csv.DictReader(open(a.summary)):
            (keys if row.get("status") == "ok" else skipped).append(row["node_key"])
        # A summary row whose run this cache does not hold (a slice's cache that carries only
        # its own runs) is said, not read.
        absent = [k for k in keys if k not in recs]
        keys = [k for k in keys if k in recs]
    rows = [check(a.cache, k, recs.get(k, k)) for k in keys]
    f = lambda v, n=1: "—" if v is None else f"{v:.{n}f}"
    extra = " power samples, sd W | ∫power ± 2 SE % | Δ / SE |" if a.sampling else ""
    print("| run | GPUs | window s | counter J | ∫power J | counter/∫power | Δ % | ≤ 5 % | bench360 counter J | bench360 ∫power J | idle counter J / ∫power J |" + extra)
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if a.sampling else ""))
    for r in rows:
        ok = r["diff_pct"] is not None and abs(r["diff_pct"]) <= 5
        cols = ""
        if a.sampling:
            se, i, c = r["integral_se_j"], r["integral_j"], r["counter_j"]
            sds = ", ".join(f(x) for x in r["power_sd_w"])
            cols = (f" {r['samples_in_window']}, {sds} | {f(200 * se / i if se and i else None, 1)} | "
                    f"{f((c - i) / se if se and c and i else None, 1)} |")
        print(f"| {r['label']} | {' + '.join(r['devices'])} | {f(r['window_s'], 2)} | {f(r['counter_j'])} | {f(r['integral_j'])} | "
              f"{f(r['ratio'], 4)} | {f(r['diff_pct'], 2)} | {'yes' if ok else 'NO'} | "
              f"{f(r['bench_counter_j'])} | {f(r['bench_integral_j'])} | "
              f"{f(r['idle_counter_j'])} / {f(r['idle_integral_j'])} ({f(r['idle_s'], 1)} s) |" + cols)
    bad = [r for r in rows if r["diff_pct"] is None or abs(r["diff_pct"]) > 5]
    print(f"\n{len(rows)} runs: {len(rows) - len(bad)} within 5 %, {len(bad)} outside or not comparable.")
    if skipped:
        print(f"{len(skipped)} rows of the summary not checked (status not ok: failed or not run): {' '.join(skipped)}")
    if a.summary and absent:
        print(f"{len(absent)} rows of the summary not checked (their runs are not in {a.cache}): {' '.join(absent)}")
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
