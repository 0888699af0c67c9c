#!/usr/bin/env bash
# The PyTorch example (examples/pytorch_elastic) on a GPU, as scripts/gpu_checks.sh's last
# checks or on its own:
#   1. alone (no tessera) on GPU 0, --device cuda: its steps/s, the baseline;
#   2. as a program job under `tessera run --local 1` on a 1-GPU server, warm (renew=True): it
#      must finish on cuda:0 in one process across every round (renewals = rounds - 1), and
#      its steps/s and the run's per-round overhead are printed beside the baseline;
#   3. forked into two copies (`--policy hadare`, `--local 2`, both node processes on GPU 0,
#      each copy warm), averaging through the lease at every round's end: it must finish as
#      two copies; the copies' steps/s together are printed beside the baseline.
# Each program job's total steps are the baseline's steps/s x SECONDS (about that many seconds
# of training), in rounds of ROUND seconds.
#
# usage: scripts/gpu_program_checks.sh TESSERA PYTHON OUT-DIR [ROUND] [SECONDS]
#   TESSERA  the tessera binary; PYTHON  a Python with torch (CUDA) and NumPy;
#   OUT-DIR  where the job files, logs and summaries go. Defaults: ROUND 10, SECONDS 40.
# DIGITS=FILE: the digits as an .npz (images, target), for a Python without scikit-learn.
# DEVICE=cpu: the same on the CPU, to try the script where there is no GPU (nvidia-smi must
# still answer: a stand-in on PATH does).
# Exit: 0 all passed, 1 a check failed, 77 no GPU.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
tessera=${1:?usage: gpu_program_checks.sh TESSERA PYTHON OUT-DIR [ROUND] [SECONDS]}
py=${2:?python}
out=${3:?out dir}
round=${4:-10}
secs=${5:-40}
mkdir -p "$out"
nvidia-smi -L >/dev/null 2>&1 || { echo "gpu_program_checks: no GPU (nvidia-smi)"; exit 77; }
train=$root/examples/pytorch_elastic/train.py
digits=()
[ -n "${DIGITS:-}" ] && digits=(--digits "$DIGITS")
device=${DEVICE:-cuda}
want=cuda:0
[ "$device" = cuda ] || want=$device
export CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=1
failures=()

# The value of `key` in the last JSON line of `file` that has it.
field() {
  "$py" -c 'import json,sys
v = None
for line in open(sys.argv[1]):
    i = line.find("{")
    if i < 0: continue
    try: d = json.loads(line[i:])
    except ValueError: continue
    if sys.argv[2] in d: v = d[sys.argv[2]]
print(v)' "$1" "$2"
}

# ---- 1. alone ---------------------------------------------------------------------------------
echo "==== the PyTorch example alone on GPU 0 (3000 steps)"
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name(0))'
/usr/bin/time -f "wall %e s" timeout 300 "$py" "$train" --steps 3000 --device "$device" \
  --checkpoint-dir "$out/alone" "${digits[@]}" > "$out/alone.log" 2>&1
cat "$out/alone.log"
alone_rate=$("$py" -c 'import sys; s, t = int(sys.argv[1]), float(sys.argv[2]); print(s / t)' \
  "$(field "$out/alone.log" process_steps)" "$(field "$out/alone.log" process_seconds)" 2>/dev/null)
if [ -z "$alone_rate" ] || [ "$(field "$out/alone.log" device)" != "$want" ]; then
  echo "gpu_program_checks: FAILED: the example did not train on $want alone"
  exit 1
fi
total=$("$py" -c 'import sys; print(int(float(sys.argv[1]) * float(sys.argv[2])))' \
  "$alone_rate" "$secs")
echo "alone: $alone_rate steps/s; the program jobs run $total steps in rounds of $round s"

gpu_type=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr 'A-Z' 'a-z' |
  grep -oE 'gh200|h100|h200|h800|a100|a800|a6000|a40|l40s|l40|l4|v100|p100|k80|t4' | head -1)
gpu_type=${gpu_type:-h100}
job_file() {  # job_file FILE MAX_COPIES
  printf '[[job]]\nkind = "program"\ncommand = ["%s", "%s", "--steps", "%s", "--device", "%s"%s]\n'\
'workdir = "%s"\nenv = { OMP_NUM_THREADS = "1" }\ntotal_steps = %s\nstep_time = %s\n'\
'max_restarts = 1\ngrace_seconds = 60\nmax_copies = %s\n' "$py" "$train" "$total" "$device" \
    "${DIGITS:+, \"--digits\", \"$DIGITS\"}" "$out" "$total" \
    "$("$py" -c "print(1 / $alone_rate)")" "$2" > "$1"
}
summary() {  # summary JSON: one line per job
  "$py" -c 'import json,sys
d = json.load(open(sys.argv[1]))
for j in d["jobs"]:
    print("  job %d: %s, %s steps, %d rounds, up to %d copies, JCT %.2f s, run %.2f s, "
          "startup %.2f s, throughput %s" % (j["id"], j["state"], j["steps"], j["rounds"],
          j["max_copies"], j["jct"] or -1, j["run_time"], j["startup_seconds"],
          ", ".join("%.0f" % t for t in j["throughput"])))' "$1"
}

