"""Plumbing test of docs/study/convert-gguf-to-hf.py's Qwen2 road, with no model download.

Writes a tiny random Qwen2 GGUF (2 layers, hidden 256; tensors in Q4_K, Q6_K, Q5_0, Q8_0, F16
and F32; a byte-level BPE vocabulary with a few merges, control and user-defined tokens and
[PAD] fillers; a chat template), converts it twice (lm_head tied, and from output.weight), and
checks: config.json, generation_config.json, every safetensors tensor bit for bit against
gguf.quants.dequantize rounded to bf16 (so names, shapes, row order — no Q/K permutation — and
offsets), and, where `tokenizers` is importable, the tokenizer (merges, special tokens,
round trip). Needs numpy and gguf (0.19.0, as docs/study/packs.lock). Run:

    python3 tests/python/check_convert_qwen2.py
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter, TokenType
from gguf.quants import dequantize, quantize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONVERT = os.path.join(ROOT, "scripts", "gpu", "convert-gguf-to-hf.py")
HIDDEN, FFN, HEADS, KV, LAYERS = 256, 512, 4, 2, 2
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)


def byte_alphabet():
    """GPT-2's bytes_to_unicode, in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def vocabulary():
    tokens = byte_alphabet()
    merges = ["Ġ t", "h e", "Ġt he", "c a", "ca t"]
    tokens += ["Ġt", "he", "Ġthe", "ca", "cat"]
    types = [TokenType.NORMAL] * len(tokens)
    for tok, tt in (("<|endoftext|>", TokenType.CONTROL), ("<|im_start|>", TokenType.CONTROL),
                    ("<|im_end|>", TokenType.CONTROL), ("<tool_call>", TokenType.USER_DEFINED)):
        tokens.append(tok)
        types.append(tt)
    while len(tokens) % 8:
        tokens.append(f"[PAD{len(tokens)}]")
        types.append(TokenType.UNUSED)
    return tokens, types, merges


def random_raw(rng, qtype, rows, cols):
    """Raw blocks of a K-quant (gguf-py cannot quantize these): random bytes, sane fp16 scales."""
    from gguf.constants import GGML_QUANT_SIZES
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    scale = np.full((rows, cols // block), 0.01, dtype=np.float16).view(np.uint8).reshape(rows, cols // block, 2)
    if qtype == Q.Q4_K:  # d, dmin first
        raw[..., 0:2] = scale
        raw[..., 2:4] = scale
    elif qtype == Q.Q6_K:  # d last
        raw[..., size - 2:size] = scale
    return raw.reshape(rows, -1)


def make_gguf(path, tied, rng):
    tokens, types, merges = vocabulary()
    w = GGUFWriter(path, "qwen2")
    w.add_name("tiny qwen2")
    w.add_block_count(LAYERS)
    w.add_context_length(4096)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)
    n_vocab, hd = len(tokens), HIDDEN // HEADS

    def add(name, rows, cols, qtype):
        if qtype in (Q.Q4_K, Q.Q6_K):
            w.add_tensor(name, random_raw(rng, qtype, rows, cols), raw_dtype=qtype)
            return
        x = rng.standard_normal((rows, cols) if rows else (cols,), dtype=np.float32) * 0.05
        if qtype == Q.F32:
            w.add_tensor(name, x)
        elif qtype == Q.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, quantize(x, qtype), raw_dtype=qtype)

    add("token_embd.weight", n_vocab, HIDDEN, Q.Q4_K)
    if not tied:
        add("output.weight", n_vocab, HIDDEN, Q.Q6_K)
    add("output_norm.weight", 0, HIDDEN, Q.F32)
    for i in range(LAYERS):
        b = f"blk.{i}."
        add(b + "attn_norm.weight", 0, HIDDEN, Q.F32)
        add(b + "attn_q.weight", HEADS * hd, HIDDEN, Q.Q5_0)
        add(b + "attn_q.bias", 0, HEADS * hd, Q.F32)
        add(b + "attn_k.weight", KV * hd, HIDDEN, Q.Q8_0)
        add(b + "attn_k.bias", 0, KV * hd, Q.F32)
        add(b + "attn_v.weight", KV * hd, HIDDEN, Q.Q6_K)
        add(b + "attn_v.bias", 0, KV * hd, Q.F32)
        add(b + "attn_output.weight", HIDDEN, HIDDEN, Q.F16)
        add(b + "ffn_norm.weight", 0, HIDDEN, Q.F32)
        add(b + "ffn_gate.weight", FFN, HIDDEN, Q.Q4_K)
        add(b + "ffn_up.weight", FFN, HIDDEN, Q.Q4_K)
        add(b + "ffn_down.weight", HIDDEN, FFN, Q.Q6_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tokens


def read_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, v in header.items():
        a, b = v["data_offsets"]
        u = np.frombuffer(data[a:b], dtype="<u2").astype(np.uint32) << 16
        out[name] = (v["dtype"], u.view(np.float32).reshape(v["shape"]))
    return out


def bf16(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32)).view(np.float32)


