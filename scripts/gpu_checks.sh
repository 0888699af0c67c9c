#!/usr/bin/env bash
# The GPU checks in one command, on a machine with NVIDIA GPUs (docs/design.md,
# "CUDA trainable and device buffers"):
#   1. the devices, driver and nvcc in use;
#   2. a build with CUDA and NCCL (warnings are errors) in its own build directory;
#   3. the unit tests that need a GPU or touch CUDA: tags [gpu], [cuda] and [comm] (the CUDA
#      MLP's checkpoint-and-resume bits, its loss going down, the CPU-GPU checkpoint exchange,
#      the device kernels against their host definitions);
#   4. bench_cuda_trainable_bench: steps/s of the CUDA MLP against the CPU's;
#   5. the aggregator tests under mpirun on device buffers: the MPI backend's (2 ranks, GPUs
#      shared) and the NCCL backend's with one rank per GPU;
#   6. `tessera run --local 1` of two mlp_cuda jobs on one GPU under the default policy (the
#      cluster file declares one 1-GPU server of the first GPU's type, read from its model
#      name as the node's discovery does, so discovery accepts it; CUDA_VISIBLE_DEVICES=0),
#      printing each job's measured steps/s;
#   7. the same cluster file declaring another GPU type: the node must refuse it (exit 2);
#   8. `tessera run --local 2 --policy hadare` of one mlp_cuda job on two 1-GPU servers whose
#      node processes share GPU 0: it must run as two copies at least once and finish;
#   9. the PyTorch example (examples/pytorch_elastic) told --device cuda: alone, as a warm
#      program job, and forked into two warm copies on the one GPU
#      (scripts/gpu_program_checks.sh; python3 on PATH needs torch with CUDA).
# GPU_CHECKS_ONLY=programs runs check 9 alone (no build, no other check).
# On a GPU machine no check may skip: a skip there is a failure.
#
# usage: scripts/gpu_checks.sh [build-dir]      (default: build-gpu in the repository)
#        scripts/gpu_checks.sh --prebuilt DIR   (no build: DIR holds tessera, tessera_tests,
#                                                tessera_mpi_aggregator_tests and
#                                                bench_cuda_trainable_bench, as
#                                                scripts/gpu_bundle.sh packs them)
# GPU_CHECKS_OUT=DIR keeps the run's cluster, jobs and summary files there.
# Exit: 0 all passed; 1 a check failed; 77 no GPU here (nothing ran; it says what it skipped).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
prebuilt=""
if [ "${1:-}" = "--prebuilt" ]; then
  prebuilt=$(cd "${2:?--prebuilt needs a directory}" && pwd)
  build=$prebuilt
else
  build=${1:-$root/build-gpu}
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

skipped_list="the CUDA build, the [gpu]/[cuda]/[comm] unit tests on a GPU, \
bench_cuda_trainable_bench, the MPI and NCCL aggregator tests on device buffers, \
a tessera run of two mlp_cuda jobs"

# ---- 1. is there a GPU? -----------------------------------------------------------------------
gpus=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader \
         2>/dev/null)
  reason="nvidia-smi lists no GPU: $(nvidia-smi -L 2>&1 | head -n 1)"
else
  reason="nvidia-smi is not installed (no NVIDIA driver)"
fi
if [ -z "$gpus" ]; then
  echo "gpu_checks: NO GPU on $(hostname): $reason"
  echo "gpu_checks: skipped: $skipped_list"
  exit 77
fi
ngpu=$(printf '%s\n' "$gpus" | wc -l)
echo "gpu_checks: $ngpu GPU(s) on $(hostname):"
printf '  %s\n' "$gpus"
command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 1

failures=()
# Runs "$@" as check $name; a non-zero exit or a SKIPPED line in its output fails the check.
check() {
  local name=$1
  shift
  echo
  echo "==== $name: $*"
  local out
  out=$("$@" 2>&1)
  local rc=$?
  printf '%s\n' "$out"
  if [ $rc -ne 0 ]; then
    failures+=("$name (exit $rc)")
  elif printf '%s\n' "$out" | grep -q "SKIPPED"; then
    failures+=("$name (skipped a GPU check on a GPU machine)")
  fi
}

