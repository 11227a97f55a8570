#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the sbatch script `tally plan --format slurm` writes on a real Slurm: a throwaway cluster
# of slurmctld and four slurmd on this machine (sn1 and sn2 with two fake GPUs each, sn3 and sn4
# CPU reducer nodes), each node on its own loopback address. The script is submitted unchanged; its
# training command is `tally doctor`, so every GPU node runs, through `tally launch`, a checked
# all-reduce against each reducer that `tally launch` started on sn3 and sn4 from the Slurm
# variables.
#
# Everything lives in a private mount namespace (unshare -m): /etc/hosts (the node names),
# /etc/slurm and /run/munge are bind mounts of a temporary folder, so nothing of the machine's
# own configuration is read or changed, and the daemons use ports of their own.
#
# Needs root and Debian's slurmctld, slurmd, slurm-client and munge (.ci/run installs them);
# exits 77 (skipped) where they are missing or the daemons cannot start here.
#
# Usage: slurm_hetjob_test.sh TALLY   (the tally command; it finds tally-reducer and the plugin
#                                     beside it, in a build tree or an installed one)
set -euo pipefail

[ -x "$1" ] || { echo "FAIL: $1 is not an executable" >&2; exit 1; }
bin=$(cd "$(dirname "$1")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (daemons, bind mounts)"
for c in slurmctld slurmd sbatch scontrol sinfo munged unshare; do
  command -v $c >/dev/null || skip "$c is missing (Debian: slurmctld slurmd slurm-client munge)"
done

# Into a private mount namespace, once.
# (not a TALLY_ name: the job inherits it, and tally doctor warns of TALLY_ names it does not know)
if [ -z "${HETJOB_TEST_IN_OWN_MOUNTS:-}" ]; then
  HETJOB_TEST_IN_OWN_MOUNTS=1 exec unshare --mount --propagation private -- bash "$0" "$@"
fi

work=$(mktemp -d /tmp/tally-slurm.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  local status=$?
  scancel --quiet --full --user root 2>/dev/null || true  # this private cluster's jobs only
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # Any daemon whose pid file never came: each names a file of $work on its command line.
  pkill -9 -f -- "$work/" 2>/dev/null || true
  if [ $status -ne 0 ] && [ $status -ne 77 ]; then
    for f in "$work"/*.log "$work"/job.out; do
      [ -f "$f" ] && { echo "---- $f"; tail -25 "$f"; }
    done
  fi
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT

# ---- the node names, the configuration folder and munge's socket, for this namespace only ----
{ cat /etc/hosts; for i in 1 2 3 4; do echo "127.0.0.$((i + 1)) sn$i"; done; } >"$work/hosts"
mount --bind "$work/hosts" /etc/hosts
mkdir -p "$work/etc-slurm" "$work/munge-run" "$work/state" /etc/slurm /run/munge
mount --bind "$work/etc-slurm" /etc/slurm
mount --bind "$work/munge-run" /run/munge

pidOf() {  # pidOf FILE: the pid a daemon wrote, waiting up to 10 s for it
  for _ in $(seq 100); do
    [ -s "$1" ] && { cat "$1"; return; }
    sleep 0.1
  done
  return 1
}
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
munged --force --key-file "$work/munge.key" --socket /run/munge/munge.socket.2 \
  --pid-file "$work/munged.pid" --log-file "$work/munged.log" --seed-file "$work/munged.seed" ||
  skip "munged does not start here"
pids+=("$(pidOf "$work/munged.pid")") || skip "munged wrote no pid file"

# Fake GPUs: gres/gpu wants character devices; these are /dev/null's.
mknod "$work/gpu0" c 1 3
mknod "$work/gpu1" c 1 3
base=$((20000 + RANDOM % 20000))
cat >/etc/slurm/slurm.conf <<EOF
ClusterName=tallytest
SlurmctldHost=localhost
SlurmctldPort=$base
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SlurmctldPidFile=$work/slurmctld.pid
SlurmctldLogFile=$work/slurmctld.log
StateSaveLocation=$work/state
SlurmdPidFile=$work/slurmd-%n.pid
SlurmdLogFile=$work/slurmd-%n.log
SlurmdSpoolDir=$work/spool-%n
ReturnToService=2
GresTypes=gpu
NodeName=sn1 NodeAddr=127.0.0.2 Port=$((base + 1)) CPUs=2 RealMemory=1000 Gres=gpu:2
NodeName=sn2 NodeAddr=127.0.0.3 Port=$((base + 2)) CPUs=2 RealMemory=1000 Gres=gpu:2
NodeName=sn3 NodeAddr=127.0.0.4 Port=$((base + 3)) CPUs=2 RealMemory=1000
NodeName=sn4 NodeAddr=127.0.0.5 Port=$((base + 4)) CPUs=2 RealMemory=1000
PartitionName=all Nodes=ALL Default=YES MaxTime=10 State=UP
EOF
cat >/etc/slurm/gres.conf <<EOF
AutoDetect=off
NodeName=sn[1-2] Name=gpu File=$work/gpu[0-1]
EOF

slurmctld -i -f "$work/etc-slurm/slurm.conf" || skip "slurmctld does not start here"
pids+=("$(pidOf "$work/slurmctld.pid")") || skip "slurmctld wrote no pid file"
for n in sn1 sn2 sn3 sn4; do
  mkdir -p "$work/spool-$n"
  slurmd -f "$work/etc-slurm/slurm.conf" -N $n || skip "slurmd does not start here"
  pids+=("$(pidOf "$work/slurmd-$n.pid")") || skip "slurmd on $n wrote no pid file"
done
idle=""
for _ in $(seq 60); do
  idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | tr '\n' ' ')
  [ "$idle" = "sn1 sn2 sn3 sn4 " ] && break
  sleep 0.5
done
[ "$idle" = "sn1 sn2 sn3 sn4 " ] || skip "the nodes did not come up idle (idle: '$idle'); $(sinfo -R 2>&1)"
echo "cluster up: $(sinfo -h -N -o '%N %G' | tr '\n' ';')"

# ---- the job: planned by tally plan, submitted as written ----
export PATH="$bin:$PATH"
tally plan --format slurm --display-name slurm-test \
  --primary-machine a2-highgpu-2g --accelerator NVIDIA_TESLA_A100:2 \
  --workers 1 --worker-machine a2-highgpu-2g --bandwidth a2-highgpu-2g=24 \
  --reducers 2 --reducer-machine n2-highcpu-16 \
  -- tally doctor --timeout 10s --probe-bytes 1M --probe-seconds 0.2 --worker-gbps 1 \
  >"$work/job.sbatch" || true  # plan exits 1 on a note (the images are placeholders)
grep -q '^#SBATCH hetjob$' "$work/job.sbatch" || {
  cat "$work/job.sbatch" >&2
  echo "FAIL: tally plan wrote no heterogeneous job" >&2
  exit 1
}
echo "submitting:"
grep -E '^(#SBATCH|srun)' "$work/job.sbatch" | sed 's/^/  /'
status=0
timeout 180 sbatch --wait --output="$work/job.out" "$work/job.sbatch" || status=$?
cat "$work/job.out"

# ---- what must have happened ----
fail=0
expect() {  # expect DESCRIPTION COUNT PATTERN
  local n
  n=$(grep -cE "$3" "$work/job.out" || true)
  if [ "$n" -eq "$2" ]; then
    echo "ok   $1"
  else
    echo "FAIL $1: $n lines match /$3/, expected $2" >&2
    fail=1
  fi
}
expect "launch on sn3 and sn4 ran the reducers of Slurm het group 1" 2 \
  '^tally launch: reducer \(Slurm het group 1 node (sn3|sn4)\), tally-reducer on (sn3|sn4):2222'
expect "launch on sn1 and sn2 made them CollNet ranks 0 and 1 of 2" 2 \
  '^tally launch: (primary|worker) \(Slurm het group 0 node sn[12]\), CollNet rank [01] of 2'
expect "each GPU node's doctor read its CollNet rank from Slurm's variables" 2 \
  '^PASS +cluster: Slurm: het group 0 node sn[12] is the (primary|worker), CollNet rank [01] of 2$'
expect "each GPU node's doctor found both reducers in the variables launch set" 2 \
  '^PASS +reducers: 2 .*sn3:2222,sn4:2222'
expect "each GPU node's doctor ran a checked all-reduce on each reducer" 4 \
  '^PASS +reducer (sn3|sn4):2222: reachable.*every result checked'
expect "each GPU node's doctor passed every check" 0 '^(WARN|FAIL) '
# The job's status is the training step's: doctor's, 0 when every check passes.
[ $status -eq 0 ] || { echo "FAIL sbatch --wait exited $status" >&2; fail=1; }
[ $fail = 0 ] || exit 1
echo "PASS: the planned Slurm heterogeneous job ran; doctor checked both reducers from both GPU nodes"
