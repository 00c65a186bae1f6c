#!/usr/bin/env bash
# What the Docker tests need beyond the Docker engine itself (which this machine starts):
# Debian 12's `docker-registry` (the CNCF distribution registry 2.8, pinned by series and minimum
# version) to test pulling through a registry on 127.0.0.1, and the local llama-server image
# (scripts/build-llama-image.sh). Idempotent. Fails loudly (see lib/setup.sh). Prints the
# image's `export` line.
set -euo pipefail
cd "$(dirname "$0")/.."
STEP=setup-docker-test ENV_NAME=image
. scripts/lib/setup.sh
require_debian 12
apt_install docker-registry 2.8.2 2.9
command -v docker-registry >/dev/null || die "docker-registry is installed but /usr/bin/docker-registry is missing"
# The package starts a registry service on :5000; the tests run their own on loopback.
systemctl stop docker-registry >/dev/null 2>&1 || true
command -v docker >/dev/null || die "the docker CLI is not installed (the Docker tests need a Docker engine and its CLI)"
docker info >/dev/null 2>&1 || die "the Docker engine is not reachable: docker info says: $(docker info 2>&1 | tail -2 | tr '\n' ' ')"
record_version docker-engine "$(docker version -f '{{.Server.Version}}' 2>/dev/null)" "the machine's Docker engine"
# build-llama-image.sh writes image.env itself and prints it.
scripts/build-llama-image.sh || die "scripts/build-llama-image.sh failed (its error is above)"