# ---- 2. build -------------------------------------------------------------------------------
build_all() {
  jobs=$(nproc)
  echo
  echo "==== build in $build (-j$jobs)"
  mkdir -p "$build"
  if ! cmake -S "$root" -B "$build" -G Ninja -DTESSERA_WERROR=ON \
       > "$build/gpu_checks.configure.log" 2>&1; then
    tail -n 30 "$build/gpu_checks.configure.log"
    echo "gpu_checks: FAILED to configure (log: $build/gpu_checks.configure.log)"
    exit 1
  fi
  grep "tessera: " "$build/gpu_checks.configure.log"
  if ! grep -q "CUDA=ON, NCCL=ON" "$build/gpu_checks.configure.log"; then
    echo "gpu_checks: FAILED: the build has no CUDA or no NCCL (see the line above)"
    exit 1
  fi
  if ! cmake --build "$build" -j "$jobs" --target tessera_tests tessera_mpi_aggregator_tests \
       bench_cuda_trainable_bench tessera > "$build/gpu_checks.build.log" 2>&1; then
    grep -E "error|FAILED" "$build/gpu_checks.build.log" | head -n 30
    echo "gpu_checks: FAILED to build (log: $build/gpu_checks.build.log)"
    exit 1
  fi
  echo "built."
}
if [ -n "$prebuilt" ]; then
  echo
  echo "==== prebuilt programs in $prebuilt (no build)"
  tests_bin=$prebuilt/tessera_tests mpi_tests_bin=$prebuilt/tessera_mpi_aggregator_tests
  bench_bin=$prebuilt/bench_cuda_trainable_bench tessera_bin=$prebuilt/tessera
  export TESSERA_TEST_BINARY=$tessera_bin  # the CLI tests run this one, not the build's path
else
  build_all || exit 1
  tests_bin=$build/tests/tessera_tests mpi_tests_bin=$build/tests/tessera_mpi_aggregator_tests
  bench_bin=$build/bench_cuda_trainable_bench tessera_bin=$build/tessera
fi

run_dir=${GPU_CHECKS_OUT:-$(mktemp -d)}
mkdir -p "$run_dir"
if [ "${GPU_CHECKS_ONLY:-}" != programs ]; then
# ---- 3. to 5. the checks --------------------------------------------------------------------
check "unit tests on the GPU" "$tests_bin" "[gpu],[cuda],[comm]"
check "CUDA MLP against the CPU, K = 1" "$bench_bin" --seconds 1
check "CUDA MLP against the CPU, K = 4" "$bench_bin" --seconds 1 --k 4
check "MPI backend, device buffers (2 ranks)" \
  mpirun -np 2 "$mpi_tests_bin" "[gpu]"
check "NCCL backend, host and device buffers ($ngpu rank(s), one per GPU)" \
  mpirun -np "$ngpu" "$mpi_tests_bin" "[nccl]"

# The first GPU's type from its model name (runtime/node/gpu/devices.cpp's table, the common part).
gpu_type=$(printf '%s\n' "$gpus" | head -1 | tr 'A-Z' 'a-z' |
  grep -oE 'gh200|h100|h200|h800|a100|a800|a6000|a40|l40s|l40|l4|v100|p100|k80|t4' | head -1)
gpu_type=${gpu_type:-h100}
printf '[cluster]\nname = "one-gpu"\n[[cluster.server]]\nname = "gpu0"\ngpu_type = "%s"\n'\
'gpus = 1\n' "$gpu_type" > "$run_dir/cluster.toml"
# Long enough to span several 1 s rounds on an H100 (about 2,500 steps/s each, measured).
for seed in 1 2; do
  printf '[[job]]\nkind = "mlp_cuda"\ntotal_steps = 6000\nstep_time = 0.01\nseed = %s\n'\
