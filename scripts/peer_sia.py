#!/usr/bin/env python3
"""Sia's simulator and tessera on the same Sia workloads, one table (scripts/peer_sia.sh runs
this; docs/benchmarks/sia.md holds its figures).

For every workload of a set (Sia's philly, saturn or newtrace), in rigid mode (each job keeps
its GPU count and batch size: a `category` column of `rigid` is added to a copy):
- Sia's multi_simulator.py under Sia's own settings for its `sia` policy (p = -0.5,
  lambda_n = 1.1, lambda_a = 0.01, 60 s rounds) and its Gavel baseline (Gavel's
  max_sum_throughput_perf, 360 s rounds, as its run_experiment.sh);
- tessera simulate on the imported trace and table (config/sia_64.toml, Sia's restart
  seconds per application) with `sia` at 60 s rounds (its exact program; `sia_cbc`: on CBC,
  beside the same run of Sia's) and `max_sum_throughput_perf` at 360 s.
Each finished cell is kept as JSON under WORK, so a rerun only runs what is left.
"""
import argparse
import ast
import csv
import json
import os
import subprocess
import sys
import time

from sweep_table import percentile

SIA_ARGS = ["--policy=sia", "--policy_p_val=-0.5", "--mip_lambda_a=0.01", "--mip_lambda_n=1.1",
            "--interval=60", "--project_throughput", "--share_max_replicas"]
# name: (Sia's run (its arguments' cache name), Sia's arguments, tessera policy, round length,
# tessera's policy arguments). sia_cbc: tessera's `sia` on CBC (its ties broken by CBC's
# search), beside the same Sia run.
POLICIES = {
    "sia": ("sia", SIA_ARGS, "sia", 60, []),
    "sia_cbc": ("sia", SIA_ARGS, "sia", 60, ["--policy-arg", "dp_cells=0"]),
    "gavel": ("gavel", ["--policy=gavel", "--interval=360"], "max_sum_throughput_perf", 360, []),
}


def metrics(arrivals, jcts):
    """Average and p99 JCT (h) and makespan (h, from time 0) of jobs by name."""
    j = list(jcts.values())
    return {"avg_jct_h": sum(j) / len(j) / 3600, "p99_jct_h": percentile(j, 99) / 3600,
            "makespan_h": max(arrivals[n] + t for n, t in jcts.items()) / 3600,
            "finished": len(j)}


def rigid_copy(src, dst):
    """The workload with every job rigid; returns its arrival times by job name."""
    arrivals = {}
    with open(src) as f, open(dst, "w", newline="") as g:
        r = csv.DictReader(f)
        w = csv.DictWriter(g, fieldnames=[c for c in r.fieldnames if c != "category"] + ["category"])
        w.writeheader()
        for row in r:
            row["category"] = "rigid"
            w.writerow(row)
            arrivals[row["name"]] = float(row["time"])
    return arrivals


def last_restarts(log):
    """Restarts per job from the last record of Sia's per-round log (a start after the first
    on a new placement, within a GPU type or across)."""
    last = None
    with open(log) as f:
        for line in f:
            last = line
    return {j["name"]: j["num_restarts"] or 0 for j in json.loads(last)["submitted_jobs"]}


def run_sia(a, policy, rigid, name):
    """Sia's simulator on one workload: its JCT per job and wall seconds."""
    policy = POLICIES[policy][0]  # sia_cbc shares sia's run
    out = os.path.join(a.work, "sia", f"{name}-{policy}.json")
    if os.path.exists(out):
        return json.load(open(out))
    log = os.path.join(a.work, "sia", f"{name}-{policy}.log")
    stdout = log + ".out"
    start = time.time()
    with open(stdout, "w") as f:
        rc = subprocess.call([a.python, "multi_simulator.py", os.path.abspath(rigid)] +
                             POLICIES[policy][1] + [f"--output={log}"], cwd=a.sim_dir, stdout=f,
                             stderr=subprocess.STDOUT)
    wall = time.time() - start
    jcts = None
    with open(stdout) as f:
        for line in f:  # the last printed dict of completed jobs' JCTs
            if line.startswith("{'"):
                jcts = line
    if rc != 0 or jcts is None:
        sys.exit(f"peer_sia: Sia's simulator failed on {rigid} ({policy}); see {stdout}")
    result = {"jcts": ast.literal_eval(jcts), "wall_s": wall, "restarts": last_restarts(log)}
    json.dump(result, open(out, "w"))
    os.remove(log)  # Sia's per-round logs: tens of MB per run
    os.remove(stdout)
    return result


