#!/usr/bin/env bash
# On the GPU machine, from the repo root, once device-receive.sh has put every part in
# /root/parts: joins them, checks every sha256, unpacks each engine pack to
# /root/site-<engine>, installs the gguf wheel (and vLLM's GGUF plugin when carried) in
# /root/site-gguf, writes the launch wrappers in /root/bin and converts /root/model.gguf into
# the Hugging Face folder /root/hf-smollm2 (with a short check generation), and every other
# carried GGUF NAME.gguf into /root/hf-NAME. About a minute. Idempotent: what is
# already unpacked from the same parts, or converted from the same GGUF, is kept.
# See docs/study/README.md.
#
# /root/bin/vllm-python, /root/bin/sglang-python: python3 with that engine's pack first on
#   PYTHONPATH (unless PYTHONPATH is set), so that bench360's version probe, which runs the
#   engine's binary without the sweep's `env`, imports the engine too.
# /root/bin/lmdeploy: `python3 -m lmdeploy`, with the LMDeploy pack likewise (the catalog's
#   arguments start with `serve api_server`, so the binary must be the CLI itself).
set -euo pipefail
ROOT=${BENCH360_GPU_ROOT:-/root}   # another folder only to try the script elsewhere
PARTS=$ROOT/parts
CARRY=$ROOT/carry
MODEL=${BENCH360_SMOLLM2_GGUF:-$ROOT/model.gguf}
HF=${BENCH360_SMOLLM2_HF:-$ROOT/hf-smollm2}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=$(command -v python3)
log() { printf '[device-unpack] %s\n' "$*"; }
die() { printf '[device-unpack] error: %s\n' "$*" >&2; exit 1; }
t0=$SECONDS

# ---- join and check -----------------------------------------------------------------
[ -f "$PARTS/MANIFEST" ] || die "no $PARTS/MANIFEST: receive the parts first (device-receive.sh N)"
total=$(grep -c ' part[0-9][0-9]$' "$PARTS/MANIFEST")
missing=$(grep -o 'part[0-9][0-9]$' "$PARTS/MANIFEST" | while read -r p; do [ -f "$PARTS/$p" ] || echo "$p"; done)
[ -z "$missing" ] || die "missing parts: $(echo $missing) (of $total)"
key=$(sha256sum "$PARTS/MANIFEST" | cut -d' ' -f1)
if [ "$(cat "$CARRY/.key" 2>/dev/null)" = "$key" ]; then
  log "parts already joined and unpacked ($total parts)"
else
  (cd "$PARTS" && grep ' part[0-9][0-9]$' MANIFEST | sha256sum -c --quiet -) || die "a part does not match MANIFEST"
  rm -rf "$CARRY"; mkdir -p "$CARRY"
  cat $(grep -o 'part[0-9][0-9]$' "$PARTS/MANIFEST" | sed "s|^|$PARTS/|") | tar -xf - -C "$CARRY"
  (cd "$CARRY" && sha256sum -c SHA256SUMS) || die "joined files do not match SHA256SUMS"
  log "joined $total parts ($(du -sh "$CARRY" | cut -f1)) in $((SECONDS - t0)) s"

  # ---- unpack the packs (in parallel) ---------------------------------------------
  pids=()
  for pack in "$CARRY"/*.tar.xz; do
    engine=$(basename "$pack"); engine=${engine%%-*}
    rm -rf "$ROOT/site-$engine"
    ( xz -T0 -dc "$pack" | tar -xf - -C "$ROOT" && echo "unpacked $(basename "$pack") -> $ROOT/site-$engine ($(du -sh "$ROOT/site-$engine" | cut -f1))" ) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || die "unpacking failed"; done
  # site-gguf: the converter's gguf package and, when carried, vLLM's GGUF plugin (vLLM 0.26
  # has no GGUF support of its own; a deployment that reads GGUF puts site-gguf on its path).
  rm -rf $ROOT/site-gguf
  "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check \
    --target $ROOT/site-gguf "$CARRY"/gguf-*.whl $(ls "$CARRY"/vllm_gguf_plugin-*.whl 2>/dev/null)
  # The packs are unpacked: their archives are not needed any more (the parts stay, for a redo).
  rm -f "$CARRY"/*.tar.xz
  echo "$key" > "$CARRY/.key"
  log "unpacked in $((SECONDS - t0)) s"
fi

# ---- wrappers ---------------------------------------------------------------------------
mkdir -p $ROOT/bin
wrap() { # name site python-args...
  local name=$1 site=$2; shift 2
  [ -d "$site" ] || { rm -f "$ROOT/bin/$name"; return 0; }
  cat > "$ROOT/bin/$name.tmp" <<EOF
#!/bin/sh
# Written by bench360 docs/study/device-unpack.sh: $PY $* with $site on PYTHONPATH.
export PYTHONPATH="\${PYTHONPATH:-$site}"
exec $PY $* "\$@"
EOF
  chmod +x "$ROOT/bin/$name.tmp"; mv "$ROOT/bin/$name.tmp" "$ROOT/bin/$name"
}
wrap vllm-python $ROOT/site-vllm
wrap sglang-python $ROOT/site-sglang
wrap lmdeploy $ROOT/site-lmdeploy -m lmdeploy
for site in $ROOT/site-*; do
  log "$(basename "$site"): $(ls "$site" | grep -E '^(vllm|sglang|lmdeploy|gguf|transformers|tokenizers)-[0-9].*\.dist-info$' | sed 's/\.dist-info$//' | tr '\n' ' ')"
done

# ---- the Hugging Face model -------------------------------------------------------------
if [ -f "$MODEL" ]; then
  log "converting $MODEL -> $HF"
  PYTHONPATH=$ROOT/site-gguf HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 \
    "$PY" "$REPO/docs/study/convert-gguf-to-hf.py" "$MODEL" "$HF" --check \
    || die "model conversion failed"
else
  log "no $MODEL yet: join the GGUF first (docs/study/device-engines.sh start does), then run this again"
fi
# Every other GGUF carried (another model of the sweep, e.g. qwen2.5-coder-0.5b.gguf) into
# $ROOT/hf-<its name>, likewise checked.
for gguf in "$CARRY"/*.gguf; do
  [ -f "$gguf" ] && [ "$gguf" != "$MODEL" ] || continue
  out=$ROOT/hf-$(basename "$gguf" .gguf)
  log "converting $gguf -> $out"
  PYTHONPATH=$ROOT/site-gguf HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 \
    "$PY" "$REPO/docs/study/convert-gguf-to-hf.py" "$gguf" "$out" --check \
    || die "conversion of $gguf failed"
done
log "done in $((SECONDS - t0)) s; $(df -h "$ROOT" | awk 'NR==2 {print $4}') free on $ROOT"
