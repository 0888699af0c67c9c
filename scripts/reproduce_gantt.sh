#!/usr/bin/env bash
# The README's main run (scripts/setup.sh: mpirun -np 3 tessera run on the bundled example
# cluster and jobs, heterogeneity-aware LAS, 1 s rounds) with its timeline recorded, the same
# job set simulated (scripts/run_jobs_to_sim.py: the run's rate model as a throughput table),
# and both Gantt charts side by side: docs/figures/gantt_readme_run_vs_sim.{png,svg}.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/gantt}
mkdir -p "$out"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mpirun -np 3 --oversubscribe ./build/tessera run \
  --cluster config/run_example_cluster.toml \
  --jobs config/run_example_jobs.toml \
  --policy max_min_fairness_perf --timeline "$out/run.jsonl"
/usr/bin/python3 scripts/run_jobs_to_sim.py config/run_example_cluster.toml \
  config/run_example_jobs.toml "$out/sim"
./build/tessera simulate --trace "$out/sim/jobs.toml" --throughputs "$out/sim/throughputs.json" \
  --cluster config/run_example_cluster.toml --round-length 1 \
  --policy max_min_fairness_perf --timeline "$out/sim.jsonl"
./build/tessera plot gantt "$out/run.jsonl" "$out/sim.jsonl" \
  --out docs/figures/gantt_readme_run_vs_sim \
  --title "README run (mpirun -np 3, left) and its simulation (right): max_min_fairness_perf"
