#!/usr/bin/env bash
# Creates (once) a virtual environment with the Python packages the tests use: pyarrow and duckdb
# to read bench360's Parquet tables, rouge-score and transformers' SQuAD v2 metrics as the
# reference implementations that tests/python/ref_rouge.py and ref_squad.py run, nbclient,
# ipykernel and matplotlib to execute notebooks/analysis.ipynb headless. Everything is
# pinned with hashes (requirements-test.txt: wheels only; requirements-test-sdist.txt: the
# sdist-only rouge-score, built offline against the pinned setuptools). Keyed by the hash of both
# requirement files, so a change of pins makes a new one; reused otherwise. Prints
# `export BENCH360_PYTHON=…` and writes it to $BENCH360_HOME/python.env.
set -euo pipefail
STEP=setup-python ENV_NAME=python
. "$(dirname "$0")/lib/setup.sh"
here=$(cd "$(dirname "$0")" && pwd)
req="$here/requirements-test.txt"
req_sdist="$here/requirements-test-sdist.txt"
tag=$(cat "$req" "$req_sdist" | sha256sum | cut -c1-12)
venv="$HOME_DIR/venv-test-$tag"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  # Wheels (with the pinned setuptools), then the sdist-only rouge-score built against it.
  make_venv "$venv" "$req" "$req_sdist"
  # Import check, and one ROUGE score, which must work offline (no nltk data is needed for
  # rouge_score's tokenizer and Porter stemmer). transformers is not imported as a package (its
  # dependencies are not installed): ref_squad.py loads the one file that holds the SQuAD metrics.
  "$venv/bin/python" - >&2 <<'PYEOF' || die "the test venv's import check failed (its traceback is above)"
import importlib.util, os
import pyarrow, duckdb, numpy, nltk, absl, six
import nbclient, nbformat, ipykernel, jupyter_client, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot
from nltk.stem import porter
from rouge_score import rouge_scorer
s = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True)
assert s.score("the cat sat", "The cats sat.")["rouge1"].fmeasure == 1.0
tf = importlib.util.find_spec("transformers")
assert os.path.isfile(os.path.join(tf.submodule_search_locations[0], "data", "metrics", "squad_metrics.py"))
PYEOF
  touch "$venv/.complete"
else
  log "present: $venv"
fi
record_version python-test-venv "$tag" "$("$venv/bin/python" --version 2>&1), requirements-test*.txt by sha256"
echo "export BENCH360_PYTHON=$venv/bin/python" | write_env
