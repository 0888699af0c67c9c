#!/usr/bin/env python3
"""Figures of tessera experiments (run by `tessera plot`; needs python3-matplotlib).

usage: plot.py KIND INPUT... --out PREFIX [--format png,svg] [--title TEXT] [options]
  jct-rate SWEEP.csv [--metric COLUMN] [--reference CSV]
      mean of COLUMN (default avg_jct_window_h) over seeds against rate_per_hour, one line
      per policy, a band from the seeds' min to max; --reference adds published points
      (CSV columns: policy,rate_per_hour,value,label).
  cdf JOBS.csv... [--window A-B] [--labels L1,L2,...]
      CDF of jct_s (hours) of the finished jobs of each per-job CSV.
  policies SWEEP.csv [--metric COLUMN] [--scale auto|linear|log]
      a sweep over given traces (`sweep --traces`): one panel per workload set (the trace
      stem without its trailing "-N"), one bar per policy, the mean of COLUMN (default
      avg_jct_h) over the set's traces with a min..max whisker. A policy with a cell that
      did not finish every job is drawn hatched, marked "(unfinished)" and listed after the
      others, as scripts/sweep_table.py lists it: its figure counts only the jobs that
      finished. --scale (default auto) picks the value axis: auto takes a log axis when a
      panel's values are all positive and its means span more than 30 times, so the
      policies near the best stay readable beside capped ones.
  utilisation TIMELINE...
      busy GPUs of each GPU type over time, as a share of the type's GPUs.
  gantt TIMELINE...
      one row per server, one bar per job per round (height: its GPUs there); several
      timelines side by side, on one job colour scale.
Writes PREFIX.<format> for each format. Exits 2 on bad input, naming the file and line."""

import argparse
import csv
import json
import os
import sys

import matplotlib

from sweep_table import finished_first, workload_set

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


class BadInput(Exception):
    pass


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise BadInput(f"{path}: no rows")
    return rows


def number(path, line, row, field):
    try:
        return float(row[field])
    except (KeyError, TypeError, ValueError):
        raise BadInput(f"{path}:{line}: field '{field}': missing or not a number")


def save(fig, args):
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    for fmt in args.format.split(","):
        fig.savefig(f"{args.out}.{fmt}", format=fmt, bbox_inches="tight", dpi=120)
        print(f"wrote {args.out}.{fmt}")
    plt.close(fig)


def plot_jct_rate(args):
    path = args.inputs[0]
    series = {}  # policy -> rate -> [values]
    for i, row in enumerate(read_csv(path), start=2):
        rate = number(path, i, row, "rate_per_hour")
        series.setdefault(row.get("policy", "?"), {}).setdefault(rate, []).append(
            number(path, i, row, args.metric))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for policy, by_rate in sorted(series.items()):
        rates = sorted(by_rate)
        mean = [sum(by_rate[r]) / len(by_rate[r]) for r in rates]
        line, = ax.plot(rates, mean, marker="o", ms=3, label=f"{policy} (mean)")
        ax.fill_between(rates, [min(by_rate[r]) for r in rates],
                        [max(by_rate[r]) for r in rates], color=line.get_color(), alpha=0.2)
    if args.reference:
        for i, row in enumerate(read_csv(args.reference), start=2):
            ax.plot(number(args.reference, i, row, "rate_per_hour"),
                    number(args.reference, i, row, "value"), "x", ms=7, mew=2,
                    color="black" if "aware" not in row.get("label", "") else "tab:red",
                    label=row.get("label") if row.get("label") else None)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), fontsize=8)
    else:
        ax.legend(fontsize=8)
    ax.set_xlabel("input job rate (jobs/hour)")
    ax.set_ylabel(args.metric.replace("_h", " (hours)"))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(args.title or "average JCT vs input rate (band: min..max over seeds)",
                 fontsize=10)
    save(fig, args)


LOG_SPAN = 30.0  # policies: auto picks a log axis when max / min of a panel's means exceeds this


def use_log(means, lowest, scale):
    """Whether a panel's axis is logarithmic: --scale log or linear says so; auto when every
    value (lowest: the smallest, whiskers included) is positive and the means span more than
    LOG_SPAN times."""
    if scale != "auto":
        return scale == "log"
    return lowest > 0 and max(means) > LOG_SPAN * min(means)


