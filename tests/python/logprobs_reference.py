"""Re-reads bench360's `scoring "logprobs"` MMLU run from outside.

For every scored request of the run it rebuilds the prompt from the dataset in
lm-evaluation-harness's MMLU format (written here, not taken from bench360), asks the same
llama-server for the next token's top log-probabilities without streaming, picks the most
likely option label (" A" … " D", or the bare letter), and compares with the letter bench360
recorded in scores.parquet. Prints one JSON object: items, agreements, differences.

usage: logprobs_reference.py PORT DATASET_DIR OUTPUTS_JSONL SCORES_PARQUET
"""
import json
import sys
import urllib.request

import pyarrow.parquet as pq

port, dataset, outputs_path, scores_path = sys.argv[1:5]
items = {}
with open(f"{dataset}/test.jsonl") as f:
    for line in f:
        if line.strip():
            it = json.loads(line)
            items[it["id"]] = it


def prompt(it):
    subject = it["subject"].replace("_", " ")
    text = f"The following are multiple choice questions (with answers) about {subject}.\n\n"
    text += it["question"].strip() + "\n"
    for letter, choice in zip("ABCD", it["choices"]):
        text += f"{letter}. {choice.strip()}\n"
    return text + "Answer:"


def choose(p):
    body = json.dumps({"prompt": p, "max_tokens": 1, "temperature": 0, "logprobs": 20}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        out = json.load(r)
    top = out["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    best = {}
    for t in top:
        tok = t["token"].strip()
        if tok in ("A", "B", "C", "D"):
            best[tok] = max(best.get(tok, float("-inf")), t["logprob"])
    if not best:
        return None
    # Ties go to the earlier label (the harness's argmax over A..D).
    return max(sorted(best), key=best.get)


scores = pq.read_table(scores_path).to_pylist()
by_request = {s["request_id"]: s for s in scores}
agree, differ = 0, []
with open(outputs_path) as f:
    for line in f:
        o = json.loads(line)
        if not o["ok"]:
            continue
        theirs = by_request[o["request_id"]]["extracted"]
        ours = choose(prompt(items[o["sample_id"]]))
        if ours == theirs:
            agree += 1
        else:
            differ.append({"sample_id": o["sample_id"], "bench360": theirs, "reference": ours})
print(json.dumps({"items": agree + len(differ), "agree": agree, "differ": differ}))
