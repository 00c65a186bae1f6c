#!/usr/bin/env bash
# On the GPU machine (device tool, kind nvidia-h200-x2), from the repo root: the vLLM slice of
# issue #16 (sweeps/gpu-vllm.kdl: Qwen2.5-Coder-1.5B in bf16 and FP8, tensor parallel 1 and 2).
# docs/study/README.md ("vLLM slice") has the procedure.
#
#   device-vllm.sh recv N [info] [build]
#                                  (carry .devcarry/pNN) receive part N (sha256 checked); with
#                                  `info`, first print the GPUs, their links and torch's view;
#                                  with `build` (carry .devcarry/a too), start llama.cpp's CUDA
#                                  build in the background (device-build.sh, ~5 min), which
#                                  `start` waits for before `plan` (for a sweep with llama.cpp)
#   device-vllm.sh keep FILE…      copy files of the carried tree (the earlier holds' cache
#                                  archives) to $ROOT/keep/<same path>, in a call of their own, so
#                                  that the call that carries the last part need not carry them:
#                                  SEED_CACHE then names $ROOT/keep/… (absolute paths)
#   device-vllm.sh start [SWEEP] [SECS] [AXIS=VALUE…]…
#                                  (carry .devcarry/b: bench360.xz + SHA256SUMS) check that every
#                                  part is there, then in the background (setsid, so it outlives
#                                  the call): device-unpack.sh (join, check, unpack the vLLM pack,
#                                  the gguf wheel, the /root/bin wrappers, convert the GGUF into
#                                  /root/hf-qwen2.5-coder-1.5b with a greedy check generation),
#                                  `bench360 plan`, `bench360 apply`; then `wait SECS` (default 0).
#                                  With AXIS=VALUE (e.g. engine=vllm), `apply --only AXIS=VALUE`
#                                  runs first and the whole sweep after it: apply does not follow
#                                  plan's order (it began with fp8@vllm-tp2), so this is how the
#                                  rows that matter most come first. Several arguments after
#                                  SECS: one `apply --only …` each, in that order, before the
#                                  whole sweep; one argument may hold several AXIS=VALUE
#                                  separated by spaces (all must match: `engine=vllm
#                                  scenario=quality`); a word `set:PATH=VALUE` is `--set
#                                  PATH=VALUE` for that stage (`set:sweep.repeats=6` adds a
#                                  sixth repeat without changing a key of the five;
#                                  `set:telemetry.metrics-interval=1` gives the stage's runs
#                                  their own keys).
#                                  Environment, for a hold that does more before the sweep:
#                                  SEED_CACHE="FILE.tar.xz…"  a cache from earlier holds
#                                    (cache/records, cache/objects…, and cache/salt: without
#                                    the salt no deployment with `env` keeps its key), several
#                                    archives unpacked in the order given (a later hold's over
#                                    an earlier one's; the chunk traces' chunks.tar.xz too:
#                                    a run whose chunks.parquet is missing is damaged and runs
#                                    again),
#                                    unpacked into $ROOT/cache before `plan` unless a cache is
#                                    there already, so that apply runs only what is missing
#                                    (the machine's CPU model and GPU driver are in the
#                                    cold-start keys too: another host reruns them);
#                                  STAGES_ONLY=1  the stages only, not the whole sweep after
#                                    them (a hold that carries some of the sweep's engines);
#                                  REFERENCE=SWEEP  first docs/study/device-reference.sh SWEEP
#                                    (vLLM started outside bench360, bench360's endpoint sweep
#                                    and lm-evaluation-harness against it, vLLM stopped), at
#                                    most REFERENCE_LIMIT s (default 900); its outputs travel
#                                    back as reference.tar.xz with the others
#   device-vllm.sh stop            stop a running apply gracefully (SIGTERM to bench360 by its pid:
#                                  engines stopped, nothing half-recorded), so that `start` can
#                                  run again; never by name pattern (that matches the caller too)
#   device-vllm.sh wait SECS [final]
#                                  follow the apply; when it has finished, put the artefacts under
#                                  $OUT and exit with its status; else exit 3 — or, with `final`,
#                                  collect what the cache holds so far anyway (exit 4); a
#                                  call that exits 3 brings back delta-HHMMSS.tar.xz, what
#                                  finished since the call before (a machine lost between two
#                                  calls then loses only what ran during the last one)
#
# A sweep edited while the machine is warm: carry .devcarry/b again and `start SWEEP SECS`
# (the unpacking and the conversion are kept; apply's cache runs only what changed).
set -uo pipefail
export ROOT=${BENCH360_GPU_ROOT:-/root}   # another folder only to try the script elsewhere
# Never NVLink multicast on this machine (device KINDS.md): inherited by bench360 and the engines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export VLLM_ALLREDUCE_USE_SYMM_MEM=0
# device-unpack.sh converts this GGUF (joined from the parts) into this folder.
export BENCH360_SMOLLM2_GGUF=$ROOT/carry/qwen2.5-coder-1.5b.gguf
export BENCH360_SMOLLM2_HF=$ROOT/hf-qwen2.5-coder-1.5b
# llama.cpp, when `recv … build` started its build, and the GGUF it serves.
export BENCH360_LLAMA_SERVER=$ROOT/llama/llama.cpp/build/bin/llama-server
export BENCH360_QWEN2_5_CODER_1_5B_GGUF=$ROOT/carry/qwen2.5-coder-1.5b.gguf
# The small model, when its GGUF is carried (device-unpack.sh converts it into $ROOT/hf-qwen2.5-coder-0.5b).
export BENCH360_QWEN2_5_CODER_0_5B_GGUF=$ROOT/carry/qwen2.5-coder-0.5b.gguf
RUN=$ROOT/run   # a copy of the sweeps, datasets and scripts that apply reads (the tree is re-synced every call)
log() { printf '[device-vllm %s] %s\n' "$(date -u +%T)" "$*"; }

