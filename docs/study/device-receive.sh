#!/usr/bin/env bash
# On the GPU machine, from the repo root, in a call that carries .devcarry/p (staged here by
# `docs/study/split-carry.sh --stage N`) or the folder SRC: checks part N against the MANIFEST
# and moves it to /root/parts, where it stays while the machine is held. Fast (a second or
# two): keep the next call within the machine's 30 s warm window. See docs/study/README.md.
# device-llama.sh and device-vllm.sh receive their parts (one folder .devcarry/pNN per part)
# through it.
#   docs/study/device-receive.sh N [SRC]
set -euo pipefail
[ $# -eq 1 ] || [ $# -eq 2 ] || { echo "usage: $0 N [SRC]" >&2; exit 2; }
n=$(printf '%02d' "$((10#$1))")
src=${2:-.devcarry/p}
dst=${BENCH360_GPU_ROOT:-/root}/parts
[ -f "$src/part$n" ] || { echo "device-receive: $src/part$n was not carried (carry: [\"$src\"])" >&2; exit 1; }
[ -f "$src/MANIFEST" ] || { echo "device-receive: $src/MANIFEST missing" >&2; exit 1; }
mkdir -p "$dst"
if ! (cd "$src" && grep " part$n\$" MANIFEST | sha256sum -c --quiet -); then
  echo "device-receive: part$n is damaged: carry it again" >&2
  exit 1
fi
# A MANIFEST from another set of parts means the parts received so far are stale.
if [ -f "$dst/MANIFEST" ] && ! cmp -s "$src/MANIFEST" "$dst/MANIFEST"; then
  echo "device-receive: new MANIFEST: dropping parts of an older set" >&2
  rm -f "$dst"/part[0-9][0-9]
fi
cp "$src/MANIFEST" "$dst/MANIFEST"
mv -f "$src/part$n" "$dst/part$n"
total=$(grep -c ' part[0-9][0-9]$' "$dst/MANIFEST")
have=$(ls "$dst" | grep -c '^part[0-9][0-9]$' || true)
echo "device-receive: part$n ok; $have of $total parts in $dst; $(df -h "$dst" | awk 'NR==2 {print $4}') free"
[ "$have" -lt "$total" ] || echo "device-receive: all parts here: run docs/study/device-unpack.sh"
