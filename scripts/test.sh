#!/usr/bin/env bash
# README command (2): the whole test suite. Checks the tree's shape (scripts/check_shape.py),
# builds tessera (warnings are errors), runs every test with ctest, then rebuilds the
# single-process tests with -fsanitize=address,undefined and runs them again, and finally builds
# the libFuzzer targets with clang-16 (build-fuzz/) and runs each for a few seconds over its
# seed corpus (ctest -L fuzz; fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
python3 scripts/check_shape.py   # layering of #includes, no function over 150 lines
bash scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)")
if [ "${TESSERA_SKIP_SANITIZE:-0}" != "1" ]; then
  BUILD_DIR=build-asan bash scripts/build.sh -DTESSERA_SANITIZE=ON -DTESSERA_BUILD_BENCH=OFF \
    -DTESSERA_BUILD_EXAMPLES=OFF -DTESSERA_BUILD_MPI_TESTS=OFF -DCMAKE_BUILD_TYPE=Debug
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -L unit -j"$(nproc)")
fi
if [ "${TESSERA_SKIP_FUZZ:-0}" != "1" ]; then
  CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -G Ninja -DTESSERA_WERROR=ON \
    -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF \
    -DTESSERA_BUILD_EXAMPLES=OFF -DTESSERA_BUILD_MPI_TESTS=OFF >/dev/null
  cmake --build build-fuzz -j"$(nproc)" --target tessera_fuzz
  (cd build-fuzz && ctest --output-on-failure -L fuzz)
fi
