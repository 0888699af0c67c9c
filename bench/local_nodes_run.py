#!/usr/bin/env python3
"""`tessera run --local N` with default settings and cheap jobs (one 20 s softmax job per node),
RUNS times; one JSON line per run: exit code, wall seconds, seconds from the scheduler's start
to the last registration, dispatch latency p50/p99 (rounds after the first) and its planning part
(round start to orders out), lost ranks and the scheduler's own lateness. Run it beside `stress-ng --cpu 4` to see the runtime on a busy host.

usage: /usr/bin/python3 bench/local_nodes_run.py [--nodes 64] [--runs 3] [--tessera build/tessera]"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def percentile(values, q):
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def one_run(tessera, nodes, d, i):
    cluster = os.path.join(d, "cluster.toml")
    jobs = os.path.join(d, "jobs.toml")
    with open(cluster, "w") as f:
        f.write(f'[cluster]\nname = "local"\n[[cluster.server]]\ngpu_type = "v100"\ngpus = 1\n'
                f"count = {nodes}\n")
    with open(jobs, "w") as f:
        for _ in range(nodes):
            f.write('[[job]]\nkind = "softmax_regression"\ntotal_steps = 2000\nstep_time = 0.01\n\n')
    out = os.path.join(d, f"sum{i}.json")
    log = os.path.join(d, f"run{i}.log")
    start = time.monotonic()
    with open(log, "w") as lf:
        code = subprocess.call([tessera, "run", "--local", str(nodes), "--cluster", cluster,
                                "--jobs", jobs, "--json", out, "-q"], stdout=lf, stderr=lf)
    wall = time.monotonic() - start
    line = {"bench": "local_nodes_run", "nodes": nodes, "run": i, "exit": code,
            "wall_s": round(wall, 2), "load": open("/proc/loadavg").read().split()[:3]}
    if os.path.exists(out):
        s = json.load(open(out))
        lat = s["dispatch_latency"][1:]
        line.update(ok=s["ok"], rounds=s["rounds"], registration_s=round(s["registration_seconds"], 3),
                    dispatch_ms_p50=round(1000 * percentile(lat, 0.5), 2),
                    dispatch_ms_p99=round(1000 * percentile(lat, 0.99), 2),
                    plan_ms_p50=round(1000 * percentile(s["plan_seconds"][1:], 0.5), 2),
                    plan_ms_p99=round(1000 * percentile(s["plan_seconds"][1:], 0.99), 2),
                    failed_ranks=s["failed_ranks"],
                    scheduler_stalled_s=round(s["scheduler_stalled_seconds"], 3))
        if not s["ok"]:
            line["error"] = s["error"]
    if line.get("ok") is not True:
        kept = f"/tmp/local_nodes_run.{os.getpid()}.{i}.log"
        with open(kept, "w") as k:
            k.write(open(log).read())
        line["log"] = kept
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tessera", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "tessera"))
    a = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        for i in range(1, a.runs + 1):
            line = one_run(a.tessera, a.nodes, d, i)
            failed += line["exit"] != 0
            print(json.dumps(line), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
