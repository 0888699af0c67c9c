#!/usr/bin/env python3
"""Evaluation grid: every policy on loads x clusters x job kinds x seeds, and per
cell each metric's best policy and the chosen policy's ratio to it.

The grid wraps `tessera sweep`, one sweep per (cluster, kind) into OUT/<cluster>_<kind>/
(traces generated there, cells run on -j threads, a rerun resumes, sweep.csv / sweep.json):
  clusters  gavel_108  config/gavel_108.toml: 36 V100 + 36 P100 + 36 K80 on 4-GPU servers,
                       360 s rounds (Gavel's simulation);
            hops_512   config/hops_512.toml: 64 servers of 8 GPUs, 5 server models, 30 s
                       rounds (Hops' simulation); the arrival rates are multiplied by 512/108
                       so that a load of R jobs/h asks as much of the cluster per GPU as R
                       does on gavel_108 (the summary shows the load R; sweep.csv the rate);
  kinds     single     Gavel's trace recipe, one GPU per job;
            multi      the same with --multi-gpu (1/2/4/8 GPUs per job);
  loads     --rates, jobs/h (default 1-6); seeds --seeds (default 181,182,183).
Every trace runs to its end (no window), so all four metrics cover every job.

Metrics (lower is better for all four): average JCT (avg_jct_h), makespan (makespan_h),
worst finish-time fairness (ftf_max), worst latency ratio (lr_max). Per (cluster, kind,
load) cell each policy's metric is its mean over the seeds (a policy missing a seed, or
with a seed that did not finish every job, is left out of that cell and named); the best
policy is the lowest mean; the chosen policy's (--chosen) ratio is its mean / the best
(1 when it is the best). A cell passes when the chosen policy's ratio is <= 1.05 on all four
metrics and it is strictly best (lower than every other policy) on at least two of them.

Trace length (--jobs, default 1000): a trace must keep arriving for longer than its long
jobs run (up to ~170 h) for queues to build. Measured on gavel_108, multi-GPU at 6 jobs/h,
seed 181, policies hare/hops/hadare/max_min_fairness_perf (docs/benchmarks/policies.md,
"Trace length"): 120 jobs (the trace ends after 20 h) give utilisation 0.07-0.35 and a
mean wait of 0.05 h (the wait for the next round boundary): no queueing; 300 jobs 0.38-0.78
and 0.14-0.45 h; 1000 jobs 0.53-0.94 and 9.4-13.4 h (at 3 jobs/h 0.9-2.6 h; single-GPU jobs
at 6 jobs/h 0.4-1.9 h). A gavel_108 cell then takes 0.3-1.5 s of CPU, hops' (an ILP per
round) 8-27 s. On hops_512 the same job count arrives 4.74x faster, so the trace spans less
time and queues less (LAS waits 0.12-0.24 h on average at load 6); a cell there takes 4-31 s
of CPU, hops' 96-491 s (30 s rounds). 2000 jobs would double the cost; every policy on the
whole grid is already a few CPU-hours (use -j on a many-core machine).

The summary reads every finished cell in OUT/<cluster>_<kind>/cells/, so policies or loads
added by later commands into the same OUT join the earlier ones.
With --latency-ratio expected the fourth metric is Hops' latency ratio, wait / expected run
time (lre_max: the expected run time is the job's steps at its best throughput), instead of
the simulator's wait / run time taken; the two part where a policy runs a job faster or
slower than one copy at its best rate (docs/benchmarks/policies.md, "The worst latency
ratio, over the run time taken and over the expected run time").
Outputs: OUT/<cluster>_<kind>/ (the sweep), OUT/eval_grid.log (the sweeps' own output,
solver logs included), OUT/summary.md (a table per cluster and kind), OUT/summary.json
(summary_expected.md/.json with --latency-ratio expected), and a last line
`cells passed: P / T`.
Exit status: 0, or 1 when a sweep failed (its finished cells are still summarised), 2 on
bad usage.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (cluster file, round length in s, arrival-rate multiplier)
CLUSTERS = {
    "gavel_108": ("config/gavel_108.toml", 360, 1.0),
    "hops_512": ("config/hops_512.toml", 30, 512.0 / 108.0),
}
KINDS = {"single": [], "multi": ["--multi-gpu"]}
# sweep.csv column -> label in the summary
METRICS = [("avg_jct_h", "avg JCT (h)"), ("makespan_h", "makespan (h)"),
           ("ftf_max", "worst FTF"), ("lr_max", "worst LR")]
# --latency-ratio expected: Hops' definition, wait / expected run time (the cells' lre_max)
EXPECTED_LR = ("lre_max", "worst LR over expected run time")
RATIO_LIMIT = 1.05
MIN_STRICTLY_BEST = 2


def metrics_for(latency_ratio):
    """The four metrics judged: the grid's latency ratio (wait / run time taken, "taken") or
    Hops' (wait / expected run time, "expected") as the fourth."""
    return METRICS[:3] + [EXPECTED_LR] if latency_ratio == "expected" else list(METRICS)


