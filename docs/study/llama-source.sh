#!/usr/bin/env bash
# Sourced by prepare-carry.sh and stage-llama-parts.sh: llama_source OUT.tar.xz writes the
# llama.cpp source of the PyPI sdist llama-cpp-python==0.3.36 (sha256-checked), pruned to the
# CPU and CUDA backends, as one .tar.xz (~4 MiB).
llama_source() {
  local out=$1 tmp src
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36 -d "$tmp" || { rm -rf "$tmp"; return 1; }
  echo "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e  $tmp/llama_cpp_python-0.3.36.tar.gz" | sha256sum -c - >&2 || { rm -rf "$tmp"; return 1; }
  tar -xzf "$tmp/llama_cpp_python-0.3.36.tar.gz" -C "$tmp" llama_cpp_python-0.3.36/vendor/llama.cpp
  src="$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp"
  ( cd "$src"
    rm -rf docs models tests examples media gguf-py benches pocs ci skills app requirements tools/server/tests tools/server/bench
    find . -name '*.py' -delete
    for b in ggml/src/ggml-*/; do case "$b" in *ggml-cpu/|*ggml-cuda/) ;; *) rm -rf "$b";; esac; done
    # The UI target stays (the server links it; ui-assets.cmake reads these files) but without
    # its web sources.
    find tools/ui -mindepth 1 -maxdepth 1 ! -name CMakeLists.txt ! -name '*.in' ! -name sources.cmake ! -name package.json -exec rm -rf {} + )
  mkdir -p "$(dirname "$out")"
  tar -cJf "$out" -C "$src/.." llama.cpp
  rm -rf "$tmp"
}
