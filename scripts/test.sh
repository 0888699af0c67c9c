#!/usr/bin/env bash
# README command (2): the whole test suite. Checks the tree's shape (scripts/check_shape.py)
# and formatting (scripts/check_format.sh), builds tessera (preset `default`: warnings are
# errors) and runs every test with ctest, then rebuilds the single-process tests with
# -fsanitize=address,undefined (preset `asan`) and runs them again, and finally builds the
# libFuzzer targets with clang-16 (preset `fuzz`) and runs each for a few seconds over its seed
# corpus (fuzz/README.md). The presets are CMakePresets.json's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
python3 scripts/check_shape.py   # layering, function and file sizes, folder shares
bash scripts/check_format.sh     # .clang-format, applied to every C++ source
bash scripts/build.sh
ctest --preset default -j"$(nproc)"
if [ "${TESSERA_SKIP_SANITIZE:-0}" != "1" ]; then
  PRESET=asan bash scripts/build.sh
  ctest --preset asan -j"$(nproc)"
fi
if [ "${TESSERA_SKIP_FUZZ:-0}" != "1" ]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j"$(nproc)"
  ctest --preset fuzz
fi