def csv_list(text, kind=str):
    items = [t for t in text.replace(" ", ",").split(",") if t]
    try:
        return [kind(t) for t in items]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="eval_grid.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="eval_grid", help="output folder (default: eval_grid)")
    ap.add_argument("--policies", type=csv_list,
                    help="policies, comma-separated (default: every registered one)")
    ap.add_argument("--rates", type=lambda t: csv_list(t, float),
                    help="loads in jobs/h on gavel_108 (default: 1,2,3,4,5,6)")
    ap.add_argument("--seeds", type=lambda t: csv_list(t, int),
                    help="trace seeds (default: 181,182,183)")
    ap.add_argument("--clusters", type=csv_list, default=list(CLUSTERS),
                    help="of " + ",".join(CLUSTERS) + " (default: both)")
    ap.add_argument("--kinds", type=csv_list, default=list(KINDS),
                    help="of " + ",".join(KINDS) + " (default: both)")
    ap.add_argument("--jobs", type=int, default=1000, help="jobs per trace (default: 1000)")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1, dest="parallel",
                    help="cells simulated at once, per sweep (default: cores)")
    ap.add_argument("--chosen", default="tessera",
                    help="the policy compared with the best (default: tessera)")
    ap.add_argument("--summarise-only", action="store_true",
                    help="run nothing: summarise OUT's existing sweeps (every policy, load and "
                         "seed in them unless --policies/--rates/--seeds narrow it)")
    ap.add_argument("--latency-ratio", choices=("taken", "expected"), default="taken",
                    help="the worst latency ratio judged: wait / run time taken (the "
                         "simulator's, default) or wait / expected run time (Hops'; cells "
                         "written before it was recorded leave their policy out); 'expected' "
                         "writes summary_expected.json/.md instead of summary.json/.md")
    ap.add_argument("--policy-arg", action="append", default=[], dest="policy_args",
                    metavar="K=V", help="policy option for every policy that has it "
                    "(repeatable; passed to `tessera sweep`)")
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "tessera"),
                    help="the tessera binary (default: build/tessera of this checkout)")
    a = ap.parse_args(argv)
    for name, given, known in (("--clusters", a.clusters, CLUSTERS), ("--kinds", a.kinds, KINDS)):
        bad = [g for g in given if g not in known]
        if bad or not given:
            ap.error(f"{name}: unknown or empty {bad} (valid: {', '.join(known)})")
    if a.jobs < 1 or a.parallel < 1:
        ap.error("--jobs and -j must be at least 1")
    a.metrics = metrics_for(a.latency_ratio)
    return a


def registered_policies(binary):
    out = subprocess.run([binary, "policies"], check=True, capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line and not line[0].isspace()]


def sweep_dir(out, cluster, kind):
    return os.path.join(out, f"{cluster}_{kind}")


def sweep_command(a, policies, cluster, kind):
    cfile, round_s, scale = CLUSTERS[cluster]
    rates = ",".join(f"{r * scale:.6g}" for r in a.rates)
    return ([a.tessera, "sweep", "--policies", ",".join(policies), "--rates", rates,
             "--seeds", ",".join(map(str, a.seeds)), "--jobs", str(a.jobs),
             "--round-lengths", str(round_s), "--cluster", os.path.join(ROOT, cfile),
             "--out", sweep_dir(a.out, cluster, kind), "-j", str(a.parallel),
             "--progress-interval", "60"] + KINDS[kind] +
            [x for kv in a.policy_args for x in ("--policy-arg", kv)])


def run_sweeps(a, policies):
    """Runs one sweep per (cluster, kind), output into OUT/eval_grid.log; returns failures."""
    log_path = os.path.join(a.out, "eval_grid.log")
    failures = []
    grid = [(c, k) for c in a.clusters for k in a.kinds]
    for i, (cluster, kind) in enumerate(grid, 1):
        cmd = sweep_command(a, policies, cluster, kind)
        cells = len(policies) * len(a.rates) * len(a.seeds)
        print(f"[{i}/{len(grid)}] {cluster} {kind}: {cells} cells -> "
              f"{sweep_dir(a.out, cluster, kind)}", flush=True)
        with open(log_path, "a") as log:
            log.write("\n$ " + " ".join(cmd) + "\n")
            log.flush()
            start = log.tell()
            t0 = time.time()
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        with open(log_path, errors="replace") as log:
            log.seek(start)
            said = [ln.rstrip() for ln in log if ln.startswith("tessera:")]
        for ln in said:
            print("    " + ln)
        print(f"[{i}/{len(grid)}] {cluster} {kind}: {'done' if rc == 0 else f'FAILED (exit {rc})'}"
              f" in {time.time() - t0:.0f} s", flush=True)
        if rc != 0:
            failures.append(f"{cluster} {kind}: exit {rc} (see {log_path})")
    return failures


