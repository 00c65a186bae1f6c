#!/usr/bin/env python3
"""Turn a GGUF (SmolLM2-135M llama-arch, or Qwen2 / Qwen2.5) into a Hugging Face model folder.

vLLM, SGLang and LMDeploy (PyTorch backend) load a Hugging Face folder, not a GGUF file;
the GPU machine has no network, so the folder is made there from the GGUF that bench360's
llama.cpp runs use. Written for the device's transformers (5.17) with the `gguf` package
(0.19.0, carried as a wheel) on the path. See docs/study/README.md.

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

Qwen2 GGUFs (general.architecture = qwen2, e.g. Qwen2.5-Coder-0.5B/1.5B-Instruct Q4_K_M, whose
tensors mix Q4_K, Q5_0, Q6_K, Q8_0 and F32) take another road that needs no transformers at all:
the GGUF is read with the `gguf` package, every tensor is dequantized with gguf.quants.dequantize
(row chunks, so memory stays near one tensor) and rounded to bfloat16 (round to nearest even, as
ggml's fp32->bf16), and written straight into model.safetensors. config.json (Qwen2ForCausalLM:
sizes, rope theta, rms eps, context length; q/k/v biases are built into Qwen2; tie_word_embeddings
only when the GGUF has no output.weight), generation_config.json (bos, eos list, pad; no sampling
defaults, so engines do not pick up a default temperature or repetition penalty) and the tokenizer
files (tokenizer.json for byte-level BPE from tokenizer.ggml.tokens/merges with Qwen2's
pre-tokenizer regex, vocab.json, merges.txt, tokenizer_config.json with the GGUF's chat template)
are written from the GGUF's metadata. Unlike llama-arch GGUFs, Qwen2 GGUFs keep the Q/K rows in
Hugging Face order (llama.cpp's convert_hf_to_gguf permutes Q/K for LlamaModel only; Qwen2 uses
NeoX rope), so no inverse permutation is applied. docs/study/check-conversion.py compares the
result with llama.cpp (same tokens, same greedy continuation).
"""

import argparse
import hashlib
import inspect
import json
import math
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
    eos = model.generation_config.eos_token_id
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    with torch.no_grad():
        out = model.generate(ids.to(dev), attention_mask=torch.ones_like(ids).to(dev), max_new_tokens=24, do_sample=False,
                             eos_token_id=eos, pad_token_id=model.generation_config.pad_token_id)
    new = out[0][ids.shape[1]:]
    text = tok.decode(new, skip_special_tokens=True)
    stopped = any(int(t) in eos for t in new)
    log(f"check on {dev}: {text!r} ({len(new)} tokens, stopped at eos: {stopped})")


# ---- Qwen2: straight from the GGUF with the `gguf` package ----------------------------------

# Recipe of the Qwen2 road (its own number: bumping it leaves SmolLM2 folders alone).
QWEN2_RECIPE = 1
# Pre-tokenizer regexes by tokenizer.ggml.pre (llama.cpp's names; the patterns are the
# Hugging Face tokenizer.json ones that llama.cpp reproduces).
PRE_TOKENIZER_REGEX = {
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
# GGUF token types (gguf.TokenType): which tokens go where in the Hugging Face tokenizer.
TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6
# Control tokens that end a turn; added to generation_config's eos list when in the vocabulary
# (llama.cpp stops on them too).
END_OF_TURN = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "<end_of_turn>")
# GGUF tensor name -> Hugging Face Qwen2 name ("{i}" is the layer).
QWEN2_GLOBAL = {"token_embd.weight": "model.embed_tokens.weight",
                "output_norm.weight": "model.norm.weight",
                "output.weight": "lm_head.weight"}
QWEN2_LAYER = {"attn_norm.weight": "input_layernorm.weight",
               "attn_q.weight": "self_attn.q_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
               "attn_k.weight": "self_attn.k_proj.weight", "attn_k.bias": "self_attn.k_proj.bias",
               "attn_v.weight": "self_attn.v_proj.weight", "attn_v.bias": "self_attn.v_proj.bias",
               "attn_output.weight": "self_attn.o_proj.weight",
               "ffn_norm.weight": "post_attention_layernorm.weight",
               "ffn_gate.weight": "mlp.gate_proj.weight",
               "ffn_up.weight": "mlp.up_proj.weight",
               "ffn_down.weight": "mlp.down_proj.weight"}
CHUNK_ELEMENTS = 1 << 24  # dequantize at most this many values at once (64 MiB of float32)


def gguf_meta(reader, key, default=KeyError):
    field = reader.fields.get(key)
    if field is None:
        if default is KeyError:
            sys.exit(f"[convert] error: the GGUF has no {key}")
        return default
    return field.contents()


