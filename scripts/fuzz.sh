#!/usr/bin/env bash
# Longer seeded mutation fuzzing of every parser of outside input (sweep files, SSE streams,
# Prometheus text, JSONL/CSV/TSV/Parquet datasets, replay traces): N cases per target
# (default 20000) in a release build, seed from BENCH360_FUZZ_SEED (default fixed; pass e.g.
# `$RANDOM` for new ground). A case that makes a parser panic is saved under
# tests/fixtures/fuzz/crashers/ (commit it: every test run replays it) and fails the run.
#   scripts/fuzz.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-20000}"
BENCH360_FUZZ_CASES="$N" cargo test --release --locked --bin bench360 fuzz:: -- --test-threads 2
echo "fuzz: $N cases per target, seed ${BENCH360_FUZZ_SEED:-default}; crashers kept: $(find tests/fixtures/fuzz/crashers -type f ! -name .gitkeep | wc -l)"
