#!/usr/bin/env bash
# README command (1): install what is needed, build, and run the main job on bundled examples:
#  1. the simulator on Gavel's 108-GPU cluster (36 V100 + 36 P100 + 36 K80) and a bundled
#     trace of 300 single-GPU jobs at 2.8 jobs/h: LAS heterogeneity-agnostic vs -aware, FIFO;
#  2. a local multi-process cluster under mpirun (3 node processes on this host, declared
#     V100 / P100 / K80 with speed factors 1 / 0.5 / 0.25) training four real jobs
#     (softmax regression and MLPs) under heterogeneity-aware LAS, ending with a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
echo "== simulation: tessera compare on a bundled trace"
./build/tessera compare \
  --cluster config/gavel_108.toml \
  --trace data/traces/gavel_single_rate2.8_n300_seed1.trace \
  --policies max_min_fairness,max_min_fairness_perf,fifo,fifo_perf \
  --json build/setup_demo.json
echo "metrics JSON: build/setup_demo.json"
echo "== actor runtime: mpirun -np 3 tessera run (real training, 1 s rounds)"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mpirun -np 3 --oversubscribe ./build/tessera run \
  --cluster config/run_example_cluster.toml \
  --jobs config/run_example_jobs.toml \
  --policy max_min_fairness_perf