def short_float(x):
    """A float32 read from the GGUF, as the short decimal it was written from (1e-06, not 9.99e-07)."""
    return float(f"{float(x):.7g}")


def qwen2_tensor_map(reader, n_layers):
    """GGUF tensor -> (Hugging Face name, shape in PyTorch order); fails on anything unexpected."""
    names = {t.name: t for t in reader.tensors}
    out = []
    for gname, hname in QWEN2_GLOBAL.items():
        if gname in names:
            out.append((hname, names.pop(gname)))
        elif gname != "output.weight":
            sys.exit(f"[convert] error: the GGUF has no {gname}")
    for i in range(n_layers):
        for gsuffix, hsuffix in QWEN2_LAYER.items():
            t = names.pop(f"blk.{i}.{gsuffix}", None)
            if t is None:
                sys.exit(f"[convert] error: the GGUF has no blk.{i}.{gsuffix} (Qwen2 needs q/k/v biases)")
            out.append((f"model.layers.{i}.{hsuffix}", t))
    # llama.cpp may store precomputed rope frequencies; Qwen2 has none. Anything else is a tensor
    # this converter does not know where to put (an o_proj bias, say): refuse rather than drop it.
    extra = sorted(n for n in names if not n.endswith("rope_freqs.weight"))
    if extra:
        sys.exit(f"[convert] error: tensors with no place in Qwen2ForCausalLM: {extra[:8]}")
    return out


def qwen2_config(reader, tied):
    arch = "qwen2"
    tokens = reader.fields["tokenizer.ggml.tokens"]
    n_vocab = len(tokens.data)
    emb = next(t for t in reader.tensors if t.name == "token_embd.weight")
    hidden = int(gguf_meta(reader, f"{arch}.embedding_length"))
    if [int(x) for x in emb.shape] != [hidden, n_vocab]:
        sys.exit(f"[convert] error: token_embd is {list(emb.shape)}, expected [{hidden}, {n_vocab}]")
    n_layers = int(gguf_meta(reader, f"{arch}.block_count"))
    ctx = int(gguf_meta(reader, f"{arch}.context_length"))
    theta = short_float(gguf_meta(reader, f"{arch}.rope.freq_base", 10000.0))
    if gguf_meta(reader, f"{arch}.rope.scaling.type", "none") not in ("none", b"none"):
        sys.exit("[convert] error: rope scaling in the GGUF is not supported by this converter")
    bos = int(gguf_meta(reader, "tokenizer.ggml.bos_token_id"))
    eos = int(gguf_meta(reader, "tokenizer.ggml.eos_token_id"))
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": hidden,
        "intermediate_size": int(gguf_meta(reader, f"{arch}.feed_forward_length")),
        "num_hidden_layers": n_layers,
        "num_attention_heads": int(gguf_meta(reader, f"{arch}.attention.head_count")),
        "num_key_value_heads": int(gguf_meta(reader, f"{arch}.attention.head_count_kv")),
        "hidden_act": "silu",
        "max_position_embeddings": ctx,
        "rms_norm_eps": short_float(gguf_meta(reader, f"{arch}.attention.layer_norm_rms_epsilon")),
        "rope_theta": theta,
        # transformers 5 reads rope settings from here (and rebuilds it from rope_theta if absent).
        "rope_parameters": {"rope_type": "default", "rope_theta": theta},
        "rope_scaling": None,
        "use_sliding_window": False,
        "sliding_window": ctx,
        "max_window_layers": n_layers,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "tie_word_embeddings": tied,
        "vocab_size": n_vocab,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "bfloat16",
        "dtype": "bfloat16",
        # As in the upstream Qwen2.5 checkpoints. Without a version, transformers 4.57.x takes a
        # local folder for a possible Mistral tokenizer and warns about its regex.
        "transformers_version": "4.43.1",
    }


