#!/usr/bin/env python3
"""Rounds for the PyTorch example (examples/pytorch_elastic) to reach a held-out accuracy,
forked into copies on every node (`hadare`, HadarE; the copies merged by the node's mean,
or its mean weighted by the steps each copy made: the job's `merge`) and unforked (`hadar`, the same primal-dual scheduler without forks), under `mpirun -np 3` on three one-GPU nodes (speeds 1 / 0.5 / 0.25 by default, those of
config/run_example_cluster.toml). Both check the accuracy at lease ends only (round ends), as the
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

    jobs = os.path.join(tmp, f"jobs-{seed}-{merge}.toml")
    with open(jobs, "w") as f:
        f.write(f"""[[job]]
kind = "program"
command = ["/usr/bin/python3", "train.py", "--steps", "20000", "--seed", "{seed}",
           "--lr", "{args.lr}", "--target-accuracy", "{args.target}",
           "--eval-every", "1000000000"]
workdir = "{ROOT}/examples/pytorch_elastic"
env = {{ OMP_NUM_THREADS = "1" }}
total_steps = 20000
step_time = 0.004
merge = "{merge}"
max_copies = 3
grace_seconds = 30
""")
    out = os.path.join(tmp, f"{policy}-{merge}-{seed}.json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cluster = os.path.join(tmp, "cluster.toml")
    with open(cluster, "w") as f:
        f.write('[cluster]\nname = "fork-bench"\n')
        for i, (gpu, speed) in enumerate(zip(["v100", "p100", "k80"], args.speeds)):
            f.write(f'[[cluster.server]]\nname = "n{i}"\ngpu_type = "{gpu}"\ngpus = 1\n'
                    f'speed = {speed}\n')
    cmd = ["mpirun", "-np", "3", "--oversubscribe", os.path.join(ROOT, args.build, "tessera"), "run",
           "--cluster", cluster, "--jobs", jobs,
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
    ap.add_argument("--speeds", type=float, nargs=3, default=[1.0, 0.5, 0.25],
                    help="the three nodes' speed factors (config/run_example_cluster.toml's)")
    ap.add_argument("--policies", nargs="+", default=["hadar", "hadare mean", "hadare weighted"])
    args = ap.parse_args()
    runs = {"hadar": ("hadar", "mean"), "hadare mean": ("hadare", "mean"),
            "hadare weighted": ("hadare", "weighted")}
    runs = {name: runs[name] for name in args.policies}
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
