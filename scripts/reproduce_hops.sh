#!/usr/bin/env bash
# Issue 6: Hops against Gavel's heterogeneity-aware LAS (max_min_fairness_perf) and FIFO.
#  1. Hops' setting: config/hops_512.toml (64 servers x 8 GPUs, 5 server models) and
#     `tessera trace generate --preset hops` (500 multi-GPU jobs, Poisson 100 jobs/h);
#  2. Gavel's cluster (config/gavel_108.toml) with every registered policy in one table:
#     a. the same 500-job trace; b. a Gavel multi-GPU trace, 1000 jobs at 2.8 jobs/h,
#     windowed JCT over jobs 500-999 (issue 4's online setting).
# With "full" also: hops ablations (size_value=0 and critical_slack=0: the paper's rules;
# preempt_margin=0.5; use_ilp=0; fill_fragments=0) on 1 and 2a, and setting 1 with 60 s
# rounds.
# Writes docs/results/hops_*.json; the tables in docs/benchmarks.md come from these.
# usage: scripts/reproduce_hops.sh [SEED] [full]   (run scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${1:-1}
full=${2:-}
bin=${TESSERA_BIN:-build/tessera}
out=docs/results
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
all=fifo,fifo_perf,max_min_fairness,max_min_fairness_perf,finish_time_fairness
all=$all,finish_time_fairness_perf,min_total_duration,min_total_duration_perf
all=$all,max_sum_throughput,max_sum_throughput_perf,hadar,hadare,hops
run() {  # run NAME TRACE [compare options...]
  local name=$1 trace=$2
  shift 2
  $bin compare --trace "$trace" -q --parallel 1 --json "$tmp/$name.json" "$@"
}
ablate() {  # ablate NAME TRACE KEY=VALUE [compare options...]: hops with one option changed
  local name=$1 trace=$2 kv=$3
  shift 3
  run "$name" "$trace" --policies hops --policy-arg "$kv" "$@"
  sed -i "s/\"policy\": *\"hops\"/\"policy\": \"hops_$kv\"/" "$tmp/$name.json"
}
merge() {  # merge OUTPUT INPUTS...
  local dst=$1
  shift
  python3 -c 'import json,sys; print(json.dumps(sum((json.load(open(f)) for f in sys.argv[1:]), []), indent=1))' "$@" > "$dst"
}
$bin trace generate --preset hops --seed "$seed" -o "$tmp/hops.trace"
$bin trace generate --jobs 1000 --rate 2.8 --multi-gpu --seed "$seed" -o "$tmp/multi.trace"

echo "== 1. hops_512, 500 jobs at 100 jobs/h, seed $seed"
run main "$tmp/hops.trace" --cluster config/hops_512.toml --policies hops,max_min_fairness_perf,fifo
parts=("$tmp/main.json")
if [ "$full" = full ]; then
  for kv in size_value=0 critical_slack=0 use_ilp=0 fill_fragments=0; do
    ablate "a512_$kv" "$tmp/hops.trace" "$kv" --cluster config/hops_512.toml
    parts+=("$tmp/a512_$kv.json")
  done
fi
merge "$out/hops_512_seed$seed.json" "${parts[@]}"

echo "== 2a. gavel_108, the same trace, every policy, seed $seed"
run g108 "$tmp/hops.trace" --cluster config/gavel_108.toml --policies "$all"
parts=("$tmp/g108.json")
if [ "$full" = full ]; then
  for kv in size_value=0 critical_slack=0 preempt_margin=0.5 use_ilp=0 fill_fragments=0; do
    ablate "a108_$kv" "$tmp/hops.trace" "$kv" --cluster config/gavel_108.toml
    parts+=("$tmp/a108_$kv.json")
  done
fi
merge "$out/hops_gavel108_hopstrace_seed$seed.json" "${parts[@]}"

echo "== 2b. gavel_108, 1000 multi-GPU jobs at 2.8 jobs/h, window 500-999, every policy, seed $seed"
run multi "$tmp/multi.trace" --cluster config/gavel_108.toml --window 500-999 --policies "$all"
merge "$out/hops_gavel108_multi_rate2.8_seed$seed.json" "$tmp/multi.json"

if [ "$full" = full ]; then
  echo "== 1 with 60 s rounds, seed $seed"
  run r60 "$tmp/hops.trace" --cluster config/hops_512.toml --round-length 60 \
    --policies hops,max_min_fairness_perf,fifo
  merge "$out/hops_512_round60_seed$seed.json" "$tmp/r60.json"
fi
