#!/usr/bin/env python3
"""Write a tiny local Hugging Face tokenizer folder for the peer clients.

    python make_tokenizer.py DIR

AIPerf and GuideLLM build their synthetic prompts with a Hugging Face tokenizer and
would otherwise download one from the hub, which is not reachable here. The scripted
server ignores the prompt, so any tokenizer that loads with
`transformers.AutoTokenizer.from_pretrained(DIR)` will do: a byte-level BPE (no unknown
tokens) trained on a few generated lines. Needs the `tokenizers` package (both peer
environments have it). Deterministic: the same input lines every time.
"""
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

WORDS = (
    "the quick brown fox jumps over a lazy dog while seven bright stars shine above "
    "quiet hills and rivers run toward the sea through green fields of summer grass "
    "benchmark tokens stream from a scripted server one event at a time"
).split()


def lines():
    n = len(WORDS)
    for i in range(400):
        yield " ".join(WORDS[(i * k + k * k) % n] for k in range(1, 17)) + "."


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines(), trainer=trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "pad_token": "<pad>",
        "model_max_length": 131072,
        "clean_up_tokenization_spaces": False,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({k: config[k] for k in ("bos_token", "eos_token", "pad_token")}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
