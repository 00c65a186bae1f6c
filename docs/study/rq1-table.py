#!/usr/bin/env python3
"""Issue #26 item 4: the seed paper's RQ1 table — under a GPU memory budget, a smaller model in
full precision or a larger one quantized? — from bench360's own records of sweeps/gpu-rq1.kdl.

    python3 docs/study/rq1-table.py CACHE [CACHE…] [--sweep gpu-rq1] [--budget GIB…] [--out FILE]

Each CACHE is a bench360 cache folder (a hold's `cache.tar.xz` unpacked). What is read is what
docs/study/seed-tables.py reads (run.json, requests.parquet, telemetry.json, scores.parquet,
coldstart.json; nothing from a report), plus the records of cold starts that failed, with
their cause. One row per deployment (model, precision, engine):

  * weights: the size of what the engine loads (the cold start's `model_bytes`);
  * start: the cold starts' seconds to healthy (mean ± 95 % t-interval over the starts, from
    two on), or the failures' error line;
  * memory: the highest GPU memory NVML read over any of the deployment's runs (GiB, 2^30
    bytes; the engine's memory grows after its first run, so the peak is the deployment's),
    and whether it stays within each --budget (default 5);
  * quality per task: the task metric's mean over distinct items ± its 95 % normal interval;
    ΔQ: the mean over the four tasks of (this − the best deployment on that task), in points;
  * TPOT p50 of the single-stream synthetic run with its distribution-free 95 % interval, and
    J per output token of that run (the NVML counter over its window); with repeats (each on
    its own cold start, `cold-repeats`), the mean over the runs ± its 95 % t-interval, pooled
    over the machines they ran on, and a second table with every run and its machine.

Writes Markdown to --out (default: stdout).
"""

import argparse
import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("seed_tables", os.path.join(HERE, "seed-tables.py"))
st = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(st)

TASKS = ["mmlu", "squad", "cnn", "spider"]
ERROR = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S.*)$|((?i:out of memory|no available memory).*)")


def failed_starts(cache, sweep):
    """Deployment -> the error line of each of its failed cold starts, in key order."""
    out = {}
    recs = os.path.join(cache, "records")
    for name in sorted(os.listdir(recs)):
        rec = st.read_json(os.path.join(recs, name)) or {}
        if rec.get("kind") != "coldstart" or rec.get("status") != "failed":
            continue
        if sweep and rec.get("sweep") not in (None, sweep):
            continue
        cause = rec.get("cause") or ""
        line = next((m.group(0) for l in cause.splitlines() if (m := ERROR.search(l))), None)
        first = cause.splitlines()[0] if cause else "failed"
        label = deployment_of(rec.get("label", ""))
        if line and ". " in line[:200]:
            line = line[: line.index(". ") + 1]  # its first sentence: the rest is advice
        out.setdefault(label, []).append(line or first)
    return out


