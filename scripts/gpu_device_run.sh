#!/usr/bin/env bash
# Runs scripts/gpu_checks.sh on a GPU machine from a bundle packed by scripts/gpu_bundle.sh
# (that machine has the driver, CUDA and NCCL, and none of tessera's other libraries).
#
# usage: scripts/gpu_device_run.sh BUNDLE.tar.xz [OUT-DIR]
# It unpacks the bundle into a temporary directory, points OpenMPI at its relocated trees
# (OPAL_PREFIX and friends; nothing is written outside that directory), finds the machine's
# own cudart, cuBLAS and NCCL, prints what it uses, and runs the checks with the summary and
# logs kept in OUT-DIR. Its exit status is gpu_checks.sh's.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:?usage: gpu_device_run.sh BUNDLE.tar.xz [OUT-DIR]}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
d=$(mktemp -d /tmp/tessera-gpu.XXXXXX)
tar -C "$d" -xJf "$bundle" || { echo "gpu_device_run: cannot unpack $bundle"; exit 1; }

# The directories holding the machine's CUDA runtime, cuBLAS and NCCL (the first found of each).
cuda_dirs=""
for lib in libcudart.so.13 libcublas.so.13 libnccl.so.2; do
  f=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda*/lib* /usr/lib/x86_64-linux-gnu \
        /opt -name "$lib" 2>/dev/null | head -n 1)
  if [ -z "$f" ]; then echo "gpu_device_run: $lib not found on this machine"; continue; fi
  echo "gpu_device_run: $lib from $f"
  case ":$cuda_dirs:" in *":$(dirname "$f"):"*) ;; *) cuda_dirs=$cuda_dirs:$(dirname "$f") ;; esac
done

usr=$d/root/usr
ompi=$usr/lib/x86_64-linux-gnu/openmpi
export PATH=$d/bin:$PATH
export LD_LIBRARY_PATH=$d/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PREFIX=$usr OPAL_LIBDIR=$ompi/lib OPAL_PKGLIBDIR=$ompi/lib/openmpi3 \
       OPAL_PKGDATADIR=$usr/share/openmpi OPAL_SYSCONFDIR=$d/root/etc/openmpi
export PMIX_MCA_mca_base_component_path=$usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export PMIX_MCA_pcompress_base_silence_warning=1 PMIX_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_btl=self,vader,tcp
echo "gpu_device_run: $(. /etc/os-release 2>/dev/null; echo "$PRETTY_NAME"), $(ldd --version | head -n 1)"
echo "gpu_device_run: mpirun $(mpirun --version 2>&1 | head -n 1)"
missing=$(ldd "$d"/bin/tessera* "$d"/bin/bench_* 2>&1 | grep "not found" | sort -u)
[ -n "$missing" ] && echo "gpu_device_run: unresolved libraries: $missing"
GPU_CHECKS_OUT=$out bash "$root/scripts/gpu_checks.sh" --prebuilt "$d/bin"
