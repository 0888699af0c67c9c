#!/usr/bin/env python3
"""What a resize costs a PyTorch program job under tessera: the time from a round boundary to
the first step on a new placement, beside torchrun's (bench/torchrun_resize.py).

A program job whose placement changes (it moves, or gains or loses copies) is started afresh
on its new nodes at the round boundary: the node starts its process (dispatch), the process
imports torch, builds its data and model, loads the job's checkpoint and says hello, then
steps. This runs the PyTorch example (examples/pytorch_elastic) forked by hadare over three
node processes (`mpirun -np 3 tessera run`, 1 copy growing to 3, moving as the policy likes)
and reads from the run's summary, per round: the dispatch latency (round start to every copy's
process started) and, per job, the mean start-to-hello time (`startup_seconds`). Their sum is
the interval from the boundary to the program's first step (a step of the digits MLP takes
milliseconds). Median of R runs.

usage: /usr/bin/python3 bench/program_resize.py [--runs 3] [--round-length 10] [--build build]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def one_run(args, tmp, r):
    jobs = os.path.join(tmp, f"jobs-{r}.toml")
    with open(jobs, "w") as f:
        f.write(f"""[[job]]
kind = "program"
command = ["/usr/bin/python3", "train.py", "--steps", "3000", "--seed", "{r}"]
workdir = "{ROOT}/examples/pytorch_elastic"
env = {{ OMP_NUM_THREADS = "1" }}
total_steps = 3000
step_time = 0.004
max_copies = 3
grace_seconds = 60
""")
    out = os.path.join(tmp, f"sum-{r}.json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-np", "3", "--oversubscribe", os.path.join(ROOT, args.build, "tessera"),
           "run", "--cluster", os.path.join(ROOT, "config", "run_example_cluster.toml"),
           "--jobs", jobs, "--policy", "hadare", "--round-length", str(args.round_length),
           "--checkpoint-dir", os.path.join(tmp, f"ckpt-{r}"), "--json", out, "-q"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    s = json.load(open(out))
    job = s["jobs"][0]
    return {"rounds": s["rounds"], "copies": job["max_copies"],
            "dispatch_s": statistics.median(s["dispatch_latency"]),
            "startup_s": job["startup_seconds"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--round-length", type=float, default=10.0)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one_run(args, tmp, r) for r in range(args.runs)]
    for r in runs:
        r["boundary_to_first_step_s"] = r["dispatch_s"] + r["startup_s"]
        print(json.dumps(r))
    print(json.dumps({"median_boundary_to_first_step_s": statistics.median(
        r["boundary_to_first_step_s"] for r in runs), "runs": len(runs)}))


if __name__ == "__main__":
    main()
