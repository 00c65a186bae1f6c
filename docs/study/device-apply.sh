#!/usr/bin/env bash
# On the GPU machine, from the repo root with .devcarry/b carried, after device-build.sh:
# joins and checks the model, unpacks bench360, waits for the CUDA build, applies SWEEP
# (default sweeps/gpu-telemetry.kdl) with the cache in /root/cache, and puts the report, the
# apply log and the cache (records + objects, tar.xz) under $OUT.
set -uo pipefail
sweep=${1:-sweeps/gpu-telemetry.kdl}
cat /root/model.part-aa .devcarry/b/model.part-ab > /root/model.gguf
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  /root/model.gguf" | sha256sum -c - || exit 1
xz -dc .devcarry/b/bench360.xz > /root/bench360 && chmod +x /root/bench360
for _ in $(seq 1 110); do [ -f /root/llama/build.rc ] && break; sleep 5; done
echo "build rc: $(cat /root/llama/build.rc 2>/dev/null || echo unfinished)"; tail -n 2 /root/llama/build.log
export BENCH360_LLAMA_SERVER=/root/llama/llama.cpp/build/bin/llama-server BENCH360_SMOLLM2_GGUF=/root/model.gguf
$BENCH360_LLAMA_SERVER --version 2>&1 | tail -n 2
/root/bench360 --cache /root/cache plan "$sweep" | tail -n 3
/root/bench360 --cache /root/cache apply "$sweep" 2>&1 | tee "$OUT/apply.log"
rc=${PIPESTATUS[0]}
/root/bench360 --cache /root/cache report "$sweep" > /dev/null 2>&1
cp /root/cache/reports/*/report.md "$OUT/" 2>/dev/null
tar -cJf "$OUT/cache.tar.xz" -C /root cache/records cache/objects cache/labels cache/FORMAT
nvidia-smi --query-gpu=name,driver_version,power.draw,memory.used --format=csv | tee "$OUT/nvidia-smi.txt"
exit $rc
