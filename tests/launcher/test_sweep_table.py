#!/usr/bin/env python3
"""scripts/sweep_table.py on a hand-written sweep folder (two workload sets, three policies,
one cell stopped at the cap): each set's block holds each policy's means over its cells,
the nearest-rank p99 JCT, summed GPU-hours and restarts, the policies that finished every
job first by average JCT, and the stopped one last with its JCT and makespan in brackets.

usage: /usr/bin/python3 tests/launcher/test_sweep_table.py"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "sweep_table.py")


def write_cell(d, policy, trace, jcts_h, complete, makespan_h):
    name = f"{policy}_{trace}_L60"
    with open(os.path.join(d, "cells", name + ".jobs.csv"), "w") as f:
        f.write("id,jct_s,gpu_seconds,restarts\n")
        for i, h in enumerate(jcts_h):
            f.write(f"{i},{h * 3600 if h >= 0 else -1},{3600 * (i + 1)},{i}\n")
    done = [h for h in jcts_h if h >= 0]
    return {"cell": name, "trace": trace, "policy": policy, "complete": complete,
            "avg_jct_h": sum(done) / len(done), "makespan_h": makespan_h, "ftf_max": 2.0,
            "lr_max": 3.0, "cell_seconds": 0.5}


def block(text, group):
    """The table rows of one set's block, split into cells."""
    lines = text.split(f"\n{group}:")[1].split("\n\n")[1].strip().splitlines()[2:]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def main():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "cells"))
        cells = [
            write_cell(d, "a", "philly-1", [1, 2, 3], True, 5),
            write_cell(d, "a", "philly-2", [3, 4, 5], True, 7),
            write_cell(d, "b", "philly-1", [1, 1, 1], True, 4),
            write_cell(d, "b", "philly-2", [1, 1, 2], True, 4),
            write_cell(d, "c", "philly-1", [0.5, -1, 0.5], False, 2),
            write_cell(d, "c", "philly-2", [0.5, 0.5, 0.5], True, 2),
            write_cell(d, "a", "saturn-1", [2, 2, 2], True, 3),
        ]
        json.dump({"cells": cells}, open(os.path.join(d, "sweep.json"), "w"))
        r = subprocess.run([sys.executable, SCRIPT, d], capture_output=True, text=True)
        assert r.returncode == 0, (r.stdout, r.stderr)
        philly = block(r.stdout, "philly")
        # b (1.17 h) before a (3.00 h); c, with a stopped cell, last although lowest.
        assert [row[0] for row in philly] == ["b [2]", "a [2]", "c [2]"], philly
        b, a, c = philly
        assert b[1:4] == ["1.17", "1.50", "4.00"], b  # p99 of [1,1,1] 1, of [1,1,2] 2
        assert a[1:4] == ["3.00", "4.00", "6.00"], a
        assert a[6:9] == ["6", "3", "0"], a  # GPU-h 1+2+3 per cell, restarts 0+1+2
        assert c[1:4] == ["(0.50)", "(0.50)", "(2.00)"], c
        assert c[8] == "1", c
        saturn = block(r.stdout, "saturn")
        assert [row[0] for row in saturn] == ["a [1]"], saturn
        only = subprocess.run([sys.executable, SCRIPT, d, "--sets", "saturn"],
                              capture_output=True, text=True)
        assert only.returncode == 0 and "philly" not in only.stdout, only.stdout
    print("sweep_table: ok")


if __name__ == "__main__":
    main()
