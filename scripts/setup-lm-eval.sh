#!/usr/bin/env bash
# Creates (once) a virtual environment with lm-evaluation-harness 0.4.13 and its `api` extra
# (the `local-completions` model that asks an OpenAI-compatible /v1/completions endpoint; no
# torch), the reference harness that tests/reference_harness.rs and scripts/lm-eval-mmlu.py run
# beside bench360's `scoring "logprobs"` ([docs/tasks.md](../docs/tasks.md)). Every package is
# pinned with its sha256: requirements-lm-eval.txt (68 wheels) and requirements-lm-eval-sdist.txt
# (rouge_score, sqlitedict and word2number, which PyPI has only as source distributions, built
# offline against the pinned setuptools). Regenerate both with scripts/peers/lock.py. Keyed by the
# hash of both files, so a change of pins makes a new environment; reused otherwise. Prints
# `export BENCH360_LM_EVAL_PYTHON=…` and writes it to $BENCH360_HOME/lm-eval.env.
set -euo pipefail
STEP=setup-lm-eval ENV_NAME=lm-eval
. "$(dirname "$0")/lib/setup.sh"
here=$(cd "$(dirname "$0")" && pwd)
req="$here/requirements-lm-eval.txt"
req_sdist="$here/requirements-lm-eval-sdist.txt"
tag=$(cat "$req" "$req_sdist" | sha256sum | cut -c1-12)
venv="$HOME_DIR/venv-lm-eval-$tag"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  make_venv "$venv" "$req" "$req_sdist"
  # Import check, offline: the harness, its registry's local-completions model, and the
  # packages its generative tasks' filters and metrics load.
  HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 "$venv/bin/python" - >&2 <<'PYEOF' || die "the lm-eval venv's import check failed (its traceback is above)"
import importlib.metadata as md
assert md.version("lm_eval") == "0.4.13", md.version("lm_eval")
import lm_eval, lm_eval.api.registry as registry, lm_eval.models.openai_completions
assert registry.get_model("local-completions") is not None
import pyarrow, sqlitedict, word2number, rouge_score, sacrebleu, evaluate, datasets
PYEOF
  touch "$venv/.complete"
else
  log "present: $venv"
fi
record_version lm-eval "0.4.13" "PyPI wheel lm_eval-0.4.13-py3-none-any.whl and its tree, requirements-lm-eval*.txt by sha256 ($("$venv/bin/python" --version 2>&1))"
echo "export BENCH360_LM_EVAL_PYTHON=$venv/bin/python" | write_env
