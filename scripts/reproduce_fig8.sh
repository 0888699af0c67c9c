#!/usr/bin/env bash
# Gavel's Figure 8 (LAS, single-GPU jobs): average JCT of jobs 4000-4999 of 7000 against the
# input rate, heterogeneity-agnostic (max_min_fairness) vs -aware (max_min_fairness_perf),
# 3 seeds, on Gavel's 108-GPU cluster. One sweep (resumable: rerun to finish an interrupted
# one), then the plot. Usage: scripts/reproduce_fig8.sh [OUT_DIR] [-j N]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/fig8}
shift || true
./build/tessera sweep --policies max_min_fairness,max_min_fairness_perf \
  --rates 0.4,1,2,2.8,3.5,4,4.4,4.8,5.2,5.6,6 --seeds 1,2,3 \
  --jobs 7000 --window 4000-4999 --out "$out" "$@"
./build/tessera plot jct-rate "$out/sweep.csv" --out docs/figures/fig8_las_jct_vs_rate \
  --reference docs/results/gavel_fig8_published.csv \
  --title "LAS, single-GPU jobs: avg JCT of jobs 4000-4999 (3 seeds)"
