#!/bin/bash
# Under a real Slurm (tests/slurm/slurm_cluster.sh: 3 nodes on this host): examples/slurm/
# serve.sbatch as it is, jobs submitted through the API, interrupted twice mid-run: first
# `scancel --signal=TERM` (the job completes) and `scontrol requeue` of the completed job, then
# `scontrol requeue` of the running job (what Slurm's preemption with PreemptMode=REQUEUE does:
# SIGTERM to every task, KillWait, SIGKILL, the job queued again). Asserts: every task exits 0
# within the grace time (the nodes drain, the scheduler stops after its round), the requeued
# job resumes from the journal each time, and every job finishes once, with loss and accuracy
# equal to the last bit to an uninterrupted `tessera run --local 3`; then the time-limit warning (USR1 to the batch shell) drains the
# cluster and the job completes with exit 0. Prints the figures of docs/slurm.md.
# Skipped (exit 77) only where slurm_cluster.sh cannot start its Slurm: not root, ip(8) or
# Slurm not installed, or slurm-wlm-emulator's slurmstepd selected; it prints the reason first.
#   usage: test_slurm_requeue.sh TESSERA_BINARY
set -u
source "$(dirname "$0")/slurm_test.sh"
slurm_test_begin requeue 3
fail_logs=(serve.out local.out)
status_json() { on_n1 "$bin" status --json --state-dir "$work/state" 2>/dev/null; }
# Prints "<jobs> <finished> <total steps>" from the status.
progress() {
  status_json | python3 -c '
import json, sys
try:
    jobs = json.load(sys.stdin)["jobs"]
except Exception:
    print("0 0 0"); sys.exit()
print(len(jobs), sum(1 for j in jobs if j["state"] == "finished"), sum(j["steps"] for j in jobs))'
}
job_state() { squeue -h -j "$job" -o %T 2>/dev/null; }

write_jobs "$work/jobs.toml" 0.02 mlp:700 softmax_regression:800 mlp:600
job=$(cd "$repo" && TESSERA="$bin" STATE="$work/state" LISTEN=127.0.0.1:0 \
      SERVE_ARGS="--round-length 1" sbatch --parsable --output="$work/serve.out" \
      examples/slurm/serve.sbatch) || fail "sbatch refused the script"
slurm_jobs+=("$job")
for i in $(seq 1 300); do [ -s "$work/state/address" ] && break; sleep 0.1; done
[ -s "$work/state/address" ] || fail "serve did not write its address"
on_n1 "$bin" submit "$work/jobs.toml" --state-dir "$work/state" >/dev/null || fail "submit failed"
# Waits until the jobs have done more than $1 steps in all; sets $n, $done, $steps.
await_steps() {
  local i
  for i in $(seq 1 1200); do
    read -r n done steps < <(progress)
    [ "$steps" -gt "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
# Every process of the current allocation gone (the serve processes carry the state dir),
# each having exited 0: Slurm's own "CANCELLED ... DUE TO JOB REQUEUE" notices are expected,
# a task that exited non-zero or was killed after the grace time is not.
await_gone() {
  local i
  for i in $(seq 1 600); do pgrep -f -- "--state-dir $work/state" >/dev/null || break; sleep 0.05; done
  pgrep -f -- "--state-dir $work/state" >/dev/null && fail "processes left 30 s after $1"
  grep -E "Exited with exit code|task [0-9]+: (Killed|Terminated)" "$work/serve.out" &&
    fail "a task did not exit 0 on $1"
  return 0
}
# The requeued job runs again (Slurm holds it for cred_expire, 10 s on the test cluster, 120 s
# by default), resumes the 3 jobs from its journal and steps past $2; $1 is the interruption's
# stamp, $3 its name.
await_resumed() {
  local i t_run t2 resumed
  resumed=$(grep -c "resumed 3 jobs" "$work/serve.out")
  for i in $(seq 1 1200); do [ "$(job_state)" = RUNNING ] && break; sleep 0.05; done
  t_run=$(now)
  echo "figures: $3 to the job running again $(ms "$1" "$t_run") ms"
  await_steps "$2" || fail "no step after $3 within 120 s"
  t2=$(now)
  echo "figures: $3 to the first step again $(ms "$1" "$t2") ms ($(ms "$t_run" "$t2") ms after it runs again)"
  for i in $(seq 1 100); do
    [ "$(grep -c "resumed 3 jobs" "$work/serve.out")" -gt "$resumed" ] && return 0
    sleep 0.1
  done
  fail "the run after $3 did not resume 3 jobs"
}

# 1. scancel --signal=TERM once the jobs are under way, before any has finished: the tasks
# drain and exit 0, so the batch script ends and the job completes; `scontrol requeue` brings
# the finished job back (an operator's "run it again", or a wrapper reacting to the signal).
await_steps 100 || fail "the jobs made no progress"
[ "$done" = 0 ] || fail "a job finished before the preemption ($done)"
before=$steps
t0=$(now)
scancel --signal=TERM "$job" || fail "scancel --signal=TERM refused"
await_gone "scancel --signal=TERM"
t1=$(now)
for i in $(seq 1 100); do [ -z "$(job_state)" ] && break; sleep 0.05; done
scontrol show job "$job" | grep -q "ExitCode=0:0" || fail "the job's exit code after TERM is not 0"
echo "figures: scancel --signal=TERM to every process gone $(ms "$t0" "$t1") ms, $before steps done"
scontrol requeue "$job" || fail "scontrol requeue of the completed job refused"
await_resumed "$t0" "$before" "TERM and requeue"

# 2. `scontrol requeue` mid-run: what Slurm's preemption with PreemptMode=REQUEUE does
# (SIGTERM to every task, KillWait, SIGKILL, the job queued again).
await_steps $((before + 100)) || fail "no progress after the first resume"
[ "$done" -lt 3 ] || fail "every job finished before the second preemption"
before=$steps
t0=$(now)
scontrol requeue "$job" || fail "scontrol requeue refused"
await_gone "the requeue"
t1=$(now)
echo "figures: requeue (SIGTERM) to every process gone $(ms "$t0" "$t1") ms, $before steps done"
await_resumed "$t0" "$before" "requeue"
for i in $(seq 1 1200); do
  read -r n done steps < <(progress)
  [ "$done" = 3 ] && break
  sleep 0.1
done
[ "$n" = 3 ] && [ "$done" = 3 ] || fail "$done of $n jobs finished"
status_json > "$work/status.json"
# The time-limit warning (--signal=B:USR1@120 in the script) reaches the batch shell, which
# passes it on as SIGTERM: the cluster drains and the job completes with exit 0.
t3=$(now)
scancel --batch --signal=USR1 "$job" || fail "scancel --signal=USR1 refused"
for i in $(seq 1 600); do [ -z "$(job_state)" ] && break; sleep 0.05; done
t4=$(now)
[ -z "$(job_state)" ] || fail "the job still runs 30 s after USR1"
scontrol show job "$job" | grep -q "JobState=COMPLETED .*" || fail "the job did not complete"
scontrol show job "$job" | grep -q "ExitCode=0:0" || fail "the job's exit code is not 0"
echo "figures: USR1 warning to the job completed $(ms "$t3" "$t4") ms"
"$bin" run --local 3 --cluster "$work/state/cluster.toml" --jobs "$work/jobs.toml" \
  --round-length 1 --checkpoint-dir "$work/ckpt-local" --json "$work/local.json" \
  >"$work/local.out" 2>&1 || fail "the --local run failed"
same_results "$work/status.json" "$work/local.json" "requeued serve and --local" ||
  fail "the runs differ"
echo ok