recv() {
  # One folder per part: .devcarry/pNN (part and MANIFEST), checked and kept in $ROOT/parts.
  local n
  n=$(printf '%02d' "$((10#$1))")
  BENCH360_GPU_ROOT=$ROOT docs/study/device-receive.sh "$n" ".devcarry/p$n" 2>&1 || return 1
}

# Puts FILE under $OUT as NAME, or in pieces NAME.00, NAME.01, … of 15 MiB when it is 16 MB or
# more (at most 16 MiB a file comes back); a missing FILE puts nothing.
bring_back() {
  local f=$1 name=$2
  [ -f "$f" ] || return 0
  if [ "$(stat -c %s "$f")" -lt 16000000 ]; then mv "$f" "$OUT/$name"
  else split -b 15M -d -a 2 "$f" "$OUT/$name."; rm -f "$f"; fi
}

collect() {
  local sweep=$1 rc
  rc=$(cat $ROOT/apply.rc 2>/dev/null || echo unfinished)
  log "collecting (apply status $rc)"
  (cd $RUN && $ROOT/bench360 --cache $ROOT/cache report "$sweep" > $ROOT/report.out 2>&1) || tail -n 5 $ROOT/report.out
  cp $ROOT/apply.log "$OUT/apply.log"
  # What device-reference.sh left (part A of a hold with REFERENCE=…), if it ran.
  [ -d $ROOT/reference ] && (cd $ROOT && tar -cJf "$OUT/reference.tar.xz" --exclude=chunks.parquet \
    reference $([ -d cache-ref ] && echo cache-ref/records cache-ref/objects cache-ref/labels cache-ref/FORMAT cache-ref/reports) 2>/dev/null)
  cp $ROOT/cache/reports/*/report.md "$OUT/" 2>/dev/null
  cp $ROOT/cache/reports/*/summary.csv "$OUT/" 2>/dev/null
  # Every run's telemetry summary, keyed by label.
  python3 docs/study/telemetry-summaries.py "$ROOT/cache" > "$OUT/telemetry-summaries.json"
  # With the cache's salt: node keys hash the engines' `env` values keyed by it, so a cache
  # carried to a later hold without it matches none of its deployments (the first seed hold's
  # did not keep it). The study sweeps' env values are no secrets.
  # At most 16 MiB a file and 8 files come back: a larger cache comes in pieces of 15 MiB
  # (cache.tar.xz.00, .01, …: `cat cache.tar.xz.* > cache.tar.xz` here).
  # A hold brings back only what it recorded itself (the earlier holds' records are here
  # already, in their archives), with the chunk traces: the ninth seed hold's whole cache of 303
  # records took 3 pieces and left no room for its last runs' traces. Only when that would not
  # fit in 3 pieces are the traces left out. (`start` marks the hold's start; without the mark,
  # the whole cache is the hold's.)
  [ -f $ROOT/hold.start ] || touch -d @0 $ROOT/hold.start
  since=$(stat -c %Y $ROOT/hold.start)
  n=$(pack_since "$since" "$ROOT/cache.tar.xz")
  if [ "$(stat -c %s "$ROOT/cache.tar.xz" 2>/dev/null || echo 0)" -ge $((45 * 1048576)) ]; then
    log "the hold's records with their chunk traces take more than 3 pieces: traces left out"
    n=$(NO_TRACES=1 pack_since "$since" "$ROOT/cache.tar.xz")
  fi
  log "cache.tar.xz: the $n records written during this hold, their objects, the labels, the salt"
  csize=$(stat -c %s "$ROOT/cache.tar.xz" 2>/dev/null || echo 0)
  bring_back "$ROOT/cache.tar.xz" cache.tar.xz
  # 8 files and 64 MiB come back at most: beyond 3 pieces (with the 5 other files) the cache
  # cannot come back whole — say so, loudly, rather than lose it quietly.
  [ "$(ls "$OUT" | grep -c '^cache\.tar\.xz')" -le 3 ] || log "ERROR: the cache is $csize bytes: more than 3 pieces of 15 MiB; collect it in two calls"
  { nvidia-smi; echo; nvidia-smi topo -m; echo; nproc; free -g; df -h $ROOT | tail -n 1; echo
    $ROOT/bin/vllm-python -c 'import vllm, torch, transformers; print("vllm", vllm.__version__, "torch", torch.__version__, "transformers", transformers.__version__)' 2>&1 | tail -n 1
    ls $ROOT/site-vllm | grep -E '\.dist-info$' | sed 's/\.dist-info$//' | tr '\n' ' '; echo; echo
    cat $ROOT/hf-qwen2.5-coder-1.5b/config.json 2>/dev/null; echo
    ls $ROOT/site-sglang $ROOT/site-lmdeploy 2>/dev/null | grep -E '^(sglang|sgl_kernel|lmdeploy|flashinfer_python|transformers|triton)-[0-9].*\.dist-info$' | sed 's/\.dist-info$//' | tr '\n' ' '; echo
    [ -x $BENCH360_LLAMA_SERVER ] && { $BENCH360_LLAMA_SERVER --version 2>&1 | tail -n 2; tail -n 3 $ROOT/llama/build.log; }
    du -sh $ROOT/hf-qwen2.5-coder-1.5b $ROOT/site-vllm 2>/dev/null; echo
    # The end of every engine log (bench360 keeps them per node in the cache).
    for f in $(ls -t $ROOT/cache/objects/*/engine.log $ROOT/cache/objects/*/launch.log 2>/dev/null | head -n 8); do
      echo "== $f"; tail -n 15 "$f"; done
    echo; cat $ROOT/times.txt 2>/dev/null; } > "$OUT/device-info.txt" 2>&1
  ls -l "$OUT"
  tail -n 30 $ROOT/apply.log
  [ "$rc" = unfinished ] && exit 4
  exit "$rc"
}

