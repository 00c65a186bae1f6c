#!/usr/bin/env bash
# The test command: installs what the tests use (the real llama-server and SmolLM2 model,
# pyarrow + duckdb to read the Parquet tables, lm-evaluation-harness as the reference harness, a local llama-server Docker image and Debian's
# docker-registry, Chromium, a one-node Slurm cluster; all pinned, checksummed, cached), then
# checks formatting and lints and runs every test.
# Every setup step must succeed: the first one that fails stops this script with its own error
# (and leaves $BENCH360_HOME/<name>.failed, which the tests quote if run by hand afterwards).
# The versions installed are printed and kept in target/test-setup.txt beside the test output.
set -euo pipefail
cd "$(dirname "$0")/.."
HOME_DIR="${BENCH360_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/bench360}"

# step SCRIPT: runs a setup script and evals the `export` lines it prints, only if it succeeded.
step() {
  local out
  if ! out=$("$1"); then
    echo "[test] setup step $1 failed: stopping before any test (its error is above)" >&2
    exit 1
  fi
  eval "$out"
}
step scripts/install-engine.sh
step scripts/setup-python.sh
step scripts/setup-lm-eval.sh
step scripts/setup-docker-test.sh
step scripts/setup-browser.sh
# A one-node Slurm cluster for tests/slurm.rs; stopped afterwards unless it was already up.
if ! sinfo -h >/dev/null 2>&1; then trap 'scripts/stop-slurm.sh' EXIT; fi
step scripts/setup-slurm.sh

mkdir -p target
{
  echo "# bench360 test setup, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "# $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), $(rustc --version)"
  cat "$HOME_DIR/installed-versions.txt"
} >target/test-setup.txt
echo "[test] installed components (kept in target/test-setup.txt):" >&2
sed 's/^/[test]   /' target/test-setup.txt >&2

cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked --no-fail-fast