# ---- 2. one program job, warm -------------------------------------------------------------------
mkdir -p "$out/one"
printf '[cluster]\nname = "one-gpu"\n[[cluster.server]]\nname = "gpu0"\ngpu_type = "%s"\n'\
'gpus = 1\n' "$gpu_type" > "$out/one/cluster.toml"
job_file "$out/one/jobs.toml" 1
echo
echo "==== tessera run: the example as a warm program job on GPU 0 ($round s rounds)"
"$tessera" run --local 1 --cluster "$out/one/cluster.toml" --jobs "$out/one/jobs.toml" \
  --round-length "$round" --checkpoint-dir "$out/one/ckpt" --json "$out/one/summary.json" \
  --timeline "$out/one/timeline.jsonl" \
  --timeout 400 > "$out/one/run.log" 2>&1
rc=$?
tail -n 12 "$out/one/run.log"
if [ $rc -ne 0 ] || [ "$(field "$out/one/run.log" device)" != "$want" ]; then
  failures+=("the warm program job (exit $rc; it must finish on $want)")
else
  summary "$out/one/summary.json"
  "$py" -c 'import json,sys
d = json.load(open(sys.argv[1]))["jobs"][0]
steps, secs, ren = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
alone = float(sys.argv[5])
rate = steps / secs
print("  one process: %d steps in %.2f s = %.1f steps/s (alone %.1f: %+.1f%%), %d renewals in %d "
      "rounds" % (steps, secs, rate, alone, 100 * (rate / alone - 1), ren, d["rounds"]))
ideal = d["steps"] / alone
print("  JCT %.2f s against %.2f s of steps at the alone rate: %.1f%% overhead, %.2f s a round"
      % (d["jct"], ideal, 100 * (d["jct"] / ideal - 1), (d["jct"] - ideal) / d["rounds"]))
sys.exit(0 if ren == d["rounds"] - 1 else 1)' "$out/one/summary.json" \
    "$(field "$out/one/run.log" process_steps)" "$(field "$out/one/run.log" process_seconds)" \
    "$(field "$out/one/run.log" renewals)" "$alone_rate" ||
    failures+=("the warm program job did not keep one process (renewals != rounds - 1)")
fi

# ---- 3. two forked copies on the one GPU ----------------------------------------------------------
mkdir -p "$out/fork"
printf '[cluster]\nname = "two-nodes-one-gpu"\n' > "$out/fork/cluster.toml"
for s in 0 1; do
  printf '[[cluster.server]]\nname = "gpu%s"\ngpu_type = "%s"\ngpus = 1\n' "$s" "$gpu_type"
done >> "$out/fork/cluster.toml"
job_file "$out/fork/jobs.toml" 2
echo
echo "==== tessera run: the example forked into two warm copies on GPU 0 (hadare)"
"$tessera" run --local 2 --policy hadare --cluster "$out/fork/cluster.toml" \
  --jobs "$out/fork/jobs.toml" --round-length "$round" --checkpoint-dir "$out/fork/ckpt" \
  --json "$out/fork/summary.json" --timeline "$out/fork/timeline.jsonl" --timeout 400 \
  > "$out/fork/run.log" 2>&1
rc=$?
tail -n 12 "$out/fork/run.log"
if [ $rc -ne 0 ]; then
  failures+=("the forked program job (exit $rc)")
else
  summary "$out/fork/summary.json"
  "$py" -c 'import json,sys
d = json.load(open(sys.argv[1]))["jobs"][0]
alone = float(sys.argv[2])
rate = d["steps"] / d["run_time"]
print("  two copies together: %d steps in %.2f s = %.1f steps/s (alone %.1f: %+.1f%%)"
      % (d["steps"], d["run_time"], rate, alone, 100 * (rate / alone - 1)))
sys.exit(0 if d["max_copies"] >= 2 and d["finished"] else 1)' "$out/fork/summary.json" \
    "$alone_rate" || failures+=("the forked program job never ran as two copies")
fi

echo
if [ ${#failures[@]} -gt 0 ]; then
  echo "gpu_program_checks: FAILED:"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
echo "gpu_program_checks: passed"