# Packs into ARCHIVE the records written or rewritten since SINCE (seconds since the epoch, less
# 10 s of slack: a record is renamed into place moments after it is written), their objects with
# the chunk traces (not with NO_TRACES=1), the labels written during the hold, the salt and
# FORMAT; prints how many records. No records: no archive, and 0.
pack_since() {
  local since=$1 archive=$2 list
  rm -f "$archive"
  list=$(cd $ROOT && find cache/records -name '*.json' -newermt "@$((since - 10))" | sort)
  [ -n "$list" ] || { echo 0; return 0; }
  (cd $ROOT && { for r in $list; do echo "$r"; k=$(basename "$r" .json)
      [ -d "cache/objects/$k" ] && echo "cache/objects/$k"; done
    find cache/labels -type f -newer $ROOT/hold.start; echo cache/salt; echo cache/FORMAT; } \
    | XZ_OPT=-T0 tar -cJf "$archive" ${NO_TRACES:+--exclude=chunks.parquet} -T - 2>/dev/null) \
    || { log "ERROR: could not pack $archive" >&2; rm -f "$archive"; echo 0; return 1; }
  echo "$list" | wc -l
}

# What finished since the last call, brought back by every call that returns while apply runs
# (exit 3), so that a machine lost between calls loses at most what ran during the last one: the
# records written or rewritten since the previous delta, their objects with the chunk traces,
# the labels, the salt. Here: unpack the hold's delta-*.tar.xz in order (then its cache.tar.xz,
# if one came back).
delta() {
  local since stamp n
  [ -f $ROOT/hold.start ] || return 0
  since=$(stat -c %Y $ROOT/delta.last 2>/dev/null || stat -c %Y $ROOT/hold.start)
  touch $ROOT/delta.next; stamp=$(date -u +%H%M%S)
  n=$(pack_since "$since" $ROOT/delta.tar.xz) || return 0
  [ "$n" != 0 ] || { rm -f $ROOT/delta.next; return 0; }
  bring_back $ROOT/delta.tar.xz "delta-$stamp.tar.xz"
  mv $ROOT/delta.next $ROOT/delta.last
  log "delta-$stamp: $n records written since the last call"
}