def write_bf16_safetensors(path, entries):
    """Writes [(name, ReaderTensor)] dequantized to bfloat16 into one safetensors file."""
    import numpy as np
    from gguf.quants import dequantize

    header, offset, plan = {"__metadata__": {"format": "pt"}}, 0, []
    for name, t in entries:
        shape = [int(x) for x in reversed(t.shape.tolist())]  # GGUF ne order -> row-major
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + 2 * n]}
        plan.append((name, t, shape, n))
        offset += 2 * n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    counts = {}
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for name, t, shape, n in plan:
            counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
            data = t.data
            rows = data.reshape(-1, data.shape[-1]) if data.ndim > 1 else data.reshape(1, -1)
            per_row = n // rows.shape[0]
            step = max(1, CHUNK_ELEMENTS // per_row)
            written = 0
            for r0 in range(0, rows.shape[0], step):
                x = np.asarray(dequantize(rows[r0:r0 + step], t.tensor_type), dtype=np.float32)
                x = x.reshape(-1)
                if not np.isfinite(x).all():
                    sys.exit(f"[convert] error: {t.name} has non-finite values after dequantization")
                u = x.view(np.uint32).astype(np.uint64)
                # fp32 -> bf16, round to nearest even (ggml_compute_fp32_to_bf16; no NaN here).
                b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
                f.write(b.astype("<u2").tobytes())
                written += x.size
            if written != n:
                sys.exit(f"[convert] error: {t.name} gave {written} values, expected {n} {shape}")
    return counts


def qwen2_tokenizer_files(reader, out, ctx):
    """tokenizer.json (+ vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json)."""
    model = gguf_meta(reader, "tokenizer.ggml.model")
    pre = gguf_meta(reader, "tokenizer.ggml.pre", "default")
    if model != "gpt2" or pre not in PRE_TOKENIZER_REGEX:
        sys.exit(f"[convert] error: tokenizer {model!r} / pre-tokenizer {pre!r} not supported "
                 f"(byte-level BPE with {sorted(PRE_TOKENIZER_REGEX)})")
    tokens = gguf_meta(reader, "tokenizer.ggml.tokens")
    types = [int(x) for x in gguf_meta(reader, "tokenizer.ggml.token_type")]
    merges = gguf_meta(reader, "tokenizer.ggml.merges")
    bos = int(gguf_meta(reader, "tokenizer.ggml.bos_token_id"))
    eos = int(gguf_meta(reader, "tokenizer.ggml.eos_token_id"))
    pad = int(gguf_meta(reader, "tokenizer.ggml.padding_token_id", eos))
    add_bos = bool(gguf_meta(reader, "tokenizer.ggml.add_bos_token", False))
    template = gguf_meta(reader, "tokenizer.chat_template", None)
    if not template:
        sys.exit("[convert] error: the GGUF has no tokenizer.chat_template")

    vocab, added = {}, []
    for i, (tok, tt) in enumerate(zip(tokens, types)):
        if tt == TT_NORMAL:
            vocab[tok] = i
        elif tt in (TT_CONTROL, TT_USER_DEFINED):
            added.append({"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": tt == TT_CONTROL})
        elif tt != TT_UNUSED:  # unused: llama.cpp's [PADnnn] fillers up to the embedding size
            sys.exit(f"[convert] error: token {i} {tok!r} has type {tt}, unexpected in a byte-level BPE")
    if len(vocab) + len(added) + types.count(TT_UNUSED) != len(tokens):
        sys.exit("[convert] error: duplicate tokens in the GGUF vocabulary")
    pairs = []
    for m in merges:
        a, sep, b = m.partition(" ")
        if not sep or " " in b:
            sys.exit(f"[convert] error: merge {m!r} is not two tokens")
        pairs.append([a, b])
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PRE_TOKENIZER_REGEX[pre]}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": pairs},
    }
    if add_bos:  # not for Qwen2 (add_bos_token false); kept general for byte-level BPE GGUFs
        tokenizer["post_processor"] = {"type": "Sequence", "processors": [byte_level, {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {tokens[bos]: {"id": tokens[bos], "ids": [bos], "tokens": [tokens[bos]]}}}]}

    def dump(name, obj):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=None if name == "tokenizer.json" else 1)

    dump("tokenizer.json", tokenizer)
    dump("vocab.json", vocab)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        f.writelines(f"{a} {b}\n" for a, b in pairs)
    specials = [a["content"] for a in added if a["special"] and a["id"] not in (eos, pad, bos)]
    dump("tokenizer_config.json", {
        "tokenizer_class": "Qwen2Tokenizer",
        "add_bos_token": add_bos,
        "add_eos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                    "single_word", "special")} for a in added},
        "additional_special_tokens": specials,
        "bos_token": tokens[bos] if add_bos else None,
        "eos_token": tokens[eos],
        "pad_token": tokens[pad],
        "unk_token": None,
        "chat_template": template,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "model_max_length": ctx,
        "split_special_tokens": False,
    })
    dump("special_tokens_map.json", {"additional_special_tokens": specials, "eos_token": tokens[eos],
                                     "pad_token": tokens[pad], **({"bos_token": tokens[bos]} if add_bos else {})})
    stop = [eos] + [i for i, (tok, tt) in enumerate(zip(tokens, types))
                    if tt == TT_CONTROL and tok in END_OF_TURN and i != eos]
    log(f"tokenizer: {len(vocab)} BPE tokens, {len(pairs)} merges, {len(added)} added tokens, "
        f"pre-tokenizer {pre!r}, eos {tokens[eos]!r} ({eos}), stop ids {stop}, chat template {len(template)} characters")
    return {"bos_token_id": bos, "eos_token_id": stop, "pad_token_id": pad}


