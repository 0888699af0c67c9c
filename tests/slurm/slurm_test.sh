# Sourced by the tests in tests/slurm: what each needs around its own steps.
#   slurm_test_begin NAME NODES   a scratch directory ($work) and a throw-away Slurm of NODES
#                                 nodes in it (slurm_cluster.sh); exits 77 with the reason
#                                 where Slurm cannot start here (not root, no ip(8), no Slurm)
# Afterwards: $bin (the tessera under test, the test's first argument), $here, $repo, $work,
# $cluster, $tag; SLURM_CONF and Open MPI's permission to run as root exported; write_jobs,
# fail, now, ms, on_n1 and same_results (below). The jobs in $slurm_jobs are cancelled, the
# cluster stopped and $work removed at exit.

bin=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
slurm_jobs=()
fail_logs=()   # files under $work whose tails `fail` prints

slurm_test_end() {
  for j in "${slurm_jobs[@]}"; do scancel "$j" 2>/dev/null; done
  bash "$here/slurm_cluster.sh" down "$cluster"
  rm -rf "$work"
}

slurm_test_begin() {
  work=$(mktemp -d "/tmp/tessera-$1-XXXXXX")
  cluster="$work/slurm"
  trap slurm_test_end EXIT
  local up rc
  up=$(bash "$here/slurm_cluster.sh" up "$cluster" "$2"); rc=$?
  echo "$up"
  [ $rc -eq 0 ] || exit $rc   # 77: skipped, the reason printed above
  eval "$up"                  # export SLURM_CONF=...
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  tag=$(cat "$cluster/tag")
}

fail() {
  echo "FAILED: $*"
  local f
  for f in "${fail_logs[@]}"; do
    [ -f "$work/$f" ] && { echo "== $f"; tail -n 30 "$work/$f"; }
  done
  exit 1
}

# Writes a job-set file $1 of built-in trainables at $2 seconds a step: one job per KIND:STEPS.
#   write_jobs FILE STEP_TIME KIND:STEPS...
write_jobs() {
  local file=$1 step=$2 spec
  shift 2
  : > "$file"
  for spec in "$@"; do
    printf '[[job]]\nkind = "%s"\ntotal_steps = %s\nstep_time = %s\n' \
      "${spec%%:*}" "${spec#*:}" "$step" >> "$file"
  done
}

now() { date +%s%N; }
# Milliseconds from stamp $1 to stamp $2 (both from `now`).
ms() { echo $(( ($2 - $1) / 1000000 )); }
# A command in node n1's network namespace, where rank 0 and its API run.
on_n1() { nsenter --net="/run/netns/tsl${tag}n1" "$@"; }

# Every job of JSON file $1 (a run's summary or `tessera status --json`) finished, with the
# steps, loss and accuracy of the same job in $2 to the last bit, and its final checkpoint's
# payload (the trainable's parameters and optimiser state; runtime/node/train/checkpoint.hpp:
# after a 56-byte header) equal byte for byte; $3 names the pair.
same_results() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a, b = (json.load(open(p))["jobs"] for p in sys.argv[1:3])
ja = {j["id"]: j for j in a}
jb = {j["id"]: j for j in b}
assert ja.keys() == jb.keys(), (sorted(ja), sorted(jb))
for k, j in ja.items():
    done = j["state"] == "finished" if "state" in j else j["finished"]
    assert done, (k, "not finished")
    for f in ("steps", "loss", "accuracy"):
        assert j[f] == jb[k][f], (k, f, j[f], jb[k][f])
    pa, pb = (open(x["checkpoint"], "rb").read()[56:] for x in (j, jb[k]))
    assert pa and pa == pb, (k, "parameters differ", j["checkpoint"], jb[k]["checkpoint"])
print("%s: %d jobs finished, steps, loss, accuracy and parameters equal" % (sys.argv[3], len(ja)))
PY
}
