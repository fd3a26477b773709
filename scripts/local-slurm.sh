#!/usr/bin/env bash
# A one-node Slurm on loopback with 8 fake GPUs, for the tests and for trying opx without a
# cluster. Needs root and Debian's slurmctld, slurmd, slurm-client and munge.
#   scripts/local-slurm.sh start [DIR]   start (idempotent); prints the SLURM_CONF path
#   scripts/local-slurm.sh stop [DIR]    stop this instance's daemons and cancel its jobs
# Other Slurm instances may run on the same machine: this one has its own directory, ports
# (OPX_SLURMCTLD_PORT, OPX_SLURMD_PORT) and ClusterName (OPX_SLURM_CLUSTER, default derived
# from DIR). start fails when its slurmctld cannot bind its port, and start and stop talk
# to a controller only after checking it reports this instance's ClusterName, so they never
# take another instance's controller for theirs or cancel its jobs.
# For pyxis (scripts/real-stack.sh): OPX_SLURM_PLUGSTACK names a plugstack.conf, and
# OPX_SLURMD_PATH is put first on slurmd's PATH (pyxis runs the enroot it finds there).
set -euo pipefail
cmd=${1:-start}
dir=${2:-${OPX_SLURM_DIR:-/tmp/opx-slurm}}
conf=$dir/slurm.conf
host=$(hostname -s)
# the cluster name this directory's instance has (kept in its slurm.conf once written)
cluster=${OPX_SLURM_CLUSTER:-opx$(printf '%s' "$dir" | sha256sum | cut -c1-10)}
if [ -f "$conf" ]; then cluster=$(sed -n 's/^ClusterName=//p' "$conf"); fi

# ours: the controller SLURM_CONF=$conf reaches reports our ClusterName
ours() {
  [ -f "$conf" ] || return 1
  local name
  name=$(SLURM_CONF=$conf timeout 5 scontrol show config 2>/dev/null | sed -n 's/^ClusterName *= *//p')
  [ "$name" = "$cluster" ]
}

stop() {
  if ours; then
    SLURM_CONF=$conf scancel -u "$(id -u)" >/dev/null 2>&1 || true
  fi
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do
    if [ -f "$pidfile" ]; then
      pid=$(cat "$pidfile")
      # only a daemon started with this instance's slurm.conf
      if { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "-f $conf"; then
        kill "$pid" 2>/dev/null || true
      fi
      rm -f "$pidfile"
    fi
  done
  sleep 0.5
}

case "$cmd" in
stop) stop; exit 0 ;;
start) ;;
*) echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac

if ours && SLURM_CONF=$conf timeout 5 sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mixed|alloc'; then
  echo "$conf"; exit 0
fi
stop
mkdir -p "$dir/state" "$dir/spool" "$dir/dev"
for i in 0 1 2 3 4 5 6 7; do
  [ -e "$dir/dev/gpu$i" ] || mknod "$dir/dev/gpu$i" c 1 3
done
ctl_port=${OPX_SLURMCTLD_PORT:-16817}
d_port=${OPX_SLURMD_PORT:-16818}
cat > "$conf" <<CONF
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MessageTimeout=10
KillWait=2
InactiveLimit=0
MinJobAge=60
${OPX_SLURM_PLUGSTACK:+PlugStackConfig=$OPX_SLURM_PLUGSTACK}
NodeName=$host NodeAddr=127.0.0.1 CPUs=16 Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
cat > "$dir/gres.conf" <<CONF
Name=gpu File=$dir/dev/gpu[0-7]
CONF
mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
fi
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
chmod 0400 /etc/munge/munge.key
if ! pgrep -x munged >/dev/null; then
  if id munge >/dev/null 2>&1; then
    runuser -u munge -- munged --force 2>/dev/null || munged --force
  else
    munged --force
  fi
fi
export SLURM_CONF=$conf
slurmctld -f "$conf"
# slurmd only once the controller on our port is ours: a slurmd started beside a slurmctld
# that lost its port would register with the other instance's controller
for _ in $(seq 60); do
  pid=$(cat "$dir/slurmctld.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
    echo "local-slurm: slurmctld exited (port $ctl_port taken by another Slurm? set OPX_SLURMCTLD_PORT); see $dir/slurmctld.log" >&2
    tail -3 "$dir/slurmctld.log" >&2 || true
    exit 1
  fi
  if ours; then break; fi
  sleep 0.5
done
if ! ours; then
  echo "local-slurm: the controller on port $ctl_port is not cluster $cluster; see $dir/slurmctld.log" >&2
  exit 1
fi
PATH=${OPX_SLURMD_PATH:+$OPX_SLURMD_PATH:}$PATH slurmd -f "$conf" -N "$host"
for _ in $(seq 60); do
  if timeout 5 sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mixed|alloc'; then
    echo "$conf"; exit 0
  fi
  sleep 0.5
done
echo "local-slurm: the node did not come up; see $dir/slurmctld.log and $dir/slurmd.log" >&2
tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
exit 1
