#!/usr/bin/env bash
# README command (2): the whole test suite. Checks the tree's shape (scripts/check_shape.py)
# and formatting (scripts/check_format.sh), builds tessera (preset `default`: warnings are
# errors) and runs every test with ctest, then rebuilds the single-process tests with
# -fsanitize=address,undefined (preset `asan`) and runs them again, and finally builds the
# libFuzzer targets with clang-16 (preset `fuzz`) and runs each for a few seconds over its seed
# corpus (fuzz/README.md). The presets are CMakePresets.json's.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase prints its wall time, so a slow CI run says where the time went.
suite_start=$SECONDS
phase() {
  local name=$1 start=$SECONDS
  shift
  echo "== suite: $name"
  "$@"
  echo "== suite: $name took $((SECONDS - start)) s (suite so far $((SECONDS - suite_start)) s)"
}
# Every wait in a test is a hang guard multiplied by TESSERA_TEST_TIME_SCALE (tests/support.hpp,
# tests/timescale.py): when not given, the host's load per core at the start (1 to 8), doubled
# for the sanitizer build's tests.
if [ -z "${TESSERA_TEST_TIME_SCALE:-}" ]; then
  TESSERA_TEST_TIME_SCALE=$(awk -v n="$(nproc)" \
    '{ s = $1 / n; if (s < 1) s = 1; if (s > 8) s = 8; printf "%.1f", s }' /proc/loadavg)
fi
export TESSERA_TEST_TIME_SCALE
asan_scale=$(awk -v s="$TESSERA_TEST_TIME_SCALE" 'BEGIN { printf "%.1f", 2 * s }')
echo "== suite: time scale $TESSERA_TEST_TIME_SCALE (ASan tests $asan_scale)"
phase install-deps bash scripts/install-deps.sh
phase shape python3 scripts/check_shape.py   # layering, function and file sizes, folder shares
phase format bash scripts/check_format.sh     # .clang-format, applied to every C++ source
phase build bash scripts/build.sh
phase tests ctest --preset default -j"$(nproc)"
if [ "${TESSERA_SKIP_SANITIZE:-0}" != "1" ]; then
  PRESET=asan phase asan-build bash scripts/build.sh
  phase asan-tests env TESSERA_TEST_TIME_SCALE="$asan_scale" ctest --preset asan -j"$(nproc)"
fi
if [ "${TESSERA_SKIP_FUZZ:-0}" != "1" ]; then
  phase fuzz-build bash -c 'cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j"$(nproc)"'
  phase fuzz-runs ctest --preset fuzz
fi