def deployment_of(label):
    # "run qwen2.5-coder-1.5b:fp8@vllm mmlu quality" -> "qwen2.5-coder-1.5b:fp8@vllm";
    # "coldstart qwen2.5-coder-1.5b:fp8@vllm (start 2)" -> the same.
    return label.removeprefix("run ").removeprefix("coldstart ").split(" ")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("caches", nargs="+")
    ap.add_argument("--sweep", default="gpu-rq1")
    ap.add_argument("--budget", type=float, nargs="+", default=[5.0])
    ap.add_argument("--out")
    a = ap.parse_args()

    seen, runs, colds, failures, latest = set(), [], [], {}, {}
    for c in a.caches:
        r, cs, orphans = st.runs_of(c, a.sweep, seen)
        runs += r
        colds += cs
        # A score whose run is not in its own cache scored the run of that key the device had
        # then: the latest of the caches read before it (as seed-tables.py reads them).
        latest.update((x["key"], x) for x in r)
        for run_key, score_dir in orphans.items():
            if run_key in latest and latest[run_key]["quality"] is None:
                latest[run_key]["quality"] = st.quality(score_dir)
        for label, lines in failed_starts(c, a.sweep).items():
            failures.setdefault(label, []).extend(lines)

    deps = {}
    for r in runs:
        d = deps.setdefault(deployment_of(r["label"]), {"runs": [], "cold": []})
        d["runs"].append(r)
    for c in colds:
        deps.setdefault(deployment_of(c["label"]), {"runs": [], "cold": []})["cold"].append(c)
    for label in failures:
        deps.setdefault(label, {"runs": [], "cold": []})

    # Best mean quality per task over the deployments that have it.
    q = {}
    for label, d in deps.items():
        for r in d["runs"]:
            if r["task"] in TASKS and r["quality"]:
                q[(label, r["task"])] = r["quality"]
    best = {t: max((v[1] for (l, tt), v in q.items() if tt == t), default=None) for t in TASKS}

    lines = []
    budgets = " | ".join(f"≤ {b:g} GiB" for b in a.budget)
    lines.append(f"| deployment | weights GB | start | GPU memory peak GiB | {budgets} | "
                 + " | ".join(TASKS) + " | ΔQ pts | TPOT p50 ms (single) | J/token (single) |")
    lines.append("|" + "---|" * (6 + len(a.budget) + len(TASKS)))
    order = sorted(deps, key=lambda l: (label_model(l), l))
    for label in order:
        d = deps[label]
        colds_ = d["cold"]
        size = next((f"{c['model_bytes'] / 1e9:.2f}" for c in colds_ if c.get("model_bytes")), "–")
        if colds_:
            m, hw, n = st.mean_ci([c["healthy_s"] for c in colds_])
            start = f"{st.fmt_ci(m, hw, 0)} s" + (f" ({n} starts)" if n > 1 else "")
        elif label in failures:
            why = failures[label]
            start = (f"**failed** ({len(why)} of {len(why)} starts): " if len(why) > 1 else "**failed**: ") \
                + why[-1].replace("|", "\\|")
        else:
            start = "–"
        peaks = [r["gpu_mem_peak_mb"] for r in d["runs"] if r.get("gpu_mem_peak_mb")]
        peak = max(peaks) * 1e6 / 2**30 if peaks else None
        fits = " | ".join(
            ("no (did not start)" if label in failures else "–") if peak is None
            else ("yes" if peak <= b else "no") for b in a.budget)
        cells, deltas = [], []
        for t in TASKS:
            v = q.get((label, t))
            if v:
                cells.append(f"{100 * v[1]:.1f} ± {100 * v[2]:.1f}")
                deltas.append(100 * (v[1] - best[t]))
            else:
                cells.append("–")
        dq = f"{sum(deltas) / len(deltas):+.1f}" if len(deltas) == len(TASKS) else "–"
        singles = singles_of(d)
        tpot = st.pooled(singles, "tpot_p50") if singles else "–"
        if len(singles) > 1:
            m, hw, n = st.mean_ci([r["j_per_token"] for r in singles])
            jpt = f"{st.fmt_ci(m, hw, 3)} (n={n})"
        else:
            jpt = st.fmt(singles[0]["j_per_token"], 3) if singles else "–"
        lines.append(f"| {label} | {size} | {start} | {st.fmt(peak, 2)} | {fits} | "
                     + " | ".join(cells) + f" | {dq} | {tpot} | {jpt} |")
    lines.append("")
    lines.append("Quality: mean over distinct items ± 95 % normal interval, in points (MMLU and "
                 "Spider: accuracy; SQuAD v2: F1; CNN/DailyMail: ROUGE-L). ΔQ: mean over the "
                 "four tasks of the difference to the best deployment on each task. GPU memory: "
                 "the highest NVML reading over the deployment's runs, over all its starts "
                 "(2^30 bytes). Start, TPOT and J/token with repeats: the mean over the starts or "
                 "runs ± 95 % t-interval (one run: TPOT's median [its distribution-free 95 % "
                 "interval]), pooled over every machine they ran on, so that the interval holds "
                 "the machines' difference too (run by run below).")
    lines += ["", *single_runs(deps, order)]
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def singles_of(d):
    """A deployment's single-stream runs on the synthetic prompts (one per start)."""
    return [r for r in d["runs"] if r["task"] == "synth" and r["scenario"] == "single"]


def single_runs(deps, order):
    """Every single-stream run: its repeat, machine, TPOT p50 [interval], J/token; then the
    machines."""
    out = ["## Single stream, run by run", "",
           "| deployment | run | machine | requests | window s | TPOT p50 ms | J/token |",
           "|---|---|---|---|---|---|---|"]
    for label in order:
        for r in sorted(singles_of(deps[label]), key=lambda r: r["label"]):
            rep = r["label"].rsplit("#", 1)[1] if "#" in r["label"] else "1"
            out.append(f"| {label} | #{rep} | {st.machine_name(r['machine'])} | {r['ok']} | "
                       f"{st.fmt(r['window_s'])} | {st.fmt_med(r['tpot_p50'], 2)} | "
                       f"{st.fmt(r['j_per_token'], 3)} |")
    out += ["", "## Machines", "", "What each run's run.json recorded of its host (the lent VMs differ in "
            "their kernel build and memory): the first table pools their runs; this one keeps them "
            "apart.", "", "| machine | host |", "|---|---|"]
    return out + [f"| M{i + 1} | {m} |" for i, m in enumerate(st.MACHINES)] + [""]


def label_model(label):
    return label.split(":")[0]


if __name__ == "__main__":
    main()
