#!/usr/bin/env bash
# The test command: installs what the tests use (the real llama-server and SmolLM2 model,
# pyarrow + duckdb to read the Parquet tables, a local llama-server Docker image and Debian's
# docker-registry, a one-node Slurm cluster; all pinned, checksummed, cached), then checks
# formatting and lints and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/install-engine.sh)"
eval "$(scripts/setup-python.sh)"
eval "$(scripts/setup-docker-test.sh)"
eval "$(scripts/setup-browser.sh)"
# A one-node Slurm cluster for tests/slurm.rs; stopped afterwards unless it was already up.
if ! sinfo -h >/dev/null 2>&1; then trap 'scripts/stop-slurm.sh' EXIT; fi
eval "$(scripts/setup-slurm.sh)"
cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked --no-fail-fast
