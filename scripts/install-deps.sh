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
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# Tools Debian does not package, from PyPI into a venv of their own (PEP 668), pinned:
# kubernetes-validate checks examples/kubernetes against Kubernetes' schemas (its wheel
# carries them, so the test needs no network). Where PyPI cannot be reached the test that
# needs it is skipped, saying so; nothing else depends on it.
tools=${TESSERA_TOOLS_VENV:-$HOME/.cache/tessera/tools-venv}
if "$tools/bin/python" -c "import kubernetes_validate" 2>/dev/null; then
  echo "install-deps: tools venv present ($tools)"
else
  echo "install-deps: kubernetes-validate into $tools"
  python3 -m venv "$tools" &&
    "$tools/bin/pip" install -q --disable-pip-version-check kubernetes-validate==1.37.0 ||
    echo "install-deps: warning: kubernetes-validate not installed (no PyPI?): the" \
         "Kubernetes manifest test will be skipped"
fi
