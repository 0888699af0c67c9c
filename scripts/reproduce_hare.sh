#!/usr/bin/env bash
# Hare in simulation: Hare's online policy (hare, HLAS over task splits) against Gavel's
# heterogeneity-aware LAS (max_min_fairness_perf) and plain LAS (max_min_fairness), plus
# Hare's clairvoyant heuristic (hare_offline) and the ablation without relaxed
# synchronisation (hare relaxed=0: one task per GPU), on Gavel's cluster
# (config/gavel_108.toml: 36 V100 + 36 P100 + 36 K80, 4 GPUs per server, 360 s rounds) and
# traces from Gavel's multi-GPU recipe: 1000 jobs at each arrival rate, windowed JCT over
# jobs 500-999 (the simulation stops once the window has finished).
# Writes docs/results/hare_multi_rate<R>_seed<S>.json; docs/benchmarks/policies.md ("Hare")
# summarises them.
# usage: scripts/reproduce_hare.sh [SEED] [RATES...]   (run scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${1:-1}
shift || true
rates=${*:-1.4 2.8 4.2 5.6}
source scripts/reproduce_common.sh
for rate in $rates; do
  $bin trace generate --jobs 1000 --rate "$rate" --multi-gpu --seed "$seed" -o "$tmp/multi.trace"
  echo "== multi-GPU, 1000 jobs at $rate jobs/h, window 500-999, seed $seed"
  $bin compare --trace "$tmp/multi.trace" --window 500-999 -q --parallel 1 \
    --policies max_min_fairness,max_min_fairness_perf,hare,hare_offline --json "$tmp/main.json"
  $bin compare --trace "$tmp/multi.trace" --window 500-999 -q --parallel 1 \
    --policies hare --policy-arg relaxed=0 --json "$tmp/ablation.json"
  sed -i 's/"policy": *"hare"/"policy": "hare_relaxed=0"/' "$tmp/ablation.json"
  merge "$out/hare_multi_rate${rate}_seed$seed.json" "$tmp/main.json" "$tmp/ablation.json"
done
