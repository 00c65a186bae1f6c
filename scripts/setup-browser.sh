#!/usr/bin/env bash
# Debian's Chromium (pinned), for the test that opens report.html headless and screenshots it.
# Idempotent.
set -euo pipefail
CHROMIUM_VERSION="156.0.8078.108-1~deb12u1"
if ! dpkg-query -W -f='${Version}' chromium 2>/dev/null | grep -qx "$CHROMIUM_VERSION"; then
  echo "[setup-browser] installing chromium=$CHROMIUM_VERSION" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "chromium=$CHROMIUM_VERSION" >&2
fi
HOME_DIR="${BENCH360_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/bench360}"
mkdir -p "$HOME_DIR"
echo "export BENCH360_CHROMIUM=$(command -v chromium)" > "$HOME_DIR/browser.env"
cat "$HOME_DIR/browser.env"
