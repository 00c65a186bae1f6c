#!/usr/bin/env bash
# On the GPU machine (device tool, kind nvidia-h200), from the repo root with .devcarry/a
# carried: unpacks llama.cpp and builds llama-server with CUDA in the background (~5 min on
# 16 cores; it outlives this call). Stages the first model half under /root.
set -euo pipefail
mkdir -p /root/llama
tar -xJf .devcarry/a/llama-src.tar.xz -C /root/llama
cp .devcarry/a/model.part-aa /root/
cd /root/llama/llama.cpp
setsid nohup bash -c '
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF &&
  cmake --build build --target llama-server -j 16
  echo $? > /root/llama/build.rc' > /root/llama/build.log 2>&1 < /dev/null &
sleep 3
nvidia-smi --query-gpu=name,driver_version,power.draw,memory.used --format=csv
tail -n 3 /root/llama/build.log
