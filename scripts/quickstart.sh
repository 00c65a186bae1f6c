#!/usr/bin/env bash
# The quickstart on a fresh machine: installs the CPU engine and model (once; cached under
# ~/.cache/bench360), builds bench360, shows the plan and applies sweeps/quickstart.kdl.
# Run it again: nothing reruns, the report is printed from the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=$(scripts/install-engine.sh) || { echo "[quickstart] scripts/install-engine.sh failed (its error is above)" >&2; exit 1; }
eval "$engine"
cargo build --release --locked
./target/release/bench360 plan sweeps/quickstart.kdl
./target/release/bench360 apply sweeps/quickstart.kdl
