#!/usr/bin/env bash
# Creates (once) a virtual environment with pyarrow and duckdb for the tests that read
# bench360's Parquet tables from Python. Keyed by the requirements' hash, so a change of pins
# makes a new one; reused otherwise. Prints `export BENCH360_PYTHON=…` and writes it to
# $BENCH360_HOME/python.env.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
req="$here/requirements-test.txt"
HOME_DIR="${BENCH360_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/bench360}"
PY="${PYTHON:-python3}"
tag=$(cat "$req" | sha256sum | cut -c1-12)
venv="$HOME_DIR/venv-test-$tag"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  echo "[setup-python] creating $venv" >&2
  rm -rf "$venv"
  mkdir -p "$HOME_DIR"
  "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: --require-hashes -r "$req" >&2
  "$venv/bin/python" -c "import pyarrow, duckdb" >&2
  touch "$venv/.complete"
else
  echo "[setup-python] present: $venv" >&2
fi
echo "export BENCH360_PYTHON=$venv/bin/python" > "$HOME_DIR/python.env.tmp"
mv "$HOME_DIR/python.env.tmp" "$HOME_DIR/python.env"
cat "$HOME_DIR/python.env"
