#!/usr/bin/env bash
# Configures and builds tessera into build/ (or $BUILD_DIR). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
gen=()
command -v ninja >/dev/null && [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && gen=(-G Ninja)
cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DTESSERA_WERROR=ON "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
