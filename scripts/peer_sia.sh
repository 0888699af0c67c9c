#!/usr/bin/env bash
# Sia's own simulator beside tessera on Sia's workloads (issue 34; docs/benchmarks/sia.md).
#
# usage: scripts/peer_sia.sh SIA_CHECKOUT [SET [NUMBERS [POLICIES]]]
#   SIA_CHECKOUT  a checkout of siasosp23/artifacts (its sia-simulator folder is used)
#   SET           philly (default), saturn or newtrace
#   NUMBERS       workload numbers, e.g. 1,2 (default: every workload of the set)
#   POLICIES      sia,gavel (default); sia_cbc: tessera's sia on CBC beside the same Sia run
# Env: PEER_WORK (default /tmp/sia-peer): a copy of sia-simulator, Sia's Python environment,
# inputs, finished cells (a rerun skips them) and peer_sia_SET.csv; TESSERA (default
# build/tessera). Sia's data and code are read from the checkout and never committed (the
# artifact states no licence).
#
# Sia's Python environment is made once in $PEER_WORK/venv from PyPI: pandas < 2 (Sia calls
# DataFrame.append), numpy < 2, scipy, cvxpy with CBC through cylp (built against Debian's
# coinor-libcbc-dev), ECOS (Gavel's LPs in Sia's simulator), autograd, rich, psutil.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 1 ] || { sed -n '2,16p' "$0"; exit 2; }
checkout="$(cd "$1" && pwd)"
set_name="${2:-philly}"
numbers="${3:-}"
policies="${4:-sia,gavel}"
work="${PEER_WORK:-/tmp/sia-peer}"
tessera="${TESSERA:-$here/build/tessera}"
[ -d "$checkout/sia-simulator" ] || { echo "peer_sia: $checkout has no sia-simulator" >&2; exit 2; }
[ -x "$tessera" ] || { echo "peer_sia: no tessera binary at $tessera (build first)" >&2; exit 2; }
mkdir -p "$work"
if [ ! -x "$work/venv/bin/python" ]; then
  echo "peer_sia: making Sia's Python environment in $work/venv" >&2
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q "pandas<2" "numpy<2" scipy cvxpy cylp ecos autograd rich psutil
fi
# Sia's simulator writes into its own folder and reads traces/ beside its code: a copy.
if [ ! -d "$work/sia-simulator" ]; then
  cp -r "$checkout/sia-simulator" "$work/sia-simulator"
fi
exec python3 "$here/scripts/peer_sia.py" --sim-dir "$work/sia-simulator" --work "$work" \
  --python "$work/venv/bin/python" --tessera "$tessera" --cluster "$here/config/sia_64.toml" \
  --set "$set_name" --workloads "$numbers" --policies "$policies"
