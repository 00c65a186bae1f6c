#!/usr/bin/env bash
# Longer seeded mutation fuzzing of every parser of outside input (sweep files, SSE streams,
# Prometheus text, JSONL/CSV/TSV/Parquet datasets, replay traces): N cases per target
# (default 20000) in a release build, seed from BENCH360_FUZZ_SEED (default fixed; pass e.g.
# `$RANDOM` for new ground). A benchmark, not a test: it fails on a case that makes a parser
# panic (saved under tests/fixtures/fuzz/crashers/: commit it, every test run replays it), on a
# case that aborts the process (a stack overflow: the case in flight is saved there too), and
# on a case that takes over 1 s (saved under tests/fixtures/fuzz/slow/). Then it times
# `bench360 validate` on every committed sweep crasher (each must exit 2, well under 1 s).
#   scripts/fuzz.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-20000}"
inflight=$(mktemp -d)
trap 'rm -rf "$inflight"' EXIT
set +e
BENCH360_FUZZ_CASES="$N" BENCH360_FUZZ_SLOW_FAILS=1 BENCH360_FUZZ_INFLIGHT="$inflight" \
  cargo test --release --locked --bin bench360 fuzz:: -- --test-threads 1
rc=$?
set -e
for f in "$inflight"/*-inflight; do
  [ -e "$f" ] || continue
  # A case still in flight when the process ended: it aborted (or hung and was killed). One
  # test thread, so only the culprit is in flight.
  target=$(basename "$f" -inflight)
  name="$target-$(b3sum --no-names "$f" 2>/dev/null | cut -c1-16 || sha256sum "$f" | cut -c1-16)"
  mkdir -p tests/fixtures/fuzz/crashers
  cp "$f" "tests/fixtures/fuzz/crashers/$name"
  echo "fuzz: target $target aborted on a case; kept as tests/fixtures/fuzz/crashers/$name" >&2
  rc=1
done
cargo build --release --locked --quiet
slowest=0
for f in tests/fixtures/fuzz/crashers/sweep-*; do
  [ -e "$f" ] || continue
  start=$(date +%s%N)
  set +e
  NO_COLOR=1 target/release/bench360 validate "$f" >/dev/null 2>&1
  code=$?
  set -e
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  [ "$ms" -gt "$slowest" ] && slowest=$ms
  printf 'fuzz: validate %s: exit %s in %s ms\n' "$(basename "$f")" "$code" "$ms"
  if [ "$code" != 2 ] || [ "$ms" -gt 1000 ]; then echo "fuzz: $f must exit 2 in under 1 s" >&2; rc=1; fi
done
echo "fuzz: $N cases per target, seed ${BENCH360_FUZZ_SEED:-default}; crashers kept: $(find tests/fixtures/fuzz/crashers -type f ! -name .gitkeep | wc -l); slow kept: $(find tests/fixtures/fuzz/slow -type f 2>/dev/null | wc -l); slowest sweep crasher: $slowest ms; exit $rc"
exit "$rc"
