#!/usr/bin/env python3
"""bench360's `scoring "logprobs"` MMLU run beside lm-evaluation-harness on the same server.

    $BENCH360_LM_EVAL_PYTHON scripts/lm-eval-mmlu.py --cache CACHE --label "mmlu single" \\
        --url http://127.0.0.1:PORT/v1/completions [--dataset datasets/mmlu] [--shots K] \\
        [--work DIR] [--markdown FILE] [--json FILE]
        [--loglikelihood --model-name NAME --tokenizer HF_FOLDER [--num-concurrent N]]

Takes the newest run (and its score) in bench360's cache whose label contains LABEL, writes the
items that run asked as a local lm-eval task (JSON files, one task per subject so that K-shot
examples come from the subject's dev split in file order, as bench360 and the harness's MMLU
both take them; no hub), runs lm-eval 0.4.13 (`local-completions`, the Python this script runs
under: scripts/setup-lm-eval.sh) against URL, and compares the two choices item by item.

The harness's log-likelihood MMLU needs the prompt's own log-probabilities (`echo`) and a
tokenizer, which llama-server's /v1/completions does not give; so the harness asks for one
generated token with every option label's logit raised by 100 (" A" and "A", … " D" and "D"):
greedy decoding then picks the label with the highest log-probability at the answer position,
which is what bench360 reads from the top 20. The prompt is the harness's MMLU template
(description, `{{question.strip()}}`, `A. {{choices[0]}}` … `Answer:`; K shots with
` X` answers and blank lines between), the same text bench360 sends.

With --loglikelihood (an engine whose /v1/completions gives `echo` with the prompt's
log-probabilities, e.g. vLLM), the harness's standard MMLU instead: `output_type:
multiple_choice` over the choices " A" … " D" after the same prompt, each scored by its
log-likelihood (the request is the prompt plus the choice as tokens of the HF tokenizer
TOKENIZER, `echo`, `logprobs 1`, `max_tokens 1`), and the highest one chosen (`acc`). The
model name NAME is sent in each request (vLLM refuses another); the differences then carry the
harness's own log-likelihoods of the two labels beside bench360's.

Prints one JSON object (and writes FILE as a Markdown table): items compared, agreements, each
difference with its explanation, both accuracies. Exit 0 when the comparison ran; the verdict
is the caller's (tests/reference_harness.rs asks for agreement on every item both answered).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq

LABELS = "ABCD"


def records(cache, label):
    """The newest run record whose label contains `label`, and the newest score of that run."""
    rows = []
    for name in os.listdir(os.path.join(cache, "records")):
        if name.startswith("."):
            continue
        with open(os.path.join(cache, "records", name)) as f:
            r = json.load(f)
        if r.get("status") == "finished":
            rows.append(r)
    runs = [r for r in rows if r.get("kind") == "run" and label in r.get("label", "")]
    if not runs:
        sys.exit(f"lm-eval-mmlu: no run in {cache} whose label contains {label!r}")
    run = max(runs, key=lambda r: r.get("started_at", ""))
    scores = [
        r
        for r in rows
        if r.get("kind") == "score" and run["key"] in json.dumps(r.get("inputs", ""))
    ]
    if not scores:
        scores = [r for r in rows if r.get("kind") == "score" and label in r.get("label", "")]
    if not scores:
        sys.exit(f"lm-eval-mmlu: run {run['label']} has no score in {cache}")
    score = max(scores, key=lambda r: r.get("started_at", ""))
    obj = lambda r: os.path.join(cache, "objects", r["key"])  # noqa: E731
    return run, obj(run), obj(score)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def write_tasks(work, dataset, ids, shots, loglikelihood=False):
    """One lm-eval task per subject over exactly `ids`, and a group over them. Returns the
    group's name. `loglikelihood`: the harness's standard MMLU (`multiple_choice`, `acc`),
    else the one-token generative variant."""
    test = {it["id"]: it for it in read_jsonl(os.path.join(dataset, "test.jsonl"))}
    dev = read_jsonl(os.path.join(dataset, "dev.jsonl")) if shots else []
    by_subject = {}
    for i in ids:
        it = dict(test[i])
        it["answer"] = LABELS.index(it["answer"])  # the harness's MMLU keeps the index
        by_subject.setdefault(it["subject"], []).append(it)
    names = []
    for subject, items in sorted(by_subject.items()):
        name = f"b360_mmlu_{subject}"
        names.append(name)
        data = {"test": os.path.join(work, f"{name}.test.jsonl")}
        with open(data["test"], "w") as f:
            f.writelines(json.dumps(it) + "\n" for it in items)
        if shots:
            data["dev"] = os.path.join(work, f"{name}.dev.jsonl")
            with open(data["dev"], "w") as f:
                for it in dev:
                    if it["subject"] == subject:
                        f.write(json.dumps(dict(it, answer=LABELS.index(it["answer"]))) + "\n")
        description = (
            "The following are multiple choice questions (with answers) about "
            + subject.replace("_", " ")
            + ".\n\n"
        )
        doc_to_text = (
            "{{question.strip()}}\nA. {{choices[0]}}\nB. {{choices[1]}}\n"
            "C. {{choices[2]}}\nD. {{choices[3]}}\nAnswer:"
        )
        if loglikelihood:
            # lm-eval's own tasks/mmlu/default/_default_template_yaml, on local files.
            cfg = {
                "task": name,
                "dataset_path": "json",
                "dataset_kwargs": {"data_files": data},
                "test_split": "test",
                "output_type": "multiple_choice",
                "description": description,
                "doc_to_text": doc_to_text,
                "doc_to_choice": list(LABELS),
                "doc_to_target": "answer",
                "target_delimiter": " ",
                "fewshot_delimiter": "\n\n",
                "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
                "metadata": {"version": 1.0},
            }
        else:
            bias = [[f" {l}", 100] for l in LABELS] + [[l, 100] for l in LABELS]
            cfg = {
                "task": name,
                "dataset_path": "json",
                "dataset_kwargs": {"data_files": data},
                "test_split": "test",
                "output_type": "generate_until",
                "description": description,
                "doc_to_text": doc_to_text,
                "doc_to_target": "{{['A', 'B', 'C', 'D'][answer]}}",
                "target_delimiter": " ",
                "fewshot_delimiter": "\n\n",
                "generation_kwargs": {
                    "until": ["\n"],
                    "max_gen_toks": 1,
                    "temperature": 0.0,
                    "do_sample": False,
                    "logit_bias": bias,
                },
                "filter_list": [
                    {
                        "name": "label",
                        "filter": [
                            {"function": "regex", "regex_pattern": "([ABCD])"},
                            {"function": "take_first"},
                        ],
                    }
                ],
                "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}],
                "metadata": {"version": 1.0},
            }
        if shots:
            cfg["fewshot_split"] = "dev"
            cfg["fewshot_config"] = {"sampler": "first_n"}
        # JSON is YAML: no YAML writer needed.
        with open(os.path.join(work, f"{name}.yaml"), "w") as f:
            json.dump(cfg, f, indent=1)
    with open(os.path.join(work, "b360_mmlu.yaml"), "w") as f:
        json.dump({"group": "b360_mmlu", "task": names}, f, indent=1)
    return "b360_mmlu"


def run_harness(work, url, shots, a):
    """Runs the harness; returns {sample_id: label or None}, {sample_id: {label: ll}} (the
    log-likelihood variant's per-label log-likelihoods, else empty), the command and its
    wall time in seconds."""
    out = os.path.join(work, "out")
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if a.loglikelihood:
        # Requests as the HF tokenizer's token ids (the harness's default), so that the
        # continuation's tokens and the context length are the harness's own.
        model_args = (
            f"model={a.model_name},base_url={url},tokenizer={a.tokenizer},"
            "tokenizer_backend=huggingface,tokenized_requests=True,"
            f"num_concurrent={a.num_concurrent},max_retries=3,timeout=300,max_length={a.max_length}"
        )
    else:
        model_args = (
            f"model={a.model_name},base_url={url},tokenizer_backend=None,tokenized_requests=False,"
            f"num_concurrent={a.num_concurrent},max_retries=1,timeout=300"
        )
    cmd = [
        sys.executable, "-m", "lm_eval", "run",
        "--model", "local-completions",
        "--model_args", model_args,
        "--tasks", "b360_mmlu",
        "--include_path", work,
        "--num_fewshot", str(shots),
        "--log_samples",
        "--output_path", out,
    ]  # fmt: skip
    t0 = time.monotonic()
    if a.reuse:
        p = subprocess.CompletedProcess(cmd, 0, "", "")
    else:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        with open(os.path.join(work, "lm-eval.log"), "w") as f:
            f.write(p.stdout + p.stderr)
    took = time.monotonic() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-8000:])
        sys.exit(f"lm-eval-mmlu: lm-eval exited {p.returncode}: {' '.join(cmd)}")
    chosen, lls = {}, {}
    for path in glob.glob(os.path.join(out, "**", "samples_b360_mmlu_*.jsonl"), recursive=True):
        for s in read_jsonl(path):
            sid = s["doc"]["id"]
            if a.loglikelihood:
                # One [log-likelihood, is_greedy] per choice, in doc_to_choice's order; `acc`
                # takes the first maximum (numpy argmax), so ties go to the earlier label.
                got = [r[0] if isinstance(r, list) and len(r) == 2 and not isinstance(r[0], list) else r[0][0]
                       for r in s["filtered_resps"]]
                got = [float(x) for x in got]
                lls[sid] = dict(zip(LABELS, got))
                chosen[sid] = LABELS[got.index(max(got))]
            else:
                got = s["filtered_resps"][0]
                got = got[0] if isinstance(got, list) else got
                chosen[sid] = got if len(got) == 1 and got in LABELS else None
    return chosen, lls, " ".join(cmd), took


def label_logprobs(output):
    """Each label's log-probability at the answer position, as bench360 recorded it."""
    best = {}
    for tok, lp in json.loads(output.get("top_logprobs") or "[]"):
        t = tok.strip()
        if len(t) == 1 and t in LABELS:
            best[t] = max(best.get(t, float("-inf")), lp)
    return best


# Two labels closer than this (in nats) at bench360's answer position are a near tie: the same
# prompt evaluated again (another batch split, a prompt cache hit) may order them either way.
NEAR_TIE = 0.05


def shots_with_whitespace(dataset, shots):
    """The subjects whose first `shots` dev examples have an option with surrounding
    whitespace: the harness keeps it in the k-shot prompt, bench360 trims it, so every
    k-shot prompt of such a subject differs between the two in those characters."""
    if not shots:
        return set()
    seen, out = {}, set()
    for it in read_jsonl(os.path.join(dataset, "dev.jsonl")):
        n = seen.get(it["subject"], 0)
        if n < shots and any(c != c.strip() for c in it["choices"]):
            out.add(it["subject"])
        seen[it["subject"]] = n + 1
    return out


def explain(item, ours, theirs, output, theirs_ll=None, shot_ws=False):
    """Why the two readings differ, as far as the records say. `theirs_ll`: the harness's own
    log-likelihood of each label (the log-likelihood variant); `shot_ws`: one of the item's
    shots has an option with surrounding whitespace."""
    if not output["ok"]:
        return f"bench360's request failed ({output.get('error') or 'no error recorded'})"
    if ours is None:
        return "no option label among the top 20 log-probabilities bench360 reads"
    if any(c != c.strip() for c in item["choices"]):
        return "an option with leading or trailing whitespace (the harness keeps it, bench360 trims it)"
    if shot_ws:
        return (
            "a shot's option with trailing whitespace (the harness keeps it in the k-shot prompt, "
            "bench360 trims it): the two prompts differ"
        )
    if theirs is None:
        return "the harness gave no label"
    lp = label_logprobs(output)
    if theirs in lp and ours in lp and abs(lp[ours] - lp[theirs]) < NEAR_TIE:
        why = (
            f"a near tie: bench360 saw {ours} at {lp[ours]:.4f} and {theirs} at {lp[theirs]:.4f} "
            f"(closer than {NEAR_TIE} nats), an order another evaluation of the same prompt can flip"
        )
        if theirs_ll:
            why += f"; the harness saw {ours} at {theirs_ll[ours]:.4f} and {theirs} at {theirs_ll[theirs]:.4f}"
        return why
    if theirs_ll and abs(theirs_ll[ours] - theirs_ll[theirs]) < NEAR_TIE:
        return (
            f"a near tie on the harness's side: it saw {theirs} at {theirs_ll[theirs]:.4f} and "
            f"{ours} at {theirs_ll[ours]:.4f} (closer than {NEAR_TIE} nats); bench360 saw "
            f"{ours} at {lp.get(ours, float('nan')):.4f} and {theirs} at {lp.get(theirs, float('nan')):.4f}"
        )
    return "unexplained"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--url", required=True, help="the engine's /v1/completions URL")
    ap.add_argument("--dataset", default=os.path.join(os.path.dirname(__file__), "..", "datasets", "mmlu"))
    ap.add_argument("--shots", type=int, default=0)
    ap.add_argument("--work", help="keep the task files and lm-eval's output here")
    ap.add_argument("--markdown", help="write the comparison as a Markdown table here")
    ap.add_argument("--json", help="write the printed JSON object here too")
    ap.add_argument(
        "--loglikelihood",
        action="store_true",
        help="the harness's standard log-likelihood MMLU (needs `echo` with prompt log-probabilities: vLLM)",
    )
    ap.add_argument("--model-name", default="local", help="the model name sent in each request")
    ap.add_argument("--tokenizer", help="--loglikelihood: the HF tokenizer (a model folder) the harness tokenizes with")
    ap.add_argument("--num-concurrent", type=int, default=1, help="requests the harness keeps in flight")
    ap.add_argument("--max-length", type=int, default=4096, help="--loglikelihood: the harness's context limit")
    ap.add_argument(
        "--near-tie",
        type=float,
        default=0.05,
        help="labels closer than this (nats) on either side are a near tie (default 0.05; the engine's "
        "bf16 logits move in steps of 0.0625-0.125 nats at the magnitudes seen on vLLM)",
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="do not run the harness: read its samples from --work (an earlier run's output)",
    )
    a = ap.parse_args()
    if a.loglikelihood and not a.tokenizer:
        ap.error("--loglikelihood needs --tokenizer (the model folder's tokenizer)")

    run, run_dir, score_dir = records(a.cache, a.label)
    outputs = read_jsonl(os.path.join(run_dir, "outputs.jsonl"))
    scores = {s["request_id"]: s for s in pq.read_table(os.path.join(score_dir, "scores.parquet")).to_pylist()}
    test = {it["id"]: it for it in read_jsonl(os.path.join(a.dataset, "test.jsonl"))}
    ids = sorted({o["sample_id"] for o in outputs})
    work = a.work or tempfile.mkdtemp(prefix="lm-eval-mmlu-")
    os.makedirs(work, exist_ok=True)
    global NEAR_TIE
    NEAR_TIE = a.near_tie
    if not a.reuse:
        write_tasks(work, a.dataset, ids, a.shots, a.loglikelihood)
    if os.environ.get("LM_EVAL_MMLU_TASKS_ONLY"):  # for trying the task files without a server
        print(json.dumps({"work": work, "items": len(ids)}))
        return
    harness, harness_ll, command, took = run_harness(work, a.url, a.shots, a)

    ws_subjects = shots_with_whitespace(a.dataset, a.shots)
    agree, differ = 0, []
    right = {"bench360": 0, "harness": 0}
    for o in outputs:
        item = test[o["sample_id"]]
        s = scores.get(o["request_id"])
        ours = s["extracted"] if s and o["ok"] else None
        ours = ours if ours and len(ours) == 1 and ours in LABELS else None
        theirs = harness.get(o["sample_id"])
        right["bench360"] += ours == item["answer"]
        right["harness"] += theirs == item["answer"]
        if ours == theirs and ours is not None:
            agree += 1
        else:
            differ.append(
                {
                    "sample_id": o["sample_id"],
                    "bench360": ours,
                    "harness": theirs,
                    "why": explain(
                        item, ours, theirs, o, harness_ll.get(o["sample_id"]), item["subject"] in ws_subjects
                    ),
                    "bench360_label_logprobs": label_logprobs(o) if o["ok"] else None,
                    "harness_label_loglikelihoods": harness_ll.get(o["sample_id"]),
                }
            )
    n = len(outputs)
    result = {
        "run": run["label"],
        "variant": "loglikelihood" if a.loglikelihood else "generative one token",
        "shots": a.shots,
        "items": n,
        "agree": agree,
        "agree_share": agree / n if n else None,
        "accuracy": {k: v / n if n else None for k, v in right.items()},
        "differ": differ,
        "unexplained": sum(d["why"] == "unexplained" for d in differ),
        # Items whose prompt is not the same text on both sides (whitespace kept by the harness
        # in the item's own options or, k-shot, in a shot's), and how many of them agree anyway.
        "prompts_differ": sum(
            1
            for o in outputs
            if any(c != c.strip() for c in test[o["sample_id"]]["choices"])
            or test[o["sample_id"]]["subject"] in ws_subjects
        ),
        "harness_command": command,
        "harness_seconds": round(took, 1),
        "work": work,
    }
    if harness_ll:
        # How close the two readings are where they agree: the largest gap between bench360's
        # top-20 log-probability and the harness's log-likelihood of the same label.
        gaps = []
        for o in outputs:
            h = harness_ll.get(o["sample_id"])
            if h and o["ok"]:
                lp = label_logprobs(o)
                gaps += [abs(lp[l] - h[l]) for l in LABELS if l in lp]
        gaps.sort()
        result["label_logprob_gap"] = {
            "labels_compared": len(gaps),
            "median": gaps[len(gaps) // 2] if gaps else None,
            "max": gaps[-1] if gaps else None,
        }
    if harness_ll:
        # Agreement by how far apart bench360 saw its two best labels: at bf16 a margin of one
        # step of the logit (0.0625-0.125 nats here) or none (an exact tie) is noise.
        buckets = [("tied (0)", 0.0, 1e-9), ("<= 0.13", 1e-9, 0.13), ("0.13-0.5", 0.13, 0.5), ("> 0.5", 0.5, 1e9)]
        table = {name: {"items": 0, "agree": 0} for name, _, _ in buckets}
        diff_ids = {d["sample_id"] for d in differ}
        for o in outputs:
            lp = sorted(label_logprobs(o).values(), reverse=True) if o["ok"] else []
            m = lp[0] - lp[1] if len(lp) > 1 else 1e9
            for name, lo, hi in buckets:
                if (m < hi if lo == 0.0 else lo <= m < hi):
                    table[name]["items"] += 1
                    table[name]["agree"] += o["sample_id"] not in diff_ids
                    break
        result["agreement_by_bench360_margin"] = table
    print(json.dumps(result, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(f"lm-eval variant: {result['variant']}, {a.shots}-shot\n\n")
            f.write(f"| run | items | same label | bench360 accuracy | lm-eval accuracy |\n|---|---|---|---|---|\n")
            f.write(
                f"| {run['label']} | {n} | {agree} ({100 * agree / n:.1f} %) | "
                f"{100 * right['bench360'] / n:.1f} % | {100 * right['harness'] / n:.1f} % |\n\n"
            )
            for d in differ:
                f.write(f"- `{d['sample_id']}`: bench360 {d['bench360']}, lm-eval {d['harness']}: {d['why']}\n")
            if result.get("agreement_by_bench360_margin"):
                f.write("\n| bench360's margin between its two best labels | items | same label |\n|---|---|---|\n")
                for name, v in result["agreement_by_bench360_margin"].items():
                    f.write(f"| {name} nats | {v['items']} | {v['agree']} |\n")


if __name__ == "__main__":
    main()
