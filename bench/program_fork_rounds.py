#!/usr/bin/env python3
"""Rounds for the PyTorch example (examples/pytorch_elastic) to reach a held-out accuracy,
forked into copies on every node (`hadare`, HadarE; the copies merged by the node's mean,
its mean weighted by the steps each copy made, or by the program adding up their updates) and unforked (`hadar`, the same primal-dual scheduler without forks), under `mpirun -np 3` on config/run_example_cluster.toml
(speeds 1 / 0.5 / 0.25). Both check the accuracy at lease ends only (round ends), as the
trainables' target_loss is checked. One line per seed and policy, then the medians.

usage: bench/program_fork_rounds.py [--seeds 1 2 3] [--target 0.97] [--lr 0.01]
                                    [--round-length 3] [--build build]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def run(policy, merge, seed, args, tmp):
    node_merge = "weighted" if merge == "weighted" else "mean"
    merge = "sum" if merge == "sum" else "mean"
    jobs = os.path.join(tmp, f"jobs-{seed}-{merge}.toml")
    with open(jobs, "w") as f:
        f.write(f"""[[job]]
kind = "program"
command = ["/usr/bin/python3", "train.py", "--steps", "20000", "--seed", "{seed}",
           "--lr", "{args.lr}", "--target-accuracy", "{args.target}",
           "--eval-every", "1000000000", "--fork-merge", "{merge}"]
workdir = "{ROOT}/examples/pytorch_elastic"
env = {{ OMP_NUM_THREADS = "1" }}
total_steps = 20000
step_time = 0.004
merge = "{node_merge}"
grace_seconds = 30
""")
    out = os.path.join(tmp, f"{policy}-{merge}-{seed}.json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-np", "3", "--oversubscribe", os.path.join(ROOT, args.build, "tessera"), "run",
           "--cluster", os.path.join(ROOT, "config/run_example_cluster.toml"), "--jobs", jobs,
           "--policy", policy, "--round-length", str(args.round_length), "--checkpoint-dir",
           os.path.join(tmp, f"ckpt-{policy}-{merge}-{seed}"), "--json", out, "--timeout", "600"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    j = json.load(open(out))["jobs"][0]
    return j["rounds"], j["steps"], j["accuracy"], j["jct"], j["max_copies"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--target", type=float, default=0.97)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--round-length", type=float, default=3)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    runs = {"hadar": ("hadar", "mean"), "hadare mean": ("hadare", "mean"),
            "hadare weighted": ("hadare", "weighted"), "hadare sum": ("hadare", "sum")}
    rounds = {name: [] for name in runs}
    print(f"{'seed':>4} {'policy':>15} {'rounds':>6} {'steps':>6} {'accuracy':>8} {'JCT(s)':>7} "
          f"{'copies':>6}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for name, (policy, merge) in runs.items():
                r, steps, acc, jct, copies = run(policy, merge, seed, args, tmp)
                rounds[name].append(r)
                print(f"{seed:>4} {name:>15} {r:>6} {steps:>6} {acc:>8.4f} {jct:>7.1f} {copies:>6}",
                      flush=True)
    for policy, rs in rounds.items():
        print(f"median rounds, {policy}: {statistics.median(rs)}")


if __name__ == "__main__":
    main()
