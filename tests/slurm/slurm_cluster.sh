#!/bin/bash
# A real Slurm on this host for the tests: slurmctld in this network namespace and N slurmd,
# each in a network, UTS and mount namespace of its own (host name nK, address 10.233.T.K on a
# bridge, an /etc/hosts naming every node), so the nodes look like separate machines to Slurm,
# to Open MPI and to tessera. Debian's slurmd is not built for several daemons on one address
# and its emulator package cannot parse a front-end configuration, hence the namespaces.
#
#   slurm_cluster.sh up DIR N    start it; prints "export SLURM_CONF=DIR/slurm.conf" when ready
#   slurm_cluster.sh down DIR    stop every daemon and remove the namespaces and the bridge
# Exit 77 (with the reason) when this host cannot run it: not root, no ip(8), no Slurm.
set -u
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 up DIR N | down DIR" >&2; exit 2; }

down() {
  [ -f "$dir/tag" ] || return 0
  local tag; tag=$(cat "$dir/tag")
  for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 0.5
  for f in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
  done
  # Tasks left in the namespaces (a test that failed half-way) end with them.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^tsl${tag}n"); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "tsl${tag}b" 2>/dev/null
  rm -f "$dir/tag"
}

if [ "$cmd" = down ]; then down; exit 0; fi
[ "$cmd" = up ] || { echo "usage: $0 up DIR N | down DIR" >&2; exit 2; }
n=${3:-3}
[ "$(id -u)" = 0 ] || { echo "skip: needs root for network namespaces"; exit 77; }
ctld=$(command -v slurmctld-wlm || command -v slurmctld)
slurmd=$(command -v slurmd-wlm || command -v slurmd)
for t in ip unshare munged mungekey srun sbatch "$ctld" "$slurmd"; do
  command -v "$t" >/dev/null || { echo "skip: $t is not installed (scripts/setup.sh installs Slurm)"; exit 77; }
done
case "$(readlink -f "$(dirname "$slurmd")/slurmstepd")" in
  *emulator*) echo "skip: slurm-wlm-emulator's slurmstepd is selected (it numbers every node 0):" \
                   "update-alternatives --set slurmd $(command -v slurmd-wlm)"; exit 77 ;;
esac
mkdir -p "$dir/munge" "$dir/state" "$dir/log"
for k in $(seq 1 "$n"); do mkdir -p "$dir/spool-n$k" "$dir/tmp-n$k"; done
mkdir -p "$dir/tmp"
dir=$(cd "$dir" && pwd)
tag=$(( $$ % 200 + 20 ))
echo "$tag" > "$dir/tag"
net=10.233.$tag
ctl=$(hostname)
# One bridge for the cluster, this namespace at .254.
ip link add "tsl${tag}b" type bridge && ip addr add "$net.254/24" dev "tsl${tag}b" &&
  ip link set "tsl${tag}b" up || { echo "skip: cannot make a bridge here"; down; exit 77; }
{ echo "127.0.0.1 localhost"; echo "$net.254 $ctl"; } > "$dir/hosts"
for k in $(seq 1 "$n"); do echo "$net.$k n$k" >> "$dir/hosts"; done
for k in $(seq 1 "$n"); do
  ns="tsl${tag}n$k"
  ip netns add "$ns" &&
    ip link add "tsl${tag}v$k" type veth peer name eth0 netns "$ns" &&
    ip link set "tsl${tag}v$k" master "tsl${tag}b" up &&
    ip netns exec "$ns" ip addr add "$net.$k/24" dev eth0 &&
    ip netns exec "$ns" ip link set eth0 up &&
    ip netns exec "$ns" ip link set lo up ||
    { echo "skip: cannot make network namespaces here"; down; exit 77; }
done
mungekey -c -k "$dir/munge/key" -b 1024 >/dev/null 2>&1 && chmod 600 "$dir/munge/key"
munged --force --key-file="$dir/munge/key" --socket="$dir/munge/sock" \
  --pid-file="$dir/munge/pid" --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" ||
  { echo "munged did not start"; down; exit 1; }
cpus=$(nproc)
cat > "$dir/slurm.conf" <<CONF
# Written by tests/slurm/slurm_cluster.sh: a throw-away cluster of $n nodes on this host.
ClusterName=tessera-test
SlurmctldHost=$ctl($net.254)
SlurmctldPort=$(( 16800 + tag ))
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: Slurm holds a requeued job this long before it may start again (default 120 s).
AuthInfo=socket=$dir/munge/sock,cred_expire=10
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
# Each node sees its own directory here (a bind mount in its namespace): Slurm's PMIx plugin
# makes per-step directories in TmpFS, which must not collide between nodes.
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
# Scheduling passes every second (defaults: 60 s main, 30 s backfill), so a requeued job starts
# as soon as its hold ends.
SchedulerParameters=sched_interval=1,bf_interval=1
ReturnToService=2
MailProg=/bin/true
KillWait=10
NodeName=DEFAULT CPUs=$cpus State=UNKNOWN
CONF
for k in $(seq 1 "$n"); do echo "NodeName=n$k NodeAddr=$net.$k" >> "$dir/slurm.conf"; done
echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE" >> "$dir/slurm.conf"
export SLURM_CONF=$dir/slurm.conf
"$ctld" -i || { echo "slurmctld did not start:"; tail -n 5 "$dir/log/slurmctld.log"; down; exit 1; }
for k in $(seq 1 "$n"); do
  # nsenter, not `ip netns exec`: the latter mounts a fresh /sys without the cgroup
  # hierarchy slurmd looks for.
  nsenter --net="/run/netns/tsl${tag}n$k" unshare --uts --mount sh -c \
    "mount --bind '$dir/hosts' /etc/hosts && mount --bind '$dir/tmp-n$k' '$dir/tmp' &&
     hostname n$k && exec '$slurmd' -N n$k" ||
    { echo "slurmd n$k did not start"; down; exit 1; }
done
for i in $(seq 1 100); do
  idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | wc -l)
  [ "$idle" -ge "$n" ] && { echo "export SLURM_CONF=$dir/slurm.conf"; exit 0; }
  sleep 0.2
done
echo "the nodes did not come up:"; sinfo -N 2>&1; tail -n 5 "$dir"/log/*.log
down
exit 1
