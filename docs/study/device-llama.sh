#!/usr/bin/env bash
# On the GPU machine (device tool, kind nvidia-h200), from the repo root: the llama.cpp-only
# slice of issue #16 (sweeps/gpu-llama.kdl). docs/study/llama-slice.md has the procedure.
#
#   device-llama.sh build N        (carry .devcarry/a .devcarry/pNN) unpack the llama.cpp
#                                  source, start its CUDA build in the background, receive part N
#   device-llama.sh recv N         (carry .devcarry/pNN) receive part N (sha256 checked)
#   device-llama.sh start [SWEEP]  join and check the parts (the GGUFs, bench360), wait for the
#                                  build, start `bench360 apply` in the background. With
#                                  .devcarry/b carried (bench360.xz + SHA256SUMS), the binary
#                                  comes from there instead of the parts (sweeps/gpu-llama-tp.kdl:
#                                  the parts hold only the 1.5B GGUF).
#   device-llama.sh wait SECS [final]
#                                  follow the apply; when it has finished, put the artefacts
#                                  under $OUT and exit with its status; else exit 3 — or, with
#                                  `final`, collect what the cache holds so far anyway
set -uo pipefail
export ROOT=${BENCH360_GPU_ROOT:-/root}   # another folder only to try the script elsewhere
export BENCH360_LLAMA_SERVER=$ROOT/llama/llama.cpp/build/bin/llama-server
export BENCH360_SMOLLM2_GGUF=$ROOT/carry/smollm2-135m.gguf
export BENCH360_QWEN2_5_CODER_0_5B_GGUF=$ROOT/carry/qwen2.5-coder-0.5b.gguf
export BENCH360_QWEN2_5_CODER_1_5B_GGUF=$ROOT/carry/qwen2.5-coder-1.5b.gguf
log() { printf '[device-llama %s] %s\n' "$(date -u +%T)" "$*"; }

recv() {
  # One folder per part: .devcarry/pNN (part and MANIFEST), checked and kept in $ROOT/parts.
  local n
  n=$(printf '%02d' "$((10#$1))")
  BENCH360_GPU_ROOT=$ROOT docs/study/device-receive.sh "$n" ".devcarry/p$n" 2>&1 || return 1
  log "build: $(tail -n 1 $ROOT/llama/build.log 2>/dev/null | cut -c1-80)"
}

collect() {
  local sweep=$1 rc
  rc=$(cat $ROOT/apply.rc 2>/dev/null || echo unfinished)
  log "collecting (apply status $rc)"
  $ROOT/bench360 --cache $ROOT/cache report "$sweep" > $ROOT/report.out 2>&1 || tail -n 5 $ROOT/report.out
  cp $ROOT/apply.log "$OUT/apply.log"
  cp $ROOT/cache/reports/*/report.md "$OUT/" 2>/dev/null
  cp $ROOT/cache/reports/*/summary.csv "$OUT/" 2>/dev/null
  # Every run's telemetry summary, keyed by label.
  python3 docs/study/telemetry-summaries.py "$ROOT/cache" > "$OUT/telemetry-summaries.json"
  (cd $ROOT && tar -cJf "$OUT/cache.tar.xz" --exclude=chunks.parquet cache/records cache/objects cache/labels cache/FORMAT 2>/dev/null)
  (cd $ROOT && find cache/objects -name chunks.parquet -print0 | tar -cJf "$OUT/chunks.tar.xz" --null -T - 2>/dev/null)
  [ "$(stat -c %s "$OUT/chunks.tar.xz" 2>/dev/null || echo 0)" -lt 16000000 ] || rm -f "$OUT/chunks.tar.xz"
  { nvidia-smi; echo; nvidia-smi topo -m; echo; $BENCH360_LLAMA_SERVER --version 2>&1 | tail -n 3; echo; tail -n 5 $ROOT/llama/build.log;
    echo; cat $ROOT/times.txt 2>/dev/null; } > "$OUT/device-info.txt" 2>&1
  ls -l "$OUT"
  tail -n 30 $ROOT/apply.log
  [ "$rc" = unfinished ] && exit 4
  exit "$rc"
}