def run(tied, tmp, rng):
    from gguf import GGUFReader

    tag = "tied" if tied else "untied"
    path, out = os.path.join(tmp, f"tiny-{tag}.gguf"), os.path.join(tmp, f"hf-{tag}")
    tokens = make_gguf(path, tied, rng)
    r = subprocess.run([sys.executable, CONVERT, path, out], capture_output=True, text=True)
    check(f"{tag}: converter exits 0", r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:])
    if r.returncode:
        return
    cfg = json.load(open(os.path.join(out, "config.json")))
    want = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": HIDDEN,
            "intermediate_size": FFN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
            "num_key_value_heads": KV, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
            "tie_word_embeddings": tied, "vocab_size": len(tokens), "max_position_embeddings": 4096,
            "eos_token_id": tokens.index("<|im_end|>")}
    check(f"{tag}: config.json", all(cfg.get(k) == v for k, v in want.items()),
          str({k: cfg.get(k) for k in want if cfg.get(k) != want[k]}))
    gen = json.load(open(os.path.join(out, "generation_config.json")))
    check(f"{tag}: generation_config eos list",
          gen.get("eos_token_id") == [tokens.index("<|im_end|>"), tokens.index("<|endoftext|>")], str(gen))

    st = read_safetensors(os.path.join(out, "model.safetensors"))
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    for g, h in (("attn_norm", "input_layernorm"), ("attn_q", "self_attn.q_proj"), ("attn_k", "self_attn.k_proj"),
                 ("attn_v", "self_attn.v_proj"), ("attn_output", "self_attn.o_proj"),
                 ("ffn_norm", "post_attention_layernorm"), ("ffn_gate", "mlp.gate_proj"), ("ffn_up", "mlp.up_proj"),
                 ("ffn_down", "mlp.down_proj")):
        for i in range(LAYERS):
            for kind in ("weight", "bias"):
                names[f"blk.{i}.{g}.{kind}"] = f"model.layers.{i}.{h}.{kind}"
    bad, seen = [], set()
    for t in GGUFReader(path).tensors:
        h = names[t.name]
        seen.add(h)
        expect = bf16(dequantize(t.data, t.tensor_type)).reshape([int(x) for x in reversed(t.shape.tolist())])
        dtype, got = st.get(h, (None, None))
        if dtype != "BF16" or got is None or got.shape != expect.shape or not np.array_equal(got, expect):
            bad.append(f"{t.name}->{h}")
    check(f"{tag}: {len(seen)} tensors equal bf16(dequantize(GGUF)), same names, shapes, row order", not bad, str(bad[:5]))
    check(f"{tag}: no other tensors", set(st) == seen, str(sorted(set(st) - seen)))
    check(f"{tag}: lm_head present only when untied", ("lm_head.weight" in st) == (not tied))

    tcfg = json.load(open(os.path.join(out, "tokenizer_config.json")))
    check(f"{tag}: tokenizer_config", tcfg.get("chat_template") == TEMPLATE and tcfg.get("eos_token") == "<|im_end|>"
          and tcfg.get("pad_token") == "<|endoftext|>" and tcfg.get("bos_token") is None, str(tcfg)[:300])
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("skip tokenizer checks: `tokenizers` not importable")
        return
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    text = "the cat<|im_end|> the<tool_call>é\n"
    ids = tok.encode(text, add_special_tokens=False).ids
    want_ids = [tokens.index("t"), tokens.index("he"), tokens.index("Ġ"), tokens.index("cat"),
                tokens.index("<|im_end|>"), tokens.index("Ġthe"), tokens.index("<tool_call>"),
                tokens.index("Ã"), tokens.index("©"), tokens.index("Ċ")]
    check(f"{tag}: tokenizer ids (merges, specials, bytes)", ids == want_ids, f"{ids} != {want_ids}")
    check(f"{tag}: tokenizer round trip", tok.decode(ids, skip_special_tokens=False) == text, tok.decode(ids))
    check(f"{tag}: skip_special_tokens drops control, keeps user-defined tokens",
          tok.decode(ids, skip_special_tokens=True) == "the cat the<tool_call>é\n", tok.decode(ids, skip_special_tokens=True))


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for tied in (True, False):
            run(tied, tmp, rng)
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
