#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine for engine/job's Slurm
# tests: munged, slurmctld and slurmd on localhost, one partition "ci".
# It installs Debian's slurm-wlm and munge when sbatch is missing. Run as
# root (CI does). Idempotent: a cluster that already answers is left alone;
# daemons that died are started again.
#
# Files it writes, only when they are absent or were written by this
# script (first line marker): /etc/slurm/slurm.conf. State goes under
# /var/spool/cgtune-slurm, logs under /var/log/cgtune-slurm.
set -euo pipefail

marker="# cgtune CI one-node cluster (.ci/slurm-up.sh)"
conf=/etc/slurm/slurm.conf
spool=/var/spool/cgtune-slurm
logs=/var/log/cgtune-slurm

say() { echo "slurm-up: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	say "must run as root (it installs packages and starts daemons)"
	exit 1
fi

if ! command -v sbatch >/dev/null 2>&1 || ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
	say "installing slurm-wlm and munge from Debian"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq slurm-wlm munge >&2
fi

cluster_up() {
	timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' &&
		timeout 10 sinfo -h -o '%t' 2>/dev/null | grep -Eq '^(idle|mix|alloc|comp)'
}

if cluster_up; then
	say "a cluster already answers (scontrol ping): left as it is"
	sinfo >&2
	exit 0
fi

# munge: the key comes with the package; the daemon runs as user munge.
if ! pgrep -x munged >/dev/null 2>&1; then
	if [ ! -s /etc/munge/munge.key ]; then
		say "creating /etc/munge/munge.key"
		mkdir -p /etc/munge
		dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
		chown munge:munge /etc/munge/munge.key
		chmod 0400 /etc/munge/munge.key
	fi
	mkdir -p /run/munge /var/log/munge /var/lib/munge
	chown munge:munge /run/munge /var/log/munge /var/lib/munge
	chmod 0755 /run/munge
	say "starting munged"
	runuser -u munge -- /usr/sbin/munged
fi
for _ in $(seq 50); do
	munge -n </dev/null | unmunge >/dev/null 2>&1 && break
	sleep 0.2
done
munge -n </dev/null | unmunge >/dev/null || { say "munge does not work"; exit 1; }

if [ -e "$conf" ] && [ "$(head -1 "$conf")" != "$marker" ]; then
	say "$conf exists and was not written by this script, but no cluster answers: fix that Slurm or remove the file"
	exit 1
fi

host=$(hostname -s)
# slurmd -C prints this machine's CPUs, sockets, cores and memory.
node=$(slurmd -C | head -1 | sed -e "s/^NodeName=[^ ]*/NodeName=$host/")
mkdir -p /etc/slurm "$spool/ctld" "$spool/d" "$logs"
cat >"$conf.tmp" <<EOF
$marker
ClusterName=cgtuneci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$spool/ctld
SlurmdSpoolDir=$spool/d
SlurmctldPidFile=/run/cgtune-slurmctld.pid
SlurmdPidFile=/run/cgtune-slurmd.pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
# Finished jobs stay visible to squeue/scontrol for 10 minutes.
MinJobAge=600
# Time limits are enforced within seconds (tests use --time=1).
OverTimeLimit=0
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
mv "$conf.tmp" "$conf"

if ! pgrep -x slurmctld >/dev/null 2>&1; then
	say "starting slurmctld"
	slurmctld -i
fi
if ! pgrep -x slurmd >/dev/null 2>&1; then
	say "starting slurmd"
	slurmd
fi
for _ in $(seq 60); do
	if cluster_up; then
		# A node that was down from an earlier start comes back.
		scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true
		sinfo >&2
		say "cluster up"
		exit 0
	fi
	sleep 1
done
say "the cluster did not come up; logs:"
tail -n 30 "$logs/slurmctld.log" "$logs/slurmd.log" >&2 || true
exit 1
