#!/usr/bin/env python3
"""Issue #16 item 4: the H200 study's combined table and per-task Pareto plots.

    python3 docs/study/study-plots.py [RESULTS_DIR] [OUT_DIR] [--slo SWEEP.kdl] [--png DIR]
                                       [--markdown]

RESULTS_DIR (default docs/results) holds one folder per slice of the study, each with the
`summary.csv` bench360 wrote (plus `telemetry-summaries.json` and `device-info.txt` /
`nvidia-smi.txt` when present). Read: h200-llama, h200-llama-tp, h200-vllm and
gpu-engines-h200. Every row is normalised into one table, OUT_DIR/study.csv (default
docs/results/study), with:

  slice, machine_gpus (GPUs on the machine, from its nvidia-smi table), model, quantization,
  weights (Q4_K_M / Q4_1 GGUF, bf16 / FP8 from the bf16 folder), engine, engine_kind,
  tensor_parallel and gpus_used (the GPUs bench360 sampled for the run, from
  telemetry-summaries.json; the engine's `tpN` suffix must agree), task, questions (distinct
  samples, from the slice's sweep file), scenario, load ("concurrency 32", "server 16 × 120/min
  30 s"), window, quality with bench360's 95 % interval over requests and a 95 % interval over
  the distinct questions (normal approximation, p ± 1.96·sqrt(p(1−p)/questions): the requests
  cycle through the same questions at temperature 0, so the per-request interval is far too
  narrow), TTFT / TPOT / E2E percentiles, tokens/s, J/token (with and without the idle draw),
  GPU memory (sum and per GPU), the study SLO's verdict and whether the row is comparable
  (finished, every window ≥ 30 s, GPU energy measured).

Rows that are not comparable (the four-engine SmolLM2 run of issue #9: windows of 0.3–8 s)
stay in study.csv, marked, and are left out of the plots.

For every task and every load, three SVGs: quality vs TTFT p50, vs TPOT p50 and vs J per
output token (x on a log scale), one point per configuration (numbered; the legend names it
model · weights · engine · TP), error bars = the interval over distinct questions, and the
Pareto front (no other point has lower-or-equal cost and higher-or-equal quality) drawn as a
staircase with its points ringed. Loads are never mixed in one plot: the load is in the title.
Rows with TPOT p50 = 0 (one-token answers: no inter-token time) are left out of the TPOT plot
and named under it.

The SLO is the `slo { ttft-p95 … e2e-p95 … }` block of --slo (default sweeps/gpu-study.kdl:
the study's own sweep; the slice sweeps declare none). The recommendation printed at the end
(and with --markdown, the tables for docs/results-h200.md) is, per task and load: among the
comparable rows that meet the SLO, the highest quality; configurations whose quality is within
the best one's per-question half-width count as tied, and among those the lowest J/token wins
(then TPOT p50, then TTFT p50).

Needs matplotlib. --png DIR also writes each figure as PNG there (to look at; not committed).
"""
import argparse
import csv
import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

SLICES = ["h200-llama", "h200-llama-tp", "h200-vllm", "gpu-engines-h200"]
MIN_WINDOW_S = 30.0

MODEL_NAMES = {
    "smollm2-135m": ("SmolLM2-135M", "135M"),
    "qwen2.5-coder-0.5b": ("Qwen2.5-Coder-0.5B", "0.5B"),
    "qwen2.5-coder-1.5b": ("Qwen2.5-Coder-1.5B", "1.5B"),
}
ENGINE_NAMES = {"llama.cpp": "llama.cpp", "vllm": "vLLM", "sglang": "SGLang", "lmdeploy": "LMDeploy"}
TASK_NAMES = {"mmlu": "MMLU", "spider": "Spider", "squad": "SQuAD v2", "cnn": "CNN/DM"}
METRIC_NAMES = {
    "accuracy": "accuracy",
    "execution_accuracy": "execution accuracy",
    "f1": "F1",
    "rougeL": "ROUGE-L",
}


def weights_name(quant, engine_kind):
    q = quant.lower()
    if q.startswith("q") and engine_kind == "llama.cpp":
        return quant.upper() + " GGUF"
    if q == "default":
        return "bf16" if engine_kind != "llama.cpp" else "GGUF"
    if q == "fp8":
        return "FP8"
    return quant