case ${1:-} in
  build)
    mkdir -p $ROOT/llama
    tar -xJf .devcarry/a/llama-src.tar.xz -C $ROOT/llama
    cd $ROOT/llama/llama.cpp
    setsid nohup bash -c '
      cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF &&
      cmake --build build --target llama-server -j $(nproc)
      echo $? > $ROOT/llama/build.rc' > $ROOT/llama/build.log 2>&1 < /dev/null &
    cd - > /dev/null
    echo "build started $(date -u +%T)" > $ROOT/times.txt
    nvidia-smi --query-gpu=name,driver_version,power.draw,memory.used --format=csv
    recv "$2"
    ;;
  recv)
    recv "$2"
    ;;
  start)
    sweep=${2:-sweeps/gpu-llama.kdl}
    P=$ROOT/parts; C=$ROOT/carry
    missing=$(grep -o 'part[0-9][0-9]$' $P/MANIFEST | while read -r p; do [ -f $P/$p ] || echo $p; done)
    [ -z "$missing" ] || { log "missing parts: $missing"; exit 1; }
    rm -rf $C; mkdir -p $C
    cat $(grep -o 'part[0-9][0-9]$' $P/MANIFEST | sed "s|^|$P/|") | tar -xf - -C $C || exit 1
    (cd $C && sha256sum -c SHA256SUMS) || { log "joined files do not match SHA256SUMS"; exit 1; }
    if [ -f .devcarry/b/bench360.xz ]; then
      (cd .devcarry/b && sha256sum -c SHA256SUMS) || { log "bench360.xz does not match"; exit 1; }
      xz -dc .devcarry/b/bench360.xz > $ROOT/bench360 && chmod +x $ROOT/bench360
    else
      xz -dc $C/bench360.xz > $ROOT/bench360 && chmod +x $ROOT/bench360
    fi
    $ROOT/bench360 --version
    for _ in $(seq 1 60); do [ -f $ROOT/llama/build.rc ] && break; sleep 5; done
    log "llama.cpp build rc: $(cat $ROOT/llama/build.rc 2>/dev/null || echo unfinished)"; tail -n 2 $ROOT/llama/build.log
    [ -x $BENCH360_LLAMA_SERVER ] || { log "no llama-server"; exit 1; }
    echo "build done (seen) $(date -u +%T)" >> $ROOT/times.txt
    $BENCH360_LLAMA_SERVER --version 2>&1 | tail -n 2
    echo "$sweep" > $ROOT/apply.sweep; rm -f $ROOT/apply.rc
    echo "apply started $(date -u +%T)" >> $ROOT/times.txt
    setsid nohup bash -c "
      $ROOT/bench360 --cache $ROOT/cache plan '$sweep' | tail -n 3
      $ROOT/bench360 --cache $ROOT/cache apply '$sweep'
      echo \$? > $ROOT/apply.rc; echo \"apply ended \$(date -u +%T)\" >> $ROOT/times.txt" > $ROOT/apply.log 2>&1 < /dev/null &
    sleep 20
    log "apply runs in the background; next: device-llama.sh wait 540"
    tail -n 12 $ROOT/apply.log
    ;;
  wait)
    limit=${2:-540}; final=${3:-}
    sweep=$(cat $ROOT/apply.sweep) || exit 1
    t0=$SECONDS; last=0
    while [ $((SECONDS - t0)) -lt "$limit" ]; do
      [ -f $ROOT/apply.rc ] && collect "$sweep"
      if [ $((SECONDS - last)) -ge 60 ]; then
        last=$SECONDS
        log "running; $(nvidia-smi --query-gpu=power.draw,memory.used,utilization.gpu --format=csv,noheader)"
        tail -n 2 $ROOT/apply.log
      fi
      sleep 3
    done
    [ -f $ROOT/apply.rc ] && collect "$sweep"
    if [ "$final" = final ]; then collect "$sweep"; fi
    log "still running after $limit s: call wait again now"
    tail -n 15 $ROOT/apply.log
    exit 3
    ;;
  *) echo "usage: $0 build N | recv N | start [SWEEP] | wait SECS [final]" >&2; exit 2 ;;
esac
