#!/usr/bin/env python3
"""Each rigid job shape of Sia's workloads, alone on each GPU kind, timed by Sia's own job
model beside tessera's import (docs/traces.md, "Sia's workloads").

usage: PYTHON scripts/sia_job_times.py SIA_SIM_DIR TABLE TRACE...
  SIA_SIM_DIR  a checkout's sia-simulator folder (its Job class is imported from there)
  TABLE        `tessera table import sia` output for config/sia_64.toml
  TRACE        `tessera trace import sia` outputs covering the shapes (steps per job type)
PYTHON needs Sia's requirements (pandas < 2, scipy, autograd, cvxpy); scripts/peer_sia.sh
makes such a virtual environment.
Prints one line per (shape, kind) with both times and their difference, then the worst.
"""
import contextlib
import csv
import glob
import io
import json
import os
import sys

KINDS = {"aws": ("t4", 4), "dgx-ext": ("a100", 8), "rtx": ("rtx2080ti", 8)}


def sia_seconds(apps, app, replicas, batch, kind):
    """Seconds Sia's Job needs on `kind` from its first step (start-up delay excluded)."""
    from job import Job
    per = KINDS[kind][1]
    job = Job("shape", apps[app], 0, target_num_replicas=replicas, target_batch_size=batch,
              category="rigid")
    placement = []
    while sum(placement) < replicas:
        placement.append(min(replicas - sum(placement), per))
    with contextlib.redirect_stdout(io.StringIO()):
        job.disable_bsz_tuning()
        job.migrate(kind, placement)
        start = job.rescale_time
        while job.completion_time is None:
            job.step(3600)
    return job.completion_time - start


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    sim_dir, table_file, traces = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.path.insert(0, sim_dir)
    os.chdir(sim_dir)
    from applications import APPLICATIONS
    apps = {}
    for kind, by_app in APPLICATIONS.items():
        for name, a in by_app.items():
            apps.setdefault(name, {})[kind] = a
    table = json.load(open(table_file))
    steps = {}
    for t in traces:
        for line in open(t):
            f = line.rstrip("\n").split("\t")
            steps[(f[0], int(f[6]))] = float(f[5])
    shapes = sorted({(r["application"], int(r["num_replicas"]), int(r["batch_size"]))
                     for w in glob.glob("workloads/*/workload-*.csv")
                     for r in csv.DictReader(open(w))})
    worst = 0.0
    for app, n, batch in shapes:
        job_type = f"{app} (batch size {batch})"
        if (job_type, n) not in steps:
            continue
        for kind, (gpu_type, _) in KINDS.items():
            sia = sia_seconds(apps, app, n, batch, kind)
            ours = steps[(job_type, n)] / table[gpu_type][f"('{job_type}', {n})"]["null"]
            diff = ours / sia - 1
            worst = max(worst, abs(diff))
            print(f"{app:12s} x{n:<3d} batch {batch:5d} {kind:8s} sia {sia:9.0f} s  "
                  f"tessera {ours:9.0f} s  {100 * diff:+.3f}%")
    print(f"worst difference {100 * worst:.3f}%")


if __name__ == "__main__":
    main()