def fnum(s):
    if s is None or s == "":
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "%.6g" % v
    return str(v)


def machine_gpus(slice_dir):
    """GPUs on the machine: the rows of nvidia-smi's table in device-info.txt / nvidia-smi.txt."""
    for name in ("device-info.txt", "nvidia-smi.txt"):
        p = os.path.join(slice_dir, name)
        if os.path.exists(p):
            with open(p, encoding="utf-8", errors="replace") as f:
                ids, csv_rows = set(), 0
                for line in f:
                    m = re.match(r"^\|\s+(\d+)\s+NVIDIA\s", line)
                    if m:
                        ids.add(int(m.group(1)))
                    elif line.startswith("NVIDIA "):  # nvidia-smi --query-gpu … --format=csv
                        csv_rows += 1
                if ids or csv_rows:
                    return len(ids) or csv_rows
    return None


def gpus_sampled(slice_dir):
    """label → number of GPU devices in the run's telemetry (telemetry-summaries.json)."""
    p = os.path.join(slice_dir, "telemetry-summaries.json")
    out = {}
    if not os.path.exists(p):
        return out
    with open(p, encoding="utf-8") as f:
        data = json.load(f)
    for key, t in data.items():
        label = key[4:] if key.startswith("run ") else key
        devs = [d for d in t.get("devices", []) if d.get("source") == "gpu"]
        out[label] = len(devs)
    return out


def parse_kdl_blocks(text, kind):
    """{name: body} of the top-level `kind "name" { … }` blocks (flat bodies only)."""
    out = {}
    for m in re.finditer(r'^%s\s+"([^"]+)"\s*\{(.*?)^\}' % kind, text, re.S | re.M):
        out[m.group(1)] = m.group(2)
    return out


def sweep_samples(sweeps_dir, sweep):
    p = os.path.join(sweeps_dir, sweep + ".kdl")
    if not os.path.exists(p):
        return {}
    with open(p, encoding="utf-8") as f:
        text = f.read()
    out = {}
    for name, body in parse_kdl_blocks(text, "task").items():
        m = re.search(r"^\s*samples\s+(\d+)", body, re.M)
        if m:
            out[name] = int(m.group(1))
    return out


def read_slo(path):
    """(ttft_p95_s, e2e_p95_s) from a sweep's `slo { … }` block; None where not declared."""
    if not path or not os.path.exists(path):
        return None, None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^slo\s*\{(.*?)^\}", text, re.S | re.M)
    if not m:
        return None, None
    body = m.group(1)

    def val(key):
        k = re.search(r"^\s*%s\s+([0-9.]+)" % re.escape(key), body, re.M)
        return float(k.group(1)) if k else None

    return val("ttft-p95"), val("e2e-p95")


def load_name(r):
    kind = r["scenario_kind"]
    try:
        p = json.loads(r["scenario_params"] or "{}")
    except ValueError:
        p = {}
    if kind == "concurrency":
        return "concurrency %s" % p.get("concurrency", "?")
    if kind == "server":
        return "server %s users × %s/min, %s s" % (p.get("users", "?"), p.get("rate", "?"), p.get("duration", "?"))
    if kind == "batch":
        return "batch %s" % p.get("batch-size", p.get("batch_size", "?"))
    if kind == "single":
        return "single"
    return kind


def load_slug(load):
    """Short file-name part: "c32", "server-16u-120pm-31s", "batch-64", "single"."""
    m = re.match(r"concurrency (\S+)$", load)
    if m:
        return "c" + m.group(1)
    m = re.match(r"server (\S+) users × (\S+)/min, (\S+) s$", load)
    if m:
        return "server-%su-%spm-%ss" % m.groups()
    return re.sub(r"[^a-z0-9]+", "-", load.lower()).strip("-")


