#!/usr/bin/env bash
# Installing the Python client where Debian 12's system Python refuses `pip install` (PEP 668,
# "externally-managed-environment"): a venv that sees the system's packages (NumPy, torch),
# the client installed into it without fetching anything (--no-build-isolation: Debian's
# setuptools builds it), then imported beside NumPy. The way clients/python/README.md gives.
# Usage: test_debian_install.sh PYTHON REPO_ROOT   (exit 77: no venv module, skipped)
set -euo pipefail
python=$1
root=$2
if ! "$python" -c "import venv, ensurepip" 2>/dev/null; then
  echo "skipped: $python has no venv/ensurepip (Debian: apt-get install python3-venv)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The system Python itself refuses, as PEP 668 says (when it is marked externally managed).
if ls "$("$python" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"/EXTERNALLY-MANAGED \
     >/dev/null 2>&1; then
  if "$python" -m pip install --dry-run --no-deps "$root/clients/python" >"$tmp/refused" 2>&1; then
    echo "FAIL: the system Python accepted pip install (expected PEP 668's refusal)"
    exit 1
  fi
  grep -q "externally-managed-environment" "$tmp/refused" || {
    cat "$tmp/refused"
    echo "FAIL: pip refused for another reason than PEP 668"
    exit 1
  }
fi
"$python" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --no-build-isolation --no-deps "$root/clients/python"
out=$(cd "$tmp" && "$tmp/venv/bin/python" -c \
  'import tessera_client, sys; print(tessera_client.PROTOCOL_VERSION, tessera_client.__file__)')
case "$out" in
  "2 $tmp/venv/"*) echo "ok: $out" ;;
  *) echo "FAIL: the venv imports '$out', not the installed client"; exit 1 ;;
esac
# The venv still sees the system's packages (Debian's NumPy), as the examples need.
if "$python" -c "import numpy" 2>/dev/null; then
  "$tmp/venv/bin/python" -c "import numpy" || { echo "FAIL: the venv cannot see NumPy"; exit 1; }
fi
