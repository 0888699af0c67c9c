#!/usr/bin/env python3
"""Both latency ratios for an evaluation grid's cells (docs/benchmarks/policies.md, "The
worst latency ratio, over the run time taken and over the expected run time").

The grid judges the worst latency ratio over the run time *taken* (the simulator's metric);
Hops defines it over the *expected* run time. For each cell of an eval_grid summary, this
reruns the chosen policy, the three policies best on the worst LR, and hops, hadare and hare
(where the cell has them), or with --all-policies every policy of the cell, with
`tessera compare --json` on the cell's traces, and prints per
cell the best policy on each definition and the chosen policy's ratio to it (means over the
seeds), and the cell's verdict under eval_grid's rule with the expected-time LR in place of
the grid's (JCT, makespan and FTF over every policy of the cell, that LR over the policies
rerun; every policy found in OUT's files for the cell counts). Results are kept in OUT, one
file per trace, so a rerun only runs the policies missing from it.

usage: scripts/eval_grid_lr.py --grid DIR [--out DIR] [--chosen tessera] [--tessera BIN]
                               [--clusters gavel_108,hops_512] [--all-policies]"""

import argparse
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_grid import judge_cell, metrics_for  # noqa: E402  (the grid's own pass rule)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTERS = {"gavel_108": ("config/gavel_108.toml", 360), "hops_512": ("config/hops_512.toml", 30)}
KEYS = ("latency_ratio_max", "latency_ratio_expected_max")


def cell_policies(cell, chosen, every=False):
    if every:
        return sorted(cell["policies"])
    pols = sorted(cell["policies"], key=lambda p: cell["policies"][p]["lr_max"])[:3]
    return pols + [p for p in ("hops", "hadare", "hare", chosen)
                   if p in cell["policies"] and p not in pols]


def seed_results(a, cell, seed, pols):
    cfile, round_s = CLUSTERS[cell["cluster"]]
    rate = f"{cell['rate_per_hour']:.6g}"
    trace = os.path.join(a.grid, f"{cell['cluster']}_{cell['kind']}", "traces",
                         f"r{rate}_s{seed}.trace")
    out = os.path.join(a.out, f"{cell['cluster']}_{cell['kind']}_r{rate}_s{seed}.json")
    kept = json.load(open(out)) if os.path.exists(out) else []
    missing = [p for p in pols if p not in {m["policy"] for m in kept}]
    if missing:
        part = out + ".part"
        subprocess.run([a.tessera, "compare", "-q", "--parallel", "1", "--trace", trace,
                        "--cluster", os.path.join(ROOT, cfile), "--round-length", str(round_s),
                        "--policies", ",".join(missing), "--json", part],
                       check=True, stdout=subprocess.DEVNULL)
        kept += json.load(open(part))
        with open(part, "w") as f:
            json.dump(kept, f, indent=1)
        os.replace(part, out)  # whole or not at all, should this be killed
    return kept


def expected_lr_verdict(cell, mean, chosen):
    """eval_grid's verdict for the cell with the worst LR over the expected run time: the
    policies that were not rerun cannot be best on it."""
    means = {p: dict(v, lre_max=mean[p][KEYS[1]] if p in mean else float("inf"))
             for p, v in cell["policies"].items()}
    return judge_cell(means, chosen, metrics_for("expected"))[1]["pass"]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", required=True, help="eval_grid's --out folder (with summary.json)")
    ap.add_argument("--out", help="where the reruns go (default: GRID/lr)")
    ap.add_argument("--chosen", default="tessera", help="the policy compared (default: tessera)")
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "tessera"))
    ap.add_argument("--clusters", help="only these clusters' cells (comma-separated)")
    ap.add_argument("--all-policies", action="store_true",
                    help="rerun every policy of each cell, not only the candidates")
    a = ap.parse_args(argv)
    clusters = set(a.clusters.split(",")) if a.clusters else None
    a.out = a.out or os.path.join(a.grid, "lr")
    os.makedirs(a.out, exist_ok=True)
    print("| cell | LR over run time taken: best, chosen's ratio | over expected: best, ratio "
          "| verdict with the expected LR |")
    print("|---|---|---|---|")
    passed = 0
    for cell in json.load(open(os.path.join(a.grid, "summary.json")))["cells"]:
        if clusters is not None and cell["cluster"] not in clusters:
            continue
        pols = cell_policies(cell, a.chosen, a.all_policies)
        acc = collections.defaultdict(lambda: collections.defaultdict(list))
        for seed in cell["seeds"]:
            for m in seed_results(a, cell, seed, pols):
                for k in KEYS:
                    acc[m["policy"]][k].append(m[k])
        mean = {p: {k: sum(v) / len(v) for k, v in d.items()} for p, d in acc.items()}
        cols = []
        for k in KEYS:
            best = min(mean, key=lambda p: mean[p][k])
            cols.append(f"{best} {mean[best][k]:.3g}, {mean[a.chosen][k] / mean[best][k]:.3f}")
        ok = expected_lr_verdict(cell, mean, a.chosen)
        passed += ok
        print(f"| {cell['cluster']} {cell['kind']} {cell['load']:g} | {cols[0]} | {cols[1]} | "
              f"{'pass' if ok else 'fail'} |", flush=True)
    print(f"\ncells passed with the expected LR: {passed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
