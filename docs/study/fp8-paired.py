"""FP8 against bf16, item by item (issue #26): for vLLM and SGLang, each task's quality pass with
the engine quantizing the bf16 folder to FP8 as it loads it, against the same engine's pass on
the bf16 folder. Reads only the committed per-request outputs (docs/results/h200-seed-*/
outputs.parquet), pairs the two passes by sample_id, and prints a Markdown table: the items
paired, the two means, the paired difference with its 95 % bootstrap interval (4000 resamples
of the items, numpy's generator seeded 1), how many items changed score, and how many outputs
are word for word the same.

    python docs/study/fp8-paired.py [OUTPUTS.parquet …] > docs/results/seed/fp8-paired.md

With no files, every docs/results/h200-seed-*/outputs.parquet. A configuration whose quality
pass appears in more than one file (vLLM's bf16 pass ran in two holds) is read from the file
named last in sorted order unless the files are given; the table says which file each came
from.
"""
import glob
import sys

import duckdb
import numpy as np

files = sys.argv[1:] or sorted(glob.glob("docs/results/h200-seed-*/outputs.parquet"))
con = duckdb.connect()
rows = con.execute(
    f"""select label, filename, sample_id, score, output
        from read_parquet({files!r}, union_by_name=true, filename=true)
        where scenario = 'quality' and ok"""
).fetchall()
# label -> file -> sample_id -> (score, output)
passes = {}
for label, f, sid, score, output in rows:
    passes.setdefault(label, {}).setdefault(f, {})[sid] = (score, output)


def one(label):
    """The pass of `label`, from the last file that holds it (files in the given order)."""
    by_file = passes.get(label)
    if not by_file:
        return None, None
    f = [x for x in files if x in by_file][-1]
    return f, by_file[f]


rng = np.random.default_rng(1)
print("| engine | task | items | bf16 % | FP8 % | FP8 − bf16, pt [95 %] | items scored differently | outputs identical | bf16 from | FP8 from |")
print("|---|---|---|---|---|---|---|---|---|---|")
for engine in ["vllm", "sglang"]:
    for task in ["mmlu", "squad", "cnn", "spider"]:
        fb, b = one(f"qwen2.5-coder-1.5b:default@{engine} {task} quality")
        ff, q = one(f"qwen2.5-coder-1.5b:fp8@{engine} {task} quality")
        if b is None or q is None:
            print(f"| {engine} | {task} | – | | | not both passes recorded | | | {fb or '–'} | {ff or '–'} |")
            continue
        keys = sorted(set(b) & set(q))
        d = np.array([q[k][0] - b[k][0] for k in keys])
        boots = np.array([d[rng.integers(0, len(d), len(d))].mean() for _ in range(4000)])
        lo, hi = np.percentile(boots, [2.5, 97.5])
        changed = int(np.sum(np.abs(d) > 1e-12))
        same = sum(q[k][1] == b[k][1] for k in keys)
        mb = 100 * np.mean([b[k][0] for k in keys])
        mq = 100 * np.mean([q[k][0] for k in keys])
        print(
            f"| {engine} | {task} | {len(keys)} | {mb:.1f} | {mq:.1f} | {100 * d.mean():+.1f} "
            f"[{100 * lo:+.1f}, {100 * hi:+.1f}] | {changed} | {same} ({100 * same / len(keys):.0f} %) "
            f"| {fb.split('/')[-2]} | {ff.split('/')[-2]} |"
        )
