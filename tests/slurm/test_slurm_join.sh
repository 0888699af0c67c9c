#!/bin/bash
# Under a real Slurm (tests/slurm/slurm_cluster.sh: 4 nodes on this host): a served cluster on
# 3 of them (examples/slurm/serve.sbatch with SPARE="n4:v100:1"), then a second sbatch
# (examples/slurm/join.sbatch on n4) whose node joins and gets work; cancelling that job drains
# the node (it leaves, exit 0) and every job still finishes.
# Skipped (exit 77) only where slurm_cluster.sh cannot start its Slurm: not root, ip(8) or
# Slurm not installed, or slurm-wlm-emulator's slurmstepd selected; it prints the reason first.
#   usage: test_slurm_join.sh TESSERA_BINARY
set -u
source "$(dirname "$0")/slurm_test.sh"
slurm_test_begin join 4
fail_logs=(serve.out join.out)
# "<state> <assigned parts>" of node n4 in the cluster's view, "none 0" before it is listed.
n4() {
  on_n1 "$bin" nodes --json --state-dir "$work/state" 2>/dev/null | python3 -c '
import json, sys
try:
    nodes = json.load(sys.stdin)["nodes"]
except Exception:
    print("none 0"); sys.exit()
n = [x for x in nodes if x["name"] == "n4"]
print(n[0]["state"], len(n[0]["assignment"])) if n else print("none 0")'
}
finished() {
  on_n1 "$bin" status --json --state-dir "$work/state" 2>/dev/null | python3 -c '
import json, sys
try:
    jobs = json.load(sys.stdin)["jobs"]
except Exception:
    print(0); sys.exit()
print(sum(1 for j in jobs if j["state"] == "finished"))'
}

write_jobs "$work/jobs.toml" 0.02 mlp:600 mlp:600 mlp:600 mlp:600
serve_job=$(cd "$repo" && TESSERA="$bin" STATE="$work/state" LISTEN=127.0.0.1:0 SPARE="n4:v100:1" \
            SERVE_ARGS="--round-length 1" sbatch --parsable -w "n[1-3]" \
            --output="$work/serve.out" examples/slurm/serve.sbatch) || fail "sbatch refused serve"
slurm_jobs+=("$serve_job")
for i in $(seq 1 600); do [ -s "$work/state/scheduler" ] && [ -s "$work/state/address" ] && break; sleep 0.1; done
[ -s "$work/state/scheduler" ] || fail "serve wrote no scheduler address for joiners"
grep -q 'name = "n4"' "$work/state/cluster.toml" || fail "the spare server is not in the cluster file"
on_n1 "$bin" submit "$work/jobs.toml" --state-dir "$work/state" >/dev/null || fail "submit failed"
t0=$(now)
join_job=$(cd "$repo" && TESSERA="$bin" STATE="$work/state" sbatch --parsable -w n4 \
           --output="$work/join.out" examples/slurm/join.sbatch) || fail "sbatch refused join"
slurm_jobs+=("$join_job")
for i in $(seq 1 600); do
  read -r state parts < <(n4)
  [ "$state" = alive ] && [ "$parts" -gt 0 ] && break
  sleep 0.1
done
t1=$(now)
[ "$state" = alive ] && [ "$parts" -gt 0 ] || fail "n4 did not join and get work (state $state)"
echo "figures: second sbatch to its node holding work $(ms "$t0" "$t1") ms"
# Its allocation ends: the node drains and leaves; the cluster goes on.
scancel "$join_job"
for i in $(seq 1 600); do
  read -r state parts < <(n4)
  [ "$state" = left ] && break
  sleep 0.1
done
[ "$state" = left ] || fail "n4 did not leave after its job was cancelled (state $state)"
grep -q "left the cluster (drained)" "$work/serve.out" || fail "n4 was not drained"
grep -E "Exited with exit code|task [0-9]+: (Killed|Terminated)" "$work/join.out" &&
  fail "the joined node did not exit 0"
for i in $(seq 1 1200); do [ "$(finished)" = 4 ] && break; sleep 0.1; done
[ "$(finished)" = 4 ] || fail "$(finished) of 4 jobs finished"
echo "every job finished; n4 joined, worked and left"
echo ok
