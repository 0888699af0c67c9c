#!/usr/bin/env python3
"""`tessera sweep` killed half way (SIGKILL, no chance to clean up) and run again gives the
same sweep.csv as a sweep that was never interrupted, and the rerun runs only the cells left.

usage: /usr/bin/python3 tests/launcher/test_sweep_kill.py TESSERA_BINARY"""

import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from timescale import scaled  # noqa: E402


def sweep(binary, out):
    return [binary, "sweep", "--policies", "fifo,max_min_fairness_perf", "--rates", "3,6,9",
            "--seeds", "1,2", "--jobs", "60", "--window", "20-39", "--out", out, "-j", "1",
            "--quiet"]


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        clean, cut = f"{d}/clean", f"{d}/cut"
        subprocess.run(sweep(binary, clean), check=True)
        want = open(f"{clean}/sweep.csv").read()
        cells = len(want.splitlines()) - 1
        assert cells == 12, want
        p = subprocess.Popen(sweep(binary, cut))
        deadline = time.time() + scaled(30)
        done = 0
        while time.time() < deadline and p.poll() is None:
            done = len([f for f in os.listdir(f"{cut}/cells")] if os.path.isdir(f"{cut}/cells")
                       else [])
            if done >= 3:
                break
            time.sleep(0.01)
        assert p.poll() is None, "the sweep ended before it could be killed half way"
        p.send_signal(signal.SIGKILL)
        p.wait()
        finished = [f for f in os.listdir(f"{cut}/cells") if f.endswith(".json")]
        assert 0 < len(finished) < cells, finished
        r = subprocess.run(sweep(binary, cut)[:-1], stderr=subprocess.PIPE, text=True, check=True)
        assert f"{cells - len(finished)} cells run, {len(finished)} found finished" in r.stderr, \
            r.stderr
        got = open(f"{cut}/sweep.csv").read()
        # The commands name each sweep's own directory: compare with it made alike.
        assert got.replace(cut, clean) == want, (got, want)
        leftovers = [f for f in os.listdir(f"{cut}/cells") if ".tmp." in f]
        assert not leftovers, leftovers  # the rerun removes what the kill left half-written
        print(f"killed after {len(finished)} of {cells} cells; rerun ran the rest; same CSV")
    return 0


if __name__ == "__main__":
    sys.exit(main())
