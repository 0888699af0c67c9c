#!/bin/bash
# Under a real Slurm (tests/slurm/slurm_cluster.sh: 3 nodes on this host): an sbatch batch run
# whose script builds the cluster file from the allocation (`tessera cluster from-slurm`) and
# starts the ranks with `srun --mpi=pmix`, and another with mpirun inside the allocation, each
# finish every job with the same steps, loss and accuracy, to the last bit, as `tessera run
# --local 3` on that cluster file; srun without a PMI plugin is refused with one message naming
# the fix; nodes that find other GPUs than the allocation granted refuse to start. Exit 77
# (skipped, with the reason) where Slurm cannot start here.
#   usage: test_slurm_batch.sh TESSERA_BINARY
set -u
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/tessera-slurm-XXXXXX)
cluster="$work/slurm"
cleanup() { bash "$here/slurm_cluster.sh" down "$cluster"; rm -rf "$work"; }
trap cleanup EXIT
up=$(bash "$here/slurm_cluster.sh" up "$cluster" 3); rc=$?
echo "$up"
[ $rc -eq 0 ] || exit $rc
eval "$up"   # SLURM_CONF
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAILED: $*"; exit 1; }

cat > "$work/jobs.toml" <<JOBS
[[job]]
kind = "mlp"
total_steps = 60
step_time = 0.01
[[job]]
kind = "softmax_regression"
total_steps = 80
step_time = 0.01
[[job]]
kind = "mlp"
total_steps = 40
step_time = 0.01
JOBS
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
start=$(date +%s%N)
sbatch --wait "$work/batch.sh" || { cat "$work/batch.out"; fail "the sbatch job failed"; }
cat "$work/batch.out"
ms() { echo $(( ($1 - start) / 1000000 )); }
script=$(awk '/script starts/ {print $1; exit}' "$work/batch.out")
round=$(awk '/ round 0 at / {print $1; exit}' "$work/batch.out")
[ -n "$script" ] && [ -n "$round" ] || fail "no time stamps in the batch output"
echo "figures: sbatch to the batch script $(ms "$script") ms, to the first round $(ms "$round") ms"
grep -q 'name = "n3"' "$work/cluster.toml" || fail "cluster.toml lacks node n3"
"$bin" run --local 3 --cluster "$work/cluster.toml" --jobs "$work/jobs.toml" --round-length 0.3 \
  --checkpoint-dir "$work/ckpt-local" --json "$work/local.json" >"$work/local.out" 2>&1 ||
  { cat "$work/local.out"; fail "the --local run failed"; }
python3 - "$work/slurm.json" "$work/local.json" <<'PY' || fail "the runs differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["ok"] and b["ok"], "a run not ok"
ja = {j["id"]: j for j in a["jobs"]}
jb = {j["id"]: j for j in b["jobs"]}
assert ja.keys() == jb.keys(), (ja.keys(), jb.keys())
for k in ja:
    for f in ("finished", "steps", "loss", "accuracy"):
        assert ja[k][f] == jb[k][f], (k, f, ja[k][f], jb[k][f])
print("slurm and --local: %d jobs, steps, loss and accuracy equal" % len(ja))
PY
# mpirun inside the allocation (Open MPI starts its daemons through Slurm) gives the same.
cat > "$work/mpirun.sh" <<BATCH
#!/bin/bash
#SBATCH --nodes=3 --ntasks-per-node=1 --output=$work/mpirun.out
mpirun -np 3 --map-by node $bin run --cluster $work/cluster.toml --jobs $work/jobs.toml \\
  --round-length 0.3 --checkpoint-dir $work/ckpt-mpirun --json $work/mpirun.json
BATCH
sbatch --wait "$work/mpirun.sh" >/dev/null || { cat "$work/mpirun.out"; fail "mpirun in sbatch failed"; }
python3 - "$work/mpirun.json" "$work/local.json" <<'PY' || fail "mpirun's run differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ja = {j["id"]: j for j in a["jobs"]}
jb = {j["id"]: j for j in b["jobs"]}
assert a["ok"] and ja.keys() == jb.keys()
for k in ja:
    for f in ("finished", "steps", "loss", "accuracy"):
        assert ja[k][f] == jb[k][f], (k, f, ja[k][f], jb[k][f])
print("mpirun in the allocation and --local: %d jobs equal" % len(ja))
PY
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
