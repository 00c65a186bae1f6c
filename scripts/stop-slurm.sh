#!/usr/bin/env bash
# Stops the one-node Slurm cluster that scripts/setup-slurm.sh started: slurmd, slurmctld and
# (unless --keep-munge) munged, each by the pid in its pid file. Jobs' state survives in
# /var/lib/slurm/slurmctld; running job steps are not killed. Safe to run when nothing runs.
set -euo pipefail
stop() { # name pidfile
  local pid
  [ -s "$2" ] && pid="$(cat "$2")" && kill -0 "$pid" 2>/dev/null || { rm -f "$2"; return 0; }
  echo "[stop-slurm] stopping $1 ($pid)" >&2
  kill "$pid"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$2"
}
stop slurmd /run/slurmd.pid
stop slurmctld /run/slurmctld.pid
[ "${1:-}" = --keep-munge ] || stop munged /run/munge/munged.pid
