#!/usr/bin/env bash
# Hadar in simulation: Hadar and HadarE against Gavel's heterogeneity-aware makespan
# (min_total_duration_perf) and LAS (max_min_fairness_perf) policies on Gavel's cluster
# (config/gavel_108.toml: 36 V100 + 36 P100 + 36 K80, 4 GPUs per server, 360 s rounds) and
# traces from Gavel's multi-GPU recipe:
#  1. online: 1000 jobs at 2.8 jobs/h, windowed JCT over jobs 500-999;
#  2. static: 100 and 300 jobs all at time 0;
#  plus the ablation of Hadar without mixed-type placements (mixed_types=0).
# Writes docs/results/hadar_*.json; the tables in docs/benchmarks/policies.md ("Hadar and
# HadarE in simulation") come from these.
# usage: scripts/reproduce_hadar.sh [SEED]   (run scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${1:-1}
source scripts/reproduce_common.sh
run() {  # run NAME TRACE [compare options...]
  local name=$1 trace=$2
  shift 2
  $bin compare --trace "$trace" -q --parallel 1 --json "$tmp/$name.json" "$@"
}
$bin trace generate --jobs 1000 --rate 2.8 --multi-gpu --seed "$seed" -o "$tmp/online.trace"
echo "== online, 1000 multi-GPU jobs at 2.8 jobs/h, window 500-999, seed $seed"
run gavel "$tmp/online.trace" --window 500-999 --policies min_total_duration_perf,max_min_fairness_perf
run hadar "$tmp/online.trace" --window 500-999 --policies hadar,hadare
run ablation "$tmp/online.trace" --window 500-999 --policies hadar --policy-arg mixed_types=0
sed -i 's/"policy": *"hadar"/"policy": "hadar_mixed_types=0"/' "$tmp/ablation.json"
merge "$out/hadar_online_rate2.8_seed$seed.json" "$tmp/gavel.json" "$tmp/hadar.json" "$tmp/ablation.json"
for n in 100 300; do
  $bin trace generate --jobs "$n" --rate 0 --multi-gpu --seed "$seed" -o "$tmp/static.trace"
  echo "== static, $n multi-GPU jobs at t=0, seed $seed"
  run gavel "$tmp/static.trace" --policies min_total_duration_perf,max_min_fairness_perf
  run hadar "$tmp/static.trace" --policies hadar,hadare
  run ablation "$tmp/static.trace" --policies hadar --policy-arg mixed_types=0
  sed -i 's/"policy": *"hadar"/"policy": "hadar_mixed_types=0"/' "$tmp/ablation.json"
  merge "$out/hadar_static_n${n}_seed$seed.json" "$tmp/gavel.json" "$tmp/hadar.json" "$tmp/ablation.json"
done