def convert_qwen2(reader, gguf, out, source_sha):
    t0 = time.time()
    n_layers = int(gguf_meta(reader, "qwen2.block_count"))
    entries = qwen2_tensor_map(reader, n_layers)
    tied = not any(h == "lm_head.weight" for h, _ in entries)
    cfg = qwen2_config(reader, tied)
    heads, kv, hidden = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    head_dim = hidden // heads
    want = {"model.layers.0.self_attn.q_proj.weight": [heads * head_dim, hidden],
            "model.layers.0.self_attn.k_proj.weight": [kv * head_dim, hidden],
            "model.layers.0.self_attn.k_proj.bias": [kv * head_dim],
            "model.layers.0.mlp.down_proj.weight": [hidden, cfg["intermediate_size"]]}
    for hname, t in entries:
        if hname in want and [int(x) for x in reversed(t.shape.tolist())] != want[hname]:
            sys.exit(f"[convert] error: {hname} has shape {list(reversed(t.shape.tolist()))}, expected {want[hname]}")

    tmp = f"{out}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    gen = qwen2_tokenizer_files(reader, tmp, cfg["max_position_embeddings"])
    counts = write_bf16_safetensors(os.path.join(tmp, "model.safetensors"), entries)
    log(f"dequantized {len(entries)} tensors ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}) "
        f"to bfloat16 in {time.time() - t0:.1f} s; lm_head {'tied to the embeddings' if tied else 'from output.weight'}")
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(tmp, "generation_config.json"), "w") as f:
        json.dump({**gen, "transformers_version": cfg["transformers_version"]}, f, indent=1)
    with open(os.path.join(tmp, MARKER), "w") as f:
        json.dump({"recipe": QWEN2_RECIPE, "arch": "qwen2", "gguf": os.path.abspath(gguf), "gguf_sha256": source_sha,
                   "gguf_name": gguf_meta(reader, "general.name", ""), "dtype": "bfloat16",
                   "tensor_types": counts, **gen}, f, indent=1)
    verify_qwen2(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    log(f"wrote {out} in {time.time() - t0:.1f} s: {', '.join(sorted(os.listdir(out)))}")


def verify_qwen2(folder):
    """Checks the saved files against each other without loading any weights."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    header.pop("__metadata__", None)
    n_params = sum(math.prod(v["shape"]) for v in header.values())
    expect = 2 + (0 if cfg["tie_word_embeddings"] else 1) + len(QWEN2_LAYER) * cfg["num_hidden_layers"]
    if len(header) != expect:
        sys.exit(f"[convert] error: model.safetensors has {len(header)} tensors, expected {expect}")
    if header["model.embed_tokens.weight"]["shape"] != [cfg["vocab_size"], cfg["hidden_size"]]:
        sys.exit("[convert] error: embedding shape disagrees with config.json")
    with open(os.path.join(folder, "tokenizer_config.json")) as f:
        tcfg = json.load(f)
    if "{%" not in (tcfg.get("chat_template") or ""):
        sys.exit("[convert] error: tokenizer_config.json has no chat template")
    summary = {k: cfg.get(k) for k in ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                       "num_key_value_heads", "vocab_size", "rope_theta", "rms_norm_eps",
                                       "max_position_embeddings", "tie_word_embeddings", "eos_token_id")}
    log(f"config: {summary}; {len(header)} tensors, {n_params / 1e6:.1f} M parameters")


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
        from gguf import GGUFReader  # (transformers' GGUF reader needs the package too)
    except ImportError:
        sys.exit("[convert] error: the `gguf` package is not importable (install its wheel, or put it on PYTHONPATH)")

    reader = GGUFReader(a.gguf)
    arch = gguf_meta(reader, "general.architecture")
    if arch not in ("llama", "qwen2"):
        sys.exit(f"[convert] error: architecture {arch!r} not supported (llama, qwen2)")
    recipe, verify_fn = (QWEN2_RECIPE, verify_qwen2) if arch == "qwen2" else (RECIPE, verify)
    log(f"{a.gguf}: {arch}, {gguf_meta(reader, 'general.name', '?')!r}")
    source_sha = sha256_of(a.gguf)
    marker = os.path.join(a.out, MARKER)
    if not a.force and os.path.isfile(marker):
        with open(marker) as f:
            made = json.load(f)
            if made.get("gguf_sha256") == source_sha and made.get("recipe") == recipe:
                log(f"{a.out} is up to date (from {source_sha[:12]})")
                verify_fn(a.out)
                if a.check:
                    check(a.out)
                return
    if arch == "qwen2":
        convert_qwen2(reader, a.gguf, a.out, source_sha)
    else:
        del reader  # the llama road goes through transformers' own GGUF loader
        convert(a.gguf, a.out, source_sha)
    if a.check:
        check(a.out)


if __name__ == "__main__":
    main()
