#!/usr/bin/env bash
# The whole suite (scripts/test.sh) RUNS times in a row while `stress-ng --cpu CPUS` keeps the
# host busy beside it: a suite that is green only on an idle host teaches people to ignore it.
# Prints each run's exit code and wall time; exits 1 when any run failed.
# usage: bash scripts/test_under_load.sh [RUNS=3] [CPUS=4]
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n 2,5p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
runs=${1:-3}
cpus=${2:-4}
command -v stress-ng >/dev/null || { echo "test_under_load: stress-ng is not installed (bash scripts/install-deps.sh)" >&2; exit 2; }
stress-ng --cpu "$cpus" --timeout 0 >/dev/null 2>&1 &
hog=$!
trap 'kill $hog 2>/dev/null' EXIT
sleep 60   # let the load average reach the hog's level: the suite reads it for its time scale
failed=0
for i in $(seq 1 "$runs"); do
  start=$SECONDS
  bash scripts/test.sh > "build/test_under_load.$i.log" 2>&1
  rc=$?
  echo "test_under_load: run $i of $runs: exit $rc, $((SECONDS - start)) s, load $(cut -d' ' -f1-3 /proc/loadavg) (build/test_under_load.$i.log)"
  [ $rc -eq 0 ] || failed=1
done
exit $failed
