#!/usr/bin/env bash
# Packs a CUDA build made on this (Debian) machine for a GPU machine that has the NVIDIA driver,
# CUDA and NCCL but none of tessera's other dependencies (CAF, COIN-OR, TOML++, Boost's
# program_options, OpenMPI): the lent GPU machines of docs/benchmarks/gpus.md, "On a real
# GPU (H100)", run a stock CUDA image and cannot install packages.
#
# usage: scripts/gpu_bundle.sh [build-dir] [bundle-dir]   (defaults: build, .gpu)
# It writes BUNDLE-DIR/bundle.tar.xz (about 17 MB; scripts/gpu_device_run.sh unpacks it there).
# The build directory must be configured with CUDA and NCCL (its configure line says
# "CUDA=ON, NCCL=ON"). The bundle holds:
#   bin/   the four programs the GPU checks run (stripped) and OpenMPI's launcher;
#   lib/   every shared library they and OpenMPI's components load, except the C and C++
#          runtimes (the GPU machine's newer ones serve) and CUDA's own (cudart, cuBLAS,
#          NCCL: taken from the GPU machine, so they match its driver);
#   root/  OpenMPI's and PMIx's component, help and configuration trees under the paths
#          Debian's OpenMPI was built for; scripts/gpu_device_run.sh relocates OpenMPI to them
#          (OPAL_PREFIX and friends).
# OpenMPI's network components for InfiniBand, UCX, libfabric and PSM are left out: the checks
# run on one host (shared memory and TCP).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$root/.gpu}
targets=(tessera tessera_tests tessera_mpi_aggregator_tests bench_cuda_trainable_bench)

grep -q "^TESSERA_CUDA:BOOL=ON" "$build/CMakeCache.txt" ||
  { echo "gpu_bundle: $build is not configured with CUDA (TESSERA_CUDA=ON)" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

rm -rf "$out"
out_tar=$out/bundle.tar.xz
out=$out/tree
mkdir -p "$out/bin" "$out/lib" "$out/root"
for t in "${targets[@]}"; do
  f=$(find "$build" -maxdepth 2 -type f -name "$t" -perm -u+x | head -n 1)
  [ -n "$f" ] || { echo "gpu_bundle: $t not found under $build" >&2; exit 1; }
  strip -o "$out/bin/$t" "$f"
done
cp "$(readlink -f "$(command -v orterun)")" "$out/bin/orterun"
ln -s orterun "$out/bin/mpirun"

# OpenMPI's and PMIx's trees, at their own paths (links kept).
ompi=/usr/lib/x86_64-linux-gnu/openmpi
pmix=/usr/lib/x86_64-linux-gnu/pmix2
skip='ucx|ofi|psm|openib|verbs'
for d in "$ompi" "$pmix" /usr/share/openmpi /etc/openmpi; do
  [ -e "$d" ] || continue
  mkdir -p "$out/root$(dirname "$d")"
  cp -a "$d" "$out/root$d"
done
find "$out/root$ompi" -regextype egrep -regex ".*($skip).*\.so.*" -delete
rm -rf "$out/root$ompi/include" "$out/root$ompi/lib/pkgconfig"

# The shared-library closure of the programs and the components, minus the C/C++ runtimes and
# CUDA's libraries.
keep_out='^(libc|libm|libdl|libpthread|librt|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|'\
'libcudart|libcublas|libcublasLt|libnccl|libcuda|linux-vdso)\.so'
objects=("$out"/bin/tessera* "$out"/bin/bench_* "$out/bin/orterun")
while IFS= read -r f; do objects+=("$f"); done < <(find "$out/root" -name '*.so*' -type f)
ldd "${objects[@]}" 2>/dev/null | awk '/=> \//{print $1, $3}' | sort -u |
  while read -r name path; do
    [[ $name =~ $keep_out ]] && continue
    cp -L "$path" "$out/lib/$name"
  done
tar -C "$out" -cf - bin lib root | xz -T0 -6 > "$out_tar"
echo "gpu_bundle: $out_tar: $(du -sh "$out_tar" | cut -f1) ($(du -sh "$out" | cut -f1) unpacked, \
$(ls "$out/lib" | wc -l) libraries)"
