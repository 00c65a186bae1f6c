#!/usr/bin/env bash
# On the GPU machine, from the copy of the repo that docs/study/device-vllm.sh runs in, after
# device-unpack.sh (issue #25 part 3, "lm-eval beside bench360 on vLLM" in docs/study/README.md):
#
#   device-reference.sh [SWEEP]      (default sweeps/gpu-lm-eval-vllm.kdl)
#
# 1. checks the lm-eval pack ($ROOT/site-lmeval, unpacked by device-unpack.sh from
#    lmeval-0.4.13.tar.xz; the pyarrow wheel from the carry goes first on its path when the
#    machine's pyarrow is older than datasets 5.2 asks for, >= 24);
# 2. starts vLLM ONCE, outside bench360, on 127.0.0.1:$PORT with the flags
#    sweeps/gpu-seed-vllm.kdl's `vllm` engine gets (vLLM's defaults otherwise), and waits for it;
#    REFERENCE_DTYPE (default bfloat16) is its --dtype: float32 takes the bf16 rounding out of
#    the comparison (issue #25: every bf16 difference was a near-tie); REFERENCE_EAGER=1 adds
#    --enforce-eager (no torch.compile or graph capture: ~80 s less cold start, and the
#    reference is about the numbers, not the speed);
# 3. `bench360 --cache $ROOT/cache-ref apply SWEEP` (an `endpoint` engine on that server);
# 4. scripts/lm-eval-mmlu.py --loglikelihood for each K of REFERENCE_SHOTS (default "0 5"),
#    on the items of bench360's run, against the same server;
# 5. stops that vLLM (its process group, which this script made) and waits for the GPU's
#    memory to come back, so that the sweep after it starts on an empty GPU.
# Everything it writes is under $ROOT/reference (device-vllm.sh's collect tars it with
# $ROOT/cache-ref). Exit 0 when both comparisons ran.
set -uo pipefail
ROOT=${BENCH360_GPU_ROOT:-/root}
SWEEP=${1:-sweeps/gpu-lm-eval-vllm.kdl}
PORT=${REFERENCE_PORT:-8000}
HF=${BENCH360_SMOLLM2_HF:-$ROOT/hf-qwen2.5-coder-1.5b}
NAME=qwen2.5-coder-1.5b
OUTD=$ROOT/reference
BIN=${BENCH360:-$ROOT/bench360}
PY=$(command -v python3)
log() { printf '[device-reference %s] %s\n' "$(date -u +%T)" "$*" | tee -a "$OUTD/steps.log"; }
rm -rf "$OUTD"; mkdir -p "$OUTD"
t0=$SECONDS
rc=0

# ---- 1. the lm-eval pack ------------------------------------------------------------------
LMPATH=$ROOT/site-lmeval
[ -d "$LMPATH/lm_eval" ] || { log "no $LMPATH/lm_eval: carry lmeval-0.4.13.tar.xz in the parts"; exit 1; }
if ! "$PY" -c 'import sys, pyarrow; sys.exit(int(pyarrow.__version__.split(".")[0]) < 24)' 2>/dev/null; then
  log "this machine's pyarrow is older than 24: the carried wheel goes first"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check \
    --target "$ROOT/site-arrow" "$ROOT"/carry/pyarrow-*.whl && LMPATH=$ROOT/site-arrow:$LMPATH
fi
PYTHONPATH=$LMPATH "$PY" -c '
import lm_eval, datasets, pyarrow, transformers
from lm_eval.models import openai_completions
print("lm_eval", lm_eval.__version__, "datasets", datasets.__version__, "pyarrow", pyarrow.__version__,
      "transformers", transformers.__version__)' 2>&1 | tail -n 1 | tee -a "$OUTD/steps.log"
[ "${PIPESTATUS[0]}" = 0 ] || { log "lm-eval does not import"; exit 1; }