def run_tessera(a, policy, trace, table, restarts, name, names):
    """tessera simulate on one workload: JCT per job (by Sia's job names) and wall seconds."""
    out = os.path.join(a.work, "tessera", f"{name}-{policy}.json")
    if os.path.exists(out):
        return json.load(open(out))
    jobs_csv = out[:-5] + ".csv"
    _, _, pol, round_length, extra = POLICIES[policy]
    start = time.time()
    subprocess.check_call([a.tessera, "simulate", "-q", "--trace", trace, "--cluster", a.cluster,
                           "--throughputs", table, "--restart-costs", restarts, "--policy", pol,
                           "--round-length", str(round_length), "--csv", jobs_csv] + extra,
                          stdout=subprocess.DEVNULL)
    wall = time.time() - start
    jcts, restarts = {}, {}
    with open(jobs_csv) as f:
        for row in csv.DictReader(f):
            restarts[names[int(row["job_id"])]] = int(row["restarts"])
            if float(row["jct_s"]) >= 0:
                jcts[names[int(row["job_id"])]] = float(row["jct_s"])
    result = {"jcts": jcts, "wall_s": wall, "restarts": restarts}
    json.dump(result, open(out, "w"))
    return result


def tessera_inputs(a, workloads):
    """The table and restart costs for every workload of the set (imported once)."""
    table = os.path.join(a.work, "tessera", f"{a.set}-table.json")
    restarts = os.path.join(a.work, "tessera", f"{a.set}-restarts.csv")
    if not os.path.exists(table):
        subprocess.check_call([a.tessera, "table", "import", "sia", "--sia-dir", a.sim_dir,
                               "--cluster", a.cluster, "-o", table, "--restart-costs-out",
                               restarts, "--workload"] + workloads)
    return table, restarts


def job_names(src):
    """Sia's job names in the order `trace import sia` numbers them (by time, stable)."""
    known = {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}  # as the import
    rows = [r for r in csv.DictReader(open(src)) if r["application"] in known]
    return [r["name"] for r in sorted(rows, key=lambda r: float(r["time"]))]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sim-dir", required=True, help="a copy of Sia's sia-simulator folder")
    p.add_argument("--work", required=True, help="folder for inputs, cells and the table")
    p.add_argument("--python", required=True, help="a Python with Sia's requirements")
    p.add_argument("--tessera", required=True, help="the tessera binary")
    p.add_argument("--cluster", required=True, help="config/sia_64.toml")
    p.add_argument("--set", default="philly", help="workload set: philly, saturn or newtrace")
    p.add_argument("--workloads", default="", help="workload numbers, e.g. 1,2 (default: all)")
    p.add_argument("--policies", default="sia,gavel", help="sia, sia_cbc and/or gavel")
    a = p.parse_args()
    for d in ("sia", "tessera", "rigid"):
        os.makedirs(os.path.join(a.work, d), exist_ok=True)
    folder = os.path.join(a.sim_dir, "workloads", a.set)
    numbers = sorted(int(f[9:-4]) for f in os.listdir(folder) if f.startswith("workload-"))
    if a.workloads:
        numbers = [int(n) for n in a.workloads.split(",")]
    workloads = [os.path.join(folder, f"workload-{n}.csv") for n in numbers]
    table, restarts = tessera_inputs(a, [os.path.join(folder, f) for f in os.listdir(folder)])
    rows = []
    for n, src in zip(numbers, workloads):
        name = f"{a.set}-{n}"
        rigid = os.path.join(a.work, "rigid", f"{name}.csv")
        arrivals = rigid_copy(src, rigid)
        trace = os.path.join(a.work, "tessera", f"{name}.trace")
        subprocess.check_call([a.tessera, "trace", "import", "sia", src, "--sia-dir", a.sim_dir,
                               "-o", trace], stderr=subprocess.DEVNULL)
        names = job_names(src)
        for policy in a.policies.split(","):
            print(f"peer_sia: {name} {policy}", file=sys.stderr, flush=True)
            s = run_sia(a, policy, rigid, name)
            t = run_tessera(a, policy, trace, table, restarts, name, names)
            ms, mt = metrics(arrivals, s["jcts"]), metrics(arrivals, t["jcts"])
            rows.append({"workload": name, "policy": policy, "jobs": len(arrivals),
                         "sia_restarts": sum(s["restarts"].values()) if "restarts" in s else "-",
                         "tessera_restarts": sum(t["restarts"].values()) if "restarts" in t else "-",
                         **{f"sia_{k}": v for k, v in ms.items()},
                         **{f"tessera_{k}": v for k, v in mt.items()},
                         "sia_wall_s": s["wall_s"], "tessera_wall_s": t["wall_s"]})
    with open(os.path.join(a.work, f"peer_sia_{a.set}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print("| workload | policy | avg JCT h: Sia / tessera (diff) | p99 JCT h | makespan h "
          "| finished | restarts | wall s: Sia / tessera |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        d = r["tessera_avg_jct_h"] / r["sia_avg_jct_h"] - 1
        print(f"| {r['workload']} | {r['policy']} | {r['sia_avg_jct_h']:.2f} / "
              f"{r['tessera_avg_jct_h']:.2f} ({100 * d:+.1f}%) | {r['sia_p99_jct_h']:.2f} / "
              f"{r['tessera_p99_jct_h']:.2f} | {r['sia_makespan_h']:.2f} / "
              f"{r['tessera_makespan_h']:.2f} | {r['sia_finished']} / {r['tessera_finished']} "
              f"of {r['jobs']} | {r['sia_restarts']} / {r['tessera_restarts']} | "
              f"{r['sia_wall_s']:.0f} / {r['tessera_wall_s']:.1f} |")


if __name__ == "__main__":
    main()
