"""Reference SQuAD v2 exact-match and F1 per question, for cross-checking bench360's Rust port.

Reads JSONL on stdin, one object per line: {"id": ..., "prediction": str, "answers": [str, ...]}
(an empty "answers" list marks an unanswerable question). Writes JSONL on stdout, one line per
input line, in order: {"id": ..., "exact": 0|1, "f1": float}.

The scoring is the official SQuAD v2.0 evaluation script's (evaluate-v2.0.py), which is not on
PyPI. transformers ships a faithful copy as transformers/data/metrics/squad_metrics.py
(normalize_answer, get_tokens, compute_exact, compute_f1 as in the official script; its
get_raw_scores keeps the official gold handling: gold answers that normalize to "" are dropped,
no gold left -> [""], max of exact and of F1 over the golds). We call that get_raw_scores
itself. transformers is installed without its dependencies (scripts/setup-python.sh), so the
package is never imported: only that one file is loaded, under a private package name whose
two unused imports (BasicTokenizer, only for get_final_text; transformers' logging) are stubbed.
"""
import importlib.util
import json
import logging
import os
import sys
import types

_PKG = "_bench360_transformers"


def load_squad_metrics():
    spec = importlib.util.find_spec("transformers")  # locates the package, does not run it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("transformers is not installed (run scripts/setup-python.sh)")
    path = os.path.join(spec.submodule_search_locations[0], "data", "metrics", "squad_metrics.py")
    for name in (_PKG, _PKG + ".data", _PKG + ".data.metrics", _PKG + ".models"):
        pkg = types.ModuleType(name)
        pkg.__path__ = []
        sys.modules[name] = pkg

    class BasicTokenizer:  # only get_final_text uses it; we never call that
        def __init__(self, *args, **kwargs):
            raise RuntimeError("BasicTokenizer is not available in this stub")

    bert = types.ModuleType(_PKG + ".models.bert")
    bert.BasicTokenizer = BasicTokenizer
    sys.modules[bert.__name__] = bert
    utils = types.ModuleType(_PKG + ".utils")
    utils.__path__ = []
    utils.logging = types.SimpleNamespace(get_logger=logging.getLogger)
    sys.modules[utils.__name__] = utils

    mspec = importlib.util.spec_from_file_location(_PKG + ".data.metrics.squad_metrics", path)
    module = importlib.util.module_from_spec(mspec)
    sys.modules[mspec.name] = module
    mspec.loader.exec_module(module)
    return module


def main():
    squad = load_squad_metrics()
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        row = json.loads(line)
        example = types.SimpleNamespace(
            qas_id="q", answers=[{"text": a} for a in row.get("answers") or []]
        )
        exact, f1 = squad.get_raw_scores([example], {"q": row["prediction"]})
        out.write(json.dumps({"id": row.get("id"), "exact": int(exact["q"]),
                              "f1": float(f1["q"])}) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
