#!/usr/bin/env bash
# Installs the Debian packages tessera builds against (idempotent; needs root or sudo).
set -euo pipefail
pkgs=(cmake g++ make ninja-build ccache pkg-config
      libcaf-dev libopenmpi-dev openmpi-bin libssl-dev
      libboost-dev libboost-program-options-dev
      libtomlplusplus-dev nlohmann-json3-dev catch2
      coinor-libclp-dev coinor-libcbc-dev
      gnuplot-nox python3
      python3-matplotlib   # `tessera plot` (scripts/plot.py)
      python3-numpy python3-sklearn python3-torch   # the program examples (examples/*_elastic)
      python3-venv python3-pip python3-setuptools   # the Python client in a venv (PEP 668)
      clang-16 libfuzzer-16-dev    # clang-16 and libFuzzer: the fuzz targets (fuzz/)
      clang-format-14 clang-tidy-14   # scripts/check_format.sh (.clang-format), .clang-tidy
      chromium    # headless, for the dashboard's browser test (tests/dashboard)
      stress-ng   # scripts/test_under_load.sh: the suite beside a CPU hog
      # A real Slurm for tests/slurm (started by the tests themselves). Not
      # slurm-wlm-emulator: its slurmstepd, chosen by update-alternatives, numbers every
      # node 0.
      slurmctld slurmd slurm-client munge iproute2)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