def normalise(results_dir, sweeps_dir, slo):
    rows = []
    slo_ttft, slo_e2e = slo
    for sl in SLICES:
        d = os.path.join(results_dir, sl)
        p = os.path.join(d, "summary.csv")
        if not os.path.exists(p):
            print(f"note: {p} missing, slice skipped", file=sys.stderr)
            continue
        mg = machine_gpus(d)
        sampled = gpus_sampled(d)
        with open(p, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                model = r["model"]
                ek = r["engine_kind"]
                m = re.search(r"tp(\d+)$", r["engine"])
                tp_name = int(m.group(1)) if m else 1
                used = sampled.get(r["label"])
                note = []
                if used is not None and used != tp_name:
                    note.append(f"engine name says TP {tp_name}, {used} GPU(s) sampled")
                tp = used if used else tp_name
                samples = sweep_samples(sweeps_dir, r["sweep"]).get(r["task"])
                q = fnum(r["quality"])
                qlo = qhi = None
                if q is not None and samples:
                    hw = 1.96 * math.sqrt(max(q * (1 - q), 0.0) / samples)
                    qlo, qhi = max(0.0, q - hw), min(1.0, q + hw)
                window = fnum(r["window_s"])
                tps = fnum(r["output_tokens_per_s"])
                out_tokens = round(tps * window) if tps is not None and window else None
                above = fnum(r["energy_above_idle_j"])
                mem = fnum(r["gpu_mem_peak_mb"])
                ttft95, e2e95 = fnum(r["ttft_p95_ms"]), fnum(r["e2e_p95_ms"])
                meets = None
                if r["status"] == "ok" and (slo_ttft is not None or slo_e2e is not None):
                    meets = (slo_ttft is None or (ttft95 is not None and ttft95 <= slo_ttft * 1000)) and (
                        slo_e2e is None or (e2e95 is not None and e2e95 <= slo_e2e * 1000)
                    )
                why = []
                if r["status"] != "ok":
                    why.append("status " + r["status"])
                if window is None or window < MIN_WINDOW_S:
                    why.append("window < %g s" % MIN_WINDOW_S)
                if r["energy_source"] != "gpu":
                    why.append("no GPU energy")
                rows.append({
                    "slice": sl,
                    "machine_gpus": mg,
                    "sweep": r["sweep"],
                    "label": r["label"],
                    "model": model,
                    "model_name": MODEL_NAMES.get(model, (model, model))[0],
                    "quantization": r["quantization"],
                    "weights": weights_name(r["quantization"], ek),
                    "engine": r["engine"],
                    "engine_kind": ek,
                    "tensor_parallel": tp,
                    "gpus_used": used,
                    "task": r["task"],
                    "quality_metric": r["quality_metric"],
                    "questions": samples,
                    "scenario": r["scenario"],
                    "load": load_name(r),
                    "max_tokens": int(r["max_tokens"]) if r["max_tokens"] else None,
                    "status": r["status"],
                    "requests": int(r["requests"]),
                    "ok": int(r["ok"]),
                    "failed": int(r["failed"]),
                    "window_s": window,
                    "quality": q,
                    "quality_ci_low_requests": fnum(r["quality_ci_low"]),
                    "quality_ci_high_requests": fnum(r["quality_ci_high"]),
                    "quality_ci_low_questions": qlo,
                    "quality_ci_high_questions": qhi,
                    "unparsed_rate": fnum(r["unparsed_rate"]),
                    "ttft_p50_ms": fnum(r["ttft_p50_ms"]),
                    "ttft_p95_ms": ttft95,
                    "ttft_p99_ms": fnum(r["ttft_p99_ms"]),
                    "tpot_p50_ms": fnum(r["tpot_p50_ms"]),
                    "tpot_p99_ms": fnum(r["tpot_p99_ms"]),
                    "e2e_p50_ms": fnum(r["e2e_p50_ms"]),
                    "e2e_p95_ms": e2e95,
                    "output_tokens_per_s": tps,
                    "requests_per_s": fnum(r["requests_per_s"]),
                    "output_tokens": out_tokens,
                    "energy_source": r["energy_source"],
                    "energy_j": fnum(r["energy_j"]),
                    "j_per_output_token": fnum(r["j_per_output_token"]),
                    "j_above_idle_per_output_token": (above / out_tokens) if above is not None and out_tokens else None,
                    "j_per_request": fnum(r["j_per_request"]),
                    "gpu_mem_peak_mb": mem,
                    "gpu_mem_peak_mb_per_gpu": (mem / used) if mem is not None and used else None,
                    "gpu_util_mean_pct": fnum(r["gpu_util_mean_pct"]),
                    "meets_study_slo": meets,
                    "comparable": not why,
                    "note": "; ".join(why + note),
                })
    return rows


COLUMNS = [
    "slice", "machine_gpus", "sweep", "label", "model", "quantization", "weights", "engine",
    "engine_kind", "tensor_parallel", "gpus_used", "task", "quality_metric", "questions",
    "scenario", "load", "max_tokens", "status", "requests", "ok", "failed", "window_s", "quality",
    "quality_ci_low_requests", "quality_ci_high_requests", "quality_ci_low_questions",
    "quality_ci_high_questions", "unparsed_rate", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms",
    "tpot_p50_ms", "tpot_p99_ms", "e2e_p50_ms", "e2e_p95_ms", "output_tokens_per_s",
    "requests_per_s", "output_tokens", "energy_source", "energy_j", "j_per_output_token",
    "j_above_idle_per_output_token", "j_per_request", "gpu_mem_peak_mb",
    "gpu_mem_peak_mb_per_gpu", "gpu_util_mean_pct", "meets_study_slo", "comparable", "note",
]


def config_label(r):
    return "%s · %s · %s · TP%d" % (
        r["model_name"], r["weights"], ENGINE_NAMES.get(r["engine_kind"], r["engine_kind"]), r["tensor_parallel"])


def config_sort_key(r):
    size = {"smollm2-135m": 0, "qwen2.5-coder-0.5b": 1, "qwen2.5-coder-1.5b": 2}.get(r["model"], 9)
    eng = {"llama.cpp": 0, "vllm": 1}.get(r["engine_kind"], 9)
    qu = {"default": 0, "fp8": 1}.get(r["quantization"], 0)
    return (size, eng, qu, r["tensor_parallel"])


def pareto(points):
    """Indices of the points no other point dominates (x lower-or-equal, quality higher-or-equal,
    one of them strictly)."""
    front = []
    for i, (xi, qi) in enumerate(points):
        dominated = False
        for j, (xj, qj) in enumerate(points):
            if j != i and xj <= xi and qj >= qi and (xj < xi or qj > qi):
                dominated = True
                break
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


MARKERS = {("llama.cpp", 1): "o", ("llama.cpp", 2): "D", ("vllm", 1): "s", ("vllm", 2): "^"}
COLORS = {
    ("smollm2-135m", "q4_1"): "#7f7f7f",
    ("qwen2.5-coder-0.5b", "q4_k_m"): "#17becf",
    ("qwen2.5-coder-1.5b", "q4_k_m"): "#1f77b4",
    ("qwen2.5-coder-1.5b", "default"): "#d62728",
    ("qwen2.5-coder-1.5b", "fp8"): "#ff7f0e",
}

PLOTS = [
    ("ttft", "ttft_p50_ms", "TTFT p50 (ms, log scale)", "TTFT p50"),
    ("tpot", "tpot_p50_ms", "TPOT p50 (ms, log scale)", "TPOT p50"),
    ("jtok", "j_per_output_token", "J per output token, GPU energy incl. idle draw (log scale)", "J per output token"),
]


def draw(task, load, rows, key, xcol, xlabel, xname, out_dir, png_dir):
    rows = sorted(rows, key=config_sort_key)
    numbered = list(enumerate(rows, start=1))
    shown = [(n, r) for n, r in numbered if r[xcol] is not None and r[xcol] > 0 and r["quality"] is not None]
    left_out = [(n, r) for n, r in numbered if (n, r) not in shown]
    pts = [(r[xcol], r["quality"]) for _, r in shown]
    front = set(pareto(pts))
    metric = METRIC_NAMES.get(rows[0]["quality_metric"], rows[0]["quality_metric"])
    questions = sorted({r["questions"] for r in rows if r["questions"]})

    fig, ax = plt.subplots(figsize=(10.5, 4.8))
    for k, (n, r) in enumerate(shown):
        x, q = r[xcol], r["quality"]
        lo, hi = r["quality_ci_low_questions"], r["quality_ci_high_questions"]
        color = COLORS.get((r["model"], r["quantization"]), "#2ca02c")
        marker = MARKERS.get((r["engine_kind"], r["tensor_parallel"]), "v")
        if lo is not None and hi is not None:
            ax.errorbar([x], [q * 100], yerr=[[(q - lo) * 100], [(hi - q) * 100]], fmt="none",
                        ecolor=color, elinewidth=0.8, capsize=3, alpha=0.6, zorder=2)
        lab = "%d  %s  %s" % (n, config_label(r), "(front)" if k in front else "")
        ax.plot([x], [q * 100], marker=marker, color=color, markersize=8, linestyle="none",
                markeredgecolor="black" if k in front else color, markeredgewidth=1.6 if k in front else 0.5,
                label=lab.rstrip(), zorder=4)
        # Alternate the number's side so that neighbouring points keep readable labels.
        off = [(6, 5), (-12, 5), (6, -12), (-12, -12)][(n - 1) % 4]
        ax.annotate(str(n), (x, q * 100), textcoords="offset points", xytext=off, fontsize=8, zorder=5)
    fr = [pts[i] for i in sorted(front, key=lambda i: pts[i][0])]
    if fr:
        xs = [p[0] for p in fr]
        ys = [p[1] * 100 for p in fr]
        ax.step(xs, ys, where="post", color="black", linewidth=1, linestyle="--", alpha=0.7, zorder=3,
                label="Pareto front (higher quality, lower cost)")
    ax.set_xscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: "%g" % v)
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("%s %s (%%)" % (TASK_NAMES.get(task, task), metric))
    ax.grid(True, which="both", linewidth=0.4, alpha=0.4)
    windows = [r["window_s"] for r in rows]
    ax.set_title(
        "%s: quality vs %s  —  load: %s (closed loop)" % (TASK_NAMES.get(task, task), xname, load)
        if load.startswith("concurrency") else
        "%s: quality vs %s  —  load: %s (open loop)" % (TASK_NAMES.get(task, task), xname, load),
        fontsize=11, loc="left")
    sub = "NVIDIA H200; one run each, windows %.1f–%.1f s; bars: 95 %% interval over the %s distinct questions" % (
        min(windows), max(windows), "/".join(str(x) for x in questions) or "?")
    if xcol == "j_per_output_token":
        sub += ("\nenergy: NVML counter over the window, summed over the GPUs the engine used "
                "(TP1 on the two-GPU machine: one GPU counted)")
    fig.text(0.01, 0.0, sub + ("" if not left_out else
             "\nnot shown (%s = 0: one content token a request, no inter-token time): %s" % (
                 xname, ", ".join("%d %s" % (n, config_label(r)) for n, r in left_out))),
             fontsize=7.5, va="bottom", ha="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
              title="configuration (model · weights · engine · TP)", title_fontsize=8)
    fig.subplots_adjust(left=0.07, right=0.58, top=0.9, bottom=0.17 if (left_out or "\n" in sub) else 0.14)
    name = "%s-%s-%s" % (task, load_slug(load), key)
    path = os.path.join(out_dir, name + ".svg")
    fig.savefig(path, format="svg", bbox_inches="tight", pad_inches=0.15, metadata={"Date": None})
    if png_dir:
        fig.savefig(os.path.join(png_dir, name + ".png"), format="png", dpi=110, bbox_inches="tight",
                    pad_inches=0.15)
    plt.close(fig)
    return path, [shown[i][1] for i in sorted(front, key=lambda i: pts[i][0])]


