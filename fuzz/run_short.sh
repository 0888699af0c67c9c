#!/usr/bin/env bash
# Runs a fuzz target for SECONDS over a scratch copy of its seed corpus (the ctest entries
# fuzz:<name>; the repository's corpus is never written). Fails on any finding, and then
# leaves the input that found it in the current directory (ctest's: build-fuzz/fuzz).
# Usage: run_short.sh TARGET_BINARY CORPUS_DIR SECONDS
set -euo pipefail
binary=$1 corpus=$2 seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
cp "$corpus"/* "$work/corpus/"
# -rss_limit_mb and -timeout: memory over 2 GiB or one input over 10 s is a finding too.
status=0
"$binary" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" || status=$?
if [ "$status" -ne 0 ]; then
  cp "$work"/artifacts/* . 2>/dev/null && echo "run_short: finding kept in $PWD" >&2
fi
exit "$status"
