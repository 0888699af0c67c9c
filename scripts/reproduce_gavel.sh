#!/usr/bin/env bash
# Reproduces Gavel's headline simulations with tessera and writes the figures to
# docs/results/ (JSON per experiment) — the source of the tables in
# docs/benchmarks/gavel-fidelity.md.
#  1. LAS agnostic vs aware, single-GPU jobs, rates 0.4 2.8 4.8 5.6 jobs/h, JCT of jobs
#     4000-4999 (7000 jobs generated so arrivals continue while the window runs).
#  2. The same on multi-GPU jobs at 2.8 jobs/h.
#  3. Makespan: 100 and 700 multi-GPU jobs all at time 0, FIFO vs makespan policies, on
#     4-GPU servers (Gavel's, as config/gavel_108.toml) and on 8-GPU servers (where an 8-GPU
#     job fits on one).
# The multi-GPU experiments (2, 3 on 4-GPU servers) also run with --assume-consolidated
# (files *_consolidated_*), Gavel's simulator's placement assumption: those are the figures
# to set beside Gavel's published ones (docs/design.md; docs/benchmarks/gavel-fidelity.md,
# "Gavel's placement assumption beside Gavel's published figures").
# usage: scripts/reproduce_gavel.sh [SEED]   (run scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${1:-1}
source scripts/reproduce_common.sh
for rate in 0.4 2.8 4.8 5.6; do
  $bin trace generate --jobs 7000 --rate "$rate" --seed "$seed" -o "$tmp/single_$rate.trace"
  echo "== single-GPU, $rate jobs/h, seed $seed"
  $bin compare --trace "$tmp/single_$rate.trace" --window 4000-4999 \
    --policies max_min_fairness,max_min_fairness_perf \
    --json "$out/las_single_rate${rate}_seed$seed.json"
done
$bin trace generate --jobs 7000 --rate 2.8 --multi-gpu --seed "$seed" -o "$tmp/multi_2.8.trace"
echo "== multi-GPU, 2.8 jobs/h, seed $seed"
$bin compare --trace "$tmp/multi_2.8.trace" --window 4000-4999 \
  --policies max_min_fairness,max_min_fairness_perf \
  --json "$out/las_multi_rate2.8_seed$seed.json"
echo "== multi-GPU, 2.8 jobs/h, seed $seed, Gavel's placement assumption"
$bin compare --trace "$tmp/multi_2.8.trace" --window 4000-4999 --assume-consolidated \
  --policies max_min_fairness,max_min_fairness_perf \
  --json "$out/las_multi_consolidated_rate2.8_seed$seed.json"
for n in 100 700; do
  $bin trace generate --jobs "$n" --rate 0 --multi-gpu --seed "$seed" -o "$tmp/static_$n.trace"
  for per in 4 8; do
    echo "== makespan, $n multi-GPU jobs at t=0, $per GPUs per server, seed $seed"
    $bin compare --trace "$tmp/static_$n.trace" \
      --cluster-spec "36 v100 : 36 p100 : 36 k80, $per per server" \
      --policies fifo,fifo_perf,min_total_duration,min_total_duration_perf \
      --json "$out/makespan_n${n}_${per}per_seed$seed.json"
  done
  echo "== makespan, $n multi-GPU jobs at t=0, 4 GPUs per server, seed $seed, Gavel's assumption"
  $bin compare --trace "$tmp/static_$n.trace" --assume-consolidated \
    --cluster-spec "36 v100 : 36 p100 : 36 k80, 4 per server" \
    --policies fifo,fifo_perf,min_total_duration,min_total_duration_perf \
    --json "$out/makespan_n${n}_4per_consolidated_seed$seed.json"
done