def recommend(rows, slo_declared):
    ok = [r for r in rows if r["meets_study_slo"] is not False]
    if not ok:
        return None, [], []
    best = max(ok, key=lambda r: r["quality"])
    hw = best["quality"] - best["quality_ci_low_questions"] if best["quality_ci_low_questions"] is not None else 0.0
    tied = [r for r in ok if r["quality"] >= best["quality"] - hw]
    tied.sort(key=lambda r: (r["j_per_output_token"] or math.inf, r["tpot_p50_ms"] or math.inf,
                             r["ttft_p50_ms"] or math.inf))
    return tied[0], tied, [r for r in rows if r not in ok]


def markdown_table(rows):
    hdr = ("| # | configuration | slice | window s | requests | quality % (95 % over questions) | TTFT p50 / p95 / p99 ms "
           "| TPOT p50 / p99 ms | E2E p95 ms | out tok/s | J / out token | J above idle / token | GPU mem MB per GPU | SLO |")
    out = [hdr, "|" + "|".join(["---"] * (hdr.count("|") - 1)) + "|"]
    for n, r in enumerate(sorted(rows, key=config_sort_key), start=1):
        out.append("| %d | %s | %s | %.1f | %d | %.1f (%.1f–%.1f) | %.1f / %.1f / %.1f | %s / %.1f | %.0f | %.0f | %.3f | %.3f | %.0f | %s |" % (
            n, config_label(r), r["slice"], r["window_s"], r["ok"], r["quality"] * 100,
            r["quality_ci_low_questions"] * 100, r["quality_ci_high_questions"] * 100,
            r["ttft_p50_ms"], r["ttft_p95_ms"], r["ttft_p99_ms"],
            ("%.1f" % r["tpot_p50_ms"]) if r["tpot_p50_ms"] else "0 ¹", r["tpot_p99_ms"], r["e2e_p95_ms"],
            r["output_tokens_per_s"], r["j_per_output_token"], r["j_above_idle_per_output_token"],
            r["gpu_mem_peak_mb_per_gpu"], {True: "yes", False: "no", None: "?"}[r["meets_study_slo"]]))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?", default="docs/results")
    ap.add_argument("out", nargs="?", default="docs/results/study")
    ap.add_argument("--sweeps", default="sweeps", help="folder of the slices' sweep files (for the question counts)")
    ap.add_argument("--slo", default="sweeps/gpu-study.kdl", help="sweep whose slo block the recommendation honours")
    ap.add_argument("--png", help="also write PNG copies of the figures to this folder")
    ap.add_argument("--markdown", action="store_true", help="print the per-task tables in Markdown")
    a = ap.parse_args()

    plt.rcParams.update({
        "svg.fonttype": "none",
        "svg.hashsalt": "bench360-study",
        "font.family": "sans-serif",
        "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica", "sans-serif"],
        "font.size": 9,
    })
    os.makedirs(a.out, exist_ok=True)
    if a.png:
        os.makedirs(a.png, exist_ok=True)
    slo = read_slo(a.slo)
    rows = normalise(a.results, a.sweeps, slo)
    with open(os.path.join(a.out, "study.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([fmt(r[c]) for c in COLUMNS])
    comp = [r for r in rows if r["comparable"]]
    print("study.csv: %d rows, %d comparable (%s)" % (
        len(rows), len(comp), ", ".join("%s %d" % (s, sum(1 for r in comp if r["slice"] == s)) for s in SLICES)))
    for s in SLICES:
        bad = [r for r in rows if r["slice"] == s and not r["comparable"]]
        if bad:
            print("  %s: %d rows left out of the plots (%s)" % (s, len(bad), sorted({r["note"] for r in bad})[0]))
    print("SLO (from %s): TTFT p95 <= %s s, E2E p95 <= %s s" % (a.slo, slo[0], slo[1]))

    groups = {}
    for r in comp:
        groups.setdefault((r["task"], r["load"]), []).append(r)
    for (task, load), grp in sorted(groups.items(), key=lambda kv: (kv[0][0], not kv[0][1].startswith("conc"), kv[0][1])):
        print("\n== %s, load %s: %d configurations" % (task, load, len(grp)))
        for key, xcol, xlabel, xname in PLOTS:
            path, front = draw(task, load, grp, key, xcol, xlabel, xname, a.out, a.png)
            print("  %s  (%.1f KB) front: %s" % (path, os.path.getsize(path) / 1024,
                                                 ", ".join(config_label(r) for r in front)))
        best, tied, failing = recommend(grp, slo != (None, None))
        if best:
            print("  recommendation: %s — quality %.1f %% (%.1f–%.1f over questions), %.3f J/token, TTFT p50/p95 %.1f/%.1f ms, "
                  "TPOT p50 %.1f ms, %.0f tok/s; tied on quality: %s; missing the SLO: %s" % (
                      config_label(best), best["quality"] * 100, best["quality_ci_low_questions"] * 100,
                      best["quality_ci_high_questions"] * 100, best["j_per_output_token"], best["ttft_p50_ms"],
                      best["ttft_p95_ms"], best["tpot_p50_ms"], best["output_tokens_per_s"],
                      ", ".join(config_label(r) for r in tied), ", ".join(config_label(r) for r in failing) or "none"))
            top = max(grp, key=lambda r: r["quality"])
            print("  highest quality point estimate: %s (%.2f %%)" % (config_label(top), top["quality"] * 100))
        if a.markdown:
            print()
            print(markdown_table(grp))


if __name__ == "__main__":
    main()