def sweep_rows(path):
    """The rows of one sweep: every finished cell in its cells/ folder (each cell's JSON, so
    cells of earlier sweep commands into the same folder count too, e.g. one policy's cells
    added later), else its sweep.csv (the last command's cells)."""
    cells = os.path.join(os.path.dirname(path), "cells")
    if not os.path.isdir(cells):
        with open(path, newline="") as f:
            yield from csv.DictReader(f)
        return
    # the judged metrics may be absent from older cells: read_sweep names them unrecorded
    needed = ["policy", "rate_per_hour", "seed", "jobs", "finished"]
    for name in sorted(os.listdir(cells)):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(cells, name)) as f:
                cell = json.load(f)
        except (OSError, ValueError):
            continue  # a cell being written, or not a cell
        if isinstance(cell, dict) and all(k in cell for k in needed):
            yield {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in cell.items()}


def read_sweep(path, scale, metrics):
    """A sweep (sweep_rows) -> {load: {policy: {seed: row}}} with the metrics as floats; a
    metric left empty (not recorded when the cell ran) is named in the row's "unrecorded"."""
    grid = {}
    for row in sweep_rows(path):
        load = round(float(row["rate_per_hour"]) / scale, 3)
        blank = [m for m, _ in metrics if row.get(m) in (None, "", "None")]
        rec = {m: float(row[m]) for m, _ in metrics if m not in blank}
        rec["unrecorded"] = blank
        rec["ok"] = (row.get("complete", "true") == "true"
                     and row.get("finished") == row.get("jobs"))
        grid.setdefault(load, {}).setdefault(row["policy"], {})[int(row["seed"])] = rec
    return grid


def policy_means(by_policy, seeds, metrics):
    """Mean of each metric over `seeds` per policy; policies lacking a finished seed are
    returned apart with the reason."""
    means, left_out = {}, {}
    for pol, runs in sorted(by_policy.items()):
        missing = [s for s in seeds if s not in runs]
        unfinished = [s for s in seeds if s in runs and not runs[s]["ok"]]
        blank = sorted({m for s in seeds if s in runs for m in runs[s]["unrecorded"]})
        if missing or unfinished or blank:
            left_out[pol] = (f"seeds missing {missing}" if missing else "") + \
                            (f" seeds unfinished {unfinished}" if unfinished else "") + \
                            (f" {', '.join(blank)} not recorded" if blank else "")
            continue
        means[pol] = {m: sum(runs[s][m] for s in seeds) / len(seeds) for m, _ in metrics}
    return means, left_out


def ratio(value, best):
    if best > 0:
        return value / best
    return 1.0 if value == best else None  # None: the best is 0 and the chosen is not


def judge_cell(means, chosen, metrics=METRICS):
    """Per metric: the best policies, its value, the chosen's ratio and whether it is
    strictly best; and the cell's verdict."""
    out, strict, within = {}, 0, True
    for m, _ in metrics:
        best_value = min(v[m] for v in means.values())
        best = sorted(p for p, v in means.items() if v[m] == best_value)
        entry = {"best": best, "best_value": best_value}
        if chosen in means:
            mine = means[chosen][m]
            entry["chosen_value"] = mine
            entry["ratio"] = ratio(mine, best_value)
            entry["strictly_best"] = all(mine < v[m] for p, v in means.items() if p != chosen)
            strict += entry["strictly_best"]
            within = within and entry["ratio"] is not None and entry["ratio"] <= RATIO_LIMIT
        out[m] = entry
    present = chosen in means
    return out, {"chosen_present": present, "strictly_best_count": strict if present else 0,
                 "pass": present and within and strict >= MIN_STRICTLY_BEST}


def summarise_sweep(path, cluster, kind, a):
    """The cells of one sweep's CSV, narrowed to the asked policies, loads and seeds."""
    cells = []
    for load, by_policy in sorted(read_sweep(path, CLUSTERS[cluster][2], a.metrics).items()):
        if a.rates is not None and not any(abs(load - r) < 1e-6 for r in a.rates):
            continue
        if a.policies is not None:
            by_policy = {p: v for p, v in by_policy.items() if p in a.policies}
        seeds = sorted(a.seeds if a.seeds is not None
                       else {s for runs in by_policy.values() for s in runs})
        means, left_out = policy_means(by_policy, seeds, a.metrics)
        if not means:
            continue
        metrics, verdict = judge_cell(means, a.chosen, a.metrics)
        cells.append(dict(cluster=cluster, kind=kind, load=load,
                          rate_per_hour=load * CLUSTERS[cluster][2], seeds=seeds,
                          policies=means, left_out=left_out, metrics=metrics, **verdict))
    return cells


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.3f}"


