#!/usr/bin/env bash
# The fresh-machine check: clones this repository (its committed HEAD) into an empty folder
# and runs the README's two commands there — scripts/quickstart.sh, then scripts/test.sh — with
# an empty BENCH360_HOME, so nothing cached or installed by hand can hide a missing step.
#
#   scripts/fresh-machine.sh [--container | --host] [--keep] [-- COMMAND...]
#
# --container (default): inside a clean Debian 12 made here with debootstrap (minbase plus
#   only the README's prerequisites: python3 with pip and venv, a C/C++ compiler and make,
#   git), imported with `docker import` and cached as an image keyed by this script's package
#   list. The host's Rust toolchain is mounted read-only; Docker's socket and CLI are passed
#   through for the Docker tests. The container shares the host's network (the tests' servers
#   bind to 127.0.0.1, and the Docker engine must reach the registry they start) and its work
#   folder is mounted at the same path on both sides (paths the tests hand to the Docker
#   engine must exist for it); it shares the host's PID namespace too (bench360 samples a
#   container's engine through the host pid Docker reports). The machine's network settings (its CA bundle, apt's acquire
#   settings) are passed in as they are. Needs root and debootstrap (installed if missing).
# --host: the same clone and commands on this machine, with an empty BENCH360_HOME and
#   CARGO_TARGET_DIR (quicker; catches a missing pin or cache, not a missing package).
# -- COMMAND: run COMMAND in the clone instead of the two commands (e.g. `-- bash` to look).
#
# The log is written to $FRESH_LOG (default: fresh-machine-<timestamp>.log in the current
# folder's target/); the exit code is the commands' own.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mode=container keep=0 cmd=()
while [ $# -gt 0 ]; do
  case "$1" in
    --container) mode=container ;;
    --host) mode=host ;;
    --keep) keep=1 ;;
    --) shift; cmd=("$@"); break ;;
    *) echo "usage: scripts/fresh-machine.sh [--container|--host] [--keep] [-- COMMAND...]" >&2; exit 2 ;;
  esac
  shift
