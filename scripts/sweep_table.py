#!/usr/bin/env python3
"""The table of a sweep over given traces (`tessera sweep --traces ... --keep-jobs`), one
block per workload set (the trace stem without its trailing "-N"), one row per policy, each
figure the mean over the set's traces: average and p99 JCT (h), makespan (h), worst
finish-time fairness, worst latency ratio, GPU-hours and restarts (sums over the jobs),
cells that did not finish every job, and wall seconds. Rows are sorted by average JCT, the
policies that finished every job of every cell first; a policy with a cell stopped at
--max-hours follows, its JCT and makespan in brackets: they count only the jobs that
finished, so they are not comparable with the others'.

usage: python3 scripts/sweep_table.py SWEEP_DIR [--sets philly,saturn] [--markdown]
"""
import argparse
import csv
import json
import os
import sys



def workload_set(trace):
    """'philly-3' -> 'philly'; a stem without a trailing number is its own set (also
    scripts/plot.py's policies kind)."""
    head, _, tail = trace.rpartition("-")
    return head if head and tail.isdigit() else trace


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(-(-q * len(v) // 100)) - 1))
    return v[k]


def finished_first(means, capped):
    """Policies ordered for a table or a figure: those with no cell stopped at --max-hours
    first, each part by its mean (means: policy -> mean); a capped policy's mean counts only
    the jobs that finished, so it is not ranked among the others."""
    return sorted(means, key=lambda p: (p in capped, means[p]))


def cell_figures(sweep_dir, cell):
    """Figures of one finished cell: the sweep's metrics and its jobs' CSV."""
    jobs = list(csv.DictReader(open(os.path.join(sweep_dir, "cells", cell["cell"] + ".jobs.csv"))))
    jcts = [float(j["jct_s"]) for j in jobs if float(j["jct_s"]) >= 0]
    return {"avg_jct_h": cell["avg_jct_h"],
            "p99_jct_h": percentile(jcts, 99) / 3600 if jcts else float("nan"),
            "makespan_h": cell["makespan_h"], "ftf_max": cell["ftf_max"],
            "lr_max": cell["lr_max"],
            "gpu_hours": sum(float(j["gpu_seconds"]) for j in jobs) / 3600,
            "restarts": sum(int(j["restarts"]) for j in jobs),
            "unfinished": 0 if cell["complete"] else 1, "wall_s": cell["cell_seconds"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep_dir")
    ap.add_argument("--sets", default="", help="comma-separated workload sets (default: all)")
    a = ap.parse_args()
    cells = json.load(open(os.path.join(a.sweep_dir, "sweep.json")))["cells"]
    table = {}  # set -> policy -> [figures]
    for c in cells:
        if not c.get("trace"):
            sys.exit(f"sweep_table: cell {c['cell']} has no trace (not a sweep over --traces)")
        group = workload_set(c["trace"])
        table.setdefault(group, {}).setdefault(c["policy"], []).append(cell_figures(a.sweep_dir, c))
    wanted = a.sets.split(",") if a.sets else sorted(table)
    keys = ["avg_jct_h", "p99_jct_h", "makespan_h", "ftf_max", "lr_max", "gpu_hours", "restarts"]
    for group in wanted:
        rows = table.get(group, {})
        print(f"\n{group}: mean over its traces (cells per policy in brackets)\n")
        print("| policy | avg JCT h | p99 JCT h | makespan h | worst FTF | worst LR | GPU-h "
              "| restarts | unfinished cells | wall s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        mean = {p: {k: sum(f[k] for f in fs) / len(fs) for k in keys + ["wall_s"]}
                for p, fs in rows.items()}
        unfinished = {p: sum(f["unfinished"] for f in fs) for p, fs in rows.items()}
        for p in finished_first({p: mean[p]["avg_jct_h"] for p in rows},
                                {p for p in rows if unfinished[p]}):
            m, fs = mean[p], rows[p]
            o, c = ("(", ")") if unfinished[p] else ("", "")
            print(f"| {p} [{len(fs)}] | {o}{m['avg_jct_h']:.2f}{c} | {o}{m['p99_jct_h']:.2f}{c} | "
                  f"{o}{m['makespan_h']:.2f}{c} | {m['ftf_max']:.2f} | {m['lr_max']:.1f} | "
                  f"{m['gpu_hours']:.0f} | {m['restarts']:.0f} | {unfinished[p]} | "
                  f"{m['wall_s']:.1f} |")


if __name__ == "__main__":
    main()
