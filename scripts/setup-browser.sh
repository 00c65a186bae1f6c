#!/usr/bin/env bash
# Debian 12's Chromium, for the test that opens report.html headless and screenshots it.
# Pinned by series and minimum version (Debian's security archive replaces Chromium builds
# every few weeks: an exact build pin would break on the next update); the installed version
# is recorded in $BENCH360_HOME/installed-versions.txt. Idempotent. Fails loudly (see lib/setup.sh).
set -euo pipefail
STEP=setup-browser ENV_NAME=browser
. "$(dirname "$0")/lib/setup.sh"
require_debian 12
apt_install chromium 150.0
bin=$(command -v chromium) || die "chromium is installed ($(deb_installed chromium)) but not on PATH"
ver=$("$bin" --headless=new --no-sandbox --version 2>/dev/null | head -1) ||
  die "$bin --version failed: $("$bin" --headless=new --no-sandbox --version 2>&1 | tail -3)"
log "$ver at $bin"
echo "export BENCH360_CHROMIUM=$bin" | write_env
