#!/usr/bin/env bash
# The quickstart on a fresh machine: installs the CPU engine and model (once; cached under
# ~/.cache/bench360), builds bench360, shows the plan and applies sweeps/quickstart.kdl.
# Run it again: nothing reruns, the report is printed from the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/install-engine.sh)"
cargo build --release --locked
./target/release/bench360 plan sweeps/quickstart.kdl
./target/release/bench360 apply sweeps/quickstart.kdl
