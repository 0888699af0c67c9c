#!/bin/bash
# Under a real Slurm (tests/slurm/slurm_cluster.sh: 3 nodes on this host): an sbatch batch run
# whose script builds the cluster file from the allocation (`tessera cluster from-slurm`) and
# starts the ranks with `srun --mpi=pmix`, and another with mpirun inside the allocation, each
# finish every job with the same steps, loss and accuracy, to the last bit, as `tessera run
# --local 3` on that cluster file; srun without a PMI plugin is refused with one message naming
# the fix; nodes that find other GPUs than the allocation granted refuse to start.
# Skipped (exit 77) only where slurm_cluster.sh cannot start its Slurm: not root, ip(8) or
# Slurm not installed, or slurm-wlm-emulator's slurmstepd selected; it prints the reason first.
#   usage: test_slurm_batch.sh TESSERA_BINARY
set -u
source "$(dirname "$0")/slurm_test.sh"
slurm_test_begin slurm 3
fail_logs=(batch.out mpirun.out local.out)

write_jobs "$work/jobs.toml" 0.01 mlp:60 softmax_regression:80 mlp:40
cat > "$work/batch.sh" <<BATCH
#!/bin/bash
#SBATCH --nodes=3 --ntasks-per-node=1 --output=$work/batch.out
set -eo pipefail
echo "\$(date +%s%N) script starts"
$bin cluster from-slurm --gpus 1 --gpu-type v100 -o $work/cluster.toml
# Each line of the run stamped with the time it was read (ns), for the figures below.
srun --mpi=pmix $bin run --cluster $work/cluster.toml --jobs $work/jobs.toml --verbose \\
  --round-length 0.3 --checkpoint-dir $work/ckpt --json $work/slurm.json 2>&1 |
  while IFS= read -r line; do echo "\$(date +%s%N) \$line"; done
BATCH
start=$(now)
sbatch --wait "$work/batch.sh" || fail "the sbatch job failed"
cat "$work/batch.out"
script=$(awk '/script starts/ {print $1; exit}' "$work/batch.out")
round=$(awk '/ round 0 at / {print $1; exit}' "$work/batch.out")
[ -n "$script" ] && [ -n "$round" ] || fail "no time stamps in the batch output"
echo "figures: sbatch to the batch script $(ms "$start" "$script") ms, to the first round $(ms "$start" "$round") ms"
grep -q 'name = "n3"' "$work/cluster.toml" || fail "cluster.toml lacks node n3"
"$bin" run --local 3 --cluster "$work/cluster.toml" --jobs "$work/jobs.toml" --round-length 0.3 \
  --checkpoint-dir "$work/ckpt-local" --json "$work/local.json" >"$work/local.out" 2>&1 ||
  fail "the --local run failed"
same_results "$work/slurm.json" "$work/local.json" "srun --mpi=pmix and --local" ||
  fail "the runs differ"
# mpirun inside the allocation (Open MPI starts its daemons through Slurm) gives the same.
cat > "$work/mpirun.sh" <<BATCH
#!/bin/bash
#SBATCH --nodes=3 --ntasks-per-node=1 --output=$work/mpirun.out
mpirun -np 3 --map-by node $bin run --cluster $work/cluster.toml --jobs $work/jobs.toml \\
  --round-length 0.3 --checkpoint-dir $work/ckpt-mpirun --json $work/mpirun.json
BATCH
sbatch --wait "$work/mpirun.sh" >/dev/null || fail "mpirun in sbatch failed"
same_results "$work/mpirun.json" "$work/local.json" "mpirun in the allocation and --local" ||
  fail "mpirun's run differs"
# srun without a PMI plugin: every task exits 2, one message.
out=$(srun -N3 -n3 --mpi=none "$bin" run --cluster "$work/cluster.toml" --jobs "$work/jobs.toml" 2>&1)
echo "$out"
[ "$(echo "$out" | grep -c 'srun --mpi=pmix')" = 1 ] || fail "the guard's message not said once"
[ "$(echo "$out" | grep -c 'Exited with exit code 2')" = 3 ] || fail "not every task exited 2"
# The grant checked against what each node finds: nodes that find 2 GPUs where the
# allocation's cluster file says 1 refuse to start, naming the server and the file.
out=$(srun -N3 -n3 --mpi=pmix env "TESSERA_GPU_DISCOVERY=fake:2*Tesla V100-SXM2-16GB" \
      "$bin" run --cluster "$work/cluster.toml" --jobs "$work/jobs.toml" 2>&1)
echo "$out" | head -3
echo "$out" | grep -q "server 'n1' declares 1 GPU of type v100, but its node found 2 GPUs" ||
  fail "a node with other GPUs than its grant was not refused"
[ "$(echo "$out" | grep -c 'Exited with exit code 2')" = 3 ] || fail "not every task exited 2"
echo "ok"
