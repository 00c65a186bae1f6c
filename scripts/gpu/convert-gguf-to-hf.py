#!/usr/bin/env python3
"""Turn the SmolLM2-135M-Instruct Q4_1 GGUF into a Hugging Face model folder.

vLLM, SGLang and LMDeploy (PyTorch backend) load a Hugging Face folder, not a GGUF file;
the GPU machine has no network, so the folder is made there from the GGUF that bench360's
llama.cpp runs use. Written for the device's transformers (5.17) with the `gguf` package
(0.19.0, carried as a wheel) on the path. See scripts/gpu/README.md.

    python3 convert-gguf-to-hf.py MODEL.gguf OUT_DIR [--check] [--force]

The weights are dequantized to bfloat16 and saved as safetensors with the tokenizer. Two
corrections are applied before saving:
  * special tokens: transformers' GGUF tokenizer conversion gets SmolLM2's end-of-sequence
    token wrong; bos is set to <|im_start|> (id 1), eos and pad to <|im_end|> (id 2), in the
    tokenizer, the config and the generation config (what the original model card uses, and
    what the GGUF's own metadata says for eos);
  * quantizer state: a GGUF-loaded model may carry loader/quantizer state that cannot be
    serialized; the tensors are already plain bfloat16, so that state is dropped.
The folder is written next to OUT_DIR and renamed into place when complete; a folder made
from the same GGUF (sha256 recorded in bench360-source.json) is kept unless --force.
--check loads the result again and runs one short greedy generation (on CUDA if present).
"""

import argparse
import hashlib
import inspect
import json
import os
import shutil
import sys
import time

BOS, EOS, UNK = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
BOS_ID, EOS_ID = 1, 2
MARKER = "bench360-source.json"
# Bump when the conversion changes: folders made by an older recipe are made again.
RECIPE = 2

# SmolLM2-Instruct's chat format (ChatML with a default system turn), used only when the
# GGUF carries no chat template.
SMOLLM2_CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if loop.first and m['role'] != 'system' -%}"
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "{%- endif -%}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}"
)


def log(msg):
    print(f"[convert] {msg}", flush=True)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fix_tokenizer(tok):
    """Sets the special tokens and the chat template; fails if the vocabulary disagrees."""
    for token, want in ((BOS, BOS_ID), (EOS, EOS_ID)):
        got = tok.convert_tokens_to_ids(token)
        if got != want:
            sys.exit(f"[convert] error: {token} has id {got} in this vocabulary, expected {want}")
    tok.bos_token, tok.eos_token, tok.pad_token = BOS, EOS, EOS
    # As SmolLM2's own tokenizer_config: a byte-level BPE must not strip spaces on decoding
    # (an engine with an older transformers would apply that clean-up otherwise).
    tok.clean_up_tokenization_spaces = False
    if tok.convert_tokens_to_ids(UNK) == 0:
        tok.unk_token = UNK
    if getattr(tok, "chat_template", None):
        log(f"chat template from the GGUF ({len(tok.chat_template)} characters)")
    else:
        log("no chat template in the GGUF: using SmolLM2's ChatML template")
        tok.chat_template = SMOLLM2_CHAT_TEMPLATE
    return tok


def fix_config(cfg):
    for name, value in (("bos_token_id", BOS_ID), ("eos_token_id", EOS_ID), ("pad_token_id", EOS_ID)):
        setattr(cfg, name, value)


def drop_quantizer_state(model):
    """The tensors are dequantized already: forget everything that says otherwise."""
    for holder in (model, getattr(model, "config", None)):
        if holder is None:
            continue
        for attr in ("hf_quantizer", "quantization_config", "_pre_quantization_dtype"):
            if attr in vars(holder):
                try:
                    delattr(holder, attr)
                except AttributeError:
                    pass
            if getattr(holder, attr, None) is not None:
                try:
                    setattr(holder, attr, None)
                except AttributeError:
                    pass
    for attr in ("is_quantized", "is_loaded_in_4bit", "is_loaded_in_8bit"):
        if getattr(model, attr, False):
            try:
                setattr(model, attr, False)
            except AttributeError:
                pass
    if getattr(model, "hf_quantizer", None) is not None:
        sys.exit("[convert] error: could not clear the model's quantizer before saving")


