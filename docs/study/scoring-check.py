"""Outside check of the logprobs slice (docs/study/README.md, "The logprobs slice"): the MMLU
tasks of one cache read two ways, from the traces alone.

Per task: items, accuracy, unparsed share and the share of requests cut at max-tokens (from
requests.parquet's finish_reason). For the logprobs task, the choice is re-derived here from
requests.parquet's top_logprobs (the largest log-probability among tokens that are an option
label once trimmed) and compared with scores.parquet's `extracted`. Then every pair of tasks
item by item (logprobs tasks by their re-derived choices): the accuracy difference with a
numpy bootstrap interval (own RNG), the discordant items each way and McNemar's exact p.

usage: scoring-check.py CACHE_DIR
"""
import glob
import json
import math
import sys

import duckdb
import numpy as np

cache = sys.argv[1]
con = duckdb.connect()
scores = glob.glob(f"{cache}/objects/*/scores.parquet")
requests = glob.glob(f"{cache}/objects/*/requests.parquet")
rows = con.execute(f"""select task, sample_id, score, parsed, extracted
                       from read_parquet({scores!r}, union_by_name=true)""").fetchall()
tasks = {}
for task, sid, score, parsed, extracted in rows:
    tasks.setdefault(task, {})[sid] = (score, parsed, extracted)
req = con.execute(f"""select task, sample_id, finish_reason, ok, top_logprobs
                      from read_parquet({requests!r}, union_by_name=true)""").fetchall()
cut, n_ok, top = {}, {}, {}
for task, sid, finish, ok, tl in req:
    if not ok:
        continue
    n_ok[task] = n_ok.get(task, 0) + 1
    cut[task] = cut.get(task, 0) + (finish == "length")
    if tl is not None:
        top.setdefault(task, {})[sid] = json.loads(tl)


def choose(pairs):
    best = {}
    for tok, lp in pairs:
        t = tok.strip()
        if t in ("A", "B", "C", "D"):
            best[t] = max(best.get(t, -math.inf), lp)
    if not best:
        return None, False
    top = max(best.values())
    tied = sorted(k for k, v in best.items() if v == top)
    # Ties go to the earlier label (lm-evaluation-harness's argmax over A..D).
    return tied[0], len(tied) > 1


out = {"tasks": {}, "pairs": []}
for task, items in sorted(tasks.items()):
    s = np.array([v[0] for v in items.values()])
    unparsed = sum(1 for v in items.values() if v[1] is False)
    t = {"items": len(items), "accuracy": float(s.mean()), "unparsed": unparsed / len(items),
         "cut_share": cut.get(task, 0) / max(n_ok.get(task, 1), 1)}
    if task in top:
        chosen = {sid: choose(pairs) for sid, pairs in top[task].items()}
        same = sum(1 for sid, (c, _) in chosen.items() if c == items[sid][2])
        t["logprob_choices_rederived"] = f"{same} of {len(chosen)} as recorded"
        t["label_ties"] = sum(1 for c, tie in chosen.values() if tie)
        # Accuracy with the tie rule, from the traces alone (whatever the recorded metric's).
        refs = dict(con.execute(f"""select sample_id, reference from read_parquet({scores!r},
                    union_by_name=true) where task = '{task}'""").fetchall())
        t["accuracy_rederived"] = sum(1 for sid, (c, _) in chosen.items() if c == refs[sid]) / len(chosen)
        # The pairs below compare the re-derived choices.
        for sid, (c, _) in chosen.items():
            items[sid] = (float(c == refs[sid]), c is not None, c)
    out["tasks"][task] = t

rng = np.random.default_rng(25)
names = sorted(tasks)
for i, a in enumerate(names):
    for b in names[i + 1:]:
        keys = sorted(set(tasks[a]) & set(tasks[b]))
        x = np.array([tasks[a][k][0] for k in keys])
        y = np.array([tasks[b][k][0] for k in keys])
        d = y - x
        boots = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(4000)]
        b_only = int(((x == 0) & (y == 1)).sum())
        a_only = int(((x == 1) & (y == 0)).sum())
        n = a_only + b_only
        k = min(a_only, b_only)
        p = min(1.0, 2 * sum(math.comb(n, j) for j in range(k + 1)) / 2 ** n) if n else 1.0
        out["pairs"].append({"a": a, "b": b, "items": len(keys),
                             "b_minus_a_pt": round(100 * d.mean(), 2),
                             "ci95_pt": [round(100 * np.percentile(boots, 2.5), 2),
                                         round(100 * np.percentile(boots, 97.5), 2)],
                             "only_a_right": a_only, "only_b_right": b_only, "mcnemar_p": p})
print(json.dumps(out, indent=1))
