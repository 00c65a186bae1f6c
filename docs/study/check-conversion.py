#!/usr/bin/env python3
"""Check a Hugging Face folder made by convert-gguf-to-hf.py against llama.cpp on the GGUF.

    python3 check-conversion.py MODEL.gguf HF_DIR http://127.0.0.1:PORT [--tokens 16]
        [--dtype float32|bfloat16|float16] [--device auto|cpu|cuda] [--tie-margin 0.1] [--json OUT]

llama-server must already run MODEL.gguf at that URL (e.g. `llama-server -m MODEL.gguf
--host 127.0.0.1 --port 8090 -t 1 -c 2048`). For three chat prompts (the folder's chat
template, as an engine's chat endpoint would apply it) and four plain strings, the script checks
  1. tokenization: the Hugging Face tokenizer's ids equal llama-server's /tokenize ids (no BOS
     added, special tokens parsed), for every prompt and string; and apply_chat_template's ids
     equal the ids of its text;
  2. greedy decoding: transformers' greedy generate (at most N tokens, stopping on the
     generation config's eos ids) against llama-server's /completion on the same prompt ids
     (top_k 1, temperature 0, no penalties, stopping on its end-of-generation tokens, which
     are returned among the tokens). Both sequences are printed with the length of their
     common prefix; then transformers is run over the prompt followed by llama.cpp's tokens
     (teacher forcing), and at every one of llama.cpp's positions its argmax must be
     llama.cpp's token, or the two candidates must be a near-tie on both sides: transformers'
     logit gap and llama.cpp's logprob gap (n_probs) both below --tie-margin;
     Besides, the log-probability that transformers gives llama.cpp's token at each position
     must be within --logprob-tol (0.3) of llama.cpp's own (n_probs, before sampling);
  3. metadata: the GGUF's chat template and eos id equal the folder's, and llama-server
     serves a file of the GGUF's name (when /props says).
It exits 1 if any check fails, 2 on a usage or connection problem, 0 otherwise.

The two sides do not compute alike (llama.cpp: the quantized weights, activations quantized
to Q8 in its CPU dot products; transformers: the weights dequantized and rounded to bf16,
computed in --dtype, float32 by default), so two candidates within a few hundredths of a
logit can swap: that is what --tie-margin (0.1 by default; 0 accepts no differing token)
allows, and each such position is printed with both gaps. A wrong conversion (Q/K rows in the
wrong order, a missing bias, a wrong rope theta or eps, a wrong tokenizer) gives gaps of
several logits or differing ids within the first few tokens; a subtler one (rope theta 1e4
instead of 1e6, tried on Qwen2.5-Coder-0.5B) still moved llama.cpp's token log-probabilities by
0.6-1.3 where a right one stays within about 0.05.
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
    # Stops at end-of-generation tokens (ignore_eos would bias them to -inf, so llama.cpp would
    # pick the runner-up where transformers ends the turn); the eos token is in "tokens".
    body = {"prompt": ids, "n_predict": n, "temperature": 0, "top_k": 1, "top_p": 1.0, "min_p": 0.0,
            "repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "dry_multiplier": 0.0,
            "cache_prompt": False, "n_probs": 2, "return_tokens": True, "seed": 0}
    r = post(url, "/completion", body)
    toks = r.get("tokens")
    probs = r.get("completion_probabilities") or []
    if not toks:
        toks = [p["id"] for p in probs if "id" in p]
    if not toks:
        raise RuntimeError(f"llama-server returned no token ids: keys {sorted(r)}")
    stop = r.get("stop_type") or ("eos" if r.get("stopped_eos") else "limit" if r.get("stopped_limit") else "?")
    return [int(t) for t in toks], probs, stop


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
    ap.add_argument("--tie-margin", type=float, default=0.1,
                    help="accept a differing token where both sides' logit gap is below this (0.1; 0: none)")
    ap.add_argument("--logprob-tol", type=float, default=0.3,
                    help="largest accepted difference in the log-probability of llama.cpp's token (0.3)")
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
    eos = model.generation_config.eos_token_id
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    log(f"loaded {type(model).__name__} in {time.time() - t1:.1f} s; computing in {a.dtype} on {dev}; "
        f"eos {eos}; near-tie margin {a.tie_margin}")
    for i, ids in enumerate(prompt_ids):
        ll, probs, stop_type = server_greedy(a.url, ids, a.tokens)
        x = torch.tensor([ids], device=dev)
        with torch.no_grad():
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=a.tokens, do_sample=False,
                                 eos_token_id=eos, pad_token_id=model.generation_config.pad_token_id)
            hf = [int(t) for t in out[0, len(ids):]]
            if hf and hf[-1] in eos:  # generate pads after eos when batched; one row: cut at the first eos
                hf = hf[:next(k for k, t in enumerate(hf) if t in eos) + 1]
            # Teacher forcing: transformers' logits at each of llama.cpp's positions (same context).
            tf = model(torch.tensor([ids + ll], device=dev)).logits[0, len(ids) - 1:len(ids) + len(ll) - 1].float().cpu()
        same_prefix = next((k for k in range(min(len(hf), len(ll))) if hf[k] != ll[k]), min(len(hf), len(ll)))
        entry = report["prompts"][i]
        entry.update({"hf": hf, "llama": ll, "llama_stop": stop_type, "first_tokens_same": same_prefix,
                      "compared": a.tokens, "identical": hf == ll})
        # Each position where transformers' argmax is not llama.cpp's token must be a near-tie on
        # both sides (logit gap on transformers' side, logprob gap on llama.cpp's when given).
        agree, misses, dlp = 0, [], []
        logp = torch.log_softmax(tf, dim=-1)
        for k, want in enumerate(ll):
            got = int(tf[k].argmax())
            if k < len(probs) and probs[k].get("id") == want and probs[k].get("logprob") is not None:
                dlp.append(abs(float(logp[k][want]) - float(probs[k]["logprob"])))
            if got == want:
                agree += 1
                continue
            gap_hf = float(tf[k][got] - tf[k][want])
            gap_ll = None
            if k < len(probs):
                tops = {c.get("id"): c.get("logprob") for c in probs[k].get("top_logprobs") or []}
                if got in tops and want in tops and None not in (tops[got], tops[want]):
                    gap_ll = float(tops[want] - tops[got])
            tie = gap_hf < a.tie_margin and (gap_ll is None or gap_ll < a.tie_margin)
            misses.append({"at": k + 1, "hf": got, "llama": want, "gap_hf": round(gap_hf, 4),
                           "gap_llama": None if gap_ll is None else round(gap_ll, 4), "near_tie": tie})
        entry.update({"teacher_forced_agree": agree, "misses": misses,
                      "max_logprob_diff": round(max(dlp), 4) if dlp else None})
        what = "identical" if hf == ll else f"first {same_prefix} the same"
        log(f"greedy prompt {i + 1} ({len(ids)} prompt tokens): transformers {len(hf)} tokens, llama.cpp {len(ll)} "
            f"(stop: {stop_type}): {what}; on llama.cpp's path transformers' argmax agrees at {agree}/{len(ll)}"
            + (f", logprob of llama.cpp's token differs by at most {max(dlp):.3f}" if dlp else ""))
        for m in misses:
            msg = (f"    position {m['at']}: transformers {m['hf']} {tok.decode([m['hf']])!r} vs llama.cpp {m['llama']} "
                   f"{tok.decode([m['llama']])!r}: logit gap {m['gap_hf']:.3f} (transformers), "
                   f"{'?' if m['gap_llama'] is None else format(m['gap_llama'], '.3f')} (llama.cpp logprobs)")
            log(msg + (" - near-tie, accepted" if m["near_tie"] else " - NOT a near-tie"))
            if not m["near_tie"]:
                failures.append(f"prompt {i + 1}, token {m['at']}: {msg.strip()}")
        if dlp and max(dlp) > a.logprob_tol:
            failures.append(f"prompt {i + 1}: log-probabilities of llama.cpp's tokens differ by up to {max(dlp):.3f} "
                            f"(more than --logprob-tol {a.logprob_tol})")
        if len(ll) < a.tokens and stop_type != "eos":
            failures.append(f"prompt {i + 1}: llama-server gave {len(ll)} tokens and stopped by {stop_type}")
        log(f"    transformers: {tok.decode(hf)!r}")
        log(f"    llama.cpp:    {tok.decode(ll)!r}")

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
