#!/usr/bin/env python3
"""Every scored request of a bench360 cache in one Parquet file (issue #26, item 7):

    $BENCH360_PYTHON docs/study/outputs-parquet.py CACHE OUT.parquet [--sweep NAME] [--scored-only]
        [--skip-task NAME…] [--earlier EARLIER_CACHE…]

One row per request of every finished run (of sweep NAME, if given): the run's label, task,
scenario, request_id, sample_id, ok, the output text (outputs.jsonl) and, from the run's newest
finished score, reference, extracted, score, correct and parsed (null where the run has no
score: synthetic prompts have no reference, and a run whose score node has not run yet has
none). With --scored-only, only runs with a scored quality; --skip-task leaves out the runs of
those tasks (e.g. `synth`, whose outputs answer no question). With --earlier, the records and
objects of earlier holds' caches are read beside CACHE, and the file holds what CACHE ran or
scored: a run of CACHE, or a run of an earlier cache that CACHE scored (a hold that carried an
earlier hold's cache and scored its runs). Enough to re-score every quality number without the
device: the outputs are the engine's, the references are the dataset's.
"""
import argparse
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache")
    ap.add_argument("out")
    ap.add_argument("--sweep")
    ap.add_argument("--scored-only", action="store_true")
    ap.add_argument("--skip-task", nargs="*", default=[])
    ap.add_argument("--earlier", nargs="*", default=[], metavar="EARLIER_CACHE")
    a = ap.parse_args()

    # Each record with the cache it was read from; CACHE's own copy wins over an earlier one.
    runs, scores, home = {}, {}, {}
    for cache in reversed([a.cache] + a.earlier):
        rdir = os.path.join(cache, "records")
        if not os.path.isdir(rdir):
            sys.exit(f"{cache}: no records/ directory there (not a bench360 cache)")
        for name in sorted(os.listdir(rdir)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(rdir, name)) as f:
                r = json.load(f)
            if r.get("status") != "finished" or (a.sweep and r.get("sweep") != a.sweep):
                continue
            home[r["key"]] = cache
            if r.get("kind") == "run":
                runs[r["key"]] = r
            elif r.get("kind") == "score":
                run = (r.get("inputs") or {}).get("run")
                if run and (run not in scores or r.get("started_at", "") > scores[run].get("started_at", "")):
                    scores[run] = r

    cols = {k: [] for k in ("label", "task", "scenario", "run_key", "request_id", "sample_id", "ok",
                            "output", "reference", "extracted", "score", "correct", "parsed")}
    n_runs = 0
    for key, run in sorted(runs.items(), key=lambda kv: kv[1]["label"]):
        path = os.path.join(home[key], "objects", key, "outputs.jsonl")
        sc = scores.get(key)
        if not os.path.exists(path) or (home[key] != a.cache and (sc is None or home[sc["key"]] != a.cache)):
            continue
        by_req = {}
        scores_path = sc and os.path.join(home[sc["key"]], "objects", sc["key"], "scores.parquet")
        if scores_path and os.path.exists(scores_path):
            for s in pq.read_table(scores_path).to_pylist():
                by_req[s["request_id"]] = s
        if a.scored_only and not any(s.get("score") is not None for s in by_req.values()):
            continue
        n_runs += 1
        label = run["label"].removeprefix("run ")
        parts = label.split(" ")
        if len(parts) > 1 and parts[1] in a.skip_task:
            n_runs -= 1
            continue
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                o = json.loads(line)
                s = by_req.get(o["request_id"], {})
                cols["label"].append(label)
                cols["task"].append(parts[1] if len(parts) > 1 else None)
                cols["scenario"].append(" ".join(parts[2:]) if len(parts) > 2 else None)
                cols["run_key"].append(key)
                cols["request_id"].append(o["request_id"])
                cols["sample_id"].append(o.get("sample_id"))
                cols["ok"].append(bool(o.get("ok")))
                cols["output"].append(o.get("output"))
                for c in ("reference", "extracted", "score", "correct", "parsed"):
                    cols[c].append(s.get(c))
    table = pa.table({
        "label": pa.array(cols["label"], pa.string()),
        "task": pa.array(cols["task"], pa.string()),
        "scenario": pa.array(cols["scenario"], pa.string()),
        "run_key": pa.array(cols["run_key"], pa.string()),
        "request_id": pa.array(cols["request_id"], pa.uint32()),
        "sample_id": pa.array(cols["sample_id"], pa.string()),
        "ok": pa.array(cols["ok"], pa.bool_()),
        "output": pa.array(cols["output"], pa.string()),
        "reference": pa.array(cols["reference"], pa.string()),
        "extracted": pa.array(cols["extracted"], pa.string()),
        "score": pa.array(cols["score"], pa.float64()),
        "correct": pa.array(cols["correct"], pa.bool_()),
        "parsed": pa.array(cols["parsed"], pa.bool_()),
    })
    pq.write_table(table, a.out, compression="zstd", compression_level=19)
    print(f"{a.out}: {table.num_rows} requests of {n_runs} runs, {os.path.getsize(a.out)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
