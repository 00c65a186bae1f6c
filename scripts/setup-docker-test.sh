#!/usr/bin/env bash
# What the Docker tests need beyond the Docker engine itself (which this machine starts):
# Debian's `docker-registry` (the CNCF distribution registry, pinned) to test pulling through a
# registry on 127.0.0.1, and the local llama-server image (scripts/build-llama-image.sh).
# Idempotent. Prints the image's `export` line.
set -euo pipefail
cd "$(dirname "$0")/.."
REGISTRY_VERSION="2.8.2+ds1-1"
if ! dpkg-query -W -f='${Version}' docker-registry 2>/dev/null | grep -qx "$REGISTRY_VERSION"; then
  echo "[setup-docker-test] installing docker-registry=$REGISTRY_VERSION" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "docker-registry=$REGISTRY_VERSION" >&2
fi
# The package starts a registry service on :5000; the tests run their own on loopback.
systemctl stop docker-registry >/dev/null 2>&1 || true
docker info >/dev/null 2>&1 || { echo "[setup-docker-test] the Docker engine is not reachable" >&2; exit 1; }
scripts/build-llama-image.sh
