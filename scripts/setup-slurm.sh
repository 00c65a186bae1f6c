#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for the Slurm executor's integration tests.
# Installs Debian's slurm-wlm and munge (pinned), writes /etc/slurm/{slurm,gres}.conf for one
# node named `hostname -s` (CPUs/RealMemory detected, 4 fake GPUs backed by /dev/null links),
# and starts munged, slurmctld and slurmd directly (no systemd here). Idempotent: daemons that run
# with an unchanged config are left alone (jobs survive a restart too); then it waits for the node.
# Must run as root (slurmd must be root to start jobs as the submitting user).
# On success writes $BENCH360_HOME/slurm.env and prints its `export` line. Stop: scripts/stop-slurm.sh.
set -euo pipefail
STEP=setup-slurm ENV_NAME=slurm
. "$(dirname "$0")/lib/setup.sh"
[ "$(id -u)" = 0 ] || die "must run as root (slurmd starts jobs as the submitting user)"
require_debian 12

# 1. Packages, pinned to the 22.05 series of Debian 12 (the config below is written for it) and
#    munge 0.5; security updates of either are accepted.
apt_install munge 0.5.15 0.6
for p in slurm-client slurmd slurmctld slurm-wlm; do apt_install "$p" 22.05.8 22.06; done

# 2. Munge key (the package's postinst usually made one already).
if [ ! -s /etc/munge/munge.key ]; then
  log "generating /etc/munge/munge.key"
  mungekey --create --keyfile=/etc/munge/munge.key
  "$(dirname "$0")/stop-slurm.sh"   # daemons started with another key must restart
fi
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key

# 3. Config. The node is reached on loopback; no cgroups (gVisor container): linuxproc + task/none.
NODE="$(hostname -s)"
HW="$(slurmd -C | head -1)" || die "slurmd -C failed"   # NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ... RealMemory=24105
TOPO="$(grep -o 'CPUs=.*ThreadsPerCore=[0-9]*' <<<"$HW")"
MEM=$(( $(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$HW") * 95 / 100 ))   # headroom: less than configured drains the node
# gres/gpu drops GPUs without File=, and File= must be a character device: 4 links to /dev/null.
mkdir -p /var/lib/slurm/fake-gpu
for i in 0 1 2 3; do ln -sfn /dev/null "/var/lib/slurm/fake-gpu/gpu$i"; done
mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
chown slurm:slurm /var/lib/slurm/slurmctld /var/log/slurm
CONF=$(cat <<EOF
# Written by bench360 scripts/setup-slurm.sh: one-node test cluster.
ClusterName=bench360
MailProg=/bin/true
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# Finished jobs are also appended here (one line each), besides scontrol's MinJobAge window.
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
MinJobAge=3600
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 $TOPO RealMemory=$MEM Gres=gpu:4 State=UNKNOWN
# FORCE:4 lets up to 4 jobs share a core, so 4 one-GPU jobs run at once on this 2-core node.
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
)
GRES="NodeName=$NODE Name=gpu File=/var/lib/slurm/fake-gpu/gpu[0-3]"
changed=0
if [ "$CONF" != "$(cat /etc/slurm/slurm.conf 2>/dev/null)" ]; then echo "$CONF" >/etc/slurm/slurm.conf; changed=1; fi
if [ "$GRES" != "$(cat /etc/slurm/gres.conf 2>/dev/null)" ]; then echo "$GRES" >/etc/slurm/gres.conf; changed=1; fi

# 4. Daemons, started directly; a daemon already running with an unchanged config is left alone.
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if [ "$changed" = 1 ]; then
  log "config changed: restarting slurm daemons"
  "$(dirname "$0")/stop-slurm.sh" --keep-munge
fi
mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge
if ! running /run/munge/munged.pid; then
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged
fi
if ! running /run/slurmctld.pid; then log "starting slurmctld"; /usr/sbin/slurmctld; fi
if ! running /run/slurmd.pid; then log "starting slurmd"; /usr/sbin/slurmd; fi

# 5. Wait for the node to answer idle (or mix/alloc while jobs run). A node drained by an earlier
# bad config keeps its drain across restarts: resume it once it registers again.
state=""
for i in $(seq 60); do
  # Give up early when a daemon died (e.g. fatal config error) once it had time to write its pid.
  [ "$i" -gt 5 ] && ! { running /run/slurmctld.pid && running /run/slurmd.pid; } && break
  state="$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null || true)"
  case "$state" in
    idle|mix|alloc) break ;;
    drain|drng|inval|down) scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 1
done
case "$state" in
  idle|mix|alloc) ;;
  *) die "node $NODE not ready (state '${state:-no answer}'); last lines of the logs: $(tail -n 3 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log 2>&1 | tr '\n' ' ')" ;;
esac
log "node $NODE is $state"
echo "export BENCH360_SLURM=1" | write_env
