#!/usr/bin/env bash
# The contributors' fast lane: formatting, lints, unit tests and the integration tests that
# need no engine, root, Docker or network (diagnostics snapshots, shipped sweeps and the
# documentation's examples, layers). The full suite is scripts/test.sh (what CI runs).
#   scripts/check.sh            everything above
#   scripts/check.sh --no-test  fmt and clippy only
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "[check] $*" >&2; }
say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy --all-targets -D warnings"
cargo clippy --locked --all-targets -- -D warnings
[ "${1:-}" = "--no-test" ] && exit 0
say "unit tests and the engine-free integration tests"
cargo test --locked --bin bench360 --test diagnostics --test sweeps --test layers --test docs
say "passed"
