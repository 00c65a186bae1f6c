#!/usr/bin/env bash
# On the GPU machine, from the repo root: the last steps of docs/study/README.md.
#
#   docs/study/device-engines.sh start [SWEEP]   (call carrying .devcarry/b)
#       joins and checks the GGUF (/root/model.gguf), unpacks bench360 to /root/bench360,
#       runs device-unpack.sh (packs, wrappers, HF model), then starts in the background (it
#       outlives the call): wait for the llama.cpp CUDA build that device-build.sh started,
#       `bench360 plan` and `bench360 apply SWEEP` (default sweeps/gpu-engines.kdl). Returns
#       once the build is seen finished (or after 4 min), with the plan's last lines.
#   docs/study/device-engines.sh wait [SECONDS]  (call carrying nothing)
#       follows the apply for up to SECONDS (default 540); when it has finished, writes the
#       report, the apply log and the cache (tar.xz) under $OUT and exits with apply's status;
#       if it is still running, exits 3: call `wait` again within 30 s.
set -uo pipefail
cmd=${1:-}
ROOT=${BENCH360_GPU_ROOT:-/root}   # another folder only to try the script elsewhere
export BENCH360_GPU_ROOT=$ROOT
export BENCH360_SMOLLM2_GGUF=$ROOT/model.gguf
export BENCH360_SMOLLM2_HF=$ROOT/hf-smollm2
export BENCH360_LLAMA_SERVER=$ROOT/llama/llama.cpp/build/bin/llama-server
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
log() { printf '[device-engines] %s\n' "$*"; }

collect() {
  local sweep rc
  sweep=$(cat $ROOT/apply.sweep)
  rc=$(cat $ROOT/apply.rc)
  log "apply finished with status $rc"
  $ROOT/bench360 --cache $ROOT/cache report "$sweep" > /dev/null 2>&1
  cp $ROOT/apply.log "$OUT/apply.log"
  cp $ROOT/cache/reports/*/report.md "$OUT/" 2>/dev/null
  cp $ROOT/cache/reports/*/summary.csv "$OUT/" 2>/dev/null
  tar -cJf "$OUT/cache.tar.xz" -C $ROOT cache/records cache/objects cache/labels cache/FORMAT 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,power.draw,memory.used --format=csv | tee "$OUT/nvidia-smi.txt"
  tail -n 40 $ROOT/apply.log
  exit "$rc"
}

case $cmd in
  start)
    sweep=${2:-sweeps/gpu-engines.kdl}
    if ! echo "$GGUF_SHA256  $BENCH360_SMOLLM2_GGUF" | sha256sum -c --quiet - 2>/dev/null; then
      cat $ROOT/model.part-aa .devcarry/b/model.part-ab > $BENCH360_SMOLLM2_GGUF || exit 1
      echo "$GGUF_SHA256  $BENCH360_SMOLLM2_GGUF" | sha256sum -c - || exit 1
    fi
    if [ -f .devcarry/b/bench360.xz ]; then
      xz -dc .devcarry/b/bench360.xz > $ROOT/bench360 && chmod +x $ROOT/bench360
    fi
    [ -x $ROOT/bench360 ] || { log "no /root/bench360 (carry .devcarry/b)"; exit 1; }
    docs/study/device-unpack.sh || exit 1
    rm -f $ROOT/apply.rc
    echo "$sweep" > $ROOT/apply.sweep
    # In the background (it outlives this call): wait for the llama.cpp build that
    # device-build.sh started, then plan and apply.
    setsid nohup bash -c "
      for _ in \$(seq 1 120); do [ -f $ROOT/llama/build.rc ] && break; sleep 5; done
      echo \"llama.cpp build: rc \$(cat $ROOT/llama/build.rc 2>/dev/null || echo unfinished)\"
      [ -x '$BENCH360_LLAMA_SERVER' ] || { echo 'no llama-server: was device-build.sh run in this hold?'; echo 1 > $ROOT/apply.rc; exit; }
      $ROOT/bench360 --cache $ROOT/cache plan '$sweep' | tail -n 5
      $ROOT/bench360 --cache $ROOT/cache apply '$sweep'
      echo \$? > $ROOT/apply.rc" > $ROOT/apply.log 2>&1 < /dev/null &
    for _ in $(seq 1 48); do grep -q 'llama.cpp build: rc' $ROOT/apply.log 2>/dev/null && break; sleep 5; done
    sleep 10
    log "apply runs in the background (log $ROOT/apply.log); next: device-engines.sh wait"
    tail -n 3 $ROOT/llama/build.log
    tail -n 12 $ROOT/apply.log
    ;;
  wait)
    limit=${2:-540}
    [ -f $ROOT/apply.sweep ] || { log "no apply was started (device-engines.sh start)"; exit 1; }
    t0=$SECONDS; last=0
    while [ $((SECONDS - t0)) -lt "$limit" ]; do
      [ -f $ROOT/apply.rc ] && collect
      if [ $((SECONDS - last)) -ge 60 ]; then
        last=$SECONDS
        log "$(date -u +%T) running; $(nvidia-smi --query-gpu=power.draw,memory.used,utilization.gpu --format=csv,noheader)"
        tail -n 3 $ROOT/apply.log
      fi
      sleep 5
    done
    [ -f $ROOT/apply.rc ] && collect
    log "still running after ${limit} s: call \`docs/study/device-engines.sh wait\` again now"
    tail -n 15 $ROOT/apply.log
    exit 3
    ;;
  *)
    echo "usage: $0 start [SWEEP] | wait [SECONDS]" >&2
    exit 2
    ;;
esac
