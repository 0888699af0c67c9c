#!/usr/bin/env python3
"""Summarises docs/results/*.json (written by scripts/reproduce_gavel.sh) as Markdown tables:
per experiment and policy, the figure of interest for each seed and the mean over seeds."""
import glob
import json
import os
import re
import statistics
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "docs/results"
groups = {}
for path in sorted(glob.glob(os.path.join(root, "*.json"))):
    name = os.path.basename(path)[:-5]
    m = re.match(r"(.*)_seed(\d+)$", name)
    if not m:
        continue
    exp, seed = m.group(1), int(m.group(2))
    with open(path) as f:
        runs = json.load(f)
    # Other experiments' files (one object, or runs without a JCT or makespan) are not
    # summarised here; their own sections of docs/benchmarks/ read them.
    if not isinstance(runs, list) or not all("avg_jct_s" in r for r in runs):
        continue
    for run in runs:
        groups.setdefault(exp, {}).setdefault(run["policy"], {})[seed] = run

def figure(exp, run):
    if exp.startswith("makespan"):
        return run["makespan_s"] / 3600.0, "makespan (h)"
    # Runs without a measurement window report every job's JCT.
    if "avg_jct_window_s" in run:
        return run["avg_jct_window_s"] / 3600.0, "avg JCT of the window's jobs (h)"
    return run["avg_jct_s"] / 3600.0, "avg JCT of every job (h)"

for exp in sorted(groups):
    policies = groups[exp]
    seeds = sorted({s for runs in policies.values() for s in runs})
    label = figure(exp, next(iter(next(iter(policies.values())).values())))[1]
    print(f"\n**{exp}** — {label}\n")
    print("| policy | " + " | ".join(f"seed {s}" for s in seeds) + " | mean |")
    print("|---|" + "---|" * (len(seeds) + 1))
    for pol, runs in policies.items():
        vals = [figure(exp, runs[s])[0] for s in seeds if s in runs]
        cells = [f"{figure(exp, runs[s])[0]:.1f}" if s in runs else "-" for s in seeds]
        print(f"| {pol} | " + " | ".join(cells) + f" | {statistics.mean(vals):.1f} |")
