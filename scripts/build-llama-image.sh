#!/usr/bin/env bash
# Builds a minimal local Docker image holding the CPU llama-server that
# scripts/install-engine.sh built (and only the shared libraries it needs), for machines that
# cannot pull ghcr.io/ggml-org/llama.cpp. Entry point /llama-server, like the official image.
# Idempotent: the tag carries the binary's checksum, so an unchanged binary is not re-imported.
# Prints the image reference (also written to $BENCH360_HOME/image.env as BENCH360_LLAMA_IMAGE).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=$(scripts/install-engine.sh) || { echo "[build-llama-image] scripts/install-engine.sh failed (its error is above)" >&2; exit 1; }
eval "$engine"
HOME_DIR="${BENCH360_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/bench360}"
sum=$(sha256sum "$BENCH360_LLAMA_SERVER" | cut -c1-12)
repo="bench360-local/llama-server"
tag="cpu-$sum"
if ! docker image inspect "$repo:$tag" >/dev/null 2>&1; then
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  cp "$BENCH360_LLAMA_SERVER" "$root/llama-server"
  # The binary's shared libraries (and the dynamic loader), at the paths it expects.
  ldd "$BENCH360_LLAMA_SERVER" | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
  mkdir -p "$root/tmp" "$root/models"
  tar -C "$root" -c . | docker import \
    --change 'ENTRYPOINT ["/llama-server"]' \
    --change "LABEL org.opencontainers.image.version=llama-cpp-python-0.3.36-vendor" \
    - "$repo:$tag" >&2
fi
printf 'export BENCH360_LLAMA_IMAGE=%s\nexport BENCH360_LLAMA_TAG=%s\n' "$repo" "$tag" > "$HOME_DIR/image.env"
cat "$HOME_DIR/image.env"
