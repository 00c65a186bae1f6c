#!/usr/bin/env bash
# Here (no GPU): cuts what one hold of the GPU machine needs for the Python engines into
# parts that fit the device tool's 64 MiB per call (working tree included). See
# docs/study/README.md.
#
#   docs/study/split-carry.sh [ENGINE...]   make .devcarry/parts/partNN + MANIFEST
#                                            (default: vllm sglang lmdeploy)
#   docs/study/split-carry.sh --stage N     put part N alone (with MANIFEST) in .devcarry/p,
#                                            the folder each receiving call carries
#   docs/study/split-carry.sh --count       print the number of parts
#
# The stream is an uncompressed tar of the packs built by docs/study/build-packs.sh (already
# xz), the gguf wheel and their SHA256SUMS; it is split into parts of at most 55 MiB. MANIFEST
# holds the sha256 of every part (checked by device-receive.sh on arrival and by
# device-unpack.sh before joining); SHA256SUMS inside the stream is checked after joining.
# Idempotent: parts made from the same packs are kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
HOME_DIR="${BENCH360_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/bench360}"
PACKS="$HOME_DIR/gpu-packs"
PARTS=.devcarry/parts
STAGE=.devcarry/p
PART_BYTES=$((55 * 1024 * 1024))

die() { printf '[split-carry] error: %s\n' "$*" >&2; exit 1; }
log() { printf '[split-carry] %s\n' "$*" >&2; }

# The device tool carries git-ignored paths only when named; keep .devcarry/ out of git.
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.devcarry/' "$exclude" 2>/dev/null || echo '/.devcarry/' >> "$exclude"

count() { grep -c ' part[0-9][0-9]$' "$PARTS/MANIFEST"; }

case "${1:-}" in
  --count)
    [ -f "$PARTS/MANIFEST" ] || die "no parts yet: run $0 first"
    count; exit 0 ;;
  --stage)
    [ $# -eq 2 ] || die "usage: $0 --stage N"
    [ -f "$PARTS/MANIFEST" ] || die "no parts yet: run $0 first"
    n=$(printf '%02d' "$((10#$2))")
    [ -f "$PARTS/part$n" ] || die "no part $n (there are $(count))"
    rm -rf "$STAGE"; mkdir -p "$STAGE"
    ln "$PARTS/part$n" "$STAGE/part$n" 2>/dev/null || cp "$PARTS/part$n" "$STAGE/part$n"
    cp "$PARTS/MANIFEST" "$STAGE/MANIFEST"
    echo "$STAGE/part$n ($(du -h "$STAGE/part$n" | cut -f1)) of $(count)"
    exit 0 ;;
  -*) die "unknown option $1" ;;
esac

engines=("$@"); [ ${#engines[@]} -gt 0 ] || engines=(vllm sglang lmdeploy)
[ -f "$PACKS/SHA256SUMS" ] || die "no $PACKS/SHA256SUMS: run docs/study/build-packs.sh first"
(cd "$PACKS" && sha256sum -c --quiet SHA256SUMS) || die "packs in $PACKS do not match SHA256SUMS"
files=()
for e in "${engines[@]}"; do
  f=$(cd "$PACKS" && ls "$e"-*.tar.xz 2>/dev/null | head -n 1) || true
  [ -n "$f" ] || die "no pack for '$e' in $PACKS (docs/study/build-packs.sh $e)"
  files+=("$f")
done
files+=("$(cd "$PACKS" && ls gguf-*.whl | head -n 1)")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "${files[@]}"; do grep "  $f\$" "$PACKS/SHA256SUMS"; done > "$tmp/SHA256SUMS"
key=$(sha256sum "$tmp/SHA256SUMS" | cut -d' ' -f1)
if [ -f "$PARTS/MANIFEST" ] && grep -qx "# key $key" "$PARTS/MANIFEST" \
   && (cd "$PARTS" && grep ' part[0-9][0-9]$' MANIFEST | sha256sum -c --quiet -) 2>/dev/null; then
  log "parts up to date: $(count) in $PARTS"
  exit 0
fi

rm -rf "$PARTS" "$STAGE"
mkdir -p "$PARTS"
# Uncompressed tar (the packs are xz already); fixed owner so the device unpacks as root.
tar -C "$PACKS" --owner=0 --group=0 --numeric-owner -cf - \
    "${files[@]}" -C "$tmp" SHA256SUMS \
  | split -b "$PART_BYTES" -d -a 2 --numeric-suffixes=1 - "$PARTS/part"
{
  echo "# bench360 GPU carry: $(ls "$PARTS" | grep -c '^part') parts of <= $PART_BYTES bytes; cat them in order | tar -x"
  echo "# key $key"
  echo "# contents: ${files[*]} SHA256SUMS"
  (cd "$PARTS" && sha256sum part[0-9][0-9])
} > "$PARTS/MANIFEST.tmp"
mv "$PARTS/MANIFEST.tmp" "$PARTS/MANIFEST"
log "$(count) parts in $PARTS ($(du -ch "$PARTS"/part* | tail -n 1 | cut -f1) in all):"
ls -l "$PARTS" | awk 'NR > 1 {printf "  %10d  %s\n", $5, $9}' >&2