def convert(gguf, out, source_sha):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = os.path.dirname(os.path.abspath(gguf)), os.path.basename(gguf)
    t0 = time.time()
    tok = fix_tokenizer(AutoTokenizer.from_pretrained(folder, gguf_file=name))
    kwargs = {}
    try:
        # transformers >= 5.17 may keep GGUF weights packed in their blocks (when it finds a
        # matmul kernel): ask for plain dense tensors explicitly.
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:
        pass  # older transformers always dequantize GGUF weights at load
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16, **kwargs)
    log(f"loaded {type(model).__name__} in {time.time() - t0:.1f} s")
    packed = sorted({type(m).__name__ for m in model.modules() if "gguf" in type(m).__name__.lower()})
    if packed:
        sys.exit(f"[convert] error: weights still packed in GGUF modules {packed}")
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.bfloat16}:
        log(f"casting parameters {sorted(map(str, dtypes))} to bfloat16")
        model = model.to(torch.bfloat16)
    fix_config(model.config)
    if getattr(model, "generation_config", None) is not None:
        fix_config(model.generation_config)
    drop_quantizer_state(model)

    tmp = f"{out}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    save_kwargs = {}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        save_kwargs["safe_serialization"] = True
    model.save_pretrained(tmp, **save_kwargs)
    tok.save_pretrained(tmp)
    with open(os.path.join(tmp, MARKER), "w") as f:
        json.dump({"recipe": RECIPE, "gguf": os.path.abspath(gguf), "gguf_sha256": source_sha, "dtype": "bfloat16",
                   "bos": [BOS, BOS_ID], "eos": [EOS, EOS_ID], "pad": [EOS, EOS_ID]}, f, indent=1)
    verify(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    log(f"wrote {out} in {time.time() - t0:.1f} s: {', '.join(sorted(os.listdir(out)))}")


def verify(folder):
    """Checks the saved files without loading any weights."""
    files = set(os.listdir(folder))
    if not any(f.endswith(".safetensors") for f in files):
        sys.exit(f"[convert] error: no .safetensors in {folder}")
    for need in ("config.json", "tokenizer_config.json"):
        if need not in files:
            sys.exit(f"[convert] error: {need} missing in {folder}")
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    bad = {k: cfg.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    if bad != {"bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "pad_token_id": EOS_ID}:
        sys.exit(f"[convert] error: config.json has {bad}")
    if "quantization_config" in cfg:
        sys.exit("[convert] error: config.json still has a quantization_config")
    with open(os.path.join(folder, "tokenizer_config.json")) as f:
        tcfg = json.load(f)

    def token(v):
        return v.get("content") if isinstance(v, dict) else v

    got = (token(tcfg.get("bos_token")), token(tcfg.get("eos_token")), token(tcfg.get("pad_token")))
    if got != (BOS, EOS, EOS):
        sys.exit(f"[convert] error: tokenizer_config.json has bos/eos/pad {got}")
    if tcfg.get("clean_up_tokenization_spaces"):
        sys.exit("[convert] error: tokenizer_config.json asks for clean_up_tokenization_spaces")
    summary = {k: cfg.get(k) for k in ("architectures", "dtype", "torch_dtype", "hidden_size",
                                       "num_hidden_layers", "vocab_size", "tie_word_embeddings")}
    log(f"config: {summary}")


def check(folder):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to(dev).eval()
    msgs = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")
    if not torch.is_tensor(ids):
        ids = ids["input_ids"]
    with torch.no_grad():
        out = model.generate(ids.to(dev), max_new_tokens=24, do_sample=False,
                             eos_token_id=EOS_ID, pad_token_id=EOS_ID)
    new = out[0][ids.shape[1]:]
    text = tok.decode(new, skip_special_tokens=True)
    log(f"check on {dev}: {text!r} ({len(new)} tokens, stopped at eos: {bool((new == EOS_ID).any())})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--check", action="store_true", help="reload and generate once")
    ap.add_argument("--force", action="store_true", help="convert even if OUT is up to date")
    a = ap.parse_args()
    if not os.path.isfile(a.gguf):
        sys.exit(f"[convert] error: no such file {a.gguf}")
    try:
        import gguf  # noqa: F401  (transformers' GGUF reader needs it)
    except ImportError:
        sys.exit("[convert] error: the `gguf` package is not importable (install its wheel, or put it on PYTHONPATH)")
    source_sha = sha256_of(a.gguf)
    marker = os.path.join(a.out, MARKER)
    if not a.force and os.path.isfile(marker):
        with open(marker) as f:
            made = json.load(f)
            if made.get("gguf_sha256") == source_sha and made.get("recipe") == RECIPE:
                log(f"{a.out} is up to date (from {source_sha[:12]})")
                verify(a.out)
                if a.check:
                    check(a.out)
                return
    convert(a.gguf, a.out, source_sha)
    if a.check:
        check(a.out)


if __name__ == "__main__":
    main()