def draw_policy_panel(ax, group, by_policy, unfinished, metric, scale):
    mean_of = {p: sum(v) / len(v) for p, v in by_policy.items()}
    order = finished_first(mean_of, unfinished)
    means = [mean_of[p] for p in order]
    lowest = min(min(by_policy[p]) for p in order)
    log = use_log(means, lowest, scale)
    if log and lowest <= 0:
        raise BadInput(f"--scale log: set '{group}' has a value <= 0 in '{metric}'")
    lo = [m - min(by_policy[p]) for m, p in zip(means, order)]
    hi = [max(by_policy[p]) - m for m, p in zip(means, order)]
    capped = [p in unfinished for p in order]
    ax.barh(range(len(order)), means, xerr=[lo, hi], alpha=0.7, error_kw={"lw": 0.8},
            color=["tab:gray" if c else "tab:blue" for c in capped])
    for bar, c in zip(ax.patches, capped):
        if c:
            bar.set_hatch("//")
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([p + (" (unfinished)" if c else "") for p, c in zip(order, capped)],
                       fontsize=7)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    label = metric.replace("_h", " (hours)") + (", log scale" if log else "")
    ax.set_xlabel(label, fontsize=8)
    ax.set_title(f"{group} ({len(by_policy[order[0]])} traces)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)


def plot_policies(args):
    path = args.inputs[0]
    metric = "avg_jct_h" if args.metric == "avg_jct_window_h" else args.metric
    sets, unfinished = {}, {}  # set -> policy -> [values]; set -> policies with a capped cell
    for i, row in enumerate(read_csv(path), start=2):
        if not row.get("trace"):
            raise BadInput(f"{path}:{i}: field 'trace': empty (not a sweep over --traces)")
        group, policy = workload_set(row["trace"]), row.get("policy", "?")
        sets.setdefault(group, {}).setdefault(policy, []).append(number(path, i, row, metric))
        if row.get("complete") == "false":
            unfinished.setdefault(group, set()).add(policy)
    most = max(len(v) for v in sets.values())
    fig, axes = plt.subplots(1, len(sets), figsize=(4.4 * len(sets), 0.26 * most + 1.4),
                             squeeze=False)
    for ax, (group, by_policy) in zip(axes[0], sorted(sets.items())):
        draw_policy_panel(ax, group, by_policy, unfinished.get(group, set()), metric,
                          args.scale)
    if args.title:
        fig.suptitle(args.title, fontsize=10)
    fig.tight_layout()
    save(fig, args)


def parse_window(text):
    try:
        a, b = (int(x) for x in text.split("-"))
        return a, b
    except ValueError:
        raise BadInput(f"--window '{text}': expected FIRST-LAST job ids")


def plot_cdf(args):
    labels = args.labels.split(",") if args.labels else []
    window = parse_window(args.window) if args.window else None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for k, path in enumerate(args.inputs):
        jcts = []
        for i, row in enumerate(read_csv(path), start=2):
            jid, jct = number(path, i, row, "job_id"), number(path, i, row, "jct_s")
            if jct < 0 or (window and not window[0] <= jid <= window[1]):
                continue
            jcts.append(jct / 3600)
        if not jcts:
            raise BadInput(f"{path}: no finished job" + (" in the window" if window else ""))
        jcts.sort()
        ys = [(i + 1) / len(jcts) for i in range(len(jcts))]
        name = labels[k] if k < len(labels) else os.path.splitext(os.path.basename(path))[0]
        ax.step(jcts, ys, where="post", label=f"{name} (n={len(jcts)})")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(args.title or "JCT CDF", fontsize=10)
    save(fig, args)


def read_timeline(path):
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines:
        raise BadInput(f"{path}: empty timeline")
    try:
        head = json.loads(lines[0])
        head["servers"], head["types"]
    except (ValueError, KeyError, TypeError):
        raise BadInput(f"{path}:1: not a timeline header (field 'servers' or 'types')")
    rounds = []
    for i, text in enumerate(lines[1:], start=2):
        try:
            r = json.loads(text)
            r["start"], r["length"], r["placements"]
        except (ValueError, KeyError, TypeError):
            raise BadInput(f"{path}:{i}: not a round (fields 'start', 'length', 'placements')")
        rounds.append(r)
    return head, rounds


def time_scale(rounds):
    end = max((r["start"] + r["length"] for r in rounds), default=0)
    return (3600.0, "hours") if end > 3 * 3600 else (1.0, "seconds")


def title_of(head, path):
    return f"{head.get('source', '?')}: {head.get('policy', '?')} ({os.path.basename(path)})"


def plot_utilisation(args):
    timelines = [(p, *read_timeline(p)) for p in args.inputs]
    fig, axes = plt.subplots(1, len(timelines), figsize=(6.4 * len(timelines), 4), squeeze=False)
    for ax, (path, head, rounds) in zip(axes[0], timelines):
        type_of = {s["name"]: s["type"] for s in head["servers"]}
        total = {t["name"]: t["gpus"] for t in head["types"]}
        scale, unit = time_scale(rounds)
        for t in total:
            xs, ys = [], []
            for k, r in enumerate(rounds):
                busy = sum(p["gpus"] for p in r["placements"] if type_of.get(p["server"]) == t)
                xs.append(r["start"] / scale)
                ys.append(busy / max(total[t], 1))
                end = r["start"] + r["length"]
                if k + 1 == len(rounds) or rounds[k + 1]["start"] > end + 1e-9:
                    xs.append(end / scale)  # no round planned until the next: nothing ran
                    ys.append(0)
            ax.step(xs, ys, where="post", label=f"{t} ({total[t]} GPUs)")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel(f"time ({unit})")
        ax.set_ylabel("busy share of the type's GPUs")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(title_of(head, path), fontsize=9)
    if args.title:
        fig.suptitle(args.title, fontsize=10, y=1.04)
    save(fig, args)


def gantt_bars(head, rounds):
    """Bars {(server row, y, height, job): [(start, length), ...]}: a job's consecutive rounds
    in the same place on a server become one bar, so long runs draw quickly."""
    gpus = {s["name"]: s["gpus"] for s in head["servers"]}
    row = {s["name"]: i for i, s in enumerate(head["servers"])}
    bars = {}
    for r in rounds:
        offset = {}  # GPUs already stacked on each server this round
        for p in sorted(r["placements"], key=lambda p: (p["server"], p["job"], p["copy"])):
            name = p["server"]
            if name not in row:
                continue
            y = row[name] + offset.get(name, 0) / gpus[name] * 0.8 - 0.4
            offset[name] = offset.get(name, 0) + p["gpus"]
            spans = bars.setdefault((row[name], y, p["gpus"] / gpus[name] * 0.8, p["job"]), [])
            if spans and abs(spans[-1][0] + spans[-1][1] - r["start"]) < 1e-6 * (1 + r["start"]):
                spans[-1] = (spans[-1][0], spans[-1][1] + r["length"])
            else:
                spans.append((r["start"], r["length"]))
    return bars


def draw_gantt(ax, head, rounds, colour):
    servers = head["servers"]
    scale, unit = time_scale(rounds)
    bars = gantt_bars(head, rounds)
    label = sum(len(v) for v in bars.values()) <= 150
    for (_, y, h, job), spans in bars.items():
        ax.broken_barh([(a / scale, w / scale) for a, w in spans], (y, h), facecolors=colour(job),
                       edgecolor="white", linewidth=0.3)
        for a, w in spans if label else []:
            ax.text((a + w / 2) / scale, y + h / 2, str(job), ha="center", va="center",
                    fontsize=6)
    ax.set_yticks(range(len(servers)))
    ax.set_yticklabels([f"{s['name']} ({s['type']} x{s['gpus']})" for s in servers], fontsize=7)
    ax.set_ylim(-0.6, len(servers) - 0.4)
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    ax.grid(axis="x", alpha=0.3)


def plot_gantt(args):
    timelines = [(p, *read_timeline(p)) for p in args.inputs]
    jobs = sorted({p["job"] for _, _, rounds in timelines for r in rounds for p in r["placements"]})
    cmap = plt.get_cmap("tab20")
    index = {j: i for i, j in enumerate(jobs)}

    def colour(job):
        return cmap(index[job] % 20)

    height = max(2.5, 0.3 * max(len(h["servers"]) for _, h, _ in timelines) + 1.5)
    fig, axes = plt.subplots(1, len(timelines), figsize=(6.4 * len(timelines), height),
                             squeeze=False)
    for ax, (path, head, rounds) in zip(axes[0], timelines):
        draw_gantt(ax, head, rounds, colour)
        ax.set_title(title_of(head, path), fontsize=9)
    if args.title:
        fig.suptitle(args.title, fontsize=10, y=1.04)
    save(fig, args)


def main(argv):
    ap = argparse.ArgumentParser(prog="tessera plot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["jct-rate", "cdf", "policies", "utilisation", "gantt"])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--out", required=True, help="output path without extension")
    ap.add_argument("--format", default="png,svg", help="comma-separated: png, svg, pdf")
    ap.add_argument("--title")
    ap.add_argument("--metric", default="avg_jct_window_h",
                    help="jct-rate, policies: the CSV column (policies: avg_jct_h by default)")
    ap.add_argument("--reference", help="jct-rate: published points to overlay (CSV)")
    ap.add_argument("--window", help="cdf: job-id window A-B")
    ap.add_argument("--labels", help="cdf: comma-separated curve labels")
    ap.add_argument("--scale", choices=["auto", "linear", "log"], default="auto",
                    help="policies: the value axis (auto: log when a panel spans more than "
                         f"{LOG_SPAN:g}x)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    for fmt in args.format.split(","):
        if fmt not in ("png", "svg", "pdf"):
            print(f"tessera plot: --format: unknown format '{fmt}' (png, svg, pdf)",
                  file=sys.stderr)
            return 2
    try:
        {"jct-rate": plot_jct_rate, "cdf": plot_cdf, "policies": plot_policies,
         "utilisation": plot_utilisation,
         "gantt": plot_gantt}[args.kind](args)
    except BadInput as e:
        print(f"tessera plot: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"tessera plot: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
