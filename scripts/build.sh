#!/usr/bin/env bash
# Configures and builds tessera with a preset of CMakePresets.json: `default` (build/,
# warnings as errors) unless PRESET names another (asan, fuzz, no-actors). Extra arguments go
# to the configure step (cmake --preset NAME ARGS...).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${PRESET:-default}
cmake --preset "$preset" "$@" >/dev/null
cmake --build --preset "$preset" -j"$(nproc)"