done
log() { printf '[fresh-machine] %s\n' "$*" >&2; }
die() { printf '[fresh-machine] error: %s\n' "$*" >&2; exit 1; }
[ ${#cmd[@]} -gt 0 ] || cmd=(bash -c 'scripts/quickstart.sh && scripts/test.sh')

head=$(git -C "$repo" rev-parse HEAD)
git -C "$repo" diff --quiet HEAD -- || log "note: uncommitted changes are not part of the check (HEAD ${head:0:12} is cloned)"
mkdir -p "$repo/target"
logfile=${FRESH_LOG:-$repo/target/fresh-machine-$(date -u +%Y%m%dT%H%M%SZ).log}
work=$(mktemp -d /var/tmp/bench360-fresh.XXXXXX)
chmod 755 "$work"
cleanup() { [ "$keep" = 1 ] && log "kept $work" || rm -rf "$work"; }
trap cleanup EXIT
git clone --quiet --no-local "$repo" "$work/bench360"
git -C "$work/bench360" checkout --quiet "$head"
mkdir -p "$work/home" "$work/tmp" "$work/cargo"

if [ "$mode" = host ]; then
  log "host mode: clone ${head:0:12} in $work, BENCH360_HOME=$work/home; log: $logfile"
  set +e
  (cd "$work/bench360" && env BENCH360_HOME="$work/home" TMPDIR="$work/tmp" "${cmd[@]}") 2>&1 | tee "$logfile"
  rc=${PIPESTATUS[0]}
  log "exit $rc (log: $logfile)"
  exit "$rc"
fi

# ---- the clean image ---------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "--container needs root (debootstrap, docker import)"
docker info >/dev/null 2>&1 || die "the Docker engine is not reachable"
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The README's prerequisites, and nothing else (apt-get needs ca-certificates for pip's TLS).
PREREQS="python3 python3-pip python3-venv build-essential git ca-certificates"
IMAGE_REV=1   # bump when the way the image is made changes
tag=$(printf '%s %s %s' "$SUITE" "$PREREQS" "$IMAGE_REV" | sha256sum | cut -c1-12)
image="bench360-fresh:$SUITE-$tag"
if ! docker image inspect "$image" >/dev/null 2>&1; then
  # Debian 12's debootstrap, pinned by series like every package of the setup scripts.
  (STEP=fresh-machine ENV_NAME=fresh-machine; . "$repo/scripts/lib/setup.sh"; apt_install debootstrap 1.0.128 1.1) ||
    die "cannot install debootstrap (its error is above)"
  root="$work/rootfs"
  log "debootstrap $SUITE (minbase) into $root"
  debootstrap --variant=minbase --include="${PREREQS// /,}" "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -5 "$work/debootstrap.log")"
  # The security archive, as on any installed Debian 12 (the pins must survive its updates).
  cat >"$root/etc/apt/sources.list" <<SRC
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
SRC
  chroot "$root" apt-get clean
  log "importing as $image"
  tar -C "$root" -c . | docker import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null ||
    die "docker import failed"
  rm -rf "$root"
fi

# ---- the run -----------------------------------------------------------------------------
toolchain=$(dirname "$(dirname "$(rustup which cargo 2>/dev/null || command -v cargo)")")
[ -x "$toolchain/bin/cargo" ] && [ -x "$toolchain/bin/rustc" ] || die "no Rust toolchain found at $toolchain"
"$toolchain/bin/cargo" clippy --version >/dev/null 2>&1 || die "the toolchain at $toolchain lacks clippy"
docker_cli=$(command -v docker)
# The machine's own network settings go in, as they would on any machine of this network: the
# CA bundle that TLS to the package registries needs here (a proxy's CA may be in it), apt's
# acquire settings, and the variables that point clients at the bundle. They belong to the
# machine, not to what the project installs; nothing else of the host does.
net=()
bundle=/etc/ssl/certs/ca-certificates.crt
[ -s "$bundle" ] && net+=(-v "$bundle:$bundle:ro")
for f in /etc/apt/apt.conf.d/99artifact-registry /etc/pip.conf; do
  [ -f "$f" ] && net+=(-v "$f:$f:ro")
done
for v in SSL_CERT_FILE SSL_CERT_DIR PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO CARGO_HTTP_CAINFO PIP_DEFAULT_TIMEOUT; do
  [ -n "${!v:-}" ] && net+=(-e "$v=${!v}")
done
[ -s "$bundle" ] && [ -z "${CARGO_HTTP_CAINFO:-}" ] && net+=(-e "CARGO_HTTP_CAINFO=$bundle")
log "container $image: clone ${head:0:12} in $work, Rust $("$toolchain/bin/rustc" --version | cut -d' ' -f2) from $toolchain (read-only); log: $logfile"
set +e
# One Slurm cluster per network: the host's (scripts/setup-slurm.sh) would answer the
# container's tests on the same ports with another munge key.
if [ -s /run/slurmctld.pid ] && kill -0 "$(cat /run/slurmctld.pid)" 2>/dev/null; then
  log "stopping this host's Slurm daemons (the container starts its own on the same ports)"
  "$repo/scripts/stop-slurm.sh"
fi
# --pid host: on a machine, bench360 and the Docker engine share one PID namespace, and the
# Docker tests sample a container's engine through the host pid Docker reports.
docker run --rm -i --network host --pid host --shm-size 1g \
  -v "$work:$work" \
  -v "$toolchain:/opt/rust:ro" \
  -v /var/run/docker.sock:/var/run/docker.sock \
  -v "$docker_cli:/usr/local/bin/docker:ro" \
  "${net[@]}" \
  -e PATH=/opt/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  -e CARGO_HOME="$work/cargo" -e BENCH360_HOME="$work/home" -e TMPDIR="$work/tmp" \
  -e HOME=/root -e CI="${CI:-}" \
  -w "$work/bench360" "$image" "${cmd[@]}" </dev/null 2>&1 | tee "$logfile"
rc=${PIPESTATUS[0]}
set -e
log "exit $rc (log: $logfile)"
exit "$rc"
