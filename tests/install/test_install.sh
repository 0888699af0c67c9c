#!/usr/bin/env bash
# ctest install:custom_trainable -- installs the already built tree into a scratch prefix (no
# rebuild), builds examples/custom_trainable out of the tree against that prefix with
# find_package(tessera), and runs it on the three-server example cluster.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR GENERATOR CXX_COMPILER [COMPILER_LAUNCHER]
set -euo pipefail
build=$1 src=$2 generator=$3 cxx=$4 launcher=${5:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" \
  || { cat "$work/install.log"; fail "cmake --install"; }
for f in bin/tessera include/tessera/runtime/node/train/trainable.hpp \
         include/tessera/launcher/run_command.hpp include/tessera/actors/run.hpp \
         lib/libtessera_launcher.a lib/libtessera_base.a lib/cmake/tessera/tesseraConfig.cmake \
         lib/cmake/tessera/tesseraConfigVersion.cmake lib/cmake/tessera/tesseraTargets.cmake \
         lib/cmake/tessera/FindCAF.cmake lib/cmake/tessera/FindCOIN.cmake; do
  [ -e "$prefix/$f" ] || fail "the install has no $f"
done
"$prefix/bin/tessera" policies >"$work/policies.txt" || fail "installed tessera policies"
grep -q max_min_fairness "$work/policies.txt" || fail "installed tessera lists no policies"

# The example's own project: only the prefix tells it where tessera is.
cfg=(-S "$src/examples/custom_trainable" -B "$work/build" -G "$generator"
     -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
[ -n "$launcher" ] && cfg+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
cmake "${cfg[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure"; }
grep -q "tessera_DIR:PATH=$prefix/lib/cmake/tessera" "$work/build/CMakeCache.txt" \
  || fail "find_package(tessera) did not use the prefix"
cmake --build "$work/build" -j2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
# Headers come from the prefix, never from the source tree the install was made from.
grep -q -- "$prefix/include/tessera" "$work/build/compile_commands.json" \
  || fail "the example was not compiled against $prefix/include/tessera"
if grep -Fq -e "-I$src " -e "-isystem $src " "$work/build/compile_commands.json"; then
  fail "the example was compiled against the source tree"
fi

# Run it: three node processes started by the binary itself, the example's three jobs.
exe=$work/build/example_custom_trainable
"$exe" --local 3 --cluster "$src/config/run_example_cluster.toml" \
  --jobs "$src/examples/custom_trainable/jobs.toml" --round-length 0.5 \
  --checkpoint-dir "$work/checkpoints" --json "$work/summary.json" >"$work/run.log" 2>&1 \
  || { cat "$work/run.log"; fail "run"; }
grep -q "3 jobs finished" "$work/run.log" || { cat "$work/run.log"; fail "not every job finished"; }
python3 - "$work/summary.json" <<'EOF' || fail "summary check"
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
kinds = [j["kind"] for j in jobs]
assert kinds == ["least_squares", "least_squares", "mlp"], kinds
assert all(j["finished"] for j in jobs), jobs
EOF
echo "install OK: $prefix, example built against it ran its 3 jobs"
