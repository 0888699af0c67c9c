#!/usr/bin/env python3
"""What a warm program's checkpoint cadence (the job file's `checkpoint_every`) buys and costs,
with the real runtime (`tessera run --local N`) and a program whose save takes a set time
(tests/data/programs/slow_save.py: 2 ms steps, a save of --save seconds):
- stays: one job alone on one node for --steps steps; a save every round against one only when
  the job ends: the run's seconds, and steps per second of it;
- moves: three jobs on two one-GPU nodes under max_min_fairness_perf, which moves them every
  round or two; a save every round against "1000 rounds", where each move waits for the
  old process's save before the round starts (settle): median dispatch latency (round start
  to every copy started), makespan, and the regressions (steps redone, which must be 0).
Median of R runs each.

usage: /usr/bin/python3 bench/program_cadence.py [--runs 3] [--save 0.5] [--steps 3000]
                                                 [--round-length 2] [--build build]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PROGRAM = os.path.join(ROOT, "tests", "data", "programs", "slow_save.py")


def cluster(nodes):
    servers = "".join(f'[[cluster.server]]\nname = "n{i}"\ngpu_type = "v100"\ngpus = 1\n'
                      'speed = 1.0\n' for i in range(nodes))
    return f'[cluster]\nname = "cadence"\n{servers}'


def run(args, tmp, name, nodes, jobs, cadence):
    """`jobs` jobs of the program on `nodes` nodes with `cadence`: the run's summary."""
    c, j, out = (os.path.join(tmp, f"{name}.{x}") for x in ("cluster.toml", "jobs.toml", "json"))
    with open(c, "w") as f:
        f.write(cluster(nodes))
    with open(j, "w") as f:
        for _ in range(jobs):
            f.write(f'[[job]]\nkind = "program"\ncommand = ["/usr/bin/python3", "{PROGRAM}", '
                    f'"{args.steps}", "{args.save}"]\ntotal_steps = {args.steps}\n'
                    f'step_time = 0.002\ncheckpoint_every = "{cadence}"\n\n')
    cmd = [os.path.join(ROOT, args.build, "tessera"), "run", "--local", str(nodes), "--cluster", c,
           "--jobs", j, "--round-length", str(args.round_length), "--checkpoint-dir",
           os.path.join(tmp, "ckpt-" + name), "--json", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    return json.load(open(out))


def scenario(args, tmp, label, nodes, jobs):
    for cadence in ("1 round", "1000 rounds"):
        secs, rates, latency, regressions = [], [], [], 0
        for r in range(args.runs):
            s = run(args, tmp, f"{label}-{cadence.split()[0]}-{r}", nodes, jobs, cadence)
            makespan = max(j["finish"] for j in s["jobs"])
            secs.append(makespan)
            rates.append(jobs * args.steps / makespan)
            latency.append(statistics.median(s["dispatch_latency"][1:] or [0]))
            regressions += sum(j["regressions"] for j in s["jobs"])
        print(f"{label:6s} checkpoint_every = {cadence!r:14s}: makespan {statistics.median(secs):6.2f} s, "
              f"{statistics.median(rates):7.1f} steps/s, dispatch latency median "
              f"{1e3 * statistics.median(latency):6.1f} ms, regressions {regressions} "
              f"({args.runs} runs)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--save", type=float, default=0.5, help="seconds a save takes")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--round-length", type=float, default=2)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    print(f"2 ms steps, a save of {args.save} s, {args.round_length} s rounds, "
          f"{args.steps} steps per job", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        scenario(args, tmp, "stays", 1, 1)
        scenario(args, tmp, "moves", 2, 3)


if __name__ == "__main__":
    main()
