#!/usr/bin/env bash
# Soak test of crash safety: N trials (default 50) of `bench360 apply` killed with SIGKILL at
# a random moment, then resumed. Each trial checks: the resumed apply exits 0, `bench360
# verify` finds every object whole, no temp folder is left, no engine outlives its apply,
# and a third apply runs nothing. The engine is examples/fault_engine.rs (mode ok), so a
# trial takes seconds; the sweep has three runs, three scores and a report to be killed in.
#   scripts/soak.sh [N] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-50}"
RANDOM="${2:-360}"
cargo build --locked --quiet --bin bench360 --example fault_engine
B="$PWD/target/debug/bench360"
ENGINE="$PWD/target/debug/examples/fault_engine"
DATA="$PWD/datasets/mmlu"
WORK=$(mktemp -d)
trap 'pkill -9 -f "$ENGINE" 2>/dev/null || true; rm -rf "$WORK"' EXIT
cat > "$WORK/soak.kdl" <<KDL
sweep "soak" { seed 3; }
defaults { warmup 1; request-timeout 5; max-tokens 8; }
model "m" { path "$WORK/none.gguf"; quantization "q4_1"; }
engine "fault" {
    kind "openai"
    binary "$ENGINE"
    args "--port" "{port}" "--mode" "ok"
    startup-timeout 5
}
task "mmlu" { kind "mmlu"; dataset "$DATA"; samples 20; }
scenario "single" { kind "single"; requests 20; }
scenario "batch" { kind "batch"; batch-size 4; batches 3; }
scenario "conc" { kind "concurrency"; concurrency 4; requests 20; }
KDL
echo "weights unused by the fault engine" > "$WORK/none.gguf"

# How long a whole apply takes: kills land anywhere in it.
t0=$(date +%s%N)
"$B" --cache "$WORK/probe" apply "$WORK/soak.kdl" >/dev/null 2>&1
full_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "soak: $N trials; a whole apply takes ${full_ms} ms"

pass=0; fail=0
for i in $(seq 1 "$N"); do
  cache="$WORK/c$i"
  delay_ms=$(( (RANDOM * 32768 + RANDOM) % (full_ms + 1) ))
  "$B" --cache "$cache" apply "$WORK/soak.kdl" >/dev/null 2>&1 &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  sleep 0.2
  why=""
  if pgrep -f "$ENGINE" >/dev/null; then why="an engine outlived its apply"; pkill -9 -f "$ENGINE" || true; fi
  if ! "$B" --cache "$cache" apply "$WORK/soak.kdl" >"$WORK/resume.log" 2>&1; then
    why="${why:+$why; }resume exited $? ($(tail -1 "$WORK/resume.log"))"
  fi
  if ! "$B" --cache "$cache" verify >"$WORK/verify.log" 2>&1; then
    why="${why:+$why; }verify: $(head -1 "$WORK/verify.log")"
  fi
  if [ -d "$cache/tmp" ] && [ -n "$(ls -A "$cache/tmp")" ]; then why="${why:+$why; }temp left: $(ls "$cache/tmp" | head -1)"; fi
  again=$("$B" --cache "$cache" apply "$WORK/soak.kdl" 2>&1 | grep -c '^✓ ' || true)
  if [ "$again" != "0" ]; then why="${why:+$why; }third apply ran $again node(s)"; fi
  if [ -z "$why" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "trial $i (killed at ${delay_ms} ms): $why"
  fi
  rm -rf "$cache"
done
echo "soak: $pass of $N trials recovered, $fail failed"
[ "$fail" = 0 ]