# ---- 2. vLLM, once, outside bench360 -------------------------------------------------------
extra=(); [ "${REFERENCE_EAGER:-0}" = 1 ] && extra=(--enforce-eager)
log "starting vLLM on 127.0.0.1:$PORT (dtype ${REFERENCE_DTYPE:-bfloat16}${extra[*]:+, ${extra[*]}})"
env CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$ROOT/site-vllm HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
  setsid "$ROOT/bin/vllm-python" -m vllm.entrypoints.openai.api_server \
    --model "$HF" --served-model-name "$NAME" --host 127.0.0.1 --port "$PORT" \
    --max-num-seqs 128 --max-model-len 4096 --gpu-memory-utilization 0.5 --dtype "${REFERENCE_DTYPE:-bfloat16}" "${extra[@]}" \
    > "$OUTD/vllm.log" 2>&1 < /dev/null &
vpid=$!
echo "$vpid" > "$ROOT/vllm-ref.pid"
up() { "$PY" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PORT/health', timeout=2)" 2>/dev/null; }
ts=$SECONDS
until up; do
  kill -0 "$vpid" 2>/dev/null || { log "vLLM exited while starting"; tail -n 30 "$OUTD/vllm.log"; exit 1; }
  [ $((SECONDS - ts)) -lt 600 ] || { log "vLLM not healthy after 600 s"; kill -KILL -- -"$vpid"; exit 1; }
  sleep 1
done
log "vLLM healthy after $((SECONDS - ts)) s"

stop_vllm() {
  kill -TERM -- -"$vpid" 2>/dev/null
  for _ in $(seq 1 60); do kill -0 "$vpid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- -"$vpid" 2>/dev/null
  for _ in $(seq 1 60); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | tr -d ' ')
    [ "${used:-0}" -lt 2000 ] && break; sleep 1
  done
  log "vLLM stopped; GPU 0 memory used ${used:-?} MiB"
}
trap stop_vllm EXIT
trap 'exit 143' TERM INT

# ---- 3. bench360 against it -----------------------------------------------------------------
ta=$SECONDS
timeout -k 10 300 "$BIN" --cache "$ROOT/cache-ref" apply "$SWEEP" > "$OUTD/bench360-apply.log" 2>&1 || rc=1
log "bench360 apply: exit $rc in $((SECONDS - ta)) s"
"$BIN" --cache "$ROOT/cache-ref" report "$SWEEP" > "$OUTD/bench360-report.log" 2>&1
cp "$ROOT"/cache-ref/reports/*/summary.csv "$ROOT"/cache-ref/reports/*/report.md "$OUTD/" 2>/dev/null

# ---- 4. the harness, on the same items, against the same server ------------------------------
for k in ${REFERENCE_SHOTS:-0 5}; do
  label="mmlu-lp single"; [ "$k" = 0 ] || label="mmlu-lp$k single"
  tk=$SECONDS
  PYTHONPATH=$LMPATH PYTHONUNBUFFERED=1 timeout -k 10 "${REFERENCE_HARNESS_LIMIT:-300}" \
    "$PY" scripts/lm-eval-mmlu.py --loglikelihood \
    --cache "$ROOT/cache-ref" --label "$label" --shots "$k" \
    --url "http://127.0.0.1:$PORT/v1/completions" --model-name "$NAME" --tokenizer "$HF" \
    --num-concurrent "${REFERENCE_CONCURRENT:-16}" --work "$OUTD/harness-$k" \
    --json "$OUTD/compare-$k.json" --markdown "$OUTD/compare-$k.md" \
    > "$OUTD/compare-$k.out" 2>&1 || rc=1
  log "lm-eval ${k}-shot: $(grep -m1 -o '"agree": [0-9]*' "$OUTD/compare-$k.json" 2>/dev/null || echo failed) of $(grep -m1 -o '"items": [0-9]*' "$OUTD/compare-$k.json" 2>/dev/null) in $((SECONDS - tk)) s"
  tail -n 3 "$OUTD/compare-$k.out"
done
"$PY" -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$PORT/metrics', timeout=5).read().decode())" \
  > "$OUTD/vllm-metrics.txt" 2>/dev/null

# ---- 5. stop it (trap) -------------------------------------------------------------------------
log "done in $((SECONDS - t0)) s, exit $rc"
exit $rc
