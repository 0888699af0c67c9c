#!/usr/bin/env bash
# Runs the same (trace, policy) cells on Gavel's own simulator and on tessera's, with matched
# settings, and prints one table: cell, Gavel's average JCT, tessera's, the difference and
# both wall times.
#
# usage: scripts/peer_gavel.sh GAVEL_CHECKOUT [CELLS_FILE]
#   GAVEL_CHECKOUT  a checkout of github.com/stanford-futuredata/gavel (the user's own; it is
#                   only read: its scheduler/ directory is copied into the work directory)
#   CELLS_FILE      cells, one per line (default: scripts/peer_gavel_cells.txt):
#                     NAME JOBS RATE KIND SEED POLICY WINDOW PER_SERVER
#                   KIND single or multi (scale factors 1/2/4/8); RATE jobs/h (0: all at
#                   time 0); WINDOW FIRST-LAST job ids (inclusive) whose JCT is averaged, or
#                   '-' for every job; PER_SERVER GPUs per server of each type. '#' comments.
# environment:
#   PEER_WORK     work directory (default /tmp/peer_gavel): venv, Gavel copy, traces, logs;
#                 Gavel's result per cell is kept there and reused when the cell, its trace
#                 and the settings are unchanged (delete PEER_WORK/gavel to rerun Gavel)
#   PEER_CLUSTER  GPUs per type, v100:p100:k80 (default 36:36:36)
#   PEER_ROUND    round length in seconds (default 360, Gavel's)
#   PEER_LAYOUT   'gavel' (default): tessera charges the consolidated throughput whatever the
#                 placement (--assume-consolidated), as Gavel's simulator does; 'physical':
#                 tessera's default (spanning servers costs the _unconsolidated rate)
#   PEER_NICE     niceness of both simulators (default 10)
#   TESSERA       tessera binary (default build/tessera; run scripts/build.sh first)
#
# Both simulators read the very same trace file: tessera writes it (`tessera trace
# generate`, Gavel's recipe with tessera's random numbers) in Gavel's 10-field format, which
# Gavel's driver reads as is. Gavel's window end is exclusive, tessera's inclusive; the script
# converts. Gavel's solver is cvxpy with ECOS (its driver's default), installed from PyPI
# into PEER_WORK/venv with the packages its simulator imports.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
gavel_src=${1:?usage: scripts/peer_gavel.sh GAVEL_CHECKOUT [CELLS_FILE]}
cells=${2:-scripts/peer_gavel_cells.txt}
work=${PEER_WORK:-/tmp/peer_gavel}
cluster=${PEER_CLUSTER:-36:36:36}
round=${PEER_ROUND:-360}
layout=${PEER_LAYOUT:-gavel}
niceness=${PEER_NICE:-10}
tessera=${TESSERA:-$root/build/tessera}

[[ -d $gavel_src/scheduler ]] || { echo "peer_gavel: $gavel_src/scheduler: not a Gavel checkout" >&2; exit 2; }
[[ -f $cells ]] || { echo "peer_gavel: $cells: no such cells file" >&2; exit 2; }
[[ -x $tessera ]] || { echo "peer_gavel: $tessera: not built (run scripts/build.sh)" >&2; exit 2; }
case $layout in gavel) layout_flag=--assume-consolidated ;; physical) layout_flag= ;;
  *) echo "peer_gavel: PEER_LAYOUT '$layout': expected gavel or physical" >&2; exit 2 ;; esac
IFS=: read -r n_v100 n_p100 n_k80 <<<"$cluster"
mkdir -p "$work"/{traces,gavel,tessera}

# Gavel's simulator: a copy of scheduler/ with its gRPC stubs generated, and a venv.
sched=$work/gavel-scheduler
if [[ ! -f $sched/.ready ]]; then
  rm -rf "$sched" && cp -r "$gavel_src/scheduler" "$sched"
  if [[ ! -x $work/venv/bin/python ]]; then
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install -q cvxpy ecos numpy scipy scikit-learn matrix_completion \
      psutil grpcio grpcio-tools
  fi
  (cd "$sched" && PATH=$work/venv/bin:$PATH make -s rpc_stubs >/dev/null)
  touch "$sched/.ready"
fi
py=$work/venv/bin/python

now() { date +%s.%N; }

# Average JCT (h) over the window from tessera's JSON metrics.
tessera_jct() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))[0]
k="avg_jct_window_s" if sys.argv[2]!="-" else "avg_jct_s"; print("%.3f" % (m[k]/3600))' "$1" "$2"
}

printf '%-34s %10s %10s %8s %9s %9s\n' cell gavel_h tessera_h diff gavel_s tessera_s
while read -r name jobs rate kind seed policy window per_server; do
  [[ -z ${name:-} || $name == \#* ]] && continue
  trace=$work/traces/${kind}_n${jobs}_r${rate}_s${seed}.trace
  if [[ ! -s $trace ]]; then
    multi=; [[ $kind == multi ]] && multi=--multi-gpu
    "$tessera" trace generate --jobs "$jobs" --rate "$rate" $multi --seed "$seed" \
      -o "$trace" >/dev/null 2>&1 ||
      { echo "peer_gavel: $name: tessera trace generate failed" >&2; exit 1; }
  fi
  gavel_win=() tessera_win=()
  if [[ $window != - ]]; then
    first=${window%-*} last=${window#*-}
    gavel_win=(--window-start "$first" --window-end "$((last + 1))")
    tessera_win=(--window "$window")
  fi
  # Gavel: result reused when the cell's key (trace contents, settings) is unchanged.
  key=$( (cat "$trace"; echo "$policy $window $per_server $cluster $round $seed") | sha1sum | cut -c1-16)
  glog=$work/gavel/$name.$key.out
  if [[ ! -s $glog.done ]]; then
    t0=$(now)
    (cd "$sched" && nice -n "$niceness" "$py" scripts/drivers/simulate_scheduler_with_trace.py \
      -t "$trace" -p "$policy" -c "$cluster" \
      --num_gpus_per_server "$per_server:$per_server:$per_server" --seed "$seed" \
      --time_per_iteration "$round" --throughputs_file simulation_throughputs.json \
      "${gavel_win[@]}" 2>&1 | grep -E '^(Average job completion time:|Total duration)' > "$glog" || true)
    echo "$(now) - $t0" | bc > "$glog.done"
  fi
  gavel_h=$(awk '/^Average job completion time:/ {printf "%.3f", $5 / 3600; exit}' "$glog")
  gavel_s=$(printf '%.1f' "$(cat "$glog.done")")
  # tessera, on the same trace file and settings.
  tj=$work/tessera/$name.json
  t0=$(now)
  nice -n "$niceness" "$tessera" simulate --trace "$trace" --policy "$policy" -q \
    --cluster-spec "$n_v100 v100 : $n_p100 p100 : $n_k80 k80, $per_server per server" \
    --round-length "$round" $layout_flag "${tessera_win[@]}" --json "$tj" >/dev/null
  tessera_s=$(printf '%.1f' "$(echo "$(now) - $t0" | bc)")
  tessera_h=$(tessera_jct "$tj" "$window")
  diff=$(python3 -c 'import sys; g,t=float(sys.argv[1] or "nan"),float(sys.argv[2]); print("%+.1f%%" % (100*(t-g)/g))' \
    "${gavel_h:-nan}" "$tessera_h")
  printf '%-34s %10s %10s %8s %9s %9s\n' "$name" "${gavel_h:-fail}" "$tessera_h" "$diff" \
    "$gavel_s" "$tessera_s"
done < "$cells"
