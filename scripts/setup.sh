#!/usr/bin/env bash
# README command (1): install what is needed, build, and run the main job on a bundled
# example: Gavel's 108-GPU cluster (36 V100 + 36 P100 + 36 K80), a bundled trace of 300
# single-GPU jobs arriving at 2.8 jobs/h, LAS heterogeneity-agnostic vs -aware and FIFO.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/tessera compare \
  --cluster config/gavel_108.toml \
  --trace data/traces/gavel_single_rate2.8_n300_seed1.trace \
  --policies max_min_fairness,max_min_fairness_perf,fifo,fifo_perf \
  --json build/setup_demo.json
echo "metrics JSON: build/setup_demo.json"
