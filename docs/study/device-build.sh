#!/usr/bin/env bash
# On the GPU machine (device tool, kind nvidia-h200), from the repo root with .devcarry/a
# carried: unpacks llama.cpp and builds llama-server with CUDA in the background (~5 min on
# 16 cores; it outlives this call; $ROOT/llama/build.rc holds its status when done). Stages
# the first model half under $ROOT when .devcarry/a has one (prepare-carry.sh's procedure).
# device-vllm.sh runs it for `recv N info build`, and waits for it before `plan`.
set -euo pipefail
ROOT=${BENCH360_GPU_ROOT:-/root}
mkdir -p "$ROOT/llama"
rm -f "$ROOT/llama/build.rc"
tar -xJf .devcarry/a/llama-src.tar.xz -C "$ROOT/llama"
[ ! -f .devcarry/a/model.part-aa ] || cp .devcarry/a/model.part-aa "$ROOT/"
cd "$ROOT/llama/llama.cpp"
setsid nohup bash -c "
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF &&
  cmake --build build --target llama-server -j \$(nproc)
  echo \$? > $ROOT/llama/build.rc" > "$ROOT/llama/build.log" 2>&1 < /dev/null &
sleep 1
echo "llama.cpp CUDA build started $(date -u +%T)" | tee -a "$ROOT/times.txt"