wait_apply() {
  local limit=$1 final=${2:-} sweep t0 last=0
  sweep=$(cat $ROOT/apply.sweep) || exit 1
  t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$limit" ]; do
    [ -f $ROOT/apply.rc ] && collect "$sweep"
    if [ $((SECONDS - last)) -ge 60 ]; then
      last=$SECONDS
      log "running; $(nvidia-smi --query-gpu=index,power.draw,memory.used,utilization.gpu --format=csv,noheader | tr '\n' ';')"
      tail -n 3 $ROOT/apply.log
    fi
    sleep 3
  done
  [ -f $ROOT/apply.rc ] && collect "$sweep"
  if [ "$final" = final ]; then collect "$sweep"; fi
  delta
  log "still running after $limit s: call wait again now"
  tail -n 15 $ROOT/apply.log
  exit 3
}

case ${1:-} in
  keep)
    shift
    [ $# -gt 0 ] || { log "keep: which files?"; exit 2; }
    for f in "$@"; do
      [ -f "$f" ] || { log "keep: no $f in the carried tree"; exit 1; }
      mkdir -p "$ROOT/keep/$(dirname "$f")" && cp "$f" "$ROOT/keep/$f" || exit 1
      log "kept $ROOT/keep/$f ($(stat -c %s "$f") bytes, sha256 $(sha256sum "$f" | cut -c1-12))"
    done
    ;;
  recv)
    if [ "${3:-}" = info ]; then
      echo "machine up $(date -u +%T)" > $ROOT/times.txt
      nvidia-smi --query-gpu=index,name,driver_version,power.draw,memory.used --format=csv
      nvidia-smi topo -m 2>&1 | head -n 4
      python3 -c 'import torch, pyarrow; print("torch", torch.__version__, "GPUs", torch.cuda.device_count(), "pyarrow", pyarrow.__version__)'
      grep -m1 'model name' /proc/cpuinfo; head -n 1 /proc/driver/nvidia/version 2>/dev/null
      # The machine's kernel build: the one difference run.json recorded between the seed
      # study's machines (LMDeploy's single-stream TPOT 1.5-1.7 x as long on
      # 6.18.44-fc-v1147-gpu as on -v973).
      echo "kernel $(uname -r)" | tee -a $ROOT/times.txt
      nproc; df -h $ROOT | tail -n 1
    fi
    if [ "${3:-}" = build ] || [ "${4:-}" = build ]; then bash docs/study/device-build.sh || exit 1; fi
    recv "$2"
    ;;
  start)
    sweep=${2:-sweeps/gpu-vllm.kdl}; secs=${3:-0}; shift $(( $# < 3 ? $# : 3 ))
    P=$ROOT/parts
    [ -f $P/MANIFEST ] || { log "no parts received"; exit 1; }
    missing=$(grep -o 'part[0-9][0-9]$' $P/MANIFEST | while read -r p; do [ -f $P/$p ] || echo $p; done)
    [ -z "$missing" ] || { log "missing parts: $(echo $missing)"; exit 1; }
    if [ -f .devcarry/b/bench360.xz ]; then
      (cd .devcarry/b && sha256sum -c SHA256SUMS) || { log "bench360.xz does not match"; exit 1; }
      xz -dc .devcarry/b/bench360.xz > $ROOT/bench360.new && chmod +x $ROOT/bench360.new && mv $ROOT/bench360.new $ROOT/bench360
    fi
    [ -x $ROOT/bench360 ] || { log "no bench360: carry .devcarry/b"; exit 1; }
    $ROOT/bench360 --version
    [ -f $ROOT/apply.rc ] || [ ! -f $ROOT/apply.sweep ] || { log "an apply is still running: wait for it"; exit 1; }
    rm -rf $RUN; mkdir -p $RUN
    cp -r sweeps datasets scripts docs $RUN/
    echo "$sweep" > $ROOT/apply.sweep; rm -f $ROOT/apply.rc
    echo "start $(date -u +%T)" >> $ROOT/times.txt; [ -f $ROOT/hold.start ] || touch $ROOT/hold.start
    only=true
    for stage in "$@"; do
      flags=""
      for cond in $stage; do
        case $cond in
          set:*) flags="$flags --set '${cond#set:}'" ;;
          *) flags="$flags --only '$cond'" ;;
        esac
      done
      only="$only
      echo \"apply$flags started \$(date -u +%T)\" >> $ROOT/times.txt
      $ROOT/bench360 --cache $ROOT/cache$flags apply '$sweep' & echo \$! > $ROOT/bench360.pid; wait \$!
      s=\$?; [ \$s = 0 ] || stage_rc=\$s"
    done
    # The whole sweep after the stages, unless STAGES_ONLY=1 (a hold that carries only some
    # engines: the others' deployments would be recorded as failed starts).
    whole="$ROOT/bench360 --cache $ROOT/cache apply '$sweep' & echo \$! > $ROOT/bench360.pid; wait \$!"
    # (exit status of the last stage that failed, when the stages are all)
    [ "${STAGES_ONLY:-0}" = 1 ] && [ $# -gt 0 ] && whole="(exit \${stage_rc:-0})"
    before=true
    if [ -n "${SEED_CACHE:-}" ]; then
      before="if [ -f $ROOT/cache/FORMAT ]; then echo 'a cache is there: $SEED_CACHE not unpacked'
        else for f in $SEED_CACHE; do tar -xJf \"\$f\" -C $ROOT cache || echo \"cannot unpack \$f\"; done
          echo \"unpacked $SEED_CACHE: \$(ls $ROOT/cache/records | wc -l) records, \$(find $ROOT/cache/objects -name chunks.parquet | wc -l) chunk traces\"; fi"
    fi
    if [ -n "${REFERENCE:-}" ]; then
      before="$before
      echo \"reference started \$(date -u +%T)\" >> $ROOT/times.txt
      timeout -k 30 ${REFERENCE_LIMIT:-900} bash docs/study/device-reference.sh '$REFERENCE'
      echo \"reference ended \$(date -u +%T) rc \$?\" >> $ROOT/times.txt
      [ -f $ROOT/vllm-ref.pid ] && kill -KILL -- -\$(cat $ROOT/vllm-ref.pid) 2>/dev/null; sleep 2"
    fi
    cd $RUN
    setsid nohup bash -c "
      bash docs/study/device-unpack.sh || { echo 1 > $ROOT/apply.rc; exit 1; }
      if [ -f $ROOT/llama/build.log ]; then
        for _ in \$(seq 1 120); do [ -f $ROOT/llama/build.rc ] && break; sleep 5; done
        echo \"llama.cpp build: rc \$(cat $ROOT/llama/build.rc 2>/dev/null || echo unfinished) \$(date -u +%T)\" | tee -a $ROOT/times.txt
        tail -n 2 $ROOT/llama/build.log; \$BENCH360_LLAMA_SERVER --version 2>&1 | tail -n 2
      fi
      $before
      echo \"apply started \$(date -u +%T)\" >> $ROOT/times.txt
      $ROOT/bench360 --cache $ROOT/cache plan '$sweep' | tail -n 5
      $only
      $whole
      rc=\$?; echo \"apply ended \$(date -u +%T) rc \$rc\" >> $ROOT/times.txt; echo \$rc > $ROOT/apply.rc" \
      >> $ROOT/apply.log 2>&1 < /dev/null &
    echo $! > $ROOT/apply.pid
    cd - > /dev/null
    log "unpack + convert + apply run in the background; next: device-vllm.sh wait 540"
    sleep 2
    wait_apply "$secs"
    ;;
  wait)
    wait_apply "${2:-540}" "${3:-}"
    ;;
  stop)
    [ -f $ROOT/apply.rc ] && { log "no apply running"; exit 0; }
    kill -9 "$(cat $ROOT/apply.pid)" 2>/dev/null   # the pipeline first, so it writes no status
    kill -TERM "$(cat $ROOT/bench360.pid)" 2>/dev/null
    for _ in $(seq 1 60); do kill -0 "$(cat $ROOT/bench360.pid)" 2>/dev/null || break; sleep 1; done
    echo 130 > $ROOT/apply.rc; echo "apply stopped $(date -u +%T)" >> $ROOT/times.txt
    tail -n 5 $ROOT/apply.log
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
    ;;
  *) echo "usage: $0 recv N [info] [build] | keep FILE… | start [SWEEP] [SECS] [AXIS=VALUE…]… | wait SECS [final] | stop" >&2; exit 2 ;;
esac
