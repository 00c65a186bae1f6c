#!/usr/bin/env python3
"""Check a Hugging Face folder made by convert-gguf-to-hf.py against llama.cpp on the GGUF.

    python3 check-conversion.py MODEL.gguf HF_DIR http://127.0.0.1:PORT [--tokens 16]
        [--dtype float32|bfloat16] [--device auto|cpu|cuda] [--tie-margin 0] [--json OUT]

llama-server must already run MODEL.gguf at that URL (e.g. `llama-server -m MODEL.gguf
--host 127.0.0.1 --port 8090 -t 1 -c 2048`). For a few chat prompts (the folder's chat
template) and a few plain strings, the script checks
  1. tokenization: the Hugging Face tokenizer's ids equal llama-server's /tokenize ids
     (no BOS added, special tokens parsed), for every prompt and string;
  2. greedy decoding: the first N tokens that transformers picks (argmax of the logits, no
     stop on eos, recomputed over the whole sequence each step) equal llama-server's
     /completion on the same prompt ids (top_k 1, temperature 0, ignore_eos, no penalties);
  3. metadata: the GGUF's chat template and eos id equal the folder's, and llama-server
     serves a file of the GGUF's name (when /props says).
It exits 1 if any check fails, 2 on a usage or connection problem, 0 otherwise.

The two sides do not compute alike (llama.cpp: quantized weights, Q8 activations in its dot
products; transformers: the weights dequantized and rounded to bf16, computed in --dtype), so
a divergence can be a near-tie rather than a wrong conversion: each divergence is printed with
transformers' logit gap between its own choice and llama.cpp's. --tie-margin G accepts a
divergence whose gap is below G (the tokens after it are then not comparable); the default 0
accepts none.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

CHATS = [
    "What is the capital of France? Answer in one sentence.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Write one SQL query: the names of all employees hired after 2020, from the table staff(name, hired).",
]
STRINGS = [
    "Hello world! Ünïcödé café — 東京タワー 123456789 3.14159 naïve façade",
    "def f(x):\n\treturn x**2  # square\n\n\n    if a != b:\r\n        pass",
    "  leading spaces, trailing   \n\n\nI'm sure they'LL say we'd can't 🙂👍🏽",
    "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>SELECT name FROM staff WHERE hired > 2020;",
]


def log(msg):
    print(f"[check] {msg}", flush=True)


def post(url, path, body, timeout=600):
    req = urllib.request.Request(url.rstrip("/") + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def get(url, path, timeout=30):
    with urllib.request.urlopen(url.rstrip("/") + path, timeout=timeout) as r:
        return json.load(r)


def server_tokenize(url, text):
    r = post(url, "/tokenize", {"content": text, "add_special": False, "parse_special": True})
    return [t["id"] if isinstance(t, dict) else int(t) for t in r["tokens"]]


def server_greedy(url, ids, n):
    body = {"prompt": ids, "n_predict": n, "temperature": 0, "top_k": 1, "top_p": 1.0, "min_p": 0.0,
            "repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "dry_multiplier": 0.0,
            "ignore_eos": True, "cache_prompt": False, "n_probs": 2, "return_tokens": True, "seed": 0}
    r = post(url, "/completion", body)
    toks = r.get("tokens")
    probs = r.get("completion_probabilities") or []
    if not toks:
        toks = [p["id"] for p in probs if "id" in p]
    if not toks:
        raise RuntimeError(f"llama-server returned no token ids: keys {sorted(r)}")
    return [int(t) for t in toks], probs


def gguf_facts(path):
    try:
        from gguf import GGUFReader
    except ImportError:
        log("gguf package not importable: skipping the GGUF metadata comparison")
        return {}
    r = GGUFReader(path)

    def meta(key):
        f = r.fields.get(key)
        return None if f is None else f.contents()

    return {"template": meta("tokenizer.chat_template"), "eos": meta("tokenizer.ggml.eos_token_id"),
            "arch": meta("general.architecture"), "n_vocab": len(r.fields["tokenizer.ggml.tokens"].data)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gguf")
    ap.add_argument("hf")
    ap.add_argument("url", help="llama-server base URL, serving the GGUF")
    ap.add_argument("--tokens", type=int, default=16, help="greedy tokens to compare (16)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                    help="transformers compute dtype (float32: the bf16 weights upcast)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--tie-margin", type=float, default=0.0,
                    help="accept a divergence where transformers' logit gap is below this (0: none)")
    ap.add_argument("--json", help="write the per-prompt figures here")
    a = ap.parse_args()
    t0 = time.time()
    failures = []

    try:
        health = get(a.url, "/health")
        props = get(a.url, "/props")
    except (urllib.error.URLError, OSError) as e:
        sys.exit(f"[check] error: llama-server at {a.url} does not answer: {e}")
    served = props.get("model_path") or ""
    log(f"llama-server: {health}, model {served or '?'}, build {props.get('build_info', '?')}")
    if served and os.path.basename(served) != os.path.basename(a.gguf):
        failures.append(f"llama-server serves {served}, not {a.gguf}")

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.hf)
    facts = gguf_facts(a.gguf)
    gen_eos = None
    if facts:
        if facts["template"] and facts["template"] != tok.chat_template:
            failures.append("chat template differs from the GGUF's")
        with open(os.path.join(a.hf, "config.json")) as f:
            cfg = json.load(f)
        gen_eos = cfg.get("eos_token_id")
        if facts["eos"] is not None and gen_eos != facts["eos"]:
            failures.append(f"config.json eos_token_id {gen_eos} != GGUF eos {facts['eos']}")
        log(f"GGUF: {facts['arch']}, {facts['n_vocab']} tokens, eos {facts['eos']}; "
            f"HF tokenizer {type(tok).__name__}, {len(tok)} tokens")

    # 1. tokenization
    prompts = [tok.apply_chat_template([{"role": "user", "content": c}], tokenize=False, add_generation_prompt=True)
               for c in CHATS]
    report = {"transformers": transformers.__version__, "torch": torch.__version__, "prompts": [], "strings": []}
    prompt_ids = []
    for kind, texts in (("prompts", prompts), ("strings", STRINGS)):
        for i, text in enumerate(texts):
            hf_ids = tok(text, add_special_tokens=False)["input_ids"]
            ll_ids = server_tokenize(a.url, text)
            same = hf_ids == ll_ids
            where = next((k for k, (x, y) in enumerate(zip(hf_ids, ll_ids)) if x != y), min(len(hf_ids), len(ll_ids)))
            entry = {"n_tokens": len(hf_ids), "tokenizer_same": same}
            log(f"tokenize {kind[:-1]} {i + 1}: {len(hf_ids)} ids, llama-server {len(ll_ids)}: "
                + ("same" if same else f"DIFFER at {where}: hf {hf_ids[where:where + 5]} vs llama.cpp {ll_ids[where:where + 5]}"))
            if not same:
                failures.append(f"tokenization of {kind[:-1]} {i + 1} differs")
            report[kind].append(entry)
            if kind == "prompts":
                prompt_ids.append(hf_ids)
                direct = tok.apply_chat_template([{"role": "user", "content": CHATS[i]}], tokenize=True,
                                                 add_generation_prompt=True)
                if hasattr(direct, "keys"):  # transformers 5 returns a BatchEncoding
                    direct = direct["input_ids"]
                if direct and isinstance(direct[0], list):
                    direct = direct[0]
                if list(direct) != hf_ids:
                    failures.append(f"apply_chat_template(tokenize=True) differs from tokenizing its text, prompt {i + 1}")

    # 2. greedy decoding
    dev = a.device if a.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = getattr(torch, a.dtype)
    t1 = time.time()
    model = AutoModelForCausalLM.from_pretrained(a.hf, dtype=torch.bfloat16)
    model = model.to(device=dev, dtype=dtype).eval()
    log(f"loaded {type(model).__name__} in {time.time() - t1:.1f} s; computing in {a.dtype} on {dev}")
    for i, ids in enumerate(prompt_ids):
        ll, probs = server_greedy(a.url, ids, a.tokens)
        seq, hf, gaps, logit_rows = list(ids), [], [], []
        with torch.no_grad():
            for _ in range(a.tokens):
                logits = model(torch.tensor([seq], device=dev)).logits[0, -1].float()
                top = torch.topk(logits, 2)
                nxt = int(top.indices[0])
                hf.append(nxt)
                gaps.append(float(top.values[0] - top.values[1]))
                logit_rows.append(logits.cpu())
                seq.append(nxt)
        n = min(len(hf), len(ll))
        matched = next((k for k in range(n) if hf[k] != ll[k]), n)
        entry = report["prompts"][i]
        entry.update({"hf": hf, "llama": ll, "matched": matched, "compared": a.tokens,
                      "min_gap": round(min(gaps), 4)})
        status = "ok"
        if matched < a.tokens:
            if matched >= len(ll):
                status = f"llama-server gave only {len(ll)} tokens"
                failures.append(f"prompt {i + 1}: {status}")
            else:
                gap = float(logit_rows[matched][hf[matched]] - logit_rows[matched][ll[matched]])
                entry["divergence_gap"] = round(gap, 4)
                ll_top = ""
                if matched < len(probs):
                    p = probs[matched]
                    cand = p.get("top_logprobs") or p.get("probs") or []
                    ll_top = " llama.cpp top: " + ", ".join(
                        f"{c.get('id', c.get('tok_str'))}:{c.get('logprob', c.get('prob')):.3f}" for c in cand[:2])
                status = (f"diverge at token {matched + 1}: hf {hf[matched]} {tok.decode([hf[matched]])!r} vs llama.cpp "
                          f"{ll[matched]} {tok.decode([ll[matched]])!r}, hf logit gap {gap:.3f}.{ll_top}")
                if gap >= a.tie_margin:
                    failures.append(f"prompt {i + 1}: {status}")
                else:
                    status += f" (near-tie below --tie-margin {a.tie_margin}: accepted)"
        log(f"greedy prompt {i + 1} ({len(ids)} prompt tokens): {matched}/{a.tokens} tokens the same; "
            f"smallest hf top-2 gap {min(gaps):.3f}; {status}")
        log(f"    hf:        {tok.decode(hf)!r}")
        log(f"    llama.cpp: {tok.decode(ll)!r}")

    report["failures"] = failures
    report["seconds"] = round(time.time() - t0, 1)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    for f_ in failures:
        log(f"FAIL: {f_}")
    log(f"{'FAILED' if failures else 'passed'}: transformers {transformers.__version__}, torch {torch.__version__}, "
        f"{time.time() - t0:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