def table_row(c, metrics):
    row = [f"{c['load']:g}"]
    for m, _ in metrics:
        e = c["metrics"][m]
        mine = fmt_ratio(e.get("ratio")) if c["chosen_present"] else "absent"
        star = "*" if e.get("strictly_best") else ""
        row.append(f"{'='.join(e['best'])} {e['best_value']:.3g}, {mine}{star}")
    row.append("pass" if c["pass"] else "fail")
    return "| " + " | ".join(row) + " |"


def markdown(cells, chosen, metrics):
    lines = [f"# Evaluation grid: `{chosen}` against the best policy per metric", "",
             f"Per cell: each metric's best policy (mean over seeds) and `{chosen}`'s ratio to it "
             f"(* = `{chosen}` strictly best). Pass: every ratio <= {RATIO_LIMIT} and strictly "
             f"best on >= {MIN_STRICTLY_BEST} metrics. Lower is better for all four."]
    groups = {}
    for c in cells:
        groups.setdefault((c["cluster"], c["kind"]), []).append(c)
    head = "| load (jobs/h) | " + " | ".join(f"{lab}: best, value, ratio" for _, lab in metrics) \
        + " | pass |"
    for (cluster, kind), group in groups.items():
        seeds = ",".join(map(str, group[0]["seeds"]))
        lines += ["", f"## {cluster}, {kind}-GPU jobs (seeds {seeds})", "", head,
                  "|" + "---|" * (len(metrics) + 2)]
        lines += [table_row(c, metrics) for c in group]
        notes = [f"- load {c['load']:g}: {p} left out ({why.strip()})"
                 for c in group for p, why in c["left_out"].items()]
        lines += [""] + notes if notes else []
    return "\n".join(lines) + "\n"


def summarise(a):
    cells, missing = [], []
    for cluster in a.clusters:
        for kind in a.kinds:
            path = os.path.join(sweep_dir(a.out, cluster, kind), "sweep.csv")
            if os.path.isfile(path) or os.path.isdir(os.path.join(os.path.dirname(path), "cells")):
                cells += summarise_sweep(path, cluster, kind, a)
            else:
                missing.append(path)
    for path in missing:
        print(f"eval_grid: no results in {path}", file=sys.stderr)
    passed = sum(c["pass"] for c in cells)
    seen = sorted({p for c in cells for p in c["policies"]})
    absent = bool(cells) and not any(c["chosen_present"] for c in cells)
    summary = dict(chosen=a.chosen, chosen_absent=absent, policies=seen,
                   metrics=[m for m, _ in a.metrics], ratio_limit=RATIO_LIMIT,
                   min_strictly_best=MIN_STRICTLY_BEST, cells=cells, passed=passed,
                   total=len(cells))
    stem = "summary_expected" if a.latency_ratio == "expected" else "summary"
    with open(os.path.join(a.out, stem + ".json"), "w") as f:
        json.dump(summary, f, indent=1)
    text = markdown(cells, a.chosen, a.metrics)
    with open(os.path.join(a.out, stem + ".md"), "w") as f:
        f.write(text)
    print(text)
    if absent or any(not c["chosen_present"] for c in cells):
        where = "every cell" if absent else "some cells"
        print(f"eval_grid: the chosen policy '{a.chosen}' is absent from the results of {where} "
              f"(policies there: {', '.join(seen)}); its cells fail, ratios n/a")
    print(f"cells passed: {passed} / {len(cells)}")
    return cells


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    failures = []
    if not a.summarise_only:
        if not os.access(a.tessera, os.X_OK):
            print(f"eval_grid: {a.tessera}: no such binary (build it, or give --tessera)",
                  file=sys.stderr)
            return 2
        known = registered_policies(a.tessera)
        a.policies = a.policies or known
        a.rates = a.rates or [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        a.seeds = a.seeds or [181, 182, 183]
        unknown = [p for p in a.policies if p not in known]
        if unknown:
            print(f"eval_grid: unknown policies {unknown} (registered: {', '.join(known)})",
                  file=sys.stderr)
            return 2
        if a.chosen not in a.policies:
            if a.chosen in known:
                print(f"eval_grid: adding the chosen policy '{a.chosen}' to --policies")
                a.policies.append(a.chosen)
            else:
                print(f"eval_grid: the chosen policy '{a.chosen}' is not registered in "
                      f"{a.tessera}; the grid runs without it and reports no ratios")
        failures = run_sweeps(a, a.policies)
    summarise(a)
    for f in failures:
        print(f"eval_grid: sweep failed: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