'[job.config]\nhidden = 256\ndim = 64\ntrain_size = 4096\n\n' "$seed"
done > "$run_dir/jobs.toml"
check "tessera run: two mlp_cuda jobs on one $gpu_type GPU" \
  env CUDA_VISIBLE_DEVICES=0 "$tessera_bin" run --local 1 --cluster "$run_dir/cluster.toml" \
  --jobs "$run_dir/jobs.toml" --json "$run_dir/summary.json" --timeline "$run_dir/timeline.csv" \
  --timeout 300 -v
if [ -f "$run_dir/summary.json" ]; then
  echo "summary: $run_dir/summary.json; measured steps/s per job (the declared model: 100):"
  python3 -c 'import json,sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    print("  job %d: %s steps in %d rounds, throughput %s" % (j["id"], j["steps"], j["rounds"],
          ", ".join("%.0f" % t for t in j["throughput"])))' "$run_dir/summary.json"
fi

# A real GPU that disagrees with its server entry: the node must refuse (exit 2) and name it.
wrong=v100
[ "$gpu_type" = v100 ] && wrong=k80
sed "s/gpu_type = \"$gpu_type\"/gpu_type = \"$wrong\"/" "$run_dir/cluster.toml" > "$run_dir/wrong.toml"
echo
echo "==== a node whose real GPU is not the declared $wrong is refused"
out=$(env CUDA_VISIBLE_DEVICES=0 "$tessera_bin" run --local 1 --cluster "$run_dir/wrong.toml" \
      --jobs "$run_dir/jobs.toml" --timeout 60 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 2 ] || ! printf '%s\n' "$out" | grep -q "but its node found"; then
  failures+=("refusal of a mismatched real GPU (exit $rc, expected 2 and the devices named)")
fi

# A job forked into copies on two node processes that share the first GPU (hadare forks a lone
# job over every free GPU); the copies' parameters are averaged between rounds.
fork_dir=$run_dir/fork
mkdir -p "$fork_dir"
printf '[cluster]\nname = "two-nodes-one-gpu"\n' > "$fork_dir/cluster.toml"
for s in 0 1; do
  printf '[[cluster.server]]\nname = "gpu%s"\ngpu_type = "%s"\ngpus = 1\n' "$s" "$gpu_type"
done >> "$fork_dir/cluster.toml"
printf '[[job]]\nkind = "mlp_cuda"\ntotal_steps = 30000\nstep_time = 0.01\nseed = 3\n'\
'[job.config]\nhidden = 256\ndim = 64\ntrain_size = 4096\n' > "$fork_dir/jobs.toml"
check "tessera run: one mlp_cuda job forked over two node processes on GPU 0 (hadare)" \
  env CUDA_VISIBLE_DEVICES=0 "$tessera_bin" run --local 2 --policy hadare \
  --cluster "$fork_dir/cluster.toml" --jobs "$fork_dir/jobs.toml" \
  --json "$fork_dir/summary.json" --timeout 300
if [ -f "$fork_dir/summary.json" ]; then
  python3 -c 'import json,sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print("  forked job: %s steps, %d rounds, up to %d copies, throughput per rank %s, loss %.3g" % (
      j["steps"], j["rounds"], j["max_copies"],
      ", ".join("%.0f" % t for t in j["throughput"]), j["loss"]))
sys.exit(0 if j["finished"] and j["max_copies"] >= 2 else 1)' "$fork_dir/summary.json" ||
    failures+=("forked job: not finished, or never ran as two copies")
fi
fi  # GPU_CHECKS_ONLY

# A user's program on the GPU: the PyTorch example alone, as a warm program job and forked
# into two warm copies on the one GPU (scripts/gpu_program_checks.sh; python3 on PATH needs
# torch with CUDA and NumPy; DIGITS=FILE stands in for scikit-learn's digits).
check "the PyTorch example on the GPU: alone, warm, forked" \
  bash "$root/scripts/gpu_program_checks.sh" "$tessera_bin" "$(command -v python3)" \
  "$run_dir/program" "${PROGRAM_ROUND:-10}" "${PROGRAM_SECONDS:-40}"

echo
if [ ${#failures[@]} -gt 0 ]; then
  echo "gpu_checks: FAILED:"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
echo "gpu_checks: all GPU checks passed on: $(printf '%s\n' "$gpus" | cut -d, -f2 | sort -u | xargs)"
