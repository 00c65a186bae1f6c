#!/usr/bin/env bash
# Here (no GPU): stages a llama.cpp-only hold of docs/study/device-llama.sh — the llama.cpp
# source in .devcarry/a (as prepare-carry.sh makes it), the release bench360 in .devcarry/b,
# and the given GGUFs (named as device-llama.sh expects them) in a tar stream cut into parts of
# at most PART_MIB (default 54) MiB, each staged with the MANIFEST in its own .devcarry/pNN.
#
#   docs/study/stage-llama-parts.sh target/release/bench360 qwen2.5-coder-1.5b.gguf=PATH …
#
# Prints the number of parts. Part 01 travels with .devcarry/a (4 MB), so it is cut smaller.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { echo "usage: $0 BENCH360_BINARY NAME.gguf=PATH…" >&2; exit 2; }
bin=$1; shift
grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >> .git/info/exclude
part_mib=${PART_MIB:-54}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. docs/study/llama-source.sh
[ -f .devcarry/a/llama-src.tar.xz ] || llama_source .devcarry/a/llama-src.tar.xz
rm -rf .devcarry/b .devcarry/parts .devcarry/stage .devcarry/p[0-9][0-9]
mkdir -p .devcarry/b .devcarry/parts .devcarry/stage
xz -T2 -c "$bin" > .devcarry/b/bench360.xz
(cd .devcarry/b && sha256sum bench360.xz > SHA256SUMS)
names=()
for nv in "$@"; do
  name=${nv%%=*}; path=${nv#*=}
  ln -f "$path" ".devcarry/stage/$name" 2>/dev/null || cp "$path" ".devcarry/stage/$name"
  names+=("$name")
done
(cd .devcarry/stage && sha256sum "${names[@]}" > SHA256SUMS)
(cd .devcarry/stage && tar --owner=0 --group=0 -cf - "${names[@]}" SHA256SUMS) > "$tmp/stream.tar"
# Part 01 smaller: it travels with the 4 MB llama.cpp source.
head -c $(( (part_mib - 6) * 1048576 )) "$tmp/stream.tar" > .devcarry/parts/part01
tail -c +$(( (part_mib - 6) * 1048576 + 1 )) "$tmp/stream.tar" | split -b "${part_mib}M" -d -a 2 --numeric-suffixes=2 - .devcarry/parts/part
(cd .devcarry/parts && sha256sum part[0-9][0-9] > MANIFEST)
for f in .devcarry/parts/part[0-9][0-9]; do
  n=${f##*part}; mkdir -p ".devcarry/p$n"
  ln -f "$f" ".devcarry/p$n/part$n"; cp .devcarry/parts/MANIFEST ".devcarry/p$n/"
done
ls .devcarry/parts | grep -c '^part'
